/* softssd's workers: each owns some queue pairs, an io_uring on the backing and an epoll set; it
 * fetches SQEs round-robin with a per-pass budget, checks each copy, runs it and posts the CQE. */
#include "softssd/qpair.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "softssd/model.h"

#define SSD_RING_ENTRIES    256 /* io_uring SQ size of one worker: its commands in flight */
#define SSD_QP_MAX_INFLIGHT 256 /* fetched-not-posted commands of one queue pair */
#define SSD_DSM_MAX_RANGES  256
#define SSD_IDLE_MIN_NS	    20000 /* first idle sleep on polled doorbells; doubles up to the limit */
#define SSD_TIMER_SLACK_NS                                                                         \
	2000 /* workers' timer slack: the default 50 us would swamp the above                      \
	      */
#define SSD_EV_WAKE ((uint64_t)0)
#define SSD_EV_RING ((uint64_t)1)

/* Where a command is on the ring: its data transfer (or flush), its hole punches (Write Zeroes,
 * Deallocate: one per range), then with the write cache off the fdatasync that makes them
 * durable. Each step is an operation on the worker's ring, so none of them ever blocks the worker
 * and its other queue pairs: the kernel's io-wq threads wait instead. */
enum ssd_stage { SSD_STAGE_IO, SSD_STAGE_PUNCH, SSD_STAGE_SYNC };

struct ssd_req {
	struct ssd_qp *qp;
	struct ssd_req *next;
	struct nvme_sqe sqe; /* the private copy: the only SQE bytes ever used */
	struct lio_io io;
	uint16_t status;
	bool direct;	 /* submitted on the O_DIRECT fd */
	uint8_t stage;	 /* enum ssd_stage */
	bool sync_after; /* the punches are followed by an fdatasync (write cache off) */
	uint32_t ops;	 /* ring operations of this stage not yet completed */
	uint64_t submit_ns, due_ns;
	struct iovec iov[LIO_CHECK_MAX_SEGS];
};

struct ssd_worker {
	struct ssd_engine *e;
	unsigned idx;
	pthread_t thr;
	struct io_uring ring;
	int ring_efd, wake_fd, epfd;
	pthread_mutex_t lock; /* qps, nqps, changed; the qp state DEAD hand-off */
	pthread_cond_t cond;
	struct ssd_qp **qps;
	unsigned nqps, cap;
	int changed;
	/* worker-private */
	struct ssd_qp **mine;
	unsigned nmine, mycap, rr;
	unsigned ring_inflight;
	struct ssd_req *due_head; /* model: completions held until due_ns, sorted */
	bool worked;
	bool sync_io;	  /* no io_uring here (a sandbox without it): commands run in this thread */
	uint64_t last_ns; /* ssd_clock_ns's last answer */
	uint64_t idle_ns; /* the next idle sleep while doorbells are polled: grows to the limit */
};

struct ssd_engine {
	int fd;
	int dfd; /* the backing again with O_DIRECT, or -1 */
	uint32_t lba_shift;
	struct ssd_model *model;
	unsigned nr;
	int stop;
	struct ssd_worker *w;
};

/* ---- the workers' clock ----
 * Read on every pass of every worker, so it must be cheap: the TSC scaled to nanoseconds when
 * the CPU says it is invariant (constant rate, runs through C-states: CPUID 0x80000007 EDX bit
 * 8), calibrated once against CLOCK_MONOTONIC; clock_gettime otherwise. On hosts whose
 * clocksource is not the TSC, clock_gettime is a system call; even through the vDSO it cost
 * 13-22% of a busy worker's samples (docs/bench/profiles.txt). */

#define SSD_TSC_CAL_NS 2000000 /* calibration window: 2 ms gives ~1e-5 of rate error */

static struct {
	bool tsc;
	uint64_t base_tsc, base_ns;
	uint64_t mult; /* ns per TSC tick, << 32 */
} ssd_clk;
static pthread_once_t ssd_clk_once = PTHREAD_ONCE_INIT;

static uint64_t ssd_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>

static void ssd_clk_calibrate(void)
{
	unsigned a, b, c, d;
	uint64_t t0, n0, t1, n1;

	if (getenv("SOFTSSD_CLOCK_MONO")) /* for comparing the two, and a way out */
		return;
	if (!__get_cpuid(0x80000000, &a, &b, &c, &d) || a < 0x80000007)
		return;
	__get_cpuid(0x80000007, &a, &b, &c, &d);
	if (!(d & (1u << 8)))
		return;
	n0 = ssd_mono_ns();
	t0 = __rdtsc();
	do
		n1 = ssd_mono_ns();
	while (n1 - n0 < SSD_TSC_CAL_NS);
	t1 = __rdtsc();
	/* a TSC slower than 100 MHz or faster than 20 GHz is not one to trust */
	if (t1 <= t0 || (t1 - t0) < SSD_TSC_CAL_NS / 10 || (t1 - t0) > SSD_TSC_CAL_NS * 20ull)
		return;
	ssd_clk.mult = (uint64_t)(((unsigned __int128)(n1 - n0) << 32) / (t1 - t0));
	ssd_clk.base_tsc = t1;
	ssd_clk.base_ns = n1;
	ssd_clk.tsc = true;
}

