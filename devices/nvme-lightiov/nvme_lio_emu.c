/* The emulate path over an SSD volume: the controller's checked requests (byte offsets, host
 * iovecs into guest RAM) become commands on lvmm's own isolated queue pair through a bounce
 * buffer, so guest memory is never registered with the SSD and the SSD checks every command too.
 * One worker thread runs them, off the vCPUs and outside the controller lock: reads and writes of
 * up to one command's size with up to EMU_SLOTS in flight, each in a bounce buffer of its own;
 * everything else (flush, FUA, zeroes, deallocate, larger transfers) alone, in order, once
 * nothing else is in flight. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/lio_client.h"
#include "nvme_int.h"
#include "nvme_lio_emu.h"

#define EMU_LBA	    (1u << e->lba_shift)
#define EMU_CHUNK   NVME_CTRL_MAX_XFER /* one command's data at most (MDTS) */
#define EMU_DEPTH   16
#define EMU_SLOTS   (EMU_DEPTH - 1) /* commands in flight: what an SQ of EMU_DEPTH holds */
#define EMU_REAP_MS 1		    /* a wait for completions, between looks for new requests */

struct emu_item {
	struct nvme_io_req *req;
	struct emu_item *next;
};

struct nvme_lio_emu {
	struct lio_client *c;
	struct lio_drv *d;
	/* the worker and its FIFO of requests */
	pthread_t th;
	bool running, stop;
	pthread_mutex_t qlock;
	pthread_cond_t qcond;
	struct emu_item *head, *tail;
	/* A command timed out and may still complete into the bounce buffer: nothing is sent
	 * through it again, every request fails and CSTS.CFS tells the guest (finding 5). */
	bool failed;
	char dev[64], vol[LIO_NAME_MAX];
	uint64_t bounce_gpa; /* the requests run alone */
	uint8_t *bounce;
	/* the requests in flight, owned by the worker */
	struct emu_slot {
		struct nvme_io_req *req; /* NULL: free */
		uint16_t cid;
		uint64_t gpa;
		uint8_t *buf;
		uint64_t prp_gpa; /* its own PRP-list page: the SQ slot's may be reused first */
		uint64_t *prp;
		double t0_ms; /* submitted (CLOCK_MONOTONIC) */
	} slot[EMU_SLOTS];
	unsigned inflight;
	uint64_t lba_count;
	uint32_t lba_shift; /* the SSD's: 9 or 12 */
};

static void *emu_thread(void *opaque);

