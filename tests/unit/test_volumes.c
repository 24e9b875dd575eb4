/* softssd's volume manager on a temp sparse backing (no daemon): formatting, named and anonymous
 * volumes, attach rules, resize in place and by move, persistence, torn writes, the lock. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lightiov/voltable.h"
#include "softssd/backing_io.h"
#include "softssd/volumes.h"
#include "testutil.h"

#define MIB	     (1ULL << 20)
#define BACKING_SIZE (LIO_VT_RESERVED_BYTES + 64 * MIB)
#define SHIFT	     9u

static char path[64];
static int fd = -1;
static struct ssd_volumes *vols;
static char err[256];

static void setup(void)
{
	snprintf(path, sizeof(path), "/tmp/lvmm-vols-XXXXXX");
	testutil_tmpfile(path);
	fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, BACKING_SIZE), 0);
	vols = NULL;
	err[0] = 0;
}

static void teardown(void)
{
	ssd_volumes_close(vols);
	vols = NULL;
	if (fd >= 0)
		close(fd);
	fd = -1;
	unlink(path);
}

static void open_vols(void)
{
	int r = ssd_volumes_open(&vols, fd, "ssd0", BACKING_SIZE, SHIFT, true, err, sizeof(err));

	ck_assert_msg(r == 0, "open: %d %s", r, err);
}

/* Closes the manager and the fd (dropping the lock) and opens both again, as a restart. */
static void reopen_vols(void)
{
	ssd_volumes_close(vols);
	vols = NULL;
	close(fd);
	fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	open_vols();
}

static int create(const char *name, uint64_t size)
{
	struct lio_vol req = {.size_bytes = size};

	snprintf(req.name, sizeof(req.name), "%s", name);
	err[0] = 0;
	return ssd_volumes_create(vols, &req, err, sizeof(err));
}

static int vol_op(int (*op)(struct ssd_volumes *, const struct lio_vol *, char *, unsigned),
		  const char *name, uint64_t size)
{
	struct lio_vol req = {.size_bytes = size};

	snprintf(req.name, sizeof(req.name), "%s", name);
	err[0] = 0;
	return op(vols, &req, err, sizeof(err));
}

static int attach(const char *name, uint64_t size, uint32_t flags, uint64_t owner,
		  struct lio_vol_attach *a)
{
	memset(a, 0, sizeof(*a));
	snprintf(a->name, sizeof(a->name), "%s", name);
	a->size_bytes = size;
	a->flags = flags;
	err[0] = 0;
	return ssd_volumes_attach(vols, a, owner, err, sizeof(err));
}

/* The listed entry named name, or NULL. */
static const struct lio_vol_info *find(struct lio_vol_list *l, const char *name)
{
	unsigned i;

	memset(l, 0, sizeof(*l));
	ck_assert_int_eq(ssd_volumes_list(vols, l), 0);
	for (i = 0; i < l->count; i++)
		if (!strcmp(l->v[i].name, name))
			return &l->v[i];
	return NULL;
}

static void fill(uint64_t lba, uint64_t count, uint8_t seed)
{
	size_t len = count << SHIFT, i;
	uint8_t *buf = malloc(len);

	for (i = 0; i < len; i++)
		buf[i] = (uint8_t)(seed + i * 7 + i / 4096);
	ck_assert_int_eq(pwrite(fd, buf, len, (off_t)(lba << SHIFT)), (ssize_t)len);
	free(buf);
}

static bool holds(uint64_t lba, uint64_t count, uint8_t seed)
{
	size_t len = count << SHIFT, i;
	uint8_t *buf = malloc(len);
	bool ok = pread(fd, buf, len, (off_t)(lba << SHIFT)) == (ssize_t)len;

	for (i = 0; ok && i < len; i++)
		ok = buf[i] == (uint8_t)(seed + i * 7 + i / 4096);
	free(buf);
	return ok;
}

static bool zeros(uint64_t lba, uint64_t count)
{
	size_t len = count << SHIFT, i;
	uint8_t *buf = malloc(len);
	bool ok = pread(fd, buf, len, (off_t)(lba << SHIFT)) == (ssize_t)len;

	for (i = 0; ok && i < len; i++)
		ok = !buf[i];
	free(buf);
	return ok;
}