static inline uint64_t ssd_tsc_ns(void)
{
	uint64_t t = __rdtsc();

	/* another CPU's TSC may lag the base by a few ticks */
	if (t <= ssd_clk.base_tsc)
		return ssd_clk.base_ns;
	return ssd_clk.base_ns +
	       (uint64_t)(((unsigned __int128)(t - ssd_clk.base_tsc) * ssd_clk.mult) >> 32);
}
#else
static void ssd_clk_calibrate(void)
{
}

static inline uint64_t ssd_tsc_ns(void)
{
	return 0;
}
#endif

/* The worker's now, never going back (its thread may move to a CPU whose TSC lags). */
static inline uint64_t ssd_clock_ns(struct ssd_worker *w)
{
	uint64_t t = ssd_clk.tsc ? ssd_tsc_ns() : ssd_mono_ns();

	if (t < w->last_ns)
		return w->last_ns;
	w->last_ns = t;
	return t;
}

#define CTR_ADD(qp, f, v) __atomic_fetch_add(&(qp)->ctr.f, (v), __ATOMIC_RELAXED)

void ssd_counters_read(struct ssd_counters *lio_to, const struct ssd_counters *lio_from)
{
	LIO_COUNTERS_KEPT(LIO_COUNTER_COPY_ONCE)
}

void ssd_counters_add(struct ssd_counters *lio_to, const struct ssd_counters *lio_from)
{
	LIO_COUNTERS_KEPT(LIO_COUNTER_ADD_ONCE)
}

void *ssd_window_ptr(const struct ssd_window *w, uint64_t gpa, uint64_t len)
{
	unsigned i;

	if (!len || gpa + len < gpa)
		return NULL;
	for (i = 0; i < w->n; i++) {
		const struct lio_check_region *r = &w->cr[i];

		if (gpa >= r->gpa && gpa - r->gpa <= r->size && len <= r->size - (gpa - r->gpa))
			return w->host[i] + (gpa - r->gpa);
	}
	return NULL;
}

/* ---- posting completions ---- */

static void ssd_post(struct ssd_worker *w, struct ssd_req *req)
{
	struct ssd_qp *qp = req->qp;
	volatile struct nvme_cqe *cqe = &qp->cq[qp->cq_tail];
	uint16_t st = (uint16_t)(req->status << 1) | qp->phase;

	cqe->dw0 = 0;
	cqe->dw1 = 0;
	cqe->sq_head = (uint16_t)qp->sq_head;
	cqe->sq_id = qp->sqid;
	cqe->cid = req->sqe.cid;
	/* the phase tag last: the guest may consume the entry the moment it flips */
	__atomic_store_n(&cqe->status, st, __ATOMIC_RELEASE);
	if (++qp->cq_tail == qp->cq_depth) {
		qp->cq_tail = 0;
		qp->phase ^= 1;
	}
	CTR_ADD(qp, cmds, 1);
	if (req->status)
		CTR_ADD(qp, errors, 1);
	else if (req->io.kind == LIO_IO_READ)
		CTR_ADD(qp, read_bytes, req->io.bytes);
	else if (req->io.kind == LIO_IO_WRITE)
		CTR_ADD(qp, write_bytes, req->io.bytes);
	qp->inflight--;
	qp->irq_pending++;
	req->next = qp->free_reqs;
	qp->free_reqs = req;
	w->worked = true;
}

/* A command finished (backing I/O done, or refused): now, or when the model says. */
static void ssd_req_done(struct ssd_worker *w, struct ssd_req *req, uint64_t now)
{
	struct ssd_model *m = w->e->model;
	struct ssd_req **pp;

	if (!m || !ssd_model_active(m) || req->status ||
	    __atomic_load_n(&req->qp->state, __ATOMIC_ACQUIRE) == SSD_QP_DYING) {
		ssd_post(w, req);
		return;
	}
	req->due_ns = ssd_model_due(m, req->submit_ns, now);
	if (req->due_ns <= now) {
		ssd_post(w, req);
		return;
	}
	for (pp = &w->due_head; *pp && (*pp)->due_ns <= req->due_ns; pp = &(*pp)->next)
		;
	req->next = *pp;
	*pp = req;
}

static unsigned ssd_post_due(struct ssd_worker *w, uint64_t now, bool all)
{
	unsigned n = 0;

	while (w->due_head && (all || w->due_head->due_ns <= now)) {
		struct ssd_req *r = w->due_head;

		w->due_head = r->next;
		ssd_post(w, r);
		n++;
	}
	return n;
}

static void ssd_irq_flush(struct ssd_qp *qp)
{
	if (!qp->irq_pending)
		return;
	if (qp->irq_fd >= 0 && (qp->flags & LIO_QP_IRQ_ENABLED) &&
	    (!qp->irq_coalesce || qp->irq_pending >= qp->irq_coalesce || !qp->inflight)) {
		/* non-blocking: a client that lets its counter overflow loses interrupts, nothing
		 * more */
		if (eventfd_write(qp->irq_fd, 1) == 0)
			CTR_ADD(qp, irqs, 1);
		qp->irq_pending = 0;
	} else if (!(qp->flags & LIO_QP_IRQ_ENABLED)) {
		qp->irq_pending = 0;
	}
}

/* ---- running one checked command ---- */

static int ssd_read_prp(void *opaque, uint64_t gpa, uint64_t *out, unsigned n)
{
	const struct ssd_window *win = opaque;
	const uint64_t *p = ssd_window_ptr(win, gpa, (uint64_t)n * 8);
	unsigned i;

	if (!p)
		return -1;
	for (i = 0; i < n; i++)
		out[i] = __atomic_load_n(&p[i], __ATOMIC_RELAXED); /* each entry read once */
	return 0;
}

