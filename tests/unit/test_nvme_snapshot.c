/* Snapshots of the vNVMe controller without KVM: a controller on a buffer as guest memory is
 * driven through registers and admin commands, paused, saved, and restored into a fresh one
 * that goes on with the same queues; then the refusals of corrupt state. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nvme-lightiov/nvme_ctrl.h"
#include "testutil.h"

#define RAM_SIZE  (8u << 20)
#define DISK_SIZE (4u << 20)
#define ASQ_GPA	  0x10000
#define ACQ_GPA	  0x20000
#define IOCQ_GPA  0x30000
#define IOSQ_GPA  0x40000
#define DBS_GPA	  0x50000
#define EIS_GPA	  0x51000
#define DATA_GPA  0x100000
#define AQ_SIZE	  16
#define IOQ_SIZE  8
#define STRIDE	  (4u << 2)
#define CMB_SIZE  (64u * 1024)
#define NVEC	  4
/* offsets in the controller's state (nvme_snap.c) */
#define OFF_VERSION 0
#define OFF_NREC    12
#define OFF_CSTS    44
#define OFF_DBS	    104
#define OFF_NAER    160
#define OFF_IVC	    328
#define OFF_REC	    (OFF_IVC + NVEC * 4)
#define REC_SIZE    32

static uint8_t *ram;
static struct guest_mem gm;
static struct nvme_mem_backend disk;
static struct nvme_ctrl *ctrl;
static unsigned irqs[NVEC];
static unsigned dbbuf_on, dbbuf_off;
static uint32_t asq_tail, acq_head, iosq_tail, iocq_head;
static uint8_t acq_phase, iocq_phase;
static struct nvme_io_req *parked[8];
static unsigned nparked;
static bool park;

static int test_submit(void *be, struct nvme_io_req *req)
{
	if (park) {
		parked[nparked++] = req;
		return 0;
	}
	return nvme_mem_backend_ops.submit(be, req);
}

static const struct nvme_backend_ops test_ops = {.submit = test_submit};

static void on_irq(void *opaque, unsigned vector)
{
	(void)opaque;
	if (vector < NVEC)
		irqs[vector]++;
}

static void on_dbbuf(void *opaque, bool on)
{
	(void)opaque;
	if (on)
		dbbuf_on++;
	else
		dbbuf_off++;
}

static struct nvme_ctrl *make_ctrl_q(unsigned max_ioqs)
{
	struct nvme_ctrl_params p = {
	    .mqes = 63,
	    .dstrd = 2,
	    .max_ioqs = max_ioqs,
	    .nvectors = NVEC,
	    .cmb_size = CMB_SIZE,
	    .cmb_bir = 2,
	    .size = DISK_SIZE,
	    .serial = "SNAP0001",
	};
	struct nvme_ctrl_hooks h = {.irq = on_irq, .dbbuf = on_dbbuf};
	struct nvme_ctrl *c;
	char err[128];

	ck_assert_int_eq(nvme_ctrl_create(&p, &gm, &test_ops, &disk, &h, &c, err, sizeof(err)), 0);
	return c;
}

static struct nvme_ctrl *make_ctrl(void)
{
	return make_ctrl_q(4);
}

static void w32(uint64_t off, uint32_t v)
{
	nvme_ctrl_bar0_write(ctrl, off, &v, 4);
}

static void w64(uint64_t off, uint64_t v)
{
	nvme_ctrl_bar0_write(ctrl, off, &v, 8);
}

static uint32_t r32(uint64_t off)
{
	uint32_t v;

	nvme_ctrl_bar0_read(ctrl, off, &v, 4);
	return v;
}

static void sq_db(unsigned qid, uint32_t v)
{
	w32(0x1000 + (2 * qid) * STRIDE, v);
}

static void cq_db(unsigned qid, uint32_t v)
{
	w32(0x1000 + (2 * qid + 1) * STRIDE, v);
}

static void setup(void)
{
	ram = calloc(1, RAM_SIZE);
	disk.data = calloc(1, DISK_SIZE);
	disk.size = DISK_SIZE;
	gmem_init_buffer(&gm, ram, RAM_SIZE);
	memset(irqs, 0, sizeof(irqs));
	dbbuf_on = dbbuf_off = 0;
	asq_tail = acq_head = iosq_tail = iocq_head = 0;
	acq_phase = iocq_phase = 1;
	park = false;
	nparked = 0;
	ctrl = make_ctrl();
}

