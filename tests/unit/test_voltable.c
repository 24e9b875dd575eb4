/* The on-disk volume table (host-kmod/common/voltable.c): encode/decode, the two-copy load after
 * corruption and torn writes, the first-fit allocator, growth, name rules, crc32c. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lightiov/voltable.h"
#include "testutil.h"

#define CAP (1ull << 24) /* 8 GiB of 512-byte LBAs */

static struct lio_vt *vt, *out;
static uint8_t *disk; /* the reserved area: copy A at 0, copy B at 512 KiB */

static void setup(void)
{
	vt = calloc(1, sizeof(*vt));
	out = calloc(1, sizeof(*out));
	disk = calloc(1, LIO_VT_RESERVED_BYTES);
	ck_assert(vt && out && disk);
	lio_vt_init(vt, "ssd0", CAP, 9);
}

static void teardown(void)
{
	free(vt);
	free(out);
	free(disk);
}

/* The writer's protocol, as softssd and the module follow it. */
static unsigned commit(void)
{
	static uint8_t buf[LIO_VT_COPY_BYTES];
	unsigned slot = lio_vt_write_prep(vt, buf);

	memcpy(disk + LIO_VT_COPY_OFF(slot), buf, LIO_VT_COPY_BYTES);
	return slot;
}

static int load(int *which)
{
	return lio_vt_load(disk, disk + LIO_VT_COPY_OFF(1), out, which);
}

START_TEST(test_crc32c)
{
	/* The check value of CRC-32C, and chaining. */
	ck_assert_uint_eq(lio_crc32c(0, "123456789", 9), 0xe3069283);
	ck_assert_uint_eq(lio_crc32c(lio_crc32c(0, "1234", 4), "56789", 5), 0xe3069283);
	ck_assert_uint_eq(lio_crc32c(0, "", 0), 0);
}
END_TEST

START_TEST(test_layout)
{
	ck_assert_uint_eq(LIO_VT_COPY_BYTES, 4096 + 1024 * 64);
	ck_assert_uint_eq(LIO_VT_COPY_OFF(0), 0);
	ck_assert_uint_eq(LIO_VT_COPY_OFF(1), 512 << 10);
	ck_assert_uint_eq(vt->data_start_lba, (1u << 20) / 512);
	ck_assert_uint_eq(vt->n, 0);
	ck_assert_str_eq(vt->ssd_name, "ssd0");
	/* Little-endian fields where the format says. */
	ck_assert_int_eq(lio_vt_alloc(vt, "a", 100, 0, 0), 0);
	commit();
	ck_assert_int_eq(memcmp(disk + LIO_VT_COPY_OFF(1), "LIOVTBL1", 8), 0);
	ck_assert_uint_eq(disk[LIO_VT_COPY_OFF(1) + 16], 1); /* generation 1, low byte first */
	ck_assert_uint_eq(disk[LIO_VT_COPY_OFF(1) + 4096 + 40], 100); /* entry 0, lba_count */
}
END_TEST

