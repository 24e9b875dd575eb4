/* The devices of a VM beyond the legacy platform: the PCI host bridge, the registry of device
 * models (device.h) and their instances, wired to KVM through vm.h, and PCI hotplug (functions
 * added and removed at run time through the ACPI hotplug controller). A device model lives in
 * devices/; this file knows it only by its struct dev_model and where vm_config holds it. */
#include <cpuid.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devices.h"
#include "hotplug.h"
#include "layout.h"
#include "nvme-lightiov/vnvme_pci.h"
#include "pci.h"
#include "seccomp_filter.h"
#include "snapshot_fmt.h"
#include "vfio/vfio_pci.h"
#include "vfio_host.h"
#include "virtio/virtio_blk.h"
#include "virtio/virtio_fs.h"
#include "virtio/virtio_net.h"
#include "virtio/virtio_rng.h"
#include "virtio/virtio_vsock.h"

/* Every vNVMe, one virtio-rng at most, every disk, one vsock, every net device, every virtio-fs
 * share, every passed-through device */
#define DEVICES_MAX                                                                                \
	(CONFIG_MAX_VNVME + 1 + CONFIG_MAX_DISKS + 1 + CONFIG_MAX_NETS + CONFIG_MAX_FS +           \
	 CONFIG_MAX_DEVICES)

/* ---- the registry: each model and where a vm_config holds its instances ---- */

static unsigned vnvme_count(const struct vm_config *c)
{
	return c->nvnvme < CONFIG_MAX_VNVME ? c->nvnvme : CONFIG_MAX_VNVME;
}

static const void *vnvme_cfg(const struct vm_config *c, unsigned i, char *id, size_t len)
{
	vnvme_id(&c->vnvme[i], i, id, len);
	return &c->vnvme[i];
}

static unsigned rng_count(const struct vm_config *c)
{
	return c->rng_src[0] ? 1 : 0;
}

static const void *rng_cfg(const struct vm_config *c, unsigned i, char *id, size_t len)
{
	snprintf(id, len, "rng%u", i);
	return c->rng_src;
}

static unsigned disk_count(const struct vm_config *c)
{
	return c->ndisks < CONFIG_MAX_DISKS ? c->ndisks : CONFIG_MAX_DISKS;
}

static const void *disk_cfg(const struct vm_config *c, unsigned i, char *id, size_t len)
{
	virtio_blk_id(&c->disks[i], i, id, len);
	return &c->disks[i];
}

static unsigned net_count(const struct vm_config *c)
{
	return c->nnets < CONFIG_MAX_NETS ? c->nnets : CONFIG_MAX_NETS;
}

static const void *net_cfg(const struct vm_config *c, unsigned i, char *id, size_t len)
{
	virtio_net_id(&c->nets[i], i, id, len);
	return &c->nets[i];
}

static unsigned vsock_count(const struct vm_config *c)
{
	return c->has_vsock ? 1 : 0;
}

static const void *vsock_cfg(const struct vm_config *c, unsigned i, char *id, size_t len)
{
	(void)i;
	virtio_vsock_id(&c->vsock, id, len);
	return &c->vsock;
}

static unsigned fs_count(const struct vm_config *c)
{
	return c->nfs < CONFIG_MAX_FS ? c->nfs : CONFIG_MAX_FS;
}

static const void *fs_cfg(const struct vm_config *c, unsigned i, char *id, size_t len)
{
	virtio_fs_id(&c->fs[i], i, id, len);
	return &c->fs[i];
}

static unsigned vfio_count(const struct vm_config *c)
{
	return c->ndevices < CONFIG_MAX_DEVICES ? c->ndevices : CONFIG_MAX_DEVICES;
}

static const void *vfio_cfg(const struct vm_config *c, unsigned i, char *id, size_t len)
{
	vfio_pci_id(&c->devices[i], i, id, len);
	return &c->devices[i];
}

/* In boot order: earlier entries take the lower PCI slots (the vNVMe functions keep the slots
 * they had before virtio-rng existed). */
