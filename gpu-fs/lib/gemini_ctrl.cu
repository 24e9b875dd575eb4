// libgemini's in-process controller: the host threads that serve the GPU-built NVMe queues
// (software NVMe controller over host memory or the disk, posix proxy, cuFile proxy). The GPU
// side is untrusted: every SQE goes through the shared checker, lio_sqe_check, as softssd's do.
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime.h>
#ifdef GEMINI_HAVE_CUFILE
#include <cufile.h>
#endif
#ifdef GEMINI_HAVE_URING
#include <liburing.h>
#endif

#include "gemini_ctrl.h"
#include "lightiov/nvmeq.h"

#define GM_STATUS(sct, sc) (NVME_STATUS(sct, sc) | NVME_STATUS_DNR)

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
int gm_rw_all(int fd, void *buf, size_t len, uint64_t off, bool write)
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

/* Posts the completion of the command at position pos of the queue's sequence (the doorbell is
 * free running): its CQ slot, tagged with that position's phase, the status word last. */
static void gm_complete(struct nvme_cqe *cq, uint32_t depth, uint32_t pos, uint16_t cid,
			uint16_t status, uint32_t qid)
{
	uint32_t slot = pos & (depth - 1);
	struct nvme_cqe e;

	memset(&e, 0, sizeof(e));
	e.sq_head = (uint16_t)nvmeq_next(slot, depth);
	e.sq_id = (uint16_t)qid;
	e.cid = cid;
	e.status = status;
	nvmeq_cqe_publish(&cq[slot], &e, nvmeq_pos_phase(pos, depth));
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
	 * The run table's read lock is held until the batch is complete: gemini_close takes it for
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

void *gm_ctrl_thread(void *arg)
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
