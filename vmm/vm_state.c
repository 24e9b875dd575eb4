/* VM lifecycle state names (cloud-hypervisor's, as vm.info prints them). On its own so that the
 * API router links into tests without the KVM runtime. */
#include "vm.h"

const char *vm_state_name(enum vm_state s)
{
	switch (s) {
	case VM_CREATED:
		return "Created";
	case VM_RUNNING:
		return "Running";
	case VM_PAUSED:
		return "Paused";
	case VM_SHUTDOWN:
		return "Shutdown";
	}
	return "Unknown";
}
