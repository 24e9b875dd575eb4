/* The lvmm command line: `lvmm run` boots a VM from flags (optionally serving the REST API),
 * `lvmm api` is the API client; owns process-wide signal handling and the terminal on exit. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "api/api_internal.h"
#include "config.h"
#include "fsutil.h"
#include "hostcompat.h"
#include "jail.h"
#include "seccomp_filter.h"
#include "serial.h"
#include "default_guest.h"
#include "nvme-lightiov/ssd_autostart.h"
#include "softssd/cli.h"
#include "vfio_host.h"
#include "virtio/vhost_user.h"
#include "vm.h"
#include "vm_internal.h"

#define LVMM_VERSION "0.1.0"
/* locked memory beyond guest RAM: queues and buffers the VMM itself pins */
#define RUN_MEMLOCK_SLACK (64ULL << 20)

static int allowed_fd = -1; /* --allowed-dir, held (fsutil_hold_root) */

static void usage_main(FILE *f)
{
	fprintf(f, "usage: lvmm run [OPTIONS]          boot a microVM\n"
		   "       lvmm [-v] --api-socket PATH  an empty VMM waiting for vm.create (as\n"
		   "                                    cloud-hypervisor is started)\n"
		   "       lvmm api --socket PATH VERB  talk to a running lvmm (lvmm api --help)\n"
		   "       lvmm ssd serve|stats|vol ... software NVMe SSD (lvmm ssd --help)\n"
		   "       lvmm --version | --help\n");
}

static void usage_run(FILE *f)
{
	fprintf(
	    f,
	    "usage: lvmm run [--kernel FILE] [OPTIONS]\n"
	    "  --kernel FILE        vmlinux (ELF) or bzImage (default: the guest make builds, "
	    "next\n"
	    "                       to the binary in guest/, else in share/lvmm/)\n"
	    "  --initramfs FILE     initial RAM file system\n"
	    "  --cmdline STR        kernel command line\n"
	    "  --cpus N             vCPUs (default %u)\n"
	    "  --memory SIZE        guest RAM, e.g. 256M, 2G (default %lluM)\n"
	    "  --serial MODE        stdio | off | file=PATH[,truncate=on][,limit=SIZE] (default\n"
	    "                       stdio; a file is appended to and capped at %lluM unless told)\n"
	    "  --vnvme SPEC         NVMe disk: file=PATH[,size=SIZE][,readonly=on][,serial=S]\n"
	    "                       [,queues=N] (I/O queue pairs, default one per vCPU)\n"
	    "                       or NAME[:SIZE][,vol=NAME][,mode=isolated|passthrough]\n"
	    "                       [,doorbell=poll|eventfd]: a volume on the SSD NAME (anonymous\n"
	    "                       without vol=; a softssd is started when none serves NAME)\n"
	    "  --disk SPEC          virtio-blk disk: path=IMG[,readonly=on][,direct=on]\n"
	    "                       [,num_queues=N][,queue_size=N][,id=ID][,serial=S] (a raw\n"
	    "                       image or block device; repeat for more disks)\n"
	    "  --net SPEC           virtio-net on a tap: tap=NAME[,mac=MAC][,num_queues=N]\n"
	    "                       [,queue_size=N][,mtu=N][,id=ID], or fd=N[:N..] for taps\n"
	    "                       opened by the caller (one per queue pair); repeatable\n"
	    "  --vsock SPEC         virtio-vsock: cid=N,socket=PATH[,id=ID] (host programs\n"
	    "                       connect to PATH and write 'CONNECT <port>'; the guest's\n"
	    "                       connections to host port P reach PATH_P)\n"
	    "  --fs SPEC            virtio-fs share served by a vhost-user back end (virtiofsd):\n"
	    "                       tag=TAG,socket=PATH[,num_queues=N][,queue_size=N][,id=ID]\n"
	    "                       (repeat for more shares)\n"
	    "  --device SPEC        pass a host PCI function through (VFIO, docs/vfio.md):\n"
	    "                       path=/sys/bus/pci/devices/BDF[,id=ID]; repeatable\n"
	    "  --rng [src=PATH]     virtio-rng fed from PATH (default /dev/urandom; the\n"
	    "                       kernel's random, urandom or hwrng device only)\n"
	    "  --restore source_url=file:///DIR[,resume=on][,prefault=on]\n"
	    "            [,memory_restore_mode=copy|ondemand]\n"
	    "                       the VM of a snapshot (docs/snapshot.md), paused unless\n"
	    "                       resume=on; its config comes from the snapshot alone; its\n"
	    "                       RAM mapped from memory.bin (copy-on-write) unless a\n"
	    "                       device needs it copied, or copy is asked\n"
	    "  --api-socket PATH    serve the REST API on this Unix socket\n"
	    "  --allowed-dir DIR    every file an API client names must lie beneath DIR\n"
	    "  --seccomp MODE       kill (default): a system call outside lvmm's filters ends\n"
	    "                       it; log: allowed and logged by the kernel; off\n"
	    "  --ssd-autostart      with --api-socket and no VM: vm.create may start a softssd\n"
	    "                       for an SSD nobody serves (backing in the state directory;\n"
	    "                       waits up to %u s); without it such a vm.create fails at once\n"
	    "  --jail DIR           run confined: new mount, PID, network and IPC namespaces,\n"
	    "                       DIR (root's, as every directory above it, writable by root\n"
	    "                       only) as the root holding only the VM's files, rlimits, no\n"
	    "                       other fds (root only; LVMM_JAIL_CGROUP=DIR also places it in\n"
	    "                       that cgroup); --vsock's PATH is listened on and --fs back\n"
	    "                       ends connected before it (PATH's directory, its owner's\n"
	    "                       only, is bound in read-only)\n"
	    "  --jail-uid UID[:GID] the jail's user (default %u + lvmm's pid, one per jail;\n"
	    "                       GID defaults to UID; neither 0)\n"
	    "Environment: LVMM_SECCOMP=kill|log|off, LVMM_HOSTCOMPAT=on|off, LVMM_PIT=on|off,\n"
	    "  LVMM_IRQCHIP=kernel|split, LVMM_STATS=1, LVMM_DEBUG_VCPU=SECONDS,\n"
	    "  LVMM_PROFILE=FILE[,HZ] (guest RIP samples, default 1000 Hz: see\n"
	    "  tools/profile-guest.sh),\n"
	    "  LVMM_VCPU_NICE=N (vCPU thread nice value; -10 on kvm_pvm with 2+ vCPUs),\n"
	    "  LVMM_RUN_DIR (SSD sockets, default /run/lvmm), LVMM_STATE_DIR (backings of\n"
	    "  softssds lvmm starts, default /var/lib/lvmm)\n",
	    CONFIG_DEFAULT_CPUS, CONFIG_DEFAULT_MEMORY >> 20, CONFIG_DEFAULT_SERIAL_LIMIT >> 20,
	    SSD_AUTO_API_WAIT_MS / 1000, JAIL_UID_BASE);
}

