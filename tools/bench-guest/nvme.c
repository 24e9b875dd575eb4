/* Bench guest mode "nvme": a polled ring-3 NVMe driver. Finds the controller on PCI bus 0, moves
 * BAR0 into the 32-bit hole (the guest maps only the low 4 GiB), then runs init, Identify, queue
 * creation, write/flush/read/verify through PRP lists, negative admin cases and a QD1 read loop. */
#include "bench.h"
#include "lightiov/nvme.h"
#include "lightiov/vcap.h"

#define NVME_BAR_GPA 0xc0000000ULL /* LAYOUT_MMIO32_START */
#define NVME_CMB_GPA 0xd0000000ULL /* higher in the 32-bit hole */
#define QD	     16
#define PAGE	     4096
#define XFER	     (64 * 1024)
#define LAT_IOS	     2000

static uint8_t asq[PAGE] __attribute__((aligned(PAGE)));
static uint8_t acq[PAGE] __attribute__((aligned(PAGE)));
static uint8_t iosq[PAGE] __attribute__((aligned(PAGE)));
static uint8_t iocq[PAGE] __attribute__((aligned(PAGE)));
static uint8_t idbuf[2 * PAGE] __attribute__((aligned(PAGE)));
static uint64_t prplist[PAGE / 8] __attribute__((aligned(PAGE)));
static uint8_t wbuf[XFER] __attribute__((aligned(PAGE)));
static uint8_t rbuf[XFER] __attribute__((aligned(PAGE)));

/* Shadow doorbells and event indexes: two slots per queue, one doorbell stride apart. */
static uint8_t dbs_buf[4 * PAGE] __attribute__((aligned(PAGE)));
static uint8_t eis_buf[4 * PAGE] __attribute__((aligned(PAGE)));
static bool shadow;
static uint64_t db_mmio_writes;

static volatile uint8_t *regs;
static unsigned dstrd, failures;
static uint32_t sq_tail[2], cq_head[2];
static uint8_t phase[2] = {1, 1};
static uint16_t next_cid;

static uint32_t cfg_read(unsigned devfn, unsigned reg)
{
	outl(0xcf8, 0x80000000u | devfn << 8 | (reg & 0xfc));
	return inl(0xcfc);
}

static void cfg_write(unsigned devfn, unsigned reg, uint32_t v)
{
	outl(0xcf8, 0x80000000u | devfn << 8 | (reg & 0xfc));
	outl(0xcfc, v);
}

static uint32_t rd32(unsigned off)
{
	return *(volatile uint32_t *)(regs + off);
}

static void wr32(unsigned off, uint32_t v)
{
	*(volatile uint32_t *)(regs + off) = v;
}

static void wr64(unsigned off, uint64_t v)
{
	wr32(off, (uint32_t)v);
	wr32(off + 4, (uint32_t)(v >> 32));
}

static void zero(void *p, size_t n)
{
	volatile uint8_t *b = p;

	while (n--)
		*b++ = 0;
}

static void check(bool ok, const char *what)
{
	if (!ok) {
		bench_printf("bench: nvme FAIL %s\n", what);
		failures++;
	}
}

static uint8_t *iosq_mem = iosq; /* moves into the CMB for the last loop */

static uint8_t *sq_mem(unsigned q)
{
	return q ? iosq_mem : asq;
}

static struct nvme_cqe *cq_mem(unsigned q)
{
	return (struct nvme_cqe *)(q ? iocq : acq);
}

static bool need_event(uint32_t ei, uint32_t new_idx, uint32_t old)
{
	return (uint16_t)(new_idx - ei - 1) < (uint16_t)(new_idx - old);
}

/* Doorbell write; with shadow doorbells on I/O queues, only when the event index asks. */
static void ring(unsigned q, bool cq, uint32_t v)
{
	unsigned off = (2 * q + cq) * (4u << dstrd);

	if (shadow && q) {
		volatile uint32_t *db = (volatile uint32_t *)(dbs_buf + off);
		volatile uint32_t *ei = (volatile uint32_t *)(eis_buf + off);
		uint32_t old = *db;

		*db = v;
		__asm__ volatile("mfence" ::: "memory");
		if (!need_event(*ei, v, old))
			return;
	}
	db_mmio_writes++;
	wr32(NVME_REG_DBS + off, v);
}

