/* Files named over the REST API, end to end on a real `lvmm run --api-socket --allowed-dir`:
 * vm.create opens nothing, vm.boot appends to the console file, and symlinks, FIFOs, hard links
 * and paths outside the allowed directory are refused at once without touching anything; an SSD
 * nobody serves is not started (no --ssd-autostart). */
#include <check.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apitest.h"
#include "testutil.h"

static struct apitest T;
static char allowed[192], state[192], run[192];

static void setup(void)
{
	char *extra[] = {"--allowed-dir", allowed, NULL};
	const char *guest = testutil_bench_guest();

	apitest_init(&T, "/tmp/lvmm-itest-files-");
	ck_assert_msg(access(guest, R_OK) == 0, "no bench guest at %s", guest);
	snprintf(state, sizeof(state), "%s/state", T.dir);
	snprintf(run, sizeof(run), "%s/run", T.dir);
	setenv("LVMM_STATE_DIR", state, 1);
	setenv("LVMM_RUN_DIR", run, 1);
	snprintf(allowed, sizeof(allowed), "%s/allowed", T.dir);
	ck_assert_int_eq(testutil_system("mkdir %s && cp %s %s/guest && echo keep > %s/victim && "
					 "ln -s %s/victim %s/out.log && mkfifo %s/fifo",
					 allowed, guest, allowed, T.dir, T.dir, allowed, allowed),
			 0);
	apitest_start(&T, extra);
	ck_assert_msg(T.pid > 0, "lvmm --allowed-dir exited early (status %d)", T.early_status);
}

static void teardown(void)
{
	apitest_fini(&T);
}

static int create(const char *kernel, const char *serial_file)
{
	char body[1024];

	snprintf(body, sizeof(body),
		 "{\"cpus\": {\"boot_vcpus\": 1}, \"memory\": {\"size\": 67108864},"
		 " \"payload\": {\"kernel\": \"%s\"},"
		 " \"serial\": {\"mode\": \"File\", \"file\": \"%s\"}}",
		 kernel, serial_file);
	return apitest_curl(&T, "PUT", "vm.create", body, NULL);
}

static char *slurp(const char *path)
{
	char *s = testutil_slurp(path);

	ck_assert_ptr_nonnull(s);
	return s;
}

START_TEST(test_create_opens_nothing_boot_appends)
{
	char k[256], log[256], *s = NULL;
	unsigned i;

	snprintf(k, sizeof(k), "%s/guest", allowed);
	snprintf(log, sizeof(log), "%s/console.log", allowed);
	testutil_write_file(log, "previous boot\n", 14, 0644);
	ck_assert_int_eq(create(k, log), 204);
	s = slurp(log);
	ck_assert_str_eq(s, "previous boot\n"); /* vm.create touched nothing */
	free(s);
	ck_assert_int_eq(apitest_curl(&T, "PUT", "vm.boot", NULL, NULL), 204);
	for (i = 0; i < 200; i++) {
		struct stat st;

		if (!stat(log, &st) && st.st_size > 14)
			break;
		testutil_sleep_ms(50);
	}
	s = slurp(log);
	ck_assert_msg(strlen(s) > 14, "the guest wrote nothing to the console file");
	ck_assert_int_eq(strncmp(s, "previous boot\n", 14), 0); /* appended, not truncated */
	free(s);
}
END_TEST

START_TEST(test_refused_at_once)
{
	char k[256], p[256], *s;
	double t0 = testutil_now_s();

	snprintf(k, sizeof(k), "%s/guest", allowed);
	snprintf(p, sizeof(p), "%s/out.log", allowed);
	ck_assert_int_eq(create(k, p), 400); /* a symlink to a file outside */
	snprintf(p, sizeof(p), "%s/fifo", allowed);
	ck_assert_int_eq(create(k, p), 400); /* a FIFO would hang the API thread */
	snprintf(p, sizeof(p), "%s/victim", T.dir);
	ck_assert_int_eq(create(k, p), 400); /* outside the allowed directory */
	ck_assert_int_eq(create(p, k), 400);
	snprintf(p, sizeof(p), "%s/../victim", allowed);
	ck_assert_int_eq(create(k, p), 400);
	ck_assert_double_lt(testutil_now_s() - t0, 10.0);
	ck_assert(apitest_ping(&T));
	snprintf(p, sizeof(p), "%s/victim", T.dir);
	s = slurp(p);
	ck_assert_str_eq(s, "keep\n");
	free(s);
	/* relative names would mean lvmm's working directory: refused too */
	ck_assert_int_eq(create("guest", "console.log"), 400);
	ck_assert_int_eq(create(k, "console.log"), 400);
}
END_TEST

/* A second name for a file outside (a hard link the client made in the allowed directory):
 * never appended to. */
START_TEST(test_hard_link_refused)
{
	char k[256], p[256], v[256], *s;
	json_t *j = NULL;
	const char *msg;
	int st;

	snprintf(k, sizeof(k), "%s/guest", allowed);
	snprintf(p, sizeof(p), "%s/hl.log", allowed);
	snprintf(v, sizeof(v), "%s/victim", T.dir);
	ck_assert_int_eq(link(v, p), 0);
	st = create(k, p);
	if (st == 204)
		st = apitest_curl(&T, "PUT", "vm.boot", NULL, &j);
	ck_assert_msg(st >= 400, "a hard-linked console file answered %d", st);
	msg = json_string_value(json_array_get(j, 0));
	ck_assert_msg(!j || (msg && strstr(msg, "hard links")), "message: %s", msg ? msg : "");
	json_decref(j);
	testutil_sleep_ms(200);
	s = slurp(v);
	ck_assert_str_eq(s, "keep\n");
	free(s);
	ck_assert(apitest_ping(&T));
}
END_TEST

/* Without --ssd-autostart, a vnvme on an SSD nobody serves fails at once: no softssd, no
 * backing in the state directory, no wait. */
START_TEST(test_no_autostart)
{
	char k[256], body[1024];
	double t0 = testutil_now_s();
	int st;

	snprintf(k, sizeof(k), "%s/guest", allowed);
	snprintf(body, sizeof(body),
		 "{\"cpus\": {\"boot_vcpus\": 1}, \"memory\": {\"size\": 67108864},"
		 " \"payload\": {\"kernel\": \"%s\"}, \"serial\": {\"mode\": \"Null\"},"
		 " \"vnvme\": [{\"ssd\": \"gate1\", \"size\": 16777216}]}",
		 k);
	st = apitest_curl(&T, "PUT", "vm.create", body, NULL);
	if (st == 204)
		st = apitest_curl(&T, "PUT", "vm.boot", NULL, NULL);
	ck_assert_msg(st >= 400, "a vnvme on an SSD nobody serves answered %d", st);
	ck_assert_double_lt(testutil_now_s() - t0, 3.0);
	ck_assert_msg(access(state, F_OK) != 0, "a softssd was started: %s exists", state);
	ck_assert(apitest_ping(&T));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("api_files");
	TCase *tc = tcase_create("allowed-dir");

	if (!testutil_kvm_usable()) {
		testutil_skip("api_files: /dev/kvm not usable here");
		return 0;
	}
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_create_opens_nothing_boot_appends);
	tcase_add_test(tc, test_refused_at_once);
	tcase_add_test(tc, test_hard_link_refused);
	tcase_add_test(tc, test_no_autostart);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	return testutil_run_suite(s);
}