static int copy_arg(char *dst, size_t max, const char *what, const char *v)
{
	if (strlen(v) >= max) {
		fprintf(stderr, "lvmm: %s: argument of %zu bytes is too long\n", what, strlen(v));
		return -1;
	}
	strcpy(dst, v);
	return 0;
}

static int parse_serial(struct vm_config *c, const char *v)
{
	char err[256];

	if (config_parse_serial(v, c, err, sizeof(err))) {
		fprintf(stderr, "lvmm: --%s\n", err);
		return -1;
	}
	return 0;
}

static int parse_cpus(struct vm_config *c, const char *v)
{
	unsigned n;

	if (config_parse_count(v, 1, VM_MAX_VCPUS, &n)) {
		fprintf(stderr, "lvmm: --cpus: '%s' is not a number in 1..%u\n", v, VM_MAX_VCPUS);
		return -1;
	}
	c->cpus = c->max_cpus = n;
	return 0;
}

enum {
	OPT_KERNEL = 256,
	OPT_INITRAMFS,
	OPT_CMDLINE,
	OPT_CPUS,
	OPT_MEMORY,
	OPT_SERIAL,
	OPT_VNVME,
	OPT_API,
	OPT_ALLOWED_DIR,
	OPT_SECCOMP,
	OPT_JAIL,
	OPT_JAIL_UID,
	OPT_SSD_AUTOSTART,
	OPT_RNG,
	OPT_DISK,
	OPT_VSOCK,
	OPT_NET,
	OPT_FS,
	OPT_DEVICE,
	OPT_RESTORE,
	OPT_HELP
};

/* What `lvmm run` takes beyond the VM's configuration. */
struct run_opts {
	const char *api_sock, *allowed_dir, *jail_dir;
	const char *restore; /* --restore's spec */
	struct jail_opts jail;
	bool ssd_autostart;
};

/* --jail-uid UID[:GID] */
static int parse_jail_uid(struct run_opts *ro, const char *v)
{
	unsigned long u, g;
	char *end;

	errno = 0;
	u = strtoul(v, &end, 10);
	g = u;
	if (*end == ':')
		g = strtoul(end + 1, &end, 10);
	if (errno || *end || v[0] == '-' || !u || !g || u >= 0xffffffffUL || g >= 0xffffffffUL) {
		fprintf(stderr, "lvmm: --jail-uid: '%s' is not UID[:GID] with neither 0\n", v);
		return -1;
	}
	ro->jail.uid_set = true;
	ro->jail.uid = (uid_t)u;
	ro->jail.gid = (gid_t)g;
	return 0;
}

