/* VM lifecycle (vm.h): KVM VM and irqchip, legacy devices, a VM built from its config, the state
 * machine with pause/resume, reboot as a rebuild, and the accessors. The rest of a VM: guest RAM
 * (vm_mem.c), interrupt routes (gsi.c), console (vm_console.c), debugging threads (vm_debug.c),
 * hot-add and hot-remove (vm_hotplug.c). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "devices.h"
#include "hostcompat.h"
#include "layout.h"
#include "vm_internal.h"

#define KVM_TSS_GPA	  0xfffbd000ULL /* three pages KVM needs on VMX, in the hole above the LAPIC */
#define KVM_IDENT_MAP_GPA 0xfffbc000ULL

void vm_kick_all(struct vm *vm)
{
	unsigned i;

	for (i = 0; i < vm->ncpus; i++) {
		struct vcpu *v = &vm->vcpus[i];

		if (!v->thread_started)
			continue;
		if (v->run)
			v->run->immediate_exit = 1;
		pthread_kill(v->thread, vcpu_kick_signal);
	}
}

/* A stop was requested (vm->lock held): vCPUs leave KVM_RUN, the console input thread wakes. */
static void vm_stop_threads(struct vm *vm)
{
	uint64_t one = 1;

	vm_kick_all(vm);
	if (vm->input_wake_fd >= 0 && write(vm->input_wake_fd, &one, sizeof(one)) < 0) {
		/* the input thread also polls with a timeout; it will notice */
	}
}

void vm_request_stop(struct vm *vm, enum vm_exit_reason why, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&vm->lock);
	if (vm->rebooting && vm->pending_reason == VM_EXIT_NONE) {
		vm->pending_reason = why;
		va_start(ap, fmt);
		vsnprintf(vm->pending_msg, sizeof(vm->pending_msg), fmt, ap);
		va_end(ap);
	} else if (!vm->stop_req) {
		vm->stop_req = true;
		vm->reason = why;
		va_start(ap, fmt);
		vsnprintf(vm->exit_msg, sizeof(vm->exit_msg), fmt, ap);
		va_end(ap);
		vm_stop_threads(vm);
	}
	pthread_cond_broadcast(&vm->cond);
	pthread_mutex_unlock(&vm->lock);
}

/* ---- devices of the legacy platform: callbacks ---- */

static void vm_legacy_event(void *opaque, enum legacy_event ev, const char *how)
{
	struct vm *vm = opaque;

	if (ev == LEGACY_EV_POWEROFF)
		vm_request_stop(vm, VM_EXIT_POWEROFF, "guest powered off (%s)", how);
	else
		vm_request_stop(vm, VM_EXIT_REBOOT, "guest rebooted (%s)", how);
}

static void vm_warm_reset(void *opaque, uint8_t status)
{
	smp_warm_reset_write(opaque, status);
}

/* ---- creation ---- */

int vm_kvm_open(char *err, unsigned errlen)
{
	int fd, api, e;

	fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		e = errno;
		if (e == ENOENT)
			snprintf(err, errlen,
				 "/dev/kvm: not found (KVM not available on this host)");
		else if (e == EACCES || e == EPERM)
			snprintf(err, errlen,
				 "/dev/kvm: permission denied (need access to /dev/kvm)");
		else
			snprintf(err, errlen, "/dev/kvm: %s", strerror(e));
		return -e;
	}
	api = ioctl(fd, KVM_GET_API_VERSION, 0);
	if (api < 0) {
		e = errno;
		snprintf(err, errlen, "/dev/kvm: not a KVM device (KVM_GET_API_VERSION: %s)",
			 strerror(e));
		close(fd);
		return -ENODEV;
	}
	if (api != KVM_API_VERSION) {
		snprintf(err, errlen, "/dev/kvm: API version %d, need %d", api, KVM_API_VERSION);
		close(fd);
		return -ENOTSUP;
	}
	return fd;
}