static const struct dev_entry {
	const struct dev_model *model;
	unsigned (*count)(const struct vm_config *c);
	/* instance i's configuration, its id written to id */
	const void *(*config)(const struct vm_config *c, unsigned i, char *id, size_t len);
	unsigned max; /* instances a VM may have */
	bool hot;     /* hot-added and hot-removed through the API */
} registry[] = {
    {&vnvme_model, vnvme_count, vnvme_cfg, CONFIG_MAX_VNVME, true},
    {&virtio_rng_model, rng_count, rng_cfg, 1, false},
    {&virtio_blk_model, disk_count, disk_cfg, CONFIG_MAX_DISKS, true},
    {&virtio_vsock_model, vsock_count, vsock_cfg, 1, true},
    {&virtio_net_model, net_count, net_cfg, CONFIG_MAX_NETS, true},
    {&virtio_fs_model, fs_count, fs_cfg, CONFIG_MAX_FS, true},
    {&vfio_pci_model, vfio_count, vfio_cfg, CONFIG_MAX_DEVICES, true},
};

static const struct dev_entry *devices_entry(const struct dev_model *m)
{
	for (unsigned i = 0; i < sizeof(registry) / sizeof(registry[0]); i++)
		if (registry[i].model == m)
			return &registry[i];
	return NULL;
}

const char *devices_config_id_owner(const struct vm_config *c, const char *id)
{
	char other[64];

	for (unsigned m = 0; m < sizeof(registry) / sizeof(registry[0]); m++)
		for (unsigned i = 0; i < registry[m].count(c); i++) {
			registry[m].config(c, i, other, sizeof(other));
			if (!strcmp(other, id))
				return registry[m].model->name;
		}
	return NULL;
}

int devices_config_check_ids(const struct vm_config *c, char *err, unsigned errlen)
{
	char a[64], b[64];

	for (unsigned m = 0; m < sizeof(registry) / sizeof(registry[0]); m++)
		for (unsigned i = 0; i < registry[m].count(c); i++) {
			registry[m].config(c, i, a, sizeof(a));
			for (unsigned n = 0; n <= m; n++)
				for (unsigned k = 0; k < (n == m ? i : registry[n].count(c)); k++) {
					registry[n].config(c, k, b, sizeof(b));
					if (strcmp(a, b))
						continue;
					snprintf(err, errlen,
						 "device id '%s' is used twice (%s and %s)", a,
						 registry[n].model->name, registry[m].model->name);
					return -EINVAL;
				}
		}
	return 0;
}

/* One device of a VM. */
struct dev_inst {
	const struct dev_model *model;
	void *dev;
	struct pci_dev *pci;
	char id[64];
};

struct devices {
	struct vm *vm;
	struct dev_host host;
	struct pci_bus bus;
	bool bus_up;
	unsigned n;
	struct dev_inst dev[DEVICES_MAX]; /* in creation order */
	struct hotplug hp;		  /* bus 0's slots as the guest's ACPI sees them */
	bool hp_up;
	struct vfio_host vfio; /* the container of passed-through devices */
};

/* One VM per lvmm process in practice; a small table keeps devices.h free of state. */
static pthread_mutex_t devices_lock = PTHREAD_MUTEX_INITIALIZER;
static struct devices *devices_tab[4];

static struct devices *devices_of(struct vm *vm)
{
	unsigned i;

	for (i = 0; i < 4; i++)
		if (devices_tab[i] && devices_tab[i]->vm == vm)
			return devices_tab[i];
	return NULL;
}

/* ---- platform ops for the PCI layer ---- */

static int plat_alloc_gsi(void *vm)
{
	return vm_alloc_gsi(vm);
}

static int plat_free_gsi(void *vm, unsigned gsi)
{
	return vm_free_gsi(vm, gsi);
}

static int plat_route(void *vm, unsigned gsi, uint64_t addr, uint32_t data, bool masked)
{
	return vm_set_msi_route(vm, gsi, addr, data, masked);
}

static int plat_irqfd(void *vm, unsigned gsi, int efd, bool assign)
{
	return vm_irqfd(vm, gsi, efd, assign);
}

static int plat_intx_line(void *vm, unsigned gsi, bool level)
{
	return vm_set_irq_line(vm, gsi, level);
}

static int plat_intx_irqfd(void *vm, unsigned gsi, int efd, int resample_fd, bool assign)
{
	return vm_irqfd_resample(vm, gsi, efd, resample_fd, assign);
}

static int plat_map_host(void *vm, uint64_t gpa, uint64_t size, void *host)
{
	return vm_map_host_mem(vm, gpa, size, host, false);
}

static int plat_unmap_host(void *vm, uint64_t gpa)
{
	return vm_unmap_host_mem(vm, gpa);
}

/* ---- what a device model gets from the VM (device.h) ---- */

static int host_ioeventfd(void *vm, uint64_t gpa, unsigned len, int fd, bool assign)
{
	return vm_ioeventfd(vm, gpa, len, fd, assign);
}

static struct vfio_host *host_vfio(void *vm)
{
	struct devices *ds;