static int parse_run(int argc, char **argv, struct vm_config *c, struct run_opts *ro)
{
	static const struct option opts[] = {
	    {"kernel", required_argument, NULL, OPT_KERNEL},
	    {"initramfs", required_argument, NULL, OPT_INITRAMFS},
	    {"cmdline", required_argument, NULL, OPT_CMDLINE},
	    {"cpus", required_argument, NULL, OPT_CPUS},
	    {"memory", required_argument, NULL, OPT_MEMORY},
	    {"serial", required_argument, NULL, OPT_SERIAL},
	    {"vnvme", required_argument, NULL, OPT_VNVME},
	    {"api-socket", required_argument, NULL, OPT_API},
	    {"allowed-dir", required_argument, NULL, OPT_ALLOWED_DIR},
	    {"seccomp", required_argument, NULL, OPT_SECCOMP},
	    {"jail", required_argument, NULL, OPT_JAIL},
	    {"jail-uid", required_argument, NULL, OPT_JAIL_UID},
	    {"ssd-autostart", no_argument, NULL, OPT_SSD_AUTOSTART},
	    {"rng", optional_argument, NULL, OPT_RNG},
	    {"disk", required_argument, NULL, OPT_DISK},
	    {"vsock", required_argument, NULL, OPT_VSOCK},
	    {"net", required_argument, NULL, OPT_NET},
	    {"fs", required_argument, NULL, OPT_FS},
	    {"device", required_argument, NULL, OPT_DEVICE},
	    {"restore", required_argument, NULL, OPT_RESTORE},
	    {"help", no_argument, NULL, OPT_HELP},
	    {NULL, 0, NULL, 0},
	};
	char err[256];
	int o;

	opterr = 0;
	optind = 1;
	while ((o = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
		switch (o) {
		case OPT_KERNEL:
			if (copy_arg(c->kernel, sizeof(c->kernel), "--kernel", optarg))
				return -1;
			break;
		case OPT_INITRAMFS:
			if (copy_arg(c->initramfs, sizeof(c->initramfs), "--initramfs", optarg))
				return -1;
			break;
		case OPT_CMDLINE:
			if (copy_arg(c->cmdline, sizeof(c->cmdline), "--cmdline", optarg))
				return -1;
			break;
		case OPT_CPUS:
			if (parse_cpus(c, optarg))
				return -1;
			break;
		case OPT_MEMORY:
			if (config_parse_size(optarg, &c->memory, err, sizeof(err))) {
				fprintf(stderr, "lvmm: --memory: %s\n", err);
				return -1;
			}
			break;
		case OPT_SERIAL:
			if (parse_serial(c, optarg))
				return -1;
			break;
		case OPT_VNVME:
			if (c->nvnvme >= CONFIG_MAX_VNVME) {
				fprintf(stderr, "lvmm: --vnvme: at most %d devices\n",
					CONFIG_MAX_VNVME);
				return -1;
			}
			if (config_parse_vnvme(optarg, &c->vnvme[c->nvnvme], err, sizeof(err))) {
				fprintf(stderr, "lvmm: --vnvme: %s\n", err);
				return -1;
			}
			c->nvnvme++;
			break;
		case OPT_VSOCK:
			if (config_parse_vsock(optarg, &c->vsock, err, sizeof(err))) {
				fprintf(stderr, "lvmm: --%s\n", err);
				return -1;
			}
			c->has_vsock = true;
			break;
		case OPT_NET:
			if (c->nnets >= CONFIG_MAX_NETS) {
				fprintf(stderr, "lvmm: --net: at most %d devices\n",
					CONFIG_MAX_NETS);
				return -1;
			}
			if (config_parse_net(optarg, &c->nets[c->nnets], err, sizeof(err))) {
				fprintf(stderr, "lvmm: --%s\n", err);
				return -1;
			}
			c->nnets++;
			break;
		case OPT_DEVICE:
			if (c->ndevices >= CONFIG_MAX_DEVICES) {
				fprintf(stderr, "lvmm: --device: at most %d devices\n",
					CONFIG_MAX_DEVICES);
				return -1;
			}
			if (config_parse_device(optarg, &c->devices[c->ndevices], err,
						sizeof(err))) {
				fprintf(stderr, "lvmm: --%s\n", err);
				return -1;
			}
			c->ndevices++;
			break;
		case OPT_FS:
			if (c->nfs >= CONFIG_MAX_FS) {
				fprintf(stderr, "lvmm: --fs: at most %d shares\n", CONFIG_MAX_FS);
				return -1;
			}
			if (config_parse_fs(optarg, &c->fs[c->nfs], err, sizeof(err))) {
				fprintf(stderr, "lvmm: --%s\n", err);
				return -1;
			}
			c->nfs++;
			break;
		case OPT_DISK:
			if (c->ndisks >= CONFIG_MAX_DISKS) {
				fprintf(stderr, "lvmm: --disk: at most %d disks\n",
					CONFIG_MAX_DISKS);
				return -1;
			}
			if (config_parse_disk(optarg, &c->disks[c->ndisks], err, sizeof(err))) {
				fprintf(stderr, "lvmm: --%s\n", err);
				return -1;
			}
			c->ndisks++;
			break;
		case OPT_API:
			ro->api_sock = optarg;
			break;
		case OPT_ALLOWED_DIR:
			ro->allowed_dir = optarg;
			break;
		case OPT_SECCOMP: {
			enum seccomp_mode mode;

			if (seccomp_mode_parse(optarg, &mode)) {
				fprintf(stderr, "lvmm: --seccomp: '%s' is not kill, log or off\n",
					optarg);
				return -1;
			}
			seccomp_mode_set(mode);
			break;
		}
		case OPT_JAIL:
			ro->jail_dir = optarg;
			break;
		case OPT_JAIL_UID:
			if (parse_jail_uid(ro, optarg))
				return -1;
			break;
		case OPT_SSD_AUTOSTART:
			ro->ssd_autostart = true;
			break;
		case OPT_RNG:
			/* cloud-hypervisor's "--rng src=PATH" as well as "--rng=src=PATH" */
			if (!optarg && optind < argc && !strncmp(argv[optind], "src=", 4))
				optarg = argv[optind++];
			if (config_parse_rng(optarg, c, err, sizeof(err))) {
				fprintf(stderr, "lvmm: --%s\n", err);
				return -1;
			}
			break;
		case OPT_RESTORE:
			ro->restore = optarg;
			break;
		case OPT_HELP:
			usage_run(stdout);
			exit(0);
		case ':':
			fprintf(stderr, "lvmm: run: %s needs an argument\n", argv[optind - 1]);
			return -1;
		default:
			fprintf(stderr, "lvmm: run: unknown option '%s' (lvmm run --help)\n",
				argv[optind - 1]);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "lvmm: run: unexpected argument '%s' (lvmm run --help)\n",
			argv[optind]);
		return -1;
	}
	return 0;
}

/* ---- signals: SIGINT/SIGTERM/SIGHUP stop the VM from one thread; crashes restore the tty ---- */

struct sig_waiter {
	struct vm *vm;
	sigset_t set;
	volatile int done;
};

static void *sig_thread(void *arg)
{
	struct sig_waiter *w = arg;
	int sig;

	pthread_setname_np(pthread_self(), "lvmm-signals");
	while (!sigwait(&w->set, &sig)) {
		if (w->done)
			break;
		vm_request_stop(w->vm, VM_EXIT_SIGNAL, "stopped by signal %s", sigabbrev_np(sig));
	}
	return NULL;
}

static void crash_handler(int sig)
{
	serial_term_restore();
	raise(sig); /* SA_RESETHAND: the default action (core dump) follows */
}

static void crash_handlers_install(void)
{
	static const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
	struct sigaction sa;
	unsigned i;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = crash_handler;
	sa.sa_flags = SA_RESETHAND;
	sigemptyset(&sa.sa_mask);
	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
	atexit(serial_term_restore);
}

/* LVMM_STATS=1: each device's counters at exit, as vm.counters gives them. */
static void print_device_stats(struct vm *vm)
{
	enum { MAX = CONFIG_MAX_VNVME + CONFIG_MAX_DISKS + 1 };
	struct dev_counters c[MAX];
	unsigned n = vm_get_counters(vm, c, MAX);

	for (unsigned i = 0; i < n; i++)
		fprintf(stderr,
			"lvmm: device %s: reads %llu writes %llu read_bytes %llu write_bytes %llu "
			"flushes %llu kicks %llu irqs %llu wakeups %llu errors %llu\n",
			c[i].id, (unsigned long long)c[i].reads, (unsigned long long)c[i].writes,
			(unsigned long long)c[i].read_bytes, (unsigned long long)c[i].write_bytes,
			(unsigned long long)c[i].flushes, (unsigned long long)c[i].doorbells,
			(unsigned long long)c[i].irqs, (unsigned long long)c[i].wakeups,
			(unsigned long long)c[i].backend_errors);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The vsock socket made for the jail, the virtio-fs connections: gone again when the jail
 * cannot be entered. The socket is removed through its directory, and only if the name is still
 * the one lvmm made (made: lstat right after the bind). */
static void run_jail_sockets_undo(struct vm_config *cfg, const struct stat *made)
{
	if (cfg->has_vsock && cfg->vsock.has_listen_fd) {
		char err[256], name[NAME_MAX + 1];
		const char *last;
		struct stat st;
		int dfd =
		    fsutil_open_parent("vsock socket", cfg->vsock.socket, &last, err, sizeof(err));
		size_t n = dfd >= 0 ? strcspn(last, "/") : 0;

		if (n && n < sizeof(name)) {
			memcpy(name, last, n);
			name[n] = 0;
			if (made->st_ino && !fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) &&
			    S_ISSOCK(st.st_mode) && st.st_ino == made->st_ino &&
			    st.st_dev == made->st_dev)
				unlinkat(dfd, name, 0);
		}
		if (dfd >= 0)
			close(dfd);
		close(cfg->vsock.listen_fd);
		cfg->vsock.has_listen_fd = false;
	}
	for (unsigned i = 0; i < cfg->nfs && i < CONFIG_MAX_FS; i++)
		if (cfg->fs[i].has_fd) {
			close(cfg->fs[i].fd);
			cfg->fs[i].has_fd = false;
		}
}

/* Before the jail: the vsock device's listening socket (the jail binds its directory in
 * read-only for the guest's connections to PATH_<port>), and each virtio-fs back end
 * connected (the device takes the connection over). made: the socket as bound. */
static int run_jail_sockets(struct vm_config *cfg, struct stat *made)
{
	char err[512], id[64];

	memset(made, 0, sizeof(*made));
	if (cfg->has_vsock) {
		virtio_vsock_id(&cfg->vsock, id, sizeof(id));
		cfg->vsock.listen_fd = virtio_vsock_listen(cfg->vsock.socket, id, err, sizeof(err));
		if (cfg->vsock.listen_fd < 0) {
			fprintf(stderr, "lvmm: %s\n", err);
			return -1;
		}
		cfg->vsock.has_listen_fd = true;
		if (lstat(cfg->vsock.socket, made) || !S_ISSOCK(made->st_mode)) {
			fprintf(stderr, "lvmm: vsock %s: %s is not the socket just made\n", id,
				cfg->vsock.socket);
			memset(made, 0, sizeof(*made));
			run_jail_sockets_undo(cfg, made);
			return -1;
		}
	}
	for (unsigned i = 0; i < cfg->nfs && i < CONFIG_MAX_FS; i++) {
		struct virtio_fs_config *f = &cfg->fs[i];
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		int fd;

		virtio_fs_id(f, i, id, sizeof(id));
		if (strlen(f->socket) >= sizeof(sa.sun_path)) {
			fprintf(stderr, "lvmm: fs %s: socket path %s too long\n", id, f->socket);
			run_jail_sockets_undo(cfg, made);
			return -1;
		}
		strcpy(sa.sun_path, f->socket);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0 || vhost_user_connect_fd(fd, &sa)) {
			fprintf(stderr, "lvmm: fs %s: connect %s: %s\n", id, f->socket,
				errno == EAGAIN ? "the back end accepts no connection (timed out)"
						: strerror(errno));
			if (fd >= 0)
				close(fd);
			run_jail_sockets_undo(cfg, made);
			return -1;
		}
		f->fd = fd;
		f->has_fd = true;
	}
	return 0;
}

