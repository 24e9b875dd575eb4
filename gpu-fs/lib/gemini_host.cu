// libgemini host side: context and page-cache arena setup, gemini_open/gemini_close over validated
// GVDK files, the host controller threads that serve the GPU's NVMe queues, and CUDA IPC sharing.
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cuda_runtime.h>

#include "gemini.h"
#include "gemini_backend.h"
#include "gvdk.h"

#define GM_MAP_REGION (64ull << 20) /* L1/L2 maps of all open files: 32 GiB of data at 4 KiB */
#define GM_SHARD_MIN  16 /* pages a page-cache shard holds at least, when the cache allows */

__attribute__((format(printf, 3, 4))) int gm_err(struct gemini_ctx *c, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->err, sizeof(c->err), fmt, ap);
	va_end(ap);
	return rc;
}

#define GM_CUDA(c, call)                                                                           \
	do {                                                                                       \
		cudaError_t e_ = (call);                                                           \
		if (e_ != cudaSuccess)                                                             \
			return gm_err(c, -EIO, "gemini: %s: %s", #call, cudaGetErrorString(e_));   \
	} while (0)

static bool gm_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

static uint32_t gm_log2(uint64_t v)
{
	uint32_t s = 0;

	while ((1ull << s) < v)
		s++;
	return s;
}

int gemini_init(struct gemini_ctx **out, const struct gemini_config *cfg)
{
	struct gemini_ctx *c;
	struct gemini_config k = {};

	if (cfg)
		k = *cfg;
	if (!k.page_size)
		k.page_size = 64 << 10;
	if (!k.cache_size)
		k.cache_size = 256 << 20;
	if (!k.nqueues)
		k.nqueues = k.backend == GEMINI_BACKEND_LIO ? 8 : 64;
	if (!k.qdepth)
		k.qdepth = 64;
	if (!k.host_threads)
		k.host_threads = 1;
	if (!k.timeout_ms)
		k.timeout_ms = 10000;
	*out = NULL;
	if (!gm_pow2(k.page_size) || k.page_size < 4096 || k.page_size > (1 << 20)) {
		fprintf(stderr, "gemini: page size %zu is not a power of two in 4K..1M\n",
			k.page_size);
		return -EINVAL;
	}
	if (k.cache_size / k.page_size < 4 || k.cache_size / k.page_size > (1u << 30)) {
		fprintf(stderr, "gemini: cache size %zu holds too few or too many %zu-byte pages\n",
			k.cache_size, k.page_size);
		return -EINVAL;
	}
	if (!gm_pow2(k.qdepth) || k.qdepth < 2 || k.qdepth > 4096 || k.nqueues > 1024 ||
	    k.host_threads > 64 || k.prefetch > 16 || k.timeout_ms > 3600000) {
		fprintf(stderr,
			"gemini: queues %u x depth %u, %u host threads, prefetch %u or timeout "
			"%u ms out of range\n",
			k.nqueues, k.qdepth, k.host_threads, k.prefetch, k.timeout_ms);
		return -EINVAL;
	}
	if (k.backend > GEMINI_BACKEND_LIO) {
		fprintf(stderr, "gemini: backend %d unknown\n", (int)k.backend);
		return -EINVAL;
	}
	if (k.backend == GEMINI_BACKEND_LIO) {
		int rc = gm_lio_config_check(&k);

		if (rc)
			return rc;
	}
	c = (struct gemini_ctx *)calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	/*
	 * GPU threads wait inside kernels for copies the controller queues on its own stream; a
	 * stream that shares a hardware queue with such a kernel's stream can wait behind it.
	 * More queues than the default 8 keep the controller's streams apart from the
	 * application's. Read when the CUDA context is created: later calls cannot change it, and
	 * a value the user set is kept.
	 */
	setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
	c->cfg = k;
	{
		/* gemini_close must get the write lock while controller threads keep reading */
		pthread_rwlockattr_t a;

		pthread_rwlockattr_init(&a);
		pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
		pthread_rwlock_init(&c->runs_lock, &a);
		pthread_rwlockattr_destroy(&a);
	}
	*out = c;
	return 0;
}

const char *gemini_last_error(const struct gemini_ctx *c)
{
	return c->err;
}

struct gemini_dev *gemini_device(struct gemini_ctx *c)
{
	return c->ddev;
}

static size_t gm_bump(size_t *off, size_t len, size_t align)
{
	size_t at = (*off + align - 1) / align * align;

	*off = at + len;
	return at;
}

/* Builds the page cache, queues and map region in one arena (one IPC handle shares it all). */
static int gm_setup(struct gemini_ctx *c)
{
	struct gemini_dev *h = &c->hdev;
	const struct gemini_config *k = &c->cfg;
	size_t off = 0, o_dev, o_data, o_key, o_state, o_ref, o_dirty, o_used, o_hn, o_lp, o_ln,
	       o_bucket, o_shards, o_queues, o_turn, o_stats, o_wb, o_wberr, o_map, qbytes;
	uint32_t npages, nshards, per, nb;
	int ndev = 0, rc;
	char name[64];
	uint8_t *a;

	if (c->ready)
		return 0;
	if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev <= k->device)
		return gm_err(c, -ENODEV, "gemini: no CUDA device %d (found %d)", k->device, ndev);
	GM_CUDA(c, cudaSetDevice(k->device));
	npages = (uint32_t)(k->cache_size / k->page_size);
	/* Shards of at least GM_SHARD_MIN pages (fewer when the cache is smaller): a shard holds
	 * only its own keys, so small ones overflow and thrash while others have room (4 pages a
	 * shard did at 256 KiB and 1 MiB pages with a cache four times the file). Hits take no
	 * shard lock, so fewer shards cost only misses more waiting. */
	nshards = 1;
	while (nshards < 4096 && nshards * 2 * GM_SHARD_MIN <= npages)
		nshards *= 2;
	per = npages / nshards;
	npages = per * nshards;
	nb = 1;
	while (nb < 2 * per)
		nb *= 2;

	o_dev = gm_bump(&off, sizeof(struct gemini_dev), 256);
	o_data = gm_bump(&off, (size_t)npages * k->page_size, 4096);
	o_key = gm_bump(&off, npages * 8ull, 256);
	o_state = gm_bump(&off, npages * 4ull, 256);
	o_ref = gm_bump(&off, npages * 4ull, 256);
	o_dirty = gm_bump(&off, npages * 4ull, 256);
	o_used = gm_bump(&off, npages * 4ull, 256);
	o_hn = gm_bump(&off, npages * 4ull, 256);
	o_lp = gm_bump(&off, npages * 4ull, 256);
	o_ln = gm_bump(&off, npages * 4ull, 256);
	o_bucket = gm_bump(&off, (size_t)nshards * nb * 4, 256);
	o_shards = gm_bump(&off, nshards * sizeof(struct gm_shard), 256);
	o_queues = gm_bump(&off, k->nqueues * sizeof(struct gm_queue), 256);
	o_turn = gm_bump(&off, (size_t)k->nqueues * (k->qdepth + GM_CTL_WORDS) * 4, 256);
	o_stats = gm_bump(&off, 64 * GM_NSTATS * 8, 256);
	o_wb = gm_bump(&off, npages * 4ull, 256);
	o_wberr = gm_bump(&off, 32 * 4, 256);
	o_map = gm_bump(&off, GM_MAP_REGION, 256);
	c->arena_size = off;
	GM_CUDA(c, cudaMalloc((void **)&c->arena, c->arena_size));
	a = c->arena;
	GM_CUDA(c, cudaMemset(a, 0, c->arena_size));
	if ((uintptr_t)a & 4095) /* PRP page arithmetic on GPAs needs a page-aligned arena */
		return gm_err(c, -EINVAL, "gemini: arena at %p is not 4 KiB aligned", (void *)a);

	/* queue memory in shared host memory so an importing process can map it too */
	qbytes = gm_qmem_bytes(k->nqueues, k->qdepth);
	snprintf(name, sizeof(name), "/gemini-%d-%p", (int)getpid(), (void *)c);
	rc = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (rc < 0)
		return gm_err(c, -errno, "gemini: shm %s: %s", name, strerror(errno));
	if (ftruncate(rc, (off_t)qbytes) < 0) {
		close(rc);
		shm_unlink(name);
		return gm_err(c, -errno, "gemini: shm %s: %s", name, strerror(errno));
	}
	c->qmem = (uint8_t *)mmap(NULL, qbytes, PROT_READ | PROT_WRITE, MAP_SHARED, rc, 0);
	close(rc);
	if (c->qmem == MAP_FAILED) {
		c->qmem = NULL;
		shm_unlink(name);
		return gm_err(c, -ENOMEM, "gemini: mmap of %zu queue bytes failed", qbytes);
	}
	snprintf(c->shm_name, sizeof(c->shm_name), "%s", name);
	c->qbytes = qbytes;
	memset(c->qmem, 0, qbytes);
	GM_CUDA(c, cudaHostRegister(c->qmem, qbytes, cudaHostRegisterMapped));
	GM_CUDA(c, cudaHostGetDevicePointer((void **)&c->qmem_dev, c->qmem, 0));

	memset(h, 0, sizeof(*h));
	h->page_size = k->page_size;
	h->page_shift = gm_log2(k->page_size);
	h->npages = npages;
	h->nshards = nshards;
	h->per_shard = per;
	h->nbuckets = nb;
	h->prefetch = k->prefetch;
	h->nqueues = k->nqueues;
	h->backend = k->backend;
	h->data = a + o_data;
	h->dma_base = (uint64_t *)a;
	h->key = (unsigned long long *)(a + o_key);
	h->state = (uint32_t *)(a + o_state);
	h->ref = (int *)(a + o_ref);
	h->dirty = (uint32_t *)(a + o_dirty);
	h->used = (uint32_t *)(a + o_used);
	h->hnext = (int *)(a + o_hn);
	h->lprev = (int *)(a + o_lp);
	h->lnext = (int *)(a + o_ln);
	h->bucket = (int *)(a + o_bucket);
	h->shards = (struct gm_shard *)(a + o_shards);
	h->queues = (struct gm_queue *)(a + o_queues);
	h->stats = (unsigned long long *)(a + o_stats);
	h->wb = (uint32_t *)(a + o_wb);
	h->wb_err = (uint32_t *)(a + o_wberr);
	h->timeout_ns = (uint64_t)k->timeout_ms * 1000000ull;
	c->turn_dev = (uint32_t *)(a + o_turn);
	c->map_base = a + o_map;
	c->map_high = 0;
	c->npages = npages;

	{
		size_t n = npages;
		unsigned long long *key = (unsigned long long *)malloc(n * 8);
		int *lp = (int *)malloc(n * 4), *ln = (int *)malloc(n * 4);
		int *bk = (int *)malloc((size_t)nshards * nb * 4);
		struct gm_shard *sh = (struct gm_shard *)calloc(nshards, sizeof(*sh));
		struct gm_queue *q = (struct gm_queue *)calloc(k->nqueues, sizeof(*q));

		if (!key || !lp || !ln || !bk || !sh || !q) {
			free(key), free(lp), free(ln), free(bk), free(sh), free(q);
			return gm_err(c, -ENOMEM, "gemini: out of host memory for %u pages",
				      npages);
		}
		for (size_t i = 0; i < n; i++) {
			size_t j = i % per;

			key[i] = GM_KEY_EMPTY;
			lp[i] = j ? (int)i - 1 : -1;
			ln[i] = j + 1 < per ? (int)i + 1 : -1;
		}
		for (uint32_t s = 0; s < nshards; s++) {
			sh[s].lru_head = (int)(s * per);
			sh[s].lru_tail = (int)(s * per + per - 1);
		}
		memset(bk, 0xff, (size_t)nshards * nb * 4);
		for (uint32_t i = 0; i < k->nqueues; i++) {
			struct gm_qpair qp = gm_qpair_at(c->qmem_dev, k->qdepth, i);

			q[i].sq = qp.sq;
			q[i].cq = qp.cq;
			q[i].sq_doorbell = qp.db;
			q[i].prp = (uint64_t *)(c->qmem_dev + gm_prp_off(k->nqueues, k->qdepth) +
						(size_t)i * k->qdepth * GM_PRP_LIST);
			q[i].prp_gpa = GM_GPA_QMEM + ((uint8_t *)q[i].prp - c->qmem_dev);
			q[i].turn =
			    (uint32_t *)(a + o_turn) + (size_t)i * (k->qdepth + GM_CTL_WORDS);
			q[i].ctl = q[i].turn + k->qdepth;
			q[i].depth = k->qdepth;
			q[i].qid = i + 1;
		}
		cudaError_t e = cudaMemcpy(h->key, key, n * 8, cudaMemcpyHostToDevice);

		if (!e)
			e = cudaMemcpy(h->lprev, lp, n * 4, cudaMemcpyHostToDevice);
		if (!e)
			e = cudaMemcpy(h->lnext, ln, n * 4, cudaMemcpyHostToDevice);
		if (!e) /* overwritten on insert */
			e = cudaMemcpy(h->hnext, ln, n * 4, cudaMemcpyHostToDevice);
		if (!e)
			e = cudaMemcpy(h->bucket, bk, (size_t)nshards * nb * 4,
				       cudaMemcpyHostToDevice);
		if (!e)
			e = cudaMemcpy(h->shards, sh, nshards * sizeof(*sh),
				       cudaMemcpyHostToDevice);
		if (!e)
			e = cudaMemcpy(h->queues, q, k->nqueues * sizeof(*q),
				       cudaMemcpyHostToDevice);
		free(key), free(lp), free(ln), free(bk), free(sh), free(q);
		if (e)
			return gm_err(c, -EIO, "gemini: uploading the page cache of %u pages: %s",
				      npages, cudaGetErrorString(e));
	}
	c->ddev = (struct gemini_dev *)(a + o_dev);
	GM_CUDA(c, cudaMemcpy(c->ddev, h, sizeof(*h), cudaMemcpyHostToDevice));
	GM_CUDA(c, cudaDeviceSynchronize());
	rc = gm_backend_start(c);
	if (rc)
		return rc;
	c->ready = 1;
	return 0;
}

