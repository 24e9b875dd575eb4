/* vNVMe NVM command set (Read, Write, Flush, Write Zeroes, Dataset Management): every command
 * goes through the shared checker (lio_sqe_check), whose segments become host iovecs here. */
#include <endian.h>
#include <stdlib.h>
#include <string.h>

#include "lightiov/check.h"
#include "nvme_int.h"

_Static_assert(NVME_CTRL_MAX_IOV >= LIO_CHECK_MAX_SEGS, "an iovec per checker segment");
_Static_assert(NVME_CTRL_MAX_XFER <= LIO_MDTS_BYTES, "MDTS within the checker's bound");
_Static_assert(GMEM_MAX_SLOTS <= LIO_MAX_REGIONS, "every RAM slot is a DMA-window region");

/* The controller as the checker sees it: the DMA window is guest RAM (never the CMB or MMIO),
 * the LBA window the whole namespace, SLBAs namespace-relative. */
struct io_view {
	struct lio_check_ctx ctx;
	struct lio_check_region r[GMEM_MAX_SLOTS];
};

static int io_read_prp(void *opaque, uint64_t gpa, uint64_t *out, unsigned n)
{
	const struct nvme_ctrl *c = opaque;
	unsigned i;

	if (gmem_read(c->gm, gpa, out, (uint64_t)n * sizeof(*out)))
		return -1;
	for (i = 0; i < n; i++)
		out[i] = le64toh(out[i]);
	return 0;
}

static void io_view_init(struct nvme_ctrl *c, struct io_view *v)
{
	unsigned i;

	memset(v, 0, sizeof(*v));
	for (i = 0; i < c->gm->nslots && i < GMEM_MAX_SLOTS; i++) {
		v->r[i].gpa = c->gm->slots[i].gpa;
		v->r[i].size = c->gm->slots[i].size;
	}
	v->ctx.regions = v->r;
	v->ctx.nr_regions = i;
	v->ctx.lba_start = 0;
	v->ctx.lba_count = c->p.size >> c->p.lba_shift;
	v->ctx.lba_shift = c->p.lba_shift;
	v->ctx.nsid = 1;
	v->ctx.mdts_bytes = NVME_CTRL_MAX_XFER;
	v->ctx.flags = LIO_CHECK_TRANSLATE;
	v->ctx.read_prp = io_read_prp;
	v->ctx.opaque = c;
}

/* Checked segments to host iovecs; host-contiguous neighbours share one. */
static uint16_t segs_to_iov(struct nvme_ctrl *c, const struct lio_seg *segs, unsigned nsegs,
			    struct iovec *iov, unsigned maxiov, unsigned *niov)
{
	unsigned i, n = 0;

	for (i = 0; i < nsegs; i++) {
		uint8_t *p = gmem_ptr(c->gm, segs[i].gpa, segs[i].len);

		if (!p)
			return NVME_GENERIC(NVME_SC_DATA_XFER_ERROR);
		if (n && (uint8_t *)iov[n - 1].iov_base + iov[n - 1].iov_len == p) {
			iov[n - 1].iov_len += segs[i].len;
			continue;
		}
		if (n >= maxiov)
			return NVME_GENERIC(NVME_SC_INVALID_FIELD);
		iov[n].iov_base = p;
		iov[n].iov_len = segs[i].len;
		n++;
	}
	*niov = n;
	return NVME_OK;
}

uint16_t nvme_prp_map(struct nvme_ctrl *c, uint64_t prp1, uint64_t prp2, uint64_t len,
		      struct iovec *iov, unsigned maxiov, unsigned *niov)
{
	struct lio_seg segs[LIO_CHECK_MAX_SEGS];
	struct io_view v;
	unsigned nsegs;
	uint16_t st;

	*niov = 0;
	io_view_init(c, &v);
	st = lio_prp_walk(&v.ctx, prp1, prp2, len, segs, LIO_CHECK_MAX_SEGS, &nsegs);
	if (st)
		return st;
	return segs_to_iov(c, segs, nsegs, iov, maxiov, niov);
}

uint16_t nvme_prp_copy(struct nvme_ctrl *c, uint64_t prp1, uint64_t prp2, void *buf, uint64_t len,
		       bool to_guest)
{
	struct iovec iov[NVME_CTRL_MAX_IOV];
	unsigned n, i;
	uint8_t *p = buf;
	uint16_t st = nvme_prp_map(c, prp1, prp2, len, iov, NVME_CTRL_MAX_IOV, &n);

	if (st)
		return st;
	for (i = 0; i < n; i++) {
		if (to_guest)
			memcpy(iov[i].iov_base, p, iov[i].iov_len);
		else
			memcpy(p, iov[i].iov_base, iov[i].iov_len);
		p += iov[i].iov_len;
	}
	return NVME_OK;
}

/* Deallocate: the range list the checker mapped, read once, checked and translated. */
static uint16_t io_dsm_ranges(struct nvme_ctrl *c, const struct io_view *v, const struct lio_io *io,
			      struct nvme_io_req *req)
{
	struct nvme_dsm_range r[NVME_CTRL_MAX_DSM_RANGES];
	unsigned nr = (unsigned)(io->bytes / sizeof(r[0])), i;
	uint8_t *p = (uint8_t *)r;
	uint16_t st;

