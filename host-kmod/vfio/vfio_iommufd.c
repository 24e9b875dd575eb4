/* The iommufd backend of the VFIO library: /dev/iommu with one IO address space (IOAS) per
 * container, devices through their cdev (/dev/vfio/devices/vfioN) bound and attached to it, DMA
 * maps at fixed IOVAs; and the choice between it and the legacy container (docs/vfio.md). */
#include "iommufd_uapi.h"
#include "vfio.h"
#include "vfio_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#define IOMMUFD_MAX_RANGES 64 /* more allowed IOVA ranges than this is a kernel we do not trust */

static int vfio_sys_open(const char *path, int flags)
{
	return open(path, flags);
}

static int vfio_sys_ioctl(int fd, unsigned long req, void *arg)
{
	return ioctl(fd, req, arg);
}

static int vfio_sys_close(int fd)
{
	return close(fd);
}

static const struct vfio_sys vfio_sys_real = {
    .open = vfio_sys_open,
    .ioctl = vfio_sys_ioctl,
    .close = vfio_sys_close,
    .sysfs = "/sys",
    .dev = "/dev",
};

const struct vfio_sys *vfio_sys = &vfio_sys_real;

static bool vfio_path_exists(const char *root, const char *rel)
{
	char path[512];
	struct stat st;

	snprintf(path, sizeof(path), "%s%s", root, rel);
	return !stat(path, &st);
}

/* The cdev name (vfioN) of bdf from SYSFS/bus/pci/devices/BDF/vfio-dev/: 0 or -ENOENT. */
static int vfio_cdev_name(const char *bdf, char *name, size_t len)
{
	char path[512];
	struct dirent *de;
	DIR *dir;
	int rc = -ENOENT;

	snprintf(path, sizeof(path), "%s/bus/pci/devices/%s/vfio-dev", vfio_sys->sysfs, bdf);
	dir = opendir(path);
	if (!dir)
		return -ENOENT;
	while ((de = readdir(dir))) {
		const char *p = de->d_name + 4;

		if (strncmp(de->d_name, "vfio", 4) || !*p || strlen(de->d_name) >= len)
			continue;
		while (*p >= '0' && *p <= '9')
			p++;
		if (*p)
			continue;
		snprintf(name, len, "%s", de->d_name);
		rc = 0;
		break;
	}
	closedir(dir);
	return rc;
}

enum vfio_backend vfio_backend_choose(const char *bdf, bool allow_noiommu)
{
	const char *o = getenv("LVMM_VFIO_BACKEND");
	char name[64];

	if (o && !strcmp(o, "iommufd"))
		return VFIO_BACKEND_IOMMUFD;
	if (o && !strcmp(o, "legacy"))
		return VFIO_BACKEND_TYPE1;
	/* no-IOMMU devices take the legacy container's no-IOMMU type */
	if (allow_noiommu || !vfio_path_exists(vfio_sys->dev, "/iommu") ||
	    !vfio_path_exists(vfio_sys->dev, "/vfio/devices"))
		return VFIO_BACKEND_TYPE1;
	if (bdf && vfio_cdev_name(bdf, name, sizeof(name)))
		return VFIO_BACKEND_TYPE1;
	return VFIO_BACKEND_IOMMUFD;
}

int vfio_iommufd_open(struct vfio_container *c, char *err, unsigned errlen)
{
	struct iommufd_ioas_alloc a = {.size = sizeof(a)};
	char path[512];
	int e;

	memset(c, 0, sizeof(*c));
	for (unsigned i = 0; i < VFIO_MAX_GROUPS; i++)
		c->groups[i].fd = -1;
	snprintf(path, sizeof(path), "%s/iommu", vfio_sys->dev);
	c->fd = vfio_sys->open(path, O_RDWR | O_CLOEXEC);
	if (c->fd < 0) {
		e = errno ? errno : EIO;
		return vfio_err(-e, err, errlen, "vfio iommufd: %s: %s", path, strerror(e));
	}
	if (vfio_sys->ioctl(c->fd, IOMMUFD_IOC_IOAS_ALLOC, &a)) {
		e = errno ? errno : EIO;
		vfio_sys->close(c->fd);
		c->fd = -1;
		return vfio_err(-e, err, errlen, "vfio iommufd: IOAS alloc on %s: %s", path,
				strerror(e));
	}
	c->ioas = a.out_ioas_id;
	c->backend = VFIO_BACKEND_IOMMUFD;
	return 0;
}

void vfio_iommufd_close(struct vfio_container *c)
{
	struct iommufd_destroy d = {.size = sizeof(d), .id = c->ioas};

	if (c->fd >= 0) {
		vfio_sys->ioctl(c->fd, IOMMUFD_IOC_DESTROY, &d);
		vfio_sys->close(c->fd);
	}
	c->fd = -1;
	c->ioas = 0;
	c->backend = VFIO_BACKEND_NONE;
}