static int vm_open_kvm(struct vm *vm, char *err, unsigned errlen)
{
	int ret;

	if (vm->kvm_fd < 0) { /* a reboot keeps /dev/kvm open and makes a fresh VM */
		vm->kvm_fd = vm_kvm_open(err, errlen);
		if (vm->kvm_fd < 0)
			return vm->kvm_fd;
	}
	/* A signal to any thread can interrupt the VM's creation (seen in test_faults' hundred
	 * create/delete cycles): that is not a failure, try again. */
	for (int tries = 0; tries < 100; tries++) {
		vm->vm_fd = ioctl(vm->kvm_fd, KVM_CREATE_VM, 0);
		if (vm->vm_fd >= 0 || errno != EINTR)
			break;
	}
	if (vm->vm_fd < 0) {
		ret = -errno;
		snprintf(err, errlen, "/dev/kvm: KVM_CREATE_VM: %s", strerror(errno));
		return ret;
	}
	return 0;
}

static int vm_check_ext(struct vm *vm, long cap)
{
	int r = ioctl(vm->kvm_fd, KVM_CHECK_EXTENSION, cap);

	return r < 0 ? 0 : r;
}

static int vm_send_msi(void *opaque, uint64_t addr, uint32_t data)
{
	struct vm *vm = opaque;
	struct kvm_msi m = {
	    .address_lo = (uint32_t)addr, .address_hi = (uint32_t)(addr >> 32), .data = data};

	return ioctl(vm->vm_fd, KVM_SIGNAL_MSI, &m) < 0 ? -errno : 0;
}

static void ioapic_bus_read(void *opaque, uint64_t off, void *data, unsigned len)
{
	uint32_t v = ioapic_mmio_read(opaque, off);

	memset(data, 0, len);
	memcpy(data, &v, len < 4 ? len : 4);
}

static void ioapic_bus_write(void *opaque, uint64_t off, const void *data, unsigned len)
{
	uint32_t v = 0;

	memcpy(&v, data, len < 4 ? len : 4);
	ioapic_mmio_write(opaque, off, v);
}

static const struct bus_ops ioapic_bus_ops = {.read = ioapic_bus_read, .write = ioapic_bus_write};

static void vm_ioapic_eoi(void *opaque, unsigned pin)
{
	devices_intx_eoi(opaque, pin);
}

static void vm_ioapic_route(void *opaque, unsigned pin, uint64_t addr, uint32_t data, bool on)
{
	struct vm *vm = opaque;
	int r = vm_set_pin_route(vm, pin, addr, data, on);

	if (r && vm->routes)
		fprintf(stderr, "lvmm: ioapic pin %u: route: %s\n", pin, strerror(-r));
}

/* LAPICs always in KVM. IOAPIC and PIC in KVM too, except where lvmm must start APs itself
 * (kvm_pvm, more than one vCPU): there a second vCPU only runs with the split irqchip, and
 * the IOAPIC lives in lvmm. A PIT only where it is cheap and Linux may want it. */