START_TEST(open_format)
{
	struct lio_identify id = {0};
	uint8_t junk[512];
	int r;

	r = ssd_volumes_open(&vols, fd, "ssd0", BACKING_SIZE, SHIFT, false, err, sizeof(err));
	ck_assert_int_eq(r, -ENOENT);
	ck_assert_ptr_null(vols);
	ck_assert_msg(strstr(err, "ssd0: the backing is blank"), "%s", err);

	r = ssd_volumes_open(&vols, fd, "bad/name", BACKING_SIZE, SHIFT, true, err, sizeof(err));
	ck_assert_int_eq(r, -EINVAL);
	r = ssd_volumes_open(&vols, fd, "ssd0", BACKING_SIZE, 10, true, err, sizeof(err));
	ck_assert_int_eq(r, -EINVAL);
	r = ssd_volumes_open(&vols, fd, "ssd0", MIB, SHIFT, true, err, sizeof(err));
	ck_assert_int_eq(r, -EINVAL);

	open_vols();
	ssd_volumes_identify(vols, &id);
	ck_assert_uint_eq(id.capacity_lbas, 64 * MIB >> SHIFT);
	ck_assert_uint_eq(id.free_lbas, 64 * MIB >> SHIFT);
	ck_assert_uint_eq(id.nr_volumes, 0);
	ck_assert_uint_eq(id.lba_shift, SHIFT);
	ck_assert_uint_eq(ssd_volumes_lba_shift(vols), SHIFT);

	/* The table was written: a reopen that must not format finds it. */
	ssd_volumes_close(vols);
	vols = NULL;
	r = ssd_volumes_open(&vols, fd, "ssd0", BACKING_SIZE, 0, false, err, sizeof(err));
	ck_assert_msg(r == 0, "%s", err);
	ck_assert_uint_eq(ssd_volumes_lba_shift(vols), SHIFT);
	ssd_volumes_close(vols);
	vols = NULL;

	/* Another SSD's table, another LBA size, a smaller device: refused. */
	r = ssd_volumes_open(&vols, fd, "ssd1", BACKING_SIZE, SHIFT, true, err, sizeof(err));
	ck_assert_int_eq(r, -EINVAL);
	ck_assert_msg(strstr(err, "ssd1: the backing holds the volume table of SSD ssd0"), "%s",
		      err);
	r = ssd_volumes_open(&vols, fd, "ssd0", BACKING_SIZE, 12, true, err, sizeof(err));
	ck_assert_int_eq(r, -EINVAL);
	ck_assert_msg(strstr(err, "512-byte LBAs, not 4096"), "%s", err);
	r = ssd_volumes_open(&vols, fd, "ssd0", BACKING_SIZE - MIB, SHIFT, true, err, sizeof(err));
	ck_assert_int_eq(r, -EINVAL);
	ck_assert_msg(strstr(err, "smaller than"), "%s", err);

	/* Something that is not a table is never formatted over. */
	memset(junk, 0xa5, sizeof(junk));
	ck_assert_int_eq(ftruncate(fd, 0), 0);
	ck_assert_int_eq(ftruncate(fd, BACKING_SIZE), 0);
	ck_assert_int_eq(pwrite(fd, junk, sizeof(junk), 4096), (ssize_t)sizeof(junk));
	r = ssd_volumes_open(&vols, fd, "ssd0", BACKING_SIZE, SHIFT, true, err, sizeof(err));
	ck_assert_int_eq(r, -EINVAL);
	ck_assert_msg(strstr(err, "holds data but no volume table"), "%s", err);
	ck_assert(pread(fd, junk, sizeof(junk), 4096) == (ssize_t)sizeof(junk) && junk[7] == 0xa5);
}
END_TEST

