/* MP specification 1.4 tables: the floating pointer at LAYOUT_MPTABLE and a configuration table
 * with one processor entry per boot CPU, the ISA and PCI buses, the IOAPIC, the ISA IRQ routing
 * and the PCI slots' INTx routing (the DSDT's _PRT, for guests booted with acpi=off). PCI bus 0 is
 * MP bus 0, ISA MP bus 1. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fwtable.h"
#include "layout.h"
#include "mptable.h"

#define MP_FP_LEN     16
#define MP_HDR_LEN    44
#define MP_SPEC_REV   4
#define MP_CPU_LEN    20
#define MP_ENTRY_LEN  8
#define MP_T_CPU      0
#define MP_T_BUS      1
#define MP_T_IOAPIC   2
#define MP_T_IOINT    3
#define MP_T_LINT     4
#define MP_CPU_EN     1
#define MP_CPU_BP     2
#define MP_INT	      0
#define MP_NMI	      1
#define MP_EXTINT     3
#define MP_LAPIC_VER  0x14
#define MP_IOAPIC_VER 0x11
#define MP_IOAPIC_ID  0
/* Linux matches a PCI interrupt entry's bus id with the PCI bus number itself: PCI bus 0 is MP
 * bus 0, ISA the next */
#define MP_PCI_BUS  0
#define MP_ISA_BUS  1
#define MP_ISA_IRQS 16
/* bus 0's slots 1-31, pins A-D */
#define MP_PCI_INTS (31 * 4)
/* I/O interrupt flags: polarity active low (3), trigger level (3 << 2) */
#define MP_IRQ_PCI_FLAGS 0x000f
/* CPUs; ISA and PCI buses, IOAPIC, ExtINT + 15 ISA IRQs, PCI pins, two local interrupt entries */
#define MP_FIXED_ENTRIES (2 + 1 + MP_ISA_IRQS + MP_PCI_INTS + 2)
/* Family 6 signature with FPU and APIC feature bits: what Linux expects from a modern CPU. */
#define MP_CPU_SIGNATURE 0x600
#define MP_CPU_FEATURES	 0x201
#define MP_BASE_MEM_END	 LAYOUT_EBDA_END
#define MP_TABLE_MAX	 (MP_HDR_LEN + 255 * MP_CPU_LEN + MP_ENTRY_LEN * MP_FIXED_ENTRIES)

_Static_assert(MPTABLE_PIR_START >= LAYOUT_BIOS_START + 0x10000 &&
		   MPTABLE_PIR_START + MPTABLE_PIR_LEN <= MPTABLE_ALT_START &&
		   MPTABLE_ALT_START + MP_TABLE_MAX <= LAYOUT_HIGH_RAM,
	       "F segment: ACPI below, then $PIR, then the MP table for many CPUs");
_Static_assert(
    LAYOUT_SETUP_DATA >= MPTABLE_PIR_START + MPTABLE_PIR_LEN &&
	LAYOUT_SETUP_DATA + 64 <= MPTABLE_ALT_START,
    "F segment: the boot setup_data (16-byte header and seed) between $PIR and the MP table");

static size_t mp_table_len(unsigned cpus)
{
	return MP_HDR_LEN + (size_t)cpus * MP_CPU_LEN + MP_ENTRY_LEN * MP_FIXED_ENTRIES;
}

static size_t mp_bus(uint8_t *t, size_t off, uint8_t id, const char *type)
{
	t[off] = MP_T_BUS;
	t[off + 1] = id;
	memcpy(t + off + 2, type, 6);
	return off + MP_ENTRY_LEN;
}

/* An ISA IRQ (flags 0: conforming polarity and trigger, the ISA defaults), or a PCI pin: its
 * bus IRQ is slot << 2 | pin (A = 0). */
static size_t mp_ioint(uint8_t *t, size_t off, uint8_t type, uint16_t flags, uint8_t bus,
		       uint8_t irq, uint8_t pin)
{
	t[off] = MP_T_IOINT;
	t[off + 1] = type;
	fw_put16(t, off + 2, flags);
	t[off + 4] = bus;
	t[off + 5] = irq;
	t[off + 6] = MP_IOAPIC_ID;
	t[off + 7] = pin;
	return off + MP_ENTRY_LEN;
}

static size_t mp_lint(uint8_t *t, size_t off, uint8_t type, uint8_t lint)
{
	t[off] = MP_T_LINT;
	t[off + 1] = type;
	fw_put16(t, off + 2, 0);
	t[off + 4] = MP_ISA_BUS;
	t[off + 5] = 0;
	t[off + 6] = 0xff; /* every local APIC */
	t[off + 7] = lint;
	return off + MP_ENTRY_LEN;
}

/* $PIR header: signature, version 1.0, size, router bus/devfn (the host bridge, 00:00.0), no
 * IRQs reserved for PCI, no compatible router, checksum over the whole table. */
