/* The SQE checker and PRP walker (host-kmod/common/check.c): every field of an I/O command
 * against a two-region DMA window with a hole, LBA windows translated and passthrough. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "lightiov/check.h"
#include "testutil.h"

/* Guest memory as the checker sees it: GPA = offset in mem; the window is two regions with a
 * hole between them, and memory past the window exists (so only the window check refuses it). */
#define MEM_SIZE (8u << 20)
#define R0_GPA	 0x0
#define R0_SIZE	 (2u << 20)
#define HOLE_GPA R0_SIZE
#define R1_GPA	 (4u << 20)
#define R1_SIZE	 (2u << 20)
#define PG	 4096u

#define DATA 0x100000ull /* in region 0 */
#define LIST 0x180000ull /* in region 0 */

#define ST(sct, sc) ((uint16_t)(NVME_STATUS(sct, sc) | NVME_STATUS_DNR))
#define GEN(sc)	    ST(NVME_SCT_GENERIC, sc)

static uint8_t *mem;
static unsigned prp_reads, prp_entries_read;
static bool prp_fail;
static struct lio_check_region regions[3] = {
    {.gpa = R0_GPA, .size = R0_SIZE},
    {.gpa = R1_GPA, .size = R1_SIZE},
};
static struct lio_check_ctx ctx;
static struct lio_io io;

static int fake_read_prp(void *opaque, uint64_t gpa, uint64_t *out, unsigned n)
{
	ck_assert_ptr_eq(opaque, mem);
	ck_assert(lio_window_contains(&ctx, gpa, (uint64_t)n * 8));
	ck_assert_uint_le((gpa & (PG - 1)) + n * 8, PG); /* never crosses its page */
	if (prp_fail || gpa + n * 8 > MEM_SIZE)
		return -1;
	memcpy(out, mem + gpa, n * 8);
	prp_reads++;
	prp_entries_read += n;
	return 0;
}

static void setup(void)
{
	mem = calloc(1, MEM_SIZE);
	ck_assert_ptr_nonnull(mem);
	prp_reads = prp_entries_read = 0;
	prp_fail = false;
	memset(&ctx, 0, sizeof(ctx));
	ctx.regions = regions;
	ctx.nr_regions = 2;
	ctx.lba_start = 1000;
	ctx.lba_count = 2048; /* 1 MiB of 512-byte LBAs */
	ctx.lba_shift = 9;
	ctx.nsid = 1;
	ctx.mdts_bytes = LIO_MDTS_BYTES;
	ctx.flags = LIO_CHECK_TRANSLATE;
	ctx.read_prp = fake_read_prp;
	ctx.opaque = mem;
	memset(&io, 0xa5, sizeof(io));
}

static void teardown(void)
{
	free(mem);
}

static struct nvme_sqe rw(uint8_t op, uint64_t slba, unsigned nlb, uint64_t prp1, uint64_t prp2)
{
	struct nvme_sqe s;

	memset(&s, 0, sizeof(s));
	s.opcode = op;
	s.cid = 77;
	s.nsid = 1;
	s.cdw10 = (uint32_t)slba;
	s.cdw11 = (uint32_t)(slba >> 32);
	s.cdw12 = nlb - 1;
	s.prp1 = prp1;
	s.prp2 = prp2;
	return s;
}

static uint16_t check(const struct nvme_sqe *s)
{
	return lio_sqe_check(&ctx, s, &io);
}

static void put_list(uint64_t gpa, const uint64_t *e, unsigned n)
{
	memcpy(mem + gpa, e, n * 8ull);
}

START_TEST(test_read_one_page)
{
	struct nvme_sqe s = rw(NVME_CMD_READ, 5, 8, DATA, 0);

	ck_assert_uint_eq(check(&s), 0);
	ck_assert_int_eq(io.kind, LIO_IO_READ);
	ck_assert_uint_eq(io.cid, 77);
	ck_assert_uint_eq(io.dev_lba, 1005);
	ck_assert_uint_eq(io.nlb, 8);
	ck_assert_uint_eq(io.bytes, 4096);
	ck_assert_uint_eq(io.nsegs, 1);
	ck_assert_uint_eq(io.segs[0].gpa, DATA);
	ck_assert_uint_eq(io.segs[0].len, 4096);
	ck_assert(!io.fua);
	s.opcode = NVME_CMD_WRITE;
	s.cdw12 |= NVME_RW_FUA;
	ck_assert_uint_eq(check(&s), 0);
	ck_assert_int_eq(io.kind, LIO_IO_WRITE);
	ck_assert(io.fua);
	ck_assert_uint_eq(prp_reads, 0);
}
END_TEST

