/* Hot-add and hot-remove bookkeeping of a VM (vm.h): vm.add-vnvme, vm.add-disk, vm.add-net,
 * vm.add-fs, vm.add-vsock and vm.remove-device keep the VM's config in step with its devices
 * (devices.c plugs and unplugs them), so vm.info lists what the guest has and a reset rebuilds it;
 * the reset also completes the removals the guest was asked for. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "devices.h"
#include "vm_internal.h"

/* How long vm.remove-device waits for the guest's eject (an emulated guest kernel is slow). */
#define VM_HOTPLUG_EJECT_MS 30000

/* Every vNVMe's id written into the config, so that removing one never renames the ones after
 * it (an entry without an id is known by its index). */
static void vm_vnvme_ids_fix(struct vm *vm)
{
	char id[sizeof(vm->cfg.vnvme[0].id)];
	unsigned i;

	for (i = 0; i < vm->cfg.nvnvme && i < CONFIG_MAX_VNVME; i++) {
		vnvme_id(&vm->cfg.vnvme[i], i, id, sizeof(id));
		memcpy(vm->cfg.vnvme[i].id, id, sizeof(id));
	}
}

static void vm_vnvme_forget(struct vm *vm, unsigned i)
{
	memmove(&vm->cfg.vnvme[i], &vm->cfg.vnvme[i + 1],
		(vm->cfg.nvnvme - i - 1) * sizeof(vm->cfg.vnvme[0]));
	vm->cfg.nvnvme--;
	memset(&vm->cfg.vnvme[vm->cfg.nvnvme], 0, sizeof(vm->cfg.vnvme[0]));
}

/* Every disk's id written into the config, as vm_vnvme_ids_fix() does for vNVMe functions. */
static void vm_disk_ids_fix(struct vm *vm)
{
	char id[sizeof(vm->cfg.disks[0].id)];

	for (unsigned i = 0; i < vm->cfg.ndisks && i < CONFIG_MAX_DISKS; i++) {
		virtio_blk_id(&vm->cfg.disks[i], i, id, sizeof(id));
		memcpy(vm->cfg.disks[i].id, id, sizeof(id));
	}
}

static void vm_disk_forget(struct vm *vm, unsigned i)
{
	memmove(&vm->cfg.disks[i], &vm->cfg.disks[i + 1],
		(vm->cfg.ndisks - i - 1) * sizeof(vm->cfg.disks[0]));
	vm->cfg.ndisks--;
	memset(&vm->cfg.disks[vm->cfg.ndisks], 0, sizeof(vm->cfg.disks[0]));
}

static void vm_net_ids_fix(struct vm *vm)
{
	char id[sizeof(vm->cfg.nets[0].id)];

	for (unsigned i = 0; i < vm->cfg.nnets && i < CONFIG_MAX_NETS; i++) {
		virtio_net_id(&vm->cfg.nets[i], i, id, sizeof(id));
		memcpy(vm->cfg.nets[i].id, id, sizeof(id));
	}
}

/* Every share's id written into the config, as vm_disk_ids_fix() does for disks. */
static void vm_fs_ids_fix(struct vm *vm)
{
	char id[sizeof(vm->cfg.fs[0].id)];

	for (unsigned i = 0; i < vm->cfg.nfs && i < CONFIG_MAX_FS; i++) {
		virtio_fs_id(&vm->cfg.fs[i], i, id, sizeof(id));
		memcpy(vm->cfg.fs[i].id, id, sizeof(id));
	}
}

/* Every passed-through device's id written into the config, likewise. */
static void vm_vfio_ids_fix(struct vm *vm)
{
	char id[sizeof(vm->cfg.devices[0].id)];

	for (unsigned i = 0; i < vm->cfg.ndevices && i < CONFIG_MAX_DEVICES; i++) {
		vfio_pci_id(&vm->cfg.devices[i], i, id, sizeof(id));
		memcpy(vm->cfg.devices[i].id, id, sizeof(id));
	}
}

/* id as given, else the first "<prefix><N>" no device of the VM has (every model's ids written
 * into the config first). */
static void vm_pick_id(struct vm *vm, char *id, size_t cap, const char *prefix)
{
	vm_vnvme_ids_fix(vm);
	vm_disk_ids_fix(vm);
	vm_net_ids_fix(vm);
	vm_fs_ids_fix(vm);
	vm_vfio_ids_fix(vm);
	for (unsigned k = 0; !id[0] && k < 4096; k++) {
		snprintf(id, cap, "%s%u", prefix, k);
		if (devices_config_id_owner(&vm->cfg, id))
			id[0] = 0;
	}
}

