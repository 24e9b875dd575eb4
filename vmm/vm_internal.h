/* Inside of struct vm, shared by the runtime files (vm.c, vm_mem.c, gsi.c, vm_console.c,
 * vm_debug.c, vm_hotplug.c, vcpu.c, smp.c) and the CLI only. Devices and the API use vm.h;
 * nothing here is a contract beyond vmm/. */
#ifndef LVMM_VM_INTERNAL_H
#define LVMM_VM_INTERNAL_H

#include <linux/kvm.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "boot.h"
#include "gsi.h"
#include "ioapic.h"
#include "legacy.h"
#include "serial.h"
#include "vm.h"

#define VM_MAX_VCPUS	  64
#define VM_MAX_GSI_ROUTES 1024
#define VM_MAX_HOST_MAPS  80 /* BARs, and a doorbell page pair per polled queue */
#define VM_FIRST_MSI_GSI  24 /* GSIs below are the IOAPIC pins */

/* A guest-physical address for the boot GDT: below the zero page, untouched by the boot code. */
#define VM_BOOT_GDT 0x500ULL
/* Initial stack for vCPU 0 (the kernel switches to its own at once): just below the PML4. */
#define VM_BOOT_STACK 0x8ff0ULL

enum vcpu_exit_kind {
	VCPU_EXIT_IO,
	VCPU_EXIT_MMIO,
	VCPU_EXIT_INTR,
	VCPU_EXIT_EMUL,
	VCPU_EXIT_OTHER,
	VCPU_EXIT_KINDS
};

struct vcpu {
	struct vm *vm;
	unsigned id;
	int fd;
	struct kvm_run *run;
	size_t run_size;
	pthread_t thread;
	bool thread_started;
	bool parked; /* acknowledged a pause request (vm->lock) */
	bool ap_up;  /* kvm_pvm SMP route: lvmm started this AP (smp.c), or it was restored */
	uint64_t exits[VCPU_EXIT_KINDS];
	unsigned dump_seen; /* LVMM_DEBUG_VCPU: last register dump generation printed */
	unsigned prof_seen; /* LVMM_PROFILE: last sample generation taken */
};

struct vm_host_map {
	uint64_t gpa, size;
	unsigned slot;
	bool used;
};

struct vm {
	struct vm_config cfg;
	int kvm_fd, vm_fd;
	bool hostcompat; /* kvm_pvm workarounds on */
	bool has_pit;
	bool ap_manual;	    /* kvm_pvm: lvmm starts APs itself (smp.c) */
	bool split_irqchip; /* LAPICs in KVM, IOAPIC in lvmm (ioapic.c), no PIC or PIT */
	struct ioapic ioapic;
	struct guest_mem gmem;
	uint8_t *ram;
	uint64_t ram_map_size;
	/* The RAM is a private (copy-on-write) mapping of a snapshot's memory.bin, not the memfd
	 * (whose pages are then all zero): vm_ram_share() makes it the memfd's again before
	 * anything that needs the memfd (a backend mapping it, a local migration, a reboot). */
	bool ram_mapped;
	struct bus pio, mmio;
	struct serial serial;
	int serial_fd; /* where guest output goes, -1 for off */
	bool serial_fd_owned;
	bool serial_open; /* serial_fd settled: a reboot keeps it */
	struct legacy legacy;
	struct boot_info boot;
	char cmdline[4096 + 256];
	bool devices_up;

	pthread_mutex_t lock;
	pthread_cond_t cond;
	enum vm_state state;
	enum vm_exit_reason reason;
	char exit_msg[512];
	bool stop_req, pause_req;
	/* vm_reboot() stops the threads with stop_req while this is set: vm_wait() keeps waiting,
	 * and a stop requested meanwhile (signal, vm_destroy) is kept in pending_* for after. */
	bool rebooting;
	enum vm_exit_reason pending_reason;
	char pending_msg[512];
	unsigned nparked, nthreads;
	bool joined;
	struct kvm_clock_data paused_clock;

	pthread_t input_thread;
	bool input_started;
	int input_wake_fd;

	pthread_mutex_t route_lock;
	struct kvm_irq_routing *routes;
	struct gsi_alloc gsis; /* MSI GSIs handed out (route_lock) */
	unsigned next_slot;
	struct vm_host_map maps[VM_MAX_HOST_MAPS];

	/* kvm_pvm SMP route (smp.c): how many times Linux armed the warm-reset vector. */
	unsigned ap_requests;
	bool restored; /* vm_restore: every vCPU resumes its saved state, none is started anew */

	unsigned dump_gen; /* LVMM_DEBUG_VCPU: bumped every few seconds (vm->lock) */
	pthread_t dump_thread;
	bool dump_started;

	/* LVMM_PROFILE=FILE: every vCPU's RIP sampled prof_hz times a second, a line per sample */
	FILE *prof_fp;
	unsigned prof_gen; /* bumped by the profiling thread (atomic) */
	long prof_hz;
	bool prof_stack; /* LVMM_PROFILE=FILE,HZ,stack: stack words too */
	pthread_t prof_thread;
	bool prof_started;

