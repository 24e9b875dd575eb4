/* The VMM's state behind the API: at most one VM, whether the API owns it, and the waiter
 * thread that notices a booted VM stopping on its own. */
#include <string.h>
#include <unistd.h>

#include "api/api_internal.h"

void api_vmm_init(struct api_vmm *vmm, const struct api_vm_ops *ops, struct vm *vm)
{
	memset(vmm, 0, sizeof(*vmm));
	vmm->ops = ops;
	vmm->vm = vm;
	vmm->vm_external = vm != NULL;
	vmm->stop_efd = -1;
}

static void *api_vmm_wait_thread(void *arg)
{
	struct api_vmm *vmm = arg;
	uint64_t one = 1;

	vmm->wait_reason = vmm->ops->wait(vmm->vm);
	if (vmm->stop_efd >= 0 && write(vmm->stop_efd, &one, sizeof(one)) < 0) {
		/* an eventfd add of 1 only fails on a closed fd */
	}
	return NULL;
}

int api_vmm_watch(struct api_vmm *vmm)
{
	int r;

	if (!vmm->ops->wait || vmm->waiter_started)
		return 0;
	r = pthread_create(&vmm->waiter, NULL, api_vmm_wait_thread, vmm);
	if (r)
		return -r;
	vmm->waiter_started = true;
	return 0;
}

void api_vmm_unwatch(struct api_vmm *vmm)
{
	char err[API_ERR_LEN];
	enum vm_state s;

	if (!vmm->vm)
		return;
	s = vmm->ops->get_state(vmm->vm);
	if (s == VM_RUNNING || s == VM_PAUSED)
		vmm->ops->shutdown(vmm->vm, err, sizeof(err));
	if (vmm->waiter_started) {
		pthread_join(vmm->waiter, NULL);
		vmm->waiter_started = false;
	}
}

void api_vmm_release(struct api_vmm *vmm)
{
	if (!vmm->vm || !vmm->vm_owned)
		return;
	api_vmm_unwatch(vmm);
	vmm->ops->destroy(vmm->vm);
	vmm->vm = NULL;
	vmm->vm_owned = false;
	json_decref(vmm->extra);
	vmm->extra = NULL;
}
