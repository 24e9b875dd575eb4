/* Bench guest mode "work": a polled ring-3 NVMe driver for the workload engine on any controller
 * (lvmm's vNVMe in each mode, QEMU's nvme): several queue pairs, SQs in RAM or in the CMB
 * (bench.sq=cmb), plain or shadow doorbells (bench.dbbuf=on, or =late: configured once the
 * queues exist, as Linux does), LBA window of the LightIOV cap. */
#include "bench.h"
#include "lightiov/vcap.h"
#include "nvme_drv.h"
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

static struct nvme_drv drv = {.dbs = dbs_buf, .eis = eis_buf};
static unsigned lba_shift = 9;
static uint32_t vmode = LIGHTIOV_MODE_EMULATE;
static uint64_t lba_start;

/* The LightIOV capability when present: passthrough SQEs carry absolute LBAs. */
static void read_vcap(unsigned devfn)
{
	struct ndrv_vcap v;

	if (ndrv_read_vcap(&drv, devfn, &v)) {
		vmode = v.mode;
		lba_start = v.lba_start;
	}
}

/* The CMB's guest address for SQs, or 0. NVMe 1.4 controllers (QEMU) report it only once
 * CMBMSC.CRE is set and accept SQs in it once CMSE and the base address are written. */
static uint64_t cmb_setup(unsigned devfn)
{
	uint32_t sz = ndrv_rd32(&drv, NVME_REG_CMBSZ), bir;

	if (!sz) {
		ndrv_wr32(&drv, NVME_REG_CMBMSC, 1);
		sz = ndrv_rd32(&drv, NVME_REG_CMBSZ);
	}
	bir = NVME_CMBLOC_BIR(ndrv_rd32(&drv, NVME_REG_CMBLOC));
	if (!(sz & NVME_CMBSZ_SQS) || bir < 2 || bir > 5)
		return 0;
	ndrv_cfg_write(&drv, devfn, 4, 0);
	ndrv_cfg_write(&drv, devfn, 0x10 + 4 * bir, (uint32_t)W_CMB_GPA);
	ndrv_cfg_write(&drv, devfn, 0x14 + 4 * bir, 0);
	ndrv_cfg_write(&drv, devfn, 4, 0x6);
	ndrv_wr32(&drv, NVME_REG_CMBMSC, (uint32_t)W_CMB_GPA | 3);
	ndrv_wr32(&drv, NVME_REG_CMBMSC + 4, 0);
	return W_CMB_GPA + (ndrv_rd32(&drv, NVME_REG_CMBLOC) >> NVME_CMBLOC_OFST_SHIFT) * PAGE;
}

/* MSI-X entry 0 -> APIC 0, WORK_IRQ_VECTOR; every I/O CQ signals it (bench.wait=halt). */
static bool msix_setup(unsigned devfn)
{
	unsigned ptr = ndrv_find_cap(&drv, devfn, 0x11);
	uint32_t hdr, tbl, bir;
	volatile uint32_t *e;

	if (!ptr)
		return false;
	hdr = ndrv_cfg_read(&drv, devfn, ptr);
	tbl = ndrv_cfg_read(&drv, devfn, ptr + 4);
	bir = tbl & 7;
	if (bir == 0) {
		e = (volatile uint32_t *)(W_BAR_GPA + (tbl & ~7u));
	} else if (bir <= 5) {
		ndrv_cfg_write(&drv, devfn, 4, 0);
		ndrv_cfg_write(&drv, devfn, 0x10 + 4 * bir, (uint32_t)W_MSIX_GPA);
		if ((ndrv_cfg_read(&drv, devfn, 0x10 + 4 * bir) & 0x6) == 0x4)
			ndrv_cfg_write(&drv, devfn, 0x14 + 4 * bir, 0);
		ndrv_cfg_write(&drv, devfn, 4, 0x6);
		e = (volatile uint32_t *)(W_MSIX_GPA + (tbl & ~7u));
	} else {
		return false;
	}
	e[0] = 0xfee00000u;
	e[1] = 0;
	e[2] = WORK_IRQ_VECTOR;
	e[3] = 0;
	/* enable, function unmasked */
	ndrv_cfg_write(&drv, devfn, ptr, (hdr & 0x3fffffff) | 1u << 31);
	return true;
}

static bool w_submit(unsigned q, unsigned slot, bool write, uint64_t off, unsigned len,
		     uint64_t buf)
{
	struct nvme_sqe c = ndrv_cmd(write ? NVME_CMD_WRITE : NVME_CMD_READ);
	uint64_t slba = (off >> lba_shift) + (vmode == LIGHTIOV_MODE_PASSTHROUGH ? lba_start : 0);

	c.cid = (uint16_t)slot;
	c.nsid = 1;
	c.cdw10 = (uint32_t)slba;
	c.cdw11 = (uint32_t)(slba >> 32);
	c.cdw12 = (len >> lba_shift) - 1;
	/* one list serves every I/O: they all move the same buffer */
	ndrv_prps(&c, buf, len, prplist);
	ndrv_place(&drv, q + 1, &c);
	return true;
}

