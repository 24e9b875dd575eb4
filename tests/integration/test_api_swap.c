/* --allowed-dir holds whenever lvmm opens a file, not only when the API checks its path: a
 * directory of the kernel's or the disk's path swapped for a symlink to outside after the check
 * makes the next build of the VM (vm.boot after a shutdown) fail, and the kernel outside never
 * runs; the allowed directory itself swapped after start changes nothing (it is held open). */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apitest.h"
#include "testutil.h"

static struct apitest T;
static char allowed[192], outside[192];

static void setup(void)
{
	char *extra[] = {"--allowed-dir", allowed, NULL};
	const char *guest = testutil_bench_guest();

	apitest_init(&T, "/tmp/lvmm-itest-swap-");
	ck_assert_msg(access(guest, R_OK) == 0, "no bench guest at %s", guest);
	snprintf(allowed, sizeof(allowed), "%s/allowed", T.dir);
	snprintf(outside, sizeof(outside), "%s/outside", T.dir);
	ck_assert_int_eq(testutil_system("mkdir -p %s/sub %s && cp %s %s/sub/guest && "
					 "cp %s %s/guest && truncate -s 1M %s/sub/disk.img "
					 "%s/disk.img",
					 allowed, outside, guest, allowed, guest, outside, allowed,
					 outside),
			 0);
	apitest_start(&T, extra);
	ck_assert_msg(T.pid > 0, "lvmm --allowed-dir exited early (status %d)", T.early_status);
}

static void teardown(void)
{
	apitest_fini(&T);
}

static int create(const char *kernel, const char *disk)
{
	char body[2048];

	snprintf(body, sizeof(body),
		 "{\"cpus\": {\"boot_vcpus\": 1}, \"memory\": {\"size\": 67108864},"
		 " \"payload\": {\"kernel\": \"%s\", \"cmdline\": \"bench.mode=spin\"},"
		 " \"serial\": {\"mode\": \"File\", \"file\": \"%s/console.log\"}%s%s%s}",
		 kernel, allowed, disk ? ", \"vnvme\": [{\"path\": \"" : "", disk ? disk : "",
		 disk ? "\"}]" : "");
	return apitest_curl(&T, "PUT", "vm.create", body, NULL);
}

/* sub becomes a symlink to the directory outside, after vm.create accepted sub/... */
static void swap_sub(void)
{
	ck_assert_int_eq(testutil_system("mv %s/sub %s/sub.old && ln -s %s %s/sub", allowed,
					 allowed, outside, allowed),
			 0);
}

static void expect_boot_refused(void)
{
	json_t *j = NULL;
	int st = apitest_curl(&T, "PUT", "vm.boot", NULL, &j);
	const char *msg = json_string_value(json_array_get(j, 0));

	ck_assert_msg(st >= 400, "vm.boot through a swapped symlink answered %d", st);
	ck_assert_msg(msg && strstr(msg, "symbolic link"), "message: %s", msg ? msg : "(none)");
	json_decref(j);
	/* the server goes on serving */
	ck_assert(apitest_ping(&T));
}

/* How often the VM's console file shows what. */
static unsigned console_count(const char *what)
{
	char path[256], *s, *p;
	unsigned n = 0;

	snprintf(path, sizeof(path), "%s/console.log", allowed);
	s = testutil_slurp(path);
	for (p = s; p && (p = strstr(p, what)); p += strlen(what))
		n++;
	free(s);
	return n;
}

/* Booted once, shut down: the next vm.boot rebuilds the VM and opens its files again. */
static void boot_once_and_stop(void)
{
	ck_assert_int_eq(apitest_curl(&T, "PUT", "vm.boot", NULL, NULL), 204);
	for (int i = 0; i < 200 && !console_count("hello from ring 3"); i++)
		testutil_sleep_ms(25);
	ck_assert_uint_eq(console_count("hello from ring 3"), 1);
	ck_assert_int_eq(apitest_curl(&T, "PUT", "vm.shutdown", NULL, NULL), 204);
	ck_assert_str_eq(apitest_vm_state(&T), "Shutdown");
}

START_TEST(test_kernel_swapped_after_check)
{
	char k[256];

	snprintf(k, sizeof(k), "%s/sub/guest", allowed);
	ck_assert_int_eq(create(k, NULL), 204);
	boot_once_and_stop();
	swap_sub();
	expect_boot_refused();
	/* the kernel outside never ran */
	ck_assert_uint_eq(console_count("hello from ring 3"), 1);
}
END_TEST

START_TEST(test_disk_swapped_after_check)
{
	char k[256], d[256];

	snprintf(k, sizeof(k), "%s/guest", allowed);
	snprintf(d, sizeof(d), "%s/sub/disk.img", allowed);
	ck_assert_int_eq(testutil_system("cp %s/sub/guest %s/guest", allowed, allowed), 0);
	ck_assert_int_eq(create(k, d), 204);
	boot_once_and_stop();
	swap_sub();
	expect_boot_refused();
}
END_TEST

/* The allowed directory itself renamed and replaced by a symlink to outside once lvmm runs:
 * the API's files are still those of the directory lvmm was given, nothing lands outside. */
START_TEST(test_allowed_dir_swapped_after_start)
{
	char k[256], old[256], path[300], *s;

	snprintf(k, sizeof(k), "%s/guest", allowed);
	snprintf(old, sizeof(old), "%s.old", allowed);
	ck_assert_int_eq(testutil_system("cp %s/sub/guest %s/guest && mv %s %s && ln -s %s %s",
					 allowed, allowed, allowed, old, outside, allowed),
			 0);
	ck_assert_int_eq(create(k, NULL), 204);
	ck_assert_int_eq(apitest_curl(&T, "PUT", "vm.boot", NULL, NULL), 204);
	snprintf(path, sizeof(path), "%s/console.log", old);
	for (int i = 0; i < 200; i++) {
		s = testutil_slurp(path);
		if (s && strstr(s, "hello from ring 3"))
			break;
		free(s);
		s = NULL;
		testutil_sleep_ms(25);
	}
	ck_assert_msg(s, "no console output in %s", path);
	free(s);
	snprintf(path, sizeof(path), "%s/console.log", outside);
	ck_assert_msg(access(path, F_OK) != 0, "the console file landed outside: %s", path);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("api_swap");
	TCase *tc = tcase_create("allowed-dir at boot");

	if (!testutil_kvm_usable()) {
		testutil_skip("api_swap: /dev/kvm not usable here");
		return 0;
	}
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_kernel_swapped_after_check);
	tcase_add_test(tc, test_disk_swapped_after_check);
	tcase_add_test(tc, test_allowed_dir_swapped_after_start);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	return testutil_run_suite(s);
}
