/* softssd's confinement once it is set up: every capability dropped, then its own system-call
 * filter (libseccomp): a call it does not need kills it (or is logged with log mode). */
#include <errno.h>
#include <linux/capability.h>
#include <linux/vfio.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "softssd/server.h"
#include "vfio/iommufd_uapi.h"

/* Add a call here only with the reason next to it. */
static const char *const ssd_seccomp_allowed[] = {
    /* memory, threads, time */
    "brk",
    "mmap",
    "munmap",
    "mprotect",
    "madvise",
    "mincore", /* how much of a client's DMA window is populated (--require-resident) */
    "futex",
    "exit",
    "exit_group",
    "sched_yield",
    "getpid",
    "gettid",
    "rt_sigprocmask",
    "rt_sigreturn",
    "restart_syscall",
    "clock_gettime",
    "clock_nanosleep",
    "nanosleep",
    "gettimeofday",
    "set_robust_list",
    "rseq",
    "getrandom",
    /* the control loop: clients, their requests and fds, signals by signalfd */
    "epoll_wait",
    "epoll_pwait",
    "epoll_pwait2",
    "epoll_ctl",
    "poll", /* an upgrade's exchange with the successor (handover.c) */
    "ppoll",
    "accept4",
    "recvmsg",
    "sendmsg",
    "sendto",
    "getsockopt",
    "read",
    "write",
    "close",
    "geteuid",
    /* fds a client sends: memfd seals and size, eventfd identity and flags */
    "fstat",
    "newfstatat",
    "fstatfs", /* a window's memfd must be shmem, never hugetlbfs */
    "fcntl",
    "readlink",
    "readlinkat",
    /* queue memory */
    "memfd_create",
    "ftruncate",
    /* data path: io_uring (its ring restricted to the opcodes served), deallocate */
    "io_uring_enter",
    "fallocate",
    /* volume table writes and their flush */
    "pread64",
    "pwrite64",
    "fdatasync",
    "fsync",
    /* data path without io_uring (a sandbox that lacks it): vectored transfers */
    "preadv",
    "pwritev2",
    "flock",
    /* shutdown: the socket goes away with the daemon */
    "unlink",
};

/* The backing and the socket are open, files it creates later are its own memfds: a daemon run
 * as root keeps uid 0 (its files) but no capability, so it cannot reach what root's
 * capabilities would (other users' files, devices, the kernel's knobs). */
int ssd_drop_caps(char *err, unsigned errlen)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
	int cap;

	memset(d, 0, sizeof(d));
	/* from the bounding set too, so that no exec could regain them (EPERM when unprivileged:
	 * nothing to drop then) */
	for (cap = 0; cap <= 63; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) && errno != EINVAL)
			break;
	if (syscall(SYS_capset, &h, d)) {
		snprintf(err, errlen, "softssd: dropping capabilities: %s", strerror(errno));
		return -errno;
	}
	return 0;
}

/* --vfio (vfio/nvme_pci.c): a client window is locked (no-IOMMU; its frames read through the
 * pagemap fd kept from start-up) or mapped into the container at DMA_REGISTER and undone when it
 * goes; the stop turns the device's interrupts off, resets it and leaves the container. In an
 * iommufd host the container is an IOAS: a window's range check, map and unmap, and at the stop
 * the device's detach and the IOAS's destruction (tests/unit/test_ssd_seccomp.c). Only these
 * requests, whatever the fd: the numbers are VFIO's and iommufd's own. */
static const char *const ssd_seccomp_vfio[] = {"mlock", "mlock2", "munlock"};
static const unsigned long ssd_seccomp_vfio_ioctls[] = {
    VFIO_IOMMU_MAP_DMA,	  VFIO_IOMMU_UNMAP_DMA,	      VFIO_DEVICE_SET_IRQS,
    VFIO_DEVICE_RESET,	  VFIO_GROUP_UNSET_CONTAINER, IOMMUFD_IOC_IOAS_IOVA_RANGES,
    IOMMUFD_IOC_IOAS_MAP, IOMMUFD_IOC_IOAS_UNMAP,     VFIO_CDEV_IOC_DETACH_PT,
    IOMMUFD_IOC_DESTROY,
};

static int ssd_seccomp_allow(scmp_filter_ctx ctx, const char *const *names, unsigned n, char *err,
			     unsigned errlen)
{
	for (unsigned i = 0; i < n; i++) {
		int nr = seccomp_syscall_resolve_name(names[i]), r;

		if (nr == __NR_SCMP_ERROR)
			continue; /* not on this architecture */
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
		if (r) {
			snprintf(err, errlen, "softssd: seccomp rule for %s: %s", names[i],
				 strerror(-r));
			return r;
		}
	}
	return 0;
}

int ssd_seccomp_install(enum ssd_seccomp_mode mode, bool vfio, char *err, unsigned errlen)
{
	scmp_filter_ctx ctx;
	unsigned i;
	int r;

	if (mode == SSD_SECCOMP_OFF)
		return 0;
	ctx = seccomp_init(mode == SSD_SECCOMP_LOG ? SCMP_ACT_LOG : SCMP_ACT_KILL_PROCESS);
	if (!ctx) {
		snprintf(err, errlen, "softssd: seccomp_init failed");
		return -ENOMEM;
	}
	r = ssd_seccomp_allow(ctx, ssd_seccomp_allowed,
			      sizeof(ssd_seccomp_allowed) / sizeof(ssd_seccomp_allowed[0]), err,
			      errlen);
	if (!r && vfio)
		r = ssd_seccomp_allow(ctx, ssd_seccomp_vfio,
				      sizeof(ssd_seccomp_vfio) / sizeof(ssd_seccomp_vfio[0]), err,
				      errlen);
	for (i = 0;
	     !r && vfio && i < sizeof(ssd_seccomp_vfio_ioctls) / sizeof(ssd_seccomp_vfio_ioctls[0]);
	     i++) {
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
				     SCMP_A1(SCMP_CMP_EQ, ssd_seccomp_vfio_ioctls[i]));
		if (r)
			snprintf(err, errlen, "softssd: seccomp rule for a VFIO ioctl: %s",
				 strerror(-r));
	}
	if (r) {
		seccomp_release(ctx);
		return r;
	}
	/* every thread, the workers included, gets the filter at once */
	r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
	if (!r)
		r = seccomp_load(ctx);
	if (r)
		snprintf(err, errlen, "softssd: loading the seccomp filter: %s", strerror(-r));
	seccomp_release(ctx);
	return r;
}