/* Type-1 VFIO pins guest RAM for DMA against RLIMIT_MEMLOCK: the limit is the RAM and a little
 * more, not unlimited. Where it cannot be set and is too low, the DMA mapping would fail later:
 * said now, with the figures (a no-IOMMU container maps nothing, so this is not fatal). */
static void run_memlock_for_dma(const struct vm_config *cfg)
{
	rlim_t want = (rlim_t)(cfg->memory + RUN_MEMLOCK_SLACK);
	struct rlimit rl = {want, want}, cur = {0, 0};
	int e;

	if (!setrlimit(RLIMIT_MEMLOCK, &rl))
		return;
	e = errno;
	if (!getrlimit(RLIMIT_MEMLOCK, &cur) && cur.rlim_cur >= want)
		return;
	fprintf(stderr,
		"lvmm: RLIMIT_MEMLOCK not set to %llu bytes (guest RAM pinned for device DMA): %s; "
		"it stays %llu bytes\n",
		(unsigned long long)want, strerror(e), (unsigned long long)cur.rlim_cur);
}

/* Before the jail: the API socket listened on out here (the jail binds in no directory of the
 * host's, and the VM process keeps the fd), then the confinement itself. */
static int run_jail(struct vm_config *cfg, struct run_opts *ro, const char *allowed_dir, int *lfd)
{
	int keep[3 + CONFIG_MAX_NETS * VIRTIO_NET_MAX_PAIRS + CONFIG_MAX_FS + 1 + VFIO_MAX_GROUPS +
		 CONFIG_MAX_DEVICES];
	unsigned n = 0;
	char err[512] = "";

	/* the taps, opened out here (run_open_taps), go in with the VM */
	for (unsigned i = 0; i < cfg->nnets && i < CONFIG_MAX_NETS; i++)
		for (unsigned k = 0; k < cfg->nets[i].nfds; k++)
			keep[n++] = cfg->nets[i].fds[k];
	/* the sockets of vsock and virtio-fs, whose paths the jail does not hold (a VMM without a
	 * VM has no devices yet: nothing to open) */
	if (cfg->kernel[0] && run_jail_sockets(cfg, &ro->jail.vsock_made))
		return -1;
	if (cfg->has_vsock && cfg->vsock.has_listen_fd)
		keep[n++] = cfg->vsock.listen_fd;
	/* passed-through functions: their nodes are root's and outside the jail; guest RAM is
	 * pinned for their DMA, which the jail's user could not lock otherwise */
	if (cfg->kernel[0] && cfg->ndevices) {
		if (vfio_host_preopen(cfg, keep, &n, sizeof(keep) / sizeof(keep[0]), err,
				      sizeof(err))) {
			fprintf(stderr, "lvmm: %s\n", err);
			run_jail_sockets_undo(cfg, &ro->jail.vsock_made);
			return -1;
		}
		run_memlock_for_dma(cfg); /* devices there: the limit matters */
	}
	for (unsigned i = 0; i < cfg->nfs && i < CONFIG_MAX_FS; i++)
		if (cfg->fs[i].has_fd)
			keep[n++] = cfg->fs[i].fd;
	if (ro->api_sock) {
		*lfd = api_socket_listen(ro->api_sock, err, sizeof(err));
		if (*lfd < 0) {
			fprintf(stderr, "lvmm: %s\n", err);
			run_jail_sockets_undo(cfg, &ro->jail.vsock_made);
			return -1;
		}
		keep[n++] = *lfd;
	}
	if (allowed_fd >= 0)
		keep[n++] = allowed_fd;
	/* what the host is, asked while /sys is still there */
	(void)hostcompat_active();
	ro->jail.allowed_dir = allowed_dir;
	ro->jail.allowed_fd = allowed_fd;
	ro->jail.dir = ro->jail_dir;
	ro->jail.api_socket = ro->api_sock;
	ro->jail.keep_fds = keep;
	ro->jail.nkeep = n;
	if (jail_enter(cfg, &ro->jail, err, sizeof(err))) {
		fprintf(stderr, "lvmm: %s\n", err);
		run_jail_sockets_undo(cfg, &ro->jail.vsock_made); /* made above, for nothing */
		return -1;
	}
	return 0;
}

