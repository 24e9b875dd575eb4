/* The SQE checker and its PRP walker (include/lightiov/check.h): the one place that decides
 * whether an NVM command stays inside its LBA window and DMA window. No libc: lightiov.ko too.
 *
 * Statuses chosen where the specification leaves room:
 * - a data page, PRP list or range list outside the DMA window: Data Transfer Error (generic
 *   0x04) with DNR. Linux reports it as an I/O error and does not retry; nothing in the guest's
 *   reach could make the same pointers valid on a retry.
 * - a zero PRP1, or a zero PRP2 / list entry where the transfer needs one: Invalid Field. GPA 0
 *   is never a DMA target of a sane driver; a zero there is a missing pointer.
 * - PRP2 as a list pointer may carry a qword-aligned offset (Linux allocates short lists from a
 *   256-byte pool); data pointers after PRP1 and chain pointers must be page aligned.
 * - a chain pointer to the list page it sits in: Invalid Field (the walk is bounded anyway: each
 *   list page must yield at least one data entry and the data entries are bounded by MDTS).
 * The caller's read_prp failing for an in-window address is Data Transfer Error without DNR.
 */
#include "lightiov/check.h"

#define LIO_NSID_ALL  0xffffffffu
#define LIO_PAGE_MASK ((uint64_t)LIO_PAGE_SIZE - 1)

static inline uint16_t st_generic(uint8_t sc)
{
	return NVME_STATUS(NVME_SCT_GENERIC, sc) | NVME_STATUS_DNR;
}

bool lio_window_contains(const struct lio_check_ctx *ctx, uint64_t gpa, uint64_t len)
{
	unsigned i;

	if (!len || gpa + len < gpa)
		return false;
	for (i = 0; i < ctx->nr_regions; i++) {
		const struct lio_check_region *r = &ctx->regions[i];

		if (gpa >= r->gpa && gpa - r->gpa < r->size && len <= r->size - (gpa - r->gpa))
			return true;
	}
	return false;
}

/* Appends [gpa, gpa + len) after checking it lies in the window; merges it into the previous
 * segment when it continues it inside the same region (fewer iovecs for the backend). */
static uint16_t seg_add(const struct lio_check_ctx *ctx, uint64_t gpa, uint32_t len,
			struct lio_seg *segs, unsigned max, unsigned *n)
{
	if (!lio_window_contains(ctx, gpa, len))
		return st_generic(NVME_SC_DATA_XFER_ERROR);
	if (*n) {
		struct lio_seg *last = &segs[*n - 1];

		if (last->gpa + last->len == gpa &&
		    lio_window_contains(ctx, last->gpa, (uint64_t)last->len + len)) {
			last->len += len;
			return 0;
		}
	}
	if (*n >= max)
		return st_generic(NVME_SC_INVALID_FIELD);
	segs[*n].gpa = gpa;
	segs[*n].len = len;
	segs[*n].rsvd = 0;
	(*n)++;
	return 0;
}

/* Data entries of a PRP list, starting at list (qword aligned). Each list page holds entries up to
 * its end; when more are needed than it holds, its last entry chains to the next list page. */
static uint16_t prp_list_walk(const struct lio_check_ctx *ctx, uint64_t list, uint64_t rem,
			      struct lio_seg *segs, unsigned max, unsigned *n)
{
	uint64_t ent[LIO_MDTS_BYTES / LIO_PAGE_SIZE]; /* rem <= MDTS: never more entries a pass */
	uint64_t need = (rem + LIO_PAGE_MASK) / LIO_PAGE_SIZE; /* data entries still to come */

