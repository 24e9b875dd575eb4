/* Intel MultiProcessor Specification 1.4 tables: floating pointer at LAYOUT_MPTABLE and the
 * configuration table (CPUs, ISA bus, IOAPIC, interrupt routing) for kernels without ACPI. */
#ifndef LVMM_MPTABLE_H
#define LVMM_MPTABLE_H

#include "guest_mem.h"

/* Where the configuration table goes when it does not fit in base memory after the pointer. */
#define MPTABLE_ALT_START 0xf0000ULL

int mptable_build(struct guest_mem *gm, unsigned cpus, char *err, unsigned errlen);

#endif
