/* ACPI table builder: RSDP v2 -> XSDT -> FADT (FACS, DSDT), MADT, MCFG in the BIOS area.
 * Tables are assembled in a host buffer by byte offset (ACPI spec 6.x) and copied in one write.
 * Further PCI segments (cloud-hypervisor's platform.num_pci_segments) each get an MCFG entry,
 * an ECAM window after segment 0's and a host bridge in the DSDT, as cloud-hypervisor builds.
 * Bus 0's slots are hot-pluggable through ACPI: slot devices, the hotplug controller's methods
 * and a Generic Event Device (acpi_hotplug.c; hotplug.h holds the registers they use). The
 * DSDT's AML is encoded with aml.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acpi.h"
#include "acpi_internal.h"
#include "fwtable.h"
#include "hotplug.h"
#include "layout.h"

/* Room for the DSDT's AML besides the PCnn bridges, and for PCI0 (its 31 hotplug slots) */
#define ACPI_DSDT_FIXED_MAX 12288
#define ACPI_DSDT_PCI0_MAX  8192

/* every segment's ECAM window lies in the hole below the I/O APIC */
_Static_assert(LAYOUT_ECAM_START + ACPI_MAX_PCI_SEGMENTS * LAYOUT_ECAM_SIZE <= LAYOUT_IOAPIC,
	       "ECAM windows of all PCI segments overlap the I/O APIC");

#define ACPI_HDR_LEN   36
#define ACPI_OEM_ID    "LVMM  "
#define ACPI_OEM_TABLE "LVMMVM  "
#define ACPI_CREATOR   "LVMM"

#define FADT_LEN 276
#define FADT_REV 6
#define FACS_LEN 64
#define MADT_REV 5
#define RSDP_LEN 36

/* FADT Flags */
#define FADT_WBINVD	   (1u << 0)
#define FADT_PROC_C1	   (1u << 2)
#define FADT_PWR_BUTTON	   (1u << 4) /* no fixed power button */
#define FADT_SLP_BUTTON	   (1u << 5) /* no fixed sleep button */
#define FADT_RESET_REG_SUP (1u << 10)
/* IAPC_BOOT_ARCH: no VGA, so Linux skips the legacy VGA probe. */
#define FADT_BOOT_VGA_NOT_PRESENT (1u << 2)

#define GAS_SYSTEM_IO	 1
#define GAS_ACCESS_BYTE	 1
#define GAS_ACCESS_WORD	 2
#define GAS_ACCESS_DWORD 3

#define MADT_PCAT_COMPAT    1u
#define MADT_LAPIC	    0
#define MADT_IOAPIC	    1
#define MADT_ISO	    2
#define MADT_LAPIC_NMI	    4
#define MADT_ENABLED	    1u
#define MADT_ONLINE_CAPABLE 2u
/* MPS INTI flags: active high (01), level triggered (11 << 2) */
#define MADT_INTI_HIGH_LEVEL 0x000d
#define ACPI_IOAPIC_ID	     0

#define ACPI_RESET_VALUE 6

/* _PRT: four pins of each slot but the host bridge's */
#define PCI_PRT_ENTRIES ((HOTPLUG_SLOTS - 1) * 4)
_Static_assert(PCI_PRT_ENTRIES <= 255, "a Package counts its elements in one byte");

static void acpi_header(uint8_t *t, const char *sig, uint32_t len, uint8_t rev)
{
	memcpy(t, sig, 4);
	fw_put32(t, 4, len);
	fw_put8(t, 8, rev);
	memcpy(t + 10, ACPI_OEM_ID, 6);
	memcpy(t + 16, ACPI_OEM_TABLE, 8);
	fw_put32(t, 24, 1);
	memcpy(t + 28, ACPI_CREATOR, 4);
	fw_put32(t, 32, 1);
}

static void acpi_finish(uint8_t *t)
{
	uint32_t len =
	    (uint32_t)t[4] | (uint32_t)t[5] << 8 | (uint32_t)t[6] << 16 | (uint32_t)t[7] << 24;

	t[9] = 0;
	t[9] = fw_checksum(t, len);
}

/* Generic Address Structure (12 bytes) for an I/O port block. */
static void acpi_gas_io(uint8_t *b, size_t off, uint8_t bits, uint8_t access, uint64_t port)
{
	fw_put8(b, off, GAS_SYSTEM_IO);
	fw_put8(b, off + 1, bits);
	fw_put8(b, off + 2, 0);
	fw_put8(b, off + 3, access);
	fw_put64(b, off + 4, port);
}

/* ---- DSDT ---- */

