/* lvmm's system-call filters: the process-wide MAIN allow-list with argument checks, and the
 * narrower vCPU and device-I/O lists each such thread stacks on it when it starts. */
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/ioctl.h>

#include <linux/fs.h>
#include <linux/if_tun.h>
#include <linux/vfio.h>
#include <termios.h>
#include <unistd.h>

#include "lightiov/uapi.h"
#include "seccomp_filter.h"
#include "vfio/iommufd_uapi.h"

/* A thread kind's calls: the kinds it applies to as a bit mask of (1 << kind). */
#define K_MAIN (1u << SECCOMP_MAIN)
#define K_VCPU (1u << SECCOMP_VCPU)
#define K_SOCK (1u << SECCOMP_SOCK)
#define K_IO   ((1u << SECCOMP_IO) | K_SOCK) /* what I/O threads may, socket threads may too */
#define K_DEV  (K_VCPU | K_IO)
#define K_ALL  (K_MAIN | K_VCPU | K_IO)

struct seccomp_call {
	const char *name;
	unsigned kinds;
};

/* Calls taken without looking at their arguments. Add one only with the reason beside it; the
 * ones with argument rules (ioctl, clone, socket, mmap, mprotect, tgkill, prctl, seccomp) are in
 * seccomp_rules_args. vCPU and I/O threads open, create sockets and threads never: a device
 * model reached from a guest can only use the fds lvmm already holds. */
static const struct seccomp_call seccomp_calls[] = {
    /* memory and threads */
    {"brk", K_ALL},
    {"munmap", K_ALL},
    {"madvise", K_ALL},
    {"mremap", K_ALL},
    {"set_robust_list", K_MAIN},
    {"rseq", K_MAIN},
    {"futex", K_ALL},
    {"exit", K_ALL},
    {"exit_group", K_ALL},
    {"sched_yield", K_ALL},
    {"setpriority", K_MAIN},
    {"sched_getaffinity", K_MAIN},
    {"membarrier", K_ALL},
    {"getpid", K_ALL},
    {"gettid", K_ALL},
    /* stdio console: is lvmm the terminal's foreground job (tcgetpgrp against getpgrp)? */
    {"getpgrp", K_MAIN},
    {"getrandom", K_ALL},
    /* signals: vCPU kicks, stop requests, crash-path terminal restore */
    {"rt_sigaction", K_MAIN},
    {"rt_sigprocmask", K_ALL},
    {"rt_sigreturn", K_ALL},
    {"rt_sigtimedwait", K_ALL},
    {"sigaltstack", K_MAIN},
    {"restart_syscall", K_ALL},
    {"signalfd4", K_MAIN},
    /* time */
    {"clock_gettime", K_ALL},
    {"clock_nanosleep", K_ALL},
    {"nanosleep", K_ALL},
    {"gettimeofday", K_ALL},
    {"timerfd_create", K_MAIN},
    {"timerfd_settime", K_ALL},
    /* fds lvmm holds: guest RAM, images, console, eventfds, backend sockets */
    {"read", K_ALL},
    {"write", K_ALL},
    {"readv", K_ALL},
    {"writev", K_ALL},
    {"pread64", K_ALL},
    {"pwrite64", K_ALL},
    {"preadv", K_ALL},
    {"pwritev", K_ALL},
    {"close", K_ALL},
    {"fstat", K_ALL},
    {"newfstatat", K_ALL},
    {"lseek", K_ALL},
    {"fcntl", K_ALL},
    {"fsync", K_ALL},
    {"fdatasync", K_ALL},
    {"fallocate", K_ALL},
    {"ftruncate", K_ALL},
    /* queue memory of a backend queue pair is created when the guest creates the queue */
    {"memfd_create", K_ALL},
    {"eventfd2", K_ALL},
    /* files named on the command line or over the API: the main thread only */
    {"openat", K_MAIN},
    {"statx", K_MAIN},
    {"dup", K_MAIN},
    {"dup3", K_MAIN},
    {"pipe2", K_MAIN},
    {"faccessat", K_MAIN},
    {"faccessat2", K_MAIN},
    {"access", K_MAIN},
    {"readlink", K_MAIN},
    {"readlinkat", K_MAIN},
    {"unlink", K_MAIN},
    {"unlinkat", K_MAIN},
    {"rename", K_MAIN},
    {"renameat", K_MAIN},
    {"renameat2", K_MAIN},
    {"fchmod", K_MAIN},
    {"umask", K_MAIN},
    {"fstatfs", K_MAIN},
    {"uname", K_MAIN},
    {"geteuid", K_MAIN}, /* a restore maps only a memory.bin lvmm's user alone may write */
    {"getcwd", K_MAIN},
    /* event loops */
    {"poll", K_ALL},
    {"ppoll", K_ALL},
    {"epoll_create1", K_MAIN},
    {"epoll_ctl", K_ALL},
    {"epoll_wait", K_ALL},
    {"epoll_pwait", K_ALL},
    /* io_uring: rings are set up by the main thread, restricted to the opcodes the file
     * backend uses (IORING_REGISTER_RESTRICTIONS), then only entered */
    {"io_uring_setup", K_MAIN},
    {"io_uring_register", K_MAIN},
    {"io_uring_enter", K_ALL},
    /* REST API and backend sockets (AF_UNIX only, see socket below); SCM_RIGHTS fds */
    {"bind", K_MAIN},
    {"listen", K_MAIN},
    /* vsock's thread: host programs connect to it, it connects to them (AF_UNIX only) */
    {"accept4", K_MAIN | K_SOCK},
    {"connect", K_MAIN | K_SOCK},
    {"shutdown", K_MAIN | K_SOCK},
    {"getsockopt", K_MAIN},
    {"setsockopt", K_MAIN},
    {"getsockname", K_MAIN},
    {"sendmsg", K_ALL},
    {"recvmsg", K_ALL},
    {"sendto", K_ALL},
    {"recvfrom", K_ALL},
};

