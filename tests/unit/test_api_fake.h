/* A fake VM behind struct api_vm_ops for the API tests and fuzz target: it keeps a state and a
 * config, and counts calls the router should never make in the current state. */
#ifndef LVMM_TEST_API_FAKE_H
#define LVMM_TEST_API_FAKE_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_internal.h"

struct vm {
	enum vm_state state;
	struct vm_config cfg;
};

static unsigned fake_bad_calls; /* router called an op in a state where it is invalid */
static unsigned fake_live;	/* fake VMs allocated and not destroyed */

static int fake_create(const struct vm_config *cfg, struct vm **out, char *err, unsigned errlen)
{
	struct vm *vm;

	if (!strcmp(cfg->kernel, "/nonexistent")) {
		snprintf(err, errlen, "kernel %s: No such file or directory", cfg->kernel);
		return -ENOENT;
	}
	vm = calloc(1, sizeof(*vm));
	if (!vm)
		return -ENOMEM;
	vm->cfg = *cfg;
	vm->state = VM_CREATED;
	fake_live++;
	*out = vm;
	return 0;
}

static int fake_step(struct vm *vm, enum vm_state from, enum vm_state to)
{
	if (vm->state != from) {
		fake_bad_calls++;
		return -EINVAL;
	}
	vm->state = to;
	return 0;
}

static int fake_boot(struct vm *vm, char *err, unsigned errlen)
{
	return fake_step(vm, VM_CREATED, VM_RUNNING);
}

static int fake_pause(struct vm *vm, char *err, unsigned errlen)
{
	return fake_step(vm, VM_RUNNING, VM_PAUSED);
}

static int fake_resume(struct vm *vm, char *err, unsigned errlen)
{
	return fake_step(vm, VM_PAUSED, VM_RUNNING);
}

static int fake_shutdown(struct vm *vm, char *err, unsigned errlen)
{
	if (vm->state != VM_RUNNING && vm->state != VM_PAUSED) {
		fake_bad_calls++;
		return -EINVAL;
	}
	vm->state = VM_SHUTDOWN;
	return 0;
}

static int fake_reboot(struct vm *vm, char *err, unsigned errlen)
{
	return fake_step(vm, vm->state == VM_PAUSED ? VM_PAUSED : VM_RUNNING, VM_RUNNING);
}

static void fake_destroy(struct vm *vm)
{
	fake_live--;
	free(vm);
}

static enum vm_state fake_get_state(const struct vm *vm)
{
	return vm->state;
}

static const struct vm_config *fake_get_config(const struct vm *vm)
{
	return &vm->cfg;
}

static uint64_t fake_memory_actual(const struct vm *vm)
{
	return vm->cfg.memory;
}

static unsigned fake_get_counters(struct vm *vm, struct dev_counters *out, unsigned max)
{
	if (max < 1)
		return 0;
	memset(out, 0, sizeof(*out));
	strcpy(out->id, "nvme0");
	out->reads = 5;
	out->write_bytes = 4096;
	out->doorbells = 7;
	return 1;
}

/* Set by a test to play a VM layer whose hot-add works (slot 5), for vm.add-vnvme's answer. */
static bool fake_hotplug_ok;

static int fake_add_vnvme(struct vm *vm, struct vnvme_config *c, char *err, unsigned errlen)
{
	/* an id-less function gets the first free nvme<N>, as vm_add_vnvme() gives it */
	for (unsigned k = 0; !c->id[0] && k <= CONFIG_MAX_VNVME; k++) {
		snprintf(c->id, sizeof(c->id), "nvme%u", k);
		for (unsigned i = 0; i < vm->cfg.nvnvme; i++)
			if (!strcmp(vm->cfg.vnvme[i].id, c->id))
				c->id[0] = 0;
	}
	for (unsigned i = 0; fake_hotplug_ok && i < vm->cfg.nvnvme; i++)
		if (!strcmp(vm->cfg.vnvme[i].id, c->id)) {
			snprintf(err, errlen, "vnvme %s: the VM has a device with this id", c->id);
			return -EEXIST;
		}
	if (fake_hotplug_ok && vm->cfg.nvnvme < CONFIG_MAX_VNVME) {
		vm->cfg.vnvme[vm->cfg.nvnvme++] = *c;
		return 0;
	}
	snprintf(err, errlen, "vnvme %s: PCI hotplug is not supported yet", c->id);
	return -EOPNOTSUPP;
}

static int fake_device_slot(struct vm *vm, const char *id, unsigned *slot)
{
	for (unsigned i = 0; i < vm->cfg.nvnvme && i < CONFIG_MAX_VNVME; i++)
		if (!strcmp(vm->cfg.vnvme[i].id, id)) {
			*slot = 3 + i;
			return 0;
		}
	return -ENOENT;
}

static int fake_remove_device(struct vm *vm, const char *id, char *err, unsigned errlen)
{
	unsigned i;

	if (!fake_hotplug_ok) {
		snprintf(err, errlen, "device %s: PCI hotplug is not supported yet", id);
		return -EOPNOTSUPP;
	}
	for (i = 0; i < vm->cfg.nvnvme && strcmp(vm->cfg.vnvme[i].id, id); i++)
		;
	if (i == vm->cfg.nvnvme) {
		snprintf(err, errlen, "device %s: no such device", id);
		return -ENOENT;
	}
	memmove(&vm->cfg.vnvme[i], &vm->cfg.vnvme[i + 1],
		(vm->cfg.nvnvme - i - 1) * sizeof(vm->cfg.vnvme[0]));
	vm->cfg.nvnvme--;
	return 0;
}

static void fake_defaults(struct vm_config *c)
{
	memset(c, 0, sizeof(*c));
	c->cpus = 1;
	c->max_cpus = 1;
	c->memory = 256ULL << 20;
	c->serial = SERIAL_STDIO;
}

static const struct api_vm_ops fake_ops = {
    .create = fake_create,
    .boot = fake_boot,
    .pause = fake_pause,
    .resume = fake_resume,
    .shutdown = fake_shutdown,
    .reboot = fake_reboot,
    .destroy = fake_destroy,
    .get_state = fake_get_state,
    .get_config = fake_get_config,
    .memory_actual = fake_memory_actual,
    .get_counters = fake_get_counters,
    .add_vnvme = fake_add_vnvme,
    .remove_device = fake_remove_device,
    .device_slot = fake_device_slot,
    .defaults = fake_defaults,
    .validate = NULL,
};

#endif