START_TEST(create_list_delete)
{
	struct lio_vol_list l;
	const struct lio_vol_info *a, *b;
	struct lio_identify id = {0};

	open_vols();
	ck_assert_msg(create("vm1", 8 * MIB) == 0, "%s", err);
	ck_assert_msg(create("vm2", 4 * MIB) == 0, "%s", err);
	ck_assert_int_eq(create("vm1", 1 * MIB), -EEXIST);
	ck_assert_str_eq(err, "ssd0: volume vm1 exists");
	ck_assert_int_eq(create("a/b", MIB), -EINVAL);
	ck_assert_msg(strstr(err, "ssd0: invalid volume name 'a/b'"), "%s", err);
	ck_assert_int_eq(create("vm\n\033[2J", MIB), -EINVAL);
	ck_assert_msg(strstr(err, "ssd0: invalid volume name 'vm??[2J'"), "%s", err);
	ck_assert_int_eq(create("..", MIB), -EINVAL);
	ck_assert_int_eq(create("", MIB), -EINVAL);
	ck_assert_int_eq(create("vm3", 1000), -EINVAL);
	ck_assert_msg(strstr(err, "size 1000 is not a multiple of the LBA size 512"), "%s", err);
	ck_assert_int_eq(create("vm3", 0), -EINVAL);

	a = find(&l, "vm1");
	ck_assert_uint_eq(l.total, 2);
	ck_assert_ptr_nonnull(a);
	ck_assert_uint_eq(a->lba_count, 8 * MIB >> SHIFT);
	ck_assert_uint_ge(a->lba_start, LIO_VT_RESERVED_BYTES >> SHIFT);
	ck_assert_uint_eq(a->users, 0);
	ck_assert_uint_eq(a->flags, 0);
	b = find(&l, "vm2");
	ck_assert_ptr_nonnull(b);
	ck_assert_msg(b->lba_start >= a->lba_start + a->lba_count ||
			  a->lba_start >= b->lba_start + b->lba_count,
		      "volumes overlap");

	/* first beyond the end lists nothing but still counts. */
	l.first = 5;
	ck_assert_int_eq(ssd_volumes_list(vols, &l), 0);
	ck_assert_uint_eq(l.count, 0);
	ck_assert_uint_eq(l.total, 2);

	ck_assert_msg(vol_op(ssd_volumes_delete, "vm1", 0) == 0, "%s", err);
	ck_assert_int_eq(vol_op(ssd_volumes_delete, "vm1", 0), -ENOENT);
	ck_assert_str_eq(err, "ssd0: no volume named vm1");
	ck_assert_ptr_null(find(&l, "vm1"));
	ck_assert_uint_eq(l.total, 1);
	ssd_volumes_identify(vols, &id);
	ck_assert_uint_eq(id.nr_volumes, 1);
}
END_TEST

START_TEST(new_volume_reads_zeros)
{
	struct lio_vol_list l;
	const struct lio_vol_info *a;
	uint64_t start;

	open_vols();
	ck_assert_int_eq(create("old", 2 * MIB), 0);
	a = find(&l, "old");
	start = a->lba_start;
	fill(start, a->lba_count, 3);
	ck_assert_int_eq(vol_op(ssd_volumes_delete, "old", 0), 0);
	ck_assert_int_eq(create("new", 2 * MIB), 0);
	a = find(&l, "new");
	ck_assert_uint_eq(a->lba_start, start); /* first fit: the same LBAs */
	ck_assert(zeros(a->lba_start, a->lba_count));
}
END_TEST