/* KVM requests made once a VM runs: vCPU state (reset, dump), interrupts, eventfd wiring and
 * memory slots of BARs. Creating VMs, vCPUs and chips is for the main thread. */
static const unsigned long seccomp_kvm_vcpu[] = {
    KVM_RUN,
    KVM_GET_REGS,
    KVM_TRANSLATE, /* LVMM_PROFILE's stack samples */
    KVM_SET_REGS,
    KVM_GET_SREGS,
    KVM_SET_SREGS,
    KVM_SET_FPU,
    KVM_GET_LAPIC,
    KVM_SET_LAPIC,
    KVM_GET_MP_STATE,
    KVM_SET_MP_STATE,
    KVM_GET_VCPU_EVENTS,
    KVM_SET_VCPU_EVENTS,
    KVM_SET_CPUID2,
    KVM_IRQ_LINE,
    KVM_SIGNAL_MSI,
    KVM_IRQFD,
    KVM_IOEVENTFD,
    KVM_SET_GSI_ROUTING,
    KVM_SET_USER_MEMORY_REGION,
    KVM_CHECK_EXTENSION,
    KVM_GET_CLOCK,
    KVM_SET_CLOCK,
};
static const unsigned long seccomp_kvm_io[] = {
    KVM_IRQ_LINE,  KVM_SIGNAL_MSI,	KVM_IRQFD,
    KVM_IOEVENTFD, KVM_SET_GSI_ROUTING, KVM_SET_USER_MEMORY_REGION,
};
/* virtio-blk's I/O thread on a block device: discard and write zeroes (docs/virtio.md). */
static const unsigned long seccomp_blk_io[] = {BLKDISCARD, BLKZEROOUT};
/* lightiov.ko's requests (a vNVMe whose SSD is /dev/lightiov/NAME): queue pairs are created and
 * destroyed by whichever thread runs the guest's admin commands (a vCPU, or the I/O thread with
 * shadow doorbells), the write cache's setting goes with them; the module confines every request
 * to the session's own volumes, windows and queue pairs. */
static const unsigned long seccomp_lio_queue[] = {
    LIO_IOC_QP_CREATE,
    LIO_IOC_QP_DESTROY,
    LIO_IOC_QP_STATS,
    LIO_IOC_SESSION_SET,
};
/* ...and the session's set-up, hot-add and statistics, on the main and API threads. */
static const unsigned long seccomp_lio_session[] = {
    LIO_IOC_IDENTIFY,	LIO_IOC_DMA_REGISTER, LIO_IOC_QMEM_ALLOC,   LIO_IOC_VOL_CREATE,
    LIO_IOC_VOL_DELETE, LIO_IOC_VOL_RESIZE,   LIO_IOC_VOL_LIST,	    LIO_IOC_VOL_ATTACH,
    LIO_IOC_VOL_DETACH, LIO_IOC_SSD_STATS,    LIO_IOC_SESSION_LIST,
};
/* Passed-through functions (devices/vfio): a guest turning MSI-X on or off in config space,
 * from a vCPU's config access, hands VFIO the vector eventfds. */