static void teardown(void)
{
	nvme_ctrl_destroy(ctrl);
	free(ram);
	free(disk.data);
}

static struct nvme_sqe mk(uint8_t op, uint16_t cid)
{
	struct nvme_sqe c;

	memset(&c, 0, sizeof(c));
	c.opcode = op;
	c.cid = cid;
	return c;
}

static void admin_submit(const struct nvme_sqe *cmd)
{
	memcpy(ram + ASQ_GPA + asq_tail * 64, cmd, 64);
	asq_tail = (asq_tail + 1) % AQ_SIZE;
	sq_db(0, asq_tail);
}

static bool admin_reap(struct nvme_cqe *out)
{
	struct nvme_cqe *e = (struct nvme_cqe *)(ram + ACQ_GPA) + acq_head;

	if ((e->status & 1) != acq_phase)
		return false;
	*out = *e;
	out->status >>= 1;
	if (++acq_head == AQ_SIZE) {
		acq_head = 0;
		acq_phase ^= 1;
	}
	cq_db(0, acq_head);
	return true;
}

static uint16_t admin(struct nvme_sqe *cmd, uint32_t *dw0)
{
	struct nvme_cqe e;

	admin_submit(cmd);
	ck_assert(admin_reap(&e));
	ck_assert_uint_eq(e.cid, cmd->cid);
	if (dw0)
		*dw0 = e.dw0;
	return e.status & 0x7ff;
}

static void io_submit(const struct nvme_sqe *cmd)
{
	memcpy(ram + IOSQ_GPA + iosq_tail * 64, cmd, 64);
	iosq_tail = (iosq_tail + 1) % IOQ_SIZE;
	sq_db(1, iosq_tail);
}

static bool io_reap(struct nvme_cqe *out, uint8_t *phase)
{
	struct nvme_cqe *e = (struct nvme_cqe *)(ram + IOCQ_GPA) + iocq_head;

	if ((e->status & 1) != iocq_phase)
		return false;
	*out = *e;
	*phase = e->status & 1;
	out->status >>= 1;
	if (++iocq_head == IOQ_SIZE) {
		iocq_head = 0;
		iocq_phase ^= 1;
	}
	cq_db(1, iocq_head);
	return true;
}

static struct nvme_sqe rw(uint8_t op, uint16_t cid, uint64_t slba, uint64_t prp1)
{
	struct nvme_sqe c = mk(op, cid);

	c.nsid = 1;
	c.cdw10 = (uint32_t)slba;
	c.cdw12 = 7; /* 8 blocks: one page */
	c.prp1 = prp1;
	return c;
}

static uint16_t feature(bool set, uint8_t fid, uint32_t v, uint32_t *dw0)
{
	struct nvme_sqe c = mk(set ? NVME_ADMIN_SET_FEATURES : NVME_ADMIN_GET_FEATURES, 80);

	c.cdw10 = fid;
	c.cdw11 = v;
	return admin(&c, dw0);
}

/* Enabled, 3 I/O queues granted, write cache off, coalescing set, I/O CQ 1 on vector 1, SQ 1. */
static void bring_up(void)
{
	struct nvme_sqe c;

	w32(NVME_REG_AQA, (AQ_SIZE - 1) << 16 | (AQ_SIZE - 1));
	w64(NVME_REG_ASQ, ASQ_GPA);
	w64(NVME_REG_ACQ, ACQ_GPA);
	w32(NVME_REG_CC, NVME_CC_EN | 6 << 16 | 4 << 20);
	ck_assert_uint_eq(r32(NVME_REG_CSTS), NVME_CSTS_RDY);
	ck_assert_uint_eq(feature(true, NVME_FEAT_NUM_QUEUES, 2 << 16 | 2, NULL), 0);
	ck_assert_uint_eq(feature(true, NVME_FEAT_VOLATILE_WC, 0, NULL), 0);
	ck_assert_uint_eq(feature(true, NVME_FEAT_ARBITRATION, 0x03020103, NULL), 0);
	c = mk(NVME_ADMIN_CREATE_CQ, 81);
	c.prp1 = IOCQ_GPA;
	c.cdw10 = (IOQ_SIZE - 1) << 16 | 1;
	c.cdw11 = 1 << 16 | 3;
	ck_assert_uint_eq(admin(&c, NULL), 0);
	c = mk(NVME_ADMIN_CREATE_SQ, 82);
	c.prp1 = IOSQ_GPA;
	c.cdw10 = (IOQ_SIZE - 1) << 16 | 1;
	c.cdw11 = 1 << 16 | 1;
	ck_assert_uint_eq(admin(&c, NULL), 0);
}

