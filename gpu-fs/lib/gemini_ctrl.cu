// libgemini backends: the host controller threads that serve the GPU-built NVMe queues (software
// NVMe controller over host memory or the disk, posix proxy, cuFile proxy). The GPU side is
// untrusted: every SQE goes through the shared checker, lio_sqe_check, as softssd's do.
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime.h>
#ifdef GEMINI_HAVE_CUFILE
#include <cufile.h>
#endif
#ifdef GEMINI_HAVE_URING
#include <liburing.h>
#endif

#include "gemini_backend.h"
#include "lightiov/check.h"

#define GM_BOUNCE	   (32u << 20)
#define GM_BATCH	   4096
#define GM_SEGS		   (2 * GM_BATCH) /* data segments of one batch (a contiguous buffer is one) */
#define GM_STATUS(sct, sc) (NVME_STATUS(sct, sc) | NVME_STATUS_DNR)

struct gm_op {
	uint32_t pos;
	uint16_t cid;
	uint16_t status;
	uint8_t opcode;
	int io_fd; /* >= 0: file I/O at io_off (pread before the copy, pwrite after) */
	uint64_t io_off;
	uint8_t *bounce;
	uint8_t *host; /* the namespace's bytes: the memory image or the bounce buffer */
	size_t len;
	uint32_t seg0; /* the checker's data segments: worker segs[seg0, seg0 + nsegs) */
	uint32_t nsegs;
};

struct gm_worker {
	struct gemini_ctx *c;
	int id;
	cudaStream_t stream;
	uint8_t *bounce;
	size_t used;
	struct gm_op ops[GM_BATCH];
	struct lio_seg segs[GM_SEGS];
	uint32_t nsegs;
	void *dsts[GM_SEGS];
	const void *srcs[GM_SEGS];
	size_t sizes[GM_SEGS];
	/* the checker's view of this context: DMA window (arena pages, registered buffers, PRP
	 * lists), LBA window (up to the end of the last open file's blocks) */
	struct lio_check_region regions[2 + 16];
	struct lio_check_ctx chk;
	int flush;
	/* read by the watchdog: what this thread does since when, and how much it has served */
	volatile int phase;
	volatile uint64_t phase_ns;
	volatile unsigned long long served;
#ifdef GEMINI_HAVE_URING
	struct io_uring ring;
	int ring_ok;
#endif
};

enum { GM_PH_POLL, GM_PH_DISK_READ, GM_PH_COPY, GM_PH_DISK_WRITE, GM_PH_FLUSH };
static const char *const gm_phase_name[] = {"polling the queues", "reading the disk",
					    "waiting for its copies", "writing the disk",
					    "flushing"};

static uint64_t gm_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void gm_phase(struct gm_worker *w, int ph)
{
	w->phase_ns = gm_now_ns();
	w->phase = ph;
}

int gemini_register_buffer(struct gemini_ctx *c, void *p, size_t len)
{
	if (c->nwin >= 16)
		return gm_err(c, -ENOSPC, "gemini_register_buffer: all 16 windows in use");
	if (!p || !len)
		return gm_err(c, -EINVAL, "gemini_register_buffer: empty buffer %p+%zu", p, len);
	c->win[c->nwin].base = (uint64_t)(uintptr_t)p;
	c->win[c->nwin].len = len;
	__atomic_store_n(&c->nwin, c->nwin + 1, __ATOMIC_RELEASE);
	return 0;
}

const char *gemini_backend_desc(const struct gemini_ctx *c)
{
	return c->ns_desc;
}

/* The run holding [dev, dev+len), or NULL: a command may only touch blocks of an open file. */
static const struct gm_run *gm_run_find(struct gemini_ctx *c, uint64_t dev, uint64_t len)
{
	size_t lo = 0, hi = c->nruns;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct gm_run *r = &c->runs[mid];

		if (dev < r->dev)
			hi = mid;
		else if (dev >= r->dev + r->len)
			lo = mid + 1;
		else
			return len <= r->dev + r->len - dev ? r : NULL;
	}
	return NULL;
}

