/* softssd end to end: `lvmm ssd serve` on a temp sparse backing, driven by test clients (lio_drv,
 * no VM) through both modes and both doorbell kinds, hostile requests and commands, ten clients
 * at once, kill -9 of the daemon mid-write and of a client. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lightiov/nvme.h"
#include "lightiov/uapi.h"
#include "client/lio_client.h"
#include "ssdutil.h"
#include "testutil.h"

#define SSD	   "t0"
#define BACKING_MB 256
#define VOL_BYTES  (8u << 20)
#define LBA_SHIFT  9
#define RESERVED   (1u << 20) /* the volume table's area at the start of the backing */

static char dir[64], backing[128], logpath[128];
static pid_t daemon_pid;

#define SC(s) ((s)&0x7ff) /* SCT and SC of a CQE status (DNR and MORE dropped) */

static void daemon_start(const char *const extra[])
{
	char size[16];
	const char *opts[32] = {"--backing", backing, "--size", size};
	int n = 4, i;

	snprintf(size, sizeof(size), "%uM", BACKING_MB);
	for (i = 0; extra && extra[i] && n < 30; i++)
		opts[n++] = extra[i];
	if (getenv("SOFTSSD_TEST_ARGS")) /* e.g. --cached: the page-cache data path */
		opts[n++] = getenv("SOFTSSD_TEST_ARGS");
	opts[n] = NULL;
	daemon_pid = testutil_ssd_start(SSD, logpath, opts);
}

static int daemon_stop(int sig)
{
	return testutil_ssd_stop(&daemon_pid, sig);
}

static void setup(void)
{
	testutil_mkdtemp(dir, sizeof(dir), "/tmp/lvmm-softssd-");
	snprintf(backing, sizeof(backing), "%s/backing.img", dir);
	snprintf(logpath, sizeof(logpath), "%s/daemon.log", dir);
	setenv("LVMM_RUN_DIR", dir, 1);
	daemon_start(NULL);
}

static void teardown(void)
{
	int st = daemon_stop(SIGTERM);

	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "softssd ended with 0x%x: %s", st,
		      testutil_slurp(logpath));
	testutil_rmtree(dir);
}

static struct lio_client *connect_ok(const char *label)
{
	struct lio_client *c = NULL;
	char err[256];
	int r = lio_client_connect(&c, SSD, label, NULL, err, sizeof(err));

	ck_assert_msg(r == 0, "connect: %s", err);
	return c;
}

static struct lio_vol_attach attach(struct lio_client *c, const char *name, uint32_t flags)
{
	struct lio_vol_attach a = {.size_bytes = VOL_BYTES, .flags = flags};
	int r;

	if (name)
		snprintf(a.name, sizeof(a.name), "%s", name);
	r = lio_client_vol_attach(c, &a);
	ck_assert_msg(r == 0, "attach %s: %s", name ? name : "(anon)", lio_client_error(c));
	ck_assert_uint_eq(a.lba_count, VOL_BYTES >> LBA_SHIFT);
	return a;
}

static struct lio_drv *drv_open(struct lio_client *c, const struct lio_vol_attach *a, uint32_t mode,
				uint32_t flags, unsigned nr_qp)
{
	struct lio_drv_opts o = {.vol_id = a->vol_id,
				 .lba_start = a->lba_start,
				 .lba_count = a->lba_count,
				 .lba_shift = LBA_SHIFT,
				 .mode = mode,
				 .qp_flags = flags,
				 .nr_qp = nr_qp,
				 .depth = 64};
	struct lio_drv *d = NULL;
	char err[256];
	int r = lio_drv_open(&d, c, &o, err, sizeof(err));

	ck_assert_msg(r == 0, "lio_drv_open: %s", err);
	return d;
}

/* The 8-byte stamp that fills LBA lba of writer tag. */
static uint64_t stamp(unsigned tag, uint64_t lba)
{
	return ((uint64_t)0x5eed0000 + tag) << 32 | (lba & 0xffffffffu);
}

static void fill(void *buf, unsigned tag, uint64_t lba, uint32_t nlb)
{
	uint64_t *p = buf;
	size_t i, per = (1u << LBA_SHIFT) / 8;

	for (i = 0; i < (size_t)nlb * per; i++)
		p[i] = stamp(tag, lba + i / per);
}

static bool check(const void *buf, unsigned tag, uint64_t lba, uint32_t nlb)
{
	const uint64_t *p = buf;
	size_t i, per = (1u << LBA_SHIFT) / 8;

	for (i = 0; i < (size_t)nlb * per; i++)
		if (p[i] != stamp(tag, lba + i / per))
			return false;
	return true;
}

/* Write, flush, read back and compare on every queue of d: 4 KiB, a two-page transfer and a
 * 64 KiB one that needs a PRP list, at the first and the last LBAs of the window. */
static void rw_verify(struct lio_drv *d, unsigned tag)
{
	static const uint32_t sizes[] = {8, 16, 128};
	uint64_t wbuf = lio_drv_alloc(d, 128 << LBA_SHIFT),
		 rbuf = lio_drv_alloc(d, 128 << LBA_SHIFT);
	unsigned qi, i;

	ck_assert(wbuf && rbuf);
	for (qi = 0; qi < d->nr_qp; qi++) {
		for (i = 0; i < 3; i++) {
			uint32_t nlb = sizes[i];
			uint64_t lbas[2] = {qi * 512 + i * 128, d->o.lba_count - nlb - qi * 256};

			for (unsigned k = 0; k < 2; k++) {
				uint64_t lba = lbas[k];
				uint16_t st;

				fill(lio_drv_ptr(d, wbuf), tag, lba, nlb);
				memset(lio_drv_ptr(d, rbuf), 0, (size_t)nlb << LBA_SHIFT);
				st = lio_drv_io(d, qi, NVME_CMD_WRITE, lba, nlb, wbuf);
				ck_assert_msg(st == 0, "write q%u lba %llu nlb %u: status 0x%x", qi,
					      (unsigned long long)lba, nlb, st);
				ck_assert_uint_eq(lio_drv_io(d, qi, NVME_CMD_FLUSH, 0, 0, 0), 0);
				st = lio_drv_io(d, qi, NVME_CMD_READ, lba, nlb, rbuf);
				ck_assert_msg(st == 0, "read q%u lba %llu: status 0x%x", qi,
					      (unsigned long long)lba, st);
				ck_assert_msg(check(lio_drv_ptr(d, rbuf), tag, lba, nlb),
					      "q%u lba %llu nlb %u: data read back differs", qi,
					      (unsigned long long)lba, nlb);
			}
		}
	}
}

static bool all_zero(const uint8_t *p, size_t n)
{
	return !p[0] && !memcmp(p, p + 1, n - 1);
}

/* The backing itself holds tag's stamps at the volume's absolute LBAs: the window translation
 * put the data where the table says the volume is. */
static void backing_has(const struct lio_vol_attach *a, unsigned tag, uint64_t lba, uint32_t nlb)
{
	size_t len = (size_t)nlb << LBA_SHIFT;
	void *buf = malloc(len);
	int fd = open(backing, O_RDONLY);

	ck_assert(fd >= 0 && buf);
	ck_assert_int_eq(pread(fd, buf, len, (off_t)((a->lba_start + lba) << LBA_SHIFT)),
			 (ssize_t)len);
	ck_assert_msg(check(buf, tag, lba, nlb), "backing at volume LBA %llu lacks the data",
		      (unsigned long long)lba);
	close(fd);
	free(buf);
}

