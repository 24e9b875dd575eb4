/* PCI hotplug through ACPI on the Linux guest kernel (stock acpiphp and nvme drivers): an empty
 * `lvmm run --api-socket`, a VM booted with no vNVMe; once /init runs, two rounds of
 * vm.add-vnvme (a file-backed function in emulate mode, then an isolated one on a softssd
 * volume): the guest sees its /dev/nvmeXn1 appear, writes and reads a line; vm.remove-device:
 * the guest's eject lets lvmm tear it down, vm.info drops it, and the backing file or the
 * exported volume holds the line. */
#include <check.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "apitest.h"
#include "ssdutil.h"
#include "testutil.h"

/* One boot; the emulated kernel takes minutes to reach /init on a loaded kvm_pvm host, and
 * every step of the guest (acpiphp's scan, the nvme probe) runs in emulated ring 0. */
#define INIT_LIMIT_S	600
#define STEP_LIMIT_S	300
#define TCASE_TIMEOUT_S 1500
#define DISK_SIZE	(8ULL << 20)
#define SSD		"lxhp"
#define PATTERN		"LVMM-HOTPLUG-PATTERN round %d written by the guest through a hot-added disk\n"

static struct apitest T;
static char kernel[4096], initramfs[4096], disk[160], volimg[160];
static pid_t daemon_pid;

static int curl(const char *method, const char *endpoint, const char *data, json_t **body)
{
	return apitest_curl(&T, method, endpoint, data, body);
}

/* Waits (bounded) until the console shows what; a guest failure line ends the wait early. */
static bool console_shows(const char *what, unsigned limit_s)
{
	for (unsigned i = 0; i < limit_s * 10; i++) {
		if (apitest_console_count(&T, what))
			return true;
		if (apitest_console_count(&T, "LVMM-HOTPLUG-FAIL") ||
		    apitest_console_count(&T, "LVMM-TEST-DONE"))
			return false;
		testutil_sleep_ms(100);
	}
	return false;
}

/* The console, for a failure message (static buffer, its last 3000 bytes). */
static const char *console_tail(void)
{
	static char buf[3001];
	char *c = testutil_slurp(T.console);
	size_t n = c ? strlen(c) : 0;

	snprintf(buf, sizeof(buf), "%s", c ? c + (n > 3000 ? n - 3000 : 0) : "(no console)");
	free(c);
	return buf;
}

/* vm.info's config.vnvme entries with this id. */
static unsigned info_has(const char *id)
{
	json_t *j, *a;
	unsigned n = 0;
	size_t i;

	ck_assert_int_eq(curl("GET", "vm.info", NULL, &j), 200);
	a = json_object_get(json_object_get(j, "config"), "vnvme");
	for (i = 0; i < json_array_size(a); i++)
		n += !strcmp(json_string_value(json_object_get(json_array_get(a, i), "id")) ?: "",
			     id);
	json_decref(j);
	return n;
}

/* A softssd of the test's own (socket under T.dir), up before lvmm starts. */
static void daemon_start(void)
{
	char backing[160], log[160];
	const char *opts[] = {"--backing", backing, "--size", "64M", NULL};

	snprintf(backing, sizeof(backing), "%s/ssd.img", T.dir);
	snprintf(log, sizeof(log), "%s/ssd.log", T.dir);
	daemon_pid = testutil_ssd_start(SSD, log, opts);
}

/* The line a round's guest wrote starts file. */
static void check_pattern(const char *file, int round)
{
	char want[160], *data = testutil_slurp(file);

	snprintf(want, sizeof(want), PATTERN, round);
	ck_assert_msg(data != NULL, "%s unreadable", file);
	ck_assert_msg(!strncmp(data, want, strlen(want)), "%s starts '%.80s'", file, data);
	free(data);
}

/* One round: add the function described by body (id hp<round>), the guest's I/O, the removal. */
static void round_trip(int round, const char *body)
{
	char want[128], id[16], rm[64];
	int st, tries;
	json_t *j;

	snprintf(id, sizeof(id), "hp%d", round);
	ck_assert_int_eq(curl("PUT", "vm.add-vnvme", body, &j), 200);
	ck_assert_str_eq(json_string_value(json_object_get(j, "id")), id);
	/* the slot the first round's function left is free again */
	ck_assert_str_eq(json_string_value(json_object_get(j, "bdf")), "0000:00:01.0");
	json_decref(j);
	ck_assert_uint_eq(info_has(id), 1);
	/* acpiphp registered every slot of bus 0 and scanned the one the GED event named */
	snprintf(want, sizeof(want), "LVMM-HOTPLUG-SEEN round %d slots=31 /dev/nvme", round);
	ck_assert_msg(console_shows(want, STEP_LIMIT_S),
		      "round %d: the guest did not see the hot-added function:\n%s", round,
		      console_tail());
	snprintf(want, sizeof(want), "LVMM-HOTPLUG-IO round %d ok", round);
	ck_assert_msg(console_shows(want, STEP_LIMIT_S), "round %d: I/O failed:\n%s", round,
		      console_tail());

	/* answered once the guest ejected it and lvmm tore it down; a guest slower than lvmm's
	 * 30 s gets the request repeated, as a client would (the removal stays pending) */
	snprintf(rm, sizeof(rm), "{\"id\": \"%s\"}", id);
	for (tries = 0; (st = curl("PUT", "vm.remove-device", rm, NULL)) == 500 && tries < 8;
	     tries++)
		;
	ck_assert_int_eq(st, 204);
	ck_assert_uint_eq(info_has(id), 0);
	snprintf(want, sizeof(want), "LVMM-HOTPLUG-GONE round %d", round);
	ck_assert_msg(console_shows(want, STEP_LIMIT_S),
		      "round %d: the guest still has the removed function:\n%s", round,
		      console_tail());
	ck_assert_int_eq(curl("PUT", "vm.remove-device", rm, NULL), 404);
	ck_assert_str_eq(apitest_vm_state(&T), "Running");
}

