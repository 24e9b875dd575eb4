/* vNVMe backend binding (passthrough and isolated modes): the softssd session of one controller,
 * its volume, queue memory (doorbell pages, then the CMB) and guest I/O queues as queue pairs. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "client/lio_client.h"
#include "nvme_lio.h"

struct nvme_lio {
	pthread_mutex_t lock; /* one request at a time on the session socket */
	struct lio_client *c;
	struct lio_identify id;
	char dev[64];
	char vol[LIO_NAME_MAX];
	bool anon, db_poll, dead;
	bool db_switch; /* auto: polled pages until Doorbell Buffer Config, eventfd after */
	uint32_t vol_id, mode, qp_flags;
	uint64_t lba_start, lba_count;
	/* Queue memory: [0, db_bytes) the backend carves doorbell pages from (first fit), then
	 * the CMB. The guest's SQs in the CMB reach the backend as DMA-window addresses. */
	int qmem_fd;
	uint8_t *qmem;
	uint64_t qmem_bytes, db_bytes, cmb_bytes;
	bool win_set;
	uint64_t win_cmb_gpa;
	unsigned nqps;
	bool warned;
};

static void lio_fail(struct nvme_lio *l, char *err, unsigned errlen, const char *what)
{
	snprintf(err, errlen, "vnvme %s: ssd %s: %s: %s", l->dev, l->id.name[0] ? l->id.name : "?",
		 what, lio_client_error(l->c));
}

static int lio_attach(struct nvme_lio *l, const struct nvme_lio_cfg *cfg, char *err,
		      unsigned errlen)
{
	struct lio_vol_attach a = {0};
	int r;

	if (cfg->vol && cfg->vol[0]) {
		snprintf(a.name, sizeof(a.name), "%s", cfg->vol);
		a.size_bytes = cfg->size;
		a.flags = cfg->size ? LIO_ATTACH_CREATE : 0;
	} else {
		a.size_bytes = cfg->size;
		a.flags = LIO_ATTACH_ANON;
	}
	if (cfg->readonly)
		a.flags |= LIO_ATTACH_READONLY;
	r = lio_client_vol_attach(l->c, &a);
	if (r) {
		char what[96];

		snprintf(what, sizeof(what), "volume %s",
			 a.flags & LIO_ATTACH_ANON ? "(anonymous)" : cfg->vol);
		lio_fail(l, err, errlen, what);
		return r;
	}
	r = lio_attach_check(&a, l->id.lba_shift, err, errlen);
	if (r) {
		char why[200];

		snprintf(why, sizeof(why), "%s", err);
		snprintf(err, errlen, "vnvme %s: ssd %s: %s", l->dev, l->id.name, why);
		return r;
	}
	memcpy(l->vol, a.name, sizeof(l->vol));
	l->vol[sizeof(l->vol) - 1] = 0;
	l->anon = a.flags & LIO_ATTACH_ANON;
	l->vol_id = a.vol_id;
	l->lba_start = a.lba_start;
	l->lba_count = a.lba_count;
	return 0;
}