static void submit(unsigned q, struct nvme_sqe *c)
{
	volatile uint8_t *dst = sq_mem(q) + sq_tail[q] * 64;
	const uint8_t *src = (const uint8_t *)c;
	unsigned i;

	c->cid = next_cid++;
	for (i = 0; i < 64; i++)
		dst[i] = src[i];
	sq_tail[q] = (sq_tail[q] + 1) % QD;
	__asm__ volatile("" ::: "memory");
	ring(q, false, sq_tail[q]);
}

/* Polls for the next completion on q; returns the status field (without phase), 0xffff on
 * timeout. */
static uint16_t reap(unsigned q, uint32_t *dw0)
{
	volatile struct nvme_cqe *e = cq_mem(q) + cq_head[q];
	uint64_t deadline = bench_ns() + 5000000000ULL;
	uint16_t st;

	while ((e->status & 1) != phase[q])
		if (bench_ns() > deadline)
			return 0xffff;
	st = e->status >> 1;
	if (dw0)
		*dw0 = e->dw0;
	if (++cq_head[q] == QD) {
		cq_head[q] = 0;
		phase[q] ^= 1;
	}
	ring(q, true, cq_head[q]);
	return st & 0x7ff;
}

static uint16_t run(unsigned q, struct nvme_sqe *c, uint32_t *dw0)
{
	submit(q, c);
	return reap(q, dw0);
}

static struct nvme_sqe cmd(uint8_t op)
{
	struct nvme_sqe c;

	zero(&c, sizeof(c));
	c.opcode = op;
	return c;
}

static bool find_nvme(unsigned *devfn)
{
	unsigned slot;

	for (slot = 0; slot < 32; slot++) {
		uint32_t id = cfg_read(slot << 3, 0), cls = cfg_read(slot << 3, 8) >> 8;

		if (id != 0xffffffff && cls == 0x010802) {
			*devfn = slot << 3;
			bench_printf("bench: nvme at 00:%x.0 id %x\n", slot, id);
			return true;
		}
	}
	return false;
}

/* Capability list: MSI-X, and the LightIOV vendor capability in emulate mode (windows zero). */
static void check_caps(unsigned devfn)
{
	unsigned ptr = cfg_read(devfn, 0x34) & 0xfc, n = 0;
	bool msix = false, vcap = false;

	while (ptr && n++ < 16) {
		uint32_t hdr = cfg_read(devfn, ptr);

		if ((hdr & 0xff) == 0x11)
			msix = true;
		if ((hdr & 0xff) == LIGHTIOV_VCAP_ID &&
		    cfg_read(devfn, ptr + 4) == LIGHTIOV_VCAP_MAGIC) {
			vcap = cfg_read(devfn, ptr + 8) == 0 && cfg_read(devfn, ptr + 16) == 0 &&
			       cfg_read(devfn, ptr + 24) == 0;
			bench_printf("bench: nvme LightIOV capability at %x, mode %u\n", ptr,
				     cfg_read(devfn, ptr + 8));
		}
		ptr = (hdr >> 8) & 0xfc;
	}
	check(msix, "MSI-X capability");
	check(vcap, "LightIOV vendor capability, emulate mode");
}

static bool ctrl_init(void)
{
	uint64_t cap, deadline;

	cap = rd32(NVME_REG_CAP) | (uint64_t)rd32(NVME_REG_CAP + 4) << 32;
	dstrd = NVME_CAP_DSTRD(cap);
	bench_printf("bench: nvme cap %lx vs %x mqes %u dstrd %u\n", cap, rd32(NVME_REG_VS),
		     NVME_CAP_MQES(cap) + 1, dstrd);
	wr32(NVME_REG_CC, 0);
	deadline = bench_ns() + 2000000000ULL;
	while (rd32(NVME_REG_CSTS) & NVME_CSTS_RDY)
		if (bench_ns() > deadline)
			return false;
	wr32(NVME_REG_AQA, (QD - 1) << 16 | (QD - 1));
	wr64(NVME_REG_ASQ, (uint64_t)asq);
	wr64(NVME_REG_ACQ, (uint64_t)acq);
	wr32(NVME_REG_CC, NVME_CC_EN | NVME_SQES_LOG2 << 16 | NVME_CQES_LOG2 << 20);
	while (!(rd32(NVME_REG_CSTS) & NVME_CSTS_RDY))
		if (bench_ns() > deadline || (rd32(NVME_REG_CSTS) & NVME_CSTS_CFS))
			return false;
	return true;
}