static void *save(struct nvme_ctrl *c, size_t *len)
{
	char err[256] = "";
	void *buf;

	*len = nvme_ctrl_state_size(c, err, sizeof(err));
	ck_assert_msg(*len, "%s", err);
	buf = malloc(*len);
	ck_assert_int_eq(nvme_ctrl_save(c, buf, *len, err, sizeof(err)), 0);
	return buf;
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed * 131 + i * 7);
}

/* Admin and I/O queues, features, an outstanding Async Event Request, the error log and the
 * CMB go across; a command rung while paused runs after the resume, once; the CQ's phase
 * carries on over its wrap. */
START_TEST(test_round_trip)
{
	struct nvme_sqe c;
	struct nvme_cqe e;
	uint8_t phase, buf[4096], *cmb;
	uint64_t cmb_size;
	uint32_t dw0;
	size_t len;
	void *st;
	unsigned i;

	bring_up();
	/* five writes: the I/O CQ's tail is at 5 of 8 */
	for (i = 0; i < 5; i++) {
		fill(ram + DATA_GPA, 4096, i);
		c = rw(NVME_CMD_WRITE, (uint16_t)(10 + i), i * 8, DATA_GPA);
		io_submit(&c);
		ck_assert(io_reap(&e, &phase));
		ck_assert_uint_eq(e.cid, 10 + i);
		ck_assert_uint_eq(e.status, 0);
	}
	/* a command that fails: the error log has one entry */
	c = mk(0x7f, 30);
	c.nsid = 1;
	io_submit(&c);
	ck_assert(io_reap(&e, &phase));
	ck_assert_uint_ne(e.status, 0);
	/* an Async Event Request waits */
	c = mk(NVME_ADMIN_ASYNC_EVENT, 77);
	admin_submit(&c);
	ck_assert(!admin_reap(&e));
	cmb = nvme_ctrl_cmb(ctrl, &cmb_size);
	memset(cmb + 100, 0xa5, 50);

	nvme_ctrl_pause(ctrl);
	/* rung while paused (before the vCPUs stopped, the I/O thread had not run yet) */
	fill(ram + DATA_GPA, 4096, 40);
	c = rw(NVME_CMD_WRITE, 40, 40 * 8, DATA_GPA);
	io_submit(&c);
	ck_assert(!io_reap(&e, &phase));
	st = save(ctrl, &len);
	nvme_ctrl_destroy(ctrl);

	ctrl = make_ctrl();
	{
		char err[256] = "";

		ck_assert_msg(nvme_ctrl_restore(ctrl, st, len, err, sizeof(err)) == 0, "%s", err);
	}
	free(st);
	ck_assert_uint_eq(r32(NVME_REG_CSTS), NVME_CSTS_RDY);
	ck_assert_uint_eq(r32(NVME_REG_AQA), (AQ_SIZE - 1) << 16 | (AQ_SIZE - 1));
	cmb = nvme_ctrl_cmb(ctrl, &cmb_size);
	ck_assert_uint_eq(cmb[100], 0xa5);
	ck_assert_uint_eq(cmb[149], 0xa5);
	ck_assert_uint_eq(cmb[150], 0);
	/* still paused: nothing runs before the resume */
	sq_db(1, iosq_tail);
	ck_assert(!io_reap(&e, &phase));
	nvme_ctrl_resume(ctrl);
	sq_db(1, iosq_tail); /* no I/O thread here: the doorbell runs the queue inline */
	ck_assert(io_reap(&e, &phase));
	ck_assert_uint_eq(e.cid, 40);
	ck_assert_uint_eq(e.status, 0);
	ck_assert_uint_eq(e.sq_id, 1);
	ck_assert(!io_reap(&e, &phase)); /* once */
	fill(buf, sizeof(buf), 40);
	ck_assert_mem_eq(disk.data + 40 * 4096, buf, sizeof(buf));
	/* go on past the CQ's wrap: the phase flips where the saved one left off */
	ck_assert_uint_eq(iocq_head, 7);
	for (i = 0; i < 6; i++) {
		unsigned seed = i < 5 ? i : 40;

		c = rw(NVME_CMD_READ, (uint16_t)(50 + i), seed * 8, DATA_GPA);
		io_submit(&c);
		ck_assert(io_reap(&e, &phase));
		ck_assert_uint_eq(e.cid, 50 + i);
		ck_assert_uint_eq(e.status, 0);
		ck_assert_uint_eq(phase, i == 0 ? 1 : 0); /* entry 7 of the first lap, then 0.. */
		fill(buf, sizeof(buf), seed);
		ck_assert_mem_eq(ram + DATA_GPA, buf, sizeof(buf));
	}
	ck_assert_uint_gt(irqs[1], 0);
	/* the features came along */
	ck_assert_uint_eq(feature(false, NVME_FEAT_VOLATILE_WC, 0, &dw0), 0);
	ck_assert_uint_eq(dw0, 0);
	ck_assert_uint_eq(feature(false, NVME_FEAT_ARBITRATION, 0, &dw0), 0);
	ck_assert_uint_eq(dw0, 0x03020103);
	ck_assert_uint_eq(feature(false, NVME_FEAT_NUM_QUEUES, 0, &dw0), 0);
	ck_assert_uint_eq(dw0, 2 << 16 | 2);
	/* the waiting Async Event Request answers an event of the restored controller */
	sq_db(4, 1); /* SQ 4 does not exist: Invalid Doorbell Register */
	ck_assert(admin_reap(&e));
	ck_assert_uint_eq(e.cid, 77);
	ck_assert_uint_eq(e.dw0 & 7, NVME_AER_TYPE_ERROR);
	/* the error log goes on counting from the saved entry */
	{
		struct nvme_error_log *log = (struct nvme_error_log *)(ram + DATA_GPA);

		c = mk(NVME_ADMIN_GET_LOG_PAGE, 78);
		c.prp1 = DATA_GPA;
		c.cdw10 = NVME_LOG_ERROR | (64 / 4 - 1) << 16;
		ck_assert_uint_eq(admin(&c, NULL), 0);
		ck_assert_uint_eq(log->error_count, 1);
		ck_assert_uint_eq(log->cmdid, 30);
	}
}
END_TEST

