/* lvmm run installs its seccomp filter before it parses the kernel and initramfs: a malformed
 * image must meet a process that can no longer do much. Observed with strace: the filter's
 * seccomp(2) (or prctl) comes before the first open of either image. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

static char dir[64];

/* Line number in log of the first line holding needle, or 0. */
static int first_line(const char *log, const char *needle)
{
	const char *p = log;
	int n = 1;

	while (*p) {
		const char *eol = strchr(p, '\n');
		size_t len = eol ? (size_t)(eol - p) : strlen(p);

		if (memmem(p, len, needle, strlen(needle)))
			return n;
		if (!eol)
			break;
		p = eol + 1;
		n++;
	}
	return 0;
}

START_TEST(test_filter_before_images)
{
	char kernel[128], initrd[128], trace[128], *log;
	int filter, open_k, open_i;

	testutil_mkdtemp(dir, sizeof(dir), "/tmp/lvmm-seccomp-order-");
	snprintf(kernel, sizeof(kernel), "%s/bad-kernel", dir);
	snprintf(initrd, sizeof(initrd), "%s/initrd", dir);
	snprintf(trace, sizeof(trace), "%s/strace.log", dir);
	testutil_write_file(kernel, "not a kernel image at all", 25, 0644);
	testutil_write_file(initrd, "x", 1, 0644);
	/* lvmm fails on the image (status 1); what matters is the order of the system calls */
	ck_assert_int_ne(testutil_system("strace -f -qq -o %s -e trace=seccomp,prctl,openat %s run "
					 "--kernel %s --initramfs %s --serial off >/dev/null 2>&1",
					 trace, testutil_lvmm(), kernel, initrd),
			 0);
	log = testutil_slurp(trace);
	ck_assert_ptr_nonnull(log);
	filter = first_line(log, "SECCOMP_SET_MODE_FILTER");
	if (!filter)
		filter = first_line(log, "PR_SET_SECCOMP");
	open_k = first_line(log, "bad-kernel");
	open_i = first_line(log, "/initrd");
	ck_assert_msg(filter > 0, "no seccomp filter installed:\n%s", log);
	ck_assert_msg(open_k > 0, "the kernel was never opened:\n%s", log);
	ck_assert_msg(filter < open_k, "kernel opened (line %d) before the filter (line %d)",
		      open_k, filter);
	ck_assert(!open_i || filter < open_i);
	free(log);
	testutil_rmtree(dir);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("seccomp_order");
	TCase *tc = tcase_create("run");

	if (system("command -v strace >/dev/null 2>&1")) {
		testutil_skip("seccomp_order: strace not installed");
		return 0;
	}
	if (!testutil_kvm_usable()) {
		testutil_skip("seccomp_order: /dev/kvm not usable here");
		return 0;
	}
	tcase_add_test(tc, test_filter_before_images);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	return testutil_run_suite(s);
}