START_TEST(test_round_trip)
{
	static uint8_t buf[LIO_VT_COPY_BYTES], buf2[LIO_VT_COPY_BYTES];
	int i;

	ck_assert_int_eq(lio_vt_alloc(vt, "root", 1000, 0, 0), 0);
	ck_assert_int_eq(lio_vt_alloc(vt, "anon-7", 2048, LIO_VOL_ANON, 0x1234567890abcdefull), 1);
	vt->e[1].ctime = 1764547200;
	ck_assert_int_eq(lio_vt_alloc(vt, "x.y_z", 1, 0, 0), 2);
	vt->generation = 41;
	lio_vt_encode(vt, buf);
	ck_assert_int_eq(lio_vt_decode(buf, out), 0);
	ck_assert_uint_eq(out->generation, 41);
	ck_assert_uint_eq(out->lba_shift, 9);
	ck_assert_uint_eq(out->capacity_lbas, CAP);
	ck_assert_uint_eq(out->data_start_lba, 2048);
	ck_assert_str_eq(out->ssd_name, "ssd0");
	ck_assert_uint_eq(out->n, 3);
	for (i = 0; i < 3; i++) {
		ck_assert_str_eq(out->e[i].name, vt->e[i].name);
		ck_assert_uint_eq(out->e[i].lba_start, vt->e[i].lba_start);
		ck_assert_uint_eq(out->e[i].lba_count, vt->e[i].lba_count);
		ck_assert_uint_eq(out->e[i].flags, vt->e[i].flags);
		ck_assert_uint_eq(out->e[i].ctime, vt->e[i].ctime);
		ck_assert_uint_eq(out->e[i].owner, vt->e[i].owner);
	}
	ck_assert_uint_eq(out->e[1].owner, 0x1234567890abcdefull);
	/* Decoding and encoding again gives the same bytes. */
	lio_vt_encode(out, buf2);
	ck_assert_int_eq(memcmp(buf, buf2, sizeof(buf)), 0);
	/* 4 KiB LBAs. */
	lio_vt_init(vt, "big", CAP, 12);
	ck_assert_uint_eq(vt->data_start_lba, 256);
	lio_vt_encode(vt, buf);
	ck_assert_int_eq(lio_vt_decode(buf, out), 0);
	ck_assert_uint_eq(out->lba_shift, 12);
}
END_TEST

/* Recomputes the crc of a copy after a test changed it, so the change itself is what is judged. */
static void reseal(uint8_t *buf)
{
	uint32_t n, crc;

	memcpy(&n, buf + 28, 4);
	if (n > LIO_MAX_VOLUMES)
		n = 0;
	memset(buf + 12, 0, 4);
	crc = lio_crc32c(0, buf, 4096 + (size_t)n * 64);
	memcpy(buf + 12, &crc, 4);
}

static void put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

static void put64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

START_TEST(test_decode_rejects)
{
	static uint8_t good[LIO_VT_COPY_BYTES], buf[LIO_VT_COPY_BYTES];
	uint8_t *e0 = buf + 4096, *e1 = buf + 4096 + 64;

	ck_assert_int_eq(lio_vt_alloc(vt, "a", 100, 0, 0), 0);
	ck_assert_int_eq(lio_vt_alloc(vt, "b", 100, LIO_VOL_ANON, 9), 1);
	lio_vt_encode(vt, good);
	ck_assert_int_eq(lio_vt_decode(good, out), 0);

#define FRESH() memcpy(buf, good, sizeof(buf))
#define REFUSED()                                                                                  \
	do {                                                                                       \
		reseal(buf);                                                                       \
		ck_assert_int_eq(lio_vt_decode(buf, out), -EINVAL);                                \
	} while (0)
	/* One flipped bit in the covered bytes (an entry, the reserved part of the header). */
	FRESH();
	e1[40] ^= 1;
	ck_assert_int_eq(lio_vt_decode(buf, out), -EINVAL);
	FRESH();
	buf[200] ^= 0x80;
	ck_assert_int_eq(lio_vt_decode(buf, out), -EINVAL);
	/* Bytes after the used entries are not covered (they are zero when written). */
	FRESH();
	buf[4096 + 5 * 64] = 0xff;
	ck_assert_int_eq(lio_vt_decode(buf, out), 0);
	/* With a correct crc: bad magic, version, LBA size, entry count, geometry. */
	FRESH();
	memcpy(buf, "LIOVTBL2", 8);
	REFUSED();
	FRESH();
	put32(buf + 8, 2);
	REFUSED();
	FRESH();
	put32(buf + 24, 10);
	REFUSED();
	FRESH();
	put32(buf + 28, LIO_MAX_VOLUMES + 1);
	ck_assert_int_eq(lio_vt_decode(buf, out), -EINVAL);
	FRESH();
	put64(buf + 40, 100); /* data area inside the reserved MiB */
	REFUSED();
	FRESH();
	put64(buf + 40, CAP + 1); /* data area past the device */
	REFUSED();
	FRESH();
	put64(buf + 32, ~0ull); /* capacity not addressable in bytes */
	REFUSED();
	FRESH();
	buf[48] = '/'; /* SSD name */
	REFUSED();
	/* Entries: outside the data area, past the capacity, empty, overlapping. */
	FRESH();
	put64(e0 + 32, 2047);
	REFUSED();
	FRESH();
	put64(e1 + 32, CAP - 99);
	REFUSED();
	FRESH();
	put64(e1 + 32, ~0ull - 10); /* start + count wraps */
	REFUSED();
	FRESH();
	put64(e1 + 40, 0);
	REFUSED();
	FRESH();
	put64(e1 + 32, 2048 + 99); /* b's first LBA is a's last */
	REFUSED();
	FRESH();
	put64(e1 + 32, 2000);
	put64(e1 + 40, 1000); /* b covers a and more */
	REFUSED();
	/* Names: duplicate, invalid, not terminated, junk after the NUL; unknown flags. */
	FRESH();
	e1[0] = 'a';
	REFUSED();
	FRESH();
	e1[0] = ' ';
	REFUSED();
	FRESH();
	memcpy(e1, "..", 2);
	REFUSED();
	FRESH();
	memset(e1, 'x', 32);
	REFUSED();
	FRESH();
	e1[5] = 'q';
	REFUSED();
	FRESH();
	e1[0] = 0;
	REFUSED();
	FRESH();
	put32(e1 + 48, 2);
	REFUSED();
	/* And the untouched copy, resealed, is still good (reseal itself is not the cause). */
	FRESH();
	reseal(buf);
	ck_assert_int_eq(lio_vt_decode(buf, out), 0);
#undef FRESH
#undef REFUSED
}
END_TEST

