/* PCI platform (pci.h): the host bridge and bus 0, device set-up (BARs declared, capabilities),
 * type-1 (CF8/CFC) and ECAM config access, and Function Level Reset. Where BARs are placed and
 * decode is pci_bar.c's, MSI-X pci_msix.c's. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "layout.h"
#include "pci_internal.h"

#define PCI_BAR_END (PCI_BAR0 + 4 * PCI_NUM_BARS)

void pci_dev_init(struct pci_dev *d, const char *name, uint16_t vendor, uint16_t device,
		  uint32_t class_code, uint16_t subsys_vendor, uint16_t subsys)
{
	memset(d, 0, sizeof(*d));
	snprintf(d->name, sizeof(d->name), "%s", name);
	pthread_mutex_init(&d->lock, NULL);
	put16(d->cfg + PCI_VENDOR_ID, vendor);
	put16(d->cfg + PCI_DEVICE_ID, device);
	d->cfg[PCI_REVISION_ID] = 1;
	d->cfg[PCI_CLASS_PROG] = class_code & 0xff;
	d->cfg[PCI_CLASS_PROG + 1] = (class_code >> 8) & 0xff;
	d->cfg[PCI_CLASS_PROG + 2] = (class_code >> 16) & 0xff;
	put16(d->cfg + PCI_SUBSYSTEM_VENDOR_ID, subsys_vendor);
	put16(d->cfg + PCI_SUBSYSTEM_ID, subsys);
	/* Command: I/O, memory, bus master and INTx disable are the host's to change. */
	put16(d->wmask + PCI_COMMAND,
	      PCI_COMMAND_IO | PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER | PCI_COMMAND_INTX_DISABLE);
	d->wmask[PCI_INTERRUPT_LINE] = 0xff;
	d->next_cap = 0x40;
	d->msix.bar = d->msix.pba_bar = PCI_NUM_BARS;
}

int pci_dev_add_bar(struct pci_dev *d, unsigned bar, uint64_t size, bool is64, bool prefetch,
		    const struct bus_ops *ops, void *opaque, void *host)
{
	struct pci_bar *b;
	uint32_t flags;

	if (bar >= PCI_BAR_SLOTS || (is64 && bar + 1 >= PCI_NUM_BARS) || size < 4096 ||
	    (size & (size - 1)) || size > (1ULL << 40) ||
	    (bar == PCI_ROM_BAR && (prefetch || size > (1ULL << 31))))
		return -EINVAL;
	b = &d->bar[bar];
	b->size = size;
	b->is64 = is64;
	b->prefetch = prefetch;
	b->ops = ops;
	b->opaque = opaque;
	b->host = host;
	flags = (is64 ? PCI_BAR_MEM_TYPE_64 : 0) | (prefetch ? PCI_BAR_MEM_PREFETCH : 0);
	put32(d->cfg + pci_bar_reg(bar), flags);
	return 0;
}

int pci_dev_add_cap(struct pci_dev *d, const void *cap, unsigned len)
{
	uint8_t off = d->next_cap, *prev;

	if (len < 2 || off + len > PCI_CFG_SIZE)
		return -ENOSPC;
	memcpy(d->cfg + off, cap, len);
	d->cfg[off + 1] = 0;
	/* Link it at the end of the list. */
	prev = d->cfg + PCI_CAPABILITY_LIST;
	while (*prev)
		prev = d->cfg + *prev + 1;
	*prev = off;
	put16(d->cfg + PCI_STATUS, get16(d->cfg + PCI_STATUS) | PCI_STATUS_CAP_LIST);
	d->next_cap = (uint8_t)((off + len + 3) & ~3u);
	return off;
}

/* ---- Function Level Reset ---- */

