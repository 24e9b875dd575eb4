/* A fake VFIO PCI function behind struct vfio_pci_ops, for the passthrough device model's unit
 * test and fuzz target: a GPU-shaped function (a 16 MiB register BAR with the MSI-X table and
 * PBA in it, a 32 GiB 64-bit prefetchable BAR, a small trapped BAR, an I/O BAR, a 36 KiB
 * expansion ROM), 4 KiB of config space the tests may change (extended capabilities AER, SR-IOV,
 * vendor-specific, resizable BAR), and a record of what the model asked of it. Header-only: fuzz
 * targets are single files. */
#ifndef LVMM_TEST_VFIO_FAKE_H
#define LVMM_TEST_VFIO_FAKE_H

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "vfio/vfio_pci.h"

#define FAKE_MSIX_CAP	0xa0
#define FAKE_MSIX_NVEC	8
#define FAKE_MSIX_TABLE 0x2000 /* in BAR0 */
#define FAKE_MSIX_PBA	0x3000 /* in BAR0 */
#define FAKE_PCIE_CAP	0x60
#define FAKE_MSI_CAP	0x48 /* 64-bit, per-vector masks: 24 bytes, up to the PCIe cap */
#define FAKE_MSI_NVEC	4
#define FAKE_PM_CAP	0x40
#define FAKE_VNDR_CAP	0xb0
#define FAKE_BAR0_SIZE	(16ULL << 20)
#define FAKE_BAR1_SIZE	(32ULL << 30)
#define FAKE_BAR3_SIZE	0x800ULL /* not mmap-able: every access traps */
#define FAKE_ROM_SIZE	0x9000ULL
#define FAKE_EXT_AER	0x100
#define FAKE_EXT_SRIOV	0x140 /* hidden by lvmm */
#define FAKE_EXT_VSEC	0x180
#define FAKE_EXT_REBAR	0x1a0		  /* hidden by lvmm, the last */
#define FAKE_HOST_BASE	0x7f0000000000ULL /* what region_mmap hands out; never touched */
#define FAKE_MAX_LOG	64

struct fake_vfio {
	struct vfio_device info;
	uint8_t cfg[4096];
	/* what the model did */
	unsigned cfg_writes;
	struct {
		unsigned off, len;
		uint8_t val[4];
	} cfg_log[FAKE_MAX_LOG];
	unsigned region_reads, region_writes;
	uint64_t last_write_off;
	unsigned irq_sets, irq_index, irq_count;
	int irq_fds[FAKE_MSIX_NVEC];
	unsigned resets, mmaps, munmaps;
	int intx_fd;	       /* INTx trigger VFIO signals now, -1 none */
	unsigned intx_sets;    /* INTx trigger set or cleared */
	unsigned intx_unmasks; /* INTx unmasks */
	int intx_unmask_fd;    /* the last unmask's eventfd, -1: unmask now */
	/* the place in the calls of the last INTx off and MSI-X on */
	unsigned order, intx_off_order, msix_order;
	int fail_mmap; /* region_mmap fails (errno) */
	int fail_irq;  /* irq_set fails (negative errno) */
};

static inline void fake_put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static inline void fake_put32(uint8_t *p, uint32_t v)
{
	fake_put16(p, (uint16_t)v);
	fake_put16(p + 2, (uint16_t)(v >> 16));
}

static inline int fake_cfg_read(void *o, unsigned off, void *buf, size_t len)
{
	struct fake_vfio *f = o;

	if (off > sizeof(f->cfg) || len > sizeof(f->cfg) - off)
		return -EINVAL;
	memcpy(buf, f->cfg + off, len);
	return 0;
}

static inline int fake_cfg_write(void *o, unsigned off, const void *buf, size_t len)
{
	struct fake_vfio *f = o;

	if (off > sizeof(f->cfg) || len > sizeof(f->cfg) - off || len > 4)
		return -EINVAL;
	if (f->cfg_writes < FAKE_MAX_LOG) {
		f->cfg_log[f->cfg_writes].off = off;
		f->cfg_log[f->cfg_writes].len = (unsigned)len;
		memcpy(f->cfg_log[f->cfg_writes].val, buf, len);
	}
	f->cfg_writes++;
	memcpy(f->cfg + off, buf, len);
	return 0;
}

