/* softssd's trust model against hostile clients (docs/security.md, "softssd trust model"): a
 * passthrough queue pair reaches only its volume, volumes belong to their creator's uid, client
 * memory that could fault the daemon is refused, a slow command does not stall a neighbour on
 * the same worker, running out of fds does not spin, unpopulated windows can be refused. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lightiov/nvme.h"
#include "lightiov/uapi.h"
#include "client/lio_client.h"
#include "ssdutil.h"
#include "testutil.h"

#define SSD	   "trust"
#define BACKING_MB 128
#define VOL_BYTES  (4u << 20)
#define LBA_SHIFT  9
#define SC(s)	   ((s)&0x7ff)
#define UID_X	   65534 /* two unprivileged clients, both admitted by --allow-gid GID_XY */
#define UID_Y	   65533
#define GID_XY	   65534

static char dir[64], backing[200], logpath[128];
static pid_t daemon_pid;

static void daemon_start(const char *const extra[])
{
	const char *opts[24] = {"--backing", backing, "--size", "128M", "--allow-gid", "65534"};
	int n = 6, i;

	for (i = 0; extra && extra[i] && n < 22; i++)
		opts[n++] = extra[i];
	opts[n] = NULL;
	daemon_pid = testutil_ssd_start(SSD, logpath, opts);
}

static void setup(void)
{
	testutil_mkdtemp(dir, sizeof(dir), "/tmp/lvmm-ssdtrust-");
	snprintf(backing, sizeof(backing), "%s/backing.img", dir);
	snprintf(logpath, sizeof(logpath), "%s/daemon.log", dir);
	setenv("LVMM_RUN_DIR", dir, 1);
}

static void teardown(void)
{
	int st = testutil_ssd_stop(&daemon_pid, SIGTERM);

	if (st)
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "softssd ended with 0x%x: %s",
			      st, testutil_slurp(logpath));
	testutil_rmtree(dir);
}

static struct lio_client *connect_ok(const char *label)
{
	struct lio_client *c = NULL;
	char err[256];
	int r = lio_client_connect(&c, SSD, label, NULL, err, sizeof(err));

	ck_assert_msg(r == 0, "connect: %s", err);
	return c;
}

static struct lio_vol_attach attach_ok(struct lio_client *c, const char *name, uint32_t flags)
{
	struct lio_vol_attach a = {.size_bytes = VOL_BYTES, .flags = flags};
	int r;

	if (name)
		snprintf(a.name, sizeof(a.name), "%s", name);
	r = lio_client_vol_attach(c, &a);
	ck_assert_msg(r == 0, "attach %s: %s", name ? name : "(anon)", lio_client_error(c));
	return a;
}

static struct lio_drv *drv_open(struct lio_client *c, const struct lio_vol_attach *a, uint32_t mode,
				uint32_t flags)
{
	struct lio_drv_opts o = {.vol_id = a->vol_id,
				 .lba_start = a->lba_start,
				 .lba_count = a->lba_count,
				 .lba_shift = LBA_SHIFT,
				 .mode = mode,
				 .qp_flags = flags,
				 .nr_qp = 1,
				 .depth = 64};
	struct lio_drv *d = NULL;
	char err[256];
	int r = lio_drv_open(&d, c, &o, err, sizeof(err));

	ck_assert_msg(r == 0, "lio_drv_open: %s", err);
	return d;
}

/* ---- finding 1: passthrough stays inside its volume ---- */

