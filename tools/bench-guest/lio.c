/* Bench guest modes "lio" and "hostile": the ring-3 polled driver against a vNVMe in passthrough
 * or isolated mode (a softssd volume). lio writes, reads back and verifies a seeded pattern, then
 * times a QD1 loop; hostile (isolated mode) throws out-of-window and malformed commands at it. */
#include "bench.h"
#include "lightiov/vcap.h"
#include "nvme_drv.h"

#define LIO_BAR_GPA 0xc0000000ULL /* LAYOUT_MMIO32_START */
#define LIO_CMB_GPA 0xd0000000ULL
#define QD	    32
#define PAGE	    4096
#define XFER	    (64 * 1024)
#define LBA	    lba_bytes /* the namespace's format: 512 or 4096 */

static uint8_t asq[PAGE] __attribute__((aligned(PAGE)));
static uint8_t acq[PAGE] __attribute__((aligned(PAGE)));
static uint8_t iosq[PAGE * 2] __attribute__((aligned(PAGE)));
static uint8_t iocq[PAGE] __attribute__((aligned(PAGE)));
static uint8_t idbuf[PAGE] __attribute__((aligned(PAGE)));
static uint64_t prplist[PAGE / 8] __attribute__((aligned(PAGE)));
static uint8_t wbuf[XFER] __attribute__((aligned(PAGE)));
static uint8_t rbuf[XFER] __attribute__((aligned(PAGE)));
/* two slots per queue, one doorbell stride apart: 4 pages cover queues 0 and 1 at DSTRD 10 */
static uint8_t dbs_buf[4 * PAGE] __attribute__((aligned(PAGE)));
static uint8_t eis_buf[4 * PAGE] __attribute__((aligned(PAGE)));

static struct nvme_drv drv = {.dbs = dbs_buf, .eis = eis_buf};
static unsigned failures;
static uint32_t vmode;
static uint64_t lba_start, lba_size, dma_size, nsze;
static unsigned lba_bytes = 512, nvme_devfn;

static uint64_t param_u64(const char *name, uint64_t def)
{
	char buf[32];
	uint64_t v = 0;
	unsigned i;

	if (!bench_param(name, buf, sizeof(buf)) || !buf[0])
		return def;
	for (i = 0; buf[i] >= '0' && buf[i] <= '9'; i++)
		v = v * 10 + (uint64_t)(buf[i] - '0');
	return v;
}

static bool param_is(const char *name, const char *want)
{
	char buf[32];

	return bench_param(name, buf, sizeof(buf)) && !bench_strcmp(buf, want);
}

static void check(bool ok, const char *what)
{
	if (!ok) {
		bench_printf("bench: lio FAIL %s\n", what);
		failures++;
	}
}

static void submit(unsigned q, struct nvme_sqe *c)
{
	ndrv_submit(&drv, q, c);
}

/* The next completion's status field (no phase bit, DNR kept), 0xffff after timeout_ms. */
static uint16_t reap_ms(unsigned q, uint32_t *dw0, uint64_t timeout_ms)
{
	return ndrv_reap(&drv, q, dw0, timeout_ms);
}

static uint16_t run(unsigned q, struct nvme_sqe *c, uint32_t *dw0)
{
	return ndrv_run(&drv, q, c, dw0);
}

/* A read or write of len bytes at window-relative slba: passthrough adds lba_start itself. */
static struct nvme_sqe rw(uint8_t op, uint64_t slba, unsigned len, uint8_t *buf)
{
	struct nvme_sqe c = ndrv_cmd(op);

	if (vmode == LIGHTIOV_MODE_PASSTHROUGH)
		slba += lba_start;
	c.nsid = 1;
	c.cdw10 = (uint32_t)slba;
	c.cdw11 = (uint32_t)(slba >> 32);
	c.cdw12 = len / LBA - 1;
	ndrv_prps(&c, (uint64_t)buf, len, prplist);
	return c;
}

static uint8_t pattern(uint64_t seed, uint64_t lba, unsigned i)
{
	uint64_t x = (seed + 1) * 0x9e3779b97f4a7c15ULL ^ (lba * LBA + i) * 0xbf58476d1ce4e5b9ULL;

	return (uint8_t)(x >> 56);
}