/* A device that hands the RAM memfd to another party is about to join: a RAM mapped from a
 * snapshot file (vm_snapshot.c) becomes the memfd's first, the VM paused for the copy. */
static int vm_hotplug_share_ram(struct vm *vm, char *err, unsigned errlen)
{
	bool running;
	int r;

	if (!vm->ram_mapped)
		return 0;
	running = vm_get_state(vm) == VM_RUNNING;
	r = running ? vm_pause(vm, err, errlen) : 0;
	if (r)
		return r;
	r = vm_ram_share(vm, err, errlen);
	if (running) {
		char e[128];
		int r2 = vm_resume(vm, e, sizeof(e));

		if (r2 && !r) {
			snprintf(err, errlen, "%s", e);
			r = r2;
		}
	}
	return r;
}

/* Hot-add through ACPI PCI hotplug (devices.c, hotplug.c): the device joins the config, so
 * vm.info lists it and a reset rebuilds it. */
int vm_add_vnvme(struct vm *vm, struct vnvme_config *c, char *err, unsigned errlen)
{
	struct vnvme_config nc = *c;
	unsigned slot;
	int r;

	if (vm->state != VM_RUNNING && vm->state != VM_PAUSED) {
		snprintf(err, errlen, "vnvme %s: hot-add needs a running or paused VM, not %s",
			 c->id, vm_state_name(vm->state));
		return -EINVAL;
	}
	if (vm->cfg.nvnvme >= CONFIG_MAX_VNVME) {
		snprintf(err, errlen,
			 "vnvme %s: the VM already has %u vNVMe functions (at most %u)", c->id,
			 vm->cfg.nvnvme, CONFIG_MAX_VNVME);
		return -ENOSPC;
	}
	vm_pick_id(vm, nc.id, sizeof(nc.id), "nvme");
	if (devices_config_id_owner(&vm->cfg, nc.id)) {
		snprintf(err, errlen, "vnvme %s: the VM's %s device has this id", nc.id,
			 devices_config_id_owner(&vm->cfg, nc.id));
		return -EEXIST;
	}
	nc.root = vm->cfg.allowed_dir[0] ? vm->cfg.allowed_dir : NULL;
	if (vm_vnvme_maps_ram(&nc)) {
		r = vm_hotplug_share_ram(vm, err, errlen);
		if (!r) /* not done at boot without such a device */
			r = vm_populate_ram(vm, err, errlen);
		if (r)
			return r;
	}
	r = devices_add_vnvme(vm, &nc, vm->cfg.nvnvme, &slot, err, errlen);
	if (r)
		return r;
	vm->cfg.vnvme[vm->cfg.nvnvme++] = nc;
	memcpy(c->id, nc.id, sizeof(c->id));
	return 0;
}

/* vm.add-disk: as vm_add_vnvme(), for a virtio-blk disk. */
int vm_add_disk(struct vm *vm, struct virtio_blk_config *c, char *err, unsigned errlen)
{
	struct virtio_blk_config nc = *c;
	unsigned slot;
	int r;

	if (vm->state != VM_RUNNING && vm->state != VM_PAUSED) {
		snprintf(err, errlen, "disk %s: hot-add needs a running or paused VM, not %s",
			 c->id, vm_state_name(vm->state));
		return -EINVAL;
	}
	if (vm->cfg.ndisks >= CONFIG_MAX_DISKS) {
		snprintf(err, errlen, "disk %s: the VM already has %u disks (at most %u)", c->id,
			 vm->cfg.ndisks, CONFIG_MAX_DISKS);
		return -ENOSPC;
	}
	vm_pick_id(vm, nc.id, sizeof(nc.id), "disk");
	if (devices_config_id_owner(&vm->cfg, nc.id)) {
		snprintf(err, errlen, "disk %s: the VM's %s device has this id", nc.id,
			 devices_config_id_owner(&vm->cfg, nc.id));
		return -EEXIST;
	}
	nc.root = vm->cfg.allowed_dir[0] ? vm->cfg.allowed_dir : NULL;
	r = devices_add_disk(vm, &nc, vm->cfg.ndisks, &slot, err, errlen);
	if (r)
		return r;
	vm->cfg.disks[vm->cfg.ndisks++] = nc;
	memcpy(c->id, nc.id, sizeof(c->id));
	return 0;
}