/* The whole of [off, off+len) read into buf, or written from it; 0 or -1. */
static int gm_rw_all(int fd, void *buf, size_t len, uint64_t off, bool write)
{
	char *p = (char *)buf;

	while (len) {
		ssize_t r = write ? pwrite(fd, p, len, (off_t)off) : pread(fd, p, len, (off_t)off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		len -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

/* A GPA of the window as an address: the arena's (or a registered buffer's) device address, or a
 * PRP-list page's host address in the queue memory. Only called on GPAs the checker accepted. */
static uint8_t *gm_gpa_ptr(struct gemini_ctx *c, uint64_t gpa)
{
	if (gpa >= GM_GPA_QMEM)
		return c->qmem + (gpa - GM_GPA_QMEM);
	return (uint8_t *)((uintptr_t)c->arena + (uintptr_t)(gpa - GM_GPA_ARENA));
}

/* lio_check_ctx.read_prp: PRP lists are read from the queue memory only (where the GPU writes
 * them); a list the GPU placed anywhere else in the window is a transfer error. */
static int gm_read_prp(void *opaque, uint64_t gpa, uint64_t *out, unsigned n)
{
	struct gemini_ctx *c = (struct gemini_ctx *)opaque;
	uint64_t lo = GM_GPA_QMEM + gm_prp_off(c->cfg.nqueues, c->cfg.qdepth);

	if (gpa < lo || gpa - GM_GPA_QMEM + (uint64_t)n * 8 > c->qbytes)
		return -1;
	memcpy(out, c->qmem + (gpa - GM_GPA_QMEM), (size_t)n * 8); /* little endian, as x86 */
	return 0;
}

/* The checker's context for one batch (the run table's read lock held: files cannot change). */
static void gm_check_setup(struct gm_worker *w)
{
	struct gemini_ctx *c = w->c;
	struct lio_check_ctx *k = &w->chk;
	int n = __atomic_load_n(&c->nwin, __ATOMIC_ACQUIRE), r = 0;

	w->regions[r].gpa = (uint64_t)(c->hdev.data - c->arena) + GM_GPA_ARENA;
	w->regions[r++].size = (uint64_t)c->npages * c->hdev.page_size;
	for (int i = 0; i < n && i < 16; i++, r++) {
		w->regions[r].gpa = c->win[i].base - (uint64_t)(uintptr_t)c->arena + GM_GPA_ARENA;
		w->regions[r].size = c->win[i].len;
	}
	w->regions[r].gpa = GM_GPA_QMEM + gm_prp_off(c->cfg.nqueues, c->cfg.qdepth);
	w->regions[r++].size = (uint64_t)c->cfg.nqueues * c->cfg.qdepth * GM_PRP_LIST;
	memset(k, 0, sizeof(*k));
	k->regions = w->regions;
	k->nr_regions = (unsigned)r;
	k->lba_start = 0;
	k->lba_count = c->nruns ? (c->runs[c->nruns - 1].dev + c->runs[c->nruns - 1].len) / 512 : 0;
	k->lba_shift = 9;
	k->nsid = 1;
	k->mdts_bytes = GM_MAX_CMD;
	k->read_prp = gm_read_prp;
	k->opaque = c;
}

/*
 * Turns one SQE into copies (and maybe a pread before / pwrite after); status on refusal. The
 * command itself is judged by lio_sqe_check alone; what is left here is this controller's
 * namespace: only blocks of open files exist (elsewhere LBA Out of Range), a read-only file's
 * blocks refuse writes, and it implements Read, Write and Flush.
 */
static void gm_prepare(struct gm_worker *w, const struct nvme_sqe *s, struct gm_op *op)
{
	struct gemini_ctx *c = w->c;
	const struct gm_run *r;
	struct lio_io io;
	uint64_t dev, len, foff;
	struct gm_hfile *hf;

	op->opcode = s->opcode;
	op->io_fd = -1;
	op->len = 0;
	op->nsegs = 0;
	op->status = lio_sqe_check(&w->chk, s, &io);
	if (op->status)
		return;
	if (io.kind == LIO_IO_FLUSH) {
		w->flush = 1;
		return;
	}
	if (io.kind != LIO_IO_READ && io.kind != LIO_IO_WRITE) {
		op->status = GM_STATUS(NVME_SCT_GENERIC, NVME_SC_INVALID_OPCODE);
		return;
	}
	dev = io.dev_lba * 512;
	len = io.bytes;
	r = gm_run_find(c, dev, len);
	if (!r) {
		op->status = GM_STATUS(NVME_SCT_GENERIC, NVME_SC_LBA_RANGE);
		return;
	}
	if (io.kind == LIO_IO_WRITE && !r->writable) {
		op->status = GM_STATUS(NVME_SCT_CMD_SPECIFIC, NVME_SC_ATTEMPTED_WRITE_RO);
		return;
	}
	if (io.kind == LIO_IO_WRITE && (c->faults & GEMINI_FAULT_WRITES)) {
		op->status = GM_SC_WRITE_FAULT; /* injected: the medium refuses writes */
		return;
	}
	if (w->nsegs + io.nsegs > GM_SEGS) {
		op->status = 0xffff; /* retry in the next batch */
		return;
	}
	hf = &c->files[r->fd];
	foff = r->file_off + (dev - r->dev);
	if (c->cfg.backend == GEMINI_BACKEND_GDS) {
#ifdef GEMINI_HAVE_CUFILE
		uint64_t o = foff;

		for (unsigned i = 0; i < io.nsegs && !op->status; i++) {
			void *g = gm_gpa_ptr(c, io.segs[i].gpa);
			ssize_t n = io.kind == LIO_IO_READ
					? cuFileRead((CUfileHandle_t)hf->cufile, g, io.segs[i].len,
						     (off_t)o, 0)
					: cuFileWrite((CUfileHandle_t)hf->cufile, g, io.segs[i].len,
						      (off_t)o, 0);

			if (n != (ssize_t)io.segs[i].len)
				op->status =
				    io.kind == LIO_IO_READ ? GM_SC_READ_ERROR : GM_SC_WRITE_FAULT;
			o += io.segs[i].len;
		}
#else
		op->status = GM_STATUS(NVME_SCT_GENERIC, NVME_SC_INVALID_OPCODE);
#endif
		return;
	}
	if (!hf->mem && w->used + len > GM_BOUNCE) {
		op->status = 0xffff; /* retry in the next batch */
		return;
	}
	op->len = len;
	op->seg0 = w->nsegs;
	op->nsegs = io.nsegs;
	memcpy(&w->segs[w->nsegs], io.segs, io.nsegs * sizeof(io.segs[0]));
	w->nsegs += io.nsegs;
	if (hf->mem) {
		/* memory namespace: the device's DMA is a copy from/to the resident image */
		op->host = hf->mem + foff;
		return;
	}
	/* disk: the file I/O is done for the whole batch at once (gm_file_batch) */
	op->io_fd = c->rawfd >= 0 ? c->rawfd : hf->sysfd;
	op->io_off = c->rawfd >= 0 ? dev : foff;
	op->bounce = w->bounce + w->used;
	op->host = op->bounce;
	w->used += (len + 4095) & ~4095ull;
}

/* Reads (before the copies) or writes (after them) of every disk op in the batch, all in flight
 * at once through io_uring where it is available: one thread keeps the disk's queue full. */
static void gm_file_batch(struct gm_worker *w, struct gm_op *ops, int n, uint8_t opcode)
{
	int i;

#ifdef GEMINI_HAVE_URING
	if (w->ring_ok) {
		int inflight = 0;

		for (i = 0; i < n || inflight;) {
			struct io_uring_cqe *cqe;

			while (i < n) {
				struct gm_op *op = &ops[i];
				struct io_uring_sqe *sqe;

				if (op->io_fd < 0 || op->opcode != opcode ||
				    op->status != NVME_SC_SUCCESS) {
					i++;
					continue;
				}
				sqe = io_uring_get_sqe(&w->ring);
				if (!sqe)
					break;
				if (opcode == NVME_CMD_READ)
					io_uring_prep_read(sqe, op->io_fd, op->bounce,
							   (unsigned)op->len, op->io_off);
				else
					io_uring_prep_write(sqe, op->io_fd, op->bounce,
							    (unsigned)op->len, op->io_off);
				io_uring_sqe_set_data(sqe, op);
				inflight++;
				i++;
			}
			if (!inflight)
				break;
			io_uring_submit_and_wait(&w->ring, 1);
			while (io_uring_peek_cqe(&w->ring, &cqe) == 0) {
				struct gm_op *op = (struct gm_op *)io_uring_cqe_get_data(cqe);

				if (cqe->res != (int)op->len)
					op->status = opcode == NVME_CMD_READ ? GM_SC_READ_ERROR
									     : GM_SC_WRITE_FAULT;
				io_uring_cqe_seen(&w->ring, cqe);
				inflight--;
			}
		}
		return;
	}
#endif
	for (i = 0; i < n; i++) {
		struct gm_op *op = &ops[i];
		int bad;

		if (op->io_fd < 0 || op->opcode != opcode || op->status != NVME_SC_SUCCESS)
			continue;
		bad =
		    gm_rw_all(op->io_fd, op->bounce, op->len, op->io_off, opcode != NVME_CMD_READ);
		if (bad)
			op->status = opcode == NVME_CMD_READ ? GM_SC_READ_ERROR : GM_SC_WRITE_FAULT;
	}
}

static void gm_copy_batch(struct gm_worker *w, struct gm_op *ops, int n)
{
	static int batch_broken;
	int k = 0;

	for (int i = 0; i < n; i++) {
		uint8_t *h = ops[i].host;

		if (!ops[i].len || ops[i].status != NVME_SC_SUCCESS)
			continue;
		for (uint32_t j = 0; j < ops[i].nsegs; j++) {
			const struct lio_seg *sg = &w->segs[ops[i].seg0 + j];
			uint8_t *g = gm_gpa_ptr(w->c, sg->gpa);

			w->dsts[k] = ops[i].opcode == NVME_CMD_READ ? (void *)g : (void *)h;
			w->srcs[k] = ops[i].opcode == NVME_CMD_READ ? (const void *)h : g;
			w->sizes[k] = sg->len;
			h += sg->len;
			k++;
		}
	}
	if (!k)
		return;
	if (k > 1 && !batch_broken) {
		struct cudaMemcpyAttributes attr;
		size_t idx = 0;

		memset(&attr, 0, sizeof(attr));
		attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
		if (cudaMemcpyBatchAsync(w->dsts, w->srcs, w->sizes, k, &attr, &idx, 1,
					 w->stream) == cudaSuccess)
			return;
		cudaGetLastError();
		batch_broken = 1; /* fall back to one call per copy from now on */
	}
	for (int i = 0; i < k; i++)
		cudaMemcpyAsync(w->dsts[i], w->srcs[i], w->sizes[i], cudaMemcpyDefault, w->stream);
}

static void gm_complete(struct nvme_cqe *cq, uint32_t depth, uint32_t pos, uint16_t cid,
			uint16_t status, uint32_t qid)
{
	struct nvme_cqe *e = &cq[pos & (depth - 1)];
	uint16_t phase = ((pos / depth) & 1) ? 0 : 1;

	uint16_t *st = (uint16_t *)((uint8_t *)e + NVME_OFFSETOF(struct nvme_cqe, status));

	e->dw0 = 0;
	e->sq_head = (uint16_t)((pos + 1) & (depth - 1));
	e->sq_id = (uint16_t)qid;
	e->cid = cid;
	/* the phase flips last: the GPU reads the entry once it sees the new phase */
	__atomic_store_n(st, (uint16_t)((status << 1) | phase), __ATOMIC_RELEASE);
}

/* Serves SQ entries [head, tail) of queue qi; returns how many were completed. */
static uint32_t gm_serve_queue(struct gm_worker *w, uint32_t qi)
{
	struct gemini_ctx *c = w->c;
	uint32_t depth = c->cfg.qdepth;
	struct gm_qpair qp = gm_qpair_at(c->qmem, depth, qi);
	struct nvme_sqe *sq = qp.sq;
	struct nvme_cqe *cq = qp.cq;
	uint32_t *db = qp.db;
	uint32_t head = c->qhead[qi], tail = __atomic_load_n(db, __ATOMIC_ACQUIRE), n, done = 0;

	if (tail == head)
		return 0;
	/* a doorbell past a full queue is a protocol violation: serve at most one queue's worth */
	if (tail - head > depth)
		tail = head + depth;
	n = tail - head;
	if (n > GM_BATCH)
		n = GM_BATCH;
	w->used = 0;
	w->nsegs = 0;
	w->flush = 0;
	/*
	 * The run table's read lock is held until the batch is complete: G_close takes it for
	 * writing before it frees a file's namespace copy or closes its descriptor, so a batch
	 * (of this process's kernels or an importer's) never uses a file being closed.
	 */
	pthread_rwlock_rdlock(&c->runs_lock);
	gm_check_setup(w);
	for (uint32_t i = 0; i < n; i++) {
		struct nvme_sqe s;

		memcpy(&s, &sq[(head + i) & (depth - 1)], sizeof(s));
		w->ops[i].pos = head + i;
		w->ops[i].cid = s.cid;
		gm_prepare(w, &s, &w->ops[i]);
		if (w->ops[i].status == 0xffff) {
			n = i; /* bounce buffer full: the rest waits for the next pass */
			break;
		}
	}
	gm_phase(w, GM_PH_DISK_READ);
	gm_file_batch(w, w->ops, (int)n, NVME_CMD_READ);
	gm_phase(w, GM_PH_COPY);
	gm_copy_batch(w, w->ops, (int)n);
	if (cudaStreamSynchronize(w->stream) != cudaSuccess) {
		cudaGetLastError();
		for (uint32_t i = 0; i < n; i++)
			if (w->ops[i].len)
				w->ops[i].status = NVME_SC_DATA_XFER_ERROR;
	}
	gm_phase(w, GM_PH_DISK_WRITE);
	gm_file_batch(w, w->ops, (int)n, NVME_CMD_WRITE);
	if (w->flush) {
		int bad = 0;

		gm_phase(w, GM_PH_FLUSH);
		for (int f = 0; f < GEMINI_MAX_FILES; f++)
			if (c->files[f].open && c->files[f].writable && !c->files[f].mem)
				bad |= fdatasync(c->files[f].sysfd);
		if (c->rawfd >= 0)
			bad |= fdatasync(c->rawfd);
		for (uint32_t i = 0; i < n; i++)
			if (w->ops[i].opcode == NVME_CMD_FLUSH && bad)
				w->ops[i].status = GM_SC_WRITE_FAULT;
	}
	pthread_rwlock_unlock(&c->runs_lock);
	for (uint32_t i = 0; i < n; i++, done++)
		gm_complete(cq, depth, w->ops[i].pos, w->ops[i].cid, w->ops[i].status, qi + 1);
	__atomic_store_n(&c->qhead[qi], head + n, __ATOMIC_RELEASE);
	w->served += done;
	gm_phase(w, GM_PH_POLL);
	return done;
}

/*
 * GEMINI_WATCHDOG=S (seconds), a diagnostic for hangs, off by default: every S seconds it
 * prints how many commands were served, or, when none were, where every controller thread is,
 * each busy queue as the host sees it (doorbell against served) and as the GPU does (slots
 * reserved, doorbell rung, the next slot's turn), and the page cache (held shard locks, loading
 * and referenced pages, broken hash chains).
 */
static void gm_watch_report(struct gemini_ctx *c, const uint32_t *snap, int have_snap,
			    unsigned secs)
{
	uint32_t depth = c->cfg.qdepth;
	uint64_t now = gm_now_ns();

	fprintf(stderr, "gemini watchdog: no command completed for %u s\n", secs);
	for (int i = 0; i < c->nthreads; i++) {
		struct gm_worker *w = (struct gm_worker *)c->workers[i];

		fprintf(stderr, "  controller %d: %s for %llu ms, %llu commands served\n", i,
			gm_phase_name[w->phase],
			(unsigned long long)((now - w->phase_ns) / 1000000), w->served);
	}
	for (uint32_t qi = 0; qi < c->cfg.nqueues; qi++) {
		const uint32_t *db = gm_qpair_at(c->qmem, depth, qi).db;
		uint32_t tail = __atomic_load_n(db, __ATOMIC_ACQUIRE);
		uint32_t head = __atomic_load_n(&c->qhead[qi], __ATOMIC_ACQUIRE);
		const uint32_t *turn = snap + (size_t)qi * (depth + GM_CTL_WORDS),
			       *ctl = turn + depth;

		if (tail == head && (!have_snap || (ctl[0] == ctl[1] && ctl[1] == tail)))
			continue;
		fprintf(stderr, "  queue %u: doorbell %u, served %u", qi + 1, tail, head);
		if (have_snap) {
			uint32_t nx = ctl[1], slot = nx & (depth - 1);

			fprintf(
			    stderr,
			    "; GPU: %u slots reserved, doorbell rung to %u; slot %u (ticket %u) "
			    "has turn %u, wants %u%s",
			    ctl[0], ctl[1], slot, nx, turn[slot], 2 * (nx / depth),
			    ctl[GM_Q_DEAD] ? "; dead (a GPU wait ran past the bound)" : "");
		}
		fputc('\n', stderr);
	}
}

/* Copies n bytes of device memory on stream s into pinned dst, waiting at most a second. */
static int gm_watch_copy(void *dst, const void *src, size_t n, cudaStream_t s)
{
	if (cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, s) != cudaSuccess)
		return -1;
	for (int k = 0; k < 100; k++) {
		cudaError_t e = cudaStreamQuery(s);

		if (e == cudaSuccess)
			return 0;
		if (e != cudaErrorNotReady)
			return -1;
		usleep(10000);
	}
	return -1;
}

/*
 * The page cache as the GPU has it now: held shard locks, loading and referenced pages, and
 * hash chains that loop or share pages (a walk under a shard lock would never end). buf:
 * pinned, large enough for every array copied (gm_watch_bytes).
 */
static size_t gm_watch_bytes(const struct gemini_dev *h)
{
	return (size_t)h->nshards * (sizeof(struct gm_shard) + 4ull * h->nbuckets) +
	       16ull * h->npages + 32 * 4;
}

static void gm_watch_cache(struct gemini_ctx *c, cudaStream_t s, uint8_t *buf)
{
	const struct gemini_dev *h = &c->hdev;
	uint32_t np = h->npages, ns = h->nshards, nb = h->nbuckets * h->nshards;
	uint32_t shown = 0, loading = 0, held = 0, err = 0, bad = 0;
	struct gm_shard *sh = (struct gm_shard *)buf;
	uint32_t *st = (uint32_t *)(sh + ns);
	int *ref = (int *)(st + np), *hn = ref + np, *bk = hn + np;
	uint32_t *seen = (uint32_t *)(bk + nb), *wbe = seen + np;

	if (gm_watch_copy(sh, h->shards, ns * sizeof(*sh), s) ||
	    gm_watch_copy(st, h->state, np * 4ull, s) || gm_watch_copy(ref, h->ref, np * 4ull, s) ||
	    gm_watch_copy(hn, h->hnext, np * 4ull, s) ||
	    gm_watch_copy(bk, h->bucket, nb * 4ull, s) ||
	    gm_watch_copy(wbe, h->wb_err, 32 * 4, s)) {
		fprintf(stderr, "  cache: the snapshot did not complete within a second\n");
		return;
	}
	fprintf(stderr, "  cache: %u pages in %u shards; locked shards:", np, ns);
	for (uint32_t k = 0; k < ns; k++)
		if (sh[k].lock && shown++ < 16)
			fprintf(stderr, " %u", k);
	fprintf(stderr, " (%u)\n", shown);
	for (int f = 0; f < GEMINI_MAX_FILES; f++)
		if (wbe[f] != wbe[16 + f])
			fprintf(stderr, "  file %d: %u failed write-backs, G_sync covered %u\n", f,
				wbe[f], wbe[16 + f]);
	for (uint32_t i = 0; i < np; i++) {
		loading += st[i] == GM_PAGE_LOADING;
		err += st[i] == GM_PAGE_ERROR;
		held += ref[i] != 0;
		seen[i] = 0;
	}
	fprintf(stderr, "  pages: %u loading, %u failed, %u referenced\n", loading, err, held);
	for (uint32_t k = 0; k < nb; k++) {
		uint32_t steps = 0;

		for (int i = bk[k]; i >= 0 && (uint32_t)i < np && steps <= np; i = hn[i], steps++)
			if (seen[i]++ && bad++ < 8)
				fprintf(stderr, "    bucket %u (shard %u): page %d met twice\n", k,
					k / h->nbuckets, i);
	}
	if (bad)
		fprintf(stderr, "    %u hash-chain anomalies\n", bad);
	shown = 0;
	for (uint32_t i = 0; i < np && shown < 8; i++)
		if (ref[i] || st[i] == GM_PAGE_LOADING) {
			shown++;
			fprintf(stderr, "    page %u (shard %u): state %u, %d references\n", i,
				i / h->per_shard, st[i], ref[i]);
		}
	for (uint32_t k = 0, full; k < ns; k++) {
		full = 0;
		for (uint32_t i = k * h->per_shard; i < (k + 1) * h->per_shard; i++)
			full += ref[i] != 0;
		if (full == h->per_shard && shown++ < 16)
			fprintf(stderr, "    shard %u: every page referenced\n", k);
	}
}

static void *gm_watchdog(void *arg)
{
	struct gemini_ctx *c = (struct gemini_ctx *)arg;
	size_t bytes = (size_t)c->cfg.nqueues * (c->cfg.qdepth + GM_CTL_WORDS) * 4;
	size_t cbytes = gm_watch_bytes(&c->hdev);
	unsigned long long last = 0;
	cudaStream_t s = NULL;
	uint32_t *snap = NULL;
	uint8_t *cbuf = NULL;
	uint64_t since = gm_now_ns();

	cudaSetDevice(c->cfg.device);
	if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess ||
	    cudaHostAlloc((void **)&snap, bytes, cudaHostAllocDefault) != cudaSuccess ||
	    (cbytes < (1ull << 30) &&
	     cudaHostAlloc((void **)&cbuf, cbytes, cudaHostAllocDefault) != cudaSuccess)) {
		fprintf(stderr, "gemini watchdog: no stream or snapshot buffer, not started\n");
		return NULL;
	}
	while (!c->stop) {
		unsigned long long total = 0;
		int have;

		usleep(100000);
		if (gm_now_ns() - since < c->watchdog_s * 1000000000ull)
			continue;
		since = gm_now_ns();
		for (int i = 0; i < c->nthreads; i++)
			total += ((struct gm_worker *)c->workers[i])->served;
		if (total != last) {
			/* a heartbeat: slow progress and a hang look alike from outside */
			fprintf(stderr, "gemini watchdog: %llu commands served in the last %u s\n",
				total - last, c->watchdog_s);
			last = total;
			continue;
		}
		/* the GPU's ticket counters, copied on a stream of our own */
		have = gm_watch_copy(snap, c->turn_dev, bytes, s) == 0;
		if (!have)
			fprintf(stderr, "gemini watchdog: the GPU ticket snapshot did not complete "
					"within 1 s\n");
		gm_watch_report(c, snap, have, c->watchdog_s);
		if (cbuf)
			gm_watch_cache(c, s, cbuf);
	}
	cudaStreamSynchronize(s);
	cudaStreamDestroy(s);
	cudaFreeHost(snap);
	cudaFreeHost(cbuf);
	return NULL;
}

static void *gm_ctrl_thread(void *arg)
{
	struct gm_worker *w = (struct gm_worker *)arg;
	struct gemini_ctx *c = w->c;
	unsigned idle = 0;

	cudaSetDevice(c->cfg.device);
	while (!c->stop) {
		uint32_t did = 0;

		if (c->faults & GEMINI_FAULT_STALL) {
			/* injected: the controller stops serving, as if it had died */
			struct timespec ts = {0, 1000000};

			nanosleep(&ts, NULL);
			continue;
		}
		for (uint32_t q = (uint32_t)w->id; q < c->cfg.nqueues; q += (uint32_t)c->nthreads)
			did += gm_serve_queue(w, q);
		if (did) {
			idle = 0;
		} else if (++idle > 200000) {
			struct timespec ts = {0, 20000};

			nanosleep(&ts, NULL); /* long idle: stop burning a core */
		}
	}
	return NULL;
}

/* The whole disk holding the file system of the file (the map's offsets are disk relative). */
static int gm_open_raw(const struct gvdk_header *h, char *why, size_t n)
{
	char path[160], line[128], name[64] = "";
	FILE *f;
	int fd;

	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/%suevent", h->dev_major, h->dev_minor,
		 h->part_start ? "../" : "");
	f = fopen(path, "r");
	if (!f) {
		snprintf(why, n, "%s: %s", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "DEVNAME=", 8))
			snprintf(name, sizeof(name), "/dev/%.*s", (int)strcspn(line + 8, "\n"),
				 line + 8);
	fclose(f);
	fd = open(name, O_RDWR | O_DIRECT | O_CLOEXEC);
	if (fd < 0)
		snprintf(why, n, "%s: %s", name, strerror(errno));
	else
		snprintf(why, n, "%s", name);
	return fd;
}

