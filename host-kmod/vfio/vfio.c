/* The user-space VFIO library (vfio.h) over the legacy container interface: containers, groups,
 * devices with their regions and IRQ types, DMA maps, interrupts and reset. Region parsing and
 * access are in vfio_region.c. */
#include "vfio.h"
#include "vfio_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/vfio.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#define VFIO_INFO_MAX 65536 /* a region info with its capabilities is never larger */

_Static_assert(VFIO_NREGIONS == VFIO_PCI_NUM_REGIONS, "VFIO_NREGIONS is vfio-pci's count");
_Static_assert(VFIO_NIRQS == VFIO_PCI_NUM_IRQS, "VFIO_NIRQS is vfio-pci's count");

int vfio_err(int rc, char *err, unsigned errlen, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

/* ---- containers and groups ---- */

int vfio_container_open(struct vfio_container *c, bool allow_noiommu, char *err, unsigned errlen)
{
	const char *o = getenv("LVMM_VFIO_BACKEND");
	struct stat st;
	int v, e;

	/* a mistyped override would otherwise pick a backend silently */
	if (o && strcmp(o, "iommufd") && strcmp(o, "legacy")) {
		memset(c, 0, sizeof(*c));
		c->fd = -1;
		for (unsigned i = 0; i < VFIO_MAX_GROUPS; i++)
			c->groups[i].fd = -1;
		return vfio_err(-EINVAL, err, errlen,
				"vfio: LVMM_VFIO_BACKEND=%.32s: expected iommufd or legacy", o);
	}
	if (vfio_backend_choose(NULL, allow_noiommu) == VFIO_BACKEND_IOMMUFD)
		return vfio_iommufd_open(c, err, errlen);
	memset(c, 0, sizeof(*c));
	for (unsigned i = 0; i < VFIO_MAX_GROUPS; i++)
		c->groups[i].fd = -1;
	c->allow_noiommu = allow_noiommu;
	c->fd = open("/dev/vfio/vfio", O_RDWR | O_CLOEXEC);
	if (c->fd < 0) {
		e = errno;
		if (e == ENOENT && !stat("/dev/iommu", &st) && !stat("/dev/vfio/devices", &st))
			vfio_err(-EINVAL, err, errlen,
				 "vfio: /dev/vfio/vfio missing and only iommufd (/dev/iommu) "
				 "offered: not with no-IOMMU or LVMM_VFIO_BACKEND=legacy "
				 "(docs/vfio.md)");
		else
			vfio_err(-EINVAL, err, errlen, "vfio: /dev/vfio/vfio: %s%s", strerror(e),
				 e == ENOENT ? " (vfio-pci not loaded?)" : "");
		return -e;
	}
	v = ioctl(c->fd, VFIO_GET_API_VERSION);
	if (v != VFIO_API_VERSION) {
		vfio_err(-EINVAL, err, errlen, "vfio: /dev/vfio/vfio speaks API %d, not %d", v,
			 VFIO_API_VERSION);
		goto fail;
	}
	if (ioctl(c->fd, VFIO_CHECK_EXTENSION, VFIO_TYPE1v2_IOMMU) <= 0 &&
	    !(allow_noiommu && ioctl(c->fd, VFIO_CHECK_EXTENSION, VFIO_NOIOMMU_IOMMU) > 0)) {
		vfio_err(-EINVAL, err, errlen, "vfio: the kernel offers no VFIO_TYPE1v2_IOMMU%s",
			 allow_noiommu ? " and no no-IOMMU mode" : " (no-IOMMU mode not allowed)");
		goto fail;
	}
	return 0;
fail:
	close(c->fd);
	c->fd = -1;
	return -ENODEV;
}

void vfio_container_close(struct vfio_container *c)
{
	if (c->backend == VFIO_BACKEND_IOMMUFD) {
		vfio_iommufd_close(c);
		return;
	}
	for (unsigned i = 0; i < VFIO_MAX_GROUPS; i++)
		if (c->groups[i].fd >= 0) {
			close(c->groups[i].fd);
			c->groups[i].fd = -1;
		}
	c->ngroups = 0;
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->backend = VFIO_BACKEND_NONE;
}

/* The IOMMU group of bdf: its number, and whether it is a no-IOMMU group. */
static int vfio_group_of(const char *bdf, int *id, bool *noiommu, char *err, unsigned errlen)
{
	char link[128], target[PATH_MAX], path[64];
	const char *base;
	ssize_t n;
	long v;
	char *end;

	snprintf(link, sizeof(link), "/sys/bus/pci/devices/%s", bdf);
	if (access(link, F_OK))
		return vfio_err(-ENOENT, err, errlen, "vfio %s: no such PCI device (%s)", bdf,
				link);
	snprintf(link, sizeof(link), "/sys/bus/pci/devices/%s/iommu_group", bdf);
	n = readlink(link, target, sizeof(target) - 1);
	if (n < 0)
		return vfio_err(-ENODEV, err, errlen,
				"vfio %s: no IOMMU group: bind it to vfio-pci (no IOMMU: "
				"vfio.enable_unsafe_noiommu_mode=1)",
				bdf);
	target[n] = 0;
	base = strrchr(target, '/');
	base = base ? base + 1 : target;
	errno = 0;
	v = strtol(base, &end, 10);
	if (errno || *end || end == base || v < 0 || v > INT_MAX)
		return vfio_err(-EINVAL, err, errlen, "vfio %s: IOMMU group '%s' is not a number",
				bdf, base);
	*id = (int)v;
	snprintf(path, sizeof(path), "/dev/vfio/%d", *id);
	if (!access(path, F_OK)) {
		*noiommu = false;
		return 0;
	}
	snprintf(path, sizeof(path), "/dev/vfio/noiommu-%d", *id);
	if (!access(path, F_OK)) {
		*noiommu = true;
		return 0;
	}
	return vfio_err(-ENOENT, err, errlen,
			"vfio %s: group %d has no /dev/vfio/%d: is the device bound to vfio-pci?",
			bdf, *id, *id);
}

static void vfio_group_put(struct vfio_container *c, int gi)
{
	struct vfio_group *g = &c->groups[gi];

	if (--g->users)
		return;
	ioctl(g->fd, VFIO_GROUP_UNSET_CONTAINER);
	close(g->fd);
	g->fd = -1;
	/* the kernel drops the container's IOMMU with its last group */
	if (--c->ngroups == 0)
		c->backend = VFIO_BACKEND_NONE;
}

/* The group of bdf in c (joined, the IOMMU type set with the first): its index, or -errno. */
static int vfio_group_get(struct vfio_container *c, const char *bdf, char *err, unsigned errlen)
{
	struct vfio_group_status st = {.argsz = sizeof(st)};
	enum vfio_backend want;
	int id = -1, gi = -1, rc, e;
	bool noiommu = false;
	char path[64];
	struct vfio_group *g;

	rc = vfio_group_of(bdf, &id, &noiommu, err, errlen);
	if (rc)
		return rc;
	for (int i = 0; i < VFIO_MAX_GROUPS; i++)
		if (c->groups[i].fd >= 0 && c->groups[i].id == id) {
			c->groups[i].users++;
			return i;
		} else if (c->groups[i].fd < 0 && gi < 0) {
			gi = i;
		}
	if (noiommu && !c->allow_noiommu)
		return vfio_err(-EINVAL, err, errlen,
				"vfio %s: group %d is a no-IOMMU group: not allowed without the "
				"no-IOMMU flag",
				bdf, id);
	want = noiommu ? VFIO_BACKEND_NOIOMMU : VFIO_BACKEND_TYPE1;
	if (c->backend != VFIO_BACKEND_NONE && c->backend != want)
		return vfio_err(-EINVAL, err, errlen,
				"vfio %s: group %d is %s, the container's groups are not", bdf, id,
				noiommu ? "no-IOMMU" : "IOMMU-backed");
	if (gi < 0)
		return vfio_err(-EINVAL, err, errlen,
				"vfio %s: more than %d groups in one container", bdf,
				VFIO_MAX_GROUPS);
	g = &c->groups[gi];
	snprintf(path, sizeof(path), noiommu ? "/dev/vfio/noiommu-%d" : "/dev/vfio/%d", id);
	g->fd = open(path, O_RDWR | O_CLOEXEC);
	if (g->fd < 0) {
		e = errno;
		vfio_err(-EINVAL, err, errlen, "vfio %s: %s: %s%s", bdf, path, strerror(e),
			 e == EBUSY ? " (open by another process)" : "");
		return -e;
	}
	g->id = id;
	g->users = 1;
	if (ioctl(g->fd, VFIO_GROUP_GET_STATUS, &st)) {
		rc = -errno;
		vfio_err(-EINVAL, err, errlen, "vfio %s: group %d status: %s", bdf, id,
			 strerror(-rc));
		goto fail;
	}
	if (!(st.flags & VFIO_GROUP_FLAGS_VIABLE)) {
		rc = vfio_err(
		    -EINVAL, err, errlen,
		    "vfio %s: group %d not viable: every device in "
		    "/sys/kernel/iommu_groups/%d/devices must be bound to vfio-pci or none",
		    bdf, id, id);
		goto fail;
	}
	if (ioctl(g->fd, VFIO_GROUP_SET_CONTAINER, &c->fd)) {
		rc = -errno;
		vfio_err(-EINVAL, err, errlen, "vfio %s: group %d into the container: %s", bdf, id,
			 strerror(-rc));
		goto fail;
	}
	c->ngroups++;
	if (c->backend == VFIO_BACKEND_NONE) {
		unsigned long type = noiommu ? VFIO_NOIOMMU_IOMMU : VFIO_TYPE1v2_IOMMU;
		struct vfio_iommu_type1_info info = {.argsz = sizeof(info)};

		if (ioctl(c->fd, VFIO_SET_IOMMU, type)) {
			rc = -errno;
			vfio_err(-EINVAL, err, errlen, "vfio %s: VFIO_SET_IOMMU %s: %s", bdf,
				 noiommu ? "no-IOMMU" : "TYPE1v2", strerror(-rc));
			vfio_group_put(c, gi);
			return rc;
		}
		c->backend = want;
		if (!noiommu && !ioctl(c->fd, VFIO_IOMMU_GET_INFO, &info) &&
		    (info.flags & VFIO_IOMMU_INFO_PGSIZES))
			c->iova_pgsizes = info.iova_pgsizes;
	}
	return gi;
fail:
	close(g->fd);
	g->fd = -1;
	return rc;
}

/* ---- devices ---- */

static int vfio_region_load(struct vfio_device *d, unsigned index, char *err, unsigned errlen)
{
	struct vfio_region_info ri = {.argsz = sizeof(ri), .index = index};
	void *buf = &ri;
	size_t len = sizeof(ri);
	int rc;

	if (ioctl(d->fd, VFIO_DEVICE_GET_REGION_INFO, &ri)) {
		if (errno == EINVAL) { /* vfio-pci's answer for a VGA region the device lacks */
			memset(&d->regions[index], 0, sizeof(d->regions[index]));
			d->regions[index].index = index;
			return 0;
		}
		rc = -errno;
		vfio_err(-EINVAL, err, errlen, "vfio %s: region %u info: %s", d->name, index,
			 strerror(-rc));
		return rc;
	}
	if ((ri.flags & VFIO_REGION_INFO_FLAG_CAPS) && ri.argsz > sizeof(ri)) {
		if (ri.argsz > VFIO_INFO_MAX)
			return vfio_err(-EINVAL, err, errlen, "vfio %s: region %u info of %u bytes",
					d->name, index, ri.argsz);
		len = ri.argsz;
		buf = calloc(1, len);
		if (!buf)
			return -ENOMEM;
		((struct vfio_region_info *)buf)->argsz = (uint32_t)len;
		((struct vfio_region_info *)buf)->index = index;
		if (ioctl(d->fd, VFIO_DEVICE_GET_REGION_INFO, buf)) {
			rc = -errno;
			free(buf);
			vfio_err(-EINVAL, err, errlen, "vfio %s: region %u info: %s", d->name,
				 index, strerror(-rc));
			return rc;
		}
	}
	rc = vfio_region_parse(&d->regions[index], index, buf, len, err, errlen);
	if (buf != &ri)
		free(buf);
	return rc;
}

static int vfio_device_load(struct vfio_device *d, char *err, unsigned errlen)
{
	struct vfio_device_info di = {.argsz = sizeof(di)};
	int rc;

	if (ioctl(d->fd, VFIO_DEVICE_GET_INFO, &di)) {
		rc = -errno;
		vfio_err(-EINVAL, err, errlen, "vfio %s: device info: %s", d->name, strerror(-rc));
		return rc;
	}
	if (!(di.flags & VFIO_DEVICE_FLAGS_PCI))
		return vfio_err(-EINVAL, err, errlen, "vfio %s: not a PCI device (flags %#x)",
				d->name, di.flags);
	if (di.num_regions <= VFIO_PCI_CONFIG_REGION_INDEX)
		return vfio_err(-EINVAL, err, errlen, "vfio %s: %u regions, no config space",
				d->name, di.num_regions);
	d->flags = di.flags;
	d->num_regions = di.num_regions;
	d->num_irqs = di.num_irqs;
	for (unsigned i = 0; i < VFIO_NREGIONS && i < di.num_regions; i++) {
		rc = vfio_region_load(d, i, err, errlen);
		if (rc)
			return rc;
	}
	for (unsigned i = 0; i < VFIO_NIRQS && i < di.num_irqs; i++) {
		struct vfio_irq_info ii = {.argsz = sizeof(ii), .index = i};

		if (ioctl(d->fd, VFIO_DEVICE_GET_IRQ_INFO, &ii)) {
			rc = -errno;
			vfio_err(-EINVAL, err, errlen, "vfio %s: IRQ type %u info: %s", d->name, i,
				 strerror(-rc));
			return rc;
		}
		if (ii.index != i)
			return vfio_err(-EINVAL, err, errlen,
					"vfio %s: IRQ info for %u answered for %u", d->name, i,
					ii.index);
		d->irqs[i].flags = ii.flags;
		d->irqs[i].count = ii.count;
	}
	return 0;
}

int vfio_device_open(struct vfio_container *c, const char *bdf, struct vfio_device *d, char *err,
		     unsigned errlen)
{
	int rc, gi;

	memset(d, 0, sizeof(*d));
	d->fd = -1;
	d->group = -1;
	rc = vfio_parse_bdf(bdf, d->name, sizeof(d->name), err, errlen);
	if (rc)
		return rc;
	if (c->fd < 0)
		return vfio_err(-EINVAL, err, errlen, "vfio %s: the container is not open",
				d->name);
	if (c->backend == VFIO_BACKEND_IOMMUFD) {
		rc = vfio_iommufd_device_bind(c, d->name, &d->fd, err, errlen);
		if (rc)
			return rc;
		d->c = c;
		rc = vfio_device_load(d, err, errlen);
		if (rc)
			vfio_device_close(d);
		return rc;
	}
	gi = vfio_group_get(c, d->name, err, errlen);
	if (gi < 0)
		return gi;
	d->c = c;
	d->group = gi;
	d->fd = ioctl(c->groups[gi].fd, VFIO_GROUP_GET_DEVICE_FD, d->name);
	if (d->fd < 0) {
		rc = -errno;
		vfio_err(-EINVAL, err, errlen, "vfio %s: device fd from group %d: %s", d->name,
			 c->groups[gi].id, strerror(-rc));
		goto fail;
	}
	rc = vfio_device_load(d, err, errlen);
	if (rc)
		goto fail;
	return 0;
fail:
	vfio_device_close(d);
	return rc;
}

void vfio_device_close(struct vfio_device *d)
{
	if (d->c && d->c->backend == VFIO_BACKEND_IOMMUFD)
		vfio_iommufd_device_release(d->fd);
	else if (d->fd >= 0)
		close(d->fd);
	d->fd = -1;
	if (d->c && d->group >= 0)
		vfio_group_put(d->c, d->group);
	d->group = -1;
	d->c = NULL;
}

/* ---- DMA ---- */

static bool vfio_dma_args_ok(uint64_t iova, uint64_t size, uintptr_t vaddr)
{
	uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);

	return size && !(iova % pg) && !(size % pg) && !(vaddr % pg) && iova + size > iova;
}