START_TEST(test_load_newest)
{
	int which = -1;

	/* Never formatted. */
	ck_assert_int_eq(load(&which), -ENOENT);
	/* The first write goes to B and leaves A alone. */
	ck_assert_uint_eq(lio_vt_next_slot(vt), 1);
	ck_assert_uint_eq(commit(), 1);
	ck_assert_int_eq(load(&which), 0);
	ck_assert_int_eq(which, 1);
	ck_assert_uint_eq(out->generation, 1);
	/* Then they alternate; the newest generation wins. */
	ck_assert_int_eq(lio_vt_alloc(vt, "v1", 10, 0, 0), 0);
	ck_assert_uint_eq(commit(), 0);
	ck_assert_int_eq(load(&which), 0);
	ck_assert_int_eq(which, 0);
	ck_assert_uint_eq(out->generation, 2);
	ck_assert_uint_eq(out->n, 1);
	ck_assert_int_eq(lio_vt_alloc(vt, "v2", 10, 0, 0), 1);
	ck_assert_uint_eq(commit(), 1);
	ck_assert_int_eq(load(&which), 0);
	ck_assert_int_eq(which, 1);
	ck_assert_uint_eq(out->n, 2);
	/* A loaded table continues the alternation: its next write spares the copy it came from. */
	ck_assert_uint_eq(lio_vt_next_slot(out), 0);
	ck_assert_int_eq(load(NULL), 0);
}
END_TEST

START_TEST(test_load_corrupt_copy)
{
	int which;

	commit(); /* gen 1 in B */
	ck_assert_int_eq(lio_vt_alloc(vt, "v", 10, 0, 0), 0);
	commit(); /* gen 2 in A */
	/* The newer copy (A) corrupted: B, one change older, is what loads. */
	disk[4096 + 40] ^= 0x10;
	ck_assert_int_eq(load(&which), 0);
	ck_assert_int_eq(which, 1);
	ck_assert_uint_eq(out->generation, 1);
	ck_assert_uint_eq(out->n, 0);
	/* The next write overwrites the bad copy, not the good one. */
	ck_assert_uint_eq(lio_vt_next_slot(out), 0);
	disk[4096 + 40] ^= 0x10;
	/* The older copy (B) corrupted: A loads. */
	disk[LIO_VT_COPY_OFF(1) + 100] ^= 1;
	ck_assert_int_eq(load(&which), 0);
	ck_assert_int_eq(which, 0);
	ck_assert_uint_eq(out->generation, 2);
	/* Both corrupt: not "unformatted", an error. */
	disk[4096 + 40] ^= 0x10;
	ck_assert_int_eq(load(&which), -EINVAL);
	/* Magic gone from both: reads as never formatted. */
	memset(disk, 0, 8);
	memset(disk + LIO_VT_COPY_OFF(1), 0, 8);
	ck_assert_int_eq(load(&which), -ENOENT);
}
END_TEST