START_TEST(test_passthrough_confined)
{
	struct lio_client *a = connect_ok("victim"), *b = connect_ok("hostile");
	struct lio_vol_attach va = attach_ok(a, NULL, LIO_ATTACH_ANON);
	struct lio_vol_attach vb = attach_ok(b, NULL, LIO_ATTACH_ANON);
	struct lio_drv *da = drv_open(a, &va, LIGHTIOV_MODE_ISOLATED, LIO_QP_DB_EVENTFD);
	struct lio_drv *db = drv_open(b, &vb, LIGHTIOV_MODE_PASSTHROUGH, LIO_QP_DB_EVENTFD);
	uint64_t bufa = lio_drv_alloc(da, 4096), bufb = lio_drv_alloc(db, 4096);
	int64_t delta = (int64_t)(va.lba_start - vb.lba_start);
	uint8_t *pb = lio_drv_ptr(db, bufb);

	ck_assert(bufa && bufb);
	memset(lio_drv_ptr(da, bufa), 0xa5, 4096);
	ck_assert_uint_eq(lio_drv_io(da, 0, NVME_CMD_WRITE, 0, 8, bufa), 0);
	/* its own volume, as passthrough LBAs (lba_start added): served */
	memset(pb, 0x5b, 4096);
	ck_assert_uint_eq(lio_drv_io(db, 0, NVME_CMD_WRITE, 0, 8, bufb), 0);
	ck_assert_uint_eq(lio_drv_io(db, 0, NVME_CMD_READ, vb.lba_count - 8, 8, bufb), 0);
	/* the victim's LBAs (absolute va.lba_start): refused, nothing read or written */
	memset(pb, 0, 4096);
	ck_assert_uint_eq(SC(lio_drv_io(db, 0, NVME_CMD_READ, (uint64_t)delta, 8, bufb)),
			  NVME_SC_LBA_RANGE);
	ck_assert_msg(pb[0] != 0xa5, "the passthrough client read another client's volume");
	memset(pb, 0x66, 4096);
	ck_assert_uint_eq(SC(lio_drv_io(db, 0, NVME_CMD_WRITE, (uint64_t)delta, 8, bufb)),
			  NVME_SC_LBA_RANGE);
	ck_assert_uint_eq(SC(lio_drv_io(db, 0, NVME_CMD_WRITE_ZEROES, (uint64_t)delta, 8, 0)),
			  NVME_SC_LBA_RANGE);
	/* one LBA past its own window, and the volume table's LBA 0 */
	ck_assert_uint_eq(SC(lio_drv_io(db, 0, NVME_CMD_READ, vb.lba_count, 1, bufb)),
			  NVME_SC_LBA_RANGE);
	ck_assert_uint_eq(SC(lio_drv_io(db, 0, NVME_CMD_READ, -(uint64_t)vb.lba_start, 1, bufb)),
			  NVME_SC_LBA_RANGE);
	memset(lio_drv_ptr(da, bufa), 0, 4096);
	ck_assert_uint_eq(lio_drv_io(da, 0, NVME_CMD_READ, 0, 8, bufa), 0);
	ck_assert_uint_eq(((uint8_t *)lio_drv_ptr(da, bufa))[4095], 0xa5);
	lio_drv_close(db);
	lio_drv_close(da);
	lio_client_close(b);
	lio_client_close(a);
}
END_TEST

/* ---- finding 1: who may attach, delete, resize and list which volume ---- */

static int child_fail;

static void cfail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void cfail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	child_fail = 1;
}