int vfio_dma_map(struct vfio_container *c, uint64_t iova, uint64_t size, void *vaddr, bool writable,
		 char *err, unsigned errlen)
{
	struct vfio_iommu_type1_dma_map m = {
	    .argsz = sizeof(m),
	    .flags = VFIO_DMA_MAP_FLAG_READ | (writable ? VFIO_DMA_MAP_FLAG_WRITE : 0),
	    .vaddr = (uintptr_t)vaddr,
	    .iova = iova,
	    .size = size,
	};
	int rc;

	if (c->backend == VFIO_BACKEND_NOIOMMU)
		return vfio_err(
		    -EOPNOTSUPP, err, errlen,
		    "vfio: no-IOMMU container maps nothing: DMA uses physical addresses");
	if (c->backend == VFIO_BACKEND_IOMMUFD && vfio_dma_args_ok(iova, size, (uintptr_t)vaddr))
		return vfio_iommufd_map(c, iova, size, vaddr, writable, err, errlen);
	if (c->backend != VFIO_BACKEND_TYPE1 && c->backend != VFIO_BACKEND_IOMMUFD)
		return vfio_err(-ENODEV, err, errlen,
				"vfio: container has no IOMMU yet: open a device first");
	if (!vfio_dma_args_ok(iova, size, (uintptr_t)vaddr))
		return vfio_err(-EINVAL, err, errlen,
				"vfio: DMA map iova %#llx size %#llx vaddr %p not page aligned or "
				"wraps",
				(unsigned long long)iova, (unsigned long long)size, vaddr);
	if (ioctl(c->fd, VFIO_IOMMU_MAP_DMA, &m)) {
		rc = -errno;
		vfio_err(-EINVAL, err, errlen, "vfio: DMA map iova %#llx size %#llx: %s",
			 (unsigned long long)iova, (unsigned long long)size, strerror(-rc));
		return rc;
	}
	return 0;
}

