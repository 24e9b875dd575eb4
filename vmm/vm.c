/* VM lifecycle (vm.h): KVM VM and irqchip, memfd-backed guest RAM around the 32-bit hole, legacy
 * devices and console, state machine with pause/resume, and the interrupt services for devices. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "devices.h"
#include "fsutil.h"
#include "hostcompat.h"
#include "layout.h"
#include "seccomp_filter.h"
#include "vm_internal.h"

#define KVM_TSS_GPA	  0xfffbd000ULL /* three pages KVM needs on VMX, in the hole above the LAPIC */
#define KVM_IDENT_MAP_GPA 0xfffbc000ULL
/* How long vm.remove-device waits for the guest's eject (an emulated guest kernel is slow). */
#define VM_HOTPLUG_EJECT_MS 30000

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

static void vm_serial_irq(void *opaque, bool level)
{
	vm_set_irq_line(opaque, LAYOUT_COM1_IRQ, level);
}

static void serial_pio_read(void *opaque, uint64_t off, void *data, unsigned len)
{
	struct vm *vm = opaque;

	memset(data, 0, len);
	*(uint8_t *)data = serial_read(&vm->serial, (unsigned)off);
}

static void serial_pio_write(void *opaque, uint64_t off, const void *data, unsigned len)
{
	struct vm *vm = opaque;

	serial_write(&vm->serial, (unsigned)off, *(const uint8_t *)data);
}

static const struct bus_ops serial_pio_ops = {.read = serial_pio_read, .write = serial_pio_write};

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
	vm->vm_fd = ioctl(vm->kvm_fd, KVM_CREATE_VM, 0);
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

static int vm_set_slot(struct vm *vm, unsigned slot, uint64_t gpa, uint64_t size, void *host,
		       uint32_t flags)
{
	struct kvm_userspace_memory_region r = {
	    .slot = slot,
	    .flags = flags,
	    .guest_phys_addr = gpa,
	    .memory_size = size,
	    .userspace_addr = (uint64_t)(uintptr_t)host,
	};

	return ioctl(vm->vm_fd, KVM_SET_USER_MEMORY_REGION, &r) ? -errno : 0;
}

/* Whether a vNVMe function hands guest RAM to its SSD backend as a DMA window (passthrough and
 * isolated modes over softssd or the kernel module; emulate mode uses a bounce buffer). */
static bool vm_vnvme_maps_ram(const struct vnvme_config *v)
{
	return v->ssd[0] && v->mode != VNVME_EMULATE;
}

/* Guest RAM is charged to whoever faults a page first: when an SSD backend maps it, lvmm faults
 * all of it in before the backend sees it, so the VM's memory is the VM's (issue 23, finding
 * 6), and softssd --require-resident accepts the window. */
static int vm_populate_ram(struct vm *vm, char *err, unsigned errlen)
{
	int r = gmem_populate(vm->ram, vm->ram_map_size);

	if (r)
		snprintf(
		    err, errlen,
		    "memory: cannot populate %llu MiB of guest RAM for an SSD-backed vNVMe: %s",
		    (unsigned long long)(vm->ram_map_size >> 20), strerror(-r));
	return r;
}

