/* `lvmm ssd serve|stats|vol`: option parsing, the backing file (created sparse with --size, never
 * shrunk), --daemon, and the stats report read from a running daemon over its socket. */
#include "softssd/cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lightiov/size.h"
#include "lightiov/voltable.h"
#include "client/lio_client.h"
#include "softssd/model.h"
#include "softssd/server.h"
#include "vfio/nvme_pci.h"

static const char ssd_usage[] =
    "usage: lvmm ssd serve NAME --backing FILE|BLOCKDEV [OPTIONS]   run a software NVMe SSD\n"
    "       lvmm ssd serve NAME --vfio BDF [OPTIONS]               the same on a real NVMe\n"
    "                                                              controller bound to vfio-pci\n"
    "       lvmm ssd stats NAME                                    counters of a running one\n"
    "       lvmm ssd upgrade NAME [--binary PATH]                  a new daemon takes its clients\n"
    "                                                              over (lvmm ssd upgrade --help)\n"
    "       lvmm ssd vol COMMAND ...                               its volumes (lvmm ssd vol "
    "--help)\n"
    "serve options:\n"
    "  --backing PATH        file or block device holding the volume table and the data\n"
    "  --size SIZE           size of the backing file; created sparse when absent, grown when\n"
    "                        smaller (never shrunk)\n"
    "  --lba-size 512|4096   LBA size of a new backing (default: the table's own, else 512)\n"
    "  --model M             none | p4510 | latency=80us,iops=640k (added latency, IOPS cap)\n"
    "  --workers N           serving threads (default: 1 on one CPU, else 2)\n"
    "  --max-clients N       sessions at once (default 64)\n"
    "  --max-qpairs N        queue pairs per client (default 256)\n"
    "  --max-memory SIZE     DMA window per client (default 64G)\n"
    "  --allow-uid UID, --allow-gid GID   peers admitted besides root and the daemon's uid\n"
    "  --seccomp kill|log|off             the daemon's system-call filter (default kill)\n"
    "  --require-resident    refuse DMA windows whose pages are not all populated: a VM's\n"
    "                        memory is then charged to the VM, never to this daemon\n"
    "  --daemon              detach (stdout to /dev/null); default: foreground, one status line\n"
    "                        per client\n"
    "  --notify              READY=1 to $NOTIFY_SOCKET once serving (systemd Type=notify)\n"
    "  --vfio BDF            drive the NVMe controller at PCI address BDF (bound to vfio-pci)\n"
    "                        in place of a backing: volume table and volumes on namespace 1\n"
    "  --allow-noiommu       accept a VFIO group without an IOMMU (no isolation: DMA to\n"
    "                        physical addresses; needs root)\n"
    "  --vfio-poll           take the controller's completions by polling, not MSI-X\n"
    "Sockets: $LVMM_RUN_DIR/ssd/NAME.sock (default /run/lvmm).\n";

/* Opens (creating or growing a file to size when asked) the backing; *cap its bytes. */
static int ssd_backing_open(const char *path, uint64_t size, uint64_t *cap)
{
	struct stat st;
	int fd = open(path, O_RDWR | O_CLOEXEC | (size ? O_CREAT : 0), 0600);

	if (fd < 0) {
		fprintf(stderr, "ssd backing %s: %s%s\n", path, strerror(errno),
			errno == ENOENT ? " (give --size to create it)" : "");
		return -1;
	}
	if (fstat(fd, &st))
		goto fail_errno;
	if (S_ISBLK(st.st_mode)) {
		if (ioctl(fd, BLKGETSIZE64, cap))
			goto fail_errno;
		if (size && size != *cap) {
			fprintf(stderr,
				"ssd backing %s: a block device of %" PRIu64
				" bytes; --size %" PRIu64 " cannot change it\n",
				path, *cap, size);
			goto fail;
		}
		return fd;
	}
	if (!S_ISREG(st.st_mode)) {
		fprintf(stderr, "ssd backing %s: not a regular file or block device\n", path);
		goto fail;
	}
	*cap = (uint64_t)st.st_size;
	if (size && size < *cap) {
		fprintf(stderr,
			"ssd backing %s: %" PRIu64
			" bytes; refusing to shrink it to --size %" PRIu64 "\n",
			path, *cap, size);
		goto fail;
	}
	if (size > *cap) {
		if (ftruncate(fd, (off_t)size)) /* sparse: no block is written */
			goto fail_errno;
		*cap = size;
	}
	if (*cap <= LIO_VT_RESERVED_BYTES) {
		fprintf(stderr,
			"ssd backing %s: %" PRIu64 " bytes; it needs more than the %u of its "
			"volume table\n",
			path, *cap, LIO_VT_RESERVED_BYTES);
		goto fail;
	}
	return fd;
fail_errno:
	fprintf(stderr, "ssd backing %s: %s\n", path, strerror(errno));
fail:
	close(fd);
	return -1;
}