/* Physically contiguous runs of a file's data blocks, for the controller's LBA lookup. */
static int gm_runs_add(struct gemini_ctx *c, int fd, const struct gvdk_map *m, int writable)
{
	const struct gvdk_header *hd = &m->hdr;
	size_t cap = c->nruns + 16, n = c->nruns;
	struct gm_run *r = c->runs;

	for (uint64_t b = 0; b < hd->nblocks; b++) {
		uint64_t dev = gvdk_lookup(m, b);

		if (n && r[n - 1].fd == fd && r[n - 1].dev + r[n - 1].len == dev &&
		    r[n - 1].file_off + r[n - 1].len == hd->data_offset + b * hd->block_size) {
			r[n - 1].len += hd->block_size;
			continue;
		}
		if (n == cap || !r) {
			cap = cap * 2 + 16;
			struct gm_run *nr = (struct gm_run *)realloc(r, cap * sizeof(*r));

			if (!nr)
				return -ENOMEM;
			r = nr;
		}
		r[n].dev = dev;
		r[n].len = hd->block_size;
		r[n].file_off = hd->data_offset + b * hd->block_size;
		r[n].fd = fd;
		r[n].writable = writable;
		n++;
	}
	/* sorted by device offset for binary search; files never share blocks */
	qsort(r, n, sizeof(*r), [](const void *x, const void *y) -> int {
		const struct gm_run *a = (const struct gm_run *)x, *b = (const struct gm_run *)y;
		return a->dev < b->dev ? -1 : a->dev > b->dev;
	});
	c->runs = r;
	c->nruns = n;
	return 0;
}