/* The configuration's duplicates of a hot-added net's tap fds go with it. */
static void vm_net_forget(struct vm *vm, unsigned i)
{
	for (unsigned k = 0; k < vm->cfg.nets[i].nfds; k++)
		close(vm->cfg.nets[i].fds[k]);
	memmove(&vm->cfg.nets[i], &vm->cfg.nets[i + 1],
		(vm->cfg.nnets - i - 1) * sizeof(vm->cfg.nets[0]));
	vm->cfg.nnets--;
	memset(&vm->cfg.nets[vm->cfg.nnets], 0, sizeof(vm->cfg.nets[0]));
}

int vm_add_net(struct vm *vm, struct virtio_net_config *c, char *err, unsigned errlen)
{
	struct virtio_net_config nc = *c;
	unsigned slot, k;
	int r = 0;

	if (vm->state == VM_SHUTDOWN) {
		snprintf(err, errlen, "net %s: the VM is shut down", c->id);
		return -EINVAL;
	}
	if (vm->cfg.nnets >= CONFIG_MAX_NETS) {
		snprintf(err, errlen, "net %s: the VM already has %u net devices (at most %u)",
			 c->id, vm->cfg.nnets, CONFIG_MAX_NETS);
		return -ENOSPC;
	}
	vm_pick_id(vm, nc.id, sizeof(nc.id), "net");
	if (devices_config_id_owner(&vm->cfg, nc.id)) {
		snprintf(err, errlen, "net %s: the VM's %s device has this id", nc.id,
			 devices_config_id_owner(&vm->cfg, nc.id));
		return -EEXIST;
	}
	r = config_validate_net(&nc, err, errlen);
	if (r)
		return r;
	for (k = 0; k < c->nfds; k++) {
		nc.fds[k] = fcntl(c->fds[k], F_DUPFD_CLOEXEC, 3);
		if (nc.fds[k] < 0) {
			r = -errno;
			snprintf(err, errlen, "net %s: fd %d: %s", nc.id, c->fds[k],
				 strerror(errno));
			break;
		}
	}
	/* before vm.boot too: the VM's bus exists from vm.create, the guest finds it at boot */
	if (!r)
		r = devices_add_net(vm, &nc, vm->cfg.nnets, &slot, err, errlen);
	if (r) {
		while (k--)
			close(nc.fds[k]);
		return r;
	}
	vm->cfg.nets[vm->cfg.nnets++] = nc;
	memcpy(c->id, nc.id, sizeof(c->id));
	return 0;
}

static void vm_fs_forget(struct vm *vm, unsigned i)
{
	memmove(&vm->cfg.fs[i], &vm->cfg.fs[i + 1], (vm->cfg.nfs - i - 1) * sizeof(vm->cfg.fs[0]));
	vm->cfg.nfs--;
	memset(&vm->cfg.fs[vm->cfg.nfs], 0, sizeof(vm->cfg.fs[0]));
}

/* vm.add-fs: a virtio-fs share, its back end connected before the guest hears of it. */
int vm_add_fs(struct vm *vm, struct virtio_fs_config *c, char *err, unsigned errlen)
{
	struct virtio_fs_config nc = *c;
	unsigned slot;
	int r;

	if (vm->state != VM_RUNNING && vm->state != VM_PAUSED) {
		snprintf(err, errlen, "fs %s: hot-add needs a running or paused VM, not %s", c->tag,
			 vm_state_name(vm->state));
		return -EINVAL;
	}
	if (vm->cfg.nfs >= CONFIG_MAX_FS) {
		snprintf(err, errlen, "fs %s: the VM already has %u shares (at most %u)", c->tag,
			 vm->cfg.nfs, CONFIG_MAX_FS);
		return -ENOSPC;
	}
	vm_pick_id(vm, nc.id, sizeof(nc.id), "fs");
	if (devices_config_id_owner(&vm->cfg, nc.id)) {
		snprintf(err, errlen, "fs %s: the VM's %s device has this id", nc.id,
			 devices_config_id_owner(&vm->cfg, nc.id));
		return -EEXIST;
	}
	r = config_validate_fs(&nc, err, errlen);
	if (!r)
		r = vm_hotplug_share_ram(vm, err, errlen);
	if (!r)
		r = devices_add_fs(vm, &nc, vm->cfg.nfs, &slot, err, errlen);
	if (r)
		return r;
	vm->cfg.fs[vm->cfg.nfs++] = nc;
	memcpy(c->id, nc.id, sizeof(c->id));
	return 0;
}

static void vm_vfio_forget(struct vm *vm, unsigned i)
{
	memmove(&vm->cfg.devices[i], &vm->cfg.devices[i + 1],
		(vm->cfg.ndevices - i - 1) * sizeof(vm->cfg.devices[0]));
	vm->cfg.ndevices--;
	memset(&vm->cfg.devices[vm->cfg.ndevices], 0, sizeof(vm->cfg.devices[0]));
}