/* The LightIOV capability: mode, LBA window, DMA window. */
static bool read_vcap(unsigned devfn)
{
	struct ndrv_vcap v;

	if (!ndrv_read_vcap(&drv, devfn, &v))
		return false;
	vmode = v.mode;
	lba_start = v.lba_start;
	lba_size = v.lba_size;
	dma_size = v.dma_size;
	bench_printf("bench: lio vcap mode %u lba_start %lu lba_size %lu dma_size %lx\n", vmode,
		     lba_start, lba_size, dma_size);
	return true;
}

static bool ctrl_init(void)
{
	bench_printf("bench: lio cap dstrd %u cmbsz %x\n", NVME_CAP_DSTRD(ndrv_cap(&drv)),
		     ndrv_rd32(&drv, NVME_REG_CMBSZ));
	return ndrv_enable(&drv, asq, acq, QD);
}

/* Finds the controller, moves its BARs below 4 GiB, enables it, identifies the namespace and
 * creates I/O queue pair 1 (SQ in RAM or, with bench.sq=cmb, in the CMB). */
static bool lio_queues(void);

static bool lio_setup(void)
{
	unsigned devfn;
	struct nvme_sqe c;

	if (!ndrv_find(&drv, &devfn, 0)) {
		bench_puts("bench: lio FAIL no controller\n");
		return false;
	}
	nvme_devfn = devfn;
	check(read_vcap(devfn), "LightIOV vendor capability");
	ndrv_cfg_write(&drv, devfn, 4, 0);
	ndrv_cfg_write(&drv, devfn, 0x18, (uint32_t)LIO_CMB_GPA);
	ndrv_cfg_write(&drv, devfn, 0x1c, 0);
	ndrv_place_bar0(&drv, devfn, LIO_BAR_GPA);
	/* NVMe 1.4 (CAP.CMBS): CMBSZ shows once CMBMSC.CRE is set, SQs go in once the controller
	 * memory space is enabled at the BAR's address */
	if (ndrv_rd32(&drv, NVME_REG_CAP + 4) & (uint32_t)(NVME_CAP_CMBS >> 32)) {
		ndrv_wr32(&drv, NVME_REG_CMBMSC + 4, 0);
		ndrv_wr32(&drv, NVME_REG_CMBMSC,
			  (uint32_t)(NVME_CMBMSC_CRE | NVME_CMBMSC_CMSE | LIO_CMB_GPA));
		check(!(ndrv_rd32(&drv, NVME_REG_CMBSTS) & NVME_CMBSTS_CBAI),
		      "CMB base address accepted");
	}
	if (!ctrl_init()) {
		bench_printf("bench: lio FAIL enable, csts %x\n", ndrv_rd32(&drv, NVME_REG_CSTS));
		return false;
	}
	c = ndrv_cmd(NVME_ADMIN_IDENTIFY);
	c.nsid = 1;
	c.prp1 = (uint64_t)idbuf;
	check(run(0, &c, NULL) == 0, "identify namespace");
	nsze = *(uint64_t *)idbuf;
	/* FLBAS picks the format; LBA Format ds is log2 of its data size */
	lba_bytes = 1u << idbuf[128 + 4 * (idbuf[26] & 0xf) + 2];
	bench_printf("bench: lio namespace %lu blocks of %u bytes\n", nsze, lba_bytes);
	check(lba_bytes == 512 || lba_bytes == 4096, "LBA format of 512 or 4096 bytes");
	/* emulate: a file, no window (the same loops compare) */
	if (vmode != LIGHTIOV_MODE_EMULATE)
		check(nsze == lba_size, "namespace size is the capability's LBA window");
	return lio_queues();
}

/* bench.dbbuf=late: Doorbell Buffer Config once I/O queue pair 1 exists, with commands rung on
 * its plain doorbells and not reaped (doorbell=auto moves the pair to eventfd doorbells then):
 * each completes exactly once, and later I/O rings through the shadow buffer. */