int pci_dev_add_flr(struct pci_dev *d, void (*flr)(struct pci_dev *d))
{
	uint8_t cap[PCI_EXP_CAP_SIZE] = {PCI_CAP_ID_EXP, 0};
	int off;

	put16(cap + PCI_EXP_FLAGS, 2 | PCI_EXP_TYPE_RC_END << 4);
	put32(cap + PCI_EXP_DEVCAP, PCI_EXP_DEVCAP_FLR);
	off = pci_dev_add_cap(d, cap, sizeof(cap));
	if (off < 0)
		return off;
	/* Device Control: the host's settings stick (Linux writes payload sizes); Initiate FLR
	 * always reads 0, so it is not stored at all. */
	put16(d->wmask + off + PCI_EXP_DEVCTL, 0x7fff);
	d->pcie_cap = (uint8_t)off;
	d->flr = flr;
	return off;
}

/* The reset itself, as hardware does it: config space to its reset values (so no decode, no
 * mastering, MSI-X off and every vector masked: the irqfds leave KVM), then the device behind
 * it, then whatever its old queues signalled on the way out is forgotten. Without d->lock. */
static void pci_dev_do_flr(struct pci_dev *d)
{
	struct pci_msix *m = &d->msix;
	unsigned off, v;
	uint64_t n;

	pthread_mutex_lock(&d->lock);
	for (off = 0; off < PCI_CFG_SIZE; off++) {
		if ((off >= PCI_BAR0 && off < PCI_BAR_END) ||
		    (off >= PCI_ROM_ADDRESS && off < PCI_ROM_ADDRESS + 4))
			d->cfg[off] = d->cfg_reset[off];
		else
			d->cfg[off] = (uint8_t)((d->cfg[off] & ~d->wmask[off]) |
						(d->cfg_reset[off] & d->wmask[off]));
	}
	for (v = 0; v < m->nvec; v++)
		m->table[v] = (struct pci_msix_entry){.ctrl = PCI_MSIX_ENTRY_CTRL_MASKBIT};
	msix_ctrl_changed(d);
	for (v = 0; v < m->nvec; v++)
		msix_update(d, v); /* entries changed even where the enable bits did not */
	msi_changed(d);
	intx_update(d);
	d->flrs++;
	pthread_mutex_unlock(&d->lock);
	if (d->flr)
		d->flr(d);
	pthread_mutex_lock(&d->lock);
	for (v = 0; v < m->nvec; v++)
		if (m->efd[v] >= 0 && read(m->efd[v], &n, sizeof(n)) < 0)
			n = 0; /* nothing was pending: EAGAIN */
	if (m->pba)
		memset(m->pba, 0, ((m->nvec + 63) / 64) * sizeof(uint64_t));
	pthread_mutex_unlock(&d->lock);
}

/* ---- config space access ---- */

static struct pci_dev *dev_at(struct pci_bus *b, unsigned busno, unsigned devfn)
{
	if (busno != 0 || (devfn & 7))
		return NULL;
	return b->dev[devfn >> 3];
}

void pci_cfg_read(struct pci_bus *b, unsigned busno, unsigned devfn, unsigned reg, void *data,
		  unsigned len)
{
	struct pci_dev *d = dev_at(b, busno, devfn);

	if (len > 4)
		len = 4;
	if (!d) {
		memset(data, 0xff, len);
		return;
	}
	memset(data, 0, len);
	if (reg >= PCI_CFG_SIZE) {
		/* extended config space: the function's own, or zero */
		if (reg < PCI_CFG_EXT_SIZE && d->cfg_read)
			d->cfg_read(d, reg, data,
				    len < PCI_CFG_EXT_SIZE - reg ? len : PCI_CFG_EXT_SIZE - reg);
		return;
	}
	if (reg + len > PCI_CFG_SIZE)
		len = PCI_CFG_SIZE - reg;
	pthread_mutex_lock(&d->lock);
	memcpy(data, d->cfg + reg, len);
	pthread_mutex_unlock(&d->lock);
	if (d->cfg_read)
		d->cfg_read(d, reg, data, len);
}

