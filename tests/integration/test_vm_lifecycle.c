/* Drives the VM lifecycle of vm.h directly (no CLI) with the bench guest: boot, pause (the
 * console stops), resume (it goes on), shutdown, and the state names along the way. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "serial.h"
#include "testutil.h"
#include "vm.h"

#define WAIT_LIMIT_S 120 /* safety net for a hung guest, not a speed assertion */

/* Highest heartbeat number in the console file, -1 if none yet. */
static long last_heartbeat(const char *path)
{
	static char buf[1 << 16];
	long best = -1;
	char *p;

	if (!testutil_read_file(path, buf, sizeof(buf)))
		return -1;
	for (p = buf; (p = strstr(p, "heartbeat ")); p++)
		best = strtol(p + 10, NULL, 10);
	return best;
}

static long wait_heartbeat_above(const char *path, long floor)
{
	long h = -1;
	unsigned i;

	for (i = 0; i < WAIT_LIMIT_S * 20; i++) {
		h = last_heartbeat(path);
		if (h > floor)
			break;
		testutil_sleep_ms(50);
	}
	return h;
}

static void make_config(struct vm_config *c, const char *serial_path, unsigned cpus)
{
	config_defaults(c);
	c->cpus = c->max_cpus = cpus;
	c->memory = 64ULL << 20;
	snprintf(c->kernel, sizeof(c->kernel), "%s", testutil_bench_guest());
	snprintf(c->cmdline, sizeof(c->cmdline), "bench.mode=spin");
	c->serial = SERIAL_FILE;
	snprintf(c->serial_file, sizeof(c->serial_file), "%s", serial_path);
}

/* Waits (bounded) until every byte the guest sent is written or dropped; st gets the counters. */
static bool console_settled(struct vm *vm, struct serial_stats *st)
{
	unsigned i;

	for (i = 0; i < 200; i++) {
		vm_console_stats(vm, st);
		if (st->written + st->dropped >= st->tx && st->tx)
			return true;
		testutil_sleep_ms(10);
	}
	return false;
}

static void pause_resume(unsigned cpus)
{
	struct serial_stats st0, st1;
	char path[] = "/tmp/lvmm-life-XXXXXX", err[256];
	struct vm_config cfg;
	struct vm *vm;
	long before, during, after;

	testutil_tmpfile(path);
	make_config(&cfg, path, cpus);
	ck_assert_msg(vm_create(&cfg, &vm, err, sizeof(err)) == 0, "vm_create: %s", err);
	ck_assert_str_eq(vm_state_name(vm_get_state(vm)), "Created");
	ck_assert_uint_eq(vm_memory_actual(vm), 64ULL << 20);
	ck_assert_int_eq(vm_resume(vm, err, sizeof(err)), -EINVAL);
	ck_assert_msg(vm_boot(vm, err, sizeof(err)) == 0, "vm_boot: %s", err);
	ck_assert_int_eq(vm_boot(vm, err, sizeof(err)), -EINVAL);
	ck_assert_str_eq(vm_state_name(vm_get_state(vm)), "Running");
	ck_assert_int_ge(wait_heartbeat_above(path, 0), 1);

	ck_assert_msg(vm_pause(vm, err, sizeof(err)) == 0, "vm_pause: %s", err);
	ck_assert_str_eq(vm_state_name(vm_get_state(vm)), "Paused");
	ck_assert_int_eq(vm_pause(vm, err, sizeof(err)), -EINVAL);
	/* Silence is judged by the counter of bytes the guest sent, not by the file: the console
	 * writer may still be flushing what came before the pause. */
	ck_assert_msg(console_settled(vm, &st0), "console writer did not catch up");
	before = last_heartbeat(path);
	testutil_sleep_ms(1000); /* five heartbeat periods */
	vm_console_stats(vm, &st1);
	ck_assert_uint_eq(st1.tx, st0.tx);
	during = last_heartbeat(path);
	ck_assert_int_eq(during, before);

	ck_assert_msg(vm_resume(vm, err, sizeof(err)) == 0, "vm_resume: %s", err);
	ck_assert_str_eq(vm_state_name(vm_get_state(vm)), "Running");
	after = wait_heartbeat_above(path, during + 1);
	ck_assert_int_gt(after, during + 1);

	ck_assert_int_eq(vm_shutdown(vm, err, sizeof(err)), 0);
	ck_assert_str_eq(vm_state_name(vm_get_state(vm)), "Shutdown");
	ck_assert_int_eq(vm_wait(vm), VM_EXIT_API);
	vm_destroy(vm);
	unlink(path);
}

START_TEST(test_pause_resume_one_cpu)
{
	pause_resume(1);
}
END_TEST

START_TEST(test_pause_resume_two_cpus)
{
	pause_resume(2);
}
END_TEST

START_TEST(test_guest_poweroff_reason)
{
	char path[] = "/tmp/lvmm-life-XXXXXX", err[256];
	struct vm_config cfg;
	struct vm *vm;

	testutil_tmpfile(path);
	make_config(&cfg, path, 1);
	cfg.cmdline[0] = 0; /* hello: prints and powers off */
	ck_assert_msg(vm_create(&cfg, &vm, err, sizeof(err)) == 0, "vm_create: %s", err);
	ck_assert_int_eq(vm_boot(vm, err, sizeof(err)), 0);
	ck_assert_int_eq(vm_wait(vm), VM_EXIT_POWEROFF);
	ck_assert_ptr_nonnull(strstr(vm_exit_msg(vm), "powered off"));
	ck_assert_str_eq(vm_state_name(vm_get_state(vm)), "Shutdown");
	ck_assert_int_eq(vm_pause(vm, err, sizeof(err)), -EINVAL);
	vm_destroy(vm);
	unlink(path);
}
END_TEST

START_TEST(test_create_errors)
{
	struct vm_config cfg;
	struct vm *vm = (struct vm *)&cfg;
	char err[256] = "";

	make_config(&cfg, "/tmp/lvmm-life-unused", 1);
	snprintf(cfg.kernel, sizeof(cfg.kernel), "/nonexistent/kernel");
	ck_assert_int_lt(vm_create(&cfg, &vm, err, sizeof(err)), 0);
	ck_assert_ptr_null(vm);
	ck_assert_ptr_nonnull(strstr(err, "/nonexistent/kernel"));
	make_config(&cfg, "/tmp/lvmm-life-unused", 1);
	cfg.serial = SERIAL_OFF;
	cfg.cpus = 1000;
	ck_assert_int_eq(vm_create(&cfg, &vm, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "1000"));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("vm_lifecycle");
	TCase *tc = tcase_create("bench-guest");

	if (!testutil_kvm_usable()) {
		testutil_skip("vm_lifecycle: /dev/kvm not usable here");
		return 0;
	}
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, test_pause_resume_one_cpu);
	tcase_add_test(tc, test_pause_resume_two_cpus);
	tcase_add_test(tc, test_guest_poweroff_reason);
	tcase_add_test(tc, test_create_errors);
	suite_add_tcase(s, tc);
	return testutil_run_suite(s);
}