/* Shadow doorbells: the buffers' addresses come back (the hook switches the ioeventfds on
 * again), the restored controller reads the SQ tail from the shadow buffer and publishes its
 * event index there. */
START_TEST(test_shadow_doorbells)
{
	uint32_t *dbs = (uint32_t *)(ram + DBS_GPA), *eis = (uint32_t *)(ram + EIS_GPA);
	struct nvme_sqe c;
	struct nvme_cqe e;
	uint8_t phase;
	char err[256] = "";
	size_t len;
	void *st;

	bring_up();
	c = mk(NVME_ADMIN_DBBUF, 83);
	c.prp1 = DBS_GPA;
	c.prp2 = EIS_GPA;
	ck_assert_uint_eq(admin(&c, NULL), 0);
	ck_assert_uint_eq(dbbuf_on, 1);
	nvme_ctrl_pause(ctrl);
	st = save(ctrl, &len);
	nvme_ctrl_destroy(ctrl);
	ctrl = make_ctrl();
	ck_assert_msg(nvme_ctrl_restore(ctrl, st, len, err, sizeof(err)) == 0, "%s", err);
	free(st);
	ck_assert_uint_eq(dbbuf_on, 2);
	nvme_ctrl_resume(ctrl);
	/* the driver writes the tail to the shadow buffer; the MMIO write only wakes the device */
	c = rw(NVME_CMD_FLUSH, 84, 0, 0);
	memcpy(ram + IOSQ_GPA + iosq_tail * 64, &c, 64);
	iosq_tail = (iosq_tail + 1) % IOQ_SIZE;
	dbs[2 * 1 * (STRIDE / 4)] = iosq_tail;
	sq_db(1, 0);
	ck_assert(io_reap(&e, &phase));
	ck_assert_uint_eq(e.cid, 84);
	ck_assert_uint_eq(e.status, 0);
	ck_assert_uint_eq(eis[2 * 1 * (STRIDE / 4)], iosq_tail);
}
END_TEST

