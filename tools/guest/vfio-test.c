/* vfio-test: the guest side of test_linux_vfio (static). The guest plays the host: its vNVMe,
 * bound to vfio-pci in no-IOMMU mode, is driven through lvmm's VFIO library and the user-space
 * NVMe driver softssd --vfio uses (host-kmod/vfio/nvme_pci.c).
 *   vfio-test BDF   container, group and device; config space and BAR0 against sysfs; the
 *                   registers; MSI-X vectors on eventfds; the controller up with an admin queue
 *                   in locked memory addressed physically; Identify on MSI-X vector 0; a write
 *                   then read of BLOCKS LBAs at LBA through the I/O queue pair on vector 1,
 *                   checked byte for byte; two Identify commands signalled by INTx alone
 *                   (MSI-X off, an unmask between); VFIO_DEVICE_RESET and CSTS.RDY 0; the IRQ
 *                   types and INTx's trigger, mask and unmask calls.
 * Every step prints one line "VFIO-<STEP> ok ..." or "VFIO-<STEP> FAIL <why>" (then exits 1).
 */
#include <errno.h>
#include <inttypes.h>
#include <linux/pci_regs.h>
#include <linux/vfio.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lightiov/nvme.h"
#include "vfio/nvme_pci.h"
#include "vfio/vfio.h"

/* What the host side checks in the backing file afterwards: LBA 8, 8 blocks of 512 bytes. */
#define LBA    8
#define BLOCKS 8

static char err[512];

static uint8_t pattern(uint64_t i)
{
	return (uint8_t)(i * 7 + (i >> 9) + 0x5a);
}

__attribute__((format(printf, 2, 3), noreturn)) static void fail(const char *step, const char *fmt,
								 ...)
{
	va_list ap;

	printf("VFIO-%s FAIL ", step);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	exit(1);
}

/* The first hexadecimal number in /sys/bus/pci/devices/BDF/file (or one field of its line). */
static uint64_t sysfs_hex(const char *bdf, const char *file, unsigned field)
{
	char path[128], line[256], *p;
	unsigned long long v = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/%s", bdf, file);
	f = fopen(path, "r");
	if (!f || !fgets(line, sizeof(line), f))
		fail("SYSFS", "%s: %s", path, strerror(errno));
	fclose(f);
	p = line;
	for (unsigned i = 0; i <= field; i++)
		v = strtoull(p, &p, 16);
	return v;
}

static const char *backend_name(enum vfio_backend b)
{
	return b == VFIO_BACKEND_NOIOMMU ? "noiommu" : b == VFIO_BACKEND_TYPE1 ? "type1" : "none";
}

/* sn and mn without their padding */
static void trim(char *dst, const char *src, size_t len)
{
	memcpy(dst, src, len);
	dst[len] = 0;
	for (size_t i = len; i && dst[i - 1] == ' '; i--)
		dst[i - 1] = 0;
}

struct io_wait {
	bool done;
	uint16_t status;
};

static void io_done(void *ctx, const struct nvme_cqe *e, void *arg)
{
	struct io_wait *w = ctx;

	(void)arg;
	w->done = true;
	w->status = e->status;
}

/* One command on q (an interrupt-driven queue) with one page of data at addr: submitted, then
 * its completion taken after the interrupts that announce it. 0 or a message in err. */