/* --net tap=NAME: the taps are opened before the jail and the seccomp filter (both forbid
 * /dev/net/tun's set-up); the VM takes duplicates, these stay open for the process's life. */
static int run_open_taps(struct vm_config *cfg)
{
	char err[256];

	for (unsigned i = 0; i < cfg->nnets && i < CONFIG_MAX_NETS; i++) {
		struct virtio_net_config *n = &cfg->nets[i];
		unsigned pairs = n->num_queues ? n->num_queues / 2 : 1;

		if (n->nfds)
			continue;
		if (virtio_net_tap_open(n->tap, pairs, n->fds, err, sizeof(err)) ||
		    (n->host_ip &&
		     virtio_net_tap_addr(n->tap, n->host_ip, n->host_mask, err, sizeof(err)))) {
			fprintf(stderr, "lvmm: %s\n", err);
			return -1;
		}
		n->nfds = pairs;
	}
	return 0;
}

/* --restore source_url=file:///DIR[,resume=on|off][,prefault=on|off]
 * [,memory_restore_mode=copy|ondemand] (cloud-hypervisor's RestoreConfig; docs/snapshot.md). */
static int parse_restore(const char *spec, char *dir, size_t len, bool *resume, int *mem,
			 bool *prefault)
{
	char buf[CONFIG_PATH_MAX + 64], err[256], *tok, *save = NULL;
	bool have = false;

	*resume = *prefault = false;
	*mem = CONFIG_MEM_RESTORE_AUTO;
	if (strlen(spec) >= sizeof(buf)) {
		fprintf(stderr, "lvmm: --restore: too long\n");
		return -1;
	}
	snprintf(buf, sizeof(buf), "%s", spec);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (!strncmp(tok, "source_url=", 11)) {
			if (api_snapshot_url(tok + 11, dir, len, err, sizeof(err))) {
				fprintf(stderr, "lvmm: --restore: %s\n", err);
				return -1;
			}
			have = true;
		} else if (!strcmp(tok, "resume=on") || !strcmp(tok, "resume=true")) {
			*resume = true;
		} else if (!strcmp(tok, "resume=off") || !strcmp(tok, "resume=false") ||
			   !strcmp(tok, "prefault=off") || !strcmp(tok, "prefault=false")) {
			continue;
		} else if (!strcmp(tok, "prefault=on") || !strcmp(tok, "prefault=true")) {
			*prefault = true;
		} else if (!strncmp(tok, "memory_restore_mode=", 20)) {
			*mem = api_mem_restore_mode(tok + 20);
			if (*mem < 0) {
				fprintf(stderr,
					"lvmm: --restore: memory_restore_mode '%s' is not copy or "
					"ondemand\n",
					tok + 20);
				return -1;
			}
		} else {
			fprintf(stderr, "lvmm: --restore: unknown option '%s'\n", tok);
			return -1;
		}
	}
	if (!have) {
		fprintf(stderr, "lvmm: --restore: source_url=file:///DIR is required\n");
		return -1;
	}
	return 0;
}

