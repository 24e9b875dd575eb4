/* One VM: KVM handles, guest memory, vCPU threads, buses, devices, and its lifecycle.
 * The CLI (vmm/main.c) and the REST API (vmm/api/) both drive a VM only through this header. */
#ifndef LVMM_VM_H
#define LVMM_VM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bus.h"
#include "config.h"
#include "device.h"
#include "guest_mem.h"

/* Names are cloud-hypervisor's vm.info "state" strings. */
enum vm_state { VM_CREATED, VM_RUNNING, VM_PAUSED, VM_SHUTDOWN };
const char *vm_state_name(enum vm_state s);

/* Why a VM stopped: printed by `lvmm run` as a one-line reason. */
enum vm_exit_reason {
	VM_EXIT_NONE,
	VM_EXIT_POWEROFF,
	VM_EXIT_REBOOT,
	VM_EXIT_RESET,
	VM_EXIT_TRIPLE_FAULT,
	VM_EXIT_SIGNAL,
	VM_EXIT_API,   /* vm.shutdown / vmm.shutdown */
	VM_EXIT_ERROR, /* unhandled exit, emulation failure: message in vm_exit_msg() */
};

struct vm;

/* Lifecycle. All return 0 or a negative errno, with a one-line message in err. */
/* Opens /dev/kvm and checks its API version: the fd, or -errno with a user-facing reason in err.
 * lvmm run calls it first so that a host without KVM fails before anything is started. */
int vm_kvm_open(char *err, unsigned errlen);
int vm_create(const struct vm_config *cfg, struct vm **out, char *err, unsigned errlen);
int vm_boot(struct vm *vm, char *err, unsigned errlen);	 /* starts vCPU threads */
int vm_pause(struct vm *vm, char *err, unsigned errlen); /* all vCPUs stopped on return */
int vm_resume(struct vm *vm, char *err, unsigned errlen);
int vm_shutdown(struct vm *vm, char *err, unsigned errlen); /* stop vCPUs, state Shutdown */
int vm_reboot(struct vm *vm, char *err, unsigned errlen);
void vm_destroy(struct vm *vm); /* any state */

/* Snapshots (vm_snapshot.c, docs/snapshot.md). vm_snapshot saves a paused VM into the existing
 * directory dirfd (dir: its name, for messages) through *at calls only: config.json (config's
 * bytes, which the caller made from the VM's config), state.bin and a sparse memory.bin; -EINVAL
 * when the VM is not paused, -EOPNOTSUPP naming the device or feature that cannot be saved yet.
 * vm_restore builds a VM from cfg (parsed from the config bytes read with vm_snapshot_read_config)
 * and brings it to the saved state, Paused with its threads started; every byte read is checked, a
 * mismatch refused with a message. */
struct vm_snapshot_stats {
	uint64_t memory_written; /* RAM bytes that were not zero */
	uint64_t state_bytes;
	unsigned msrs;	      /* per vCPU */
	unsigned msrs_listed; /* by KVM_GET_MSR_INDEX_LIST; the others a vCPU cannot read */
	bool xsave, xcrs;     /* the host has them: saved instead of / beside the legacy FPU */
	unsigned tsc_khz;     /* the guest's TSC rate; 0 when KVM could not say */
};
int vm_snapshot(struct vm *vm, int dirfd, const char *dir, const void *config, size_t config_len,
		struct vm_snapshot_stats *stats, char *err, unsigned errlen);
/* config.json of the snapshot in dirfd, NUL-terminated, malloc'd (at most 1 MiB). */
int vm_snapshot_read_config(int dirfd, char **config, size_t *len, char *err, unsigned errlen);
int vm_restore(const struct vm_config *cfg, int dirfd, const void *config, size_t config_len,
	       struct vm **out, char *err, unsigned errlen);
/* The pieces live migration shares (vm_migrate.c): a paused VM's state.bin bytes (malloc'd) and
 * the check that refuses a VM that cannot be saved before any work; a VM built for a restore
 * (its RAM then filled by the caller) and brought to the state in state.bin's bytes, Paused. */
int vm_save_state(struct vm *vm, const void *config, size_t config_len, uint8_t **state,
		  size_t *len, struct vm_snapshot_stats *stats, char *err, unsigned errlen);
int vm_save_check(struct vm *vm, char *err, unsigned errlen);
int vm_restore_create(const struct vm_config *cfg, struct vm **out, char *err, unsigned errlen);
int vm_restore_state(struct vm *vm, const void *state, size_t state_len, const void *config,
		     size_t config_len, char *err, unsigned errlen);

/* Live migration (vm_migrate.c, docs/snapshot.md). vm_migrate_url: "unix:PATH" to PATH.
 * vm_migrate_send moves a running or paused VM to the destination receiving at path: 0 once the
 * destination took it over (the caller then destroys its VM and exits); otherwise the VM runs
 * (or stays paused) as before, err says why. vm_migrate_receive listens at path for one source,
 * builds the VM from the config parse() makes of the source's JSON and returns it running (or
 * paused, as the source had it); on failure nothing is left of it. */
