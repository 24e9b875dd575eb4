/* PCI MSI-X (pci.h): the capability, its table and PBA in a BAR of their own, and the vector
 * routes they program: a vector's eventfd is KVM's irqfd while it is unmasked, and what it
 * signals while masked becomes its pending bit. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "pci_internal.h"

static bool msix_masked(const struct pci_dev *d, unsigned v)
{
	return !d->msix.enabled || d->msix.maskall || !d->msix.master ||
	       (d->msix.table[v].ctrl & PCI_MSIX_ENTRY_CTRL_MASKBIT);
}

static void vec_fire(struct pci_dev *d, int efd, uint64_t *fired)
{
	uint64_t one = 1;

	(*fired)++;
	if (efd >= 0 && write(efd, &one, sizeof(one)) < 0)
		fprintf(stderr, "pci %s: vector eventfd: %s\n", d->name, strerror(errno));
}

static bool msix_bit(const uint64_t *map, unsigned v)
{
	return map[v / 64] & (1ULL << (v % 64));
}

/* A backend signals a vector's eventfd straight (the SSD's interrupt, a passed-through
 * function's, no lvmm hop). While the vector is masked the eventfd is out of KVM's hands and its
 * count is the interrupt pending: moved to its pending bit here, when the guest reads the
 * pending bits or unmasks. d->lock held. */
void vec_drain(int efd, const uint64_t *live, uint64_t *pend, unsigned v, uint64_t *pended)
{
	uint64_t n = 0;

	if (efd < 0 || msix_bit(live, v))
		return;
	if (read(efd, &n, sizeof(n)) == sizeof(n) && n) {
		pend[v / 64] |= 1ULL << (v % 64);
		(*pended)++;
	}
}

void msix_drain(struct pci_dev *d, unsigned v)
{
	vec_drain(d->msix.efd[v], d->msix.live, d->msix.pba, v, &d->msix.pended);
}

/* One message-signalled vector (MSI-X or MSI) programmed: its route from addr/data; masking
 * takes the irqfd out of KVM (a signal on a GSI without a route would be dropped); unmasking
 * routes it first, gives the eventfd back and delivers what pended meanwhile. Nothing here runs
 * per interrupt while unmasked. d->lock held. */
void vec_update(struct pci_dev *d, const char *kind, unsigned v, int gsi, int efd, uint64_t *live,
		uint64_t *pend, uint64_t addr, uint32_t data, bool masked, uint64_t *pended,
		uint64_t *fired)
{
	const struct pci_platform_ops *ops = &d->bus->ops;
	int r;

	if (masked && msix_bit(live, v)) {
		if (ops->irqfd && gsi >= 0)
			ops->irqfd(ops->opaque, (unsigned)gsi, efd, false);
		live[v / 64] &= ~(1ULL << (v % 64));
	}
	if (ops->set_msi_route && gsi >= 0)
		ops->set_msi_route(ops->opaque, (unsigned)gsi, addr, data, masked);
	if (masked)
		return;
	if (!msix_bit(live, v) && efd >= 0) {
		vec_drain(efd, live, pend, v, pended);
		r = ops->irqfd && gsi >= 0 ? ops->irqfd(ops->opaque, (unsigned)gsi, efd, true) : 0;
		if (r)
			fprintf(stderr, "pci %s: irqfd for %s vector %u (GSI %d): %s\n", d->name,
				kind, v, gsi, strerror(-r));
		else
			live[v / 64] |= 1ULL << (v % 64);
	}
	if (msix_bit(pend, v)) {
		pend[v / 64] &= ~(1ULL << (v % 64));
		vec_fire(d, efd, fired);
	}
}

void msix_update(struct pci_dev *d, unsigned v)
{
	struct pci_msix *m = &d->msix;
	const struct pci_msix_entry *e = &m->table[v];

	vec_update(d, "MSI-X", v, m->gsi[v], m->efd[v], m->live, m->pba,
		   (uint64_t)e->addr_hi << 32 | e->addr_lo, e->data, msix_masked(d, v), &m->pended,
		   &m->fired);
}

void pci_msix_notify(struct pci_dev *d, unsigned v)
{
	pthread_mutex_lock(&d->lock);
	if (v < d->msix.nvec) {
		if (msix_masked(d, v)) {
			d->msix.pba[v / 64] |= 1ULL << (v % 64);
			d->msix.pended++;
		} else {
			vec_fire(d, d->msix.efd[v], &d->msix.fired);
		}
	}
	pthread_mutex_unlock(&d->lock);
}