int gm_backend_start(struct gemini_ctx *c)
{
	c->rawfd = -1;
	if (c->cfg.backend == GEMINI_BACKEND_LIO)
		return gm_lio_start(c); /* softssd serves the queues: no controller thread */
	c->qhead = (uint32_t *)calloc(c->cfg.nqueues, sizeof(uint32_t));
	if (!c->qhead)
		return gm_err(c, -ENOMEM, "gemini: out of memory for queue heads");
#ifdef GEMINI_HAVE_CUFILE
	if (c->cfg.backend == GEMINI_BACKEND_GDS) {
		CUfileError_t e = cuFileDriverOpen();

		if (e.err != CU_FILE_SUCCESS)
			return gm_err(c, -EIO, "gemini: cuFileDriverOpen failed: error %d (%s)",
				      (int)e.err, CUFILE_ERRSTR(e.err));
		c->gds_open = 1;
	}
#else
	if (c->cfg.backend == GEMINI_BACKEND_GDS)
		return gm_err(c, -ENOTSUP, "gemini: gds backend not built (no cufile.h here)");
#endif
	c->stop = 0;
	c->nthreads = (int)c->cfg.host_threads;
	for (int i = 0; i < c->nthreads; i++) {
		struct gm_worker *w = (struct gm_worker *)calloc(1, sizeof(*w));

		if (!w)
			return gm_err(c, -ENOMEM, "gemini: out of memory for controller %d", i);
		w->c = c;
		w->id = i;
		if (cudaStreamCreateWithFlags(&w->stream, cudaStreamNonBlocking) != cudaSuccess ||
		    cudaHostAlloc((void **)&w->bounce, GM_BOUNCE, cudaHostAllocDefault) !=
			cudaSuccess)
			return gm_err(c, -ENOMEM, "gemini: controller %d: no stream or bounce", i);
#ifdef GEMINI_HAVE_URING
		w->ring_ok = io_uring_queue_init(256, &w->ring, 0) == 0;
#endif
		c->workers[i] = w;
		gm_phase(w, GM_PH_POLL);
		if (pthread_create(&c->threads[i], NULL, gm_ctrl_thread, w))
			return gm_err(c, -EAGAIN, "gemini: cannot start controller thread %d", i);
	}
	{
		const char *e = getenv("GEMINI_WATCHDOG");
		char *end = (char *)"";
		unsigned long v = e ? strtoul(e, &end, 10) : 0;

		if (e && (*end || v > 3600))
			fprintf(stderr, "gemini: GEMINI_WATCHDOG=%s is not 0..3600 seconds\n", e);
		c->watchdog_s = (unsigned)v;
		if (v && v <= 3600 && !*end)
			c->watchdog_on = !pthread_create(&c->watchdog, NULL, gm_watchdog, c);
	}
	return 0;
}

