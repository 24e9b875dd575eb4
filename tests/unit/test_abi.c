/* Unit tests for host-kmod/common/abi.c, the backend ABI's request rules softssd and lightiov.ko
 * share: each rule of qp-create, dma-register, qmem-alloc and session-set once accepting and once
 * refusing (with its errno and the field it names), the order the rules run in, and the
 * message lio_abi_msg words. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "lightiov/abi.h"
#include "testutil.h"

#define WIN_GPA	       0x100000ull
#define WIN_BYTES      0x100000ull
#define SERVED_SOFTSSD (LIO_QP_FLAGS_ALL & ~LIO_QP_DB_DIRECT)
#define SERVED_KMOD    (LIO_QP_FLAGS_ALL & ~LIO_QP_DB_STRIDE)

static const struct lio_check_region win[] = {{.gpa = WIN_GPA, .size = WIN_BYTES}};
static const struct lio_abi_session sess = {.regions = win, .nr_regions = 1, .qmem = true};

/* An isolated queue pair on shadow doorbells, rings and slots in the window: acceptable. */
static struct lio_qp_create qp_ok(void)
{
	return (struct lio_qp_create){.mode = LIGHTIOV_MODE_ISOLATED,
				      .flags = LIO_QP_DB_EVENTFD,
				      .sqid = 1,
				      .cqid = 1,
				      .sq_depth = 16,
				      .cq_depth = 16,
				      .sq_gpa = WIN_GPA,
				      .cq_gpa = WIN_GPA + 0x1000,
				      .shadow_db_gpa = WIN_GPA + 0x2000,
				      .eventidx_gpa = WIN_GPA + 0x2040,
				      .db_fd = 3,
				      .irq_fd = -1};
}

/* A DB_DIRECT queue pair as lightiov.ko takes it. */
static struct lio_qp_create qp_direct(void)
{
	struct lio_qp_create q = qp_ok();

	q.mode = LIGHTIOV_MODE_PASSTHROUGH;
	q.flags = LIO_QP_SQ_QMEM | LIO_QP_CQ_QMEM | LIO_QP_DB_DIRECT;
	return q;
}

/* qp-create as one server sees it (kmod: the module, ioctl, every flag served; else softssd:
 * the socket, no DB_DIRECT): want, with field named. */
static struct lio_abi_err qp_check(const struct lio_qp_create *q, const struct lio_abi_session *s,
				   bool kmod, int want, const char *field)
{
	struct lio_abi_err e;
	int r = lio_abi_qp_create(q, s, kmod ? SERVED_KMOD : SERVED_SOFTSSD, kmod, &e);

	ck_assert_msg(r == want, "%s: %d, want %d (%s: %s)", kmod ? "kmod" : "softssd", r, want,
		      e.field, e.why);
	if (field)
		ck_assert_str_eq(e.field, field);
	return e;
}

/* The same request to both servers. */
static void qp_expect(const struct lio_qp_create *q, const struct lio_abi_session *s, int want,
		      const char *field)
{
	qp_check(q, s, false, want, field);
	qp_check(q, s, true, want, field);
}

static void qp_ok_both(const struct lio_qp_create *q)
{
	qp_expect(q, &sess, 0, NULL);
}

/* A state QP_QUIESCE could have returned for qp_ok(): acceptable to QP_RESTORE. */
static struct lio_qp_restore restore_ok(void)
{
	return (struct lio_qp_restore){.qp = qp_ok(),
				       .st = {.sq_head = 15,
					      .cq_tail = 15,
					      .cq_head = 3,
					      .phase = 0,
					      .sq_tail_db = 2,
					      .cq_head_db = 15,
					      .sq_depth = 16,
					      .cq_depth = 16}};
}

static void restore_expect(const struct lio_qp_restore *rq, int want, const char *field)
{
	struct lio_abi_err e;

	for (int kmod = 0; kmod < 2; kmod++) {
		int r = lio_abi_qp_restore(rq, &sess, kmod ? LIO_QP_FLAGS_ALL : SERVED_SOFTSSD,
					   kmod, &e);

		ck_assert_msg(r == want, "restore: %d, want %d (%s: %s)", r, want, e.field, e.why);
		if (field)
			ck_assert_str_eq(e.field, field);
	}
}