static bool ssd_in_bounds(const struct ssd_qp *qp, uint64_t lba, uint64_t nlb)
{
	return lba >= qp->lba_lo && nlb <= qp->lba_hi - qp->lba_lo &&
	       lba - qp->lba_lo <= qp->lba_hi - qp->lba_lo - nlb;
}

static struct io_uring_sqe *ssd_ring_sqe(struct ssd_worker *w)
{
	struct io_uring_sqe *s = io_uring_get_sqe(&w->ring);

	if (!s) {
		io_uring_submit(&w->ring);
		s = io_uring_get_sqe(&w->ring);
	}
	return s;
}

/* The DSM range list into r (private memory, read once), checked: 0 with *nr set, or the status.
 */
static uint16_t ssd_dsm_ranges(struct ssd_req *req, struct nvme_dsm_range *r, unsigned *nr_out)
{
	struct ssd_qp *qp = req->qp;
	unsigned nr = (unsigned)(req->io.bytes / sizeof(r[0])), i, got = 0;
	uint16_t st;

	if (!nr || nr > SSD_DSM_MAX_RANGES)
		return NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD) | NVME_STATUS_DNR;
	/* the range list into private memory, once, before it is checked */
	for (i = 0; i < req->io.nsegs && got < req->io.bytes; i++) {
		const struct lio_seg *s = &req->io.segs[i];
		uint32_t len = s->len;
		const void *p;

		if (len > req->io.bytes - got)
			len = (uint32_t)(req->io.bytes - got);
		p = ssd_window_ptr(qp->win, s->gpa, len);
		if (!p)
			return NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_DATA_XFER_ERROR);
		memcpy((uint8_t *)r + got, p, len);
		got += len;
	}
	if (got != req->io.bytes)
		return NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_DATA_XFER_ERROR);
	st = lio_dsm_check(&qp->chk, r, nr);
	if (st)
		return st;
	for (i = 0; i < nr; i++)
		if (r[i].nlb && !ssd_in_bounds(qp, r[i].slba, r[i].nlb))
			return NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_LBA_RANGE) | NVME_STATUS_DNR;
	*nr_out = nr;
	return 0;
}

/* DSM in the worker's thread (sync_io: no ring). */
static uint16_t ssd_dsm(struct ssd_worker *w, struct ssd_req *req)
{
	struct nvme_dsm_range r[SSD_DSM_MAX_RANGES];
	unsigned nr = 0, i;
	uint16_t st = ssd_dsm_ranges(req, r, &nr);

	if (st || !(req->io.dsm_attr & NVME_DSM_AD))
		return st;
	for (i = 0; i < nr; i++) {
		off_t off = (off_t)(r[i].slba << w->e->lba_shift);
		off_t len = (off_t)((uint64_t)r[i].nlb << w->e->lba_shift);

		/* deallocation is advisory: a backing that cannot punch holes keeps the data */
		if (len)
			fallocate(w->e->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, len);
	}
	return 0;
}

#define SSD_DIO_ALIGN 511 /* O_DIRECT: buffers and lengths in 512-byte units */

static bool ssd_direct_ok(const struct ssd_engine *e, const struct ssd_req *req)
{
	unsigned i;

	if (e->dfd < 0)
		return false;
	for (i = 0; i < req->io.nsegs; i++)
		if (((uintptr_t)req->iov[i].iov_base | req->iov[i].iov_len) & SSD_DIO_ALIGN)
			return false;
	return true;
}

static void ssd_prep_rw(const struct ssd_engine *e, struct io_uring_sqe *s, struct ssd_req *req)
{
	const struct lio_io *io = &req->io;
	int fd = req->direct ? e->dfd : e->fd;

	if (io->kind == LIO_IO_READ)
		io_uring_prep_readv(s, fd, req->iov, io->nsegs, io->dev_lba << e->lba_shift);
	else
		io_uring_prep_writev2(s, fd, req->iov, io->nsegs, io->dev_lba << e->lba_shift,
				      io->fua ? RWF_DSYNC : 0);
	io_uring_sqe_set_data(s, req);
}

/* A command carried out in the worker's thread (sync_io): the statuses ssd_reap gives. */
static void ssd_req_sync(struct ssd_worker *w, struct ssd_req *req)
{
	const struct lio_io *io = &req->io;
	const struct ssd_engine *e = w->e;
	off_t off = (off_t)(io->dev_lba << e->lba_shift);
	ssize_t n = 0;
	unsigned i;

	switch (io->kind) {
	case LIO_IO_READ:
	case LIO_IO_WRITE:
		for (i = 0; i < io->nsegs; i++) {
			void *p = ssd_window_ptr(req->qp->win, io->segs[i].gpa, io->segs[i].len);

			if (!p) {
				req->status =
				    NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_DATA_XFER_ERROR);
				return;
			}
			req->iov[i] = (struct iovec){p, io->segs[i].len};
		}
		if (io->kind == LIO_IO_READ)
			n = preadv(e->fd, req->iov, (int)io->nsegs, off);
		else
			n = pwritev2(e->fd, req->iov, (int)io->nsegs, off, io->fua ? RWF_DSYNC : 0);
		if (n < 0 || (uint64_t)n != io->bytes)
			req->status = io->kind == LIO_IO_READ
					  ? NVME_STATUS(NVME_SCT_MEDIA, NVME_SC_READ_ERROR)
					  : NVME_STATUS(NVME_SCT_MEDIA, NVME_SC_WRITE_FAULT);
		break;
	case LIO_IO_FLUSH:
		if (fdatasync(e->fd))
			req->status = NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_INTERNAL);
		break;
	case LIO_IO_ZEROES:
		if (fallocate(e->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off,
			      (off_t)((uint64_t)io->nlb << e->lba_shift)))
			req->status = errno == EOPNOTSUPP
					  ? NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_INVALID_OPCODE) |
						NVME_STATUS_DNR
					  : NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_INTERNAL);
		break;
	default:
		break;
	}
}

