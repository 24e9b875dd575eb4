/* vNVMe conformance details: over the file backend, the volatile write cache switched off makes
 * every write durable before it completes; Identify, SMART, Keep Alive and error-log answers;
 * over a buffer, the CMB described the NVMe 1.4 way and the VWC hook of the SSD backends. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nvmerig.h"
#include "testutil.h"

static uint16_t write_at(uint16_t cid, uint64_t slba, bool fua)
{
	struct nvme_sqe c = rig_mk(NVME_CMD_WRITE, cid, 1);

	c.cdw10 = (uint32_t)slba;
	c.cdw11 = (uint32_t)(slba >> 32);
	c.cdw12 = (fua ? NVME_RW_FUA : 0) | 0; /* one block */
	c.prp1 = DATA_GPA;
	return rig_cmd(1, &c);
}

static uint16_t set_vwc(uint32_t on)
{
	struct nvme_sqe c = rig_mk(NVME_ADMIN_SET_FEATURES, 20, 0);

	c.cdw10 = NVME_FEAT_VOLATILE_WC;
	c.cdw11 = on;
	return rig_cmd(0, &c);
}

START_TEST(test_vwc_off_means_durable)
{
	uint64_t dw, syncs;
	struct nvme_sqe c;

	rig_start(1 << 20, false);
	rig_bring_up();
	memset(rig.ram + DATA_GPA, 0x5a, 4096);
	/* Cache on: a plain write is not forced out, a FUA write is. */
	ck_assert_uint_eq(write_at(30, 0, false), 0);
	nvme_file_durability(rig.nf, &dw, &syncs);
	ck_assert_uint_eq(dw, 0);
	ck_assert_uint_eq(write_at(31, 1, true), 0);
	nvme_file_durability(rig.nf, &dw, &syncs);
	ck_assert_uint_eq(dw, 1);
	/* Cache off, read back as off: every write and zeroing is durable before completion. */
	ck_assert_uint_eq(set_vwc(0), 0);
	c = rig_mk(NVME_ADMIN_GET_FEATURES, 21, 0);
	c.cdw10 = NVME_FEAT_VOLATILE_WC;
	ck_assert_uint_eq(rig_cmd(0, &c), 0);
	ck_assert_uint_eq(
	    ((struct nvme_cqe *)(rig.ram + ACQ_GPA))[rig.heads[0] ? rig.heads[0] - 1 : QS - 1].dw0,
	    0);
	ck_assert_uint_eq(write_at(32, 2, false), 0);
	ck_assert_uint_eq(write_at(33, 3, false), 0);
	nvme_file_durability(rig.nf, &dw, &syncs);
	ck_assert_uint_eq(dw, 3);
	c = rig_mk(NVME_CMD_WRITE_ZEROES, 34, 1);
	c.cdw10 = 8;
	ck_assert_uint_eq(rig_cmd(1, &c), 0);
	nvme_file_durability(rig.nf, &dw, &syncs);
	ck_assert_uint_eq(syncs, 1);
	/* Back on: plain writes may sit in the cache again. */
	ck_assert_uint_eq(set_vwc(1), 0);
	ck_assert_uint_eq(write_at(35, 4, false), 0);
	nvme_file_durability(rig.nf, &dw, &syncs);
	ck_assert_uint_eq(dw, 3);
	rig_stop();
}
END_TEST

START_TEST(test_identify_smart_keepalive)
{
	struct nvme_id_ctrl *id = (struct nvme_id_ctrl *)(rig.ram + DATA_GPA);
	struct nvme_sqe c;

	rig_start(1 << 20, false);
	rig_bring_up();
	c = rig_mk(NVME_ADMIN_IDENTIFY, 40, 0);
	c.cdw10 = NVME_ID_CNS_CTRL;
	c.prp1 = DATA_GPA;
	ck_assert_uint_eq(rig_cmd(0, &c), 0);
	ck_assert_uint_ne(id->oncs & NVME_CTRL_ONCS_FEAT_SAVE, 0);
	ck_assert_ptr_null(memchr(id->subnqn, ' ', strnlen(id->subnqn, sizeof(id->subnqn))));
	ck_assert_str_eq(id->subnqn, "nqn.2026-11.io.lvmm:nvme:SN42");
	ck_assert_uint_eq(id->kas, 0);
	/* Identify Namespace for every namespace: only with Namespace Management */
	c = rig_mk(NVME_ADMIN_IDENTIFY, 41, 0xffffffffu);
	c.cdw10 = NVME_ID_CNS_NS;
	c.prp1 = DATA_GPA;
	ck_assert_uint_eq(rig_cmd(0, &c) & 0x7ff, NVME_SC_INVALID_NS);
	/* SMART is controller-wide (LPA bit 0 clear): namespace 1 is an invalid field */
	c = rig_mk(NVME_ADMIN_GET_LOG_PAGE, 42, 1);
	c.cdw10 = (128 - 1) << 16 | NVME_LOG_SMART;
	c.prp1 = DATA_GPA;
	ck_assert_uint_eq(rig_cmd(0, &c) & 0x7ff, NVME_SC_INVALID_FIELD);
	c.nsid = 0xffffffffu;
	c.cid = 43;
	ck_assert_uint_eq(rig_cmd(0, &c), 0);
	c = rig_mk(NVME_ADMIN_KEEP_ALIVE, 44, 0);
	ck_assert_uint_eq(rig_cmd(0, &c) & 0x7ff, NVME_SC_INVALID_OPCODE);
	rig_stop();
}
END_TEST

