/* Placeholder for the VFIO library (vfio.h) until its implementation, vfio.c, is merged: every
 * call fails with -ENOSYS, so `--device` is refused with one line. Removed with that merge. */
#include <errno.h>
#include <stdio.h>

#include "vfio/vfio.h"

#define STUB_MSG "the VFIO library is not built into this lvmm"

int vfio_parse_bdf(const char *spec, char *bdf, size_t len, char *err, unsigned errlen)
{
	(void)spec;
	(void)bdf;
	(void)len;
	snprintf(err, errlen, "%s", STUB_MSG);
	return -ENOSYS;
}

int vfio_container_open(struct vfio_container *c, bool allow_noiommu, char *err, unsigned errlen)
{
	(void)c;
	(void)allow_noiommu;
	snprintf(err, errlen, "%s", STUB_MSG);
	return -ENOSYS;
}

void vfio_container_close(struct vfio_container *c)
{
	(void)c;
}

int vfio_device_open(struct vfio_container *c, const char *bdf, struct vfio_device *d, char *err,
		     unsigned errlen)
{
	(void)c;
	(void)bdf;
	(void)d;
	snprintf(err, errlen, "%s", STUB_MSG);
	return -ENOSYS;
}

void vfio_device_close(struct vfio_device *d)
{
	(void)d;
}

int vfio_dma_map(struct vfio_container *c, uint64_t iova, uint64_t size, void *vaddr, bool writable,
		 char *err, unsigned errlen)
{
	(void)c;
	(void)iova;
	(void)size;
	(void)vaddr;
	(void)writable;
	snprintf(err, errlen, "%s", STUB_MSG);
	return -ENOSYS;
}

int vfio_dma_unmap(struct vfio_container *c, uint64_t iova, uint64_t size)
{
	(void)c;
	(void)iova;
	(void)size;
	return -ENOSYS;
}

int vfio_region_read(struct vfio_device *d, unsigned region, uint64_t off, void *buf, size_t len)
{
	(void)d;
	(void)region;
	(void)off;
	(void)buf;
	(void)len;
	return -ENOSYS;
}

int vfio_region_write(struct vfio_device *d, unsigned region, uint64_t off, const void *buf,
		      size_t len)
{
	(void)d;
	(void)region;
	(void)off;
	(void)buf;
	(void)len;
	return -ENOSYS;
}

int vfio_cfg_read(struct vfio_device *d, unsigned off, void *buf, size_t len)
{
	(void)d;
	(void)off;
	(void)buf;
	(void)len;
	return -ENOSYS;
}

int vfio_cfg_write(struct vfio_device *d, unsigned off, const void *buf, size_t len)
{
	(void)d;
	(void)off;
	(void)buf;
	(void)len;
	return -ENOSYS;
}

void *vfio_region_mmap(struct vfio_device *d, unsigned region, uint64_t off, uint64_t size,
		       int prot)
{
	(void)d;
	(void)region;
	(void)off;
	(void)size;
	(void)prot;
	errno = ENOSYS;
	return NULL;
}

int vfio_irq_set(struct vfio_device *d, unsigned index, unsigned start, unsigned count,
		 const int *fds)
{
	(void)d;
	(void)index;
	(void)start;
	(void)count;
	(void)fds;
	return -ENOSYS;
}

int vfio_irq_disable(struct vfio_device *d, unsigned index)
{
	(void)d;
	(void)index;
	return -ENOSYS;
}

int vfio_device_reset(struct vfio_device *d)
{
	(void)d;
	return -ENOSYS;
}
