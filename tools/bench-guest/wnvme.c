/* Bench guest mode "work": a polled ring-3 NVMe driver for the workload engine on any controller
 * (lvmm's vNVMe in each mode, QEMU's nvme): several queue pairs, SQs in RAM or in the CMB
 * (bench.sq=cmb), plain or shadow doorbells (bench.dbbuf=on), LBA window of the LightIOV cap. */
#include "bench.h"
#include "lightiov/nvme.h"
#include "lightiov/vcap.h"
#include "workload.h"

#define W_BAR_GPA  0xc0000000ULL /* inside the 32-bit hole of lvmm and of QEMU's q35 */
#define W_CMB_GPA  0xd0000000ULL
#define W_MSIX_GPA 0xc8000000ULL /* an MSI-X table outside BAR0 */
#define W_ECAM	   0xe0000000ULL /* microvm's PCIe ECAM */
#define PAGE	   4096
#define AQ_DEPTH   16
#define NQ	   WORK_MAX_QUEUES

static uint8_t asq[PAGE] __attribute__((aligned(PAGE)));
static uint8_t acq[PAGE] __attribute__((aligned(PAGE)));
/* each queue starts on a page, as a queue base address must */
static struct {
	struct nvme_sqe e[WORK_MAX_DEPTH + 1];
} __attribute__((aligned(PAGE))) iosq[NQ];
static struct {
	struct nvme_cqe e[WORK_MAX_DEPTH + 1];
} __attribute__((aligned(PAGE))) iocq[NQ];
static uint8_t idbuf[PAGE] __attribute__((aligned(PAGE)));
static uint64_t prplist[PAGE / 8] __attribute__((aligned(PAGE)));
/* shadow doorbells: two slots per queue one stride apart; DSTRD 10 (lvmm) needs a page each */
static uint8_t dbs_buf[2 * (NQ + 1) * PAGE] __attribute__((aligned(PAGE)));
static uint8_t eis_buf[2 * (NQ + 1) * PAGE] __attribute__((aligned(PAGE)));

static volatile uint8_t *regs;
static volatile struct nvme_sqe *sqs[NQ + 1];
static volatile struct nvme_cqe *cqs[NQ + 1];
static uint32_t sq_tail[NQ + 1], cq_head[NQ + 1], entries[NQ + 1], cq_seen[NQ + 1];
static uint8_t phase[NQ + 1];
static unsigned dstrd, lba_shift = 9;
static bool shadow;
static uint32_t vmode = LIGHTIOV_MODE_EMULATE;
static uint64_t lba_start;

/* Configuration space through ports 0xcf8/0xcfc, or through ECAM where the machine has no such
 * ports (QEMU's microvm with pcie=on); ECAM also spares ring 3 the trapped port I/O. */
static volatile uint32_t *ecam;

static uint32_t cfg_read(unsigned devfn, unsigned reg)
{
	if (ecam)
		return ecam[(devfn << 12 | (reg & 0xffc)) / 4];
	outl(0xcf8, 0x80000000u | devfn << 8 | (reg & 0xfc));
	return inl(0xcfc);
}

static void cfg_write(unsigned devfn, unsigned reg, uint32_t v)
{
	if (ecam) {
		ecam[(devfn << 12 | (reg & 0xffc)) / 4] = v;
		return;
	}
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

static void zero(void *p, size_t n)
{
	volatile uint8_t *b = p;

	while (n--)
		*b++ = 0;
}

static bool need_event(uint32_t ei, uint32_t new_idx, uint32_t old)
{
	return (uint16_t)(new_idx - ei - 1) < (uint16_t)(new_idx - old);
}

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
	wr32(NVME_REG_DBS + off, v);
}

static void place(unsigned q, const struct nvme_sqe *c)
{
	volatile uint64_t *dst = (volatile uint64_t *)(volatile void *)&sqs[q][sq_tail[q]];
	uint64_t src[sizeof(*c) / 8];
	unsigned i;

	__builtin_memcpy(src, c, sizeof(src));
	for (i = 0; i < sizeof(*c) / 8; i++)
		dst[i] = src[i];
	sq_tail[q] = (sq_tail[q] + 1) % entries[q];
}

/* Completions of q into slots (their cids); the CQ head doorbell once per batch. */
static unsigned reap_q(unsigned q, uint16_t *slots, unsigned max, unsigned *errors)
{
	unsigned n = 0;

	while (n < max) {
		volatile struct nvme_cqe *e = &cqs[q][cq_head[q]];

		if ((e->status & 1) != phase[q])
			break;
		__asm__ volatile("" ::: "memory");
		if (e->status >> 1)
			(*errors)++;
		slots[n++] = e->cid;
		if (++cq_head[q] == entries[q]) {
			cq_head[q] = 0;
			phase[q] ^= 1;
		}
	}
	if (n)
		ring(q, true, cq_head[q]);
	return n;
}