/* Runs fn as uid (group GID_XY, no others) in a child; its exit status (0: every check held). */
static int as_user(uid_t uid, void (*fn)(void))
{
	pid_t pid = fork();
	int st;

	ck_assert_int_ge(pid, 0);
	if (!pid) {
		if (setgroups(0, NULL) || setresgid(GID_XY, GID_XY, GID_XY) ||
		    setresuid(uid, uid, uid)) {
			perror("setresuid");
			_exit(2);
		}
		child_fail = 0;
		fn();
		_exit(child_fail);
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static struct lio_client *cconnect(void)
{
	struct lio_client *c = NULL;
	char err[256];

	if (lio_client_connect(&c, SSD, "user", NULL, err, sizeof(err))) {
		cfail("uid %u: connect: %s", (unsigned)getuid(), err);
		_exit(3);
	}
	return c;
}

/* The names a client's vol list shows, comma-joined. */
static void list_names(struct lio_client *c, char *out, size_t len)
{
	struct lio_vol_list l = {0};
	unsigned i;

	out[0] = 0;
	do {
		if (lio_client_vol_list(c, &l)) {
			cfail("vol list: %s", lio_client_error(c));
			return;
		}
		for (i = 0; i < l.count; i++) {
			strncat(out, l.v[i].name, len - strlen(out) - 2);
			strcat(out, ",");
		}
		l.first += l.count;
	} while (l.count && l.first < l.total);
}

static void user_x_creates(void)
{
	struct lio_client *c = cconnect();
	struct lio_vol_attach a = {.size_bytes = VOL_BYTES, .flags = LIO_ATTACH_CREATE};
	struct lio_vol v = {.name = "x-own", .size_bytes = VOL_BYTES};
	char names[1024];

	snprintf(a.name, sizeof(a.name), "x-data");
	if (lio_client_vol_attach(c, &a))
		cfail("x: attach-create x-data: %s", lio_client_error(c));
	else if (lio_client_vol_detach(c, a.vol_id))
		cfail("x: detach: %s", lio_client_error(c));
	if (lio_client_vol_create(c, &v))
		cfail("x: create x-own: %s", lio_client_error(c));
	list_names(c, names, sizeof(names));
	if (strcmp(names, "x-data,x-own,") && strcmp(names, "x-own,x-data,"))
		cfail("x: vol list shows '%s', expected its two volumes only", names);
	lio_client_close(c);
}

static void user_y_is_kept_out(void)
{
	struct lio_client *c = cconnect();
	struct lio_vol_attach a = {.size_bytes = VOL_BYTES};
	struct lio_vol v = {.size_bytes = 2 * VOL_BYTES};
	static const char *const theirs[] = {"x-data", "root-vol"};
	struct lio_vol_list l = {0};
	char names[1024];
	unsigned i;
	int r;

	for (i = 0; i < 2; i++) {
		snprintf(a.name, sizeof(a.name), "%s", theirs[i]);
		a.flags = 0;
		r = lio_client_vol_attach(c, &a);
		if (r != -EACCES)
			cfail("y: attach %s: %d (%s), expected -EACCES", theirs[i], r,
			      lio_client_error(c));
		a.flags = LIO_ATTACH_READONLY;
		if (lio_client_vol_attach(c, &a) != -EACCES)
			cfail("y: read-only attach of %s not refused", theirs[i]);
		snprintf(v.name, sizeof(v.name), "%s", theirs[i]);
		if (lio_client_vol_resize(c, &v) != -EACCES)
			cfail("y: resize of %s not refused: %s", theirs[i], lio_client_error(c));
		if (lio_client_vol_delete(c, &v) != -EACCES)
			cfail("y: delete of %s not refused: %s", theirs[i], lio_client_error(c));
	}
	/* its own anonymous volume: listed to it, with the rest hidden */
	a = (struct lio_vol_attach){.size_bytes = VOL_BYTES, .flags = LIO_ATTACH_ANON};
	if (lio_client_vol_attach(c, &a))
		cfail("y: anonymous attach: %s", lio_client_error(c));
	list_names(c, names, sizeof(names));
	if (strncmp(names, "anon-", 5) || strchr(names, ',') != names + strlen(names) - 1)
		cfail("y: vol list shows '%s', expected its anonymous volume only", names);
	if (lio_client_vol_list(c, &l) || l.total != 1)
		cfail("y: vol list total %u, expected 1", l.total);
	lio_client_close(c);
}

START_TEST(test_volume_owners)
{
	struct lio_client *root;
	struct lio_vol v = {.name = "root-vol", .size_bytes = VOL_BYTES};
	struct lio_vol_attach a = {0};
	char path[200], names[1024];

	daemon_start(NULL);
	/* the socket reachable by the two users; the daemon's peer check is what admits them */
	chmod(dir, 0755);
	snprintf(path, sizeof(path), "%s/ssd", dir);
	chmod(path, 0755);
	snprintf(path, sizeof(path), "%s/ssd/%s.sock", dir, SSD);
	chmod(path, 0666);
	root = connect_ok("root");
	ck_assert_msg(lio_client_vol_create(root, &v) == 0, "%s", lio_client_error(root));
	ck_assert_int_eq(as_user(UID_X, user_x_creates), 0);
	ck_assert_int_eq(as_user(UID_Y, user_y_is_kept_out), 0);
	/* root sees and may attach every volume */
	list_names(root, names, sizeof(names));
	ck_assert_msg(strstr(names, "x-data,") && strstr(names, "x-own,") &&
			  strstr(names, "root-vol,"),
		      "root's list: %s", names);
	snprintf(a.name, sizeof(a.name), "x-data");
	ck_assert_msg(lio_client_vol_attach(root, &a) == 0, "%s", lio_client_error(root));
	lio_client_close(root);
}
END_TEST

/* ---- finding 2: no client memory may fault the daemon ---- */

static long hugepages_get(void)
{
	char buf[32] = "";

	testutil_read_file("/proc/sys/vm/nr_hugepages", buf, sizeof(buf) - 1);
	return strtol(buf, NULL, 10);
}

static void hugepages_set(long n)
{
	int fd = open("/proc/sys/vm/nr_hugepages", O_WRONLY);
	char buf[32];

	if (fd < 0)
		return;
	snprintf(buf, sizeof(buf), "%ld\n", n);
	if (write(fd, buf, strlen(buf)) < 0)
		perror("nr_hugepages");
	close(fd);
}

START_TEST(test_hugetlb_window_refused)
{
	struct lio_client *c;
	struct lio_dma_window w = {.nr_regions = 1};
	long before = hugepages_get();
	int fd, r;

	daemon_start(NULL);
	c = connect_ok("huge");
	hugepages_set(before + 1);
	fd = memfd_create("hostile", MFD_HUGETLB | MFD_ALLOW_SEALING | MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, 2 << 20) || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK)) {
		hugepages_set(before);
		lio_client_close(c);
		testutil_skip("no hugetlb memfd here (%s)", strerror(errno));
		return;
	}
	w.r[0] = (struct lio_dma_region){.gpa = 0, .size = 2 << 20, .fd = fd};
	r = lio_client_dma_register(c, &w);
	close(fd);
	hugepages_set(before);
	ck_assert_msg(r == -EINVAL, "a hugetlb window was taken (%d): %s", r, lio_client_error(c));
	ck_assert_msg(strstr(lio_client_error(c), "hugetlb"), "%s", lio_client_error(c));
	/* the same session goes on with a proper window */
	lio_client_close(c);
}
END_TEST