int nvme_lio_open(struct nvme_lio **out, const struct nvme_lio_cfg *cfg, char *err, unsigned errlen)
{
	struct lio_qmem q = {0};
	struct nvme_lio *l;
	int r;

	l = calloc(1, sizeof(*l));
	if (!l) {
		snprintf(err, errlen, "vnvme %s: out of memory", cfg->id);
		return -ENOMEM;
	}
	pthread_mutex_init(&l->lock, NULL);
	l->qmem_fd = -1;
	l->mode = cfg->mode;
	snprintf(l->dev, sizeof(l->dev), "%s", cfg->id);
	if (!lio_name_ok(cfg->ssd) || (cfg->vol && cfg->vol[0] && !lio_name_ok(cfg->vol))) {
		snprintf(err, errlen,
			 "vnvme %s: ssd '%s' / vol '%s': not plain SSD and volume names", cfg->id,
			 cfg->ssd ? cfg->ssd : "", cfg->vol ? cfg->vol : "");
		pthread_mutex_destroy(&l->lock);
		free(l);
		return -EINVAL;
	}
	r = lio_client_connect(&l->c, cfg->ssd, cfg->label, &l->id, err, errlen);
	if (r) {
		char why[256];

		snprintf(why, sizeof(why), "%s", err);
		snprintf(err, errlen, "vnvme %s: ssd %s: %s", cfg->id, cfg->ssd, why);
		free(l);
		return r;
	}
	if (l->id.lba_shift != 9 && l->id.lba_shift != 12) {
		snprintf(err, errlen,
			 "vnvme %s: ssd %s has %u-byte LBAs; this controller offers 512 and 4096",
			 cfg->id, cfg->ssd, 1u << (l->id.lba_shift & 31));
		r = -EOPNOTSUPP;
		goto fail;
	}
	if (cfg->db == NVME_LIO_DB_POLL && !(l->id.flags & LIO_ID_DB_POLL)) {
		snprintf(err, errlen, "vnvme %s: ssd %s does not serve polled doorbell pages",
			 cfg->id, cfg->ssd);
		r = -EOPNOTSUPP;
		goto fail;
	}
	if (cfg->db == NVME_LIO_DB_EVENTFD && !(l->id.flags & LIO_ID_DB_EVENTFD)) {
		snprintf(err, errlen, "vnvme %s: ssd %s does not serve eventfd doorbells", cfg->id,
			 cfg->ssd);
		r = -EOPNOTSUPP;
		goto fail;
	}
	l->db_poll = cfg->db == NVME_LIO_DB_POLL ||
		     (cfg->db == NVME_LIO_DB_AUTO && (l->id.flags & LIO_ID_DB_POLL));
	/* auto on an SSD serving both kinds and the queue-pair state calls: pages for any guest,
	 * moved to eventfd doorbells once the guest configures its shadow buffer */
	l->db_switch = cfg->db == NVME_LIO_DB_AUTO && l->db_poll &&
		       (l->id.flags & LIO_ID_DB_EVENTFD) && (l->id.flags & LIO_ID_QP_STATE) &&
		       (l->id.flags & LIO_ID_DB_STRIDE);
	l->qp_flags = l->db_poll ? LIO_QP_DB_POLL : LIO_QP_DB_EVENTFD;
	if (cfg->readonly)
		l->qp_flags |= LIO_QP_READONLY;
	r = lio_attach(l, cfg, err, errlen);
	if (r)
		goto fail;
	l->cmb_bytes = cfg->cmb_size;
	l->db_bytes = l->db_poll ? (uint64_t)cfg->nqueues * 2 * LIO_PAGE_SIZE : 0;
	l->qmem_bytes = l->db_bytes + l->cmb_bytes;
	if (!l->qmem_bytes || l->qmem_bytes > (64ULL << 20)) {
		snprintf(err, errlen,
			 "vnvme %s: %u queue pairs need %llu MiB of queue memory, more than 64",
			 cfg->id, cfg->nqueues, (unsigned long long)(l->qmem_bytes >> 20));
		r = -E2BIG;
		goto fail;
	}
	q.size = l->qmem_bytes;
	r = lio_client_qmem_alloc(l->c, &q);
	if (r) {
		lio_fail(l, err, errlen, "queue memory");
		goto fail;
	}
	l->qmem_fd = q.fd;
	{
		char why[200];

		/* mapped into the guest as the CMB: exactly what was asked for, or nothing */
		r = lio_qmem_fd_check(l->c, q.fd, l->qmem_bytes, why, sizeof(why));
		if (r) {
			snprintf(err, errlen, "vnvme %s: ssd %s: %s", cfg->id, cfg->ssd, why);
			goto fail;
		}
	}
	l->qmem = mmap(NULL, l->qmem_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, q.fd, 0);
	if (l->qmem == MAP_FAILED) {
		r = -errno;
		l->qmem = NULL;
		snprintf(err, errlen, "vnvme %s: mapping %llu bytes of queue memory: %s", cfg->id,
			 (unsigned long long)l->qmem_bytes, strerror(errno));
		goto fail;
	}
	/* The CMB part is in the DMA window: its pages are the VM's, faulted in here, not by the
	 * SSD (issue 23, finding 6; softssd --require-resident refuses a window without them). */
	r = gmem_populate(l->qmem, l->qmem_bytes);
	if (r) {
		snprintf(err, errlen, "vnvme %s: populating %llu bytes of queue memory: %s",
			 cfg->id, (unsigned long long)l->qmem_bytes, strerror(-r));
		goto fail;
	}
	*out = l;
	return 0;
fail:
	nvme_lio_close(l);
	return r;
}