int nvme_lio_emu_open(struct nvme_lio_emu **out, const struct nvme_lio_cfg *cfg, uint64_t *size,
		      char *err, unsigned errlen)
{
	struct lio_vol_attach a = {0};
	struct lio_identify id;
	struct lio_drv_opts o = {0};
	struct nvme_lio_emu *e;
	char why[256];
	int r;

	e = calloc(1, sizeof(*e));
	if (!e) {
		snprintf(err, errlen, "vnvme %s: out of memory", cfg->id);
		return -ENOMEM;
	}
	snprintf(e->dev, sizeof(e->dev), "%s", cfg->id);
	pthread_mutex_init(&e->qlock, NULL);
	pthread_cond_init(&e->qcond, NULL);
	if (!lio_name_ok(cfg->ssd) || (cfg->vol && cfg->vol[0] && !lio_name_ok(cfg->vol))) {
		snprintf(err, errlen,
			 "vnvme %s: ssd '%s' / vol '%s': not plain SSD and volume names", cfg->id,
			 cfg->ssd ? cfg->ssd : "", cfg->vol ? cfg->vol : "");
		free(e);
		return -EINVAL;
	}
	r = lio_client_connect(&e->c, cfg->ssd, cfg->label, &id, why, sizeof(why));
	if (r) {
		snprintf(err, errlen, "vnvme %s: ssd %s: %s", cfg->id, cfg->ssd, why);
		free(e);
		return r;
	}
	if (id.lba_shift != 9 && id.lba_shift != 12) {
		snprintf(err, errlen,
			 "vnvme %s: ssd %s has %u-byte LBAs; this controller offers 512 and 4096",
			 cfg->id, cfg->ssd, 1u << (id.lba_shift & 31));
		r = -EOPNOTSUPP;
		goto fail;
	}
	e->lba_shift = id.lba_shift;
	if (cfg->vol && cfg->vol[0]) {
		snprintf(a.name, sizeof(a.name), "%s", cfg->vol);
		a.flags = cfg->size ? LIO_ATTACH_CREATE : 0;
	} else {
		a.flags = LIO_ATTACH_ANON;
	}
	a.size_bytes = cfg->size;
	if (cfg->readonly)
		a.flags |= LIO_ATTACH_READONLY;
	r = lio_client_vol_attach(e->c, &a);
	if (r) {
		snprintf(err, errlen, "vnvme %s: ssd %s: volume %s: %s", cfg->id, cfg->ssd,
			 a.flags & LIO_ATTACH_ANON ? "(anonymous)" : cfg->vol,
			 lio_client_error(e->c));
		goto fail;
	}
	r = lio_attach_check(&a, e->lba_shift, why, sizeof(why));
	if (r) {
		snprintf(err, errlen, "vnvme %s: ssd %s: %s", cfg->id, cfg->ssd, why);
		goto fail;
	}
	memcpy(e->vol, a.name, sizeof(e->vol));
	e->vol[sizeof(e->vol) - 1] = 0;
	e->lba_count = a.lba_count;
	o.vol_id = a.vol_id;
	o.lba_start = a.lba_start;
	o.lba_count = a.lba_count;
	o.lba_shift = e->lba_shift;
	o.mode = LIGHTIOV_MODE_ISOLATED; /* window-relative LBAs, checked by the SSD as well */
	o.qp_flags = LIO_QP_SQ_QMEM | LIO_QP_CQ_QMEM |
		     (id.flags & LIO_ID_DB_POLL ? LIO_QP_DB_POLL : LIO_QP_DB_EVENTFD) |
		     (cfg->readonly ? LIO_QP_READONLY : 0);
	o.nr_qp = 1;
	o.depth = EMU_DEPTH;
	o.mem_bytes = 4ULL << 20; /* EMU_DEPTH bounce buffers, the PRP-list pages */
	r = lio_drv_open(&e->d, e->c, &o, why, sizeof(why));
	if (r) {
		snprintf(err, errlen, "vnvme %s: ssd %s: queue pair: %s", cfg->id, cfg->ssd, why);
		goto fail;
	}
	e->bounce_gpa = lio_drv_alloc(e->d, EMU_CHUNK);
	e->bounce = e->bounce_gpa ? lio_drv_ptr(e->d, e->bounce_gpa) : NULL;
	for (unsigned i = 0; i < EMU_SLOTS && e->bounce; i++) {
		e->slot[i].gpa = lio_drv_alloc(e->d, EMU_CHUNK);
		e->slot[i].buf = e->slot[i].gpa ? lio_drv_ptr(e->d, e->slot[i].gpa) : NULL;
		e->slot[i].prp_gpa = lio_drv_alloc(e->d, LIO_PAGE_SIZE);
		e->slot[i].prp = e->slot[i].prp_gpa ? lio_drv_ptr(e->d, e->slot[i].prp_gpa) : NULL;
		if (!e->slot[i].buf || !e->slot[i].prp)
			e->bounce = NULL;
	}
	if (!e->bounce) {
		snprintf(err, errlen, "vnvme %s: no room for the bounce buffers", cfg->id);
		r = -ENOMEM;
		goto fail;
	}
	r = pthread_create(&e->th, NULL, emu_thread, e);
	if (r) {
		snprintf(err, errlen, "vnvme %s: cannot start the I/O thread: %s", cfg->id,
			 strerror(r));
		r = -r;
		goto fail;
	}
	pthread_setname_np(e->th, "lvmm-nvme-emu");
	e->running = true;
	*size = a.lba_count * EMU_LBA;
	*out = e;
	return 0;
fail:
	nvme_lio_emu_close(e);
	return r;
}

void nvme_lio_emu_stop(struct nvme_lio_emu *e)
{
	if (!e || !e->running)
		return;
	pthread_mutex_lock(&e->qlock);
	__atomic_store_n(&e->stop, true, __ATOMIC_RELEASE);
	pthread_cond_signal(&e->qcond);
	pthread_mutex_unlock(&e->qlock);
	pthread_join(e->th, NULL);
	e->running = false;
}

void nvme_lio_emu_close(struct nvme_lio_emu *e)
{
	if (!e)
		return;
	nvme_lio_emu_stop(e);
	pthread_cond_destroy(&e->qcond);
	pthread_mutex_destroy(&e->qlock);
	if (e->d)
		lio_drv_close(e->d);
	if (e->c)
		lio_client_close(e->c); /* an anonymous volume goes with the session */
	free(e);
}

const char *nvme_lio_emu_vol_name(const struct nvme_lio_emu *e)
{
	return e->vol;
}

uint32_t nvme_lio_emu_lba_shift(const struct nvme_lio_emu *e)
{
	return e->lba_shift;
}