static void gm_runs_remove(struct gemini_ctx *c, int fd)
{
	size_t j = 0;

	for (size_t i = 0; i < c->nruns; i++)
		if (c->runs[i].fd != fd)
			c->runs[j++] = c->runs[i];
	c->nruns = j;
}

/*
 * A place for len bytes of maps in the map region: the lowest gap between the maps of open
 * files (first fit), so closing a file gives its space back. Once the cache was exported, an
 * importer may still translate through a closed file's map, so only space above every map
 * ever placed is handed out. (size_t)-1 when nothing fits.
 */
static bool gm_map_free_at(const struct gemini_ctx *c, size_t at, size_t len)
{
	if (at + len > GM_MAP_REGION)
		return false;
	for (int i = 0; i < GEMINI_MAX_FILES; i++) {
		const struct gm_hfile *f = &c->files[i];

		if (f->open && at < f->map_off + f->map_len && f->map_off < at + len)
			return false;
	}
	return true;
}

static size_t gm_map_alloc(struct gemini_ctx *c, size_t len)
{
	size_t best = (size_t)-1;

	if (c->exported)
		return gm_map_free_at(c, c->map_high, len) ? c->map_high : best;
	if (gm_map_free_at(c, 0, len))
		return 0;
	for (int i = 0; i < GEMINI_MAX_FILES; i++) {
		const struct gm_hfile *f = &c->files[i];
		size_t at = f->map_off + f->map_len;

		if (f->open && at < best && gm_map_free_at(c, at, len))
			best = at;
	}
	return best;
}

