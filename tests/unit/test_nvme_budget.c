/* The vNVMe queue loop's work budget: a guest that keeps moving its shadow SQ tail while the
 * controller runs cannot hold the I/O thread in one wake-up; the thread is kicked to come back. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "nvme-lightiov/nvme_ctrl.h"
#include "testutil.h"

#define RAM_SIZE (4u << 20)
#define ASQ_GPA	 0x10000
#define ACQ_GPA	 0x20000
#define IOCQ_GPA 0x30000
#define IOSQ_GPA 0x40000
#define DBS_GPA	 0x50000
#define EIS_GPA	 0x51000
#define AQ_SIZE	 16
#define IOQ_SIZE 64
#define STRIDE	 4u /* dstrd 0 */

static uint8_t *ram;
static struct guest_mem gm;
static struct nvme_mem_backend disk;
static struct nvme_ctrl *ctrl;
static unsigned kicks, submits, asq_tail;
static uint32_t *dbs;
static bool flood;

static void on_kick(void *opaque)
{
	kicks++;
}

static void put_flush(unsigned slot, uint16_t cid)
{
	struct nvme_sqe c;

	memset(&c, 0, sizeof(c));
	c.opcode = NVME_CMD_FLUSH;
	c.cid = cid;
	c.nsid = 1;
	memcpy(ram + IOSQ_GPA + slot * 64, &c, 64);
}

/* The backend doubles as the guest on another CPU: every command it sees is answered by one more
 * in the SQ and by consuming every completion so far, so the queue never runs dry. */
static int flood_submit(void *be, struct nvme_io_req *req)
{
	if (flood && submits < 100000) {
		unsigned tail = (submits + 2) % IOQ_SIZE;

		put_flush((submits + 1) % IOQ_SIZE, (uint16_t)submits);
		__atomic_store_n(&dbs[2 * 1 * STRIDE / 4], tail, __ATOMIC_RELEASE);
		__atomic_store_n(&dbs[(2 * 1 + 1) * STRIDE / 4], submits % IOQ_SIZE,
				 __ATOMIC_RELEASE);
		submits++;
	}
	return nvme_mem_backend_ops.submit(be, req);
}

static const struct nvme_backend_ops flood_ops = {.submit = flood_submit};

static void w32(uint64_t off, uint32_t v)
{
	nvme_ctrl_bar0_write(ctrl, off, &v, 4);
}

static void w64(uint64_t off, uint64_t v)
{
	nvme_ctrl_bar0_write(ctrl, off, &v, 8);
}

/* With a kick hook a doorbell only wakes the I/O thread: the test is that thread. */
static uint16_t admin(uint8_t op, uint32_t cdw10, uint32_t cdw11, uint64_t prp1, uint64_t prp2)
{
	struct nvme_sqe c;
	struct nvme_cqe *e = (struct nvme_cqe *)(ram + ACQ_GPA) + asq_tail;

	memset(&c, 0, sizeof(c));
	c.opcode = op;
	c.cid = (uint16_t)(100 + asq_tail);
	c.cdw10 = cdw10;
	c.cdw11 = cdw11;
	c.prp1 = prp1;
	c.prp2 = prp2;
	memcpy(ram + ASQ_GPA + asq_tail * 64, &c, 64);
	asq_tail++;
	w32(0x1000, asq_tail);
	nvme_ctrl_process(ctrl);
	ck_assert_uint_eq(e->status & 1, 1);
	w32(0x1000 + STRIDE, asq_tail);
	return e->status >> 1 & 0x7ff;
}

static void setup(void)
{
	struct nvme_ctrl_params p = {.mqes = IOQ_SIZE - 1,
				     .max_ioqs = 2,
				     .nvectors = 2,
				     .size = 1 << 20,
				     .serial = "BUDGET01"};
	struct nvme_ctrl_hooks h = {.kick = on_kick};
	char err[128];

	ram = calloc(1, RAM_SIZE);
	disk.data = calloc(1, 1 << 20);
	disk.size = 1 << 20;
	gmem_init_buffer(&gm, ram, RAM_SIZE);
	kicks = submits = asq_tail = 0;
	flood = false;
	dbs = (uint32_t *)(ram + DBS_GPA);
	ck_assert_int_eq(nvme_ctrl_create(&p, &gm, &flood_ops, &disk, &h, &ctrl, err, sizeof(err)),
			 0);
	w32(NVME_REG_AQA, (AQ_SIZE - 1) << 16 | (AQ_SIZE - 1));
	w64(NVME_REG_ASQ, ASQ_GPA);
	w64(NVME_REG_ACQ, ACQ_GPA);
	w32(NVME_REG_CC, NVME_CC_EN | 6 << 16 | 4 << 20);
	ck_assert_uint_eq(admin(NVME_ADMIN_SET_FEATURES, NVME_FEAT_NUM_QUEUES, 0, 0, 0), 0);
	ck_assert_uint_eq(admin(NVME_ADMIN_CREATE_CQ, (IOQ_SIZE - 1) << 16 | 1, 1, IOCQ_GPA, 0), 0);
	ck_assert_uint_eq(
	    admin(NVME_ADMIN_CREATE_SQ, (IOQ_SIZE - 1) << 16 | 1, 1 << 16 | 1, IOSQ_GPA, 0), 0);
	ck_assert_uint_eq(admin(NVME_ADMIN_DBBUF, 0, 0, DBS_GPA, EIS_GPA), 0);
}

static void teardown(void)
{
	nvme_ctrl_destroy(ctrl);
	free(ram);
	free(disk.data);
}

START_TEST(test_shadow_flood_is_budgeted)
{
	struct nvme_ctrl_stats st;
	unsigned k0 = kicks;

	flood = true;
	put_flush(0, 9999);
	__atomic_store_n(&dbs[2 * 1 * STRIDE / 4], 1, __ATOMIC_RELEASE);
	/* Without a budget this call would run all 100000 commands (or, with an endless guest,
	 * never return). */
	nvme_ctrl_process(ctrl);
	ck_assert_uint_ge(submits, 1000);
	ck_assert_uint_lt(submits, 4096);
	ck_assert_uint_eq(kicks, k0 + 1);
	/* The kick brings the thread back: the queue keeps moving, one budget per wake-up. */
	nvme_ctrl_process(ctrl);
	ck_assert_uint_ge(submits, 2000);
	ck_assert_uint_lt(submits, 8192);
	ck_assert_uint_eq(kicks, k0 + 2);
	nvme_ctrl_get_stats(ctrl, &st);
	ck_assert_uint_eq(st.flushes, submits);
}
END_TEST

static Suite *budget_suite(void)
{
	Suite *s = suite_create("nvme_budget");
	TCase *t = tcase_create("shadow");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, test_shadow_flood_is_budgeted);
	tcase_set_timeout(t, 30);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return testutil_run_suite(budget_suite());
}
