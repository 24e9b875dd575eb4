/* The vNVMe PCI function as a device model (vnvme_pci.c): created from a struct vnvme_config
 * (vnvme.h), one NVMe controller (nvme_ctrl.h) behind it. */
#ifndef LVMM_VNVME_PCI_H
#define LVMM_VNVME_PCI_H

#include "device.h"
#include "vnvme.h"

extern const struct dev_model vnvme_model;

#endif
