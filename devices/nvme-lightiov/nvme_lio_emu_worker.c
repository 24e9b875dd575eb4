/* The emulate path's worker thread: reads and writes of up to one command's size go to the SSD
 * with as many in flight as its SQ holds (up to EMU_DEPTH_MAX - 1), each in pages of a shared
 * bounce pool, placed in batches with one doorbell per batch and reaped in batches; anything
 * else runs alone, in order, once nothing else is in flight (nvme_lio_emu_exec). */
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>

#include "nvme_int.h"
#include "nvme_lio_emu_int.h"

/* A read or write one command carries (MDTS): it can go while others are in flight. */
static bool emu_pipelined(const struct nvme_lio_emu *e, const struct nvme_io_req *r)
{
	return (r->op == NVME_IO_READ || r->op == NVME_IO_WRITE) && !r->fua && r->len &&
	       r->len <= EMU_CHUNK && !(r->len % EMU_LBA) && !(r->off % EMU_LBA);
}

static unsigned emu_pages(const struct nvme_io_req *r)
{
	return (unsigned)((r->len + LIO_PAGE_SIZE - 1) / LIO_PAGE_SIZE);
}

/* Copies between a request's iovecs and the slot's pool pages (req->len bytes). */
static void emu_copy(struct nvme_lio_emu *e, struct emu_slot *sl, bool to_buf)
{
	struct nvme_io_req *req = sl->req;
	uint64_t k = 0;

	for (unsigned i = 0; i < req->niov && k < req->len; i++) {
		uint8_t *p = req->iov[i].iov_base;
		uint64_t left =
		    req->iov[i].iov_len < req->len - k ? req->iov[i].iov_len : req->len - k;

		while (left) {
			uint64_t in = k % LIO_PAGE_SIZE, m = LIO_PAGE_SIZE - in;
			uint8_t *b =
			    e->pool + (uint64_t)sl->pg[k / LIO_PAGE_SIZE] * LIO_PAGE_SIZE + in;

			m = m < left ? m : left;
			if (to_buf)
				memcpy(b, p, m);
			else
				memcpy(p, b, m);
			p += m;
			k += m;
			left -= m;
		}
	}
}

static uint64_t emu_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The slot's pages as PRPs (whole pages of the window, EMU_XFER_PAGES at most: one list page),
 * the list in the slot's own page. */
static void emu_prp(struct nvme_lio_emu *e, struct emu_slot *sl, struct nvme_sqe *sqe)
{
	sqe->prp1 = e->pool_gpa + (uint64_t)sl->pg[0] * LIO_PAGE_SIZE;
	sqe->prp2 = 0;
	if (sl->npg == 2)
		sqe->prp2 = e->pool_gpa + (uint64_t)sl->pg[1] * LIO_PAGE_SIZE;
	if (sl->npg <= 2)
		return;
	for (unsigned k = 1; k < sl->npg; k++)
		sl->prp[k - 1] = e->pool_gpa + (uint64_t)sl->pg[k] * LIO_PAGE_SIZE;
	sqe->prp2 = sl->prp_gpa;
}

/* Whether req can be placed now: a free slot and pages enough. */
static bool emu_room(const struct nvme_lio_emu *e, const struct nvme_io_req *req)
{
	return e->nfree_slot && e->nfree_pg >= emu_pages(req);
}

/* Places req on the SQ in a slot with its pages (emu_room said there is one; the caller rings).
 * 0, or the guest's status when it cannot go. */
static uint16_t emu_start(struct nvme_lio_emu *e, struct nvme_io_req *req, uint64_t now)
{
	bool write = req->op == NVME_IO_WRITE;
	uint64_t lba = req->off / EMU_LBA;
	struct nvme_sqe sqe = {.opcode = write ? NVME_CMD_WRITE : NVME_CMD_READ, .nsid = 1};
	struct emu_slot *sl;
	unsigned si;

	if (__atomic_load_n(&e->failed, __ATOMIC_ACQUIRE) ||
	    __atomic_load_n(&e->stop, __ATOMIC_ACQUIRE))
		return NVME_GENERIC(NVME_SC_INTERNAL);
	si = e->free_slot[--e->nfree_slot];
	sl = &e->slot[si];
	sl->req = req;
	sl->npg = emu_pages(req);
	for (unsigned k = 0; k < sl->npg; k++)
		sl->pg[k] = e->free_pg[--e->nfree_pg];
	if (write)
		emu_copy(e, sl, true);
	sqe.cdw10 = (uint32_t)lba;
	sqe.cdw11 = (uint32_t)(lba >> 32);
	sqe.cdw12 = (uint32_t)(req->len / EMU_LBA) - 1;
	emu_prp(e, sl, &sqe);
	/* the slot names the command; its use count keeps a completion the SSD repeats late
	 * from being taken for the slot's next command */
	sl->uses++;
	sl->cid = (uint16_t)(si | (unsigned)sl->uses << 8);
	sqe.cid = sl->cid;
	if (lio_drv_queue(e->d, 0, &sqe)) { /* the SQ holds every slot: not expected */
		for (unsigned k = sl->npg; k--;)
			e->free_pg[e->nfree_pg++] = sl->pg[k];
		sl->req = NULL;
		e->free_slot[e->nfree_slot++] = si;
		return NVME_GENERIC(NVME_SC_INTERNAL);
	}
	sl->t0_ns = now;
	e->inflight++;
	return NVME_OK;
}

