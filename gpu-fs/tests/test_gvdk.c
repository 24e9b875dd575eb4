/* Host tests of the GVDK format: map builder against real files on the file system the tests run
 * on (cross-checked by reading the raw block device when it is readable) and every corruption. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/falloc.h>
#include <linux/fiemap.h>

#include "gvdk.h"
#include "fixture.h"

static void setup(void)
{
	fixture_setup("gvdk-test");
}

static void make_file(uint64_t size, uint32_t bs)
{
	struct gvdk_create_opts o = {.block_size = bs};
	char err[GVDK_ERRLEN] = "";

	ck_assert_msg(gvdk_create(tfile, size, &o, err) == 0, "create: %s", err);
}

static int load(unsigned flags, char *err)
{
	struct gvdk_map m;
	int rc = gvdk_load(tfile, &m, flags, err);

	if (!rc)
		gvdk_map_free(&m);
	return rc;
}

static void rd(void *buf, size_t len, off_t off)
{
	int fd = open(tfile, O_RDONLY);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, buf, len, off), (ssize_t)len);
	close(fd);
}

static void wr(const void *buf, size_t len, off_t off)
{
	int fd = open(tfile, O_WRONLY);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, buf, len, off), (ssize_t)len);
	ck_assert_int_eq(fsync(fd), 0);
	close(fd);
}

static void rehash(struct gvdk_header *h, int map_too)
{
	if (map_too) {
		uint64_t nl2 = (uint64_t)h->l2_tables * h->per_l2;
		uint64_t *l1 = malloc(h->l2_tables * 8ull), *l2 = malloc(nl2 * 8);

		rd(l1, h->l2_tables * 8ull, (off_t)h->l1_offset);
		rd(l2, nl2 * 8, (off_t)h->l2_offset);
		h->map_crc = gvdk_crc32c(gvdk_crc32c(0, l1, h->l2_tables * 8ull), l2, nl2 * 8);
		free(l1);
		free(l2);
	}
	h->header_crc = 0;
	h->header_crc = gvdk_crc32c(0, h, sizeof(*h));
	wr(h, sizeof(*h), 0);
}

START_TEST(create_and_load)
{
	char err[GVDK_ERRLEN] = "";
	struct gvdk_map m;
	struct stat st;

	make_file(8 << 20, 4096);
	ck_assert_int_eq(gvdk_load(tfile, &m, 0, err), 0);
	ck_assert_int_eq(stat(tfile, &st), 0);
	ck_assert_uint_eq(m.hdr.nblocks, 2048);
	ck_assert_uint_eq(m.hdr.data_size, 8 << 20);
	ck_assert_uint_eq(m.hdr.file_size, (uint64_t)st.st_size);
	ck_assert_uint_eq(m.hdr.data_offset % 4096, 0);
	/* ~0.2% overhead at 4 KiB blocks */
	ck_assert_uint_le(m.hdr.data_offset - 4096, m.hdr.data_size / 400);
	for (uint64_t b = 0; b < m.hdr.nblocks; b++)
		ck_assert_uint_eq(gvdk_lookup(&m, b) % 4096, 0);
	gvdk_map_free(&m);
}
END_TEST

