/* Boots the freestanding bench guest through the lvmm binary ($LVMM, default build/lvmm):
 * console markers, exit reasons and status, host-compat completions, bad input, SIGTERM. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define OUT_MAX 65536
/* A safety net against a hung VM, not an assertion on speed. */
#define RUN_LIMIT_S 120

struct run {
	char out[OUT_MAX], err[OUT_MAX];
	size_t nout, nerr;
	int status;
};

static const char *lvmm(void)
{
	const char *p = getenv("LVMM");

	return p && *p ? p : "build/lvmm";
}

static const char *guest(void)
{
	static char path[512];
	const char *b = getenv("BUILD");

	snprintf(path, sizeof(path), "%s/bench-guest/bench-guest.elf", b && *b ? b : "build");
	return path;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void drain(int fd, char *buf, size_t *n, int *open_)
{
	ssize_t r;

	if (*n >= OUT_MAX - 1) {
		char junk[4096];

		r = read(fd, junk, sizeof(junk));
	} else {
		r = read(fd, buf + *n, OUT_MAX - 1 - *n);
		if (r > 0)
			*n += (size_t)r;
	}
	if (r <= 0 && !(r < 0 && errno == EINTR))
		*open_ = 0;
	buf[*n] = 0;
}

/* Runs lvmm with args and stdin from input (NULL: /dev/null); when wait_for is set, sends sig
 * once stdout contains it. */
static void run_lvmm_input(struct run *r, char *const args[], const char *wait_for, int sig,
			   const char *input)
{
	int po[2], pe[2], pi[2], oo = 1, eo = 1, sent = 0;
	double start = now_s();
	char *argv[32];
	pid_t pid;
	int i;

	memset(r, 0, sizeof(*r));
	argv[0] = (char *)lvmm();
	for (i = 0; args[i] && i < 30; i++)
		argv[i + 1] = args[i];
	argv[i + 1] = NULL;
	ck_assert_int_eq(pipe(po), 0);
	ck_assert_int_eq(pipe(pe), 0);
	ck_assert_int_eq(pipe(pi), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (!pid) {
		int devnull = open("/dev/null", O_RDONLY);

		dup2(input ? pi[0] : devnull, 0);
		close(pi[1]);
		dup2(po[1], 1);
		dup2(pe[1], 2);
		close(po[0]);
		close(pe[0]);
		execv(argv[0], argv);
		_exit(127);
	}
	close(po[1]);
	close(pe[1]);
	close(pi[0]);
	if (input)
		ck_assert_int_eq(write(pi[1], input, strlen(input)), (ssize_t)strlen(input));
	close(pi[1]);
	while (oo || eo) {
		struct pollfd p[2] = {{.fd = oo ? po[0] : -1, .events = POLLIN},
				      {.fd = eo ? pe[0] : -1, .events = POLLIN}};

		if (poll(p, 2, 200) > 0) {
			if (p[0].revents)
				drain(po[0], r->out, &r->nout, &oo);
			if (p[1].revents)
				drain(pe[0], r->err, &r->nerr, &eo);
		}
		if (wait_for && !sent && strstr(r->out, wait_for)) {
			kill(pid, sig);
			sent = 1;
		}
		if (now_s() - start > RUN_LIMIT_S) {
			kill(pid, SIGKILL);
			break;
		}
	}
	close(po[0]);
	close(pe[0]);
	ck_assert_int_eq(waitpid(pid, &r->status, 0), pid);
	if (wait_for)
		ck_assert_msg(sent, "never saw '%s' on the console: %s", wait_for, r->out);
}

static void run_lvmm(struct run *r, char *const args[], const char *wait_for, int sig)
{
	run_lvmm_input(r, args, wait_for, sig, NULL);
}

static int lines(const char *s)
{
	int n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

/* Exited by itself (no signal, no crash) with this status. */
static void assert_exit(const struct run *r, int code)
{
	ck_assert_msg(WIFEXITED(r->status), "lvmm died by signal %d; stderr: %s",
		      WIFSIGNALED(r->status) ? WTERMSIG(r->status) : -1, r->err);
	ck_assert_msg(WEXITSTATUS(r->status) == code, "exit %d, expected %d; stderr: %s",
		      WEXITSTATUS(r->status), code, r->err);
}

static void assert_one_line_error(const struct run *r)
{
	ck_assert_msg(WIFEXITED(r->status) && WEXITSTATUS(r->status) != 0,
		      "expected a non-zero exit, got status 0x%x", r->status);
	ck_assert_msg(lines(r->err) == 1, "expected one line on stderr, got: %s", r->err);
	ck_assert_msg(!strncmp(r->err, "lvmm: ", 6), "stderr: %s", r->err);
}

START_TEST(test_hello)
{
	char *args[] = {"run", "--kernel", (char *)guest(), "--memory", "64M", NULL};
	struct run r;
	double t0 = now_s();

	run_lvmm(&r, args, NULL, 0);
	fprintf(stderr, "test_boot_fast: lvmm start to bench guest poweroff: %.3f s\n",
		now_s() - t0);
	assert_exit(&r, 0);
	ck_assert_msg(strstr(r.out, "bench: hello from ring 0"), "console: %s", r.out);
	ck_assert_msg(strstr(r.out, "bench: hello from ring 3"), "console: %s", r.out);
	ck_assert_msg(strstr(r.err, "guest powered off"), "stderr: %s", r.err);
	ck_assert_int_eq(lines(r.err), 1);
}
END_TEST

START_TEST(test_two_cpus_hello)
{
	char *args[] = {"run", "--kernel", (char *)guest(), "--cpus", "2", "--memory", "64M", NULL};
	struct run r;

	/* The bench guest ignores the AP: vCPU 1 must neither run wild nor block the poweroff. */
	run_lvmm(&r, args, NULL, 0);
	assert_exit(&r, 0);
	ck_assert_msg(strstr(r.out, "bench: hello from ring 3"), "console: %s", r.out);
	ck_assert_msg(strstr(r.err, "guest powered off"), "stderr: %s", r.err);
}
END_TEST

START_TEST(test_console_input)
{
	char *args[] = {"run", "--kernel", (char *)guest(), "--cmdline", "bench.mode=echo", NULL};
	struct run r;

	/* stdin is a pipe here (no terminal to make raw): bytes still reach the UART. */
	run_lvmm_input(&r, args, NULL, 0, "ping from the host\n");
	assert_exit(&r, 0);
	ck_assert_msg(strstr(r.out, "bench: got 'ping from the host'"), "console: %s", r.out);
}
END_TEST

START_TEST(test_serial_file)
{
	char path[] = "/tmp/lvmm-serial-XXXXXX", buf[4096] = {0}, arg[64];
	char *args[] = {"run", "--kernel", (char *)guest(), "--serial", arg, NULL};
	struct run r;
	int fd = mkstemp(path);

	ck_assert_int_ge(fd, 0);
	close(fd);
	snprintf(arg, sizeof(arg), "file=%s", path);
	run_lvmm(&r, args, NULL, 0);
	assert_exit(&r, 0);
	ck_assert_msg(!strstr(r.out, "bench:"), "console leaked to stdout: %s", r.out);
	fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_gt(read(fd, buf, sizeof(buf) - 1), 0);
	close(fd);
	unlink(path);
	ck_assert_msg(strstr(buf, "bench: hello from ring 3"), "serial file: %s", buf);
}
END_TEST

START_TEST(test_triple_fault)
{
	char *args[] = {"run", "--kernel", (char *)guest(), "--cmdline", "bench.mode=fault", NULL};
	struct run r;

	run_lvmm(&r, args, NULL, 0);
	assert_exit(&r, 0);
	ck_assert_msg(strstr(r.out, "triple fault on purpose"), "console: %s", r.out);
	ck_assert_msg(!strstr(r.out, "still alive"), "console: %s", r.out);
	ck_assert_msg(strstr(r.err, "triple fault"), "stderr: %s", r.err);
	ck_assert_int_eq(lines(r.err), 1);
}
END_TEST

static void check_reset(const char *mode, const char *how)
{
	char cmd[64];
	char *args[] = {"run", "--kernel", (char *)guest(), "--cmdline", cmd, NULL};
	struct run r;

	snprintf(cmd, sizeof(cmd), "bench.mode=%s", mode);
	run_lvmm(&r, args, NULL, 0);
	assert_exit(&r, 0);
	ck_assert_msg(!strstr(r.out, "still alive"), "console: %s", r.out);
	ck_assert_msg(strstr(r.err, "guest rebooted"), "stderr: %s", r.err);
	ck_assert_msg(strstr(r.err, how), "stderr: %s", r.err);
	ck_assert_int_eq(lines(r.err), 1);
}

START_TEST(test_reboot_ports)
{
	check_reset("reboot", "0xcf9");
	check_reset("kbdreset", "i8042");
}
END_TEST

START_TEST(test_compat_instructions)
{
	char *args[] = {"run", "--kernel", (char *)guest(), "--cmdline", "bench.mode=compat", NULL};
	struct run r;

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
	char *args[] = {"run", "--kernel", (char *)guest(), "--cmdline", "bench.mode=compat", NULL};
	struct run r;

	/* Only kvm_pvm hosts fail to emulate int3; elsewhere the CPU runs it and this is moot. */
	if (access("/sys/module/kvm_pvm", F_OK))
		return;
	setenv("LVMM_HOSTCOMPAT", "off", 1);
	run_lvmm(&r, args, NULL, 0);
	unsetenv("LVMM_HOSTCOMPAT");
	assert_exit(&r, 1);
	ck_assert_msg(strstr(r.err, "emulation failure at RIP 0x"), "stderr: %s", r.err);
	ck_assert_msg(strstr(r.err, "instruction bytes: cc"), "stderr: %s", r.err);
	ck_assert_int_eq(lines(r.err), 1);
}
END_TEST

START_TEST(test_sigterm_stops_cleanly)
{
	char *args[] = {"run", "--kernel", (char *)guest(), "--cmdline", "bench.mode=spin", NULL};
	struct run r;

	run_lvmm(&r, args, "heartbeat 1\r\n", SIGTERM);
	assert_exit(&r, 0);
	ck_assert_msg(strstr(r.err, "stopped by signal TERM"), "stderr: %s", r.err);
	ck_assert_int_eq(lines(r.err), 1);
}
END_TEST

START_TEST(test_sigint_stops_cleanly)
{
	char *args[] = {
	    "run", "--kernel", (char *)guest(), "--cmdline", "bench.mode=spin", "--cpus",
	    "2",   NULL};
	struct run r;

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
	char *small[] = {"run", "--kernel", (char *)guest(), "--memory", "1K", NULL};
	char *suffix[] = {"run", "--kernel", (char *)guest(), "--memory", "12Q", NULL};
	char *unknown[] = {"run", "--kernel", (char *)guest(), "--bogus", NULL};
	char *noarg[] = {"run", "--kernel", NULL};
	char *cpus[] = {"run", "--kernel", (char *)guest(), "--cpus", "0", NULL};
	char *serial[] = {"run", "--kernel", (char *)guest(), "--serial", "tcp", NULL};
	char *cmd[] = {"frobnicate", NULL};
	char *bad[] = {"run", "--kernel", corrupt, NULL};
	char junk[4096];
	struct run r;
	int fd = mkstemp(corrupt);

	ck_assert_int_ge(fd, 0);
	memset(junk, 0x5a, sizeof(junk));
	ck_assert_int_eq(write(fd, junk, sizeof(junk)), (ssize_t)sizeof(junk));
	close(fd);

	run_lvmm(&r, missing, NULL, 0);
	assert_one_line_error(&r);
	ck_assert_msg(strstr(r.err, "/nonexistent/vmlinux"), "stderr: %s", r.err);
	run_lvmm(&r, nokernel, NULL, 0);
	assert_one_line_error(&r);
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
	struct run r;

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
	SRunner *sr;
	int failed;

	if (access("/dev/kvm", R_OK | W_OK)) {
		printf("boot_fast: /dev/kvm not usable here, skipped\n");
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
	tcase_add_test(tc, test_bad_inputs);
	tcase_add_test(tc, test_help_version);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
