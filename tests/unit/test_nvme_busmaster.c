/* The vNVMe controller and PCI bus mastering: with the command register's bus-master bit clear
 * a rung doorbell fetches no command, writes no data and posts no completion; once the bit is
 * set the next doorbell serves what was queued. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "nvme-lightiov/nvme_ctrl.h"
#include "testutil.h"

#define RAM_SIZE (1u << 20)
#define ASQ_GPA	 0x10000
#define ACQ_GPA	 0x20000
#define BUF_GPA	 0x30000
#define AQ_SIZE	 8

static uint8_t *ram;
static struct guest_mem gm;
static struct nvme_mem_backend disk;
static struct nvme_ctrl *ctrl;
static bool master;
static unsigned asked, irqs;

static bool on_bus_master(void *opaque)
{
	asked++;
	return master;
}

static void on_irq(void *opaque, unsigned vector)
{
	irqs++;
}

static void w32(uint64_t off, uint32_t v)
{
	nvme_ctrl_bar0_write(ctrl, off, &v, 4);
}

static void w64(uint64_t off, uint64_t v)
{
	nvme_ctrl_bar0_write(ctrl, off, &v, 8);
}

static void setup(void)
{
	struct nvme_ctrl_params p = {
	    .mqes = 63, .max_ioqs = 1, .nvectors = 1, .size = 1 << 20, .serial = "BUSMASTER1"};
	struct nvme_ctrl_hooks h = {.irq = on_irq, .bus_master = on_bus_master};
	char err[128];

	ram = calloc(1, RAM_SIZE);
	disk.data = calloc(1, 1 << 20);
	disk.size = 1 << 20;
	gmem_init_buffer(&gm, ram, RAM_SIZE);
	master = false;
	asked = irqs = 0;
	ck_assert_int_eq(
	    nvme_ctrl_create(&p, &gm, &nvme_mem_backend_ops, &disk, &h, &ctrl, err, sizeof(err)),
	    0);
	w32(NVME_REG_AQA, (AQ_SIZE - 1) << 16 | (AQ_SIZE - 1));
	w64(NVME_REG_ASQ, ASQ_GPA);
	w64(NVME_REG_ACQ, ACQ_GPA);
	w32(NVME_REG_CC, NVME_CC_EN | 6 << 16 | 4 << 20);
}

static void teardown(void)
{
	nvme_ctrl_destroy(ctrl);
	free(disk.data);
	free(ram);
}

static void queue_identify(unsigned slot)
{
	struct nvme_sqe c;

	memset(&c, 0, sizeof(c));
	c.opcode = NVME_ADMIN_IDENTIFY;
	c.cid = (uint16_t)(7 + slot);
	c.prp1 = BUF_GPA;
	c.cdw10 = 1; /* the controller's structure */
	memcpy(ram + ASQ_GPA + slot * 64, &c, 64);
}

static bool buffer_touched(void)
{
	for (unsigned i = 0; i < 4096; i++)
		if (ram[BUF_GPA + i])
			return true;
	return false;
}

START_TEST(test_no_dma_without_bus_master)
{
	struct nvme_cqe *e = (struct nvme_cqe *)(ram + ACQ_GPA);
	uint32_t csts = 0;

	nvme_ctrl_bar0_read(ctrl, NVME_REG_CSTS, &csts, 4);
	ck_assert_uint_eq(csts & NVME_CSTS_RDY, NVME_CSTS_RDY);
	queue_identify(0);
	w32(0x1000, 1);
	nvme_ctrl_process(ctrl);
	ck_assert_uint_gt(asked, 0);
	ck_assert_uint_eq(e->status & 1, 0); /* no completion posted */
	ck_assert(!buffer_touched());	     /* no data written */
	ck_assert_uint_eq(irqs, 0);

	/* the driver sets the bit and rings again: the queued command is served */
	master = true;
	w32(0x1000, 1);
	nvme_ctrl_process(ctrl);
	ck_assert_uint_eq(e->status & 1, 1);
	ck_assert_uint_eq(e->status >> 1 & 0x7ff, 0);
	ck_assert_uint_eq(e->cid, 7);
	ck_assert(buffer_touched());
}
END_TEST

/* Cleared again mid-life: the next command waits the same way. */
START_TEST(test_cleared_again)
{
	struct nvme_cqe *e = (struct nvme_cqe *)(ram + ACQ_GPA);

	master = true;
	queue_identify(0);
	w32(0x1000, 1);
	nvme_ctrl_process(ctrl);
	ck_assert_uint_eq(e[0].status & 1, 1);
	master = false;
	memset(ram + BUF_GPA, 0, 4096);
	queue_identify(1);
	w32(0x1000, 2);
	nvme_ctrl_process(ctrl);
	ck_assert_uint_eq(e[1].status & 1, 0);
	ck_assert(!buffer_touched());
}
END_TEST

int main(void)
{
	Suite *s = suite_create("nvme_busmaster");
	TCase *tc = tcase_create("busmaster");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_no_dma_without_bus_master);
	tcase_add_test(tc, test_cleared_again);
	suite_add_tcase(s, tc);
	return testutil_run_suite(s);
}