static const unsigned long seccomp_vfio_vcpu[] = {VFIO_DEVICE_SET_IRQS};
/* Containers, groups, devices, DMA maps and resets are the main and API threads': exactly what
 * host-kmod/vfio makes. VFIO numbers its requests per fd type, so some alias (the device's
 * PCI_HOT_RESET is the container's MAP_DMA): the list bounds the numbers, 100..114. */
static const unsigned long seccomp_vfio_main[] = {
    VFIO_GET_API_VERSION,
    VFIO_CHECK_EXTENSION,
    VFIO_SET_IOMMU,
    VFIO_IOMMU_GET_INFO,
    VFIO_IOMMU_MAP_DMA,
    VFIO_IOMMU_UNMAP_DMA,
    VFIO_GROUP_GET_STATUS,
    VFIO_GROUP_SET_CONTAINER,
    VFIO_GROUP_UNSET_CONTAINER,
    VFIO_GROUP_GET_DEVICE_FD,
    VFIO_DEVICE_GET_INFO,
    VFIO_DEVICE_GET_REGION_INFO,
    VFIO_DEVICE_GET_IRQ_INFO,
    VFIO_DEVICE_SET_IRQS,
    VFIO_DEVICE_RESET,
    /* the iommufd backend: IOAS map/unmap/ranges, release; bind and attach precede the jail
     * only for devices opened early, so they are listed too */
    IOMMUFD_IOC_IOAS_ALLOC,
    IOMMUFD_IOC_DESTROY,
    IOMMUFD_IOC_IOAS_IOVA_RANGES,
    IOMMUFD_IOC_IOAS_MAP,
    IOMMUFD_IOC_IOAS_UNMAP,
    VFIO_CDEV_IOC_BIND_IOMMUFD,
    VFIO_CDEV_IOC_ATTACH_PT,
    VFIO_CDEV_IOC_DETACH_PT,
};

/* The stdio console: isatty, raw mode and its restore, the foreground-job test. */
static const unsigned long seccomp_tty[] = {TCGETS,  TCSETS,	TCSETSW,
					    TCSETSF, TIOCGPGRP, TIOCGWINSZ};

/* virtio-net: a tap opened by name (vm.create, a hot-added net without fds) and checked, and
 * its offloads, which the device's I/O thread sets once the guest has chosen its features. */
static const unsigned long seccomp_tun_main[] = {TUNSETIFF, TUNGETIFF, TUNSETVNETHDRSZ,
						 TUNSETOFFLOAD};
static const unsigned long seccomp_tun_io[] = {TUNSETOFFLOAD};

/* pthread_create's flags; anything else (a fork, a namespace) is refused. */
#define SECCOMP_THREAD_FLAGS                                                                       \
	(CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM |        \
	 CLONE_SETTLS | CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID)
#define SECCOMP_CLONE_MUST (CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD)

static enum seccomp_mode seccomp_mode_cur;
static bool seccomp_mode_known;
/* Thread filters stack on the process filter: without it (the library in tests and fuzzers)
 * they are not loaded either. */
static bool seccomp_process_loaded;

/* gcc says __SANITIZE_ADDRESS__, clang (the fuzz targets) says it through __has_feature. */
#if defined(__SANITIZE_ADDRESS__)
#define SECCOMP_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SECCOMP_SANITIZED 1
#endif
#endif

#ifdef SECCOMP_SANITIZED
static const bool seccomp_sanitized = true;
#else
static const bool seccomp_sanitized = false;
#endif

static const char *const seccomp_kind_names[SECCOMP_NKINDS] = {"main", "vcpu", "io", "sock"};

const char *seccomp_kind_name(enum seccomp_kind kind)
{
	return kind < SECCOMP_NKINDS ? seccomp_kind_names[kind] : "?";
}

int seccomp_mode_parse(const char *s, enum seccomp_mode *mode)
{
	if (!strcmp(s, "kill") || !strcmp(s, "on") || !strcmp(s, "true"))
		*mode = SECCOMP_MODE_KILL;
	else if (!strcmp(s, "log"))
		*mode = SECCOMP_MODE_LOG;
	else if (!strcmp(s, "off") || !strcmp(s, "false"))
		*mode = SECCOMP_MODE_OFF;
	else
		return -EINVAL;
	return 0;
}

