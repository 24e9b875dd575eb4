/* libgvdk: builds, loads and checks GVDK files (header + L1/L2 block map from FIEMAP).
 * Host-only C; used by the gvdk tool, libgemini's gemini_open and the host tests. */
#ifndef GVDK_H
#define GVDK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "gvdk_format.h"

#define GVDK_ERRLEN 256

#ifdef __cplusplus
extern "C" {
#endif

/* One FIEMAP extent, in bytes. */
struct gvdk_extent {
	uint64_t logical;
	uint64_t physical;
	uint64_t length;
	uint32_t flags;
};

/* A validated, in-memory copy of a file's header and map. */
struct gvdk_map {
	struct gvdk_header hdr;
	uint64_t *l1; /* hdr.l2_tables file offsets of the L2 tables */
	uint64_t *l2; /* hdr.l2_tables * hdr.per_l2 device offsets */
};

struct gvdk_create_opts {
	uint32_t block_size; /* 0: 4 KiB */
	const char
	    *device; /* when set, the file must live on this block device (or a partition of it) */
	int force;   /* overwrite an existing file */
};

enum {
	GVDK_LOAD_SKIP_FIEMAP = 1u << 0, /* trust the map without comparing to a fresh FIEMAP */
};

uint32_t gvdk_crc32c(uint32_t crc, const void *buf, size_t len);
int gvdk_parse_size(const char *s, uint64_t *out);

/* Extents of [0, len) of fd; *out is malloc'ed. */
int gvdk_fiemap(int fd, uint64_t len, struct gvdk_extent **out, size_t *n, char *err);
/* Refuses extents a GPU may not address directly; requires [0, len) covered without holes. */
int gvdk_extents_check(const struct gvdk_extent *ext, size_t n, uint64_t len, uint32_t align,
		       char *err);
/* Byte offset of partition dev on its disk (0 for a whole disk). */
int gvdk_part_start(dev_t dev, uint64_t *start, char *err);
/* Device offset of file offset off, or -ERANGE. */
int gvdk_extents_translate(const struct gvdk_extent *ext, size_t n, uint64_t off, uint64_t *dev);

int gvdk_create(const char *path, uint64_t size, const struct gvdk_create_opts *opts, char *err);
int gvdk_load(const char *path, struct gvdk_map *m, unsigned flags, char *err);
void gvdk_map_free(struct gvdk_map *m);

static inline uint64_t gvdk_lookup(const struct gvdk_map *m, uint64_t block)
{
	uint64_t t = block / m->hdr.per_l2;
	uint64_t l2 = (m->l1[t] - m->hdr.l2_offset) / 8;

	return m->l2[l2 + block % m->hdr.per_l2];
}

#ifdef __cplusplus
}
#endif

#endif