/* The fdatasync after a command's punches, on the ring. false when no SQE could be had. */
static bool ssd_sync_start(struct ssd_worker *w, struct ssd_req *req)
{
	struct io_uring_sqe *s = ssd_ring_sqe(w);

	if (!s)
		return false;
	io_uring_prep_fsync(s, w->e->fd, IORING_FSYNC_DATASYNC);
	io_uring_sqe_set_data(s, req);
	req->stage = SSD_STAGE_SYNC;
	req->ops = 1;
	w->ring_inflight++;
	return true;
}

/* Dataset Management: the range list read and checked here (private memory, quick), then one
 * hole punch per range on the ring (deallocation is advisory: a failed punch keeps the data and
 * is no error), then the sync when the write cache is off. */
static void ssd_dsm_start(struct ssd_worker *w, struct ssd_req *req, uint64_t now)
{
	struct nvme_dsm_range r[SSD_DSM_MAX_RANGES];
	unsigned nr = 0, i;

	req->status = ssd_dsm_ranges(req, r, &nr);
	if (req->status || !(req->io.dsm_attr & NVME_DSM_AD))
		goto done;
	req->stage = SSD_STAGE_PUNCH;
	req->ops = 0;
	for (i = 0; i < nr; i++) {
		struct io_uring_sqe *s;

		if (!r[i].nlb)
			continue;
		s = ssd_ring_sqe(w);
		if (!s)
			break; /* the rest is not deallocated: advisory, still a success */
		io_uring_prep_fallocate(s, w->e->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
					r[i].slba << w->e->lba_shift,
					(uint64_t)r[i].nlb << w->e->lba_shift);
		io_uring_sqe_set_data(s, req);
		req->ops++;
		w->ring_inflight++;
	}
	if (req->ops)
		return;
	if (req->sync_after && ssd_sync_start(w, req))
		return;
done:
	ssd_req_done(w, req, now);
}

/* Checks the private copy and starts it; refused or synchronous commands complete at once. */
static void ssd_req_start(struct ssd_worker *w, struct ssd_req *req, uint64_t now)
{
	struct ssd_qp *qp = req->qp;
	struct lio_io *io = &req->io;
	struct io_uring_sqe *s;
	unsigned i;
	uint16_t st;

	req->submit_ns = now;
	req->status = 0;
	st = lio_sqe_check(&qp->chk, &req->sqe, io);
	if (!st &&
	    (io->kind == LIO_IO_READ || io->kind == LIO_IO_WRITE || io->kind == LIO_IO_ZEROES) &&
	    !ssd_in_bounds(qp, io->dev_lba, io->nlb))
		st = NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_LBA_RANGE) | NVME_STATUS_DNR;
	if (st) {
		io->kind = LIO_IO_FLUSH; /* not counted as data */
		io->bytes = 0;
		req->status = st;
		CTR_ADD(qp, rejected, 1);
		ssd_req_done(w, req, now);
		return;
	}
	/* volatile write cache off: the write is durable before its CQE, as with FUA; zeroing and
	 * deallocation (holes punched) are synced before theirs */
	req->stage = SSD_STAGE_IO;
	req->sync_after = false;
	if (__atomic_load_n(&qp->write_through, __ATOMIC_RELAXED)) {
		if (io->kind == LIO_IO_WRITE) {
			io->fua = true;
			CTR_ADD(qp, syncs, 1);
		} else if (io->kind == LIO_IO_ZEROES ||
			   (io->kind == LIO_IO_DSM && (io->dsm_attr & NVME_DSM_AD))) {
			req->sync_after = true;
			CTR_ADD(qp, syncs, 1);
		}
	}
	if (w->sync_io) {
		/* a sandbox without io_uring: everything in this thread, slow commands too */
		if (io->kind == LIO_IO_DSM)
			req->status = ssd_dsm(w, req);
		else
			ssd_req_sync(w, req);
		if (!req->status && req->sync_after && fdatasync(w->e->fd))
			req->status = NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_INTERNAL);
		ssd_req_done(w, req, now);
		return;
	}
	if (io->kind == LIO_IO_DSM) {
		ssd_dsm_start(w, req, now);
		return;
	}
	s = ssd_ring_sqe(w);
	if (!s) {
		req->status = NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_INTERNAL);
		ssd_req_done(w, req, now);
		return;
	}
	switch (io->kind) {
	case LIO_IO_READ:
	case LIO_IO_WRITE:
		for (i = 0; i < io->nsegs; i++) {
			void *p = ssd_window_ptr(qp->win, io->segs[i].gpa, io->segs[i].len);

			if (!p) { /* the checker let through what the window cannot map */
				io_uring_prep_nop(s);
				io_uring_sqe_set_data(s, NULL);
				req->status =
				    NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_DATA_XFER_ERROR);
				ssd_req_done(w, req, now);
				w->ring_inflight++;
				return;
			}
			req->iov[i] = (struct iovec){p, io->segs[i].len};
		}
		req->direct = ssd_direct_ok(w->e, req);
		ssd_prep_rw(w->e, s, req);
		break;
	case LIO_IO_FLUSH:
		io_uring_prep_fsync(s, w->e->fd, IORING_FSYNC_DATASYNC);
		break;
	case LIO_IO_ZEROES:
		/* a punched range reads back as zeroes on files and block devices alike */
		io_uring_prep_fallocate(s, w->e->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
					io->dev_lba << w->e->lba_shift,
					(uint64_t)io->nlb << w->e->lba_shift);
		req->stage = SSD_STAGE_PUNCH;
		req->ops = 1;
		break;
	default:
		break;
	}
	io_uring_sqe_set_data(s, req);
	w->ring_inflight++;
}

