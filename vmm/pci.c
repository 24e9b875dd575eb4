/* PCI platform: host bridge, type-1 (CF8/CFC) and ECAM config access, BAR sizing, placement and
 * re-registration on the buses when the guest moves them, MSI-X table/PBA -> interrupt routes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "layout.h"
#include "pci.h"
#include "seccomp_filter.h"

#define PCI_BAR_END (PCI_BAR0 + 4 * PCI_NUM_BARS)

static void put16(uint8_t *p, uint16_t v)
{
	memcpy(p, &v, 2);
}

static void put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

static uint16_t get16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, 2);
	return v;
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

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
	d->msix.bar = PCI_NUM_BARS;
}

int pci_dev_add_bar(struct pci_dev *d, unsigned bar, uint64_t size, bool is64, bool prefetch,
		    const struct bus_ops *ops, void *opaque, void *host)
{
	struct pci_bar *b;
	uint32_t flags;

	if (bar >= PCI_NUM_BARS || (is64 && bar + 1 >= PCI_NUM_BARS) || size < 4096 ||
	    (size & (size - 1)) || size > (1ULL << 40))
		return -EINVAL;
	b = &d->bar[bar];
	b->size = size;
	b->is64 = is64;
	b->prefetch = prefetch;
	b->ops = ops;
	b->opaque = opaque;
	b->host = host;
	flags = (is64 ? PCI_BAR_MEM_TYPE_64 : 0) | (prefetch ? PCI_BAR_MEM_PREFETCH : 0);
	put32(d->cfg + PCI_BAR0 + 4 * bar, flags);
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

/* ---- MSI-X ---- */

static bool msix_masked(const struct pci_dev *d, unsigned v)
{
	return !d->msix.enabled || d->msix.maskall || !d->msix.master ||
	       (d->msix.table[v].ctrl & PCI_MSIX_ENTRY_CTRL_MASKBIT);
}

static void msix_fire(struct pci_dev *d, unsigned v)
{
	uint64_t one = 1;

	d->msix.fired++;
	if (d->msix.efd[v] >= 0 && write(d->msix.efd[v], &one, sizeof(one)) < 0)
		perror("pci: msi-x irqfd");
}

static bool msix_bit(const uint64_t *map, unsigned v)
{
	return map[v / 64] & (1ULL << (v % 64));
}

/* A backend signals a vector's eventfd straight (the SSD's interrupt, no lvmm hop). While the
 * vector is masked the eventfd is out of KVM's hands and its count is the interrupt pending:
 * moved to the PBA bit here, when the guest reads the PBA or unmasks. d->lock held. */
static void msix_drain(struct pci_dev *d, unsigned v)
{
	struct pci_msix *m = &d->msix;
	uint64_t n = 0;

	if (m->efd[v] < 0 || msix_bit(m->live, v))
		return;
	if (read(m->efd[v], &n, sizeof(n)) == sizeof(n) && n) {
		m->pba[v / 64] |= 1ULL << (v % 64);
		m->pended++;
	}
}

/* Programs vector v's route from its table entry. Masking takes the irqfd out of KVM (a signal
 * on a GSI without a route would be dropped); unmasking routes it first, gives the eventfd back
 * and delivers what pended meanwhile. Nothing here runs per interrupt while unmasked. */