void seccomp_mode_set(enum seccomp_mode mode)
{
	seccomp_mode_cur = mode;
	seccomp_mode_known = true;
}

enum seccomp_mode seccomp_mode_get(void)
{
	const char *e;

	if (!seccomp_mode_known) {
		e = getenv("LVMM_SECCOMP");
		if (!e || seccomp_mode_parse(e, &seccomp_mode_cur))
			seccomp_mode_cur = SECCOMP_MODE_KILL;
		seccomp_mode_known = true;
	}
	return seccomp_mode_cur;
}

bool seccomp_disabled(void)
{
	return seccomp_mode_get() == SECCOMP_MODE_OFF;
}

static int seccomp_nr(const char *name)
{
	return seccomp_syscall_resolve_name(name);
}

static int seccomp_allow_list(scmp_filter_ctx ctx, const unsigned long *req, unsigned n)
{
	unsigned i;
	int r = 0;

	for (i = 0; i < n && !r; i++)
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
				     SCMP_A1(SCMP_CMP_EQ, (scmp_datum_t)req[i]));
	return r;
}

/* The calls whose arguments decide. */
static int seccomp_rules_args(scmp_filter_ctx ctx, enum seccomp_kind kind)
{
	const scmp_datum_t noexec = PROT_EXEC;
	int r;

	/* No executable mappings after start-up: nothing lvmm does needs new code pages. */
	r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mmap), 1,
			     SCMP_A2(SCMP_CMP_MASKED_EQ, noexec, 0));
	if (!r)
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mprotect), 1,
				     SCMP_A2(SCMP_CMP_MASKED_EQ, noexec, 0));
	/* Signals only to lvmm's own threads (vCPU kicks, pthread_kill). */
	if (!r)
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(tgkill), 1,
				     SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)getpid()));
	if (r)
		return r;
	r = seccomp_allow_list(ctx, seccomp_lio_queue,
			       sizeof(seccomp_lio_queue) / sizeof(seccomp_lio_queue[0]));
	if (r)
		return r;
	if (kind == SECCOMP_VCPU) {
		r = seccomp_allow_list(ctx, seccomp_kvm_vcpu,
				       sizeof(seccomp_kvm_vcpu) / sizeof(seccomp_kvm_vcpu[0]));
		if (!r)
			r = seccomp_allow_list(ctx, seccomp_vfio_vcpu,
					       sizeof(seccomp_vfio_vcpu) /
						   sizeof(seccomp_vfio_vcpu[0]));
		return r;
	}
	if (kind == SECCOMP_IO || kind == SECCOMP_SOCK) {
		r = seccomp_allow_list(ctx, seccomp_kvm_io,
				       sizeof(seccomp_kvm_io) / sizeof(seccomp_kvm_io[0]));
		if (!r)
			r = seccomp_allow_list(ctx, seccomp_blk_io,
					       sizeof(seccomp_blk_io) / sizeof(seccomp_blk_io[0]));
		if (!r)
			r = seccomp_allow_list(ctx, seccomp_tun_io,
					       sizeof(seccomp_tun_io) / sizeof(seccomp_tun_io[0]));
		if (!r && kind == SECCOMP_SOCK)
			r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
					     SCMP_A0(SCMP_CMP_EQ, AF_UNIX));
		return r;
	}
	/* MAIN: every KVM request (type 0xAE), VFIO's listed, the console's terminal requests. */
	r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
			     SCMP_A1(SCMP_CMP_MASKED_EQ, 0xff00, (scmp_datum_t)KVMIO << 8));
	if (!r)
		r = seccomp_allow_list(ctx, seccomp_vfio_main,
				       sizeof(seccomp_vfio_main) / sizeof(seccomp_vfio_main[0]));
	if (!r)
		r = seccomp_allow_list(ctx, seccomp_tty,
				       sizeof(seccomp_tty) / sizeof(seccomp_tty[0]));
	if (!r)
		r = seccomp_allow_list(ctx, seccomp_tun_main,
				       sizeof(seccomp_tun_main) / sizeof(seccomp_tun_main[0]));
	if (!r)
		r = seccomp_allow_list(ctx, seccomp_lio_session,
				       sizeof(seccomp_lio_session) /
					   sizeof(seccomp_lio_session[0]));
	/* Threads, never processes or namespaces. */
	if (!r)
		r = seccomp_rule_add(
		    ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
		    SCMP_A0(SCMP_CMP_MASKED_EQ,
			    ~(scmp_datum_t)SECCOMP_THREAD_FLAGS | SECCOMP_CLONE_MUST,
			    SECCOMP_CLONE_MUST));
	/* clone3's flags sit in memory the filter cannot read: ENOSYS sends glibc to clone. */
	if (!r)
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	if (!r)
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
				     SCMP_A0(SCMP_CMP_EQ, AF_UNIX));
	/* Thread names, and what libseccomp needs to stack a thread's filter. */
	if (!r)
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prctl), 1,
				     SCMP_A0(SCMP_CMP_EQ, PR_SET_NAME));
	if (!r)
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prctl), 1,
				     SCMP_A0(SCMP_CMP_EQ, PR_SET_NO_NEW_PRIVS));
	if (!r)
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prctl), 1,
				     SCMP_A0(SCMP_CMP_EQ, PR_GET_NO_NEW_PRIVS));
	if (!r)
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(seccomp), 1,
				     SCMP_A0(SCMP_CMP_EQ, 1 /* SECCOMP_SET_MODE_FILTER */));
	if (!r)
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(seccomp), 1,
				     SCMP_A0(SCMP_CMP_EQ, 2 /* SECCOMP_GET_ACTION_AVAIL */));
	return r;
}