static void ssd_reap(struct ssd_worker *w, uint64_t now, unsigned *work)
{
	struct io_uring_cqe *cqe;

	if (w->sync_io)
		return;
	while (io_uring_peek_cqe(&w->ring, &cqe) == 0) {
		struct ssd_req *req = io_uring_cqe_get_data(cqe);
		int res = cqe->res;

		io_uring_cqe_seen(&w->ring, cqe);
		w->ring_inflight--;
		(*work)++;
		if (!req)
			continue;
		if (req->stage == SSD_STAGE_PUNCH) {
			/* Write Zeroes must zero; a Deallocate's punch is advisory */
			if (res < 0 && req->io.kind == LIO_IO_ZEROES && !req->status)
				req->status =
				    res == -EOPNOTSUPP
					? NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_INVALID_OPCODE) |
					      NVME_STATUS_DNR
					: NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_INTERNAL);
			if (--req->ops)
				continue;
			if (!req->status && req->sync_after) {
				if (ssd_sync_start(w, req))
					continue;
				req->status = NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_INTERNAL);
			}
			ssd_req_done(w, req, now);
			continue;
		}
		if (req->stage == SSD_STAGE_SYNC) {
			if (res < 0)
				req->status = NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_INTERNAL);
			ssd_req_done(w, req, now);
			continue;
		}
		if (res == -EINVAL && req->direct) {
			/* an alignment the device refuses for O_DIRECT: once more through the cache
			 */
			struct io_uring_sqe *s = ssd_ring_sqe(w);

			req->direct = false;
			if (s) {
				ssd_prep_rw(w->e, s, req);
				w->ring_inflight++;
				continue;
			}
		}
		if (res < 0 || ((req->io.kind == LIO_IO_READ || req->io.kind == LIO_IO_WRITE) &&
				(uint64_t)res != req->io.bytes)) {
			if (req->io.kind == LIO_IO_READ)
				req->status = NVME_STATUS(NVME_SCT_MEDIA, NVME_SC_READ_ERROR);
			else if (req->io.kind == LIO_IO_WRITE)
				req->status = NVME_STATUS(NVME_SCT_MEDIA, NVME_SC_WRITE_FAULT);
			else if (req->io.kind == LIO_IO_ZEROES && res == -EOPNOTSUPP)
				req->status =
				    NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_INVALID_OPCODE) |
				    NVME_STATUS_DNR;
			else
				req->status = NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_INTERNAL);
		}
		ssd_req_done(w, req, now);
	}
}

/* ---- fetching ---- */