static void w_kick(unsigned q)
{
	ndrv_kick(&drv, q + 1);
}

static unsigned w_reap(unsigned q, uint16_t *slots, unsigned max, unsigned *errors)
{
	return ndrv_reap_batch(&drv, q + 1, slots, max, errors);
}

static uint16_t admin(struct nvme_sqe *c, uint32_t *dw0);

/* Doorbell Buffer Config: shadow doorbells from now on when the controller takes it. */
static void w_dbbuf(void)
{
	struct nvme_sqe c = ndrv_cmd(NVME_ADMIN_DBBUF);

	c.prp1 = (uint64_t)dbs_buf;
	c.prp2 = (uint64_t)eis_buf;
	drv.shadow = admin(&c, NULL) == 0;
	if (!drv.shadow)
		bench_puts("bench: work no shadow doorbells (Doorbell Buffer Config refused)\n");
}

static uint16_t admin(struct nvme_sqe *c, uint32_t *dw0)
{
	return ndrv_run(&drv, 0, c, dw0);
}

static void work_ring3(void)
{
	struct work_params p;
	struct work_dev dev = {.name = "nvme", .submit = w_submit, .kick = w_kick, .reap = w_reap};
	unsigned devfn, q, flbas, entries;
	uint64_t cap, nsze, cmb = 0;
	struct nvme_sqe c;
	uint32_t dw0 = 0;

	work_params_get(&p);
	if (!ndrv_find(&drv, &devfn, W_ECAM)) {
		bench_puts("bench: work FAIL no NVMe controller\n");
		return;
	}
	bench_printf("bench: work nvme at 00:%x.0 id %x%s\n", devfn >> 3,
		     ndrv_cfg_read(&drv, devfn, 0), drv.ecam ? " (ECAM)" : "");
	read_vcap(devfn);
	ndrv_place_bar0(&drv, devfn, W_BAR_GPA);
	cap = ndrv_cap(&drv);
	if (!ndrv_enable(&drv, asq, acq, AQ_DEPTH)) {
		bench_printf("bench: work FAIL enable, csts %x\n", ndrv_rd32(&drv, NVME_REG_CSTS));
		return;
	}
	c = ndrv_cmd(NVME_ADMIN_IDENTIFY);
	c.nsid = 1;
	c.prp1 = (uint64_t)idbuf;
	if (admin(&c, NULL)) {
		bench_puts("bench: work FAIL identify namespace\n");
		return;
	}
	nsze = *(uint64_t *)idbuf;
	flbas = idbuf[26] & 0xf;
	lba_shift = (*(uint32_t *)(idbuf + 128 + 4 * flbas) >> 16) & 0xff;
	c = ndrv_cmd(NVME_ADMIN_SET_FEATURES);
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
	entries = p.qd + 1;
	if (entries > NVME_CAP_MQES(cap) + 1)
		entries = NVME_CAP_MQES(cap) + 1;
	if (entries > WORK_MAX_DEPTH + 1)
		entries = WORK_MAX_DEPTH + 1;
	dev.depth = entries - 1;
	dev.capacity = nsze << lba_shift;
	dev.blk_shift = lba_shift;
	if (work_param_is("bench.dbbuf", "on"))
		w_dbbuf();
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
		uint64_t sq =
		    cmb ? cmb + (uint64_t)(q - 1) * sizeof(iosq[0]) : (uint64_t)&iosq[q - 1];

		ndrv_queue(&drv, q, (volatile void *)sq, &iocq[q - 1], entries);
		c = ndrv_cmd(NVME_ADMIN_CREATE_CQ);
		c.prp1 = (uint64_t)&iocq[q - 1];
		c.cdw10 = (entries - 1) << 16 | q;
		c.cdw11 = p.halt ? 1 | 2 : 1; /* contiguous; halt: interrupts on vector 0 */
		if (admin(&c, NULL)) {
			bench_printf("bench: work FAIL create CQ %u\n", q);
			return;
		}
		c = ndrv_cmd(NVME_ADMIN_CREATE_SQ);
		c.prp1 = sq;
		c.cdw10 = (entries - 1) << 16 | q;
		c.cdw11 = q << 16 | 1;
		if (admin(&c, NULL)) {
			bench_printf("bench: work FAIL create SQ %u\n", q);
			return;
		}
	}
	/* late: after the queues exist, as the Linux driver sends it */
	if (work_param_is("bench.dbbuf", "late"))
		w_dbbuf();
	bench_printf("bench: work nvme %lu blocks of %u, %u queue pairs of %u, mode %u, "
		     "doorbells %s, SQs in %s, %s\n",
		     nsze, 1u << lba_shift, dev.nqueues, dev.depth, vmode,
		     drv.shadow ? "shadow" : "plain", cmb ? "the CMB" : "RAM",
		     p.halt ? "halting waits" : "polled");
	work_run(&dev, &p);
}

BENCH_MODE(work, NULL, work_ring3);
