/* libFuzzer target for the vNVMe controller as lvmm builds it: production doorbell stride, guest
 * RAM split around the 32-bit hole, SQs in the CMB, shadow doorbells switched on, moved and off. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "layout.h"
#include "nvme-lightiov/nvme_ctrl.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* lvmm's vNVMe (devices/nvme-lightiov/vnvme_pci.c): doorbells a page apart, 1024-entry queues,
 * a 2 MiB CMB. */
#define DSTRD	  10
#define DB_STRIDE (4u << DSTRD)
#define CMB_SIZE  (2u << 20)
/* RAM as vm_mem.c lays out a 3 GiB + 64 MiB guest: [0, 3 GiB) and [4 GiB, 4 GiB + 64 MiB). */
#define LOW_SIZE  LAYOUT_MMIO32_START
#define HIGH_SIZE (64u << 20)
#define HIGH_END  (LAYOUT_RAM_HIGH + HIGH_SIZE)
#define CMB_GPA	  (LAYOUT_MMIO64_START + 0x200000)
#define DISK_SIZE (1u << 20)
#define QS	  32 /* entries of every queue the harness creates */
#define NQ	  3  /* admin + two I/O queue pairs */

/* Where the harness's queues live: the admin SQ low, the admin CQ above 4 GiB, I/O SQ 1 in the
 * CMB with its CQ at the top of high RAM, I/O SQ 2 the first page after the hole with its CQ the
 * last page before it. */
static const uint64_t sq_gpa[NQ] = {0x10000, CMB_GPA, LAYOUT_RAM_HIGH};
static const uint64_t cq_gpa[NQ] = {LAYOUT_RAM_HIGH + 0x10000, HIGH_END - 0x1000,
				    LOW_SIZE - 0x1000};

static uint8_t *low, *high, *disk_data;
/* The CMB's memory, given to the controller as a backend would (p.cmb_host): allocating and
 * zeroing 2 MiB per input would be most of the run time. Only the used part is cleared. */
static uint8_t cmb_mem[CMB_SIZE] __attribute__((aligned(4096)));
static uint64_t cmb_dirty;
static struct guest_mem gm;
static struct nvme_mem_backend disk;
static struct nvme_io_req *parked[64];
static unsigned nparked;
static bool park;

static int fz_submit(void *be, struct nvme_io_req *req)
{
	if (park && nparked < 64) {
		parked[nparked++] = req;
		return 0;
	}
	return nvme_mem_backend_ops.submit(be, req);
}

static const struct nvme_backend_ops fz_ops = {.submit = fz_submit};

static void fz_irq(void *opaque, unsigned vector)
{
	(void)opaque;
	(void)vector;
}