static uint32_t ssd_load_db(const uint32_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

/* Starts up to SSD_QP_BUDGET new commands of qp. */
static unsigned ssd_qp_fetch(struct ssd_worker *w, struct ssd_qp *qp, uint64_t now)
{
	uint32_t tail = ssd_load_db(qp->sq_tail_db), cqh = ssd_load_db(qp->cq_head_db);
	unsigned n = 0;

	if (cqh < qp->cq_depth)
		qp->cq_head = cqh;
	if (tail >= qp->sq_depth || cqh >= qp->cq_depth) {
		/* a real controller would post an asynchronous event; this one ignores the write */
		if (!qp->bad_db)
			CTR_ADD(qp, errors, 1);
		qp->bad_db = true;
		if (tail >= qp->sq_depth)
			return 0;
	}
	qp->last_tail = tail;
	qp->stalled = false;
	while (qp->sq_head != tail && n < SSD_QP_BUDGET) {
		uint32_t used = (qp->cq_tail + qp->cq_depth - qp->cq_head) % qp->cq_depth;
		struct ssd_req *req;

		if (used + qp->inflight >= qp->cq_depth - 1 || !qp->free_reqs) {
			/* never overwrite an entry the guest has not consumed */
			qp->stalled = used + qp->inflight >= qp->cq_depth - 1;
			break;
		}
		if (w->ring_inflight >= SSD_RING_ENTRIES)
			break;
		req = qp->free_reqs;
		qp->free_reqs = req->next;
		memcpy(&req->sqe, &qp->sq[qp->sq_head], sizeof(req->sqe));
		if (++qp->sq_head == qp->sq_depth)
			qp->sq_head = 0;
		qp->inflight++;
		ssd_req_start(w, req, now);
		n++;
	}
	if (n)
		CTR_ADD(qp, polls, 1);
	return n;
}

/* ---- the worker's queue-pair set ---- */

static void ssd_worker_sync(struct ssd_worker *w)
{
	unsigned i;

	if (!__atomic_load_n(&w->changed, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&w->lock);
	w->changed = 0;
	if (w->mycap < w->nqps) {
		struct ssd_qp **m = realloc(w->mine, w->nqps * sizeof(*m));

		if (!m) { /* keep the old set; try again on the next pass */
			w->changed = 1;
			pthread_mutex_unlock(&w->lock);
			return;
		}
		w->mine = m;
		w->mycap = w->nqps;
	}
	memcpy(w->mine, w->qps, w->nqps * sizeof(*w->mine));
	w->nmine = w->nqps;
	for (i = 0; i < w->nmine; i++) {
		struct ssd_qp *qp = w->mine[i];

		if (qp->state == SSD_QP_NEW) {
			if (qp->db_fd >= 0) {
				struct epoll_event ev = {.events = EPOLLIN, .data.ptr = qp};

				epoll_ctl(w->epfd, EPOLL_CTL_ADD, qp->db_fd, &ev);
			}
			__atomic_store_n(&qp->state, SSD_QP_ACTIVE, __ATOMIC_RELEASE);
		}
	}
	pthread_mutex_unlock(&w->lock);
}

/* A dying queue pair leaves once nothing it fetched is outstanding. */
static void ssd_worker_reap_dying(struct ssd_worker *w)
{
	unsigned i, j;

	for (i = 0; i < w->nmine; i++) {
		struct ssd_qp *qp = w->mine[i];

		if (__atomic_load_n(&qp->state, __ATOMIC_ACQUIRE) != SSD_QP_DYING || qp->inflight)
			continue;
		ssd_irq_flush(qp);
		if (qp->db_fd >= 0)
			epoll_ctl(w->epfd, EPOLL_CTL_DEL, qp->db_fd, NULL);
		/* out of the private set first: once DEAD, the qp may be freed at any moment */
		w->mine[i--] = w->mine[--w->nmine];
		pthread_mutex_lock(&w->lock);
		for (j = 0; j < w->nqps; j++) {
			if (w->qps[j] == qp) {
				w->qps[j] = w->qps[--w->nqps];
				break;
			}
		}
		w->changed = 1;
		__atomic_store_n(&qp->state, SSD_QP_DEAD, __ATOMIC_RELEASE);
		pthread_cond_broadcast(&w->cond);
		pthread_mutex_unlock(&w->lock);
	}
}

/* Re-reads every doorbell after publishing EventIdx: true when work arrived meanwhile. */
static bool ssd_worker_recheck(struct ssd_worker *w, bool *watch)
{
	unsigned i;

	*watch = false;
	for (i = 0; i < w->nmine; i++) {
		struct ssd_qp *qp = w->mine[i];

		if (qp->state != SSD_QP_ACTIVE)
			continue;
		if (qp->eventidx)
			__atomic_store_n(qp->eventidx, qp->sq_head, __ATOMIC_RELEASE);
		if ((qp->flags & LIO_QP_DB_POLL) || qp->stalled)
			*watch = true;
	}
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	for (i = 0; i < w->nmine; i++) {
		struct ssd_qp *qp = w->mine[i];
		uint32_t t;

		if (qp->state != SSD_QP_ACTIVE || qp->stalled)
			continue;
		t = ssd_load_db(qp->sq_tail_db);
		if (t < qp->sq_depth && t != qp->sq_head)
			return true;
	}
	return false;
}

static void ssd_worker_sleep(struct ssd_worker *w, uint64_t now)
{
	struct epoll_event ev[32];
	uint64_t timeout_ns = UINT64_MAX;
	struct timespec ts;
	int n, i;
	bool watch;

	if (ssd_worker_recheck(w, &watch))
		return;
	if (watch) {
		/* a doorbell page cannot wake us: sleep short after the last work, longer the
		 * longer nothing comes, so that a queue idle for a moment is seen within
		 * microseconds and an idle one costs a wake-up per SSD_POLL_SLEEP_MS */
		timeout_ns = w->idle_ns;
		w->idle_ns *= 2;
		if (w->idle_ns > SSD_POLL_SLEEP_MS * 1000000ull)
			w->idle_ns = SSD_POLL_SLEEP_MS * 1000000ull;
	}
	/* the model's next completion to the nanosecond (epoll_pwait2): an 80 us device must not
	 * become a 1 ms one because its worker went to sleep */
	if (w->due_head) {
		uint64_t rem = w->due_head->due_ns > now ? w->due_head->due_ns - now : 0;

		if (rem < timeout_ns)
			timeout_ns = rem;
	}
	if (w->worked) {
		for (i = 0; i < (int)w->nmine; i++)
			CTR_ADD(w->mine[i], sleeps, 1);
		w->worked = false;
	}
	ts.tv_sec = (time_t)(timeout_ns / 1000000000ull);
	ts.tv_nsec = (long)(timeout_ns % 1000000000ull);
	n = epoll_pwait2(w->epfd, ev, 32, timeout_ns == UINT64_MAX ? NULL : &ts, NULL);
	for (i = 0; i < n; i++) {
		eventfd_t v;

		if (ev[i].data.u64 == SSD_EV_WAKE)
			eventfd_read(w->wake_fd, &v);
		else if (ev[i].data.u64 == SSD_EV_RING)
			eventfd_read(w->ring_efd, &v);
		else
			eventfd_read(((struct ssd_qp *)ev[i].data.ptr)->db_fd, &v);
	}
}

static void *ssd_worker_main(void *arg)
{
	struct ssd_worker *w = arg;
	uint64_t idle_since = 0;
	bool dozing = false;

	w->idle_ns = SSD_IDLE_MIN_NS;
	while (!__atomic_load_n(&w->e->stop, __ATOMIC_ACQUIRE)) {
		/* one clock read per pass (two while the model holds completions) */
		uint64_t now = ssd_clock_ns(w);
		unsigned work = 0, i, n;

		ssd_worker_sync(w);
		n = w->nmine;
		for (i = 0; i < n; i++) {
			struct ssd_qp *qp = w->mine[(w->rr + i) % n];

			if (__atomic_load_n(&qp->state, __ATOMIC_ACQUIRE) == SSD_QP_ACTIVE)
				work += ssd_qp_fetch(w, qp, now);
		}
		if (n)
			w->rr = (w->rr + 1) % n;
		if (w->ring_inflight)
			io_uring_submit(&w->ring);
		ssd_reap(w, now, &work);
		if (w->due_head)
			work += ssd_post_due(w, ssd_clock_ns(w), false);
		for (i = 0; i < n; i++)
			ssd_irq_flush(w->mine[i]);
		ssd_worker_reap_dying(w);
		if (work) {
			idle_since = 0;
			dozing = false;
			w->idle_ns = SSD_IDLE_MIN_NS;
			continue;
		}
		if (!idle_since)
			idle_since = now;
		/* spin a while after the last work; once asleep, a pass that finds nothing
		 * sleeps again at once (the spin would cost SSD_SPIN_NS per sleep when idle) */
		if (!dozing && (now - idle_since < SSD_SPIN_NS ||
				(w->ring_inflight && now - idle_since < 2 * SSD_SPIN_NS)))
			continue;
		ssd_worker_sleep(w, now);
		dozing = true;
	}
	/* stopping: wait out what the kernel still holds, then post everything */
	while (w->ring_inflight) {
		unsigned work = 0;

		io_uring_submit_and_wait(&w->ring, 1);
		ssd_reap(w, ssd_clock_ns(w), &work);
	}
	ssd_post_due(w, 0, true);
	return NULL;
}

/* ---- engine ---- */

static int ssd_worker_ring(struct ssd_worker *w, char *err, unsigned errlen)
{
	struct io_uring_restriction res[] = {
	    {.opcode = IORING_RESTRICTION_SQE_OP, .sqe_op = IORING_OP_READV},
	    {.opcode = IORING_RESTRICTION_SQE_OP, .sqe_op = IORING_OP_WRITEV},
	    {.opcode = IORING_RESTRICTION_SQE_OP, .sqe_op = IORING_OP_FSYNC},
	    {.opcode = IORING_RESTRICTION_SQE_OP, .sqe_op = IORING_OP_FALLOCATE},
	    {.opcode = IORING_RESTRICTION_SQE_OP, .sqe_op = IORING_OP_NOP},
	};
	struct epoll_event ev = {.events = EPOLLIN};
	int r;

	r = io_uring_queue_init(SSD_RING_ENTRIES, &w->ring, IORING_SETUP_R_DISABLED);
	if (r == -ENOSYS || r == -EPERM || r == -EINVAL) {
		/* a sandbox without io_uring (gVisor's default): slower, but serving */
		fprintf(stderr,
			"softssd worker %u: io_uring set-up: %s: commands run synchronously\n",
			w->idx, strerror(-r));
		w->sync_io = true;
	} else if (r) {
		snprintf(err, errlen, "softssd worker %u: io_uring set-up: %s", w->idx,
			 strerror(-r));
		return r;
	}
	w->ring_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	w->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	w->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (w->ring_efd < 0 || w->wake_fd < 0 || w->epfd < 0) {
		snprintf(err, errlen, "softssd worker %u: eventfd/epoll: %s", w->idx,
			 strerror(errno));
		return -errno;
	}
	ev.data.u64 = SSD_EV_WAKE;
	epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->wake_fd, &ev);
	if (w->sync_io)
		return 0;
	r = io_uring_register_eventfd(&w->ring, w->ring_efd);
	/* only the operations above, for the life of the ring: no registration after this */
	/* the raw register calls: Debian's liburing 2.3 does not export the two wrappers */
	if (!r)
		r = io_uring_register((unsigned)w->ring.ring_fd, IORING_REGISTER_RESTRICTIONS, res,
				      sizeof(res) / sizeof(res[0]));
	if (!r)
		r = io_uring_register((unsigned)w->ring.ring_fd, IORING_REGISTER_ENABLE_RINGS, NULL,
				      0);
	if (r) {
		snprintf(err, errlen, "softssd worker %u: io_uring restrictions: %s", w->idx,
			 strerror(-r));
		return r;
	}
	ev.data.u64 = SSD_EV_RING;
	epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->ring_efd, &ev);
	return 0;
}

