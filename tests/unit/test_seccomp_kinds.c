/* lvmm's seccomp filters per thread kind, each in a forked child: a forbidden call kills the
 * process with SIGSYS, the calls that kind makes pass, and log mode lets a forbidden call by. */
#include <check.h>
#include <linux/if_tun.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <linux/vfio.h>
#include <liburing.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "lightiov/uapi.h"
#include "seccomp_filter.h"
#include "testutil.h"

enum probe {
	P_NONE,
	P_SOCKET_INET,
	P_SOCKET_UNIX,
	P_FORK,
	P_CLONE_NEWNET,
	P_TIOCSTI,
	P_MMAP_EXEC,
	P_TGKILL_OTHER,
	P_OPENAT,
	P_KVM_CREATE_VM,
	P_KVM_RUN,
	P_TCGETS,
	P_THREAD,
	P_EXECVE,
	P_LIO_QP_CREATE,
	P_LIO_VOL_CREATE,
	P_LIO_FOREIGN,
	P_TUNSETIFF,
	P_TUNSETOFFLOAD,
	P_VFIO_SET_IRQS,
	P_VFIO_DMA_MAP,
	P_VFIO_FEATURE,
};

static void *thread_noop(void *arg)
{
	return arg;
}

/* Runs one call; returns normally when the filter let it through (whatever its result). */
static void probe_run(enum probe p)
{
	char c = 0;
	pthread_t t;
	pid_t pid;
	void *m;
	int fd;

	switch (p) {
	case P_NONE:
		break;
	case P_SOCKET_INET:
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd >= 0)
			close(fd);
		break;
	case P_SOCKET_UNIX:
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			_exit(3);
		close(fd);
		break;
	case P_FORK:
		pid = (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
		if (pid == 0)
			_exit(0);
		break;
	case P_CLONE_NEWNET:
		/* a thread's flags plus a namespace: refused by the flag check */
		syscall(SYS_clone,
			CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD |
			    CLONE_NEWNET,
			0, 0, 0, 0);
		break;
	case P_TIOCSTI:
		ioctl(-1, TIOCSTI, &c);
		break;
	case P_MMAP_EXEC:
		m = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m != MAP_FAILED)
			munmap(m, 4096);
		break;
	case P_TGKILL_OTHER:
		syscall(SYS_tgkill, 1, 1, 0);
		break;
	case P_OPENAT:
		fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (fd >= 0)
			close(fd);
		break;
	case P_KVM_CREATE_VM:
		ioctl(-1, KVM_CREATE_VM, 0);
		break;
	case P_KVM_RUN:
		/* allowed calls still fail on a bad fd: the point is that they return */
		if (ioctl(-1, KVM_RUN, 0) != -1 || errno != EBADF)
			_exit(4);
		break;
	case P_TUNSETIFF:
		ioctl(-1, TUNSETIFF, NULL);
		break;
	case P_TUNSETOFFLOAD:
		ioctl(-1, TUNSETOFFLOAD, 0);
		break;
	case P_VFIO_SET_IRQS:
		ioctl(-1, VFIO_DEVICE_SET_IRQS, NULL);
		break;
	case P_VFIO_DMA_MAP:
		ioctl(-1, VFIO_IOMMU_MAP_DMA, NULL);
		break;
	case P_VFIO_FEATURE:
		ioctl(-1, VFIO_DEVICE_FEATURE, NULL);
		break;
	case P_TCGETS: {
		struct termios tio;

		ioctl(-1, TCGETS, &tio);
		break;
	}
	case P_THREAD:
		if (pthread_create(&t, NULL, thread_noop, NULL) || pthread_join(t, NULL))
			_exit(5);
		break;
	case P_LIO_QP_CREATE: {
		struct lio_qp_create q = {0};

		/* lightiov.ko's requests are let by on any fd: EBADF shows the call returned */
		if (ioctl(-1, LIO_IOC_QP_CREATE, &q) != -1 || errno != EBADF)
			_exit(6);
		break;
	}
	case P_LIO_VOL_CREATE: {
		struct lio_vol v = {0};

		if (ioctl(-1, LIO_IOC_VOL_CREATE, &v) != -1 || errno != EBADF)
			_exit(7);
		break;
	}
	case P_LIO_FOREIGN:
		/* the 'L' type with a number lightiov.ko does not have */
		ioctl(-1, _IOW('L', 0x7f, struct lio_qp_ref), NULL);
		break;
	case P_EXECVE: {
		char *argv[] = {"/bin/true", NULL};

		execve(argv[0], argv, environ);
		break;
	}
	}
}