void gm_backend_stop(struct gemini_ctx *c)
{
	c->stop = 1;
	if (c->cfg.backend == GEMINI_BACKEND_LIO)
		gm_lio_stop(c);
	if (c->watchdog_on)
		pthread_join(c->watchdog, NULL);
	c->watchdog_on = 0;
	for (int i = 0; i < c->nthreads; i++) {
		struct gm_worker *w = (struct gm_worker *)c->workers[i];

		pthread_join(c->threads[i], NULL);
		cudaStreamDestroy(w->stream);
		cudaFreeHost(w->bounce);
#ifdef GEMINI_HAVE_URING
		if (w->ring_ok)
			io_uring_queue_exit(&w->ring);
#endif
		free(w);
		c->workers[i] = NULL;
	}
	c->nthreads = 0;
	if (c->rawfd >= 0)
		close(c->rawfd);
#ifdef GEMINI_HAVE_CUFILE
	if (c->gds_open)
		cuFileDriverClose();
#endif
	free(c->qhead);
}

int gm_backend_open(struct gemini_ctx *c, int fd)
{
	struct gm_hfile *hf = &c->files[fd];
	char why[256] = "";

	switch (c->cfg.backend) {
	case GEMINI_BACKEND_LIO:
		return gm_lio_open(c, fd);
	case GEMINI_BACKEND_NVME:
		if (c->cfg.memory_namespace) {
			if (cudaHostAlloc((void **)&hf->mem, hf->hdr.file_size,
					  cudaHostAllocDefault) != cudaSuccess)
				return gm_err(c, -ENOMEM,
					      "G_open %s: no %llu bytes of pinned memory "
					      "for the memory namespace",
					      hf->path, (unsigned long long)hf->hdr.file_size);
			if (gm_rw_all(hf->sysfd, hf->mem, hf->hdr.file_size, 0, false)) {
				cudaFreeHost(hf->mem);
				hf->mem = NULL;
				return gm_err(c, -EIO,
					      "G_open %s: loading the memory namespace "
					      "failed",
					      hf->path);
			}
			snprintf(c->ns_desc, sizeof(c->ns_desc),
				 "nvme: software controller, namespace in host memory");
			return 0;
		}
		if (c->rawfd < 0)
			c->rawfd = gm_open_raw(&hf->hdr, why, sizeof(why));
		if (c->rawfd >= 0)
			snprintf(c->ns_desc, sizeof(c->ns_desc),
				 "nvme: software controller, namespace = raw disk %s (O_DIRECT)",
				 why);
		else
			snprintf(c->ns_desc, sizeof(c->ns_desc),
				 "nvme: software controller, namespace = the file's extents%s "
				 "(raw disk unavailable: %s)",
				 c->cfg.direct ? " (O_DIRECT)" : "", why);
		return 0;
	case GEMINI_BACKEND_POSIX:
		snprintf(c->ns_desc, sizeof(c->ns_desc), "posix proxy: pread/pwrite%s + cudaMemcpy",
			 c->cfg.direct ? " (O_DIRECT)" : "");
		return 0;
	case GEMINI_BACKEND_GDS:
#ifdef GEMINI_HAVE_CUFILE
	{
		CUfileDescr_t d;
		CUfileHandle_t h;
		CUfileError_t e;

		memset(&d, 0, sizeof(d));
		d.handle.fd = hf->sysfd;
		d.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
		e = cuFileHandleRegister(&h, &d);
		if (e.err != CU_FILE_SUCCESS)
			return gm_err(c, -EIO,
				      "G_open %s: cuFileHandleRegister failed: error %d "
				      "(%s)%s",
				      hf->path, (int)e.err, CUFILE_ERRSTR(e.err),
				      c->cfg.direct ? "" : "; gds needs O_DIRECT (config.direct)");
		hf->cufile = h;
		snprintf(c->ns_desc, sizeof(c->ns_desc), "gds proxy: cuFileRead/cuFileWrite");
		return 0;
	}
#else
		return gm_err(c, -ENOTSUP, "G_open: gds backend not built");
#endif
	}
	return gm_err(c, -EINVAL, "G_open: backend %d unknown", (int)c->cfg.backend);
}

void gm_backend_close(struct gemini_ctx *c, int fd)
{
	struct gm_hfile *hf = &c->files[fd];

	if (c->cfg.backend == GEMINI_BACKEND_LIO)
		gm_lio_close(c, fd);
	if (hf->mem) {
		/* the memory namespace is volatile: closing a writable file stores it back */
		if (hf->writable && !c->stop)
			gm_rw_all(hf->sysfd, hf->mem + hf->hdr.data_offset, hf->hdr.data_size,
				  hf->hdr.data_offset, true);
		cudaFreeHost(hf->mem);
		hf->mem = NULL;
	}
#ifdef GEMINI_HAVE_CUFILE
	if (hf->cufile) {
		cuFileHandleDeregister((CUfileHandle_t)hf->cufile);
		hf->cufile = NULL;
	}
#endif
}
