/* The softssd starter an API VMM forks before its seccomp filter: what it refuses to start for
 * the confined process (names that are no plain file name, sizes no file system holds), and that
 * it keeps answering after a refusal. Nothing is started here (that would exec this binary). */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvme-lightiov/ssd_autostart.h"
#include "testutil.h"

START_TEST(test_helper_refusals)
{
	struct vnvme_config vc;
	char err[320];

	setenv("LVMM_RUN_DIR", "/proc/lvmm-none", 1);
	setenv("LVMM_STATE_DIR", "/proc/lvmm-none", 1);
	ck_assert_int_eq(ssd_autostart_helper(err, sizeof(err)), 0);
	memset(&vc, 0, sizeof(vc));
	snprintf(vc.ssd, sizeof(vc.ssd), "-x");
	vc.size = 1 << 20;
	ck_assert_int_eq(ssd_autostart_vnvme(&vc, 0, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "'-x'") && strstr(err, "nvme0"), "%s", err);
	snprintf(vc.ssd, sizeof(vc.ssd), "a b");
	ck_assert_int_eq(ssd_autostart_vnvme(&vc, 2, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "'a b'") && strstr(err, "nvme2"), "%s", err);
	snprintf(vc.ssd, sizeof(vc.ssd), "ok0");
	vc.size = 1ULL << 60;
	ck_assert_int_eq(ssd_autostart_vnvme(&vc, 0, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "1152921504606846976"), "%s", err);
	/* a socket path names a daemon someone runs: nothing to start, no question asked */
	snprintf(vc.ssd, sizeof(vc.ssd), "/proc/lvmm-none/s.sock");
	ck_assert_int_eq(ssd_autostart_vnvme(&vc, 0, err, sizeof(err)), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ssd_autostart");
	TCase *t = tcase_create("helper");

	tcase_add_test(t, test_helper_refusals);
	suite_add_tcase(s, t);
	return testutil_run_suite(s);
}
