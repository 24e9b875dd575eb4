/* The volume table's codec and allocator (include/lightiov/voltable.h): encode, validate and load
 * the two on-disk copies, first-fit extents in the data area. No libc: lightiov.ko too.
 */
#ifdef __KERNEL__
#include <linux/errno.h>
#else
#include <errno.h>
#endif

#include "lightiov/voltable.h"

#define OFF(type, field) __builtin_offsetof(type, field)
#define HDR(field)	 OFF(struct lio_vt_disk_hdr, field)
#define ENT(field)	 OFF(struct lio_vt_disk_entry, field)

/* CRC-32C, reflected polynomial 0x82f63b78, four bits at a time (a 64-byte table, no setup). */
static const uint32_t crc32c_nibble[16] = {
    0x00000000, 0x105ec76f, 0x20bd8ede, 0x30e349b1, 0x417b1dbc, 0x5125dad3, 0x61c69362, 0x7198540d,
    0x82f63b78, 0x92a8fc17, 0xa24bb5a6, 0xb21572c9, 0xc38d26c4, 0xd3d3e1ab, 0xe330a81a, 0xf36e6f75,
};

uint32_t lio_crc32c(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	crc = ~crc;
	while (len--) {
		crc ^= *p++;
		crc = (crc >> 4) ^ crc32c_nibble[crc & 15];
		crc = (crc >> 4) ^ crc32c_nibble[crc & 15];
	}
	return ~crc;
}