static int ssd_parse_id(const char *what, const char *s, unsigned *out)
{
	uint64_t n;

	if (lio_count_parse(s, 0, 0x7fffffff, &n)) {
		fprintf(stderr, "lvmm ssd serve: %s '%s' is not a number\n", what, s);
		return -1;
	}
	*out = (unsigned)n;
	return 0;
}

/* serve --vfio: the controller in place of the backing. Detached first: a fork after the DMA
 * pool is locked and translated would leave the child with other pages. */
static int ssd_serve_vfio(struct ssd_server_cfg *cfg, const char *bdf, bool noiommu, bool msix,
			  bool daemonize)
{
	struct nvme_pci *nvme = calloc(1, sizeof(*nvme));
	char err[256];
	int r;

	if (!nvme)
		return 1;
	if (daemonize && daemon(0, 0)) {
		fprintf(stderr, "lvmm ssd serve: --daemon: %s\n", strerror(errno));
		free(nvme);
		return 1;
	}
	r = nvme_pci_open(nvme, bdf, noiommu, cfg->workers, msix, err, sizeof(err));
	if (r) {
		fprintf(stderr, "lvmm ssd serve: %s\n", err);
		free(nvme);
		return 1;
	}
	if (cfg->lba_shift && cfg->lba_shift != nvme->lba_shift) {
		fprintf(stderr, "lvmm ssd serve: nvme %s: namespace 1 has %u-byte LBAs, not %u\n",
			nvme->name, 1u << nvme->lba_shift, 1u << cfg->lba_shift);
		r = 1;
		goto out;
	}
	if (nvme->nioq - 1 < cfg->workers) {
		printf("%s: nvme %s grants %u I/O queues: %u worker%s\n", cfg->name, nvme->name,
		       nvme->nioq, nvme->nioq - 1, nvme->nioq == 2 ? "" : "s");
		cfg->workers = nvme->nioq - 1;
	}
	printf("%s: nvme %s (%s, serial %s): %s, %llu LBAs of %u bytes, %u I/O queues, %s\n",
	       cfg->name, nvme->name, nvme->model, nvme->serial,
	       nvme->noiommu ? "no-IOMMU" : "IOMMU", (unsigned long long)nvme->nsze,
	       1u << nvme->lba_shift, nvme->nioq, nvme->ioq[1].irq_fd >= 0 ? "MSI-X" : "polled");
	fflush(stdout);
	cfg->lba_shift = nvme->lba_shift;
	cfg->capacity = nvme->nsze << nvme->lba_shift;
	cfg->backing_fd = cfg->direct_fd = -1;
	cfg->nvme = nvme;
	r = ssd_serve(cfg);
out:
	nvme_pci_close(nvme);
	free(nvme);
	return r;
}