static void lio_dbbuf_late(void)
{
	unsigned i, done = 0;
	struct nvme_sqe c;

	for (i = 0; i < 4; i++) {
		c = rw(NVME_CMD_READ, 8 * i, PAGE, rbuf);
		submit(1, &c);
	}
	c = ndrv_cmd(NVME_ADMIN_DBBUF);
	c.prp1 = (uint64_t)dbs_buf;
	c.prp2 = (uint64_t)eis_buf;
	check(run(0, &c, NULL) == 0, "doorbell buffer config after queue creation");
	drv.shadow = true;
	for (i = 0; i < 4; i++)
		done += reap_ms(1, NULL, 2000) == 0;
	check(done == 4, "the commands rung before the switch complete");
	check(reap_ms(1, NULL, 100) == 0xffff, "each of them once");
	/* a command rung through the shadow buffer */
	c = rw(NVME_CMD_READ, 0, PAGE, rbuf);
	check(run(1, &c, NULL) == 0, "a read after the switch");
	bench_printf("bench: lio late dbbuf: %u of 4 completed once\n", done);
}

/* Doorbell Buffer Config when asked (bench.dbbuf=on), then I/O queue pair 1 from scratch. */
static bool lio_queues(void)
{
	volatile void *sq = param_is("bench.sq", "cmb") ? (volatile void *)LIO_CMB_GPA : iosq;
	struct nvme_sqe c;

	ndrv_queue(&drv, 1, sq, iocq, QD);
	if (param_is("bench.dbbuf", "on")) {
		c = ndrv_cmd(NVME_ADMIN_DBBUF);
		c.prp1 = (uint64_t)dbs_buf;
		c.prp2 = (uint64_t)eis_buf;
		check(run(0, &c, NULL) == 0, "doorbell buffer config");
		drv.shadow = true;
	}
	c = ndrv_cmd(NVME_ADMIN_CREATE_CQ);
	c.prp1 = (uint64_t)iocq;
	c.cdw10 = (QD - 1) << 16 | 1;
	c.cdw11 = 1; /* contiguous, interrupts off: this driver polls */
	check(run(0, &c, NULL) == 0, "create CQ");
	c = ndrv_cmd(NVME_ADMIN_CREATE_SQ);
	c.prp1 = param_is("bench.sq", "cmb") ? LIO_CMB_GPA : (uint64_t)iosq;
	c.cdw10 = (QD - 1) << 16 | 1;
	c.cdw11 = 1 << 16 | 1;
	check(run(0, &c, NULL) == 0, "create SQ");
	bench_printf("bench: lio SQ 1 in %s\n", c.prp1 == LIO_CMB_GPA ? "the CMB" : "RAM");
	if (param_is("bench.dbbuf", "late") && !failures)
		lio_dbbuf_late();
	return !failures;
}

/* Writes the seeded pattern over [lba, lba + n) in 64 KiB commands (bench.op=rw), reads it all
 * back and compares. */
static void lio_rw(uint64_t seed, uint64_t lba0, uint64_t n, bool write)
{
	uint64_t lba, bad = 0;
	struct nvme_sqe c;
	unsigned i, k;

	for (lba = lba0; write && lba < lba0 + n; lba += XFER / LBA) {
		k = (lba0 + n - lba) * LBA < XFER ? (unsigned)((lba0 + n - lba) * LBA) : XFER;
		for (i = 0; i < k; i++)
			wbuf[i] = pattern(seed, lba, i);
		c = rw(NVME_CMD_WRITE, lba, k, wbuf);
		if (run(1, &c, NULL)) {
			check(false, "write");
			return;
		}
	}
	c = ndrv_cmd(NVME_CMD_FLUSH);
	c.nsid = 1;
	check(run(1, &c, NULL) == 0, "flush");
	for (lba = lba0; lba < lba0 + n; lba += XFER / LBA) {
		k = (lba0 + n - lba) * LBA < XFER ? (unsigned)((lba0 + n - lba) * LBA) : XFER;
		ndrv_zero(rbuf, k);
		c = rw(NVME_CMD_READ, lba, k, rbuf);
		if (run(1, &c, NULL)) {
			check(false, "read");
			return;
		}
		for (i = 0; i < k; i++)
			bad += rbuf[i] != pattern(seed, lba, i);
	}
	bench_printf("bench: lio %s %lu blocks at %lu seed %lu: %lu bytes differ\n",
		     write ? "wrote and read" : "read", n, lba0, seed, bad);
	check(!bad, "read data matches the pattern");
}

