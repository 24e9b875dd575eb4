/* The emulate path over an SSD volume: the controller's checked requests (byte offsets, host
 * iovecs into guest RAM) become commands on lvmm's own isolated queue pair through a bounce
 * buffer, so guest memory is never registered with the SSD and the SSD checks every command too.
 * One worker thread runs them, off the vCPUs and outside the controller lock: reads and writes of
 * up to one command's size with as many in flight as the SQ holds (up to EMU_DEPTH_MAX - 1),
 * each in pages of a shared bounce pool, placed in batches with one doorbell per batch and
 * reaped in batches; everything else (flush, FUA, zeroes, deallocate, larger transfers) alone,
 * in order, once nothing else is in flight. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "client/lio_client.h"
#include "nvme_int.h"
#include "nvme_lio_emu.h"

#define EMU_LBA	  (1u << e->lba_shift)
#define EMU_CHUNK NVME_CTRL_MAX_XFER /* one command's data at most (MDTS) */
/* SQ entries asked for (fewer when the SSD grants fewer); a command id is its slot in the low
 * byte and the slot's use count above it */
#define EMU_DEPTH_MAX 256u
#define EMU_DEPTH_MIN 16u
/* The bounce pool: 8 MiB of pages the commands in flight share (a 4 KiB read takes one, the
 * largest transfer EMU_XFER_PAGES), so a deep queue of small commands costs no 128 KiB each. */
#define EMU_POOL_PAGES 2048u
#define EMU_XFER_PAGES (EMU_CHUNK / LIO_PAGE_SIZE)
#define EMU_CHECK_NS   1000000ull /* how often commands in flight are checked for a timeout */
#define EMU_YIELD_SPIN 64u	  /* idle passes between two sched_yield() while polling */
#define EMU_NAP_SPIN   1024u	  /* idle passes in flight before the worker waits (emu_nap) */
#define EMU_NAP_MS     1	  /* the longest such wait: an SSD that never signals still moves */

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
	unsigned queued; /* requests on the FIFO (written under qlock, peeked without) */
	bool napping;	 /* the worker waits on the CQ eventfd and wake_fd (emu_nap) */
	int wake_fd;	 /* a request came while napping */
	/* the requests in flight, owned by the worker */
	struct emu_slot {
		struct nvme_io_req *req; /* NULL: free */
		uint16_t cid;
		uint8_t uses; /* the cid's high byte: a stale completion names an old use */
		unsigned npg; /* pool pages holding its data */
		uint32_t pg[EMU_XFER_PAGES];
		uint64_t prp_gpa; /* its own PRP-list page: the SQ slot's may be reused first */
		uint64_t *prp;
		uint64_t t0_ns; /* submitted (CLOCK_MONOTONIC) */
	} slot[EMU_DEPTH_MAX - 1];
	unsigned nslots, inflight;
	unsigned free_slot[EMU_DEPTH_MAX - 1], nfree_slot;
	/* the bounce pool: free page indexes as a stack */
	uint64_t pool_gpa;
	uint8_t *pool;
	uint32_t free_pg[EMU_POOL_PAGES];
	unsigned nfree_pg;
	/* the worker's own list: taken from the FIFO in one go, started in its order */
	struct emu_item *mine, *mine_tail;
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
	e->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (e->wake_fd < 0) {
		r = -errno;
		snprintf(err, errlen, "vnvme %s: eventfd: %s", cfg->id, strerror(-r));
		free(e);
		return r;
	}
	pthread_mutex_init(&e->qlock, NULL);
	pthread_cond_init(&e->qcond, NULL);
	if (!lio_name_ok(cfg->ssd) || (cfg->vol && cfg->vol[0] && !lio_name_ok(cfg->vol))) {
		snprintf(err, errlen,
			 "vnvme %s: ssd '%s' / vol '%s': not plain SSD and volume names", cfg->id,
			 cfg->ssd ? cfg->ssd : "", cfg->vol ? cfg->vol : "");
		close(e->wake_fd);
		free(e);
		return -EINVAL;
	}
	r = lio_client_connect(&e->c, cfg->ssd, cfg->label, &id, why, sizeof(why));
	if (r) {
		snprintf(err, errlen, "vnvme %s: ssd %s: %s", cfg->id, cfg->ssd, why);
		close(e->wake_fd);
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
	/* IRQ_ENABLED: the SSD signals completions on an eventfd, for the worker's naps */
	o.qp_flags = LIO_QP_SQ_QMEM | LIO_QP_CQ_QMEM | LIO_QP_IRQ_ENABLED |
		     (id.flags & LIO_ID_DB_POLL ? LIO_QP_DB_POLL : LIO_QP_DB_EVENTFD) |
		     (cfg->readonly ? LIO_QP_READONLY : 0);
	o.nr_qp = 1;
	/* the SSD's grant is a reply: only a sane one lowers the depth */
	o.depth = EMU_DEPTH_MAX;
	if (id.max_qdepth >= EMU_DEPTH_MIN && id.max_qdepth < o.depth)
		o.depth = id.max_qdepth;
	e->nslots = o.depth - 1;
	/* the lone bounce buffer, the pool, a PRP-list page per slot and lio_drv's own one per
	 * SQ entry, the rings: 11 MiB at the largest depth */
	o.mem_bytes = EMU_CHUNK + (uint64_t)EMU_POOL_PAGES * LIO_PAGE_SIZE +
		      2ull * o.depth * LIO_PAGE_SIZE + (1ull << 20);
	r = lio_drv_open(&e->d, e->c, &o, why, sizeof(why));
	if (r) {
		snprintf(err, errlen, "vnvme %s: ssd %s: queue pair: %s", cfg->id, cfg->ssd, why);
		goto fail;
	}
	e->bounce_gpa = lio_drv_alloc(e->d, EMU_CHUNK);
	e->bounce = e->bounce_gpa ? lio_drv_ptr(e->d, e->bounce_gpa) : NULL;
	e->pool_gpa = e->bounce ? lio_drv_alloc(e->d, (uint64_t)EMU_POOL_PAGES * LIO_PAGE_SIZE) : 0;
	e->pool = e->pool_gpa ? lio_drv_ptr(e->d, e->pool_gpa) : NULL;
	if (!e->pool)
		e->bounce = NULL;
	for (unsigned i = 0; i < EMU_POOL_PAGES; i++)
		e->free_pg[i] = EMU_POOL_PAGES - 1 - i;
	e->nfree_pg = EMU_POOL_PAGES;
	for (unsigned i = 0; i < e->nslots && e->bounce; i++) {
		e->slot[i].prp_gpa = lio_drv_alloc(e->d, LIO_PAGE_SIZE);
		e->slot[i].prp = e->slot[i].prp_gpa ? lio_drv_ptr(e->d, e->slot[i].prp_gpa) : NULL;
		if (!e->slot[i].prp)
			e->bounce = NULL;
		e->free_slot[i] = e->nslots - 1 - i;
	}
	e->nfree_slot = e->nslots;
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
	__atomic_store_n(&e->stop, true, __ATOMIC_SEQ_CST);
	pthread_cond_signal(&e->qcond);
	pthread_mutex_unlock(&e->qlock);
	eventfd_write(e->wake_fd, 1); /* a napping worker sees it now */
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
	close(e->wake_fd);
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
			sl->req->status = emu_status(st);
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
			emu_exec(e, req);
		}
		nvme_ctrl_io_done(req);
	}
	if (placed)
		lio_drv_ring(e->d, 0);
	return taken;
}