int ssd_engine_start(struct ssd_engine **out, int backing_fd, int direct_fd, uint32_t lba_shift,
		     unsigned nr, struct ssd_model *model, char *err, unsigned errlen)
{
	struct ssd_engine *e = calloc(1, sizeof(*e));
	unsigned i;
	int r, slack;

	if (!e)
		return -ENOMEM;
	e->fd = backing_fd;
	e->dfd = direct_fd;
	e->lba_shift = lba_shift;
	e->model = model;
	e->w = calloc(nr, sizeof(*e->w));
	if (!e->w) {
		free(e);
		return -ENOMEM;
	}
	pthread_once(&ssd_clk_once, ssd_clk_calibrate);
	/* threads inherit their creator's timer slack: the workers' short idle sleeps need a small
	 * one, set here because a worker may not call prctl once the daemon's filter is in place */
	slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
	if (slack > 0)
		prctl(PR_SET_TIMERSLACK, SSD_TIMER_SLACK_NS, 0, 0, 0);
	for (i = 0; i < nr; i++) {
		struct ssd_worker *w = &e->w[i];

		w->e = e;
		w->idx = i;
		w->ring_efd = w->wake_fd = w->epfd = -1;
		pthread_mutex_init(&w->lock, NULL);
		pthread_cond_init(&w->cond, NULL);
		r = ssd_worker_ring(w, err, errlen);
		if (!r) {
			r = -pthread_create(&w->thr, NULL, ssd_worker_main, w);
			if (r)
				snprintf(err, errlen, "softssd worker %u: thread: %s", i,
					 strerror(-r));
		}
		if (r) {
			if (slack > 0)
				prctl(PR_SET_TIMERSLACK, (unsigned long)slack, 0, 0, 0);
			e->nr = i;
			ssd_engine_stop(e);
			return r;
		}
	}
	if (slack > 0)
		prctl(PR_SET_TIMERSLACK, (unsigned long)slack, 0, 0, 0);
	e->nr = nr;
	*out = e;
	return 0;
}

