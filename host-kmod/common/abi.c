/* The backend ABI's request rules (include/lightiov/abi.h): what softssd and lightiov.ko both
 * refuse, in one order, with one errno and one message per rule. No libc: lightiov.ko too.
 *
 * Where the two servers had drifted apart, the stricter rule is the one here: DMA-window GPAs
 * page aligned (the controller sees the window page by page), DB_DIRECT's shape checked before
 * anything the session lacks, irq_fd -1 without IRQ_ENABLED on the ioctl transport.
 */
#include "lightiov/abi.h"

#ifdef __KERNEL__
#include <linux/errno.h>
#else
#include <errno.h>
#endif

#define LIO_PAGE_MASK ((uint64_t)LIO_PAGE_SIZE - 1)

/* the limits as the messages below spell them */
LIO_STATIC_ASSERT(LIO_MAX_QDEPTH == 4096, "depth message");
LIO_STATIC_ASSERT(LIO_MAX_REGIONS == 8, "nr_regions message");
LIO_STATIC_ASSERT(LIO_MAX_QMEM == 64u << 20, "qmem size message");

/* Fills *e and returns err: the one exit of every refusal. */
static int abi_refuse(struct lio_abi_err *e, int err, const char *field, uint64_t value,
		      enum lio_abi_fmt fmt, const char *why)
{
	e->field = field;
	e->why = why;
	e->value = value;
	e->fmt = fmt;
	return err;
}

static void abi_clear(struct lio_abi_err *e)
{
	e->field = "";
	e->why = "";
	e->value = 0;
	e->region = -1;
	e->fmt = LIO_ABI_NONE;
}

/* A ring or doorbell slot in guest memory: align-aligned, [gpa, gpa + len) in one region. */
static bool abi_gpa_ok(const struct lio_abi_session *s, uint64_t gpa, uint64_t len, uint64_t align)
{
	struct lio_check_ctx ctx = {.regions = s->regions, .nr_regions = s->nr_regions};

	return !(gpa % align) && lio_window_contains(&ctx, gpa, len);
}

static int abi_qp_flags(const struct lio_qp_create *q, uint32_t served, struct lio_abi_err *e)
{
	const uint32_t direct_needs = LIO_QP_SQ_QMEM | LIO_QP_CQ_QMEM;
	unsigned doorbells = !!(q->flags & LIO_QP_DB_POLL) + !!(q->flags & LIO_QP_DB_EVENTFD) +
			     !!(q->flags & LIO_QP_DB_DIRECT);

	if (q->flags & ~LIO_QP_FLAGS_ALL)
		return abi_refuse(e, -EINVAL, "flags", q->flags & ~LIO_QP_FLAGS_ALL, LIO_ABI_HEX,
				  "unknown flags");
	if (q->flags & ~served)
		return abi_refuse(e, -EINVAL, "flags", q->flags & ~served, LIO_ABI_HEX,
				  "not served by this backend");
	if (doorbells != 1)
		return abi_refuse(e, -EINVAL, "flags", q->flags, LIO_ABI_HEX,
				  served & LIO_QP_DB_DIRECT
				      ? "exactly one of DB_POLL, DB_EVENTFD and DB_DIRECT"
				      : "exactly one of DB_POLL and DB_EVENTFD");
	if (!(q->flags & LIO_QP_DB_DIRECT))
		return 0;
	if (q->mode != LIGHTIOV_MODE_PASSTHROUGH)
		return abi_refuse(e, -EINVAL, "mode", q->mode, LIO_ABI_DEC,
				  "DB_DIRECT is passthrough (1) only");
	if ((q->flags & direct_needs) != direct_needs || (q->flags & LIO_QP_READONLY))
		return abi_refuse(e, -EINVAL, "flags", q->flags, LIO_ABI_HEX,
				  "DB_DIRECT needs SQ_QMEM and CQ_QMEM, never READONLY");
	return 0;
}

static int abi_qp_rings(const struct lio_qp_create *q, const struct lio_abi_session *s,
			struct lio_abi_err *e)
{
	const char *ring = "not page aligned inside one region of the DMA window";
	const char *slot = "not 4-byte aligned with both slots inside one region of the DMA window";
	uint64_t slots = 8;