int vfio_iommufd_device_bind(struct vfio_container *c, const char *bdf, int *fdp, char *err,
			     unsigned errlen)
{
	struct vfio_cdev_bind_iommufd b = {.argsz = sizeof(b), .iommufd = c->fd};
	struct vfio_cdev_attach_pt a = {.argsz = sizeof(a), .pt_id = c->ioas};
	char name[64], path[512];
	int fd, e;

	*fdp = -1;
	if (vfio_cdev_name(bdf, name, sizeof(name)))
		return vfio_err(-ENODEV, err, errlen,
				"vfio %s: no VFIO cdev in %s/bus/pci/devices/%s/vfio-dev (bound to "
				"vfio-pci? LVMM_VFIO_BACKEND=legacy uses the legacy container)",
				bdf, vfio_sys->sysfs, bdf);
	snprintf(path, sizeof(path), "%s/vfio/devices/%s", vfio_sys->dev, name);
	fd = vfio_sys->open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		e = errno ? errno : EIO;
		return vfio_err(-e, err, errlen, "vfio %s: %s: %s", bdf, path, strerror(e));
	}
	if (vfio_sys->ioctl(fd, VFIO_CDEV_IOC_BIND_IOMMUFD, &b)) {
		e = errno ? errno : EIO;
		vfio_sys->close(fd);
		return vfio_err(-e, err, errlen, "vfio %s: bind %s to iommufd: %s", bdf, path,
				strerror(e));
	}
	if (vfio_sys->ioctl(fd, VFIO_CDEV_IOC_ATTACH_PT, &a)) {
		e = errno ? errno : EIO;
		vfio_sys->close(fd); /* closing the cdev unbinds it */
		return vfio_err(-e, err, errlen, "vfio %s: attach to IOAS %u: %s", bdf, c->ioas,
				strerror(e));
	}
	*fdp = fd;
	return 0;
}

void vfio_iommufd_device_release(int fd)
{
	struct vfio_cdev_detach_pt d = {.argsz = sizeof(d)};

	if (fd < 0)
		return;
	vfio_sys->ioctl(fd, VFIO_CDEV_IOC_DETACH_PT, &d);
	vfio_sys->close(fd);
}

int vfio_iommufd_iova_fits(struct vfio_container *c, uint64_t iova, uint64_t size, char *err,
			   unsigned errlen)
{
	struct iommufd_iova_range r[IOMMUFD_MAX_RANGES];
	struct iommufd_ioas_iova_ranges q = {
	    .size = sizeof(q),
	    .ioas_id = c->ioas,
	    .num_iovas = IOMMUFD_MAX_RANGES,
	    .allowed_iovas = (uintptr_t)r,
	};
	uint64_t last = iova + size - 1;
	int e;

	memset(r, 0, sizeof(r));
	if (vfio_sys->ioctl(c->fd, IOMMUFD_IOC_IOAS_IOVA_RANGES, &q)) {
		e = errno ? errno : EIO;
		if (e == EMSGSIZE)
			return vfio_err(-EMSGSIZE, err, errlen,
					"vfio iommufd: IOAS %u has %u IOVA ranges, more than %u",
					c->ioas, q.num_iovas, IOMMUFD_MAX_RANGES);
		return vfio_err(-e, err, errlen, "vfio iommufd: IOVA ranges of IOAS %u: %s",
				c->ioas, strerror(e));
	}
	if (q.num_iovas > IOMMUFD_MAX_RANGES)
		return vfio_err(-EPROTO, err, errlen,
				"vfio iommufd: IOAS %u answered %u IOVA ranges for %u", c->ioas,
				q.num_iovas, IOMMUFD_MAX_RANGES);
	for (unsigned i = 0; i < q.num_iovas; i++)
		if (r[i].start <= iova && last <= r[i].last)
			return 0;
	return vfio_err(-ERANGE, err, errlen,
			"vfio iommufd: IOVA %#llx-%#llx (guest RAM at IOVA = GPA) outside IOAS "
			"%u's %u allowed ranges",
			(unsigned long long)iova, (unsigned long long)last, c->ioas, q.num_iovas);
}

int vfio_iommufd_map(struct vfio_container *c, uint64_t iova, uint64_t size, void *vaddr,
		     bool writable, char *err, unsigned errlen)
{
	struct iommufd_ioas_map m = {
	    .size = sizeof(m),
	    .flags = IOMMUFD_MAP_FIXED_IOVA | IOMMUFD_MAP_READABLE |
		     (writable ? IOMMUFD_MAP_WRITEABLE : 0),
	    .ioas_id = c->ioas,
	    .user_va = (uintptr_t)vaddr,
	    .length = size,
	    .iova = iova,
	};
	int rc, e;

	rc = vfio_iommufd_iova_fits(c, iova, size, err, errlen);
	if (rc)
		return rc;
	if (vfio_sys->ioctl(c->fd, IOMMUFD_IOC_IOAS_MAP, &m)) {
		e = errno ? errno : EIO;
		return vfio_err(-e, err, errlen,
				"vfio iommufd: IOAS %u map iova %#llx size %#llx: %s", c->ioas,
				(unsigned long long)iova, (unsigned long long)size, strerror(e));
	}
	if (m.iova != iova) { /* FIXED_IOVA: the kernel must not move it */
		struct iommufd_ioas_unmap u = {
		    .size = sizeof(u), .ioas_id = c->ioas, .iova = m.iova, .length = size};

		vfio_sys->ioctl(c->fd, IOMMUFD_IOC_IOAS_UNMAP, &u);
		return vfio_err(-EPROTO, err, errlen,
				"vfio iommufd: IOAS %u mapped iova %#llx at %#llx", c->ioas,
				(unsigned long long)iova, (unsigned long long)m.iova);
	}
	return 0;
}

int vfio_iommufd_unmap(struct vfio_container *c, uint64_t iova, uint64_t size)
{
	struct iommufd_ioas_unmap u = {
	    .size = sizeof(u), .ioas_id = c->ioas, .iova = iova, .length = size};

	if (vfio_sys->ioctl(c->fd, IOMMUFD_IOC_IOAS_UNMAP, &u))
		return errno ? -errno : -EIO;
	return u.length == size ? 0 : -ENOENT;
}