static int cmd_run(int argc, char **argv)
{
	struct sig_waiter sw = {0};
	struct run_opts ro = {0};
	char allowed_dir[PATH_MAX] = "", restore_dir[CONFIG_PATH_MAX] = "";
	bool resume = false, restore_prefault = false;
	int restore_mem = CONFIG_MEM_RESTORE_AUTO;
	struct vm_config cfg;
	enum vm_exit_reason why;
	pthread_t st;
	struct vm *vm;
	char err[512];
	double t0 = now_s();
	int status, kvm_fd, lfd = -1;

	config_defaults(&cfg);
	if (parse_run(argc, argv, &cfg, &ro))
		return 2;
	if (ro.allowed_dir) {
		struct stat sb;

		/* Resolved once here, and held open: clients' paths are compared with this string
		 * and walked from that fd, whatever becomes of the path later. */
		if (!ro.api_sock) {
			fprintf(stderr, "lvmm: --allowed-dir needs --api-socket\n");
			return 2;
		}
		if (!realpath(ro.allowed_dir, allowed_dir) || stat(allowed_dir, &sb)) {
			fprintf(stderr, "lvmm: --allowed-dir %s: %s\n", ro.allowed_dir,
				strerror(errno));
			return 2;
		}
		if (!S_ISDIR(sb.st_mode)) {
			fprintf(stderr, "lvmm: --allowed-dir %s: not a directory\n",
				ro.allowed_dir);
			return 2;
		}
		allowed_fd = fsutil_hold_root(allowed_dir, err, sizeof(err));
		if (allowed_fd < 0) {
			fprintf(stderr, "lvmm: --allowed-dir %s\n", err);
			return 2;
		}
	}
	if (ro.jail_dir && ro.api_sock && ro.api_sock[0] != '/') {
		fprintf(stderr, "lvmm: --jail: --api-socket %s must be an absolute path\n",
			ro.api_sock);
		return 2;
	}
	if (ro.ssd_autostart && (!ro.api_sock || cfg.kernel[0] || ro.jail_dir)) {
		/* lvmm run starts an SSD by itself; inside a jail there is no lvmm to start */
		fprintf(stderr,
			"lvmm: --ssd-autostart is for an API VMM without a VM (--api-socket "
			"without --kernel) and without --jail\n");
		return 2;
	}
	if (ro.restore) {
		/* everything of the VM comes from the snapshot, as with cloud-hypervisor */
		if (cfg.kernel[0] || cfg.initramfs[0] || cfg.nvnvme || cfg.ndisks || cfg.nnets ||
		    cfg.nfs || cfg.has_vsock || cfg.rng_src[0] || ro.jail_dir || ro.ssd_autostart) {
			fprintf(stderr,
				"lvmm: --restore takes no VM options (the snapshot's config "
				"is the VM's), nor --jail or --ssd-autostart\n");
			return 2;
		}
		if (parse_restore(ro.restore, restore_dir, sizeof(restore_dir), &resume,
				  &restore_mem, &restore_prefault))
			return 2;
		if (!resume && !ro.api_sock) {
			fprintf(stderr, "lvmm: --restore: the VM comes back paused; give resume=on "
					"or --api-socket (for vm.resume)\n");
			return 2;
		}
	} else if (ro.api_sock && !cfg.kernel[0]) { /* an empty VMM: the VM comes from vm.create */
		if (ro.jail_dir && run_jail(&cfg, &ro, allowed_dir, &lfd))
			return 1;
		return api_vmm_main(ro.api_sock, lfd, NULL, allowed_dir, ro.ssd_autostart);
	}
	if (!ro.restore && !cfg.kernel[0] && default_guest_find(&cfg, err, sizeof(err))) {
		fprintf(stderr, "lvmm: %s\n", err);
		return 1;
	}
	if (!ro.restore && config_validate(&cfg, err, sizeof(err))) {
		fprintf(stderr, "lvmm: %s\n", err);
		return 1;
	}
	/* Before anything is started on the VM's behalf: without KVM there is no VM to serve. */
	kvm_fd = vm_kvm_open(err, sizeof(err));
	if (kvm_fd < 0) {
		fprintf(stderr, "lvmm: %s\n", err);
		return 1;
	}
	close(kvm_fd);
	if (run_open_taps(&cfg))
		return 1;
	/* Before the seccomp filter: a softssd for an SSD nobody serves is a fork and an exec. */
	if (ssd_autostart(cfg.vnvme, cfg.nvnvme < CONFIG_MAX_VNVME ? cfg.nvnvme : CONFIG_MAX_VNVME,
			  err, sizeof(err))) {
		fprintf(stderr, "lvmm: %s\n", err);
		return 1;
	}
	/* After the softssd start (a fork and exec from the host's view), before any file of the
	 * VM is opened: from here on lvmm sees the jail only. */
	if (ro.jail_dir && run_jail(&cfg, &ro, allowed_dir, &lfd))
		return 1;
	crash_handlers_install();
	if (serial_term_guard())
		fprintf(
		    stderr,
		    "lvmm: warning: no terminal guard; a killed lvmm leaves the terminal raw\n");
	/* A console reader that goes away must not kill the VM: writes then fail with EPIPE. */
	signal(SIGPIPE, SIG_IGN);
	/* Blocked before any thread exists, so only sig_thread ever receives these. */
	sigemptyset(&sw.set);
	sigaddset(&sw.set, SIGINT);
	sigaddset(&sw.set, SIGTERM);
	sigaddset(&sw.set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &sw.set, NULL);

	/* Before vm_create(): the kernel and initramfs are parsed there, and a malformed image
	 * must meet a process that can no longer do much. */
	if (seccomp_install(err, sizeof(err))) {
		fprintf(stderr, "lvmm: %s\n", err);
		return 1;
	}
	if (ro.restore ? api_restore_vm(&api_vm_ops_kvm, allowed_dir, restore_dir, restore_mem,
					restore_prefault, &vm, NULL, err, sizeof(err))
		       : vm_create(&cfg, &vm, err, sizeof(err))) {
		fprintf(stderr, "lvmm: %s%s\n", ro.restore ? "--restore: " : "", err);
		return 1;
	}
	sw.vm = vm;
	if (pthread_create(&st, NULL, sig_thread, &sw)) {
		fprintf(stderr, "lvmm: cannot start the signal thread\n");
		vm_destroy(vm);
		return 1;
	}
	if (ro.restore ? (resume ? vm_resume(vm, err, sizeof(err)) : 0)
		       : vm_boot(vm, err, sizeof(err))) {
		fprintf(stderr, "lvmm: %s\n", err);
		vm_request_stop(vm, VM_EXIT_ERROR, "%s", err);
		why = vm_wait(vm);
		status = 1;
	} else if (ro.api_sock) {
		status = api_vmm_main(ro.api_sock, lfd, vm, allowed_dir, false);
		why = vm_wait(vm);
		vm_console_flush(vm);
		if (!status)
			fprintf(stderr, "lvmm: %s\n", vm_exit_msg(vm));
	} else {
		why = vm_wait(vm);
		vm_console_flush(vm);
		status = why == VM_EXIT_ERROR ? 1 : 0;
		fprintf(stderr, "lvmm: %s%s\n", status ? "VM stopped: " : "", vm_exit_msg(vm));
	}
	if (getenv("LVMM_STATS")) {
		unsigned i;

		fprintf(stderr, "lvmm: ran %.3f s from start to exit\n", now_s() - t0);
		for (i = 0; i < vm->ncpus; i++) {
			const uint64_t *e = vm->vcpus[i].exits;

			fprintf(stderr,
				"lvmm: vcpu %u exits: pio %llu mmio %llu interrupted %llu "
				"emulation %llu\n",
				i, (unsigned long long)e[VCPU_EXIT_IO],
				(unsigned long long)e[VCPU_EXIT_MMIO],
				(unsigned long long)e[VCPU_EXIT_INTR],
				(unsigned long long)e[VCPU_EXIT_EMUL]);
		}
		print_device_stats(vm);
	}
	sw.done = 1;
	pthread_kill(st, SIGHUP);
	pthread_join(st, NULL);
	vm_destroy(vm);
	(void)why;
	return status;
}

