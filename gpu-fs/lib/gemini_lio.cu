/* libgemini's lio backend, host side: one LightIOV session (softssd) per context, its volume,
 * DMA window and queue pairs mapped for the GPU, and the check that the volume holds the file. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime.h>

extern "C" { /* the client library is C */
#include "lio_client.h"
}

#include "gemini_backend.h"
#include "gvdk.h"

static_assert(GM_LIO_CHUNK == LIO_MDTS_BYTES, "one staging slot is one largest command");
static_assert(GM_LIO_PAGE == LIO_PAGE_SIZE, "PRP pages are the queue pair's pages");
static_assert(GEMINI_LIO_MAX_QP + 1 <= LIO_DRV_MAX_QP, "GPU queue pairs and the host's");

int gm_lio_config_check(const struct gemini_config *k)
{
	if (!k->lio_ssd || !*k->lio_ssd || !k->lio_volume || !*k->lio_volume) {
		fprintf(stderr, "gemini: lio backend: lio_ssd and lio_volume must name the SSD "
				"and the volume that holds the file\n");
		return -EINVAL;
	}
	if (strlen(k->lio_volume) >= LIO_NAME_MAX) {
		fprintf(stderr, "gemini: lio volume name %s longer than %d bytes\n", k->lio_volume,
			LIO_NAME_MAX - 1);
		return -EINVAL;
	}
	/* depth 4 at least: rounds of depth - 2 commands (gm_lio_batch_run) */
	if (!k->nqueues || k->nqueues > GEMINI_LIO_MAX_QP || k->qdepth < 4 ||
	    k->qdepth > LIO_MAX_QDEPTH) {
		fprintf(stderr, "gemini: lio backend: %u queue pairs (1..%d) of depth %u (4..%u)\n",
			k->nqueues, GEMINI_LIO_MAX_QP, k->qdepth, LIO_MAX_QDEPTH);
		return -EINVAL;
	}
	return 0;
}

/*
 * The GVDK file imported into a volume (`lvmm ssd vol import`) lies there byte for byte, so data
 * block b is at volume byte data_offset + b * block_size whatever the host file system's extents
 * were: the L2 entries the GPU translates through become those volume offsets (the file's own
 * map, built from FIEMAP, addresses the host disk, which the backend never sees).
 */
void gm_lio_map(struct gvdk_map *m)
{
	const struct gvdk_header *h = &m->hdr;

	for (uint64_t b = 0; b < h->nblocks; b++) {
		uint64_t t = b / h->per_l2;
		uint64_t i = (m->l1[t] - h->l2_offset) / 8 + b % h->per_l2;

		m->l2[i] = h->data_offset + b * h->block_size;
	}
}

/* Device address of a host pointer p inside [host, ...) registered at dev. */
static void *gm_lio_dev(uint8_t *dev, const uint8_t *host, const void *p)
{
	return dev + ((const uint8_t *)p - host);
}