/* State saved for another configuration (here fewer I/O queues) is refused. */
START_TEST(test_other_config)
{
	struct nvme_ctrl *c;
	char err[256] = "";
	size_t len;
	void *st;

	bring_up();
	nvme_ctrl_pause(ctrl);
	st = save(ctrl, &len);
	c = make_ctrl_q(2);
	ck_assert_int_ne(nvme_ctrl_restore(c, st, len, err, sizeof(err)), 0);
	ck_assert_msg(strstr(err, "saved with 4 queues") && strstr(err, "the config makes 2"), "%s",
		      err);
	nvme_ctrl_destroy(c);
	free(st);
	nvme_ctrl_resume(ctrl);
}
END_TEST

struct pauser {
	pthread_t t;
	volatile bool done;
};

static void *pause_thread(void *arg)
{
	struct pauser *p = arg;

	nvme_ctrl_pause(ctrl);
	p->done = true;
	return NULL;
}

/* Pause waits for what the backend holds; its completion is posted before the save, and a
 * controller with a command in flight refuses to be saved. */
START_TEST(test_pause_drains)
{
	struct pauser p = {.done = false};
	struct nvme_sqe c;
	struct nvme_cqe e;
	uint8_t phase;
	char err[256] = "";
	size_t len;
	void *st;

	bring_up();
	ck_assert_uint_eq(nvme_ctrl_state_size(ctrl, err, sizeof(err)), 0);
	ck_assert_ptr_nonnull(strstr(err, "not paused"));
	park = true;
	c = rw(NVME_CMD_READ, 60, 0, DATA_GPA);
	io_submit(&c);
	ck_assert_uint_eq(nparked, 1);
	ck_assert_int_eq(pthread_create(&p.t, NULL, pause_thread, &p), 0);
	usleep(100 * 1000);
	ck_assert(!p.done);
	err[0] = 0;
	ck_assert_uint_eq(nvme_ctrl_state_size(ctrl, err, sizeof(err)), 0);
	parked[0]->status = 0;
	nvme_ctrl_io_done(parked[0]);
	pthread_join(p.t, NULL);
	ck_assert(p.done);
	ck_assert(io_reap(&e, &phase));
	ck_assert_uint_eq(e.cid, 60);
	st = save(ctrl, &len);
	free(st);
	nvme_ctrl_resume(ctrl);
}
END_TEST

/* Saved state with one thing wrong: refused by name, the fresh controller left as it was. */
static void expect_refused(const uint8_t *good, size_t len, size_t off, const void *val,
			   size_t vlen, size_t cut, const char *what)
{
	uint8_t *b = malloc(len);
	struct nvme_ctrl *c = make_ctrl();
	struct nvme_ctrl *keep = ctrl;
	char err[256] = "";

	memcpy(b, good, len);
	if (vlen)
		memcpy(b + off, val, vlen);
	ck_assert_msg(nvme_ctrl_restore(c, b, len - cut, err, sizeof(err)) != 0, "%s accepted",
		      what);
	ck_assert_msg(strstr(err, what), "'%s' does not name '%s'", err, what);
	ctrl = c;
	ck_assert_uint_eq(r32(NVME_REG_CSTS), 0);
	ctrl = keep;
	nvme_ctrl_destroy(c);
	free(b);
}

static size_t find_rec(const uint8_t *st, unsigned nrec, uint16_t qid, uint8_t is_cq)
{
	for (unsigned i = 0; i < nrec; i++) {
		size_t o = OFF_REC + (size_t)i * REC_SIZE;
		uint16_t q;

		memcpy(&q, st + o, 2);
		if (q == qid && st[o + 2] == is_cq)
			return o;
	}
	ck_abort_msg("no record of queue %u", qid);
	return 0;
}