bool pci_msix_access(struct pci_dev *d, unsigned bar, uint64_t off, void *data, unsigned len,
		     bool write)
{
	struct pci_msix *m = &d->msix;
	bool table, pba, ok = (len == 4 || len == 8) && !(off & (len - 1));
	uint8_t buf[8] = {0};
	uint64_t rel;
	unsigned v, i;

	table =
	    m->nvec && bar == m->bar && off >= m->table_off && off - m->table_off < m->nvec * 16ULL;
	pba = m->nvec && bar == m->pba_bar && off >= m->pba_off &&
	      off - m->pba_off < ((m->nvec + 63) / 64) * 8ULL;
	if (!table && !pba)
		return false;
	if (!write)
		memset(data, 0, len > 8 ? 8 : len);
	/* Only dword/qword aligned accesses that stay inside count; the PBA is read-only. */
	rel = table ? off - m->table_off : off - m->pba_off;
	if (!ok || rel + len > (table ? m->nvec * 16ULL : ((m->nvec + 63) / 64) * 8ULL) ||
	    (pba && write))
		return true;
	pthread_mutex_lock(&d->lock);
	if (!write && table) {
		memcpy(buf, (uint8_t *)m->table + rel, len);
	} else if (!write) {
		unsigned first = (unsigned)rel * 8;

		for (v = first; v < first + len * 8 && v < m->nvec; v++)
			msix_drain(d, v);
		memcpy(buf, (uint8_t *)m->pba + rel, len);
	} else {
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
	}
	pthread_mutex_unlock(&d->lock);
	if (!write)
		memcpy(data, buf, len);
	return true;
}

static void msix_mmio_read(void *opaque, uint64_t off, void *data, unsigned len)
{
	struct pci_dev *d = opaque;

	if (!pci_msix_access(d, d->msix.bar, off, data, len, false))
		memset(data, 0, len > 8 ? 8 : len);
}

static void msix_mmio_write(void *opaque, uint64_t off, const void *data, unsigned len)
{
	struct pci_dev *d = opaque;

	pci_msix_access(d, d->msix.bar, off, (void *)data, len, true);
}

static const struct bus_ops msix_mmio_ops = {.read = msix_mmio_read, .write = msix_mmio_write};

static int msix_alloc(struct pci_dev *d, unsigned nvec, char *err, unsigned errlen);

