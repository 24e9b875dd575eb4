/* Linux guest boot harness shared by tests/linux: lvmm with a console file and a log, marker
 * timing, a kill after a limit or a console stall, failure reports (see linuxboot.h). */
#include "linuxboot.h"

#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

/* Console polling period: each poll rereads the console file. */
#define LINUXBOOT_POLL_US  200000
#define LINUXBOOT_ARGS_MAX 24

const char *linuxboot_guest_file(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/guest/%s", testutil_env_or("BUILD", "build"), name);
	ck_assert_msg(access(buf, R_OK) == 0, "%s missing: run make guest", buf);
	return buf;
}

static void linuxboot_marks(struct linuxboot *b, const char *const marks[], const char *con,
			    double t)
{
	unsigned int i;

	for (i = 0; marks && marks[i] && i < LINUXBOOT_MARKS_MAX; i++)
		if (b->t_mark[i] < 0 && strstr(con, marks[i]))
			b->t_mark[i] = t;
}

void linuxboot_run(struct linuxboot *b, char *const args[], const char *const marks[],
		   unsigned int limit_s, unsigned int stall_s)
{
	linuxboot_run_hook(b, args, marks, limit_s, stall_s, NULL, NULL);
}

void linuxboot_run_hook(struct linuxboot *b, char *const args[], const char *const marks[],
			unsigned int limit_s, unsigned int stall_s,
			void (*hook)(const char *console, void *arg), void *arg)
{
	const char *lvmm = testutil_lvmm();
	char serial[] = "/tmp/lvmm-linuxboot-serial-XXXXXX";
	char logpath[] = "/tmp/lvmm-linuxboot-log-XXXXXX";
	char serial_arg[64], *argv[LINUXBOOT_ARGS_MAX + 5];
	int sfd = mkstemp(serial), lfd = mkstemp(logpath), n = 0, i;
	double t0, t_progress;
	size_t console_len = 0;
	pid_t pid;

	ck_assert_msg(sfd >= 0 && lfd >= 0, "mkstemp: %s", strerror(errno));
	ck_assert_msg(access(lvmm, X_OK) == 0, "LVMM=%s is not executable", lvmm);
	snprintf(serial_arg, sizeof(serial_arg), "file=%s", serial);
	argv[n++] = (char *)lvmm;
	argv[n++] = "run";
	for (i = 0; args[i]; i++) {
		ck_assert_msg(i < LINUXBOOT_ARGS_MAX, "linuxboot: more than %d arguments",
			      LINUXBOOT_ARGS_MAX);
		argv[n++] = args[i];
		/* a jailed lvmm writes the console as the jail's user */
		if (!strcmp(args[i], "--jail-uid") && args[i + 1]) {
			unsigned long u = strtoul(args[i + 1], NULL, 10);

			ck_assert_int_eq(fchown(sfd, (uid_t)u, (gid_t)u), 0);
		}
	}
	argv[n++] = "--serial";
	argv[n++] = serial_arg;
	argv[n] = NULL;

	memset(b, 0, sizeof(*b));
	for (i = 0; i < LINUXBOOT_MARKS_MAX; i++)
		b->t_mark[i] = -1;
	t0 = t_progress = testutil_now_s();
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		dup2(lfd, STDOUT_FILENO);
		dup2(lfd, STDERR_FILENO);
		execv(lvmm, argv);
		dprintf(STDERR_FILENO, "exec %s: %s\n", lvmm, strerror(errno));
		_exit(127);
	}
	for (;;) {
		bool done = waitpid(pid, &b->status, WNOHANG) == pid;
		char *con = testutil_slurp(serial);
		double t = testutil_now_s() - t0;

		/* Read once more after the exit: the last markers land just before it. */
		linuxboot_marks(b, marks, con, t);
		if (hook && !done)
			hook(con, arg);
		if (strlen(con) != console_len) {
			console_len = strlen(con);
			t_progress = testutil_now_s();
		}
		free(con);
		if (done)
			break;
		if (!b->killed &&
		    (t > limit_s || (stall_s && testutil_now_s() - t_progress > stall_s))) {
			fprintf(stderr,
				"linuxboot: stopping lvmm after %.0f s (console silent %.0f s)\n",
				t, testutil_now_s() - t_progress);
			kill(pid, SIGKILL);
			b->killed = true;
		}
		usleep(LINUXBOOT_POLL_US);
	}
	b->t_exit = testutil_now_s() - t0;
	b->console = testutil_slurp(serial);
	b->log = testutil_slurp(logpath);
	close(sfd);
	close(lfd);
	unlink(serial);
	unlink(logpath);
}

double linuxboot_printk_time(const char *console, const char *what)
{
	const char *hit = strstr(console, what), *line;
	double t;

	if (!hit)
		return -1;
	for (line = hit; line > console && line[-1] != '\n'; line--)
		;
	return sscanf(line, "[ %lf]", &t) == 1 ? t : -1;
}

void linuxboot_report(const struct linuxboot *b, size_t tail)
{
	size_t len = strlen(b->console);

	fprintf(stderr, "---- lvmm output ----\n%s---- console (last %zu bytes) ----\n%s\n----\n",
		b->log, tail, b->console + (len > tail ? len - tail : 0));
}

void linuxboot_free(struct linuxboot *b)
{
	free(b->console);
	free(b->log);
	b->console = b->log = NULL;
}