static void ssd_worker_wake(struct ssd_worker *w)
{
	eventfd_write(w->wake_fd, 1);
}

void ssd_engine_stop(struct ssd_engine *e)
{
	unsigned i;

	if (!e)
		return;
	__atomic_store_n(&e->stop, 1, __ATOMIC_RELEASE);
	for (i = 0; i < e->nr; i++) {
		ssd_worker_wake(&e->w[i]);
		pthread_join(e->w[i].thr, NULL);
	}
	for (i = 0; i < e->nr; i++) {
		struct ssd_worker *w = &e->w[i];

		if (!w->sync_io)
			io_uring_queue_exit(&w->ring);
		close(w->ring_efd);
		close(w->wake_fd);
		close(w->epfd);
		free(w->qps);
		free(w->mine);
	}
	free(e->w);
	free(e);
}

unsigned ssd_engine_workers(const struct ssd_engine *e)
{
	return e->nr;
}

int ssd_qp_start(struct ssd_engine *e, struct ssd_qp *qp)
{
	struct ssd_worker *w = &e->w[0];
	unsigned i,
	    n = qp->cq_depth - 1 < SSD_QP_MAX_INFLIGHT ? qp->cq_depth - 1 : SSD_QP_MAX_INFLIGHT;

	for (i = 1; i < e->nr; i++)
		if (e->w[i].nqps < w->nqps)
			w = &e->w[i];
	qp->reqs = calloc(n, sizeof(*qp->reqs));
	if (!qp->reqs)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		qp->reqs[i].qp = qp;
		qp->reqs[i].next = i + 1 < n ? &qp->reqs[i + 1] : NULL;
	}
	qp->free_reqs = &qp->reqs[0];
	qp->phase = 1;
	qp->chk.read_prp = ssd_read_prp;
	qp->chk.opaque = (void *)qp->win;
	qp->w = w;
	qp->state = SSD_QP_NEW;
	pthread_mutex_lock(&w->lock);
	if (w->nqps == w->cap) {
		unsigned cap = w->cap ? w->cap * 2 : 16;
		struct ssd_qp **q = realloc(w->qps, cap * sizeof(*q));

		if (!q) {
			pthread_mutex_unlock(&w->lock);
			free(qp->reqs);
			qp->reqs = NULL;
			return -ENOMEM;
		}
		w->qps = q;
		w->cap = cap;
	}
	w->qps[w->nqps++] = qp;
	__atomic_store_n(&w->changed, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&w->lock);
	ssd_worker_wake(w);
	return 0;
}

void ssd_qp_stop(struct ssd_qp *qp)
{
	struct ssd_worker *w = qp->w;

	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	if (qp->state == SSD_QP_NEW) { /* never seen by the worker: just take it out */
		unsigned j;

		for (j = 0; j < w->nqps; j++) {
			if (w->qps[j] == qp) {
				w->qps[j] = w->qps[--w->nqps];
				break;
			}
		}
		w->changed = 1;
		qp->state = SSD_QP_DEAD;
	}
	if (qp->state != SSD_QP_DEAD)
		__atomic_store_n(&qp->state, SSD_QP_DYING, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&w->lock);
	ssd_worker_wake(w);
	pthread_mutex_lock(&w->lock);
	while (__atomic_load_n(&qp->state, __ATOMIC_ACQUIRE) != SSD_QP_DEAD)
		pthread_cond_wait(&w->cond, &w->lock);
	pthread_mutex_unlock(&w->lock);
	qp->w = NULL;
}

void ssd_qp_free(struct ssd_qp *qp)
{
	if (!qp)
		return;
	free(qp->reqs);
	if (qp->db_fd >= 0)
		close(qp->db_fd);
	if (qp->irq_fd >= 0)
		close(qp->irq_fd);
	free(qp);
}
