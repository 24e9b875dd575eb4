/* `lvmm ssd vol`: the volumes of a shared SSD from the shell, through the running daemon
 * (lio_client) or, with --backing, on the backing itself; import and export are vol_copy.c's. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "lightiov/size.h"
#include "lightiov/voltable.h"
#include "client/lio_client.h"
#include "softssd/backing_io.h"
#include "softssd/cli.h"
#include "softssd/vol_cli_int.h"
#include "softssd/volumes.h"

static const char volcli_usage[] =
    "usage: lvmm ssd vol COMMAND SSD ARGS... [--backing FILE]\n"
    "  create SSD VOL SIZE   a new volume of SIZE bytes (suffix K, M, G or T)\n"
    "  list SSD              the volumes, their LBA windows and the sessions using them\n"
    "  delete SSD VOL        free a volume (refused while a VM uses it)\n"
    "  resize SSD VOL SIZE   grow a volume (grow only; refused while a VM uses it)\n"
    "  import SSD VOL FILE   copy FILE into the volume (the rest of it reads as zeros)\n"
    "  export SSD VOL FILE   copy the volume into FILE (sparse where the volume is zero)\n"
    "SSD is the name the daemon serves (`lvmm ssd serve SSD`, socket\n"
    "$LVMM_RUN_DIR/ssd/SSD.sock, /run/lvmm by default). With --backing FILE the command works\n"
    "on the backing itself, under its lock: only while no daemon serves it.\n"
    "Exit status: 0 done, 1 refused or failed, 2 usage error.\n";

struct volcli_cmd {
	const char *name;
	const char *args; /* for the usage error */
	int nargs;	  /* positionals after the command */
};

static const struct volcli_cmd volcli_cmds[] = {
    {"create", "SSD VOL SIZE", 3}, {"list", "SSD", 1},
    {"delete", "SSD VOL", 2},	   {"resize", "SSD VOL SIZE", 3},
    {"import", "SSD VOL FILE", 3}, {"export", "SSD VOL FILE", 3},
};