static int ssd_cmd_serve(int argc, char **argv)
{
	enum {
		O_BACKING = 1,
		O_SIZE,
		O_LBA,
		O_MODEL,
		O_WORKERS,
		O_MAXC,
		O_MAXQ,
		O_MAXM,
		O_UID,
		O_GID,
		O_SECCOMP,
		O_DAEMON,
		O_NOTIFY,
		O_HELP,
		O_CACHED,
		O_RESIDENT,
		O_VFIO,
		O_NOIOMMU,
		O_VFIO_POLL
	};
	static const struct option opts[] = {{"backing", required_argument, 0, O_BACKING},
					     {"size", required_argument, 0, O_SIZE},
					     {"lba-size", required_argument, 0, O_LBA},
					     {"model", required_argument, 0, O_MODEL},
					     {"workers", required_argument, 0, O_WORKERS},
					     {"max-clients", required_argument, 0, O_MAXC},
					     {"max-qpairs", required_argument, 0, O_MAXQ},
					     {"max-memory", required_argument, 0, O_MAXM},
					     {"allow-uid", required_argument, 0, O_UID},
					     {"allow-gid", required_argument, 0, O_GID},
					     {"seccomp", required_argument, 0, O_SECCOMP},
					     {"daemon", no_argument, 0, O_DAEMON},
					     {"notify", no_argument, 0, O_NOTIFY},
					     {"help", no_argument, 0, O_HELP},
					     {"cached", no_argument, 0, O_CACHED},
					     {"require-resident", no_argument, 0, O_RESIDENT},
					     {"vfio", required_argument, 0, O_VFIO},
					     {"allow-noiommu", no_argument, 0, O_NOIOMMU},
					     {"vfio-poll", no_argument, 0, O_VFIO_POLL},
					     {0, 0, 0, 0}};
	struct ssd_server_cfg cfg = {
	    .max_clients = SSD_DEF_MAX_CLIENTS,
	    .max_qp_client = SSD_DEF_MAX_QP_CLIENT,
	    .max_qpairs = LIO_MAX_QPAIRS,
	    .max_mem_client = SSD_DEF_MAX_MEM,
	    .allow_uid = (uid_t)-1,
	    .allow_gid = (gid_t)-1,
	};
	const char *backing = NULL, *model = "none", *vfio = NULL;
	struct ssd_model m;
	bool daemonize = false, direct = true, noiommu = false, vfio_poll = false;
	uint64_t size = 0, n;
	unsigned v;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	char err[256];
	int c, r;

	cfg.workers = ncpu > 1 ? 2 : 1;
	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case O_BACKING:
			backing = optarg;
			break;
		case O_SIZE:
		case O_MAXM:
			r = lio_size_parse(optarg, c == O_SIZE ? &size : &cfg.max_mem_client);
			if (r || (c == O_SIZE ? size : cfg.max_mem_client) == 0) {
				fprintf(stderr, "lvmm ssd serve: --%s %s: '%s' %s\n",
					opts[c - 1].name, optarg, optarg,
					r ? lio_size_why(r) : "is zero");
				return 2;
			}
			break;
		case O_LBA:
			if (!strcmp(optarg, "512")) {
				cfg.lba_shift = 9;
			} else if (!strcmp(optarg, "4096")) {
				cfg.lba_shift = 12;
			} else {
				fprintf(stderr, "lvmm ssd serve: --lba-size %s: 512 or 4096\n",
					optarg);
				return 2;
			}
			break;
		case O_MODEL:
			model = optarg;
			break;
		case O_WORKERS:
		case O_MAXC:
		case O_MAXQ:
			if (lio_count_parse(optarg, 1, c == O_WORKERS ? 64 : LIO_MAX_QPAIRS, &n)) {
				fprintf(stderr, "lvmm ssd serve: --%s %s: a count in 1..%u\n",
					opts[c - 1].name, optarg,
					c == O_WORKERS ? 64 : LIO_MAX_QPAIRS);
				return 2;
			}
			if (c == O_WORKERS)
				cfg.workers = (unsigned)n;
			else if (c == O_MAXC)
				cfg.max_clients = (unsigned)n;
			else
				cfg.max_qp_client = (unsigned)n;
			break;
		case O_UID:
		case O_GID:
			if (ssd_parse_id(opts[c - 1].name, optarg, &v))
				return 2;
			if (c == O_UID)
				cfg.allow_uid = (uid_t)v;
			else
				cfg.allow_gid = (gid_t)v;
			break;
		case O_SECCOMP:
			if (!strcmp(optarg, "kill")) {
				cfg.seccomp = SSD_SECCOMP_KILL;
			} else if (!strcmp(optarg, "log")) {
				cfg.seccomp = SSD_SECCOMP_LOG;
			} else if (!strcmp(optarg, "off")) {
				cfg.seccomp = SSD_SECCOMP_OFF;
			} else {
				fprintf(stderr, "lvmm ssd serve: --seccomp %s: kill, log or off\n",
					optarg);
				return 2;
			}
			break;
		case O_DAEMON:
			daemonize = true;
			break;
		case O_NOTIFY:
			cfg.notify = 1;
			break;
		case O_CACHED:
			direct = false;
			break;
		case O_RESIDENT:
			cfg.require_resident = true;
			break;
		case O_VFIO:
			vfio = optarg;
			break;
		case O_NOIOMMU:
			noiommu = true;
			break;
		case O_VFIO_POLL:
			vfio_poll = true;
			break;
		case O_HELP:
			fputs(ssd_usage, stdout);
			return 0;
		default:
			fputs(ssd_usage, stderr);
			return 2;
		}
	}
	if (optind + 1 != argc || !backing == !vfio || ((noiommu || vfio_poll) && !vfio) ||
	    (vfio && size)) {
		/* one line, as every other command refuses: the usage is what --help is for */
		fprintf(stderr, "lvmm: ssd serve: %s (lvmm ssd --help)\n",
			optind + 1 != argc  ? "expected one SSD NAME"
			: backing && vfio   ? "--backing and --vfio exclude each other"
			: !backing && !vfio ? "--backing or --vfio is required"
			: vfio		    ? "--size is the controller's with --vfio"
					    : "--allow-noiommu and --vfio-poll go with --vfio");
		return 2;
	}
	cfg.name = argv[optind];
	if (!lio_name_valid(cfg.name)) {
		fprintf(stderr, "lvmm ssd serve: name '%s' is not 1..31 of [A-Za-z0-9._-]\n",
			cfg.name);
		return 2;
	}
	r = ssd_model_parse(&m, model, err, sizeof(err));
	if (r) {
		fprintf(stderr, "lvmm ssd serve: %s\n", err);
		return 2;
	}
	cfg.model = &m;
	if (vfio) {
		r = ssd_serve_vfio(&cfg, vfio, noiommu, !vfio_poll, daemonize);
		ssd_model_destroy(&m);
		return r;
	}
	cfg.backing_fd = ssd_backing_open(backing, size, &cfg.capacity);
	if (cfg.backing_fd < 0)
		return 1;
	/* the data path bypasses the page cache where the file system allows, as a device would */
	cfg.direct_fd = direct ? open(backing, O_RDWR | O_CLOEXEC | O_DIRECT) : -1;
	if (direct && cfg.direct_fd < 0)
		printf("%s: backing %s without O_DIRECT (%s): I/O goes through the page cache\n",
		       cfg.name, backing, strerror(errno));
	/* before any thread: the workers and the control loop run in the detached process */
	if (daemonize && daemon(0, 0)) {
		fprintf(stderr, "lvmm ssd serve: --daemon: %s\n", strerror(errno));
		return 1;
	}
	r = ssd_serve(&cfg);
	close(cfg.backing_fd);
	if (cfg.direct_fd >= 0)
		close(cfg.direct_fd);
	ssd_model_destroy(&m);
	return r;
}