START_TEST(restore_state)
{
	struct lio_qp_restore rq = restore_ok();
	struct lio_abi_err e;
	char msg[LIO_ERR_MAX];

	restore_expect(&rq, 0, NULL);
	rq.st.sq_depth = rq.st.cq_depth = 0; /* a state that does not say: the request's */
	restore_expect(&rq, 0, NULL);
	rq.st.phase = 1;
	restore_expect(&rq, 0, NULL);
	/* each value at its limit, and hostile */
	rq = restore_ok();
	rq.st.phase = 2;
	restore_expect(&rq, -EINVAL, "phase");
	rq.st.phase = 0xffffffffu;
	restore_expect(&rq, -EINVAL, "phase");
	rq = restore_ok();
	rq.st.sq_head = 16;
	restore_expect(&rq, -EINVAL, "sq_head");
	rq = restore_ok();
	rq.st.sq_tail_db = 0xffffffffu;
	restore_expect(&rq, -EINVAL, "sq_tail_db");
	rq = restore_ok();
	rq.st.cq_tail = 16;
	restore_expect(&rq, -EINVAL, "cq_tail");
	rq = restore_ok();
	rq.st.cq_head = 1000;
	restore_expect(&rq, -EINVAL, "cq_head");
	rq = restore_ok();
	rq.st.cq_head_db = 16;
	restore_expect(&rq, -EINVAL, "cq_head_db");
	rq = restore_ok();
	rq.st.sq_depth = 32;
	restore_expect(&rq, -EINVAL, "sq_depth");
	rq = restore_ok();
	rq.st.cq_depth = 8;
	restore_expect(&rq, -EINVAL, "cq_depth");
	rq = restore_ok();
	rq.st.flags = LIO_QPS_BAD_DB;
	restore_expect(&rq, -EINVAL, "state flags");
	rq = restore_ok();
	rq.st.rsvd = 7;
	restore_expect(&rq, -EINVAL, "state rsvd");
	/* the create rules come first: a bad depth in the request, not the state, is named */
	rq = restore_ok();
	rq.qp.sq_depth = 1;
	restore_expect(&rq, -EINVAL, "sq_depth");
	rq = restore_ok();
	rq.st.sq_head = 99;
	ck_assert_int_eq(lio_abi_qp_restore(&rq, &sess, SERVED_SOFTSSD, false, &e), -EINVAL);
	lio_abi_msg(msg, sizeof(msg), "qp-restore", &e);
	ck_assert_str_eq(msg, "qp-restore: sq_head 99: not below the queue's depth");
}
END_TEST

START_TEST(quiesce_timeout)
{
	struct lio_qp_state st = {.qp_id = 1, .timeout_ms = LIO_QUIESCE_MAX_MS};
	struct lio_abi_err e;

	ck_assert_int_eq(lio_abi_qp_quiesce(&st, &e), 0);
	st.timeout_ms = 0;
	ck_assert_int_eq(lio_abi_qp_quiesce(&st, &e), 0);
	st.timeout_ms = LIO_QUIESCE_MAX_MS + 1;
	ck_assert_int_eq(lio_abi_qp_quiesce(&st, &e), -EINVAL);
	ck_assert_str_eq(e.field, "timeout_ms");
}
END_TEST

START_TEST(qp_mode)
{
	struct lio_qp_create q = qp_ok();

	qp_ok_both(&q);
	q.mode = LIGHTIOV_MODE_PASSTHROUGH;
	qp_ok_both(&q);
	q.mode = 3;
	qp_expect(&q, &sess, -EINVAL, "mode");
	q.mode = LIGHTIOV_MODE_EMULATE;
	qp_expect(&q, &sess, -EINVAL, "mode");
}
END_TEST

START_TEST(qp_flags_known)
{
	struct lio_qp_create q = qp_ok();
	struct lio_abi_err e;

	q.flags |= LIO_QP_READONLY | LIO_QP_IRQ_ENABLED;
	qp_ok_both(&q);
	q.flags |= 1u << 20;
	qp_expect(&q, &sess, -EINVAL, "flags");
	e = qp_check(&q, &sess, true, -EINVAL, "flags");
	ck_assert_uint_eq(e.value, 1u << 20);
	ck_assert_str_eq(e.why, "unknown flags");
}
END_TEST