static void mode_case(uint32_t mode, uint32_t flags, unsigned tag)
{
	struct lio_client *c = connect_ok("modes");
	struct lio_vol_attach a = attach(c, NULL, LIO_ATTACH_ANON);
	struct lio_drv *d = drv_open(c, &a, mode, flags, 2);
	struct lio_qp_stats st;

	ck_assert_uint_ge(a.lba_start, RESERVED >> LBA_SHIFT);
	rw_verify(d, tag);
	backing_has(&a, tag, 0, 8);
	backing_has(&a, tag, a.lba_count - 128, 128);
	ck_assert_int_eq(lio_client_qp_stats(c, d->qp[0].qp_id, &st), 0);
	ck_assert_uint_eq(st.cmds, 18); /* 3 sizes x 2 places x write, flush, read */
	ck_assert_uint_eq(st.errors, 0);
	ck_assert_uint_ge(st.write_bytes, (8 + 16 + 128) * 2 << LBA_SHIFT);
	ck_assert_uint_eq(st.mode, mode);
	if (flags & LIO_QP_IRQ_ENABLED)
		ck_assert_uint_gt(st.irqs, 0);
	lio_drv_close(d);
	lio_client_close(c);
}

START_TEST(test_isolated_poll_qmem)
{
	mode_case(LIGHTIOV_MODE_ISOLATED, LIO_QP_SQ_QMEM | LIO_QP_CQ_QMEM | LIO_QP_DB_POLL, 1);
}
END_TEST

START_TEST(test_isolated_eventfd_guest_rings)
{
	mode_case(LIGHTIOV_MODE_ISOLATED, LIO_QP_DB_EVENTFD | LIO_QP_IRQ_ENABLED, 2);
}
END_TEST

START_TEST(test_passthrough_poll_guest_rings)
{
	mode_case(LIGHTIOV_MODE_PASSTHROUGH, LIO_QP_DB_POLL, 3);
}
END_TEST

START_TEST(test_passthrough_eventfd_sq_in_qmem)
{
	mode_case(LIGHTIOV_MODE_PASSTHROUGH,
		  LIO_QP_SQ_QMEM | LIO_QP_DB_EVENTFD | LIO_QP_IRQ_ENABLED, 4);
}
END_TEST

/* Write Zeroes, Deallocate (DSM) and a FUA write: each completes, zeroed LBAs read as zeroes,
 * a DSM range outside the window is refused. */
/* Voluntary context switches of the calling thread so far. */
static long thread_switches(void)
{
	struct rusage ru;

	ck_assert_int_eq(getrusage(RUSAGE_THREAD, &ru), 0);
	return ru.ru_nvcsw;
}

/* A client waiting for a completion sleeps on its interrupt eventfd until the interrupt or its
 * deadline: a wait with nothing in flight costs a wake-up or two, not one per millisecond (a few
 * hundred such clients, as many VMs' worth, would keep the host's CPUs busy waking them), and the
 * interrupt of a completion ends the wait long before the deadline. */
START_TEST(test_reap_sleeps_until_interrupt)
{
	struct lio_client *c = connect_ok("reap");
	struct lio_vol_attach a = attach(c, NULL, LIO_ATTACH_ANON);
	struct lio_drv *d =
	    drv_open(c, &a, LIGHTIOV_MODE_ISOLATED,
		     LIO_QP_SQ_QMEM | LIO_QP_CQ_QMEM | LIO_QP_DB_POLL | LIO_QP_IRQ_ENABLED, 1);
	uint64_t buf = lio_drv_alloc(d, 4096);
	struct nvme_sqe s = {.opcode = NVME_CMD_READ, .nsid = 1, .prp1 = buf, .cdw10 = 8};
	struct nvme_cqe cqe;
	long sw0 = thread_switches(), sw;
	double t0 = testutil_now_s(), t;
	int cid;

	ck_assert_int_eq(lio_drv_reap(d, 0, &cqe, 1, 400), 0);
	t = testutil_now_s() - t0;
	sw = thread_switches() - sw0;
	ck_assert_msg(t >= 0.39, "the wait ended after %.3f s, before its deadline", t);
	ck_assert_msg(sw <= 10, "%ld wake-ups in a 400 ms wait with nothing in flight", sw);
	for (int i = 0; i < 20; i++) {
		cid = lio_drv_submit(d, 0, &s);
		ck_assert_int_ge(cid, 0);
		t0 = testutil_now_s();
		ck_assert_int_eq(lio_drv_reap(d, 0, &cqe, 1, 20000), 1);
		t = testutil_now_s() - t0;
		ck_assert_int_eq(cqe.cid, cid);
		ck_assert_uint_eq(cqe.status >> 1, 0);
		ck_assert_msg(t < 10, "read %d: the interrupt did not end the wait (%.1f s)", i, t);
	}
	lio_drv_close(d);
	lio_client_close(c);
}
END_TEST

START_TEST(test_zeroes_dsm_fua)
{
	struct lio_client *c = connect_ok("zeroes");
	struct lio_vol_attach a = attach(c, NULL, LIO_ATTACH_ANON);
	struct lio_drv *d = drv_open(c, &a, LIGHTIOV_MODE_ISOLATED, LIO_QP_DB_EVENTFD, 1);
	uint64_t buf = lio_drv_alloc(d, 64 << 10), rng = lio_drv_alloc(d, 4096);
	struct nvme_dsm_range *r = lio_drv_ptr(d, rng);
	struct nvme_sqe s;
	struct nvme_cqe cqe;
	uint8_t *p = lio_drv_ptr(d, buf);
	int cid;

	fill(p, 11, 0, 128);
	ck_assert_uint_eq(lio_drv_io(d, 0, NVME_CMD_WRITE, 0, 128, buf), 0);
	ck_assert_uint_eq(lio_drv_io(d, 0, NVME_CMD_WRITE_ZEROES, 8, 16, 0), 0);
	ck_assert_uint_eq(lio_drv_io(d, 0, NVME_CMD_READ, 0, 128, buf), 0);
	ck_assert(check(p, 11, 0, 8));
	ck_assert(all_zero(p + (8 << LBA_SHIFT), 16 << LBA_SHIFT));
	ck_assert(check(p + (24 << LBA_SHIFT), 11, 24, 104));
	/* deallocate LBAs 32..63, and a second range one past the window */
	r[0] = (struct nvme_dsm_range){.nlb = 32, .slba = 32};
	r[1] = (struct nvme_dsm_range){.nlb = 1, .slba = a.lba_count};
	s = (struct nvme_sqe){
	    .opcode = NVME_CMD_DSM, .nsid = 1, .prp1 = rng, .cdw10 = 0, .cdw11 = NVME_DSM_AD};
	cid = lio_drv_submit(d, 0, &s);
	ck_assert_int_eq(lio_drv_reap(d, 0, &cqe, 1, 5000), 1);
	ck_assert_int_eq(cqe.cid, cid);
	ck_assert_uint_eq(SC(cqe.status >> 1), 0);
	s.cdw10 = 1; /* two ranges */
	cid = lio_drv_submit(d, 0, &s);
	ck_assert_int_eq(lio_drv_reap(d, 0, &cqe, 1, 5000), 1);
	ck_assert_uint_eq(SC(cqe.status >> 1), NVME_SC_LBA_RANGE);
	/* FUA write */
	fill(p, 12, 200, 8);
	s = (struct nvme_sqe){.opcode = NVME_CMD_WRITE,
			      .nsid = 1,
			      .prp1 = buf,
			      .cdw10 = 200,
			      .cdw12 = 7 | NVME_RW_FUA};
	cid = lio_drv_submit(d, 0, &s);
	ck_assert_int_eq(lio_drv_reap(d, 0, &cqe, 1, 5000), 1);
	ck_assert_uint_eq(cqe.status >> 1, 0);
	backing_has(&a, 12, 200, 8);
	lio_drv_close(d);
	lio_client_close(c);
}
END_TEST