START_TEST(test_torn_write)
{
	static uint8_t buf[LIO_VT_COPY_BYTES], old_b[LIO_VT_COPY_BYTES];
	unsigned cut, slot, i, used;
	int which;

	commit(); /* gen 1 in B */
	for (i = 0; i < 200; i++) {
		char name[16];

		snprintf(name, sizeof(name), "keep%u", i);
		ck_assert_int_eq(lio_vt_alloc(vt, name, 10, 0, 0), (int)i);
	}
	commit(); /* gen 2 in A: 200 volumes, entries over four sectors of 4 KiB */
	ck_assert_int_eq(lio_vt_alloc(vt, "lost", 10, 0, 0), 200);
	vt->e[0].lba_count = 5; /* a change early in the entries too */
	memcpy(old_b, disk + LIO_VT_COPY_OFF(1), sizeof(old_b));
	/* Generation 3 goes to B; the crash cuts it at every 512-byte sector of the covered bytes,
	 * the rest of B still holding generation 1. */
	used = 4096 + 201 * 64;
	for (cut = 512; cut < used; cut += 512) {
		struct lio_vt *w = malloc(sizeof(*w));

		*w = *vt;
		slot = lio_vt_write_prep(w, buf);
		ck_assert_uint_eq(slot, 1);
		ck_assert_uint_eq(w->generation, 3);
		memcpy(disk + LIO_VT_COPY_OFF(1), old_b, sizeof(old_b));
		memcpy(disk + LIO_VT_COPY_OFF(1), buf, cut);
		ck_assert_int_eq(load(&which), 0);
		ck_assert_int_eq(which, 0);
		ck_assert_uint_eq(out->generation, 2);
		ck_assert_uint_eq(out->n, 200);
		ck_assert_uint_eq(out->e[0].lba_count, 10);
		ck_assert_int_eq(lio_vt_find(out, "lost"), -ENOENT);
		/* The retry after the restart goes to B again, never to A. */
		ck_assert_uint_eq(lio_vt_next_slot(out), 1);
		free(w);
	}
	/* The write completes: the newer table wins. */
	slot = lio_vt_write_prep(vt, buf);
	memcpy(disk + LIO_VT_COPY_OFF(slot), buf, LIO_VT_COPY_BYTES);
	ck_assert_int_eq(load(&which), 0);
	ck_assert_int_eq(which, 1);
	ck_assert_uint_eq(out->generation, 3);
	ck_assert_int_eq(lio_vt_find(out, "lost"), 200);
	ck_assert_uint_eq(out->e[0].lba_count, 5);
}
END_TEST

START_TEST(test_load_foreign_parity)
{
	static uint8_t buf[LIO_VT_COPY_BYTES];
	int which;

	/* A copy in the slot its generation's parity does not name (written by other means): the
	 * next write must still go to the other slot. */
	vt->generation = 6;
	lio_vt_encode(vt, buf);
	memcpy(disk + LIO_VT_COPY_OFF(1), buf, sizeof(buf));
	ck_assert_int_eq(load(&which), 0);
	ck_assert_int_eq(which, 1);
	ck_assert_uint_eq(lio_vt_next_slot(out), 0);
	ck_assert_uint_gt(out->generation, 5);
	/* Equal generations in both slots (never so by this protocol): either loads. */
	memcpy(disk, buf, sizeof(buf));
	ck_assert_int_eq(load(&which), 0);
	ck_assert_uint_eq(lio_vt_next_slot(out), 1 - (unsigned)which);
}
END_TEST