START_TEST(attach_rules)
{
	struct lio_vol_attach w, r1, r2, x;
	struct lio_vol_list l;
	uint64_t s = 0, c = 0;

	open_vols();
	ck_assert_int_eq(create("vm1", 2 * MIB), 0);
	ck_assert_msg(attach("vm1", 0, 0, 11, &w) == 0, "%s", err);
	ck_assert_uint_ne(w.vol_id, 0);
	ck_assert_uint_eq(w.size_bytes, 2 * MIB);
	ck_assert_uint_eq(w.lba_count, 2 * MIB >> SHIFT);
	ck_assert_int_eq(ssd_volumes_window(vols, w.vol_id, &s, &c), 0);
	ck_assert_uint_eq(s, w.lba_start);
	ck_assert_uint_eq(c, w.lba_count);

	/* One writer; readers share it; exclusive-all is refused while anyone holds it. */
	ck_assert_int_eq(attach("vm1", 0, 0, 12, &x), -EBUSY);
	ck_assert_msg(strstr(err, "ssd0: volume vm1 is in use by 1 session"), "%s", err);
	ck_assert_int_eq(attach("vm1", 0, LIO_ATTACH_READONLY, 12, &r1), 0);
	ck_assert_int_eq(attach("vm1", 0, LIO_ATTACH_READONLY, 13, &r2), 0);
	ck_assert_uint_eq(r1.vol_id, w.vol_id);
	ck_assert_uint_eq(r2.vol_id, w.vol_id);
	ck_assert_int_eq(attach("vm1", 0, LIO_ATTACH_EXCL_ALL, 14, &x), -EBUSY);
	ck_assert_uint_eq(find(&l, "vm1")->users, 3);

	/* Delete and resize wait until nobody holds it. */
	ck_assert_int_eq(vol_op(ssd_volumes_delete, "vm1", 0), -EBUSY);
	ck_assert_msg(strstr(err, "ssd0: volume vm1 is in use by 3 sessions (delete refused)"),
		      "%s", err);
	ck_assert_int_eq(vol_op(ssd_volumes_resize, "vm1", 4 * MIB), -EBUSY);

	/* A detach needs the holder's own owner tag. */
	ck_assert_int_eq(ssd_volumes_detach(vols, w.vol_id, 99), -ENOENT);
	ck_assert_int_eq(ssd_volumes_detach(vols, w.vol_id + 100, 11), -ENOENT);
	ck_assert_int_eq(ssd_volumes_detach(vols, w.vol_id, 11), 0);
	ck_assert_int_eq(ssd_volumes_detach(vols, w.vol_id, 11), -ENOENT);
	ck_assert_int_eq(ssd_volumes_detach(vols, w.vol_id, 12), 0);
	ck_assert_int_eq(ssd_volumes_window(vols, w.vol_id, &s, &c), 0); /* 13 still holds it */
	ck_assert_int_eq(ssd_volumes_detach(vols, w.vol_id, 13), 0);
	ck_assert_int_eq(ssd_volumes_window(vols, w.vol_id, &s, &c), -ENOENT);

	/* Exclusive-all keeps even readers out. */
	ck_assert_int_eq(attach("vm1", 0, LIO_ATTACH_EXCL_ALL, 14, &x), 0);
	ck_assert_int_eq(attach("vm1", 0, LIO_ATTACH_READONLY, 15, &r1), -EBUSY);
	ck_assert_int_eq(ssd_volumes_detach(vols, x.vol_id, 14), 0);
	ck_assert_int_eq(vol_op(ssd_volumes_delete, "vm1", 0), 0);

	/* Absent without CREATE; CREATE makes it; bad flags and names refused. */
	ck_assert_int_eq(attach("vm2", 0, 0, 11, &x), -ENOENT);
	ck_assert_str_eq(err, "ssd0: no volume named vm2");
	ck_assert_msg(attach("vm2", MIB, LIO_ATTACH_CREATE, 11, &x) == 0, "%s", err);
	ck_assert_uint_eq(x.size_bytes, MIB);
	ck_assert_uint_eq(find(&l, "vm2")->users, 1);
	ck_assert_int_eq(attach("vm3", 0, 1u << 9, 11, &x), -EINVAL);
	ck_assert_int_eq(attach("vm3", MIB, LIO_ATTACH_ANON | LIO_ATTACH_READONLY, 11, &x),
			 -EINVAL);
	ck_assert_int_eq(attach("x y", MIB, LIO_ATTACH_CREATE, 11, &x), -EINVAL);
	ck_assert_int_eq(attach("vm3", MIB, LIO_ATTACH_CREATE, 0, &x), -EINVAL);
}
END_TEST

START_TEST(anon_attach_detach)
{
	struct lio_vol_attach a, b;
	struct lio_vol_list l;
	struct lio_identify id = {0};
	const struct lio_vol_info *e;

	open_vols();
	ck_assert_msg(attach("", 4 * MIB, LIO_ATTACH_ANON, 0x77, &a) == 0, "%s", err);
	ck_assert_msg(!strncmp(a.name, "anon-77-", 8), "%s", a.name);
	ck_assert_int_eq(attach("", 4 * MIB, LIO_ATTACH_ANON, 0x77, &b), 0);
	ck_assert_str_ne(a.name, b.name);
	ck_assert_uint_ne(a.vol_id, b.vol_id);
	e = find(&l, a.name);
	ck_assert_ptr_nonnull(e);
	ck_assert_uint_eq(e->flags, LIO_VOL_ANON);
	ck_assert_uint_eq(e->users, 1);

	/* Nobody else gets at an anonymous volume by its name. */
	ck_assert_int_eq(attach(a.name, 0, LIO_ATTACH_READONLY, 0x78, &b), -EBUSY);
	ck_assert_int_eq(vol_op(ssd_volumes_delete, a.name, 0), -EBUSY);

	ck_assert_int_eq(attach("", 0, LIO_ATTACH_ANON, 0x77, &b), -EINVAL);
	ck_assert_int_eq(attach("", 1ULL << 40, LIO_ATTACH_ANON, 0x77, &b), -ENOSPC);

	ck_assert_int_eq(ssd_volumes_detach(vols, a.vol_id, 0x77), 0);
	ck_assert_ptr_null(find(&l, a.name));
	ck_assert_uint_eq(l.total, 1);
	ssd_volumes_identify(vols, &id);
	ck_assert_uint_eq(id.nr_volumes, 1);
}
END_TEST