/* The session's write-through flag (the VM's volatile write cache off): every write of every
 * queue pair, and of one created later, goes out durable and is counted; off again, none is. */
static uint64_t wt_set(struct lio_client *c, uint32_t mask, uint32_t flags, uint32_t want)
{
	struct lio_session_set ss = {.mask = mask, .flags = flags};

	ck_assert_msg(lio_client_session_set(c, &ss) == 0, "session-set: %s", lio_client_error(c));
	ck_assert_uint_eq(ss.flags, want);
	return ss.syncs;
}

START_TEST(test_write_through)
{
	struct lio_client *c = connect_ok("vwc"), *c2 = connect_ok("vwc-later");
	struct lio_vol_attach a = attach(c, NULL, LIO_ATTACH_ANON),
			      a2 = attach(c2, NULL, LIO_ATTACH_ANON);
	struct lio_drv *d = drv_open(c, &a, LIGHTIOV_MODE_ISOLATED, LIO_QP_DB_POLL, 2), *d2;
	uint64_t buf = lio_drv_alloc(d, 64 << 10), buf2;
	struct lio_session_set bad = {.mask = 1u << 7, .flags = 1u << 7};
	const uint32_t wt = LIO_SESSION_WRITE_THROUGH;
	uint8_t *p = lio_drv_ptr(d, buf);

	/* caching: writes are not synced */
	fill(p, 21, 0, 8);
	ck_assert_uint_eq(lio_drv_io(d, 0, NVME_CMD_WRITE, 0, 8, buf), 0);
	ck_assert_uint_eq(wt_set(c, 0, 0, 0), 0);
	/* write-through: each write on either queue pair, reads and flushes not */
	ck_assert_uint_eq(wt_set(c, wt, wt, wt), 0);
	fill(p, 22, 8, 8);
	ck_assert_uint_eq(lio_drv_io(d, 0, NVME_CMD_WRITE, 8, 8, buf), 0);
	fill(p, 23, 16, 8);
	ck_assert_uint_eq(lio_drv_io(d, 1, NVME_CMD_WRITE, 16, 8, buf), 0);
	ck_assert_uint_eq(lio_drv_io(d, 1, NVME_CMD_READ, 0, 8, buf), 0);
	ck_assert_uint_eq(lio_drv_io(d, 0, NVME_CMD_FLUSH, 0, 0, 0), 0);
	ck_assert_uint_eq(wt_set(c, 0, 0, wt), 2);
	backing_has(&a, 22, 8, 8);
	backing_has(&a, 23, 16, 8);
	/* zeroing is forced out too: the blocks read back as zeroes */
	ck_assert_uint_eq(lio_drv_io(d, 0, NVME_CMD_WRITE_ZEROES, 12, 2, 0), 0);
	ck_assert_uint_eq(wt_set(c, 0, 0, wt), 3);
	ck_assert_uint_eq(lio_drv_io(d, 0, NVME_CMD_READ, 8, 8, buf), 0);
	ck_assert(check(p, 22, 8, 4));
	ck_assert(all_zero(p + (4 << LBA_SHIFT), 2 << LBA_SHIFT));
	ck_assert(check(p + (6 << LBA_SHIFT), 22, 14, 2));
	/* an unknown bit is refused by name and changes nothing */
	ck_assert_int_eq(lio_client_session_set(c, &bad), -EINVAL);
	ck_assert_ptr_nonnull(strstr(lio_client_error(c), "mask 0x80"));
	ck_assert_uint_eq(wt_set(c, 0, 0, wt), 3);
	/* caching again: the count stays */
	ck_assert_uint_eq(wt_set(c, wt, 0, 0), 3);
	fill(p, 24, 24, 8);
	ck_assert_uint_eq(lio_drv_io(d, 0, NVME_CMD_WRITE, 24, 8, buf), 0);
	ck_assert_uint_eq(lio_drv_io(d, 0, NVME_CMD_WRITE_ZEROES, 24, 2, 0), 0);
	ck_assert_uint_eq(wt_set(c, 0, 0, 0), 3);
	/* set before the queue pairs exist: they start write-through; the other session is not */
	ck_assert_uint_eq(wt_set(c2, wt, wt, wt), 0);
	d2 = drv_open(c2, &a2, LIGHTIOV_MODE_PASSTHROUGH, LIO_QP_DB_EVENTFD, 1);
	buf2 = lio_drv_alloc(d2, 4096);
	fill(lio_drv_ptr(d2, buf2), 25, 0, 8);
	ck_assert_uint_eq(lio_drv_io(d2, 0, NVME_CMD_WRITE, 0, 8, buf2), 0);
	ck_assert_uint_eq(wt_set(c2, 0, 0, wt), 1);
	ck_assert_uint_eq(wt_set(c, 0, 0, 0), 3);
	lio_drv_close(d2);
	lio_drv_close(d);
	lio_client_close(c2);
	lio_client_close(c);
}
END_TEST

/* ---- hostile commands: each completes with an error, the queue keeps working ---- */

static uint16_t raw(struct lio_drv *d, struct nvme_sqe *sqe)
{
	struct nvme_cqe cqe;
	int cid = lio_drv_submit(d, 0, sqe);

	ck_assert_int_ge(cid, 0);
	ck_assert_int_eq(lio_drv_reap(d, 0, &cqe, 1, 5000), 1);
	ck_assert_int_eq(cqe.cid, cid);
	ck_assert_uint_eq(cqe.sq_id, 1);
	return (uint16_t)(cqe.status >> 1);
}

static struct nvme_sqe rw(uint8_t op, uint64_t slba, uint32_t nlb, uint64_t prp1, uint64_t prp2)
{
	struct nvme_sqe s = {.opcode = op, .nsid = 1, .prp1 = prp1, .prp2 = prp2};

	s.cdw10 = (uint32_t)slba;
	s.cdw11 = (uint32_t)(slba >> 32);
	s.cdw12 = nlb - 1;
	return s;
}