START_TEST(test_window_tricks_do_not_kill)
{
	struct lio_client *c, *other;
	struct lio_vol_attach a, b;
	struct lio_dma_window w = {.nr_regions = 1};
	struct lio_drv *d, *od;
	uint64_t rng, buf;
	struct nvme_sqe s;
	struct nvme_cqe cqe;
	char tmpf[200];
	int fd, i;

	daemon_start(NULL);
	c = connect_ok("tricks");
	other = connect_ok("bystander");
	/* a file on disk and an unsealed memfd: refused */
	snprintf(tmpf, sizeof(tmpf), "%s/window", dir);
	fd = open(tmpf, O_RDWR | O_CREAT, 0600);
	ck_assert(fd >= 0 && ftruncate(fd, 1 << 20) == 0);
	w.r[0] = (struct lio_dma_region){.gpa = 0, .size = 1 << 20, .fd = fd};
	ck_assert_int_lt(lio_client_dma_register(c, &w), 0);
	close(fd);
	fd = memfd_create("unsealed", MFD_CLOEXEC);
	ck_assert(fd >= 0 && ftruncate(fd, 1 << 20) == 0);
	w.r[0].fd = fd;
	ck_assert_int_lt(lio_client_dma_register(c, &w), 0);
	close(fd);
	/* a proper window, then its pages punched away under I/O, and a shrink tried */
	a = attach_ok(c, NULL, LIO_ATTACH_ANON);
	b = attach_ok(other, NULL, LIO_ATTACH_ANON);
	d = drv_open(c, &a, LIGHTIOV_MODE_ISOLATED, LIO_QP_DB_EVENTFD);
	od = drv_open(other, &b, LIGHTIOV_MODE_ISOLATED, LIO_QP_DB_EVENTFD);
	rng = lio_drv_alloc(d, 4096);
	buf = lio_drv_alloc(d, 64 << 10);
	for (i = 0; i < 50; i++) {
		struct nvme_dsm_range *r = lio_drv_ptr(d, rng);
		off_t off = (off_t)(rng - LIO_DRV_GPA_BASE);

		/* the range list and the data buffer (not the driver's rings) punched away; every
		 * other time the list is written again after the punch */
		r[0] = (struct nvme_dsm_range){.nlb = 8, .slba = 0};
		ck_assert_int_eq(fallocate(d->memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
					   off, (off_t)(buf - rng) + (64 << 10)),
				 0);
		if (i & 1)
			r[0] = (struct nvme_dsm_range){.nlb = 8, .slba = 8};
		s = (struct nvme_sqe){
		    .opcode = NVME_CMD_DSM, .nsid = 1, .prp1 = rng, .cdw11 = NVME_DSM_AD};
		lio_drv_submit(d, 0, &s);
		ck_assert_int_eq(lio_drv_reap(d, 0, &cqe, 1, 10000), 1);
		ck_assert_uint_lt(lio_drv_io(d, 0, NVME_CMD_READ, 0, 128, buf), 0xffff);
	}
	ck_assert_int_ne(ftruncate(d->memfd, 4096), 0);
	/* the daemon lives, and the other client is served */
	ck_assert_int_eq(kill(daemon_pid, 0), 0);
	ck_assert_uint_eq(lio_drv_io(od, 0, NVME_CMD_WRITE, 0, 8, lio_drv_alloc(od, 4096)), 0);
	lio_drv_close(od);
	lio_drv_close(d);
	lio_client_close(other);
	lio_client_close(c);
}
END_TEST