int gm_lio_start(struct gemini_ctx *c)
{
	const struct gemini_config *k = &c->cfg;
	const unsigned nq = k->nqueues;
	struct lio_vol_attach a;
	struct lio_identify id;
	struct lio_drv_opts o;
	struct gm_lioq *q;
	struct lio_drv *d;
	char err[256] = "";
	cudaError_t e;
	int r;

	gm_lio_stop(c); /* what an earlier, failed set-up left */
	c->lio_fd = -1;
	c->nthreads = 0;
	r = lio_client_connect(&c->lio, k->lio_ssd, "gpu-fs", &id, err, sizeof(err));
	if (r)
		return gm_err(c, r, "gemini: lio ssd %s: %s", k->lio_ssd, err);
	if (!(id.flags & LIO_ID_DB_POLL))
		return gm_err(
		    c, -EOPNOTSUPP,
		    "gemini: lio ssd %s does not poll doorbell pages (flags %#x): the GPU "
		    "cannot ring an eventfd",
		    k->lio_ssd, id.flags);
	memset(&a, 0, sizeof(a));
	snprintf(a.name, sizeof(a.name), "%s", k->lio_volume);
	r = lio_client_vol_attach(c->lio, &a);
	if (r)
		return gm_err(c, r, "gemini: lio ssd %s: attaching volume %s: %s", k->lio_ssd,
			      k->lio_volume, lio_client_error(c->lio));
	c->lio_vol_id = a.vol_id;
	c->lio_vol_bytes = a.lba_count << id.lba_shift;
	c->lio_lba_shift = id.lba_shift;
	memset(&o, 0, sizeof(o));
	o.vol_id = a.vol_id;
	o.lba_start = a.lba_start;
	o.lba_count = a.lba_count;
	o.lba_shift = id.lba_shift;
	o.mode =
	    LIGHTIOV_MODE_ISOLATED; /* every GPU command checked by the daemon (lio_sqe_check) */
	o.qp_flags = LIO_QP_SQ_QMEM | LIO_QP_CQ_QMEM | LIO_QP_DB_POLL;
	o.nr_qp = nq + 1; /* the last one is the host's (the volume check at gemini_open) */
	o.depth = k->qdepth;
	/* lio_drv's PRP pages (depth per pair), then per GPU pair staging and PRP-list pages, then
	 * the host's bounce */
	o.mem_bytes = (uint64_t)(nq + 1) * k->qdepth * LIO_PAGE_SIZE +
		      (uint64_t)nq * GM_LIO_INFLIGHT * (GM_LIO_CHUNK + GM_LIO_PAGE) + GM_LIO_CHUNK;
	r = lio_drv_open(&c->liodrv, c->lio, &o, err, sizeof(err));
	if (r)
		return gm_err(c, r, "gemini: lio ssd %s volume %s: %s", k->lio_ssd, k->lio_volume,
			      err);
	d = c->liodrv;
	q = (struct gm_lioq *)calloc(nq, sizeof(*q));
	if (!q)
		return gm_err(c, -ENOMEM, "gemini: out of memory for %u queue pairs", nq);
	e = cudaHostRegister(d->mem, d->mem_bytes, cudaHostRegisterMapped);
	if (!e) {
		c->lio_regs = 1;
		e = cudaHostGetDevicePointer((void **)&c->lio_mem_dev, d->mem, 0);
	}
	if (!e) {
		e = cudaHostRegister(d->qmem, d->qmem_bytes, cudaHostRegisterMapped);
		if (!e)
			c->lio_regs = 2;
	}
	if (!e)
		e = cudaHostGetDevicePointer((void **)&c->lio_qmem_dev, d->qmem, 0);
	if (e) {
		free(q);
		return gm_err(
		    c, -EIO,
		    "gemini: registering the lio DMA window (%llu bytes) and queue memory "
		    "(%llu bytes) with CUDA: %s",
		    (unsigned long long)d->mem_bytes, (unsigned long long)d->qmem_bytes,
		    cudaGetErrorString(e));
	}
	for (unsigned i = 0; i < nq; i++) {
		const struct lio_drv_qp *p = &d->qp[i];

		q[i].sq = (struct nvme_sqe *)gm_lio_dev(c->lio_qmem_dev, d->qmem, p->sq);
		q[i].cq =
		    (struct nvme_cqe *)gm_lio_dev(c->lio_qmem_dev, d->qmem, (const void *)p->cq);
		q[i].sq_db =
		    (uint32_t *)gm_lio_dev(c->lio_qmem_dev, d->qmem, (const void *)p->sq_db);
		q[i].cq_db =
		    (uint32_t *)gm_lio_dev(c->lio_qmem_dev, d->qmem, (const void *)p->cq_db);
		q[i].stage_gpa = lio_drv_alloc(d, (uint64_t)GM_LIO_INFLIGHT * GM_LIO_CHUNK);
		q[i].prp_gpa = lio_drv_alloc(d, (uint64_t)GM_LIO_INFLIGHT * GM_LIO_PAGE);
		if (!q[i].stage_gpa || !q[i].prp_gpa) {
			free(q);
			return gm_err(c, -ENOMEM, "gemini: lio DMA window of %llu bytes too small",
				      (unsigned long long)d->mem_bytes);
		}
		q[i].stage =
		    (uint8_t *)gm_lio_dev(c->lio_mem_dev, d->mem, lio_drv_ptr(d, q[i].stage_gpa));
		q[i].prp =
		    (uint64_t *)gm_lio_dev(c->lio_mem_dev, d->mem, lio_drv_ptr(d, q[i].prp_gpa));
		q[i].depth = k->qdepth;
		/* slots (CIDs) in flight: below softssd's depth - 1 with one to spare */
		q[i].free_mask =
		    (1u << (k->qdepth - 2 < GM_LIO_INFLIGHT ? k->qdepth - 2 : GM_LIO_INFLIGHT)) - 1;
		q[i].phase = 1;
		q[i].lba_shift = id.lba_shift;
	}
	c->lio_bounce = lio_drv_alloc(d, GM_LIO_CHUNK);
	e = cudaMalloc((void **)&c->lioq_dev, nq * sizeof(*q));
	if (!e)
		e = cudaMemcpy(c->lioq_dev, q, nq * sizeof(*q), cudaMemcpyHostToDevice);
	free(q);
	if (!e) {
		c->hdev.lioq = c->lioq_dev;
		c->hdev.nlioq = nq;
		e = cudaMemcpy(c->ddev, &c->hdev, sizeof(c->hdev), cudaMemcpyHostToDevice);
	}
	if (e || !c->lio_bounce)
		return gm_err(c, -EIO, "gemini: publishing %u lio queue pairs: %s", nq,
			      e ? cudaGetErrorString(e) : "no room for the host bounce page");
	snprintf(c->ns_desc, sizeof(c->ns_desc),
		 "lio: softssd %s volume %s (%llu LBAs of %u bytes at LBA %llu), %u GPU queue "
		 "pairs of depth %u, isolated mode, doorbell pages polled",
		 k->lio_ssd, k->lio_volume, (unsigned long long)a.lba_count, 1u << id.lba_shift,
		 (unsigned long long)a.lba_start, nq, k->qdepth);
	return 0;
}