START_TEST(test_hostile_commands)
{
	struct lio_client *c = connect_ok("hostile");
	struct lio_vol_attach a = attach(c, NULL, LIO_ATTACH_ANON);
	struct lio_drv *d = drv_open(c, &a, LIGHTIOV_MODE_ISOLATED, LIO_QP_DB_EVENTFD, 1);
	struct lio_drv *p;
	uint64_t buf = lio_drv_alloc(d, 64 << 10), list = lio_drv_alloc(d, 4096);
	uint64_t outside = LIO_DRV_GPA_BASE + d->mem_bytes + (1 << 20);
	uint64_t *l = lio_drv_ptr(d, list);
	struct lio_qp_stats st;
	struct nvme_sqe s;
	unsigned i;

	s = rw(NVME_CMD_READ, a.lba_count, 1, buf, 0); /* one past the window */
	ck_assert_uint_eq(SC(raw(d, &s)), NVME_SC_LBA_RANGE);
	s = rw(NVME_CMD_WRITE, a.lba_count - 1, 2, buf, 0); /* crosses its end */
	ck_assert_uint_eq(SC(raw(d, &s)), NVME_SC_LBA_RANGE);
	s = rw(NVME_CMD_READ, ~0ull - 1, 8, buf, 0); /* SLBA + NLB wraps 2^64 */
	ck_assert_uint_eq(SC(raw(d, &s)), NVME_SC_LBA_RANGE);
	s = rw(NVME_CMD_READ, 0, 8, outside, 0); /* data pointer outside the DMA window */
	ck_assert_uint_ne(raw(d, &s), 0);
	s = rw(NVME_CMD_READ, 0, 16, buf, outside); /* second page outside */
	ck_assert_uint_ne(raw(d, &s), 0);
	s = rw(NVME_CMD_READ, 0, 64, buf, outside); /* PRP list itself outside */
	ck_assert_uint_ne(raw(d, &s), 0);
	for (i = 0; i < 16; i++) /* a list whose entries point outside */
		l[i] = outside + i * 4096;
	s = rw(NVME_CMD_READ, 0, 64, buf, list);
	ck_assert_uint_ne(raw(d, &s), 0);
	s = rw(NVME_CMD_READ, 0, 1, buf + 1, 0); /* PRP offset not dword aligned */
	ck_assert_uint_ne(raw(d, &s), 0);
	s = rw(NVME_CMD_READ, 0, 1024, buf, list); /* past MDTS */
	ck_assert_uint_ne(raw(d, &s), 0);
	s = rw(0x7f, 0, 1, buf, 0); /* unknown opcode */
	ck_assert_uint_eq(SC(raw(d, &s)), NVME_SC_INVALID_OPCODE);
	s = rw(NVME_CMD_READ, 0, 1, buf, 0);
	s.nsid = 7;
	ck_assert_uint_eq(SC(raw(d, &s)), NVME_SC_INVALID_NS);
	/* the queue still serves good commands */
	rw_verify(d, 9);
	ck_assert_int_eq(lio_client_qp_stats(c, d->qp[0].qp_id, &st), 0);
	ck_assert_uint_ge(st.rejected, 11);

	/* passthrough: trusted with LBAs, never with the volume table or past the device */
	lio_drv_close(d);
	p = drv_open(c, &a, LIGHTIOV_MODE_PASSTHROUGH, LIO_QP_DB_POLL | LIO_QP_SQ_QMEM, 1);
	buf = lio_drv_alloc(p, 4096);
	s = rw(NVME_CMD_WRITE, 0, 8, buf, 0); /* LBA 0: the volume table */
	ck_assert_uint_eq(SC(raw(p, &s)), NVME_SC_LBA_RANGE);
	s = rw(NVME_CMD_READ, (uint64_t)BACKING_MB << (20 - LBA_SHIFT), 1, buf, 0);
	ck_assert_uint_eq(SC(raw(p, &s)), NVME_SC_LBA_RANGE);
	s = rw(NVME_CMD_READ, a.lba_start, 8, buf, 0);
	ck_assert_uint_eq(raw(p, &s), 0);
	lio_drv_close(p);
	lio_client_close(c);
}
END_TEST

/* ---- hostile requests on the socket ---- */

static int memfd_sized(uint64_t size, bool seal)
{
	int fd = memfd_create("t", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)size), 0);
	if (seal)
		ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	return fd;
}

static void expect(struct lio_client *c, int r, int want, const char *needle)
{
	ck_assert_msg(r == want, "status %d (%s), expected %d", r, lio_client_error(c), want);
	ck_assert_msg(strstr(lio_client_error(c), needle), "error '%s' does not name '%s'",
		      lio_client_error(c), needle);
}