/* ---- finding 4: a slow command costs its own VM, not its neighbours ---- */

#define VICTIM_READS 200

static const char *frozen, *mounted;

static void fs_cleanup(void)
{
	if (frozen)
		testutil_system("fsfreeze -u %s", frozen);
	if (daemon_pid > 0)
		testutil_ssd_stop(&daemon_pid, SIGKILL);
	if (mounted)
		testutil_system("umount -l %s", mounted);
	frozen = mounted = NULL;
}

/* The backing on an ext4 of its own, frozen (FIFREEZE) while a neighbour's write-through
 * Write Zeroes and Deallocate are outstanding: those cannot finish before the thaw, so a worker
 * that ran them in its own thread would serve nothing else. The victim's reads, on the same
 * worker, must all complete meanwhile. */
START_TEST(test_slow_zeroes_do_not_block_reads)
{
	const char *extra[] = {"--workers", "1", NULL};
	struct lio_client *vc, *fc;
	struct lio_vol_attach va, fa;
	struct lio_drv *vd, *fd;
	struct lio_session_set wt = {.mask = LIO_SESSION_WRITE_THROUGH,
				     .flags = LIO_SESSION_WRITE_THROUGH};
	char img[100], mnt[100];
	struct nvme_sqe s;
	struct nvme_cqe cqe[16];
	uint64_t rbuf, rng;
	unsigned done = 0, flood = 0, bad = 0, i;
	int got, r;

	snprintf(img, sizeof(img), "%s/fs.img", dir);
	snprintf(mnt, sizeof(mnt), "%s/mnt", dir);
	ck_assert_int_eq(mkdir(mnt, 0700), 0);
	if (testutil_system("truncate -s 256M %s && mkfs.ext4 -q -F %s >/dev/null 2>&1 && "
			    "mount -o loop,noatime %s %s 2>/dev/null",
			    img, img, img, mnt)) {
		testutil_skip("no loop-mounted ext4 here (mount -o loop failed)");
		return;
	}
	mounted = mnt;
	atexit(fs_cleanup); /* a failed check exits the test's process: never leave it frozen */
	snprintf(backing, sizeof(backing), "%s/backing.img", mnt);
	daemon_start(extra);
	vc = connect_ok("victim");
	fc = connect_ok("flood");
	va = attach_ok(vc, NULL, LIO_ATTACH_ANON);
	fa = attach_ok(fc, NULL, LIO_ATTACH_ANON);
	vd = drv_open(vc, &va, LIGHTIOV_MODE_ISOLATED, LIO_QP_DB_EVENTFD);
	fd = drv_open(fc, &fa, LIGHTIOV_MODE_ISOLATED, LIO_QP_DB_EVENTFD);
	ck_assert_int_eq(lio_client_session_set(fc, &wt), 0);
	rbuf = lio_drv_alloc(vd, 4096);
	rng = lio_drv_alloc(fd, 4096);
	((struct nvme_dsm_range *)lio_drv_ptr(fd, rng))[0] =
	    (struct nvme_dsm_range){.nlb = 64, .slba = 64};
	ck_assert_int_eq(testutil_system("fsfreeze -f %s", mnt), 0);
	frozen = mnt;
	for (i = 0; i < 8; i++) {
		s = i & 1 ? (struct nvme_sqe){.opcode = NVME_CMD_DSM,
					      .nsid = 1,
					      .prp1 = rng,
					      .cdw11 = NVME_DSM_AD}
			  : (struct nvme_sqe){.opcode = NVME_CMD_WRITE_ZEROES,
					      .nsid = 1,
					      .cdw10 = i * 64,
					      .cdw12 = 63};
		if (lio_drv_submit(fd, 0, &s) < 0)
			break;
		flood++;
	}
	for (i = 0; i < VICTIM_READS; i++) {
		s = (struct nvme_sqe){
		    .opcode = NVME_CMD_READ, .nsid = 1, .cdw10 = i % 512, .cdw12 = 7};
		lio_drv_prp(vd, 0, &s, rbuf, 4096);
		if (lio_drv_submit(vd, 0, &s) < 0)
			break;
		/* generous: this is about whether it completes at all while the neighbour waits */
		got = lio_drv_reap(vd, 0, cqe, 1, 10000);
		if (got != 1)
			break;
		bad += (cqe[0].status >> 1) != 0;
		done++;
	}
	r = testutil_system("fsfreeze -u %s", mnt);
	frozen = NULL;
	ck_assert_uint_eq(flood, 8);
	ck_assert_uint_eq(bad, 0);
	/* the flood's commands complete after the thaw, each with success */
	for (i = 0; i < flood;) {
		got = lio_drv_reap(fd, 0, cqe, 16, 20000);
		ck_assert_int_gt(got, 0);
		for (int k = 0; k < got; k++)
			ck_assert_uint_eq(cqe[k].status >> 1, 0);
		i += (unsigned)got;
	}
	lio_drv_close(fd);
	lio_drv_close(vd);
	lio_client_close(fc);
	lio_client_close(vc);
	testutil_ssd_stop(&daemon_pid, SIGTERM);
	testutil_system("umount %s", mnt);
	mounted = NULL;
	ck_assert_int_eq(r, 0);
	ck_assert_msg(done == VICTIM_READS,
		      "the victim completed %u of %u reads while a neighbour's write-through "
		      "zeroing waited on its file system",
		      done, VICTIM_READS);
}
END_TEST