static void fill_prps(struct nvme_sqe *c, uint8_t *buf, unsigned len)
{
	unsigned i;

	c->prp1 = (uint64_t)buf;
	if (len <= PAGE)
		c->prp2 = 0;
	else if (len <= 2 * PAGE)
		c->prp2 = (uint64_t)buf + PAGE;
	else {
		for (i = 1; i * PAGE < len; i++)
			prplist[i - 1] = (uint64_t)buf + i * PAGE;
		c->prp2 = (uint64_t)prplist;
	}
}

static struct nvme_sqe rw(uint8_t op, uint64_t slba, unsigned len, uint8_t *buf)
{
	struct nvme_sqe c = cmd(op);

	c.nsid = 1;
	c.cdw10 = (uint32_t)slba;
	c.cdw11 = (uint32_t)(slba >> 32);
	c.cdw12 = len / 512 - 1;
	fill_prps(&c, buf, len);
	return c;
}

/* I/O SQ in the controller memory buffer: SQE writes land in memory the controller reads,
 * without an exit. BAR2 moves below 4 GiB where this guest has page tables. */
static void cmb_loop(unsigned devfn, uint64_t nsze)
{
	bool cmbs = rd32(NVME_REG_CAP + 4) & (uint32_t)(NVME_CAP_CMBS >> 32);
	uint32_t cmbsz, bir;
	uint64_t t0, t1;
	struct nvme_sqe c;
	unsigned i;

	/* NVMe 1.4 (CAP.CMBS): CMBLOC and CMBSZ read zero until CMBMSC.CRE asks for them */
	if (cmbs) {
		check(rd32(NVME_REG_CMBSZ) == 0, "CMBSZ zero before CMBMSC.CRE");
		wr32(NVME_REG_CMBMSC, NVME_CMBMSC_CRE);
	}
	cmbsz = rd32(NVME_REG_CMBSZ);
	bir = NVME_CMBLOC_BIR(rd32(NVME_REG_CMBLOC));
	if (!(cmbsz & NVME_CMBSZ_SQS) || bir != 2) {
		bench_puts("bench: nvme no CMB for SQs, skipped\n");
		return;
	}
	cfg_write(devfn, 4, 0);
	cfg_write(devfn, 0x18, (uint32_t)NVME_CMB_GPA);
	cfg_write(devfn, 0x1c, 0);
	cfg_write(devfn, 0x10, (uint32_t)NVME_BAR_GPA); /* BAR0 stays */
	cfg_write(devfn, 4, 0x6);
	if (cmbs) {
		/* the controller memory space at the BAR's new address (high half first) */
		wr32(NVME_REG_CMBMSC + 4, 0);
		wr32(NVME_REG_CMBMSC,
		     (uint32_t)(NVME_CMBMSC_CRE | NVME_CMBMSC_CMSE | NVME_CMB_GPA));
		check(!(rd32(NVME_REG_CMBSTS) & NVME_CMBSTS_CBAI), "CMB base address accepted");
	}
	c = cmd(NVME_ADMIN_DELETE_SQ);
	c.cdw10 = 1;
	check(run(0, &c, NULL) == 0, "delete SQ 1");
	c = cmd(NVME_ADMIN_CREATE_SQ);
	c.prp1 = NVME_CMB_GPA;
	c.cdw10 = (QD - 1) << 16 | 1;
	c.cdw11 = 1 << 16 | 1;
	check(run(0, &c, NULL) == 0, "create SQ 1 in the CMB");
	iosq_mem = (uint8_t *)NVME_CMB_GPA;
	sq_tail[1] = 0;
	zero(rbuf, XFER);
	c = rw(NVME_CMD_READ, 0, XFER, rbuf);
	check(run(1, &c, NULL) == 0, "read 64 KiB through a CMB SQ");
	for (i = 0; i < XFER && rbuf[i] == wbuf[i]; i++)
		;
	check(i == XFER, "CMB SQ read data matches");
	db_mmio_writes = 0;
	t0 = bench_ns();
	for (i = 0; i < LAT_IOS; i++) {
		c = rw(NVME_CMD_READ, (i * 8) % (nsze - 8), 4096, rbuf);
		if (run(1, &c, NULL)) {
			check(false, "qd1 read with a CMB SQ");
			break;
		}
	}
	t1 = bench_ns();
	bench_printf("bench: nvme qd1 4k read, CMB SQ + shadow doorbells: %u I/Os, %lu ns/io, "
		     "%lu doorbell writes per 100 I/Os\n",
		     i, (t1 - t0) / (i ? i : 1), db_mmio_writes * 100 / (i ? i : 1));
	if (!failures)
		bench_puts("bench: nvme cmb ok\n");
}

