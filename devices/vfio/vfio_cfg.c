/* Config space of a passed-through function (vfio_pci.h): the header, BARs, ROM BAR, capability
 * links, MSI, MSI-X and the PCIe capability's type are lvmm's (the platform's pci_dev), extended
 * capability headers and the capabilities hidden there lvmm's too (v->ext); every other byte of
 * the 4 KiB is the device's, read and written through VFIO. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "vfio/vfio_pci.h"

#define CFG_HEADER_END	0x40
#define CAP_HOPS_MAX	48 /* a capability list longer than this loops */
#define EXT_SIZE	(PCI_CFG_EXT_SIZE - PCI_CFG_SIZE)
#define EXT_HOPS_MAX	(EXT_SIZE / 4)
#define ROM_SIZE_MAX	(16ULL << 20)
#define PCI_EXP_TYPE_SH 4

static uint16_t rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)rd16(p) | (uint32_t)rd16(p + 2) << 16;
}

static void wr16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void put_le32(uint8_t *p, uint32_t v)
{
	wr16(p, (uint16_t)v);
	wr16(p + 2, (uint16_t)(v >> 16));
}

/* BARs from the device's regions and its BAR flags: I/O BARs are not passed through (a
 * message says so), a 32-bit prefetchable BAR is presented non-prefetchable (lvmm's 64-bit
 * window takes only 64-bit BARs), every BAR at least a page. */
static int cfg_bars(struct vfio_pci *v, const uint8_t *raw, const struct bus_ops *ops, char *err,
		    unsigned errlen)
{
	for (unsigned i = 0; i < PCI_NUM_BARS; i++) {
		const struct vfio_region *rg = &v->info->regions[i];
		uint32_t flags = rd32(raw + PCI_BAR0 + 4 * i);
		bool is64 = (flags & 7) == PCI_BAR_MEM_TYPE_64, pref = flags & PCI_BAR_MEM_PREFETCH;
		uint64_t size = 4096;

		if (i < v->info->num_regions && rg->size && (flags & 1))
			fprintf(stderr,
				"lvmm: device %s: BAR%u is an I/O BAR: not passed through\n", v->id,
				i);
		if (i >= v->info->num_regions || !rg->size || (flags & 1))
			continue;
		if (is64 && i == PCI_NUM_BARS - 1) {
			snprintf(err, errlen, "device %s: BAR5 claims 64 bits (flags 0x%x)", v->id,
				 flags);
			return -EINVAL;
		}
		if (rg->size > (1ULL << 40)) {
			snprintf(err, errlen, "device %s: BAR%u of %llu bytes exceeds 1 TiB", v->id,
				 i, (unsigned long long)rg->size);
			return -EINVAL;
		}
		while (size < rg->size)
			size <<= 1;
		if (!is64 && size > (1ULL << 31)) {
			snprintf(err, errlen, "device %s: 32-bit BAR%u of %llu bytes", v->id, i,
				 (unsigned long long)rg->size);
			return -EINVAL;
		}
		v->bar[i].region_size = rg->size;
		if (pci_dev_add_bar(&v->pci, i, size, is64, is64 && pref, ops, &v->bar[i], NULL)) {
			snprintf(err, errlen, "device %s: BAR%u (%llu bytes) rejected", v->id, i,
				 (unsigned long long)size);
			return -EINVAL;
		}
		if (is64)
			i++;
	}
	return 0;
}

/* The expansion ROM (VFIO's ROM region) behind the ROM BAR: at least a page, a power of two,
 * placed like a 32-bit BAR, trapped (bar_ops serve reads from the region and drop writes). A
 * device without one, or with one past ROM_SIZE_MAX, keeps a ROM BAR of zero. */
