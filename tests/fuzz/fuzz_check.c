/* libFuzzer target for the SQE checker (host-kmod/common/check.c): an SQE, a DMA window, an LBA
 * window and guest memory all from the input; every accepted command must stay inside both.
 *
 * Input: [0, 64) the SQE; [64] flags (bit 0 translate, 1 read-only, 2 4 KiB LBAs, 3-4 regions
 * - 1, 5 MDTS 64 KiB, 6 NSID 7); [65, 81) lba_start, lba_count; then 4 regions of 12 bytes
 * (page-aligned GPA, size in pages); the rest is guest memory: a table of u64 that read_prp
 * serves at every GPA (entry (gpa / 8 + i) modulo its length). Missing bytes read as zero.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lightiov/check.h"

#define HDR_BYTES (64 + 1 + 16 + 4 * 12)

struct fz {
	const uint8_t *mem;
	size_t nmem; /* u64 entries */
	unsigned reads;
	const struct lio_check_ctx *ctx;
};

static uint64_t get(const uint8_t *d, size_t size, size_t off, unsigned n)
{
	uint64_t v = 0;
	unsigned i;

	for (i = 0; i < n; i++)
		if (off + i < size)
			v |= (uint64_t)d[off + i] << (8 * i);
	return v;
}

static uint64_t mem_at(const struct fz *f, uint64_t idx)
{
	uint64_t v;

	if (!f->nmem)
		return 0;
	memcpy(&v, f->mem + (idx % f->nmem) * 8, 8);
	return v;
}

static int fz_read_prp(void *opaque, uint64_t gpa, uint64_t *out, unsigned n)
{
	struct fz *f = opaque;
	unsigned i;

	/* The checker's promises to read_prp. */
	if (!n || n > LIO_MDTS_BYTES / LIO_PAGE_SIZE || (gpa & 7) ||
	    (gpa & (LIO_PAGE_SIZE - 1)) + (uint64_t)n * 8 > LIO_PAGE_SIZE ||
	    !lio_window_contains(f->ctx, gpa, (uint64_t)n * 8))
		abort();
	if (++f->reads > 64) /* a walk that does not end */
		abort();
	for (i = 0; i < n; i++)
		out[i] = mem_at(f, gpa / 8 + i);
	return 0;
}

static void check_accepted(const struct lio_check_ctx *ctx, const struct nvme_sqe *sqe,
			   const struct lio_io *io, struct fz *f)
{
	uint64_t slba = (uint64_t)sqe->cdw11 << 32 | sqe->cdw10, total = 0;
	unsigned i;

	if (io->cid != sqe->cid || io->nsegs > LIO_CHECK_MAX_SEGS)
		abort();
	for (i = 0; i < io->nsegs; i++) {
		const struct lio_seg *s = &io->segs[i];

		if (!s->len || !lio_window_contains(ctx, s->gpa, s->len))
			abort();
		/* PRP shape: only the first segment starts inside a page, only the last ends so. */
		if (i > 0 && (s->gpa & (LIO_PAGE_SIZE - 1)))
			abort();
		if (i + 1 < io->nsegs && ((s->gpa + s->len) & (LIO_PAGE_SIZE - 1)))
			abort();
		total += s->len;
	}
	if (io->nsegs && io->segs[0].gpa != sqe->prp1)
		abort();
	switch (io->kind) {
	case LIO_IO_FLUSH:
		if (sqe->opcode != NVME_CMD_FLUSH || io->nsegs)
			abort();
		return;
	case LIO_IO_DSM: {
		struct nvme_dsm_range r[256];
		unsigned nr = (unsigned)(io->bytes / 16);

		if (sqe->opcode != NVME_CMD_DSM || total != io->bytes || io->bytes % 16 || !nr ||
		    nr > 256)
			abort();
		if ((ctx->flags & LIO_CHECK_READONLY) && (io->dsm_attr & NVME_DSM_AD))
			abort();
		for (i = 0; i < nr; i++) {
			r[i].cattr = 0;
			r[i].slba = mem_at(f, i * 2);
			r[i].nlb = (uint32_t)mem_at(f, i * 2 + 1);
		}
		if (lio_dsm_check(ctx, r, nr))
			return;
		for (i = 0; i < nr; i++)
			if (r[i].nlb && (r[i].slba < ctx->lba_start ||
					 r[i].slba - ctx->lba_start >= ctx->lba_count ||
					 r[i].nlb > ctx->lba_count - (r[i].slba - ctx->lba_start)))
				abort();
		return;
	}
	case LIO_IO_READ:
	case LIO_IO_WRITE:
	case LIO_IO_ZEROES:
		break;
	default:
		abort();
	}
	if ((io->kind == LIO_IO_READ) != (sqe->opcode == NVME_CMD_READ) ||
	    (io->kind == LIO_IO_WRITE) != (sqe->opcode == NVME_CMD_WRITE))
		abort();
	if ((ctx->flags & LIO_CHECK_READONLY) && io->kind != LIO_IO_READ)
		abort();
	if (io->nlb != (sqe->cdw12 & 0xffff) + 1)
		abort();
	if (io->bytes != (uint64_t)io->nlb << ctx->lba_shift)
		abort();
	/* dev_lba inside the LBA window, and where the mode says. */
	if (io->dev_lba < ctx->lba_start || io->dev_lba - ctx->lba_start >= ctx->lba_count ||
	    io->nlb > ctx->lba_count - (io->dev_lba - ctx->lba_start))
		abort();
	if ((ctx->flags & LIO_CHECK_TRANSLATE) ? io->dev_lba != ctx->lba_start + slba
					       : io->dev_lba != slba)
		abort();
	if (io->kind == LIO_IO_ZEROES) {
		if (io->nsegs)
			abort();
		return;
	}
	if (total != io->bytes || io->bytes > ctx->mdts_bytes)
		abort();
}