/* Applies a write; returns true when BAR decoding may have changed. *flr: Initiate FLR written. */
static bool cfg_write_locked(struct pci_dev *d, unsigned reg, const uint8_t *val, unsigned len,
			     bool *flr)
{
	uint16_t cmd_before = get16(d->cfg + PCI_COMMAND);
	bool bars = false, msix = false, msi = false;
	unsigned i;

	for (i = 0; i < len; i++) {
		unsigned off = reg + i;

		if ((off >= PCI_BAR0 && off < PCI_BAR_END) ||
		    (off >= PCI_ROM_ADDRESS && off < PCI_ROM_ADDRESS + 4)) {
			d->cfg[off] = val[i];
			bars = true;
		} else {
			d->cfg[off] =
			    (uint8_t)((d->cfg[off] & ~d->wmask[off]) | (val[i] & d->wmask[off]));
			if (d->msix.cap && off >= d->msix.cap + (unsigned)PCI_MSIX_FLAGS &&
			    off < d->msix.cap + PCI_MSIX_FLAGS + 2u)
				msix = true;
			if (d->msi.cap && off >= d->msi.cap + (unsigned)PCI_MSI_FLAGS &&
			    off < d->msi.cap + pci_msi_cap_len(get16(d->cfg + d->msi.cap + 2)))
				msi = true;
			if (d->pcie_cap && off == d->pcie_cap + PCI_EXP_DEVCTL + 1u &&
			    (val[i] & (PCI_EXP_DEVCTL_BCR_FLR >> 8)))
				*flr = true;
		}
	}
	if (bars) {
		/* Size probing: only address bits above the size stick; flags are read-only. */
		for (i = 0; i < PCI_NUM_BARS; i++) {
			struct pci_bar *bar = &d->bar[i];
			uint32_t v = get32(d->cfg + PCI_BAR0 + 4 * i);

			if (i && d->bar[i - 1].is64 && d->bar[i - 1].size) {
				uint64_t hi_mask = ~((d->bar[i - 1].size - 1) >> 32);

				put32(d->cfg + PCI_BAR0 + 4 * i, (uint32_t)(v & hi_mask));
				continue;
			}
			if (!bar->size) {
				put32(d->cfg + PCI_BAR0 + 4 * i, 0);
				continue;
			}
			v &= ~(uint32_t)((bar->size - 1) | 0xf);
			v |= (bar->is64 ? PCI_BAR_MEM_TYPE_64 : 0) |
			     (bar->prefetch ? PCI_BAR_MEM_PREFETCH : 0);
			put32(d->cfg + PCI_BAR0 + 4 * i, v);
		}
		/* The ROM BAR: address bits above its size and the enable bit. */
		put32(d->cfg + PCI_ROM_ADDRESS,
		      get32(d->cfg + PCI_ROM_ADDRESS) &
			  (d->bar[PCI_ROM_BAR].size
			       ? ~(uint32_t)(d->bar[PCI_ROM_BAR].size - 1) | PCI_ROM_ADDRESS_ENABLE
			       : 0));
	}
	if (msix || ((cmd_before ^ get16(d->cfg + PCI_COMMAND)) & PCI_COMMAND_MASTER))
		msix_ctrl_changed(d);
	if (msi || ((cmd_before ^ get16(d->cfg + PCI_COMMAND)) & PCI_COMMAND_MASTER))
		msi_changed(d);
	intx_update(d); /* INTx Disable, MSI or MSI-X may have changed */
	return bars || ((cmd_before ^ get16(d->cfg + PCI_COMMAND)) & PCI_COMMAND_MEMORY);
}