/* The map must name the bytes the file system actually stores: read them from the raw disk. */
START_TEST(map_points_at_the_data_on_disk)
{
	char err[GVDK_ERRLEN] = "", path[128], name[64] = "", line[128];
	struct gvdk_map m;
	struct stat st;
	unsigned char *pat, *got;
	FILE *f;
	int fd;

	make_file(1 << 20, 4096);
	pat = aligned_alloc(4096, 4096);
	got = aligned_alloc(4096, 4096);
	ck_assert_int_eq(gvdk_load(tfile, &m, 0, err), 0);
	for (int i = 0; i < 4096; i++)
		pat[i] = (unsigned char)(i * 7 + 13);
	wr(pat, 4096, (off_t)(m.hdr.data_offset + 37 * 4096));
	ck_assert_int_eq(stat(tfile, &st), 0);
	/* the whole disk holding the partition: the map is disk-relative */
	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/uevent", major(st.st_dev),
		 minor(st.st_dev));
	if (access("/sys/dev/block", F_OK) == 0 && m.hdr.part_start) {
		snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/../uevent", major(st.st_dev),
			 minor(st.st_dev));
	}
	f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "DEVNAME=", 8))
			snprintf(name, sizeof(name), "/dev/%.*s", (int)strcspn(line + 8, "\n"),
				 line + 8);
	fclose(f);
	fd = open(name, O_RDONLY | O_DIRECT);
	if (fd < 0) {
		fprintf(stderr,
			"map_points_at_the_data_on_disk: %s unreadable (%s), raw check "
			"skipped\n",
			name, strerror(errno));
	} else {
		ck_assert_int_eq(pread(fd, got, 4096, (off_t)gvdk_lookup(&m, 37)), 4096);
		ck_assert_mem_eq(got, pat, 4096);
		ck_assert_int_eq(pread(fd, got, 4096, (off_t)gvdk_lookup(&m, 36)), 4096);
		ck_assert_int_ne(memcmp(got, pat, 4096), 0);
		close(fd);
	}
	gvdk_map_free(&m);
	free(pat);
	free(got);
}
END_TEST

START_TEST(large_blocks)
{
	char err[GVDK_ERRLEN] = "";
	struct gvdk_map m;

	make_file((4 << 20) + 1, 65536);
	ck_assert_int_eq(gvdk_load(tfile, &m, 0, err), 0);
	ck_assert_uint_eq(m.hdr.nblocks, 65);
	ck_assert_uint_eq(m.hdr.per_l2, 8192);
	ck_assert_uint_eq(m.l2[65], GVDK_ENTRY_INVALID);
	gvdk_map_free(&m);
}
END_TEST

START_TEST(bad_magic)
{
	char err[GVDK_ERRLEN] = "";
	uint64_t v = 0x1234;

	make_file(1 << 20, 4096);
	wr(&v, 8, 0);
	ck_assert_int_eq(load(0, err), -EMEDIUMTYPE);
	ck_assert_ptr_nonnull(strstr(err, "not a GVDK file"));
}
END_TEST

START_TEST(header_bit_flip)
{
	char err[GVDK_ERRLEN] = "";
	struct gvdk_header h;

	make_file(1 << 20, 4096);
	rd(&h, sizeof(h), 0);
	h.nblocks ^= 4;
	wr(&h, sizeof(h), 0);
	ck_assert_int_eq(load(0, err), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(err, "header checksum"));
}
END_TEST

START_TEST(header_inconsistent_geometry)
{
	static const int field[] = {0, 1, 2, 3, 4, 5};
	char err[GVDK_ERRLEN] = "";
	struct gvdk_header h, orig;

	make_file(1 << 20, 4096);
	rd(&orig, sizeof(orig), 0);
	for (unsigned i = 0; i < sizeof(field) / sizeof(field[0]); i++) {
		h = orig;
		switch (field[i]) {
		case 0:
			h.nblocks++;
			break;
		case 1:
			h.data_offset += 4096;
			break;
		case 2:
			h.block_size = 3000;
			break;
		case 3:
			h.l2_tables = 0;
			break;
		case 4:
			h.data_size = UINT64_MAX - 4095;
			h.nblocks = h.data_size / 4096;
			break;
		case 5:
			h.part_start = 3;
			break;
		}
		rehash(&h, 0);
		ck_assert_msg(load(0, err) == -EBADMSG, "field %d accepted", field[i]);
	}
	rehash(&orig, 0);
	ck_assert_int_eq(load(0, err), 0);
}
END_TEST

START_TEST(future_version)
{
	char err[GVDK_ERRLEN] = "";
	struct gvdk_header h;

	make_file(1 << 20, 4096);
	rd(&h, sizeof(h), 0);
	h.version = 2;
	rehash(&h, 0);
	ck_assert_int_eq(load(0, err), -EPROTONOSUPPORT);
}
END_TEST