START_TEST(reclaim_after_crash)
{
	struct lio_vol_attach a;
	struct lio_vol_list l;

	open_vols();
	ck_assert_int_eq(create("keep", MIB), 0);
	ck_assert_int_eq(attach("", MIB, LIO_ATTACH_ANON, 5, &a), 0);
	ck_assert_int_eq(attach("", MIB, LIO_ATTACH_ANON, 6, &a), 0);
	ck_assert_int_eq(attach("keep", 0, 0, 5, &a), 0);
	/* The daemon dies with its sessions: nothing is detached. */
	reopen_vols();
	ck_assert_uint_eq((find(&l, "keep"), l.total), 3);
	ck_assert_uint_eq(find(&l, "keep")->users, 0);
	ck_assert_int_eq(ssd_volumes_reclaim(vols), 2);
	ck_assert_ptr_nonnull(find(&l, "keep"));
	ck_assert_uint_eq(l.total, 1);
	ck_assert_int_eq(ssd_volumes_reclaim(vols), 0);
	reopen_vols();
	ck_assert_uint_eq((find(&l, "keep"), l.total), 1);
}
END_TEST

START_TEST(resize_in_place)
{
	struct lio_vol_list l;
	const struct lio_vol_info *e;
	uint64_t start, old = 2 * MIB >> SHIFT;

	open_vols();
	ck_assert_int_eq(create("vm1", 2 * MIB), 0);
	e = find(&l, "vm1");
	start = e->lba_start;
	fill(start, old, 9);
	/* Stale bytes where the volume will grow: they must not show through. */
	fill(start + old, old, 1);
	ck_assert_msg(vol_op(ssd_volumes_resize, "vm1", 6 * MIB) == 0, "%s", err);
	e = find(&l, "vm1");
	ck_assert_uint_eq(e->lba_start, start);
	ck_assert_uint_eq(e->lba_count, 6 * MIB >> SHIFT);
	ck_assert(holds(start, old, 9));
	ck_assert(zeros(start + old, e->lba_count - old));

	ck_assert_int_eq(vol_op(ssd_volumes_resize, "vm1", 6 * MIB), 0);
	ck_assert_int_eq(vol_op(ssd_volumes_resize, "vm1", 4 * MIB), -EINVAL);
	ck_assert_msg(strstr(err, "ssd0: volume vm1 cannot shrink from 6M to 4M"), "%s", err);
	ck_assert_int_eq(vol_op(ssd_volumes_resize, "vm1", 6 * MIB + 100), -EINVAL);
	ck_assert_int_eq(vol_op(ssd_volumes_resize, "nope", 6 * MIB), -ENOENT);
	reopen_vols();
	ck_assert_uint_eq(find(&l, "vm1")->lba_count, 6 * MIB >> SHIFT);
}
END_TEST

START_TEST(resize_by_move)
{
	struct lio_vol_list l;
	const struct lio_vol_info *e;
	uint64_t start, old = 2 * MIB >> SHIFT;

	open_vols();
	ck_assert_int_eq(create("vm1", 2 * MIB), 0);
	ck_assert_int_eq(create("vm2", 2 * MIB), 0); /* right after vm1: no room in place */
	e = find(&l, "vm1");
	start = e->lba_start;
	fill(start, old, 21);
	ck_assert_msg(vol_op(ssd_volumes_resize, "vm1", 8 * MIB) == 0, "%s", err);
	e = find(&l, "vm1");
	ck_assert_uint_ne(e->lba_start, start);
	ck_assert_uint_eq(e->lba_count, 8 * MIB >> SHIFT);
	ck_assert(holds(e->lba_start, old, 21));
	ck_assert(zeros(e->lba_start + old, e->lba_count - old));
	reopen_vols();
	e = find(&l, "vm1");
	ck_assert(holds(e->lba_start, old, 21));
	ck_assert_uint_eq(e->lba_count, 8 * MIB >> SHIFT);
	/* Its old LBAs are free again: a new volume fits there. */
	ck_assert_int_eq(create("vm3", 2 * MIB), 0);
	ck_assert_uint_eq(find(&l, "vm3")->lba_start, start);
}
END_TEST

