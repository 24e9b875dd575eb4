/* Linux boot test: runs $LVMM with $BUILD/guest/vmlinux and initramfs.cpio and checks from the
 * serial console that the CPUs came up, /init ran its marker and a test script, and the VM powered
 * off. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* A boot takes minutes on kvm_pvm hosts (emulated guest kernel); CI runs this on 2 cores. */
#define BOOT_LIMIT_S 1000
/* Console silent this long: the guest hangs (the longest quiet phase seen was ~100 s). */
#define STALL_LIMIT_S	400
#define TCASE_TIMEOUT_S 1100
#define POLL_US		200000

struct boot {
	int status;	 /* waitpid status of lvmm */
	bool killed;	 /* we stopped it after BOOT_LIMIT_S */
	char *console;	 /* serial output */
	char *log;	 /* lvmm's own stdout and stderr */
	double t_init;	 /* host seconds from exec to "Run /init", < 0 when never seen */
	double t_marker; /* ... to "LVMM-GUEST-UP", < 0 when never seen */
	double t_exit;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t len = 0;

	if (!f)
		return strdup("");
	if (getdelim(&buf, &len, '\0', f) < 0) {
		free(buf);
		buf = strdup("");
	}
	fclose(f);
	return buf;
}

static const char *env_or(const char *name, const char *def)
{
	const char *v = getenv(name);

	return v && *v ? v : def;
}

/* Kernel timestamp ("[  12.345678] ") of the first console line containing what, or -1. */
static double printk_time(const char *console, const char *what)
{
	const char *hit = strstr(console, what), *line;
	double t;

	if (!hit)
		return -1;
	for (line = hit; line > console && line[-1] != '\n'; line--)
		;
	return sscanf(line, "[ %lf]", &t) == 1 ? t : -1;
}

static void boot_guest(unsigned cpus, const char *cmdline, struct boot *b)
{
	const char *lvmm = env_or("LVMM", "build/lvmm");
	const char *build = env_or("BUILD", "build");
	char kernel[4096], initramfs[4096], serial_arg[4200], cpus_arg[16];
	char serial[] = "/tmp/lvmm-linux-serial-XXXXXX";
	char logpath[] = "/tmp/lvmm-linux-log-XXXXXX";
	int sfd = mkstemp(serial), lfd = mkstemp(logpath);
	double t0, t_progress;
	size_t console_len = 0;
	pid_t pid;

	ck_assert_msg(sfd >= 0 && lfd >= 0, "mkstemp: %s", strerror(errno));
	snprintf(kernel, sizeof(kernel), "%s/guest/vmlinux", build);
	snprintf(initramfs, sizeof(initramfs), "%s/guest/initramfs.cpio", build);
	ck_assert_msg(access(lvmm, X_OK) == 0, "LVMM=%s is not executable", lvmm);
	ck_assert_msg(access(kernel, R_OK) == 0, "%s missing: run make guest", kernel);
	ck_assert_msg(access(initramfs, R_OK) == 0, "%s missing: run make guest", initramfs);
	snprintf(serial_arg, sizeof(serial_arg), "file=%s", serial);
	snprintf(cpus_arg, sizeof(cpus_arg), "%u", cpus);

	memset(b, 0, sizeof(*b));
	b->t_init = b->t_marker = -1;
	t0 = t_progress = now_s();
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		dup2(lfd, STDOUT_FILENO);
		dup2(lfd, STDERR_FILENO);
		execl(lvmm, lvmm, "run", "--kernel", kernel, "--initramfs", initramfs, "--cmdline",
		      cmdline, "--cpus", cpus_arg, "--memory", "128M", "--serial", serial_arg,
		      (char *)NULL);
		dprintf(STDERR_FILENO, "exec %s: %s\n", lvmm, strerror(errno));
		_exit(127);
	}
	for (;;) {
		pid_t r = waitpid(pid, &b->status, WNOHANG);
		char *con;

		if (r == pid)
			break;
		con = slurp(serial);
		if (b->t_init < 0 && strstr(con, "Run /init"))
			b->t_init = now_s() - t0;
		if (b->t_marker < 0 && strstr(con, "LVMM-GUEST-UP"))
			b->t_marker = now_s() - t0;
		if (strlen(con) != console_len) {
			console_len = strlen(con);
			t_progress = now_s();
		}
		free(con);
		if (!b->killed &&
		    (now_s() - t0 > BOOT_LIMIT_S || now_s() - t_progress > STALL_LIMIT_S)) {
			fprintf(stderr,
				"linux boot: stopping lvmm after %.0f s (console silent %.0f s)\n",
				now_s() - t0, now_s() - t_progress);
			kill(pid, SIGKILL);
			b->killed = true;
		}
		usleep(POLL_US);
	}
	b->t_exit = now_s() - t0;
	b->console = slurp(serial);
	b->log = slurp(logpath);
	if (b->t_init < 0 && strstr(b->console, "Run /init"))
		b->t_init = b->t_exit;
	if (b->t_marker < 0 && strstr(b->console, "LVMM-GUEST-UP"))
		b->t_marker = b->t_exit;
	close(sfd);
	close(lfd);
	unlink(serial);
	unlink(logpath);

	printf("linux boot, %u CPU(s): host time to \"Run /init\" %.1f s, to marker %.1f s, "
	       "to exit %.1f s; kernel printk time at \"Run /init\" %.1f s\n",
	       cpus, b->t_init, b->t_marker, b->t_exit, printk_time(b->console, "Run /init"));
	fflush(stdout);
}

