/* PCI INTx (pci.h): a function's pin reaches one of the IOAPIC inputs kept for PCI (the slot's
 * swizzle); the bus ORs the functions sharing an input and gates each by INTx Disable, MSI and
 * MSI-X, as a PCI function must. */
#include <errno.h>
#include <stdio.h>

#include "layout.h"
#include "pci_internal.h"

void pci_dev_set_intx_pin(struct pci_dev *d, unsigned pin)
{
	d->cfg[PCI_INTERRUPT_PIN] = pin <= 4 ? (uint8_t)pin : 0;
}

/* The bus's input for gsi goes high with its first user and low with its last. */
static void intx_drive(struct pci_dev *d, bool high)
{
	struct pci_bus *b = d->bus;
	unsigned i = d->intx_gsi - LAYOUT_PCI_INTX_GSI, before;
	int r = 0;

	if (high == d->intx_high || !b || i >= LAYOUT_PCI_INTX_GSIS)
		return;
	d->intx_high = high;
	pthread_mutex_lock(&b->intx_lock);
	before = b->intx_users[i];
	b->intx_users[i] = high ? before + 1 : before - 1;
	if ((before == 0) != (b->intx_users[i] == 0) && b->ops.intx_line)
		r = b->ops.intx_line(b->ops.opaque, d->intx_gsi, high);
	pthread_mutex_unlock(&b->intx_lock);
	if (r)
		fprintf(stderr, "lvmm: pci %s: INTx line %u %s: error %d\n", d->name, d->intx_gsi,
			high ? "high" : "low", r);
}

/* The function may drive its pin now: INTx Disable clear, no message interrupts on. */
static bool intx_open(struct pci_dev *d)
{
	return !(get16(d->cfg + PCI_COMMAND) & PCI_COMMAND_INTX_DISABLE) && !d->msix.enabled &&
	       !d->msi.enabled;
}

void intx_update(struct pci_dev *d)
{
	uint16_t st = get16(d->cfg + PCI_STATUS);
	bool open;

	if (!d->intx_gsi)
		return;
	put16(d->cfg + PCI_STATUS, (uint16_t)(d->intx_asserted ? st | PCI_STATUS_INTERRUPT
							       : st & ~PCI_STATUS_INTERRUPT));
	open = intx_open(d);
	if (d->intx_gate)
		d->intx_gate(d, open);
	if (d->intx_mode)
		d->intx_mode(d, !d->msix.enabled && !d->msi.enabled);
	intx_drive(d, d->intx_asserted && open);
}

void intx_exit(struct pci_dev *d)
{
	d->intx_asserted = false;
	intx_drive(d, false);
}

void pci_intx_set_locked(struct pci_dev *d, bool asserted)
{
	d->intx_asserted = asserted;
	intx_update(d);
}

void pci_intx_set(struct pci_dev *d, bool asserted)
{
	pthread_mutex_lock(&d->lock);
	pci_intx_set_locked(d, asserted);
	pthread_mutex_unlock(&d->lock);
}

bool pci_intx_high(struct pci_dev *d)
{
	bool high;

	pthread_mutex_lock(&d->lock);
	high = d->intx_high;
	pthread_mutex_unlock(&d->lock);
	return high;
}

void pci_bus_intx_eoi(struct pci_bus *b, unsigned gsi)
{
	/* b->lock keeps a departing function (pci_dev_exit) until its callback is over; it is
	 * never taken inside d->lock. */
	pthread_mutex_lock(&b->lock);
	for (unsigned slot = 1; slot < PCI_MAX_DEVS; slot++) {
		struct pci_dev *d = b->dev[slot];

		if (d && d->intx_gsi == gsi && d->intx_eoi)
			d->intx_eoi(d);
	}
	pthread_mutex_unlock(&b->lock);
}

int pci_intx_irqfd(struct pci_dev *d, int efd, int resample_fd, bool assign)
{
	struct pci_bus *b = d->bus;

	if (!b || !d->intx_gsi)
		return -ENODEV;
	if (!b->ops.intx_irqfd)
		return -EOPNOTSUPP;
	return b->ops.intx_irqfd(b->ops.opaque, d->intx_gsi, efd, resample_fd, assign);
}