int gemini_open(struct gemini_ctx *c, const char *path, int flags)
{
	char err[GVDK_ERRLEN] = "";
	struct gvdk_map m;
	struct gm_file f = {};
	struct gm_hfile *hf;
	int fd = -1, rc, acc = flags & O_ACCMODE;
	uint64_t *l1;
	size_t mapbytes, map_off;
	cudaError_t e;

	if (acc != O_RDONLY && acc != O_RDWR)
		return gm_err(c, -EINVAL, "gemini_open %s: flags %#x: only O_RDONLY or O_RDWR",
			      path, flags);
	/* validate before any GPU work: a corrupt file is refused even without a device */
	rc = gvdk_load(path, &m, 0, err);
	if (rc)
		return gm_err(c, rc, "gemini_open %s", err);
	rc = gm_setup(c);
	if (rc) {
		char why[sizeof(c->err)];

		snprintf(why, sizeof(why), "%s", c->err);
		gm_err(c, rc, "gemini_open %s: %s", path, why);
		goto out;
	}
	for (int i = 0; i < GEMINI_MAX_FILES; i++)
		if (!c->files[i].open) {
			fd = i;
			break;
		}
	if (fd < 0) {
		rc = gm_err(c, -EMFILE, "gemini_open %s: all %d descriptors in use", path,
			    GEMINI_MAX_FILES);
		goto out;
	}
	hf = &c->files[fd];
	memset(hf, 0, sizeof(*hf));
	mapbytes = (size_t)m.hdr.l2_tables * 8 + (size_t)m.hdr.l2_tables * m.hdr.per_l2 * 8;
	mapbytes = (mapbytes + 255) & ~(size_t)255;
	map_off = gm_map_alloc(c, mapbytes);
	if (map_off == (size_t)-1) {
		rc = gm_err(
		    c, -ENOSPC,
		    "gemini_open %s: map of %zu bytes does not fit in the %llu-byte map region "
		    "beside the maps of the open files",
		    path, mapbytes, (unsigned long long)GM_MAP_REGION);
		goto out;
	}
	hf->sysfd = open(path, (acc == O_RDWR ? O_RDWR : O_RDONLY) | O_CLOEXEC |
				   (c->cfg.direct ? O_DIRECT : 0));
	if (hf->sysfd < 0) {
		rc = gm_err(c, -errno, "gemini_open %s: %s", path, strerror(errno));
		goto out;
	}
	snprintf(hf->path, sizeof(hf->path), "%s", path);
	hf->hdr = m.hdr;
	hf->writable = acc == O_RDWR;
	/* L1 as entry indices into the L2 array on the GPU: one add per level at lookup */
	l1 = (uint64_t *)malloc(m.hdr.l2_tables * 8ull);
	if (!l1) {
		rc = gm_err(c, -ENOMEM, "gemini_open %s: out of memory", path);
		goto out_close;
	}
	for (uint32_t i = 0; i < m.hdr.l2_tables; i++)
		l1[i] = (m.l1[i] - m.hdr.l2_offset) / 8;
	/* on a LightIOV volume the file sits byte for byte: the map the GPU gets says so */
	if (c->cfg.backend == GEMINI_BACKEND_LIO)
		gm_lio_map(&m);
	f.l1 = (const uint64_t *)(c->map_base + map_off);
	f.l2 = f.l1 + m.hdr.l2_tables;
	e = cudaMemcpy((void *)f.l1, l1, m.hdr.l2_tables * 8ull, cudaMemcpyHostToDevice);
	if (!e)
		e = cudaMemcpy((void *)f.l2, m.l2, (size_t)m.hdr.l2_tables * m.hdr.per_l2 * 8,
			       cudaMemcpyHostToDevice);
	free(l1);
	if (e) {
		rc = gm_err(c, -EIO, "gemini_open %s: uploading the %zu-byte map: %s", path,
			    mapbytes, cudaGetErrorString(e));
		goto out_close;
	}
	f.data_size = m.hdr.data_size;
	f.nblocks = m.hdr.nblocks;
	f.block_shift = gm_log2(m.hdr.block_size);
	f.per_l2_shift = gm_log2(m.hdr.per_l2);
	f.writable = hf->writable;
	f.open = 1;
	rc = gm_backend_open(c, fd);
	if (rc)
		goto out_close;
	f.image = hf->mem_dev ? hf->mem_dev + m.hdr.data_offset : NULL;
	if (c->mapped_err)
		c->mapped_err[fd] = 0;
	pthread_rwlock_wrlock(&c->runs_lock);
	rc = gm_runs_add(c, fd, &m, hf->writable);
	pthread_rwlock_unlock(&c->runs_lock);
	if (rc) {
		gm_backend_close(c, fd);
		rc = gm_err(c, rc, "gemini_open %s: out of memory for the run table", path);
		goto out_close;
	}
	{
		/* a new file on this descriptor starts with no write-back errors */
		uint32_t zero[2] = {0, 0};

		e = cudaMemcpy(c->hdev.wb_err + fd, zero, 4, cudaMemcpyHostToDevice);
		if (!e)
			e = cudaMemcpy(c->hdev.wb_err + 16 + fd, zero + 1, 4,
				       cudaMemcpyHostToDevice);
		if (!e)
			e = cudaMemcpy(&c->ddev->files[fd], &f, sizeof(f), cudaMemcpyHostToDevice);
	}
	if (e) {
		pthread_rwlock_wrlock(&c->runs_lock);
		gm_runs_remove(c, fd);
		pthread_rwlock_unlock(&c->runs_lock);
		gm_backend_close(c, fd);
		rc = gm_err(c, -EIO, "gemini_open %s: publishing descriptor %d: %s", path, fd,
			    cudaGetErrorString(e));
		goto out_close;
	}
	hf->map_off = map_off;
	hf->map_len = mapbytes;
	if (map_off + mapbytes > c->map_high)
		c->map_high = map_off + mapbytes;
	hf->open = 1;
	c->hdev.files[fd] = f;
	gvdk_map_free(&m);
	return fd;
out_close:
	close(hf->sysfd);
	hf->open = 0;
out:
	gvdk_map_free(&m);
	return rc;
}