	unsigned ncpus;
	struct vcpu vcpus[VM_MAX_VCPUS];
};

/* Stops the VM with a reason (the first caller's reason wins) and wakes vm_wait(). */
void vm_request_stop(struct vm *vm, enum vm_exit_reason why, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Makes every vCPU leave KVM_RUN soon; call with vm->lock held. */
void vm_kick_all(struct vm *vm);

/* The parts vm.c builds a VM from and starts; those with err return 0 or -errno and a message. */
/* vm_mem.c: guest RAM (created once, zeroed by a reboot) and its KVM memory slots. */
int vm_create_memory(struct vm *vm, char *err, unsigned errlen);
/* Whether vNVMe function v maps guest RAM into its SSD backend, which then needs all of it
 * faulted in by vm_populate_ram(). */
bool vm_vnvme_maps_ram(const struct vnvme_config *v);
int vm_populate_ram(struct vm *vm, char *err, unsigned errlen);
/* Live migration: KVM's dirty log on the RAM slots on or off (0, or the first -errno), the
 * bitmap of RAM slot i (one bit per page of the slot, cleared by the read), and a VM not yet
 * started given memfd's pages as its RAM (same mapping address; checked: sealed, the RAM's size;
 * the VM owns memfd on success). */
int vm_ram_dirty_log(struct vm *vm, bool on);
int vm_ram_dirty_get(struct vm *vm, unsigned slot, uint64_t *bitmap);
int vm_adopt_ram(struct vm *vm, int memfd, char *err, unsigned errlen);
/* Whether cfg has a device that hands the RAM memfd (not just its pages) to another party: an
 * SSD backend's DMA window, a vhost-user back end, VFIO's pinned pages. */
bool vm_ram_memfd_needed(const struct vm_config *cfg);
/* A VM not yet started (restore) given the first size bytes of file fd as its RAM, mapped
 * private at the RAM's address (vm->ram_mapped); prefault reads every page in. */
int vm_map_ram_file(struct vm *vm, int fd, bool prefault, char *err, unsigned errlen);
/* A mapped RAM (vm->ram_mapped) copied into the memfd (its all-zero pieces left as holes) and
 * the memfd mapped over it again, at the same address; nothing to do otherwise. The VM's vCPUs
 * and devices must be stopped (paused, or not started). */
int vm_ram_share(struct vm *vm, char *err, unsigned errlen);
/* Every 64 KiB piece of the RAM that is not all zero written into fd at its own offset (name in
 * errors), what a snapshot's memory.bin and vm_ram_share() hold; *written the bytes written. */
int vm_ram_write_sparse(const struct vm *vm, int fd, const char *name, uint64_t *written, char *err,
			unsigned errlen);
/* gsi.c: KVM's GSI routing table with the default pin routes, and the MSI GSI allocator. */
int vm_routes_init(struct vm *vm, char *err, unsigned errlen);
/* vm_console.c: COM1 on the PIO bus (where its output goes is settled once, kept by a reboot);
 * the serial file, which vm_boot() opens; the console input thread. */
int vm_open_serial(struct vm *vm, char *err, unsigned errlen);
int vm_open_serial_file(struct vm *vm, char *err, unsigned errlen);
void *vm_input_thread(void *arg);
/* vm_debug.c: LVMM_DEBUG_VCPU's thread; LVMM_PROFILE's file (vm->prof_fp stays NULL when not
 * profiling) and sampling thread. */
void *vm_dump_thread(void *arg);
void vm_profile_open(struct vm *vm);
void *vm_profile_thread(void *arg);
/* vm.c: a restored VM's threads started with the VM Paused (vm_restore). */
int vm_start_paused(struct vm *vm, char *err, unsigned errlen);
/* vm_hotplug.c: forgets the devices whose removal the guest was asked for (before a reboot). */
void vm_hotplug_reset(struct vm *vm);

/* vcpu.c */
int vcpu_create(struct vm *vm, unsigned id, char *err, unsigned errlen);
int vcpu_setup_bsp(struct vcpu *v, char *err, unsigned errlen);
/* APs of an ELF guest with the AP-entry note (loader.h): the boot CPU's state, RBX = index. */
int vcpu_setup_ap_entry(struct vcpu *v, char *err, unsigned errlen);
int vcpu_start(struct vcpu *v, char *err, unsigned errlen);
void vcpu_destroy(struct vcpu *v);
/* Dispatches the exit in v->run (PIO, MMIO, stops); false when the vCPU must stop. Only the run
 * loop calls it, and the fuzz harness with a synthetic kvm_run and v->fd = -1. */
bool vcpu_handle_exit(struct vcpu *v);
void vcpu_signals_init(void);
/* One line of registers on stderr (debugging a guest that stopped making progress). */
void vcpu_dump(struct vcpu *v);
void vcpu_profile_sample(struct vcpu *v);
extern int vcpu_kick_signal;

/* smp.c: kvm_pvm route that starts APs from the monitor. */
void smp_warm_reset_write(struct vm *vm, uint8_t status);
/* An AP thread waits here until its start-up is due; returns false when the VM stops first. */
bool smp_ap_wait(struct vcpu *v);

#endif