START_TEST(test_lba_window)
{
	struct nvme_sqe s;

	/* Last LBA of the window is fine, one more is out. */
	s = rw(NVME_CMD_READ, 2047, 1, DATA, 0);
	ck_assert_uint_eq(check(&s), 0);
	ck_assert_uint_eq(io.dev_lba, 1000 + 2047);
	s = rw(NVME_CMD_READ, 2047, 2, DATA, 0);
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_LBA_RANGE));
	s = rw(NVME_CMD_READ, 2048, 1, DATA, 0);
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_LBA_RANGE));
	/* SLBA near 2^64: SLBA + NLB wraps, must not pass. */
	s = rw(NVME_CMD_READ, ~0ull, 2, DATA, 0);
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_LBA_RANGE));
	s = rw(NVME_CMD_READ, ~0ull - 1000, 8, DATA, 0);
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_LBA_RANGE));
	/* Write Zeroes is checked the same way. */
	s = rw(NVME_CMD_WRITE_ZEROES, 2040, 9, 0, 0);
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_LBA_RANGE));
}
END_TEST

START_TEST(test_passthrough)
{
	struct nvme_sqe s;

	ctx.flags = 0; /* SLBA is already absolute */
	s = rw(NVME_CMD_READ, 5, 1, DATA, 0);
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_LBA_RANGE));
	s = rw(NVME_CMD_READ, 999, 2, DATA, 0);
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_LBA_RANGE));
	s = rw(NVME_CMD_READ, 1000, 1, DATA, 0);
	ck_assert_uint_eq(check(&s), 0);
	ck_assert_uint_eq(io.dev_lba, 1000);
	s = rw(NVME_CMD_READ, 1000 + 2047, 1, DATA, 0);
	ck_assert_uint_eq(check(&s), 0);
	ck_assert_uint_eq(io.dev_lba, 3047);
	s = rw(NVME_CMD_READ, 1000 + 2047, 2, DATA, 0);
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_LBA_RANGE));
	s = rw(NVME_CMD_READ, ~0ull, 1, DATA, 0);
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_LBA_RANGE));
	/* A window reaching the top of the LBA space cannot wrap either. */
	ctx.lba_start = ~0ull - 10;
	ctx.lba_count = 10;
	s = rw(NVME_CMD_READ, ~0ull - 1, 2, DATA, 0);
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_LBA_RANGE));
	s = rw(NVME_CMD_READ, ~0ull - 2, 2, DATA, 0);
	ck_assert_uint_eq(check(&s), 0);
	ck_assert_uint_eq(io.dev_lba, ~0ull - 2);
	/* Translated, a window past 2^64 is refused rather than wrapped. */
	ctx.flags = LIO_CHECK_TRANSLATE;
	ctx.lba_count = 20;
	s = rw(NVME_CMD_READ, 12, 1, DATA, 0);
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_LBA_RANGE));
}
END_TEST

START_TEST(test_prp1_offset)
{
	struct nvme_sqe s;

	s = rw(NVME_CMD_READ, 0, 1, DATA + 2, 0);
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_INVALID_PRP_OFFSET));
	s = rw(NVME_CMD_READ, 0, 1, DATA + 1, 0);
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_INVALID_PRP_OFFSET));
	/* Dword aligned is enough; 512 bytes from 0x204 stay in one page. */
	s = rw(NVME_CMD_READ, 0, 1, DATA + 0x204, 0);
	ck_assert_uint_eq(check(&s), 0);
	ck_assert_uint_eq(io.nsegs, 1);
	ck_assert_uint_eq(io.segs[0].gpa, DATA + 0x204);
	ck_assert_uint_eq(io.segs[0].len, 512);
	/* Crossing the page from an offset needs PRP2; a zero PRP2 is a missing pointer. */
	s = rw(NVME_CMD_READ, 0, 8, DATA + 0x800, 0);
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_INVALID_FIELD));
	s = rw(NVME_CMD_READ, 0, 1, 0, 0);
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_INVALID_FIELD));
}
END_TEST