static int vm_create_irqchip(struct vm *vm, char *err, unsigned errlen)
{
	const char *pit = getenv("LVMM_PIT"), *chip = getenv("LVMM_IRQCHIP");
	uint64_t ident = KVM_IDENT_MAP_GPA;
	int ret;

	ioctl(vm->vm_fd, KVM_SET_TSS_ADDR, (unsigned long)KVM_TSS_GPA);
	ioctl(vm->vm_fd, KVM_SET_IDENTITY_MAP_ADDR, &ident);
	vm->split_irqchip = vm->ap_manual;
	if (chip && !strcmp(chip, "split"))
		vm->split_irqchip = true;
	else if (chip && !strcmp(chip, "kernel"))
		vm->split_irqchip = false;
	if (vm->split_irqchip) {
		struct kvm_enable_cap cap = {.cap = KVM_CAP_SPLIT_IRQCHIP, .args = {IOAPIC_PINS}};

		if (ioctl(vm->vm_fd, KVM_ENABLE_CAP, &cap)) {
			ret = -errno;
			snprintf(err, errlen, "kvm: KVM_CAP_SPLIT_IRQCHIP: %s", strerror(errno));
			return ret;
		}
		ioapic_init(&vm->ioapic, vm_send_msi, vm);
		vm->ioapic.eoi = vm_ioapic_eoi;
		vm->ioapic.route = vm_ioapic_route;
		return bus_register(&vm->mmio, LAYOUT_IOAPIC, 0x1000, &ioapic_bus_ops, &vm->ioapic,
				    "ioapic");
	}
	if (ioctl(vm->vm_fd, KVM_CREATE_IRQCHIP, 0)) {
		ret = -errno;
		snprintf(err, errlen, "kvm: KVM_CREATE_IRQCHIP: %s", strerror(errno));
		return ret;
	}
	/* On kvm_pvm every PIT tick runs the guest's ring-0 handler through the emulator; the
	 * TSC-deadline LAPIC timer serves Linux there. LVMM_PIT=on|off overrides for experiments.
	 */
	vm->has_pit = !vm->hostcompat || !vm_check_ext(vm, KVM_CAP_TSC_DEADLINE_TIMER);
	if (pit && !strcmp(pit, "on"))
		vm->has_pit = true;
	else if (pit && !strcmp(pit, "off"))
		vm->has_pit = false;
	if (vm->has_pit) {
		struct kvm_pit_config pc = {.flags = KVM_PIT_SPEAKER_DUMMY};

		if (ioctl(vm->vm_fd, KVM_CREATE_PIT2, &pc)) {
			ret = -errno;
			snprintf(err, errlen, "kvm: KVM_CREATE_PIT2: %s", strerror(errno));
			return ret;
		}
	}
	return 0;
}

/* Everything a boot needs, on a struct vm whose lock, console and (after a reboot) RAM mapping
 * already exist: a fresh KVM VM, irqchip, memory slots, buses, devices, kernel and vCPUs. */
static int vm_build(struct vm *vm, char *err, unsigned errlen)
{
	unsigned i;
	int ret;

	ret = vm_open_kvm(vm, err, errlen);
	if (!ret)
		ret = vm_create_irqchip(vm, err, errlen);
	if (!ret)
		ret = vm_create_memory(vm, err, errlen);
	if (!ret)
		ret = vm_routes_init(vm, err, errlen);
	if (!ret)
		ret = vm_open_serial(vm, err, errlen);
	if (!ret) {
		legacy_init(&vm->legacy, vm_legacy_event, vm_warm_reset, vm);
		ret = legacy_register(&vm->legacy, &vm->pio);
		if (ret)
			snprintf(err, errlen, "legacy ports: %s", strerror(-ret));
	}
	if (!ret) {
		for (unsigned k = 0; k < vm->cfg.nvnvme; k++)
			vm->cfg.vnvme[k].root = vm->cfg.allowed_dir[0] ? vm->cfg.allowed_dir : NULL;
		for (unsigned k = 0; k < vm->cfg.ndisks && k < CONFIG_MAX_DISKS; k++)
			vm->cfg.disks[k].root = vm->cfg.allowed_dir[0] ? vm->cfg.allowed_dir : NULL;
		ret = devices_init(vm, &vm->cfg, err, errlen);
		vm->devices_up = !ret;
		if (!ret)
			vm->cfg.mmio64_size = devices_mmio64_size(vm);
	}
	if (!ret) {
		ret = hostcompat_cmdline(vm->cfg.cmdline, vm->hostcompat, vm->cmdline,
					 sizeof(vm->cmdline));
		if (!ret && vm->ap_manual) {
			size_t n = strlen(vm->cmdline);

			if (n + 1 + strlen(HOSTCOMPAT_PVM_SMP_CMDLINE) < sizeof(vm->cmdline))
				snprintf(vm->cmdline + n, sizeof(vm->cmdline) - n, " %s",
					 HOSTCOMPAT_PVM_SMP_CMDLINE);
		}
		if (ret)
			snprintf(err, errlen, "cmdline: %zu bytes is too long",
				 strlen(vm->cfg.cmdline));
	}
	if (!ret)
		ret = boot_load_linux(&vm->gmem, &vm->cfg, vm->cmdline, &vm->boot, err, errlen);
	for (i = 0; !ret && i < vm->ncpus; i++)
		ret = vcpu_create(vm, i, err, errlen);
	if (!ret)
		ret = vcpu_setup_bsp(&vm->vcpus[0], err, errlen);
	for (i = 1; !ret && vm->boot.ap_entry && i < vm->ncpus; i++)
		ret = vcpu_setup_ap_entry(&vm->vcpus[i], err, errlen);
	return ret;
}