	/* Every pass consumes at least one data entry, so at most need passes. */
	while (rem) {
		uint64_t room = (LIO_PAGE_SIZE - (list & LIO_PAGE_MASK)) / 8;
		bool chain = need > room;
		uint64_t nread = chain ? room : need, ndata = chain ? room - 1 : need, i;
		uint16_t st;

		if (chain && ndata == 0) /* a list page holding nothing but the chain entry */
			return st_generic(NVME_SC_INVALID_PRP_OFFSET);
		if (!lio_window_contains(ctx, list, nread * 8))
			return st_generic(NVME_SC_DATA_XFER_ERROR);
		if (ctx->read_prp(ctx->opaque, list, ent, (unsigned)nread))
			return NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_DATA_XFER_ERROR);
		for (i = 0; i < ndata; i++) {
			uint32_t len = rem < LIO_PAGE_SIZE ? (uint32_t)rem : LIO_PAGE_SIZE;

			if (!ent[i])
				return st_generic(NVME_SC_INVALID_FIELD);
			if (ent[i] & LIO_PAGE_MASK)
				return st_generic(NVME_SC_INVALID_PRP_OFFSET);
			st = seg_add(ctx, ent[i], len, segs, max, n);
			if (st)
				return st;
			rem -= len;
		}
		need -= ndata;
		if (!chain)
			break;
		/* ent[ndata] is the pointer to the next list page. */
		if (!ent[ndata])
			return st_generic(NVME_SC_INVALID_FIELD);
		if (ent[ndata] & LIO_PAGE_MASK)
			return st_generic(NVME_SC_INVALID_PRP_OFFSET);
		if ((ent[ndata] & ~LIO_PAGE_MASK) == (list & ~LIO_PAGE_MASK))
			return st_generic(NVME_SC_INVALID_FIELD);
		list = ent[ndata];
	}
	return 0;
}

uint16_t lio_prp_walk(const struct lio_check_ctx *ctx, uint64_t prp1, uint64_t prp2, uint64_t len,
		      struct lio_seg *segs, unsigned max, unsigned *nsegs)
{
	uint64_t first, rem;
	uint16_t st;

	*nsegs = 0;
	if (!len)
		return 0;
	if (len > LIO_MDTS_BYTES)
		return st_generic(NVME_SC_INVALID_FIELD);
	if (prp1 & 3)
		return st_generic(NVME_SC_INVALID_PRP_OFFSET);
	if (!prp1)
		return st_generic(NVME_SC_INVALID_FIELD);
	first = LIO_PAGE_SIZE - (prp1 & LIO_PAGE_MASK);
	if (first > len)
		first = len;
	st = seg_add(ctx, prp1, (uint32_t)first, segs, max, nsegs);
	rem = len - first;
	if (st || !rem)
		return st;
	if (!prp2)
		return st_generic(NVME_SC_INVALID_FIELD);
	if (rem <= LIO_PAGE_SIZE) {
		if (prp2 & LIO_PAGE_MASK)
			return st_generic(NVME_SC_INVALID_PRP_OFFSET);
		return seg_add(ctx, prp2, (uint32_t)rem, segs, max, nsegs);
	}
	if (prp2 & 7)
		return st_generic(NVME_SC_INVALID_PRP_OFFSET);
	return prp_list_walk(ctx, prp2, rem, segs, max, nsegs);
}

/* [slba, slba + nlb) against the LBA window; sets *dev to the absolute first LBA. */
static bool lba_window(const struct lio_check_ctx *ctx, uint64_t slba, uint64_t nlb, uint64_t *dev)
{
	uint64_t rel;

	if (ctx->flags & LIO_CHECK_TRANSLATE) {
		rel = slba;
	} else {
		if (slba < ctx->lba_start)
			return false;
		rel = slba - ctx->lba_start;
	}
	if (rel >= ctx->lba_count || nlb > ctx->lba_count - rel)
		return false;
	if (ctx->lba_start + rel < rel) /* a window past 2^64: refuse rather than wrap */
		return false;
	*dev = ctx->lba_start + rel;
	return true;
}

uint16_t lio_sqe_check(const struct lio_check_ctx *ctx, const struct nvme_sqe *sqe,
		       struct lio_io *io)
{
	uint64_t slba = (uint64_t)sqe->cdw11 << 32 | sqe->cdw10;
	uint64_t nlb = (uint64_t)(sqe->cdw12 & 0xffff) + 1;
	uint64_t mdts = ctx->mdts_bytes < LIO_MDTS_BYTES ? ctx->mdts_bytes : LIO_MDTS_BYTES;
	bool has_data;
	uint16_t st;