static bool status_known(uint16_t st)
{
	switch (st & ~NVME_STATUS_DNR) {
	case NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_INVALID_OPCODE):
	case NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD):
	case NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_INVALID_NS):
	case NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_LBA_RANGE):
	case NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_INVALID_PRP_OFFSET):
	case NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_DATA_XFER_ERROR):
	case NVME_STATUS(NVME_SCT_CMD_SPECIFIC, NVME_SC_ATTEMPTED_WRITE_RO):
		return true;
	}
	return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct lio_check_region reg[4];
	struct lio_check_ctx ctx;
	struct nvme_sqe sqe;
	struct lio_io io;
	struct fz f;
	unsigned i, flags;
	uint16_t st;

	memset(&sqe, 0, sizeof(sqe));
	memcpy(&sqe, data, size < 64 ? size : 64);
	flags = (unsigned)get(data, size, 64, 1);
	memset(&ctx, 0, sizeof(ctx));
	ctx.flags = (flags & 1 ? LIO_CHECK_TRANSLATE : 0) | (flags & 2 ? LIO_CHECK_READONLY : 0);
	ctx.lba_shift = flags & 4 ? 12 : 9;
	ctx.nr_regions = ((flags >> 3) & 3) + 1;
	ctx.mdts_bytes = flags & 0x20 ? 64u << 10 : LIO_MDTS_BYTES;
	ctx.nsid = flags & 0x40 ? 7 : 1;
	ctx.lba_start = get(data, size, 65, 8);
	ctx.lba_count = get(data, size, 73, 8);
	for (i = 0; i < 4; i++) {
		reg[i].gpa = get(data, size, 81 + i * 12, 8) & ~(uint64_t)(LIO_PAGE_SIZE - 1);
		reg[i].size = ((get(data, size, 89 + i * 12, 4) & 0xfffff) + 1) * LIO_PAGE_SIZE;
		/* A region never wraps (the DMA register refuses it). */
		if (reg[i].gpa + reg[i].size < reg[i].gpa)
			reg[i].size = 0 - reg[i].gpa;
		if (!reg[i].size)
			reg[i].gpa -= LIO_PAGE_SIZE, reg[i].size = LIO_PAGE_SIZE;
	}
	ctx.regions = reg;
	memset(&f, 0, sizeof(f));
	f.mem = size > HDR_BYTES ? data + HDR_BYTES : NULL;
	f.nmem = size > HDR_BYTES ? (size - HDR_BYTES) / 8 : 0;
	f.ctx = &ctx;
	ctx.read_prp = fz_read_prp;
	ctx.opaque = &f;

	memset(&io, 0xa5, sizeof(io));
	st = lio_sqe_check(&ctx, &sqe, &io);
	if (st == 0)
		check_accepted(&ctx, &sqe, &io, &f);
	else if (!status_known(st))
		abort();
	return 0;
}