static void ssd_pr_bytes(const char *label, uint64_t b)
{
	printf(" %s %" PRIu64 ".%" PRIu64 " MiB", label, b >> 20,
	       ((b & ((1 << 20) - 1)) * 10) >> 20);
}

static int ssd_cmd_stats(int argc, char **argv)
{
	struct lio_client *c;
	struct lio_identify id;
	struct lio_ssd_stats st;
	struct lio_session_list l;
	uint32_t first = 0, found = 0, qid;
	char err[256];
	int r;

	if (argc != 2 || argv[1][0] == '-') {
		fprintf(stderr, "usage: lvmm ssd stats NAME\n");
		return argc == 2 && !strcmp(argv[1], "--help") ? 0 : 2;
	}
	r = lio_client_connect(&c, argv[1], "lvmm-ssd-stats", &id, err, sizeof(err));
	if (r) {
		fprintf(stderr, "lvmm ssd stats: %s\n", err);
		return 1;
	}
	r = lio_client_ssd_stats(c, &st);
	if (r) {
		fprintf(stderr, "lvmm ssd stats: %s\n", lio_client_error(c));
		lio_client_close(c);
		return 1;
	}
	printf("ssd %s: model %s, %u-byte LBAs, %" PRIu64 " LBAs (%" PRIu64 " free), %u volumes, "
	       "up %" PRIu64 " s\n",
	       id.name, id.model, 1u << id.lba_shift, id.capacity_lbas, id.free_lbas, id.nr_volumes,
	       (uint64_t)(st.uptime_ns / 1000000000u));
	printf("total: %u sessions, %u qpairs, %" PRIu64 " cmds", st.sessions, st.qpairs, st.cmds);
	ssd_pr_bytes("read", st.read_bytes);
	ssd_pr_bytes("written", st.write_bytes);
	printf(", %" PRIu64 " errors, %" PRIu64 " rejected, %" PRIu64 " polls, %" PRIu64
	       " sleeps, %" PRIu64 " irqs\n",
	       st.errors, st.rejected, st.polls, st.sleeps, st.irqs);
	do {
		memset(&l, 0, sizeof(l));
		l.first = first;
		if (lio_client_session_list(c, &l))
			break;
		for (uint32_t i = 0; i < l.count; i++) {
			const struct lio_session_info *s = &l.s[i];

			printf(
			    "session '%.*s' pid %d uid %u: %u qpairs, %u volumes, %" PRIu64 " cmds",
			    LIO_NAME_MAX, s->label, s->pid, s->uid, s->qpairs, s->volumes, s->cmds);
			ssd_pr_bytes("read", s->read_bytes);
			ssd_pr_bytes("written", s->write_bytes);
			printf(", %" PRIu64 " errors, %" PRIu64 " rejected\n", s->errors,
			       s->rejected);
		}
		first += l.count;
	} while (l.count && first < l.total);
	/* queue pairs: ids are spread over 1..65535; stop once all in use were seen */
	for (qid = 1; qid <= LIO_MAX_QPAIRS && found < st.qpairs; qid++) {
		struct lio_qp_stats q;

		if (lio_client_qp_stats(c, qid, &q))
			continue;
		found++;
		printf("qpair %u %s: %" PRIu64 " cmds", q.qp_id,
		       q.mode == LIGHTIOV_MODE_ISOLATED ? "isolated" : "passthrough", q.cmds);
		ssd_pr_bytes("read", q.read_bytes);
		ssd_pr_bytes("written", q.write_bytes);
		printf(", %" PRIu64 " errors, %" PRIu64 " rejected, %" PRIu64 " polls, %" PRIu64
		       " sleeps, %" PRIu64 " irqs\n",
		       q.errors, q.rejected, q.polls, q.sleeps, q.irqs);
	}
	lio_client_close(c);
	return 0;
}

