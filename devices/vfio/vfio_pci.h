/* A host PCI function passed through to the guest over VFIO (`--device path=...`): its BARs as
 * guest memory where VFIO lets them be mapped and trapped elsewhere, its expansion ROM trapped
 * and read-only, its config space (extended too) with the header, BARs, MSI/MSI-X, command
 * register and capability links emulated, its vectors on KVM irqfds. Everything
 * here talks to VFIO through struct vfio_pci_ops, so tests run it over a fake device. */
#ifndef LVMM_VFIO_PCI_H
#define LVMM_VFIO_PCI_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "device.h"
#include "vfio/vfio.h"

#define VFIO_PCI_PATH_MAX 256
/* mmap-able pieces of one BAR: each sparse area cut around the MSI-X table and PBA pages */
#define VFIO_PCI_MAX_PIECES (3 * VFIO_MAX_SPARSE)
/* VFIO's region indices past the BARs */
#define VFIO_PCI_ROM_REGION 6 /* VFIO_PCI_ROM_REGION_INDEX */
#define VFIO_PCI_CFG_REGION 7 /* VFIO_PCI_CONFIG_REGION_INDEX */
#define VFIO_PCI_INTX_INDEX 0 /* VFIO_PCI_INTX_IRQ_INDEX */
_Static_assert(VFIO_PCI_ROM_REGION == PCI_ROM_BAR, "the ROM's BAR slot is its region index");

/* cloud-hypervisor's DeviceConfig */
struct vfio_pci_config {
	char id[64];		      /* device id, default "dev<N>" */
	char path[VFIO_PCI_PATH_MAX]; /* /sys/bus/pci/devices/BDF (or the BDF itself) */
	bool iommu;		      /* behind a virtual IOMMU: not supported, refused */
	unsigned pci_segment;	      /* only segment 0 holds devices */
};

static inline void vfio_pci_id(const struct vfio_pci_config *c, unsigned idx, char *buf, size_t len)
{
	if (c->id[0])
		snprintf(buf, len, "%s", c->id);
	else
		snprintf(buf, len, "dev%u", idx);
}

/* What the device model asks of its VFIO device (o: the ops' own state). vfio_pci_lib_ops
 * is host-kmod/vfio over a struct vfio_device; tests give a fake. 0 or a negative errno. */
struct vfio_pci_ops {
	int (*cfg_read)(void *o, unsigned off, void *buf, size_t len);
	int (*cfg_write)(void *o, unsigned off, const void *buf, size_t len);
	int (*region_read)(void *o, unsigned region, uint64_t off, void *buf, size_t len);
	int (*region_write)(void *o, unsigned region, uint64_t off, const void *buf, size_t len);
	/* NULL with errno when the range cannot be mapped */
	void *(*region_mmap)(void *o, unsigned region, uint64_t off, uint64_t size);
	void (*region_munmap)(void *o, void *host, uint64_t size);
	/* fds for vectors start..start+count-1 of type index; count 0 disables the type */
	int (*irq_set)(void *o, unsigned index, unsigned start, unsigned count, const int *fds);
	/* INTx: unmask now (fd < 0), or whenever fd is signalled (KVM's resample eventfd) */
	int (*intx_unmask)(void *o, int fd);
	int (*reset)(void *o); /* -ENOTTY: the device has none */
};

extern const struct vfio_pci_ops vfio_pci_lib_ops;

struct vfio_pci_piece {
	uint64_t off, size; /* inside the BAR, page aligned */
	void *host;
	bool mapped; /* guest memory at the BAR's gpa + off now */
};

struct vfio_pci;

/* How the function's INTx reaches the guest (vfio_intx.c): not at all; VFIO's trigger eventfd
 * is a KVM irqfd on the pin and KVM's resample eventfd unmasks (KVM's IOAPIC); or lvmm reads
 * the trigger, raises the pin and unmasks at the guest's EOI (lvmm's IOAPIC). */
enum vfio_intx_mode { VFIO_INTX_NONE, VFIO_INTX_KVM, VFIO_INTX_USER };

struct vfio_pci_bar {
	struct vfio_pci *owner; /* the BAR's MMIO handlers get this bar */
	unsigned idx;
	uint64_t region_size; /* the region's own size; the BAR is at least a page */
	unsigned npieces;
	struct vfio_pci_piece piece[VFIO_PCI_MAX_PIECES];
	uint64_t gpa; /* where the pieces are mapped, ~0 when not */
};