static int vm_create_memory(struct vm *vm, char *err, unsigned errlen)
{
	uint64_t size = vm->cfg.memory, lo, hi;
	int ret;

	if (size < CONFIG_MIN_MEMORY || size & 0xfff) {
		snprintf(err, errlen, "memory: %llu bytes is below %llu MiB or not page-aligned",
			 (unsigned long long)size, CONFIG_MIN_MEMORY >> 20);
		return -EINVAL;
	}
	lo = size < LAYOUT_MMIO32_START ? size : LAYOUT_MMIO32_START;
	hi = size - lo;
	if (vm->ram) {
		/* Reboot: same memfd, every page dropped, so the guest starts from zeroed RAM. */
		if (madvise(vm->ram, size, MADV_REMOVE))
			memset(vm->ram, 0, size);
		goto slots;
	}
	vm->gmem.memfd = memfd_create("lvmm-ram", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (vm->gmem.memfd < 0) {
		ret = -errno;
		snprintf(err, errlen, "memory: memfd_create: %s", strerror(errno));
		return ret;
	}
	/* Sealed against resizing: a backend (softssd) maps it for DMA and a shrink would fault
	 * it; the backend refuses an unsealed window. */
	if (ftruncate(vm->gmem.memfd, (off_t)size) ||
	    fcntl(vm->gmem.memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW)) {
		ret = -errno;
		snprintf(err, errlen, "memory: %llu MiB: %s", (unsigned long long)(size >> 20),
			 strerror(errno));
		return ret;
	}
	/* Shared, so that backends mapping the memfd see the same pages as the guest. */
	vm->ram =
	    mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, vm->gmem.memfd, 0);
	if (vm->ram == MAP_FAILED) {
		ret = -errno;
		vm->ram = NULL;
		snprintf(err, errlen, "memory: mmap of %llu MiB: %s",
			 (unsigned long long)(size >> 20), strerror(errno));
		return ret;
	}
	vm->ram_map_size = size;
	madvise(vm->ram, size, MADV_MERGEABLE);
	vm->gmem.size = size;
	vm->gmem.slots[0] = (struct gmem_slot){.gpa = 0, .size = lo, .host = vm->ram, .fd_off = 0};
	vm->gmem.nslots = 1;
	if (hi) {
		vm->gmem.slots[1] = (struct gmem_slot){
		    .gpa = LAYOUT_RAM_HIGH, .size = hi, .host = vm->ram + lo, .fd_off = lo};
		vm->gmem.nslots = 2;
	}
	slots:
	for (unsigned k = 0; k < vm->cfg.nvnvme && k < CONFIG_MAX_VNVME; k++)
		if (vm_vnvme_maps_ram(&vm->cfg.vnvme[k])) {
			ret = vm_populate_ram(vm, err, errlen);
			if (ret)
				return ret;
			break;
		}
	for (vm->next_slot = 0; vm->next_slot < vm->gmem.nslots; vm->next_slot++) {
		struct gmem_slot *s = &vm->gmem.slots[vm->next_slot];

		ret = vm_set_slot(vm, vm->next_slot, s->gpa, s->size, s->host, 0);
		if (ret) {
			snprintf(err, errlen, "memory: slot at 0x%llx: %s",
				 (unsigned long long)s->gpa, strerror(-ret));
			return ret;
		}
	}
	return 0;
}

static int vm_routes_init(struct vm *vm, char *err, unsigned errlen)
{
	struct kvm_irq_routing *r;
	unsigned gsi;

	r = calloc(1, sizeof(*r) + VM_MAX_GSI_ROUTES * sizeof(r->entries[0]));
	if (!r)
		return -ENOMEM;
	vm->routes = r;
	gsi_alloc_init(&vm->gsis, VM_FIRST_MSI_GSI, VM_MAX_GSI_ROUTES);
	/* KVM_SET_GSI_ROUTING replaces the whole table: keep KVM's default pin routes in it
	 * (none with the split irqchip: the pins belong to lvmm's IOAPIC). */
	for (gsi = 0; gsi < VM_FIRST_MSI_GSI && !vm->split_irqchip; gsi++) {
		struct kvm_irq_routing_entry *e;

		if (gsi < 16) {
			e = &r->entries[r->nr++];
			e->gsi = gsi;
			e->type = KVM_IRQ_ROUTING_IRQCHIP;
			e->u.irqchip.irqchip =
			    gsi < 8 ? KVM_IRQCHIP_PIC_MASTER : KVM_IRQCHIP_PIC_SLAVE;
			e->u.irqchip.pin = gsi % 8;
		}
		e = &r->entries[r->nr++];
		e->gsi = gsi;
		e->type = KVM_IRQ_ROUTING_IRQCHIP;
		e->u.irqchip.irqchip = KVM_IRQCHIP_IOAPIC;
		e->u.irqchip.pin = gsi;
	}
	(void)err;
	(void)errlen;
	return 0;
}

/* The console file is opened by vm_boot(), not here: vm.create alone touches no file. It is
 * appended to (emptied only when asked), never followed through a symlink, never a FIFO or a
 * device, beneath the API's allowed directory when there is one, and capped in size. */
