/* PCI MSI (pci.h) for passed-through functions: the function's own capability emulated (enable,
 * vectors enabled, address, data, per-vector masks, pending bits), each vector routed through
 * the vector code MSI-X uses (pci_msix.c's vec_update). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "pci_internal.h"

/* Offsets inside the capability, by its flags. */
static unsigned msi_data_off(const struct pci_msi *m)
{
	return m->is64 ? 12 : 8;
}

static unsigned msi_mask_off(const struct pci_msi *m)
{
	return m->is64 ? 16 : 12;
}

unsigned pci_msi_cap_len(uint16_t flags)
{
	unsigned len = (flags & PCI_MSI_FLAGS_64BIT) ? 14 : 10;

	return (flags & PCI_MSI_FLAGS_MASKBIT) ? len + 10 : len;
}

int pci_dev_add_msi_at(struct pci_dev *d, uint8_t cap, char *err, unsigned errlen)
{
	struct pci_msi *m = &d->msi;
	uint16_t flags;
	unsigned len, log2n;

	if (cap < 0x40 || cap > PCI_CFG_SIZE - 10) {
		snprintf(err, errlen, "pci %s: MSI capability at 0x%x is outside config space",
			 d->name, cap);
		return -EINVAL;
	}
	flags = get16(d->cfg + cap + PCI_MSI_FLAGS);
	len = pci_msi_cap_len(flags);
	if (cap + len > PCI_CFG_SIZE) {
		snprintf(err, errlen, "pci %s: MSI capability at 0x%x (%u bytes) passes 0x%x",
			 d->name, cap, len, PCI_CFG_SIZE);
		return -EINVAL;
	}
	log2n = (flags & PCI_MSI_FLAGS_QMASK) >> 1;
	memset(m, 0, sizeof(*m));
	m->nvec = log2n > 5 ? PCI_MSI_MAX_VECTORS : 1u << log2n; /* 6, 7 are reserved */
	m->is64 = flags & PCI_MSI_FLAGS_64BIT;
	m->maskable = flags & PCI_MSI_FLAGS_MASKBIT;
	for (unsigned v = 0; v < PCI_MSI_MAX_VECTORS; v++)
		m->gsi[v] = m->efd[v] = -1;
	/* Reset state: off, one vector, no address, data or masks. */
	memset(d->cfg + cap + 2, 0, len - 2);
	put16(d->cfg + cap + PCI_MSI_FLAGS,
	      flags & (PCI_MSI_FLAGS_QMASK | PCI_MSI_FLAGS_64BIT | PCI_MSI_FLAGS_MASKBIT));
	memset(d->wmask + cap, 0, len);
	put16(d->wmask + cap + PCI_MSI_FLAGS, PCI_MSI_FLAGS_ENABLE | PCI_MSI_FLAGS_QSIZE);
	put32(d->wmask + cap + 4, 0xfffffffc);
	if (m->is64)
		put32(d->wmask + cap + 8, 0xffffffff);
	put16(d->wmask + cap + msi_data_off(m), 0xffff);
	if (m->maskable)
		put32(d->wmask + cap + msi_mask_off(m),
		      m->nvec == 32 ? 0xffffffffu : (1u << m->nvec) - 1);
	m->cap = cap;
	return 0;
}

void msi_changed(struct pci_dev *d)
{
	struct pci_msi *m = &d->msi;
	const uint8_t *c = d->cfg + m->cap;
	uint16_t flags;
	unsigned en = 0;
	uint64_t addr;
	uint32_t data, mask;

	if (!m->cap)
		return;
	flags = get16(c + PCI_MSI_FLAGS);
	if ((flags & PCI_MSI_FLAGS_ENABLE) && !m->enabled && d->msix.enabled) {
		/* MSI-X is on: MSI cannot be too, the enable bit does not stick */
		flags &= (uint16_t)~PCI_MSI_FLAGS_ENABLE;
		put16(d->cfg + m->cap + PCI_MSI_FLAGS, flags);
	}
	if (flags & PCI_MSI_FLAGS_ENABLE) {
		unsigned log2n = (flags & PCI_MSI_FLAGS_QSIZE) >> 4;

		en = log2n > 5 ? PCI_MSI_MAX_VECTORS : 1u << log2n;
		if (en > m->nvec)
			en = m->nvec;
	}
	addr = get32(c + 4) & ~3u;
	if (m->is64)
		addr |= (uint64_t)get32(c + 8) << 32;
	data = get16(c + msi_data_off(m));
	mask = m->maskable ? get32(c + msi_mask_off(m)) : 0;
	m->master = get16(d->cfg + PCI_COMMAND) & PCI_COMMAND_MASTER;
	if (en != m->enabled && d->msi_enable)
		d->msi_enable(d, en);
	m->enabled = en;
	for (unsigned v = 0; v < m->nvec; v++) {
		bool masked = v >= en || !m->master || (mask & (1u << v));
		/* multiple messages: the vector number in the data's low bits */
		uint32_t vdata = en ? (data & ~(en - 1)) | v : data;

		vec_update(d, "MSI", v, m->gsi[v], m->efd[v], m->live, m->pending, addr, vdata,
			   masked, &m->pended, &m->fired);
		vec_drain(m->efd[v], m->live, m->pending, v, &m->pended);
	}
	if (m->maskable)
		put32(d->cfg + m->cap + msi_mask_off(m) + 4, (uint32_t)m->pending[0]);
}

int msi_bus_add(struct pci_bus *b, struct pci_dev *d, char *err, unsigned errlen)
{
	struct pci_msi *m = &d->msi;
	int r = 0;

	for (unsigned v = 0; !r && m->cap && v < m->nvec; v++)
		r = vec_alloc(b, d, "MSI", v, &m->gsi[v], &m->efd[v], err, errlen);
	return r;
}

void msi_exit(struct pci_bus *b, struct pci_dev *d)
{
	struct pci_msi *m = &d->msi;

	for (unsigned v = 0; m->cap && v < m->nvec; v++)
		vec_free(b, m->gsi[v], m->efd[v], m->live, v);
	memset(m, 0, sizeof(*m));
}