static int cfg_rom(struct vfio_pci *v, const struct bus_ops *ops, char *err, unsigned errlen)
{
	const struct vfio_region *rg = &v->info->regions[VFIO_PCI_ROM_REGION];
	uint64_t size = 4096;

	if (v->info->num_regions <= VFIO_PCI_ROM_REGION || !rg->size)
		return 0;
	if (rg->size > ROM_SIZE_MAX) {
		fprintf(stderr, "lvmm: device %s: expansion ROM of %llu bytes: not exposed\n",
			v->id, (unsigned long long)rg->size);
		return 0;
	}
	while (size < rg->size)
		size <<= 1;
	v->bar[PCI_ROM_BAR].region_size = rg->size;
	if (pci_dev_add_bar(&v->pci, PCI_ROM_BAR, size, false, false, ops, &v->bar[PCI_ROM_BAR],
			    NULL)) {
		snprintf(err, errlen, "device %s: expansion ROM (%llu bytes) rejected", v->id,
			 (unsigned long long)size);
		return -EINVAL;
	}
	return 0;
}

/* Extended capabilities lvmm cannot honour, unlinked from the guest's view and their registers
 * emulated as zero (writes dropped): ACS steers peer-to-peer routing the host's isolation
 * relies on; ATS, PRI and PASID need an IOMMU that translates for the device, and lvmm has no
 * virtual one; SR-IOV and MR-IOV would make virtual functions the guest cannot own; resizable
 * BARs (of the function or its VFs) would change sizes lvmm placed; Multicast holds a BAR of
 * its own. */
static bool ext_hidden(uint16_t id)
{
	switch (id) {
	case PCI_EXT_CAP_ID_ACS:
	case PCI_EXT_CAP_ID_ATS:
	case PCI_EXT_CAP_ID_SRIOV:
	case PCI_EXT_CAP_ID_MRIOV:
	case PCI_EXT_CAP_ID_MCAST:
	case PCI_EXT_CAP_ID_PRI:
	case PCI_EXT_CAP_ID_REBAR:
	case PCI_EXT_CAP_ID_PASID:
	case PCI_EXT_CAP_ID_VF_REBAR:
		return true;
	default:
		return false;
	}
}

static uint32_t ext_next(uint32_t hdr)
{
	return (hdr >> PCI_EXT_CAP_NEXT_SH) & 0xffc;
}

/* The extent of the capability at off: up to the next one in address order, or the end. */
static unsigned ext_end(const uint16_t *all, unsigned n, unsigned off)
{
	unsigned end = PCI_CFG_EXT_SIZE;

	for (unsigned k = 0; k < n; k++)
		if (all[k] > off && all[k] < end)
			end = all[k];
	return end;
}

/* Extended config space of a PCIe function whose VFIO config region has it: the device's,
 * but every capability header lvmm's (the chain relinked without the hidden ones, a null
 * header at 0x100 when the first is hidden) and the hidden capabilities zero. Anything else
 * (conventional PCI, no capabilities, unreadable) reads as zero. */