/* On failure the console tail is what tells why; print it before asserting. */
static void boot_report(const struct boot *b)
{
	size_t len = strlen(b->console);

	fprintf(stderr, "---- lvmm output ----\n%s---- console (last 3000 bytes) ----\n%s\n----\n",
		b->log, b->console + (len > 3000 ? len - 3000 : 0));
}

static void boot_free(struct boot *b)
{
	free(b->console);
	free(b->log);
}

static void assert_powered_off(const struct boot *b)
{
	ck_assert_msg(!b->killed, "lvmm stopped by the test: the guest hung or took over %d s",
		      BOOT_LIMIT_S);
	ck_assert_msg(WIFEXITED(b->status) && WEXITSTATUS(b->status) == 0,
		      "lvmm did not exit 0 (wait status %#x)", b->status);
	ck_assert_msg(strstr(b->log, "powered off"), "lvmm did not report a guest poweroff");
	ck_assert_msg(strstr(b->console, "lvmm-init: powering off"),
		      "/init did not reach poweroff");
}

START_TEST(test_boot_smp2)
{
	struct boot b;

	boot_guest(2, "console=ttyS0 lvmm.test=smoke", &b);
	boot_report(&b);
	ck_assert_msg(strstr(b.console, "smp: Brought up 1 node, 2 CPUs"),
		      "the kernel did not bring up both CPUs");
	ck_assert_msg(strstr(b.console, "LVMM-GUEST-UP cpus=2"), "no /init marker with cpus=2");
	ck_assert_msg(strstr(b.console, "LVMM-SMOKE-OK"), "the smoke test script did not pass");
	ck_assert_msg(strstr(b.console, "LVMM-TEST-DONE smoke rc=0"), "smoke test rc != 0");
	assert_powered_off(&b);
	boot_free(&b);
}
END_TEST

/* One vCPU separates "Linux user space works" from "SMP bring-up works" when the test above fails.
 */
START_TEST(test_boot_up1)
{
	struct boot b;

	boot_guest(1, "console=ttyS0", &b);
	boot_report(&b);
	ck_assert_msg(strstr(b.console, "LVMM-GUEST-UP cpus=1"), "no /init marker with cpus=1");
	ck_assert_msg(!strstr(b.console, "LVMM-TEST-DONE"), "a test ran without lvmm.test=");
	assert_powered_off(&b);
	boot_free(&b);
}
END_TEST

/* Separate cases so CK_RUN_CASE=up1 or smp2 boots one configuration only. */
static Suite *linux_boot_suite(void)
{
	Suite *s = suite_create("linux_boot");
	TCase *up1 = tcase_create("up1");
	TCase *smp2 = tcase_create("smp2");

	tcase_set_timeout(up1, TCASE_TIMEOUT_S);
	tcase_add_test(up1, test_boot_up1);
	suite_add_tcase(s, up1);
	tcase_set_timeout(smp2, TCASE_TIMEOUT_S);
	tcase_add_test(smp2, test_boot_smp2);
	suite_add_tcase(s, smp2);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(linux_boot_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