static int pir_build(struct guest_mem *gm)
{
	uint8_t t[MPTABLE_PIR_LEN] = {0};

	memcpy(t, "$PIR", 4);
	fw_put16(t, 4, 0x0100);
	fw_put16(t, 6, MPTABLE_PIR_LEN);
	t[31] = fw_checksum(t, MPTABLE_PIR_LEN);
	return gmem_write(gm, MPTABLE_PIR_START, t, MPTABLE_PIR_LEN);
}

int mptable_build(struct guest_mem *gm, unsigned cpus, char *err, unsigned errlen)
{
	size_t len = mp_table_len(cpus), off = MP_HDR_LEN;
	uint8_t fp[MP_FP_LEN] = {0};
	uint64_t table_gpa;
	unsigned entries = 0;
	uint8_t *t;
	int r = 0;

	if (cpus == 0 || cpus > 255) {
		snprintf(err, errlen, "mptable: cannot describe %u CPUs", cpus);
		return -EINVAL;
	}
	/* Base memory holds the pointer and up to ~40 CPUs; beyond, the table moves to the BIOS
	 * area, which Linux reads just as well through the pointer's physical address. */
	table_gpa = LAYOUT_MPTABLE + MP_FP_LEN;
	if (table_gpa + len > MP_BASE_MEM_END)
		table_gpa = MPTABLE_ALT_START;
	t = calloc(1, len);
	if (!t) {
		snprintf(err, errlen, "mptable: out of memory");
		return -ENOMEM;
	}

	memcpy(t, "PCMP", 4);
	fw_put16(t, 4, (uint16_t)len);
	t[6] = MP_SPEC_REV;
	memcpy(t + 8, "LVMM    ", 8);
	memcpy(t + 16, "LVMM-VM     ", 12);
	fw_put32(t, 36, (uint32_t)LAYOUT_LAPIC);

	for (unsigned i = 0; i < cpus; i++, off += MP_CPU_LEN, entries++) {
		t[off] = MP_T_CPU;
		t[off + 1] = (uint8_t)i; /* local APIC id */
		t[off + 2] = MP_LAPIC_VER;
		t[off + 3] = MP_CPU_EN | (i == 0 ? MP_CPU_BP : 0);
		fw_put32(t, off + 4, MP_CPU_SIGNATURE);
		fw_put32(t, off + 8, MP_CPU_FEATURES);
	}
	off = mp_bus(t, off, MP_PCI_BUS, "PCI   ");
	off = mp_bus(t, off, MP_ISA_BUS, "ISA   ");
	entries += 2;
	t[off] = MP_T_IOAPIC;
	t[off + 1] = MP_IOAPIC_ID;
	t[off + 2] = MP_IOAPIC_VER;
	t[off + 3] = 1; /* enabled */
	fw_put32(t, off + 4, (uint32_t)LAYOUT_IOAPIC);
	off += MP_ENTRY_LEN;
	entries++;
	off = mp_ioint(t, off, MP_EXTINT, 0, MP_ISA_BUS, 0, 0);
	entries++;
	for (unsigned irq = 0; irq < MP_ISA_IRQS; irq++) {
		if (irq == 2)
			continue; /* the cascade: IRQ0 takes its pin */
		off = mp_ioint(t, off, MP_INT, 0, MP_ISA_BUS, (uint8_t)irq,
			       (uint8_t)(irq == 0 ? 2 : irq));
		entries++;
	}
	for (unsigned slot = 1; slot <= MP_PCI_INTS / 4; slot++)
		for (unsigned pin = 0; pin < 4; pin++, entries++)
			off = mp_ioint(t, off, MP_INT, MP_IRQ_PCI_FLAGS, MP_PCI_BUS,
				       (uint8_t)(slot << 2 | pin),
				       (uint8_t)LAYOUT_PCI_INTX_ROUTE(slot, pin + 1));
	off = mp_lint(t, off, MP_EXTINT, 0);
	off = mp_lint(t, off, MP_NMI, 1);
	entries += 2;
	fw_put16(t, 34, (uint16_t)entries);
	t[7] = fw_checksum(t, len);

	memcpy(fp, "_MP_", 4);
	fw_put32(fp, 4, (uint32_t)table_gpa);
	fp[8] = 1; /* length in 16-byte units */
	fp[9] = MP_SPEC_REV;
	fp[10] = fw_checksum(fp, MP_FP_LEN);

	if (off != len || gmem_write(gm, table_gpa, t, len) ||
	    gmem_write(gm, LAYOUT_MPTABLE, fp, MP_FP_LEN) || pir_build(gm)) {
		snprintf(err, errlen, "mptable: cannot write %zu bytes at 0x%llx", len,
			 (unsigned long long)table_gpa);
		r = -EFAULT;
	}
	free(t);
	return r;
}