static int cfg_ext(struct vfio_pci *v, char *err, unsigned errlen)
{
	const struct vfio_region *cr = &v->info->regions[VFIO_PCI_CFG_REGION];
	uint8_t raw[EXT_SIZE], *ext = v->ext;
	uint16_t all[EXT_HOPS_MAX], keep[EXT_HOPS_MAX];
	unsigned n = 0, nkeep = 0, off;
	uint32_t hdr;

	memset(ext, 0, EXT_SIZE);
	memset(v->emu + PCI_CFG_SIZE, 1, EXT_SIZE);
	if (!v->pcie_cap || v->info->num_regions <= VFIO_PCI_CFG_REGION ||
	    cr->size < PCI_CFG_EXT_SIZE || v->ops->cfg_read(v->o, PCI_CFG_SIZE, raw, EXT_SIZE))
		return 0;
	hdr = rd32(raw);
	if (!hdr || hdr == 0xffffffff)
		return 0;
	for (off = PCI_CFG_SIZE; off; off = ext_next(hdr)) {
		if (off < PCI_CFG_SIZE || n == EXT_HOPS_MAX) {
			snprintf(err, errlen,
				 "device %s: extended capability list broken at 0x%x (after %u "
				 "entries)",
				 v->id, off, n);
			return -EINVAL;
		}
		hdr = rd32(raw + (off - PCI_CFG_SIZE));
		all[n++] = (uint16_t)off;
		if (!ext_hidden((uint16_t)hdr))
			keep[nkeep++] = (uint16_t)off;
	}
	memset(v->emu + PCI_CFG_SIZE, 0, EXT_SIZE);
	for (unsigned k = 0; k < n; k++) {
		off = all[k];
		hdr = rd32(raw + (off - PCI_CFG_SIZE));
		if (ext_hidden((uint16_t)hdr))
			memset(v->emu + off, 1, ext_end(all, n, off) - off);
		else
			memset(v->emu + off, 1, 4);
	}
	/* The chain starts at 0x100: a hidden first capability leaves a null header there. */
	if (nkeep && keep[0] != PCI_CFG_SIZE)
		put_le32(ext, (uint32_t)keep[0] << PCI_EXT_CAP_NEXT_SH);
	for (unsigned k = 0; k < nkeep; k++) {
		uint32_t next = k + 1 < nkeep ? keep[k + 1] : 0;

		hdr = rd32(raw + (keep[k] - PCI_CFG_SIZE));
		put_le32(ext + (keep[k] - PCI_CFG_SIZE),
			 (hdr & 0xfffff) | next << PCI_EXT_CAP_NEXT_SH);
	}
	return 0;
}

/* The guest's Initiate FLR went to the device (VFIO resets it and restores its config) and the
 * platform reset lvmm's side (pci_dev_do_flr): the device gets the reset command register. */
static void cfg_flr(struct pci_dev *d)
{
	struct vfio_pci *v = (struct vfio_pci *)d;

	pthread_mutex_lock(&d->lock);
	v->cmd = 0xffff; /* not what the device holds now: written whatever it is */
	pthread_mutex_unlock(&d->lock);
	vfio_pci_cfg_sync_command(v);
}

/* A capability lvmm does not keep (unlinked) hides its bytes from the guest: they read 0 and
 * writes to them are dropped. Bytes another capability made lvmm's stay as they are. */
static void cap_drop(struct vfio_pci *v, unsigned off, unsigned len)
{
	for (unsigned i = off; i < off + len && i < PCI_CFG_SIZE; i++)
		if (!v->emu[i]) {
			v->emu[i] = 1;
			v->pci.cfg[i] = 0;
		}
}

/* Walks the device's capability list: MSI and MSI-X emulated by the platform, the PCIe
 * capability's type rewritten, the others kept as the device's. */