	if (!(q->flags & LIO_QP_SQ_QMEM) &&
	    !abi_gpa_ok(s, q->sq_gpa, (uint64_t)q->sq_depth * sizeof(struct nvme_sqe),
			LIO_PAGE_SIZE))
		return abi_refuse(e, -EINVAL, "sq_gpa", q->sq_gpa, LIO_ABI_HEX, ring);
	if (!(q->flags & LIO_QP_CQ_QMEM) &&
	    !abi_gpa_ok(s, q->cq_gpa, (uint64_t)q->cq_depth * sizeof(struct nvme_cqe),
			LIO_PAGE_SIZE))
		return abi_refuse(e, -EINVAL, "cq_gpa", q->cq_gpa, LIO_ABI_HEX, ring);
	if (!(q->flags & LIO_QP_DB_EVENTFD))
		return 0;
	if (q->flags & LIO_QP_DB_STRIDE) {
		if (q->db_stride < 1 || q->db_stride > 10)
			return abi_refuse(e, -EINVAL, "db_stride", q->db_stride, LIO_ABI_DEC,
					  "outside 1..10");
		slots = (4ULL << q->db_stride) + 4;
	}
	if (!abi_gpa_ok(s, q->shadow_db_gpa, slots, 4))
		return abi_refuse(e, -EINVAL, "shadow_db_gpa", q->shadow_db_gpa, LIO_ABI_HEX, slot);
	if (q->eventidx_gpa && !abi_gpa_ok(s, q->eventidx_gpa, slots, 4))
		return abi_refuse(e, -EINVAL, "eventidx_gpa", q->eventidx_gpa, LIO_ABI_HEX, slot);
	return 0;
}

int lio_abi_qp_create(const struct lio_qp_create *q, const struct lio_abi_session *s,
		      uint32_t served, bool fd_fields, struct lio_abi_err *e)
{
	const uint32_t in_qmem =
	    LIO_QP_SQ_QMEM | LIO_QP_CQ_QMEM | LIO_QP_DB_POLL | LIO_QP_DB_DIRECT;
	const char *depth = "outside 2..4096";
	int r;

	abi_clear(e);
	if (q->mode != LIGHTIOV_MODE_PASSTHROUGH && q->mode != LIGHTIOV_MODE_ISOLATED)
		return abi_refuse(e, -EINVAL, "mode", q->mode, LIO_ABI_DEC,
				  "neither passthrough (1) nor isolated (2)");
	r = abi_qp_flags(q, served, e);
	if (r)
		return r;
	if (q->sq_depth < 2 || q->sq_depth > LIO_MAX_QDEPTH)
		return abi_refuse(e, -EINVAL, "sq_depth", q->sq_depth, LIO_ABI_DEC, depth);
	if (q->cq_depth < 2 || q->cq_depth > LIO_MAX_QDEPTH)
		return abi_refuse(e, -EINVAL, "cq_depth", q->cq_depth, LIO_ABI_DEC, depth);
	if ((q->flags & LIO_QP_DB_STRIDE) && !(q->flags & LIO_QP_DB_EVENTFD))
		return abi_refuse(e, -EINVAL, "flags", q->flags, LIO_ABI_HEX,
				  "DB_STRIDE without DB_EVENTFD");
	if ((q->flags & LIO_QP_DB_DIRECT) && q->cq_depth != q->sq_depth)
		return abi_refuse(e, -EINVAL, "cq_depth", q->cq_depth, LIO_ABI_DEC,
				  "DB_DIRECT needs it equal to sq_depth");
	if (!q->sqid)
		return abi_refuse(e, -EINVAL, "sqid", 0, LIO_ABI_DEC, "is the admin queue's");
	if (!q->cqid)
		return abi_refuse(e, -EINVAL, "cqid", 0, LIO_ABI_DEC, "is the admin queue's");
	if (fd_fields && !(q->flags & LIO_QP_IRQ_ENABLED) && q->irq_fd != -1)
		return abi_refuse(e, -EINVAL, "irq_fd", (uint64_t)(int64_t)q->irq_fd,
				  LIO_ABI_SIGNED, "without IRQ_ENABLED (must be -1)");
	if (!s->nr_regions && !(q->flags & LIO_QP_DB_DIRECT))
		return abi_refuse(e, -ENOENT, "session", 0, LIO_ABI_NONE,
				  "no DMA window registered");
	if ((q->flags & in_qmem) && !s->qmem)
		return abi_refuse(e, -ENOENT, "flags", q->flags, LIO_ABI_HEX,
				  "need queue memory (qmem-alloc first)");
	return abi_qp_rings(q, s, e);
}

