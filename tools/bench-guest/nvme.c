/* Bench guest mode "nvme": a polled ring-3 NVMe driver. Finds the controller on PCI bus 0, moves
 * BAR0 into the 32-bit hole (the guest maps only the low 4 GiB), then runs init, Identify, queue
 * creation, write/flush/read/verify through PRP lists, negative admin cases and a QD1 read loop. */
#include "bench.h"
#include "lightiov/vcap.h"
#include "nvme_drv.h"

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

static struct nvme_drv drv = {.dbs = dbs_buf, .eis = eis_buf};
static unsigned failures;

static void check(bool ok, const char *what)
{
	if (!ok) {
		bench_printf("bench: nvme FAIL %s\n", what);
		failures++;
	}
}

static uint16_t run(unsigned q, struct nvme_sqe *c, uint32_t *dw0)
{
	return ndrv_run(&drv, q, c, dw0);
}

static bool find_nvme(unsigned *devfn)
{
	if (!ndrv_find(&drv, devfn, 0))
		return false;
	bench_printf("bench: nvme at 00:%x.0 id %x\n", *devfn >> 3, ndrv_cfg_read(&drv, *devfn, 0));
	return true;
}

/* Capability list: MSI-X, and the LightIOV vendor capability in emulate mode (windows zero). */
static void check_caps(unsigned devfn)
{
	struct ndrv_vcap v;
	bool vcap = false;

	if (ndrv_read_vcap(&drv, devfn, &v)) {
		vcap = v.mode == 0 && v.lba_start == 0 && v.lba_size == 0;
		bench_printf("bench: nvme LightIOV capability at %x, mode %u\n",
			     ndrv_find_cap(&drv, devfn, LIGHTIOV_VCAP_ID), v.mode);
	}
	check(ndrv_find_cap(&drv, devfn, 0x11) != 0, "MSI-X capability");
	check(vcap, "LightIOV vendor capability, emulate mode");
}

static bool ctrl_init(void)
{
	uint64_t cap = ndrv_cap(&drv);

	bench_printf("bench: nvme cap %lx vs %x mqes %u dstrd %u\n", cap,
		     ndrv_rd32(&drv, NVME_REG_VS), NVME_CAP_MQES(cap) + 1, NVME_CAP_DSTRD(cap));
	if (!ndrv_enable(&drv, asq, acq, QD))
		return false;
	ndrv_queue(&drv, 1, iosq, iocq, QD);
	return true;
}

static struct nvme_sqe rw(uint8_t op, uint64_t slba, unsigned len, uint8_t *buf)
{
	struct nvme_sqe c = ndrv_cmd(op);

	c.nsid = 1;
	c.cdw10 = (uint32_t)slba;
	c.cdw11 = (uint32_t)(slba >> 32);
	c.cdw12 = len / 512 - 1;
	ndrv_prps(&c, (uint64_t)buf, len, prplist);
	return c;
}

/* I/O SQ in the controller memory buffer: SQE writes land in memory the controller reads,
 * without an exit. BAR2 moves below 4 GiB where this guest has page tables. */