bool nvme_lio_emu_alive(struct nvme_lio_emu *e)
{
	return !__atomic_load_n(&e->failed, __ATOMIC_ACQUIRE);
}

void nvme_lio_emu_set_timeout_ms(struct nvme_lio_emu *e, int ms)
{
	e->d->io_timeout_ms = ms;
}

/* One command on lvmm's queue pair. A timeout leaves it in flight, its data pointer on the
 * bounce buffer: the buffer (and the queue pair) are never used again. */
static uint16_t emu_io(struct nvme_lio_emu *e, uint8_t opcode, uint64_t lba, uint32_t nlb,
		       uint64_t gpa)
{
	uint16_t st;

	if (__atomic_load_n(&e->failed, __ATOMIC_ACQUIRE) ||
	    __atomic_load_n(&e->stop, __ATOMIC_ACQUIRE))
		return 0xffff;
	st = lio_drv_io(e->d, 0, opcode, lba, nlb, gpa);
	if (st == 0xffff) {
		__atomic_store_n(&e->failed, true, __ATOMIC_RELEASE);
		fprintf(stderr,
			"vnvme %s: ssd command timed out: the controller fails (CSTS.CFS); its "
			"bounce buffer is not used again\n",
			e->dev);
	}
	return st;
}

/* The SSD's status as the guest's, a lost SSD (or a failed controller) as an internal error. */
static uint16_t emu_status(uint16_t st)
{
	if (st == 0xffff)
		return NVME_GENERIC(NVME_SC_INTERNAL);
	return st & 0x7ff ? (uint16_t)(st | NVME_STATUS_DNR) : NVME_OK;
}

/* Reads or writes [off, off + len) from or to the iovecs, a chunk at a time. */
static uint16_t emu_rw(struct nvme_lio_emu *e, struct nvme_io_req *req, bool write)
{
	unsigned vi = 0;
	size_t vo = 0;
	uint64_t done = 0;

	while (done < req->len) {
		uint64_t n = req->len - done < EMU_CHUNK ? req->len - done : EMU_CHUNK, k = 0;
		uint16_t st;

		if (write) {
			for (k = 0; k < n && vi < req->niov;) {
				size_t m = req->iov[vi].iov_len - vo;

				m = m < n - k ? m : n - k;
				memcpy(e->bounce + k, (uint8_t *)req->iov[vi].iov_base + vo, m);
				k += m;
				vo += m;
				if (vo == req->iov[vi].iov_len) {
					vi++;
					vo = 0;
				}
			}
		}
		st = emu_io(e, write ? NVME_CMD_WRITE : NVME_CMD_READ, (req->off + done) / EMU_LBA,
			    (uint32_t)(n / EMU_LBA), e->bounce_gpa);
		if (st)
			return emu_status(st);
		if (!write) {
			for (k = 0; k < n && vi < req->niov;) {
				size_t m = req->iov[vi].iov_len - vo;

				m = m < n - k ? m : n - k;
				memcpy((uint8_t *)req->iov[vi].iov_base + vo, e->bounce + k, m);
				k += m;
				vo += m;
				if (vo == req->iov[vi].iov_len) {
					vi++;
					vo = 0;
				}
			}
		}
		done += n;
	}
	if (write && req->fua)
		return emu_status(emu_io(e, NVME_CMD_FLUSH, 0, 0, 0));
	return NVME_OK;
}

/* Zeroes [off, off + len): Write Zeroes in MDTS-sized steps (deallocated blocks read zero). */
static uint16_t emu_zero(struct nvme_lio_emu *e, uint64_t off, uint64_t len)
{
	while (len) {
		uint64_t n = len < EMU_CHUNK ? len : EMU_CHUNK;
		uint16_t st =
		    emu_io(e, NVME_CMD_WRITE_ZEROES, off / EMU_LBA, (uint32_t)(n / EMU_LBA), 0);

		if (st)
			return emu_status(st);
		off += n;
		len -= n;
	}
	return NVME_OK;
}

static void emu_exec(struct nvme_lio_emu *e, struct nvme_io_req *req)
{
	unsigned i;

	req->status = NVME_OK;
	switch (req->op) {
	case NVME_IO_READ:
	case NVME_IO_WRITE:
		req->status = emu_rw(e, req, req->op == NVME_IO_WRITE);
		break;
	case NVME_IO_FLUSH:
		req->status = emu_status(emu_io(e, NVME_CMD_FLUSH, 0, 0, 0));
		break;
	case NVME_IO_ZEROES:
		req->status = emu_zero(e, req->off, req->len);
		break;
	case NVME_IO_DISCARD:
		for (i = 0; i < req->nranges && req->status == NVME_OK; i++)
			req->status = emu_zero(e, req->ranges[i].off, req->ranges[i].len);
		break;
	}
}