START_TEST(test_prp2_data)
{
	struct nvme_sqe s;

	/* 4 KiB from an offset: two segments. */
	s = rw(NVME_CMD_READ, 0, 8, DATA + 0x800, DATA + 0x10000);
	ck_assert_uint_eq(check(&s), 0);
	ck_assert_uint_eq(io.nsegs, 2);
	ck_assert_uint_eq(io.segs[0].len, 0x800);
	ck_assert_uint_eq(io.segs[1].gpa, DATA + 0x10000);
	ck_assert_uint_eq(io.segs[1].len, 0x800);
	/* PRP2 misaligned. */
	s.prp2 = DATA + 0x10008;
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_INVALID_PRP_OFFSET));
	s.prp2 = DATA + 0x10200;
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_INVALID_PRP_OFFSET));
	/* Two adjacent pages merge into one segment. */
	s = rw(NVME_CMD_WRITE, 0, 16, DATA, DATA + PG);
	ck_assert_uint_eq(check(&s), 0);
	ck_assert_uint_eq(io.nsegs, 1);
	ck_assert_uint_eq(io.segs[0].len, 2 * PG);
	/* PRP2 outside the window (in the hole, and past the last region). */
	s = rw(NVME_CMD_READ, 0, 16, DATA, HOLE_GPA + PG);
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_DATA_XFER_ERROR));
	s = rw(NVME_CMD_READ, 0, 16, DATA, R1_GPA + R1_SIZE);
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_DATA_XFER_ERROR));
	/* PRP2 is ignored when PRP1 covers the transfer. */
	s = rw(NVME_CMD_READ, 0, 8, DATA, HOLE_GPA + 3);
	ck_assert_uint_eq(check(&s), 0);
}
END_TEST

START_TEST(test_prp_list)
{
	uint64_t e[4] = {DATA + 0x20000, DATA + 0x40000, DATA + 0x41000, 0};
	struct nvme_sqe s;

	/* 16 KiB from a page start: PRP1 + a list of three entries. */
	put_list(LIST, e, 3);
	s = rw(NVME_CMD_READ, 0, 32, DATA, LIST);
	ck_assert_uint_eq(check(&s), 0);
	ck_assert_uint_eq(io.nsegs, 3); /* the last two pages merge */
	ck_assert_uint_eq(io.segs[0].gpa, DATA);
	ck_assert_uint_eq(io.segs[1].gpa, DATA + 0x20000);
	ck_assert_uint_eq(io.segs[2].gpa, DATA + 0x40000);
	ck_assert_uint_eq(io.segs[2].len, 2 * PG);
	/* Only the entries the transfer needs are read, once. */
	ck_assert_uint_eq(prp_reads, 1);
	ck_assert_uint_eq(prp_entries_read, 3);
	/* A list pointer may have a qword-aligned offset (Linux's 256-byte list pool). */
	put_list(LIST + 0x100, e, 3);
	s.prp2 = LIST + 0x100;
	ck_assert_uint_eq(check(&s), 0);
	s.prp2 = LIST + 0x104;
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_INVALID_PRP_OFFSET));
	/* List page outside the window. */
	s.prp2 = HOLE_GPA + 0x1000;
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_DATA_XFER_ERROR));
	/* An entry outside the window, misaligned, zero. */
	s.prp2 = LIST;
	e[1] = HOLE_GPA;
	put_list(LIST, e, 3);
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_DATA_XFER_ERROR));
	e[1] = DATA + 0x40008;
	put_list(LIST, e, 3);
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_INVALID_PRP_OFFSET));
	e[1] = 0;
	put_list(LIST, e, 3);
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_INVALID_FIELD));
	/* The caller cannot read the list: a transfer error that may be retried. */
	e[1] = DATA + 0x40000;
	put_list(LIST, e, 3);
	prp_fail = true;
	ck_assert_uint_eq(check(&s), NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_DATA_XFER_ERROR));
}
END_TEST

