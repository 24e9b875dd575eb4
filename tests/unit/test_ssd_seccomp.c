/* Unit tests for softssd's seccomp filter (host-kmod/softssd/seccomp.c) with --vfio: every request
 * the VFIO library makes once the daemon serves (mapping and unmapping client windows, interrupts,
 * the stop's reset and release) reaches the kernel in both container models, the legacy container
 * and iommufd; without --vfio the same requests end the process. Each case runs in a child that
 * installs the filter in kill mode and makes the request on a closed fd (EBADF from the kernel). */
#include <check.h>
#include <errno.h>
#include <linux/vfio.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "softssd/server.h"
#include "testutil.h"
#include "vfio/iommufd_uapi.h"

static const unsigned long legacy_reqs[] = {
    VFIO_IOMMU_MAP_DMA, VFIO_IOMMU_UNMAP_DMA,	    VFIO_DEVICE_SET_IRQS,
    VFIO_DEVICE_RESET,	VFIO_GROUP_UNSET_CONTAINER,
};

/* vfio_iommufd.c after start-up: a window's range check, map and unmap; the stop's detach and
 * the IOAS's destruction */
static const unsigned long iommufd_reqs[] = {
    IOMMUFD_IOC_IOAS_IOVA_RANGES, IOMMUFD_IOC_IOAS_MAP, IOMMUFD_IOC_IOAS_UNMAP,
    VFIO_CDEV_IOC_DETACH_PT,	  IOMMUFD_IOC_DESTROY,
};

/* The child's status after it installed the filter (vfio or not) and made request req on a closed
 * fd: exit 0 when the kernel answered EBADF, 2 for another answer, 3 when the filter failed. */
static int run_child(bool vfio, unsigned long req)
{
	pid_t pid = fork();
	int status;

	ck_assert_int_ge(pid, 0);
	if (!pid) {
		char err[256];
		int fd = dup(0);

		if (fd < 0)
			_exit(3);
		close(fd); /* a number that is closed now */
		if (ssd_seccomp_install(SSD_SECCOMP_KILL, vfio, err, sizeof(err)))
			_exit(3);
		/* exit_group itself: a sanitizer's _exit would run its leak check (ptrace) */
		syscall(SYS_exit_group, ioctl(fd, req, NULL) < 0 && errno == EBADF ? 0 : 2);
		_exit(4);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	return status;
}

static void expect_allowed(unsigned long req)
{
	int st = run_child(true, req);

	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "ioctl %#lx with --vfio: status %#x (killed by signal %d)", req, st,
		      WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

static void expect_killed(unsigned long req)
{
	int st = run_child(false, req);

	ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS,
		      "ioctl %#lx without --vfio was not stopped: status %#x", req, st);
}

START_TEST(legacy_container_requests)
{
	for (unsigned i = 0; i < sizeof(legacy_reqs) / sizeof(legacy_reqs[0]); i++)
		expect_allowed(legacy_reqs[i]);
}
END_TEST

START_TEST(iommufd_requests)
{
	for (unsigned i = 0; i < sizeof(iommufd_reqs) / sizeof(iommufd_reqs[0]); i++)
		expect_allowed(iommufd_reqs[i]);
}
END_TEST

START_TEST(without_vfio_refused)
{
	expect_killed(VFIO_IOMMU_MAP_DMA);
	expect_killed(IOMMUFD_IOC_IOAS_MAP);
	expect_killed(VFIO_CDEV_IOC_DETACH_PT);
}
END_TEST

/* What the daemon never needs once serving stays out even with --vfio: opening devices, binding
 * and attaching (done before the filter), another IOAS. */
START_TEST(setup_requests_refused)
{
	static const unsigned long reqs[] = {VFIO_GROUP_GET_DEVICE_FD, VFIO_CDEV_IOC_BIND_IOMMUFD,
					     VFIO_CDEV_IOC_ATTACH_PT, IOMMUFD_IOC_IOAS_ALLOC};

	for (unsigned i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++) {
		int st = run_child(true, reqs[i]);

		ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS,
			      "ioctl %#lx with --vfio was not stopped: status %#x", reqs[i], st);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ssd_seccomp");
	TCase *tc = tcase_create("vfio");

	tcase_add_test(tc, legacy_container_requests);
	tcase_add_test(tc, iommufd_requests);
	tcase_add_test(tc, without_vfio_refused);
	tcase_add_test(tc, setup_requests_refused);
	suite_add_tcase(s, tc);
	return testutil_run_suite(s);
}
