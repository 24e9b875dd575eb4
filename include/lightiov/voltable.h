/* The volume table: named LBA windows of one SSD, kept on the backing itself (first 1 MiB) in
 * two copies so that a crash at any point of an update leaves one valid. softssd and lightiov.ko.
 *
 * On disk: copy A at byte 0, copy B at byte 512 KiB. A copy is a 4 KiB header followed by
 * LIO_MAX_VOLUMES entries of 64 bytes, all little-endian. The header's crc32c covers the header
 * (crc field taken as zero) and the nr_entries used entries; the rest of the copy is zero.
 *
 * Update protocol (the writer's, not this codec's): change the table in memory, then
 * lio_vt_write_prep (slot = lio_vt_next_slot, bump generation, lio_vt_encode), write the whole
 * copy at LIO_VT_COPY_OFF(slot) and flush. The slot written never holds the newest valid
 * generation, so a torn write leaves that one intact and lio_vt_load picks it up on the next start.
 *
 * No libc: the kernel module compiles voltable.c as well.
 */
#ifndef LIGHTIOV_VOLTABLE_H
#define LIGHTIOV_VOLTABLE_H

#ifdef __KERNEL__
#include <linux/types.h>
#else
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#endif

#include "lightiov/uapi.h"

#define LIO_VT_MAGIC	      0x314c4254564f494cull /* the bytes "LIOVTBL1" on disk */
#define LIO_VT_VERSION	      1u
#define LIO_VT_HDR_BYTES      4096u
#define LIO_VT_ENTRY_BYTES    64u
#define LIO_VT_RESERVED_BYTES (1u << 20)
#define LIO_VT_COPY_BYTES     (LIO_VT_HDR_BYTES + LIO_MAX_VOLUMES * LIO_VT_ENTRY_BYTES)
#define LIO_VT_COPY_OFF(i)    ((i) ? (512u << 10) : 0)

_Static_assert(LIO_VT_COPY_BYTES <= (512u << 10), "a copy fits its half of the reserved area");

/* The encoded forms (what lies on the disk), little-endian. */
struct lio_vt_disk_hdr {
	uint64_t magic;		 /* LIO_VT_MAGIC */
	uint32_t version;	 /* LIO_VT_VERSION */
	uint32_t crc;		 /* crc32c of header (this field 0) + used entries */
	uint64_t generation;	 /* newer copy wins */
	uint32_t lba_shift;	 /* 9 or 12 */
	uint32_t nr_entries;	 /* used entries, 0..LIO_MAX_VOLUMES */
	uint64_t capacity_lbas;	 /* whole device */
	uint64_t data_start_lba; /* first LBA volumes may use (after the reserved area) */
	char ssd_name[LIO_NAME_MAX];
	uint8_t rsvd[LIO_VT_HDR_BYTES - 80];
};
_Static_assert(sizeof(struct lio_vt_disk_hdr) == LIO_VT_HDR_BYTES, "volume table header");

struct lio_vt_disk_entry {
	char name[LIO_NAME_MAX];
	uint64_t lba_start;
	uint64_t lba_count;
	uint32_t flags; /* LIO_VOL_* */
	uint32_t ctime; /* creation time, seconds since the epoch (UTC) */
	uint64_t owner; /* anonymous volumes: the creator's tag (a restarted daemon reclaims);
			 * named volumes: LIO_VT_OWNER_UID | uid of their creator, or 0 (root's) */
};
_Static_assert(sizeof(struct lio_vt_disk_entry) == LIO_VT_ENTRY_BYTES, "volume table entry");

/* A named volume's owner: bit 32 says a uid is recorded in the low 32 bits. Tables written before
 * owners were recorded hold 0 there, which every reader takes as root's: the format (version 1)
 * is unchanged, and older readers ignore the field for named volumes. */
#define LIO_VT_OWNER_UID     (1ull << 32)
#define LIO_VT_OWNER_OF(uid) (LIO_VT_OWNER_UID | (uint32_t)(uid))

/* Decoded forms. */
struct lio_vt_entry {
	char name[LIO_NAME_MAX]; /* NUL-terminated */
	uint64_t lba_start;
	uint64_t lba_count;
	uint32_t flags;
	uint32_t ctime;
	uint64_t owner;
};

