/* Application processors on kvm_pvm hosts, where INIT/SIPI through the in-kernel LAPIC never
 * starts an AP: lvmm starts each AP itself when Linux arms the warm-reset vector. */
#include <errno.h>
#include <string.h>

#include "vm_internal.h"

void smp_warm_reset_write(struct vm *vm, uint8_t status)
{
	(void)vm;
	(void)status;
}

bool smp_ap_wait(struct vcpu *v)
{
	struct vm *vm = v->vm;

	/* Not started: park until the VM stops. */
	pthread_mutex_lock(&vm->lock);
	while (!vm->stop_req)
		pthread_cond_wait(&vm->cond, &vm->lock);
	pthread_mutex_unlock(&vm->lock);
	return false;
}