/* The slot's request is over (its status set): pages and slot back; the caller completes the
 * request it returns. */
static struct nvme_io_req *emu_finish(struct nvme_lio_emu *e, struct emu_slot *sl)
{
	struct nvme_io_req *req = sl->req;

	for (unsigned k = sl->npg; k--;)
		e->free_pg[e->nfree_pg++] = sl->pg[k];
	sl->req = NULL;
	e->free_slot[e->nfree_slot++] = (unsigned)(sl - e->slot);
	e->inflight--;
	return req;
}

/* A command in flight for longer than the timeout: as emu_io's timeout, every request in flight
 * fails and no bounce page is used again (none goes back to the pool). */
static void emu_lost(struct nvme_lio_emu *e)
{
	__atomic_store_n(&e->failed, true, __ATOMIC_RELEASE);
	fprintf(stderr,
		"vnvme %s: ssd command timed out: the controller fails (CSTS.CFS); its bounce "
		"buffers are not used again\n",
		e->dev);
	for (unsigned i = 0; i < e->nslots; i++)
		if (e->slot[i].req) {
			e->slot[i].req->status = NVME_GENERIC(NVME_SC_INTERNAL);
			nvme_ctrl_io_done(e->slot[i].req);
			e->slot[i].req = NULL;
		}
	e->inflight = 0;
}

/* Completions of the requests in flight, all there are, without waiting, handed to the controller
 * a batch at a time (one taking of its lock). A completion naming no command in flight (the
 * SSD's mistake) is ignored. Returns how many were taken. */
static unsigned emu_reap(struct nvme_lio_emu *e)
{
	struct nvme_io_req *done[64];
	struct nvme_cqe cqe[64];
	unsigned got = 0;
	int n;

	do {
		unsigned nd = 0;

		n = lio_drv_reap(e->d, 0, cqe, 64, 0);
		for (int k = 0; k < n; k++) {
			unsigned si = cqe[k].cid & 0xff;
			struct emu_slot *sl = &e->slot[si];
			uint16_t st = (uint16_t)(cqe[k].status >> 1);

			if (si >= e->nslots || !sl->req || sl->cid != cqe[k].cid)
				continue;
			if (!(st & 0x7ff) && sl->req->op == NVME_IO_READ)
				emu_copy(e, sl, false);
			sl->req->status = nvme_lio_emu_status(st);
			done[nd++] = emu_finish(e, sl);
		}
		nvme_ctrl_io_done_many(done, nd);
		got += nd;
	} while (n == 64);
	return got;
}

/* One command the SSD keeps past the timeout fails them all, however many others it completes
 * meanwhile. */
static void emu_check_timeouts(struct nvme_lio_emu *e, uint64_t now)
{
	int ms = e->d->io_timeout_ms > 0 ? e->d->io_timeout_ms : LIO_DRV_IO_TIMEOUT_MS;

	for (unsigned i = 0; i < e->nslots; i++)
		if (e->slot[i].req && now - e->slot[i].t0_ns > (uint64_t)ms * 1000000ull) {
			emu_lost(e);
			return;
		}
}

/* Moves the FIFO onto the worker's own list in one go; sleeps first when there is nothing to
 * do at all. Returns the stop flag. */
static bool emu_take(struct nvme_lio_emu *e)
{
	bool stop;

	if (e->mine || e->inflight) { /* busy: only a look, no lock when nothing came */
		if (!__atomic_load_n(&e->queued, __ATOMIC_ACQUIRE))
			return __atomic_load_n(&e->stop, __ATOMIC_ACQUIRE);
	}
	pthread_mutex_lock(&e->qlock);
	while (!e->head && !e->stop && !e->inflight && !e->mine)
		pthread_cond_wait(&e->qcond, &e->qlock);
	if (e->head) {
		if (e->mine_tail)
			e->mine_tail->next = e->head;
		else
			e->mine = e->head;
		e->mine_tail = e->tail;
		e->head = e->tail = NULL;
		__atomic_store_n(&e->queued, 0, __ATOMIC_RELEASE);
	}
	stop = e->stop;
	pthread_mutex_unlock(&e->qlock);
	return stop;
}

