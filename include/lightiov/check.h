/* The SQE checker: one pure C function (and its PRP walker) that decides whether an NVM I/O
 * command may run inside a VM's LBA window and DMA window. Shared, unchanged, by lvmm's emulate
 * path, softssd and lightiov.ko (no libc: the kernel compiles host-kmod/common/check.c too).
 *
 * The caller copies the SQE out of guest reach before calling (a guest can rewrite its SQ at any
 * time); the checker then reads only that private copy and, for PRP lists, the entries it fetches
 * once through read_prp (each list entry is read exactly once and used as read).
 */
#ifndef LIGHTIOV_CHECK_H
#define LIGHTIOV_CHECK_H

#ifdef __KERNEL__
#include <linux/types.h>
#else
#include <stdbool.h>
#include <stdint.h>
#endif

#include "lightiov/nvme.h"
#include "lightiov/uapi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Segments of one command: MDTS / page + 1 (an unaligned first page). */
#define LIO_CHECK_MAX_SEGS ((LIO_MDTS_BYTES / LIO_PAGE_SIZE) + 1)

struct lio_check_region {
	uint64_t gpa;
	uint64_t size;
};

struct lio_check_ctx {
	const struct lio_check_region *regions; /* the DMA window */
	unsigned nr_regions;
	uint64_t lba_start; /* the LBA window on the device */
	uint64_t lba_count;
	uint32_t lba_shift;  /* 9 or 12 */
	uint32_t nsid;	     /* the one valid namespace id (1) */
	uint32_t mdts_bytes; /* largest transfer (<= LIO_MDTS_BYTES) */
	uint32_t flags;	     /* LIO_CHECK_* */
	/* Reads n PRP-list entries at gpa (already checked to lie inside the DMA window and one
	 * page; n <= LIO_MDTS_BYTES / LIO_PAGE_SIZE) into out, converted from little-endian to host
	 * order. Returns 0, or non-zero when they cannot be read. */
	int (*read_prp)(void *opaque, uint64_t gpa, uint64_t *out, unsigned n);
	void *opaque;
};
#define LIO_CHECK_TRANSLATE                                                                        \
	(1u << 0) /* SLBA is window-relative: add lba_start (isolated, emulate) */
#define LIO_CHECK_READONLY (1u << 1) /* writes, write zeroes and deallocate are refused */

enum lio_io_kind { LIO_IO_READ, LIO_IO_WRITE, LIO_IO_FLUSH, LIO_IO_ZEROES, LIO_IO_DSM };

struct lio_seg {
	uint64_t gpa;
	uint32_t len;
	uint32_t rsvd;
};

/* A command that passed the check: everything the backend needs, nothing read from the guest. */
struct lio_io {
	enum lio_io_kind kind;
	uint16_t cid;
	bool fua;
	uint64_t
	    dev_lba;	/* absolute LBA on the device (lba_start already added when translating) */
	uint32_t nlb;	/* LBAs, 1-based */
	uint64_t bytes; /* nlb << lba_shift (READ, WRITE: data in segs; ZEROES: no segs);
			 * DSM: range-list bytes */
	uint32_t dsm_attr; /* DSM: CDW11 attributes; the range list is in segs */
	unsigned nsegs;
	struct lio_seg segs[LIO_CHECK_MAX_SEGS];
};

/* Checks one I/O command. Returns 0 with io filled, or the NVMe status (NVME_STATUS(sct, sc),
 * with NVME_STATUS_DNR where retrying cannot help) the specification names for the first
 * problem found: opcode, fused operation, SGL (PSDT), NSID, LBA range, transfer size, PRP offset,
 * data or PRP-list address outside the DMA window, read-only window. */
uint16_t lio_sqe_check(const struct lio_check_ctx *ctx, const struct nvme_sqe *sqe,
		       struct lio_io *io);

/* Checks the ranges of a DSM command (read by the caller from io->segs into ranges, host byte
 * order; nr = io->bytes / 16, 1..256): each must lie inside the LBA window; translates them to
 * device LBAs in place. Ranges of 0 LBAs are left as they are (the backend skips them). Returns 0
 * or a status. */
uint16_t lio_dsm_check(const struct lio_check_ctx *ctx, struct nvme_dsm_range *ranges, unsigned nr);

/* The PRP walker alone, for commands other than NVM I/O (admin data buffers): maps len bytes
 * (<= LIO_MDTS_BYTES) described by prp1/prp2 to at most max segments inside the DMA window, with
 * the checks and statuses of lio_sqe_check. Returns 0 with *nsegs set, or an NVMe status. */
uint16_t lio_prp_walk(const struct lio_check_ctx *ctx, uint64_t prp1, uint64_t prp2, uint64_t len,
		      struct lio_seg *segs, unsigned max, unsigned *nsegs);

/* True when [gpa, gpa + len) lies inside one region of the DMA window (len > 0, no wrap). */
bool lio_window_contains(const struct lio_check_ctx *ctx, uint64_t gpa, uint64_t len);

#ifdef __cplusplus
}
#endif

#endif