/* ---- finding 7: out of fds, the daemon waits instead of spinning ---- */

static uint64_t cpu_ticks(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long ut = 0, st = 0;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	testutil_read_file(path, buf, sizeof(buf) - 1);
	p = strrchr(buf, ')');
	ck_assert_ptr_nonnull(p);
	/* after the comm: state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
	 * utime stime */
	ck_assert_int_eq(
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st), 2);
	return ut + st;
}

static unsigned open_fds(pid_t pid)
{
	char cmd[96], *out = NULL;
	unsigned n;

	snprintf(cmd, sizeof(cmd), "ls /proc/%d/fd | wc -l", (int)pid);
	ck_assert_int_eq(testutil_sh(cmd, &out), 0);
	n = (unsigned)strtoul(out, NULL, 10);
	free(out);
	return n;
}

#define FD_CLIENTS 24

START_TEST(test_emfile_does_not_spin)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct rlimit low, old;
	int socks[FD_CLIENTS], i;
	uint64_t t0, t1;
	double w0, w1;
	long hz = sysconf(_SC_CLK_TCK);
	struct lio_client *c;

	daemon_start(NULL);
	ck_assert_int_eq(prlimit(daemon_pid, RLIMIT_NOFILE, NULL, &old), 0);
	ck_assert_msg(old.rlim_cur == old.rlim_max, "soft fd limit %lu not raised to %lu",
		      (unsigned long)old.rlim_cur, (unsigned long)old.rlim_max);
	low.rlim_cur = low.rlim_max = open_fds(daemon_pid) + 2;
	ck_assert_int_eq(prlimit(daemon_pid, RLIMIT_NOFILE, &low, NULL), 0);
	ck_assert_int_eq(lio_sock_path(SSD, sa.sun_path, sizeof(sa.sun_path)), 0);
	for (i = 0; i < FD_CLIENTS; i++) {
		socks[i] = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		ck_assert_int_ge(socks[i], 0);
		connect(socks[i], (struct sockaddr *)&sa, sizeof(sa));
	}
	testutil_sleep_ms(300);
	t0 = cpu_ticks(daemon_pid);
	w0 = testutil_now_s();
	testutil_sleep_ms(2000);
	t1 = cpu_ticks(daemon_pid);
	w1 = testutil_now_s();
	/* a spinning control loop takes a whole CPU; a waiting one next to nothing */
	ck_assert_msg((double)(t1 - t0) / (double)hz < 0.25 * (w1 - w0),
		      "softssd used %.2f s of CPU in %.2f s with its fds exhausted",
		      (double)(t1 - t0) / (double)hz, w1 - w0);
	ck_assert_int_eq(kill(daemon_pid, 0), 0);
	for (i = 0; i < FD_CLIENTS; i++)
		close(socks[i]);
	/* once clients are gone, a new one is served (with the low limit still in force) */
	c = connect_ok("after");
	ck_assert_int_eq(lio_client_identify(c, &(struct lio_identify){0}), 0);
	lio_client_close(c);
}
END_TEST