/* vm.add-device: a host PCI function passed through, opened before the guest hears of it. */
int vm_add_device(struct vm *vm, struct vfio_pci_config *c, char *err, unsigned errlen)
{
	struct vfio_pci_config nc = *c;
	unsigned slot;
	int r;

	if (vm->state != VM_RUNNING && vm->state != VM_PAUSED) {
		snprintf(err, errlen, "device %s: hot-add needs a running or paused VM, not %s",
			 c->path, vm_state_name(vm->state));
		return -EINVAL;
	}
	if (vm->cfg.ndevices >= CONFIG_MAX_DEVICES) {
		snprintf(err, errlen, "device %s: the VM already has %u devices (at most %u)",
			 c->path, vm->cfg.ndevices, CONFIG_MAX_DEVICES);
		return -ENOSPC;
	}
	vm_pick_id(vm, nc.id, sizeof(nc.id), "dev");
	if (devices_config_id_owner(&vm->cfg, nc.id)) {
		snprintf(err, errlen, "device %s: the VM's %s device has this id", nc.id,
			 devices_config_id_owner(&vm->cfg, nc.id));
		return -EEXIST;
	}
	r = config_validate_device(&nc, err, errlen);
	if (!r)
		r = vm_hotplug_share_ram(vm, err, errlen);
	if (!r)
		r = devices_add_vfio(vm, &nc, vm->cfg.ndevices, &slot, err, errlen);
	if (r)
		return r;
	vm->cfg.devices[vm->cfg.ndevices++] = nc;
	memcpy(c->id, nc.id, sizeof(c->id));
	return 0;
}

/* The vsock device went: so does the socket listened on before a jail (--jail --vsock), which
 * the configuration kept open for the device's rebuilds; open, PATH would go on accepting
 * host programs into a backlog nobody reads. */
static void vm_vsock_forget(struct vm *vm)
{
	vm->cfg.vsock.listen_owned = false;
	if (vm->cfg.vsock.has_listen_fd) {
		close(vm->cfg.vsock.listen_fd);
		vm->cfg.vsock.has_listen_fd = false;
		vm->cfg.vsock.listen_fd = -1;
	}
	vm->cfg.has_vsock = false;
}

/* vm.add-vsock: the VM's one vsock device. */
int vm_add_vsock(struct vm *vm, const struct virtio_vsock_config *c, char *err, unsigned errlen)
{
	struct virtio_vsock_config nc = *c;
	unsigned slot;
	int r;

	if (vm->state != VM_RUNNING && vm->state != VM_PAUSED) {
		snprintf(err, errlen, "vsock: hot-add needs a running or paused VM, not %s",
			 vm_state_name(vm->state));
		return -EINVAL;
	}
	if (vm->cfg.has_vsock) {
		snprintf(err, errlen, "vsock: the VM has one already (%s)", vm->cfg.vsock.id);
		return -EEXIST;
	}
	vm_disk_ids_fix(vm);
	vm_vnvme_ids_fix(vm);
	virtio_vsock_id(c, nc.id, sizeof(nc.id));
	if (devices_config_id_owner(&vm->cfg, nc.id)) {
		snprintf(err, errlen, "vsock %s: the VM's %s device has this id", nc.id,
			 devices_config_id_owner(&vm->cfg, nc.id));
		return -EEXIST;
	}
	r = config_validate_vsock(&nc, err, errlen);
	if (!r)
		r = devices_add_vsock(vm, &nc, &slot, err, errlen);
	if (r)
		return r;
	vm->cfg.vsock = nc;
	vm->cfg.has_vsock = true;
	return 0;
}