__global__ static void gm_sync_kernel(struct gemini_dev *d, int fd, int *rc)
{
	int r = gemini_dev_sync(d, fd);

	if (r)
		atomicExch(rc, r);
}

/* Forgets unreferenced clean pages: fd's, or every file's when fd < 0. */
__global__ static void gm_drop_kernel(struct gemini_dev *d, int fd)
{
	for (uint32_t s = blockIdx.x * blockDim.x + threadIdx.x; s < d->nshards;
	     s += gridDim.x * blockDim.x) {
		struct gm_shard *sh = &d->shards[s];

		if (gm_lock(d, &sh->lock))
			continue; /* a lock nobody lets go of: leave the shard alone */
		for (int i = sh->lru_head; i >= 0;) {
			int next = d->lnext[i];
			unsigned long long k = d->key[i];

			if (k != GM_KEY_EMPTY && (fd < 0 || (int)(k >> 48) == fd) && !d->dirty[i] &&
			    gm_claim(d, i)) {
				gm_hash_remove(d, gm_bucket(d, gm_mix(k)), i);
				d->key[i] = GM_KEY_EMPTY;
				d->state[i] = GM_PAGE_INVALID;
				gm_unclaim(d, i, 0);
				gm_lru_remove(d, sh, i);
				gm_lru_prepend(d, sh, i);
			}
			i = next;
		}
		gm_unlock(&sh->lock);
	}
}

int gemini_sync(struct gemini_ctx *c, int fd)
{
	int *drc, hrc = 0;

	if (!c->ready || fd < 0 || fd >= GEMINI_MAX_FILES || !c->files[fd].open)
		return gm_err(c, -EBADF, "gemini_sync: descriptor %d not open", fd);
	GM_CUDA(c, cudaMalloc((void **)&drc, sizeof(int)));
	if (cudaMemset(drc, 0, sizeof(int)) != cudaSuccess) {
		cudaFree(drc);
		return gm_err(c, -EIO, "gemini_sync: descriptor %d: clearing the result failed",
			      fd);
	}
	/* each warp of a gemini_dev_sync scans the whole cache: one block of 8 warps splits the
	 * writes */
	gm_sync_kernel<<<1, 256>>>(c->ddev, fd, drc);
	if (cudaGetLastError() != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess ||
	    cudaMemcpy(&hrc, drc, sizeof(int), cudaMemcpyDeviceToHost) != cudaSuccess) {
		cudaFree(drc);
		return gm_err(c, -EIO, "gemini_sync: descriptor %d: the sync kernel failed: %s", fd,
			      cudaGetErrorString(cudaGetLastError()));
	}
	cudaFree(drc);
	if (hrc)
		return gm_err(c, hrc, "gemini_sync: write-back of descriptor %d failed (%d)", fd,
			      hrc);
	if (c->mapped_err && c->mapped_err[fd]) {
		hrc = c->mapped_err[fd];
		c->mapped_err[fd] = 0;
		return gm_err(c, -EIO,
			      "gemini_sync: descriptor %d: a mapped copy's coherence step failed "
			      "(%d)",
			      fd, hrc);
	}
	return 0;
}