int lio_abi_qp_quiesce(const struct lio_qp_state *st, struct lio_abi_err *e)
{
	abi_clear(e);
	if (st->timeout_ms > LIO_QUIESCE_MAX_MS)
		return abi_refuse(e, -EINVAL, "timeout_ms", st->timeout_ms, LIO_ABI_DEC,
				  "above 60000");
	return 0;
}

/* One index of the saved state against its ring's depth. */
static int abi_index(uint32_t v, uint32_t depth, const char *field, struct lio_abi_err *e)
{
	if (v >= depth)
		return abi_refuse(e, -EINVAL, field, v, LIO_ABI_DEC, "not below the queue's depth");
	return 0;
}

int lio_abi_qp_restore(const struct lio_qp_restore *rq, const struct lio_abi_session *s,
		       uint32_t served, bool fd_fields, struct lio_abi_err *e)
{
	const struct lio_qp_state *st = &rq->st;
	const struct lio_qp_create *q = &rq->qp;
	const char *depth = "not the request's depth";
	int r;

	r = lio_abi_qp_create(q, s, served, fd_fields, e);
	if (r)
		return r;
	if (st->sq_depth && st->sq_depth != q->sq_depth)
		return abi_refuse(e, -EINVAL, "sq_depth", st->sq_depth, LIO_ABI_DEC, depth);
	if (st->cq_depth && st->cq_depth != q->cq_depth)
		return abi_refuse(e, -EINVAL, "cq_depth", st->cq_depth, LIO_ABI_DEC, depth);
	r = abi_index(st->sq_head, q->sq_depth, "sq_head", e);
	if (!r)
		r = abi_index(st->sq_tail_db, q->sq_depth, "sq_tail_db", e);
	if (!r)
		r = abi_index(st->cq_tail, q->cq_depth, "cq_tail", e);
	if (!r)
		r = abi_index(st->cq_head, q->cq_depth, "cq_head", e);
	if (!r)
		r = abi_index(st->cq_head_db, q->cq_depth, "cq_head_db", e);
	if (r)
		return r;
	if (st->phase > 1)
		return abi_refuse(e, -EINVAL, "phase", st->phase, LIO_ABI_DEC, "neither 0 nor 1");
	if (st->flags)
		return abi_refuse(e, -EINVAL, "state flags", st->flags, LIO_ABI_HEX, "must be 0");
	if (st->rsvd)
		return abi_refuse(e, -EINVAL, "state rsvd", st->rsvd, LIO_ABI_HEX, "must be 0");
	return 0;
}

static int abi_region(const struct lio_dma_window *w, unsigned i, uint64_t *total,
		      uint64_t max_bytes, struct lio_abi_err *e)
{
	const struct lio_dma_region *d = &w->r[i];
	const char *page = "not a page multiple";
	unsigned j;

	e->region = (int)i;
	if (!d->size)
		return abi_refuse(e, -EINVAL, "size", 0, LIO_ABI_HEX, "is empty");
	if (d->size & LIO_PAGE_MASK)
		return abi_refuse(e, -EINVAL, "size", d->size, LIO_ABI_HEX, page);
	if (d->fd_offset & LIO_PAGE_MASK)
		return abi_refuse(e, -EINVAL, "fd_offset", d->fd_offset, LIO_ABI_HEX, page);
	if (d->gpa & LIO_PAGE_MASK)
		return abi_refuse(e, -EINVAL, "gpa", d->gpa, LIO_ABI_HEX, page);
	if (d->gpa + d->size < d->gpa)
		return abi_refuse(e, -EINVAL, "gpa", d->gpa, LIO_ABI_HEX, "+ size wraps past 2^64");
	if (d->fd_offset + d->size < d->fd_offset)
		return abi_refuse(e, -EINVAL, "fd_offset", d->fd_offset, LIO_ABI_HEX,
				  "+ size wraps past 2^64");
	*total += d->size;
	if (*total < d->size || *total > max_bytes)
		return abi_refuse(e, -E2BIG, "size", d->size, LIO_ABI_HEX,
				  "takes the window past the backend's limit per session");
	for (j = 0; j < i; j++) {
		const struct lio_dma_region *o = &w->r[j];

		if (d->gpa < o->gpa + o->size && o->gpa < d->gpa + d->size)
			return abi_refuse(e, -EINVAL, "gpa", d->gpa, LIO_ABI_HEX,
					  "overlaps an earlier region");
	}
	e->region = -1;
	return 0;
}

