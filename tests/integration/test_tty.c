/* Runs lvmm on a pseudo-terminal as a person types it in a shell: the stdio console on a tty
 * (seccomp lets its terminal handling through), typed input reaching the guest, Ctrl-C stopping
 * the VM cleanly, and the terminal's modes restored after lvmm exits, also when it is killed
 * with SIGKILL (no handler of lvmm's runs: its terminal guard process restores them). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "testutil.h"

#define TTY_LIMIT_S 120 /* a safety net against a hung VM, not a speed assertion */

struct tty_run {
	pid_t pid;
	int master;
	int slave; /* kept open here so the terminal's modes can be read after lvmm exits */
	char out[TESTUTIL_OUT_MAX];
	size_t nout;
	bool exited;
	int status;
	struct termios before;
};

/* Starts lvmm on a new pty as the session leader and foreground job (as a shell's child is). */
static void tty_start(struct tty_run *t, const char *mode)
{
	char cmdline[64];
	char *slave_name;

	memset(t, 0, sizeof(*t));
	t->master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	ck_assert_int_ge(t->master, 0);
	ck_assert_int_eq(grantpt(t->master), 0);
	ck_assert_int_eq(unlockpt(t->master), 0);
	slave_name = ptsname(t->master);
	ck_assert_ptr_nonnull(slave_name);
	t->slave = open(slave_name, O_RDWR | O_NOCTTY | O_CLOEXEC);
	ck_assert_int_ge(t->slave, 0);
	ck_assert_int_eq(tcgetattr(t->slave, &t->before), 0);
	snprintf(cmdline, sizeof(cmdline), "bench.mode=%s", mode);

	t->pid = fork();
	ck_assert_int_ge(t->pid, 0);
	if (!t->pid) {
		int fd;

		setsid();
		fd = open(slave_name, O_RDWR); /* becomes the controlling terminal */
		if (fd < 0)
			_exit(126);
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		execl(testutil_lvmm(), "lvmm", "run", "--kernel", testutil_bench_guest(),
		      "--memory", "64M", "--cmdline", cmdline, (char *)NULL);
		_exit(127);
	}
}

/* Reads the terminal until want appears in everything read so far, lvmm exits, or the limit
 * passes. */
static bool tty_wait_for(struct tty_run *t, const char *want, unsigned limit_s)
{
	double end = testutil_now_s() + limit_s;

	/* At least one look, also with limit_s 0: drain what is there now. */
	do {
		struct pollfd p = {.fd = t->master, .events = POLLIN};
		bool gone = t->exited;
		ssize_t n;

		if (!gone && waitpid(t->pid, &t->status, WNOHANG) == t->pid)
			t->exited = gone = true;
		if (poll(&p, 1, limit_s && !gone ? 200 : 0) <= 0) {
			if (gone) /* exited and everything it wrote is read */
				break;
			continue;
		}
		n = read(t->master, t->out + t->nout, sizeof(t->out) - 1 - t->nout);
		if (n <= 0) /* EIO: every slave fd of lvmm closed */
			break;
		t->nout += (size_t)n;
		t->out[t->nout] = 0;
	} while (!strstr(t->out, want) && testutil_now_s() < end);
	return strstr(t->out, want) != NULL;
}

/* Waits for lvmm to exit, draining the terminal meanwhile; returns the wait status. */
static int tty_finish(struct tty_run *t)
{
	double end = testutil_now_s() + TTY_LIMIT_S;

	while (!t->exited) {
		if (testutil_now_s() > end) {
			kill(t->pid, SIGKILL);
			waitpid(t->pid, &t->status, 0);
			ck_abort_msg("lvmm did not exit; terminal: %s", t->out);
		}
		tty_wait_for(t, "\x01never\x01", 1);
	}
	tty_wait_for(t, "\x01never\x01", 0);
	return t->status;
}

static void tty_close(struct tty_run *t)
{
	close(t->master);
	close(t->slave);
}

/* Canonical mode, echo and signal keys are back as they were before lvmm ran. */
static void assert_modes_restored(const struct tty_run *t)
{
	struct termios after;

	ck_assert_int_eq(tcgetattr(t->slave, &after), 0);
	ck_assert_msg(after.c_lflag == t->before.c_lflag, "c_lflag %#x, was %#x",
		      (unsigned)after.c_lflag, (unsigned)t->before.c_lflag);
	ck_assert_msg(after.c_iflag == t->before.c_iflag, "c_iflag %#x, was %#x",
		      (unsigned)after.c_iflag, (unsigned)t->before.c_iflag);
	ck_assert_msg(after.c_oflag == t->before.c_oflag, "c_oflag %#x, was %#x",
		      (unsigned)after.c_oflag, (unsigned)t->before.c_oflag);
	ck_assert(after.c_lflag & ICANON);
	ck_assert(after.c_lflag & ECHO);
}