/* cloud-hypervisor's command line where it overlaps, as Kata launches its hypervisor:
 * `lvmm [-v...] --api-socket PATH` is `lvmm run --api-socket PATH` (an empty VMM waiting for
 * vm.create). -v is accepted and changes nothing, lvmm's messages being on stderr already;
 * --log-file PATH appends them to PATH instead; --seccomp true|false|log is cloud-hypervisor's
 * spelling of lvmm run's --seccomp kill|off|log (Kata passes false to debug its hypervisor). */
static int cmd_toplevel(int argc, char **argv)
{
	char **args = calloc((size_t)argc + 1, sizeof(*args));
	int i, n = 0, r;

	if (!args) {
		fprintf(stderr, "lvmm: out of memory\n");
		return 1;
	}
	args[n++] = "run";
	for (i = 1; i < argc; i++) {
		if (argv[i][0] == '-' && argv[i][1] == 'v' &&
		    argv[i][strspn(argv[i] + 1, "v") + 1] == 0)
			continue;
		if (!strcmp(argv[i], "--seccomp") || !strcmp(argv[i], "--log-file")) {
			if (i + 1 >= argc) {
				fprintf(stderr, "lvmm: %s needs an argument\n", argv[i]);
				free(args);
				return 2;
			}
			if (!strcmp(argv[i], "--seccomp")) {
				static const char *const map[][2] = {{"true", "kill"},
								     {"false", "off"},
								     {"log", "log"},
								     {"kill", "kill"},
								     {"off", "off"}};
				const char *mode = NULL;

				for (unsigned k = 0; k < sizeof(map) / sizeof(map[0]); k++)
					if (!strcmp(argv[i + 1], map[k][0]))
						mode = map[k][1];
				if (!mode) {
					fprintf(stderr,
						"lvmm: --seccomp takes true, false or log\n");
					free(args);
					return 2;
				}
				/* two arguments out, two in: args keeps its argc + 1 slots */
				args[n++] = "--seccomp";
				args[n++] = (char *)mode;
			} else if (!freopen(argv[i + 1], "a", stderr)) {
				free(args);
				return 1; /* stderr is gone: nothing left to tell */
			}
			i++;
			continue;
		}
		if (argv[i][0] == '-' && argv[i][1] != '-') {
			fprintf(stderr, "lvmm: unknown option '%s' (lvmm --help)\n", argv[i]);
			free(args);
			return 2;
		}
		args[n++] = argv[i];
	}
	args[n] = NULL;
	r = cmd_run(n, args);
	free(args);
	return r;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage_main(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage_main(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("lvmm %s\n", LVMM_VERSION);
		return 0;
	}
	if (!strcmp(argv[1], "run"))
		return cmd_run(argc - 1, argv + 1);
	if (!strcmp(argv[1], "--api-socket") || !strncmp(argv[1], "--api-socket=", 13) ||
	    !strncmp(argv[1], "-v", 2) || !strcmp(argv[1], "--seccomp") ||
	    !strcmp(argv[1], "--log-file"))
		return cmd_toplevel(argc, argv);
	if (!strcmp(argv[1], "api"))
		return api_client_main(argc - 1, argv + 1);
	if (!strcmp(argv[1], "ssd"))
		return ssd_cli_main(argc - 1, argv + 1);
	fprintf(stderr, "lvmm: unknown command '%s' (lvmm --help)\n", argv[1]);
	return 2;
}