void nvme_lio_close(struct nvme_lio *l)
{
	if (!l)
		return;
	/* Closing the session destroys its queue pairs and frees an anonymous volume. */
	if (l->c)
		lio_client_close(l->c);
	if (l->qmem)
		munmap(l->qmem, l->qmem_bytes);
	if (l->qmem_fd >= 0)
		close(l->qmem_fd);
	pthread_mutex_destroy(&l->lock);
	free(l);
}

void *nvme_lio_cmb(struct nvme_lio *l)
{
	return l->qmem + l->db_bytes;
}

uint64_t nvme_lio_lba_start(const struct nvme_lio *l)
{
	return l->lba_start;
}

uint64_t nvme_lio_lba_count(const struct nvme_lio *l)
{
	return l->lba_count;
}

uint32_t nvme_lio_lba_shift(const struct nvme_lio *l)
{
	return l->id.lba_shift;
}

bool nvme_lio_db_poll(const struct nvme_lio *l)
{
	return l->db_poll;
}

bool nvme_lio_db_switch(const struct nvme_lio *l)
{
	return l->db_switch;
}

/* The guest's shadow doorbell and EventIdx slots of b's queue pair (SQ tail, then the CQ head
 * one stride later), when both pairs of slots lie in guest RAM. */
static bool lio_slots(const struct nvme_qp_bind *b, const struct guest_mem *gm, uint64_t *db,
		      uint64_t *ei)
{
	uint64_t stride = 4ULL << (b->dstrd & 15), off = 2 * (uint64_t)b->sqid * stride;

	if (!b->dbbuf_dbs || !b->dbbuf_eis || off > UINT64_MAX - stride - 4 ||
	    b->dbbuf_dbs > UINT64_MAX - off - stride - 4 ||
	    b->dbbuf_eis > UINT64_MAX - off - stride - 4)
		return false;
	*db = b->dbbuf_dbs + off;
	*ei = b->dbbuf_eis + off;
	return gmem_ptr(gm, *db, stride + 4) && gmem_ptr(gm, *ei, stride + 4);
}

bool nvme_lio_bind_eventfd(const struct nvme_lio *l, const struct nvme_qp_bind *b,
			   const struct guest_mem *gm)
{
	uint64_t db, ei;

	if (!l->db_poll)
		return true;
	/* one shadow address per queue pair (uapi.h): an SQ on another CQ stays on pages */
	return l->db_switch && b->cqid == b->sqid && b->dstrd <= 10 && lio_slots(b, gm, &db, &ei);
}

const char *nvme_lio_vol_name(const struct nvme_lio *l)
{
	return l->vol;
}

bool nvme_lio_anon(const struct nvme_lio *l)
{
	return l->anon;
}

bool nvme_lio_dead(const struct nvme_lio *l)
{
	return l->dead;
}

bool nvme_lio_alive(struct nvme_lio *l)
{
	struct pollfd p = {.fd = lio_client_fd(l->c), .events = POLLRDHUP};

	/* A connection given up (a reply late, unasked or malformed) is as good as gone. */
	if (!l->dead && lio_client_broken(l->c)) {
		l->dead = true;
		fprintf(stderr, "vnvme %s: ssd %s: %s: controller fatal status\n", l->dev,
			l->id.name, lio_client_error(l->c));
	}
	/* The daemon never writes unasked: a readable or hung-up socket means it went away. */
	if (!l->dead && poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR))) {
		l->dead = true;
		fprintf(stderr, "vnvme %s: ssd %s went away: controller fatal status\n", l->dev,
			l->id.name);
	}
	return !l->dead;
}

/* A transport error (not a refusal) means the daemon is gone: say so once, fail fast after.
 * A status the daemon answered is a refusal whatever its errno: QP_QUIESCE's -ETIMEDOUT says the
 * queue pair still had commands in flight at the deadline, and it serves on. */