/* Status of a child that loads the MAIN filter, stacks kind's on it (unless MAIN), then runs
 * probe p and exits 0 if still alive. */
static int child_status(enum seccomp_mode mode, enum seccomp_kind kind, enum probe p)
{
	char err[256];
	int st;
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (!pid) {
		alarm(10);
		seccomp_mode_set(mode);
		if (seccomp_install(err, sizeof(err)))
			_exit(10);
		if (kind != SECCOMP_MAIN && seccomp_thread_install(kind, err, sizeof(err)))
			_exit(11);
		probe_run(p);
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	return st;
}

static void expect_killed(enum seccomp_kind kind, enum probe p)
{
	int st = child_status(SECCOMP_MODE_KILL, kind, p);

	ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS,
		      "%s filter, probe %d: not killed by SIGSYS (status 0x%x)",
		      seccomp_kind_name(kind), p, st);
}

static void expect_allowed(enum seccomp_kind kind, enum probe p)
{
	int st = child_status(SECCOMP_MODE_KILL, kind, p);

	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "%s filter, probe %d: refused (status 0x%x)", seccomp_kind_name(kind), p, st);
}

START_TEST(test_main_refuses)
{
	expect_killed(SECCOMP_MAIN, P_SOCKET_INET);
	expect_killed(SECCOMP_MAIN, P_FORK);
	expect_killed(SECCOMP_MAIN, P_CLONE_NEWNET);
	expect_killed(SECCOMP_MAIN, P_TIOCSTI);
	expect_killed(SECCOMP_MAIN, P_MMAP_EXEC);
	expect_killed(SECCOMP_MAIN, P_TGKILL_OTHER);
	expect_killed(SECCOMP_MAIN, P_EXECVE);
	expect_killed(SECCOMP_MAIN, P_LIO_FOREIGN);
}
END_TEST

START_TEST(test_main_allows)
{
	expect_allowed(SECCOMP_MAIN, P_NONE);
	expect_allowed(SECCOMP_MAIN, P_SOCKET_UNIX);
	expect_allowed(SECCOMP_MAIN, P_THREAD);
	expect_allowed(SECCOMP_MAIN, P_OPENAT);
	expect_allowed(SECCOMP_MAIN, P_KVM_CREATE_VM);
	expect_allowed(SECCOMP_MAIN, P_KVM_RUN);
	expect_allowed(SECCOMP_MAIN, P_TCGETS);
	expect_allowed(SECCOMP_MAIN, P_LIO_QP_CREATE);
	expect_allowed(SECCOMP_MAIN, P_LIO_VOL_CREATE);
}
END_TEST

START_TEST(test_vcpu_refuses)
{
	expect_killed(SECCOMP_VCPU, P_OPENAT);
	expect_killed(SECCOMP_VCPU, P_SOCKET_UNIX);
	expect_killed(SECCOMP_VCPU, P_THREAD);
	expect_killed(SECCOMP_VCPU, P_KVM_CREATE_VM);
	expect_killed(SECCOMP_VCPU, P_TCGETS);
	expect_killed(SECCOMP_VCPU, P_MMAP_EXEC);
	expect_killed(SECCOMP_VCPU, P_LIO_VOL_CREATE);
}
END_TEST

START_TEST(test_vcpu_allows)
{
	expect_allowed(SECCOMP_VCPU, P_NONE);
	expect_allowed(SECCOMP_VCPU, P_KVM_RUN);
	expect_allowed(SECCOMP_VCPU, P_LIO_QP_CREATE);
}
END_TEST

START_TEST(test_io_refuses)
{
	expect_killed(SECCOMP_IO, P_OPENAT);
	expect_killed(SECCOMP_IO, P_SOCKET_UNIX);
	expect_killed(SECCOMP_IO, P_THREAD);
	expect_killed(SECCOMP_IO, P_KVM_RUN);
	expect_killed(SECCOMP_IO, P_TCGETS);
	expect_killed(SECCOMP_IO, P_LIO_VOL_CREATE);
}
END_TEST