static int cfg_caps(struct vfio_pci *v, const uint8_t *raw, char *err, unsigned errlen)
{
	struct pci_dev *d = &v->pci;
	uint8_t keep[CAP_HOPS_MAX], msix = 0, msi = 0;
	unsigned nkeep = 0, hops = 0, off;

	if (!(rd16(raw + PCI_STATUS) & PCI_STATUS_CAP_LIST))
		return 0;
	for (off = raw[PCI_CAPABILITY_LIST] & ~3u; off; off = raw[off + 1] & ~3u) {
		if (off < CFG_HEADER_END || off > PCI_CFG_SIZE - 4 || ++hops > CAP_HOPS_MAX) {
			snprintf(err, errlen,
				 "device %s: capability list broken at 0x%x (after %u entries)",
				 v->id, off, hops);
			return -EINVAL;
		}
		switch (raw[off]) {
		case PCI_CAP_ID_MSI: {
			unsigned len = pci_msi_cap_len(rd16(raw + off + PCI_MSI_FLAGS));

			if (off + len > PCI_CFG_SIZE || msi) {
				cap_drop(v, off, len);
				continue;
			}
			msi = (uint8_t)off;
			memset(v->emu + off, 1, len);
			break;
		}
		case PCI_CAP_ID_MSIX:
			if (off > PCI_CFG_SIZE - 12 || msix) {
				cap_drop(v, off, 12);
				continue;
			}
			msix = (uint8_t)off;
			memset(v->emu + off, 1, 12);
			break;
		case PCI_CAP_ID_PM:
			/* The power state is emulated, the device stays in D0: vfio-pci zaps the
			 * BAR mappings of a device in D3hot, so a guest access would fault. */
			if (off > PCI_CFG_SIZE - 8)
				continue;
			v->emu[off + PCI_PM_CTRL] = v->emu[off + PCI_PM_CTRL + 1] = 1;
			d->cfg[off + PCI_PM_CTRL] &= (uint8_t)~3u;
			d->wmask[off + PCI_PM_CTRL] = 3;
			break;
		case PCI_CAP_ID_EXP:
			if (off > PCI_CFG_SIZE - 4)
				continue;
			/* lvmm's bus 0 has no root ports: its functions are integrated endpoints */
			v->pcie_cap = (uint8_t)off;
			d->cfg[off + PCI_EXP_FLAGS] =
			    (uint8_t)((raw[off + PCI_EXP_FLAGS] & 0x0f) | PCI_EXP_TYPE_RC_END
									      << PCI_EXP_TYPE_SH);
			v->emu[off + PCI_EXP_FLAGS] = 1;
			/* the platform sees the guest's FLR and resets MSI/MSI-X, command, BARs */
			if (off + PCI_EXP_DEVCTL + 2 <= PCI_CFG_SIZE &&
			    (rd32(raw + off + PCI_EXP_DEVCAP) & PCI_EXP_DEVCAP_FLR)) {
				d->pcie_cap = (uint8_t)off;
				d->flr = cfg_flr;
			}
			break;
		default:
			break;
		}
		keep[nkeep++] = (uint8_t)off;
	}
	/* The chain of what is kept: ids and links are lvmm's. */
	d->cfg[PCI_CAPABILITY_LIST] = nkeep ? keep[0] : 0;
	for (unsigned k = 0; k < nkeep; k++) {
		d->cfg[keep[k]] = raw[keep[k]];
		d->cfg[keep[k] + 1] = k + 1 < nkeep ? keep[k + 1] : 0;
		v->emu[keep[k]] = v->emu[keep[k] + 1] = 1;
	}
	if (nkeep)
		wr16(d->cfg + PCI_STATUS, PCI_STATUS_CAP_LIST);
	if (msi && pci_dev_add_msi_at(d, msi, err, errlen))
		return -EINVAL;
	v->msi_cap = msi;
	if (msix)
		return pci_dev_add_msix_at(d, msix, err, errlen);
	return 0;
}

int vfio_pci_cfg_build(struct vfio_pci *v, const struct bus_ops *bar_ops, char *err,
		       unsigned errlen)
{
	struct pci_dev *d = &v->pci;
	uint8_t raw[PCI_CFG_SIZE];
	int r;

	r = v->ops->cfg_read(v->o, 0, raw, sizeof(raw));
	if (r) {
		snprintf(err, errlen, "device %s: config space unreadable: %s", v->id,
			 strerror(-r));
		return -EIO;
	}
	if (rd16(raw + PCI_VENDOR_ID) == 0xffff || (raw[PCI_HEADER_TYPE] & 0x7f)) {
		snprintf(err, errlen,
			 "device %s: vendor 0x%04x, header type 0x%02x: only PCI endpoints (header "
			 "type 0) pass through",
			 v->id, rd16(raw + PCI_VENDOR_ID), raw[PCI_HEADER_TYPE]);
		return -EINVAL;
	}
	pci_dev_init(d, v->id, rd16(raw + PCI_VENDOR_ID), rd16(raw + PCI_DEVICE_ID),
		     rd32(raw + PCI_REVISION_ID) >> 8, rd16(raw + PCI_SUBSYSTEM_VENDOR_ID),
		     rd16(raw + PCI_SUBSYSTEM_ID));
	d->cfg[PCI_REVISION_ID] = raw[PCI_REVISION_ID];
	/* Beyond the header the device's bytes, so a byte lvmm keeps has its value; the rest is
	 * read from the device on every access. The interrupt pin is lvmm's (vfio_intx.c). */
	memcpy(d->cfg + CFG_HEADER_END, raw + CFG_HEADER_END, PCI_CFG_SIZE - CFG_HEADER_END);
	memset(v->emu, 0, sizeof(v->emu));
	memset(v->emu, 1, CFG_HEADER_END);
	r = cfg_bars(v, raw, bar_ops, err, errlen);
	if (!r)
		r = cfg_rom(v, bar_ops, err, errlen);
	if (!r)
		r = cfg_caps(v, raw, err, errlen);
	if (!r)
		r = cfg_ext(v, err, errlen);
	if (r)
		return r;
	d->cfg_read = vfio_pci_cfg_read;
	d->cfg_write = vfio_pci_cfg_write;
	return 0;
}