static void lio_note(struct nvme_lio *l, int r, const char *what)
{
	if (lio_client_broken(l->c) || r == -EPIPE || r == -ECONNRESET || r == -ENOTCONN)
		l->dead = true;
	if (!l->warned || !l->dead)
		fprintf(stderr, "vnvme %s: ssd %s: %s: %s\n", l->dev, l->id.name, what,
			lio_client_error(l->c));
	if (l->dead)
		l->warned = true;
}

/* Guest RAM, and the CMB where it decodes now, as the session's DMA window. */
static int lio_window(struct nvme_lio *l, const struct guest_mem *gm, uint64_t cmb_gpa)
{
	struct lio_dma_window w;
	unsigned i;
	int r;

	if (l->win_set && (l->win_cmb_gpa == cmb_gpa || l->nqps))
		return 0; /* a moved CMB is registered again once no queue pair uses the window */
	memset(&w, 0, sizeof(w));
	for (i = 0; i < gm->nslots && i < LIO_MAX_REGIONS - 1; i++) {
		w.r[i].gpa = gm->slots[i].gpa;
		w.r[i].size = gm->slots[i].size;
		w.r[i].fd_offset = gm->slots[i].fd_off;
		w.r[i].fd = gm->memfd;
	}
	if (cmb_gpa != ~0ULL && l->cmb_bytes) {
		w.r[i].gpa = cmb_gpa;
		w.r[i].size = l->cmb_bytes;
		w.r[i].fd_offset = l->db_bytes;
		w.r[i].fd = l->qmem_fd;
		i++;
	}
	w.nr_regions = i;
	r = lio_client_dma_register(l->c, &w);
	if (r) {
		lio_note(l, r, "DMA window");
		return r;
	}
	l->win_set = true;
	l->win_cmb_gpa = cmb_gpa;
	return 0;
}

