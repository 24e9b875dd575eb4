/* Boots the freestanding bench guest through the lvmm binary ($LVMM, default build/lvmm):
 * console markers, exit reasons and status, host-compat completions, bad input, SIGTERM. */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

/* A safety net against a hung VM, not an assertion on speed. */
#define RUN_LIMIT_S 120

/* Runs lvmm with stdin from /dev/null; when wait_for is set, sends sig once stdout contains it. */
static void run_lvmm(struct testutil_run *r, char *const args[], const char *wait_for, int sig)
{
	testutil_run_lvmm(r, args, NULL, wait_for, sig, RUN_LIMIT_S);
}

/* Exited by itself (no signal, no crash) with this status. */
static void assert_exit(const struct testutil_run *r, int code)
{
	ck_assert_msg(WIFEXITED(r->status), "lvmm died by signal %d; stderr: %s",
		      WIFSIGNALED(r->status) ? WTERMSIG(r->status) : -1, r->err);
	ck_assert_msg(WEXITSTATUS(r->status) == code, "exit %d, expected %d; stderr: %s",
		      WEXITSTATUS(r->status), code, r->err);
}

static void assert_one_line_error(const struct testutil_run *r)
{
	ck_assert_msg(WIFEXITED(r->status) && WEXITSTATUS(r->status) != 0,
		      "expected a non-zero exit, got status 0x%x", r->status);
	ck_assert_msg(testutil_lines(r->err) == 1, "expected one line on stderr, got: %s", r->err);
	ck_assert_msg(!strncmp(r->err, "lvmm: ", 6), "stderr: %s", r->err);
}

START_TEST(test_hello)
{
	char *args[] = {"run", "--kernel", (char *)testutil_bench_guest(), "--memory", "64M", NULL};
	struct testutil_run r;
	double t0 = testutil_now_s();

	run_lvmm(&r, args, NULL, 0);
	fprintf(stderr, "test_boot_fast: lvmm start to bench guest poweroff: %.3f s\n",
		testutil_now_s() - t0);
	assert_exit(&r, 0);
	ck_assert_msg(strstr(r.out, "bench: hello from ring 0"), "console: %s", r.out);
	ck_assert_msg(strstr(r.out, "bench: hello from ring 3"), "console: %s", r.out);
	ck_assert_msg(strstr(r.err, "guest powered off"), "stderr: %s", r.err);
	ck_assert_int_eq(testutil_lines(r.err), 1);
}
END_TEST

START_TEST(test_two_cpus_hello)
{
	char *args[] = {"run",	  "--kernel", (char *)testutil_bench_guest(),
			"--cpus", "2",	      "--memory",
			"64M",	  NULL};
	struct testutil_run r;

	/* The bench guest ignores the AP: vCPU 1 must neither run wild nor block the poweroff. */
	run_lvmm(&r, args, NULL, 0);
	assert_exit(&r, 0);
	ck_assert_msg(strstr(r.out, "bench: hello from ring 3"), "console: %s", r.out);
	ck_assert_msg(strstr(r.err, "guest powered off"), "stderr: %s", r.err);
}
END_TEST

START_TEST(test_console_input)
{
	char *args[] = {"run",	     "--kernel",	(char *)testutil_bench_guest(),
			"--cmdline", "bench.mode=echo", NULL};
	struct testutil_run r;

	/* stdin is a pipe here (no terminal to make raw): bytes still reach the UART. */
	testutil_run_lvmm(&r, args, "ping from the host\n", NULL, 0, RUN_LIMIT_S);
	assert_exit(&r, 0);
	ck_assert_msg(strstr(r.out, "bench: got 'ping from the host'"), "console: %s", r.out);
}
END_TEST