START_TEST(test_error_log_names_lba_and_nsid)
{
	struct nvme_error_log *e = (struct nvme_error_log *)(rig.ram + DATA_GPA);
	uint64_t slba = (1 << 20) / 512 + 5; /* past the end */
	struct nvme_sqe c;

	rig_start(1 << 20, false);
	rig_bring_up();
	ck_assert_uint_eq(write_at(50, slba, false) & 0x7ff, NVME_SC_LBA_RANGE);
	c = rig_mk(NVME_ADMIN_GET_LOG_PAGE, 51, 0);
	c.cdw10 = (64 / 4 - 1) << 16 | NVME_LOG_ERROR;
	c.prp1 = DATA_GPA;
	ck_assert_uint_eq(rig_cmd(0, &c), 0);
	ck_assert_uint_eq(e->cmdid, 50);
	ck_assert_uint_eq(e->sqid, 1);
	ck_assert_uint_eq(e->status_field >> 1 & 0xff, NVME_SC_LBA_RANGE);
	ck_assert_uint_eq(e->nsid, 1);
	ck_assert_uint_eq(e->lba, slba);
	rig_stop();
}
END_TEST

/* ---- a controller over a buffer: the CMB registers and the VWC hook ---- */

#define CMB_GPA	  0x8000000000ULL
#define CMB_SIZE  (64u << 10)
#define IOCQ2_GPA 0x50000

static struct nvme_mem_backend mem;
static uint8_t disk[64 << 10];
static unsigned vwc_calls;
static bool vwc_last;
static uint16_t vwc_answer;

static uint16_t on_vwc(void *opaque, bool on)
{
	(void)opaque;
	vwc_calls++;
	vwc_last = on;
	return vwc_answer;
}

/* Commands run inline on the doorbell write (no kick hook). */
static void start_mem(uint64_t cmb_size, bool vwc_hook)
{
	struct nvme_ctrl_params p = {
	    .max_ioqs = 2, .nvectors = 3, .cmb_size = cmb_size, .cmb_bir = 2, .size = sizeof(disk)};
	struct nvme_ctrl_hooks h = {.vwc = vwc_hook ? on_vwc : NULL};
	char err[256];

	mem = (struct nvme_mem_backend){.data = disk, .size = sizeof(disk)};
	vwc_calls = 0;
	vwc_answer = 0;
	snprintf(p.serial, sizeof(p.serial), "MEM1");
	ck_assert_int_eq(nvme_ctrl_create(&p, &rig.gm, &nvme_mem_backend_ops, &mem, &h, &rig.ctrl,
					  err, sizeof(err)),
			 0);
}

static uint32_t r32(uint64_t off)
{
	uint32_t v = 0;

	nvme_ctrl_bar0_read(rig.ctrl, off, &v, 4);
	return v;
}

static uint16_t create_sq2(uint64_t base)
{
	struct nvme_sqe c = rig_mk(NVME_ADMIN_CREATE_SQ, 60, 0);

	c.prp1 = base;
	c.cdw10 = (QS - 1) << 16 | 2;
	c.cdw11 = 2 << 16 | 1;
	return rig_cmd(0, &c);
}