struct vm_migrate_stats {
	bool local, dirty_log;
	unsigned rounds;		       /* pre-copy passes, the first full one included */
	uint64_t last_dirty;		       /* pages dirty in the last pre-copy round */
	uint64_t final_pages;		       /* sent while paused */
	uint64_t pages, bytes;		       /* RAM pages and bytes sent or received */
	uint64_t state_bytes;		       /* state.bin */
	unsigned fds;			       /* devices' host fds handed over (FDS) */
	uint64_t start, paused_at, resumed_at; /* CLOCK_MONOTONIC microseconds */
};
typedef int (*vm_migrate_config_fn)(void *ctx, const char *json, size_t len, struct vm_config *cfg,
				    char *err, unsigned errlen);
int vm_migrate_url(const char *url, char *path, size_t len, char *err, unsigned errlen);
int vm_migrate_send(struct vm *vm, const char *path, bool local, const void *config,
		    size_t config_len, struct vm_migrate_stats *st, char *err, unsigned errlen);
int vm_migrate_receive(const char *path, vm_migrate_config_fn parse, void *ctx, struct vm **out,
		       struct vm_migrate_stats *st, char *err, unsigned errlen);

/* Blocks until the VM stops (guest poweroff, fault, vm_shutdown); returns the reason. */
enum vm_exit_reason vm_wait(struct vm *vm);
const char *vm_exit_msg(const struct vm *vm);
/* After vm_wait(): writes out what the guest's console still holds (bounded wait), so that
 * lvmm's own exit line comes after the guest's last line. */
void vm_console_flush(struct vm *vm);

enum vm_state vm_get_state(const struct vm *vm);
const struct vm_config *vm_get_config(const struct vm *vm);
uint64_t vm_memory_actual(const struct vm *vm);
/* Fills up to max entries, returns the number of devices. */
unsigned vm_get_counters(struct vm *vm, struct dev_counters *out, unsigned max);
/* Console bytes: sent by the guest, written out, dropped (serial.h). A paused guest's tx stays. */
struct serial_stats;
void vm_console_stats(struct vm *vm, struct serial_stats *st);

/* vm.add-vnvme / vm.remove-device on a running or paused VM, through ACPI PCI hotplug: the add
 * answers once the guest was told; the remove once the guest ejected the device and lvmm tore it
 * down, or -ETIMEDOUT after 30 s (the request stays pending; a vm.reboot completes it). */
int vm_add_vnvme(struct vm *vm, struct vnvme_config *c, char *err, unsigned errlen);
/* vm_add_disk, _net, _fs and vm_add_device: a c without an id gets the first "disk<N>",
 * "net<N>", "fs<N>" or "dev<N>" no device of the VM has, written into c->id. */
int vm_add_disk(struct vm *vm, struct virtio_blk_config *c, char *err, unsigned errlen);
/* vm.add-net: the fds in c stay the caller's (the VM keeps duplicates). Before vm.boot the
 * device is on the bus when the guest starts; afterwards it is hot-added. */
int vm_add_net(struct vm *vm, struct virtio_net_config *c, char *err, unsigned errlen);
int vm_add_fs(struct vm *vm, struct virtio_fs_config *c, char *err, unsigned errlen);
int vm_add_device(struct vm *vm, struct vfio_pci_config *c, char *err, unsigned errlen);
int vm_add_vsock(struct vm *vm, const struct virtio_vsock_config *c, char *err, unsigned errlen);
int vm_remove_device(struct vm *vm, const char *id, char *err, unsigned errlen);

/* Services for device models and the PCI layer. */
struct guest_mem *vm_guest_mem(struct vm *vm);
struct bus *vm_pio_bus(struct vm *vm);
/* The guest's physical address width (CPUID 0x80000008 as KVM gives it to the vCPUs); 0 when
 * KVM does not say. */
unsigned vm_guest_phys_bits(struct vm *vm);
struct bus *vm_mmio_bus(struct vm *vm);
int vm_alloc_gsi(struct vm *vm);	      /* a free GSI for MSI routing */
int vm_free_gsi(struct vm *vm, unsigned gsi); /* back to the pool, its MSI route dropped */
unsigned vm_gsi_count(struct vm *vm);	      /* MSI GSIs handed out now */
int vm_set_msi_route(struct vm *vm, unsigned gsi, uint64_t addr, uint32_t data, bool masked);
int vm_irqfd(struct vm *vm, unsigned gsi, int efd, bool assign);
/* PCI INTx on an IOAPIC pin: efd raises it, KVM lowers it at the guest's EOI and signals
 * resample_fd (KVM's IOAPIC); -EOPNOTSUPP with lvmm's IOAPIC (split irqchip). */
int vm_irqfd_resample(struct vm *vm, unsigned gsi, int efd, int resample_fd, bool assign);
/* Split irqchip: KVM's MSI route for IOAPIC pin, on while the pin is level triggered and
 * unmasked, so that KVM exits with the EOI of its vector. */
int vm_set_pin_route(struct vm *vm, unsigned pin, uint64_t addr, uint32_t data, bool on);
int vm_ioeventfd(struct vm *vm, uint64_t addr, unsigned len, int efd, bool assign);
/* Maps host memory into the guest at gpa (CMB / doorbell pages in passthrough mode). */
int vm_map_host_mem(struct vm *vm, uint64_t gpa, uint64_t size, void *host, bool readonly);
int vm_unmap_host_mem(struct vm *vm, uint64_t gpa);
/* Raises a legacy IRQ line (serial). */
int vm_set_irq_line(struct vm *vm, unsigned irq, bool level);

#endif