/* Starts what may start from the head of the worker's list, in its order: pipelined requests
 * while there is room (one doorbell for the batch), one that must run alone once nothing is in
 * flight (run here to its end). Returns how many requests it took. */
static unsigned emu_start_batch(struct nvme_lio_emu *e, bool stop, uint64_t now)
{
	unsigned placed = 0, taken = 0;

	/* a failed controller sends nothing more: what waits fails at once */
	stop = stop || __atomic_load_n(&e->failed, __ATOMIC_ACQUIRE);
	while (e->mine) {
		struct emu_item *it = e->mine;
		struct nvme_io_req *req = it->req;
		bool pipe = emu_pipelined(e, req);

		if (!stop && pipe && !emu_room(e, req))
			break;
		if (!stop && !pipe && (e->inflight || placed))
			break;
		e->mine = it->next;
		if (!e->mine)
			e->mine_tail = NULL;
		free(it);
		taken++;
		if (stop) {
			req->status = NVME_GENERIC(NVME_SC_INTERNAL);
		} else if (pipe) {
			req->status = emu_start(e, req, now);
			if (!req->status) {
				placed++;
				continue;
			}
		} else {
			nvme_lio_emu_exec(e, req);
		}
		nvme_ctrl_io_done(req);
	}
	if (placed)
		lio_drv_ring(e->d, 0);
	return taken;
}

/* Commands in flight, but nothing came back or in for EMU_NAP_SPIN passes (an SSD that holds
 * them long): waits for a new request (wake_fd) or EMU_NAP_MS, instead of spinning on a core the
 * SSD's worker or a vCPU may need. The queue pair is opened without a completion eventfd: the
 * worker finds completions by polling. */
static void emu_nap(struct nvme_lio_emu *e)
{
	struct pollfd p = {.fd = e->wake_fd, .events = POLLIN};
	eventfd_t v;

	/* napping before the look at queued, as emu_submit stores queued before it looks at
	 * napping: one of the two sees the other */
	__atomic_store_n(&e->napping, true, __ATOMIC_SEQ_CST);
	if (!__atomic_load_n(&e->queued, __ATOMIC_SEQ_CST) &&
	    !__atomic_load_n(&e->stop, __ATOMIC_SEQ_CST) && poll(&p, 1, EMU_NAP_MS) > 0 &&
	    (p.revents & POLLIN))
		eventfd_read(p.fd, &v);
	__atomic_store_n(&e->napping, false, __ATOMIC_RELEASE);
}

/* Pipelined reads and writes go to slots, placed in batches; anything else runs alone to its end
 * or to the first error. While commands are in flight the worker polls its completions and the
 * FIFO, and after EMU_NAP_SPIN passes without either waits EMU_NAP_MS at most for a request
 * (emu_nap); with nothing in flight and nothing queued it waits on qcond. A stop fails
 * what has not started (every step of a lone request checks it, so a 256-range Deallocate ends
 * within one command's time) and waits for what is in flight. */
void *nvme_lio_emu_worker(void *opaque)
{
	struct nvme_lio_emu *e = opaque;
	uint64_t checked = 0, now = 0;
	unsigned idle = 0, pass = 0;

	for (;;) {
		bool stop = emu_take(e);
		unsigned work;

		/* the clock only stamps commands for a timeout of seconds: read it after a sleep
		 * and every EMU_YIELD_SPIN passes, not on every pass (it is no cheap call on every
		 * host) */
		if (!e->inflight || ++pass % EMU_YIELD_SPIN == 0)
			now = emu_now_ns();
		work = emu_start_batch(e, stop, now);

		if (e->inflight)
			work += emu_reap(e);
		if (e->inflight && now - checked > EMU_CHECK_NS) {
			checked = now;
			emu_check_timeouts(e, now);
		}
		if (stop && !e->inflight && !e->mine)
			return NULL; /* stopped, nothing left */
		if (work || !e->inflight) {
			idle = 0;
		} else if (++idle >= EMU_NAP_SPIN) {
			emu_nap(e);
			idle = 0;
			now = emu_now_ns();
		} else if (idle % EMU_YIELD_SPIN == 0) {
			sched_yield(); /* polling: a core shared with the SSD's worker goes round */
		}
	}
}