START_TEST(map_bit_flip)
{
	char err[GVDK_ERRLEN] = "";
	struct gvdk_header h;
	uint64_t v;

	make_file(1 << 20, 4096);
	rd(&h, sizeof(h), 0);
	rd(&v, 8, (off_t)(h.l2_offset + 8 * 5));
	v ^= 1ull << 20;
	wr(&v, 8, (off_t)(h.l2_offset + 8 * 5));
	ck_assert_int_eq(load(0, err), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(err, "map checksum"));
}
END_TEST

/* A forged map with valid checksums is still caught by the fresh FIEMAP. */
START_TEST(forged_map_is_stale)
{
	char err[GVDK_ERRLEN] = "";
	struct gvdk_header h;
	uint64_t v;

	make_file(1 << 20, 4096);
	rd(&h, sizeof(h), 0);
	rd(&v, 8, (off_t)(h.l2_offset + 8 * 9));
	v += 1 << 20;
	wr(&v, 8, (off_t)(h.l2_offset + 8 * 9));
	rehash(&h, 1);
	ck_assert_int_eq(load(0, err), -ESTALE);
	ck_assert_ptr_nonnull(strstr(err, "block 9"));
	ck_assert_int_eq(load(GVDK_LOAD_SKIP_FIEMAP, err), 0);
}
END_TEST

START_TEST(forged_l1)
{
	char err[GVDK_ERRLEN] = "";
	struct gvdk_header h;
	uint64_t v = 0;

	make_file(1 << 20, 4096);
	rd(&h, sizeof(h), 0);
	wr(&v, 8, (off_t)h.l1_offset);
	rehash(&h, 1);
	ck_assert_int_eq(load(0, err), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(err, "L1 entry 0"));
}
END_TEST

START_TEST(forged_l2_tail)
{
	char err[GVDK_ERRLEN] = "";
	struct gvdk_header h;
	uint64_t v = 4096;

	make_file(100 * 4096, 4096);
	rd(&h, sizeof(h), 0);
	wr(&v, 8, (off_t)(h.l2_offset + 8 * 200)); /* past nblocks: must stay invalid */
	rehash(&h, 1);
	ck_assert_int_eq(load(0, err), -EBADMSG);
}
END_TEST

START_TEST(truncated)
{
	char err[GVDK_ERRLEN] = "";
	struct stat st;

	make_file(1 << 20, 4096);
	ck_assert_int_eq(stat(tfile, &st), 0);
	ck_assert_int_eq(truncate(tfile, st.st_size - 4096), 0);
	ck_assert_int_eq(load(0, err), -ENODATA);
	ck_assert_ptr_nonnull(strstr(err, "truncated"));
	ck_assert_int_eq(truncate(tfile, 100), 0);
	ck_assert_int_eq(load(0, err), -ENODATA);
	ck_assert_int_eq(truncate(tfile, 0), 0);
	ck_assert_int_eq(load(0, err), -ENODATA);
}
END_TEST

START_TEST(grown_is_stale)
{
	char err[GVDK_ERRLEN] = "";
	struct stat st;
	char c = 1;

	make_file(1 << 20, 4096);
	ck_assert_int_eq(stat(tfile, &st), 0);
	wr(&c, 1, st.st_size);
	ck_assert_int_eq(load(0, err), -ESTALE);
}
END_TEST

START_TEST(copy_is_stale)
{
	char err[GVDK_ERRLEN] = "", cmd[1400], copy[620];
	struct gvdk_map m;

	make_file(1 << 20, 4096);
	snprintf(copy, sizeof(copy), "%s/copy", tdir);
	snprintf(cmd, sizeof(cmd), "cp --reflink=never '%s' '%s'", tfile, copy);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_eq(gvdk_load(copy, &m, 0, err), -ESTALE);
	ck_assert_ptr_nonnull(strstr(err, "inode"));
}
END_TEST