int vm_create(const struct vm_config *cfg, struct vm **out, char *err, unsigned errlen)
{
	struct vm *vm;
	unsigned i;
	int ret;

	*out = NULL;
	if (cfg->cpus < 1 || cfg->cpus > VM_MAX_VCPUS) {
		snprintf(err, errlen, "cpus: %u is outside 1..%u", cfg->cpus, VM_MAX_VCPUS);
		return -EINVAL;
	}
	vm = calloc(1, sizeof(*vm));
	if (!vm) {
		snprintf(err, errlen, "vm: out of memory");
		return -ENOMEM;
	}
	vm->cfg = *cfg;
	vm->ncpus = cfg->cpus;
	vm->kvm_fd = vm->vm_fd = -1;
	vm->gmem.memfd = -1;
	vm->serial_fd = -1;
	vm->input_wake_fd = -1;
	for (i = 0; i < VM_MAX_VCPUS; i++)
		vm->vcpus[i].fd = -1;
	pthread_mutex_init(&vm->lock, NULL);
	pthread_cond_init(&vm->cond, NULL);
	pthread_mutex_init(&vm->route_lock, NULL);
	bus_init(&vm->pio);
	bus_init(&vm->mmio);
	vm->state = VM_CREATED;
	vm->hostcompat = hostcompat_active();
	/* On kvm_pvm the in-kernel LAPIC never starts an AP; lvmm does it (smp.c). */
	vm->ap_manual = vm->hostcompat && vm->ncpus > 1;
	vcpu_signals_init();
	/* what a migration's source handed over: the VM holds duplicates of its own */
	ret = config_fds_dup(&vm->cfg);
	if (ret)
		snprintf(err, errlen, "vm: the handed-over file descriptors: %s", strerror(-ret));
	else
		ret = vm_build(vm, err, errlen);
	if (ret) {
		vm_destroy(vm);
		return ret;
	}
	*out = vm;
	return 0;
}

/* ---- lifecycle ---- */

/* Console input, vCPU and debugging threads of a VM that is Running (boot and reboot). */
static int vm_start_threads(struct vm *vm, char *err, unsigned errlen)
{
	unsigned i;
	int ret = 0;

	/* A background job must not touch the terminal (SIGTTIN/SIGTTOU would stop lvmm). */
	if (vm->cfg.serial == SERIAL_STDIO &&
	    (!isatty(STDIN_FILENO) || tcgetpgrp(STDIN_FILENO) == getpgrp())) {
		uint64_t stale;

		if (vm->input_wake_fd < 0)
			vm->input_wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		else if (read(vm->input_wake_fd, &stale, sizeof(stale)) < 0) {
			/* nothing pending: the wake-up of a stop before a reboot was consumed */
		}
		if (vm->input_wake_fd >= 0 &&
		    !pthread_create(&vm->input_thread, NULL, vm_input_thread, vm))
			vm->input_started = true;
		serial_term_raw();
	}
	for (i = 0; i < vm->ncpus && !ret; i++)
		ret = vcpu_start(&vm->vcpus[i], err, errlen);
	if (!ret && getenv("LVMM_DEBUG_VCPU") &&
	    !pthread_create(&vm->dump_thread, NULL, vm_dump_thread, vm))
		vm->dump_started = true;
	vm_profile_open(vm);
	if (!ret && vm->prof_fp && !pthread_create(&vm->prof_thread, NULL, vm_profile_thread, vm))
		vm->prof_started = true;
	return ret;
}