/* The queue pair goes and comes back twice, the data with it: Delete SQ and CQ, then a
 * controller reset (CC.EN = 0) and a fresh init; each time a new backend queue pair serves. */
static void lio_again(uint64_t seed, uint64_t lba0, uint64_t n)
{
	struct nvme_sqe c;
	uint64_t deadline;

	c = ndrv_cmd(NVME_ADMIN_DELETE_SQ);
	c.cdw10 = 1;
	check(run(0, &c, NULL) == 0, "delete SQ 1");
	c = ndrv_cmd(NVME_ADMIN_DELETE_CQ);
	c.cdw10 = 1;
	check(run(0, &c, NULL) == 0, "delete CQ 1");
	if (!lio_queues())
		return;
	lio_rw(seed, lba0, n, false);
	/* reset with the queue pair bound: the backend lets go of it with the admin queue */
	ndrv_wr32(&drv, NVME_REG_CC, 0);
	deadline = bench_ns() + 2000000000ULL;
	while ((ndrv_rd32(&drv, NVME_REG_CSTS) & NVME_CSTS_RDY) && bench_ns() < deadline)
		;
	if (!ctrl_init()) {
		check(false, "enable after reset");
		return;
	}
	if (!lio_queues())
		return;
	lio_rw(seed, lba0, n, false);
	if (!failures)
		bench_puts("bench: lio requeue and reset ok\n");
}

/* Function Level Reset (bench.flr=on) with the queue pair bound and data on the volume: the
 * function comes back as after power-on (no decode, BARs unassigned, MSI-X off, controller
 * disabled), the backend's queue pair is gone, and a fresh set-up reads the pattern back. */
static void lio_flr(uint64_t seed, uint64_t lba0, uint64_t n)
{
	unsigned pcie = ndrv_find_cap(&drv, nvme_devfn, 0x10);
	unsigned msix = ndrv_find_cap(&drv, nvme_devfn, 0x11);

	check(pcie && (ndrv_cfg_read(&drv, nvme_devfn, pcie + 4) & (1u << 28)),
	      "PCIe capability with FLR");
	check(msix != 0, "MSI-X capability");
	if (failures)
		return;
	/* MSI-X on with the function masked (this driver polls): FLR must turn both off */
	ndrv_cfg_write(&drv, nvme_devfn, msix,
		       ndrv_cfg_read(&drv, nvme_devfn, msix) | 0xc000u << 16);
	ndrv_cfg_write(&drv, nvme_devfn, pcie + 8,
		       ndrv_cfg_read(&drv, nvme_devfn, pcie + 8) | 0x8000);
	check((ndrv_cfg_read(&drv, nvme_devfn, 4) & 0x7) == 0, "command register cleared by FLR");
	check((ndrv_cfg_read(&drv, nvme_devfn, 0x10) & ~0xfu) == 0, "BAR0 unassigned by FLR");
	check(!(ndrv_cfg_read(&drv, nvme_devfn, msix) >> 16 & 0xc000), "MSI-X disabled by FLR");
	check(!(ndrv_cfg_read(&drv, nvme_devfn, pcie + 8) & 0x8000), "Initiate FLR reads 0");
	if (!lio_setup())
		return;
	check(ndrv_rd32(&drv, NVME_REG_CSTS) & NVME_CSTS_RDY, "enabled again after FLR");
	lio_rw(seed, lba0, n, false);
	if (!failures)
		bench_puts("bench: lio flr ok\n");
}

