/* libFuzzer target for the vCPU exit dispatch (vcpu_handle_exit) on a synthetic kvm_run: PIO with
 * string counts, sizes and directions, MMIO exits of every length, and every other exit reason. */
#include <linux/kvm.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layout.h"
#include "pci.h"
#include "vm_internal.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* KVM maps kvm_run as one page and puts PIO data at the page after it (KVM_PIO_PAGE_OFFSET). */
#define RUN_PAGE  4096u
#define PIO_BYTES 4096u

static struct vm *vm;
static struct kvm_run *run;
static struct pci_bus pb;
static struct pci_dev dev;
static uint8_t bar_regs[0x1000];
static uint64_t msis;

static void fz_serial_irq(void *opaque, bool level)
{
	vm_set_irq_line(opaque, LAYOUT_COM1_IRQ, level);
}

static void fz_serial_read(void *opaque, uint64_t off, void *d, unsigned len)
{
	struct vm *m = opaque;

	memset(d, 0, len);
	if (len)
		*(uint8_t *)d = serial_read(&m->serial, (unsigned)off);
}

static void fz_serial_write(void *opaque, uint64_t off, const void *d, unsigned len)
{
	struct vm *m = opaque;

	if (len)
		serial_write(&m->serial, (unsigned)off, *(const uint8_t *)d);
}

static const struct bus_ops serial_ops = {.read = fz_serial_read, .write = fz_serial_write};

static int fz_send_msi(void *opaque, uint64_t addr, uint32_t val)
{
	(void)opaque;
	(void)addr;
	(void)val;
	msis++;
	return 0;
}

static void fz_ioapic_read(void *opaque, uint64_t off, void *d, unsigned len)
{
	uint32_t v = ioapic_mmio_read(opaque, off);

	memset(d, 0, len);
	memcpy(d, &v, len < 4 ? len : 4);
}

static void fz_ioapic_write(void *opaque, uint64_t off, const void *d, unsigned len)
{
	uint32_t v = 0;

	memcpy(&v, d, len < 4 ? len : 4);
	ioapic_mmio_write(opaque, off, v);
}

static const struct bus_ops ioapic_ops = {.read = fz_ioapic_read, .write = fz_ioapic_write};

static void fz_legacy_event(void *opaque, enum legacy_event ev, const char *how)
{
	vm_request_stop(opaque, ev == LEGACY_EV_POWEROFF ? VM_EXIT_POWEROFF : VM_EXIT_REBOOT,
			"guest %s (%s)", ev == LEGACY_EV_POWEROFF ? "powered off" : "rebooted",
			how);
}

static void fz_warm_reset(void *opaque, uint8_t status)
{
	smp_warm_reset_write(opaque, status);
}

/* A device BAR that remembers what was written: reads must return what the bus gives back. */
static void fz_bar_read(void *opaque, uint64_t off, void *d, unsigned len)
{
	(void)opaque;
	if (off > sizeof(bar_regs) || len > sizeof(bar_regs) - off)
		abort(); /* the bus let an access out of the registered range */
	memcpy(d, bar_regs + off, len);
}

static void fz_bar_write(void *opaque, uint64_t off, const void *d, unsigned len)
{
	(void)opaque;
	if (off > sizeof(bar_regs) || len > sizeof(bar_regs) - off)
		abort();
	memcpy(bar_regs + off, d, len);
}

static const struct bus_ops bar_ops = {.read = fz_bar_read, .write = fz_bar_write};

static int fz_alloc_gsi(void *o)
{
	return vm_alloc_gsi(o);
}

/* The platform as vm_build() lays it out, minus KVM: COM1, the legacy ports, the IOAPIC of the
 * split irqchip, and a PCI bus (CF8/CFC, ECAM) with one device (an MMIO BAR and MSI-X). */