/* The socket kind (vsock's thread): AF_UNIX sockets it may create, the rest as IO. */
START_TEST(test_sock_kind)
{
	expect_allowed(SECCOMP_SOCK, P_NONE);
	expect_allowed(SECCOMP_SOCK, P_SOCKET_UNIX);
	expect_killed(SECCOMP_SOCK, P_SOCKET_INET);
	expect_killed(SECCOMP_SOCK, P_OPENAT);
	expect_killed(SECCOMP_SOCK, P_THREAD);
	expect_killed(SECCOMP_SOCK, P_KVM_RUN);
	expect_killed(SECCOMP_SOCK, P_LIO_VOL_CREATE);
	ck_assert_str_eq(seccomp_kind_name(SECCOMP_SOCK), "sock");
}
END_TEST

/* virtio-net: the main thread sets a tap up; its I/O thread only changes the offloads. */
/* Passed-through functions: VFIO's set-up on the main thread, MSI-X vectors from a vCPU's
 * config write; device I/O threads make no VFIO requests. */
START_TEST(test_vfio_requests)
{
	expect_allowed(SECCOMP_MAIN, P_VFIO_DMA_MAP);
	expect_allowed(SECCOMP_MAIN, P_VFIO_SET_IRQS);
	expect_allowed(SECCOMP_VCPU, P_VFIO_SET_IRQS);
	expect_killed(SECCOMP_VCPU, P_VFIO_DMA_MAP);
	expect_killed(SECCOMP_IO, P_VFIO_SET_IRQS);
	/* only the requests lvmm makes (device features: migration, dirty tracking, ...) */
	expect_killed(SECCOMP_MAIN, P_VFIO_FEATURE);
}
END_TEST

START_TEST(test_tun_requests)
{
	expect_allowed(SECCOMP_MAIN, P_TUNSETIFF);
	expect_allowed(SECCOMP_MAIN, P_TUNSETOFFLOAD);
	expect_allowed(SECCOMP_IO, P_TUNSETOFFLOAD);
	expect_killed(SECCOMP_IO, P_TUNSETIFF);
	expect_killed(SECCOMP_VCPU, P_TUNSETOFFLOAD);
}
END_TEST

/* virtio-fs: the vCPU thread's vhost-user messages (sendmsg with SCM_RIGHTS, ppoll, recvmsg on
 * a socket it holds) and the watcher's hangup poll (device I/O kind: ppoll with POLLRDHUP, an
 * eventfd read). */
static int fs_calls(enum seccomp_kind kind)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} cm;
	uint64_t v = 1;
	struct iovec iov = {&v, sizeof(v)};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	struct pollfd p;
	struct timespec ts = {1, 0};
	char err[256];
	int sv[2], efd;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return 10;
	efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	seccomp_mode_set(SECCOMP_MODE_KILL);
	if (efd < 0 || seccomp_install(err, sizeof(err)) ||
	    seccomp_thread_install(kind, err, sizeof(err)))
		return 11;
	memset(&cm, 0, sizeof(cm));
	m.msg_control = cm.b;
	m.msg_controllen = sizeof(cm.b);
	cm.h.cmsg_level = SOL_SOCKET;
	cm.h.cmsg_type = SCM_RIGHTS;
	cm.h.cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(&cm.h), &efd, sizeof(int));
	if (sendmsg(sv[0], &m, MSG_NOSIGNAL | MSG_DONTWAIT) != sizeof(v))
		return 12;
	p = (struct pollfd){.fd = sv[1], .events = POLLIN};
	if (ppoll(&p, 1, &ts, NULL) != 1)
		return 13;
	m.msg_controllen = sizeof(cm.b);
	if (recvmsg(sv[1], &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC) != sizeof(v))
		return 14;
	close(sv[0]);
	p = (struct pollfd){.fd = sv[1], .events = POLLRDHUP};
	if (ppoll(&p, 1, &ts, NULL) != 1 || !(p.revents & (POLLRDHUP | POLLHUP)))
		return 15;
	if (write(efd, &v, 8) != 8 || read(efd, &v, 8) != 8)
		return 16;
	return 0;
}

START_TEST(test_fs_kinds)
{
	static const enum seccomp_kind kinds[] = {SECCOMP_VCPU, SECCOMP_IO};

	for (unsigned i = 0; i < 2; i++) {
		pid_t pid = fork();
		int st;

		ck_assert_int_ge(pid, 0);
		if (!pid) {
			alarm(10);
			_exit(fs_calls(kinds[i]));
		}
		ck_assert_int_eq(waitpid(pid, &st, 0), pid);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: fs calls refused: 0x%x",
			      seccomp_kind_name(kinds[i]), st);
	}
}
END_TEST

