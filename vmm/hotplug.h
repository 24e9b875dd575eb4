/* ACPI PCI hotplug controller: the I/O-port register block the DSDT's PHPR methods use (slots
 * added, slots to remove, the guest's eject) and the per-slot state machine behind it. */
#ifndef LVMM_HOTPLUG_H
#define LVMM_HOTPLUG_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "bus.h"

/* Registers, 32 bits each, at LAYOUT_HOTPLUG_PORT. acpi_hotplug.c's AML agrees on them. */
#define HOTPLUG_REG_PCIU 0x0 /* R: slots added since the last read; the read clears it */
#define HOTPLUG_REG_PCID 0x4 /* R: slots lvmm asks the guest to eject; the read clears it */
#define HOTPLUG_REG_B0EJ 0x8 /* W: the slot the guest's _EJ0 ejects, as a one-bit mask */
#define HOTPLUG_REG_SLOT 0xc /* R: slots present on bus 0 (diagnostics) */

#define HOTPLUG_SLOTS 32 /* bus 0; slot 0 is the host bridge and never changes */

enum hotplug_slot_state {
	HOTPLUG_EMPTY,
	HOTPLUG_PRESENT,  /* a device the guest may use */
	HOTPLUG_REMOVING, /* lvmm asked the guest to eject it; the guest still owns it */
	HOTPLUG_EJECTED,  /* the guest ejected it: lvmm may tear it down */
};

struct hotplug {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* broadcast on every eject */
	enum hotplug_slot_state state[HOTPLUG_SLOTS];
	uint32_t up, down; /* what the guest's next scan (PCNT) notifies */
	/* Raises the Generic Event Device's interrupt; called without the lock. */
	void (*notify)(void *opaque);
	void *opaque;
	uint64_t events, ejects, bad_accesses;
};

extern const struct bus_ops hotplug_bus_ops;

void hotplug_init(struct hotplug *h, void (*notify)(void *opaque), void *opaque);
void hotplug_destroy(struct hotplug *h);

/* A device present since boot: no event (the guest's boot scan finds it). */
int hotplug_boot_present(struct hotplug *h, unsigned slot);
/* A device added at run time: the guest is told to scan the slot (Notify 1, device check).
 * -EINVAL for slot 0 or out of range, -EBUSY when the slot is not empty. */
int hotplug_plug(struct hotplug *h, unsigned slot);
/* Asks the guest to eject the device in slot (Notify 3, eject request); repeating the request
 * for a slot already being removed notifies again. -ENOENT when the slot holds no device. */
int hotplug_unplug(struct hotplug *h, unsigned slot);
/* Waits up to timeout_ms for the guest's eject of slot: 0 once ejected, -ETIMEDOUT. */
int hotplug_wait_eject(struct hotplug *h, unsigned slot, unsigned timeout_ms);
/* lvmm tore the ejected (or never plugged) device down: the slot is free again. */
void hotplug_release(struct hotplug *h, unsigned slot);
enum hotplug_slot_state hotplug_state(struct hotplug *h, unsigned slot);

#endif