/* Coherence step of gemini_mapped_copy_async: one thread per page of the range. */
__global__ static void gm_mapped_kernel(struct gemini_dev *d, int fd, uint64_t pg0, uint64_t npg,
					int write, int *err)
{
	for (uint64_t k = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; k < npg;
	     k += (uint64_t)gridDim.x * blockDim.x) {
		int rc = gm_mapped_coherent<GEMINI_BK_HOST>(d, fd, pg0 + k, pg0 + k, write);

		if (rc) {
			/* mapped host memory: a plain store (atomics there are not the host's) */
			*(volatile int *)&err[fd] = rc;
			__threadfence_system();
		}
	}
}

int gemini_mapped_copy_async(struct gemini_ctx *c, int fd, uint64_t off, void *gpu_buf, size_t len,
			     int write, void *stream)
{
	const struct gm_file *f;
	uint8_t *host;
	uint64_t pg0, npg;
	cudaStream_t st = (cudaStream_t)stream;
	cudaError_t e;

	if (!c)
		return -EINVAL;
	if (fd < 0 || fd >= GEMINI_MAX_FILES || !c->files[fd].open)
		return gm_err(c, -EBADF, "gemini_mapped_copy_async: descriptor %d not open", fd);
	f = &c->hdev.files[fd];
	if (!f->image)
		return gm_err(c, -EOPNOTSUPP,
			      "gemini_mapped_copy_async: descriptor %d has no mapped image (%s)",
			      fd, c->ns_desc);
	if (write && !c->files[fd].writable)
		return gm_err(c, -EBADF, "gemini_mapped_copy_async: descriptor %d is read-only",
			      fd);
	if (off > f->data_size || len > f->data_size - off)
		return gm_err(c, -EINVAL,
			      "gemini_mapped_copy_async: descriptor %d: %zu bytes at %llu exceed "
			      "its %llu bytes",
			      fd, len, (unsigned long long)off, (unsigned long long)f->data_size);
	if (!len)
		return 0;
	if (!gpu_buf)
		return gm_err(c, -EINVAL, "gemini_mapped_copy_async: descriptor %d: no buffer", fd);
	if (!c->mapped_err) {
		if (cudaHostAlloc((void **)&c->mapped_err, GEMINI_MAX_FILES * sizeof(int),
				  cudaHostAllocMapped | cudaHostAllocPortable) != cudaSuccess) {
			c->mapped_err = NULL;
			cudaGetLastError(); /* not left for a later check to find */
			return gm_err(c, -ENOMEM,
				      "gemini_mapped_copy_async: no pinned error words");
		}
		memset(c->mapped_err, 0, GEMINI_MAX_FILES * sizeof(int));
		if (cudaHostGetDevicePointer((void **)&c->mapped_err_dev, c->mapped_err, 0) !=
		    cudaSuccess) {
			cudaFreeHost(c->mapped_err);
			c->mapped_err = NULL;
			cudaGetLastError();
			return gm_err(c, -EIO, "gemini_mapped_copy_async: error words not mapped");
		}
	}
	if (*(volatile int *)&c->mapped_err[fd]) {
		int r = c->mapped_err[fd];

		c->mapped_err[fd] = 0;
		return gm_err(
		    c, -EIO,
		    "gemini_mapped_copy_async: descriptor %d: an earlier copy's coherence "
		    "step failed (%d)",
		    fd, r);
	}
	/* cached pages of the range first (stream order), then one copy on the copy engines */
	pg0 = off >> c->hdev.page_shift;
	npg = ((off + len - 1) >> c->hdev.page_shift) - pg0 + 1;
	gm_mapped_kernel<<<(unsigned)(npg < 128 * 1024 ? (npg + 127) / 128 : 1024), 128, 0, st>>>(
	    c->ddev, fd, pg0, npg, write, c->mapped_err_dev);
	e = cudaGetLastError();
	if (e != cudaSuccess)
		return gm_err(c, -EIO, "gemini_mapped_copy_async: descriptor %d: %s", fd,
			      cudaGetErrorString(e));
	host = c->files[fd].mem + c->files[fd].hdr.data_offset + off;
	e = write ? cudaMemcpyAsync(host, gpu_buf, len, cudaMemcpyDeviceToHost, st)
		  : cudaMemcpyAsync(gpu_buf, host, len, cudaMemcpyHostToDevice, st);
	if (e != cudaSuccess)
		return gm_err(c, -EIO, "gemini_mapped_copy_async: descriptor %d: %s", fd,
			      cudaGetErrorString(e));
	return 0;
}

int gemini_cache_drop(struct gemini_ctx *c)
{
	if (!c->ready)
		return 0;
	gm_drop_kernel<<<(c->hdev.nshards + 127) / 128, 128>>>(c->ddev, -1);
	GM_CUDA(c, cudaGetLastError());
	GM_CUDA(c, cudaDeviceSynchronize());
	return 0;
}