static void cmb_loop(unsigned devfn, uint64_t nsze)
{
	bool cmbs = ndrv_rd32(&drv, NVME_REG_CAP + 4) & (uint32_t)(NVME_CAP_CMBS >> 32);
	uint32_t cmbsz, bir;
	uint64_t t0, t1;
	struct nvme_sqe c;
	unsigned i;

	/* NVMe 1.4 (CAP.CMBS): CMBLOC and CMBSZ read zero until CMBMSC.CRE asks for them */
	if (cmbs) {
		check(ndrv_rd32(&drv, NVME_REG_CMBSZ) == 0, "CMBSZ zero before CMBMSC.CRE");
		ndrv_wr32(&drv, NVME_REG_CMBMSC, NVME_CMBMSC_CRE);
	}
	cmbsz = ndrv_rd32(&drv, NVME_REG_CMBSZ);
	bir = NVME_CMBLOC_BIR(ndrv_rd32(&drv, NVME_REG_CMBLOC));
	if (!(cmbsz & NVME_CMBSZ_SQS) || bir != 2) {
		bench_puts("bench: nvme no CMB for SQs, skipped\n");
		return;
	}
	ndrv_cfg_write(&drv, devfn, 4, 0);
	ndrv_cfg_write(&drv, devfn, 0x18, (uint32_t)NVME_CMB_GPA);
	ndrv_cfg_write(&drv, devfn, 0x1c, 0);
	ndrv_cfg_write(&drv, devfn, 0x10, (uint32_t)NVME_BAR_GPA); /* BAR0 stays */
	ndrv_cfg_write(&drv, devfn, 4, 0x6);
	if (cmbs) {
		/* the controller memory space at the BAR's new address (high half first) */
		ndrv_wr32(&drv, NVME_REG_CMBMSC + 4, 0);
		ndrv_wr32(&drv, NVME_REG_CMBMSC,
			  (uint32_t)(NVME_CMBMSC_CRE | NVME_CMBMSC_CMSE | NVME_CMB_GPA));
		check(!(ndrv_rd32(&drv, NVME_REG_CMBSTS) & NVME_CMBSTS_CBAI),
		      "CMB base address accepted");
	}
	c = ndrv_cmd(NVME_ADMIN_DELETE_SQ);
	c.cdw10 = 1;
	check(run(0, &c, NULL) == 0, "delete SQ 1");
	c = ndrv_cmd(NVME_ADMIN_CREATE_SQ);
	c.prp1 = NVME_CMB_GPA;
	c.cdw10 = (QD - 1) << 16 | 1;
	c.cdw11 = 1 << 16 | 1;
	check(run(0, &c, NULL) == 0, "create SQ 1 in the CMB");
	/* the SQ moves, the CQ carries on where it was */
	drv.q[1].sq = (volatile struct nvme_sqe *)NVME_CMB_GPA;
	drv.q[1].sq_tail = 0;
	ndrv_zero(rbuf, XFER);
	c = rw(NVME_CMD_READ, 0, XFER, rbuf);
	check(run(1, &c, NULL) == 0, "read 64 KiB through a CMB SQ");
	for (i = 0; i < XFER && rbuf[i] == wbuf[i]; i++)
		;
	check(i == XFER, "CMB SQ read data matches");
	drv.db_mmio_writes = 0;
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
		     i, (t1 - t0) / (i ? i : 1), drv.db_mmio_writes * 100 / (i ? i : 1));
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
	ndrv_place_bar0(&drv, devfn, NVME_BAR_GPA);
	if (!ctrl_init()) {
		bench_printf("bench: nvme FAIL enable, csts %x\n", ndrv_rd32(&drv, NVME_REG_CSTS));
		return;
	}
	c = ndrv_cmd(NVME_ADMIN_IDENTIFY);
	c.cdw10 = 1;
	c.prp1 = (uint64_t)idbuf;
	check(run(0, &c, NULL) == 0, "identify controller");
	bench_printf("bench: nvme model '%s'\n", "lvmm");
	check(idbuf[24] == 'l' && idbuf[25] == 'v', "model number");
	check(*(uint32_t *)(idbuf + 516) == 1, "one namespace");
	c = ndrv_cmd(NVME_ADMIN_IDENTIFY);
	c.nsid = 1;
	c.cdw10 = 0;
	c.prp1 = (uint64_t)idbuf;
	check(run(0, &c, NULL) == 0, "identify namespace");
	nsze = *(uint64_t *)idbuf;
	bench_printf("bench: nvme namespace %lu blocks\n", nsze);
	c = ndrv_cmd(NVME_ADMIN_SET_FEATURES);
	c.cdw10 = 7;
	c.cdw11 = 1 << 16 | 1; /* two pairs asked; as many as vCPUs granted */
	check(run(0, &c, &dw0) == 0, "set number of queues");
	c = ndrv_cmd(NVME_ADMIN_CREATE_CQ);
	c.prp1 = (uint64_t)iocq;
	c.cdw10 = (QD - 1) << 16 | 1;
	c.cdw11 = 1; /* contiguous, interrupts off: this driver polls */
	check(run(0, &c, NULL) == 0, "create CQ");
	c = ndrv_cmd(NVME_ADMIN_CREATE_SQ);
	c.prp1 = (uint64_t)iosq;
	c.cdw10 = (QD - 1) << 16 | 1;
	c.cdw11 = 1 << 16 | 1;
	check(run(0, &c, NULL) == 0, "create SQ");

	/* Write, flush, read back through a PRP list, verify. */
	for (i = 0; i < XFER; i++)
		wbuf[i] = (uint8_t)(i * 13 + (i >> 9) + 0x5a);
	c = rw(NVME_CMD_WRITE, 0, XFER, wbuf);
	check(run(1, &c, NULL) == 0, "write 64 KiB");
	c = ndrv_cmd(NVME_CMD_FLUSH);
	c.nsid = 1;
	check(run(1, &c, NULL) == 0, "flush");
	ndrv_zero(rbuf, XFER);
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
	c = ndrv_cmd(NVME_ADMIN_DELETE_SQ);
	c.cdw10 = 0;
	check(run(0, &c, NULL) == 0x101, "delete SQ 0: invalid queue identifier");
	c = ndrv_cmd(NVME_ADMIN_CREATE_SQ);
	c.prp1 = (uint64_t)rbuf;
	c.cdw10 = 0 << 16 | 2;
	c.cdw11 = 1 << 16 | 1;
	check(run(0, &c, NULL) == 0x102 || !(dw0 & 0xffff), "create SQ size 0: invalid queue size");
	c.cdw10 = 1024u << 16 | 2; /* MQES + 1 entries */
	check(run(0, &c, NULL) == 0x102 || !(dw0 & 0xffff), "create SQ MQES+1: invalid queue size");
	c = ndrv_cmd(NVME_ADMIN_DELETE_CQ);
	c.cdw10 = 1;
	check(run(0, &c, NULL) == 0x10c, "delete CQ with an SQ: invalid queue deletion");
	c = ndrv_cmd(NVME_ADMIN_IDENTIFY);
	c.cdw10 = 1;
	c.prp1 = (uint64_t)idbuf + 2048;
	check(run(0, &c, NULL) == 0x2, "identify with a short PRP: invalid field");
	c = ndrv_cmd(NVME_ADMIN_IDENTIFY);
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
	c = ndrv_cmd(NVME_ADMIN_DBBUF);
	c.prp1 = (uint64_t)dbs_buf;
	c.prp2 = (uint64_t)eis_buf;
	check(run(0, &c, NULL) == 0, "doorbell buffer config");
	drv.shadow = true;
	drv.db_mmio_writes = 0;
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
		     i, (t1 - t0) / (i ? i : 1), drv.db_mmio_writes * 100 / (i ? i : 1));
	cmb_loop(devfn, nsze);
	bench_printf("bench: nvme %s (%u failures)\n", failures ? "FAILED" : "passed", failures);
}

BENCH_MODE(nvme, NULL, nvme_ring3);