int pci_dev_add_msix(struct pci_dev *d, unsigned nvec, unsigned bar, char *err, unsigned errlen)
{
	struct pci_msix *m = &d->msix;
	uint8_t cap[12] = {PCI_CAP_ID_MSIX, 0};
	uint64_t size = 4096;
	int off, r;

	m->bar = m->pba_bar = bar;
	m->table_off = 0;
	m->pba_off = (nvec * 16 + 4095) & ~4095u;
	r = msix_alloc(d, nvec, err, errlen);
	if (r)
		return r;
	while (size < m->pba_off + 4096)
		size <<= 1;
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

int pci_dev_add_msix_at(struct pci_dev *d, uint8_t cap, char *err, unsigned errlen)
{
	struct pci_msix *m = &d->msix;
	uint32_t table, pba;
	unsigned nvec;
	int r;

	if (cap < 0x40 || cap > PCI_CFG_SIZE - 12) {
		snprintf(err, errlen, "pci %s: MSI-X capability at 0x%x is outside config space",
			 d->name, cap);
		return -EINVAL;
	}
	nvec = (get16(d->cfg + cap + PCI_MSIX_FLAGS) & PCI_MSIX_FLAGS_QSIZE) + 1u;
	table = get32(d->cfg + cap + PCI_MSIX_TABLE);
	pba = get32(d->cfg + cap + PCI_MSIX_PBA);
	m->bar = table & PCI_MSIX_BIR;
	m->pba_bar = pba & PCI_MSIX_BIR;
	m->table_off = table & ~(uint32_t)PCI_MSIX_BIR;
	m->pba_off = pba & ~(uint32_t)PCI_MSIX_BIR;
	if (m->bar >= PCI_NUM_BARS || m->pba_bar >= PCI_NUM_BARS ||
	    m->table_off + nvec * 16ULL > d->bar[m->bar].size ||
	    m->pba_off + (nvec + 63) / 64 * 8ULL > d->bar[m->pba_bar].size) {
		snprintf(err, errlen,
			 "pci %s: MSI-X table (BAR%u+0x%x) or PBA (BAR%u+0x%x) of %u vectors lies "
			 "outside its BAR",
			 d->name, m->bar, m->table_off, m->pba_bar, m->pba_off, nvec);
		return -EINVAL;
	}
	r = msix_alloc(d, nvec, err, errlen);
	if (r)
		return r;
	/* Reset state: off, function mask clear; only the two control bits are the guest's. */
	put16(d->cfg + cap + PCI_MSIX_FLAGS, (uint16_t)(nvec - 1));
	memset(d->wmask + cap, 0, 12);
	put16(d->wmask + cap + PCI_MSIX_FLAGS, PCI_MSIX_FLAGS_ENABLE | PCI_MSIX_FLAGS_MASKALL);
	m->cap = cap;
	return 0;
}

/* The table, PBA, GSIs and eventfds of nvec vectors, every vector masked (reset state). */
static int msix_alloc(struct pci_dev *d, unsigned nvec, char *err, unsigned errlen)
{
	struct pci_msix *m = &d->msix;
	unsigned v;

	if (nvec < 1 || nvec > 2048) {
		snprintf(err, errlen, "pci %s: %u MSI-X vectors is outside 1..2048", d->name, nvec);
		return -EINVAL;
	}
	m->nvec = nvec;
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
	return 0;
}

/* Called with d->lock held after the Message Control word or the bus-master bit may have
 * changed: vectors pended while mastering was off are delivered once it is back on. */
void msix_ctrl_changed(struct pci_dev *d)
{
	struct pci_msix *m = &d->msix;
	uint16_t flags = get16(d->cfg + m->cap + PCI_MSIX_FLAGS);
	bool en = flags & PCI_MSIX_FLAGS_ENABLE, mask = flags & PCI_MSIX_FLAGS_MASKALL;
	bool master = get16(d->cfg + PCI_COMMAND) & PCI_COMMAND_MASTER;
	unsigned v;

	if (m->cap && en && !m->enabled && d->msi.enabled) {
		/* MSI is on: MSI-X cannot be too, the enable bit does not stick */
		put16(d->cfg + m->cap + PCI_MSIX_FLAGS, (uint16_t)(flags & ~PCI_MSIX_FLAGS_ENABLE));
		en = false;
	}
	if (!m->cap || (en == m->enabled && mask == m->maskall && master == m->master))
		return;
	if (en != m->enabled && d->msix_enable)
		d->msix_enable(d, en);
	m->enabled = en;
	m->maskall = mask;
	m->master = master;
	for (v = 0; v < m->nvec; v++)
		msix_update(d, v);
}

/* The MSI-X part of pci_bus_add(): a GSI and an eventfd for every vector of d. */
int vec_alloc(struct pci_bus *b, struct pci_dev *d, const char *kind, unsigned v, int *gsi,
	      int *efd, char *err, unsigned errlen)
{
	*gsi = b->ops.alloc_gsi ? b->ops.alloc_gsi(b->ops.opaque) : -1;
	if (b->ops.alloc_gsi && *gsi < 0) {
		snprintf(err, errlen, "pci %s: no GSI for %s vector %u: %s", d->name, kind, v,
			 strerror(-*gsi));
		return *gsi;
	}
	/* Handed to KVM as an irqfd while the vector is unmasked (vec_update). */
	*efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (*efd < 0) {
		snprintf(err, errlen, "pci %s: eventfd for %s vector %u: %s", d->name, kind, v,
			 strerror(errno));
		return -EIO;
	}
	return 0;
}

void vec_free(struct pci_bus *b, int gsi, int efd, const uint64_t *live, unsigned v)
{
	if (efd >= 0) {
		if (b && b->ops.irqfd && gsi >= 0 && msix_bit(live, v))
			b->ops.irqfd(b->ops.opaque, (unsigned)gsi, efd, false);
		close(efd);
	}
	/* After the irqfd went: the next function added may get this GSI. */
	if (b && b->ops.free_gsi && gsi >= 0)
		b->ops.free_gsi(b->ops.opaque, (unsigned)gsi);
}

/* The MSI-X part of pci_bus_add(): a GSI and an eventfd for every vector of d. */
int msix_bus_add(struct pci_bus *b, struct pci_dev *d, char *err, unsigned errlen)
{
	struct pci_msix *m = &d->msix;
	int r = 0;

	for (unsigned v = 0; !r && v < m->nvec; v++)
		r = vec_alloc(b, d, "MSI-X", v, &m->gsi[v], &m->efd[v], err, errlen);
	return r;
}

/* The MSI-X part of pci_dev_exit(): every vector's irqfd, eventfd and GSI given back (b NULL:
 * d never joined a bus), the table and PBA freed. */
void msix_exit(struct pci_bus *b, struct pci_dev *d)
{
	struct pci_msix *m = &d->msix;
	unsigned v;

	for (v = 0; m->efd && v < m->nvec; v++)
		vec_free(b, m->gsi[v], m->efd[v], m->live, v);
	free(m->table);
	free(m->pba);
	free(m->gsi);
	free(m->efd);
	free(m->live);
	memset(m, 0, sizeof(*m));
}
