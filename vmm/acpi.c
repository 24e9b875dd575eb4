/* ACPI table builder: RSDP v2 -> XSDT -> FADT (FACS, DSDT), MADT, MCFG in the BIOS area.
 * Tables are assembled in a host buffer by byte offset (ACPI spec 6.x) and copied in one write.
 * Further PCI segments (cloud-hypervisor's platform.num_pci_segments) each get an MCFG entry,
 * an ECAM window after segment 0's and a host bridge in the DSDT, as cloud-hypervisor builds.
 * Bus 0's slots are hot-pluggable through ACPI: slot devices, the hotplug controller's methods
 * and a Generic Event Device (hotplug.h holds the registers they use). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acpi.h"
#include "fwtable.h"
#include "hotplug.h"
#include "layout.h"

/* Room for the DSDT's AML besides the PCnn bridges, and for PCI0 (its 31 hotplug slots) */
#define ACPI_DSDT_FIXED_MAX 8192
#define ACPI_DSDT_PCI0_MAX  4096

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

/* ---- AML ----------------------------------------------------------------------------------
 * A few AML opcodes are enough: Name, Scope, Device, Package, Buffer and integer constants.
 * Nested objects are built inside-out so each PkgLength is known when it is emitted. */

#define AML_ZERO	     0x00
#define AML_ONE		     0x01
#define AML_NAME	     0x08
#define AML_BYTE	     0x0a
#define AML_WORD	     0x0b
#define AML_DWORD	     0x0c
#define AML_STRING	     0x0d
#define AML_SCOPE	     0x10
#define AML_BUFFER	     0x11
#define AML_PACKAGE	     0x12
#define AML_METHOD	     0x14
#define AML_DUAL_NAME	     0x2e
#define AML_MULTI_NAME	     0x2f
#define AML_EXT		     0x5b
#define AML_MUTEX	     0x01 /* after AML_EXT */
#define AML_ACQUIRE	     0x23 /* after AML_EXT */
#define AML_RELEASE	     0x27 /* after AML_EXT */
#define AML_OPREGION	     0x80 /* after AML_EXT */
#define AML_FIELD	     0x81 /* after AML_EXT */
#define AML_DEVICE	     0x82 /* after AML_EXT */
#define AML_ARG0	     0x68
#define AML_ARG1	     0x69
#define AML_STORE	     0x70
#define AML_SHIFT_LEFT	     0x79
#define AML_AND		     0x7b
#define AML_NOTIFY	     0x86
#define AML_IF		     0xa0
#define AML_ROOT	     '\\'
#define AML_REGION_SYSTEM_IO 0x01
/* Field flags: DWordAcc, NoLock, WriteAsZeros */
#define AML_FIELD_DWORD_WZ 0x43
/* Notify values (ACPI 5.6.6) acpiphp acts on */
#define AML_NOTIFY_DEVICE_CHECK	 1
#define AML_NOTIFY_EJECT_REQUEST 3

struct aml {
	uint8_t *b;
	size_t n, max;
	int overflow;
};

static void aml_emit(struct aml *a, const void *p, size_t len)
{
	if (a->overflow || len > a->max - a->n) {
		a->overflow = 1;
		return;
	}
	memcpy(a->b + a->n, p, len);
	a->n += len;
}

static void aml_byte(struct aml *a, uint8_t v)
{
	aml_emit(a, &v, 1);
}

static void aml_u16(struct aml *a, uint16_t v)
{
	aml_byte(a, (uint8_t)v);
	aml_byte(a, (uint8_t)(v >> 8));
}

static void aml_u32(struct aml *a, uint32_t v)
{
	aml_u16(a, (uint16_t)v);
	aml_u16(a, (uint16_t)(v >> 16));
}

static void aml_u64(struct aml *a, uint64_t v)
{
	aml_u32(a, (uint32_t)v);
	aml_u32(a, (uint32_t)(v >> 32));
}

/* PkgLength counts its own bytes plus the content: 1 byte below 64, else 2..4 bytes with the
 * low nibble in the lead byte. */
static void aml_pkglen(struct aml *a, size_t content)
{
	size_t len;
	unsigned extra;

	if (content + 1 < 0x40) {
		aml_byte(a, (uint8_t)(content + 1));
		return;
	}
	for (extra = 1; extra <= 3; extra++) {
		len = content + 1 + extra;
		if (len < (1ULL << (4 + 8 * extra)))
			break;
	}
	aml_byte(a, (uint8_t)((extra << 6) | (len & 0xf)));
	for (unsigned i = 0; i < extra; i++)
		aml_byte(a, (uint8_t)(len >> (4 + 8 * i)));
}