/* Hot-remove: the guest is asked to eject and given VM_HOTPLUG_EJECT_MS to do it. */
int vm_remove_device(struct vm *vm, const char *id, char *err, unsigned errlen)
{
	bool paused = vm->state == VM_PAUSED;
	char vsock_id[sizeof(vm->cfg.vsock.id)] = "";
	unsigned i, disk, net, fs, dev;
	bool is_vsock;
	int r;

	if (vm->state != VM_RUNNING && !paused) {
		snprintf(err, errlen, "device %s: hot-remove needs a running or paused VM, not %s",
			 id, vm_state_name(vm->state));
		return -EINVAL;
	}
	vm_vnvme_ids_fix(vm);
	vm_disk_ids_fix(vm);
	vm_net_ids_fix(vm);
	for (net = 0; net < vm->cfg.nnets; net++)
		if (!strcmp(vm->cfg.nets[net].id, id))
			break;
	for (i = 0; i < vm->cfg.nvnvme; i++)
		if (!strcmp(vm->cfg.vnvme[i].id, id))
			break;
	for (disk = 0; disk < vm->cfg.ndisks; disk++)
		if (!strcmp(vm->cfg.disks[disk].id, id))
			break;
	vm_fs_ids_fix(vm);
	for (fs = 0; fs < vm->cfg.nfs; fs++)
		if (!strcmp(vm->cfg.fs[fs].id, id))
			break;
	vm_vfio_ids_fix(vm);
	for (dev = 0; dev < vm->cfg.ndevices; dev++)
		if (!strcmp(vm->cfg.devices[dev].id, id))
			break;
	if (vm->cfg.has_vsock)
		virtio_vsock_id(&vm->cfg.vsock, vsock_id, sizeof(vsock_id));
	is_vsock = vm->cfg.has_vsock && !strcmp(vsock_id, id);
	if (i == vm->cfg.nvnvme && disk == vm->cfg.ndisks && net == vm->cfg.nnets &&
	    fs == vm->cfg.nfs && dev == vm->cfg.ndevices && !is_vsock) {
		snprintf(err, errlen, "device %s: no such device", id);
		return -ENOENT;
	}
	r = devices_remove(vm, id, paused ? 0 : VM_HOTPLUG_EJECT_MS, err, errlen);
	if (r == -ETIMEDOUT && paused)
		snprintf(err, errlen,
			 "device %s: removal requested while the VM is paused: the guest ejects it "
			 "after vm.resume, and a vm.remove-device then completes it",
			 id);
	if (r)
		return r;
	if (i < vm->cfg.nvnvme)
		vm_vnvme_forget(vm, i);
	else if (disk < vm->cfg.ndisks)
		vm_disk_forget(vm, disk);
	else if (net < vm->cfg.nnets)
		vm_net_forget(vm, net);
	else if (fs < vm->cfg.nfs)
		vm_fs_forget(vm, fs);
	else if (dev < vm->cfg.ndevices)
		vm_vfio_forget(vm, dev);
	else
		vm_vsock_forget(vm);
	return 0;
}

/* A reset completes the removals the guest was asked for: those devices are not rebuilt. */
void vm_hotplug_reset(struct vm *vm)
{
	unsigned i;

	vm_vnvme_ids_fix(vm);
	for (i = vm->cfg.nvnvme; i-- > 0;)
		if (devices_removing(vm, vm->cfg.vnvme[i].id)) {
			fprintf(stderr, "lvmm: vnvme %s: removed by the reset\n",
				vm->cfg.vnvme[i].id);
			vm_vnvme_forget(vm, i);
		}
	vm_disk_ids_fix(vm);
	for (i = vm->cfg.ndisks; i-- > 0;)
		if (devices_removing(vm, vm->cfg.disks[i].id)) {
			fprintf(stderr, "lvmm: disk %s: removed by the reset\n",
				vm->cfg.disks[i].id);
			vm_disk_forget(vm, i);
		}
	vm_net_ids_fix(vm);
	for (i = vm->cfg.nnets; i-- > 0;)
		if (devices_removing(vm, vm->cfg.nets[i].id)) {
			fprintf(stderr, "lvmm: net %s: removed by the reset\n", vm->cfg.nets[i].id);
			vm_net_forget(vm, i);
		}
	vm_fs_ids_fix(vm);
	for (i = vm->cfg.nfs; i-- > 0;)
		if (devices_removing(vm, vm->cfg.fs[i].id)) {
			fprintf(stderr, "lvmm: fs %s: removed by the reset\n", vm->cfg.fs[i].id);
			vm_fs_forget(vm, i);
		}
	vm_vfio_ids_fix(vm);
	for (i = vm->cfg.ndevices; i-- > 0;)
		if (devices_removing(vm, vm->cfg.devices[i].id)) {
			fprintf(stderr, "lvmm: device %s: removed by the reset\n",
				vm->cfg.devices[i].id);
			vm_vfio_forget(vm, i);
		}
	if (vm->cfg.has_vsock) {
		char id[sizeof(vm->cfg.vsock.id)];

		virtio_vsock_id(&vm->cfg.vsock, id, sizeof(id));
		if (devices_removing(vm, id)) {
			fprintf(stderr, "lvmm: vsock %s: removed by the reset\n", id);
			vm_vsock_forget(vm);
		}
	}
}