int gemini_close(struct gemini_ctx *c, int fd)
{
	struct gm_file f = {};
	int rc = 0;

	if (fd < 0 || fd >= GEMINI_MAX_FILES || !c->files[fd].open)
		return gm_err(c, -EBADF, "gemini_close: descriptor %d not open", fd);
	if (c->files[fd].writable)
		rc = gemini_sync(c, fd);
	/* this process's kernels stop seeing the file first, then its pages go */
	if (cudaMemcpy(&c->ddev->files[fd], &f, sizeof(f), cudaMemcpyHostToDevice) != cudaSuccess &&
	    !rc)
		rc = gm_err(c, -EIO, "gemini_close: descriptor %d: unpublishing the file failed",
			    fd);
	c->hdev.files[fd] = f;
	/* a later file on this descriptor must not see these pages */
	gm_drop_kernel<<<(c->hdev.nshards + 127) / 128, 128>>>(c->ddev, fd);
	if (cudaDeviceSynchronize() != cudaSuccess && !rc)
		rc = gm_err(c, -EIO, "gemini_close: descriptor %d: dropping its pages failed", fd);
	/*
	 * The controller refuses the file's LBAs from here on; the write lock waits for every batch
	 * in service (an importer's too) to complete, so its buffers are freed only once nobody
	 * can be using them.
	 */
	pthread_rwlock_wrlock(&c->runs_lock);
	gm_runs_remove(c, fd);
	pthread_rwlock_unlock(&c->runs_lock);
	gm_backend_close(c, fd);
	close(c->files[fd].sysfd);
	c->files[fd].open = 0;
	return rc;
}

int64_t gemini_file_size(struct gemini_ctx *c, int fd)
{
	if (fd < 0 || fd >= GEMINI_MAX_FILES || !c->files[fd].open)
		return -EBADF;
	return (int64_t)c->files[fd].hdr.data_size;
}

int gemini_stats(struct gemini_ctx *c, struct gemini_stats *st)
{
	unsigned long long s[64 * GM_NSTATS], t[GM_NSTATS] = {};

	memset(st, 0, sizeof(*st));
	if (!c->ready)
		return 0;
	GM_CUDA(c, cudaMemcpy(s, c->hdev.stats, sizeof(s), cudaMemcpyDeviceToHost));
	for (int i = 0; i < 64; i++)
		for (int j = 0; j < GM_NSTATS; j++)
			t[j] += s[i * GM_NSTATS + j];
	st->hits = t[GM_STAT_HITS];
	st->misses = t[GM_STAT_MISSES];
	st->evictions = t[GM_STAT_EVICT];
	st->writebacks = t[GM_STAT_WB];
	st->io_errors = t[GM_STAT_IOERR];
	st->commands = t[GM_STAT_CMDS];
	return 0;
}

void gemini_exit(struct gemini_ctx *c)
{
	if (!c)
		return;
	for (int i = 0; i < GEMINI_MAX_FILES; i++)
		if (c->files[i].open)
			gemini_close(c, i);
	if (c->ready || c->lio) /* a lio session opened before a later set-up step failed */
		gm_backend_stop(c);
	if (c->qmem) {
		cudaHostUnregister(c->qmem);
		munmap(c->qmem, c->qbytes);
		shm_unlink(c->shm_name);
	}
	if (c->arena)
		cudaFree(c->arena);
	if (c->mapped_err)
		cudaFreeHost(c->mapped_err);
	free(c->runs);
	pthread_rwlock_destroy(&c->runs_lock);
	free(c);
}

int gemini_fault_inject(struct gemini_ctx *c, unsigned faults)
{
	if (faults & ~(GEMINI_FAULT_WRITES | GEMINI_FAULT_STALL))
		return gm_err(c, -EINVAL, "gemini_fault_inject: unknown fault bits %#x", faults);
	if (c->cfg.backend == GEMINI_BACKEND_LIO && faults)
		return gm_err(c, -EOPNOTSUPP,
			      "gemini_fault_inject: faults %#x: softssd is the lio backend's "
			      "controller, not this process",
			      faults);
	__atomic_store_n(&c->faults, faults, __ATOMIC_RELEASE);
	return 0;
}

/* What an importer needs: the arena's IPC handle, where the exporter saw things, the queues. */
struct gm_ipc_blob {
	cudaIpcMemHandle_t mem;
	uint64_t arena_size;
	uint64_t exp_arena;
	uint64_t exp_qdev;
	uint64_t qbytes;
	uint64_t dev_off;
	char shm[64];
};

struct gm_import {
	uint8_t *arena;
	uint8_t *qmem;
	uint8_t *qdev;
	size_t qbytes;
	struct gemini_dev *ddev;
	struct gm_queue *queues;
};

int gemini_ipc_export(struct gemini_ctx *c, struct gemini_ipc_handle *h)
{
	struct gm_ipc_blob b;

	static_assert(sizeof(b) <= sizeof(h->bytes), "ipc blob fits the handle");
	if (!c->ready)
		return gm_err(c, -EINVAL, "gemini_ipc_export: nothing to share before gemini_open");
	if (c->cfg.backend == GEMINI_BACKEND_LIO)
		return gm_err(c, -EOPNOTSUPP,
			      "gemini_ipc_export: the lio backend's queue pairs belong to this "
			      "process's session");
	memset(&b, 0, sizeof(b));
	GM_CUDA(c, cudaIpcGetMemHandle(&b.mem, c->arena));
	b.arena_size = c->arena_size;
	b.exp_arena = (uint64_t)(uintptr_t)c->arena;
	b.exp_qdev = (uint64_t)(uintptr_t)c->qmem_dev;
	b.qbytes = c->qbytes;
	b.dev_off = (uint64_t)((uint8_t *)c->ddev - c->arena);
	snprintf(b.shm, sizeof(b.shm), "%s", c->shm_name);
	c->exported = 1; /* importers keep using maps of files closed here: no reuse */
	memset(h, 0, sizeof(*h));
	memcpy(h->bytes, &b, sizeof(b));
	return 0;
}