void gm_lio_stop(struct gemini_ctx *c)
{
	struct lio_drv *d = c->liodrv;

	/* the GPU must not touch the rings once they are gone */
	cudaDeviceSynchronize();
	if (d && c->lio_regs >= 1)
		cudaHostUnregister(d->mem);
	if (d && c->lio_regs >= 2)
		cudaHostUnregister(d->qmem);
	c->lio_regs = 0;
	if (c->lioq_dev)
		cudaFree(c->lioq_dev);
	c->lioq_dev = NULL;
	if (d)
		lio_drv_close(d);
	c->liodrv = NULL;
	if (c->lio)
		lio_client_close(c->lio); /* ends the session: the volume is detached */
	c->lio = NULL;
}

/*
 * The volume must hold this GVDK file: big enough, and its first LBAs read (by the host's queue
 * pair, before any GPU command reaches the file) equal to the file's header, whose crc covers
 * the geometry and the map. A volume imported from another file, or never imported, is refused.
 */
int gm_lio_open(struct gemini_ctx *c, int fd)
{
	struct gm_hfile *hf = &c->files[fd];
	struct lio_drv *d = c->liodrv;
	uint32_t lba = 1u << c->lio_lba_shift;
	uint32_t nlb = (GVDK_HEADER_SIZE + lba - 1) / lba;
	uint16_t st;

	if (c->lio_fd >= 0)
		return gm_err(
		    c, -EBUSY,
		    "gemini_open %s: the lio backend serves one file (volume %s holds %s)",
		    hf->path, c->cfg.lio_volume, c->files[c->lio_fd].path);
	if (hf->hdr.file_size > c->lio_vol_bytes)
		return gm_err(c, -EFBIG,
			      "gemini_open %s: %llu bytes do not fit volume %s (%llu bytes)",
			      hf->path, (unsigned long long)hf->hdr.file_size, c->cfg.lio_volume,
			      (unsigned long long)c->lio_vol_bytes);
	st = lio_drv_io(d, c->cfg.nqueues, NVME_CMD_READ, 0, nlb, c->lio_bounce);
	if (st)
		return gm_err(c, -EIO,
			      "gemini_open %s: reading volume %s's header: NVMe status %#x",
			      hf->path, c->cfg.lio_volume, st);
	if (memcmp(lio_drv_ptr(d, c->lio_bounce), &hf->hdr, sizeof(hf->hdr)))
		return gm_err(
		    c, -ESTALE,
		    "gemini_open %s: volume %s does not hold this file (import it: lvmm ssd vol "
		    "import %s %s %s)",
		    hf->path, c->cfg.lio_volume, c->cfg.lio_ssd, c->cfg.lio_volume, hf->path);
	c->lio_fd = fd;
	return 0;
}

void gm_lio_close(struct gemini_ctx *c, int fd)
{
	if (c->lio_fd == fd)
		c->lio_fd = -1;
}