/* Created -> Running, or Paused (each vCPU then parks at its first checkpoint, before any
 * KVM_RUN, and the devices start paused): the serial file opened, the threads started. */
static int vm_start(struct vm *vm, bool paused, char *err, unsigned errlen)
{
	int ret;

	pthread_mutex_lock(&vm->lock);
	if (vm->state != VM_CREATED) {
		snprintf(err, errlen, "vm: cannot %s in state %s", paused ? "start" : "boot",
			 vm_state_name(vm->state));
		pthread_mutex_unlock(&vm->lock);
		return -EINVAL;
	}
	if (vm->cfg.serial == SERIAL_FILE && !vm->serial_open) {
		ret = vm_open_serial_file(vm, err, errlen);
		if (ret) {
			/* still Created: the file can be fixed and the VM booted again */
			pthread_mutex_unlock(&vm->lock);
			return ret;
		}
	}
	if (paused)
		vm->pause_req = true;
	vm->state = paused ? VM_PAUSED : VM_RUNNING;
	pthread_mutex_unlock(&vm->lock);
	if (paused && vm->devices_up)
		devices_pause(vm, true);
	ret = vm_start_threads(vm, err, errlen);
	if (ret)
		vm_request_stop(vm, VM_EXIT_ERROR, "%s", err);
	return ret;
}

int vm_boot(struct vm *vm, char *err, unsigned errlen)
{
	return vm_start(vm, false, err, errlen);
}

int vm_start_paused(struct vm *vm, char *err, unsigned errlen)
{
	return vm_start(vm, true, err, errlen);
}

static void vm_join(struct vm *vm)
{
	unsigned i;

	pthread_mutex_lock(&vm->lock);
	if (vm->joined) {
		/* Someone else is joining: return only once the threads are really gone. */
		while (vm->state != VM_SHUTDOWN)
			pthread_cond_wait(&vm->cond, &vm->lock);
		pthread_mutex_unlock(&vm->lock);
		return;
	}
	vm->joined = true;
	pthread_mutex_unlock(&vm->lock);
	for (i = 0; i < vm->ncpus; i++)
		if (vm->vcpus[i].thread_started)
			pthread_join(vm->vcpus[i].thread, NULL);
	if (vm->input_started)
		pthread_join(vm->input_thread, NULL);
	if (vm->dump_started)
		pthread_join(vm->dump_thread, NULL);
	vm->dump_started = false;
	if (vm->prof_started)
		pthread_join(vm->prof_thread, NULL);
	vm->prof_started = false;
	if (vm->prof_fp)
		fclose(vm->prof_fp);
	vm->prof_fp = NULL;
	vm->input_started = false;
	serial_term_restore();
	pthread_mutex_lock(&vm->lock);
	vm->state = VM_SHUTDOWN;
	pthread_cond_broadcast(&vm->cond);
	pthread_mutex_unlock(&vm->lock);
}

enum vm_exit_reason vm_wait(struct vm *vm)
{
	pthread_mutex_lock(&vm->lock);
	while (!vm->stop_req || vm->rebooting)
		pthread_cond_wait(&vm->cond, &vm->lock);
	pthread_mutex_unlock(&vm->lock);
	vm_join(vm);
	return vm->reason;
}

const char *vm_exit_msg(const struct vm *vm)
{
	return vm->exit_msg;
}

int vm_pause(struct vm *vm, char *err, unsigned errlen)
{
	int ret = 0;

	pthread_mutex_lock(&vm->lock);
	if (vm->state != VM_RUNNING || vm->stop_req) {
		snprintf(err, errlen, "vm: cannot pause in state %s", vm_state_name(vm->state));
		pthread_mutex_unlock(&vm->lock);
		return -EINVAL;
	}
	vm->pause_req = true;
	vm_kick_all(vm);
	while (vm->nparked < vm->nthreads && !vm->stop_req)
		pthread_cond_wait(&vm->cond, &vm->lock);
	if (vm->stop_req) {
		vm->pause_req = false;
		snprintf(err, errlen, "vm: stopped while pausing");
		ret = -ESHUTDOWN;
	} else {
		/* Freeze kvmclock so that the guest sees no time pass (and never goes backwards).
		 */
		if (ioctl(vm->vm_fd, KVM_GET_CLOCK, &vm->paused_clock))
			memset(&vm->paused_clock, 0, sizeof(vm->paused_clock));
		vm->state = VM_PAUSED;
	}
	pthread_mutex_unlock(&vm->lock);
	if (!ret && vm->devices_up)
		devices_pause(vm, true);
	return ret;
}