/* PCI0._PRT: pins A-D of every slot of bus 0 onto the IOAPIC pins kept for PCI (the swizzle of
 * LAYOUT_PCI_INTX_ROUTE), each Package(4) {slot << 16 | 0xffff, pin 0-3, Zero, GSI}: a source
 * of Zero names a GSI, which ACPI takes as level triggered and active low. */
static void acpi_pci_prt(struct aml *pci)
{
	uint8_t elems_b[PCI_PRT_ENTRIES * 16], ent_b[16];
	struct aml elems = {.b = elems_b, .max = sizeof(elems_b)};

	for (unsigned slot = 1; slot < HOTPLUG_SLOTS; slot++)
		for (unsigned pin = 0; pin < 4; pin++) {
			struct aml ent = {.b = ent_b, .max = sizeof(ent_b)};

			aml_integer(&ent, (uint64_t)slot << 16 | 0xffff);
			aml_integer(&ent, pin);
			aml_byte(&ent, AML_ZERO);
			aml_integer(&ent, LAYOUT_PCI_INTX_ROUTE(slot, pin + 1));
			aml_byte(&elems, AML_PACKAGE);
			aml_pkglen(&elems, 1 + ent.n);
			aml_byte(&elems, 4);
			aml_append(&elems, &ent);
		}
	aml_byte(pci, AML_NAME);
	aml_emit(pci, "_PRT", 4);
	aml_byte(pci, AML_PACKAGE);
	aml_pkglen(pci, 1 + elems.n);
	aml_byte(pci, PCI_PRT_ENTRIES);
	aml_append(pci, &elems);
	if (elems.overflow)
		pci->overflow = 1;
}

/* Device PCnn: the host bridge of segment seg (bus 0), with no windows: nothing sits there yet. */
static void acpi_segment_bridge(struct aml *sb, unsigned seg)
{
	uint8_t crs_b[32], dev_b[128];
	struct aml crs = {.b = crs_b, .max = sizeof(crs_b)};
	struct aml dev = {.b = dev_b, .max = sizeof(dev_b)};
	char name[8];

	res_word(&crs, RES_TYPE_BUS, 0, 0, LAYOUT_ECAM_BUSES - 1);
	res_end(&crs);
	aml_name_eisaid(&dev, "_HID", "PNP0A08");
	aml_name_eisaid(&dev, "_CID", "PNP0A03");
	aml_name_int(&dev, "_SEG", seg);
	aml_name_int(&dev, "_BBN", 0);
	aml_name_int(&dev, "_UID", seg);
	aml_name_buffer(&dev, "_CRS", crs.b, crs.n);
	snprintf(name, sizeof(name), "PC%02X", seg & 0xff);
	if (crs.overflow || dev.overflow)
		sb->overflow = 1;
	else
		aml_block(sb, 1, AML_DEVICE, name, dev.b, dev.n);
}