START_TEST(test_hostile_requests)
{
	struct lio_client *c = connect_ok("hostile-req"), *other = connect_ok("bystander");
	struct lio_vol_attach a = attach(c, NULL, LIO_ATTACH_ANON);
	struct lio_vol_attach oa = attach(other, NULL, LIO_ATTACH_ANON);
	struct lio_drv *od = drv_open(other, &oa, LIGHTIOV_MODE_ISOLATED, LIO_QP_DB_POLL, 1);
	struct lio_dma_window w = {.nr_regions = 1};
	struct lio_qp_create q = {.vol_id = a.vol_id,
				  .mode = LIGHTIOV_MODE_ISOLATED,
				  .flags = LIO_QP_DB_EVENTFD,
				  .sqid = 1,
				  .cqid = 1,
				  .sq_depth = 16,
				  .cq_depth = 16};
	struct lio_qmem qm = {.size = 128 << 20};
	struct lio_qp_stats st;
	char path[128];
	int fd, r, sock;
	struct lio_msg_hdr h = {.magic = 0xdeadbeef, .op = LIO_OP_IDENTIFY};
	struct lio_msg_reply rep;

	/* bogus queue-pair ids, and another session's queue pair */
	expect(c, lio_client_qp_destroy(c, 9999), -ENOENT, "9999");
	expect(c, lio_client_qp_destroy(c, od->qp[0].qp_id), -ENOENT, "not one of");
	expect(c, lio_client_qp_stats(c, 0, &st), -ENOENT, "queue pair 0");
	/* DMA window: a regular file, an unsealed memfd, too small a memfd, oversized, overlap */
	snprintf(path, sizeof(path), "%s/plain", dir);
	fd = open(path, O_RDWR | O_CREAT, 0600);
	ck_assert_int_eq(ftruncate(fd, 1 << 20), 0);
	w.r[0] = (struct lio_dma_region){.gpa = 0x100000, .size = 1 << 20, .fd = fd};
	expect(c, lio_client_dma_register(c, &w), -EPERM, "F_SEAL_SHRINK");
	close(fd);
	w.r[0].fd = memfd_sized(1 << 20, false);
	expect(c, lio_client_dma_register(c, &w), -EPERM, "region 0");
	close(w.r[0].fd);
	w.r[0].fd = memfd_sized(1 << 20, true);
	w.r[0].size = 2 << 20;
	expect(c, lio_client_dma_register(c, &w), -EINVAL, "region ends");
	w.r[0].size = 1ull << 40;
	expect(c, lio_client_dma_register(c, &w), -E2BIG, "limit per session");
	w.r[0].size = 4097;
	expect(c, lio_client_dma_register(c, &w), -EINVAL, "size 0x1001");
	w.nr_regions = 2;
	w.r[0].size = 1 << 20;
	w.r[1] = w.r[0];
	expect(c, lio_client_dma_register(c, &w), -EINVAL, "overlap");
	w.nr_regions = 9;
	expect(c, lio_client_dma_register(c, &w), -EINVAL, "nr_regions 9");
	w.nr_regions = 1;
	ck_assert_int_eq(lio_client_dma_register(c, &w), 0);
	close(w.r[0].fd);
	/* queue memory beyond 64 MiB; queue pairs with bad depth, mode, rings, fds */
	expect(c, lio_client_qmem_alloc(c, &qm), -EINVAL, "size");
	q.sq_gpa = 0x100000;
	q.cq_gpa = 0x101000;
	q.shadow_db_gpa = 0x102000;
	q.db_fd = memfd_sized(4096, true); /* not an eventfd: checked after the rings */
	expect(c, lio_client_qp_create(c, &q), -EBADF, "not an eventfd");
	close(q.db_fd);
	q.db_fd = eventfd(0, EFD_CLOEXEC);
	q.sq_depth = 5000;
	expect(c, lio_client_qp_create(c, &q), -EINVAL, "sq_depth 5000");
	q.sq_depth = 16;
	q.mode = 3;
	expect(c, lio_client_qp_create(c, &q), -EINVAL, "mode 3");
	q.mode = LIGHTIOV_MODE_ISOLATED;
	q.cq_gpa = 0x200000 - 4096 + 2048; /* past the window's end, unaligned */
	expect(c, lio_client_qp_create(c, &q), -EINVAL, "cq_gpa");
	q.cq_gpa = 0x101000;
	q.vol_id = oa.vol_id; /* the other session's volume */
	expect(c, lio_client_qp_create(c, &q), -ENOENT, "not attached");
	q.vol_id = a.vol_id;
	q.flags = LIO_QP_DB_POLL | LIO_QP_DB_EVENTFD;
	expect(c, lio_client_qp_create(c, &q), -EINVAL, "exactly one");
	q.flags = LIO_QP_DB_EVENTFD;
	ck_assert_int_eq(lio_client_qp_create(c, &q), 0);
	ck_assert_int_gt(q.qp_id, 0);
	/* a window change under a live queue pair */
	w.r[0].fd = memfd_sized(1 << 20, true);
	expect(c, lio_client_dma_register(c, &w), -EBUSY, "queue pairs exist");
	close(w.r[0].fd);
	close(q.db_fd);
	/* raw garbage on a fresh connection: a bad magic, a short message, an unknown op */
	sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	{
		struct sockaddr_un sa = {.sun_family = AF_UNIX};

		ck_assert_int_eq(lio_sock_path(SSD, sa.sun_path, sizeof(sa.sun_path)), 0);
		ck_assert_int_eq(connect(sock, (struct sockaddr *)&sa, sizeof(sa)), 0);
	}
	ck_assert_int_eq(send(sock, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	ck_assert_int_eq(recv(sock, &rep, sizeof(rep), 0), (ssize_t)sizeof(rep));
	ck_assert_int_eq(rep.status, -EPROTO);
	ck_assert_ptr_nonnull(strstr(rep.err, "magic"));
	ck_assert_int_eq(send(sock, "x", 1, 0), 1);
	ck_assert_int_eq(recv(sock, &rep, sizeof(rep), 0), (ssize_t)sizeof(rep));
	ck_assert_int_eq(rep.status, -EPROTO);
	h.magic = LIO_MAGIC;
	h.op = 200;
	ck_assert_int_eq(send(sock, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	ck_assert_int_eq(recv(sock, &rep, sizeof(rep), 0), (ssize_t)sizeof(rep));
	ck_assert_int_eq(rep.status, -EOPNOTSUPP);
	h.op = LIO_OP_QP_DESTROY;
	h.len = 3; /* a payload that is not the op's struct */
	{
		char msg[sizeof(h) + 3];

		memcpy(msg, &h, sizeof(h));
		ck_assert_int_eq(send(sock, msg, sizeof(msg), 0), (ssize_t)sizeof(msg));
	}
	ck_assert_int_eq(recv(sock, &rep, sizeof(rep), 0), (ssize_t)sizeof(rep));
	ck_assert_int_eq(rep.status, -EINVAL);
	close(sock);
	/* the bystander never noticed */
	rw_verify(od, 5);
	r = lio_client_identify(c, &(struct lio_identify){0});
	ck_assert_int_eq(r, 0);
	lio_drv_close(od);
	lio_client_close(other);
	lio_client_close(c);
}
END_TEST

/* ---- sessions ending ---- */

static struct lio_ssd_stats ssd_stats(void)
{
	struct lio_client *c = connect_ok("stats");
	struct lio_ssd_stats s;

	ck_assert_int_eq(lio_client_ssd_stats(c, &s), 0);
	lio_client_close(c);
	s.sessions--; /* not counting the one asking */
	return s;
}

static uint32_t nr_volumes(void)
{
	struct lio_client *c = connect_ok("vols");
	struct lio_vol_list l = {0};

	ck_assert_int_eq(lio_client_vol_list(c, &l), 0);
	lio_client_close(c);
	return l.total;
}

/* Waits (bounded) until the daemon has n sessions besides the asker. */
static void wait_sessions(uint32_t n)
{
	for (int i = 0; i < 400; i++) {
		if (ssd_stats().sessions == n)
			return;
		testutil_sleep_ms(25);
	}
	ck_abort_msg("softssd still has %u sessions, expected %u", ssd_stats().sessions, n);
}

/* A child that keeps a queue full of writes until killed; writes 'r' to pipe fd when running. */
static pid_t busy_client(int ready_fd, uint32_t flags)
{
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (!pid) {
		struct lio_client *c = connect_ok("victim");
		struct lio_vol_attach a = attach(c, NULL, LIO_ATTACH_ANON);
		struct lio_drv *d = drv_open(c, &a, LIGHTIOV_MODE_ISOLATED, flags, 1);
		uint64_t buf = lio_drv_alloc(d, 128 << 10);
		struct nvme_cqe cqe[64];
		uint64_t n = 0;

		for (;;) {
			struct nvme_sqe s =
			    rw(NVME_CMD_WRITE, (n * 256) % (a.lba_count - 256), 256, 0, 0);

			lio_drv_prp(d, 0, &s, buf, 128 << 10);
			if (lio_drv_submit(d, 0, &s) < 0)
				lio_drv_reap(d, 0, cqe, 64, 10);
			if (++n == 100 && write(ready_fd, "r", 1) != 1)
				_exit(3);
		}
	}
	return pid;
}

START_TEST(test_client_disconnects_mid_io)
{
	struct lio_client *c = connect_ok("survivor");
	struct lio_vol_attach a = attach(c, "keep", LIO_ATTACH_CREATE);
	struct lio_drv *d = drv_open(c, &a, LIGHTIOV_MODE_ISOLATED, LIO_QP_DB_POLL, 1);
	uint32_t vols = nr_volumes();
	int p[2], round;
	char ch;

	ck_assert_int_eq(pipe(p), 0);
	for (round = 0; round < 2; round++) {
		pid_t v = busy_client(p[1], round ? LIO_QP_DB_EVENTFD | LIO_QP_IRQ_ENABLED
						  : LIO_QP_DB_POLL | LIO_QP_SQ_QMEM);

		ck_assert_int_eq(read(p[0], &ch, 1), 1);
		rw_verify(d, 6); /* both at once */
		ck_assert_uint_eq(ssd_stats().sessions, 2);
		ck_assert_uint_eq(nr_volumes(), vols + 1);
		kill(v, SIGKILL); /* its queue is full of writes in flight */
		testutil_wait_limit(v, "victim", 10);
		wait_sessions(1);
		ck_assert_uint_eq(ssd_stats().qpairs, 1); /* the victim's queue pair is gone */
		ck_assert_uint_eq(nr_volumes(), vols);	  /* and its anonymous volume */
		rw_verify(d, 7);
	}
	lio_drv_close(d);
	lio_client_close(c);
}
END_TEST

/* ---- ten clients ---- */

#define NCLIENTS 10

START_TEST(test_ten_clients)
{
	pid_t pids[NCLIENTS];
	struct lio_client *c;
	struct lio_vol_list l = {0};
	uint8_t *img;
	int fd, i;
	uint32_t v;
	struct stat sb;

	for (i = 0; i < NCLIENTS; i++) {
		pids[i] = fork();
		ck_assert_int_ge(pids[i], 0);
		if (!pids[i]) {
			char name[16];
			struct lio_client *cc;
			struct lio_vol_attach a;
			struct lio_drv *d;
			uint64_t buf, lba;
			uint32_t flags = i % 2 ? LIO_QP_DB_POLL | LIO_QP_SQ_QMEM | LIO_QP_CQ_QMEM
					       : LIO_QP_DB_EVENTFD | LIO_QP_IRQ_ENABLED;

			snprintf(name, sizeof(name), "vm%d", i);
			cc = connect_ok(name);
			a = attach(cc, name, LIO_ATTACH_CREATE);
			d = drv_open(cc, &a,
				     i % 3 ? LIGHTIOV_MODE_ISOLATED : LIGHTIOV_MODE_PASSTHROUGH,
				     flags, 1);
			buf = lio_drv_alloc(d, 128 << 10);
			/* the whole volume, 64 KiB at a time, then read back */
			for (lba = 0; lba < a.lba_count; lba += 128) {
				fill(lio_drv_ptr(d, buf), (unsigned)i + 100, lba, 128);
				uint16_t st = lio_drv_io(d, 0, NVME_CMD_WRITE, lba, 128, buf);

				if (st) {
					fprintf(stderr, "client %d: write at %llu: status 0x%x\n",
						i, (unsigned long long)lba, st);
					_exit(10);
				}
			}
			if (lio_drv_io(d, 0, NVME_CMD_FLUSH, 0, 0, 0))
				_exit(11);
			for (lba = 0; lba < a.lba_count; lba += 128) {
				if (lio_drv_io(d, 0, NVME_CMD_READ, lba, 128, buf))
					_exit(12);
				if (!check(lio_drv_ptr(d, buf), (unsigned)i + 100, lba, 128))
					_exit(13);
			}
			_exit(0);
		}
	}
	for (i = 0; i < NCLIENTS; i++) {
		int st = testutil_wait_limit(pids[i], "client", 120);

		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "client %d: status 0x%x", i,
			      st);
	}
	/* the backing: each window holds only its owner's stamps; nothing outside any window */
	c = connect_ok("checker");
	ck_assert_int_eq(lio_client_vol_list(c, &l), 0);
	lio_client_close(c);
	ck_assert_uint_eq(l.total, NCLIENTS);
	fd = open(backing, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &sb), 0);
	img = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_SHARED, fd, 0);
	ck_assert_ptr_ne(img, MAP_FAILED);
	for (v = 0; v < l.count; v++) {
		const struct lio_vol_info *vi = &l.v[v];
		unsigned tag = 100 + (unsigned)atoi(vi->name + 2);

		ck_assert_uint_eq(vi->lba_count, VOL_BYTES >> LBA_SHIFT);
		ck_assert_msg(
		    check(img + (vi->lba_start << LBA_SHIFT), tag, 0, (uint32_t)vi->lba_count),
		    "volume %s does not hold exactly its client's data", vi->name);
	}
	for (uint64_t off = RESERVED; off < (uint64_t)sb.st_size; off += 1u << LBA_SHIFT) {
		bool inside = false;

		for (v = 0; v < l.count; v++)
			if (off >> LBA_SHIFT >= l.v[v].lba_start &&
			    off >> LBA_SHIFT < l.v[v].lba_start + l.v[v].lba_count)
				inside = true;
		if (!inside && !all_zero(img + off, 1u << LBA_SHIFT))
			ck_abort_msg("data written outside every window at byte %llu",
				     (unsigned long long)off);
	}
	munmap(img, (size_t)sb.st_size);
	close(fd);
}
END_TEST

/* ---- kill -9 of the daemon mid-write ---- */

START_TEST(test_daemon_crash_restart)
{
	struct lio_client *c = connect_ok("crash");
	struct lio_vol_attach a = attach(c, "durable", LIO_ATTACH_CREATE), b;
	struct lio_drv *d = drv_open(c, &a, LIGHTIOV_MODE_ISOLATED, LIO_QP_DB_POLL, 1);
	uint64_t buf = lio_drv_alloc(d, 64 << 10), lba;
	struct lio_vol_list l1 = {0}, l2 = {0};
	struct nvme_cqe cqe[64];
	int st, i;

	ck_assert_int_eq(lio_client_vol_list(c, &l1), 0);
	/* acknowledged and flushed */
	for (lba = 0; lba < 1024; lba += 128) {
		fill(lio_drv_ptr(d, buf), 42, lba, 128);
		ck_assert_uint_eq(lio_drv_io(d, 0, NVME_CMD_WRITE, lba, 128, buf), 0);
	}
	ck_assert_uint_eq(lio_drv_io(d, 0, NVME_CMD_FLUSH, 0, 0, 0), 0);
	/* then a stream of unflushed writes elsewhere, and the daemon dies under them */
	fill(lio_drv_ptr(d, buf), 43, 0, 128);
	for (i = 0; i < 40; i++) {
		struct nvme_sqe s = rw(NVME_CMD_WRITE, 4096 + (uint64_t)(i % 32) * 128, 128, 0, 0);

		lio_drv_prp(d, 0, &s, buf, 64 << 10);
		if (lio_drv_submit(d, 0, &s) < 0)
			lio_drv_reap(d, 0, cqe, 64, 10);
		if (i == 20)
			kill(daemon_pid, SIGKILL);
	}
	st = daemon_stop(SIGKILL);
	ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	lio_drv_close(d);
	lio_client_close(c);

	daemon_start(NULL);
	c = connect_ok("after");
	ck_assert_int_eq(lio_client_vol_list(c, &l2), 0);
	ck_assert_uint_eq(l2.total, l1.total);
	ck_assert_str_eq(l2.v[0].name, "durable");
	ck_assert_uint_eq(l2.v[0].lba_start, l1.v[0].lba_start);
	ck_assert_uint_eq(l2.v[0].lba_count, l1.v[0].lba_count);
	ck_assert_uint_eq(l2.v[0].users, 0);
	b = attach(c, "durable", 0);
	ck_assert_uint_eq(b.lba_start, a.lba_start);
	d = drv_open(c, &b, LIGHTIOV_MODE_ISOLATED, LIO_QP_DB_EVENTFD, 1);
	buf = lio_drv_alloc(d, 64 << 10);
	for (lba = 0; lba < 1024; lba += 128) {
		ck_assert_uint_eq(lio_drv_io(d, 0, NVME_CMD_READ, lba, 128, buf), 0);
		ck_assert_msg(check(lio_drv_ptr(d, buf), 42, lba, 128),
			      "flushed data at LBA %llu lost in the crash",
			      (unsigned long long)lba);
	}
	lio_drv_close(d);
	lio_client_close(c);
}
END_TEST

/* ---- limits, permissions, CLI ---- */

START_TEST(test_socket_and_limits)
{
	struct lio_client *c[3];
	struct stat sb;
	char sock[128], err[256], ssd_dir[128];
	struct lio_client *x;
	struct testutil_run r;
	int i, rc;

	snprintf(sock, sizeof(sock), "%s/ssd/%s.sock", dir, SSD);
	snprintf(ssd_dir, sizeof(ssd_dir), "%s/ssd", dir);
	ck_assert_int_eq(stat(sock, &sb), 0);
	ck_assert_uint_eq(sb.st_mode & 0777, 0660);
	ck_assert_int_eq(stat(ssd_dir, &sb), 0);
	ck_assert_uint_eq(sb.st_mode & 0777, 0750);
	{ /* the daemon runs with no capability and under its seccomp filter */
		char path[64], *st;

		snprintf(path, sizeof(path), "/proc/%d/status", (int)daemon_pid);
		st = testutil_slurp(path);
		ck_assert_msg(strstr(st, "CapEff:\t0000000000000000"), "%s", st);
		ck_assert_msg(strstr(st, "CapBnd:\t0000000000000000"), "%s", st);
		ck_assert_msg(strstr(st, "Seccomp:\t2"), "%s", st);
		ck_assert_msg(strstr(st, "NoNewPrivs:\t1"), "%s", st);
		free(st);
	}
	daemon_stop(SIGTERM);
	{
		const char *extra[] = {"--max-clients", "2", "--max-qpairs", "1", NULL};

		daemon_start(extra);
	}
	for (i = 0; i < 2; i++) {
		/* the readiness probe's session may still be ending */
		for (int k = 0; k < 40; k++) {
			rc = lio_client_connect(&c[i], SSD, "limit", NULL, err, sizeof(err));
			if (rc != -EUSERS)
				break;
			testutil_sleep_ms(25);
		}
		ck_assert_msg(rc == 0, "%s", err);
	}
	rc = lio_client_connect(&x, SSD, "third", NULL, err, sizeof(err));
	ck_assert_int_eq(rc, -EUSERS);
	ck_assert_ptr_nonnull(strstr(err, "the limit (lvmm ssd serve --max-clients 2)"));
	{
		struct lio_vol_attach a = attach(c[0], NULL, LIO_ATTACH_ANON);
		struct lio_drv_opts o = {.vol_id = a.vol_id,
					 .lba_start = a.lba_start,
					 .lba_count = a.lba_count,
					 .lba_shift = LBA_SHIFT,
					 .mode = LIGHTIOV_MODE_ISOLATED,
					 .qp_flags = LIO_QP_DB_POLL,
					 .nr_qp = 2,
					 .depth = 16};
		struct lio_drv *d;

		rc = lio_drv_open(&d, c[0], &o, err, sizeof(err));
		ck_assert_int_eq(rc, -EMFILE); /* one queue pair per client here */
		ck_assert_ptr_nonnull(strstr(err, "the limit"));
		d = drv_open(c[0], &a, LIGHTIOV_MODE_ISOLATED, LIO_QP_DB_EVENTFD, 1);
		rw_verify(d, 8);
		lio_drv_close(d);
	}
	lio_client_close(c[1]);
	testutil_sleep_ms(200); /* its slot frees when the daemon sees the hang-up */
	/* stats and usage from the CLI */
	{
		char *args[] = {"ssd", "stats", SSD, NULL};

		testutil_run_lvmm(&r, args, NULL, NULL, 0, 20);
		ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "%s%s", r.out,
			      r.err);
		ck_assert_ptr_nonnull(strstr(r.out, "ssd t0: model none"));
		ck_assert_ptr_nonnull(strstr(r.out, "session 'limit'"));
		ck_assert_ptr_nonnull(strstr(r.out, "total:"));
	}
	lio_client_close(c[0]);
	{
		char *args[] = {"ssd", "serve", "t1", "--backing", backing, "--size", "64M", NULL};

		testutil_run_lvmm(&r, args, NULL, NULL, 0, 20);
		ck_assert_int_eq(WEXITSTATUS(r.status), 1);
		ck_assert_ptr_nonnull(strstr(r.err, "refusing to shrink"));
	}
	{
		char *args[] = {"ssd",	 "serve",   "t1",     "--backing",
				backing, "--model", "iops=x", NULL};

		testutil_run_lvmm(&r, args, NULL, NULL, 0, 20);
		ck_assert_int_eq(WEXITSTATUS(r.status), 2);
		ck_assert_ptr_nonnull(strstr(r.err, "iops=x"));
	}
	{
		char *args[] = {"ssd", "--help", NULL};

		testutil_run_lvmm(&r, args, NULL, NULL, 0, 20);
		ck_assert_int_eq(WEXITSTATUS(r.status), 0);
		ck_assert_ptr_nonnull(strstr(r.out, "lvmm ssd serve NAME"));
	}
	{ /* no name: one line saying so, as every other command refuses, not the usage */
		char *args[] = {"ssd", "serve", NULL};

		testutil_run_lvmm(&r, args, NULL, NULL, 0, 20);
		ck_assert_int_eq(WEXITSTATUS(r.status), 2);
		ck_assert_str_eq(r.err,
				 "lvmm: ssd serve: expected one SSD NAME (lvmm ssd --help)\n");
	}
	{ /* a second daemon on the same SSD name is refused */
		char *args[] = {"ssd", "serve", SSD, "--backing", backing, NULL};

		testutil_run_lvmm(&r, args, NULL, NULL, 0, 20);
		ck_assert_int_eq(WEXITSTATUS(r.status), 1);
	}
	{
		char *log = testutil_slurp(logpath);

		ck_assert_ptr_nonnull(strstr(log, "connected"));
		free(log);
	}
}
END_TEST