	if (nr > NVME_CTRL_MAX_DSM_RANGES)
		return NVME_GENERIC(NVME_SC_INVALID_FIELD);
	for (i = 0; i < io->nsegs; i++) {
		if (gmem_read(c->gm, io->segs[i].gpa, p, io->segs[i].len))
			return NVME_GENERIC(NVME_SC_DATA_XFER_ERROR);
		p += io->segs[i].len;
	}
	for (i = 0; i < nr; i++) {
		r[i].cattr = le32toh(r[i].cattr);
		r[i].nlb = le32toh(r[i].nlb);
		r[i].slba = le64toh(r[i].slba);
	}
	st = lio_dsm_check(&v->ctx, r, nr);
	if (st)
		return st;
	req->ranges = calloc(nr, sizeof(*req->ranges));
	if (!req->ranges)
		return NVME_GENERIC(NVME_SC_INTERNAL);
	for (i = 0; i < nr; i++) {
		if (!r[i].nlb)
			continue;
		req->ranges[req->nranges].off = r[i].slba << c->p.lba_shift;
		req->ranges[req->nranges].len = (uint64_t)r[i].nlb << c->p.lba_shift;
		req->nranges++;
	}
	return NVME_OK;
}

/* Validates cmd and fills req; returns an NVMe status. */
static uint16_t io_prepare(struct nvme_ctrl *c, const struct nvme_sqe *cmd, struct nvme_io_req *req)
{
	struct io_view v;
	struct lio_io io;
	uint16_t st;

	io_view_init(c, &v);
	st = lio_sqe_check(&v.ctx, cmd, &io);
	if (st)
		return st;
	/* A write-protected namespace, not a read-only range of a shared SSD: its own status. */
	if (c->p.readonly && io.kind != LIO_IO_READ && io.kind != LIO_IO_FLUSH)
		return NVME_GENERIC(NVME_SC_NS_WRITE_PROTECTED);
	switch (io.kind) {
	case LIO_IO_READ:
	case LIO_IO_WRITE:
		req->op = io.kind == LIO_IO_READ ? NVME_IO_READ : NVME_IO_WRITE;
		/* volatile write cache off: every write is as durable as a FUA one */
		req->fua = io.fua || (io.kind == LIO_IO_WRITE && !c->feat_vwc);
		req->off = io.dev_lba << c->p.lba_shift;
		req->len = io.bytes;
		return segs_to_iov(c, io.segs, io.nsegs, req->iov, NVME_CTRL_MAX_IOV, &req->niov);
	case LIO_IO_FLUSH:
		req->op = NVME_IO_FLUSH;
		return NVME_OK;
	case LIO_IO_ZEROES:
		req->op = NVME_IO_ZEROES;
		req->off = io.dev_lba << c->p.lba_shift;
		req->len = io.bytes;
		return NVME_OK;
	case LIO_IO_DSM:
		req->op = NVME_IO_DISCARD;
		if (!(io.dsm_attr & NVME_DSM_AD))
			return NVME_OK; /* only hints: nothing to do */
		return io_dsm_ranges(c, &v, &io, req);
	}
	return NVME_GENERIC(NVME_SC_INVALID_OPCODE);
}

uint16_t nvme_io_exec(struct nvme_ctrl *c, struct nvme_sq *sq, const struct nvme_sqe *cmd)
{
	struct nvme_io_req *req = calloc(1, sizeof(*req));
	uint16_t st;

	if (!req)
		return NVME_GENERIC(NVME_SC_INTERNAL);
	st = io_prepare(c, cmd, req);
	if (st != NVME_OK || (req->op == NVME_IO_DISCARD && !req->nranges)) {
		free(req->ranges);
		free(req);
		return st;
	}
	req->ctrl = c;
	req->sqid = sq->qid;
	req->cid = cmd->cid;
	req->gen = c->gen;
	req->sqgen = sq->gen;
	switch (req->op) {
	case NVME_IO_READ:
		c->st.reads++;
		c->st.read_bytes += req->len;
		c->units_read += req->len >> NVME_LBA_SHIFT;
		break;
	case NVME_IO_WRITE:
		c->st.writes++;
		c->st.write_bytes += req->len;
		c->units_written += req->len >> NVME_LBA_SHIFT;
		break;
	case NVME_IO_FLUSH:
		c->st.flushes++;
		break;
	default:
		break;
	}
	sq->inflight++;
	c->inflight++;
	if (c->bops->submit(c->be, req) == 0)
		return NVME_NO_COMPLETE;
	sq->inflight--;
	c->inflight--;
	st = req->status;
	free(req->ranges);
	free(req);
	return st;
}

/* The memory backend: a plain buffer, synchronous. */
static int mem_submit(void *opaque, struct nvme_io_req *req)
{
	struct nvme_mem_backend *m = opaque;
	uint64_t off = req->off;
	unsigned i;

	req->status = NVME_OK;
	switch (req->op) {
	case NVME_IO_READ:
	case NVME_IO_WRITE:
		if (off > m->size || req->len > m->size - off) {
			req->status = NVME_GENERIC(NVME_SC_LBA_RANGE);
			break;
		}
		for (i = 0; i < req->niov; i++) {
			if (req->op == NVME_IO_READ)
				memcpy(req->iov[i].iov_base, m->data + off, req->iov[i].iov_len);
			else
				memcpy(m->data + off, req->iov[i].iov_base, req->iov[i].iov_len);
			off += req->iov[i].iov_len;
		}
		break;
	case NVME_IO_FLUSH:
		m->flushes++;
		break;
	case NVME_IO_ZEROES:
		if (off <= m->size && req->len <= m->size - off)
			memset(m->data + off, 0, req->len);
		break;
	case NVME_IO_DISCARD:
		for (i = 0; i < req->nranges; i++)
			if (req->ranges[i].off <= m->size &&
			    req->ranges[i].len <= m->size - req->ranges[i].off)
				memset(m->data + req->ranges[i].off, 0, req->ranges[i].len);
		break;
	}
	return 1;
}

const struct nvme_backend_ops nvme_mem_backend_ops = {
    .submit = mem_submit,
};