size_t acpi_dsdt_aml_segments(uint8_t *buf, size_t max, unsigned nseg, uint64_t mmio64_size)
{
	uint8_t crs_b[256], pci_b[ACPI_DSDT_PCI0_MAX], mres_b[128];
	size_t sb_max = ACPI_DSDT_FIXED_MAX + 128 * (size_t)nseg, n = 0;
	uint8_t *sb_b = malloc(sb_max);
	struct aml out = {.b = buf, .max = max};
	struct aml crs = {.b = crs_b, .max = sizeof(crs_b)};
	struct aml pci = {.b = pci_b, .max = sizeof(pci_b)};
	struct aml mres = {.b = mres_b, .max = sizeof(mres_b)};
	struct aml sb = {.b = sb_b, .max = sb_max};
	static const uint8_t s5[] = {AML_NAME,
				     AML_ROOT,
				     '_',
				     'S',
				     '5',
				     '_',
				     AML_PACKAGE,
				     8,
				     4,
				     AML_BYTE,
				     LAYOUT_ACPI_S5_TYP,
				     AML_BYTE,
				     LAYOUT_ACPI_S5_TYP,
				     AML_ZERO,
				     AML_ZERO};

	if (!sb_b || !nseg || nseg > ACPI_MAX_PCI_SEGMENTS) {
		free(sb_b);
		return 0;
	}
	/* PCI0: the host bridge that owns bus 0 through ECAM, the config ports and windows. */
	res_word(&crs, RES_TYPE_BUS, 0, 0, LAYOUT_ECAM_BUSES - 1);
	res_io(&crs, LAYOUT_PCI_CONF_ADDR, 8);
	res_word(&crs, RES_TYPE_IO, RES_IO_ENTIRE_RANGE, 0x0000, LAYOUT_PCI_CONF_ADDR - 1);
	res_word(&crs, RES_TYPE_IO, RES_IO_ENTIRE_RANGE, 0x0d00, 0xffff);
	res_dword_mem(&crs, (uint32_t)LAYOUT_MMIO32_START, (uint32_t)LAYOUT_MMIO32_SIZE);
	res_qword_mem(&crs, LAYOUT_MMIO64_START, mmio64_size ? mmio64_size : LAYOUT_MMIO64_SIZE);
	res_end(&crs);

	aml_name_eisaid(&pci, "_HID", "PNP0A08");
	aml_name_eisaid(&pci, "_CID", "PNP0A03");
	aml_name_int(&pci, "_SEG", 0);
	aml_name_int(&pci, "_BBN", 0);
	aml_name_int(&pci, "_UID", 0);
	aml_name_buffer(&pci, "_CRS", crs.b, crs.n);
	acpi_pci_prt(&pci);
	acpi_hp_dvnt(&pci);
	for (unsigned slot = 1; slot < HOTPLUG_SLOTS; slot++)
		acpi_hp_slot(&pci, slot);

	/* MRES: motherboard resources claiming the ECAM windows of every segment (contiguous),
	 * where Linux looks to trust MCFG. */
	crs.n = 0;
	res_mem32_fixed(&crs, (uint32_t)LAYOUT_ECAM_START, (uint32_t)(LAYOUT_ECAM_SIZE * nseg));
	res_end(&crs);
	aml_name_eisaid(&mres, "_HID", "PNP0C02");
	aml_name_int(&mres, "_UID", 0);
	aml_name_buffer(&mres, "_CRS", crs.b, crs.n);

	aml_block(&sb, 1, AML_DEVICE, "PCI0", pci.b, pci.n);
	for (unsigned seg = 1; seg < nseg; seg++)
		acpi_segment_bridge(&sb, seg);
	aml_block(&sb, 1, AML_DEVICE, "MRES", mres.b, mres.n);
	acpi_hp_controller(&sb);
	acpi_hp_ged(&sb);

	aml_emit(&out, s5, sizeof(s5));
	aml_block(&out, 0, AML_SCOPE, "\\_SB_", sb.b, sb.n);
	if (!(out.overflow || crs.overflow || pci.overflow || mres.overflow || sb.overflow))
		n = out.n;
	free(sb_b);
	return n;
}

size_t acpi_dsdt_aml(uint8_t *buf, size_t max)
{
	return acpi_dsdt_aml_segments(buf, max, 1, 0);
}

/* ---- tables ---- */

struct acpi_area {
	uint8_t *b;
	size_t n;
};

/* Room for the next table, 16-byte aligned (64 for the FACS, as the spec requires). */
static size_t acpi_alloc(struct acpi_area *a, size_t len, size_t align)
{
	size_t off = (a->n + align - 1) & ~(align - 1);

	if (off + len > ACPI_AREA_SIZE)
		return SIZE_MAX;
	a->n = off + len;
	return off;
}

static void acpi_fadt(uint8_t *t, uint64_t facs, uint64_t dsdt)
{
	acpi_header(t, "FACP", FADT_LEN, FADT_REV);
	fw_put32(t, 36, (uint32_t)facs);
	fw_put32(t, 40, (uint32_t)dsdt);
	fw_put16(t, 46, LAYOUT_ACPI_SCI_IRQ);
	/* SMI_CMD (48) stays 0: the platform is always in ACPI mode. */
	fw_put32(t, 56, LAYOUT_ACPI_PM1A_EVT);
	fw_put32(t, 64, LAYOUT_ACPI_PM1A_CNT);
	/* PM_TMR_BLK (76) stays 0: no ACPI PM timer, Linux calibrates with other clocks. */
	fw_put8(t, 88, 4);     /* PM1_EVT_LEN */
	fw_put8(t, 89, 2);     /* PM1_CNT_LEN */
	fw_put16(t, 96, 101);  /* P_LVL2_LAT > 100: C2 unsupported */
	fw_put16(t, 98, 1001); /* P_LVL3_LAT > 1000: C3 unsupported */
	fw_put16(t, 109, FADT_BOOT_VGA_NOT_PRESENT);
	fw_put32(t, 112,
		 FADT_WBINVD | FADT_PROC_C1 | FADT_PWR_BUTTON | FADT_SLP_BUTTON |
		     FADT_RESET_REG_SUP);
	acpi_gas_io(t, 116, 8, GAS_ACCESS_BYTE, LAYOUT_RESET_PORT);
	fw_put8(t, 128, ACPI_RESET_VALUE);
	fw_put8(t, 131, 0); /* FADT minor version */
	/* X_FIRMWARE_CTRL (132) stays 0: with both set, Linux installs the FACS twice. */
	fw_put64(t, 140, dsdt);
	acpi_gas_io(t, 148, 32, GAS_ACCESS_DWORD, LAYOUT_ACPI_PM1A_EVT);
	acpi_gas_io(t, 172, 16, GAS_ACCESS_WORD, LAYOUT_ACPI_PM1A_CNT);
	memcpy(t + 268, "LVMM\0\0\0\0", 8); /* hypervisor vendor identity */
	acpi_finish(t);
}