START_TEST(test_prp_list_chain)
{
	/* The list starts 16 bytes before its page end: one data entry, then the chain pointer. */
	uint64_t first = LIST + PG - 16, second = LIST + 4 * PG;
	uint64_t e1[2] = {DATA + 0x1000, second};
	uint64_t e2[2] = {DATA + 0x3000, DATA + 0x5000};
	struct nvme_sqe s = rw(NVME_CMD_READ, 0, 32, DATA, first);

	put_list(first, e1, 2);
	put_list(second, e2, 2);
	ck_assert_uint_eq(check(&s), 0);
	ck_assert_uint_eq(io.nsegs, 3); /* DATA and DATA+0x1000 merge */
	ck_assert_uint_eq(io.segs[0].len, 2 * PG);
	ck_assert_uint_eq(io.segs[1].gpa, DATA + 0x3000);
	ck_assert_uint_eq(io.segs[2].gpa, DATA + 0x5000);
	ck_assert_uint_eq(prp_entries_read, 4);
	/* Exactly as many entries as the page holds: the last one is data, not a chain. */
	s = rw(NVME_CMD_READ, 0, 24, DATA, first);
	ck_assert_uint_eq(check(&s), 0);
	ck_assert_uint_eq(io.nsegs, 2);
	ck_assert_uint_eq(io.segs[1].gpa, second);
	ck_assert_uint_eq(io.segs[1].len, PG);
	/* A chain pointer with an offset, outside the window, zero. */
	s = rw(NVME_CMD_READ, 0, 32, DATA, first);
	e1[1] = second + 8;
	put_list(first, e1, 2);
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_INVALID_PRP_OFFSET));
	e1[1] = HOLE_GPA;
	put_list(first, e1, 2);
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_DATA_XFER_ERROR));
	e1[1] = 0;
	put_list(first, e1, 2);
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_INVALID_FIELD));
	/* A list that chains to its own page. */
	e1[1] = LIST;
	put_list(first, e1, 2);
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_INVALID_FIELD));
	/* A list page with room for the chain pointer only yields no data: refused, not looped. */
	put_list(LIST + PG - 8, &second, 1);
	s.prp2 = LIST + PG - 8;
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_INVALID_PRP_OFFSET));
	/* Chaining past the end of the window: the next list page is where the window stops. */
	e1[1] = R0_SIZE;
	put_list(first, e1, 2);
	s.prp2 = first;
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_DATA_XFER_ERROR));
}
END_TEST

START_TEST(test_chain_at_window_end)
{
	/* A chain is at most two list pages long (a chain target is page aligned, so it holds all
	 * the entries MDTS allows): 128 KiB over a chained list whose second page is the last page
	 * of region 0, data in region 1. */
	uint64_t first = LIST + PG - 16, second = R0_SIZE - PG;
	uint64_t e1[2] = {R1_GPA, second}, e2[30];
	struct nvme_sqe s = rw(NVME_CMD_WRITE, 0, 256, DATA, first);
	unsigned i;

	for (i = 0; i < 30; i++)
		e2[i] = R1_GPA + (i + 1) * 2ull * PG; /* never adjacent: no merging */
	put_list(first, e1, 2);
	put_list(second, e2, 30);
	ck_assert_uint_eq(check(&s), 0);
	ck_assert_uint_eq(io.nsegs, 32);
	ck_assert_uint_eq(io.bytes, 128u << 10);
	ck_assert_uint_eq(io.segs[31].gpa, R1_GPA + 60ull * PG);
	ck_assert_uint_eq(prp_entries_read, 2 + 30);
}
END_TEST