START_TEST(test_serial_file)
{
	char path[] = "/tmp/lvmm-serial-XXXXXX", buf[4096] = {0}, arg[64];
	char *args[] = {"run", "--kernel", (char *)testutil_bench_guest(), "--serial", arg, NULL};
	struct testutil_run r;

	testutil_tmpfile(path);
	snprintf(arg, sizeof(arg), "file=%s", path);
	run_lvmm(&r, args, NULL, 0);
	assert_exit(&r, 0);
	ck_assert_msg(!strstr(r.out, "bench:"), "console leaked to stdout: %s", r.out);
	ck_assert_uint_gt(testutil_read_file(path, buf, sizeof(buf)), 0);
	unlink(path);
	ck_assert_msg(strstr(buf, "bench: hello from ring 3"), "serial file: %s", buf);
}
END_TEST

START_TEST(test_triple_fault)
{
	char *args[] = {"run",	     "--kernel",	 (char *)testutil_bench_guest(),
			"--cmdline", "bench.mode=fault", NULL};
	struct testutil_run r;

	run_lvmm(&r, args, NULL, 0);
	assert_exit(&r, 0);
	ck_assert_msg(strstr(r.out, "triple fault on purpose"), "console: %s", r.out);
	ck_assert_msg(!strstr(r.out, "still alive"), "console: %s", r.out);
	ck_assert_msg(strstr(r.err, "triple fault"), "stderr: %s", r.err);
	ck_assert_int_eq(testutil_lines(r.err), 1);
}
END_TEST

static void check_reset(const char *mode, const char *how)
{
	char cmd[64];
	char *args[] = {"run", "--kernel", (char *)testutil_bench_guest(), "--cmdline", cmd, NULL};
	struct testutil_run r;

	snprintf(cmd, sizeof(cmd), "bench.mode=%s", mode);
	run_lvmm(&r, args, NULL, 0);
	assert_exit(&r, 0);
	ck_assert_msg(!strstr(r.out, "still alive"), "console: %s", r.out);
	ck_assert_msg(strstr(r.err, "guest rebooted"), "stderr: %s", r.err);
	ck_assert_msg(strstr(r.err, how), "stderr: %s", r.err);
	ck_assert_int_eq(testutil_lines(r.err), 1);
}

START_TEST(test_reboot_ports)
{
	check_reset("reboot", "0xcf9");
	check_reset("kbdreset", "i8042");
}
END_TEST

START_TEST(test_compat_instructions)
{
	char *args[] = {"run",	     "--kernel",	  (char *)testutil_bench_guest(),
			"--cmdline", "bench.mode=compat", NULL};
	struct testutil_run r;

	run_lvmm(&r, args, NULL, 0);
	assert_exit(&r, 0);
	ck_assert_msg(strstr(r.out, "bench: breakpoint before rip"), "console: %s", r.out);
	ck_assert_msg(strstr(r.out, "bench: int3 returned"), "console: %s", r.out);
	ck_assert_msg(strstr(r.out, "bench: fwait passed"), "console: %s", r.out);
	if (strstr(r.out, "bench: stac")) {
		ck_assert_msg(strstr(r.out, "bench: stac AC=1"), "console: %s", r.out);
		ck_assert_msg(strstr(r.out, "bench: clac AC=0"), "console: %s", r.out);
	}
	ck_assert_msg(strstr(r.out, "bench: hello from ring 3"), "console: %s", r.out);
}
END_TEST

START_TEST(test_emulation_failure_message)
{
	char *args[] = {"run",	     "--kernel",	  (char *)testutil_bench_guest(),
			"--cmdline", "bench.mode=compat", NULL};
	struct testutil_run r;

	/* Only kvm_pvm hosts fail to emulate int3; elsewhere the CPU runs it and this is moot. */
	if (access("/sys/module/kvm_pvm", F_OK))
		return;
	setenv("LVMM_HOSTCOMPAT", "off", 1);
	run_lvmm(&r, args, NULL, 0);
	unsetenv("LVMM_HOSTCOMPAT");
	assert_exit(&r, 1);
	ck_assert_msg(strstr(r.err, "emulation failure at RIP 0x"), "stderr: %s", r.err);
	ck_assert_msg(strstr(r.err, "instruction bytes: cc"), "stderr: %s", r.err);
	ck_assert_int_eq(testutil_lines(r.err), 1);
}
END_TEST

