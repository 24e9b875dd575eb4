/* softssd's queue-pair state calls end to end (QP_QUIESCE, QP_RESUME, QP_RESTORE): a test client
 * writes while its queue pair is quiesced, the state goes to a second session (as a snapshot's
 * restore would), which continues with no command lost or repeated; hostile requests refused. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lightiov/nvme.h"
#include "lightiov/uapi.h"
#include "client/lio_client.h"
#include "ssdutil.h"
#include "testutil.h"

#define SSD	   "qs0"
#define VOL	   "snapvol"
#define VOL_BYTES  (8u << 20)
#define LBA_SHIFT  9
#define DEPTH	   64
#define NR_BEFORE  40 /* writes in flight when the quiesce comes */
#define NR_PARKED  5  /* writes rung while quiesced: run once, after the restore */
#define BLOCK_LBAS 8  /* 4 KiB */

static char dir[64], backing[128], logpath[128];
static pid_t daemon_pid;

static void daemon_start(const char *model)
{
	const char *opts[8] = {"--backing", backing, "--size", "64M", NULL};

	if (model) {
		opts[4] = "--model";
		opts[5] = model;
		opts[6] = NULL;
	}
	daemon_pid = testutil_ssd_start(SSD, logpath, opts);
}

static void setup(void)
{
	testutil_mkdtemp(dir, sizeof(dir), "/tmp/lvmm-qpstate-");
	snprintf(backing, sizeof(backing), "%s/backing.img", dir);
	snprintf(logpath, sizeof(logpath), "%s/daemon.log", dir);
	setenv("LVMM_RUN_DIR", dir, 1);
}

static void teardown(void)
{
	int st = testutil_ssd_stop(&daemon_pid, SIGTERM);

	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "softssd ended with 0x%x: %s", st,
		      testutil_slurp(logpath));
	testutil_rmtree(dir);
}

static struct lio_client *connect_ok(const char *label, struct lio_identify *id)
{
	struct lio_client *c = NULL;
	char err[256];
	int r = lio_client_connect(&c, SSD, label, id, err, sizeof(err));

	ck_assert_msg(r == 0, "connect: %s", err);
	return c;
}

static struct lio_drv *drv_open(struct lio_client *c, const struct lio_vol_attach *a, uint32_t mode,
				uint32_t flags)
{
	struct lio_drv_opts o = {.vol_id = a->vol_id,
				 .lba_start = a->lba_start,
				 .lba_count = a->lba_count,
				 .lba_shift = LBA_SHIFT,
				 .mode = mode,
				 .qp_flags = flags,
				 .nr_qp = 1,
				 .depth = DEPTH};
	struct lio_drv *d = NULL;
	char err[256];
	int r = lio_drv_open(&d, c, &o, err, sizeof(err));

	ck_assert_msg(r == 0, "lio_drv_open: %s", err);
	return d;
}

static uint64_t stamp(unsigned n, unsigned i)
{
	return (uint64_t)0x51a7e000 << 32 | (uint64_t)n << 16 | i;
}

/* Block n (4 KiB at LBA n * 8) written from its own buffer, not waited for. */
static void submit_write(struct lio_drv *d, uint64_t bufs, unsigned n)
{
	uint64_t gpa = bufs + (uint64_t)n * 4096, lba = (uint64_t)n * BLOCK_LBAS;
	uint64_t *p = lio_drv_ptr(d, gpa);
	struct nvme_sqe sqe = {.opcode = NVME_CMD_WRITE, .nsid = 1};

	for (unsigned i = 0; i < 512; i++)
		p[i] = stamp(n, i);
	if (d->o.mode == LIGHTIOV_MODE_PASSTHROUGH)
		lba += d->o.lba_start;
	sqe.cdw10 = (uint32_t)lba;
	sqe.cdw11 = (uint32_t)(lba >> 32);
	sqe.cdw12 = BLOCK_LBAS - 1;
	lio_drv_prp(d, 0, &sqe, gpa, 4096);
	ck_assert_int_ge(lio_drv_submit(d, 0, &sqe), 0);
}

