/* Guest memory as devices see it: one or more host mappings of guest-physical ranges.
 * Devices reach guest RAM only through gmem_ptr(), which refuses anything outside RAM. */
#ifndef LVMM_GUEST_MEM_H
#define LVMM_GUEST_MEM_H

#include <stddef.h>
#include <stdint.h>

#define GMEM_MAX_SLOTS 4

struct gmem_slot {
	uint64_t gpa;	 /* guest-physical start */
	uint64_t size;	 /* bytes */
	uint8_t *host;	 /* host virtual address of gpa */
	uint64_t fd_off; /* offset of this slot in the memfd */
};

struct guest_mem {
	int memfd;     /* -1 when the memory is a plain buffer (tests) */
	uint64_t size; /* total RAM bytes */
	unsigned nslots;
	struct gmem_slot slots[GMEM_MAX_SLOTS];
};

/* Host pointer for [gpa, gpa+len) when the whole range lies in one RAM slot, else NULL.
 * len 0 is allowed (returns the pointer for gpa if gpa is inside RAM). Overflow-safe. */
void *gmem_ptr(const struct guest_mem *gm, uint64_t gpa, uint64_t len);

/* Copies with the same checks; return 0 or -EFAULT. Ranges may span slots. */
int gmem_read(const struct guest_mem *gm, uint64_t gpa, void *dst, uint64_t len);
int gmem_write(const struct guest_mem *gm, uint64_t gpa, const void *src, uint64_t len);

/* Faults in every page of [host, host+len) for writing, so that lvmm (and its memory cgroup)
 * holds them before a backend that maps the same memfd could be the first to touch one:
 * MADV_POPULATE_WRITE, or a write to each page where the kernel lacks it (before 5.14).
 * Contents are kept. 0 or a negative errno (-ENOMEM when the pages cannot be had). */
int gmem_populate(void *host, uint64_t len);

/* Tests and tools: wraps a plain buffer as guest RAM starting at GPA 0. */
void gmem_init_buffer(struct guest_mem *gm, void *buf, uint64_t size);

#endif