static void setup(void)
{
	char gdir[3900];

	apitest_init(&T, "/tmp/lvmm-ltest-hotplug-");
	T.curl_max_s = 90; /* vm.remove-device waits for the guest's eject (30 s at most) */
	snprintf(gdir, sizeof(gdir), "%s", testutil_env_or("LVMM_GUEST_DIR", ""));
	if (!*gdir)
		snprintf(gdir, sizeof(gdir), "%s/guest", testutil_env_or("BUILD", "build"));
	snprintf(kernel, sizeof(kernel), "%s/vmlinux", gdir);
	snprintf(initramfs, sizeof(initramfs), "%s/initramfs.cpio", gdir);
	snprintf(disk, sizeof(disk), "%s/hp.img", T.dir);
	snprintf(volimg, sizeof(volimg), "%s/vol.img", T.dir);
	/* the softssd's socket and lvmm's view of it in the test's directory */
	setenv("LVMM_RUN_DIR", T.dir, 1);
	setenv("LVMM_STATE_DIR", "/proc/lvmm-none", 1);
	ck_assert_msg(access(kernel, R_OK) == 0, "%s missing: run make guest", kernel);
	ck_assert_msg(access(initramfs, R_OK) == 0, "%s missing: run make guest", initramfs);
}

static void teardown(void)
{
	testutil_ssd_stop(&daemon_pid, SIGTERM);
	apitest_fini(&T);
}

START_TEST(test_linux_hotplug_vnvme)
{
	char cfg[10000], body[512];

	daemon_start();
	ck_assert_int_eq(
	    testutil_system("%s ssd vol create %s vhp 8M >/dev/null 2>&1", T.lvmm, SSD), 0);
	apitest_start(&T, NULL);
	snprintf(cfg, sizeof(cfg),
		 "{\"cpus\": {\"boot_vcpus\": 1}, \"memory\": {\"size\": 134217728},"
		 " \"payload\": {\"kernel\": \"%s\", \"initramfs\": \"%s\","
		 " \"cmdline\": \"console=ttyS0 lvmm.test=hotplug\"},"
		 " \"serial\": {\"mode\": \"File\", \"file\": \"%s\"}}",
		 kernel, initramfs, T.console);
	ck_assert_int_eq(curl("PUT", "vm.create", cfg, NULL), 204);
	ck_assert_int_eq(curl("PUT", "vm.boot", NULL, NULL), 204);
	ck_assert_msg(console_shows("LVMM-HOTPLUG-READY", INIT_LIMIT_S),
		      "the guest's hotplug test did not start:\n%s", console_tail());

	/* round 1: emulate on a file lvmm creates */
	snprintf(body, sizeof(body), "{\"id\": \"hp1\", \"path\": \"%s\", \"size\": %llu}", disk,
		 (unsigned long long)DISK_SIZE);
	round_trip(1, body);
	check_pattern(disk, 1);

	/* round 2: isolated on the softssd's volume (the mode an ssd gets by default) */
	snprintf(body, sizeof(body), "{\"id\": \"hp2\", \"ssd\": \"%s\", \"vol\": \"vhp\"}", SSD);
	round_trip(2, body);
	ck_assert_int_eq(
	    testutil_system("%s ssd vol export %s vhp %s >/dev/null 2>&1", T.lvmm, SSD, volimg), 0);
	check_pattern(volimg, 2);
	ck_assert_msg(console_shows("LVMM-HOTPLUG-WAIT", STEP_LIMIT_S), "%s", console_tail());

	ck_assert_int_eq(curl("PUT", "vm.shutdown", NULL, NULL), 204);
	ck_assert_int_eq(curl("PUT", "vmm.shutdown", NULL, NULL), 204);
	ck_assert_int_eq(apitest_wait(&T, 30), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("linux_hotplug");
	TCase *tc = tcase_create("acpiphp");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, TCASE_TIMEOUT_S);
	tcase_add_test(tc, test_linux_hotplug_vnvme);
	suite_add_tcase(s, tc);
	return testutil_run_suite(s);
}