/* Reaps exactly n completions, each a success, each cid once. */
static void reap_ok(struct lio_drv *d, unsigned n)
{
	struct nvme_cqe cqe[DEPTH];
	bool seen[65536] = {0};
	unsigned got = 0;

	while (got < n) {
		int k = lio_drv_reap(d, 0, cqe, DEPTH, 10000);

		ck_assert_msg(k > 0, "%u of %u completions, then none for 10 s", got, n);
		for (int i = 0; i < k; i++) {
			ck_assert_msg((cqe[i].status >> 1) == 0, "cid %u: status 0x%x", cqe[i].cid,
				      cqe[i].status >> 1);
			ck_assert_msg(!seen[cqe[i].cid], "cid %u completed twice", cqe[i].cid);
			seen[cqe[i].cid] = true;
		}
		got += (unsigned)k;
	}
	ck_assert_uint_eq(got, n);
}

static uint64_t gpa_of(struct lio_drv *d, const volatile void *p)
{
	return LIO_DRV_GPA_BASE + (uint64_t)((const uint8_t *)p - d->mem);
}

/* The saved queue pair's request as QP_CREATE had it. */
static struct lio_qp_restore restore_req(struct lio_drv *d, uint32_t vol_id,
					 const struct lio_qp_state *st)
{
	struct lio_drv_qp *q = &d->qp[0];
	struct lio_qp_restore rq = {.qp = {.vol_id = vol_id,
					   .mode = d->o.mode,
					   .flags = d->o.qp_flags,
					   .sqid = 1,
					   .cqid = 1,
					   .sq_depth = DEPTH,
					   .cq_depth = DEPTH,
					   .sq_gpa = gpa_of(d, q->sq),
					   .cq_gpa = gpa_of(d, q->cq),
					   .db_fd = q->db_fd,
					   .irq_fd = -1}};

	if (d->o.qp_flags & LIO_QP_DB_EVENTFD) {
		rq.qp.shadow_db_gpa = gpa_of(d, q->sq_db);
		rq.qp.eventidx_gpa = rq.qp.shadow_db_gpa + LIO_PAGE_SIZE;
	}
	rq.st = *st;
	rq.st.qp_id = 0;
	rq.st.timeout_ms = 0;
	rq.st.flags = 0;
	rq.st.quiesce_ns = 0;
	return rq;
}

static void restore_refused(struct lio_client *c, struct lio_qp_restore rq, const char *word)
{
	int r = lio_client_qp_restore(c, &rq);

	ck_assert_msg(r == -EINVAL, "restore with bad %s: %d (%s)", word, r, lio_client_error(c));
	ck_assert_msg(strstr(lio_client_error(c), word), "message '%s' lacks '%s'",
		      lio_client_error(c), word);
}

/* One mode and doorbell kind: writes in flight quiesced, more rung while quiesced, the session
 * killed, the state restored in a second session on the same volume, every block read back. */