	pthread_mutex_lock(&devices_lock);
	ds = devices_of(vm);
	pthread_mutex_unlock(&devices_lock);
	return ds ? &ds->vfio : NULL;
}

static struct vfio_device *host_vfio_open(void *vm, const char *bdf, char *err, unsigned errlen)
{
	struct vfio_host *vh = host_vfio(vm);

	if (!vh) {
		snprintf(err, errlen, "vfio: the VM has no devices");
		return NULL;
	}
	return vfio_host_open(vh, bdf, err, errlen);
}

static void host_vfio_release(void *vm, struct vfio_device *d)
{
	struct vfio_host *vh = host_vfio(vm);

	if (vh)
		vfio_host_release(vh, d);
}

uint64_t devices_mmio64_max(unsigned host_bits, unsigned guest_bits)
{
	unsigned bits = 48;

	if (host_bits && host_bits < bits)
		bits = host_bits;
	if (guest_bits && guest_bits < bits)
		bits = guest_bits;
	if (!host_bits && !guest_bits)
		bits = 36; /* the architectural width where CPUID does not tell */
	if ((1ULL << bits) <= LAYOUT_MMIO64_START)
		return 0;
	return (1ULL << bits) - LAYOUT_MMIO64_START;
}

/* The host's width: a guest address past it has no host page behind it. */
static unsigned devices_host_phys_bits(void)
{
	unsigned a, b, c, d;

	return __get_cpuid(0x80000008, &a, &b, &c, &d) ? a & 0xff : 0;
}

uint64_t devices_mmio64_size(struct vm *vm)
{
	struct devices *ds;
	uint64_t size = LAYOUT_MMIO64_SIZE;

	pthread_mutex_lock(&devices_lock);
	ds = devices_of(vm);
	if (ds)
		size = ds->bus.mmio64_size;
	pthread_mutex_unlock(&devices_lock);
	return size;
}

/* ---- instances ---- */

static unsigned dev_slot(const struct dev_inst *d)
{
	return d->pci->devfn >> 3;
}

static unsigned devices_count(const struct devices *ds, const struct dev_model *m)
{
	unsigned i, n = 0;

	for (i = 0; i < ds->n; i++)
		n += ds->dev[i].model == m;
	return n;
}

/* Creates a device of model m and places its function on bus 0: the new last instance. */
static int devices_create(struct devices *ds, const struct dev_model *m, const void *cfg,
			  const char *id, unsigned idx, char *err, unsigned errlen)
{
	struct dev_inst d = {.model = m};
	int r;

	if (ds->n >= DEVICES_MAX) {
		snprintf(err, errlen, "%s %s: the VM has %u devices, the most it takes", m->name,
			 id, ds->n);
		return -ENOSPC;
	}
	snprintf(d.id, sizeof(d.id), "%s", id);
	r = m->create(&ds->host, cfg, d.id, idx, &d.dev, err, errlen);
	if (r)
		return r;
	d.pci = m->pci(d.dev);
	r = pci_bus_add(&ds->bus, d.pci, err, errlen);
	if (!r && m->realize)
		r = m->realize(d.dev, err, errlen);
	if (r) {
		m->destroy(d.dev);
		return r;
	}
	pthread_mutex_lock(&devices_lock);
	ds->dev[ds->n++] = d;
	pthread_mutex_unlock(&devices_lock);
	return 0;
}

/* A hot-pluggable device by id (ids are unique across models: devices_config_check_ids); the
 * API removes and looks up only those. */
static struct dev_inst *devices_find(struct devices *ds, const char *id, unsigned *idx)
{
	unsigned i;

	for (i = 0; i < ds->n; i++)
		if (devices_entry(ds->dev[i].model)->hot && !strcmp(ds->dev[i].id, id)) {
			if (idx)
				*idx = i;
			return &ds->dev[i];
		}
	return NULL;
}

/* An edge on the Generic Event Device's pin: the guest's _EVT runs the hotplug scan. */
static void devices_ged_notify(void *opaque)
{
	struct vm *vm = opaque;
	int r = vm_set_irq_line(vm, LAYOUT_ACPI_GED_IRQ, true);

	if (!r)
		r = vm_set_irq_line(vm, LAYOUT_ACPI_GED_IRQ, false);
	if (r)
		fprintf(stderr, "lvmm: pci hotplug: GED interrupt %u: %s\n", LAYOUT_ACPI_GED_IRQ,
			strerror(-r));
}

