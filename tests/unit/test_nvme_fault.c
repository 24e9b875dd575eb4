/* The vNVMe's test-only fault switch, LVMM_FAULT_NVME=SERIAL:KIND[@N][+KIND[@N]] (issue 29, item
 * 7; the Linux frontend test drives lightiov_nvme.ko against it): what parses, what is refused,
 * that only the named controller misbehaves, and CMBSZ claiming twice the CMB. No KVM. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvme-lightiov/nvme_ctrl.h"
#include "testutil.h"

#define CMB_SIZE (64u << 10)

START_TEST(test_parse_ok)
{
	struct nvme_fault f;

	ck_assert_int_eq(nvme_fault_parse(NULL, "S", &f), 0);
	ck_assert(!f.on);
	ck_assert_int_eq(nvme_fault_parse("", "S", &f), 0);
	ck_assert(!f.on);
	ck_assert_int_eq(nvme_fault_parse("S:dup-cqe", "S", &f), 0);
	ck_assert(f.on && f.dup_every == 1 && !f.cmb_oversize);
	ck_assert_int_eq(nvme_fault_parse("S:dup-cqe@3+cmb-oversize", "S", &f), 0);
	ck_assert(f.on && f.dup_every == 3 && f.cmb_oversize);
	ck_assert_int_eq(nvme_fault_parse("S:cmb-oversize+dup-cqe@1000000", "S", &f), 0);
	ck_assert(f.on && f.dup_every == 1000000 && f.cmb_oversize);
	/* well formed, another controller's: nothing for this one */
	ck_assert_int_eq(nvme_fault_parse("T:dup-cqe@2", "S", &f), 0);
	ck_assert(!f.on && !f.dup_every && !f.cmb_oversize);
	ck_assert_int_eq(nvme_fault_parse("SS:dup-cqe", "S", &f), 0);
	ck_assert(!f.on);
	ck_assert_int_eq(nvme_fault_parse("S:dup-cqe", "SS", &f), 0);
	ck_assert(!f.on);
}
END_TEST

START_TEST(test_parse_refused)
{
	static const char *const bad[] = {
	    "dup-cqe",
	    ":dup-cqe",
	    "S:",
	    "S:dup",
	    "S:dup-cqe@",
	    "S:dup-cqe@0",
	    "S:dup-cqe@-1",
	    "S:dup-cqe@1000001",
	    "S:dup-cqe@3x",
	    "S:dup-cqe@99999999999999999999",
	    "S:cmb-oversize@2",
	    "S:dup-cqe+",
	    "S:+dup-cqe",
	    "S:dup-cqe,cmb-oversize",
	    "S:dup-cqeX",
	};
	struct nvme_fault f;
	unsigned i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(nvme_fault_parse(bad[i], "S", &f) == -EINVAL, "%s accepted", bad[i]);
		ck_assert_msg(nvme_fault_parse(bad[i], "T", &f) == -EINVAL, "%s accepted", bad[i]);
	}
}
END_TEST

static int make(const char *serial, struct nvme_ctrl **c, char *err, unsigned errlen)
{
	static uint8_t ram[1 << 16];
	static struct guest_mem gm;
	struct nvme_ctrl_params p = {.mqes = 63,
				     .max_ioqs = 1,
				     .nvectors = 2,
				     .cmb_size = CMB_SIZE,
				     .cmb_bir = 2,
				     .size = 1 << 20};

	snprintf(p.serial, sizeof(p.serial), "%s", serial);
	gmem_init_buffer(&gm, ram, sizeof(ram));
	return nvme_ctrl_create(&p, &gm, &nvme_mem_backend_ops, NULL, NULL, c, err, errlen);
}

static uint32_t r32(struct nvme_ctrl *c, uint64_t off)
{
	uint32_t v;

	nvme_ctrl_bar0_read(c, off, &v, 4);
	return v;
}

static uint64_t cmb_bytes(struct nvme_ctrl *c)
{
	uint32_t cre = NVME_CMBMSC_CRE, sz;

	nvme_ctrl_bar0_write(c, NVME_REG_CMBMSC, &cre, 4);
	sz = r32(c, NVME_REG_CMBSZ);
	ck_assert(sz & NVME_CMBSZ_SQS);
	return (uint64_t)(sz >> NVME_CMBSZ_SZ_SHIFT) << 12; /* SZU 0: 4 KiB units */
}

START_TEST(test_ctrl)
{
	struct nvme_ctrl *a, *b;
	uint64_t lbas, size;
	char err[128];

	unsetenv("LVMM_FAULT_NVME");
	ck_assert_int_eq(make("A", &a, err, sizeof(err)), 0);
	ck_assert(!nvme_ctrl_fault_frontend(a, &lbas));
	ck_assert_uint_eq(cmb_bytes(a), CMB_SIZE);
	nvme_ctrl_destroy(a);

	setenv("LVMM_FAULT_NVME", "B:cmb-oversize+dup-cqe@2", 1);
	ck_assert_int_eq(make("A", &a, err, sizeof(err)), 0);
	ck_assert_int_eq(make("B", &b, err, sizeof(err)), 0);
	ck_assert(!nvme_ctrl_fault_frontend(a, &lbas));
	ck_assert_uint_eq(cmb_bytes(a), CMB_SIZE);
	ck_assert(nvme_ctrl_fault_frontend(b, &lbas));
	ck_assert_uint_eq(lbas, (1 << 20) >> 9);
	ck_assert_uint_eq(cmb_bytes(b), 2 * CMB_SIZE);
	/* the BAR itself keeps its size: only the register lies */
	ck_assert_ptr_nonnull(nvme_ctrl_cmb(b, &size));
	ck_assert_uint_eq(size, CMB_SIZE);
	nvme_ctrl_destroy(a);
	nvme_ctrl_destroy(b);

	setenv("LVMM_FAULT_NVME", "B:bogus", 1);
	ck_assert_int_eq(make("A", &a, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "LVMM_FAULT_NVME=B:bogus not understood"), "%s", err);
	unsetenv("LVMM_FAULT_NVME");
}
END_TEST

static Suite *nvme_fault_suite(void)
{
	Suite *s = suite_create("nvme_fault");
	TCase *t = tcase_create("fault");

	tcase_add_test(t, test_parse_ok);
	tcase_add_test(t, test_parse_refused);
	tcase_add_test(t, test_ctrl);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return testutil_run_suite(nvme_fault_suite());
}