START_TEST(test_refusals)
{
	uint32_t u32, nrec;
	uint64_t u64;
	uint16_t u16;
	uint8_t *st;
	size_t len, sq1, cq1;
	struct nvme_sqe c;

	bring_up();
	c = mk(NVME_ADMIN_ASYNC_EVENT, 77);
	admin_submit(&c);
	nvme_ctrl_pause(ctrl);
	st = save(ctrl, &len);
	memcpy(&nrec, st + OFF_NREC, 4);
	ck_assert_uint_eq(nrec, 4);
	sq1 = find_rec(st, nrec, 1, 0);
	cq1 = find_rec(st, nrec, 1, 1);

	expect_refused(st, len, 0, NULL, 0, 1, "its head describes");
	expect_refused(st, 400, 0, NULL, 0, 0, "its head describes");
	expect_refused(st, 10, 0, NULL, 0, 0, "too short");
	u32 = 2;
	expect_refused(st, len, OFF_VERSION, &u32, 4, 0, "state version 2");
	u32 = 1000;
	expect_refused(st, len, OFF_NREC, &u32, 4, 0, "queue records");
	u32 = 0x10;
	expect_refused(st, len, OFF_CSTS, &u32, 4, 0, "no write sets");
	u32 = 5;
	expect_refused(st, len, OFF_NAER, &u32, 4, 0, "async event requests");
	u64 = DBS_GPA + 8;
	expect_refused(st, len, OFF_DBS, &u64, 8, 0, "shadow doorbell");
	u64 = RAM_SIZE;
	expect_refused(st, len, OFF_DBS, &u64, 8, 0, "shadow doorbell");
	u32 = 0x20002;
	expect_refused(st, len, OFF_IVC + 4, &u32, 4, 0, "interrupt vector configuration");
	/* queues: size against CAP.MQES, indices against size, rings against RAM, links */
	u32 = 65;
	expect_refused(st, len, sq1 + 8, &u32, 4, 0, "size 65");
	u32 = IOQ_SIZE;
	expect_refused(st, len, sq1 + 12, &u32, 4, 0, "head 8");
	expect_refused(st, len, cq1 + 16, &u32, 4, 0, "tail 8");
	u64 = RAM_SIZE;
	expect_refused(st, len, sq1 + 24, &u64, 8, 0, "neither guest RAM");
	expect_refused(st, len, cq1 + 24, &u64, 8, 0, "not guest RAM");
	u64 = IOSQ_GPA + 64;
	expect_refused(st, len, sq1 + 24, &u64, 8, 0, "not page aligned");
	u16 = NVEC;
	expect_refused(st, len, cq1 + 4, &u16, 2, 0, "on vector 4");
	u16 = 3;
	expect_refused(st, len, sq1 + 4, &u16, 2, 0, "which does not exist");
	u16 = 9;
	expect_refused(st, len, sq1, &u16, 2, 0, "out of range");
	u16 = 0;
	expect_refused(st, len, sq1, &u16, 2, 0, "twice");
	/* the AQA the admin queue does not match */
	u32 = 4;
	expect_refused(st, len, find_rec(st, nrec, 0, 1) + 8, &u32, 4, 0, "AQA says");

	/* random corruption never crashes, and what passes still runs */
	srand(7);
	for (unsigned n = 0; n < 3000; n++) {
		uint8_t *b = malloc(len);
		struct nvme_ctrl *k = make_ctrl(), *keep = ctrl;
		char err[256];

		memcpy(b, st, len);
		for (unsigned f = 0; f < 1 + (unsigned)rand() % 3; f++)
			b[(size_t)rand() % len] ^= (uint8_t)(1u << (rand() % 8));
		if (!nvme_ctrl_restore(k, b, len, err, sizeof(err))) {
			ctrl = k;
			nvme_ctrl_resume(k);
			sq_db(1, (uint32_t)rand() % IOQ_SIZE);
			cq_db(1, (uint32_t)rand() % IOQ_SIZE);
			sq_db(0, (uint32_t)rand() % AQ_SIZE);
			ctrl = keep;
		}
		nvme_ctrl_destroy(k);
		free(b);
	}
	free(st);
	nvme_ctrl_resume(ctrl);
}
END_TEST

static Suite *nvme_snapshot_suite(void)
{
	Suite *s = suite_create("nvme_snapshot");
	TCase *t = tcase_create("core");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_round_trip);
	tcase_add_test(t, test_shadow_doorbells);
	tcase_add_test(t, test_other_config);
	tcase_add_test(t, test_pause_drains);
	tcase_add_test(t, test_refusals);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return testutil_run_suite(nvme_snapshot_suite());
}