int vfio_dma_unmap(struct vfio_container *c, uint64_t iova, uint64_t size)
{
	struct vfio_iommu_type1_dma_unmap u = {.argsz = sizeof(u), .iova = iova, .size = size};

	if (c->backend == VFIO_BACKEND_NOIOMMU)
		return -EOPNOTSUPP;
	if (c->backend != VFIO_BACKEND_TYPE1 && c->backend != VFIO_BACKEND_IOMMUFD)
		return -ENODEV;
	if (!vfio_dma_args_ok(iova, size, 0))
		return -EINVAL;
	if (c->backend == VFIO_BACKEND_IOMMUFD)
		return vfio_iommufd_unmap(c, iova, size);
	if (ioctl(c->fd, VFIO_IOMMU_UNMAP_DMA, &u))
		return -errno;
	return u.size == size ? 0 : -ENOENT;
}

static int vfio_pagemap_fd = -1; /* vfio_pagemap_keep's */

int vfio_pagemap_keep(void)
{
	int fd;

	if (vfio_pagemap_fd >= 0)
		return 0;
	fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	vfio_pagemap_fd = fd;
	return 0;
}

int vfio_virt_to_phys_range(const void *vaddr, size_t npages, uint64_t *phys)
{
	uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
	uintptr_t va = (uintptr_t)vaddr;
	size_t i, len, done = 0;
	int fd, r = 0;

	if (!vaddr || !phys || !npages || va % pg || npages > SIZE_MAX / sizeof(*phys) ||
	    npages - 1 > (UINTPTR_MAX - va) / pg)
		return -EINVAL;
	fd = vfio_pagemap_fd >= 0 ? vfio_pagemap_fd
				  : open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* one read for the whole range: one entry of 8 bytes per page */
	len = npages * sizeof(*phys);
	while (done < len) {
		ssize_t n = pread(fd, (uint8_t *)phys + done, len - done,
				  (off_t)(va / pg * sizeof(*phys) + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			r = n < 0 ? -errno : -EIO;
			break;
		}
		done += (size_t)n;
	}
	if (fd != vfio_pagemap_fd)
		close(fd);
	for (i = 0; !r && i < npages; i++) {
		uint64_t ent = phys[i], pfn = ent & ((1ull << 55) - 1);

		if (!(ent >> 63 & 1))
			r = -EFAULT; /* not present: lock the pages first */
		else if (!pfn)
			r = -EPERM; /* frame numbers are hidden without CAP_SYS_ADMIN */
		else
			phys[i] = pfn * pg;
	}
	return r;
}

int vfio_virt_to_phys(const void *vaddr, uint64_t *phys)
{
	uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE), base;
	uintptr_t va = (uintptr_t)vaddr;
	int r = vfio_virt_to_phys_range((const void *)(va - va % pg), 1, &base);

	if (!r)
		*phys = base + va % pg;
	return r;
}