static size_t acpi_madt_len(unsigned ncpu)
{
	return 44 + 8 * (size_t)ncpu + 12 + 2 * 10 + 6;
}

static void acpi_madt(uint8_t *t, unsigned cpus, unsigned ncpu)
{
	size_t off = 44;

	acpi_header(t, "APIC", (uint32_t)acpi_madt_len(ncpu), MADT_REV);
	fw_put32(t, 36, (uint32_t)LAYOUT_LAPIC);
	fw_put32(t, 40, MADT_PCAT_COMPAT);
	for (unsigned i = 0; i < ncpu; i++, off += 8) {
		fw_put8(t, off, MADT_LAPIC);
		fw_put8(t, off + 1, 8);
		fw_put8(t, off + 2, (uint8_t)i); /* ACPI processor UID */
		fw_put8(t, off + 3, (uint8_t)i); /* APIC id */
		/* CPUs past the boot count are disabled but online-capable: with MADT revision 5
		 * Linux counts only those as possible (hot-pluggable) CPUs. */
		fw_put32(t, off + 4, i < cpus ? MADT_ENABLED : MADT_ONLINE_CAPABLE);
	}
	fw_put8(t, off, MADT_IOAPIC);
	fw_put8(t, off + 1, 12);
	fw_put8(t, off + 2, ACPI_IOAPIC_ID);
	fw_put32(t, off + 4, (uint32_t)LAYOUT_IOAPIC);
	fw_put32(t, off + 8, 0); /* GSI base */
	off += 12;
	/* ISA IRQ0 (PIT) is wired to IOAPIC pin 2, as on every PC. */
	fw_put8(t, off, MADT_ISO);
	fw_put8(t, off + 1, 10);
	fw_put8(t, off + 2, 0);
	fw_put8(t, off + 3, 0);
	fw_put32(t, off + 4, 2);
	fw_put16(t, off + 8, 0);
	off += 10;
	/* The SCI is level triggered, active high. */
	fw_put8(t, off, MADT_ISO);
	fw_put8(t, off + 1, 10);
	fw_put8(t, off + 2, 0);
	fw_put8(t, off + 3, LAYOUT_ACPI_SCI_IRQ);
	fw_put32(t, off + 4, LAYOUT_ACPI_SCI_IRQ);
	fw_put16(t, off + 8, MADT_INTI_HIGH_LEVEL);
	off += 10;
	/* NMI on LINT1 of every CPU. */
	fw_put8(t, off, MADT_LAPIC_NMI);
	fw_put8(t, off + 1, 6);
	fw_put8(t, off + 2, 0xff);
	fw_put16(t, off + 3, 0);
	fw_put8(t, off + 5, 1);
	acpi_finish(t);
}

static size_t acpi_mcfg_len(unsigned nseg)
{
	return 44 + 16 * (size_t)nseg;
}

/* One allocation entry per segment; segment n's ECAM follows segment n-1's. */
static void acpi_mcfg(uint8_t *t, unsigned nseg)
{
	acpi_header(t, "MCFG", (uint32_t)acpi_mcfg_len(nseg), 1);
	for (unsigned seg = 0; seg < nseg; seg++) {
		size_t e = 44 + 16 * (size_t)seg;

		fw_put64(t, e, LAYOUT_ECAM_START + seg * LAYOUT_ECAM_SIZE);
		fw_put16(t, e + 8, (uint16_t)seg);	   /* segment */
		fw_put8(t, e + 10, 0);			   /* start bus */
		fw_put8(t, e + 11, LAYOUT_ECAM_BUSES - 1); /* end bus */
	}
	acpi_finish(t);
}

int acpi_build(struct guest_mem *gm, unsigned cpus, unsigned max_cpus, uint64_t *rsdp, char *err,
	       unsigned errlen)
{
	return acpi_build_segments(gm, cpus, max_cpus, 1, 0, rsdp, err, errlen);
}