static const char ssd_upgrade_usage[] =
    "usage: lvmm ssd upgrade NAME [--binary PATH]\n"
    "Starts PATH (default: this lvmm) as the daemon of SSD NAME; it takes the running daemon's\n"
    "clients over (sockets, memory, queue pairs, volumes) while their I/O pauses, and the old\n"
    "daemon exits. Only root or the daemon's own user may ask. On any failure the old daemon\n"
    "serves on. systemd: `systemctl reload lvmm-softssd@NAME`.\n";

/* The new daemon runs detached from this command: its result comes back as one line on a pipe
 * ("ok PID" or "error: ..."), then the command exits and the daemon serves on. */
static int ssd_cmd_upgrade(int argc, char **argv)
{
	char self[4096], line[512] = "", *binary = NULL, fdarg[16];
	const char *name = NULL;
	size_t got = 0;
	int p[2], i, st;
	ssize_t n;
	pid_t pid;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(ssd_upgrade_usage, stdout);
			return 0;
		} else if (!strcmp(argv[i], "--binary") && i + 1 < argc) {
			binary = argv[++i];
		} else if (argv[i][0] != '-' && !name) {
			name = argv[i];
		} else {
			fprintf(stderr,
				"lvmm: ssd upgrade: unexpected '%s' (lvmm ssd upgrade --help)\n",
				argv[i]);
			return 2;
		}
	}
	if (!name || !lio_name_valid(name)) {
		fprintf(stderr, "lvmm: ssd upgrade: %s%s%s (lvmm ssd upgrade --help)\n",
			name ? "name '" : "expected one SSD NAME", name ? name : "",
			name ? "' is not 1..31 of [A-Za-z0-9._-]" : "");
		return 2;
	}
	if (!binary) {
		n = readlink("/proc/self/exe", self, sizeof(self) - 1);
		if (n <= 0) {
			fprintf(stderr, "lvmm: ssd upgrade %s: /proc/self/exe: %s\n", name,
				strerror(errno));
			return 1;
		}
		self[n] = 0;
		binary = self;
	}
	if (access(binary, X_OK)) {
		fprintf(stderr, "lvmm: ssd upgrade %s: binary %s: %s\n", name, binary,
			strerror(errno));
		return 1;
	}
	if (pipe2(p, O_CLOEXEC)) {
		fprintf(stderr, "lvmm: ssd upgrade %s: pipe: %s\n", name, strerror(errno));
		return 1;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "lvmm: ssd upgrade %s: fork: %s\n", name, strerror(errno));
		return 1;
	}
	if (!pid) {
		char *args[] = {binary,	       "ssd", "take-over", (char *)name,
				"--status-fd", fdarg, NULL};
		int fd = fcntl(p[1], F_DUPFD, 3);

		setsid(); /* the daemon outlives this command and its terminal */
		snprintf(fdarg, sizeof(fdarg), "%d", fd);
		execv(binary, args);
		dprintf(fd, "error: exec %s: %s\n", binary, strerror(errno));
		_exit(127);
	}
	close(p[1]);
	/* one line: the daemon may hand the pipe on (a wrapper, a debugger) and never close it */
	while (got < sizeof(line) - 1 && !memchr(line, '\n', got) &&
	       (n = read(p[0], line + got, sizeof(line) - 1 - got)) > 0)
		got += (size_t)n;
	close(p[0]);
	line[got] = 0;
	if (!strncmp(line, "ok ", 3)) {
		printf("ssd %s: upgraded: served by pid %d now\n", name, atoi(line + 3));
		return 0;
	}
	line[strcspn(line, "\n")] = 0;
	if (!strncmp(line, "error: ", 7)) {
		fprintf(stderr, "lvmm: ssd upgrade %s: %s\n", name, line + 7);
		waitpid(pid, &st, 0);
		return 1;
	}
	waitpid(pid, &st, 0);
	fprintf(stderr,
		"lvmm: ssd upgrade %s: the new daemon %s %d before taking over; the old one "
		"serves on\n",
		name, WIFEXITED(st) ? "exited with status" : "died of signal",
		WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	return 1;
}