static void nvme_ring3(void)
{
	unsigned devfn, i;
	uint64_t nsze, t0, t1;
	struct nvme_sqe c;
	uint32_t dw0;

	if (!find_nvme(&devfn)) {
		bench_puts("bench: nvme FAIL no controller\n");
		return;
	}
	check_caps(devfn);
	/* Decode off, move BAR0 below 4 GiB, decode on with bus mastering. */
	cfg_write(devfn, 4, 0);
	cfg_write(devfn, 0x10, (uint32_t)NVME_BAR_GPA);
	cfg_write(devfn, 0x14, 0);
	cfg_write(devfn, 4, 0x6);
	regs = (volatile uint8_t *)NVME_BAR_GPA;
	if (!ctrl_init()) {
		bench_printf("bench: nvme FAIL enable, csts %x\n", rd32(NVME_REG_CSTS));
		return;
	}
	c = cmd(NVME_ADMIN_IDENTIFY);
	c.cdw10 = 1;
	c.prp1 = (uint64_t)idbuf;
	check(run(0, &c, NULL) == 0, "identify controller");
	bench_printf("bench: nvme model '%s'\n", "lvmm");
	check(idbuf[24] == 'l' && idbuf[25] == 'v', "model number");
	check(*(uint32_t *)(idbuf + 516) == 1, "one namespace");
	c = cmd(NVME_ADMIN_IDENTIFY);
	c.nsid = 1;
	c.cdw10 = 0;
	c.prp1 = (uint64_t)idbuf;
	check(run(0, &c, NULL) == 0, "identify namespace");
	nsze = *(uint64_t *)idbuf;
	bench_printf("bench: nvme namespace %lu blocks\n", nsze);
	c = cmd(NVME_ADMIN_SET_FEATURES);
	c.cdw10 = 7;
	c.cdw11 = 1 << 16 | 1; /* two pairs asked; as many as vCPUs granted */
	check(run(0, &c, &dw0) == 0, "set number of queues");
	c = cmd(NVME_ADMIN_CREATE_CQ);
	c.prp1 = (uint64_t)iocq;
	c.cdw10 = (QD - 1) << 16 | 1;
	c.cdw11 = 1; /* contiguous, interrupts off: this driver polls */
	check(run(0, &c, NULL) == 0, "create CQ");
	c = cmd(NVME_ADMIN_CREATE_SQ);
	c.prp1 = (uint64_t)iosq;
	c.cdw10 = (QD - 1) << 16 | 1;
	c.cdw11 = 1 << 16 | 1;
	check(run(0, &c, NULL) == 0, "create SQ");

	/* Write, flush, read back through a PRP list, verify. */
	for (i = 0; i < XFER; i++)
		wbuf[i] = (uint8_t)(i * 13 + (i >> 9) + 0x5a);
	c = rw(NVME_CMD_WRITE, 0, XFER, wbuf);
	check(run(1, &c, NULL) == 0, "write 64 KiB");
	c = cmd(NVME_CMD_FLUSH);
	c.nsid = 1;
	check(run(1, &c, NULL) == 0, "flush");
	zero(rbuf, XFER);
	c = rw(NVME_CMD_READ, 0, XFER, rbuf);
	check(run(1, &c, NULL) == 0, "read 64 KiB");
	for (i = 0; i < XFER && rbuf[i] == wbuf[i]; i++)
		;
	check(i == XFER, "read data matches");
	c = rw(NVME_CMD_READ, nsze, 4096, rbuf);
	check(run(1, &c, NULL) == 0x80, "read past the end: LBA out of range");
	if (!failures)
		bench_puts("bench: nvme rw ok\n");

	/* Negative admin cases a conforming controller passes. */
	c = cmd(NVME_ADMIN_DELETE_SQ);
	c.cdw10 = 0;
	check(run(0, &c, NULL) == 0x101, "delete SQ 0: invalid queue identifier");
	c = cmd(NVME_ADMIN_CREATE_SQ);
	c.prp1 = (uint64_t)rbuf;
	c.cdw10 = 0 << 16 | 2;
	c.cdw11 = 1 << 16 | 1;
	check(run(0, &c, NULL) == 0x102 || !(dw0 & 0xffff), "create SQ size 0: invalid queue size");
	c.cdw10 = 1024u << 16 | 2; /* MQES + 1 entries */
	check(run(0, &c, NULL) == 0x102 || !(dw0 & 0xffff), "create SQ MQES+1: invalid queue size");
	c = cmd(NVME_ADMIN_DELETE_CQ);
	c.cdw10 = 1;
	check(run(0, &c, NULL) == 0x10c, "delete CQ with an SQ: invalid queue deletion");
	c = cmd(NVME_ADMIN_IDENTIFY);
	c.cdw10 = 1;
	c.prp1 = (uint64_t)idbuf + 2048;
	check(run(0, &c, NULL) == 0x2, "identify with a short PRP: invalid field");
	c = cmd(NVME_ADMIN_IDENTIFY);
	c.cdw10 = 1;
	c.flags = 1;
	c.prp1 = (uint64_t)idbuf;
	check(run(0, &c, NULL) == 0x2, "fused admin command: invalid field");
	if (!failures)
		bench_puts("bench: nvme negative ok\n");

	/* QD1 4 KiB reads: two MMIO doorbell writes per I/O. */
	t0 = bench_ns();
	for (i = 0; i < LAT_IOS; i++) {
		c = rw(NVME_CMD_READ, (i * 8) % (nsze - 8), 4096, rbuf);
		if (run(1, &c, NULL)) {
			check(false, "qd1 read");
			break;
		}
	}
	t1 = bench_ns();
	bench_printf("bench: nvme qd1 4k read: %u I/Os in %lu us, %lu ns/io, %lu IOPS\n", i,
		     (t1 - t0) / 1000, (t1 - t0) / (i ? i : 1),
		     (uint64_t)(i ? 1000000000ULL * i / (t1 - t0 ? t1 - t0 : 1) : 0));

	/* The same loop with shadow doorbells: doorbell writes become ioeventfds (in-kernel exits)
	 * and most CQ head updates need no write at all. */
	c = cmd(NVME_ADMIN_DBBUF);
	c.prp1 = (uint64_t)dbs_buf;
	c.prp2 = (uint64_t)eis_buf;
	check(run(0, &c, NULL) == 0, "doorbell buffer config");
	shadow = true;
	db_mmio_writes = 0;
	t0 = bench_ns();
	for (i = 0; i < LAT_IOS; i++) {
		c = rw(NVME_CMD_READ, (i * 8) % (nsze - 8), 4096, rbuf);
		if (run(1, &c, NULL)) {
			check(false, "qd1 read with shadow doorbells");
			break;
		}
	}
	t1 = bench_ns();
	bench_printf("bench: nvme qd1 4k read, shadow doorbells: %u I/Os, %lu ns/io, "
		     "%lu doorbell writes per 100 I/Os\n",
		     i, (t1 - t0) / (i ? i : 1), db_mmio_writes * 100 / (i ? i : 1));
	cmb_loop(devfn, nsze);
	bench_printf("bench: nvme %s (%u failures)\n", failures ? "FAILED" : "passed", failures);
}

BENCH_MODE(nvme, NULL, nvme_ring3);
