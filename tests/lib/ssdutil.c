/* softssd daemons for tests (ssdutil.h). */
#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include "client/lio_client.h"
#include "ssdutil.h"
#include "testutil.h"

#define SSD_ARGS_MAX 32
#define SSD_UP_MS    30000 /* a loaded host starts processes slowly */

pid_t testutil_ssd_start(const char *name, const char *log, const char *const opts[])
{
	const char *argv[SSD_ARGS_MAX + 1] = {testutil_lvmm(), "ssd", "serve", name};
	unsigned n = 4, i;
	pid_t pid;

	for (i = 0; opts && opts[i]; i++) {
		ck_assert_uint_lt(n, SSD_ARGS_MAX);
		argv[n++] = opts[i];
	}
	argv[n] = NULL;
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (!pid) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);

		dup2(fd, 1);
		dup2(fd, 2);
		execv(argv[0], (char **)argv);
		_exit(127);
	}
	for (i = 0; i < SSD_UP_MS / 25; i++) {
		struct lio_client *c;
		char err[256];

		if (!lio_client_connect(&c, name, "probe", NULL, err, sizeof(err))) {
			lio_client_close(c);
			return pid;
		}
		testutil_sleep_ms(25);
	}
	kill(pid, SIGKILL);
	ck_abort_msg("softssd %s did not come up: %s", name, testutil_slurp(log));
	return -1;
}

int testutil_ssd_stop(pid_t *pid, int sig)
{
	int st;

	if (*pid <= 0)
		return 0;
	kill(*pid, sig);
	st = testutil_wait_limit(*pid, "softssd", 20);
	*pid = 0;
	return st;
}