int vm_resume(struct vm *vm, char *err, unsigned errlen)
{
	pthread_mutex_lock(&vm->lock);
	if (vm->state != VM_PAUSED || vm->stop_req) {
		snprintf(err, errlen, "vm: cannot resume in state %s",
			 vm->stop_req ? "Shutdown" : vm_state_name(vm->state));
		pthread_mutex_unlock(&vm->lock);
		return -EINVAL;
	}
	if (vm->paused_clock.clock) {
		struct kvm_clock_data c = {.clock = vm->paused_clock.clock};

		ioctl(vm->vm_fd, KVM_SET_CLOCK, &c);
	}
	if (vm->devices_up)
		devices_pause(vm, false);
	vm->pause_req = false;
	vm->state = VM_RUNNING;
	pthread_cond_broadcast(&vm->cond);
	pthread_mutex_unlock(&vm->lock);
	return 0;
}

int vm_shutdown(struct vm *vm, char *err, unsigned errlen)
{
	pthread_mutex_lock(&vm->lock);
	if (vm->state == VM_CREATED) {
		vm->stop_req = true;
		vm->reason = VM_EXIT_API;
		snprintf(vm->exit_msg, sizeof(vm->exit_msg), "shut down before boot");
		vm->state = VM_SHUTDOWN;
		pthread_cond_broadcast(&vm->cond);
	}
	pthread_mutex_unlock(&vm->lock);
	vm_request_stop(vm, VM_EXIT_API, "shut down through the API");
	vm_join(vm);
	(void)err;
	(void)errlen;
	return 0;
}

/* Releases what vm_build() made, except the /dev/kvm fd, the RAM mapping and the console. */
static void vm_unbuild(struct vm *vm)
{
	unsigned i;

	if (vm->devices_up)
		devices_exit(vm);
	vm->devices_up = false;
	for (i = 0; i < vm->ncpus; i++)
		vcpu_destroy(&vm->vcpus[i]);
	if (vm->vm_fd >= 0)
		close(vm->vm_fd);
	vm->vm_fd = -1;
	free(vm->routes);
	vm->routes = NULL;
}

/* Joins the threads of a VM stopped for a reboot; vm_join() is for the final stop only. */
static void vm_join_for_reboot(struct vm *vm)
{
	unsigned i;

	for (i = 0; i < vm->ncpus; i++)
		if (vm->vcpus[i].thread_started)
			pthread_join(vm->vcpus[i].thread, NULL);
	if (vm->input_started)
		pthread_join(vm->input_thread, NULL);
	if (vm->dump_started)
		pthread_join(vm->dump_thread, NULL);
	if (vm->prof_started)
		pthread_join(vm->prof_thread, NULL);
	vm->input_started = vm->dump_started = vm->prof_started = false;
}

/* A reset as a power cycle: every thread stops, the KVM VM, devices and vCPUs are rebuilt from
 * the config on the same RAM memfd (zeroed) and console, and the kernel boots again. The
 * struct stays, so the API and vm_wait() callers keep their pointer and never see a stop. */