START_TEST(qp_flags_served)
{
	struct lio_qp_create q = qp_direct();
	struct lio_abi_err e;

	qp_check(&q, &sess, true, 0, NULL);
	e = qp_check(&q, &sess, false, -EINVAL, "flags");
	ck_assert_uint_eq(e.value, LIO_QP_DB_DIRECT);
	ck_assert_str_eq(e.why, "not served by this backend");
}
END_TEST

START_TEST(qp_one_doorbell)
{
	struct lio_qp_create q = qp_ok();
	struct lio_abi_err e;

	q.flags = LIO_QP_DB_POLL;
	qp_ok_both(&q);
	q.flags = LIO_QP_DB_POLL | LIO_QP_DB_EVENTFD;
	qp_expect(&q, &sess, -EINVAL, "flags");
	q.flags = LIO_QP_IRQ_ENABLED;
	qp_expect(&q, &sess, -EINVAL, "flags");
	e = qp_check(&q, &sess, false, -EINVAL, NULL);
	ck_assert_str_eq(e.why, "exactly one of DB_POLL and DB_EVENTFD");
	q = qp_direct();
	q.flags |= LIO_QP_DB_POLL;
	e = qp_check(&q, &sess, true, -EINVAL, NULL);
	ck_assert_str_eq(e.why, "exactly one of DB_POLL, DB_EVENTFD and DB_DIRECT");
}
END_TEST

START_TEST(qp_direct_passthrough)
{
	struct lio_qp_create q = qp_direct();

	qp_check(&q, &sess, true, 0, NULL);
	q.mode = LIGHTIOV_MODE_ISOLATED;
	qp_check(&q, &sess, true, -EINVAL, "mode");
}
END_TEST

START_TEST(qp_direct_shape)
{
	struct lio_qp_create q = qp_direct();

	q.flags |= LIO_QP_IRQ_ENABLED;
	qp_check(&q, &sess, true, 0, NULL);
	q.flags &= ~LIO_QP_CQ_QMEM;
	qp_check(&q, &sess, true, -EINVAL, "flags");
	q = qp_direct();
	q.flags |= LIO_QP_READONLY;
	qp_check(&q, &sess, true, -EINVAL, "flags");
}
END_TEST

START_TEST(qp_depths)
{
	struct lio_qp_create q = qp_ok();

	q.sq_depth = 2;
	q.cq_depth = LIO_MAX_QDEPTH;
	q.cq_gpa = WIN_GPA + 0x4000; /* 64 KiB of CQ */
	q.shadow_db_gpa = WIN_GPA + 0x1000;
	q.eventidx_gpa = 0;
	qp_ok_both(&q);
	q.sq_depth = 1;
	qp_expect(&q, &sess, -EINVAL, "sq_depth");
	q.sq_depth = LIO_MAX_QDEPTH + 1;
	qp_expect(&q, &sess, -EINVAL, "sq_depth");
	q.sq_depth = 16;
	q.cq_depth = 1;
	qp_expect(&q, &sess, -EINVAL, "cq_depth");
	q.cq_depth = LIO_MAX_QDEPTH + 1;
	qp_expect(&q, &sess, -EINVAL, "cq_depth");
}
END_TEST

START_TEST(qp_direct_depths)
{
	struct lio_qp_create q = qp_direct();

	q.sq_depth = q.cq_depth = 64;
	qp_check(&q, &sess, true, 0, NULL);
	q.cq_depth = 128;
	qp_check(&q, &sess, true, -EINVAL, "cq_depth");
	/* unequal depths are fine without DB_DIRECT */
	q = qp_ok();
	q.cq_depth = 32;
	qp_ok_both(&q);
}
END_TEST

START_TEST(qp_queue_ids)
{
	struct lio_qp_create q = qp_ok();

	q.sqid = 65535;
	q.cqid = 2;
	qp_ok_both(&q);
	q.sqid = 0;
	qp_expect(&q, &sess, -EINVAL, "sqid");
	q.sqid = 1;
	q.cqid = 0;
	qp_expect(&q, &sess, -EINVAL, "cqid");
}
END_TEST

START_TEST(qp_irq_fd)
{
	struct lio_qp_create q = qp_ok();
	struct lio_abi_err e;

	q.flags |= LIO_QP_IRQ_ENABLED;
	q.irq_fd = 4;
	qp_ok_both(&q);
	q.flags &= ~LIO_QP_IRQ_ENABLED;
	/* the ioctl's fd fields are the fds: a stray irq_fd is refused */
	e = qp_check(&q, &sess, true, -EINVAL, "irq_fd");
	ck_assert_int_eq(e.fmt, LIO_ABI_SIGNED);
	/* the socket's are ignored (uapi.h): any value passes */
	qp_check(&q, &sess, false, 0, NULL);
	q.irq_fd = -1;
	qp_check(&q, &sess, true, 0, NULL);
}
END_TEST