static void fz_platform_up(void)
{
	struct pci_platform_ops ops = {.opaque = vm,
				       .alloc_gsi = fz_alloc_gsi,
				       .set_msi_route = fz_route_ok,
				       .irqfd = fz_irqfd_ok,
				       .remap_inline = true};
	char err[160];

	bus_init(&vm->pio);
	bus_init(&vm->mmio);
	vm->stop_req = false;
	vm->reason = VM_EXIT_NONE;
	gsi_alloc_init(&vm->gsis, VM_FIRST_MSI_GSI, VM_MAX_GSI_ROUTES);
	serial_init(&vm->serial, -1, fz_serial_irq, vm);
	ioapic_init(&vm->ioapic, fz_send_msi, vm);
	legacy_init(&vm->legacy, fz_legacy_event, fz_warm_reset, vm);
	memset(bar_regs, 0, sizeof(bar_regs));
	pci_dev_init(&dev, "fz0", 0x1b36, 0x0110, 0x010802, 0x1b36, 0x0110);
	if (bus_register(&vm->pio, LAYOUT_COM1_PORT, 8, &serial_ops, vm, "com1") ||
	    bus_register(&vm->mmio, LAYOUT_IOAPIC, 0x1000, &ioapic_ops, &vm->ioapic, "ioapic") ||
	    legacy_register(&vm->legacy, &vm->pio) ||
	    pci_bus_init(&pb, &ops, &vm->pio, &vm->mmio, err, sizeof(err)) ||
	    pci_dev_add_bar(&dev, 0, sizeof(bar_regs), false, false, &bar_ops, NULL, NULL) ||
	    pci_dev_add_msix(&dev, 4, 4, err, sizeof(err)) ||
	    pci_bus_add(&pb, &dev, err, sizeof(err))) {
		fprintf(stderr, "fuzz_exit: set-up: %s\n", err);
		abort();
	}
}

static void fz_platform_down(void)
{
	pci_dev_exit(&dev);
	pci_bus_exit(&pb);
}

/* Where an MMIO exit lands: the devices' ranges, their edges, or anywhere. */
static uint64_t fz_mmio_addr(struct fz_in *f)
{
	uint8_t sel = (uint8_t)fz_take(f, 1);
	uint64_t off = fz_take(f, 2);

	switch (sel & 7) {
	case 0:
		return LAYOUT_ECAM_START + ((uint64_t)dev.devfn << 12) + (off & 0xfff);
	case 1:
		return LAYOUT_ECAM_START + (off << 4) % (LAYOUT_ECAM_SIZE + 0x10);
	case 2:
		return LAYOUT_IOAPIC + (off & 0x1fff) - 8;
	case 3:
		return dev.bar[0].mapped_addr + (off & 0x1fff) - 8;
	case 4:
		return dev.bar[4].mapped_addr + (off & 0x3fff);
	case 5:
		return LAYOUT_LAPIC + off;
	case 6:
		return off << (sel >> 3);
	default:
		return fz_take(f, 8);
	}
}

static void fz_pio_exit(struct fz_in *f, uint8_t kind)
{
	static const uint8_t sizes[] = {1, 2, 4, 1};
	uint8_t *pio = (uint8_t *)run + RUN_PAGE;
	unsigned sz = sizes[(kind >> 4) & 3], count, bytes;
	uint16_t port = (uint16_t)fz_take(f, 2);

	/* kind bit 6: a string instruction (rep ins/outs), its count from the input */
	count = kind & 0x40 ? (unsigned)fz_take(f, 2) % (PIO_BYTES / sz + 1) : 1;
	bytes = count * sz;
	memset(pio, 0xcc, PIO_BYTES);
	memcpy(pio, f->p, bytes < f->n ? bytes : f->n);
	f->p += bytes < f->n ? bytes : f->n;
	f->n -= bytes < f->n ? bytes : f->n;
	run->exit_reason = KVM_EXIT_IO;
	run->io.direction = kind & 0x80 ? KVM_EXIT_IO_OUT : KVM_EXIT_IO_IN;
	run->io.size = (uint8_t)sz;
	run->io.port = port;
	run->io.count = count;
	run->io.data_offset = RUN_PAGE;
	vcpu_handle_exit(&vm->vcpus[0]);
}