/* ---- finding 6: unpopulated windows can be refused (memory charged to the VM) ---- */

START_TEST(test_require_resident)
{
	const char *extra[] = {"--require-resident", NULL};
	struct lio_client *c;
	struct lio_dma_window w = {.nr_regions = 1};
	int fd, r;
	void *p;

	daemon_start(extra);
	c = connect_ok("lazy");
	fd = memfd_create("window", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	ck_assert(fd >= 0 && ftruncate(fd, 4 << 20) == 0 &&
		  fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) == 0);
	w.r[0] = (struct lio_dma_region){.gpa = 0, .size = 4 << 20, .fd = fd};
	r = lio_client_dma_register(c, &w);
	ck_assert_msg(r == -EFAULT, "an unpopulated window was taken (%d): %s", r,
		      lio_client_error(c));
	/* populated by its owner (charged to it): taken */
	p = mmap(NULL, 4 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ck_assert(p != MAP_FAILED);
	memset(p, 0, 4 << 20);
	r = lio_client_dma_register(c, &w);
	ck_assert_msg(r == 0, "a populated window was refused: %s", lio_client_error(c));
	munmap(p, 4 << 20);
	close(fd);
	lio_client_close(c);
}
END_TEST

static void with_daemon(void)
{
	setup();
	daemon_start(NULL);
}

int main(void)
{
	Suite *s = suite_create("ssd_trust");
	TCase *tc = tcase_create("trust");

	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_volume_owners);
	tcase_add_test(tc, test_hugetlb_window_refused);
	tcase_add_test(tc, test_window_tricks_do_not_kill);
	tcase_add_test(tc, test_slow_zeroes_do_not_block_reads);
	tcase_add_test(tc, test_emfile_does_not_spin);
	tcase_add_test(tc, test_require_resident);
	suite_add_tcase(s, tc);
	tc = tcase_create("passthrough");
	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, with_daemon, teardown);
	tcase_add_test(tc, test_passthrough_confined);
	suite_add_tcase(s, tc);
	return testutil_run_suite(s);
}
