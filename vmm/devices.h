/* Devices beyond the legacy platform: the PCI host bridge and the device models of the registry
 * (devices.c, device.h). vm_create() calls devices_init() once memory and buses exist;
 * vm_destroy() calls devices_exit(). */
#ifndef LVMM_DEVICES_H
#define LVMM_DEVICES_H

#include <stdbool.h>

#include "vm.h"

int devices_init(struct vm *vm, const struct vm_config *cfg, char *err, unsigned errlen);
/* Device ids are unique across every model of a VM (vm.counters and vm.remove-device know a
 * device by id alone). The name of the model whose instance in c is called id (the virtio-rng
 * is "rng0", disks "disk<N>" without an id), or NULL; and the check of a whole config. */
const char *devices_config_id_owner(const struct vm_config *c, const char *id);
int devices_config_check_ids(const struct vm_config *c, char *err, unsigned errlen);
void devices_exit(struct vm *vm);
/* The 64-bit PCI window's size once the boot devices are placed (LAYOUT_MMIO64_START on): at
 * least LAYOUT_MMIO64_SIZE, more when their prefetchable BARs need it. */
uint64_t devices_mmio64_size(struct vm *vm);
/* How far the 64-bit PCI window may grow: up to the smaller of the host's and the guest's
 * physical address widths (0: not known), at most 2^48, 2^36 when neither is known; 0 when the
 * window cannot grow at all. */
uint64_t devices_mmio64_max(unsigned host_bits, unsigned guest_bits);
/* The guest's EOI for IOAPIC pin (lvmm's IOAPIC): PCI functions on it hear it (INTx). */
void devices_intx_eoi(struct vm *vm, unsigned pin);
/* PCI hotplug (hotplug.h, ACPI in acpi_hotplug.c), called from the API's thread. Add: creates the
 * vNVMe (idx: its controller id) on a free slot of bus 0 and tells the guest; *slot gets the slot.
 * Remove: asks the guest to eject the device and waits up to timeout_ms for its _EJ0, then
 * tears the device down; -ENOENT for an unknown id, -ETIMEDOUT while the guest has not ejected
 * it (the request stays; calling again waits again, and an eject since then completes it). */
int devices_add_vnvme(struct vm *vm, const struct vnvme_config *c, unsigned idx, unsigned *slot,
		      char *err, unsigned errlen);
int devices_add_disk(struct vm *vm, const struct virtio_blk_config *c, unsigned idx, unsigned *slot,
		     char *err, unsigned errlen);
int devices_add_net(struct vm *vm, const struct virtio_net_config *c, unsigned idx, unsigned *slot,
		    char *err, unsigned errlen);
int devices_add_vsock(struct vm *vm, const struct virtio_vsock_config *c, unsigned *slot, char *err,
		      unsigned errlen);
int devices_add_fs(struct vm *vm, const struct virtio_fs_config *c, unsigned idx, unsigned *slot,
		   char *err, unsigned errlen);
int devices_add_vfio(struct vm *vm, const struct vfio_pci_config *c, unsigned idx, unsigned *slot,
		     char *err, unsigned errlen);
int devices_remove(struct vm *vm, const char *id, unsigned timeout_ms, char *err, unsigned errlen);
/* Whether the device's removal was requested (ejected or not): a reset completes it. */
bool devices_removing(struct vm *vm, const char *id);
/* The bus-0 slot of a device by id: 0, or -ENOENT. */
int devices_slot(struct vm *vm, const char *id, unsigned *slot);
/* vm.pause (pause true, after the vCPUs stopped) and vm.resume (before they start): each
 * device's pause or resume op. */
void devices_pause(struct vm *vm, bool pause);
/* Snapshots (vm_snapshot.c): every device's state as a section of w, refused (-EOPNOTSUPP,
 * err naming the device and its model) when one has no save op; and back, each saved device
 * matched by ordinal, id and model to the one its config made. */
struct snap_writer;
struct snap_reader;
int devices_save(struct vm *vm, struct snap_writer *w, char *err, unsigned errlen);
/* devices_save's first check alone: every device can be saved now (live migration). */
int devices_save_check(struct vm *vm, char *err, unsigned errlen);
int devices_restore(struct vm *vm, const struct snap_reader *rd, char *err, unsigned errlen);
/* Live migration, after devices_save: each device's release op (the first failure is returned,
 * the devices released so far are reclaimed); devices_reclaim undoes it, every device tried. */
int devices_release(struct vm *vm, char *err, unsigned errlen);
int devices_reclaim(struct vm *vm, char *err, unsigned errlen);
/* Whether cfg makes a device with a release op: a migration's destination builds such a VM only
 * once the source has released it (at STATE). */
bool devices_hand_over(const struct vm_config *cfg);
/* The source, after devices_release: send(ctx, id, fds, n) for each device that hands host fds
 * over (dev_model.hand_fds); the first failure is returned. */
int devices_hand_fds(struct vm *vm,
		     int (*send)(void *ctx, const char *id, const int *fds, unsigned n, char *err,
				 unsigned errlen),
		     void *ctx, char *err, unsigned errlen);
/* The destination, before it builds the VM: fd (index of count) from the source's device id
 * into cfg, checked by the model (dev_model.take_fd). 0: cfg holds it (config_fds_close); else
 * it stays the caller's, with err. */
int devices_take_fd(struct vm_config *cfg, const char *id, unsigned index, unsigned count, int fd,
		    char *err, unsigned errlen);
/* vm.counters: one entry per device that keeps counters, returns how many were filled. */
unsigned devices_counters(struct vm *vm, struct dev_counters *out, unsigned max);

#endif