/* Rebases every pointer of the exporter's device struct into this process's mappings. */
int gemini_ipc_import(const struct gemini_ipc_handle *h, struct gemini_dev **dev, void **cookie)
{
	struct gm_ipc_blob b;
	struct gm_import *im;
	struct gemini_dev d;
	struct gm_queue *q = NULL;
	int fd;

	memcpy(&b, h->bytes, sizeof(b));
	im = (struct gm_import *)calloc(1, sizeof(*im));
	if (!im)
		return -ENOMEM;
	if (cudaIpcOpenMemHandle((void **)&im->arena, b.mem, cudaIpcMemLazyEnablePeerAccess) !=
	    cudaSuccess)
		goto fail;
	fd = shm_open(b.shm, O_RDWR, 0);
	if (fd < 0)
		goto fail;
	im->qmem = (uint8_t *)mmap(NULL, b.qbytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (im->qmem == MAP_FAILED) {
		im->qmem = NULL;
		goto fail;
	}
	im->qbytes = b.qbytes;
	if (cudaHostRegister(im->qmem, b.qbytes, cudaHostRegisterMapped) != cudaSuccess ||
	    cudaHostGetDevicePointer((void **)&im->qdev, im->qmem, 0) != cudaSuccess)
		goto fail;
	if (cudaMemcpy(&d, im->arena + b.dev_off, sizeof(d), cudaMemcpyDeviceToHost) != cudaSuccess)
		goto fail;
#define GM_REBASE(p) ((p) = (decltype(p))((uint8_t *)(p) - (uint8_t *)b.exp_arena + im->arena))
	GM_REBASE(d.data);
	GM_REBASE(d.dma_base);
	GM_REBASE(d.key);
	GM_REBASE(d.state);
	GM_REBASE(d.ref);
	GM_REBASE(d.dirty);
	GM_REBASE(d.used);
	GM_REBASE(d.hnext);
	GM_REBASE(d.lprev);
	GM_REBASE(d.lnext);
	GM_REBASE(d.bucket);
	GM_REBASE(d.shards);
	GM_REBASE(d.stats);
	GM_REBASE(d.wb);
	GM_REBASE(d.wb_err);
	for (int i = 0; i < GEMINI_MAX_FILES; i++)
		if (d.files[i].open) {
			GM_REBASE(d.files[i].l1);
			GM_REBASE(d.files[i].l2);
			/* the exporter's alias of its own host memory: not ours to touch */
			d.files[i].image = NULL;
		}
	/* queue descriptors stay shared (tickets are shared state); their host pointers differ, so
	 * the importer gets its own copies pointing at its own mapping of the same pages */
	q = (struct gm_queue *)malloc(d.nqueues * sizeof(*q));
	if (!q)
		goto fail;
	GM_REBASE(d.queues);
	if (cudaMemcpy(q, d.queues, d.nqueues * sizeof(*q), cudaMemcpyDeviceToHost) != cudaSuccess)
		goto fail_q;
	for (uint32_t i = 0; i < d.nqueues; i++) {
#define GM_QREBASE(p) ((p) = (decltype(p))((uint8_t *)(p) - (uint8_t *)b.exp_qdev + im->qdev))
		GM_QREBASE(q[i].sq);
		GM_QREBASE(q[i].cq);
		GM_QREBASE(q[i].sq_doorbell);
		GM_QREBASE(q[i].prp);
#undef GM_QREBASE
		GM_REBASE(q[i].turn);
		GM_REBASE(q[i].ctl);
	}
	if (cudaMalloc((void **)&im->queues, d.nqueues * sizeof(*q)) != cudaSuccess)
		goto fail_q;
	if (cudaMemcpy(im->queues, q, d.nqueues * sizeof(*q), cudaMemcpyHostToDevice) !=
	    cudaSuccess)
		goto fail_q;
	d.queues = im->queues;
	free(q);
	q = NULL;
	if (cudaMalloc((void **)&im->ddev, sizeof(d)) != cudaSuccess)
		goto fail;
	if (cudaMemcpy(im->ddev, &d, sizeof(d), cudaMemcpyHostToDevice) != cudaSuccess)
		goto fail;
#undef GM_REBASE
	*dev = im->ddev;
	*cookie = im;
	return 0;
fail_q:
	free(q);
fail:
	gemini_ipc_close(im);
	return -EIO;
}

void gemini_ipc_close(void *cookie)
{
	struct gm_import *im = (struct gm_import *)cookie;

	if (!im)
		return;
	if (im->ddev)
		cudaFree(im->ddev);
	if (im->queues)
		cudaFree(im->queues);
	if (im->qmem) {
		cudaHostUnregister(im->qmem);
		munmap(im->qmem, im->qbytes);
	}
	if (im->arena)
		cudaIpcCloseMemHandle(im->arena);
	free(im);
}