START_TEST(test_alloc)
{
	uint64_t start;
	unsigned i;
	int r;

	/* First fit from the data area. */
	ck_assert_int_eq(lio_vt_alloc(vt, "a", 100, 0, 0), 0);
	ck_assert_int_eq(lio_vt_alloc(vt, "b", 200, 0, 0), 1);
	ck_assert_int_eq(lio_vt_alloc(vt, "c", 300, 0, 0), 2);
	ck_assert_uint_eq(vt->e[0].lba_start, 2048);
	ck_assert_uint_eq(vt->e[1].lba_start, 2148);
	ck_assert_uint_eq(vt->e[2].lba_start, 2348);
	/* A hole left by b takes what fits in it; what does not goes after c. */
	ck_assert_int_eq(lio_vt_remove(vt, "b"), 0);
	ck_assert_int_eq(lio_vt_find(vt, "c"), 1); /* the last entry moved in */
	ck_assert_int_eq(lio_vt_alloc(vt, "big", 201, 0, 0), 2);
	ck_assert_uint_eq(vt->e[2].lba_start, 2648);
	ck_assert_int_eq(lio_vt_alloc(vt, "fits", 150, 0, 0), 3);
	ck_assert_uint_eq(vt->e[3].lba_start, 2148);
	ck_assert_int_eq(lio_vt_alloc(vt, "rest", 50, 0, 0), 4);
	ck_assert_uint_eq(vt->e[4].lba_start, 2298);
	/* Errors. */
	ck_assert_int_eq(lio_vt_alloc(vt, "a", 1, 0, 0), -EEXIST);
	ck_assert_int_eq(lio_vt_alloc(vt, "zero", 0, 0, 0), -EINVAL);
	ck_assert_int_eq(lio_vt_alloc(vt, "bad/name", 1, 0, 0), -EINVAL);
	ck_assert_int_eq(lio_vt_alloc(vt, "flags", 1, 0x80, 0), -EINVAL);
	ck_assert_int_eq(lio_vt_alloc(vt, "huge", CAP, 0, 0), -ENOSPC);
	/* Exactly the largest free extent fits; one more does not. */
	ck_assert_uint_eq(lio_vt_free_lbas(vt), CAP - 2849);
	ck_assert_int_eq(lio_vt_alloc(vt, "over", CAP - 2849 + 1, 0, 0), -ENOSPC);
	ck_assert_int_eq(lio_vt_alloc(vt, "all", CAP - 2849, 0, 0), 5);
	ck_assert_uint_eq(lio_vt_free_lbas(vt), 0);
	ck_assert_int_eq(lio_vt_alloc(vt, "one", 1, 0, 0), -ENOSPC);
	ck_assert_int_eq(lio_vt_find_free(vt, 1, &start), -ENOSPC);
	ck_assert_int_eq(lio_vt_remove(vt, "nope"), -ENOENT);
	ck_assert_int_eq(lio_vt_remove(vt, "a"), 0);
	ck_assert_uint_eq(lio_vt_free_lbas(vt), 100);
	ck_assert_int_eq(lio_vt_find_free(vt, 100, &start), 0);
	ck_assert_uint_eq(start, 2048);
	/* Table full. */
	lio_vt_init(vt, "ssd0", CAP, 9);
	for (i = 0; i < LIO_MAX_VOLUMES; i++) {
		char name[16];

		snprintf(name, sizeof(name), "v%u", i);
		r = lio_vt_alloc(vt, name, 1, 0, 0);
		ck_assert_int_eq(r, (int)i);
	}
	ck_assert_int_eq(lio_vt_alloc(vt, "more", 1, 0, 0), -EMFILE);
	ck_assert_uint_eq(vt->e[LIO_MAX_VOLUMES - 1].lba_start, 2048 + LIO_MAX_VOLUMES - 1);
	/* A full table encodes and loads. */
	commit();
	ck_assert_int_eq(load(NULL), 0);
	ck_assert_uint_eq(out->n, LIO_MAX_VOLUMES);
}
END_TEST