/* Hot-add: a device of model m from cfg on a free slot of bus 0, the guest told at once. */
static int devices_add(struct vm *vm, const struct dev_model *m, const void *cfg, const char *id,
		       unsigned idx, unsigned *slot, char *err, unsigned errlen)
{
	const struct dev_entry *e = devices_entry(m);
	struct devices *ds;
	struct dev_inst *d;
	int r;

	pthread_mutex_lock(&devices_lock);
	ds = devices_of(vm);
	pthread_mutex_unlock(&devices_lock);
	if (!ds || !ds->hp_up) {
		snprintf(err, errlen, "%s %s: the VM has no PCI hotplug controller", m->name, id);
		return -ENODEV;
	}
	if (!e || !e->hot || devices_count(ds, m) >= e->max) {
		snprintf(err, errlen,
			 "%s %s: the VM already has %u such devices, the most it takes", m->name,
			 id, devices_count(ds, m));
		return -ENOSPC;
	}
	r = devices_create(ds, m, cfg, id, idx, err, errlen);
	if (r)
		return r;
	d = &ds->dev[ds->n - 1];
	*slot = dev_slot(d);
	r = hotplug_plug(&ds->hp, *slot);
	if (r) {
		snprintf(err, errlen, "%s %s: PCI slot %u: %s", m->name, id, *slot, strerror(-r));
		pthread_mutex_lock(&devices_lock);
		ds->n--;
		pthread_mutex_unlock(&devices_lock);
		d->model->destroy(d->dev);
		return r;
	}
	/* added to a paused VM: paused with it until vm.resume, which resumes every device */
	if (vm_get_state(vm) == VM_PAUSED && m->pause)
		m->pause(d->dev);
	fprintf(stderr, "lvmm: %s %s: hot-added at PCI 0000:00:%02x.0\n", m->name, id, *slot);
	return 0;
}

int devices_add_vnvme(struct vm *vm, const struct vnvme_config *c, unsigned idx, unsigned *slot,
		      char *err, unsigned errlen)
{
	char id[sizeof(c->id)];

	vnvme_id(c, idx, id, sizeof(id));
	return devices_add(vm, &vnvme_model, c, id, idx, slot, err, errlen);
}

int devices_add_vsock(struct vm *vm, const struct virtio_vsock_config *c, unsigned *slot, char *err,
		      unsigned errlen)
{
	char id[sizeof(c->id)];

	virtio_vsock_id(c, id, sizeof(id));
	return devices_add(vm, &virtio_vsock_model, c, id, 0, slot, err, errlen);
}

int devices_add_net(struct vm *vm, const struct virtio_net_config *c, unsigned idx, unsigned *slot,
		    char *err, unsigned errlen)
{
	char id[sizeof(c->id)];

	virtio_net_id(c, idx, id, sizeof(id));
	return devices_add(vm, &virtio_net_model, c, id, idx, slot, err, errlen);
}

int devices_add_fs(struct vm *vm, const struct virtio_fs_config *c, unsigned idx, unsigned *slot,
		   char *err, unsigned errlen)
{
	char id[sizeof(c->id)];

	virtio_fs_id(c, idx, id, sizeof(id));
	return devices_add(vm, &virtio_fs_model, c, id, idx, slot, err, errlen);
}

int devices_add_vfio(struct vm *vm, const struct vfio_pci_config *c, unsigned idx, unsigned *slot,
		     char *err, unsigned errlen)
{
	char id[sizeof(c->id)];

	vfio_pci_id(c, idx, id, sizeof(id));
	return devices_add(vm, &vfio_pci_model, c, id, idx, slot, err, errlen);
}

int devices_add_disk(struct vm *vm, const struct virtio_blk_config *c, unsigned idx, unsigned *slot,
		     char *err, unsigned errlen)
{
	char id[sizeof(c->id)];

	virtio_blk_id(c, idx, id, sizeof(id));
	return devices_add(vm, &virtio_blk_model, c, id, idx, slot, err, errlen);
}

/* The guest ejected the device (or the VM is being reset): the model frees what it holds (for
 * a vNVMe: backend queue pairs, anonymous volume, memory slots, ioeventfds and irqfds); the
 * slot is free again. */
static void devices_teardown(struct devices *ds, unsigned i)
{
	struct dev_inst d = ds->dev[i];
	unsigned slot = dev_slot(&d);

	pthread_mutex_lock(&devices_lock);
	memmove(&ds->dev[i], &ds->dev[i + 1], (ds->n - i - 1) * sizeof(ds->dev[0]));
	memset(&ds->dev[--ds->n], 0, sizeof(ds->dev[0]));
	pthread_mutex_unlock(&devices_lock);
	fprintf(stderr, "lvmm: %s %s: removed from PCI 0000:00:%02x.0\n", d.model->name, d.id,
		slot);
	d.model->destroy(d.dev);
	hotplug_release(&ds->hp, slot);
}

