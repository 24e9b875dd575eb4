/* Guest physical address map of an lvmm x86-64 VM.
 * Every component places things by these names; no GPA literal appears elsewhere. */
#ifndef LVMM_LAYOUT_H
#define LVMM_LAYOUT_H

#define LAYOUT_ZERO_PAGE   0x7000ULL  /* struct boot_params */
#define LAYOUT_PML4	   0x9000ULL  /* identity page tables: PML4, PDPT, PDs follow */
#define LAYOUT_CMDLINE	   0x20000ULL /* kernel command line, up to LAYOUT_CMDLINE_MAX */
#define LAYOUT_CMDLINE_MAX 0x10000ULL
#define LAYOUT_MPTABLE	   0x9fc00ULL /* MP floating pointer + table, top of base memory */
#define LAYOUT_EBDA_END	   0xa0000ULL
#define LAYOUT_BIOS_START  0xe0000ULL  /* ACPI RSDP and tables live in 0xe0000..0xfffff */
#define LAYOUT_HIGH_RAM	   0x100000ULL /* kernel and initramfs above this */
/* setup_data (the RNG seed) in the F segment between $PIR and the MP table: inside the e820
 * range reserved for firmware tables, since Linux splits a setup_data in usable RAM into an e820
 * entry of its own, and each entry lengthens its direct-map set-up (one e820 walk per page-table
 * entry it checks: measured on an emulating host) */
#define LAYOUT_SETUP_DATA 0xf0040ULL

#define LAYOUT_MMIO32_START 0xc0000000ULL /* RAM below 4 GiB ends here at the latest */
#define LAYOUT_MMIO32_SIZE  0x20000000ULL /* 32-bit PCI BARs */
#define LAYOUT_ECAM_START   0xe0000000ULL /* PCI ECAM, bus 0..LAYOUT_ECAM_BUSES-1 */
#define LAYOUT_ECAM_BUSES   1
#define LAYOUT_ECAM_SIZE    (LAYOUT_ECAM_BUSES * 0x100000ULL)
#define LAYOUT_IOAPIC	    0xfec00000ULL
#define LAYOUT_LAPIC	    0xfee00000ULL
#define LAYOUT_RAM_HIGH	    0x100000000ULL  /* RAM beyond the 32-bit hole continues at 4 GiB */
#define LAYOUT_MMIO64_START 0x8000000000ULL /* 64-bit PCI BARs (CMB, doorbell pages) */
#define LAYOUT_MMIO64_SIZE  0x1000000000ULL

/* Legacy PIO */
#define LAYOUT_COM1_PORT     0x3f8
#define LAYOUT_COM1_IRQ	     4
#define LAYOUT_PCI_CONF_ADDR 0xcf8
#define LAYOUT_PCI_CONF_DATA 0xcfc
#define LAYOUT_RESET_PORT    0xcf9 /* write 0x06: reset (FADT RESET_REG too) */
#define LAYOUT_I8042_PORT    0x64  /* write 0xfe: reset */
/* ACPI fixed hardware (FADT): PM1a event block (4 bytes) and control block (2 bytes). Writing
 * SLP_EN (bit 13) with SLP_TYP == LAYOUT_ACPI_S5_TYP powers the VM off; DSDT's _S5 carries it. */
#define LAYOUT_ACPI_PM1A_EVT 0x600
#define LAYOUT_ACPI_PM1A_CNT 0x604
#define LAYOUT_ACPI_S5_TYP   5
#define LAYOUT_ACPI_SCI_IRQ  9
/* ACPI PCI hotplug (hotplug.h): the controller's registers, and the Generic Event Device's
 * interrupt (an IOAPIC pin, edge) that tells the guest to look at them. */
#define LAYOUT_HOTPLUG_PORT 0xae00
#define LAYOUT_HOTPLUG_LEN  0x10
#define LAYOUT_ACPI_GED_IRQ 5
/* PCI INTx: bus 0's slots swizzle pins A-D (1-4) onto four IOAPIC pins kept for PCI, level
 * triggered and active low, as the DSDT's _PRT and the MP table describe them. */
#define LAYOUT_PCI_INTX_GSI  16
#define LAYOUT_PCI_INTX_GSIS 4
#define LAYOUT_PCI_INTX_ROUTE(slot, pin)                                                           \
	(LAYOUT_PCI_INTX_GSI + ((unsigned)(slot) + (unsigned)(pin)-1) % LAYOUT_PCI_INTX_GSIS)

#endif