static void cfg_write(struct pci_bus *b, unsigned busno, unsigned devfn, unsigned reg,
		      const void *data, unsigned len, bool under_mmio_lock)
{
	struct pci_dev *d = dev_at(b, busno, devfn);
	bool remap, flr = false;
	uint16_t cmd;

	if (!d || reg >= PCI_CFG_EXT_SIZE || len > 4)
		return;
	if (reg >= PCI_CFG_SIZE) {
		/* extended config space: the function's own, or nowhere */
		if (d->cfg_write)
			d->cfg_write(d, reg, data,
				     len < PCI_CFG_EXT_SIZE - reg ? len : PCI_CFG_EXT_SIZE - reg);
		return;
	}
	if (reg + len > PCI_CFG_SIZE)
		len = PCI_CFG_SIZE - reg;
	pthread_mutex_lock(&d->lock);
	cmd = get16(d->cfg + PCI_COMMAND);
	remap = cfg_write_locked(d, reg, data, len, &flr);
	cmd &= (uint16_t)~get16(d->cfg + PCI_COMMAND);
	pthread_mutex_unlock(&d->lock);
	/* A device that stops decoding (or resets) may fault its mappings (vfio-pci zaps them):
	 * out of the guest first. Decode going on keeps the order: the device, then the mappings.
	 */
	if (((cmd & PCI_COMMAND_MEMORY) || flr) && d->bus)
		bars_park(d);
	if (d->cfg_write)
		d->cfg_write(d, reg, data, len);
	if (flr) {
		/* the device's reset takes its own locks, which its interrupts hold into d->lock */
		pci_dev_do_flr(d);
		remap = true;
	}
	if (!remap)
		return;
	if (under_mmio_lock && (b->remap_started || b->ops.remap_inline)) {
		pthread_mutex_lock(&b->lock);
		b->remap_want |= 1u << (d->devfn >> 3);
		pthread_cond_broadcast(&b->remap_cond);
		pthread_mutex_unlock(&b->lock);
	} else if (!under_mmio_lock) {
		bars_update(d);
	}
}

void pci_cfg_write(struct pci_bus *b, unsigned busno, unsigned devfn, unsigned reg,
		   const void *data, unsigned len)
{
	cfg_write(b, busno, devfn, reg, data, len, false);
}

bool pci_dev_bus_master(struct pci_dev *d)
{
	bool on;

	pthread_mutex_lock(&d->lock);
	on = get16(d->cfg + PCI_COMMAND) & PCI_COMMAND_MASTER;
	pthread_mutex_unlock(&d->lock);
	return on;
}

/* CF8: address register (dword), CFC..CFF: data window. 0xcf9 byte writes never get here: the
 * vCPU exit path gives them to the reset control register first. */
static void cf8_read(void *opaque, uint64_t off, void *data, unsigned len)
{
	struct pci_bus *b = opaque;
	uint32_t v;

	pthread_mutex_lock(&b->lock);
	v = b->cf8;
	pthread_mutex_unlock(&b->lock);
	memset(data, 0, len);
	if (off < 4)
		memcpy(data, (uint8_t *)&v + off, len <= 4 - off ? len : 4 - off);
}

static void cf8_write(void *opaque, uint64_t off, const void *data, unsigned len)
{
	struct pci_bus *b = opaque;

	if (off != 0 || len != 4)
		return;
	pthread_mutex_lock(&b->lock);
	memcpy(&b->cf8, data, 4);
	pthread_mutex_unlock(&b->lock);
}

static bool cf8_decode(struct pci_bus *b, uint64_t off, unsigned *busno, unsigned *devfn,
		       unsigned *reg)
{
	uint32_t a;

	pthread_mutex_lock(&b->lock);
	a = b->cf8;
	pthread_mutex_unlock(&b->lock);
	if (!(a & 0x80000000u))
		return false;
	*busno = (a >> 16) & 0xff;
	*devfn = (a >> 8) & 0xff;
	*reg = (a & 0xfc) + (unsigned)off;
	return true;
}

static void cfc_read(void *opaque, uint64_t off, void *data, unsigned len)
{
	unsigned busno, devfn, reg;

	if (!cf8_decode(opaque, off, &busno, &devfn, &reg) || off + len > 4) {
		memset(data, 0xff, len);
		return;
	}
	pci_cfg_read(opaque, busno, devfn, reg, data, len);
}