/* ---- interrupts and reset ---- */

static int vfio_irqs(struct vfio_device *d, unsigned index, uint32_t flags, unsigned start,
		     unsigned count, const int *fds)
{
	size_t len = sizeof(struct vfio_irq_set) + (fds ? count * sizeof(int32_t) : 0);
	struct vfio_irq_set *s;
	int rc = 0;

	if (index >= VFIO_NIRQS || !d->irqs[index].count)
		return -EINVAL;
	if (start > d->irqs[index].count || count > d->irqs[index].count - start)
		return -ERANGE;
	s = calloc(1, len);
	if (!s)
		return -ENOMEM;
	s->argsz = (uint32_t)len;
	s->flags = flags;
	s->index = index;
	s->start = start;
	s->count = count;
	for (unsigned i = 0; fds && i < count; i++)
		((int32_t *)s->data)[i] = fds[i];
	if (ioctl(d->fd, VFIO_DEVICE_SET_IRQS, s))
		rc = -errno;
	free(s);
	return rc;
}

int vfio_irq_set(struct vfio_device *d, unsigned index, unsigned start, unsigned count,
		 const int *fds)
{
	if (!count)
		return vfio_irq_disable(d, index);
	if (!fds)
		return -EINVAL;
	return vfio_irqs(d, index, VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_TRIGGER, start,
			 count, fds);
}

int vfio_irq_disable(struct vfio_device *d, unsigned index)
{
	return vfio_irqs(d, index, VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_ACTION_TRIGGER, 0, 0,
			 NULL);
}

int vfio_intx_unmask(struct vfio_device *d)
{
	return vfio_irqs(d, VFIO_PCI_INTX_IRQ_INDEX,
			 VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_ACTION_UNMASK, 0, 1, NULL);
}

int vfio_intx_unmask_fd(struct vfio_device *d, int resample_fd)
{
	return vfio_irqs(d, VFIO_PCI_INTX_IRQ_INDEX,
			 VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_UNMASK, 0, 1,
			 &resample_fd);
}

int vfio_intx_mask(struct vfio_device *d)
{
	return vfio_irqs(d, VFIO_PCI_INTX_IRQ_INDEX,
			 VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_ACTION_MASK, 0, 1, NULL);
}

int vfio_device_reset(struct vfio_device *d)
{
	if (!(d->flags & VFIO_DEVICE_FLAGS_RESET))
		return -ENOTTY;
	return ioctl(d->fd, VFIO_DEVICE_RESET) ? -errno : 0;
}