/* ---- the device model ---- */

START_TEST(test_model_latency)
{
	const char *extra[] = {"--model", "latency=3ms", NULL};
	struct lio_client *c;
	struct lio_identify id;
	struct lio_vol_attach a;
	struct lio_drv *d;
	uint64_t buf;
	double t0, dt;
	char err[256];
	int i;

	daemon_stop(SIGTERM);
	daemon_start(extra);
	ck_assert_int_eq(lio_client_connect(&c, SSD, "model", &id, err, sizeof(err)), 0);
	ck_assert_str_eq(id.model, "latency=3ms");
	a = attach(c, NULL, LIO_ATTACH_ANON);
	d = drv_open(c, &a, LIGHTIOV_MODE_ISOLATED, LIO_QP_DB_EVENTFD, 1);
	buf = lio_drv_alloc(d, 4096);
	t0 = testutil_now_s();
	for (i = 0; i < 20; i++)
		ck_assert_uint_eq(lio_drv_io(d, 0, NVME_CMD_READ, (uint64_t)i * 8, 8, buf), 0);
	dt = testutil_now_s() - t0;
	ck_assert_msg(dt >= 20 * 0.003, "20 QD1 reads in %.1f ms under a 3 ms model", dt * 1e3);
	lio_drv_close(d);
	lio_client_close(c);
}
END_TEST

