/* The REST API on the Linux guest kernel: an empty `lvmm run --api-socket` driven with real curl
 * through create -> boot -> info -> pause -> resume -> reboot -> counters -> shutdown, early in
 * boot. */
#include <check.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "apitest.h"
#include "linuxboot.h"
#include "testutil.h"

/* The guest kernel's first console line appears ~15-40 s after boot on a loaded kvm_pvm host
 * and its quiet phases last up to ~100 s; the test never waits for /init. */
#define FIRST_LINE_LIMIT_S 150
#define GROWTH_LIMIT_S	   150
#define PAUSE_WATCH_S	   4
#define TCASE_TIMEOUT_S	   600

static struct apitest T;
static char kernel[4096], initramfs[4096];

static int curl(const char *method, const char *endpoint, const char *data, json_t **body)
{
	return apitest_curl(&T, method, endpoint, data, body);
}

static int put(const char *endpoint, const char *data)
{
	return curl("PUT", endpoint, data, NULL);
}

static const char *vm_state(void)
{
	return apitest_vm_state(&T);
}

static off_t console_size(void)
{
	return apitest_console_size(&T);
}

static unsigned console_count(const char *what)
{
	return apitest_console_count(&T, what);
}

/* Waits (bounded) until the console has more than size bytes. */
static bool console_grows_past(off_t size, unsigned limit_s)
{
	for (unsigned i = 0; i < limit_s * 10; i++) {
		if (console_size() > size)
			return true;
		testutil_sleep_ms(100);
	}
	return false;
}

static bool console_shows(const char *what, unsigned times, unsigned limit_s)
{
	for (unsigned i = 0; i < limit_s * 10; i++) {
		if (console_count(what) >= times)
			return true;
		testutil_sleep_ms(100);
	}
	return false;
}

static void setup(void)
{
	char gdir[3900];

	apitest_init(&T, "/tmp/lvmm-ltest-api-");
	T.curl_max_s = 60;
	/* LVMM_GUEST_DIR points local runs at an existing kernel build (it takes long to make). */
	snprintf(gdir, sizeof(gdir), "%s", testutil_env_or("LVMM_GUEST_DIR", ""));
	if (!*gdir)
		snprintf(gdir, sizeof(gdir), "%s/guest", testutil_env_or("BUILD", "build"));
	snprintf(kernel, sizeof(kernel), "%s/vmlinux", gdir);
	snprintf(initramfs, sizeof(initramfs), "%s/initramfs.cpio", gdir);
	ck_assert_msg(access(kernel, R_OK) == 0, "%s missing: run make guest", kernel);
	ck_assert_msg(access(initramfs, R_OK) == 0, "%s missing: run make guest", initramfs);
}

static void teardown(void)
{
	apitest_fini(&T);
}

START_TEST(test_linux_api_lifecycle)
{
	char cfg[10000];
	off_t paused, later;
	json_t *j;

	apitest_start(&T, NULL);
	snprintf(cfg, sizeof(cfg),
		 "{\"cpus\": {\"boot_vcpus\": 1}, \"memory\": {\"size\": 134217728},"
		 " \"payload\": {\"kernel\": \"%s\", \"initramfs\": \"%s\","
		 " \"cmdline\": \"console=ttyS0\"},"
		 " \"serial\": {\"mode\": \"File\", \"file\": \"%s\"}}",
		 kernel, initramfs, T.console);
	ck_assert_int_eq(put("vm.create", cfg), 204);
	ck_assert_str_eq(vm_state(), "Created");
	ck_assert_int_eq(put("vm.boot", NULL), 204);

	ck_assert_int_eq(curl("GET", "vm.info", NULL, &j), 200);
	ck_assert_str_eq(json_string_value(json_object_get(j, "state")), "Running");
	ck_assert_int_eq(json_integer_value(json_object_get(j, "memory_actual_size")), 134217728);
	ck_assert_str_eq(json_string_value(json_object_get(
			     json_object_get(json_object_get(j, "config"), "payload"), "kernel")),
			 kernel);
	json_decref(j);

	ck_assert_msg(console_shows(LINUXBOOT_BANNER, 1, FIRST_LINE_LIMIT_S),
		      "no kernel banner on the console");
	/* Pause right after a burst of output, while the kernel is printing. */
	later = console_size();
	ck_assert_msg(console_grows_past(later, GROWTH_LIMIT_S), "the console stopped growing");

	ck_assert_int_eq(put("vm.pause", NULL), 204);
	ck_assert_str_eq(vm_state(), "Paused");
	paused = console_size();
	testutil_sleep_ms(PAUSE_WATCH_S * 1000);
	ck_assert_msg(console_size() == paused, "the console grew while paused (%lld -> %lld)",
		      (long long)paused, (long long)console_size());

	ck_assert_int_eq(put("vm.resume", NULL), 204);
	ck_assert_str_eq(vm_state(), "Running");
	ck_assert_msg(console_grows_past(paused, GROWTH_LIMIT_S), "no console output after resume");

	/* A reset starts the kernel again on the same console. */
	ck_assert_int_eq(put("vm.reboot", NULL), 204);
	ck_assert_str_eq(vm_state(), "Running");
	ck_assert_msg(console_shows(LINUXBOOT_BANNER, 2, FIRST_LINE_LIMIT_S),
		      "no second kernel banner after vm.reboot");

	ck_assert_int_eq(curl("GET", "vm.counters", NULL, &j), 200);
	ck_assert(json_is_object(j));
	json_decref(j);

	ck_assert_int_eq(put("vm.shutdown", NULL), 204);
	ck_assert_str_eq(vm_state(), "Shutdown");
	later = console_size();
	testutil_sleep_ms(1000);
	ck_assert_int_eq(console_size(), later);

	ck_assert_int_eq(put("vmm.shutdown", NULL), 204);
	ck_assert_int_eq(apitest_wait(&T, 30), 0);
	ck_assert_int_eq(access(T.sock, F_OK), -1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("linux_api");
	TCase *tc = tcase_create("curl");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, TCASE_TIMEOUT_S);
	tcase_add_test(tc, test_linux_api_lifecycle);
	suite_add_tcase(s, tc);
	return testutil_run_suite(s);
}