/* Each RAM part followed by an inaccessible page: a stray access past a slot faults. */
static uint8_t *fz_map(uint64_t bytes)
{
	uint8_t *p = mmap(NULL, bytes + 4096, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (p == MAP_FAILED || mprotect(p + bytes, 4096, PROT_NONE))
		abort();
	return p;
}

static void fz_mem_init(void)
{
	low = fz_map(LOW_SIZE);
	high = fz_map(HIGH_SIZE);
	disk_data = calloc(1, DISK_SIZE);
	memset(&gm, 0, sizeof(gm));
	gm.memfd = -1;
	gm.size = LOW_SIZE + HIGH_SIZE;
	gm.nslots = 2;
	gm.slots[0] = (struct gmem_slot){.gpa = 0, .size = LOW_SIZE, .host = low};
	gm.slots[1] = (struct gmem_slot){
	    .gpa = LAYOUT_RAM_HIGH, .size = HIGH_SIZE, .host = high, .fd_off = LOW_SIZE};
}

/* A guest address the input picks: near the slot edges, in the hole, in the CMB, anywhere. */
static uint64_t fz_addr(struct fz_in *f)
{
	uint8_t sel = (uint8_t)fz_take(f, 1);
	uint64_t off = fz_take(f, 2);

	switch (sel & 7) {
	case 0:
		return 0x20000 + off * 8;
	case 1:
		return LOW_SIZE - 0x8000 + off;
	case 2:
		return LOW_SIZE + off * 16;
	case 3:
		return LAYOUT_RAM_HIGH - 0x8000 + off;
	case 4:
		return HIGH_END - 0x8000 + off;
	case 5:
		return CMB_GPA + off * 64;
	case 6:
		return (off << 17) | (sel >> 3) << 12;
	default:
		return fz_take(f, 8);
	}
}

static void w32(struct nvme_ctrl *c, uint64_t off, uint32_t v)
{
	nvme_ctrl_bar0_write(c, off, &v, 4);
}

static void w64(struct nvme_ctrl *c, uint64_t off, uint64_t v)
{
	nvme_ctrl_bar0_write(c, off, &v, 8);
}

static uint64_t db_off(unsigned qid, bool cq)
{
	return NVME_REG_DBS + (uint64_t)(2 * qid + cq) * DB_STRIDE;
}

/* An SQ slot as host memory: the CMB for SQ 1, guest RAM otherwise. */
static uint8_t *sq_slot(struct nvme_ctrl *c, unsigned q, unsigned idx)
{
	uint64_t cmb_size;
	uint8_t *cmb = nvme_ctrl_cmb(c, &cmb_size);

	if (q == 1)
		return cmb + (uint64_t)idx * 64;
	return gmem_ptr(&gm, sq_gpa[q] + (uint64_t)idx * 64, 64);
}

static void sqe_put(struct nvme_ctrl *c, unsigned q, unsigned idx, uint8_t op, uint32_t cdw10,
		    uint32_t cdw11, uint64_t prp1, uint64_t prp2)
{
	struct nvme_sqe s;

	memset(&s, 0, sizeof(s));
	s.opcode = op;
	s.cid = (uint16_t)idx;
	s.cdw10 = cdw10;
	s.cdw11 = cdw11;
	s.prp1 = prp1;
	s.prp2 = prp2;
	memcpy(sq_slot(c, q, idx), &s, 64);
}

/* Enables the controller with the CMB in use and both I/O queue pairs, as Linux leaves it. */
static void bring_up(struct nvme_ctrl *c, unsigned *sqt)
{
	w64(c, NVME_REG_CMBMSC, NVME_CMBMSC_CRE);
	w64(c, NVME_REG_CMBMSC, CMB_GPA | NVME_CMBMSC_CMSE | NVME_CMBMSC_CRE);
	w32(c, NVME_REG_AQA, (QS - 1) << 16 | (QS - 1));
	w64(c, NVME_REG_ASQ, sq_gpa[0]);
	w64(c, NVME_REG_ACQ, cq_gpa[0]);
	w32(c, NVME_REG_CC, NVME_CC_EN | 6 << 16 | 4 << 20);
	for (unsigned q = 1; q < NQ; q++) {
		sqe_put(c, 0, sqt[0]++, NVME_ADMIN_CREATE_CQ, (QS - 1) << 16 | q, q << 16 | 3,
			cq_gpa[q], 0);
		sqe_put(c, 0, sqt[0]++, NVME_ADMIN_CREATE_SQ, (QS - 1) << 16 | q, q << 16 | 1,
			sq_gpa[q], 0);
	}
	w32(c, db_off(0, false), sqt[0]);
	nvme_ctrl_process(c);
	w32(c, db_off(0, true), sqt[0]);
	sqt[1] = sqt[2] = 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct nvme_ctrl_params p = {.mqes = 1023,
				     .dstrd = DSTRD,
				     .max_ioqs = NQ - 1,
				     .nvectors = NQ,
				     .size = DISK_SIZE,
				     .cmb_size = CMB_SIZE,
				     .cmb_host = cmb_mem,
				     .cmb_bir = 2,
				     .serial = "FUZZPROD"};
	struct nvme_ctrl_hooks h = {.irq = fz_irq};
	struct fz_in f = {data, size};
	struct nvme_ctrl *c;
	uint64_t dbs = 0; /* shadow doorbell page the harness configured, 0 when off */
	unsigned sqt[NQ] = {0}, steps = 0;
	char err[128];

	if (!low)
		fz_mem_init();
	/* RAM back to zero pages: only what the last input touched costs anything */
	madvise(low, LOW_SIZE, MADV_DONTNEED);
	madvise(high, HIGH_SIZE, MADV_DONTNEED);
	memset(cmb_mem, 0, cmb_dirty > QS * 64 ? cmb_dirty : QS * 64);
	cmb_dirty = 0;
	disk.data = disk_data;
	disk.size = DISK_SIZE;
	park = false;
	nparked = 0;
	if (nvme_ctrl_create(&p, &gm, &fz_ops, &disk, &h, &c, err, sizeof(err))) {
		fprintf(stderr, "fuzz_nvme_prod: %s\n", err);
		abort();
	}
	nvme_ctrl_set_cmb_gpa(c, CMB_GPA);
	bring_up(c, sqt);
	while (f.n && steps++ < 256) {
		uint8_t op = (uint8_t)fz_take(&f, 1);
		unsigned q = 1 + ((op >> 4) & 1);

		switch (op % 10) {
		case 0: { /* a register or any doorbell (past the last queue's too) */
			uint32_t off = (uint32_t)fz_take(&f, 2), v = (uint32_t)fz_take(&f, 4);

			w32(c, op & 0x80 ? db_off(off % 8, off & 0x100) : off & 0xffc, v);
			break;
		}
		case 1: /* admin command: the input's bytes into the next ASQ slot, ring */
		case 2: /* I/O command on SQ 1 (CMB) or 2 (after the hole); ring or shadow only */
		{
			unsigned sq = op % 10 == 1 ? 0 : q;
			uint8_t *slot = sq_slot(c, sq, sqt[sq]);
			size_t n = f.n < 64 ? f.n : 64;

			memset(slot, 0, 64);
			memcpy(slot, f.p, n);
			f.p += n;
			f.n -= n;
			sqt[sq] = (sqt[sq] + 1) % QS;
			if (sq && dbs && (op & 0x40))
				gmem_write(&gm, dbs + 2 * sq * DB_STRIDE, &sqt[sq], 4);
			else
				w32(c, db_off(sq, false), sqt[sq]);
			break;
		}
		case 3: { /* a read or write whose PRPs the input points anywhere */
			uint64_t prp1 = fz_addr(&f), prp2 = fz_addr(&f);
			uint32_t nlb = (uint32_t)fz_take(&f, 1);

			sqe_put(c, q, sqt[q], op & 0x40 ? NVME_CMD_WRITE : NVME_CMD_READ,
				(uint32_t)fz_take(&f, 1), 0, prp1, prp2);
			((struct nvme_sqe *)sq_slot(c, q, sqt[q]))->cdw12 = nlb;
			sqt[q] = (sqt[q] + 1) % QS;
			w32(c, db_off(q, false), sqt[q]);
			break;
		}
		case 4: { /* guest memory contents (PRP lists, shadow values): 8 bytes anywhere */
			uint64_t a = fz_addr(&f), v = fz_take(&f, 8), cmb_size;
			uint8_t *cmb = nvme_ctrl_cmb(c, &cmb_size);

			if (a >= CMB_GPA && a - CMB_GPA <= cmb_size - 8) {
				memcpy(cmb + (a - CMB_GPA), &v, 8);
				if (a - CMB_GPA + 8 > cmb_dirty)
					cmb_dirty = a - CMB_GPA + 8;
			} else
				gmem_write(&gm, a, &v, 8);
			break;
		}
		case 5: { /* Doorbell Buffer Config: on, or moved, to pages the input picks */
			uint64_t a = fz_addr(&f) & ~0xfffULL, b = fz_addr(&f) & ~0xfffULL;

			sqe_put(c, 0, sqt[0], NVME_ADMIN_DBBUF, 0, 0, a, b);
			sqt[0] = (sqt[0] + 1) % QS;
			w32(c, db_off(0, false), sqt[0]);
			nvme_ctrl_process(c);
			dbs = gmem_ptr(&gm, a, 4096) && gmem_ptr(&gm, b, 4096) ? a : dbs;
			break;
		}
		case 6: /* controller reset (shadow doorbells off), then up again or left down */
			w32(c, NVME_REG_CC, 0);
			dbs = 0;
			memset(sqt, 0, sizeof(sqt));
			if (!(op & 0x40))
				bring_up(c, sqt);
			break;
		case 7: { /* CQ head: doorbell or shadow value, then the coalescing timer */
			uint32_t head = (uint32_t)fz_take(&f, 1) % QS;

			if (dbs && (op & 0x40))
				gmem_write(&gm, dbs + (2 * q + 1) * DB_STRIDE, &head, 4);
			else
				w32(c, db_off(op & 0x80 ? 0 : q, true), head);
			nvme_ctrl_irq_tick(c, op & 0x20 ? UINT64_MAX : 0);
			break;
		}
		case 8: /* the CMB BAR moves, stops decoding, or comes back */
			nvme_ctrl_set_cmb_gpa(c, op & 0x40   ? ~0ULL
						 : op & 0x80 ? CMB_GPA + 0x1000000
							     : CMB_GPA);
			if (op & 0x20)
				w64(c, NVME_REG_CMBMSC, fz_take(&f, 8));
			break;
		default: /* asynchronous completions: park from now on, or complete one */
			if (op & 0x40)
				park = !park;
			else if (nparked)
				nvme_ctrl_io_done(parked[--nparked]);
			break;
		}
		nvme_ctrl_process(c);
	}
	while (nparked)
		nvme_ctrl_io_done(parked[--nparked]);
	nvme_ctrl_destroy(c);
	return 0;
}
