/* Legacy platform ports of an lvmm VM: reset (0xcf9, i8042), ACPI PM1a (poweroff), CMOS/RTC
 * (incl. the warm-reset vector used to start APs), POST port 0x80. */
#ifndef LVMM_LEGACY_H
#define LVMM_LEGACY_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "bus.h"

enum legacy_event { LEGACY_EV_NONE, LEGACY_EV_POWEROFF, LEGACY_EV_RESET };

struct legacy {
	pthread_mutex_t lock;
	uint8_t cmos_index;
	uint8_t cmos[128];
	uint16_t pm1_sts, pm1_en, pm1_cnt;
	uint8_t reset_reg;
	/* Called (without the lock) when the guest asks to power off or reset. */
	void (*event)(void *opaque, enum legacy_event ev, const char *how);
	/* Called when the guest writes CMOS 0x0f (shutdown status byte), e.g. 0x0a before SIPI. */
	void (*warm_reset)(void *opaque, uint8_t status);
	void *opaque;
};

void legacy_init(struct legacy *l, void (*event)(void *, enum legacy_event, const char *),
		 void (*warm_reset)(void *, uint8_t), void *opaque);
/* Registers the ports on the PIO bus; 0 or a negative errno. */
int legacy_register(struct legacy *l, struct bus *pio);
/* 0xcf9 shares its dword with the PCI address port 0xcf8, so the vCPU exit path offers every
 * 1-byte write to 0xcf9 here first: true when it was the reset control register. */
bool legacy_reset_port_write(struct legacy *l, uint16_t port, unsigned len, uint8_t val);

/* Snapshots: CMOS index and bytes, ACPI PM1 status, enable and control (the clock itself follows
 * the host and is not saved). Restore takes the bits a guest could have written, nothing else. */
struct legacy_state {
	uint8_t cmos_index, reset_reg, pad[2];
	uint16_t pm1_sts, pm1_en, pm1_cnt, pad2;
	uint8_t cmos[128];
};
void legacy_save(struct legacy *l, struct legacy_state *st);
void legacy_restore(struct legacy *l, const struct legacy_state *st);

#endif