static int vm_open_serial_file(struct vm *vm, char *err, unsigned errlen)
{
	struct stat st;
	int fd, ret;

	fd = fsutil_open(vm->cfg.allowed_dir, "serial file", vm->cfg.serial_file,
			 O_WRONLY | O_CREAT | O_APPEND | (vm->cfg.serial_truncate ? O_TRUNC : 0),
			 0644, FSUTIL_REGULAR, err, errlen);
	if (fd < 0)
		return fd;
	if (fstat(fd, &st))
		st.st_size = 0;
	ret = serial_out_start(&vm->serial, fd, vm->cfg.serial_limit, (uint64_t)st.st_size);
	if (ret) {
		snprintf(err, errlen, "serial file %s: cannot start its writer: %s",
			 vm->cfg.serial_file, strerror(-ret));
		close(fd);
		return ret;
	}
	vm->serial_fd = fd;
	vm->serial_fd_owned = true;
	vm->serial_open = true;
	return 0;
}

static int vm_open_serial(struct vm *vm, char *err, unsigned errlen)
{
	if (vm->serial_open)
		goto attach; /* a reboot keeps writing to the same console */
	vm->serial_fd = -1;
	switch (vm->cfg.serial) {
	case SERIAL_STDIO:
		vm->serial_fd = STDOUT_FILENO;
		vm->serial_open = true;
		break;
	case SERIAL_FILE:
		break; /* vm_boot() opens it */
	default:
		vm->serial_open = true;
		break;
	}
attach:
	serial_init(&vm->serial, vm->serial_fd, vm_serial_irq, vm);
	return bus_register(&vm->pio, LAYOUT_COM1_PORT, 8, &serial_pio_ops, vm, "com1");
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
	ret = vm_build(vm, err, errlen);
	if (ret) {
		vm_destroy(vm);
		return ret;
	}
	*out = vm;
	return 0;
}

/* ---- console input ---- */

static void *vm_input_thread(void *arg)
{
	struct vm *vm = arg;
	bool eof = false;
	char err[160];

	pthread_setname_np(pthread_self(), "lvmm-stdin");
	if (seccomp_thread_install(SECCOMP_IO, err, sizeof(err)))
		fprintf(stderr, "lvmm: console input: %s\n", err);
	for (;;) {
		struct pollfd p[2] = {{.fd = vm->input_wake_fd, .events = POLLIN},
				      {.fd = eof ? -1 : STDIN_FILENO, .events = POLLIN}};
		uint8_t buf[SERIAL_RX_FIFO];
		unsigned room;
		ssize_t n;

		pthread_mutex_lock(&vm->lock);
		if (vm->stop_req) {
			pthread_mutex_unlock(&vm->lock);
			break;
		}
		pthread_mutex_unlock(&vm->lock);
		room = serial_rx_room(&vm->serial);
		if (!room)
			p[1].fd = -1; /* the guest has not drained the FIFO yet: wait */
		if (poll(p, 2, 50) <= 0 || p[0].revents)
			continue;
		if (!(p[1].revents & (POLLIN | POLLHUP)))
			continue;
		n = read(STDIN_FILENO, buf, room);
		if (n <= 0) {
			eof = n == 0 || (errno != EINTR && errno != EAGAIN);
			continue;
		}
		serial_receive(&vm->serial, buf, (unsigned)n);
	}
	return NULL;
}

/* LVMM_DEBUG_VCPU=SECONDS: every vCPU prints its registers that often (stuck-guest triage). */
static void *vm_dump_thread(void *arg)
{
	struct vm *vm = arg;
	long period = strtol(getenv("LVMM_DEBUG_VCPU"), NULL, 10);
	struct timespec ts;

	pthread_setname_np(pthread_self(), "lvmm-dump");
	if (period < 1)
		period = 5;
	pthread_mutex_lock(&vm->lock);
	while (!vm->stop_req) {
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += period;
		if (pthread_cond_timedwait(&vm->cond, &vm->lock, &ts) == ETIMEDOUT &&
		    !vm->stop_req) {
			vm->dump_gen++;
			vm_kick_all(vm);
		}
	}
	pthread_mutex_unlock(&vm->lock);
	return NULL;
}

/* LVMM_PROFILE=FILE[,HZ]: a sampling profiler of the guest. Every 1/HZ s (default 1000) each vCPU
 * is kicked out of KVM_RUN and writes its RIP to FILE; tools/profile-guest.sh FILE vmlinux sums the
 * samples by symbol. A kick costs one exit per vCPU: on an emulating host (kvm_pvm) that is about
 * 1% at 1000 Hz, enough to find where a guest kernel's boot goes. */
