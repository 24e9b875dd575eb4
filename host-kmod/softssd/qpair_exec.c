/* softssd's execution of commands: each fetched SQE's private copy checked and run on the
 * worker's io_uring (or in its thread without one: sync_io), in stages (data, hole punches, the
 * sync of write-through), then its CQE posted now or when the device model says, and the irq
 * eventfd signalled. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "softssd/model.h"
#include "softssd/qpair_int.h"

/* ---- posting completions ---- */

static void ssd_post(struct ssd_worker *w, struct ssd_req *req)
{
	struct ssd_qp *qp = req->qp;
	const struct nvme_cqe c = {.sq_head = (uint16_t)qp->sq_head,
				   .sq_id = qp->sqid,
				   .cid = req->sqe.cid,
				   .status = req->status};

	/* the phase tag last: the guest may consume the entry the moment it flips */
	nvmeq_cqe_publish(&qp->cq[qp->cq_tail], &c, qp->phase);
	if (nvmeq_step(&qp->cq_tail, qp->cq_depth))
		qp->phase ^= 1;
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
void ssd_req_done(struct ssd_worker *w, struct ssd_req *req, uint64_t now)
{
	struct ssd_model *m = w->e->model;
	struct ssd_req **pp;
	int st = __atomic_load_n(&req->qp->state, __ATOMIC_ACQUIRE);

	if (!m || !ssd_model_active(m) || req->status || st == SSD_QP_DYING ||
	    st == SSD_QP_QUIESCING) {
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

unsigned ssd_post_due(struct ssd_worker *w, uint64_t now, bool all)
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

void ssd_irq_flush(struct ssd_qp *qp)
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

int ssd_read_prp(void *opaque, uint64_t gpa, uint64_t *out, unsigned n)
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

uint16_t ssd_dsm_ranges(struct ssd_req *req, struct nvme_dsm_range *r, unsigned *nr_out)
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
void ssd_req_start(struct ssd_worker *w, struct ssd_req *req, uint64_t now)
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
	if (w->nq) {
		ssd_nvme_start(w, req, now);
		return;
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

void ssd_reap(struct ssd_worker *w, uint64_t now, unsigned *work)
{
	struct io_uring_cqe *cqe;

	if (w->nq) {
		ssd_nvme_reap(w, now, work);
		return;
	}
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
