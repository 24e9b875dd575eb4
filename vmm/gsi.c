/* GSIs and interrupts of a VM. The allocator for MSI routes: a bitmap over [first, limit),
 * lowest free first, so a GSI freed by a device teardown goes to the next device instead of the
 * pool running dry. The VM's services on it (vm.h): KVM's GSI routing table with its MSI routes,
 * irqfds and ioeventfds, and the legacy IRQ lines. */
#include "gsi.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "vm_internal.h"

void gsi_alloc_init(struct gsi_alloc *a, unsigned first, unsigned limit)
{
	memset(a, 0, sizeof(*a));
	a->limit = limit > GSI_ALLOC_MAX ? GSI_ALLOC_MAX : limit;
	a->first = first > a->limit ? a->limit : first;
}

int gsi_alloc_get(struct gsi_alloc *a)
{
	unsigned g;

	for (g = a->first; g < a->limit; g++) {
		uint64_t *w = &a->map[g / 64], bit = 1ull << (g % 64);

		if (*w == ~0ull) {
			g |= 63; /* a full word: skip to the next one */
			continue;
		}
		if (!(*w & bit)) {
			*w |= bit;
			a->used++;
			return (int)g;
		}
	}
	return -ENOSPC;
}

bool gsi_alloc_busy(const struct gsi_alloc *a, unsigned gsi)
{
	return gsi >= a->first && gsi < a->limit && (a->map[gsi / 64] >> (gsi % 64)) & 1;
}

int gsi_alloc_put(struct gsi_alloc *a, unsigned gsi)
{
	if (!gsi_alloc_busy(a, gsi))
		return -EINVAL;
	a->map[gsi / 64] &= ~(1ull << (gsi % 64));
	a->used--;
	return 0;
}

unsigned gsi_alloc_count(const struct gsi_alloc *a)
{
	return a->used;
}

/* ---- the VM's interrupt services for devices ---- */

int vm_routes_init(struct vm *vm, char *err, unsigned errlen)
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

/* The MSI route of gsi set, or dropped while masked; route_lock held. */
static int route_set_locked(struct vm *vm, unsigned gsi, uint64_t addr, uint32_t data, bool masked)
{
	struct kvm_irq_routing *r = vm->routes;
	unsigned i;

	for (i = 0; i < r->nr; i++)
		if (r->entries[i].gsi == gsi && r->entries[i].type == KVM_IRQ_ROUTING_MSI)
			break;
	if (masked) {
		/* No route: an irqfd signal on this GSI is dropped while the vector is masked. */
		if (i == r->nr)
			return 0;
		r->entries[i] = r->entries[--r->nr];
	} else {
		if (i == r->nr) {
			if (r->nr >= VM_MAX_GSI_ROUTES)
				return -ENOSPC;
			r->nr++;
		}
		memset(&r->entries[i], 0, sizeof(r->entries[i]));
		r->entries[i].gsi = gsi;
		r->entries[i].type = KVM_IRQ_ROUTING_MSI;
		r->entries[i].u.msi.address_lo = (uint32_t)addr;
		r->entries[i].u.msi.address_hi = (uint32_t)(addr >> 32);
		r->entries[i].u.msi.data = data;
	}
	return ioctl(vm->vm_fd, KVM_SET_GSI_ROUTING, r) ? -errno : 0;
}

int vm_set_msi_route(struct vm *vm, unsigned gsi, uint64_t addr, uint32_t data, bool masked)
{
	int ret = -EINVAL;

	pthread_mutex_lock(&vm->route_lock);
	if (gsi_alloc_busy(&vm->gsis, gsi))
		ret = route_set_locked(vm, gsi, addr, data, masked);
	pthread_mutex_unlock(&vm->route_lock);
	return ret;
}

int vm_set_pin_route(struct vm *vm, unsigned pin, uint64_t addr, uint32_t data, bool on)
{
	int ret = -EINVAL;

	pthread_mutex_lock(&vm->route_lock);
	if (pin < VM_FIRST_MSI_GSI && vm->split_irqchip && vm->routes)
		ret = route_set_locked(vm, pin, addr, data, !on);
	pthread_mutex_unlock(&vm->route_lock);
	return ret;
}

int vm_irqfd(struct vm *vm, unsigned gsi, int efd, bool assign)
{
	struct kvm_irqfd f = {
	    .fd = (uint32_t)efd, .gsi = gsi, .flags = assign ? 0 : KVM_IRQFD_FLAG_DEASSIGN};

	return ioctl(vm->vm_fd, KVM_IRQFD, &f) ? -errno : 0;
}

int vm_irqfd_resample(struct vm *vm, unsigned gsi, int efd, int resample_fd, bool assign)
{
	struct kvm_irqfd f = {.fd = (uint32_t)efd, .gsi = gsi};

	/* KVM resamples only on its own IOAPIC: lvmm's hears the EOI itself. */
	if (vm->split_irqchip)
		return -EOPNOTSUPP;
	if (gsi >= VM_FIRST_MSI_GSI)
		return -EINVAL;
	if (assign) {
		f.flags = KVM_IRQFD_FLAG_RESAMPLE;
		f.resamplefd = (uint32_t)resample_fd;
	} else {
		f.flags = KVM_IRQFD_FLAG_DEASSIGN;
	}
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

int vm_set_irq_line(struct vm *vm, unsigned irq, bool level)
{
	struct kvm_irq_level l = {.irq = irq, .level = level};

	if (irq >= VM_FIRST_MSI_GSI)
		return -EINVAL;
	if (vm->split_irqchip)
		return ioapic_set_irq(&vm->ioapic, irq, level);
	return ioctl(vm->vm_fd, KVM_IRQ_LINE, &l) ? -errno : 0;
}
