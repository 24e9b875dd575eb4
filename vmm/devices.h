/* Devices beyond the legacy platform: the PCI host bridge and the vNVMe controllers.
 * vm_create() calls devices_init() once memory and buses exist; vm_destroy() calls devices_exit(). */
#ifndef LVMM_DEVICES_H
#define LVMM_DEVICES_H

#include "vm.h"

int devices_init(struct vm *vm, const struct vm_config *cfg, char *err, unsigned errlen);
void devices_exit(struct vm *vm);
/* vm.counters: one entry per device, returns how many were filled. */
unsigned devices_counters(struct vm *vm, struct vm_dev_counters *out, unsigned max);

#endif