/* ---- the pipelined path ---- */

/* A read or write one command carries (MDTS): it can go while others are in flight. */
static bool emu_pipelined(const struct nvme_lio_emu *e, const struct nvme_io_req *r)
{
	return (r->op == NVME_IO_READ || r->op == NVME_IO_WRITE) && !r->fua && r->len &&
	       r->len <= EMU_CHUNK && !(r->len % EMU_LBA) && !(r->off % EMU_LBA);
}

/* Copies between a request's iovecs and buf (len bytes at most). */
static void emu_copy(struct nvme_io_req *req, uint8_t *buf, bool to_buf)
{
	uint64_t k = 0;

	for (unsigned i = 0; i < req->niov && k < req->len; i++) {
		size_t m = req->iov[i].iov_len < req->len - k ? req->iov[i].iov_len : req->len - k;

		if (to_buf)
			memcpy(buf + k, req->iov[i].iov_base, m);
		else
			memcpy(req->iov[i].iov_base, buf + k, m);
		k += m;
	}
}

static double emu_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* The slot's buffer as PRPs (page-aligned, EMU_CHUNK at most: one list page), the list in the
 * slot's own page. */
static void emu_prp(struct emu_slot *sl, struct nvme_sqe *sqe, uint64_t len)
{
	sqe->prp1 = sl->gpa;
	sqe->prp2 = 0;
	if (len <= LIO_PAGE_SIZE)
		return;
	if (len <= 2 * LIO_PAGE_SIZE) {
		sqe->prp2 = sl->gpa + LIO_PAGE_SIZE;
		return;
	}
	for (uint64_t k = 1; k * LIO_PAGE_SIZE < len; k++)
		sl->prp[k - 1] = sl->gpa + k * LIO_PAGE_SIZE;
	sqe->prp2 = sl->prp_gpa;
}

/* req on a free slot, submitted: 0, or the guest's status when it cannot go. */
static uint16_t emu_start(struct nvme_lio_emu *e, struct nvme_io_req *req)
{
	bool write = req->op == NVME_IO_WRITE;
	uint64_t lba = req->off / EMU_LBA;
	struct nvme_sqe sqe = {.opcode = write ? NVME_CMD_WRITE : NVME_CMD_READ, .nsid = 1};
	struct emu_slot *sl = NULL;
	int cid;

	for (unsigned i = 0; i < EMU_SLOTS && !sl; i++)
		if (!e->slot[i].req)
			sl = &e->slot[i];
	if (!sl || __atomic_load_n(&e->failed, __ATOMIC_ACQUIRE) ||
	    __atomic_load_n(&e->stop, __ATOMIC_ACQUIRE))
		return NVME_GENERIC(NVME_SC_INTERNAL);
	if (write)
		emu_copy(req, sl->buf, true);
	sqe.cdw10 = (uint32_t)lba;
	sqe.cdw11 = (uint32_t)(lba >> 32);
	sqe.cdw12 = (uint32_t)(req->len / EMU_LBA) - 1;
	emu_prp(sl, &sqe, req->len);
	/* a command id no command in flight holds: one the SSD keeps while 65536 others pass
	 * must not have its completion taken for a newer one's */
	for (bool taken = true; taken;) {
		taken = false;
		for (unsigned i = 0; i < EMU_SLOTS && !taken; i++)
			taken = e->slot[i].req && e->slot[i].cid == e->d->qp[0].next_cid;
		if (taken)
			e->d->qp[0].next_cid++;
	}
	cid = lio_drv_submit(e->d, 0, &sqe);
	if (cid < 0)
		return NVME_GENERIC(NVME_SC_INTERNAL);
	sl->req = req;
	sl->cid = (uint16_t)cid;
	sl->t0_ms = emu_now_ms();
	e->inflight++;
	return NVME_OK;
}

/* A command in flight for longer than the timeout: as emu_io's timeout, every request in flight
 * fails and no bounce buffer is used again. */
static void emu_lost(struct nvme_lio_emu *e)
{
	__atomic_store_n(&e->failed, true, __ATOMIC_RELEASE);
	fprintf(stderr,
		"vnvme %s: ssd command timed out: the controller fails (CSTS.CFS); its bounce "
		"buffers are not used again\n",
		e->dev);
	for (unsigned i = 0; i < EMU_SLOTS; i++)
		if (e->slot[i].req) {
			e->slot[i].req->status = NVME_GENERIC(NVME_SC_INTERNAL);
			nvme_ctrl_io_done(e->slot[i].req);
			e->slot[i].req = NULL;
		}
	e->inflight = 0;
}

