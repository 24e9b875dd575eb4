/* Inside of the ACPI tables (acpi.h): the PCI hotplug AML acpi_hotplug.c writes into the DSDT
 * acpi.c builds. */
#ifndef LVMM_ACPI_INTERNAL_H
#define LVMM_ACPI_INTERNAL_H

#include "aml.h"

/* In PCI0: Method DVNT, which notifies the slots whose bits are set, and slot's Device Snnn. */
void acpi_hp_dvnt(struct aml *pci);
void acpi_hp_slot(struct aml *pci, unsigned slot);
/* In \_SB_: the hotplug controller's Device PHPR and the Generic Event Device GED_. */
void acpi_hp_controller(struct aml *sb);
void acpi_hp_ged(struct aml *sb);

#endif