static struct nvme_sqe cmd(uint8_t op)
{
	struct nvme_sqe c;

	zero(&c, sizeof(c));
	c.opcode = op;
	return c;
}

/* An admin command, polled to completion: the status field, 0xffff after 5 s. */
static uint16_t admin(struct nvme_sqe *c, uint32_t *dw0)
{
	uint64_t deadline = bench_ns() + 5000000000ULL;
	volatile struct nvme_cqe *e = &cqs[0][cq_head[0]];
	uint16_t st;

	c->cid = (uint16_t)cq_seen[0]++;
	place(0, c);
	__asm__ volatile("mfence" ::: "memory");
	ring(0, false, sq_tail[0]);
	while ((e->status & 1) != phase[0])
		if (bench_ns() > deadline)
			return 0xffff;
	st = (e->status >> 1) & 0x7ff;
	if (dw0)
		*dw0 = e->dw0;
	if (++cq_head[0] == entries[0]) {
		cq_head[0] = 0;
		phase[0] ^= 1;
	}
	ring(0, true, cq_head[0]);
	return st;
}

static bool find_nvme(unsigned *devfn)
{
	unsigned slot, pass;

	for (pass = 0; pass < 2; pass++, ecam = (volatile uint32_t *)W_ECAM)
		for (slot = 0; slot < 32; slot++) {
			uint32_t id = cfg_read(slot << 3, 0), cls = cfg_read(slot << 3, 8) >> 8;

			if (id != 0xffffffff && cls == 0x010802) {
				*devfn = slot << 3;
				bench_printf("bench: work nvme at 00:%x.0 id %x%s\n", slot, id,
					     ecam ? " (ECAM)" : "");
				return true;
			}
		}
	ecam = NULL;
	return false;
}

/* The LightIOV capability when present: passthrough SQEs carry absolute LBAs. */
static void read_vcap(unsigned devfn)
{
	unsigned ptr = cfg_read(devfn, 0x34) & 0xfc, n = 0;

	while (ptr && n++ < 16) {
		uint32_t hdr = cfg_read(devfn, ptr);

		if ((hdr & 0xff) == LIGHTIOV_VCAP_ID &&
		    cfg_read(devfn, ptr + 4) == LIGHTIOV_VCAP_MAGIC) {
			vmode = cfg_read(devfn, ptr + 8);
			lba_start = cfg_read(devfn, ptr + 16) | (uint64_t)cfg_read(devfn, ptr + 20)
								    << 32;
			return;
		}
		ptr = (hdr >> 8) & 0xfc;
	}
}

static bool ctrl_enable(void)
{
	uint64_t deadline = bench_ns() + 5000000000ULL;

	wr32(NVME_REG_CC, 0);
	while (rd32(NVME_REG_CSTS) & NVME_CSTS_RDY)
		if (bench_ns() > deadline)
			return false;
	entries[0] = AQ_DEPTH;
	phase[0] = 1;
	sqs[0] = (volatile struct nvme_sqe *)asq;
	cqs[0] = (volatile struct nvme_cqe *)acq;
	wr32(NVME_REG_AQA, (AQ_DEPTH - 1) << 16 | (AQ_DEPTH - 1));
	wr32(NVME_REG_ASQ, (uint32_t)(uint64_t)asq);
	wr32(NVME_REG_ASQ + 4, 0);
	wr32(NVME_REG_ACQ, (uint32_t)(uint64_t)acq);
	wr32(NVME_REG_ACQ + 4, 0);
	wr32(NVME_REG_CC, NVME_CC_EN | NVME_SQES_LOG2 << 16 | NVME_CQES_LOG2 << 20);
	while (!(rd32(NVME_REG_CSTS) & NVME_CSTS_RDY))
		if (bench_ns() > deadline || (rd32(NVME_REG_CSTS) & NVME_CSTS_CFS))
			return false;
	return true;
}

/* The CMB's guest address for SQs, or 0. NVMe 1.4 controllers (QEMU) report it only once
 * CMBMSC.CRE is set and accept SQs in it once CMSE and the base address are written. */