START_TEST(test_boots_on_a_terminal)
{
	struct tty_run t;
	int status;

	tty_start(&t, "hello");
	ck_assert_msg(tty_wait_for(&t, "guest powered off", TTY_LIMIT_S), "terminal: %s", t.out);
	status = tty_finish(&t);
	ck_assert_msg(!strstr(t.out, "seccomp"), "terminal: %s", t.out);
	ck_assert_msg(strstr(t.out, "bench: hello from ring 3"), "terminal: %s", t.out);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %#x; terminal: %s",
		      status, t.out);
	assert_modes_restored(&t);
	tty_close(&t);
}
END_TEST

START_TEST(test_typed_line_reaches_the_guest)
{
	const char *line = "typed on a tty\r";
	struct tty_run t;
	int status;

	tty_start(&t, "echo");
	ck_assert_msg(tty_wait_for(&t, "bench: type a line", TTY_LIMIT_S), "terminal: %s", t.out);
	/* Raw mode: keys go to the guest one by one, the terminal itself echoes nothing. */
	ck_assert_int_eq(write(t.master, line, strlen(line)), (ssize_t)strlen(line));
	ck_assert_msg(tty_wait_for(&t, "bench: got 'typed on a tty'", TTY_LIMIT_S), "terminal: %s",
		      t.out);
	status = tty_finish(&t);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %#x; terminal: %s",
		      status, t.out);
	ck_assert_msg(!strstr(t.out, "seccomp"), "terminal: %s", t.out);
	assert_modes_restored(&t);
	tty_close(&t);
}
END_TEST

START_TEST(test_ctrl_c_stops_the_vm)
{
	struct tty_run t;
	int status;

	tty_start(&t, "spin");
	ck_assert_msg(tty_wait_for(&t, "bench: heartbeat 1", TTY_LIMIT_S), "terminal: %s", t.out);
	/* ^C typed at the keyboard: the line discipline turns it into SIGINT for lvmm. */
	ck_assert_int_eq(write(t.master, "\x03", 1), 1);
	status = tty_finish(&t);
	ck_assert_msg(WIFEXITED(status), "lvmm died by signal %d; terminal: %s",
		      WIFSIGNALED(status) ? WTERMSIG(status) : -1, t.out);
	ck_assert_msg(WEXITSTATUS(status) == 0, "exit %d; terminal: %s", WEXITSTATUS(status),
		      t.out);
	ck_assert_msg(strstr(t.out, "stopped by signal INT"), "terminal: %s", t.out);
	ck_assert_msg(!strstr(t.out, "seccomp"), "terminal: %s", t.out);
	assert_modes_restored(&t);
	tty_close(&t);
}
END_TEST

START_TEST(test_sigkill_restores_the_terminal)
{
	struct tty_run t_kill;
	double end;
	struct termios now;
	bool raw_seen;

	tty_start(&t_kill, "spin");
	ck_assert_msg(tty_wait_for(&t_kill, "bench: heartbeat 1", TTY_LIMIT_S), "terminal: %s",
		      t_kill.out);
	ck_assert_int_eq(tcgetattr(t_kill.slave, &now), 0);
	raw_seen = !(now.c_lflag & ICANON) && !(now.c_lflag & ECHO);
	ck_assert_msg(raw_seen, "lvmm did not put the terminal in raw mode (c_lflag %#x)",
		      (unsigned)now.c_lflag);
	ck_assert_int_eq(kill(t_kill.pid, SIGKILL), 0);
	ck_assert_int_eq(waitpid(t_kill.pid, &t_kill.status, 0), t_kill.pid);
	t_kill.exited = true;
	ck_assert(WIFSIGNALED(t_kill.status) && WTERMSIG(t_kill.status) == SIGKILL);
	/* The guard notices the end of its pipe and restores; wait for that state, bounded. */
	end = testutil_now_s() + TTY_LIMIT_S;
	do {
		ck_assert_int_eq(tcgetattr(t_kill.slave, &now), 0);
		if (now.c_lflag == t_kill.before.c_lflag)
			break;
		usleep(10000);
	} while (testutil_now_s() < end);
	assert_modes_restored(&t_kill);
	tty_close(&t_kill);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("tty");
	TCase *tc = tcase_create("stdio console on a pseudo-terminal");

	if (!testutil_kvm_usable()) {
		testutil_skip("tty: /dev/kvm not usable here");
		return 0;
	}
	tcase_set_timeout(tc, 3 * TTY_LIMIT_S);
	tcase_add_test(tc, test_boots_on_a_terminal);
	tcase_add_test(tc, test_typed_line_reaches_the_guest);
	tcase_add_test(tc, test_ctrl_c_stops_the_vm);
	tcase_add_test(tc, test_sigkill_restores_the_terminal);
	suite_add_tcase(s, tc);
	return testutil_run_suite(s);
}
