/* Intel MultiProcessor Specification 1.4 tables: floating pointer at LAYOUT_MPTABLE and the
 * configuration table (CPUs, ISA bus, IOAPIC, interrupt routing) for kernels without ACPI. */
#ifndef LVMM_MPTABLE_H
#define LVMM_MPTABLE_H

#include "guest_mem.h"

/* The PCI IRQ Routing Table ($PIR, PCI BIOS 2.1 / Microsoft's PCI IRQ Routing Table
 * specification 1.0): header only, no slot entries, at the start of the F segment. Linux without
 * ACPI looks for it there, 16 bytes at a time, and when there is none scans all 64 KiB once more
 * byte by byte for AMI's $IRT variant: 0.3 s of an emulated boot on kvm_pvm hosts. Interrupts come
 * from the MP table's IOAPIC and from MSI-X, so an empty table changes no routing. */
#define MPTABLE_PIR_START 0xf0000ULL
#define MPTABLE_PIR_LEN	  32
/* Where the configuration table goes when it does not fit in base memory after the pointer. */
#define MPTABLE_ALT_START 0xf0100ULL

int mptable_build(struct guest_mem *gm, unsigned cpus, char *err, unsigned errlen);

#endif