START_TEST(test_hole_straddle)
{
	struct nvme_sqe s;

	/* A page whose end runs into the hole. */
	s = rw(NVME_CMD_READ, 0, 8, R0_SIZE - 0x800, 0);
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_INVALID_FIELD)); /* needs PRP2 */
	s.prp2 = HOLE_GPA;
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_DATA_XFER_ERROR));
	/* The same transfer, continued in region 1: two segments, one per region. */
	s.prp2 = R1_GPA;
	ck_assert_uint_eq(check(&s), 0);
	ck_assert_uint_eq(io.nsegs, 2);
	ck_assert_uint_eq(io.segs[0].gpa, R0_SIZE - 0x800);
	ck_assert_uint_eq(io.segs[1].gpa, R1_GPA);
	/* Two regions that touch in GPA space: pages across the seam never merge (the backend maps
	 * each region on its own). */
	regions[2] = (struct lio_check_region){.gpa = R1_GPA + R1_SIZE, .size = 1u << 20};
	ctx.nr_regions = 3;
	s = rw(NVME_CMD_READ, 0, 16, R1_GPA + R1_SIZE - PG, R1_GPA + R1_SIZE);
	ck_assert_uint_eq(check(&s), 0);
	ck_assert_uint_eq(io.nsegs, 2);
	ck_assert_uint_eq(io.segs[0].len, PG);
	ck_assert_uint_eq(io.segs[1].len, PG);
	/* Window check on its own. */
	ck_assert(lio_window_contains(&ctx, R0_SIZE - 1, 1));
	ck_assert(!lio_window_contains(&ctx, R0_SIZE - 1, 2));
	ck_assert(!lio_window_contains(&ctx, R0_GPA, 0));
	ck_assert(!lio_window_contains(&ctx, ~0ull - 10, 20));
	ck_assert(lio_window_contains(&ctx, R1_GPA, R1_SIZE));
	ck_assert(!lio_window_contains(&ctx, R1_GPA, R1_SIZE + 1)); /* spans two regions */
}
END_TEST

START_TEST(test_opcodes)
{
	static const uint8_t bad[] = {
	    NVME_CMD_WRITE_UNCOR, NVME_CMD_COMPARE, 0x03, 0x0a, 0x0d, 0x11, 0x7f, 0x80, 0x81, 0xff};
	struct nvme_sqe s;
	unsigned i;

	for (i = 0; i < sizeof(bad); i++) {
		s = rw(bad[i], 0, 1, DATA, 0);
		ck_assert_uint_eq(check(&s), GEN(NVME_SC_INVALID_OPCODE));
	}
	s = rw(NVME_CMD_FLUSH, 0, 1, 0, 0);
	ck_assert_uint_eq(check(&s), 0);
	ck_assert_int_eq(io.kind, LIO_IO_FLUSH);
	ck_assert_uint_eq(io.nsegs, 0);
	ck_assert_uint_eq(io.bytes, 0);
	/* Write Zeroes moves no data: PRPs are not looked at, MDTS does not apply. */
	s = rw(NVME_CMD_WRITE_ZEROES, 10, 1024, 3, HOLE_GPA);
	ck_assert_uint_eq(check(&s), 0);
	ck_assert_int_eq(io.kind, LIO_IO_ZEROES);
	ck_assert_uint_eq(io.dev_lba, 1010);
	ck_assert_uint_eq(io.nlb, 1024);
	ck_assert_uint_eq(io.bytes, 1024 * 512);
	ck_assert_uint_eq(io.nsegs, 0);
}
END_TEST

START_TEST(test_nsid_fused_sgl)
{
	struct nvme_sqe s = rw(NVME_CMD_READ, 0, 1, DATA, 0);

	s.nsid = 0;
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_INVALID_NS));
	s.nsid = 2;
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_INVALID_NS));
	s.nsid = 0xffffffff; /* broadcast is for Flush only */
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_INVALID_NS));
	s = rw(NVME_CMD_FLUSH, 0, 1, 0, 0);
	s.nsid = 0xffffffff;
	ck_assert_uint_eq(check(&s), 0);
	s.nsid = 7;
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_INVALID_NS));
	/* Another namespace id configured. */
	ctx.nsid = 7;
	ck_assert_uint_eq(check(&s), 0);
	ctx.nsid = 1;
	/* Fused first / second, and both bits. */
	s = rw(NVME_CMD_WRITE, 0, 1, DATA, 0);
	s.flags = 1;
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_INVALID_FIELD));
	s.flags = 2;
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_INVALID_FIELD));
	s.flags = 3;
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_INVALID_FIELD));
	/* SGL (PSDT 1 and 2; 3 is reserved). */
	s.flags = 0x40;
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_INVALID_FIELD));
	s.flags = 0x80;
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_INVALID_FIELD));
	s.flags = 0xc0;
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_INVALID_FIELD));
	s.flags = 0;
	ck_assert_uint_eq(check(&s), 0);
}
END_TEST

