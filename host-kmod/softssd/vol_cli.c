/* `lvmm ssd vol`: the volumes of a shared SSD from the shell, through the running daemon
 * (lio_client; data through a queue pair of its own) or, with --backing, on the backing itself. */
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

#include "config.h"
#include "lightiov/nvme.h"
#include "lightiov/voltable.h"
#include "nvme-lightiov/lio_client.h"
#include "softssd/backing_io.h"
#include "softssd/cli.h"
#include "softssd/volumes.h"

#define VOLCLI_CHUNK	  LIO_MDTS_BYTES /* one NVMe command online, one pread/pwrite offline */
#define VOLCLI_QD	  8		 /* commands in flight online (the queue pair has 16) */
#define VOLCLI_ZEROES_MAX 65536u	 /* LBAs of one Write Zeroes (NLB is 16 bits, 0-based) */

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

/* One buffer of the copy and the command using it. */
struct volcli_slot {
	void *buf;
	uint64_t gpa; /* online: buf in the DMA window */
	uint64_t lba; /* window-relative */
	uint32_t nlb;
	int cid;
	bool busy, write;
};

/* One invocation: the daemon (c) or the backing (fd, v), and the volume being moved. */
struct volcli {
	const char *cmd, *ssd, *vol, *backing;
	struct lio_client *c;
	struct lio_drv *drv;
	int fd;
	struct ssd_volumes *v;
	uint32_t lba_shift;
	struct lio_vol_attach a;
	bool attached;
	struct volcli_slot slot[VOLCLI_QD];
	unsigned nr_slots; /* VOLCLI_QD online, 1 offline (its buffer is malloc'd) */
	int out;	   /* export: the file, written where each read lands */
	const char *file;
	bool sparse;
	char err[LIO_ERR_MAX + 128];
};

