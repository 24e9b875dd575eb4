/* lvmm run on a host without KVM: it says why and stops before it starts anything for the VM (no
 * softssd for an SSD nobody serves, no backing file under the state directory). On a host with
 * KVM the test hides /dev/kvm in a mount namespace of its own (root only): a missing node, and
 * a node that is not KVM (a /dev/null device under that name). */
#include <check.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

static char dir[64];

static void setup(void)
{
	char run[128];

	testutil_mkdtemp(dir, sizeof(dir), "/tmp/lvmm-nokvm-");
	snprintf(run, sizeof(run), "%s/run", dir);
	mkdir(run, 0700);
	setenv("LVMM_RUN_DIR", run, 1);
	setenv("LVMM_STATE_DIR", dir, 1);
}

static void teardown(void)
{
	testutil_rmtree(dir);
}

/* How /dev/kvm is hidden from this test process and the lvmm it starts. */
enum hide { HIDE_MISSING, HIDE_NOT_KVM };

/* false (and a skip line) when /dev/kvm cannot be hidden or replaced here */
static bool hide_kvm(enum hide how)
{
	if (how == HIDE_MISSING && access("/dev/kvm", F_OK))
		return true; /* a host without KVM: nothing to hide */
	if (geteuid()) {
		testutil_skip("no_kvm: hiding /dev/kvm needs root");
		return false;
	}
	if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL)) {
		testutil_skip("no_kvm: no mount namespace here");
		return false;
	}
	/* a /dev of its own: /dev/null for lvmm's stdin, and /dev/kvm only when it is not KVM */
	if (mount("tmpfs", "/dev", "tmpfs", 0, "mode=755") ||
	    mknod("/dev/null", S_IFCHR | 0666, makedev(1, 3)) ||
	    (how == HIDE_NOT_KVM && mknod("/dev/kvm", S_IFCHR | 0666, makedev(1, 3)))) {
		testutil_skip("no_kvm: no /dev of the test's own here (%s)", strerror(errno));
		return false;
	}
	return true;
}

static void run_without_kvm(enum hide how, const char *why)
{
	char *args[] = {"run",	   "--kernel",	 (char *)testutil_bench_guest(),
			"--vnvme", "nokvm0:16M", NULL};
	struct testutil_run r;
	char path[160];
	struct stat st;

	if (!hide_kvm(how))
		return;
	testutil_run_lvmm(&r, args, NULL, NULL, 0, 30);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 1, "status %#x: %s", r.status,
		      r.err);
	ck_assert_msg(strstr(r.err, "lvmm: /dev/kvm: ") && strstr(r.err, why), "%s", r.err);
	ck_assert_msg(testutil_lines(r.err) == 1, "more than the reason: %s", r.err);
	ck_assert_msg(!strstr(r.err, "softssd"), "%s", r.err);
	snprintf(path, sizeof(path), "%s/ssd", dir);
	ck_assert_msg(stat(path, &st) && errno == ENOENT, "%s was made", path);
	snprintf(path, sizeof(path), "%s/run/ssd", dir);
	ck_assert_msg(stat(path, &st) && errno == ENOENT, "%s was made", path);
}

START_TEST(test_missing)
{
	run_without_kvm(HIDE_MISSING, "not found (KVM not available on this host)");
}
END_TEST

START_TEST(test_not_kvm)
{
	run_without_kvm(HIDE_NOT_KVM, "not a KVM device");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("no_kvm");
	TCase *t = tcase_create("no_kvm");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_missing);
	tcase_add_test(t, test_not_kvm);
	suite_add_tcase(s, t);
	return testutil_run_suite(s);
}