START_TEST(punched_hole_refused)
{
	char err[GVDK_ERRLEN] = "";
	struct gvdk_header h;
	int fd;

	make_file(1 << 20, 4096);
	rd(&h, sizeof(h), 0);
	fd = open(tfile, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				   (off_t)h.data_offset + 8192, 8192),
			 0);
	close(fd);
	ck_assert_int_eq(load(0, err), -EXDEV);
	ck_assert_ptr_nonnull(strstr(err, "hole"));
	/* refilled with fallocate: allocated but unwritten, which a device reads as junk */
	fd = open(tfile, O_RDWR);
	ck_assert_int_eq(fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)h.data_offset + 8192, 8192), 0);
	close(fd);
	ck_assert_int_eq(load(0, err), -EXDEV);
	ck_assert_ptr_nonnull(strstr(err, "unwritten"));
}
END_TEST

START_TEST(unsafe_extent_flags)
{
	static const uint32_t flags[] = {
	    FIEMAP_EXTENT_UNKNOWN,	  FIEMAP_EXTENT_DELALLOC,    FIEMAP_EXTENT_ENCODED,
	    FIEMAP_EXTENT_DATA_ENCRYPTED, FIEMAP_EXTENT_NOT_ALIGNED, FIEMAP_EXTENT_DATA_INLINE,
	    FIEMAP_EXTENT_DATA_TAIL,	  FIEMAP_EXTENT_UNWRITTEN,   FIEMAP_EXTENT_SHARED};
	struct gvdk_extent e[2] = {{0, 1 << 20, 8192, 0}, {8192, 4 << 20, 8192, 0}};
	char err[GVDK_ERRLEN];
	uint64_t dev;

	ck_assert_int_eq(gvdk_extents_check(e, 2, 16384, 4096, err), 0);
	ck_assert_int_eq(gvdk_extents_translate(e, 2, 9000, &dev), 0);
	ck_assert_uint_eq(dev, (4 << 20) + 808);
	ck_assert_int_eq(gvdk_extents_translate(e, 2, 16384, &dev), -ERANGE);
	for (unsigned i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
		e[1].flags = flags[i];
		ck_assert_msg(gvdk_extents_check(e, 2, 16384, 4096, err) == -EXDEV, "flag %#x",
			      flags[i]);
	}
	e[1].flags = FIEMAP_EXTENT_LAST | FIEMAP_EXTENT_MERGED;
	ck_assert_int_eq(gvdk_extents_check(e, 2, 16384, 4096, err), 0);
	e[1].physical += 512; /* sector but not block aligned */
	ck_assert_int_eq(gvdk_extents_check(e, 2, 16384, 4096, err), -EXDEV);
	ck_assert_ptr_nonnull(strstr(err, "aligned"));
	e[1].physical -= 512;
	e[1].logical = 4096; /* overlap */
	ck_assert_int_eq(gvdk_extents_check(e, 2, 16384, 4096, err), -EXDEV);
	e[1].logical = 8192;
	ck_assert_int_eq(gvdk_extents_check(e, 2, 20480, 4096, err), -EXDEV); /* hole at end */
	ck_assert_int_eq(gvdk_extents_check(e, 0, 4096, 4096, err), -EXDEV);
}
END_TEST

START_TEST(refuses_anonymous_and_foreign_devices)
{
	struct gvdk_create_opts o = {.device = "/dev/null"};
	char err[GVDK_ERRLEN] = "", shm[64];
	uint64_t start;

	ck_assert_int_eq(gvdk_part_start(makedev(0, 27), &start, err), -EXDEV);
	ck_assert_ptr_nonnull(strstr(err, "anonymous"));
	ck_assert_int_eq(gvdk_create(tfile, 1 << 20, &o, err), -ENOTBLK);
	ck_assert_int_eq(access(tfile, F_OK), -1); /* nothing left behind */
	snprintf(shm, sizeof(shm), "/dev/shm/gvdk-test-%d", (int)getpid());
	if (access("/dev/shm", W_OK) == 0) {
		ck_assert_int_lt(gvdk_create(shm, 1 << 20, NULL, err), 0);
		ck_assert_int_eq(access(shm, F_OK), -1);
	}
	o.block_size = 5000;
	o.device = NULL;
	ck_assert_int_eq(gvdk_create(tfile, 1 << 20, &o, err), -EINVAL);
	o.block_size = 4096;
	ck_assert_int_eq(gvdk_create(tfile, 0, &o, err), -EINVAL);
	make_file(1 << 20, 4096);
	ck_assert_int_eq(gvdk_create(tfile, 1 << 20, NULL, err), -EEXIST);
	ck_assert_int_eq(load(0, err), 0); /* the refusal left the existing file alone */
}
END_TEST