static void lio_ring3(void)
{
	uint64_t seed = param_u64("bench.seed", 1), lba0 = param_u64("bench.lba", 0);
	uint64_t n = param_u64("bench.blocks", 1024), ios = param_u64("bench.ios", 2000);
	uint64_t t0, t1, i;
	struct nvme_sqe c;

	if (!lio_setup())
		goto out;
	if (lba0 + n > nsze)
		n = lba0 < nsze ? nsze - lba0 : 0;
	if (param_is("bench.vwc", "off")) {
		/* volatile write cache off: the backend must make each write durable */
		uint32_t dw0 = ~0u;

		c = ndrv_cmd(NVME_ADMIN_SET_FEATURES);
		c.cdw10 = NVME_FEAT_VOLATILE_WC;
		check(run(0, &c, NULL) == 0, "set features: volatile write cache off");
		c = ndrv_cmd(NVME_ADMIN_GET_FEATURES);
		c.cdw10 = NVME_FEAT_VOLATILE_WC;
		check(run(0, &c, &dw0) == 0 && dw0 == 0, "volatile write cache reads off");
		bench_puts("bench: lio volatile write cache off\n");
	}
	lio_rw(seed, lba0, n, !param_is("bench.op", "verify"));
	/* isolated: the host enforces the window; passthrough trusts this driver to */
	c = rw(NVME_CMD_READ, nsze, PAGE, rbuf);
	if (vmode != LIGHTIOV_MODE_PASSTHROUGH)
		check(run(1, &c, NULL) == NVME_SC_LBA_RANGE,
		      "read past the window: LBA out of range");
	if (!failures)
		bench_puts("bench: lio rw ok\n");
	if (param_is("bench.flr", "on"))
		lio_flr(seed, lba0, n);
	t0 = bench_ns();
	for (i = 0; i < ios; i++) {
		c = rw(NVME_CMD_READ, (i * 8) % (nsze - 8), PAGE, rbuf);
		if (run(1, &c, NULL)) {
			check(false, "qd1 read");
			break;
		}
	}
	t1 = bench_ns();
	bench_printf("bench: lio qd1 4k read: %lu I/Os, %lu ns/io\n", i, (t1 - t0) / (i ? i : 1));
	if (i < ios) {
		/* the backend is gone, or stalled: CSTS tells a driver which */
		bench_printf("bench: lio csts %x\n", ndrv_rd32(&drv, NVME_REG_CSTS));
		goto out;
	}
	lio_again(seed, lba0, n);
out:
	bench_printf("bench: lio %s (%u failures)\n", failures ? "FAILED" : "passed", failures);
}

BENCH_MODE(lio, NULL, lio_ring3);

/* ---- hostile: isolated mode must refuse or contain every one of these ---- */

/* Submits c on queue 1 and wants an error completion (or none: a dropped command). */
static void expect_refused(struct nvme_sqe *c, const char *what)
{
	uint16_t st;

	submit(1, c);
	st = reap_ms(1, NULL, 2000);
	if (st == 0xffff) {
		bench_printf("bench: hostile %s: dropped\n", what);
		/* the slot stays consumed; keep the ring in step with the controller */
		return;
	}
	bench_printf("bench: hostile %s: status %x\n", what, st & 0x7ff);
	check((st & 0x7ff) != 0, what);
}