/* Internal: the new daemon as ssd_cmd_upgrade starts it. */
static int ssd_cmd_take_over(int argc, char **argv)
{
	uint64_t fd;

	if (argc != 4 || strcmp(argv[2], "--status-fd") ||
	    lio_count_parse(argv[3], 0, 65535, &fd) || !lio_name_valid(argv[1])) {
		fprintf(stderr,
			"usage: lvmm ssd take-over NAME --status-fd FD (lvmm ssd upgrade)\n");
		return 2;
	}
	return ssd_take_over(argv[1], (int)fd);
}

int ssd_cli_main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
	    !strcmp(argv[1], "help")) {
		fputs(ssd_usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (!strcmp(argv[1], "serve"))
		return ssd_cmd_serve(argc - 1, argv + 1);
	if (!strcmp(argv[1], "stats"))
		return ssd_cmd_stats(argc - 1, argv + 1);
	if (!strcmp(argv[1], "upgrade"))
		return ssd_cmd_upgrade(argc - 1, argv + 1);
	if (!strcmp(argv[1], "take-over"))
		return ssd_cmd_take_over(argc - 1, argv + 1);
	if (!strcmp(argv[1], "vol"))
		return ssd_vol_cli(argc - 1, argv + 1);
	fprintf(stderr, "lvmm ssd: unknown command '%s' (lvmm ssd --help)\n", argv[1]);
	return 2;
}