START_TEST(parse_size)
{
	uint64_t v;

	ck_assert_int_eq(gvdk_parse_size("4K", &v), 0);
	ck_assert_uint_eq(v, 4096);
	ck_assert_int_eq(gvdk_parse_size("10GiB", &v), 0);
	ck_assert_uint_eq(v, 10ull << 30);
	ck_assert_int_eq(gvdk_parse_size("123", &v), 0);
	ck_assert_uint_eq(v, 123);
	ck_assert_int_eq(gvdk_parse_size("-1", &v), -EINVAL);
	ck_assert_int_eq(gvdk_parse_size("1X", &v), -EINVAL);
	ck_assert_int_eq(gvdk_parse_size("", &v), -EINVAL);
	ck_assert_int_eq(gvdk_parse_size("99999999999T", &v), -EINVAL);
}
END_TEST

static int run_tool(const char *args)
{
	const char *tool = getenv("GVDK");
	char cmd[1400];
	int st;

	ck_assert_msg(tool != NULL, "GVDK must name the gvdk binary");
	snprintf(cmd, sizeof(cmd), "%s %s >/dev/null 2>&1", tool, args);
	st = system(cmd);
	ck_assert(WIFEXITED(st));
	return WEXITSTATUS(st);
}

START_TEST(tool_exit_codes)
{
	char args[800];

	snprintf(args, sizeof(args), "create '%s' 2M --block-size 8K", tfile);
	ck_assert_int_eq(run_tool(args), 0);
	snprintf(args, sizeof(args), "inspect '%s'", tfile);
	ck_assert_int_eq(run_tool(args), 0);
	snprintf(args, sizeof(args), "verify '%s'", tfile);
	ck_assert_int_eq(run_tool(args), 0);
	snprintf(args, sizeof(args), "create '%s' 2M", tfile);
	ck_assert_int_eq(run_tool(args), 1); /* exists */
	snprintf(args, sizeof(args), "create '%s' lots", tfile);
	ck_assert_int_eq(run_tool(args), 2);
	ck_assert_int_eq(run_tool("frobnicate x"), 2);
	ck_assert_int_eq(truncate(tfile, 4096), 0);
	snprintf(args, sizeof(args), "verify '%s'", tfile);
	ck_assert_int_eq(run_tool(args), 1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("gvdk");
	TCase *tc = tcase_create("format");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, create_and_load);
	tcase_add_test(tc, map_points_at_the_data_on_disk);
	tcase_add_test(tc, large_blocks);
	tcase_add_test(tc, bad_magic);
	tcase_add_test(tc, header_bit_flip);
	tcase_add_test(tc, header_inconsistent_geometry);
	tcase_add_test(tc, future_version);
	tcase_add_test(tc, map_bit_flip);
	tcase_add_test(tc, forged_map_is_stale);
	tcase_add_test(tc, forged_l1);
	tcase_add_test(tc, forged_l2_tail);
	tcase_add_test(tc, truncated);
	tcase_add_test(tc, grown_is_stale);
	tcase_add_test(tc, copy_is_stale);
	tcase_add_test(tc, punched_hole_refused);
	tcase_add_test(tc, unsafe_extent_flags);
	tcase_add_test(tc, refuses_anonymous_and_foreign_devices);
	tcase_add_test(tc, parse_size);
	tcase_add_test(tc, tool_exit_codes);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