/* Completions of the requests in flight (waiting up to EMU_REAP_MS for the first). A completion
 * naming no command in flight (the SSD's mistake) is ignored; one command the SSD keeps past
 * the timeout fails them all, however many others it completes meanwhile. */
static void emu_reap(struct nvme_lio_emu *e)
{
	struct nvme_cqe cqe[EMU_SLOTS];
	int timeout = e->d->io_timeout_ms > 0 ? e->d->io_timeout_ms : LIO_DRV_IO_TIMEOUT_MS;
	int n = lio_drv_reap(e->d, 0, cqe, EMU_SLOTS, EMU_REAP_MS);
	double now;

	for (int k = 0; k < n; k++)
		for (unsigned i = 0; i < EMU_SLOTS; i++) {
			struct emu_slot *sl = &e->slot[i];
			uint16_t st = (uint16_t)(cqe[k].status >> 1);

			if (!sl->req || sl->cid != cqe[k].cid)
				continue;
			if (!(st & 0x7ff) && sl->req->op == NVME_IO_READ)
				emu_copy(sl->req, sl->buf, false);
			sl->req->status = emu_status(st);
			nvme_ctrl_io_done(sl->req);
			sl->req = NULL;
			e->inflight--;
			break;
		}
	now = emu_now_ms();
	for (unsigned i = 0; i < EMU_SLOTS; i++)
		if (e->slot[i].req && now - e->slot[i].t0_ms > timeout) {
			emu_lost(e);
			return;
		}
}

/* Takes the next request that may start now: any while nothing is in flight, else a pipelined
 * one while a slot is free (the queue's order is kept: one that must run alone waits at the
 * head). Sleeps while there is nothing to do. NULL with *stop set when stopped. */
static struct emu_item *emu_next(struct nvme_lio_emu *e, bool *stop)
{
	struct emu_item *it = NULL;

	pthread_mutex_lock(&e->qlock);
	while (!e->head && !e->stop && !e->inflight)
		pthread_cond_wait(&e->qcond, &e->qlock);
	if (e->head &&
	    (!e->inflight || (e->inflight < EMU_SLOTS && emu_pipelined(e, e->head->req)))) {
		it = e->head;
		e->head = it->next;
		if (!e->head)
			e->tail = NULL;
	}
	*stop = e->stop;
	pthread_mutex_unlock(&e->qlock);
	return it;
}

/* Pipelined reads and writes go to a slot; anything else runs alone to its end or to the first
 * error. A stop fails what has not started (every step of a lone request checks it, so a
 * 256-range Deallocate ends within one command's time) and waits for what is in flight. */
static void *emu_thread(void *opaque)
{
	struct nvme_lio_emu *e = opaque;

	for (;;) {
		bool stop;
		struct emu_item *it = emu_next(e, &stop);

		if (it) {
			struct nvme_io_req *req = it->req;

			free(it);
			if (stop)
				req->status = NVME_GENERIC(NVME_SC_INTERNAL);
			else if (emu_pipelined(e, req))
				req->status = emu_start(e, req);
			else
				emu_exec(e, req);
			if (stop || req->status || !emu_pipelined(e, req))
				nvme_ctrl_io_done(req);
			continue;
		}
		if (e->inflight)
			emu_reap(e);
		else if (stop)
			return NULL; /* stopped, nothing left */
	}
}

/* Called with the controller lock held: queues req for the worker and returns at once. */
static int emu_submit(void *be, struct nvme_io_req *req)
{
	struct nvme_lio_emu *e = be;
	struct emu_item *it;

	if (!nvme_lio_emu_alive(e) || !e->running) {
		req->status = NVME_GENERIC(NVME_SC_INTERNAL);
		return 1;
	}
	it = malloc(sizeof(*it));
	if (!it) {
		req->status = NVME_GENERIC(NVME_SC_INTERNAL);
		return 1;
	}
	it->req = req;
	it->next = NULL;
	pthread_mutex_lock(&e->qlock);
	if (e->stop) { /* the worker may be gone: nobody would complete it */
		pthread_mutex_unlock(&e->qlock);
		free(it);
		req->status = NVME_GENERIC(NVME_SC_INTERNAL);
		return 1;
	}
	if (e->tail)
		e->tail->next = it;
	else
		e->head = it;
	e->tail = it;
	pthread_cond_signal(&e->qcond);
	pthread_mutex_unlock(&e->qlock);
	return 0;
}

const struct nvme_backend_ops nvme_lio_emu_ops = {
    .submit = emu_submit,
};
