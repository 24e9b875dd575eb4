/* vfio-test: the guest side of test_linux_vfio (static). The guest plays the host: its vNVMe,
 * bound to vfio-pci in no-IOMMU mode, is driven through lvmm's VFIO library and the user-space
 * NVMe driver of vfio-nvme.c.
 *   vfio-test BDF   container, group and device; config space and BAR0 against sysfs; the
 *                   registers; MSI-X vectors on eventfds; the controller up with an admin queue
 *                   in locked memory addressed physically; Identify on an interrupt; a write
 *                   then read of BLOCKS LBAs at LBA through an I/O queue pair, checked byte for
 *                   byte; VFIO_DEVICE_RESET and CSTS.RDY 0; the IRQ types and INTx.
 * Every step prints one line "VFIO-<STEP> ok ..." or "VFIO-<STEP> FAIL <why>" (then exits 1). */
#include <errno.h>
#include <inttypes.h>
#include <linux/vfio.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lightiov/nvme.h"
#include "vfio-nvme.h"
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

int main(int argc, char **argv)
{
	struct vfio_container c;
	struct vfio_device d;
	struct unvme n;
	struct unvme_queue ioq;
	struct unvme_dma id, wbuf, rbuf;
	struct nvme_id_ctrl *ic;
	struct nvme_id_ns *ns;
	uint32_t ids, bs, vs, csts, cc;
	uint64_t sys_size, cap;
	int efd[2], rc, nvec;
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
		printf("VFIO-NOFLAG ok refused: %s\n", err);
	} else {
		printf("VFIO-NOFLAG ok refused: %s\n", err);
	}

	rc = vfio_container_open(&c, true, err, sizeof(err));
	if (rc)
		fail("CONTAINER", "%s", err);
	printf("VFIO-CONTAINER ok\n");
	rc = vfio_device_open(&c, bdf, &d, err, sizeof(err));
	if (rc)
		fail("DEVICE", "%s", err);
	printf("VFIO-DEVICE ok %s group=%d backend=%s regions=%u irqs=%u reset=%s\n", d.name,
	       c.groups[d.group].id, backend_name(c.backend), d.num_regions, d.num_irqs,
	       d.flags & VFIO_DEVICE_FLAGS_RESET ? "yes" : "no");

	/* config space: the ids sysfs shows */
	rc = vfio_cfg_read(&d, 0, &ids, sizeof(ids));
	if (rc)
		fail("CONFIG", "read: %s", strerror(-rc));
	if ((ids & 0xffff) != sysfs_hex(d.name, "vendor", 0) ||
	    ids >> 16 != sysfs_hex(d.name, "device", 0))
		fail("CONFIG", "ids %#x differ from sysfs's", ids);
	printf("VFIO-CONFIG ok vendor=0x%04x device=0x%04x (sysfs equal)\n", ids & 0xffff,
	       ids >> 16);

	/* BAR0: the size sysfs shows (resource line 0: start end flags) */
	sys_size = sysfs_hex(d.name, "resource", 1) - sysfs_hex(d.name, "resource", 0) + 1;
	if (d.regions[VFIO_PCI_BAR0_REGION_INDEX].size != sys_size)
		fail("BAR0", "size %#" PRIx64 ", sysfs %#" PRIx64,
		     d.regions[VFIO_PCI_BAR0_REGION_INDEX].size, sys_size);
	printf("VFIO-BAR0 ok size=%#" PRIx64 " (sysfs equal) mmap-areas=%u\n", sys_size,
	       d.regions[VFIO_PCI_BAR0_REGION_INDEX].nsparse);

	/* what the library refuses on a real device */
	{
		uint8_t b[8];
		void *p;

		rc = vfio_region_read(&d, VFIO_PCI_BAR0_REGION_INDEX, sys_size - 4, b, 8);
		if (rc != -ERANGE)
			fail("REFUSALS", "a read across BAR0's end gave %d", rc);
		p = vfio_region_mmap(&d, VFIO_PCI_CONFIG_REGION_INDEX, 0, 4096, PROT_READ);
		if (p || errno != EACCES)
			fail("REFUSALS", "config space mmap gave %p errno %d", p, errno);
		rc = vfio_dma_map(&c, 0, 4096, b, true, err, sizeof(err));
		if (rc != -EOPNOTSUPP)
			fail("REFUSALS", "a no-IOMMU DMA map gave %d", rc);
		rc = vfio_irq_set(&d, VFIO_PCI_MSIX_IRQ_INDEX,
				  d.irqs[VFIO_PCI_MSIX_IRQ_INDEX].count, 1, &rc);
		if (rc != -ERANGE)
			fail("REFUSALS", "an MSI-X vector past the last gave %d", rc);
		printf("VFIO-REFUSALS ok bar-range config-mmap dma-map msix-range\n");
	}

	rc = unvme_attach(&n, &d, err, sizeof(err));
	if (rc)
		fail("REGS", "%s", err);
	cap = n.cap;
	vs = unvme_reg32(&n, NVME_REG_VS);
	if (vfio_region_read(&d, VFIO_PCI_BAR0_REGION_INDEX, NVME_REG_VS, &ids, 4) || ids != vs)
		fail("REGS", "VS through the mapping %#x, through the fd %#x", vs, ids);
	printf("VFIO-REGS ok cap=%#" PRIx64 " vs=%#x mqes=%u dstrd=%u (mapped and read equal)\n",
	       cap, vs, NVME_CAP_MQES(cap) + 1, NVME_CAP_DSTRD(cap));

	/* MSI-X: vector 0 for the admin queue, vector 1 (or 0 again) for the I/O queue */
	nvec = d.irqs[VFIO_PCI_MSIX_IRQ_INDEX].count >= 2 ? 2 : 1;
	if (!d.irqs[VFIO_PCI_MSIX_IRQ_INDEX].count)
		fail("MSIX", "the device offers no MSI-X vectors");
	for (int i = 0; i < nvec; i++) {
		efd[i] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (efd[i] < 0)
			fail("MSIX", "eventfd: %s", strerror(errno));
	}
	rc = vfio_irq_set(&d, VFIO_PCI_MSIX_IRQ_INDEX, 0, (unsigned)nvec, efd);
	if (rc)
		fail("MSIX", "SET_IRQS of %d vectors: %s", nvec, strerror(-rc));
	printf("VFIO-MSIX ok vectors=%u eventfds=%d\n", d.irqs[VFIO_PCI_MSIX_IRQ_INDEX].count,
	       nvec);

	rc = unvme_enable(&n, 32, efd[0]);
	if (rc)
		fail("ENABLE", "%s", err);
	printf("VFIO-ENABLE ok asq=%#" PRIx64 " acq=%#" PRIx64 " (physical) csts=%#x\n",
	       n.aq.sqm.addr, n.aq.cqm.addr, unvme_reg32(&n, NVME_REG_CSTS));

	rc = unvme_dma_alloc(&n, &id, 4096);
	if (!rc)
		rc = unvme_identify(&n, NVME_ID_CNS_CTRL, 0, &id);
	if (!rc && !n.aq.irqs)
		rc = unvme_wait_irq(&n, &n.aq, 10000);
	if (rc)
		fail("IDENTIFY", "%s", err);
	ic = id.va;
	trim(sn, ic->sn, sizeof(ic->sn));
	trim(mn, ic->mn, sizeof(ic->mn));
	if (ic->vid != (uint16_t)sysfs_hex(d.name, "vendor", 0))
		fail("IDENTIFY", "vid %#x is not the PCI vendor", ic->vid);
	printf("VFIO-IDENTIFY ok vid=0x%04x sn=%s mn=%s interrupts=%" PRIu64 "\n", ic->vid, sn, mn,
	       n.aq.irqs);

	rc = unvme_identify(&n, NVME_ID_CNS_NS, 1, &id);
	if (rc)
		fail("IOQ", "%s", err);
	ns = id.va;
	bs = 1u << ns->lbaf[ns->flbas & 0xf].ds;
	if (bs * BLOCKS > 4096 || ns->nsze < LBA + BLOCKS)
		fail("IOQ", "namespace 1: %" PRIu64 " blocks of %u bytes", ns->nsze, bs);
	rc = unvme_create_ioq(&n, &ioq, 1, 16, (unsigned)nvec - 1, efd[nvec - 1]);
	if (rc)
		fail("IOQ", "%s", err);
	printf("VFIO-IOQ ok qid=1 entries=16 vector=%d lba-size=%u\n", nvec - 1, bs);

	rc = unvme_dma_alloc(&n, &wbuf, 4096);
	if (!rc)
		rc = unvme_dma_alloc(&n, &rbuf, 4096);
	if (rc)
		fail("IO", "%s", err);
	for (unsigned i = 0; i < bs * BLOCKS; i++)
		((uint8_t *)wbuf.va)[i] = pattern(i);
	memset(rbuf.va, 0xee, 4096);
	rc = unvme_rw(&n, &ioq, NVME_CMD_WRITE, 1, LBA, BLOCKS, &wbuf);
	if (!rc)
		rc = unvme_rw(&n, &ioq, NVME_CMD_READ, 1, LBA, BLOCKS, &rbuf);
	if (!rc && !ioq.irqs)
		rc = unvme_wait_irq(&n, &ioq, 10000);
	if (rc)
		fail("IO", "%s", err);
	for (unsigned i = 0; i < bs * BLOCKS; i++)
		if (((uint8_t *)rbuf.va)[i] != pattern(i))
			fail("IO", "byte %u read %#x, wrote %#x", i, ((uint8_t *)rbuf.va)[i],
			     pattern(i));
	printf(
	    "VFIO-IO ok lba=%d blocks=%d bytes=%u written and read back equal interrupts=%" PRIu64
	    "\n",
	    LBA, BLOCKS, bs * BLOCKS, ioq.irqs);
	rc = unvme_delete_ioq(&n, &ioq);
	if (rc)
		fail("IO", "%s", err);

	/* reset: the controller comes back disabled */
	rc = vfio_device_reset(&d);
	if (rc)
		fail("RESET", "VFIO_DEVICE_RESET: %s", strerror(-rc));
	if (vfio_region_read(&d, VFIO_PCI_BAR0_REGION_INDEX, NVME_REG_CSTS, &csts, 4) ||
	    vfio_region_read(&d, VFIO_PCI_BAR0_REGION_INDEX, NVME_REG_CC, &cc, 4))
		fail("RESET", "registers unreadable after reset");
	if (csts & NVME_CSTS_RDY || cc & NVME_CC_EN)
		fail("RESET", "CSTS %#x CC %#x after reset", csts, cc);
	printf("VFIO-RESET ok csts.rdy=0 cc=%#x mapped-csts=%#x\n", cc,
	       unvme_reg32(&n, NVME_REG_CSTS));

	printf("VFIO-IRQINFO ok intx=%u msi=%u msix=%u err=%u req=%u\n",
	       d.irqs[VFIO_PCI_INTX_IRQ_INDEX].count, d.irqs[VFIO_PCI_MSI_IRQ_INDEX].count,
	       d.irqs[VFIO_PCI_MSIX_IRQ_INDEX].count, d.irqs[VFIO_PCI_ERR_IRQ_INDEX].count,
	       d.irqs[VFIO_PCI_REQ_IRQ_INDEX].count);
	/* INTx after MSI-X is off: trigger on an eventfd, then mask and unmask it */
	rc = vfio_irq_disable(&d, VFIO_PCI_MSIX_IRQ_INDEX);
	if (rc)
		fail("INTX", "MSI-X off: %s", strerror(-rc));
	if (d.irqs[VFIO_PCI_INTX_IRQ_INDEX].count) {
		rc = vfio_irq_set(&d, VFIO_PCI_INTX_IRQ_INDEX, 0, 1, efd);
		if (!rc)
			rc = vfio_intx_mask(&d);
		if (!rc)
			rc = vfio_intx_unmask(&d);
		if (!rc)
			rc = vfio_intx_unmask_fd(&d, efd[nvec - 1]);
		if (!rc)
			rc = vfio_irq_disable(&d, VFIO_PCI_INTX_IRQ_INDEX);
		if (rc)
			fail("INTX", "%s", strerror(-rc));
		printf("VFIO-INTX ok trigger mask unmask unmask-by-eventfd disable\n");
	} else {
		printf("VFIO-INTX ok none (the device has no INTx pin)\n");
	}

	unvme_dma_free(&n, &id);
	unvme_dma_free(&n, &wbuf);
	unvme_dma_free(&n, &rbuf);
	unvme_disable(&n); /* frees the admin queue */
	unvme_detach(&n);
	vfio_device_close(&d);
	vfio_container_close(&c);
	for (int i = 0; i < nvec; i++)
		close(efd[i]);
	printf("VFIO-DONE ok\n");
	return 0;
}