static void msix_update(struct pci_dev *d, unsigned v)
{
	struct pci_msix *m = &d->msix;
	const struct pci_platform_ops *ops = &d->bus->ops;
	struct pci_msix_entry *e = &m->table[v];
	bool masked = msix_masked(d, v);
	int r;

	if (masked && msix_bit(m->live, v)) {
		if (ops->irqfd && m->gsi[v] >= 0)
			ops->irqfd(ops->opaque, (unsigned)m->gsi[v], m->efd[v], false);
		m->live[v / 64] &= ~(1ULL << (v % 64));
	}
	if (ops->set_msi_route && m->gsi[v] >= 0)
		ops->set_msi_route(ops->opaque, (unsigned)m->gsi[v],
				   (uint64_t)e->addr_hi << 32 | e->addr_lo, e->data, masked);
	if (masked)
		return;
	if (!msix_bit(m->live, v) && m->efd[v] >= 0) {
		msix_drain(d, v);
		r = ops->irqfd && m->gsi[v] >= 0
			? ops->irqfd(ops->opaque, (unsigned)m->gsi[v], m->efd[v], true)
			: 0;
		if (r)
			fprintf(stderr, "pci %s: irqfd for MSI-X vector %u (GSI %d): %s\n", d->name,
				v, m->gsi[v], strerror(-r));
		else
			m->live[v / 64] |= 1ULL << (v % 64);
	}
	if (msix_bit(m->pba, v)) {
		m->pba[v / 64] &= ~(1ULL << (v % 64));
		msix_fire(d, v);
	}
}

void pci_msix_notify(struct pci_dev *d, unsigned v)
{
	pthread_mutex_lock(&d->lock);
	if (v < d->msix.nvec) {
		if (msix_masked(d, v)) {
			d->msix.pba[v / 64] |= 1ULL << (v % 64);
			d->msix.pended++;
		} else {
			msix_fire(d, v);
		}
	}
	pthread_mutex_unlock(&d->lock);
}

static void msix_mmio_read(void *opaque, uint64_t off, void *data, unsigned len)
{
	struct pci_dev *d = opaque;
	struct pci_msix *m = &d->msix;
	uint8_t buf[8] = {0};

	pthread_mutex_lock(&d->lock);
	if ((len == 4 || len == 8) && !(off & (len - 1))) {
		if (off >= m->table_off && off + len <= m->table_off + m->nvec * 16ULL)
			memcpy(buf, (uint8_t *)m->table + (off - m->table_off), len);
		else if (off >= m->pba_off &&
			 off + len <= m->pba_off + ((m->nvec + 63) / 64) * 8ULL) {
			unsigned v, first = (unsigned)(off - m->pba_off) * 8;

			for (v = first; v < first + len * 8 && v < m->nvec; v++)
				msix_drain(d, v);
			memcpy(buf, (uint8_t *)m->pba + (off - m->pba_off), len);
		}
	}
	pthread_mutex_unlock(&d->lock);
	memcpy(data, buf, len > 8 ? 8 : len);
}

static void msix_mmio_write(void *opaque, uint64_t off, const void *data, unsigned len)
{
	struct pci_dev *d = opaque;
	struct pci_msix *m = &d->msix;
	uint64_t rel;
	unsigned v, i;

	/* Only dword/qword aligned table writes count; the PBA is read-only. */
	if ((len != 4 && len != 8) || (off & (len - 1)) || off < m->table_off)
		return;
	rel = off - m->table_off;
	if (rel + len > m->nvec * 16ULL)
		return;
	pthread_mutex_lock(&d->lock);
	v = (unsigned)(rel / 16);
	for (i = 0; i < len; i += 4) {
		uint32_t val;
		unsigned field = (unsigned)((rel + i) % 16) / 4;

		memcpy(&val, (const uint8_t *)data + i, 4);
		switch (field) {
		case 0:
			m->table[v].addr_lo = val & ~3u;
			break;
		case 1:
			m->table[v].addr_hi = val;
			break;
		case 2:
			m->table[v].data = val;
			break;
		default:
			m->table[v].ctrl = val & PCI_MSIX_ENTRY_CTRL_MASKBIT;
			break;
		}
	}
	msix_update(d, v);
	pthread_mutex_unlock(&d->lock);
}

static const struct bus_ops msix_mmio_ops = {.read = msix_mmio_read, .write = msix_mmio_write};