static void hostile_ring3(void)
{
	uint64_t outside = dma_size, seed = param_u64("bench.seed", 7);
	struct nvme_sqe c;
	unsigned i;

	if (!lio_setup())
		goto out;
	outside = dma_size ? dma_size : 0x100000000ULL;
	if (vmode != LIGHTIOV_MODE_ISOLATED)
		check(false, "hostile mode wants an isolated vNVMe");
	for (i = 0; i < XFER; i++)
		wbuf[i] = 0xee;
	/* LBAs past the window, relative and as if passthrough (absolute, window added twice) */
	c = rw(NVME_CMD_WRITE, nsze, PAGE, wbuf);
	expect_refused(&c, "write past the window");
	c = rw(NVME_CMD_WRITE, nsze + lba_start, PAGE, wbuf);
	expect_refused(&c, "write at the window's absolute LBA");
	c = rw(NVME_CMD_WRITE, ~0ULL - 3, PAGE, wbuf);
	expect_refused(&c, "write at LBA 2^64-4 (wraps)");
	/* NLB overflow: the last block plus 65536 */
	c = rw(NVME_CMD_WRITE, nsze - 1, PAGE, wbuf);
	c.cdw12 = 0xffff;
	expect_refused(&c, "write with NLB past the end");
	/* data pointers outside guest memory (another VM's, the host's) */
	c = rw(NVME_CMD_READ, 0, PAGE, rbuf);
	c.prp1 = outside;
	expect_refused(&c, "read into PRP1 above guest RAM");
	c = rw(NVME_CMD_WRITE, 0, PAGE, wbuf);
	c.prp1 = 0xfee00000ULL;
	expect_refused(&c, "write from PRP1 at the LAPIC");
	c = rw(NVME_CMD_READ, 0, XFER, rbuf);
	prplist[3] = outside + 0x10000;
	expect_refused(&c, "read through a PRP list entry outside RAM");
	c = rw(NVME_CMD_READ, 0, XFER, rbuf);
	c.prp2 = outside;
	expect_refused(&c, "read through a PRP list outside RAM");
	c = rw(NVME_CMD_READ, 0, 2 * PAGE, rbuf);
	c.prp2 = 0x7fff00000000ULL;
	expect_refused(&c, "read with PRP2 at a host-like address");
	c = rw(NVME_CMD_READ, 0, PAGE, rbuf);
	c.nsid = 2;
	expect_refused(&c, "read on namespace 2");
	c = rw(NVME_CMD_READ, 0, PAGE, rbuf);
	c.opcode = 0x7f;
	expect_refused(&c, "unknown opcode");
	/* an SQE rewritten after the doorbell: whichever copy the backend took, it stays inside */
	c = rw(NVME_CMD_WRITE, 8, PAGE, wbuf);
	submit(1, &c);
	drv.q[1].sq[(drv.q[1].sq_tail + QD - 1) % QD].cdw10 = (uint32_t)(nsze + 100);
	drv.q[1].sq[(drv.q[1].sq_tail + QD - 1) % QD].prp1 = outside;
	bench_printf("bench: hostile rewritten SQE: status %x\n", reap_ms(1, NULL, 2000));
	/* admin: queues that do not exist */
	c = ndrv_cmd(NVME_ADMIN_CREATE_SQ);
	c.prp1 = (uint64_t)iosq + PAGE;
	c.cdw10 = (QD - 1) << 16 | 60000;
	c.cdw11 = 1 << 16 | 1;
	check(run(0, &c, NULL) != 0, "create SQ 60000 refused");
	c.cdw10 = (QD - 1) << 16 | 2;
	check(run(0, &c, NULL) != 0, "a second SQ on the bound CQ refused");
	c = ndrv_cmd(NVME_ADMIN_CREATE_CQ);
	c.prp1 = outside;
	c.cdw10 = (QD - 1) << 16 | 2;
	c.cdw11 = 1;
	check(run(0, &c, NULL) != 0, "CQ outside RAM refused");
	/* doorbells of queues that do not exist, and a bogus tail on our own */
	ndrv_wr32(&drv, NVME_REG_DBS + (2 * 5) * (4u << drv.dstrd), 3);
	ndrv_wr32(&drv, NVME_REG_DBS + (2 * 9 + 1) * (4u << drv.dstrd), 1);
	/* Doorbell Buffer Config whose slots for queue 1 lie past RAM (the buffer's first page is
	 * RAM's last), outside RAM, or in the CMB: refused; queue 1 keeps its plain doorbells */
	c = ndrv_cmd(NVME_ADMIN_DBBUF);
	c.prp1 = outside - PAGE;
	c.prp2 = (uint64_t)eis_buf;
	check(run(0, &c, NULL) != 0, "doorbell buffer with slots past RAM refused");
	c.prp1 = (uint64_t)dbs_buf;
	c.prp2 = outside;
	check(run(0, &c, NULL) != 0, "EventIdx buffer outside RAM refused");
	c.prp2 = LIO_CMB_GPA;
	check(run(0, &c, NULL) != 0, "EventIdx buffer in the CMB refused");
	/* the window is still usable: a pattern written and read inside it */
	lio_rw(seed, 16, 256, true);
	if (!failures)
		bench_puts("bench: hostile contained\n");
	/* last: a tail beyond the SQ; the backend must neither crash nor run stale entries */
	ndrv_ring(&drv, 1, false, QD + 7);
	bench_printf("bench: hostile bogus tail: status %x\n", reap_ms(1, NULL, 500));
out:
	bench_printf("bench: hostile %s (%u failures)\n", failures ? "FAILED" : "passed", failures);
}

BENCH_MODE(hostile, NULL, hostile_ring3);