/* One passed-through function. */
struct vfio_pci {
	struct pci_dev pci;
	char id[64];
	const struct vfio_pci_ops *ops;
	void *o;
	const struct vfio_device *info; /* regions and interrupt types */
	int (*map_host)(void *opaque, uint64_t gpa, uint64_t size, void *host);
	int (*unmap_host)(void *opaque, uint64_t gpa);
	void *host_opaque;
	struct vfio_pci_bar bar[PCI_BAR_SLOTS]; /* bar[PCI_ROM_BAR]: the expansion ROM */
	uint8_t emu[PCI_CFG_EXT_SIZE]; /* 1: the byte is emulated (cfg or ext), 0: the device's */
	/* extended config space as lvmm shows it where emulated: capability headers relinked,
	 * hidden capabilities (vfio_cfg.c) zero */
	uint8_t ext[PCI_CFG_EXT_SIZE - PCI_CFG_SIZE];
	uint8_t msi_cap, pcie_cap; /* config offsets, 0 = none */
	uint16_t cmd;		   /* the command register as last written to the device */
	bool msix_on;		   /* VFIO's MSI-X vectors are the irqfds now */
	unsigned msi_on;	   /* MSI vectors VFIO signals now */
	/* failures the guest can repeat at will, logged sparsely (pci_log_due) */
	uint64_t irq_errors, map_errors, cmd_errors;
	/* INTx (vfio_intx.c): the mode, whether VFIO signals the trigger now (not while MSI or
	 * MSI-X is on), its eventfds (-1: none) and the reader thread of VFIO_INTX_USER. */
	enum vfio_intx_mode intx_mode;
	bool intx_on;
	int intx_trigger, intx_unmask, intx_stop;
	pthread_t intx_thread;
	bool intx_thread_up;
	int (*io_thread)(char *err, unsigned errlen);
	uint64_t intx_fired, intx_eois;
};

/* Builds the function from info over ops: config space read from the device and checked, BARs
 * declared (sizes from the regions), MSI-X, the mmap-able pieces mapped into this process. The
 * BAR pieces reach the guest through map_host/unmap_host when the BARs decode. Not yet on a
 * bus (pci_bus_add next). 0 or a negative errno with err naming the device. */
int vfio_pci_init(struct vfio_pci *v, const char *id, const struct vfio_device *info,
		  const struct vfio_pci_ops *ops, void *o, const struct dev_host *h, char *err,
		  unsigned errlen);
/* Off the bus already: interrupts off, pieces unmapped. */
void vfio_pci_exit(struct vfio_pci *v);

/* vfio_cfg.c: config space. Reads the device's config, builds v->pci's header, capabilities,
 * ROM BAR (with bar_ops too) and emulation map; 0 or -EINVAL/-EIO with err. */
int vfio_pci_cfg_build(struct vfio_pci *v, const struct bus_ops *bar_ops, char *err,
		       unsigned errlen);
void vfio_pci_cfg_read(struct pci_dev *d, unsigned reg, void *data, unsigned len);
void vfio_pci_cfg_write(struct pci_dev *d, unsigned reg, const void *data, unsigned len);
/* Gives the device the memory, bus-master and INTx-disable bits of the emulated command
 * register when they changed (pci_bus_add sets them without a write). */
void vfio_pci_cfg_sync_command(struct vfio_pci *v);

/* vfio_intx.c: INTx. offer (at init): the device's interrupt pin shown when the device has one
 * and VFIO an INTx interrupt. start (once on the bus): VFIO's trigger wired to the pin, a KVM
 * irqfd with resample where the platform has one, else lvmm's reader thread; 0, or a negative
 * errno with err (the pin is withdrawn then). off: VFIO's INTx off (MSI or MSI-X goes on),
 * d->lock held. stop: all of it undone. */
void vfio_pci_intx_offer(struct vfio_pci *v);
int vfio_pci_intx_start(struct vfio_pci *v, char *err, unsigned errlen);
void vfio_pci_intx_off(struct vfio_pci *v);
void vfio_pci_intx_stop(struct vfio_pci *v);

/* The model (device.h): created from a struct vfio_pci_config; opens the device in the VM's
 * container (dev_host.vfio_open) and resets it. */
extern const struct dev_model vfio_pci_model;

#endif
