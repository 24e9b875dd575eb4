/* Guest RAM is lvmm's before an SSD sees it (issue 23, finding 6): lvmm populates guest RAM
 * before registering it as an SSD backend's DMA window, so a softssd run with
 * --require-resident (which refuses windows with pages not populated: its first touch of one
 * would be charged to the daemon) serves isolated and passthrough VMs, and emulate mode's own
 * window, which lio_drv_open populates, too. */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "ssdutil.h"
#include "testutil.h"

#define SSD	    "rs0"
#define RUN_LIMIT_S 120 /* a safety net against a hung VM, not an assertion on speed */

static char dir[64], backing[128], logpath[128];
static pid_t daemon_pid;

static void setup(void)
{
	const char *opts[] = {"--backing", backing, "--size", "64M", "--require-resident", NULL};

	testutil_mkdtemp(dir, sizeof(dir), "/tmp/lvmm-resident-");
	snprintf(backing, sizeof(backing), "%s/backing.img", dir);
	snprintf(logpath, sizeof(logpath), "%s/daemon.log", dir);
	setenv("LVMM_RUN_DIR", dir, 1);
	setenv("LVMM_STATE_DIR", "/proc/lvmm-none", 1);
	daemon_pid = testutil_ssd_start(SSD, logpath, opts);
}

static void teardown(void)
{
	int st = testutil_ssd_stop(&daemon_pid, SIGTERM);

	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "softssd ended with 0x%x: %s", st,
		      testutil_slurp(logpath));
	testutil_rmtree(dir);
}

static void vm_run(struct testutil_run *r, const char *vnvme, const char *cmdline)
{
	char *args[] = {"run",
			"--kernel",
			(char *)testutil_bench_guest(),
			"--memory",
			"128M",
			"--cmdline",
			(char *)cmdline,
			"--vnvme",
			(char *)vnvme,
			NULL};

	testutil_run_lvmm(r, args, NULL, NULL, 0, RUN_LIMIT_S);
}

static void assert_passed(const struct testutil_run *r, const char *what)
{
	ck_assert_msg(WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0,
		      "%s: status 0x%x: %s %s\nsoftssd: %s", what, r->status, r->out, r->err,
		      testutil_slurp(logpath));
	ck_assert_msg(strstr(r->out, "bench: lio passed (0 failures)"), "%s: %s %s", what, r->out,
		      r->err);
}

/* Both modes that hand guest RAM to the SSD, and emulate mode, whose own DMA window (lio_drv's
 * bounce memory in lio_client.c) lvmm populates too: the window is accepted and the I/O checks
 * out. */
START_TEST(test_resident_window_accepted)
{
	static const char *const modes[] = {"", ",mode=passthrough", ",mode=emulate"};
	struct testutil_run r;
	char vn[96];
	unsigned i;

	for (i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		snprintf(vn, sizeof(vn), "%s:8M,vol=r%u%s", SSD, i, modes[i]);
		vm_run(&r, vn, "bench.mode=lio bench.seed=7 bench.ios=200");
		assert_passed(&r, vn);
		ck_assert_msg(!strstr(testutil_slurp(logpath), "not populated"), "%s: %s", vn,
			      testutil_slurp(logpath));
	}
}
END_TEST

static Suite *resident_suite(void)
{
	Suite *s = suite_create("vnvme_resident");
	TCase *t = tcase_create("resident");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 3 * RUN_LIMIT_S);
	tcase_add_test(t, test_resident_window_accepted);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	if (!testutil_kvm_usable()) {
		testutil_skip("vnvme_resident: /dev/kvm not usable here");
		return 0;
	}
	return testutil_run_suite(resident_suite());
}