static void vm_profile_open(struct vm *vm)
{
	char path[4096], *comma;

	if (vm->prof_fp || !getenv("LVMM_PROFILE"))
		return;
	snprintf(path, sizeof(path), "%s", getenv("LVMM_PROFILE"));
	comma = strrchr(path, ',');
	vm->prof_hz = 1000;
	if (comma) {
		*comma = 0;
		vm->prof_hz = strtol(comma + 1, NULL, 10);
		if (vm->prof_hz < 1 || vm->prof_hz > 100000)
			vm->prof_hz = 1000;
	}
	vm->prof_fp = fopen(path, "we");
	if (!vm->prof_fp)
		fprintf(stderr, "lvmm: LVMM_PROFILE: %s: %s (not profiling)\n", path,
			strerror(errno));
}

static void *vm_profile_thread(void *arg)
{
	struct vm *vm = arg;
	struct timespec ts;
	long step = 1000000000L / vm->prof_hz;

	pthread_setname_np(pthread_self(), "lvmm-prof");
	pthread_mutex_lock(&vm->lock);
	clock_gettime(CLOCK_REALTIME, &ts);
	while (!vm->stop_req) {
		ts.tv_nsec += step;
		while (ts.tv_nsec >= 1000000000L) {
			ts.tv_nsec -= 1000000000L;
			ts.tv_sec++;
		}
		if (pthread_cond_timedwait(&vm->cond, &vm->lock, &ts) == ETIMEDOUT &&
		    !vm->stop_req) {
			unsigned i;

			__atomic_add_fetch(&vm->prof_gen, 1, __ATOMIC_RELAXED);
			for (i = 0; i < vm->ncpus; i++)
				if (vm->vcpus[i].thread_started)
					pthread_kill(vm->vcpus[i].thread, vcpu_kick_signal);
		}
	}
	pthread_mutex_unlock(&vm->lock);
	return NULL;
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

int vm_boot(struct vm *vm, char *err, unsigned errlen)
{
	int ret;

	pthread_mutex_lock(&vm->lock);
	if (vm->state != VM_CREATED) {
		snprintf(err, errlen, "vm: cannot boot in state %s", vm_state_name(vm->state));
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
	vm->state = VM_RUNNING;
	pthread_mutex_unlock(&vm->lock);
	ret = vm_start_threads(vm, err, errlen);
	if (ret)
		vm_request_stop(vm, VM_EXIT_ERROR, "%s", err);
	return ret;
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

void vm_console_flush(struct vm *vm)
{
	/* The vCPUs are joined, so nothing adds to the ring; vm_destroy's stop is then a no-op. */
	serial_out_stop(&vm->serial, 1000);
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

static void vm_hotplug_reset(struct vm *vm);

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
	vm->nparked = vm->nthreads = 0;
	memset(&vm->paused_clock, 0, sizeof(vm->paused_clock));
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

void vm_console_stats(struct vm *vm, struct serial_stats *st)
{
	serial_get_stats(&vm->serial, st);
}

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

/* Hot-add through ACPI PCI hotplug (devices.c, hotplug.c): the device joins the config, so
 * vm.info lists it and a reset rebuilds it. */
int vm_add_vnvme(struct vm *vm, const struct vnvme_config *c, char *err, unsigned errlen)
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
	vm_vnvme_ids_fix(vm);
	vnvme_id(c, vm->cfg.nvnvme, nc.id, sizeof(nc.id));
	if (devices_config_id_owner(&vm->cfg, nc.id)) {
		snprintf(err, errlen, "vnvme %s: the VM's %s device has this id", nc.id,
			 devices_config_id_owner(&vm->cfg, nc.id));
		return -EEXIST;
	}
	nc.root = vm->cfg.allowed_dir[0] ? vm->cfg.allowed_dir : NULL;
	if (vm_vnvme_maps_ram(&nc)) {
		r = vm_populate_ram(vm, err, errlen); /* not done at boot without such a device */
		if (r)
			return r;
	}
	r = devices_add_vnvme(vm, &nc, vm->cfg.nvnvme, &slot, err, errlen);
	if (r)
		return r;
	vm->cfg.vnvme[vm->cfg.nvnvme++] = nc;
	return 0;
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

/* vm.add-disk: as vm_add_vnvme(), for a virtio-blk disk. */
int vm_add_disk(struct vm *vm, const struct virtio_blk_config *c, char *err, unsigned errlen)
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
	vm_disk_ids_fix(vm);
	vm_vnvme_ids_fix(vm);
	virtio_blk_id(c, vm->cfg.ndisks, nc.id, sizeof(nc.id));
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
	return 0;
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
	unsigned i, disk;
	bool is_vsock;
	int r;

	if (vm->state != VM_RUNNING && !paused) {
		snprintf(err, errlen, "device %s: hot-remove needs a running or paused VM, not %s",
			 id, vm_state_name(vm->state));
		return -EINVAL;
	}
	vm_vnvme_ids_fix(vm);
	vm_disk_ids_fix(vm);
	for (i = 0; i < vm->cfg.nvnvme; i++)
		if (!strcmp(vm->cfg.vnvme[i].id, id))
			break;
	for (disk = 0; disk < vm->cfg.ndisks; disk++)
		if (!strcmp(vm->cfg.disks[disk].id, id))
			break;
	if (vm->cfg.has_vsock)
		virtio_vsock_id(&vm->cfg.vsock, vsock_id, sizeof(vsock_id));
	is_vsock = vm->cfg.has_vsock && !strcmp(vsock_id, id);
	if (i == vm->cfg.nvnvme && disk == vm->cfg.ndisks && !is_vsock) {
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
	else
		vm->cfg.has_vsock = false;
	return 0;
}

/* A reset completes the removals the guest was asked for: those devices are not rebuilt. */
static void vm_hotplug_reset(struct vm *vm)
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
	if (vm->cfg.has_vsock) {
		char id[sizeof(vm->cfg.vsock.id)];

		virtio_vsock_id(&vm->cfg.vsock, id, sizeof(id));
		if (devices_removing(vm, id)) {
			fprintf(stderr, "lvmm: vsock %s: removed by the reset\n", id);
			vm->cfg.has_vsock = false;
		}
	}
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

/* ---- interrupt and memory services for devices ---- */

int vm_alloc_gsi(struct vm *vm)
{
	int gsi;

	pthread_mutex_lock(&vm->route_lock);
	gsi = gsi_alloc_get(&vm->gsis);
	pthread_mutex_unlock(&vm->route_lock);
	return gsi;
}

int vm_free_gsi(struct vm *vm, unsigned gsi)
{
	struct kvm_irq_routing *r = vm->routes;
	unsigned i;
	int ret;

	pthread_mutex_lock(&vm->route_lock);
	ret = gsi_alloc_put(&vm->gsis, gsi);
	if (ret || !r)
		goto out;
	/* A route left behind would fire for the next owner of the GSI before it set its own. */
	for (i = 0; i < r->nr; i++)
		if (r->entries[i].gsi == gsi && r->entries[i].type == KVM_IRQ_ROUTING_MSI)
			break;
	if (i < r->nr) {
		r->entries[i] = r->entries[--r->nr];
		if (ioctl(vm->vm_fd, KVM_SET_GSI_ROUTING, r))
			ret = -errno;
	}
out:
	pthread_mutex_unlock(&vm->route_lock);
	return ret;
}

unsigned vm_gsi_count(struct vm *vm)
{
	unsigned n;

	pthread_mutex_lock(&vm->route_lock);
	n = gsi_alloc_count(&vm->gsis);
	pthread_mutex_unlock(&vm->route_lock);
	return n;
}

int vm_set_msi_route(struct vm *vm, unsigned gsi, uint64_t addr, uint32_t data, bool masked)
{
	struct kvm_irq_routing *r = vm->routes;
	unsigned i;
	int ret = 0;

	pthread_mutex_lock(&vm->route_lock);
	if (!gsi_alloc_busy(&vm->gsis, gsi)) {
		ret = -EINVAL;
		goto out;
	}
	for (i = 0; i < r->nr; i++)
		if (r->entries[i].gsi == gsi && r->entries[i].type == KVM_IRQ_ROUTING_MSI)
			break;
	if (masked) {
		/* No route: an irqfd signal on this GSI is dropped while the vector is masked. */
		if (i == r->nr)
			goto out;
		r->entries[i] = r->entries[--r->nr];
	} else {
		if (i == r->nr) {
			if (r->nr >= VM_MAX_GSI_ROUTES) {
				ret = -ENOSPC;
				goto out;
			}
			r->nr++;
		}
		memset(&r->entries[i], 0, sizeof(r->entries[i]));
		r->entries[i].gsi = gsi;
		r->entries[i].type = KVM_IRQ_ROUTING_MSI;
		r->entries[i].u.msi.address_lo = (uint32_t)addr;
		r->entries[i].u.msi.address_hi = (uint32_t)(addr >> 32);
		r->entries[i].u.msi.data = data;
	}
	if (ioctl(vm->vm_fd, KVM_SET_GSI_ROUTING, r))
		ret = -errno;
out:
	pthread_mutex_unlock(&vm->route_lock);
	return ret;
}

int vm_irqfd(struct vm *vm, unsigned gsi, int efd, bool assign)
{
	struct kvm_irqfd f = {
	    .fd = (uint32_t)efd, .gsi = gsi, .flags = assign ? 0 : KVM_IRQFD_FLAG_DEASSIGN};

	return ioctl(vm->vm_fd, KVM_IRQFD, &f) ? -errno : 0;
}

int vm_ioeventfd(struct vm *vm, uint64_t addr, unsigned len, int efd, bool assign)
{
	struct kvm_ioeventfd f = {.addr = addr, .len = len, .fd = efd};

	/* Addresses below 64 KiB are I/O ports: no MMIO doorbell lives that low in this layout. */
	if (addr < 0x10000)
		f.flags |= KVM_IOEVENTFD_FLAG_PIO;
	if (!assign)
		f.flags |= KVM_IOEVENTFD_FLAG_DEASSIGN;
	return ioctl(vm->vm_fd, KVM_IOEVENTFD, &f) ? -errno : 0;
}

/* KVM memory-slot id of host map i: RAM slots first, then one fixed id per maps[] entry. */
static unsigned vm_host_map_slot(const struct vm *vm, unsigned i)
{
	return vm->gmem.nslots + i;
}

int vm_map_host_mem(struct vm *vm, uint64_t gpa, uint64_t size, void *host, bool readonly)
{
	unsigned i;
	int ret;

	if (!size || (gpa | size | (uintptr_t)host) & 0xfff)
		return -EINVAL;
	pthread_mutex_lock(&vm->route_lock);
	for (i = 0; i < VM_MAX_HOST_MAPS && vm->maps[i].used; i++)
		;
	if (i == VM_MAX_HOST_MAPS) {
		ret = -ENOSPC;
		goto out;
	}
	/* The slot id follows the table entry, so an unmapped BAR frees its id for the next map:
	 * a guest toggling a BAR's decode forever never runs out of KVM memory slots. */
	ret = vm_set_slot(vm, vm_host_map_slot(vm, i), gpa, size, host,
			  readonly ? KVM_MEM_READONLY : 0);
	if (!ret) {
		vm->maps[i] = (struct vm_host_map){
		    .gpa = gpa, .size = size, .slot = vm_host_map_slot(vm, i), .used = true};
	}
out:
	pthread_mutex_unlock(&vm->route_lock);
	return ret;
}

int vm_unmap_host_mem(struct vm *vm, uint64_t gpa)
{
	unsigned i;
	int ret = -ENOENT;

	pthread_mutex_lock(&vm->route_lock);
	for (i = 0; i < VM_MAX_HOST_MAPS; i++) {
		if (vm->maps[i].used && vm->maps[i].gpa == gpa) {
			/* Size 0 deletes a slot. */
			ret = vm_set_slot(vm, vm->maps[i].slot, gpa, 0, NULL, 0);
			if (!ret)
				vm->maps[i].used = false;
			break;
		}
	}
	pthread_mutex_unlock(&vm->route_lock);
	return ret;
}

int vm_set_irq_line(struct vm *vm, unsigned irq, bool level)
{
	struct kvm_irq_level l = {.irq = irq, .level = level};

	if (irq >= VM_FIRST_MSI_GSI)
		return -EINVAL;
	if (vm->split_irqchip)
		return ioapic_set_irq(&vm->ioapic, irq, level);
	return ioctl(vm->vm_fd, KVM_IRQ_LINE, &l) ? -errno : 0;
}