START_TEST(test_sigterm_stops_cleanly)
{
	char *args[] = {"run",	     "--kernel",	(char *)testutil_bench_guest(),
			"--cmdline", "bench.mode=spin", NULL};
	struct testutil_run r;

	run_lvmm(&r, args, "heartbeat 1\r\n", SIGTERM);
	assert_exit(&r, 0);
	ck_assert_msg(strstr(r.err, "stopped by signal TERM"), "stderr: %s", r.err);
	ck_assert_int_eq(testutil_lines(r.err), 1);
}
END_TEST

/* LVMM_PROFILE=FILE,HZ: the spinning guest's RIP sampled into FILE, a "vcpu rip" line each. */
START_TEST(test_profile_samples)
{
	char *args[] = {"run",	     "--kernel",	(char *)testutil_bench_guest(),
			"--cmdline", "bench.mode=spin", NULL};
	char dir[256], path[300], env[320], *text, *line, *save = NULL;
	struct testutil_run r;
	unsigned n = 0, vcpu;
	unsigned long long rip;
	int end;

	testutil_mkdtemp(dir, sizeof(dir), "/tmp/lvmm-prof-");
	snprintf(path, sizeof(path), "%s/samples", dir);
	snprintf(env, sizeof(env), "%s,2000", path);
	setenv("LVMM_PROFILE", env, 1);
	run_lvmm(&r, args, "heartbeat 3\r\n", SIGTERM);
	unsetenv("LVMM_PROFILE");
	assert_exit(&r, 0);
	text = testutil_slurp(path);
	ck_assert_msg(text[0], "no profile written to %s", path);
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save), n++) {
		ck_assert_msg(sscanf(line, "%u %llx%n", &vcpu, &rip, &end) == 2 && !line[end],
			      "bad sample line '%s'", line);
		ck_assert_uint_eq(vcpu, 0);
		ck_assert_msg(rip != 0, "sample %u: rip 0", n);
	}
	/* 0.6 s of spinning at 2000 Hz: hundreds of samples on any host, far fewer than 10 000 */
	ck_assert_msg(n >= 50 && n < 10000, "%u samples", n);
	free(text);
	testutil_rmtree(dir);
}
END_TEST

START_TEST(test_sigint_stops_cleanly)
{
	char *args[] = {"run",
			"--kernel",
			(char *)testutil_bench_guest(),
			"--cmdline",
			"bench.mode=spin",
			"--cpus",
			"2",
			NULL};
	struct testutil_run r;

	run_lvmm(&r, args, "heartbeat 0\r\n", SIGINT);
	assert_exit(&r, 0);
	ck_assert_msg(strstr(r.err, "stopped by signal INT"), "stderr: %s", r.err);
}
END_TEST