static void cfc_write(void *opaque, uint64_t off, const void *data, unsigned len)
{
	unsigned busno, devfn, reg;

	if (cf8_decode(opaque, off, &busno, &devfn, &reg) && off + len <= 4)
		cfg_write(opaque, busno, devfn, reg, data, len, false);
}

static void ecam_read(void *opaque, uint64_t off, void *data, unsigned len)
{
	pci_cfg_read(opaque, (unsigned)(off >> 20), (off >> 12) & 0xff, off & 0xfff, data, len);
}

static void ecam_write(void *opaque, uint64_t off, const void *data, unsigned len)
{
	cfg_write(opaque, (unsigned)(off >> 20), (off >> 12) & 0xff, off & 0xfff, data, len, true);
}

static const struct bus_ops cf8_ops = {.read = cf8_read, .write = cf8_write};
static const struct bus_ops cfc_ops = {.read = cfc_read, .write = cfc_write};
static const struct bus_ops ecam_ops = {.read = ecam_read, .write = ecam_write};

int pci_bus_init(struct pci_bus *b, const struct pci_platform_ops *ops, struct bus *pio,
		 struct bus *mmio, char *err, unsigned errlen)
{
	int r;

	memset(b, 0, sizeof(*b));
	b->ops = *ops;
	b->pio = pio;
	b->mmio = mmio;
	b->mmio64_next = LAYOUT_MMIO64_START;
	b->mmio64_size = b->mmio64_max = LAYOUT_MMIO64_SIZE;
	b->mmio32_next = LAYOUT_MMIO32_START;
	pthread_mutex_init(&b->lock, NULL);
	pthread_mutex_init(&b->intx_lock, NULL);
	pthread_mutex_init(&b->remap_lock, NULL);
	pthread_cond_init(&b->remap_cond, NULL);
	r = ops->remap_inline ? 0 : pthread_create(&b->remap_thread, NULL, pci_remap_thread, b);
	if (r) {
		snprintf(err, errlen, "pci: cannot start the BAR remap thread: %s", strerror(r));
		return -r;
	}
	b->remap_started = !ops->remap_inline;
	pci_dev_init(&b->host_bridge, "host-bridge", 0x1b36, 0x0008, 0x060000, 0x1b36, 0x0008);
	b->host_bridge.bus = b;
	b->dev[0] = &b->host_bridge;
	r = bus_register(pio, LAYOUT_PCI_CONF_ADDR, 4, &cf8_ops, b, "pci-cf8");
	if (!r) {
		b->pio_registered = true;
		r = bus_register(pio, LAYOUT_PCI_CONF_DATA, 4, &cfc_ops, b, "pci-cfc");
	}
	if (r) {
		snprintf(err, errlen, "pci: cannot register config ports 0x%x/0x%x: %s",
			 LAYOUT_PCI_CONF_ADDR, LAYOUT_PCI_CONF_DATA, strerror(-r));
		pci_bus_exit(b);
		return r;
	}
	r = bus_register(mmio, LAYOUT_ECAM_START, LAYOUT_ECAM_SIZE, &ecam_ops, b, "pci-ecam");
	if (r) {
		snprintf(err, errlen, "pci: cannot register ECAM at 0x%llx: %s",
			 (unsigned long long)LAYOUT_ECAM_START, strerror(-r));
		pci_bus_exit(b);
		return r;
	}
	b->ecam_registered = true;
	return 0;
}