int acpi_build_segments(struct guest_mem *gm, unsigned cpus, unsigned max_cpus, unsigned nseg,
			uint64_t mmio64_size, uint64_t *rsdp, char *err, unsigned errlen)
{
	const uint64_t base = LAYOUT_BIOS_START;
	unsigned ncpu = max_cpus > cpus ? max_cpus : cpus;
	size_t aml_max = ACPI_DSDT_FIXED_MAX + 128 * (size_t)nseg, aml_len;
	uint8_t *aml;
	struct acpi_area a = {0};
	size_t o_rsdp, o_xsdt, o_facs, o_fadt, o_dsdt, o_madt, o_mcfg;
	int r = 0;

	if (!nseg || nseg > ACPI_MAX_PCI_SEGMENTS) {
		snprintf(err, errlen, "acpi: %u PCI segments, not 1..%u", nseg,
			 ACPI_MAX_PCI_SEGMENTS);
		return -EINVAL;
	}
	if (cpus == 0 || ncpu > 255) {
		snprintf(err, errlen, "acpi: cannot describe %u CPUs (max %u)", cpus, max_cpus);
		return -EINVAL;
	}
	aml = malloc(aml_max);
	a.b = calloc(1, ACPI_AREA_SIZE);
	aml_len = aml ? acpi_dsdt_aml_segments(aml, aml_max, nseg, mmio64_size) : 0;
	if (!a.b || !aml_len) {
		snprintf(err, errlen, "acpi: out of memory");
		free(aml);
		free(a.b);
		return -ENOMEM;
	}
	o_rsdp = acpi_alloc(&a, RSDP_LEN, 16);
	o_xsdt = acpi_alloc(&a, ACPI_HDR_LEN + 3 * 8, 16);
	o_facs = acpi_alloc(&a, FACS_LEN, 64);
	o_fadt = acpi_alloc(&a, FADT_LEN, 16);
	o_dsdt = acpi_alloc(&a, ACPI_HDR_LEN + aml_len, 16);
	o_madt = acpi_alloc(&a, acpi_madt_len(ncpu), 16);
	o_mcfg = acpi_alloc(&a, acpi_mcfg_len(nseg), 16);
	if (o_mcfg == SIZE_MAX || o_madt == SIZE_MAX || o_dsdt == SIZE_MAX) {
		snprintf(err, errlen, "acpi: tables exceed %llu bytes", ACPI_AREA_SIZE);
		r = -ENOSPC;
		goto out;
	}

	memcpy(a.b + o_facs, "FACS", 4);
	fw_put32(a.b, o_facs + 4, FACS_LEN);
	fw_put8(a.b, o_facs + 32, 2); /* version */

	acpi_header(a.b + o_dsdt, "DSDT", (uint32_t)(ACPI_HDR_LEN + aml_len), 2);
	memcpy(a.b + o_dsdt + ACPI_HDR_LEN, aml, aml_len);
	acpi_finish(a.b + o_dsdt);

	acpi_fadt(a.b + o_fadt, base + o_facs, base + o_dsdt);
	acpi_madt(a.b + o_madt, cpus, ncpu);
	acpi_mcfg(a.b + o_mcfg, nseg);

	acpi_header(a.b + o_xsdt, "XSDT", ACPI_HDR_LEN + 3 * 8, 1);
	fw_put64(a.b, o_xsdt + 36, base + o_fadt);
	fw_put64(a.b, o_xsdt + 44, base + o_madt);
	fw_put64(a.b, o_xsdt + 52, base + o_mcfg);
	acpi_finish(a.b + o_xsdt);

	memcpy(a.b + o_rsdp, "RSD PTR ", 8);
	memcpy(a.b + o_rsdp + 9, ACPI_OEM_ID, 6);
	fw_put8(a.b, o_rsdp + 15, 2); /* revision: ACPI 2.0+, XSDT present */
	fw_put32(a.b, o_rsdp + 20, RSDP_LEN);
	fw_put64(a.b, o_rsdp + 24, base + o_xsdt);
	fw_put8(a.b, o_rsdp + 8, fw_checksum(a.b + o_rsdp, 20));
	fw_put8(a.b, o_rsdp + 32, fw_checksum(a.b + o_rsdp, RSDP_LEN));

	if (gmem_write(gm, base, a.b, a.n)) {
		snprintf(err, errlen, "acpi: 0x%llx+%zu is not guest RAM", LAYOUT_BIOS_START, a.n);
		r = -EFAULT;
		goto out;
	}
	*rsdp = base + o_rsdp;
out:
	free(aml);
	free(a.b);
	return r;
}
