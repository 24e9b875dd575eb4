/* Inside of the PCI platform (pci.h), shared by pci.c (bus, config space, FLR), pci_bar.c (BAR
 * placement and decoding) and pci_msix.c (MSI-X); nothing here is a contract beyond them. */
#ifndef LVMM_PCI_INTERNAL_H
#define LVMM_PCI_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "pci.h"

/* 16- and 32-bit config space fields at any offset. */
static inline void put16(uint8_t *p, uint16_t v)
{
	memcpy(p, &v, 2);
}

static inline void put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

static inline uint16_t get16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, 2);
	return v;
}

static inline uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

/* The config offset of BAR slot i (PCI_ROM_BAR: the ROM BAR). */
static inline unsigned pci_bar_reg(unsigned i)
{
	return i == PCI_ROM_BAR ? PCI_ROM_ADDRESS : PCI_BAR0 + 4 * i;
}

/* pci_bar.c */
/* Places every BAR of d that has no address yet (pci_bus_add()): 0, or -ENOSPC with a message in
 * err when one does not fit its window. */
int bars_place(struct pci_bus *b, struct pci_dev *d, char *err, unsigned errlen);
/* Gives the window space of d's placed BARs back to b (pci_dev_exit()). */
void bars_release(struct pci_bus *b, struct pci_dev *d);
/* Makes each BAR of d decode where config space says, or nowhere; without d->lock. */
void bars_update(struct pci_dev *d);
/* Takes d's host-memory BARs out of the guest now, from any thread, before a write that stops
 * the device decoding reaches it (its mappings then fault); bars_update() finishes the job. */
void bars_park(struct pci_dev *d);
/* The bus's remap worker (pci_bus_init() starts it unless ops->remap_inline). */
void *pci_remap_thread(void *opaque);

/* pci_msix.c: one message-signalled vector v (MSI-X or MSI, kind names it in messages) with its
 * GSI, eventfd, live and pending bitmaps: routed from addr/data, an irqfd while unmasked, what
 * the eventfd collected while masked moved to the pending bit (vec_drain) and delivered at the
 * unmask. d->lock held. */
void vec_update(struct pci_dev *d, const char *kind, unsigned v, int gsi, int efd, uint64_t *live,
		uint64_t *pend, uint64_t addr, uint32_t data, bool masked, uint64_t *pended,
		uint64_t *fired);
void vec_drain(int efd, const uint64_t *live, uint64_t *pend, unsigned v, uint64_t *pended);
/* Vector v's GSI and eventfd (pci_bus_add), and back (b NULL: never on a bus). */
int vec_alloc(struct pci_bus *b, struct pci_dev *d, const char *kind, unsigned v, int *gsi,
	      int *efd, char *err, unsigned errlen);
void vec_free(struct pci_bus *b, int gsi, int efd, const uint64_t *live, unsigned v);

/* pci_intx.c, d->lock held: after a write that may have changed INTx Disable, MSI or MSI-X
 * (or a reset), the line follows; intx_exit() lowers it for a departing function. */
void intx_update(struct pci_dev *d);
void intx_exit(struct pci_dev *d);

/* pci_msi.c: MSI, d->lock held. After a write that may have touched the capability or the
 * bus-master bit: every vector's route, and the device told when the enabled count changed. */
void msi_changed(struct pci_dev *d);
/* The MSI parts of pci_bus_add() and pci_dev_exit(): each vector's GSI and eventfd. */
int msi_bus_add(struct pci_bus *b, struct pci_dev *d, char *err, unsigned errlen);
void msi_exit(struct pci_bus *b, struct pci_dev *d);

/* pci_msix.c. msix_update() and msix_ctrl_changed() run with d->lock held. */
/* Programs vector v's route and irqfd from its table entry and the enable bits. */
void msix_update(struct pci_dev *d, unsigned v);
/* After the Message Control word or the bus-master bit may have changed: every vector. */
void msix_ctrl_changed(struct pci_dev *d);
/* Moves what a masked vector's eventfd holds into its PBA bit. */
void msix_drain(struct pci_dev *d, unsigned v);
/* The MSI-X parts of pci_bus_add() and pci_dev_exit(): each vector's GSI and eventfd. */
int msix_bus_add(struct pci_bus *b, struct pci_dev *d, char *err, unsigned errlen);
void msix_exit(struct pci_bus *b, struct pci_dev *d);

#endif