int pci_bus_add(struct pci_bus *b, struct pci_dev *d, char *err, unsigned errlen)
{
	unsigned slot;
	int r;

	for (slot = 1; slot < PCI_MAX_DEVS && b->dev[slot]; slot++)
		;
	if (slot == PCI_MAX_DEVS) {
		snprintf(err, errlen, "pci %s: no free slot on bus 0", d->name);
		return -ENOSPC;
	}
	d->bus = b;
	d->devfn = (uint8_t)(slot << 3);
	/* INTx: the slot's route, in Interrupt Line as firmware would leave it */
	d->intx_gsi = 0;
	if (d->cfg[PCI_INTERRUPT_PIN] >= 1 && d->cfg[PCI_INTERRUPT_PIN] <= 4) {
		d->intx_gsi = (uint8_t)LAYOUT_PCI_INTX_ROUTE(slot, d->cfg[PCI_INTERRUPT_PIN]);
		d->cfg[PCI_INTERRUPT_LINE] = d->intx_gsi;
	} else {
		d->cfg[PCI_INTERRUPT_PIN] = 0;
	}
	memcpy(d->cfg_reset, d->cfg, sizeof(d->cfg_reset)); /* before the firmware's placement */
	r = bars_place(b, d, err, errlen);
	if (!r)
		r = msix_bus_add(b, d, err, errlen);
	if (!r)
		r = msi_bus_add(b, d, err, errlen);
	if (r)
		return r;
	put16(d->cfg + PCI_COMMAND, PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER);
	msix_ctrl_changed(d);
	msi_changed(d);
	intx_update(d);
	pthread_mutex_lock(&b->lock);
	b->dev[slot] = d;
	pthread_mutex_unlock(&b->lock);
	bars_update(d);
	return 0;
}

void pci_dev_exit(struct pci_dev *d)
{
	struct pci_bus *b = d->bus;

	if (b) {
		/* The remap worker must be done with d before it goes. */
		pthread_mutex_lock(&b->lock);
		if (b->dev[d->devfn >> 3] == d) {
			b->dev[d->devfn >> 3] = NULL;
			b->remap_want &= ~(1u << (d->devfn >> 3));
		}
		while (b->remap_dev == d)
			pthread_cond_wait(&b->remap_cond, &b->lock);
		pthread_mutex_unlock(&b->lock);
		/* A hot-removed function goes while vCPUs run: a config access that found d before
		 * it left b->dev ran under its bus's lock (CF8/CFC: PIO, ECAM: MMIO) and is over
		 * once each lock was ours. */
		pthread_rwlock_wrlock(&b->pio->lock);
		pthread_rwlock_unlock(&b->pio->lock);
		pthread_rwlock_wrlock(&b->mmio->lock);
		pthread_rwlock_unlock(&b->mmio->lock);
		pthread_mutex_lock(&d->lock);
		put16(d->cfg + PCI_COMMAND, 0);
		intx_exit(d);
		pthread_mutex_unlock(&d->lock);
		bars_update(d);
		bars_release(b, d);
	}
	msix_exit(b, d);
	msi_exit(b, d);
}

void pci_bus_exit(struct pci_bus *b)
{
	if (b->remap_started) {
		pthread_mutex_lock(&b->lock);
		b->remap_stop = true;
		pthread_cond_broadcast(&b->remap_cond);
		pthread_mutex_unlock(&b->lock);
		pthread_join(b->remap_thread, NULL);
		b->remap_started = false;
	}
	if (b->ecam_registered)
		bus_unregister(b->mmio, LAYOUT_ECAM_START, b);
	if (b->pio_registered) {
		bus_unregister(b->pio, LAYOUT_PCI_CONF_ADDR, b);
		bus_unregister(b->pio, LAYOUT_PCI_CONF_DATA, b);
	}
	b->ecam_registered = b->pio_registered = false;
}

/* ---- snapshots ---- */

struct pci_state_head {
	uint32_t nvec, pad;
	uint8_t cfg[PCI_CFG_SIZE];
};

static size_t pci_pba_words(unsigned nvec)
{
	return (nvec + 63) / 64;
}

size_t pci_dev_state_size(const struct pci_dev *d)
{
	return sizeof(struct pci_state_head) + d->msix.nvec * sizeof(struct pci_msix_entry) +
	       pci_pba_words(d->msix.nvec) * sizeof(uint64_t);
}