void vfio_pci_cfg_read(struct pci_dev *d, unsigned reg, void *data, unsigned len)
{
	struct vfio_pci *v = (struct vfio_pci *)d;
	uint8_t raw[4], *out = data;
	unsigned i;

	if (len > 4 || reg >= PCI_CFG_EXT_SIZE || len > PCI_CFG_EXT_SIZE - reg)
		return;
	if (reg >= PCI_CFG_SIZE)
		memcpy(out, v->ext + (reg - PCI_CFG_SIZE), len);
	for (i = 0; i < len && v->emu[reg + i]; i++)
		;
	if (i == len || v->ops->cfg_read(v->o, reg, raw, len))
		return; /* all emulated, or the device did not answer: the emulated bytes stay */
	for (i = 0; i < len; i++)
		if (!v->emu[reg + i])
			out[i] = raw[i];
}

void vfio_pci_cfg_sync_command(struct vfio_pci *v)
{
	bool log = false;
	uint16_t cmd;
	uint8_t b[2];
	int r = 0;

	/* under the function's lock: two vCPUs' writes reach the device in their order */
	pthread_mutex_lock(&v->pci.lock);
	cmd = (uint16_t)(rd16(v->pci.cfg + PCI_COMMAND) &
			 (PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER | PCI_COMMAND_INTX_DISABLE));
	/* INTx Disable is the guest's once its INTx is wired (vfio-pci masks by it), else set */
	if (v->intx_mode == VFIO_INTX_NONE)
		cmd |= PCI_COMMAND_INTX_DISABLE;
	if (cmd != v->cmd) {
		wr16(b, cmd);
		r = v->ops->cfg_write(v->o, PCI_COMMAND, b, 2);
		if (!r)
			v->cmd = cmd;
		else
			log = pci_log_due(&v->cmd_errors);
	}
	pthread_mutex_unlock(&v->pci.lock);
	if (log)
		fprintf(stderr, "lvmm: device %s: command 0x%04x not written: %s\n", v->id, cmd,
			strerror(-r));
}

void vfio_pci_cfg_write(struct pci_dev *d, unsigned reg, const void *data, unsigned len)
{
	struct vfio_pci *v = (struct vfio_pci *)d;
	const uint8_t *in = data;
	unsigned i, emu = 0;

	if (len > 4 || reg >= PCI_CFG_EXT_SIZE || len > PCI_CFG_EXT_SIZE - reg)
		return;
	if (reg < PCI_COMMAND + 2 && reg + len > PCI_COMMAND)
		vfio_pci_cfg_sync_command(v);
	for (i = 0; i < len; i++)
		emu += v->emu[reg + i];
	if (emu == len)
		return;
	/* The device's own registers: as written when none of the bytes is lvmm's, else the
	 * device's bytes one at a time. */
	if (!emu) {
		v->ops->cfg_write(v->o, reg, in, len);
		return;
	}
	for (i = 0; i < len; i++)
		if (!v->emu[reg + i])
			v->ops->cfg_write(v->o, reg + i, in + i, 1);
}