int devices_remove(struct vm *vm, const char *id, unsigned timeout_ms, char *err, unsigned errlen)
{
	struct devices *ds;
	struct dev_inst *d;
	unsigned i, slot;
	int r;

	pthread_mutex_lock(&devices_lock);
	ds = devices_of(vm);
	pthread_mutex_unlock(&devices_lock);
	d = ds ? devices_find(ds, id, &i) : NULL;
	if (!d) {
		snprintf(err, errlen, "device %s: no such device", id);
		return -ENOENT;
	}
	if (!ds->hp_up) {
		snprintf(err, errlen, "device %s: the VM has no PCI hotplug controller", id);
		return -ENODEV;
	}
	slot = dev_slot(d);
	r = hotplug_unplug(&ds->hp, slot);
	if (!r)
		r = hotplug_wait_eject(&ds->hp, slot, timeout_ms);
	if (r == -ETIMEDOUT) {
		snprintf(err, errlen,
			 "device %s: the guest did not eject PCI slot %u within %u ms; the removal "
			 "stays pending (a later eject completes on the next vm.remove-device, a "
			 "vm.reboot completes it at once)",
			 id, slot, timeout_ms);
		return r;
	}
	if (r) {
		snprintf(err, errlen, "device %s: PCI slot %u: %s", id, slot, strerror(-r));
		return r;
	}
	devices_teardown(ds, i);
	return 0;
}

bool devices_removing(struct vm *vm, const char *id)
{
	struct devices *ds;
	struct dev_inst *d;
	enum hotplug_slot_state s = HOTPLUG_PRESENT;

	pthread_mutex_lock(&devices_lock);
	ds = devices_of(vm);
	pthread_mutex_unlock(&devices_lock);
	d = ds && ds->hp_up ? devices_find(ds, id, NULL) : NULL;
	if (d)
		s = hotplug_state(&ds->hp, dev_slot(d));
	return s == HOTPLUG_REMOVING || s == HOTPLUG_EJECTED;
}

int devices_slot(struct vm *vm, const char *id, unsigned *slot)
{
	struct devices *ds;
	struct dev_inst *d = NULL;

	pthread_mutex_lock(&devices_lock);
	ds = devices_of(vm);
	if (ds)
		d = devices_find(ds, id, NULL);
	if (d)
		*slot = dev_slot(d);
	pthread_mutex_unlock(&devices_lock);
	return d ? 0 : -ENOENT;
}

void devices_intx_eoi(struct vm *vm, unsigned pin)
{
	struct devices *ds;

	/* devices_lock would order against the API's hot-plug, which waits for vCPUs: the bus
	 * outlives every vCPU, and pci_bus_intx_eoi holds its own lock. */
	ds = devices_of(vm);
	if (ds && ds->bus_up)
		pci_bus_intx_eoi(&ds->bus, pin);
}