/* What an I/O thread does: eventfds, memory, an io_uring ring's entry, signals to itself. */
START_TEST(test_io_allows)
{
	struct io_uring ring;
	char err[256];
	int st;
	pid_t pid;

	expect_allowed(SECCOMP_IO, P_NONE);
	expect_allowed(SECCOMP_IO, P_LIO_QP_CREATE);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (!pid) {
		uint64_t one = 1;
		void *m;
		int efd;

		alarm(10);
		seccomp_mode_set(SECCOMP_MODE_KILL);
		if (seccomp_install(err, sizeof(err)) || io_uring_queue_init(8, &ring, 0))
			_exit(10);
		if (seccomp_thread_install(SECCOMP_IO, err, sizeof(err)))
			_exit(11);
		efd = eventfd(0, EFD_CLOEXEC);
		if (efd < 0 || write(efd, &one, 8) != 8 || read(efd, &one, 8) != 8)
			_exit(12);
		m = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m == MAP_FAILED || munmap(m, 1 << 20))
			_exit(13);
		io_uring_prep_nop(io_uring_get_sqe(&ring));
		if (io_uring_submit_and_wait(&ring, 1) != 1)
			_exit(14);
		if (syscall(SYS_tgkill, getpid(), gettid(), 0))
			_exit(15);
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "io thread calls refused: 0x%x", st);
}
END_TEST

/* --seccomp=log: the forbidden call goes through (the kernel logs it). */
START_TEST(test_log_mode)
{
	int st = child_status(SECCOMP_MODE_LOG, SECCOMP_VCPU, P_SOCKET_INET);

	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "log mode killed: 0x%x", st);
	st = child_status(SECCOMP_MODE_LOG, SECCOMP_MAIN, P_FORK);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "log mode killed: 0x%x", st);
}
END_TEST

/* A thread filter without the process filter under it (the library in tests and fuzzers) is
 * not loaded: lvmm loads the process filter before any thread starts. */
START_TEST(test_thread_needs_process_filter)
{
	char err[256];
	int st;
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (!pid) {
		seccomp_mode_set(SECCOMP_MODE_KILL);
		if (seccomp_thread_install(SECCOMP_IO, err, sizeof(err)))
			_exit(11);
		probe_run(P_OPENAT);
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x", st);
}
END_TEST

START_TEST(test_mode_parse)
{
	enum seccomp_mode m;

	ck_assert_int_eq(seccomp_mode_parse("kill", &m), 0);
	ck_assert_int_eq(m, SECCOMP_MODE_KILL);
	ck_assert_int_eq(seccomp_mode_parse("log", &m), 0);
	ck_assert_int_eq(m, SECCOMP_MODE_LOG);
	ck_assert_int_eq(seccomp_mode_parse("off", &m), 0);
	ck_assert_int_eq(m, SECCOMP_MODE_OFF);
	ck_assert_int_eq(seccomp_mode_parse("trap", &m), -EINVAL);
	ck_assert_int_eq(seccomp_mode_parse("", &m), -EINVAL);
	/* off: nothing is loaded, a forbidden call passes */
	ck_assert_int_eq(child_status(SECCOMP_MODE_OFF, SECCOMP_VCPU, P_SOCKET_INET), 0);
}
END_TEST

int main(void)
{
	Suite *s;
	TCase *tc;

#if defined(__SANITIZE_ADDRESS__)
	/* Before the suite exists: nothing allocated is left for LeakSanitizer to report. */
	testutil_skip("seccomp_kinds: sanitizer build (LeakSanitizer's ptrace needs no filter)");
	return 0;
#endif
	s = suite_create("seccomp_kinds");
	tc = tcase_create("kinds");
	tcase_add_test(tc, test_mode_parse);
	tcase_add_test(tc, test_main_refuses);
	tcase_add_test(tc, test_main_allows);
	tcase_add_test(tc, test_vcpu_refuses);
	tcase_add_test(tc, test_vcpu_allows);
	tcase_add_test(tc, test_io_refuses);
	tcase_add_test(tc, test_io_allows);
	tcase_add_test(tc, test_sock_kind);
	tcase_add_test(tc, test_tun_requests);
	tcase_add_test(tc, test_vfio_requests);
	tcase_add_test(tc, test_fs_kinds);
	tcase_add_test(tc, test_log_mode);
	tcase_add_test(tc, test_thread_needs_process_filter);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	return testutil_run_suite(s);
}
