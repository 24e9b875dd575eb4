/* User-space IOAPIC for VMs whose LAPICs are in KVM but whose IOAPIC is not (split irqchip):
 * pins become MSIs sent with KVM_SIGNAL_MSI; level pins honour Remote IRR and EOI. */
#ifndef LVMM_IOAPIC_H
#define LVMM_IOAPIC_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define IOAPIC_PINS 24

struct ioapic {
	pthread_mutex_t lock;
	uint8_t id;
	uint32_t sel;
	uint64_t redir[IOAPIC_PINS];
	bool level[IOAPIC_PINS]; /* current input line */
	/* Delivers one interrupt message (address, data); returns 0 or a negative errno. */
	int (*send_msi)(void *opaque, uint64_t addr, uint32_t data);
	void *opaque;
	/* Optional (set after ioapic_init), both with opaque. eoi: the guest's EOI cleared pin's
	 * Remote IRR; called without the lock before a still-high pin is delivered again, so a
	 * device may lower it first (PCI INTx). route: pin's message now, on while the pin is
	 * unmasked and level triggered, under the lock: KVM exits with the EOI of a vector only
	 * where a level route names it (KVM_EXIT_IOAPIC_EOI). */
	void (*eoi)(void *opaque, unsigned pin);
	void (*route)(void *opaque, unsigned pin, uint64_t addr, uint32_t data, bool on);
};

void ioapic_init(struct ioapic *io, int (*send_msi)(void *, uint64_t, uint32_t), void *opaque);
/* Register window: off 0x00 IOREGSEL, 0x10 IOWIN, 0x40 EOI (version 0x20). */
uint32_t ioapic_mmio_read(struct ioapic *io, uint64_t off);
void ioapic_mmio_write(struct ioapic *io, uint64_t off, uint32_t val);
/* Input line change; -EINVAL for a pin out of range. */
int ioapic_set_irq(struct ioapic *io, unsigned pin, bool level);
/* The LAPIC accepted EOI for vector: clears Remote IRR, redelivers a still-high level pin. */
void ioapic_eoi(struct ioapic *io, uint8_t vector);

/* Snapshots: the registers and input lines; restore refuses a selector or ID out of range. */
struct ioapic_state {
	uint32_t id, sel;
	uint64_t redir[IOAPIC_PINS];
	uint8_t level[IOAPIC_PINS];
};
void ioapic_save(struct ioapic *io, struct ioapic_state *st);
int ioapic_restore(struct ioapic *io, const struct ioapic_state *st);

#endif