START_TEST(qp_window)
{
	struct lio_abi_session none = {.qmem = true};
	struct lio_qp_create q = qp_ok();

	qp_ok_both(&q);
	qp_expect(&q, &none, -ENOENT, "session");
	/* DB_DIRECT uses no window */
	q = qp_direct();
	qp_check(&q, &none, true, 0, NULL);
}
END_TEST

START_TEST(qp_qmem)
{
	struct lio_abi_session noq = {.regions = win, .nr_regions = 1};
	struct lio_qp_create q = qp_ok();
	static const uint32_t need[] = {LIO_QP_SQ_QMEM, LIO_QP_CQ_QMEM, 0};

	qp_expect(&q, &noq, 0, NULL);
	for (unsigned i = 0; i < 3; i++) {
		q = qp_ok();
		q.flags = need[i] ? (q.flags | need[i]) : LIO_QP_DB_POLL;
		qp_ok_both(&q);
		qp_expect(&q, &noq, -ENOENT, "flags");
	}
}
END_TEST

START_TEST(qp_sq_gpa)
{
	struct lio_qp_create q = qp_ok();

	q.sq_gpa = WIN_GPA + WIN_BYTES - 16 * 64; /* the SQ ends where the window does */
	q.sq_depth = 16;
	qp_expect(&q, &sess, -EINVAL, "sq_gpa"); /* not page aligned */
	q.sq_depth = 64;
	q.sq_gpa = WIN_GPA + WIN_BYTES - 0x1000;
	qp_ok_both(&q);
	q.sq_depth = 128; /* runs off the window */
	qp_expect(&q, &sess, -EINVAL, "sq_gpa");
	q.sq_gpa = 0x1000;
	q.sq_depth = 16;
	qp_expect(&q, &sess, -EINVAL, "sq_gpa");
	q.flags |= LIO_QP_SQ_QMEM; /* then sq_gpa is not looked at */
	qp_ok_both(&q);
}
END_TEST

START_TEST(qp_cq_gpa)
{
	struct lio_qp_create q = qp_ok();

	q.cq_gpa = WIN_GPA + 0x1000 + 16;
	qp_expect(&q, &sess, -EINVAL, "cq_gpa");
	q.cq_gpa = WIN_GPA + WIN_BYTES;
	qp_expect(&q, &sess, -EINVAL, "cq_gpa");
	q.flags |= LIO_QP_CQ_QMEM;
	qp_ok_both(&q);
}
END_TEST

START_TEST(qp_shadow_db_gpa)
{
	struct lio_qp_create q = qp_ok();

	q.shadow_db_gpa = WIN_GPA + WIN_BYTES - 8;
	qp_ok_both(&q);
	q.shadow_db_gpa = WIN_GPA + WIN_BYTES - 4; /* the CQ head slot falls outside */
	qp_expect(&q, &sess, -EINVAL, "shadow_db_gpa");
	q.shadow_db_gpa = WIN_GPA + 0x2002;
	qp_expect(&q, &sess, -EINVAL, "shadow_db_gpa");
	q.flags = LIO_QP_DB_POLL; /* no shadow doorbells to check */
	qp_ok_both(&q);
}
END_TEST

START_TEST(qp_eventidx_gpa)
{
	struct lio_qp_create q = qp_ok();

	q.eventidx_gpa = 0; /* none */
	qp_ok_both(&q);
	q.eventidx_gpa = WIN_GPA + 0x2042;
	qp_expect(&q, &sess, -EINVAL, "eventidx_gpa");
	q.eventidx_gpa = 0x1000;
	qp_expect(&q, &sess, -EINVAL, "eventidx_gpa");
}
END_TEST

/* Strided shadow slots (doorbell=auto at DSTRD 10): softssd serves them, lightiov.ko does not;
 * both slots of each buffer must lie in the window, the stride within 1..10. */