int pci_dev_add_msix(struct pci_dev *d, unsigned nvec, unsigned bar, char *err, unsigned errlen)
{
	struct pci_msix *m = &d->msix;
	uint8_t cap[12] = {PCI_CAP_ID_MSIX, 0};
	uint64_t size = 4096;
	unsigned v;
	int off;

	if (nvec < 1 || nvec > 2048) {
		snprintf(err, errlen, "pci %s: %u MSI-X vectors is outside 1..2048", d->name, nvec);
		return -EINVAL;
	}
	m->nvec = nvec;
	m->bar = bar;
	m->table_off = 0;
	m->pba_off = (nvec * 16 + 4095) & ~4095u;
	while (size < m->pba_off + 4096)
		size <<= 1;
	m->table = calloc(nvec, sizeof(*m->table));
	m->pba = calloc((nvec + 63) / 64, sizeof(uint64_t));
	m->gsi = calloc(nvec, sizeof(int));
	m->efd = calloc(nvec, sizeof(int));
	m->live = calloc((nvec + 63) / 64, sizeof(uint64_t));
	if (!m->table || !m->pba || !m->gsi || !m->efd || !m->live) {
		snprintf(err, errlen, "pci %s: out of memory for %u MSI-X vectors", d->name, nvec);
		return -ENOMEM;
	}
	for (v = 0; v < nvec; v++) {
		m->table[v].ctrl = PCI_MSIX_ENTRY_CTRL_MASKBIT; /* masked after reset */
		m->gsi[v] = m->efd[v] = -1;
	}
	put16(cap + PCI_MSIX_FLAGS, (uint16_t)(nvec - 1));
	put32(cap + 4, m->table_off | bar);
	put32(cap + 8, m->pba_off | bar);
	off = pci_dev_add_cap(d, cap, sizeof(cap));
	if (off < 0 || pci_dev_add_bar(d, bar, size, true, false, &msix_mmio_ops, d, NULL)) {
		snprintf(err, errlen, "pci %s: no room for the MSI-X capability / BAR %u", d->name,
			 bar);
		return -ENOSPC;
	}
	m->cap = (uint8_t)off;
	put16(d->wmask + off + PCI_MSIX_FLAGS, PCI_MSIX_FLAGS_ENABLE | PCI_MSIX_FLAGS_MASKALL);
	return 0;
}

/* Called with d->lock held after the Message Control word or the bus-master bit may have
 * changed: vectors pended while mastering was off are delivered once it is back on. */