START_TEST(no_space)
{
	struct lio_identify id = {0};
	struct lio_vol_list l;

	open_vols();
	ck_assert_int_eq(create("big", 60 * MIB), 0);
	ck_assert_int_eq(create("more", 10 * MIB), -ENOSPC);
	ck_assert_str_eq(err, "ssd0: volume more size 10M exceeds free space 4M");
	ck_assert_int_eq(vol_op(ssd_volumes_resize, "big", 65 * MIB), -ENOSPC);
	ck_assert_msg(strstr(err, "ssd0: volume big size 65M exceeds free space 4M"), "%s", err);
	ck_assert_int_eq(create("rest", 4 * MIB), 0);
	ssd_volumes_identify(vols, &id);
	ck_assert_uint_eq(id.free_lbas, 0);
	ck_assert_int_eq(create("one", 512), -ENOSPC);
	ck_assert_str_eq(err, "ssd0: volume one size 512 exceeds free space 0");
	ck_assert_uint_eq((find(&l, "big"), l.total), 2);
}
END_TEST

START_TEST(persists_across_restart)
{
	struct lio_vol_list l;
	const struct lio_vol_info *e;
	uint64_t start;

	open_vols();
	ck_assert_int_eq(create("vm1", 3 * MIB), 0);
	ck_assert_int_eq(create("vm2", MIB), 0);
	ck_assert_int_eq(vol_op(ssd_volumes_delete, "vm2", 0), 0);
	start = find(&l, "vm1")->lba_start;
	reopen_vols();
	e = find(&l, "vm1");
	ck_assert_ptr_nonnull(e);
	ck_assert_uint_eq(e->lba_start, start);
	ck_assert_uint_eq(e->lba_count, 3 * MIB >> SHIFT);
	ck_assert_ptr_null(find(&l, "vm2"));
	ck_assert_uint_eq(l.total, 1);
}
END_TEST

START_TEST(torn_write_keeps_older_copy)
{
	struct lio_vt vt;
	struct lio_vol_list l;
	static uint8_t a[LIO_VT_COPY_BYTES], b[LIO_VT_COPY_BYTES];
	int which = -1;

	open_vols();				    /* generation 1 */
	ck_assert_int_eq(create("first", MIB), 0);  /* 2 */
	ck_assert_int_eq(create("second", MIB), 0); /* 3: the newest copy */
	ssd_volumes_close(vols);
	vols = NULL;
	ck_assert_int_eq(pread(fd, a, sizeof(a), LIO_VT_COPY_OFF(0)), (ssize_t)sizeof(a));
	ck_assert_int_eq(pread(fd, b, sizeof(b), LIO_VT_COPY_OFF(1)), (ssize_t)sizeof(b));
	ck_assert_int_eq(lio_vt_load(a, b, &vt, &which), 0);
	ck_assert_uint_eq(vt.generation, 3);

	/* The write of generation 3 tore after its header: its entries never reached the disk. */
	memset(a, 0, 4096);
	ck_assert_int_eq(pwrite(fd, a, 4096, LIO_VT_COPY_OFF(which) + LIO_VT_HDR_BYTES), 4096);
	reopen_vols();
	ck_assert_ptr_nonnull(find(&l, "first"));
	ck_assert_ptr_null(find(&l, "second"));
	ck_assert_uint_eq(l.total, 1);

	/* The next write goes to the torn slot, never over the copy in use. */
	ck_assert_int_eq(create("third", MIB), 0);
	reopen_vols();
	ck_assert_ptr_nonnull(find(&l, "third"));
	ck_assert_uint_eq(l.total, 2);

	/* Both copies broken: refused, not reformatted. */
	ssd_volumes_close(vols);
	vols = NULL;
	memset(a, 0x5a, 64);
	ck_assert_int_eq(pwrite(fd, a, 64, LIO_VT_COPY_OFF(0) + 16), 64);
	ck_assert_int_eq(pwrite(fd, a, 64, LIO_VT_COPY_OFF(1) + 16), 64);
	ck_assert_int_eq(
	    ssd_volumes_open(&vols, fd, "ssd0", BACKING_SIZE, SHIFT, true, err, sizeof(err)),
	    -EINVAL);
	ck_assert_msg(strstr(err, "ssd0: the volume table is corrupt"), "%s", err);
}
END_TEST