START_TEST(qp_db_stride)
{
	struct lio_qp_create q = qp_ok();

	q.flags |= LIO_QP_DB_STRIDE;
	q.db_stride = 10;
	q.eventidx_gpa = WIN_GPA + 0x4000;
	qp_check(&q, &sess, false, 0, NULL);
	qp_check(&q, &sess, true, -EINVAL, "flags");
	q.shadow_db_gpa = WIN_GPA + WIN_BYTES - 4096; /* the CQ head slot falls outside */
	qp_check(&q, &sess, false, -EINVAL, "shadow_db_gpa");
	q.shadow_db_gpa = WIN_GPA + 0x2000;
	q.eventidx_gpa = WIN_GPA + WIN_BYTES - 4100;
	qp_check(&q, &sess, false, 0, NULL);
	q.eventidx_gpa = WIN_GPA + WIN_BYTES - 4096;
	qp_check(&q, &sess, false, -EINVAL, "eventidx_gpa");
	q.eventidx_gpa = WIN_GPA + 0x4000;
	q.db_stride = 0;
	qp_check(&q, &sess, false, -EINVAL, "db_stride");
	q.db_stride = 11;
	qp_check(&q, &sess, false, -EINVAL, "db_stride");
	q.db_stride = 0xffffffffu;
	qp_check(&q, &sess, false, -EINVAL, "db_stride");
	q.db_stride = 1;
	q.flags = LIO_QP_DB_POLL | LIO_QP_DB_STRIDE; /* strided slots without shadow doorbells */
	qp_check(&q, &sess, false, -EINVAL, "flags");
}
END_TEST

/* Several faults at once: the first in the documented order names the request. */
START_TEST(qp_order)
{
	struct lio_abi_session none = {0};
	struct lio_qp_create q = qp_ok();

	q.sq_depth = 1;
	q.sqid = 0;
	qp_expect(&q, &none, -EINVAL, "sq_depth");
	q.sq_depth = 16;
	qp_expect(&q, &none, -EINVAL, "sqid");
	q.sqid = 1;
	q.flags = LIO_QP_DB_POLL;
	qp_expect(&q, &none, -ENOENT, "session");
	q.mode = 7;
	qp_expect(&q, &none, -EINVAL, "mode");
}
END_TEST

/* ---- dma-register ---- */

static void dma_expect(const struct lio_dma_window *w, const struct lio_abi_session *s,
		       uint64_t max, int want, const char *field, int region)
{
	struct lio_abi_err e;
	int r = lio_abi_dma_window(w, s, max, &e);

	ck_assert_msg(r == want, "%d, want %d (%s: %s)", r, want, e.field, e.why);
	if (field) {
		ck_assert_str_eq(e.field, field);
		ck_assert_int_eq(e.region, region);
	}
}

static struct lio_dma_window win_ok(void)
{
	return (struct lio_dma_window){.nr_regions = 2,
				       .r = {{.gpa = 0, .size = 0xa0000},
					     {.gpa = 0x100000, .size = 0x100000, .fd_offset = 0}}};
}

static const struct lio_abi_session fresh = {0};

START_TEST(dma_busy)
{
	struct lio_abi_session busy = {.regions = win, .nr_regions = 1, .nqps = 2};
	struct lio_dma_window w = win_ok();

	dma_expect(&w, &fresh, UINT64_MAX, 0, NULL, -1);
	dma_expect(&w, &busy, UINT64_MAX, -EBUSY, "session", -1);
}
END_TEST

START_TEST(dma_nr_regions)
{
	struct lio_dma_window w = win_ok();

	w.nr_regions = 1;
	dma_expect(&w, &fresh, UINT64_MAX, 0, NULL, -1);
	w.nr_regions = LIO_MAX_REGIONS;
	for (unsigned i = 0; i < LIO_MAX_REGIONS; i++)
		w.r[i] = (struct lio_dma_region){.gpa = i * 0x10000ull, .size = 0x10000};
	dma_expect(&w, &fresh, UINT64_MAX, 0, NULL, -1);
	w.nr_regions = 0;
	dma_expect(&w, &fresh, UINT64_MAX, -EINVAL, "nr_regions", -1);
	w.nr_regions = LIO_MAX_REGIONS + 1;
	dma_expect(&w, &fresh, UINT64_MAX, -EINVAL, "nr_regions", -1);
}
END_TEST

