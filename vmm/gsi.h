/* GSI allocator for MSI routes: which GSIs above the IOAPIC pins are handed out, lowest free
 * first, so that the GSIs of a hot-removed function are reused by the next one. */
#ifndef LVMM_GSI_H
#define LVMM_GSI_H

#include <stdbool.h>
#include <stdint.h>

#define GSI_ALLOC_MAX 1024 /* KVM_MAX_IRQ_ROUTES is 4096; our routing table holds 1024 */

/* Not locked: the owner serializes (the VM's services in gsi.c hold route_lock). */
struct gsi_alloc {
	unsigned first, limit; /* [first, limit) may be handed out */
	unsigned used;
	uint64_t map[GSI_ALLOC_MAX / 64];
};

/* limit is clamped to GSI_ALLOC_MAX; first >= limit leaves nothing to hand out. */
void gsi_alloc_init(struct gsi_alloc *a, unsigned first, unsigned limit);
/* The lowest free GSI, or -ENOSPC. */
int gsi_alloc_get(struct gsi_alloc *a);
/* -EINVAL when gsi is outside the range or not handed out (a double free). */
int gsi_alloc_put(struct gsi_alloc *a, unsigned gsi);
bool gsi_alloc_busy(const struct gsi_alloc *a, unsigned gsi);
unsigned gsi_alloc_count(const struct gsi_alloc *a);

#endif