static int io_cmd(struct nvme_pci_queue *q, struct nvme_sqe *sqe, uint64_t addr)
{
	struct io_wait w = {0};
	int cid = nvme_pci_reserve(q), rc;
	char st[96];

	if (cid < 0) {
		snprintf(err, sizeof(err), "queue %u full", q->qid);
		return cid;
	}
	sqe->cid = (uint16_t)cid;
	sqe->prp1 = addr;
	nvme_pci_submit(q, sqe, &w);
	nvme_pci_ring(q);
	while (!w.done) {
		rc = nvme_pci_wait(q, 10000);
		if (rc) {
			snprintf(err, sizeof(err), "no interrupt on queue %u within 10 s: %s",
				 q->qid, strerror(-rc));
			return rc;
		}
		nvme_pci_reap(q, io_done, NULL);
	}
	if (w.status) {
		nvme_status_str(w.status, st, sizeof(st));
		snprintf(err, sizeof(err), "opcode %#x: %s", sqe->opcode, st);
		return -EIO;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static struct nvme_pci n;
	struct vfio_container c;
	struct vfio_device d, *dv;
	struct nvme_dma_map dma;
	struct nvme_pci_queue *ioq;
	struct nvme_id_ctrl *ic;
	struct nvme_id_ns *ns;
	struct nvme_sqe sqe;
	uint32_t ids, bs, vs, csts, cc;
	uint64_t sys_size, cap;
	uint8_t *mem, *wbuf, *rbuf;
	bool msix_on = true;
	int rc, nvec;
	char sn[21], mn[41];
	const char *bdf;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc != 2) {
		fprintf(stderr, "usage: vfio-test BDF\n");
		return 2;
	}
	bdf = argv[1];

	/* without the no-IOMMU flag the group is refused before it is opened */
	rc = vfio_container_open(&c, false, err, sizeof(err));
	if (!rc) {
		rc = vfio_device_open(&c, bdf, &d, err, sizeof(err));
		vfio_container_close(&c);
		if (!rc)
			fail("NOFLAG", "a no-IOMMU group opened without the flag");
	}
	printf("VFIO-NOFLAG ok refused: %s\n", err);

	/* the driver: container, device, reset, admin queue, enable, Identify, one polled I/O queue
	 * pair and one on MSI-X vector 1 (vector 0: the admin queue) */
	rc = nvme_pci_open(&n, bdf, true, 1, true, err, sizeof(err));
	if (rc)
		fail("CONTAINER", "%s", err);
	dv = &n.dev;
	printf("VFIO-CONTAINER ok\n");
	printf("VFIO-DEVICE ok %s group=%d backend=%s regions=%u irqs=%u reset=%s\n", dv->name,
	       n.cont.groups[dv->group].id, backend_name(n.cont.backend), dv->num_regions,
	       dv->num_irqs, dv->flags & VFIO_DEVICE_FLAGS_RESET ? "yes" : "no");

	/* config space: the ids sysfs shows */
	rc = vfio_cfg_read(dv, 0, &ids, sizeof(ids));
	if (rc)
		fail("CONFIG", "read: %s", strerror(-rc));
	if ((ids & 0xffff) != sysfs_hex(dv->name, "vendor", 0) ||
	    ids >> 16 != sysfs_hex(dv->name, "device", 0))
		fail("CONFIG", "ids %#x differ from sysfs's", ids);
	printf("VFIO-CONFIG ok vendor=0x%04x device=0x%04x (sysfs equal)\n", ids & 0xffff,
	       ids >> 16);

	/* BAR0: the size sysfs shows (resource line 0: start end flags) */
	sys_size = sysfs_hex(dv->name, "resource", 1) - sysfs_hex(dv->name, "resource", 0) + 1;
	if (dv->regions[VFIO_PCI_BAR0_REGION_INDEX].size != sys_size)
		fail("BAR0", "size %#" PRIx64 ", sysfs %#" PRIx64,
		     dv->regions[VFIO_PCI_BAR0_REGION_INDEX].size, sys_size);
	printf("VFIO-BAR0 ok size=%#" PRIx64 " (sysfs equal) mmap-areas=%u\n", sys_size,
	       dv->regions[VFIO_PCI_BAR0_REGION_INDEX].nsparse);

	/* what the library refuses on a real device */
	{
		uint8_t b[8];
		void *p;

		rc = vfio_region_read(dv, VFIO_PCI_BAR0_REGION_INDEX, sys_size - 4, b, 8);
		if (rc != -ERANGE)
			fail("REFUSALS", "a read across BAR0's end gave %d", rc);
		p = vfio_region_mmap(dv, VFIO_PCI_CONFIG_REGION_INDEX, 0, 4096, PROT_READ);
		if (p || errno != EACCES)
			fail("REFUSALS", "config space mmap gave %p errno %d", p, errno);
		rc = vfio_dma_map(&n.cont, 0, 4096, b, true, err, sizeof(err));
		if (rc != -EOPNOTSUPP)
			fail("REFUSALS", "a no-IOMMU DMA map gave %d", rc);
		rc = vfio_irq_set(dv, VFIO_PCI_MSIX_IRQ_INDEX,
				  dv->irqs[VFIO_PCI_MSIX_IRQ_INDEX].count, 1, &rc);
		if (rc != -ERANGE)
			fail("REFUSALS", "an MSI-X vector past the last gave %d", rc);
		printf("VFIO-REFUSALS ok bar-range config-mmap dma-map msix-range\n");
	}

	/* the registers: BAR0 mapped by the driver, and through the device fd */
	if (!n.bar)
		fail("REGS", "BAR0 is not mapped");
	cap = n.cap;
	vs = *(volatile uint32_t *)(n.bar + NVME_REG_VS);
	if (vfio_region_read(dv, VFIO_PCI_BAR0_REGION_INDEX, NVME_REG_VS, &ids, 4) || ids != vs)
		fail("REGS", "VS through the mapping %#x, through the fd %#x", vs, ids);
	if (vfio_region_read(dv, VFIO_PCI_BAR0_REGION_INDEX, NVME_REG_CAP, &sys_size, 8) ||
	    sys_size != cap)
		fail("REGS", "CAP through the fd %#" PRIx64 ", the driver's %#" PRIx64, sys_size,
		     cap);
	printf("VFIO-REGS ok cap=%#" PRIx64 " vs=%#x mqes=%u dstrd=%u (mapped and read equal)\n",
	       cap, vs, NVME_CAP_MQES(cap) + 1, NVME_CAP_DSTRD(cap));

	/* MSI-X: vector 0 for the admin queue, vector 1 for the second I/O queue pair */
	nvec = (n.admin.irq_fd >= 0) + (n.ioq[1].irq_fd >= 0);
	if (nvec != 2)
		fail("MSIX", "%d of the 2 queues on an eventfd (the device has %u vectors)", nvec,
		     dv->irqs[VFIO_PCI_MSIX_IRQ_INDEX].count);
	printf("VFIO-MSIX ok vectors=%u eventfds=%d\n", dv->irqs[VFIO_PCI_MSIX_IRQ_INDEX].count,
	       nvec);

	csts = *(volatile uint32_t *)(n.bar + NVME_REG_CSTS);
	if (!(csts & NVME_CSTS_RDY))
		fail("ENABLE", "CSTS %#x after open", csts);
	printf("VFIO-ENABLE ok asq=%#" PRIx64 " acq=%#" PRIx64 " (physical) csts=%#x\n",
	       n.admin.sq_addr, n.admin.cq_addr, csts);

	/* three pages the controller reaches: Identify data, then the write and read buffers */
	mem = mmap(NULL, 3 * NVME_PCI_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
		   0);
	if (mem == MAP_FAILED)
		fail("IDENTIFY", "mmap: %s", strerror(errno));
	memset(mem, 0, 3 * NVME_PCI_PAGE);
	rc = nvme_pci_dma_add(&n, &dma, mem, 3 * NVME_PCI_PAGE, err, sizeof(err));
	if (rc)
		fail("IDENTIFY", "%s", err);
	sqe = (struct nvme_sqe){.opcode = NVME_ADMIN_IDENTIFY, .cdw10 = NVME_ID_CNS_CTRL};
	sqe.prp1 = nvme_dma_addr(&dma, 0);
	n.admin.irqs = 0;
	rc = nvme_pci_admin(&n, &sqe, NULL, "Identify Controller", err, sizeof(err));
	if (rc)
		fail("IDENTIFY", "%s", err);
	/* the completion may be seen before its interrupt is taken: then wait for vector 0 */
	if (!n.admin.irqs && (rc = nvme_pci_wait(&n.admin, 10000)))
		fail("IDENTIFY", "no interrupt on vector 0 within 10 s: %s", strerror(-rc));
	ic = (struct nvme_id_ctrl *)mem;
	trim(sn, ic->sn, sizeof(ic->sn));
	trim(mn, ic->mn, sizeof(ic->mn));
	if (ic->vid != (uint16_t)sysfs_hex(dv->name, "vendor", 0))
		fail("IDENTIFY", "vid %#x is not the PCI vendor", ic->vid);
	if (strcmp(mn, n.model) || strcmp(sn, n.serial))
		fail("IDENTIFY", "mn/sn %s/%s, the driver's %s/%s", mn, sn, n.model, n.serial);
	printf("VFIO-IDENTIFY ok vid=0x%04x sn=%s mn=%s interrupts=%" PRIu64 "\n", ic->vid, sn, mn,
	       n.admin.irqs);

	sqe = (struct nvme_sqe){.opcode = NVME_ADMIN_IDENTIFY, .nsid = 1, .cdw10 = NVME_ID_CNS_NS};
	sqe.prp1 = nvme_dma_addr(&dma, 0);
	rc = nvme_pci_admin(&n, &sqe, NULL, "Identify Namespace", err, sizeof(err));
	if (rc)
		fail("IOQ", "%s", err);
	ns = (struct nvme_id_ns *)mem;
	bs = 1u << ns->lbaf[ns->flbas & 0xf].ds;
	if (bs * BLOCKS > 4096 || ns->nsze < LBA + BLOCKS || bs != 1u << n.lba_shift)
		fail("IOQ", "namespace 1: %" PRIu64 " blocks of %u bytes", ns->nsze, bs);
	ioq = &n.ioq[1];
	printf("VFIO-IOQ ok qid=%u entries=%u vector=1 lba-size=%u\n", ioq->qid, ioq->depth, bs);

	wbuf = mem + NVME_PCI_PAGE;
	rbuf = mem + 2 * NVME_PCI_PAGE;
	for (unsigned i = 0; i < bs * BLOCKS; i++)
		wbuf[i] = pattern(i);
	memset(rbuf, 0xee, 4096);
	ioq->irqs = 0;
	sqe = (struct nvme_sqe){.opcode = NVME_CMD_WRITE, .nsid = 1, .cdw10 = LBA};
	sqe.cdw12 = BLOCKS - 1;
	rc = io_cmd(ioq, &sqe, nvme_dma_addr(&dma, NVME_PCI_PAGE));
	if (!rc) {
		sqe = (struct nvme_sqe){.opcode = NVME_CMD_READ, .nsid = 1, .cdw10 = LBA};
		sqe.cdw12 = BLOCKS - 1;
		rc = io_cmd(ioq, &sqe, nvme_dma_addr(&dma, 2 * NVME_PCI_PAGE));
	}
	if (rc)
		fail("IO", "%s", err);
	for (unsigned i = 0; i < bs * BLOCKS; i++)
		if (rbuf[i] != pattern(i))
			fail("IO", "byte %u read %#x, wrote %#x", i, rbuf[i], pattern(i));
	if (ioq->bad_cqes)
		fail("IO", "%" PRIu64 " replies refused", ioq->bad_cqes);
	printf(
	    "VFIO-IO ok lba=%d blocks=%d bytes=%u written and read back equal interrupts=%" PRIu64
	    "\n",
	    LBA, BLOCKS, bs * BLOCKS, ioq->irqs);

	/* INTx delivered: MSI-X off and the admin queue's eventfd on the function's pin. The
	 * controller holds its pin high while a completion waits, and the completion is taken only
	 * after the interrupt (io_cmd); vfio-pci masks the line at each interrupt, so the second
	 * command is signalled only after the unmask. nvme_pci set INTx Disable in the command
	 * register (it polls or uses MSI-X): vfio-pci takes that bit as the user's mask (it keeps
	 * the function's INTx Disable set and signals nothing), so it is cleared first and set
	 * again after. */
	if (dv->irqs[VFIO_PCI_INTX_IRQ_INDEX].count) {
		uint16_t cmd = 0;
		unsigned rounds;

		rc = vfio_cfg_read(dv, PCI_COMMAND, &cmd, sizeof(cmd));
		if (!rc) {
			cmd &= (uint16_t)~PCI_COMMAND_INTX_DISABLE;
			rc = vfio_cfg_write(dv, PCI_COMMAND, &cmd, sizeof(cmd));
		}
		if (rc)
			fail("INTX-IRQ", "INTx Disable off: %s", strerror(-rc));
		rc = vfio_irq_disable(dv, VFIO_PCI_MSIX_IRQ_INDEX);
		msix_on = false;
		if (!rc)
			rc = vfio_irq_set(dv, VFIO_PCI_INTX_IRQ_INDEX, 0, 1, &n.admin.irq_fd);
		if (rc)
			fail("INTX-IRQ", "MSI-X off, INTx on the admin eventfd: %s", strerror(-rc));
		n.admin.irqs = 0;
		for (rounds = 0; rounds < 2; rounds++) {
			sqe = (struct nvme_sqe){.opcode = NVME_ADMIN_IDENTIFY,
						.cdw10 = NVME_ID_CNS_CTRL};
			if (io_cmd(&n.admin, &sqe, nvme_dma_addr(&dma, 0)))
				fail("INTX-IRQ", "round %u: Identify on INTx: %s", rounds + 1, err);
			rc = vfio_intx_unmask(dv);
			if (rc)
				fail("INTX-IRQ", "round %u: unmask: %s", rounds + 1, strerror(-rc));
		}
		if (n.admin.irqs < rounds)
			fail("INTX-IRQ", "%" PRIu64 " interrupts for %u commands", n.admin.irqs,
			     rounds);
		rc = vfio_irq_disable(dv, VFIO_PCI_INTX_IRQ_INDEX);
		cmd |= PCI_COMMAND_INTX_DISABLE;
		if (!rc)
			rc = vfio_cfg_write(dv, PCI_COMMAND, &cmd, sizeof(cmd));
		if (rc)
			fail("INTX-IRQ", "INTx off: %s", strerror(-rc));
		printf("VFIO-INTX-IRQ ok commands=%u interrupts=%" PRIu64 "\n", rounds,
		       n.admin.irqs);
	}

	/* reset: the controller comes back disabled */
	rc = vfio_device_reset(dv);
	if (rc)
		fail("RESET", "VFIO_DEVICE_RESET: %s", strerror(-rc));
	if (vfio_region_read(dv, VFIO_PCI_BAR0_REGION_INDEX, NVME_REG_CSTS, &csts, 4) ||
	    vfio_region_read(dv, VFIO_PCI_BAR0_REGION_INDEX, NVME_REG_CC, &cc, 4))
		fail("RESET", "registers unreadable after reset");
	if (csts & NVME_CSTS_RDY || cc & NVME_CC_EN)
		fail("RESET", "CSTS %#x CC %#x after reset", csts, cc);
	printf("VFIO-RESET ok csts.rdy=0 cc=%#x mapped-csts=%#x\n", cc,
	       *(volatile uint32_t *)(n.bar + NVME_REG_CSTS));

	printf("VFIO-IRQINFO ok intx=%u msi=%u msix=%u err=%u req=%u\n",
	       dv->irqs[VFIO_PCI_INTX_IRQ_INDEX].count, dv->irqs[VFIO_PCI_MSI_IRQ_INDEX].count,
	       dv->irqs[VFIO_PCI_MSIX_IRQ_INDEX].count, dv->irqs[VFIO_PCI_ERR_IRQ_INDEX].count,
	       dv->irqs[VFIO_PCI_REQ_IRQ_INDEX].count);
	/* INTx after MSI-X is off (already, after INTX-IRQ): trigger on an eventfd, then mask and
	 * unmask it */
	rc = msix_on ? vfio_irq_disable(dv, VFIO_PCI_MSIX_IRQ_INDEX) : 0;
	if (rc)
		fail("INTX", "MSI-X off: %s", strerror(-rc));
	if (dv->irqs[VFIO_PCI_INTX_IRQ_INDEX].count) {
		rc = vfio_irq_set(dv, VFIO_PCI_INTX_IRQ_INDEX, 0, 1, &n.admin.irq_fd);
		if (!rc)
			rc = vfio_intx_mask(dv);
		if (!rc)
			rc = vfio_intx_unmask(dv);
		if (!rc)
			rc = vfio_intx_unmask_fd(dv, ioq->irq_fd);
		if (!rc)
			rc = vfio_irq_disable(dv, VFIO_PCI_INTX_IRQ_INDEX);
		if (rc)
			fail("INTX", "%s", strerror(-rc));
		printf("VFIO-INTX ok trigger mask unmask unmask-by-eventfd disable\n");
	} else {
		printf("VFIO-INTX ok none (the device has no INTx pin)\n");
	}

	nvme_pci_dma_del(&n, &dma);
	munmap(mem, 3 * NVME_PCI_PAGE);
	nvme_pci_close(&n); /* disabled by the reset already: no shutdown */
	printf("VFIO-DONE ok\n");
	return 0;
}
