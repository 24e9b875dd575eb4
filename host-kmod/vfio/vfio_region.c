/* The user-space VFIO library (vfio.h): PCI addresses, region info with its capability chain
 * (checked, pure), region reads and writes, and mmap of the mmap-able areas. */
#include "vfio.h"
#include "vfio_internal.h"

#include <errno.h>
#include <linux/vfio.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- pure parsing ---- */

static bool vfio_hex(const char *s, size_t n, unsigned *v)
{
	*v = 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		unsigned d;

		if (c >= '0' && c <= '9')
			d = (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			d = (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			d = (unsigned)(c - 'A' + 10);
		else
			return false;
		*v = *v * 16 + d;
	}
	return true;
}

int vfio_parse_bdf(const char *spec, char *bdf, size_t len, char *err, unsigned errlen)
{
	static const char sysfs[] = "/sys/bus/pci/devices/";
	unsigned dom = 0, bus, dev, fn;
	const char *s = spec;
	size_t n;

	if (!spec)
		return vfio_err(-EINVAL, err, errlen, "vfio: no PCI address given");
	if (!strncmp(s, sysfs, sizeof(sysfs) - 1))
		s += sizeof(sysfs) - 1;
	n = strlen(s);
	if (n && s[n - 1] == '/')
		n--;
	/* DDDD:BB:DD.F or BB:DD.F */
	if (n == 12 && s[4] == ':') {
		if (!vfio_hex(s, 4, &dom))
			goto bad;
		s += 5;
		n -= 5;
	}
	if (n != 7 || s[2] != ':' || s[5] != '.' || !vfio_hex(s, 2, &bus) ||
	    !vfio_hex(s + 3, 2, &dev) || !vfio_hex(s + 6, 1, &fn) || dev > 0x1f || fn > 7)
		goto bad;
	if (len < 13)
		return vfio_err(-EINVAL, err, errlen,
				"vfio: PCI address buffer of %zu bytes too small", len);
	snprintf(bdf, len, "%04x:%02x:%02x.%x", dom, bus, dev, fn);
	return 0;
bad:
	return vfio_err(
	    -EINVAL, err, errlen,
	    "vfio: '%.64s' is not a PCI address (DDDD:BB:DD.F or /sys/bus/pci/devices/...)", spec);
}

static void vfio_region_whole(struct vfio_region *r)
{
	r->nsparse = 0;
	if (r->flags & VFIO_REGION_INFO_FLAG_MMAP && r->size) {
		r->sparse[0] = (struct vfio_sparse){0, r->size};
		r->nsparse = 1;
	}
}

/* The sparse-mmap capability at off (its header already inside len). */
static int vfio_parse_sparse(struct vfio_region *r, const uint8_t *buf, size_t len, size_t off,
			     char *err, unsigned errlen)
{
	size_t hdr = sizeof(struct vfio_region_info_cap_sparse_mmap);
	uint32_t nr;

	if (len - off < hdr)
		return vfio_err(-EINVAL, err, errlen,
				"vfio region %u: sparse-mmap capability at %zu past %zu", r->index,
				off, len);
	memcpy(&nr, buf + off + offsetof(struct vfio_region_info_cap_sparse_mmap, nr_areas),
	       sizeof(nr));
	if (nr > (len - off - hdr) / sizeof(struct vfio_region_sparse_mmap_area))
		return vfio_err(-EINVAL, err, errlen,
				"vfio region %u: %u sparse-mmap areas at %zu past %zu", r->index,
				nr, off, len);
	r->nsparse = 0;
	for (uint32_t i = 0; i < nr; i++) {
		struct vfio_region_sparse_mmap_area a;

		memcpy(&a, buf + off + hdr + i * sizeof(a), sizeof(a));
		if (a.offset > r->size || a.size > r->size - a.offset)
			return vfio_err(-EINVAL, err, errlen,
					"vfio region %u: sparse area %u [%#llx +%#llx) outside its "
					"%#llx bytes",
					r->index, i, (unsigned long long)a.offset,
					(unsigned long long)a.size, (unsigned long long)r->size);
		if (a.size && r->nsparse < VFIO_MAX_SPARSE)
			r->sparse[r->nsparse++] = (struct vfio_sparse){a.offset, a.size};
	}
	return 0;
}

int vfio_region_parse(struct vfio_region *r, unsigned index, const void *info, size_t len,
		      char *err, unsigned errlen)
{
	const uint8_t *buf = info;
	struct vfio_region_info ri;
	size_t off, prev;
	bool sparse = false;

	memset(r, 0, sizeof(*r));
	r->index = index;
	if (!info || len < sizeof(ri))
		return vfio_err(-EINVAL, err, errlen,
				"vfio region %u: info of %zu bytes, %zu needed", index, len,
				sizeof(ri));
	memcpy(&ri, buf, sizeof(ri));
	if (ri.index != index)
		return vfio_err(-EINVAL, err, errlen,
				"vfio region %u: kernel answered for index %u", index, ri.index);
	if (ri.argsz < len)
		len = ri.argsz < sizeof(ri) ? sizeof(ri) : ri.argsz;
	if (ri.size > (uint64_t)INT64_MAX || ri.offset > (uint64_t)INT64_MAX - ri.size)
		return vfio_err(-EINVAL, err, errlen,
				"vfio region %u: offset %#llx + size %#llx overflows", index,
				(unsigned long long)ri.offset, (unsigned long long)ri.size);
	r->flags = ri.flags;
	r->size = ri.size;
	r->offset = ri.offset;
	vfio_region_whole(r);
	if (!(ri.flags & VFIO_REGION_INFO_FLAG_CAPS) || !ri.cap_offset)
		return 0;
	/* Offsets count from the info's start; each capability lies after the one before it. */
	for (off = ri.cap_offset, prev = sizeof(ri) - 1; off;) {
		struct vfio_info_cap_header h;

		if (off <= prev || off > len || len - off < sizeof(h))
			return vfio_err(-EINVAL, err, errlen,
					"vfio region %u: capability at %zu outside (%zu, %zu]",
					index, off, prev, len);
		memcpy(&h, buf + off, sizeof(h));
		if (h.id == VFIO_REGION_INFO_CAP_SPARSE_MMAP) {
			int rc;

			if (sparse)
				return vfio_err(
				    -EINVAL, err, errlen,
				    "vfio region %u: second sparse-mmap capability at %zu", index,
				    off);
			sparse = true;
			rc = vfio_parse_sparse(r, buf, len, off, err, errlen);
			if (rc)
				return rc;
		}
		prev = off;
		off = h.next;
	}
	/* Without MMAP the areas say nothing: nothing is mmap-able. */
	if (!(ri.flags & VFIO_REGION_INFO_FLAG_MMAP))
		r->nsparse = 0;
	return 0;
}

/* ---- region access ---- */

static const struct vfio_region *vfio_region_at(const struct vfio_device *d, unsigned region,
						uint64_t off, uint64_t len, uint32_t need)
{
	const struct vfio_region *r;

	if (region >= VFIO_NREGIONS) {
		errno = EINVAL;
		return NULL;
	}
	r = &d->regions[region];
	if (!r->size || !(r->flags & need)) {
		errno = r->size ? EACCES : ENODEV;
		return NULL;
	}
	if (off > r->size || len > r->size - off) {
		errno = ERANGE;
		return NULL;
	}
	return r;
}

int vfio_region_read(struct vfio_device *d, unsigned region, uint64_t off, void *buf, size_t len)
{
	const struct vfio_region *r =
	    vfio_region_at(d, region, off, len, VFIO_REGION_INFO_FLAG_READ);
	ssize_t n;

	if (!r)
		return -errno;
	do
		n = pread(d->fd, buf, len, (off_t)(r->offset + off));
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EIO;
}

int vfio_region_write(struct vfio_device *d, unsigned region, uint64_t off, const void *buf,
		      size_t len)
{
	const struct vfio_region *r =
	    vfio_region_at(d, region, off, len, VFIO_REGION_INFO_FLAG_WRITE);
	ssize_t n;

	if (!r)
		return -errno;
	do
		n = pwrite(d->fd, buf, len, (off_t)(r->offset + off));
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EIO;
}

int vfio_cfg_read(struct vfio_device *d, unsigned off, void *buf, size_t len)
{
	return vfio_region_read(d, VFIO_PCI_CONFIG_REGION_INDEX, off, buf, len);
}

int vfio_cfg_write(struct vfio_device *d, unsigned off, const void *buf, size_t len)
{
	return vfio_region_write(d, VFIO_PCI_CONFIG_REGION_INDEX, off, buf, len);
}

void *vfio_region_mmap(struct vfio_device *d, unsigned region, uint64_t off, uint64_t size,
		       int prot)
{
	const struct vfio_region *r =
	    vfio_region_at(d, region, off, size, VFIO_REGION_INFO_FLAG_MMAP);
	long pg = sysconf(_SC_PAGESIZE);
	void *p;

	if (!r)
		return NULL;
	if (!size || (r->offset + off) % (uint64_t)pg) {
		errno = EINVAL;
		return NULL;
	}
	for (unsigned i = 0; i < r->nsparse; i++) {
		const struct vfio_sparse *a = &r->sparse[i];

		if (off >= a->offset && size <= a->size && off - a->offset <= a->size - size) {
			p = mmap(NULL, size, prot, MAP_SHARED, d->fd, (off_t)(r->offset + off));
			return p == MAP_FAILED ? NULL : p;
		}
	}
	errno = EACCES; /* not inside one mmap-able area (the MSI-X table, say) */
	return NULL;
}