static void aml_integer(struct aml *a, uint64_t v)
{
	if (v == 0) {
		aml_byte(a, AML_ZERO);
	} else if (v <= 0xff) {
		aml_byte(a, AML_BYTE);
		aml_byte(a, (uint8_t)v);
	} else if (v <= 0xffff) {
		aml_byte(a, AML_WORD);
		aml_u16(a, (uint16_t)v);
	} else {
		aml_byte(a, AML_DWORD);
		aml_u32(a, (uint32_t)v);
	}
}

/* EISA id "PNP0A08" compressed: three 5-bit letters, then four hex digits. */
static uint32_t aml_eisaid(const char *id)
{
	uint16_t mfg = (uint16_t)(((id[0] - 0x40) & 0x1f) << 10 | ((id[1] - 0x40) & 0x1f) << 5 |
				  ((id[2] - 0x40) & 0x1f));
	uint8_t b[4];
	unsigned h[4];

	for (int i = 0; i < 4; i++) {
		char c = id[3 + i];

		h[i] = (unsigned)(c >= 'A' ? c - 'A' + 10 : c - '0') & 0xf;
	}
	b[0] = (uint8_t)(mfg >> 8);
	b[1] = (uint8_t)mfg;
	b[2] = (uint8_t)(h[0] << 4 | h[1]);
	b[3] = (uint8_t)(h[2] << 4 | h[3]);
	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static void aml_name_int(struct aml *a, const char *seg, uint64_t v)
{
	aml_byte(a, AML_NAME);
	aml_emit(a, seg, 4);
	aml_integer(a, v);
}

static void aml_name_eisaid(struct aml *a, const char *seg, const char *id)
{
	aml_byte(a, AML_NAME);
	aml_emit(a, seg, 4);
	aml_byte(a, AML_DWORD);
	aml_u32(a, aml_eisaid(id));
}

/* Name(seg, Buffer() { bytes }) */
static void aml_name_buffer(struct aml *a, const char *seg, const uint8_t *p, size_t len)
{
	struct aml size = {.b = (uint8_t[8]){0}, .max = 8};

	aml_integer(&size, len);
	aml_byte(a, AML_NAME);
	aml_emit(a, seg, 4);
	aml_byte(a, AML_BUFFER);
	aml_pkglen(a, size.n + len);
	aml_emit(a, size.b, size.n);
	aml_emit(a, p, len);
}

/* op [ext] PkgLength name body: Scope and Device share this shape. */
static void aml_block(struct aml *a, int ext, uint8_t op, const char *name, const uint8_t *body,
		      size_t len)
{
	size_t nlen = strlen(name);

	if (ext)
		aml_byte(a, AML_EXT);
	aml_byte(a, op);
	aml_pkglen(a, nlen + len);
	aml_emit(a, name, nlen);
	aml_emit(a, body, len);
}

/* NameString from a dotted path: "\\_SB_.PHPR.PCEJ", "PCIU"; every segment 4 characters. */
static void aml_namestring(struct aml *a, const char *path)
{
	const char *p = path;
	size_t len, nseg;

	if (*p == '\\')
		aml_byte(a, (uint8_t)*p++);
	len = strlen(p);
	nseg = (len + 1) / 5;
	if (len % 5 != 4) {
		a->overflow = 1; /* a malformed path is a bug here: fail the whole table */
		return;
	}
	if (nseg == 2)
		aml_byte(a, AML_DUAL_NAME);
	else if (nseg > 2) {
		aml_byte(a, AML_MULTI_NAME);
		aml_byte(a, (uint8_t)nseg);
	}
	for (size_t i = 0; i < nseg; i++)
		aml_emit(a, p + 5 * i, 4);
}

/* Appends what another builder holds (its overflow carries over). */
static void aml_append(struct aml *a, const struct aml *b)
{
	if (b->overflow)
		a->overflow = 1;
	else
		aml_emit(a, b->b, b->n);
}

static void aml_name_string(struct aml *a, const char *seg, const char *str)
{
	aml_byte(a, AML_NAME);
	aml_emit(a, seg, 4);
	aml_byte(a, AML_STRING);
	aml_emit(a, str, strlen(str) + 1);
}

/* Method(name, nargs, NotSerialized) { body } */
static void aml_method(struct aml *a, const char *name, unsigned nargs, const struct aml *body)
{
	aml_byte(a, AML_METHOD);
	aml_pkglen(a, 4 + 1 + body->n);
	aml_emit(a, name, 4);
	aml_byte(a, (uint8_t)(nargs & 7));
	aml_append(a, body);
}

/* Device(name) { body }, body in a builder */
static void aml_device(struct aml *a, const char *name, const struct aml *body)
{
	if (body->overflow)
		a->overflow = 1;
	else
		aml_block(a, 1, AML_DEVICE, name, body->b, body->n);
}

/* ---- resource descriptors (ACPI 6.4.3) ---- */

#define RES_WORD_ADDR	    0x88
#define RES_DWORD_ADDR	    0x87
#define RES_QWORD_ADDR	    0x8a
#define RES_MEM32_FIXED	    0x86
#define RES_IO		    0x47
#define RES_END		    0x79
#define RES_TYPE_MEM	    0
#define RES_TYPE_IO	    1
#define RES_TYPE_BUS	    2
#define RES_MIN_MAX_FIXED   0x0c /* producer, positive decode, min and max fixed */
#define RES_IO_ENTIRE_RANGE 0x03
#define RES_MEM_RW	    0x01
#define RES_MEM_RW_PREFETCH 0x07
#define RES_EXT_IRQ	    0x89
#define RES_IRQ_CONSUMER    0x01
#define RES_IRQ_EDGE	    0x02

static void res_word(struct aml *a, uint8_t type, uint8_t tflags, uint16_t min, uint16_t max)
{
	aml_byte(a, RES_WORD_ADDR);
	aml_u16(a, 13);
	aml_byte(a, type);
	aml_byte(a, RES_MIN_MAX_FIXED);
	aml_byte(a, tflags);
	aml_u16(a, 0); /* granularity */
	aml_u16(a, min);
	aml_u16(a, max);
	aml_u16(a, 0); /* translation */
	aml_u16(a, (uint16_t)(max - min + 1));
}

static void res_dword_mem(struct aml *a, uint32_t base, uint32_t len)
{
	aml_byte(a, RES_DWORD_ADDR);
	aml_u16(a, 23);
	aml_byte(a, RES_TYPE_MEM);
	aml_byte(a, RES_MIN_MAX_FIXED);
	aml_byte(a, RES_MEM_RW);
	aml_u32(a, 0);
	aml_u32(a, base);
	aml_u32(a, base + len - 1);
	aml_u32(a, 0);
	aml_u32(a, len);
}

static void res_qword_mem(struct aml *a, uint64_t base, uint64_t len)
{
	aml_byte(a, RES_QWORD_ADDR);
	aml_u16(a, 43);
	aml_byte(a, RES_TYPE_MEM);
	aml_byte(a, RES_MIN_MAX_FIXED);
	aml_byte(a, RES_MEM_RW_PREFETCH);
	aml_u64(a, 0);
	aml_u64(a, base);
	aml_u64(a, base + len - 1);
	aml_u64(a, 0);
	aml_u64(a, len);
}

static void res_io(struct aml *a, uint16_t port, uint8_t len)
{
	aml_byte(a, RES_IO);
	aml_byte(a, 0x01); /* 16-bit decode */
	aml_u16(a, port);
	aml_u16(a, port);
	aml_byte(a, 1);
	aml_byte(a, len);
}

static void res_mem32_fixed(struct aml *a, uint32_t base, uint32_t len)
{
	aml_byte(a, RES_MEM32_FIXED);
	aml_u16(a, 9);
	aml_byte(a, RES_MEM_RW);
	aml_u32(a, base);
	aml_u32(a, len);
}

/* Extended Interrupt descriptor: one GSI, consumer, edge, active high, exclusive. */
static void res_irq_edge(struct aml *a, uint32_t gsi)
{
	aml_byte(a, RES_EXT_IRQ);
	aml_u16(a, 6);
	aml_byte(a, RES_IRQ_CONSUMER | RES_IRQ_EDGE);
	aml_byte(a, 1);
	aml_u32(a, gsi);
}

static void res_end(struct aml *a)
{
	aml_byte(a, RES_END);
	aml_byte(a, 0); /* checksum 0: "treat as correct" */
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

/* ---- PCI hotplug the way a stock Linux takes it (acpiphp) ----
 * Every slot of bus 0 is a Device with _ADR, _SUN and _EJ0 under PCI0, so acpiphp registers it.
 * lvmm raises the Generic Event Device's interrupt; its _EVT runs PHPR.PCNT, which reads the
 * slots added (PCIU) and to be removed (PCID) from the controller (hotplug.h) and notifies each
 * slot: device check (1) makes acpiphp scan it, eject request (3) makes it remove the device
 * and run the slot's _EJ0, which writes the slot to B0EJ. */

_Static_assert(HOTPLUG_REG_PCIU == 0 && HOTPLUG_REG_PCID == 4 && HOTPLUG_REG_B0EJ == 8,
	       "the AML field list lays PCIU, PCID and B0EJ out as 3 consecutive dwords");

static void acpi_hp_slot_name(char *name, size_t len, unsigned slot)
{
	snprintf(name, len, "S%03u", slot % 1000);
}

/* Device(Snnn) in PCI0: _ADR, _SUN, and an _EJ0 that tells lvmm the guest let go of the slot. */
static void acpi_hp_slot(struct aml *pci, unsigned slot)
{
	uint8_t ej_b[32], dev_b[96];
	struct aml ej = {.b = ej_b, .max = sizeof(ej_b)};
	struct aml dev = {.b = dev_b, .max = sizeof(dev_b)};
	char name[8];

	aml_namestring(&ej, "\\_SB_.PHPR.PCEJ");
	aml_namestring(&ej, "_SUN");
	aml_name_int(&dev, "_ADR", (uint64_t)slot << 16);
	aml_name_int(&dev, "_SUN", slot);
	aml_method(&dev, "_EJ0", 1, &ej);
	acpi_hp_slot_name(name, sizeof(name), slot);
	aml_device(pci, name, &dev);
}

/* Method(DVNT, 2) in PCI0: Notify(Snnn, Arg1) for every slot whose bit is set in Arg0. */
static void acpi_hp_dvnt(struct aml *pci)
{
	uint8_t body_b[1024], if_b[32];
	struct aml body = {.b = body_b, .max = sizeof(body_b)};

	for (unsigned slot = 1; slot < HOTPLUG_SLOTS; slot++) {
		struct aml pred = {.b = if_b, .max = sizeof(if_b)};
		char name[8];

		acpi_hp_slot_name(name, sizeof(name), slot);
		aml_byte(&pred, AML_AND);
		aml_byte(&pred, AML_ARG0);
		aml_integer(&pred, 1ULL << slot);
		aml_byte(&pred, AML_ZERO); /* no target */
		aml_byte(&pred, AML_NOTIFY);
		aml_namestring(&pred, name);
		aml_byte(&pred, AML_ARG1);
		aml_byte(&body, AML_IF);
		aml_pkglen(&body, pred.n);
		aml_append(&body, &pred);
	}
	aml_method(pci, "DVNT", 2, &body);
}

static void aml_acquire(struct aml *a, const char *mutex)
{
	aml_byte(a, AML_EXT);
	aml_byte(a, AML_ACQUIRE);
	aml_emit(a, mutex, 4);
	aml_u16(a, 0xffff); /* wait forever */
}

static void aml_release(struct aml *a, const char *mutex)
{
	aml_byte(a, AML_EXT);
	aml_byte(a, AML_RELEASE);
	aml_emit(a, mutex, 4);
}

/* Device(PHPR): the controller's ports, its registers as fields, PCEJ (eject) and PCNT (scan). */
static void acpi_hp_controller(struct aml *sb)
{
	uint8_t crs_b[16], dev_b[384], m_b[64];
	struct aml crs = {.b = crs_b, .max = sizeof(crs_b)};
	struct aml dev = {.b = dev_b, .max = sizeof(dev_b)};
	struct aml m = {.b = m_b, .max = sizeof(m_b)};
	/* NamedField: name, then its width in bits as a one-byte PkgLength */
	static const uint8_t fields[] = {'P', 'C', 'I', 'U', 32,  'P', 'C', 'I',
					 'D', 32,  'B', '0', 'E', 'J', 32};

	res_io(&crs, LAYOUT_HOTPLUG_PORT, LAYOUT_HOTPLUG_LEN);
	res_end(&crs);
	aml_name_eisaid(&dev, "_HID", "PNP0A06");
	aml_name_string(&dev, "_UID", "PCI Hotplug Controller");
	aml_name_buffer(&dev, "_CRS", crs.b, crs.n);
	/* OperationRegion(PCST, SystemIO, port, len) */
	aml_byte(&dev, AML_EXT);
	aml_byte(&dev, AML_OPREGION);
	aml_emit(&dev, "PCST", 4);
	aml_byte(&dev, AML_REGION_SYSTEM_IO);
	aml_integer(&dev, LAYOUT_HOTPLUG_PORT);
	aml_integer(&dev, LAYOUT_HOTPLUG_LEN);
	/* Field(PCST, DWordAcc, NoLock, WriteAsZeros) { PCIU, 32, PCID, 32, B0EJ, 32 } */
	aml_byte(&dev, AML_EXT);
	aml_byte(&dev, AML_FIELD);
	aml_pkglen(&dev, 4 + 1 + sizeof(fields));
	aml_emit(&dev, "PCST", 4);
	aml_byte(&dev, AML_FIELD_DWORD_WZ);
	aml_emit(&dev, fields, sizeof(fields));
	/* Mutex(BLCK, 0): one eject or scan at a time */
	aml_byte(&dev, AML_EXT);
	aml_byte(&dev, AML_MUTEX);
	aml_emit(&dev, "BLCK", 4);
	aml_byte(&dev, 0);
	/* Method(PCEJ, 1) { Acquire(BLCK); B0EJ = 1 << Arg0; Release(BLCK) } */
	aml_acquire(&m, "BLCK");
	aml_byte(&m, AML_STORE);
	aml_byte(&m, AML_SHIFT_LEFT);
	aml_byte(&m, AML_ONE);
	aml_byte(&m, AML_ARG0);
	aml_byte(&m, AML_ZERO);
	aml_emit(&m, "B0EJ", 4);
	aml_release(&m, "BLCK");
	aml_method(&dev, "PCEJ", 1, &m);
	/* Method(PCNT, 0) { Acquire(BLCK); DVNT(PCIU, 1); DVNT(PCID, 3); Release(BLCK) } */
	m.n = 0;
	aml_acquire(&m, "BLCK");
	aml_namestring(&m, "\\_SB_.PCI0.DVNT");
	aml_emit(&m, "PCIU", 4);
	aml_integer(&m, AML_NOTIFY_DEVICE_CHECK);
	aml_namestring(&m, "\\_SB_.PCI0.DVNT");
	aml_emit(&m, "PCID", 4);
	aml_integer(&m, AML_NOTIFY_EJECT_REQUEST);
	aml_release(&m, "BLCK");
	aml_method(&dev, "PCNT", 0, &m);
	if (crs.overflow)
		sb->overflow = 1;
	aml_device(sb, "PHPR", &dev);
}

/* Device(GED_): ACPI0013 with an edge interrupt whose _EVT runs the hotplug scan. */
static void acpi_hp_ged(struct aml *sb)
{
	uint8_t crs_b[16], dev_b[128], m_b[32];
	struct aml crs = {.b = crs_b, .max = sizeof(crs_b)};
	struct aml dev = {.b = dev_b, .max = sizeof(dev_b)};
	struct aml m = {.b = m_b, .max = sizeof(m_b)};

	res_irq_edge(&crs, LAYOUT_ACPI_GED_IRQ);
	res_end(&crs);
	aml_name_string(&dev, "_HID", "ACPI0013");
	aml_name_int(&dev, "_UID", 0);
	aml_name_buffer(&dev, "_CRS", crs.b, crs.n);
	aml_namestring(&m, "\\_SB_.PHPR.PCNT");
	aml_method(&dev, "_EVT", 1, &m);
	if (crs.overflow)
		sb->overflow = 1;
	aml_device(sb, "GED_", &dev);
}

size_t acpi_dsdt_aml_segments(uint8_t *buf, size_t max, unsigned nseg)
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
	res_qword_mem(&crs, LAYOUT_MMIO64_START, LAYOUT_MMIO64_SIZE);
	res_end(&crs);

	aml_name_eisaid(&pci, "_HID", "PNP0A08");
	aml_name_eisaid(&pci, "_CID", "PNP0A03");
	aml_name_int(&pci, "_SEG", 0);
	aml_name_int(&pci, "_BBN", 0);
	aml_name_int(&pci, "_UID", 0);
	aml_name_buffer(&pci, "_CRS", crs.b, crs.n);
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
	return acpi_dsdt_aml_segments(buf, max, 1);
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
	return acpi_build_segments(gm, cpus, max_cpus, 1, rsdp, err, errlen);
}

int acpi_build_segments(struct guest_mem *gm, unsigned cpus, unsigned max_cpus, unsigned nseg,
			uint64_t *rsdp, char *err, unsigned errlen)
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
	aml_len = aml ? acpi_dsdt_aml_segments(aml, aml_max, nseg) : 0;
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