START_TEST(dma_size)
{
	struct lio_dma_window w = win_ok();

	w.r[1].size = LIO_PAGE_SIZE;
	dma_expect(&w, &fresh, UINT64_MAX, 0, NULL, -1);
	w.r[1].size = 0;
	dma_expect(&w, &fresh, UINT64_MAX, -EINVAL, "size", 1);
	w.r[1].size = 0x1001;
	dma_expect(&w, &fresh, UINT64_MAX, -EINVAL, "size", 1);
}
END_TEST

START_TEST(dma_fd_offset)
{
	struct lio_dma_window w = win_ok();

	w.r[1].fd_offset = 0x200000;
	dma_expect(&w, &fresh, UINT64_MAX, 0, NULL, -1);
	w.r[1].fd_offset = 0x200800;
	dma_expect(&w, &fresh, UINT64_MAX, -EINVAL, "fd_offset", 1);
	w.r[1].fd_offset = ~0ull & ~0xfffull; /* + size wraps */
	dma_expect(&w, &fresh, UINT64_MAX, -EINVAL, "fd_offset", 1);
}
END_TEST

START_TEST(dma_gpa)
{
	struct lio_dma_window w = win_ok();

	w.r[0].gpa = 0x1000;
	dma_expect(&w, &fresh, UINT64_MAX, 0, NULL, -1);
	w.r[0].gpa = 0x1800; /* page multiples only, as the controller sees the window */
	dma_expect(&w, &fresh, UINT64_MAX, -EINVAL, "gpa", 0);
	w.r[0].gpa = ~0ull & ~0xfffull; /* + size wraps */
	dma_expect(&w, &fresh, UINT64_MAX, -EINVAL, "gpa", 0);
}
END_TEST

START_TEST(dma_limit)
{
	struct lio_dma_window w = win_ok();

	dma_expect(&w, &fresh, 0x1a0000, 0, NULL, -1);
	dma_expect(&w, &fresh, 0x19f000, -E2BIG, "size", 1);
	w.r[0].size = 0xfffffffffffff000ull; /* the total wraps */
	w.r[1].gpa = 0;
	dma_expect(&w, &fresh, UINT64_MAX, -E2BIG, "size", 1);
}
END_TEST

START_TEST(dma_overlap)
{
	struct lio_dma_window w = win_ok();

	w.r[1].gpa = 0xa0000; /* right after region 0: touching, not overlapping */
	dma_expect(&w, &fresh, UINT64_MAX, 0, NULL, -1);
	w.r[1].gpa = 0x9f000;
	dma_expect(&w, &fresh, UINT64_MAX, -EINVAL, "gpa", 1);
	w.r[1].gpa = 0;
	dma_expect(&w, &fresh, UINT64_MAX, -EINVAL, "gpa", 1);
}
END_TEST

/* ---- qmem-alloc, session-set ---- */

START_TEST(qmem_once)
{
	struct lio_qmem q = {.size = 1 << 20};
	struct lio_abi_session has = {.qmem = true};
	struct lio_abi_err e;

	ck_assert_int_eq(lio_abi_qmem(&q, &fresh, &e), 0);
	ck_assert_int_eq(lio_abi_qmem(&q, &has, &e), -EEXIST);
	ck_assert_str_eq(e.field, "session");
}
END_TEST

START_TEST(qmem_size)
{
	static const uint64_t good[] = {LIO_PAGE_SIZE, LIO_MAX_QMEM};
	static const uint64_t bad[] = {0, 4097, LIO_MAX_QMEM + LIO_PAGE_SIZE, 1ull << 63};
	struct lio_qmem q = {0};
	struct lio_abi_err e;

	for (unsigned i = 0; i < 2; i++) {
		q.size = good[i];
		ck_assert_int_eq(lio_abi_qmem(&q, &fresh, &e), 0);
	}
	for (unsigned i = 0; i < 4; i++) {
		q.size = bad[i];
		ck_assert_int_eq(lio_abi_qmem(&q, &fresh, &e), -EINVAL);
		ck_assert_str_eq(e.field, "size");
	}
}
END_TEST

START_TEST(session_set_mask)
{
	struct lio_session_set s = {.mask = LIO_SESSION_WRITE_THROUGH, .flags = 0x80};
	struct lio_abi_err e;

	ck_assert_int_eq(lio_abi_session_set(&s, &e), 0); /* flags outside mask are ignored */
	s.mask = 0;
	ck_assert_int_eq(lio_abi_session_set(&s, &e), 0);
	s.mask = 0x80;
	ck_assert_int_eq(lio_abi_session_set(&s, &e), -EINVAL);
	ck_assert_str_eq(e.field, "mask");
	ck_assert_uint_eq(e.value, 0x80);
}
END_TEST

