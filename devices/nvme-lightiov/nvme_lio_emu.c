/* The emulate path over an SSD volume: the controller's checked requests (byte offsets, host
 * iovecs into guest RAM) become commands on lvmm's own isolated queue pair through bounce
 * memory, so guest memory is never registered with the SSD and the SSD checks every command too.
 * This file: the session, the volume and the queue pair, the requests that run alone (flush,
 * FUA, zeroes, deallocate, larger transfers) and the FIFO the vCPUs fill; the worker thread that
 * runs them all is nvme_lio_emu_worker.c. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "client/lio_client.h"
#include "nvme_int.h"
#include "nvme_lio_emu.h"
#include "nvme_lio_emu_int.h"

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
	/* no IRQ_ENABLED: the worker polls for completions (an eventfd signal per completion
	 * cost the SSD's worker more than it saved) */
	o.qp_flags = LIO_QP_SQ_QMEM | LIO_QP_CQ_QMEM |
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
	r = pthread_create(&e->th, NULL, nvme_lio_emu_worker, e);
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
uint16_t nvme_lio_emu_status(uint16_t st)
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
			return nvme_lio_emu_status(st);
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
		return nvme_lio_emu_status(emu_io(e, NVME_CMD_FLUSH, 0, 0, 0));
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
			return nvme_lio_emu_status(st);
		off += n;
		len -= n;
	}
	return NVME_OK;
}

void nvme_lio_emu_exec(struct nvme_lio_emu *e, struct nvme_io_req *req)
{
	unsigned i;

	req->status = NVME_OK;
	switch (req->op) {
	case NVME_IO_READ:
	case NVME_IO_WRITE:
		req->status = emu_rw(e, req, req->op == NVME_IO_WRITE);
		break;
	case NVME_IO_FLUSH:
		req->status = nvme_lio_emu_status(emu_io(e, NVME_CMD_FLUSH, 0, 0, 0));
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