/* About 70 KiB: allocate it (kvmalloc in the kernel), never on a stack. */
struct lio_vt {
	uint64_t generation;
	uint32_t lba_shift;
	uint64_t capacity_lbas;
	uint64_t data_start_lba;
	char ssd_name[LIO_NAME_MAX];
	struct lio_vt_entry e[LIO_MAX_VOLUMES]; /* e[0..n), sorted by nothing: index is stable
						 * until a remove (which moves the last one in) */
	unsigned n;
};

/* A fresh, empty table (generation 0: the first write makes it 1). capacity_lbas is the whole
 * device; the data area starts after LIO_VT_RESERVED_BYTES. */
void lio_vt_init(struct lio_vt *vt, const char *ssd_name, uint64_t capacity_lbas,
		 uint32_t lba_shift);

/* Writes one whole copy (LIO_VT_COPY_BYTES) to buf. */
void lio_vt_encode(const struct lio_vt *vt, void *buf);

/* Decodes one copy. 0, or -EINVAL for a bad magic, version, crc, geometry, entry outside the
 * data area, overlapping entries, invalid or duplicate names. */
int lio_vt_decode(const void *buf, struct lio_vt *vt);

/* Picks the valid copy with the newest generation (*which = 0 for A, 1 for B; which may be NULL).
 * -ENOENT when neither copy carries the magic (never formatted); -EINVAL when something is there
 * but no copy is valid. A copy found in the slot of the other parity (not written by this
 * protocol) loads with its generation raised by one, so the next write still spares it. */
int lio_vt_load(const void *copy_a, const void *copy_b, struct lio_vt *vt, int *which);

/* The copy the next write goes to: the one NOT holding the newest generation. Call it before
 * bumping the generation (or use lio_vt_write_prep, which does the three steps in order).
 * Generation g lives in slot g & 1: lio_vt_init starts at 0, so the first write (generation 1)
 * goes to B and never touches A; lio_vt_load keeps that rule true for tables it reads. */
unsigned lio_vt_next_slot(const struct lio_vt *vt);

/* The writer's first half: picks the slot, bumps the generation, encodes the copy into buf
 * (LIO_VT_COPY_BYTES). Returns the slot; the caller writes buf at LIO_VT_COPY_OFF(slot) and
 * flushes before telling anyone the change is done. */
unsigned lio_vt_write_prep(struct lio_vt *vt, void *buf);

/* [A-Za-z0-9._-], 1..LIO_NAME_MAX-1 bytes, not "." or "..". */
bool lio_name_valid(const char *name);

/* Index of the volume named name, or -ENOENT. */
int lio_vt_find(const struct lio_vt *vt, const char *name);

/* Adds a volume at the first free extent of the data area that fits (ctime 0: the caller sets
 * e[i].ctime). Returns its index, or -EINVAL (name, zero size), -EEXIST, -EMFILE (table full),
 * -ENOSPC (no extent large enough). */
int lio_vt_alloc(struct lio_vt *vt, const char *name, uint64_t lba_count, uint32_t flags,
		 uint64_t owner);

/* Removes a volume (the last entry takes its index). 0 or -ENOENT. */
int lio_vt_remove(struct lio_vt *vt, const char *name);

/* Grows a volume in place. 0, -ENOENT, -EINVAL (shrink or zero), -ENOSPC when the LBAs after it
 * are not free (nothing changed: the caller may move the data to lio_vt_find_free's extent). */
int lio_vt_grow(struct lio_vt *vt, const char *name, uint64_t new_lba_count);

/* First free extent of at least count LBAs: 0 with *lba_start set, -ENOSPC, or -EINVAL for 0. */
int lio_vt_find_free(const struct lio_vt *vt, uint64_t count, uint64_t *lba_start);

/* The largest free extent, in LBAs. */
uint64_t lio_vt_free_lbas(const struct lio_vt *vt);

/* CRC-32C (Castagnoli), reflected, as iSCSI and ext4 use it: pass crc 0 to start; the pre- and
 * post-inversion are done inside, so calls chain: crc32c(crc32c(0, a), b) == crc32c(0, a b). */
uint32_t lio_crc32c(uint32_t crc, const void *buf, size_t len);

#endif