/* ---- the message ---- */

START_TEST(message)
{
	struct lio_qp_create q = qp_ok();
	struct lio_dma_window w = win_ok();
	struct lio_session_set set = {.mask = 0x80};
	struct lio_abi_err e;
	char m[LIO_ERR_MAX];

	q.sq_depth = 5000;
	lio_abi_qp_create(&q, &sess, LIO_QP_FLAGS_ALL, true, &e);
	lio_abi_msg(m, sizeof(m), "qp-create", &e);
	ck_assert_str_eq(m, "qp-create: sq_depth 5000: outside 2..4096");
	q = qp_ok();
	q.irq_fd = -7;
	lio_abi_qp_create(&q, &sess, LIO_QP_FLAGS_ALL, true, &e);
	lio_abi_msg(m, sizeof(m), "qp-create", &e);
	ck_assert_str_eq(m, "qp-create: irq_fd -7: without IRQ_ENABLED (must be -1)");
	w.r[1].size = 0x1001;
	lio_abi_dma_window(&w, &fresh, UINT64_MAX, &e);
	lio_abi_msg(m, sizeof(m), "dma-register", &e);
	ck_assert_str_eq(m, "dma-register: region 1: size 0x1001: not a page multiple");
	lio_abi_session_set(&set, &e);
	lio_abi_msg(m, sizeof(m), "session-set", &e);
	ck_assert_str_eq(m, "session-set: mask 0x80: unknown flags");
	q = qp_ok();
	lio_abi_qp_create(&q, &fresh, LIO_QP_FLAGS_ALL, true, &e);
	lio_abi_msg(m, sizeof(m), "qp-create", &e);
	ck_assert_str_eq(m, "qp-create: session: no DMA window registered");
	/* cut to the buffer, always terminated */
	lio_abi_msg(m, 12, "qp-create", &e);
	ck_assert_str_eq(m, "qp-create: ");
	m[0] = 'x';
	lio_abi_msg(m, 0, "qp-create", &e);
	ck_assert_int_eq(m[0], 'x');
}
END_TEST

static Suite *abi_suite(void)
{
	Suite *s = suite_create("abi");
	TCase *qp = tcase_create("qp-create");
	TCase *dma = tcase_create("dma-register");
	TCase *other = tcase_create("other");

	tcase_add_test(qp, qp_mode);
	tcase_add_test(qp, qp_flags_known);
	tcase_add_test(qp, qp_flags_served);
	tcase_add_test(qp, qp_one_doorbell);
	tcase_add_test(qp, qp_direct_passthrough);
	tcase_add_test(qp, qp_direct_shape);
	tcase_add_test(qp, qp_depths);
	tcase_add_test(qp, qp_direct_depths);
	tcase_add_test(qp, qp_queue_ids);
	tcase_add_test(qp, qp_irq_fd);
	tcase_add_test(qp, qp_window);
	tcase_add_test(qp, qp_qmem);
	tcase_add_test(qp, qp_sq_gpa);
	tcase_add_test(qp, qp_cq_gpa);
	tcase_add_test(qp, qp_shadow_db_gpa);
	tcase_add_test(qp, qp_eventidx_gpa);
	tcase_add_test(qp, qp_db_stride);
	tcase_add_test(qp, qp_order);
	suite_add_tcase(s, qp);
	tcase_add_test(dma, dma_busy);
	tcase_add_test(dma, dma_nr_regions);
	tcase_add_test(dma, dma_size);
	tcase_add_test(dma, dma_fd_offset);
	tcase_add_test(dma, dma_gpa);
	tcase_add_test(dma, dma_limit);
	tcase_add_test(dma, dma_overlap);
	suite_add_tcase(s, dma);
	tcase_add_test(other, qmem_once);
	tcase_add_test(other, qmem_size);
	tcase_add_test(other, session_set_mask);
	tcase_add_test(other, message);
	tcase_add_test(other, restore_state);
	tcase_add_test(other, quiesce_timeout);
	suite_add_tcase(s, other);
	return s;
}

int main(void)
{
	return testutil_run_suite(abi_suite());
}