static uint64_t cmb_setup(unsigned devfn)
{
	uint32_t sz = rd32(NVME_REG_CMBSZ), bir;

	if (!sz) {
		wr32(NVME_REG_CMBMSC, 1);
		sz = rd32(NVME_REG_CMBSZ);
	}
	bir = NVME_CMBLOC_BIR(rd32(NVME_REG_CMBLOC));
	if (!(sz & NVME_CMBSZ_SQS) || bir < 2 || bir > 5)
		return 0;
	cfg_write(devfn, 4, 0);
	cfg_write(devfn, 0x10 + 4 * bir, (uint32_t)W_CMB_GPA);
	cfg_write(devfn, 0x14 + 4 * bir, 0);
	cfg_write(devfn, 4, 0x6);
	wr32(NVME_REG_CMBMSC, (uint32_t)W_CMB_GPA | 3);
	wr32(NVME_REG_CMBMSC + 4, 0);
	return W_CMB_GPA + (rd32(NVME_REG_CMBLOC) >> NVME_CMBLOC_OFST_SHIFT) * PAGE;
}

/* MSI-X entry 0 -> APIC 0, WORK_IRQ_VECTOR; every I/O CQ signals it (bench.wait=halt). */
static bool msix_setup(unsigned devfn)
{
	unsigned ptr = cfg_read(devfn, 0x34) & 0xfc, n = 0;

	while (ptr && n++ < 16) {
		uint32_t hdr = cfg_read(devfn, ptr);

		if ((hdr & 0xff) == 0x11) {
			uint32_t tbl = cfg_read(devfn, ptr + 4), bir = tbl & 7;
			volatile uint32_t *e;

			if (bir == 0) {
				e = (volatile uint32_t *)(W_BAR_GPA + (tbl & ~7u));
			} else if (bir <= 5) {
				cfg_write(devfn, 4, 0);
				cfg_write(devfn, 0x10 + 4 * bir, (uint32_t)W_MSIX_GPA);
				if ((cfg_read(devfn, 0x10 + 4 * bir) & 0x6) == 0x4)
					cfg_write(devfn, 0x14 + 4 * bir, 0);
				cfg_write(devfn, 4, 0x6);
				e = (volatile uint32_t *)(W_MSIX_GPA + (tbl & ~7u));
			} else {
				return false;
			}
			e[0] = 0xfee00000u;
			e[1] = 0;
			e[2] = WORK_IRQ_VECTOR;
			e[3] = 0;
			/* enable, function unmasked */
			cfg_write(devfn, ptr, (hdr & 0x3fffffff) | 1u << 31);
			return true;
		}
		ptr = (hdr >> 8) & 0xfc;
	}
	return false;
}

static bool w_submit(unsigned q, unsigned slot, bool write, uint64_t off, unsigned len,
		     uint64_t buf)
{
	struct nvme_sqe c = cmd(write ? NVME_CMD_WRITE : NVME_CMD_READ);
	uint64_t slba = (off >> lba_shift) + (vmode == LIGHTIOV_MODE_PASSTHROUGH ? lba_start : 0);
	unsigned i;

	q++;
	c.cid = (uint16_t)slot;
	c.nsid = 1;
	c.cdw10 = (uint32_t)slba;
	c.cdw11 = (uint32_t)(slba >> 32);
	c.cdw12 = (len >> lba_shift) - 1;
	c.prp1 = buf;
	if (len > 2 * PAGE) {
		/* one list serves every I/O: they all move the same buffer */
		for (i = 1; i * PAGE < len; i++)
			prplist[i - 1] = buf + i * PAGE;
		c.prp2 = (uint64_t)prplist;
	} else if (len > PAGE) {
		c.prp2 = buf + PAGE;
	}
	place(q, &c);
	return true;
}

static void w_kick(unsigned q)
{
	__asm__ volatile("mfence" ::: "memory");
	ring(q + 1, false, sq_tail[q + 1]);
}

static unsigned w_reap(unsigned q, uint16_t *slots, unsigned max, unsigned *errors)
{
	return reap_q(q + 1, slots, max, errors);
}