int devices_init(struct vm *vm, const struct vm_config *cfg, char *err, unsigned errlen)
{
	struct pci_platform_ops ops = {
	    .opaque = vm,
	    .alloc_gsi = plat_alloc_gsi,
	    .free_gsi = plat_free_gsi,
	    .set_msi_route = plat_route,
	    .irqfd = plat_irqfd,
	    .intx_line = plat_intx_line,
	    .intx_irqfd = plat_intx_irqfd,
	    .map_host = plat_map_host,
	    .unmap_host = plat_unmap_host,
	};
	struct devices *ds;
	unsigned e, i, slot;
	int r;

	pthread_mutex_lock(&devices_lock);
	for (slot = 0; slot < 4 && devices_tab[slot]; slot++)
		;
	pthread_mutex_unlock(&devices_lock);
	if (slot == 4) {
		snprintf(err, errlen, "devices: too many VMs in one process");
		return -ENOSPC;
	}
	ds = calloc(1, sizeof(*ds));
	if (!ds) {
		snprintf(err, errlen, "devices: out of memory");
		return -ENOMEM;
	}
	ds->vm = vm;
	ds->host = (struct dev_host){
	    .opaque = vm,
	    .gm = vm_guest_mem(vm),
	    .cpus = cfg->cpus,
	    .ioeventfd = host_ioeventfd,
	    .map_host = plat_map_host,
	    .unmap_host = plat_unmap_host,
	    .io_thread = seccomp_io_thread_install,
	    .sock_thread = seccomp_sock_thread_install,
	    .vfio_open = host_vfio_open,
	    .vfio_release = host_vfio_release,
	};
	vfio_host_init(&ds->vfio, vm_guest_mem(vm));
	r = pci_bus_init(&ds->bus, &ops, vm_pio_bus(vm), vm_mmio_bus(vm), err, errlen);
	if (r) {
		free(ds);
		return r;
	}
	ds->bus_up = true;
	pci_bus_mmio64_limit(&ds->bus,
			     devices_mmio64_max(devices_host_phys_bits(), vm_guest_phys_bits(vm)));
	hotplug_init(&ds->hp, devices_ged_notify, vm);
	r = bus_register(vm_pio_bus(vm), LAYOUT_HOTPLUG_PORT, LAYOUT_HOTPLUG_LEN, &hotplug_bus_ops,
			 &ds->hp, "pci-hotplug");
	if (r) {
		snprintf(err, errlen, "devices: PCI hotplug ports 0x%x: %s", LAYOUT_HOTPLUG_PORT,
			 strerror(-r));
		hotplug_destroy(&ds->hp);
		pci_bus_exit(&ds->bus);
		free(ds);
		return r;
	}
	ds->hp_up = true;
	pthread_mutex_lock(&devices_lock);
	devices_tab[slot] = ds;
	pthread_mutex_unlock(&devices_lock);
	for (e = 0; e < sizeof(registry) / sizeof(registry[0]); e++) {
		const struct dev_entry *en = &registry[e];
		unsigned n = en->count(cfg);

		for (i = 0; i < n; i++) {
			char id[64];
			const void *c = en->config(cfg, i, id, sizeof(id));

			r = devices_create(ds, en->model, c, id, i, err, errlen);
			if (!r)
				r = hotplug_boot_present(&ds->hp, dev_slot(&ds->dev[ds->n - 1]));
			if (r) {
				devices_exit(vm);
				return r;
			}
		}
	}
	/* what the firmware tables describe; hot-added functions fit in it */
	pci_bus_mmio64_seal(&ds->bus);
	return 0;
}

void devices_exit(struct vm *vm)
{
	struct devices *ds;
	unsigned i;

	pthread_mutex_lock(&devices_lock);
	ds = devices_of(vm);
	for (i = 0; ds && i < 4; i++)
		if (devices_tab[i] == ds)
			devices_tab[i] = NULL;
	pthread_mutex_unlock(&devices_lock);
	if (!ds)
		return;
	for (i = 0; i < ds->n; i++)
		ds->dev[i].model->destroy(ds->dev[i].dev);
	vfio_host_close(&ds->vfio);
	if (ds->hp_up) {
		bus_unregister(vm_pio_bus(vm), LAYOUT_HOTPLUG_PORT, &ds->hp);
		hotplug_destroy(&ds->hp);
	}
	if (ds->bus_up)
		pci_bus_exit(&ds->bus);
	free(ds);
}

/* vm.pause and vm.resume (vCPUs stopped first, started last). */
void devices_pause(struct vm *vm, bool pause)
{
	struct devices *ds;
	unsigned i;

	pthread_mutex_lock(&devices_lock);
	ds = devices_of(vm);
	for (i = 0; ds && i < ds->n; i++) {
		const struct dev_model *m = ds->dev[i].model;

		if (pause && m->pause)
			m->pause(ds->dev[i].dev);
		else if (!pause && m->resume)
			m->resume(ds->dev[i].dev);
	}
	pthread_mutex_unlock(&devices_lock);
}

/* Devices [0, n) reclaimed, each tried; the first failure's message in err. */
static int devices_reclaim_n(struct devices *ds, unsigned n, char *err, unsigned errlen)
{
	int r = 0;

	for (unsigned i = 0; i < n; i++) {
		const struct dev_model *m = ds->dev[i].model;
		char e[256];
		int r1;

		if (!m->reclaim)
			continue;
		r1 = m->reclaim(ds->dev[i].dev, e, sizeof(e));
		if (r1 && !r) {
			r = r1;
			snprintf(err, errlen, "%s", e);
		}
	}
	return r;
}