/* Commands in flight, but nothing came back or in for EMU_NAP_SPIN passes: waits for the SSD's
 * completion eventfd or a new request (wake_fd), EMU_NAP_MS at most, instead of spinning on a
 * core the SSD's worker or a vCPU may need. */
static void emu_nap(struct nvme_lio_emu *e)
{
	struct pollfd p[2] = {{.fd = e->d->qp[0].irq_fd, .events = POLLIN},
			      {.fd = e->wake_fd, .events = POLLIN}};
	eventfd_t v;

	/* napping before the look at queued, as emu_submit stores queued before it looks at
	 * napping: one of the two sees the other */
	__atomic_store_n(&e->napping, true, __ATOMIC_SEQ_CST);
	if (!__atomic_load_n(&e->queued, __ATOMIC_SEQ_CST) &&
	    !__atomic_load_n(&e->stop, __ATOMIC_SEQ_CST) && poll(p, 2, EMU_NAP_MS) > 0) {
		if (p[0].revents & POLLIN)
			eventfd_read(p[0].fd, &v);
		if (p[1].revents & POLLIN)
			eventfd_read(p[1].fd, &v);
	}
	__atomic_store_n(&e->napping, false, __ATOMIC_RELEASE);
}

/* Pipelined reads and writes go to slots, placed in batches; anything else runs alone to its end
 * or to the first error. While commands are in flight the worker polls its completions and the
 * FIFO, and after EMU_NAP_SPIN passes without either waits for the SSD's completion eventfd or a
 * request (emu_nap); with nothing in flight and nothing queued it waits on qcond. A stop fails
 * what has not started (every step of a lone request checks it, so a 256-range Deallocate ends
 * within one command's time) and waits for what is in flight. */
static void *emu_thread(void *opaque)
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
	__atomic_store_n(&e->queued, e->queued + 1, __ATOMIC_SEQ_CST);
	pthread_cond_signal(&e->qcond);
	pthread_mutex_unlock(&e->qlock);
	if (__atomic_load_n(&e->napping, __ATOMIC_SEQ_CST))
		eventfd_write(e->wake_fd, 1);
	return 0;
}

const struct nvme_backend_ops nvme_lio_emu_ops = {
    .submit = emu_submit,
};