void pci_dev_save(struct pci_dev *d, void *buf)
{
	struct pci_state_head h = {.nvec = d->msix.nvec};
	uint8_t *p = buf;

	pthread_mutex_lock(&d->lock);
	memcpy(h.cfg, d->cfg, sizeof(h.cfg));
	memcpy(p, &h, sizeof(h));
	p += sizeof(h);
	/* what a masked vector's eventfd holds belongs in its pending bit first */
	for (unsigned v = 0; v < d->msix.nvec; v++)
		msix_drain(d, v);
	if (d->msix.nvec) {
		memcpy(p, d->msix.table, d->msix.nvec * sizeof(struct pci_msix_entry));
		p += d->msix.nvec * sizeof(struct pci_msix_entry);
		memcpy(p, d->msix.pba, pci_pba_words(d->msix.nvec) * sizeof(uint64_t));
	}
	pthread_mutex_unlock(&d->lock);
}

int pci_dev_restore(struct pci_dev *d, const void *buf, size_t len, char *err, unsigned errlen)
{
	struct pci_state_head h;
	const uint8_t *p = buf;
	bool flr = false;
	unsigned v;

	if (len < sizeof(h)) {
		snprintf(err, errlen, "pci %s: state of %zu bytes is too short", d->name, len);
		return -EINVAL;
	}
	memcpy(&h, p, sizeof(h));
	p += sizeof(h);
	if (h.nvec != d->msix.nvec || len != pci_dev_state_size(d)) {
		snprintf(err, errlen,
			 "pci %s: state for %u MSI-X vectors (%zu bytes), the function has %u",
			 d->name, h.nvec, len, d->msix.nvec);
		return -EINVAL;
	}
	if (memcmp(h.cfg, d->cfg, 4) || h.cfg[PCI_HEADER_TYPE] != d->cfg[PCI_HEADER_TYPE]) {
		snprintf(err, errlen,
			 "pci %s: saved vendor/device %02x%02x:%02x%02x is not this "
			 "function's",
			 d->name, h.cfg[1], h.cfg[0], h.cfg[3], h.cfg[2]);
		return -EINVAL;
	}
	pthread_mutex_lock(&d->lock);
	for (v = 0; v < d->msix.nvec; v++) {
		struct pci_msix_entry e;

		memcpy(&e, p + v * sizeof(e), sizeof(e));
		d->msix.table[v] =
		    (struct pci_msix_entry){.addr_lo = e.addr_lo & ~3u,
					    .addr_hi = e.addr_hi,
					    .data = e.data,
					    .ctrl = e.ctrl & PCI_MSIX_ENTRY_CTRL_MASKBIT};
	}
	p += d->msix.nvec * sizeof(struct pci_msix_entry);
	for (v = 0; v < pci_pba_words(d->msix.nvec); v++) {
		uint64_t w;

		memcpy(&w, p + v * sizeof(w), sizeof(w));
		/* bits past the last vector do not exist */
		if (v == pci_pba_words(d->msix.nvec) - 1 && d->msix.nvec % 64)
			w &= (1ULL << (d->msix.nvec % 64)) - 1;
		d->msix.pba[v] = w;
	}
	/* As the guest would write it, a dword at a time: the write masks and BAR rules apply. */
	for (unsigned reg = 0; reg < PCI_CFG_SIZE; reg += 4)
		cfg_write_locked(d, reg, h.cfg + reg, 4, &flr);
	if (d->msix.cap) {
		uint16_t flags = get16(d->cfg + d->msix.cap + PCI_MSIX_FLAGS);

		d->msix.enabled = flags & PCI_MSIX_FLAGS_ENABLE;
		d->msix.maskall = flags & PCI_MSIX_FLAGS_MASKALL;
		d->msix.master = get16(d->cfg + PCI_COMMAND) & PCI_COMMAND_MASTER;
		for (v = 0; v < d->msix.nvec; v++)
			msix_update(d, v);
	}
	pthread_mutex_unlock(&d->lock);
	bars_update(d);
	return 0;
}

void pci_dev_bars_refresh(struct pci_dev *d)
{
	bars_update(d);
}