int devices_release(struct vm *vm, char *err, unsigned errlen)
{
	struct devices *ds;
	unsigned i;
	int r = 0;

	pthread_mutex_lock(&devices_lock);
	ds = devices_of(vm);
	for (i = 0; ds && i < ds->n && !r; i++)
		if (ds->dev[i].model->release)
			r = ds->dev[i].model->release(ds->dev[i].dev, err, errlen);
	if (r) {
		char e[8];

		devices_reclaim_n(ds, i - 1, e, sizeof(e));
	}
	pthread_mutex_unlock(&devices_lock);
	return r;
}

bool devices_hand_over(const struct vm_config *cfg)
{
	for (unsigned e = 0; e < sizeof(registry) / sizeof(registry[0]); e++)
		if ((registry[e].model->release || registry[e].model->hand_fds) &&
		    registry[e].count(cfg))
			return true;
	return false;
}

int devices_hand_fds(struct vm *vm,
		     int (*send)(void *ctx, const char *id, const int *fds, unsigned n, char *err,
				 unsigned errlen),
		     void *ctx, char *err, unsigned errlen)
{
	struct devices *ds;
	int r = 0;

	pthread_mutex_lock(&devices_lock);
	ds = devices_of(vm);
	for (unsigned i = 0; ds && i < ds->n && !r; i++) {
		const struct dev_model *m = ds->dev[i].model;
		int fds[DEV_MAX_HAND_FDS];
		unsigned n;

		if (!m->hand_fds)
			continue;
		n = m->hand_fds(ds->dev[i].dev, fds, DEV_MAX_HAND_FDS);
		if (n)
			r = send(ctx, ds->dev[i].id, fds, n, err, errlen);
	}
	pthread_mutex_unlock(&devices_lock);
	return r;
}

int devices_take_fd(struct vm_config *cfg, const char *id, unsigned index, unsigned count, int fd,
		    char *err, unsigned errlen)
{
	for (unsigned e = 0; e < sizeof(registry) / sizeof(registry[0]); e++) {
		const struct dev_entry *en = &registry[e];

		for (unsigned i = 0; i < en->count(cfg); i++) {
			char did[64];
			/* the instance's config inside cfg, which is the caller's to change */
			void *mc = (void *)(uintptr_t)en->config(cfg, i, did, sizeof(did));

			if (strcmp(did, id))
				continue;
			if (!en->model->take_fd) {
				snprintf(err, errlen,
					 "device %s (%s) takes no file descriptors from a source",
					 id, en->model->name);
				return -EINVAL;
			}
			char why[256];
			int r;

			r = en->model->take_fd(mc, index, count, fd, why, sizeof(why));
			if (r)
				snprintf(err, errlen, "device %s: %s", id, why);
			return r;
		}
	}
	snprintf(err, errlen,
		 "the source handed over a file descriptor of device %.64s, which "
		 "the config does not have",
		 id);
	return -ENOENT;
}

int devices_reclaim(struct vm *vm, char *err, unsigned errlen)
{
	struct devices *ds;
	int r = 0;

	pthread_mutex_lock(&devices_lock);
	ds = devices_of(vm);
	if (ds)
		r = devices_reclaim_n(ds, ds->n, err, errlen);
	pthread_mutex_unlock(&devices_lock);
	return r;
}

unsigned devices_counters(struct vm *vm, struct dev_counters *out, unsigned max)
{
	struct devices *ds;
	unsigned i, n = 0;

	pthread_mutex_lock(&devices_lock);
	ds = devices_of(vm);
	for (i = 0; ds && i < ds->n && n < max; i++) {
		struct dev_inst *d = &ds->dev[i];

		if (!d->model->counters)
			continue;
		memset(&out[n], 0, sizeof(out[n]));
		snprintf(out[n].id, sizeof(out[n].id), "%s", d->id);
		d->model->counters(d->dev, &out[n]);
		n++;
	}
	pthread_mutex_unlock(&devices_lock);
	return n;
}

/* ---- snapshots ---- */

int devices_save_check(struct vm *vm, char *err, unsigned errlen)
{
	struct devices *ds;
	int r = 0;

	pthread_mutex_lock(&devices_lock);
	ds = devices_of(vm);
	for (unsigned i = 0; ds && i < ds->n && !r; i++) {
		const struct dev_inst *d = &ds->dev[i];

		if (!d->model->save || !d->model->restore) {
			snprintf(err, errlen, "device %s (%s) cannot be saved yet", d->id,
				 d->model->name);
			r = -EOPNOTSUPP;
		} else if (ds->hp_up && hotplug_state(&ds->hp, dev_slot(d)) != HOTPLUG_PRESENT) {
			snprintf(err, errlen, "device %s: a hot-plug operation is under way",
				 d->id);
			r = -EBUSY;
		}
	}
	pthread_mutex_unlock(&devices_lock);
	return r;
}