START_TEST(test_readonly)
{
	const uint16_t ro = ST(NVME_SCT_CMD_SPECIFIC, NVME_SC_ATTEMPTED_WRITE_RO);
	struct nvme_sqe s;

	ctx.flags |= LIO_CHECK_READONLY;
	ck_assert_uint_eq(ro, 0x4182);
	s = rw(NVME_CMD_WRITE, 0, 1, DATA, 0);
	ck_assert_uint_eq(check(&s), ro);
	s = rw(NVME_CMD_WRITE_ZEROES, 0, 1, 0, 0);
	ck_assert_uint_eq(check(&s), ro);
	s = rw(NVME_CMD_DSM, 0, 1, DATA, 0);
	s.cdw10 = 0;
	s.cdw11 = NVME_DSM_AD;
	ck_assert_uint_eq(check(&s), ro);
	s.cdw11 = 0x3; /* integral read / write hints only: allowed */
	ck_assert_uint_eq(check(&s), 0);
	s = rw(NVME_CMD_READ, 0, 1, DATA, 0);
	ck_assert_uint_eq(check(&s), 0);
	s = rw(NVME_CMD_FLUSH, 0, 1, 0, 0);
	ck_assert_uint_eq(check(&s), 0);
	/* Problems found before the write itself keep their own status. */
	s = rw(NVME_CMD_WRITE, 5000, 1, DATA, 0);
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_LBA_RANGE));
}
END_TEST

START_TEST(test_mdts)
{
	uint64_t e[32];
	struct nvme_sqe s;
	unsigned i;

	for (i = 0; i < 32; i++)
		e[i] = R1_GPA + (i + 1) * 2ull * PG;
	put_list(LIST, e, 32);
	/* 128 KiB from a page start: PRP1 + 31 entries. */
	s = rw(NVME_CMD_READ, 0, 256, DATA, LIST);
	ck_assert_uint_eq(check(&s), 0);
	ck_assert_uint_eq(io.bytes, 128u << 10);
	ck_assert_uint_eq(io.nsegs, 32);
	ck_assert_uint_eq(prp_entries_read, 31);
	/* From an offset: PRP1 + 32 entries, the most segments a command has. */
	s.prp1 = DATA + 0x200;
	ck_assert_uint_eq(check(&s), 0);
	ck_assert_uint_eq(io.nsegs, LIO_CHECK_MAX_SEGS);
	ck_assert_uint_eq(io.segs[32].len, 0x200);
	/* One LBA more is over MDTS. */
	s = rw(NVME_CMD_READ, 0, 257, DATA, LIST);
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_INVALID_FIELD));
	/* A smaller MDTS, and 4 KiB LBAs. */
	ctx.mdts_bytes = 64u << 10;
	s = rw(NVME_CMD_READ, 0, 128, DATA, LIST);
	ck_assert_uint_eq(check(&s), 0);
	s = rw(NVME_CMD_READ, 0, 129, DATA, LIST);
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_INVALID_FIELD));
	ctx.lba_shift = 12;
	s = rw(NVME_CMD_READ, 0, 16, DATA, LIST);
	ck_assert_uint_eq(check(&s), 0);
	ck_assert_uint_eq(io.bytes, 64u << 10);
	s = rw(NVME_CMD_READ, 0, 17, DATA, LIST);
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_INVALID_FIELD));
	/* The largest NLB the SQE can carry. */
	ctx.lba_count = 1u << 20;
	s = rw(NVME_CMD_READ, 0, 65536, DATA, LIST);
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_INVALID_FIELD));
}
END_TEST