int volcli_fail(const char *fmt, ...)
{
	va_list ap;

	fputs("lvmm: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 1;
}

/* ---- connecting: daemon or backing ---- */

static int volcli_online(struct volcli *x)
{
	char path[108];
	int r;

	r = lio_sock_path(x->ssd, path, sizeof(path));
	if (r)
		return volcli_fail("%s: no socket path for this SSD name (%s)", x->ssd,
				   strerror(-r));
	r = lio_client_connect(&x->c, x->ssd, "lvmm-ssd-vol", NULL, x->err, sizeof(x->err));
	if (r == -ENOENT || r == -ECONNREFUSED)
		return volcli_fail("%s: no daemon serves it at %s (start `lvmm ssd serve %s`, or "
				   "pass --backing FILE to work on the backing offline)",
				   x->ssd, path, x->ssd);
	if (r)
		return volcli_fail("%s", x->err);
	return 0;
}

static int volcli_backing_size(struct volcli *x, uint64_t *size)
{
	struct stat st;

	if (fstat(x->fd, &st))
		return volcli_fail("%s: backing %s: %s", x->ssd, x->backing, strerror(errno));
	if (S_ISREG(st.st_mode)) {
		*size = (uint64_t)st.st_size;
		return 0;
	}
	if (S_ISBLK(st.st_mode) && !ioctl(x->fd, BLKGETSIZE64, size))
		return 0;
	return volcli_fail("%s: backing %s is neither a regular file nor a block device", x->ssd,
			   x->backing);
}

/* The backing, locked: a blank one is formatted only by create (with the default LBA size). */
static int volcli_offline(struct volcli *x, bool *blank)
{
	uint64_t size;
	int r;

	*blank = false;
	x->fd = open(x->backing, O_RDWR | O_CLOEXEC);
	if (x->fd < 0)
		return volcli_fail("%s: backing %s: %s", x->ssd, x->backing, strerror(errno));
	if (volcli_backing_size(x, &size))
		return 1;
	r = ssd_volumes_open(&x->v, x->fd, x->ssd, size, 0, !strcmp(x->cmd, "create"), x->err,
			     sizeof(x->err));
	if (r == -ENOENT && !strcmp(x->cmd, "list")) {
		*blank = true;
		return 0;
	}
	if (r)
		return volcli_fail("%s", x->err);
	x->lba_shift = ssd_volumes_lba_shift(x->v);
	return 0;
}

static void volcli_close(struct volcli *x)
{
	if (x->drv)
		lio_drv_close(x->drv);
	if (x->attached && x->c)
		lio_client_vol_detach(x->c, x->a.vol_id);
	if (x->attached && x->v)
		ssd_volumes_detach(x->v, x->a.vol_id, (uint64_t)getpid());
	if (x->c)
		lio_client_close(x->c);
	ssd_volumes_close(x->v);
	if (x->fd >= 0)
		close(x->fd);
	if (!x->c)
		free(x->slot[0].buf);
	if (x->out >= 0)
		close(x->out);
}

/* ---- create, delete, resize, list ---- */

static int volcli_parse_size(struct volcli *x, const char *s, uint64_t *size)
{
	int r = lio_size_parse(s, size);

	if (r) {
		fprintf(stderr, "lvmm: ssd vol %s: %s: volume %s size: '%s' %s\n", x->cmd, x->ssd,
			x->vol, s, lio_size_why(r));
		return 2;
	}
	return 0;
}

static int volcli_named(struct volcli *x, uint64_t size)
{
	struct lio_vol req = {.size_bytes = size};
	char s[24];
	int r;

	if (ssd_vol_name_check(x->ssd, x->vol, req.name, x->err, sizeof(x->err)))
		return volcli_fail("%s", x->err);
	if (x->c && strcmp(x->cmd, "delete")) {
		struct timeval forever = {0};

		/* The daemon zeroes new LBAs and a resize may copy the whole volume before it
		 * answers: longer than the client's usual reply timeout. */
		setsockopt(lio_client_fd(x->c), SOL_SOCKET, SO_RCVTIMEO, &forever, sizeof(forever));
	}
	if (!strcmp(x->cmd, "create"))
		r = x->c ? lio_client_vol_create(x->c, &req)
			 : ssd_volumes_create(x->v, &req, x->err, sizeof(x->err));
	else if (!strcmp(x->cmd, "delete"))
		r = x->c ? lio_client_vol_delete(x->c, &req)
			 : ssd_volumes_delete(x->v, &req, x->err, sizeof(x->err));
	else
		r = x->c ? lio_client_vol_resize(x->c, &req)
			 : ssd_volumes_resize(x->v, &req, x->err, sizeof(x->err));
	if (r)
		return volcli_fail("%s", x->c ? lio_client_error(x->c) : x->err);
	ssd_size_str(size, s, sizeof(s));
	if (!strcmp(x->cmd, "delete"))
		printf("%s: volume %s deleted\n", x->ssd, x->vol);
	else
		printf("%s: volume %s %s (%s)\n", x->ssd, x->vol,
		       !strcmp(x->cmd, "create") ? "created" : "resized", s);
	return 0;
}

static int volcli_list(struct volcli *x, bool blank)
{
	struct lio_identify id = {0};
	struct lio_vol_list l;
	char size[24], cap[24], fr[24];
	uint32_t shift;
	int r;

	if (blank) {
		printf("%s: blank backing (no volume table yet)\n", x->ssd);
		return 0;
	}
	if (x->c) {
		r = lio_client_identify(x->c, &id);
		if (r)
			return volcli_fail("%s", lio_client_error(x->c));
	} else {
		ssd_volumes_identify(x->v, &id);
	}
	shift = id.lba_shift;
	ssd_size_str(id.capacity_lbas << shift, cap, sizeof(cap));
	ssd_size_str(id.free_lbas << shift, fr, sizeof(fr));
	printf("%s: %u volume%s, capacity %s, largest free extent %s, %u-byte LBAs\n", x->ssd,
	       id.nr_volumes, id.nr_volumes == 1 ? "" : "s", cap, fr, 1u << shift);
	printf("%-31s %8s %12s %12s %5s %s\n", "NAME", "SIZE", "LBA_START", "LBA_COUNT", "USERS",
	       "FLAGS");
	memset(&l, 0, sizeof(l));
	do {
		unsigned i;

		r = x->c ? lio_client_vol_list(x->c, &l) : ssd_volumes_list(x->v, &l);
		if (r)
			return volcli_fail("%s", x->c ? lio_client_error(x->c) : "list failed");
		for (i = 0; i < l.count; i++) {
			const struct lio_vol_info *e = &l.v[i];

			ssd_size_str(e->lba_count << shift, size, sizeof(size));
			printf("%-31.*s %8s %12" PRIu64 " %12" PRIu64 " %5u %s\n", LIO_NAME_MAX - 1,
			       e->name, size, e->lba_start, e->lba_count, e->users,
			       e->flags & LIO_VOL_ANON ? "anon" : "-");
		}
		l.first += l.count;
	} while (l.count && l.first < l.total);
	return 0;
}

/* ---- the command line ---- */

/* Prints "lvmm: ssd volMSG (lvmm ssd vol --help)" and returns 2. */
static int volcli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int volcli_usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("lvmm: ssd vol", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs(" (lvmm ssd vol --help)\n", stderr);
	return 2;
}

int ssd_vol_cli(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"backing", required_argument, NULL, 'b'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const struct volcli_cmd *cmd = NULL;
	struct volcli x = {.fd = -1, .out = -1};
	const char *pos[4];
	uint64_t size = 0;
	bool blank = false;
	unsigned i;
	int npos = 0, o, r;

	if (argc < 2)
		return volcli_usage_error(
		    ": a command is needed: create, list, delete, resize, import or export");
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		fputs(volcli_usage, stdout);
		return 0;
	}
	for (i = 0; i < sizeof(volcli_cmds) / sizeof(volcli_cmds[0]); i++)
		if (!strcmp(argv[1], volcli_cmds[i].name))
			cmd = &volcli_cmds[i];
	if (!cmd)
		return volcli_usage_error(": unknown command '%s'", argv[1]);
	x.cmd = cmd->name;

	/* The command is getopt's argv[0]; options may sit anywhere among the arguments. */
	opterr = 0;
	optind = 0;
	while ((o = getopt_long(argc - 1, argv + 1, ":h", opts, NULL)) != -1) {
		switch (o) {
		case 'b':
			x.backing = optarg;
			break;
		case 'h':
			fputs(volcli_usage, stdout);
			return 0;
		case ':':
			return volcli_usage_error(" %s: %s needs a value", cmd->name, argv[optind]);
		default:
			return volcli_usage_error(" %s: unknown option '%s'", cmd->name,
						  argv[optind]);
		}
	}
	for (i = (unsigned)optind + 1; i < (unsigned)argc; i++) {
		if (npos == 4)
			break;
		pos[npos++] = argv[i];
	}
	if (npos != cmd->nargs || argc - 1 - optind != cmd->nargs)
		return volcli_usage_error(" %s: expected %s", cmd->name, cmd->args);
	if (x.backing && !*x.backing)
		return volcli_usage_error(" %s: --backing needs a file", cmd->name);
	x.ssd = pos[0];
	x.vol = npos > 1 ? pos[1] : NULL;
	if (!lio_name_valid(x.ssd))
		return volcli_fail("invalid SSD name '%s' (1-%d of A-Z a-z 0-9 . _ -)", x.ssd,
				   LIO_NAME_MAX - 1);
	if ((!strcmp(x.cmd, "create") || !strcmp(x.cmd, "resize")) &&
	    (r = volcli_parse_size(&x, pos[2], &size)))
		return r;

	r = x.backing ? volcli_offline(&x, &blank) : volcli_online(&x);
	if (!r) {
		if (!strcmp(x.cmd, "list"))
			r = volcli_list(&x, blank);
		else if (!strcmp(x.cmd, "import"))
			r = volcli_import(&x, pos[2]);
		else if (!strcmp(x.cmd, "export"))
			r = volcli_export(&x, pos[2]);
		else
			r = volcli_named(&x, size);
	}
	volcli_close(&x);
	return r;
}