START_TEST(test_bad_inputs)
{
	char corrupt[] = "/tmp/lvmm-corrupt-XXXXXX";
	char *missing[] = {"run", "--kernel", "/nonexistent/vmlinux", NULL};
	char *nokernel[] = {"run", NULL};
	char *small[] = {"run", "--kernel", (char *)testutil_bench_guest(), "--memory", "1K", NULL};
	char *suffix[] = {"run",      "--kernel", (char *)testutil_bench_guest(),
			  "--memory", "12Q",	  NULL};
	char *unknown[] = {"run", "--kernel", (char *)testutil_bench_guest(), "--bogus", NULL};
	char *noarg[] = {"run", "--kernel", NULL};
	char *cpus[] = {"run", "--kernel", (char *)testutil_bench_guest(), "--cpus", "0", NULL};
	char *serial[] = {"run",      "--kernel", (char *)testutil_bench_guest(),
			  "--serial", "tcp",	  NULL};
	char *cmd[] = {"frobnicate", NULL};
	char *bad[] = {"run", "--kernel", corrupt, NULL};
	char junk[4096];
	struct testutil_run r;

	testutil_tmpfile(corrupt);
	memset(junk, 0x5a, sizeof(junk));
	testutil_write_file(corrupt, junk, sizeof(junk), 0600);

	run_lvmm(&r, missing, NULL, 0);
	assert_one_line_error(&r);
	ck_assert_msg(strstr(r.err, "/nonexistent/vmlinux"), "stderr: %s", r.err);
	/* No --kernel and no default guest where lvmm is told to look: one clear error (the build
	 * tree's own guest/ next to the binary would otherwise be booted). */
	setenv("LVMM_GUEST_DIR", "/nonexistent/lvmm-guest", 1);
	run_lvmm(&r, nokernel, NULL, 0);
	unsetenv("LVMM_GUEST_DIR");
	assert_one_line_error(&r);
	ck_assert_msg(strstr(r.err, "/nonexistent/lvmm-guest"), "stderr: %s", r.err);
	run_lvmm(&r, bad, NULL, 0);
	assert_one_line_error(&r);
	ck_assert_msg(strstr(r.err, corrupt), "stderr: %s", r.err);
	run_lvmm(&r, small, NULL, 0);
	assert_one_line_error(&r);
	ck_assert_msg(strstr(r.err, "memory"), "stderr: %s", r.err);
	run_lvmm(&r, suffix, NULL, 0);
	assert_one_line_error(&r);
	ck_assert_msg(strstr(r.err, "12Q"), "stderr: %s", r.err);
	run_lvmm(&r, unknown, NULL, 0);
	assert_one_line_error(&r);
	ck_assert_msg(strstr(r.err, "--bogus"), "stderr: %s", r.err);
	run_lvmm(&r, noarg, NULL, 0);
	assert_one_line_error(&r);
	run_lvmm(&r, cpus, NULL, 0);
	assert_one_line_error(&r);
	run_lvmm(&r, serial, NULL, 0);
	assert_one_line_error(&r);
	run_lvmm(&r, cmd, NULL, 0);
	assert_one_line_error(&r);
	unlink(corrupt);
}
END_TEST

START_TEST(test_help_version)
{
	char *help[] = {"--help", NULL};
	char *runhelp[] = {"run", "--help", NULL};
	char *ver[] = {"--version", NULL};
	struct testutil_run r;

	run_lvmm(&r, help, NULL, 0);
	assert_exit(&r, 0);
	ck_assert_msg(strstr(r.out, "lvmm run"), "stdout: %s", r.out);
	run_lvmm(&r, runhelp, NULL, 0);
	assert_exit(&r, 0);
	ck_assert_msg(strstr(r.out, "--kernel"), "stdout: %s", r.out);
	run_lvmm(&r, ver, NULL, 0);
	assert_exit(&r, 0);
	ck_assert_msg(!strncmp(r.out, "lvmm ", 5), "stdout: %s", r.out);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("boot_fast");
	TCase *tc = tcase_create("bench-guest");

	if (!testutil_kvm_usable()) {
		testutil_skip("boot_fast: /dev/kvm not usable here");
		return 0;
	}
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, test_hello);
	tcase_add_test(tc, test_two_cpus_hello);
	tcase_add_test(tc, test_console_input);
	tcase_add_test(tc, test_serial_file);
	tcase_add_test(tc, test_triple_fault);
	tcase_add_test(tc, test_reboot_ports);
	tcase_add_test(tc, test_compat_instructions);
	tcase_add_test(tc, test_emulation_failure_message);
	tcase_add_test(tc, test_sigterm_stops_cleanly);
	tcase_add_test(tc, test_sigint_stops_cleanly);
	tcase_add_test(tc, test_profile_samples);
	tcase_add_test(tc, test_bad_inputs);
	tcase_add_test(tc, test_help_version);
	suite_add_tcase(s, tc);
	return testutil_run_suite(s);
}