START_TEST(test_dsm)
{
	struct nvme_dsm_range r[4] = {
	    {.slba = 0, .nlb = 8},
	    {.slba = 2040, .nlb = 8},
	    {.slba = 99999, .nlb = 0},
	    {.slba = 100, .nlb = 1},
	};
	struct nvme_sqe s = rw(NVME_CMD_DSM, 0, 1, DATA + 0xfe0, DATA + 0x10000);

	s.cdw10 = 3; /* four ranges: 64 bytes across a page boundary */
	s.cdw11 = NVME_DSM_AD;
	ck_assert_uint_eq(check(&s), 0);
	ck_assert_int_eq(io.kind, LIO_IO_DSM);
	ck_assert_uint_eq(io.bytes, 64);
	ck_assert_uint_eq(io.dsm_attr, NVME_DSM_AD);
	ck_assert_uint_eq(io.nsegs, 2);
	ck_assert_uint_eq(io.segs[0].len + io.segs[1].len, 64);
	s.cdw10 = 255; /* 256 ranges: 4 KiB */
	s.prp1 = DATA;
	ck_assert_uint_eq(check(&s), 0);
	ck_assert_uint_eq(io.bytes, 4096);
	s.prp1 = HOLE_GPA;
	ck_assert_uint_eq(check(&s), GEN(NVME_SC_DATA_XFER_ERROR));

	/* The ranges: translated in place, empty ones left alone. */
	ck_assert_uint_eq(lio_dsm_check(&ctx, r, 4), 0);
	ck_assert_uint_eq(r[0].slba, 1000);
	ck_assert_uint_eq(r[1].slba, 3040);
	ck_assert_uint_eq(r[2].slba, 99999);
	ck_assert_uint_eq(r[3].slba, 1100);
	r[1].slba = 2041;
	ck_assert_uint_eq(lio_dsm_check(&ctx, &r[1], 1), GEN(NVME_SC_LBA_RANGE));
	r[1] = (struct nvme_dsm_range){.slba = ~0ull, .nlb = 2};
	ck_assert_uint_eq(lio_dsm_check(&ctx, &r[1], 1), GEN(NVME_SC_LBA_RANGE));
	ck_assert_uint_eq(lio_dsm_check(&ctx, r, 0), GEN(NVME_SC_INVALID_FIELD));
	ck_assert_uint_eq(lio_dsm_check(&ctx, r, 257), GEN(NVME_SC_INVALID_FIELD));
	/* Passthrough: absolute LBAs, checked against the window, not moved. */
	ctx.flags = 0;
	r[0] = (struct nvme_dsm_range){.slba = 1000, .nlb = 2048};
	ck_assert_uint_eq(lio_dsm_check(&ctx, r, 1), 0);
	ck_assert_uint_eq(r[0].slba, 1000);
	r[0] = (struct nvme_dsm_range){.slba = 999, .nlb = 1};
	ck_assert_uint_eq(lio_dsm_check(&ctx, r, 1), GEN(NVME_SC_LBA_RANGE));
}
END_TEST

START_TEST(test_prp_walk_admin)
{
	struct lio_seg segs[2];
	unsigned n = 99;

	/* A 4 KiB admin buffer (Identify) from an offset. */
	ck_assert_uint_eq(lio_prp_walk(&ctx, DATA + 0x800, DATA + 0x3000, 4096, segs, 2, &n), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(lio_prp_walk(&ctx, DATA + 0x800, 0, 4096, segs, 2, &n),
			  GEN(NVME_SC_INVALID_FIELD));
	/* More segments than the caller has room for. */
	ck_assert_uint_eq(lio_prp_walk(&ctx, DATA + 0x800, DATA + 0x3000, 4096, segs, 1, &n),
			  GEN(NVME_SC_INVALID_FIELD));
	/* Zero bytes: nothing to map, no pointer looked at. */
	ck_assert_uint_eq(lio_prp_walk(&ctx, 3, 5, 0, segs, 2, &n), 0);
	ck_assert_uint_eq(n, 0);
	ck_assert_uint_eq(lio_prp_walk(&ctx, DATA, 0, LIO_MDTS_BYTES + 1, segs, 2, &n),
			  GEN(NVME_SC_INVALID_FIELD));
}
END_TEST

static Suite *check_suite(void)
{
	Suite *s = suite_create("check");
	TCase *t = tcase_create("sqe");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, test_read_one_page);
	tcase_add_test(t, test_lba_window);
	tcase_add_test(t, test_passthrough);
	tcase_add_test(t, test_prp1_offset);
	tcase_add_test(t, test_prp2_data);
	tcase_add_test(t, test_prp_list);
	tcase_add_test(t, test_prp_list_chain);
	tcase_add_test(t, test_chain_at_window_end);
	tcase_add_test(t, test_hole_straddle);
	tcase_add_test(t, test_opcodes);
	tcase_add_test(t, test_nsid_fused_sgl);
	tcase_add_test(t, test_readonly);
	tcase_add_test(t, test_mdts);
	tcase_add_test(t, test_dsm);
	tcase_add_test(t, test_prp_walk_admin);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return testutil_run_suite(check_suite());
}