int devices_save(struct vm *vm, struct snap_writer *w, char *err, unsigned errlen)
{
	struct devices *ds;
	int r = 0;

	pthread_mutex_lock(&devices_lock);
	ds = devices_of(vm);
	/* every device first: a VM with one that cannot be saved is refused before any work */
	for (unsigned i = 0; ds && i < ds->n && !r; i++) {
		const struct dev_inst *d = &ds->dev[i];

		if ((!d->model->save || !d->model->restore) && d->model->nosave) {
			snprintf(err, errlen, "device %s (%s) cannot be saved: %s", d->id,
				 d->model->name, d->model->nosave);
			r = -EOPNOTSUPP;
		} else if (!d->model->save || !d->model->restore) {
			snprintf(err, errlen, "device %s (%s) cannot be saved yet", d->id,
				 d->model->name);
			r = -EOPNOTSUPP;
		} else if (ds->hp_up && hotplug_state(&ds->hp, dev_slot(d)) != HOTPLUG_PRESENT) {
			snprintf(err, errlen, "device %s: a hot-plug operation is under way",
				 d->id);
			r = -EBUSY;
		}
	}
	for (unsigned i = 0; ds && i < ds->n && !r; i++) {
		const struct dev_inst *d = &ds->dev[i];
		uint64_t len = 0;
		void *buf;

		r = d->model->save(d->dev, NULL, &len, err, errlen);
		if (r)
			break;
		buf = malloc(len ? len : 1);
		if (!buf) {
			snprintf(err, errlen, "device %s: out of memory", d->id);
			r = -ENOMEM;
			break;
		}
		r = d->model->save(d->dev, buf, &len, err, errlen);
		if (!r)
			snap_put_device(w, i, d->id, d->model->name, dev_slot(d), buf, (size_t)len);
		free(buf);
	}
	pthread_mutex_unlock(&devices_lock);
	return r;
}

int devices_restore(struct vm *vm, const struct snap_reader *rd, char *err, unsigned errlen)
{
	struct devices *ds;
	unsigned saved = 0;
	int r = 0;

	for (unsigned k = 0; k < rd->n; k++)
		saved += rd->sect[k].type == SNAP_DEVICE;
	pthread_mutex_lock(&devices_lock);
	ds = devices_of(vm);
	if ((ds ? ds->n : 0) != saved) {
		snprintf(err, errlen, "the snapshot has %u devices, its config makes %u", saved,
			 ds ? ds->n : 0);
		r = -EINVAL;
	}
	for (unsigned i = 0; ds && i < ds->n && !r; i++) {
		const struct dev_inst *d = &ds->dev[i];
		const struct snap_ref *s = snap_find(rd, SNAP_DEVICE, i);
		struct snap_dev_head h;

		if (!s || s->len < sizeof(h)) {
			snprintf(err, errlen, "device %s: no state in the snapshot", d->id);
			r = -EINVAL;
			break;
		}
		memcpy(&h, s->data, sizeof(h));
		h.id[sizeof(h.id) - 1] = h.model[sizeof(h.model) - 1] = 0;
		if (strcmp(h.id, d->id) || strcmp(h.model, d->model->name)) {
			snprintf(err, errlen,
				 "device %u: the snapshot holds %s (%s), its config makes %s (%s)",
				 i, h.id, h.model, d->id, d->model->name);
			r = -EINVAL;
			break;
		}
		if (h.slot != dev_slot(d)) {
			/* a device hot-plugged or removed before the save: its config, rebuilt,
			 * places the devices where the guest does not have them */
			snprintf(err, errlen,
				 "device %s: saved in PCI slot %u, its config places it in slot %u",
				 d->id, (unsigned)h.slot, dev_slot(d));
			r = -EINVAL;
			break;
		}
		if (!d->model->restore) {
			snprintf(err, errlen, "device %s (%s) cannot be restored", d->id,
				 d->model->name);
			r = -EOPNOTSUPP;
			break;
		}
		r = d->model->restore(d->dev, s->data + sizeof(h), s->len - sizeof(h), err, errlen);
	}
	/* every function back: BARs placed one at a time may have met a window not moved yet */
	for (unsigned i = 0; ds && i < ds->n && !r; i++) {
		struct pci_dev *p = ds->dev[i].model->pci(ds->dev[i].dev);

		if (p)
			pci_dev_bars_refresh(p);
	}
	pthread_mutex_unlock(&devices_lock);
	return r;
}