static void work_ring3(void)
{
	struct work_params p;
	struct work_dev dev = {.name = "nvme", .submit = w_submit, .kick = w_kick, .reap = w_reap};
	unsigned devfn, q, flbas;
	uint64_t cap, nsze, cmb = 0;
	struct nvme_sqe c;
	uint32_t dw0 = 0;

	work_params_get(&p);
	if (!find_nvme(&devfn)) {
		bench_puts("bench: work FAIL no NVMe controller\n");
		return;
	}
	read_vcap(devfn);
	cfg_write(devfn, 4, 0);
	cfg_write(devfn, 0x10, (uint32_t)W_BAR_GPA);
	cfg_write(devfn, 0x14, 0);
	cfg_write(devfn, 4, 0x6);
	regs = (volatile uint8_t *)W_BAR_GPA;
	cap = rd32(NVME_REG_CAP) | (uint64_t)rd32(NVME_REG_CAP + 4) << 32;
	dstrd = NVME_CAP_DSTRD(cap);
	if (!ctrl_enable()) {
		bench_printf("bench: work FAIL enable, csts %x\n", rd32(NVME_REG_CSTS));
		return;
	}
	c = cmd(NVME_ADMIN_IDENTIFY);
	c.nsid = 1;
	c.prp1 = (uint64_t)idbuf;
	if (admin(&c, NULL)) {
		bench_puts("bench: work FAIL identify namespace\n");
		return;
	}
	nsze = *(uint64_t *)idbuf;
	flbas = idbuf[26] & 0xf;
	lba_shift = (*(uint32_t *)(idbuf + 128 + 4 * flbas) >> 16) & 0xff;
	c = cmd(NVME_ADMIN_SET_FEATURES);
	c.cdw10 = 7;
	c.cdw11 = (p.nq - 1) << 16 | (p.nq - 1);
	if (admin(&c, &dw0) == 0) {
		unsigned granted = (dw0 & 0xffff) + 1, g2 = (dw0 >> 16) + 1;

		dev.nqueues = granted < g2 ? granted : g2;
	} else {
		dev.nqueues = 1;
	}
	if (dev.nqueues > p.nq)
		dev.nqueues = p.nq;
	entries[1] = p.qd + 1;
	if (entries[1] > NVME_CAP_MQES(cap) + 1)
		entries[1] = NVME_CAP_MQES(cap) + 1;
	if (entries[1] > WORK_MAX_DEPTH + 1)
		entries[1] = WORK_MAX_DEPTH + 1;
	dev.depth = entries[1] - 1;
	dev.capacity = nsze << lba_shift;
	dev.blk_shift = lba_shift;
	if (work_param_is("bench.dbbuf", "on")) {
		c = cmd(NVME_ADMIN_DBBUF);
		c.prp1 = (uint64_t)dbs_buf;
		c.prp2 = (uint64_t)eis_buf;
		shadow = admin(&c, NULL) == 0;
		if (!shadow)
			bench_puts(
			    "bench: work no shadow doorbells (Doorbell Buffer Config refused)\n");
	}
	if (work_param_is("bench.sq", "cmb")) {
		cmb = cmb_setup(devfn);
		if (!cmb)
			bench_puts("bench: work no CMB for SQs: SQs in RAM\n");
	}
	if (p.halt) {
		if (!msix_setup(devfn)) {
			bench_puts("bench: work no MSI-X: polling instead of halting\n");
			p.halt = false;
		} else {
			work_halt_setup();
		}
	}
	for (q = 1; q <= dev.nqueues; q++) {
		entries[q] = entries[1];
		phase[q] = 1;
		zero(&iocq[q - 1], sizeof(iocq[0]));
		c = cmd(NVME_ADMIN_CREATE_CQ);
		c.prp1 = (uint64_t)&iocq[q - 1];
		c.cdw10 = (entries[q] - 1) << 16 | q;
		c.cdw11 = p.halt ? 1 | 2 : 1; /* contiguous; halt: interrupts on vector 0 */
		if (admin(&c, NULL)) {
			bench_printf("bench: work FAIL create CQ %u\n", q);
			return;
		}
		cqs[q] = iocq[q - 1].e;
		c = cmd(NVME_ADMIN_CREATE_SQ);
		c.prp1 = cmb ? cmb + (uint64_t)(q - 1) * sizeof(iosq[0]) : (uint64_t)&iosq[q - 1];
		c.cdw10 = (entries[q] - 1) << 16 | q;
		c.cdw11 = q << 16 | 1;
		if (admin(&c, NULL)) {
			bench_printf("bench: work FAIL create SQ %u\n", q);
			return;
		}
		sqs[q] = (volatile struct nvme_sqe *)c.prp1;
	}
	bench_printf("bench: work nvme %lu blocks of %u, %u queue pairs of %u, mode %u, "
		     "doorbells %s, SQs in %s, %s\n",
		     nsze, 1u << lba_shift, dev.nqueues, dev.depth, vmode,
		     shadow ? "shadow" : "plain", cmb ? "the CMB" : "RAM",
		     p.halt ? "halting waits" : "polled");
	work_run(&dev, &p);
}

BENCH_MODE(work, NULL, work_ring3);