static void hand_over(uint32_t mode, uint32_t flags)
{
	struct lio_identify id;
	struct lio_client *a = connect_ok("vm-a", &id), *b, *other;
	struct lio_vol_attach va = {.size_bytes = VOL_BYTES, .flags = LIO_ATTACH_CREATE}, vb;
	struct lio_qp_state st, st2;
	struct lio_qp_stats qs;
	struct lio_drv *d;
	struct lio_qp_restore rq;
	uint64_t bufs, rbuf;
	unsigned n, fetched, parked;
	int r;

	ck_assert_msg(id.flags & LIO_ID_QP_STATE, "IDENTIFY flags 0x%x lack QP_STATE", id.flags);
	snprintf(va.name, sizeof(va.name), VOL);
	ck_assert_int_eq(lio_client_vol_attach(a, &va), 0);
	d = drv_open(a, &va, mode, flags);
	bufs = lio_drv_alloc(d, (NR_BEFORE + NR_PARKED) * 4096ull);
	rbuf = lio_drv_alloc(d, 4096);
	ck_assert(bufs && rbuf);

	/* writes in flight, then the quiesce: it returns once every one has its CQE */
	for (n = 0; n < NR_BEFORE; n++)
		submit_write(d, bufs, n);
	r = lio_client_qp_quiesce(a, d->qp[0].qp_id, 0, &st);
	ck_assert_msg(r == 0, "quiesce: %s", lio_client_error(a));
	/* what the backend had fetched is done; a doorbell page it had not looked at yet leaves
	 * the rest in the SQ, as a controller that stops fetching would */
	fetched = st.sq_head;
	ck_assert_uint_le(fetched, NR_BEFORE);
	if (flags & LIO_QP_DB_EVENTFD)
		ck_assert_uint_gt(fetched, 0);
	ck_assert_uint_eq(st.cq_tail, fetched);
	ck_assert_uint_eq(st.phase, 1);
	ck_assert_uint_eq(st.sq_tail_db, NR_BEFORE);
	ck_assert_uint_eq(st.sq_depth, DEPTH);
	ck_assert_uint_eq(st.cq_depth, DEPTH);
	ck_assert_int_eq(lio_client_qp_stats(a, d->qp[0].qp_id, &qs), 0);
	ck_assert_uint_eq(qs.cmds, fetched);
	reap_ok(d, fetched);
	fprintf(stderr, "qpstate: quiesce with %u of %u writes fetched: %.3f ms\n", fetched,
		NR_BEFORE, (double)st.quiesce_ns / 1e6);
	parked = NR_BEFORE + NR_PARKED - fetched;

	/* rung while quiesced: not fetched */
	for (; n < NR_BEFORE + NR_PARKED; n++)
		submit_write(d, bufs, n);
	{
		struct nvme_cqe cqe;

		ck_assert_int_eq(lio_drv_reap(d, 0, &cqe, 1, 300), 0);
	}
	ck_assert_int_eq(lio_client_qp_stats(a, d->qp[0].qp_id, &qs), 0);
	ck_assert_uint_eq(qs.cmds, fetched);
	/* a second quiesce reports the state again, with the doorbell it now sees */
	ck_assert_int_eq(lio_client_qp_quiesce(a, d->qp[0].qp_id, 100, &st2), 0);
	ck_assert_uint_eq(st2.sq_head, fetched);
	ck_assert_uint_eq(st2.cq_tail, fetched);
	ck_assert_uint_eq(st2.sq_tail_db, NR_BEFORE + NR_PARKED);
	ck_assert_uint_eq(st2.cq_head_db, fetched);
	st = st2;

	/* hostile: values out of range, depths not the request's, a queue pair not ours */
	rq = restore_req(d, va.vol_id, &st);
	rq.st.phase = 2;
	restore_refused(a, rq, "phase 2");
	rq = restore_req(d, va.vol_id, &st);
	rq.st.sq_head = DEPTH;
	restore_refused(a, rq, "sq_head 64");
	rq = restore_req(d, va.vol_id, &st);
	rq.st.cq_head_db = 70000;
	restore_refused(a, rq, "cq_head_db 70000");
	rq = restore_req(d, va.vol_id, &st);
	rq.st.sq_depth = 128;
	restore_refused(a, rq, "sq_depth 128");
	rq = restore_req(d, va.vol_id, &st);
	rq.st.rsvd = 1;
	restore_refused(a, rq, "rsvd");
	ck_assert_int_eq(lio_client_qp_quiesce(a, d->qp[0].qp_id, LIO_QUIESCE_MAX_MS + 1, &st2),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(lio_client_error(a), "timeout_ms 10001"));
	other = connect_ok("intruder", NULL);
	r = lio_client_qp_quiesce(other, d->qp[0].qp_id, 0, &st2);
	ck_assert_msg(r == -ENOENT, "quiesce of another session's queue pair: %d", r);
	ck_assert_int_eq(lio_client_qp_resume(other, d->qp[0].qp_id), -ENOENT);
	ck_assert_int_eq(lio_client_qp_quiesce(a, 65000, 0, &st2), -ENOENT);

	/* the second VM cannot take the volume while the first holds it */
	b = connect_ok("vm-b", NULL);
	vb = (struct lio_vol_attach){0};
	snprintf(vb.name, sizeof(vb.name), VOL);
	r = lio_client_vol_attach(b, &vb);
	ck_assert_msg(r == -EBUSY, "attach while held: %d (%s)", r, lio_client_error(b));

	/* the first VM dies with its queue pair quiesced: nothing parked runs */
	lio_client_close(a);
	d->c = b;
	for (n = 0; n < 200 && (r = lio_client_vol_attach(b, &vb)) == -EBUSY; n++)
		usleep(10 * 1000); /* the daemon ends the session when it sees the hang-up */
	ck_assert_msg(r == 0, "attach after the first VM went: %s", lio_client_error(b));
	{
		struct lio_dma_window w = {.nr_regions = 1};

		w.r[0] = (struct lio_dma_region){
		    .gpa = LIO_DRV_GPA_BASE, .size = d->mem_bytes, .fd_offset = 0, .fd = d->memfd};
		ck_assert_int_eq(lio_client_dma_register(b, &w), 0);
	}
	if (flags & (LIO_QP_SQ_QMEM | LIO_QP_CQ_QMEM | LIO_QP_DB_POLL)) {
		struct lio_qmem q = {.size = d->qmem_bytes};

		ck_assert_int_eq(lio_client_qmem_alloc(b, &q), 0);
		munmap(d->qmem, d->qmem_bytes);
		close(d->qmem_fd);
		d->qmem_fd = q.fd;
		d->qmem = mmap(NULL, d->qmem_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, q.fd, 0);
		ck_assert(d->qmem != MAP_FAILED);
	}
	rq = restore_req(d, vb.vol_id, &st);
	r = lio_client_qp_restore(b, &rq);
	ck_assert_msg(r == 0, "restore: %s", lio_client_error(b));
	if (flags & LIO_QP_DB_POLL) {
		/* the backend put the saved doorbell values in the fresh pages */
		d->qp[0].sq_db = (volatile uint32_t *)(d->qmem + rq.qp.db_off);
		d->qp[0].cq_db = (volatile uint32_t *)(d->qmem + rq.qp.db_off + LIO_PAGE_SIZE);
		ck_assert_uint_eq(*d->qp[0].sq_db, NR_BEFORE + NR_PARKED);
		ck_assert_uint_eq(*d->qp[0].cq_db, fetched);
	}
	d->qp[0].qp_id = rq.qp.qp_id;
	/* restored quiesced: nothing runs before the resume */
	{
		struct nvme_cqe cqe;

		ck_assert_int_eq(lio_drv_reap(d, 0, &cqe, 1, 200), 0);
	}
	ck_assert_int_eq(lio_client_qp_resume(b, rq.qp.qp_id), 0);
	ck_assert_int_eq(lio_client_qp_resume(b, rq.qp.qp_id), -EINVAL);
	ck_assert_ptr_nonnull(strstr(lio_client_error(b), "is not quiesced"));
	reap_ok(d, parked);
	ck_assert_int_eq(lio_client_qp_stats(b, rq.qp.qp_id, &qs), 0);
	ck_assert_uint_eq(qs.cmds, parked);

	/* every block, before and after the hand-over, on the volume; the CQ wraps past 64 */
	for (n = 0; n < NR_BEFORE + NR_PARKED; n++) {
		const uint64_t *p = lio_drv_ptr(d, rbuf);

		memset(lio_drv_ptr(d, rbuf), 0, 4096);
		ck_assert_uint_eq(
		    lio_drv_io(d, 0, NVME_CMD_READ, (uint64_t)n * BLOCK_LBAS, BLOCK_LBAS, rbuf), 0);
		for (unsigned i = 0; i < 512; i++)
			ck_assert_msg(p[i] == stamp(n, i), "block %u word %u: 0x%llx", n, i,
				      (unsigned long long)p[i]);
	}
	ck_assert_int_eq(lio_client_qp_stats(b, rq.qp.qp_id, &qs), 0);
	ck_assert_uint_eq(qs.cmds, parked + NR_BEFORE + NR_PARKED);
	ck_assert_uint_eq(qs.errors, 0);

	/* destroy while quiesced */
	ck_assert_int_eq(lio_client_qp_quiesce(b, rq.qp.qp_id, 0, &st2), 0);
	ck_assert_int_eq(lio_client_qp_destroy(b, rq.qp.qp_id), 0);
	ck_assert_int_eq(lio_client_qp_resume(b, rq.qp.qp_id), -ENOENT);
	d->nr_qp = 0;
	lio_drv_close(d);
	lio_client_close(b);
	lio_client_close(other);
}

