/* A softssd for the lio backend's test and benchmark: `lvmm ssd serve` on a sparse backing in a
 * directory of its own (LVMM_RUN_DIR there), volumes created and imported with `lvmm ssd vol`. */
#ifndef GPUFS_TESTS_LIO_FIXTURE_H
#define GPUFS_TESTS_LIO_FIXTURE_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LIO_FX_SSD "gpufs"

struct lio_fx {
	char dir[512];
	char run[600];
	char sock[700];
	char log[600];
	const char *lvmm;
	pid_t pid;
};

/* Runs a shell command with LVMM_RUN_DIR set to the fixture's; its exit status (-1: not run). */
__attribute__((format(printf, 2, 3))) static int lio_fx_sh(const struct lio_fx *x, const char *fmt,
							   ...)
{
	char cmd[4096];
	int n, st;
	va_list ap;

	n = snprintf(cmd, sizeof(cmd), "LVMM_RUN_DIR='%s' ", x->run);
	va_start(ap, fmt);
	vsnprintf(cmd + n, sizeof(cmd) - (size_t)n, fmt, ap);
	va_end(ap);
	st = system(cmd);
	return st < 0 || !WIFEXITED(st) ? -1 : WEXITSTATUS(st);
}

/*
 * Starts softssd (4096-byte LBAs, backing_mb MiB, the filter off: sandboxes such as gVisor
 * differ in what they let a filter name) in dir, the binary $LVMM. 0; -ENOENT when $LVMM is
 * unset or not there (the caller skips); -ETIMEDOUT when no socket came within 30 s (the log says
 * why). The daemon gets SIGTERM when the process that started it dies (a failed case's child).
 * $LIO_FX_WORKERS, when set, is softssd's --workers (softssd refuses a count outside 1..64 and
 * exits: -ECHILD, its log says why); otherwise softssd's default.
 */
static inline int lio_fx_start(struct lio_fx *x, const char *dir, unsigned backing_mb)
{
	char img[700], size[32], *argv[16];
	const char *nw = getenv("LIO_FX_WORKERS");
	struct stat sb;
	pid_t parent = getpid();
	int i = 0;

	memset(x, 0, sizeof(*x));
	x->lvmm = getenv("LVMM");
	if (!x->lvmm || !*x->lvmm || access(x->lvmm, X_OK)) {
		x->lvmm = NULL;
		return -ENOENT;
	}
	snprintf(x->dir, sizeof(x->dir), "%s", dir);
	snprintf(x->run, sizeof(x->run), "%s/run", dir);
	snprintf(x->sock, sizeof(x->sock), "%s/ssd/" LIO_FX_SSD ".sock", x->run);
	snprintf(x->log, sizeof(x->log), "%s/softssd.log", dir);
	snprintf(img, sizeof(img), "%s/ssd.img", dir);
	snprintf(size, sizeof(size), "%uM", backing_mb);
	mkdir(x->run, 0700);
	setenv("LVMM_RUN_DIR", x->run, 1);
	argv[i++] = (char *)x->lvmm;
	argv[i++] = (char *)"ssd";
	argv[i++] = (char *)"serve";
	argv[i++] = (char *)LIO_FX_SSD;
	argv[i++] = (char *)"--backing";
	argv[i++] = img;
	argv[i++] = (char *)"--size";
	argv[i++] = size;
	argv[i++] = (char *)"--lba-size";
	argv[i++] = (char *)"4096";
	argv[i++] = (char *)"--seccomp";
	argv[i++] = (char *)"off";
	if (nw && *nw) {
		argv[i++] = (char *)"--workers";
		argv[i++] = (char *)nw;
	}
	argv[i] = NULL;
	x->pid = fork();
	if (x->pid < 0)
		return -errno;
	if (!x->pid) {
		int fd = open(x->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent)
			_exit(1);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execv(x->lvmm, argv);
		_exit(127);
	}
	for (i = 0; i < 300; i++) {
		if (!stat(x->sock, &sb))
			return 0;
		if (waitpid(x->pid, NULL, WNOHANG) == x->pid) {
			x->pid = 0;
			return -ECHILD;
		}
		usleep(100000);
	}
	return -ETIMEDOUT;
}

static inline void lio_fx_stop(struct lio_fx *x)
{
	if (x->pid > 0) {
		kill(x->pid, SIGTERM);
		waitpid(x->pid, NULL, 0);
	}
	x->pid = 0;
}

/* A volume of size bytes holding file byte for byte. 0 or the failing command's status. */
static inline int lio_fx_import(const struct lio_fx *x, const char *vol, unsigned long long size,
				const char *file)
{
	int r = lio_fx_sh(x, "'%s' ssd vol create " LIO_FX_SSD " %s %llu >>'%s' 2>&1", x->lvmm, vol,
			  size, x->log);

	if (!r)
		r = lio_fx_sh(x, "'%s' ssd vol import " LIO_FX_SSD " %s '%s' >>'%s' 2>&1", x->lvmm,
			      vol, file, x->log);
	return r;
}

static inline int lio_fx_export(const struct lio_fx *x, const char *vol, const char *file)
{
	return lio_fx_sh(x, "'%s' ssd vol export " LIO_FX_SSD " %s '%s' >>'%s' 2>&1", x->lvmm, vol,
			 file, x->log);
}

#endif