START_TEST(failed_write_changes_nothing)
{
	struct lio_vol_attach a;
	struct lio_vol_list l;
	struct lio_identify id = {0};
	int rfd;

	open_vols();
	ck_assert_int_eq(create("vm1", 2 * MIB), 0);
	ssd_volumes_close(vols);
	vols = NULL;
	close(fd);
	fd = -1;

	/* Every write to this backing fails (a read-only fd): no change may take effect. */
	rfd = open(path, O_RDONLY);
	ck_assert_int_ge(rfd, 0);
	ck_assert_msg(
	    ssd_volumes_open(&vols, rfd, "ssd0", BACKING_SIZE, SHIFT, false, err, sizeof(err)) == 0,
	    "%s", err);
	ck_assert_int_eq(vol_op(ssd_volumes_delete, "vm1", 0), -EBADF);
	ck_assert_msg(strstr(err, "ssd0: writing volume table copy "), "%s", err);
	ck_assert_ptr_nonnull(find(&l, "vm1"));
	ck_assert_int_lt(create("vm2", MIB), 0);
	ck_assert_int_lt(vol_op(ssd_volumes_resize, "vm1", 4 * MIB), 0);
	ck_assert_uint_eq(find(&l, "vm1")->lba_count, 2 * MIB >> SHIFT);
	ck_assert_int_lt(attach("", MIB, LIO_ATTACH_ANON, 3, &a), 0);
	ck_assert_uint_eq((find(&l, "vm1"), l.total), 1);
	ck_assert_uint_eq(find(&l, "vm1")->users, 0);
	ssd_volumes_identify(vols, &id);
	ck_assert_uint_eq(id.nr_volumes, 1);

	/* Reads still work: a volume can be held, and its hold dropped. */
	ck_assert_int_eq(attach("vm1", 0, LIO_ATTACH_READONLY, 3, &a), 0);
	ck_assert_int_eq(ssd_volumes_detach(vols, a.vol_id, 3), 0);
	ssd_volumes_close(vols);
	vols = NULL;
	close(rfd);
}
END_TEST

START_TEST(second_open_locked_out)
{
	struct ssd_volumes *other = NULL;
	int fd2;

	open_vols();
	fd2 = open(path, O_RDWR);
	ck_assert_int_ge(fd2, 0);
	ck_assert_int_eq(
	    ssd_volumes_open(&other, fd2, "ssd0", BACKING_SIZE, SHIFT, true, err, sizeof(err)),
	    -EBUSY);
	ck_assert_ptr_null(other);
	ck_assert_msg(strstr(err, "ssd0: the backing is locked by another process"), "%s", err);
	/* Closing the holder's fd frees the lock. */
	ssd_volumes_close(vols);
	vols = NULL;
	close(fd);
	fd = -1;
	ck_assert_msg(
	    ssd_volumes_open(&other, fd2, "ssd0", BACKING_SIZE, SHIFT, true, err, sizeof(err)) == 0,
	    "%s", err);
	ssd_volumes_close(other);
	close(fd2);
}
END_TEST

START_TEST(grown_backing_adds_space)
{
	struct lio_identify id = {0};

	open_vols();
	ck_assert_int_eq(create("vm1", 60 * MIB), 0);
	ssd_volumes_close(vols);
	vols = NULL;
	ck_assert_int_eq(ftruncate(fd, BACKING_SIZE + 16 * MIB), 0);
	ck_assert_int_eq(ssd_volumes_open(&vols, fd, "ssd0", BACKING_SIZE + 16 * MIB, SHIFT, false,
					  err, sizeof(err)),
			 0);
	ssd_volumes_identify(vols, &id);
	ck_assert_uint_eq(id.capacity_lbas, 80 * MIB >> SHIFT);
	ck_assert_uint_eq(id.free_lbas, 20 * MIB >> SHIFT);
	ck_assert_int_eq(create("vm2", 20 * MIB), 0);
}
END_TEST

