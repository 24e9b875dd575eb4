/* The seccomp filters refuse nothing lvmm does in a normal run: with --seccomp=log every call
 * outside a thread's filter is allowed and logged by the kernel (audit type 1326), and a guest
 * run (vCPU, NVMe file I/O, console) and an API life cycle leave no such line for lvmm. A
 * forked child that makes a forbidden call under the log filter shows the channel works. */
#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "apitest.h"
#include "seccomp_filter.h"
#include "testutil.h"

static char dir[64];

static void setup(void)
{
	testutil_mkdtemp(dir, sizeof(dir), "/tmp/lvmm-seccomp-log-");
}

static void teardown(void)
{
	testutil_rmtree(dir);
}

/* The kernel log now (dmesg), or NULL when it cannot be read here. */
static char *kernel_log(void)
{
	size_t cap = 1 << 20, n = 0, got;
	char *out = malloc(cap + 1);
	FILE *f = popen("dmesg 2>/dev/null", "r");

	if (!out || !f) {
		free(out);
		if (f)
			pclose(f);
		return NULL;
	}
	while ((got = fread(out + n, 1, cap - n, f)) > 0) {
		n += got;
		if (n == cap) {
			char *bigger = realloc(out, 2 * cap + 1);

			if (!bigger)
				break;
			out = bigger;
			cap *= 2;
		}
	}
	out[n] = 0;
	if (pclose(f) || !n) {
		free(out);
		return NULL;
	}
	return out;
}

/* The kernel timestamp ("[  12.345678] ") of the last line of log, or -1 without one. The kernel
 * log is a ring: under a flood of other messages (this nested host logs one per emulated guest
 * fwait) the bytes before a test's lines move, so new lines are found by time, not by offset. */