	io->cid = sqe->cid;
	io->fua = false;
	io->dev_lba = 0;
	io->nlb = 0;
	io->bytes = 0;
	io->dsm_attr = 0;
	io->nsegs = 0;

	switch (sqe->opcode) {
	case NVME_CMD_READ:
		io->kind = LIO_IO_READ;
		break;
	case NVME_CMD_WRITE:
		io->kind = LIO_IO_WRITE;
		break;
	case NVME_CMD_FLUSH:
		io->kind = LIO_IO_FLUSH;
		break;
	case NVME_CMD_WRITE_ZEROES:
		io->kind = LIO_IO_ZEROES;
		break;
	case NVME_CMD_DSM:
		io->kind = LIO_IO_DSM;
		break;
	default:
		return st_generic(NVME_SC_INVALID_OPCODE);
	}
	if (NVME_SQE_FUSE(sqe->flags))
		return st_generic(NVME_SC_INVALID_FIELD);
	if (NVME_SQE_PSDT(sqe->flags)) /* SGLs are not offered (Identify SGLS = 0) */
		return st_generic(NVME_SC_INVALID_FIELD);
	if (sqe->nsid != ctx->nsid && !(io->kind == LIO_IO_FLUSH && sqe->nsid == LIO_NSID_ALL))
		return st_generic(NVME_SC_INVALID_NS);
	if (io->kind == LIO_IO_FLUSH)
		return 0;

	if (io->kind == LIO_IO_DSM) {
		io->nlb = 0;
		io->bytes = ((uint64_t)(sqe->cdw10 & 0xff) + 1) * sizeof(struct nvme_dsm_range);
		io->dsm_attr = sqe->cdw11;
		has_data = true;
	} else {
		if (!lba_window(ctx, slba, nlb, &io->dev_lba))
			return st_generic(NVME_SC_LBA_RANGE);
		io->nlb = (uint32_t)nlb;
		io->bytes = nlb << ctx->lba_shift;
		/* Write Zeroes moves no data: MDTS does not apply, there are no PRPs to walk. */
		has_data = io->kind != LIO_IO_ZEROES;
		if (has_data) {
			io->fua = sqe->cdw12 & NVME_RW_FUA;
			if (io->bytes > mdts)
				return st_generic(NVME_SC_INVALID_FIELD);
		}
	}
	if (has_data) {
		st = lio_prp_walk(ctx, sqe->prp1, sqe->prp2, io->bytes, io->segs,
				  LIO_CHECK_MAX_SEGS, &io->nsegs);
		if (st)
			return st;
	}
	if ((ctx->flags & LIO_CHECK_READONLY) &&
	    (io->kind == LIO_IO_WRITE || io->kind == LIO_IO_ZEROES ||
	     (io->kind == LIO_IO_DSM && (io->dsm_attr & NVME_DSM_AD))))
		return NVME_STATUS(NVME_SCT_CMD_SPECIFIC, NVME_SC_ATTEMPTED_WRITE_RO) |
		       NVME_STATUS_DNR;
	return 0;
}

uint16_t lio_dsm_check(const struct lio_check_ctx *ctx, struct nvme_dsm_range *ranges, unsigned nr)
{
	uint64_t dev;
	unsigned i;

	if (nr == 0 || nr > 256)
		return st_generic(NVME_SC_INVALID_FIELD);
	for (i = 0; i < nr; i++) {
		if (!ranges[i].nlb)
			continue; /* nothing to deallocate; left as the guest wrote it */
		if (!lba_window(ctx, ranges[i].slba, ranges[i].nlb, &dev))
			return st_generic(NVME_SC_LBA_RANGE);
		ranges[i].slba = dev;
	}
	return 0;
}