START_TEST(size_strings)
{
	char b[24];

	ssd_size_str(10ULL << 30, b, sizeof(b));
	ck_assert_str_eq(b, "10G");
	ssd_size_str(3ULL << 29, b, sizeof(b));
	ck_assert_str_eq(b, "1.5G");
	ssd_size_str((6ULL << 30) - 1, b, sizeof(b));
	ck_assert_str_eq(b, "5.9G");
	ssd_size_str(512, b, sizeof(b));
	ck_assert_str_eq(b, "512");
	ssd_size_str(2ULL << 40, b, sizeof(b));
	ck_assert_str_eq(b, "2T");
	ssd_size_str(4096, b, sizeof(b));
	ck_assert_str_eq(b, "4K");
	ssd_size_str(1030ULL << 20, b, sizeof(b));
	ck_assert_str_eq(b, "1030M");
	ssd_size_str(1536, b, sizeof(b));
	ck_assert_str_eq(b, "1.5K");
	ssd_size_str(1537, b, sizeof(b));
	ck_assert_str_eq(b, "1.5K");
	ssd_size_str((5ULL << 30) + 512, b, sizeof(b));
	ck_assert_str_eq(b, "5.0G");
}
END_TEST

#define RACE_THREADS 4
#define RACE_ROUNDS  10

/* One session of race_attach: anonymous volumes and a shared reader hold, over and over. */
static void *race_session(void *arg)
{
	uint64_t owner = 100 + (uintptr_t)arg;
	struct lio_vol_attach a, r;
	char e[256];
	long bad = 0;
	int i;

	for (i = 0; i < RACE_ROUNDS; i++) {
		memset(&a, 0, sizeof(a));
		a.flags = LIO_ATTACH_ANON;
		a.size_bytes = MIB;
		memset(&r, 0, sizeof(r));
		snprintf(r.name, sizeof(r.name), "shared");
		r.flags = LIO_ATTACH_READONLY;
		bad += ssd_volumes_attach(vols, &a, owner, e, sizeof(e)) != 0;
		bad += ssd_volumes_attach(vols, &r, owner, e, sizeof(e)) != 0;
		bad += ssd_volumes_detach(vols, r.vol_id, owner) != 0;
		bad += ssd_volumes_detach(vols, a.vol_id, owner) != 0;
	}
	return (void *)bad;
}

START_TEST(race_attach)
{
	pthread_t t[RACE_THREADS];
	struct lio_vol_list l;
	uintptr_t i;
	void *bad;

	open_vols();
	ck_assert_int_eq(create("shared", MIB), 0);
	for (i = 0; i < RACE_THREADS; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, race_session, (void *)i), 0);
	for (i = 0; i < RACE_THREADS; i++) {
		ck_assert_int_eq(pthread_join(t[i], &bad), 0);
		ck_assert_ptr_null(bad);
	}
	/* Every anonymous volume went with its detach; nobody holds the shared one. */
	ck_assert_ptr_nonnull(find(&l, "shared"));
	ck_assert_uint_eq(l.total, 1);
	ck_assert_uint_eq(l.v[0].users, 0);
	reopen_vols();
	ck_assert_uint_eq((find(&l, "shared"), l.total), 1);
}
END_TEST

static Suite *volumes_suite(void)
{
	Suite *s = suite_create("volumes");
	TCase *tc = tcase_create("table");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, open_format);
	tcase_add_test(tc, create_list_delete);
	tcase_add_test(tc, new_volume_reads_zeros);
	tcase_add_test(tc, no_space);
	tcase_add_test(tc, persists_across_restart);
	tcase_add_test(tc, torn_write_keeps_older_copy);
	tcase_add_test(tc, failed_write_changes_nothing);
	tcase_add_test(tc, second_open_locked_out);
	tcase_add_test(tc, grown_backing_adds_space);
	suite_add_tcase(s, tc);
	tc = tcase_create("attach");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, attach_rules);
	tcase_add_test(tc, anon_attach_detach);
	tcase_add_test(tc, reclaim_after_crash);
	tcase_add_test(tc, race_attach);
	suite_add_tcase(s, tc);
	tc = tcase_create("resize");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, resize_in_place);
	tcase_add_test(tc, resize_by_move);
	tcase_add_test(tc, size_strings);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return testutil_run_suite(volumes_suite());
}
