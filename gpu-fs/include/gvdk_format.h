/* GVDK on-disk format: the header and two-level block map embedded at the start of a gpu-fs file.
 * Shared by the host tool (C), libgemini's host side and the CUDA device code; little-endian. */
#ifndef GVDK_FORMAT_H
#define GVDK_FORMAT_H

#include <stdint.h>

#define GVDK_MAGIC	   0x31544d464b445647ULL /* "GVDKFMT1" read as a little-endian u64 */
#define GVDK_VERSION	   1u
#define GVDK_HEADER_SIZE   512u /* the header owns the first 512 bytes; the L1 table follows */
#define GVDK_MIN_BLOCK	   4096u
#define GVDK_MAX_BLOCK	   (1u << 20)
#define GVDK_ENTRY_INVALID UINT64_MAX /* unused tail entries of the last L2 table */
#define GVDK_LBA_SIZE	   512u	      /* device offsets are multiples of this at least */

/*
 * File layout (all offsets are file offsets):
 *   [0, 512)                    struct gvdk_header
 *   [l1_offset, +8*l2_tables)   L1: file offset of each L2 table
 *   [l2_offset, +bs*l2_tables)  L2 tables: one 8-byte device byte offset per data block
 *   [data_offset, file_size)    data blocks, nblocks * block_size bytes
 * A logical block b lives at L2[L1[b / per_l2]][b % per_l2], per_l2 = block_size / 8.
 */
struct gvdk_header {
	uint64_t magic;
	uint32_t version;
	uint32_t header_size;
	uint32_t block_size;
	uint32_t flags;
	uint64_t file_size;   /* exact st_size of the file */
	uint64_t data_offset; /* file offset of data block 0, block aligned */
	uint64_t data_size;   /* usable bytes: nblocks * block_size */
	uint64_t nblocks;
	uint64_t l1_offset;
	uint64_t l2_offset;
	uint32_t l2_tables; /* == number of L1 entries */
	uint32_t per_l2;    /* entries per L2 table: block_size / 8 */
	uint32_t dev_major; /* device of the file system the map refers to */
	uint32_t dev_minor;
	uint64_t part_start; /* byte offset of that partition on its disk (sysfs start * 512) */
	uint64_t ino;	     /* inode the map was built for: a copy is a different file */
	uint64_t created;    /* unix seconds, informational */
	uint32_t map_crc;    /* crc32c of L1 followed by every L2 table */
	uint32_t header_crc; /* crc32c of the header with this field zero */
	uint8_t reserved[GVDK_HEADER_SIZE - 120];
};

#ifdef __cplusplus
static_assert(sizeof(struct gvdk_header) == GVDK_HEADER_SIZE, "gvdk header is 512 bytes");
#else
_Static_assert(sizeof(struct gvdk_header) == GVDK_HEADER_SIZE, "gvdk header is 512 bytes");
#endif

#endif