/* Prints "lvmm: MSG" and returns 1 (refused or failed). */
static int volcli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int volcli_fail(const char *fmt, ...)
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
	char err[160];

	if (config_parse_size(s, size, err, sizeof(err))) {
		fprintf(stderr, "lvmm: ssd vol %s: %s: volume %s size: %s\n", x->cmd, x->ssd,
			x->vol, err);
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

/* ---- import, export: the volume held alone, its data moved in chunks ---- */

static int volcli_attach(struct volcli *x)
{
	unsigned i;
	int r;

	memset(&x->a, 0, sizeof(x->a));
	if (ssd_vol_name_check(x->ssd, x->vol, x->a.name, x->err, sizeof(x->err)))
		return volcli_fail("%s", x->err);
	/* Alone: a VM using it (even read-only) refuses the import or export. */
	x->a.flags = LIO_ATTACH_EXCL_ALL;
	if (x->c) {
		struct lio_identify id;

		r = lio_client_identify(x->c, &id);
		if (!r)
			x->lba_shift = id.lba_shift;
		if (!r)
			r = lio_client_vol_attach(x->c, &x->a);
		if (r)
			return volcli_fail("%s", lio_client_error(x->c));
	} else {
		r = ssd_volumes_attach(x->v, &x->a, (uint64_t)getpid(), x->err, sizeof(x->err));
		if (r)
			return volcli_fail("%s", x->err);
	}
	x->attached = true;
	if (x->c) {
		struct lio_drv_opts o = {
		    .vol_id = x->a.vol_id,
		    .lba_start = x->a.lba_start,
		    .lba_count = x->a.lba_count,
		    .lba_shift = x->lba_shift,
		    .mode = LIO_MODE_ISOLATED,
		    .qp_flags = LIO_QP_SQ_QMEM | LIO_QP_CQ_QMEM | LIO_QP_DB_POLL,
		    .nr_qp = 1,
		    .depth = 16,
		    .mem_bytes = 4 << 20, /* the buffers, the PRP-list pages */
		};

		r = lio_drv_open(&x->drv, x->c, &o, x->err, sizeof(x->err));
		if (r)
			return volcli_fail("%s: volume %s: no queue pair for the copy: %s", x->ssd,
					   x->vol, x->err);
		for (i = 0; i < VOLCLI_QD; i++) {
			x->slot[i].gpa = lio_drv_alloc(x->drv, VOLCLI_CHUNK);
			if (!x->slot[i].gpa)
				return volcli_fail(
				    "%s: volume %s: no room for %u buffers of %u bytes", x->ssd,
				    x->vol, VOLCLI_QD, VOLCLI_CHUNK);
			x->slot[i].buf = lio_drv_ptr(x->drv, x->slot[i].gpa);
		}
		x->nr_slots = VOLCLI_QD;
	} else {
		if (posix_memalign(&x->slot[0].buf, 4096, VOLCLI_CHUNK))
			return volcli_fail("%s: out of memory", x->ssd);
		x->nr_slots = 1;
	}
	return 0;
}

/* A read landed in s->buf: export writes it where it belongs in the file (holes stay holes). */
static int volcli_read_done(struct volcli *x, struct volcli_slot *s)
{
	size_t len = (size_t)s->nlb << x->lba_shift;
	int r;

	if (x->sparse && ssd_all_zero(s->buf, len))
		return 0;
	r = ssd_backing_pwrite(x->out, s->buf, len, s->lba << x->lba_shift);
	return r ? volcli_fail("%s: export file %s: write failed: %s", x->ssd, x->file,
			       strerror(-r))
		 : 0;
}

static int volcli_done(struct volcli *x, struct volcli_slot *s, uint16_t status)
{
	s->busy = false;
	if (status)
		return volcli_fail("%s: volume %s: %s of LBA %" PRIu64 "+%u failed (NVMe status "
				   "0x%x)",
				   x->ssd, x->vol, s->write ? "write" : "read", s->lba, s->nlb,
				   status);
	return s->write ? 0 : volcli_read_done(x, s);
}

/* Online: waits for completions (at least one) and finishes their commands. */
static int volcli_reap(struct volcli *x)
{
	struct nvme_cqe cqe[VOLCLI_QD];
	unsigned j;
	int n, i;

	n = lio_drv_reap(x->drv, 0, cqe, VOLCLI_QD, 5000);
	if (n <= 0)
		return volcli_fail("%s: volume %s: no completion from the daemon in 5 s", x->ssd,
				   x->vol);
	for (i = 0; i < n; i++) {
		for (j = 0; j < x->nr_slots; j++)
			if (x->slot[j].busy && x->slot[j].cid == cqe[i].cid)
				break;
		if (j == x->nr_slots)
			return volcli_fail("%s: volume %s: completion for unknown command %u",
					   x->ssd, x->vol, cqe[i].cid);
		if (volcli_done(x, &x->slot[j], (uint16_t)(cqe[i].status >> 1)))
			return 1;
	}
	return 0;
}

/* A free buffer: waits for a completion while every one is in flight. */
static int volcli_slot(struct volcli *x, struct volcli_slot **out)
{
	unsigned i;

	for (;;) {
		for (i = 0; i < x->nr_slots; i++) {
			if (!x->slot[i].busy) {
				*out = &x->slot[i];
				return 0;
			}
		}
		if (volcli_reap(x))
			return 1;
	}
}

static int volcli_drain(struct volcli *x)
{
	unsigned i, busy;

	do {
		for (busy = 0, i = 0; i < x->nr_slots; i++)
			busy += x->slot[i].busy;
		if (busy && volcli_reap(x))
			return 1;
	} while (busy);
	return 0;
}

/* nlb LBAs at window-relative lba between the volume and s->buf: queued online, done at once
 * offline. */
static int volcli_submit(struct volcli *x, struct volcli_slot *s, bool write, uint64_t lba,
			 uint32_t nlb)
{
	struct nvme_sqe sqe = {.opcode = write ? NVME_CMD_WRITE : NVME_CMD_READ, .nsid = 1};
	uint64_t off = (x->a.lba_start + lba) << x->lba_shift;
	size_t len = (size_t)nlb << x->lba_shift;
	int r;

	s->lba = lba;
	s->nlb = nlb;
	s->write = write;
	if (!x->c) {
		r = write ? ssd_backing_pwrite(x->fd, s->buf, len, off)
			  : ssd_backing_pread(x->fd, s->buf, len, off);
		if (r)
			return volcli_fail(
			    "%s: volume %s: %s at byte %" PRIu64 " of the backing failed: %s",
			    x->ssd, x->vol, write ? "write" : "read", off, strerror(-r));
		return volcli_done(x, s, 0);
	}
	sqe.cdw10 = (uint32_t)lba;
	sqe.cdw11 = (uint32_t)(lba >> 32);
	sqe.cdw12 = nlb - 1;
	lio_drv_prp(x->drv, 0, &sqe, s->gpa, (uint32_t)len);
	s->cid = lio_drv_submit(x->drv, 0, &sqe);
	if (s->cid < 0)
		return volcli_fail("%s: volume %s: the queue pair is full", x->ssd, x->vol);
	s->busy = true;
	return 0;
}

/* Makes the whole volume read as zeros (then only the file's non-zero chunks are written). */
static int volcli_zero_all(struct volcli *x)
{
	uint64_t lba, n;
	uint16_t st;
	int r;

	if (!x->c) {
		r = ssd_backing_zero(x->fd, x->a.lba_start << x->lba_shift,
				     x->a.lba_count << x->lba_shift);
		return r ? volcli_fail("%s: volume %s: zeroing it failed: %s", x->ssd, x->vol,
				       strerror(-r))
			 : 0;
	}
	for (lba = 0; lba < x->a.lba_count; lba += n) {
		n = x->a.lba_count - lba;
		if (n > VOLCLI_ZEROES_MAX)
			n = VOLCLI_ZEROES_MAX;
		st = lio_drv_io(x->drv, 0, NVME_CMD_WRITE_ZEROES, lba, (uint32_t)n, 0);
		if (st)
			return volcli_fail("%s: volume %s: write zeroes at LBA %" PRIu64 " failed "
					   "(NVMe status 0x%x)",
					   x->ssd, x->vol, lba, st);
	}
	return 0;
}

static int volcli_flush(struct volcli *x)
{
	uint16_t st;

	if (!x->c)
		return fdatasync(x->fd) ? volcli_fail("%s: flushing the backing failed: %s", x->ssd,
						      strerror(errno))
					: 0;
	st = lio_drv_io(x->drv, 0, NVME_CMD_FLUSH, 0, 0, 0);
	return st ? volcli_fail("%s: volume %s: flush failed (NVMe status 0x%x)", x->ssd, x->vol,
				st)
		  : 0;
}

static int volcli_import(struct volcli *x, const char *file)
{
	uint64_t size, vsize, done, lba_bytes;
	struct volcli_slot *sl;
	char fs[24], vs[24];
	struct stat st;
	int in, e, r = 1;

	in = open(file, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return volcli_fail("%s: import file %s: %s", x->ssd, file, strerror(errno));
	if (fstat(in, &st) || !S_ISREG(st.st_mode)) {
		volcli_fail("%s: import file %s is not a regular file", x->ssd, file);
		goto out;
	}
	if (volcli_attach(x))
		goto out;
	size = (uint64_t)st.st_size;
	vsize = x->a.lba_count << x->lba_shift;
	lba_bytes = 1ULL << x->lba_shift;
	if (size > vsize) {
		ssd_size_str(size, fs, sizeof(fs));
		ssd_size_str(vsize, vs, sizeof(vs));
		volcli_fail("%s: import file %s size %s exceeds volume %s size %s", x->ssd, file,
			    fs, x->vol, vs);
		goto out;
	}
	if (volcli_zero_all(x))
		goto out;
	for (done = 0; done < size; done += VOLCLI_CHUNK) {
		size_t want = size - done < VOLCLI_CHUNK ? (size_t)(size - done) : VOLCLI_CHUNK;
		/* A last partial LBA is padded with zeros. */
		size_t len = (want + lba_bytes - 1) & ~(size_t)(lba_bytes - 1);

		if (volcli_slot(x, &sl))
			goto out;
		memset((uint8_t *)sl->buf + want, 0, len - want);
		e = ssd_backing_pread(in, sl->buf, want, done);
		if (e) {
			volcli_fail("%s: import file %s: read at byte %" PRIu64 " failed: %s",
				    x->ssd, file, done, strerror(-e));
			goto out;
		}
		/* The volume reads as zeros already: zero chunks need no write. */
		if (!ssd_all_zero(sl->buf, len) && volcli_submit(x, sl, true, done >> x->lba_shift,
								 (uint32_t)(len >> x->lba_shift)))
			goto out;
	}
	if (volcli_drain(x) || volcli_flush(x))
		goto out;
	ssd_size_str(size, fs, sizeof(fs));
	printf("%s: volume %s imported from %s (%s)\n", x->ssd, x->vol, file, fs);
	r = 0;
out:
	close(in);
	return r;
}

static int volcli_export(struct volcli *x, const char *file)
{
	struct volcli_slot *sl;
	uint64_t vsize, lba, n;
	char vs[24];
	struct stat st;

	if (volcli_attach(x))
		return 1;
	x->file = file;
	x->out = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (x->out < 0)
		return volcli_fail("%s: export file %s: %s", x->ssd, file, strerror(errno));
	if (fstat(x->out, &st) || !(S_ISREG(st.st_mode) || S_ISBLK(st.st_mode)))
		return volcli_fail(
		    "%s: export file %s is neither a regular file nor a block device", x->ssd,
		    file);
	/* A regular file keeps the volume's zero chunks as holes; a device gets every byte. */
	x->sparse = S_ISREG(st.st_mode);
	vsize = x->a.lba_count << x->lba_shift;
	for (lba = 0; lba < x->a.lba_count; lba += n) {
		n = x->a.lba_count - lba;
		if (n > VOLCLI_CHUNK >> x->lba_shift)
			n = VOLCLI_CHUNK >> x->lba_shift;
		if (volcli_slot(x, &sl) || volcli_submit(x, sl, false, lba, (uint32_t)n))
			return 1;
	}
	if (volcli_drain(x))
		return 1;
	if ((x->sparse && ftruncate(x->out, (off_t)vsize)) || fsync(x->out))
		return volcli_fail("%s: export file %s: %s", x->ssd, file, strerror(errno));
	ssd_size_str(vsize, vs, sizeof(vs));
	printf("%s: volume %s exported to %s (%s)\n", x->ssd, x->vol, file, vs);
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