static double log_last_stamp(const char *log)
{
	double t = -1;

	for (const char *p = log; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (*p == '[')
			t = strtod(p + 1, NULL);
	return t;
}

/* Offset of the first line of log stamped after t0 (the whole log when t0 < 0). */
static size_t log_after(const char *log, double t0)
{
	for (const char *p = log; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (t0 < 0 || (*p == '[' && strtod(p + 1, NULL) > t0))
			return (size_t)(p - log);
	return strlen(log);
}

/* Seccomp audit lines in log past its first skip bytes that contain needle. */
static unsigned audit_lines(const char *log, size_t skip, const char *needle)
{
	const char *p = log + skip;
	unsigned n = 0;

	while ((p = strstr(p, "type=1326"))) {
		const char *eol = strchr(p, '\n');
		size_t len = eol ? (size_t)(eol - p) : strlen(p);

		if (memmem(p, len, needle, strlen(needle)))
			n++;
		p += len;
	}
	return n;
}

static char exe_needle[PATH_MAX + 16];

START_TEST(test_log_channel_works)
{
	char *before = kernel_log(), *after, needle[64];
	double t0;
	pid_t pid;
	int st;

	ck_assert_ptr_nonnull(before);
	t0 = log_last_stamp(before);
	free(before);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (!pid) {
		char err[256];

		seccomp_mode_set(SECCOMP_MODE_LOG);
		if (seccomp_install(err, sizeof(err)) ||
		    seccomp_thread_install(SECCOMP_VCPU, err, sizeof(err)))
			_exit(10);
		socket(AF_INET, SOCK_STREAM, 0); /* outside both: logged, not refused */
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x", st);
	snprintf(needle, sizeof(needle), " pid=%d ", (int)pid);
	for (int i = 0; i < 50; i++) {
		after = kernel_log();
		ck_assert_ptr_nonnull(after);
		size_t skip = log_after(after, t0);

		if (audit_lines(after, skip, needle)) {
			ck_assert(strstr(after + skip, "syscall=41 "));
			free(after);
			return;
		}
		free(after);
		testutil_sleep_ms(100);
	}
	ck_abort_msg("no seccomp audit line for pid %d", (int)pid);
}
END_TEST

START_TEST(test_guest_run_refuses_nothing)
{
	char vn[256], *before = kernel_log(), *after;
	char *args[] = {"run",
			"--seccomp",
			"log",
			"--kernel",
			(char *)testutil_bench_guest(),
			"--memory",
			"64M",
			"--cpus",
			"2",
			"--cmdline",
			"bench.mode=nvme",
			"--vnvme",
			vn,
			NULL};
	struct testutil_run r;
	size_t skip;
	double t0;

	ck_assert_ptr_nonnull(before);
	t0 = log_last_stamp(before);
	free(before);
	snprintf(vn, sizeof(vn), "file=%s/disk.img,size=16M", dir);
	testutil_run_lvmm(&r, args, NULL, NULL, 0, 120);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "status 0x%x: %s",
		      r.status, r.err);
	ck_assert_msg(strstr(r.out, "bench: nvme passed (0 failures)"), "%s", r.out);
	testutil_sleep_ms(300);
	after = kernel_log();
	ck_assert_ptr_nonnull(after);
	skip = log_after(after, t0);
	ck_assert_msg(!audit_lines(after, skip, exe_needle),
		      "lvmm made calls outside its filters:\n%s", after + skip);
	free(after);
}
END_TEST

START_TEST(test_api_lifecycle_refuses_nothing)
{
	char *extra[] = {"--seccomp", "log", NULL};
	char body[1024], *before = kernel_log(), *after;
	struct apitest t;
	size_t skip;
	double t0;

	ck_assert_ptr_nonnull(before);
	t0 = log_last_stamp(before);
	free(before);
	apitest_init(&t, "/tmp/lvmm-seccomp-log-api-");
	apitest_start(&t, extra);
	ck_assert_int_gt(t.pid, 0);
	snprintf(body, sizeof(body),
		 "{\"cpus\": {\"boot_vcpus\": 2}, \"memory\": {\"size\": 67108864},"
		 " \"payload\": {\"kernel\": \"%s\", \"cmdline\": \"bench.mode=spin\"},"
		 " \"serial\": {\"mode\": \"File\", \"file\": \"%s\"},"
		 " \"vnvme\": [{\"path\": \"%s/api.img\", \"size\": 1048576}]}",
		 testutil_bench_guest(), t.console, dir);
	ck_assert_int_eq(apitest_curl(&t, "PUT", "vm.create", body, NULL), 204);
	ck_assert_int_eq(apitest_curl(&t, "PUT", "vm.boot", NULL, NULL), 204);
	ck_assert_int_eq(apitest_curl(&t, "GET", "vm.info", NULL, NULL), 200);
	ck_assert_int_eq(apitest_curl(&t, "GET", "vm.counters", NULL, NULL), 200);
	ck_assert_int_eq(apitest_curl(&t, "PUT", "vm.pause", NULL, NULL), 204);
	ck_assert_int_eq(apitest_curl(&t, "PUT", "vm.resume", NULL, NULL), 204);
	ck_assert_int_eq(apitest_curl(&t, "PUT", "vm.reboot", NULL, NULL), 204);
	ck_assert_int_eq(apitest_curl(&t, "PUT", "vm.shutdown", NULL, NULL), 204);
	ck_assert_int_eq(apitest_curl(&t, "PUT", "vm.boot", NULL, NULL), 204);
	ck_assert_int_eq(apitest_curl(&t, "PUT", "vm.shutdown", NULL, NULL), 204);
	ck_assert_int_eq(apitest_curl(&t, "PUT", "vm.delete", NULL, NULL), 204);
	ck_assert_int_eq(apitest_curl(&t, "PUT", "vmm.shutdown", NULL, NULL), 204);
	ck_assert_int_eq(apitest_wait(&t, 15), 0);
	apitest_fini(&t);
	testutil_sleep_ms(300);
	after = kernel_log();
	ck_assert_ptr_nonnull(after);
	skip = log_after(after, t0);
	ck_assert_msg(!audit_lines(after, skip, exe_needle),
		      "lvmm made calls outside its filters:\n%s", after + skip);
	free(after);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("seccomp_log");
	TCase *tc = tcase_create("log");
	char exe[PATH_MAX], *log;

	if (!testutil_kvm_usable()) {
		testutil_skip("seccomp_log: /dev/kvm not usable here");
		return 0;
	}
	log = kernel_log();
	if (!log) {
		testutil_skip("seccomp_log: the kernel log (dmesg) cannot be read here");
		return 0;
	}
	free(log);
	if (!realpath(testutil_lvmm(), exe)) {
		testutil_skip("seccomp_log: no lvmm binary at %s", testutil_lvmm());
		return 0;
	}
	snprintf(exe_needle, sizeof(exe_needle), "exe=\"%s\"", exe);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_log_channel_works);
	tcase_add_test(tc, test_guest_run_refuses_nothing);
	tcase_add_test(tc, test_api_lifecycle_refuses_nothing);
	tcase_set_timeout(tc, 180);
	suite_add_tcase(s, tc);
	return testutil_run_suite(s);
}
