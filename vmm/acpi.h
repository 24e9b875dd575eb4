/* ACPI tables for an lvmm VM: RSDP, XSDT, FADT (+FACS), DSDT (\_S5, PCI0 with hotplug slots),
 * MADT and MCFG, written into the BIOS area at LAYOUT_BIOS_START with correct checksums. */
#ifndef LVMM_ACPI_H
#define LVMM_ACPI_H

#include <stddef.h>
#include <stdint.h>

#include "guest_mem.h"

/* The ACPI tables stay below this offset from LAYOUT_BIOS_START; the rest of the BIOS area is
 * free for other firmware tables (the MP table when it outgrows base memory). */
#define ACPI_AREA_SIZE 0x10000ULL

/* Writes all tables for cpus boot CPUs (max_cpus LAPIC entries, the extra ones disabled for
 * hot-plug); *rsdp gets the RSDP's GPA for boot_params.acpi_rsdp_addr. 0 or -errno. */
int acpi_build(struct guest_mem *gm, unsigned cpus, unsigned max_cpus, uint64_t *rsdp, char *err,
	       unsigned errlen);

/* The same with nseg PCI segments (1..ACPI_MAX_PCI_SEGMENTS, cloud-hypervisor's bound): an MCFG
 * entry per segment, segment n's ECAM window at LAYOUT_ECAM_START + n * LAYOUT_ECAM_SIZE (all
 * below the I/O APIC), and a host bridge PCnn (_SEG n, bus 0) in the DSDT for each one past 0.
 * mmio64_size: the 64-bit PCI window PCI0 declares (0: LAYOUT_MMIO64_SIZE). */
#define ACPI_MAX_PCI_SEGMENTS 96u
int acpi_build_segments(struct guest_mem *gm, unsigned cpus, unsigned max_cpus, unsigned nseg,
			uint64_t mmio64_size, uint64_t *rsdp, char *err, unsigned errlen);

/* The DSDT's AML body (after the 36-byte header) into buf; returns its length, or 0 when buf
 * is too small. Exposed for tests that decode it. */
size_t acpi_dsdt_aml(uint8_t *buf, size_t max);
size_t acpi_dsdt_aml_segments(uint8_t *buf, size_t max, unsigned nseg, uint64_t mmio64_size);

#endif