static void put32(uint8_t *p, uint32_t v)
{
	unsigned i;

	for (i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
	unsigned i;

	for (i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

bool lio_name_valid(const char *name)
{
	unsigned i;

	for (i = 0; i < LIO_NAME_MAX && name[i]; i++) {
		char ch = name[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-'))
			return false;
	}
	if (i == 0 || i == LIO_NAME_MAX)
		return false;
	if (name[0] == '.' && (i == 1 || (i == 2 && name[1] == '.')))
		return false;
	return true;
}

/* A name field as stored: valid, NUL-terminated and zero after the NUL (so that a decoded table
 * encodes to the same bytes). */
static bool name_field_valid(const uint8_t *f)
{
	unsigned i = 0;

	if (!lio_name_valid((const char *)f))
		return false;
	while (f[i])
		i++;
	for (; i < LIO_NAME_MAX; i++)
		if (f[i])
			return false;
	return true;
}

static bool name_eq(const char *a, const char *b)
{
	unsigned i;

	for (i = 0; i < LIO_NAME_MAX; i++) {
		if (a[i] != b[i])
			return false;
		if (!a[i])
			return true;
	}
	return true;
}

/* Copies a valid name (checked by the caller) with zero padding. */
static void name_copy(char *dst, const char *src)
{
	unsigned i;

	for (i = 0; i < LIO_NAME_MAX - 1 && src[i]; i++)
		dst[i] = src[i];
	for (; i < LIO_NAME_MAX; i++)
		dst[i] = 0;
}

static bool ranges_overlap(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
	return a < b + blen && b < a + alen; /* callers keep every end below 2^64 */
}

void lio_vt_init(struct lio_vt *vt, const char *ssd_name, uint64_t capacity_lbas,
		 uint32_t lba_shift)
{
	__builtin_memset(vt, 0, sizeof(*vt));
	name_copy(vt->ssd_name, ssd_name);
	vt->lba_shift = lba_shift;
	vt->capacity_lbas = capacity_lbas;
	vt->data_start_lba = lba_shift < 32 ? LIO_VT_RESERVED_BYTES >> lba_shift : 0;
}

void lio_vt_encode(const struct lio_vt *vt, void *buf)
{
	uint8_t *b = buf, *h = b;
	unsigned i, n = vt->n <= LIO_MAX_VOLUMES ? vt->n : LIO_MAX_VOLUMES;
	uint32_t crc;

	__builtin_memset(b, 0, LIO_VT_COPY_BYTES);
	put64(h + HDR(magic), LIO_VT_MAGIC);
	put32(h + HDR(version), LIO_VT_VERSION);
	put64(h + HDR(generation), vt->generation);
	put32(h + HDR(lba_shift), vt->lba_shift);
	put32(h + HDR(nr_entries), n);
	put64(h + HDR(capacity_lbas), vt->capacity_lbas);
	put64(h + HDR(data_start_lba), vt->data_start_lba);
	name_copy((char *)h + HDR(ssd_name), vt->ssd_name);
	for (i = 0; i < n; i++) {
		uint8_t *e = b + LIO_VT_HDR_BYTES + i * LIO_VT_ENTRY_BYTES;
		const struct lio_vt_entry *v = &vt->e[i];

		name_copy((char *)e + ENT(name), v->name);
		put64(e + ENT(lba_start), v->lba_start);
		put64(e + ENT(lba_count), v->lba_count);
		put32(e + ENT(flags), v->flags);
		put32(e + ENT(ctime), v->ctime);
		put64(e + ENT(owner), v->owner);
	}
	crc = lio_crc32c(0, b, LIO_VT_HDR_BYTES + (size_t)n * LIO_VT_ENTRY_BYTES);
	put32(h + HDR(crc), crc);
}

static bool has_magic(const uint8_t *b)
{
	return get64(b + HDR(magic)) == LIO_VT_MAGIC;
}

/* Everything lio_vt_decode checks, on the encoded bytes (no decoded copy needed, so that
 * lio_vt_load can judge both copies with one struct lio_vt). */
static int vt_validate(const uint8_t *b)
{
	static const uint8_t zero_crc[4];
	uint32_t shift, n, i, j, crc;
	uint64_t cap, start;

	if (!has_magic(b) || get32(b + HDR(version)) != LIO_VT_VERSION)
		return -EINVAL;
	n = get32(b + HDR(nr_entries));
	if (n > LIO_MAX_VOLUMES)
		return -EINVAL;
	crc = lio_crc32c(0, b, HDR(crc));
	crc = lio_crc32c(crc, zero_crc, 4);
	crc = lio_crc32c(crc, b + HDR(crc) + 4,
			 LIO_VT_HDR_BYTES - HDR(crc) - 4 + (size_t)n * LIO_VT_ENTRY_BYTES);
	if (crc != get32(b + HDR(crc)))
		return -EINVAL;
	shift = get32(b + HDR(lba_shift));
	cap = get64(b + HDR(capacity_lbas));
	start = get64(b + HDR(data_start_lba));
	if ((shift != 9 && shift != 12) || start < (LIO_VT_RESERVED_BYTES >> shift) ||
	    start > cap || cap > (~0ull >> shift))
		return -EINVAL;
	if (!name_field_valid(b + HDR(ssd_name)))
		return -EINVAL;
	for (i = 0; i < n; i++) {
		const uint8_t *e = b + LIO_VT_HDR_BYTES + i * LIO_VT_ENTRY_BYTES;
		uint64_t s = get64(e + ENT(lba_start)), c = get64(e + ENT(lba_count));

		if (!name_field_valid(e + ENT(name)) || get32(e + ENT(flags)) & ~LIO_VOL_ANON)
			return -EINVAL;
		if (!c || s < start || s > cap || c > cap - s)
			return -EINVAL;
		for (j = 0; j < i; j++) {
			const uint8_t *f = b + LIO_VT_HDR_BYTES + j * LIO_VT_ENTRY_BYTES;

			if (ranges_overlap(s, c, get64(f + ENT(lba_start)),
					   get64(f + ENT(lba_count))))
				return -EINVAL;
			if (name_eq((const char *)e + ENT(name), (const char *)f + ENT(name)))
				return -EINVAL;
		}
	}
	return 0;
}

static void vt_unpack(const uint8_t *b, struct lio_vt *vt)
{
	unsigned i;

	__builtin_memset(vt, 0, sizeof(*vt));
	vt->generation = get64(b + HDR(generation));
	vt->lba_shift = get32(b + HDR(lba_shift));
	vt->capacity_lbas = get64(b + HDR(capacity_lbas));
	vt->data_start_lba = get64(b + HDR(data_start_lba));
	name_copy(vt->ssd_name, (const char *)b + HDR(ssd_name));
	vt->n = get32(b + HDR(nr_entries));
	for (i = 0; i < vt->n; i++) {
		const uint8_t *e = b + LIO_VT_HDR_BYTES + i * LIO_VT_ENTRY_BYTES;
		struct lio_vt_entry *v = &vt->e[i];

		name_copy(v->name, (const char *)e + ENT(name));
		v->lba_start = get64(e + ENT(lba_start));
		v->lba_count = get64(e + ENT(lba_count));
		v->flags = get32(e + ENT(flags));
		v->ctime = get32(e + ENT(ctime));
		v->owner = get64(e + ENT(owner));
	}
}

int lio_vt_decode(const void *buf, struct lio_vt *vt)
{
	int r = vt_validate(buf);

	if (r)
		return r;
	vt_unpack(buf, vt);
	return 0;
}

int lio_vt_load(const void *copy_a, const void *copy_b, struct lio_vt *vt, int *which)
{
	const uint8_t *c[2] = {copy_a, copy_b};
	bool ok[2];
	uint64_t gen[2];
	int pick, i;

	for (i = 0; i < 2; i++) {
		ok[i] = vt_validate(c[i]) == 0;
		gen[i] = ok[i] ? get64(c[i] + HDR(generation)) : 0;
	}
	if (!ok[0] && !ok[1])
		return has_magic(c[0]) || has_magic(c[1]) ? -EINVAL : -ENOENT;
	if (ok[0] && ok[1] && gen[0] == gen[1])
		pick = gen[0] & 1; /* a tie (never written so): keep the one in its parity slot */
	else
		pick = ok[1] && (!ok[0] || gen[1] > gen[0]);
	vt_unpack(c[pick], vt);
	/* Keep "generation g lives in slot g & 1" true so lio_vt_next_slot spares this copy. */
	if ((vt->generation & 1) != (uint64_t)pick)
		vt->generation++;
	if (which)
		*which = pick;
	return 0;
}

unsigned lio_vt_next_slot(const struct lio_vt *vt)
{
	return (unsigned)((vt->generation + 1) & 1);
}

unsigned lio_vt_write_prep(struct lio_vt *vt, void *buf)
{
	unsigned slot = lio_vt_next_slot(vt);

	vt->generation++;
	lio_vt_encode(vt, buf);
	return slot;
}

int lio_vt_find(const struct lio_vt *vt, const char *name)
{
	unsigned i;

	for (i = 0; i < vt->n; i++)
		if (name_eq(vt->e[i].name, name))
			return (int)i;
	return -ENOENT;
}

/* True when [start, start + count) is inside the data area and free of every entry but skip. */
static bool extent_free(const struct lio_vt *vt, uint64_t start, uint64_t count, int skip)
{
	unsigned i;

	if (start < vt->data_start_lba || start > vt->capacity_lbas ||
	    count > vt->capacity_lbas - start)
		return false;
	for (i = 0; i < vt->n; i++)
		if ((int)i != skip &&
		    ranges_overlap(start, count, vt->e[i].lba_start, vt->e[i].lba_count))
			return false;
	return true;
}

int lio_vt_find_free(const struct lio_vt *vt, uint64_t count, uint64_t *lba_start)
{
	uint64_t best = ~0ull;
	unsigned i;

	if (!count)
		return -EINVAL;
	/* The lowest fitting extent starts at the data area or right after some volume. */
	if (extent_free(vt, vt->data_start_lba, count, -1))
		best = vt->data_start_lba;
	for (i = 0; i < vt->n; i++) {
		uint64_t c = vt->e[i].lba_start + vt->e[i].lba_count;

		if (c < best && extent_free(vt, c, count, -1))
			best = c;
	}
	if (best == ~0ull)
		return -ENOSPC;
	*lba_start = best;
	return 0;
}

uint64_t lio_vt_free_lbas(const struct lio_vt *vt)
{
	uint64_t best = 0;
	unsigned i, j;

	/* Free extents start at the data area or after a volume and run to the next volume. */
	for (i = 0; i <= vt->n; i++) {
		uint64_t s =
		    i < vt->n ? vt->e[i].lba_start + vt->e[i].lba_count : vt->data_start_lba;
		uint64_t end = vt->capacity_lbas;

		if (s >= end)
			continue;
		for (j = 0; j < vt->n; j++) {
			const struct lio_vt_entry *e = &vt->e[j];

			if (e->lba_start <= s && s < e->lba_start + e->lba_count)
				end = s; /* s is inside a volume: no extent here */
			else if (e->lba_start > s && e->lba_start < end)
				end = e->lba_start;
		}
		if (end - s > best)
			best = end - s;
	}
	return best;
}

int lio_vt_alloc(struct lio_vt *vt, const char *name, uint64_t lba_count, uint32_t flags,
		 uint64_t owner)
{
	struct lio_vt_entry *e;
	uint64_t start;
	int r;

	if (!lio_name_valid(name) || !lba_count || (flags & ~LIO_VOL_ANON))
		return -EINVAL;
	if (lio_vt_find(vt, name) >= 0)
		return -EEXIST;
	if (vt->n >= LIO_MAX_VOLUMES)
		return -EMFILE;
	r = lio_vt_find_free(vt, lba_count, &start);
	if (r)
		return r;
	e = &vt->e[vt->n];
	__builtin_memset(e, 0, sizeof(*e));
	name_copy(e->name, name);
	e->lba_start = start;
	e->lba_count = lba_count;
	e->flags = flags;
	e->owner = owner;
	return (int)vt->n++;
}

int lio_vt_remove(struct lio_vt *vt, const char *name)
{
	int i = lio_vt_find(vt, name);

	if (i < 0)
		return i;
	vt->n--;
	if ((unsigned)i != vt->n)
		vt->e[i] = vt->e[vt->n];
	__builtin_memset(&vt->e[vt->n], 0, sizeof(vt->e[0]));
	return 0;
}

int lio_vt_grow(struct lio_vt *vt, const char *name, uint64_t new_lba_count)
{
	int i = lio_vt_find(vt, name);
	struct lio_vt_entry *e;

	if (i < 0)
		return i;
	e = &vt->e[i];
	if (new_lba_count < e->lba_count)
		return -EINVAL;
	if (new_lba_count == e->lba_count)
		return 0;
	if (!extent_free(vt, e->lba_start, new_lba_count, i))
		return -ENOSPC;
	e->lba_count = new_lba_count;
	return 0;
}
