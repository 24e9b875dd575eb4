/* Device set-up for a VM: PCI host bridge and vNVMe controllers.
 * Placeholder until the PCI platform lands: refuses configurations it cannot build. */
#include <errno.h>
#include <stdio.h>

#include "devices.h"

int devices_init(struct vm *vm, const struct vm_config *cfg, char *err, unsigned errlen)
{
	(void)vm;
	if (cfg->nvnvme) {
		snprintf(err, errlen, "vnvme %s: the NVMe controller is not built in", cfg->vnvme[0].id);
		return -EOPNOTSUPP;
	}
	return 0;
}

void devices_exit(struct vm *vm)
{
	(void)vm;
}

unsigned devices_counters(struct vm *vm, struct vm_dev_counters *out, unsigned max)
{
	(void)vm;
	(void)out;
	(void)max;
	return 0;
}