int vm_reboot(struct vm *vm, char *err, unsigned errlen)
{
	enum vm_exit_reason pending;
	unsigned i;
	int ret;

	pthread_mutex_lock(&vm->lock);
	if ((vm->state != VM_RUNNING && vm->state != VM_PAUSED) || vm->stop_req || vm->joined) {
		snprintf(err, errlen, "vm: cannot reboot in state %s",
			 vm->stop_req ? "Shutdown" : vm_state_name(vm->state));
		pthread_mutex_unlock(&vm->lock);
		return -EINVAL;
	}
	vm->rebooting = true;
	vm->pending_reason = VM_EXIT_NONE;
	vm->stop_req = true;
	vm->pause_req = false;
	vm_stop_threads(vm);
	pthread_cond_broadcast(&vm->cond);
	pthread_mutex_unlock(&vm->lock);
	vm_join_for_reboot(vm);

	vm_hotplug_reset(vm);
	vm_unbuild(vm);
	pthread_rwlock_destroy(&vm->pio.lock);
	pthread_rwlock_destroy(&vm->mmio.lock);
	bus_init(&vm->pio);
	bus_init(&vm->mmio);
	memset(vm->maps, 0, sizeof(vm->maps));
	memset(&vm->boot, 0, sizeof(vm->boot));
	memset(vm->vcpus, 0, sizeof(vm->vcpus));
	for (i = 0; i < VM_MAX_VCPUS; i++)
		vm->vcpus[i].fd = -1;
	vm->has_pit = false;
	vm->next_slot = 0;
	vm->ap_requests = 0;
	vm->restored = false; /* the reset starts every AP anew */
	vm->nparked = vm->nthreads = 0;
	memset(&vm->paused_clock, 0, sizeof(vm->paused_clock));
	for (i = 0; i < vm->cfg.nfs && i < CONFIG_MAX_FS; i++)
		vm->cfg.fs[i].rebuilt = true; /* a back end gone meanwhile fails the share only */
	ret = vm_build(vm, err, errlen);

	pthread_mutex_lock(&vm->lock);
	pending = vm->pending_reason;
	vm->rebooting = false;
	vm->stop_req = false;
	vm->reason = VM_EXIT_NONE;
	vm->exit_msg[0] = 0;
	vm->state = VM_RUNNING;
	pthread_mutex_unlock(&vm->lock);
	if (!ret)
		ret = vm_start_threads(vm, err, errlen);
	if (ret)
		vm_request_stop(vm, VM_EXIT_ERROR, "reboot: %s", err);
	else if (pending != VM_EXIT_NONE)
		vm_request_stop(vm, pending, "%s", vm->pending_msg);
	return ret;
}

void vm_destroy(struct vm *vm)
{
	if (!vm)
		return;
	if (vm->state != VM_CREATED || vm->stop_req) {
		vm_request_stop(vm, VM_EXIT_API, "destroyed");
		vm_join(vm);
	} else {
		vm_join(vm); /* no threads yet: only marks the VM shut down */
	}
	vm_unbuild(vm);
	config_fds_close(&vm->cfg);
	if (vm->ram)
		munmap(vm->ram, vm->ram_map_size);
	if (vm->gmem.memfd >= 0)
		close(vm->gmem.memfd);
	/* The writer gets a moment to finish the console, never longer (a blocked reader). */
	serial_out_stop(&vm->serial, 1000);
	if (vm->serial_fd_owned)
		close(vm->serial_fd);
	if (vm->input_wake_fd >= 0)
		close(vm->input_wake_fd);
	if (vm->kvm_fd >= 0)
		close(vm->kvm_fd);
	free(vm);
}

/* ---- accessors ---- */

enum vm_state vm_get_state(const struct vm *vm)
{
	return vm->state;
}

const struct vm_config *vm_get_config(const struct vm *vm)
{
	return &vm->cfg;
}

uint64_t vm_memory_actual(const struct vm *vm)
{
	return vm->gmem.size;
}

unsigned vm_get_counters(struct vm *vm, struct dev_counters *out, unsigned max)
{
	return devices_counters(vm, out, max);
}

struct guest_mem *vm_guest_mem(struct vm *vm)
{
	return &vm->gmem;
}

struct bus *vm_pio_bus(struct vm *vm)
{
	return &vm->pio;
}

struct bus *vm_mmio_bus(struct vm *vm)
{
	return &vm->mmio;
}