static int seccomp_load_kind(enum seccomp_kind kind, bool all_threads, char *err, unsigned errlen)
{
	enum seccomp_mode mode = seccomp_mode_get();
	scmp_filter_ctx ctx;
	unsigned i;
	int r;

	if (mode == SECCOMP_MODE_OFF)
		return 0;
	/* LeakSanitizer stops the world with ptrace at exit; sanitizer builds are for tests.
	 * A constant, not an #ifdef: the filter code stays compiled (and warning-free) there too.
	 */
	if (seccomp_sanitized)
		return 0;
	ctx = seccomp_init(mode == SECCOMP_MODE_LOG ? SCMP_ACT_LOG : SCMP_ACT_KILL_PROCESS);
	if (!ctx) {
		snprintf(err, errlen, "seccomp: cannot create the %s filter",
			 seccomp_kind_name(kind));
		return -ENOMEM;
	}
	for (i = 0; i < sizeof(seccomp_calls) / sizeof(seccomp_calls[0]); i++) {
		int nr;

		if (!(seccomp_calls[i].kinds & (1u << kind)))
			continue;
		nr = seccomp_nr(seccomp_calls[i].name);
		if (nr == __NR_SCMP_ERROR)
			continue; /* not on this architecture (e.g. "access" on arm64) */
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
		if (r) {
			snprintf(err, errlen, "seccomp: %s filter: rule for %s: %s",
				 seccomp_kind_name(kind), seccomp_calls[i].name, strerror(-r));
			goto out;
		}
	}
	r = seccomp_rules_args(ctx, kind);
	if (r) {
		snprintf(err, errlen, "seccomp: %s filter: argument rules: %s",
			 seccomp_kind_name(kind), strerror(-r));
		goto out;
	}
	/* The process filter reaches every thread that exists now (API, device I/O). */
	if (all_threads)
		r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
	if (!r)
		r = seccomp_load(ctx);
	if (r)
		snprintf(err, errlen, "seccomp: loading the %s filter: %s", seccomp_kind_name(kind),
			 strerror(-r));
out:
	seccomp_release(ctx);
	return r;
}

int seccomp_install(char *err, unsigned errlen)
{
	int r = seccomp_load_kind(SECCOMP_MAIN, true, err, errlen);

	if (!r && seccomp_mode_get() != SECCOMP_MODE_OFF)
		seccomp_process_loaded = true;
	return r;
}

int seccomp_thread_install(enum seccomp_kind kind, char *err, unsigned errlen)
{
	if (kind >= SECCOMP_NKINDS) {
		snprintf(err, errlen, "seccomp: no thread kind %u", (unsigned)kind);
		return -EINVAL;
	}
	if (!seccomp_process_loaded)
		return 0;
	return seccomp_load_kind(kind, false, err, errlen);
}

int seccomp_io_thread_install(char *err, unsigned errlen)
{
	return seccomp_thread_install(SECCOMP_IO, err, errlen);
}

int seccomp_sock_thread_install(char *err, unsigned errlen)
{
	return seccomp_thread_install(SECCOMP_SOCK, err, errlen);
}