static uint16_t lio_bind(struct nvme_lio *l, const struct nvme_qp_bind *b,
			 const struct guest_mem *gm, uint64_t cmb_gpa, int db_fd, int irq_fd,
			 const struct lio_qp_state *saved, uint32_t *qp_id, void **db_host)
{
	struct lio_qp_create q = {
	    .vol_id = l->vol_id,
	    .mode = l->mode,
	    .flags = l->qp_flags,
	    .sqid = b->sqid,
	    .cqid = b->cqid,
	    .sq_depth = b->sq_depth,
	    .cq_depth = b->cq_depth,
	    .sq_gpa = b->sq_gpa,
	    .cq_gpa = b->cq_gpa,
	    .db_fd = db_fd,
	    .irq_fd = irq_fd,
	};
	bool ev = nvme_lio_bind_eventfd(l, b, gm);
	uint16_t st = 0;
	int r;

	pthread_mutex_lock(&l->lock);
	if (l->dead) {
		st = NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_INTERNAL) | NVME_STATUS_DNR;
		goto out;
	}
	if (l->db_switch) {
		q.flags &= ~(LIO_QP_DB_POLL | LIO_QP_DB_EVENTFD);
		q.flags |= ev ? LIO_QP_DB_EVENTFD : LIO_QP_DB_POLL;
	}
	if (ev && l->db_switch) {
		uint64_t db = 0, ei = 0;

		/* strided slots (DSTRD 10, the pages' stride), checked by nvme_lio_bind_eventfd */
		lio_slots(b, gm, &db, &ei);
		q.shadow_db_gpa = db;
		q.eventidx_gpa = ei;
		if (b->dstrd) {
			q.flags |= LIO_QP_DB_STRIDE;
			q.db_stride = b->dstrd;
		}
		if (saved) {
			/* the slots hold the values the queue pair goes on from (it may have been
			 * on pages until now); EventIdx at the tail asks for the next ring */
			uint64_t cq_off = 4ULL << b->dstrd;

			gmem_write(gm, db, &saved->sq_tail_db, 4);
			gmem_write(gm, db + cq_off, &saved->cq_head_db, 4);
			gmem_write(gm, ei, &saved->sq_tail_db, 4);
		}
	} else if (ev) {
		/* An ioeventfd carries no value: the backend reads tails from the shadow buffer,
		 * which the guest must have configured (Doorbell Buffer Config) first. */
		if (!b->dbbuf_dbs) {
			fprintf(
			    stderr,
			    "vnvme %s: SQ %u: eventfd doorbells need the shadow doorbell buffer "
			    "(Doorbell Buffer Config) before queue creation\n",
			    l->dev, b->sqid);
			st = NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_CMD_SEQ_ERROR) | NVME_STATUS_DNR;
			goto out;
		}
		/* Packed doorbells (stride 4): SQ y's tail at slot 2y, CQ x's head at slot 2x + 1.
		 * uapi.h gives the backend one address, the CQ head 4 bytes after the SQ tail, so
		 * only a queue pair whose SQ and CQ share their id has both where it looks; any
		 * other pairing would have the backend read another queue's head and stall. */
		if (b->cqid != b->sqid) {
			fprintf(
			    stderr,
			    "vnvme %s: SQ %u on CQ %u: eventfd doorbells pair each SQ with the CQ "
			    "of its own id\n",
			    l->dev, b->sqid, b->cqid);
			st = NVME_STATUS(NVME_SCT_CMD_SPECIFIC, NVME_SC_CQ_INVALID) |
			     NVME_STATUS_DNR;
			goto out;
		}
		q.shadow_db_gpa = b->dbbuf_dbs + (uint64_t)b->sqid * 8;
		q.eventidx_gpa = b->dbbuf_eis ? b->dbbuf_eis + (uint64_t)b->sqid * 8 : 0;
	}
	if (irq_fd >= 0 && b->ien)
		q.flags |= LIO_QP_IRQ_ENABLED;
	else
		q.irq_fd = -1;
	r = lio_window(l, gm, cmb_gpa);
	if (r) {
		st = NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_INTERNAL) | NVME_STATUS_DNR;
		goto out;
	}
	if (saved) {
		struct lio_qp_restore rq = {.qp = q, .st = *saved};

		/* what QP_QUIESCE reported, minus its output-only fields */
		rq.st.qp_id = rq.st.timeout_ms = rq.st.flags = rq.st.rsvd = 0;
		rq.st.quiesce_ns = 0;
		r = lio_client_qp_restore(l->c, &rq);
		q = rq.qp;
	} else {
		r = lio_client_qp_create(l->c, &q);
	}
	if (r) {
		char what[64];

		snprintf(what, sizeof(what), "queue pair for SQ %u", b->sqid);
		lio_note(l, r, what);
		st = r == -EINVAL || r == -EFAULT
			 ? NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD) | NVME_STATUS_DNR
			 : NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_INTERNAL) | NVME_STATUS_DNR;
		goto out;
	}
	if (!ev &&
	    (q.db_off % LIO_PAGE_SIZE || !lio_range_ok(q.db_off, 2 * LIO_PAGE_SIZE, l->db_bytes))) {
		/* a page pair outside the doorbell area (or wrapping past 2^64) would alias the
		 * CMB or map lvmm's own memory into the guest: the backend's reply is refused */
		fprintf(stderr, "vnvme %s: SQ %u: doorbell pages at 0x%llx outside the area\n",
			l->dev, b->sqid, (unsigned long long)q.db_off);
		lio_client_qp_destroy(l->c, q.qp_id);
		st = NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_INTERNAL) | NVME_STATUS_DNR;
		goto out;
	}
	*qp_id = q.qp_id;
	*db_host = ev ? NULL : l->qmem + q.db_off;
	l->nqps++;
out:
	pthread_mutex_unlock(&l->lock);
	return st;
}

uint16_t nvme_lio_bind(struct nvme_lio *l, const struct nvme_qp_bind *b, const struct guest_mem *gm,
		       uint64_t cmb_gpa, int db_fd, int irq_fd, uint32_t *qp_id, void **db_host)
{
	return lio_bind(l, b, gm, cmb_gpa, db_fd, irq_fd, NULL, qp_id, db_host);
}

uint16_t nvme_lio_bind_saved(struct nvme_lio *l, const struct nvme_qp_bind *b,
			     const struct guest_mem *gm, uint64_t cmb_gpa, int db_fd, int irq_fd,
			     const struct lio_qp_state *saved, uint32_t *qp_id, void **db_host)
{
	return lio_bind(l, b, gm, cmb_gpa, db_fd, irq_fd, saved, qp_id, db_host);
}

