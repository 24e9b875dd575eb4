/* The passthrough device model (vfio_pci.h): a struct vfio_pci_config opened with the VFIO
 * library (host-kmod/vfio) in the VM's container, and vfio_pci_lib_ops, the library behind the
 * device model's ops table. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "vfio/vfio_pci.h"

static int lib_cfg_read(void *o, unsigned off, void *buf, size_t len)
{
	return vfio_cfg_read(o, off, buf, len);
}

static int lib_cfg_write(void *o, unsigned off, const void *buf, size_t len)
{
	return vfio_cfg_write(o, off, buf, len);
}

static int lib_region_read(void *o, unsigned region, uint64_t off, void *buf, size_t len)
{
	return vfio_region_read(o, region, off, buf, len);
}

static int lib_region_write(void *o, unsigned region, uint64_t off, const void *buf, size_t len)
{
	return vfio_region_write(o, region, off, buf, len);
}

static void *lib_region_mmap(void *o, unsigned region, uint64_t off, uint64_t size)
{
	return vfio_region_mmap(o, region, off, size, PROT_READ | PROT_WRITE);
}

static void lib_region_munmap(void *o, void *host, uint64_t size)
{
	(void)o;
	munmap(host, size);
}

static int lib_irq_set(void *o, unsigned index, unsigned start, unsigned count, const int *fds)
{
	return count ? vfio_irq_set(o, index, start, count, fds) : vfio_irq_disable(o, index);
}

static int lib_intx_unmask(void *o, int fd)
{
	return fd < 0 ? vfio_intx_unmask(o) : vfio_intx_unmask_fd(o, fd);
}

static int lib_reset(void *o)
{
	return vfio_device_reset(o);
}

const struct vfio_pci_ops vfio_pci_lib_ops = {
    .cfg_read = lib_cfg_read,
    .cfg_write = lib_cfg_write,
    .region_read = lib_region_read,
    .region_write = lib_region_write,
    .region_mmap = lib_region_mmap,
    .region_munmap = lib_region_munmap,
    .irq_set = lib_irq_set,
    .intx_unmask = lib_intx_unmask,
    .reset = lib_reset,
};

/* The model's instance: the function and the VFIO device under it (the VMM's). */
struct vfio_dev {
	struct vfio_pci v;
	const struct dev_host *h;
	struct vfio_device *dev;
};

static int vfio_dev_create(const struct dev_host *h, const void *cfg, const char *id, unsigned idx,
			   void **out, char *err, unsigned errlen)
{
	const struct vfio_pci_config *c = cfg;
	struct vfio_dev *vd;
	char bdf[32], why[200];
	int r;

	(void)idx;
	if (c->iommu || c->pci_segment) {
		snprintf(err, errlen, "device %s: %s is not supported", id,
			 c->iommu ? "iommu=on (no virtual IOMMU)" : "a PCI segment other than 0");
		return -EINVAL;
	}
	if (vfio_parse_bdf(c->path, bdf, sizeof(bdf), why, sizeof(why))) {
		snprintf(err, errlen, "device %s: %s", id, why);
		return -EINVAL;
	}
	if (!h->vfio_open || !h->vfio_release) {
		snprintf(err, errlen, "device %s: VFIO is not available to devices here", id);
		return -EOPNOTSUPP;
	}
	vd = calloc(1, sizeof(*vd));
	if (!vd) {
		snprintf(err, errlen, "device %s: out of memory", id);
		return -ENOMEM;
	}
	vd->h = h;
	vd->dev = h->vfio_open(h->opaque, bdf, why, sizeof(why));
	if (!vd->dev) {
		snprintf(err, errlen, "device %s (%s): %s", id, bdf, why);
		free(vd);
		return -ENODEV;
	}
	r = vfio_pci_init(&vd->v, id, vd->dev, &vfio_pci_lib_ops, vd->dev, h, err, errlen);
	if (r) {
		h->vfio_release(h->opaque, vd->dev);
		free(vd);
		return r;
	}
	*out = vd;
	return 0;
}

static struct pci_dev *vfio_dev_pci(void *dev)
{
	return &((struct vfio_dev *)dev)->v.pci;
}

/* INTx that cannot be wired leaves the function without a pin (MSI and MSI-X still work):
 * said, not fatal. */
static int vfio_dev_realize(void *dev, char *err, unsigned errlen)
{
	struct vfio_dev *vd = dev;
	char why[200];

	(void)err;
	(void)errlen;
	if (vfio_pci_intx_start(&vd->v, why, sizeof(why)))
		fprintf(stderr, "lvmm: %s; no INTx\n", why);
	vfio_pci_cfg_sync_command(&vd->v);
	return 0;
}

static void vfio_dev_counters(void *dev, struct dev_counters *out)
{
	struct vfio_dev *vd = dev;

	out->irqs = vd->v.pci.msix.fired + vd->v.intx_fired;
	snprintf(out->mode, sizeof(out->mode), "passthrough");
}

static void vfio_dev_destroy(void *dev)
{
	struct vfio_dev *vd = dev;

	vfio_pci_exit(&vd->v);
	/* left reset for the host, best effort (-ENOTTY: it has none); a VM reset rebuilds the
	 * device and resets it again */
	(void)vfio_device_reset(vd->dev);
	vd->h->vfio_release(vd->h->opaque, vd->dev);
	free(vd);
}

const struct dev_model vfio_pci_model = {
    .name = "device",
    .create = vfio_dev_create,
    .pci = vfio_dev_pci,
    .realize = vfio_dev_realize,
    .nosave = "a passed-through device's state is in the host device",
    .counters = vfio_dev_counters,
    .destroy = vfio_dev_destroy,
};