static void msix_ctrl_changed(struct pci_dev *d)
{
	struct pci_msix *m = &d->msix;
	uint16_t flags = get16(d->cfg + m->cap + PCI_MSIX_FLAGS);
	bool en = flags & PCI_MSIX_FLAGS_ENABLE, mask = flags & PCI_MSIX_FLAGS_MASKALL;
	bool master = get16(d->cfg + PCI_COMMAND) & PCI_COMMAND_MASTER;
	unsigned v;

	if (!m->cap || (en == m->enabled && mask == m->maskall && master == m->master))
		return;
	m->enabled = en;
	m->maskall = mask;
	m->master = master;
	for (v = 0; v < m->nvec; v++)
		msix_update(d, v);
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
		if (off >= PCI_BAR0 && off < PCI_BAR_END)
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

/* ---- BARs ---- */

static uint64_t bar_addr(const struct pci_dev *d, unsigned i)
{
	uint64_t a = get32(d->cfg + PCI_BAR0 + 4 * i) & ~0xfULL;

	if (d->bar[i].is64)
		a |= (uint64_t)get32(d->cfg + PCI_BAR0 + 4 * (i + 1)) << 32;
	return a;
}

bool pci_dev_bus_master(struct pci_dev *d)
{
	bool on;

	pthread_mutex_lock(&d->lock);
	on = get16(d->cfg + PCI_COMMAND) & PCI_COMMAND_MASTER;
	pthread_mutex_unlock(&d->lock);
	return on;
}

/* A guest can repeat a bad placement at will: log the 1st..8th refusal, then powers of two. */
static bool remap_log_due(struct pci_bus *b)
{
	uint64_t n = ++b->remap_refused;

	return n <= 8 || !(n & (n - 1));
}

/* Whether [addr, addr + size) may decode: inside one of the host bridge's windows (so never on
 * RAM, ECAM, the IOAPIC or the LAPIC, which lie outside them) and clear of every other BAR that
 * decodes now. Real hardware leaves an overlap undefined; lvmm does not decode the newcomer.
 * Called with b->remap_lock held, which keeps every bar->mapped stable. */
static const char *bar_place_check(struct pci_bus *b, const struct pci_dev *self, unsigned self_bar,
				   uint64_t addr, uint64_t size)
{
	static const struct {
		uint64_t start, size;
	} win[] = {{LAYOUT_MMIO32_START, LAYOUT_MMIO32_SIZE},
		   {LAYOUT_MMIO64_START, LAYOUT_MMIO64_SIZE}};
	bool inside = false;
	unsigned w, s, i;

	for (w = 0; w < sizeof(win) / sizeof(win[0]); w++)
		if (addr >= win[w].start && addr - win[w].start <= win[w].size &&
		    size <= win[w].size - (addr - win[w].start))
			inside = true;
	if (!inside)
		return "outside the PCI windows";
	for (s = 0; s < PCI_MAX_DEVS; s++) {
		const struct pci_dev *o = b->dev[s];

		for (i = 0; o && i < PCI_NUM_BARS; i++) {
			const struct pci_bar *ob = &o->bar[i];

			if ((o == self && i == self_bar) || !ob->mapped)
				continue;
			if (addr < ob->mapped_addr + ob->size && ob->mapped_addr < addr + size)
				return "overlapping another BAR";
		}
	}
	return NULL;
}

/* Makes each BAR decode where config space says (or nowhere); runs without d->lock because bus
 * registration takes the bus lock, which MMIO handlers of this device run under, and with
 * b->remap_lock, so two paths never map one BAR twice. */
static void bars_update(struct pci_dev *d)
{
	struct pci_bus *b = d->bus;
	unsigned i;

	pthread_mutex_lock(&b->remap_lock);
	b->remaps++;

	for (i = 0; i < PCI_NUM_BARS; i++) {
		struct pci_bar *bar = &d->bar[i];
		bool want, use_host;
		uint64_t addr;
		int r = 0;

		if (!bar->size)
			continue;
		pthread_mutex_lock(&d->lock);
		addr = bar_addr(d, i);
		want = (get16(d->cfg + PCI_COMMAND) & PCI_COMMAND_MEMORY) && addr;
		pthread_mutex_unlock(&d->lock);
		use_host = bar->host && b->ops.map_host;
		if (bar->mapped && bar->mapped_addr == addr && want)
			continue;
		if (bar->mapped) {
			if (bar->mapped_host)
				b->ops.unmap_host(b->ops.opaque, bar->mapped_addr);
			else
				bus_unregister(b->mmio, bar->mapped_addr, bar->opaque);
			bar->mapped = false;
			if (bar->moved)
				bar->moved(d, i, ~0ULL);
		}
		if (want) {
			const char *why = bar_place_check(b, d, i, addr, bar->size);

			if (why) {
				if (remap_log_due(b))
					fprintf(
					    stderr,
					    "pci %s: BAR%u at 0x%llx (%llu bytes) %s: not decoded "
					    "(refusal %llu)\n",
					    d->name, i, (unsigned long long)addr,
					    (unsigned long long)bar->size, why,
					    (unsigned long long)b->remap_refused);
				continue;
			}
			r = -ENODEV;
			if (use_host)
				r = b->ops.map_host(b->ops.opaque, addr, bar->size, bar->host);
			/* Without a host mapping the BAR still works, by MMIO exits. */
			bar->mapped_host = !r;
			if (r && bar->ops)
				r = bus_register(b->mmio, addr, bar->size, bar->ops, bar->opaque,
						 d->name);
			if (r) {
				if (remap_log_due(b))
					fprintf(stderr,
						"pci %s: BAR%u at 0x%llx not mapped: %s (refusal "
						"%llu)\n",
						d->name, i, (unsigned long long)addr, strerror(-r),
						(unsigned long long)b->remap_refused);
				continue;
			}
			bar->mapped = true;
			bar->mapped_addr = addr;
			if (bar->moved)
				bar->moved(d, i, addr);
		}
	}
	pthread_mutex_unlock(&b->remap_lock);
}

/* The bus's remap worker: applies the remaps ECAM writes queued, one device at a time. */
static void *pci_remap_thread(void *opaque)
{
	struct pci_bus *b = opaque;
	char err[160];

	/* The guest decides when this thread maps memory slots: device-I/O calls only. */
	if (seccomp_thread_install(SECCOMP_IO, err, sizeof(err)))
		fprintf(stderr, "lvmm: pci: BAR remap thread: %s\n", err);
	pthread_mutex_lock(&b->lock);
	for (;;) {
		struct pci_dev *d;
		unsigned slot;

		while (!b->remap_want && !b->remap_stop)
			pthread_cond_wait(&b->remap_cond, &b->lock);
		if (b->remap_stop)
			break;
		slot = (unsigned)__builtin_ctz(b->remap_want);
		b->remap_want &= ~(1u << slot);
		d = b->dev[slot];
		if (!d)
			continue;
		b->remap_dev = d;
		pthread_mutex_unlock(&b->lock);
		bars_update(d);
		pthread_mutex_lock(&b->lock);
		b->remap_dev = NULL;
		pthread_cond_broadcast(&b->remap_cond);
	}
	pthread_mutex_unlock(&b->lock);
	return NULL;
}

void pci_bus_remap_flush(struct pci_bus *b)
{
	pthread_mutex_lock(&b->lock);
	while (b->ops.remap_inline && b->remap_want) {
		struct pci_dev *d = b->dev[__builtin_ctz(b->remap_want)];

		b->remap_want &= b->remap_want - 1;
		pthread_mutex_unlock(&b->lock);
		if (d)
			bars_update(d);
		pthread_mutex_lock(&b->lock);
	}
	while (b->remap_started && (b->remap_want || b->remap_dev))
		pthread_cond_wait(&b->remap_cond, &b->lock);
	pthread_mutex_unlock(&b->lock);
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
	if (reg >= PCI_CFG_SIZE)
		return; /* extended config space: nothing implemented */
	if (reg + len > PCI_CFG_SIZE)
		len = PCI_CFG_SIZE - reg;
	pthread_mutex_lock(&d->lock);
	memcpy(data, d->cfg + reg, len);
	pthread_mutex_unlock(&d->lock);
}

/* Applies a write; returns true when BAR decoding may have changed. *flr: Initiate FLR written. */
static bool cfg_write_locked(struct pci_dev *d, unsigned reg, const uint8_t *val, unsigned len,
			     bool *flr)
{
	uint16_t cmd_before = get16(d->cfg + PCI_COMMAND);
	bool bars = false, msix = false;
	unsigned i;

	for (i = 0; i < len; i++) {
		unsigned off = reg + i;

		if (off >= PCI_BAR0 && off < PCI_BAR_END) {
			d->cfg[off] = val[i];
			bars = true;
		} else {
			d->cfg[off] =
			    (uint8_t)((d->cfg[off] & ~d->wmask[off]) | (val[i] & d->wmask[off]));
			if (d->msix.cap && off >= d->msix.cap + (unsigned)PCI_MSIX_FLAGS &&
			    off < d->msix.cap + PCI_MSIX_FLAGS + 2u)
				msix = true;
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
	}
	if (msix || ((cmd_before ^ get16(d->cfg + PCI_COMMAND)) & PCI_COMMAND_MASTER))
		msix_ctrl_changed(d);
	return bars || ((cmd_before ^ get16(d->cfg + PCI_COMMAND)) & PCI_COMMAND_MEMORY);
}

static void cfg_write(struct pci_bus *b, unsigned busno, unsigned devfn, unsigned reg,
		      const void *data, unsigned len, bool under_mmio_lock)
{
	struct pci_dev *d = dev_at(b, busno, devfn);
	bool remap, flr = false;

	if (!d || reg >= PCI_CFG_SIZE || len > 4)
		return;
	if (reg + len > PCI_CFG_SIZE)
		len = PCI_CFG_SIZE - reg;
	pthread_mutex_lock(&d->lock);
	remap = cfg_write_locked(d, reg, data, len, &flr);
	pthread_mutex_unlock(&d->lock);
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
	b->mmio32_next = LAYOUT_MMIO32_START;
	pthread_mutex_init(&b->lock, NULL);
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

/* A freed range of exactly size in the window starting at start: naturally aligned already,
 * as it was placed so. 0 when none. */
static uint64_t bar_space_take(struct pci_bus *b, uint64_t size, uint64_t start)
{
	uint64_t wsize = start == LAYOUT_MMIO64_START ? LAYOUT_MMIO64_SIZE : LAYOUT_MMIO32_SIZE;
	unsigned i;

	for (i = 0; i < b->nbar_free; i++) {
		uint64_t a = b->bar_free[i].addr;

		if (b->bar_free[i].size == size && a >= start && a - start < wsize) {
			b->bar_free[i] = b->bar_free[--b->nbar_free];
			return a;
		}
	}
	return 0;
}

/* Gives a removed function's BAR range back: the top of a window lowers its bump pointer,
 * anything else waits in bar_free for a BAR of the same size. */
static void bar_space_put(struct pci_bus *b, const struct pci_bar *bar)
{
	uint64_t *next = bar->prefetch ? &b->mmio64_next : &b->mmio32_next;

	if (bar->placed + bar->size == *next)
		*next = bar->placed;
	else if (b->nbar_free < sizeof(b->bar_free) / sizeof(b->bar_free[0]))
		b->bar_free[b->nbar_free++] = (typeof(b->bar_free[0])){bar->placed, bar->size};
	else
		fprintf(stderr,
			"lvmm: pci: BAR space at 0x%llx (%llu bytes) not reused: free list full\n",
			(unsigned long long)bar->placed, (unsigned long long)bar->size);
}

int pci_bus_add(struct pci_bus *b, struct pci_dev *d, char *err, unsigned errlen)
{
	struct pci_msix *m = &d->msix;
	unsigned slot, i, v;

	for (slot = 1; slot < PCI_MAX_DEVS && b->dev[slot]; slot++)
		;
	if (slot == PCI_MAX_DEVS) {
		snprintf(err, errlen, "pci %s: no free slot on bus 0", d->name);
		return -ENOSPC;
	}
	d->bus = b;
	d->devfn = (uint8_t)(slot << 3);
	memcpy(d->cfg_reset, d->cfg, sizeof(d->cfg_reset)); /* before the firmware's placement */
	/* Firmware-style placement, largest BARs first, naturally aligned: prefetchable BARs in the
	 * 64-bit window, the others in the 32-bit hole (ACPI declares the 64-bit window
	 * prefetchable, so Linux would not claim a non-prefetchable BAR there). */
	for (;;) {
		struct pci_bar *best = NULL;
		uint64_t a, *next, end;
		unsigned bi = 0;

		for (i = 0; i < PCI_NUM_BARS; i++)
			if (d->bar[i].size && !bar_addr(d, i) &&
			    (!best || d->bar[i].size > best->size)) {
				best = &d->bar[i];
				bi = i;
			}
		if (!best)
			break;
		next = best->prefetch ? &b->mmio64_next : &b->mmio32_next;
		end = best->prefetch ? LAYOUT_MMIO64_START + LAYOUT_MMIO64_SIZE
				     : LAYOUT_MMIO32_START + LAYOUT_MMIO32_SIZE;
		a = bar_space_take(b, best->size,
				   end -
				       (best->prefetch ? LAYOUT_MMIO64_SIZE : LAYOUT_MMIO32_SIZE));
		if (a) {
			best->placed = a;
			put32(d->cfg + PCI_BAR0 + 4 * bi,
			      get32(d->cfg + PCI_BAR0 + 4 * bi) | (uint32_t)a);
			if (best->is64)
				put32(d->cfg + PCI_BAR0 + 4 * (bi + 1), (uint32_t)(a >> 32));
			continue;
		}
		a = (*next + best->size - 1) & ~(best->size - 1);
		if (a + best->size > end) {
			snprintf(err, errlen, "pci %s: BAR%u (%llu bytes) does not fit the window",
				 d->name, bi, (unsigned long long)best->size);
			return -ENOSPC;
		}
		*next = a + best->size;
		best->placed = a;
		put32(d->cfg + PCI_BAR0 + 4 * bi, get32(d->cfg + PCI_BAR0 + 4 * bi) | (uint32_t)a);
		if (best->is64)
			put32(d->cfg + PCI_BAR0 + 4 * (bi + 1), (uint32_t)(a >> 32));
	}
	for (v = 0; v < m->nvec; v++) {
		int gsi = b->ops.alloc_gsi ? b->ops.alloc_gsi(b->ops.opaque) : -1;

		if (b->ops.alloc_gsi && gsi < 0) {
			snprintf(err, errlen, "pci %s: no GSI for MSI-X vector %u: %s", d->name, v,
				 strerror(-gsi));
			return gsi;
		}
		m->gsi[v] = gsi;
		/* Handed to KVM as an irqfd while the vector is unmasked (msix_update). */
		m->efd[v] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (m->efd[v] < 0) {
			snprintf(err, errlen, "pci %s: eventfd for MSI-X vector %u: %s", d->name, v,
				 strerror(errno));
			return -EIO;
		}
	}
	put16(d->cfg + PCI_COMMAND, PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER);
	msix_ctrl_changed(d);
	pthread_mutex_lock(&b->lock);
	b->dev[slot] = d;
	pthread_mutex_unlock(&b->lock);
	bars_update(d);
	return 0;
}

void pci_dev_exit(struct pci_dev *d)
{
	struct pci_bus *b = d->bus;
	struct pci_msix *m = &d->msix;
	unsigned v;

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
		pthread_mutex_unlock(&d->lock);
		bars_update(d);
		/* Largest first, as placed: a window's top comes back before what lies below it. */
		for (;;) {
			struct pci_bar *big = NULL;

			for (v = 0; v < PCI_NUM_BARS; v++)
				if (d->bar[v].placed && (!big || d->bar[v].placed > big->placed))
					big = &d->bar[v];
			if (!big)
				break;
			bar_space_put(b, big);
			big->placed = 0;
		}
	}
	for (v = 0; m->efd && v < m->nvec; v++) {
		if (m->efd[v] >= 0) {
			if (b && b->ops.irqfd && m->gsi[v] >= 0 && msix_bit(m->live, v))
				b->ops.irqfd(b->ops.opaque, (unsigned)m->gsi[v], m->efd[v], false);
			close(m->efd[v]);
		}
		/* After the irqfd went: the next function added may get this GSI. */
		if (b && b->ops.free_gsi && m->gsi[v] >= 0)
			b->ops.free_gsi(b->ops.opaque, (unsigned)m->gsi[v]);
	}
	free(m->table);
	free(m->pba);
	free(m->gsi);
	free(m->efd);
	free(m->live);
	memset(m, 0, sizeof(*m));
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