/* One case per test: CK_RUN_CASE=test_ten_clients runs one alone. */
static void add(Suite *s, const char *name, const TTest *t)
{
	TCase *tc = tcase_create(name);

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 180);
	tcase_add_test(tc, t);
	suite_add_tcase(s, tc);
}

#define ADD(s, t) add(s, #t, t)

/* ---- service readiness and --daemon ---- */

/* The pid of the detached `lvmm ssd serve SSD --backing BACKING --daemon`, from /proc. */
static pid_t find_daemon(void)
{
	char want[256], path[300], got[512];
	size_t wl = (size_t)snprintf(want, sizeof(want), "ssd%cserve%c%s%c--backing%c%s%c--daemon",
				     0, 0, SSD, 0, 0, backing, 0);
	DIR *d = opendir("/proc");
	struct dirent *e;
	pid_t pid = 0;

	ck_assert_ptr_nonnull(d);
	while (!pid && (e = readdir(d))) {
		int fd;
		ssize_t n;

		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
		fd = open(path, O_RDONLY);
		if (fd < 0)
			continue;
		n = read(fd, got, sizeof(got));
		close(fd);
		for (ssize_t i = 0; n > (ssize_t)wl && i + (ssize_t)wl <= n; i++)
			if (!memcmp(got + i, want, wl))
				pid = atoi(e->d_name);
	}
	closedir(d);
	return pid;
}