START_TEST(test_grow)
{
	uint64_t start;

	ck_assert_int_eq(lio_vt_alloc(vt, "a", 100, 0, 0), 0);
	ck_assert_int_eq(lio_vt_alloc(vt, "b", 100, 0, 0), 1);
	/* b is last: grows in place. */
	ck_assert_int_eq(lio_vt_grow(vt, "b", 1000), 0);
	ck_assert_uint_eq(vt->e[1].lba_count, 1000);
	ck_assert_uint_eq(vt->e[1].lba_start, 2148);
	/* a is followed by b: refused, nothing changed. */
	ck_assert_int_eq(lio_vt_grow(vt, "a", 101), -ENOSPC);
	ck_assert_uint_eq(vt->e[0].lba_count, 100);
	ck_assert_uint_eq(vt->e[1].lba_start, 2148);
	/* The caller can find room elsewhere. */
	ck_assert_int_eq(lio_vt_find_free(vt, 101, &start), 0);
	ck_assert_uint_eq(start, 3148);
	/* Shrink, same size, unknown, past the device. */
	ck_assert_int_eq(lio_vt_grow(vt, "b", 999), -EINVAL);
	ck_assert_int_eq(lio_vt_grow(vt, "b", 1000), 0);
	ck_assert_int_eq(lio_vt_grow(vt, "c", 1000), -ENOENT);
	ck_assert_int_eq(lio_vt_grow(vt, "b", CAP), -ENOSPC);
	ck_assert_int_eq(lio_vt_grow(vt, "b", CAP - 2148), 0);
	ck_assert_int_eq(lio_vt_grow(vt, "b", ~0ull), -ENOSPC);
	/* After b is removed, a grows into its space. */
	ck_assert_int_eq(lio_vt_remove(vt, "b"), 0);
	ck_assert_int_eq(lio_vt_grow(vt, "a", 5000), 0);
}
END_TEST

START_TEST(test_names)
{
	static const char *ok[] = {
	    "a", "ssd0", "A-b_c.d", "..a", ".x", "a..", "0123456789012345678901234567890"};
	static const char *bad[] = {"",
				    ".",
				    "..",
				    "a b",
				    "a/b",
				    "a\\b",
				    "\xc3\xa9",
				    "a\n",
				    "a:b",
				    "*",
				    "01234567890123456789012345678901"};
	unsigned i;

	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		ck_assert_msg(lio_name_valid(ok[i]), "%s", ok[i]);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(!lio_name_valid(bad[i]), "%s", bad[i]);
	ck_assert_int_eq(lio_vt_find(vt, "a"), -ENOENT);
	ck_assert_int_eq(lio_vt_alloc(vt, "a", 1, 0, 0), 0);
	ck_assert_int_eq(lio_vt_find(vt, "a"), 0);
	ck_assert_int_eq(lio_vt_find(vt, "A"), -ENOENT);
	ck_assert_int_eq(lio_vt_find(vt, "ab"), -ENOENT);
}
END_TEST

static Suite *vt_suite(void)
{
	Suite *s = suite_create("voltable");
	TCase *t = tcase_create("voltable");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, test_crc32c);
	tcase_add_test(t, test_layout);
	tcase_add_test(t, test_round_trip);
	tcase_add_test(t, test_decode_rejects);
	tcase_add_test(t, test_load_newest);
	tcase_add_test(t, test_load_corrupt_copy);
	tcase_add_test(t, test_torn_write);
	tcase_add_test(t, test_load_foreign_parity);
	tcase_add_test(t, test_alloc);
	tcase_add_test(t, test_grow);
	tcase_add_test(t, test_names);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return testutil_run_suite(vt_suite());
}
