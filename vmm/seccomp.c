/* The lvmm system-call allow-list: one table for every thread (main, API, vCPUs, device I/O).
 * A call outside it raises SIGSYS; the handler names the call and ends lvmm. */
#include <errno.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "seccomp_filter.h"
#include "serial.h"

/* Add a system call here when a component needs it; keep the reason in the comment. */
static const char *const seccomp_allowed[] = {
    /* memory and threads */
    "brk",
    "mmap",
    "munmap",
    "mprotect",
    "madvise",
    "mremap",
    "clone",
    "clone3",
    "set_robust_list",
    "rseq",
    "futex",
    "exit",
    "exit_group",
    "sched_yield",
    "setpriority",
    "sched_getaffinity",
    "membarrier",
    "getpid",
    "gettid",
    /* stdio console: is lvmm the terminal's foreground job (tcgetpgrp against getpgrp)? */
    "getpgrp",
    "prctl",
    "getrandom",
    /* signals: vCPU kicks, stop requests, crash-path terminal restore */
    "rt_sigaction",
    "rt_sigprocmask",
    "rt_sigreturn",
    "rt_sigtimedwait",
    "sigaltstack",
    "tgkill",
    "tkill",
    "restart_syscall",
    "signalfd4",
    /* time */
    "clock_gettime",
    "clock_nanosleep",
    "nanosleep",
    "gettimeofday",
    "timerfd_create",
    "timerfd_settime",
    /* KVM, console, files (kernel, initramfs, disk images, serial file) */
    "ioctl",
    "read",
    "write",
    "readv",
    "writev",
    "pread64",
    "pwrite64",
    "preadv",
    "pwritev",
    "close",
    "openat",
    "newfstatat",
    "fstat",
    "statx",
    "lseek",
    "fcntl",
    "dup",
    "dup3",
    "pipe2",
    "faccessat",
    "faccessat2",
    "access",
    "readlink",
    "fsync",
    "fdatasync",
    "fallocate",
    "ftruncate",
    "memfd_create",
    "unlink",
    "unlinkat",
    "fchmod",
    "umask",
    "fstatfs",
    "uname",
    "getcwd",
    /* event loops and eventfds (irqfd, ioeventfd, API wake-ups) */
    "poll",
    "ppoll",
    "epoll_create1",
    "epoll_ctl",
    "epoll_wait",
    "epoll_pwait",
    "eventfd2",
    /* io_uring data path */
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    /* REST API and softssd sockets (SCM_RIGHTS) */
    "socket",
    "bind",
    "listen",
    "accept4",
    "connect",
    "sendmsg",
    "recvmsg",
    "sendto",
    "recvfrom",
    "shutdown",
    "getsockopt",
    "setsockopt",
    "getsockname",
};

bool seccomp_disabled(void)
{
	const char *e = getenv("LVMM_SECCOMP");

	return e && !strcmp(e, "off");
}

static void seccomp_sigsys(int sig, siginfo_t *si, void *uctx)
{
	char msg[128];
	int n;

	(void)sig;
	(void)uctx;
	serial_term_restore();
	n = snprintf(msg, sizeof(msg),
		     "lvmm: seccomp: system call %d is not allowed (LVMM_SECCOMP=off to debug)\n",
		     si->si_syscall);
	if (n > 0 && write(STDERR_FILENO, msg, (size_t)n) < 0)
		_exit(1);
	_exit(1);
}

int seccomp_install(char *err, unsigned errlen)
{
	struct sigaction sa;
	scmp_filter_ctx ctx;
	unsigned i;
	int ret;

	if (seccomp_disabled())
		return 0;
#ifdef __SANITIZE_ADDRESS__
	/* LeakSanitizer stops the world with ptrace at exit; sanitizer builds are for tests. */
	return 0;
#endif
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = seccomp_sigsys;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSYS, &sa, NULL);

	ctx = seccomp_init(SCMP_ACT_TRAP);
	if (!ctx) {
		snprintf(err, errlen, "seccomp: cannot create a filter");
		return -ENOMEM;
	}
	for (i = 0; i < sizeof(seccomp_allowed) / sizeof(seccomp_allowed[0]); i++) {
		int nr = seccomp_syscall_resolve_name(seccomp_allowed[i]);

		if (nr == __NR_SCMP_ERROR)
			continue; /* not on this architecture (e.g. "open" on arm64) */
		ret = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
		if (ret) {
			snprintf(err, errlen, "seccomp: rule for %s: %s", seccomp_allowed[i],
				 strerror(-ret));
			goto out;
		}
	}
	/* Every thread that exists now gets the filter too (API, I/O threads of devices). */
	ret = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
	if (!ret)
		ret = seccomp_load(ctx);
	if (ret)
		snprintf(err, errlen, "seccomp: loading the filter: %s", strerror(-ret));
out:
	seccomp_release(ctx);
	return ret;
}