static void fz_mmio_exit(struct fz_in *f, uint8_t kind)
{
	static const uint8_t lens[] = {1, 2, 4, 8};
	uint64_t v = fz_take(f, 8);

	run->exit_reason = KVM_EXIT_MMIO;
	run->mmio.phys_addr = fz_mmio_addr(f);
	/* kind bit 6: any length byte KVM could hand over (0, 3, 5..255), else 1/2/4/8 */
	run->mmio.len = kind & 0x40 ? (uint32_t)fz_take(f, 1) : lens[(kind >> 4) & 3];
	run->mmio.is_write = kind >> 7;
	memcpy(run->mmio.data, &v, sizeof(v));
	vcpu_handle_exit(&vm->vcpus[0]);
	/* a read of nothing mapped returns all ones, never stale data */
	if (!run->mmio.is_write && run->mmio.len <= 8 && run->mmio.phys_addr >= LAYOUT_LAPIC &&
	    run->mmio.phys_addr < LAYOUT_LAPIC + 0x10000) {
		for (unsigned i = 0; i < run->mmio.len; i++)
			if (run->mmio.data[i] != 0xff)
				abort();
	}
}

static void fz_other_exit(struct fz_in *f, uint8_t kind)
{
	static const uint32_t reasons[] = {
	    KVM_EXIT_INTR,	 KVM_EXIT_IOAPIC_EOI,	KVM_EXIT_INTERNAL_ERROR,
	    KVM_EXIT_SHUTDOWN,	 KVM_EXIT_SYSTEM_EVENT, KVM_EXIT_HLT,
	    KVM_EXIT_FAIL_ENTRY, KVM_EXIT_UNKNOWN,	KVM_EXIT_HYPERCALL};
	uint32_t v = (uint32_t)fz_take(f, 4);

	run->exit_reason = reasons[(kind >> 3) % (sizeof(reasons) / sizeof(reasons[0]))];
	/* any number at all, but an IO exit's count and size are KVM's word (kvm_run's contract:
	 * count * size fits the page at data_offset), so that one comes from fz_pio_exit only */
	if (kind & 0x80 && v >> 8 != KVM_EXIT_IO)
		run->exit_reason = v >> 8;
	switch (run->exit_reason) {
	case KVM_EXIT_IOAPIC_EOI:
		run->eoi.vector = (uint8_t)v;
		break;
	case KVM_EXIT_INTERNAL_ERROR:
		run->internal.suberror = v & 1 ? KVM_INTERNAL_ERROR_EMULATION : v >> 1;
		run->internal.ndata = 0;
		break;
	case KVM_EXIT_SYSTEM_EVENT:
		run->system_event.type = v % 6;
		break;
	case KVM_EXIT_FAIL_ENTRY:
		run->fail_entry.hardware_entry_failure_reason = v;
		break;
	}
	vcpu_handle_exit(&vm->vcpus[0]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz_in f = {data, size};
	unsigned steps = 0;

	if (!vm) {
		vm = calloc(1, sizeof(*vm));
		run = malloc(RUN_PAGE + PIO_BYTES);
		if (!vm || !run)
			abort();
		pthread_mutex_init(&vm->lock, NULL);
		pthread_cond_init(&vm->cond, NULL);
		pthread_mutex_init(&vm->route_lock, NULL);
		vm->kvm_fd = vm->vm_fd = -1;
		vm->serial_fd = -1;
		vm->input_wake_fd = -1;
		vm->ncpus = 1;
		vm->split_irqchip = true;
		vm->vcpus[0].vm = vm;
		vm->vcpus[0].fd =
		    -1; /* register reads on emulation failures fail, as on a bad fd */
		vm->vcpus[0].run = run;
		vm->vcpus[0].run_size = RUN_PAGE;
	}
	memset(run, 0, RUN_PAGE);
	vm->ap_manual = size & 1;
	fz_platform_up();
	while (f.n && steps++ < 256) {
		uint8_t kind = (uint8_t)fz_take(&f, 1);

		switch (kind & 3) {
		case 0:
		case 1:
			fz_pio_exit(&f, kind);
			break;
		case 2:
			fz_mmio_exit(&f, kind);
			break;
		default:
			fz_other_exit(&f, kind);
			break;
		}
		/* a stop ends the run loop; the next boot starts with it cleared */
		vm->stop_req = false;
		pci_bus_remap_flush(&pb);
	}
	fz_platform_down();
	return 0;
}