bool nvme_lio_has_qp_state(const struct nvme_lio *l)
{
	return l->id.flags & LIO_ID_QP_STATE;
}

int nvme_lio_quiesce(struct nvme_lio *l, uint32_t qp_id, struct lio_qp_state *st)
{
	int r = -ENOTCONN;

	pthread_mutex_lock(&l->lock);
	if (!l->dead) {
		r = lio_client_qp_quiesce(l->c, qp_id, 0, st);
		if (r)
			lio_note(l, r, "queue pair quiesce");
	}
	pthread_mutex_unlock(&l->lock);
	return r;
}

int nvme_lio_resume(struct nvme_lio *l, uint32_t qp_id)
{
	int r = -ENOTCONN;

	pthread_mutex_lock(&l->lock);
	if (!l->dead) {
		r = lio_client_qp_resume(l->c, qp_id);
		if (r)
			lio_note(l, r, "queue pair resume");
	}
	pthread_mutex_unlock(&l->lock);
	return r;
}

int nvme_lio_release(struct nvme_lio *l, char *err, unsigned errlen)
{
	int r = -ENOTCONN;

	pthread_mutex_lock(&l->lock);
	if (!l->dead) {
		r = lio_client_vol_detach(l->c, l->vol_id);
		if (r)
			lio_note(l, r, "volume detach");
	}
	if (r)
		lio_fail(l, err, errlen, "volume detach for the migration");
	pthread_mutex_unlock(&l->lock);
	return r;
}

int nvme_lio_reclaim(struct nvme_lio *l, char *err, unsigned errlen)
{
	struct lio_vol_attach a = {0};
	int r = -ENOTCONN;

	snprintf(a.name, sizeof(a.name), "%s", l->vol);
	a.flags = l->qp_flags & LIO_QP_READONLY ? LIO_ATTACH_READONLY : 0;
	pthread_mutex_lock(&l->lock);
	if (!l->dead) {
		r = lio_client_vol_attach(l->c, &a);
		if (r)
			lio_note(l, r, "volume attach");
	}
	if (r) {
		lio_fail(l, err, errlen, "volume attach after a failed migration");
	} else if (a.lba_start != l->lba_start || a.lba_count != l->lba_count) {
		snprintf(err, errlen,
			 "vnvme %s: ssd %s: volume %s came back at LBA %llu, %llu LBAs (it was at "
			 "%llu, %llu)",
			 l->dev, l->id.name, l->vol, (unsigned long long)a.lba_start,
			 (unsigned long long)a.lba_count, (unsigned long long)l->lba_start,
			 (unsigned long long)l->lba_count);
		lio_client_vol_detach(l->c, a.vol_id);
		r = -ESTALE;
	} else {
		l->vol_id = a.vol_id;
	}
	pthread_mutex_unlock(&l->lock);
	return r;
}

void nvme_lio_unbind(struct nvme_lio *l, uint32_t qp_id)
{
	int r;

	pthread_mutex_lock(&l->lock);
	if (l->nqps)
		l->nqps--;
	if (!l->dead) {
		r = lio_client_qp_destroy(l->c, qp_id);
		if (r)
			lio_note(l, r, "queue pair destroy");
	}
	pthread_mutex_unlock(&l->lock);
}

int nvme_lio_qp_stats(struct nvme_lio *l, uint32_t qp_id, struct lio_qp_stats *s)
{
	int r = -ENOTCONN;

	pthread_mutex_lock(&l->lock);
	if (!l->dead)
		r = lio_client_qp_stats(l->c, qp_id, s);
	pthread_mutex_unlock(&l->lock);
	return r;
}

int nvme_lio_write_through(struct nvme_lio *l, bool on, uint64_t *syncs)
{
	struct lio_session_set ss = {
	    .mask = LIO_SESSION_WRITE_THROUGH,
	    .flags = on ? LIO_SESSION_WRITE_THROUGH : 0,
	};
	int r = -ENOTCONN;

	pthread_mutex_lock(&l->lock);
	if (!l->dead) {
		r = lio_client_session_set(l->c, &ss);
		if (r)
			lio_note(l, r, on ? "write-through on" : "write-through off");
		else if (syncs)
			*syncs = ss.syncs;
	}
	pthread_mutex_unlock(&l->lock);
	return r;
}
