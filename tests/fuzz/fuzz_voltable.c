/* libFuzzer target for the volume table (host-kmod/common/voltable.c): random bytes as the two
 * on-disk copies through decode and load, then allocator operations on whatever loaded.
 *
 * Input: [0] mode (bit 0: reseal copy A's crc so the semantic checks are reached; bit 1: the
 * same for B); [1, 17) four operation words; then copy A's bytes, and from the input's middle on
 * copy B's (each zero-padded to a whole copy). A table that loads must survive every operation
 * still valid: encode, decode and compare.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lightiov/voltable.h"

static uint8_t copy[2][LIO_VT_COPY_BYTES], buf[LIO_VT_COPY_BYTES];
static struct lio_vt vt, again, chosen;

static void reseal(uint8_t *b)
{
	uint32_t n, crc;

	memcpy(&n, b + 28, 4);
	if (n > LIO_MAX_VOLUMES)
		return;
	memset(b + 12, 0, 4);
	crc = lio_crc32c(0, b, 4096 + (size_t)n * 64);
	memcpy(b + 12, &crc, 4);
}

static bool same(const struct lio_vt *a, const struct lio_vt *b)
{
	unsigned i;

	if (a->generation != b->generation || a->lba_shift != b->lba_shift ||
	    a->capacity_lbas != b->capacity_lbas || a->data_start_lba != b->data_start_lba ||
	    strcmp(a->ssd_name, b->ssd_name) || a->n != b->n)
		return false;
	for (i = 0; i < a->n; i++)
		if (strcmp(a->e[i].name, b->e[i].name) || a->e[i].lba_start != b->e[i].lba_start ||
		    a->e[i].lba_count != b->e[i].lba_count || a->e[i].flags != b->e[i].flags ||
		    a->e[i].ctime != b->e[i].ctime || a->e[i].owner != b->e[i].owner)
			return false;
	return true;
}

/* What a valid table promises: entries in the data area, disjoint; it encodes to a copy that
 * decodes to itself. */
static void assert_valid(const struct lio_vt *t)
{
	unsigned i, j;

	for (i = 0; i < t->n; i++) {
		const struct lio_vt_entry *e = &t->e[i];

		if (!lio_name_valid(e->name) || !e->lba_count || e->lba_start < t->data_start_lba ||
		    e->lba_start > t->capacity_lbas ||
		    e->lba_count > t->capacity_lbas - e->lba_start)
			abort();
		for (j = 0; j < i; j++)
			if (e->lba_start < t->e[j].lba_start + t->e[j].lba_count &&
			    t->e[j].lba_start < e->lba_start + e->lba_count)
				abort();
	}
	lio_vt_encode(t, buf);
	if (lio_vt_decode(buf, &again) || !same(t, &again))
		abort();
}

static void operate(const uint8_t *w)
{
	char name[LIO_NAME_MAX];
	unsigned i;

	for (i = 0; i < 4; i++) {
		uint32_t op = w[i * 4] | w[i * 4 + 1] << 8 | w[i * 4 + 2] << 16 |
			      (uint32_t)w[i * 4 + 3] << 24;
		uint64_t count = (op >> 3) & 0xffff, start, before;
		int r;

		snprintf(name, sizeof(name), "v%u", (op >> 19) & 0xf);
		if (vt.n && (op & 0x80000000u))
			memcpy(name, vt.e[(op >> 19) % vt.n].name, sizeof(name));
		if (op & 0x40000000u)
			count <<= 20; /* large enough to hit the device's end */
		switch (op & 7) {
		case 0:
		case 1:
			r = lio_vt_alloc(&vt, name, count, (op >> 23) & 1, op);
			if (r >= 0 && (vt.e[r].lba_count != count || lio_vt_find(&vt, name) != r))
				abort();
			break;
		case 2:
			r = lio_vt_find(&vt, name);
			if (lio_vt_remove(&vt, name) != (r < 0 ? r : 0) ||
			    lio_vt_find(&vt, name) >= 0)
				abort();
			break;
		case 3:
			r = lio_vt_find(&vt, name);
			before = r >= 0 ? vt.e[r].lba_count : 0;
			if (lio_vt_grow(&vt, name, before + count) && r >= 0 &&
			    vt.e[r].lba_count != before)
				abort(); /* a refused grow changes nothing */
			break;
		case 4:
			if (count && lio_vt_find_free(&vt, count, &start) == 0 &&
			    count > lio_vt_free_lbas(&vt))
				abort();
			if (lio_vt_free_lbas(&vt) &&
			    lio_vt_find_free(&vt, lio_vt_free_lbas(&vt), &start))
				abort();
			break;
		default:
			lio_vt_write_prep(&vt, buf);
			break;
		}
		assert_valid(&vt);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t ops[24] = {0}, mode = size ? data[0] : 0;
	size_t body = size > 17 ? size - 17 : 0, half = body / 2, la, lb;
	int which, r;

	memcpy(ops, data + (size ? 1 : 0), size > 17 ? 16 : (size ? size - 1 : 0));
	la = half < LIO_VT_COPY_BYTES ? half : LIO_VT_COPY_BYTES;
	lb = body - half < LIO_VT_COPY_BYTES ? body - half : LIO_VT_COPY_BYTES;
	memset(copy, 0, sizeof(copy));
	if (la)
		memcpy(copy[0], data + 17, la);
	if (lb)
		memcpy(copy[1], data + 17 + half, lb);
	if (mode & 1)
		reseal(copy[0]);
	if (mode & 2)
		reseal(copy[1]);

	r = lio_vt_decode(copy[0], &vt);
	if (r == 0) {
		assert_valid(&vt);
		operate(ops);
	}
	r = lio_vt_load(copy[0], copy[1], &vt, &which);
	if (r == 0) {
		if ((which != 0 && which != 1) || lio_vt_decode(copy[which], &chosen))
			abort();
		/* The other copy, if valid, is not newer. */
		if (lio_vt_decode(copy[1 - which], &again) == 0 &&
		    again.generation > chosen.generation)
			abort();
		if (lio_vt_next_slot(&vt) == (unsigned)which)
			abort(); /* the next write must spare the copy that loaded */
		assert_valid(&vt);
		operate(ops + 8);
	} else if (r != -ENOENT && r != -EINVAL) {
		abort();
	}
	return 0;
}