START_TEST(test_cmb_nvme14)
{
	struct nvme_cqe *e = (struct nvme_cqe *)(rig.ram + IOCQ2_GPA);
	uint64_t cap, size;
	struct nvme_sqe c;
	uint8_t *cmb;

	start_mem(CMB_SIZE, false);
	cap = r32(NVME_REG_CAP) | (uint64_t)r32(NVME_REG_CAP + 4) << 32;
	ck_assert(cap & NVME_CAP_CMBS);
	/* hidden until the host asks for them (CMBMSC.CRE) */
	ck_assert_uint_eq(r32(NVME_REG_CMBLOC), 0);
	ck_assert_uint_eq(r32(NVME_REG_CMBSZ), 0);
	ck_assert_uint_eq(r32(NVME_REG_CMBMSC), 0);
	ck_assert_uint_eq(r32(NVME_REG_CMBSTS), 0);
	rig_w32(NVME_REG_CMBMSC, NVME_CMBMSC_CRE | 0xffc); /* reserved bits stay clear */
	ck_assert_uint_eq(r32(NVME_REG_CMBMSC), NVME_CMBMSC_CRE);
	ck_assert_uint_eq(r32(NVME_REG_CMBLOC), 2);
	ck_assert_uint_eq(r32(NVME_REG_CMBSZ), NVME_CMBSZ_SQS | (CMB_SIZE >> 12) << 12);
	nvme_ctrl_set_cmb_gpa(rig.ctrl, CMB_GPA);
	rig_bring_up();
	c = rig_mk(NVME_ADMIN_CREATE_CQ, 61, 0);
	c.prp1 = IOCQ2_GPA;
	c.cdw10 = (QS - 1) << 16 | 2;
	c.cdw11 = 2 << 16 | 1;
	ck_assert_uint_eq(rig_cmd(0, &c), 0);
	/* the BAR decodes, but the controller memory space is off: not a queue address */
	ck_assert_uint_eq(create_sq2(CMB_GPA) & 0x7ff, NVME_SC_INVALID_FIELD);
	/* Linux's order: the high half first, then CRE | CMSE | the low half of the base */
	rig_w32(NVME_REG_CMBMSC + 4, (uint32_t)(CMB_GPA >> 32));
	ck_assert_uint_eq(r32(NVME_REG_CMBSTS), 0);
	rig_w32(NVME_REG_CMBMSC, NVME_CMBMSC_CRE | NVME_CMBMSC_CMSE | (uint32_t)CMB_GPA);
	ck_assert_uint_eq(r32(NVME_REG_CMBSTS), 0);
	ck_assert_uint_eq(r32(NVME_REG_CMBMSC + 4), CMB_GPA >> 32);
	ck_assert_uint_eq(create_sq2(CMB_GPA), 0);
	/* a command written into the CMB runs and completes on CQ 2 */
	cmb = nvme_ctrl_cmb(rig.ctrl, &size);
	ck_assert_uint_eq(size, CMB_SIZE);
	c = rig_mk(NVME_CMD_FLUSH, 62, 1);
	memcpy(cmb, &c, sizeof(c));
	rig_w32(0x1000 + 8 * 2, 1);
	ck_assert_uint_eq(e[0].status & 1, 1);
	ck_assert_uint_eq(e[0].cid, 62);
	ck_assert_uint_eq(e[0].status >> 1, 0);
	ck_assert_uint_eq(e[0].sq_id, 2);
	/* a base other than the BAR's: Controller Base Address Invalid, no CMB queues */
	c = rig_mk(NVME_ADMIN_DELETE_SQ, 63, 0);
	c.cdw10 = 2;
	ck_assert_uint_eq(rig_cmd(0, &c), 0);
	rig_w64(NVME_REG_CMBMSC, NVME_CMBMSC_CRE | NVME_CMBMSC_CMSE | (CMB_GPA + 0x200000));
	ck_assert_uint_eq(r32(NVME_REG_CMBSTS), NVME_CMBSTS_CBAI);
	ck_assert_uint_eq(create_sq2(CMB_GPA) & 0x7ff, NVME_SC_INVALID_FIELD);
	ck_assert_uint_eq(create_sq2(CMB_GPA + 0x200000) & 0x7ff, NVME_SC_INVALID_FIELD);
	rig_w64(NVME_REG_CMBMSC, NVME_CMBMSC_CRE | NVME_CMBMSC_CMSE | CMB_GPA);
	ck_assert_uint_eq(r32(NVME_REG_CMBSTS), 0);
	/* the BAR moves away from the base: invalid again until the host says where */
	nvme_ctrl_set_cmb_gpa(rig.ctrl, CMB_GPA + 0x400000);
	ck_assert_uint_eq(r32(NVME_REG_CMBSTS), NVME_CMBSTS_CBAI);
	nvme_ctrl_set_cmb_gpa(rig.ctrl, CMB_GPA);
	ck_assert_uint_eq(r32(NVME_REG_CMBSTS), 0);
	/* a controller reset keeps it (Linux writes CMBMSC once, at probe) */
	rig_w32(NVME_REG_CC, 0);
	ck_assert_uint_eq(r32(NVME_REG_CMBMSC),
			  NVME_CMBMSC_CRE | NVME_CMBMSC_CMSE | (uint32_t)CMB_GPA);
	ck_assert_uint_eq(r32(NVME_REG_CMBSZ), NVME_CMBSZ_SQS | (CMB_SIZE >> 12) << 12);
	/* CRE off hides CMBLOC and CMBSZ again */
	rig_w64(NVME_REG_CMBMSC, 0);
	ck_assert_uint_eq(r32(NVME_REG_CMBLOC), 0);
	ck_assert_uint_eq(r32(NVME_REG_CMBSZ), 0);
	nvme_ctrl_destroy(rig.ctrl);
	rig.ctrl = NULL;
}
END_TEST