int lio_abi_dma_window(const struct lio_dma_window *w, const struct lio_abi_session *s,
		       uint64_t max_bytes, struct lio_abi_err *e)
{
	uint64_t total = 0;
	unsigned i;
	int r;

	abi_clear(e);
	if (s->nqps)
		return abi_refuse(e, -EBUSY, "session", 0, LIO_ABI_NONE,
				  "queue pairs exist; destroy them first");
	if (w->nr_regions < 1 || w->nr_regions > LIO_MAX_REGIONS)
		return abi_refuse(e, -EINVAL, "nr_regions", w->nr_regions, LIO_ABI_DEC,
				  "outside 1..8");
	for (i = 0; i < w->nr_regions; i++) {
		r = abi_region(w, i, &total, max_bytes, e);
		if (r)
			return r;
	}
	return 0;
}

int lio_abi_qmem(const struct lio_qmem *q, const struct lio_abi_session *s, struct lio_abi_err *e)
{
	abi_clear(e);
	if (s->qmem)
		return abi_refuse(e, -EEXIST, "session", 0, LIO_ABI_NONE,
				  "has its queue memory already");
	if (!q->size || (q->size & LIO_PAGE_MASK) || q->size > LIO_MAX_QMEM)
		return abi_refuse(e, -EINVAL, "size", q->size, LIO_ABI_DEC,
				  "not a page multiple in 4K..64M");
	return 0;
}

int lio_abi_session_set(const struct lio_session_set *set, struct lio_abi_err *e)
{
	abi_clear(e);
	if (set->mask & ~LIO_SESSION_WRITE_THROUGH)
		return abi_refuse(e, -EINVAL, "mask", set->mask, LIO_ABI_HEX, "unknown flags");
	return 0;
}

/* ---- the message ---- */

struct abi_buf {
	char *p;
	unsigned len, n;
};

static void abi_put(struct abi_buf *b, const char *s)
{
	for (; *s; s++)
		if (b->n + 1 < b->len)
			b->p[b->n++] = *s;
}

static void abi_put_num(struct abi_buf *b, uint64_t v, unsigned base)
{
	char d[24];
	unsigned i = sizeof(d) - 1;

	d[i] = 0;
	do {
		d[--i] = "0123456789abcdef"[v % base];
		v /= base;
	} while (v);
	abi_put(b, d + i);
}

void lio_abi_msg(char *buf, unsigned len, const char *op, const struct lio_abi_err *e)
{
	struct abi_buf b = {.p = buf, .len = len};

	if (!len)
		return;
	abi_put(&b, op);
	abi_put(&b, ": ");
	if (e->region >= 0) {
		abi_put(&b, "region ");
		abi_put_num(&b, (uint64_t)e->region, 10);
		abi_put(&b, ": ");
	}
	abi_put(&b, e->field);
	switch (e->fmt) {
	case LIO_ABI_NONE:
		break;
	case LIO_ABI_DEC:
		abi_put(&b, " ");
		abi_put_num(&b, e->value, 10);
		break;
	case LIO_ABI_HEX:
		abi_put(&b, " 0x");
		abi_put_num(&b, e->value, 16);
		break;
	case LIO_ABI_SIGNED:
		abi_put(&b, (int64_t)e->value < 0 ? " -" : " ");
		abi_put_num(&b, (int64_t)e->value < 0 ? -e->value : e->value, 10);
		break;
	}
	abi_put(&b, ": ");
	abi_put(&b, e->why);
	buf[b.n] = 0;
}