static inline int fake_region_read(void *o, unsigned region, uint64_t off, void *buf, size_t len)
{
	struct fake_vfio *f = o;
	uint64_t v = 0xd0000000ULL | (uint64_t)region << 24 | (off & 0xffffff);

	if (region >= VFIO_NREGIONS || off > f->info.regions[region].size ||
	    len > f->info.regions[region].size - off || len > 8)
		return -EINVAL;
	f->region_reads++;
	memcpy(buf, &v, len);
	return 0;
}

static inline int fake_region_write(void *o, unsigned region, uint64_t off, const void *buf,
				    size_t len)
{
	struct fake_vfio *f = o;

	(void)buf;
	if (region >= VFIO_NREGIONS || off > f->info.regions[region].size ||
	    len > f->info.regions[region].size - off || len > 8)
		return -EINVAL;
	f->region_writes++;
	f->last_write_off = off;
	return 0;
}

static inline void *fake_region_mmap(void *o, unsigned region, uint64_t off, uint64_t size)
{
	struct fake_vfio *f = o;

	if (f->fail_mmap) {
		errno = f->fail_mmap;
		return NULL;
	}
	(void)size;
	f->mmaps++;
	return (void *)(uintptr_t)(FAKE_HOST_BASE + ((uint64_t)region << 36) + off);
}

static inline void fake_region_munmap(void *o, void *host, uint64_t size)
{
	struct fake_vfio *f = o;

	(void)host;
	(void)size;
	f->munmaps++;
}

static inline int fake_irq_set(void *o, unsigned index, unsigned start, unsigned count,
			       const int *fds)
{
	struct fake_vfio *f = o;

	if (index >= VFIO_NIRQS || start + count > f->info.irqs[index].count)
		return -EINVAL;
	if (f->fail_irq)
		return f->fail_irq;
	f->order++;
	if (index == 0) {
		/* INTx: not counted with the message interrupts */
		f->intx_sets++;
		f->intx_fd = count ? fds[0] : -1;
		if (!count)
			f->intx_off_order = f->order;
		return 0;
	}
	if (index == 2 && count)
		f->msix_order = f->order;
	f->irq_sets++;
	f->irq_index = index;
	f->irq_count = count;
	for (unsigned i = 0; i < count && i < FAKE_MSIX_NVEC; i++)
		f->irq_fds[i] = fds[i];
	return 0;
}

static inline int fake_intx_unmask(void *o, int fd)
{
	struct fake_vfio *f = o;

	if (f->fail_irq)
		return f->fail_irq;
	f->intx_unmasks++;
	f->intx_unmask_fd = fd;
	return 0;
}

static inline int fake_reset(void *o)
{
	struct fake_vfio *f = o;

	f->resets++;
	return 0;
}

static const struct vfio_pci_ops fake_vfio_ops = {
    .cfg_read = fake_cfg_read,
    .cfg_write = fake_cfg_write,
    .region_read = fake_region_read,
    .region_write = fake_region_write,
    .region_mmap = fake_region_mmap,
    .region_munmap = fake_region_munmap,
    .irq_set = fake_irq_set,
    .intx_unmask = fake_intx_unmask,
    .reset = fake_reset,
};