/* Without a CMB: CAP.CMBS clear, CMBMSC reserved (reads zero whatever is written). */
START_TEST(test_no_cmb_nvme14)
{
	start_mem(0, false);
	ck_assert_uint_eq(r32(NVME_REG_CAP + 4) & (uint32_t)(NVME_CAP_CMBS >> 32), 0);
	rig_w64(NVME_REG_CMBMSC, NVME_CMBMSC_CRE | NVME_CMBMSC_CMSE | CMB_GPA);
	ck_assert_uint_eq(r32(NVME_REG_CMBMSC), 0);
	ck_assert_uint_eq(r32(NVME_REG_CMBSZ), 0);
	ck_assert_uint_eq(r32(NVME_REG_CMBLOC), 0);
	ck_assert_uint_eq(r32(NVME_REG_CMBSTS), 0);
	nvme_ctrl_destroy(rig.ctrl);
	rig.ctrl = NULL;
}
END_TEST

static uint32_t get_vwc(void)
{
	struct nvme_sqe c = rig_mk(NVME_ADMIN_GET_FEATURES, 22, 0);

	c.cdw10 = NVME_FEAT_VOLATILE_WC;
	ck_assert_uint_eq(rig_cmd(0, &c), 0);
	return ((struct nvme_cqe *)(rig.ram + ACQ_GPA))[rig.heads[0] ? rig.heads[0] - 1 : QS - 1]
	    .dw0;
}

/* The SSD backends learn of every change of the volatile write cache, and only of changes; a
 * backend that cannot follow fails the Set Features and the feature keeps its value. */
START_TEST(test_vwc_hook)
{
	start_mem(0, true);
	ck_assert_uint_eq(vwc_calls, 0); /* created caching: nothing to say */
	rig_bring_up();
	ck_assert_uint_eq(set_vwc(1), 0);
	ck_assert_uint_eq(vwc_calls, 0);
	ck_assert_uint_eq(set_vwc(0), 0);
	ck_assert_uint_eq(vwc_calls, 1);
	ck_assert(!vwc_last);
	ck_assert_uint_eq(get_vwc(), 0);
	ck_assert_uint_eq(set_vwc(0), 0);
	ck_assert_uint_eq(vwc_calls, 1);
	vwc_answer = NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_INTERNAL);
	ck_assert_uint_eq(set_vwc(1) & 0x7ff, NVME_SC_INTERNAL);
	ck_assert_uint_eq(vwc_calls, 2);
	ck_assert_uint_eq(get_vwc(), 0);
	vwc_answer = 0;
	/* a controller reset brings the cache back, and tells the backend */
	rig_w32(NVME_REG_CC, 0);
	ck_assert_uint_eq(vwc_calls, 3);
	ck_assert(vwc_last);
	rig.tails[0] = rig.heads[0] = 0;
	rig.phases[0] = 1;
	memset(rig.ram + ACQ_GPA, 0, 4096);
	memset(rig.ram + IOCQ_GPA, 0, 4096);
	rig_bring_up();
	ck_assert_uint_eq(get_vwc(), 1);
	ck_assert_uint_eq(vwc_calls, 3);
	nvme_ctrl_destroy(rig.ctrl);
	rig.ctrl = NULL;
}
END_TEST

int main(void)
{
	Suite *s = suite_create("nvme_conform");
	TCase *tc = tcase_create("file");

	tcase_add_checked_fixture(tc, rig_setup, rig_teardown);
	tcase_add_test(tc, test_vwc_off_means_durable);
	tcase_add_test(tc, test_identify_smart_keepalive);
	tcase_add_test(tc, test_error_log_names_lba_and_nsid);
	tcase_add_test(tc, test_cmb_nvme14);
	tcase_add_test(tc, test_no_cmb_nvme14);
	tcase_add_test(tc, test_vwc_hook);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	return testutil_run_suite(s);
}