START_TEST(test_isolated_eventfd)
{
	daemon_start(NULL);
	hand_over(LIGHTIOV_MODE_ISOLATED, LIO_QP_DB_EVENTFD);
}
END_TEST

START_TEST(test_passthrough_poll)
{
	daemon_start(NULL);
	hand_over(LIGHTIOV_MODE_PASSTHROUGH, LIO_QP_DB_POLL);
}
END_TEST

/* A command the device model holds past the deadline: -ETIMEDOUT, and the queue pair serves
 * on (the command completes, new ones run). */
START_TEST(test_quiesce_timeout)
{
	struct lio_client *c;
	struct lio_vol_attach va = {.size_bytes = VOL_BYTES, .flags = LIO_ATTACH_ANON};
	struct lio_qp_state st;
	struct lio_drv *d;
	uint64_t bufs;
	int r;

	daemon_start("latency=1s");
	c = connect_ok("slow", NULL);
	ck_assert_int_eq(lio_client_vol_attach(c, &va), 0);
	d = drv_open(c, &va, LIGHTIOV_MODE_ISOLATED, LIO_QP_DB_EVENTFD);
	bufs = lio_drv_alloc(d, 2 * 4096);
	submit_write(d, bufs, 0);
	usleep(300 * 1000); /* done on the backing, held by the model for 1 s */
	r = lio_client_qp_quiesce(c, d->qp[0].qp_id, 50, &st);
	ck_assert_msg(r == -ETIMEDOUT, "quiesce: %d (%s)", r, lio_client_error(c));
	ck_assert_msg(strstr(lio_client_error(c), "1 commands still in flight after 50 ms"), "%s",
		      lio_client_error(c));
	reap_ok(d, 1);
	submit_write(d, bufs, 1);
	reap_ok(d, 1);
	r = lio_client_qp_quiesce(c, d->qp[0].qp_id, 0, &st);
	ck_assert_msg(r == 0, "quiesce: %s", lio_client_error(c));
	ck_assert_uint_eq(st.sq_head, 2);
	ck_assert_int_eq(lio_client_qp_resume(c, d->qp[0].qp_id), 0);
	submit_write(d, bufs, 0);
	reap_ok(d, 1);
	lio_drv_close(d);
	lio_client_close(c);
}
END_TEST

static void add(Suite *s, const char *name, const TTest *t)
{
	TCase *tc = tcase_create(name);

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, t);
	suite_add_tcase(s, tc);
}

#define ADD(s, t) add(s, #t, t)

int main(void)
{
	Suite *s = suite_create("ssd_qpstate");

	ADD(s, test_isolated_eventfd);
	ADD(s, test_passthrough_poll);
	ADD(s, test_quiesce_timeout);
	return testutil_run_suite(s);
}