/* The GPU-shaped function described above. */
static inline void fake_vfio_init(struct fake_vfio *f)
{
	uint8_t *c = f->cfg;

	memset(f, 0, sizeof(*f));
	f->info.fd = -1;
	f->intx_fd = f->intx_unmask_fd = -1;
	snprintf(f->info.name, sizeof(f->info.name), "0000:00:04.0");
	f->info.num_regions = VFIO_NREGIONS;
	f->info.num_irqs = VFIO_NIRQS;
	f->info.regions[0] = (struct vfio_region){
	    .index = 0, .size = FAKE_BAR0_SIZE, .nsparse = 1, .sparse = {{0, FAKE_BAR0_SIZE}}};
	f->info.regions[1] = (struct vfio_region){
	    .index = 1, .size = FAKE_BAR1_SIZE, .nsparse = 1, .sparse = {{0, FAKE_BAR1_SIZE}}};
	f->info.regions[3] = (struct vfio_region){.index = 3, .size = FAKE_BAR3_SIZE};
	f->info.regions[5] = (struct vfio_region){.index = 5, .size = 0x80};
	f->info.regions[6] = (struct vfio_region){.index = 6, .size = FAKE_ROM_SIZE};
	f->info.regions[7] = (struct vfio_region){.index = 7, .size = sizeof(f->cfg)};
	f->info.irqs[0].count = 1;
	f->info.irqs[1].count = FAKE_MSI_NVEC;
	f->info.irqs[2].count = FAKE_MSIX_NVEC;

	fake_put16(c + 0x00, 0x10de);
	fake_put16(c + 0x02, 0x2330);
	fake_put16(c + 0x06, PCI_STATUS_CAP_LIST);
	fake_put32(c + 0x08, 0x030200a1); /* 3D controller, revision 0xa1 */
	fake_put32(c + 0x10, 0);	  /* BAR0: 32-bit memory */
	fake_put32(c + 0x14, PCI_BAR_MEM_TYPE_64 | PCI_BAR_MEM_PREFETCH); /* BAR1, 64-bit */
	fake_put32(c + 0x1c, PCI_BAR_MEM_TYPE_64 | PCI_BAR_MEM_PREFETCH); /* BAR3, 64-bit */
	fake_put32(c + 0x24, 1);					  /* BAR5: I/O */
	fake_put16(c + 0x2c, 0x10de);
	fake_put16(c + 0x2e, 0x16c1);
	c[0x34] = FAKE_PM_CAP;
	c[0x3d] = 1; /* INTA */
	c[FAKE_PM_CAP] = 0x01;
	c[FAKE_PM_CAP + 1] = FAKE_MSI_CAP;
	fake_put16(c + FAKE_PM_CAP + 2, 0x0003);
	c[FAKE_MSI_CAP] = PCI_CAP_ID_MSI;
	c[FAKE_MSI_CAP + 1] = FAKE_PCIE_CAP;
	fake_put16(c + FAKE_MSI_CAP + 2, PCI_MSI_FLAGS_64BIT | PCI_MSI_FLAGS_MASKBIT | 2 << 1);
	c[FAKE_PCIE_CAP] = PCI_CAP_ID_EXP;
	c[FAKE_PCIE_CAP + 1] = FAKE_MSIX_CAP;
	fake_put16(c + FAKE_PCIE_CAP + PCI_EXP_FLAGS, 0x0002); /* v2, PCIe endpoint (type 0) */
	fake_put32(c + FAKE_PCIE_CAP + PCI_EXP_DEVCAP, PCI_EXP_DEVCAP_FLR);
	c[FAKE_MSIX_CAP] = PCI_CAP_ID_MSIX;
	c[FAKE_MSIX_CAP + 1] = FAKE_VNDR_CAP;
	fake_put16(c + FAKE_MSIX_CAP + PCI_MSIX_FLAGS, FAKE_MSIX_NVEC - 1);
	fake_put32(c + FAKE_MSIX_CAP + PCI_MSIX_TABLE, FAKE_MSIX_TABLE | 0);
	fake_put32(c + FAKE_MSIX_CAP + PCI_MSIX_PBA, FAKE_MSIX_PBA | 0);
	c[FAKE_VNDR_CAP] = PCI_CAP_ID_VNDR;
	c[FAKE_VNDR_CAP + 1] = 0;
	c[FAKE_VNDR_CAP + 2] = 8;
	c[FAKE_VNDR_CAP + 3] = 0x5a;
	/* extended capabilities: id, version 1 (AER 2), next */
	fake_put32(c + FAKE_EXT_AER, 0x0001 | 2 << 16 | FAKE_EXT_SRIOV << 20);
	fake_put32(c + FAKE_EXT_AER + 4, 0x00000010); /* uncorrectable status */
	fake_put32(c + FAKE_EXT_SRIOV, 0x0010 | 1 << 16 | FAKE_EXT_VSEC << 20);
	fake_put16(c + FAKE_EXT_SRIOV + 0x0e, 8); /* TotalVFs */
	fake_put32(c + FAKE_EXT_VSEC, 0x000b | 1 << 16 | FAKE_EXT_REBAR << 20);
	fake_put32(c + FAKE_EXT_VSEC + 4, 0x01001234); /* VSEC id 0x1234, length 0x10 */
	fake_put32(c + FAKE_EXT_REBAR, 0x0015 | 1 << 16);
	fake_put32(c + FAKE_EXT_REBAR + 4, 0x0000fff0); /* sizes 1 MiB..32 GiB */
}

#endif