START_TEST(test_notify_and_daemon)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	const char *extra[] = {"--notify", NULL};
	char buf[128] = "";
	struct timeval tv = {.tv_sec = 10};
	struct testutil_run r;
	int fd, pid = 0;
	ssize_t n;

	daemon_stop(SIGTERM);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/notify", dir);
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setenv("NOTIFY_SOCKET", sa.sun_path, 1);
	daemon_start(extra);
	unsetenv("NOTIFY_SOCKET");
	n = recv(fd, buf, sizeof(buf) - 1, 0);
	ck_assert_int_gt(n, 0);
	ck_assert_ptr_nonnull(strstr(buf, "READY=1"));
	ck_assert_ptr_nonnull(strstr(buf, "MAINPID="));
	close(fd);
	daemon_stop(SIGTERM);

	/* --daemon: the command returns, the SSD keeps serving, SIGTERM stops it */
	{
		char *args[] = {"ssd", "serve", SSD, "--backing", backing, "--daemon", NULL};

		testutil_run_lvmm(&r, args, NULL, NULL, 0, 20);
		ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "%s", r.err);
	}
	for (int i = 0; i < 200; i++) {
		struct lio_client *c;
		char err[256];

		if (!lio_client_connect(&c, SSD, "after-daemon", NULL, err, sizeof(err))) {
			lio_client_close(c);
			break;
		}
		testutil_sleep_ms(25);
	}
	pid = find_daemon();
	ck_assert_int_gt(pid, 1);
	ck_assert_int_eq(kill(pid, SIGTERM), 0);
	for (int i = 0; i < 200 && kill(pid, 0) == 0; i++)
		testutil_sleep_ms(25);
	ck_assert_int_ne(kill(pid, 0), 0);
	daemon_start(NULL); /* for the teardown's clean stop */
}
END_TEST

/* ---- 4 KiB LBAs ---- */

static void fill4k(uint8_t *p, unsigned tag, uint64_t lba, uint32_t nlb)
{
	uint32_t i;

	for (i = 0; i < nlb; i++)
		memset(p + ((size_t)i << 12), (int)(tag * 31 + lba + i) & 0xff, 4096);
}

/* `lvmm ssd serve --lba-size 4096`: identify says 4096-byte LBAs, volumes are counted in them
 * (the table's reserved area too), commands address 4 KiB blocks of the window and land at the
 * volume's absolute 4 KiB LBA in the backing, the window's end is enforced in those units, and
 * the backing keeps its format: served again as 512 it is refused, naming both sizes. */
START_TEST(test_lba_4k)
{
	const char *const extra[] = {"--lba-size", "4096", NULL};
	struct lio_vol_attach a = {
	    .size_bytes = VOL_BYTES, .name = "v4k", .flags = LIO_ATTACH_CREATE};
	struct lio_drv_opts o = {.mode = LIGHTIOV_MODE_ISOLATED,
				 .qp_flags = LIO_QP_DB_POLL,
				 .nr_qp = 1,
				 .depth = 16,
				 .lba_shift = 12};
	struct lio_identify id;
	struct lio_client *c;
	struct lio_drv *d;
	struct testutil_run r;
	uint8_t *want = malloc(16 << 12), *got = malloc(16 << 12);
	uint64_t buf, ends[2];
	char err[256];
	unsigned k;
	int fd;

	ck_assert(want && got);
	daemon_stop(SIGTERM);
	unlink(backing);
	daemon_start(extra);
	ck_assert_int_eq(lio_client_connect(&c, SSD, "lba4k", &id, err, sizeof(err)), 0);
	ck_assert_uint_eq(id.lba_shift, 12);
	ck_assert_uint_eq(id.capacity_lbas, ((BACKING_MB << 20) - RESERVED) >> 12);
	ck_assert_msg(lio_client_vol_attach(c, &a) == 0, "%s", lio_client_error(c));
	ck_assert_uint_eq(a.lba_count, VOL_BYTES >> 12);
	ck_assert_uint_ge(a.lba_start, RESERVED >> 12);
	o.vol_id = a.vol_id;
	o.lba_start = a.lba_start;
	o.lba_count = a.lba_count;
	ck_assert_int_eq(lio_drv_open(&d, c, &o, err, sizeof(err)), 0);
	buf = lio_drv_alloc(d, 16 << 12);
	ck_assert(buf);
	ends[0] = 0;
	ends[1] = a.lba_count - 16;
	for (k = 0; k < 2; k++) {
		fill4k(lio_drv_ptr(d, buf), 4, ends[k], 16);
		memcpy(want, lio_drv_ptr(d, buf), 16 << 12);
		ck_assert_uint_eq(lio_drv_io(d, 0, NVME_CMD_WRITE, ends[k], 16, buf), 0);
		memset(lio_drv_ptr(d, buf), 0, 16 << 12);
		ck_assert_uint_eq(lio_drv_io(d, 0, NVME_CMD_READ, ends[k], 16, buf), 0);
		ck_assert(!memcmp(lio_drv_ptr(d, buf), want, 16 << 12));
		fd = open(backing, O_RDONLY);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(pread(fd, got, 16 << 12, (off_t)((a.lba_start + ends[k]) << 12)),
				 16 << 12);
		close(fd);
		ck_assert_msg(!memcmp(got, want, 16 << 12), "backing at 4 KiB LBA %llu",
			      (unsigned long long)(a.lba_start + ends[k]));
	}
	/* one 4 KiB block past the window's end, counted in 4 KiB blocks */
	ck_assert_uint_eq(SC(lio_drv_io(d, 0, NVME_CMD_READ, a.lba_count - 15, 16, buf)),
			  NVME_SC_LBA_RANGE);
	lio_drv_close(d);
	lio_client_close(c);
	daemon_stop(SIGTERM);
	{
		char *args[] = {"ssd",	  "serve", SSD,		 "--backing", backing,
				"--size", "256M",  "--lba-size", "512",	      NULL};

		testutil_run_lvmm(&r, args, NULL, NULL, 0, 20);
		ck_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) != 0);
		ck_assert_msg(strstr(r.err, "4096") && strstr(r.err, "512"), "%s", r.err);
	}
	daemon_start(NULL); /* the table's own format: 4096 */
	ck_assert_int_eq(lio_client_connect(&c, SSD, "lba4k", &id, err, sizeof(err)), 0);
	ck_assert_uint_eq(id.lba_shift, 12);
	lio_client_close(c);
	free(want);
	free(got);
}
END_TEST

static Suite *softssd_suite(void)
{
	Suite *s = suite_create("softssd");

	ADD(s, test_isolated_poll_qmem);
	ADD(s, test_isolated_eventfd_guest_rings);
	ADD(s, test_passthrough_poll_guest_rings);
	ADD(s, test_passthrough_eventfd_sq_in_qmem);
	ADD(s, test_reap_sleeps_until_interrupt);
	ADD(s, test_zeroes_dsm_fua);
	ADD(s, test_write_through);
	ADD(s, test_hostile_commands);
	ADD(s, test_hostile_requests);
	ADD(s, test_client_disconnects_mid_io);
	ADD(s, test_ten_clients);
	ADD(s, test_daemon_crash_restart);
	ADD(s, test_socket_and_limits);
	ADD(s, test_model_latency);
	ADD(s, test_notify_and_daemon);
	ADD(s, test_lba_4k);
	return s;
}

int main(void)
{
	return testutil_run_suite(softssd_suite());
}
