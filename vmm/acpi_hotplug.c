/* ACPI PCI hotplug the way a stock Linux takes it (acpiphp), as AML for the DSDT acpi.c builds.
 * Every slot of bus 0 is a Device with _ADR, _SUN and _EJ0 under PCI0, so acpiphp registers it.
 * lvmm raises the Generic Event Device's interrupt; its _EVT runs PHPR.PCNT, which reads the
 * slots added (PCIU) and to be removed (PCID) from the controller (hotplug.h) and notifies each
 * slot: device check (1) makes acpiphp scan it, eject request (3) makes it remove the device
 * and run the slot's _EJ0, which writes the slot to B0EJ. */
#include <stdio.h>

#include "acpi_internal.h"
#include "hotplug.h"
#include "layout.h"

/* Notify values (ACPI 5.6.6) acpiphp acts on */
#define AML_NOTIFY_DEVICE_CHECK	 1
#define AML_NOTIFY_EJECT_REQUEST 3

_Static_assert(HOTPLUG_REG_PCIU == 0 && HOTPLUG_REG_PCID == 4 && HOTPLUG_REG_B0EJ == 8,
	       "the AML field list lays PCIU, PCID and B0EJ out as 3 consecutive dwords");

static void acpi_hp_slot_name(char *name, size_t len, unsigned slot)
{
	snprintf(name, len, "S%03u", slot % 1000);
}

/* Device(Snnn) in PCI0: _ADR, _SUN, and an _EJ0 that tells lvmm the guest let go of the slot. */
void acpi_hp_slot(struct aml *pci, unsigned slot)
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
void acpi_hp_dvnt(struct aml *pci)
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

/* Device(PHPR): the controller's ports, its registers as fields, PCEJ (eject) and PCNT (scan). */
void acpi_hp_controller(struct aml *sb)
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
void acpi_hp_ged(struct aml *sb)
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
