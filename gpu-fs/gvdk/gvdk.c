/* libgvdk: creates a fully allocated GVDK file, builds its block map from FIEMAP and the partition
 * offset, and loads a file back refusing anything corrupt, truncated or stale. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>
#include <linux/fiemap.h>
#include <linux/fs.h>

#include "gvdk.h"

__attribute__((format(printf, 3, 4))) static int gvdk_fail(char *err, int rc, const char *fmt, ...)
{
	va_list ap;

	if (err) {
		va_start(ap, fmt);
		vsnprintf(err, GVDK_ERRLEN, fmt, ap);
		va_end(ap);
	}
	return rc;
}

uint32_t gvdk_crc32c(uint32_t crc, const void *buf, size_t len)
{
	static uint32_t table[256];
	static int ready;
	const uint8_t *p = buf;

	if (!ready) {
		for (uint32_t i = 0; i < 256; i++) {
			uint32_t c = i;

			for (int k = 0; k < 8; k++)
				c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
			table[i] = c;
		}
		__atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
	}
	crc = ~crc;
	while (len--)
		crc = table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

int gvdk_parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	int shift = 0;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s || *s == '-')
		return -EINVAL;
	switch (*end) {
	case 'k':
	case 'K':
		shift = 10;
		end++;
		break;
	case 'm':
	case 'M':
		shift = 20;
		end++;
		break;
	case 'g':
	case 'G':
		shift = 30;
		end++;
		break;
	case 't':
	case 'T':
		shift = 40;
		end++;
		break;
	default:
		break;
	}
	if (*end == 'i' && shift)
		end++;
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end || (shift && v > (UINT64_MAX >> shift)))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

int gvdk_fiemap(int fd, uint64_t len, struct gvdk_extent **out, size_t *n, char *err)
{
	const unsigned batch = 256;
	struct fiemap *fm;
	struct gvdk_extent *ext = NULL;
	size_t cnt = 0, cap = 0;
	uint64_t start = 0;
	int last = 0;

	fm = calloc(1, sizeof(*fm) + batch * sizeof(struct fiemap_extent));
	if (!fm)
		return gvdk_fail(err, -ENOMEM, "fiemap: out of memory");
	while (!last && start < len) {
		memset(fm, 0, sizeof(*fm));
		fm->fm_start = start;
		fm->fm_length = len - start;
		fm->fm_flags = FIEMAP_FLAG_SYNC;
		fm->fm_extent_count = batch;
		if (ioctl(fd, FS_IOC_FIEMAP, fm) < 0) {
			int e = errno;

			free(fm);
			free(ext);
			return gvdk_fail(err, -e,
					 "fiemap: FS_IOC_FIEMAP failed: %s (file system cannot "
					 "report block locations)",
					 strerror(e));
		}
		if (fm->fm_mapped_extents == 0)
			break;
		for (unsigned i = 0; i < fm->fm_mapped_extents; i++) {
			struct fiemap_extent *fe = &fm->fm_extents[i];

			if (cnt == cap) {
				struct gvdk_extent *nx;

				cap = cap ? cap * 2 : 64;
				nx = realloc(ext, cap * sizeof(*ext));
				if (!nx) {
					free(fm);
					free(ext);
					return gvdk_fail(err, -ENOMEM, "fiemap: out of memory");
				}
				ext = nx;
			}
			ext[cnt++] = (struct gvdk_extent){fe->fe_logical, fe->fe_physical,
							  fe->fe_length, fe->fe_flags};
			if (fe->fe_flags & FIEMAP_EXTENT_LAST)
				last = 1;
			start = fe->fe_logical + fe->fe_length;
		}
	}
	free(fm);
	*out = ext;
	*n = cnt;
	return 0;
}

static const struct {
	uint32_t flag;
	const char *why;
} gvdk_bad_flags[] = {
    {FIEMAP_EXTENT_UNKNOWN, "location unknown"},
    {FIEMAP_EXTENT_DELALLOC, "delayed allocation"},
    {FIEMAP_EXTENT_ENCODED, "encoded (compressed)"},
    {FIEMAP_EXTENT_DATA_ENCRYPTED, "encrypted"},
    {FIEMAP_EXTENT_NOT_ALIGNED, "not block aligned"},
    {FIEMAP_EXTENT_DATA_INLINE, "inline in metadata"},
    {FIEMAP_EXTENT_DATA_TAIL, "packed tail"},
    {FIEMAP_EXTENT_UNWRITTEN, "unwritten (preallocated, reads as zeros)"},
    {FIEMAP_EXTENT_SHARED, "shared (reflinked or snapshotted)"},
};

int gvdk_extents_check(const struct gvdk_extent *ext, size_t n, uint64_t len, uint32_t align,
		       char *err)
{
	uint64_t pos = 0;

	for (size_t i = 0; i < n; i++) {
		const struct gvdk_extent *e = &ext[i];

		for (size_t k = 0; k < sizeof(gvdk_bad_flags) / sizeof(gvdk_bad_flags[0]); k++)
			if (e->flags & gvdk_bad_flags[k].flag)
				return gvdk_fail(err, -EXDEV,
						 "extent at file offset %llu: %s, cannot "
						 "be addressed by the GPU",
						 (unsigned long long)e->logical,
						 gvdk_bad_flags[k].why);
		if (e->logical % align || e->physical % align || e->length % align)
			return gvdk_fail(err, -EXDEV,
					 "extent at file offset %llu (device %llu, %llu "
					 "bytes) is not aligned to %u",
					 (unsigned long long)e->logical,
					 (unsigned long long)e->physical,
					 (unsigned long long)e->length, align);
		if (e->logical > pos)
			return gvdk_fail(
			    err, -EXDEV, "hole at file offset %llu (%llu bytes unallocated)",
			    (unsigned long long)pos, (unsigned long long)(e->logical - pos));
		if (e->logical < pos)
			return gvdk_fail(err, -EXDEV,
					 "extent at file offset %llu overlaps the previous one",
					 (unsigned long long)e->logical);
		if (e->length == 0 || e->physical + e->length < e->physical)
			return gvdk_fail(
			    err, -EXDEV, "extent at file offset %llu has bad length %llu",
			    (unsigned long long)e->logical, (unsigned long long)e->length);
		pos = e->logical + e->length;
	}
	if (pos < len)
		return gvdk_fail(err, -EXDEV, "hole at file offset %llu (%llu bytes unallocated)",
				 (unsigned long long)pos, (unsigned long long)(len - pos));
	return 0;
}

int gvdk_extents_translate(const struct gvdk_extent *ext, size_t n, uint64_t off, uint64_t *dev)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (off < ext[mid].logical)
			hi = mid;
		else if (off >= ext[mid].logical + ext[mid].length)
			lo = mid + 1;
		else {
			*dev = ext[mid].physical + (off - ext[mid].logical);
			return 0;
		}
	}
	return -ERANGE;
}

int gvdk_part_start(dev_t dev, uint64_t *start, char *err)
{
	char path[128], buf[64];
	ssize_t r;
	int fd;

	if (major(dev) == 0)
		return gvdk_fail(err, -EXDEV,
				 "device %u:%u is anonymous (tmpfs, overlay, btrfs "
				 "subvolume or network file system): no block device to address",
				 major(dev), minor(dev));
	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u", major(dev), minor(dev));
	if (access(path, F_OK) != 0)
		return gvdk_fail(err, -EXDEV, "device %u:%u is not a block device (%s missing)",
				 major(dev), minor(dev), path);
	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/start", major(dev), minor(dev));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		/* a whole disk has no start attribute */
		*start = 0;
		return 0;
	}
	r = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (r <= 0)
		return gvdk_fail(err, -EIO, "%s: unreadable", path);
	buf[r] = 0;
	*start = strtoull(buf, NULL, 10) * 512ull;
	return 0;
}

/* The file must be on opts->device itself, or on a partition of that disk. */
static int gvdk_check_device(dev_t fdev, const char *device, char *err)
{
	struct stat st;
	char path[160], link[PATH_MAX], wanted[32];
	ssize_t r;

	if (stat(device, &st) < 0)
		return gvdk_fail(err, -errno, "device %s: %s", device, strerror(errno));
	if (!S_ISBLK(st.st_mode))
		return gvdk_fail(err, -ENOTBLK, "device %s is not a block device", device);
	if (st.st_rdev == fdev)
		return 0;
	snprintf(wanted, sizeof(wanted), "%u:%u", major(st.st_rdev), minor(st.st_rdev));
	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/../dev", major(fdev), minor(fdev));
	r = -1;
	{
		int fd = open(path, O_RDONLY | O_CLOEXEC);

		if (fd >= 0) {
			r = read(fd, link, sizeof(link) - 1);
			close(fd);
		}
	}
	if (r > 0) {
		link[r] = 0;
		link[strcspn(link, "\n")] = 0;
		if (!strcmp(link, wanted))
			return 0;
	}
	return gvdk_fail(err, -EXDEV,
			 "file is on device %u:%u, not on the configured device %s (%s)",
			 major(fdev), minor(fdev), device, wanted);
}

struct gvdk_geom {
	uint64_t nblocks, l2_tables, l2_offset, data_offset, file_size;
};

static int gvdk_geometry(uint64_t size, uint32_t bs, struct gvdk_geom *g)
{
	uint64_t per = bs / 8, l1_end;

	g->nblocks = size / bs + (size % bs != 0);
	if (g->nblocks == 0 || g->nblocks > (UINT64_MAX / 4) / bs)
		return -EINVAL;
	g->l2_tables = g->nblocks / per + (g->nblocks % per != 0);
	if (g->l2_tables > UINT32_MAX)
		return -EFBIG;
	l1_end = GVDK_HEADER_SIZE + 8 * g->l2_tables;
	g->l2_offset = (l1_end + bs - 1) / bs * bs;
	g->data_offset = g->l2_offset + g->l2_tables * bs;
	g->file_size = g->data_offset + g->nblocks * bs;
	return 0;
}

static int gvdk_write_all(int fd, const void *buf, size_t len, uint64_t off)
{
	const char *p = buf;

	while (len) {
		ssize_t w = pwrite(fd, p, len, (off_t)off);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		len -= (size_t)w;
		off += (uint64_t)w;
	}
	return 0;
}

static int gvdk_read_all(int fd, void *buf, size_t len, uint64_t off)
{
	char *p = buf;

	while (len) {
		ssize_t r = pread(fd, p, len, (off_t)off);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			return -ENODATA;
		p += r;
		len -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

/* Device offsets of every data block from the file's current extents. */
static int gvdk_build_l2(int fd, const struct gvdk_header *h, uint64_t *l2, char *err)
{
	struct gvdk_extent *ext = NULL;
	size_t n = 0;
	int rc;

	rc = gvdk_fiemap(fd, h->file_size, &ext, &n, err);
	if (rc)
		return rc;
	rc = gvdk_extents_check(ext, n, h->file_size, h->block_size < 4096 ? h->block_size : 4096,
				err);
	for (uint64_t b = 0; !rc && b < (uint64_t)h->l2_tables * h->per_l2; b++) {
		uint64_t dev;

		if (b >= h->nblocks) {
			l2[b] = GVDK_ENTRY_INVALID;
			continue;
		}
		if (gvdk_extents_translate(ext, n, h->data_offset + b * h->block_size, &dev)) {
			rc = gvdk_fail(err, -EXDEV, "data block %llu has no extent",
				       (unsigned long long)b);
			break;
		}
		/* a block must be physically contiguous: one device offset covers it */
		for (uint64_t o = 4096; o < h->block_size; o += 4096) {
			uint64_t d2;

			if (gvdk_extents_translate(ext, n, h->data_offset + b * h->block_size + o,
						   &d2) ||
			    d2 != dev + o) {
				rc = gvdk_fail(err, -EXDEV,
					       "data block %llu (%u bytes) is split "
					       "across extents; use a smaller --block-size",
					       (unsigned long long)b, h->block_size);
				break;
			}
		}
		l2[b] = h->part_start + dev;
	}
	free(ext);
	return rc;
}

int gvdk_create(const char *path, uint64_t size, const struct gvdk_create_opts *opts, char *err)
{
	uint32_t bs = opts && opts->block_size ? opts->block_size : 4096;
	struct gvdk_header h;
	struct gvdk_geom g;
	struct stat st;
	uint64_t *l1 = NULL, *l2 = NULL, part;
	void *zero = NULL;
	size_t zlen = 1 << 20;
	int fd, rc;

	if (bs < GVDK_MIN_BLOCK || bs > GVDK_MAX_BLOCK || (bs & (bs - 1)))
		return gvdk_fail(err, -EINVAL, "%s: block size %u is not a power of two in 4K..1M",
				 path, bs);
	if (size == 0 || gvdk_geometry(size, bs, &g))
		return gvdk_fail(err, -EINVAL, "%s: size %llu is out of range", path,
				 (unsigned long long)size);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | (opts && opts->force ? O_TRUNC : O_EXCL),
		  0644);
	if (fd < 0)
		return gvdk_fail(err, -errno, "%s: %s", path, strerror(errno));
	if (fstat(fd, &st) < 0) {
		rc = gvdk_fail(err, -errno, "%s: stat: %s", path, strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = gvdk_fail(err, -EINVAL, "%s: not a regular file", path);
		goto out;
	}
	rc = gvdk_part_start(st.st_dev, &part, err);
	if (rc)
		goto out;
	if (opts && opts->device && (rc = gvdk_check_device(st.st_dev, opts->device, err)))
		goto out;

	/* write every byte: fallocate alone leaves unwritten extents a device would read as junk */
	zero = calloc(1, zlen);
	if (!zero) {
		rc = gvdk_fail(err, -ENOMEM, "%s: out of memory", path);
		goto out;
	}
	for (uint64_t off = 0; off < g.file_size; off += zlen) {
		size_t len = g.file_size - off < zlen ? g.file_size - off : zlen;

		rc = gvdk_write_all(fd, zero, len, off);
		if (rc) {
			gvdk_fail(err, rc, "%s: writing %llu bytes: %s", path,
				  (unsigned long long)g.file_size, strerror(-rc));
			goto out;
		}
	}
	if (fsync(fd) < 0) {
		rc = gvdk_fail(err, -errno, "%s: fsync: %s", path, strerror(errno));
		goto out;
	}

	memset(&h, 0, sizeof(h));
	h.magic = GVDK_MAGIC;
	h.version = GVDK_VERSION;
	h.header_size = GVDK_HEADER_SIZE;
	h.block_size = bs;
	h.file_size = g.file_size;
	h.data_offset = g.data_offset;
	h.data_size = g.nblocks * bs;
	h.nblocks = g.nblocks;
	h.l1_offset = GVDK_HEADER_SIZE;
	h.l2_offset = g.l2_offset;
	h.l2_tables = (uint32_t)g.l2_tables;
	h.per_l2 = bs / 8;
	h.dev_major = major(st.st_dev);
	h.dev_minor = minor(st.st_dev);
	h.part_start = part;
	h.ino = st.st_ino;
	h.created = (uint64_t)time(NULL);

	l1 = calloc(g.l2_tables, 8);
	l2 = calloc(g.l2_tables * h.per_l2, 8);
	if (!l1 || !l2) {
		rc = gvdk_fail(err, -ENOMEM, "%s: out of memory for the map", path);
		goto out;
	}
	for (uint64_t i = 0; i < g.l2_tables; i++)
		l1[i] = g.l2_offset + i * bs;
	rc = gvdk_build_l2(fd, &h, l2, err);
	if (rc)
		goto out;
	h.map_crc = gvdk_crc32c(0, l1, g.l2_tables * 8);
	h.map_crc = gvdk_crc32c(h.map_crc, l2, g.l2_tables * h.per_l2 * 8);
	h.header_crc = gvdk_crc32c(0, &h, sizeof(h));
	rc = gvdk_write_all(fd, &h, sizeof(h), 0);
	if (!rc)
		rc = gvdk_write_all(fd, l1, g.l2_tables * 8, h.l1_offset);
	if (!rc)
		rc = gvdk_write_all(fd, l2, g.l2_tables * h.per_l2 * 8, h.l2_offset);
	if (rc) {
		gvdk_fail(err, rc, "%s: writing the map: %s", path, strerror(-rc));
		goto out;
	}
	if (fsync(fd) < 0)
		rc = gvdk_fail(err, -errno, "%s: fsync: %s", path, strerror(errno));
out:
	free(zero);
	free(l1);
	free(l2);
	close(fd);
	if (rc)
		unlink(path);
	return rc;
}

/* Every field must agree with the geometry derived from data_size and block_size. */
static int gvdk_header_check(const char *path, const struct gvdk_header *h, char *err)
{
	struct gvdk_geom g;

	if (h->block_size < GVDK_MIN_BLOCK || h->block_size > GVDK_MAX_BLOCK ||
	    (h->block_size & (h->block_size - 1)))
		return gvdk_fail(err, -EBADMSG, "%s: block size %u invalid", path, h->block_size);
	if (h->header_size != GVDK_HEADER_SIZE || h->per_l2 != h->block_size / 8 ||
	    h->l1_offset != GVDK_HEADER_SIZE)
		return gvdk_fail(err, -EBADMSG, "%s: header layout fields invalid", path);
	if (h->data_size % h->block_size || h->data_size / h->block_size != h->nblocks ||
	    gvdk_geometry(h->data_size, h->block_size, &g))
		return gvdk_fail(err, -EBADMSG, "%s: data size %llu invalid for %llu blocks", path,
				 (unsigned long long)h->data_size, (unsigned long long)h->nblocks);
	if (g.l2_tables != h->l2_tables || g.l2_offset != h->l2_offset ||
	    g.data_offset != h->data_offset || g.file_size != h->file_size)
		return gvdk_fail(err, -EBADMSG,
				 "%s: map geometry inconsistent (l2 tables %u, data "
				 "offset %llu)",
				 path, h->l2_tables, (unsigned long long)h->data_offset);
	if (h->part_start % GVDK_LBA_SIZE)
		return gvdk_fail(err, -EBADMSG, "%s: partition start %llu not sector aligned", path,
				 (unsigned long long)h->part_start);
	return 0;
}

int gvdk_load(const char *path, struct gvdk_map *m, unsigned flags, char *err)
{
	struct gvdk_header *h = &m->hdr;
	struct stat st;
	uint64_t nl2, crc, *fresh = NULL;
	uint32_t saved;
	int fd, rc;

	memset(m, 0, sizeof(*m));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return gvdk_fail(err, -errno, "%s: %s", path, strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		rc = gvdk_fail(err, -EINVAL, "%s: not a regular file", path);
		goto fail;
	}
	if ((uint64_t)st.st_size < GVDK_HEADER_SIZE) {
		rc = gvdk_fail(err, -ENODATA, "%s: truncated: %llu bytes, header needs %u", path,
			       (unsigned long long)st.st_size, GVDK_HEADER_SIZE);
		goto fail;
	}
	rc = gvdk_read_all(fd, h, sizeof(*h), 0);
	if (rc) {
		gvdk_fail(err, rc, "%s: reading header: %s", path, strerror(-rc));
		goto fail;
	}
	if (h->magic != GVDK_MAGIC) {
		rc = gvdk_fail(err, -EMEDIUMTYPE, "%s: not a GVDK file (magic %#llx)", path,
			       (unsigned long long)h->magic);
		goto fail;
	}
	saved = h->header_crc;
	h->header_crc = 0;
	crc = gvdk_crc32c(0, h, sizeof(*h));
	h->header_crc = saved;
	if (crc != saved) {
		rc = gvdk_fail(err, -EBADMSG, "%s: header checksum %#x, computed %#llx", path,
			       saved, (unsigned long long)crc);
		goto fail;
	}
	if (h->version != GVDK_VERSION) {
		rc = gvdk_fail(err, -EPROTONOSUPPORT, "%s: format version %u unsupported (want %u)",
			       path, h->version, GVDK_VERSION);
		goto fail;
	}
	rc = gvdk_header_check(path, h, err);
	if (rc)
		goto fail;
	if ((uint64_t)st.st_size < h->file_size) {
		rc = gvdk_fail(err, -ENODATA, "%s: truncated: %llu bytes, header says %llu", path,
			       (unsigned long long)st.st_size, (unsigned long long)h->file_size);
		goto fail;
	}
	if ((uint64_t)st.st_size > h->file_size) {
		rc = gvdk_fail(err, -ESTALE,
			       "%s: grew to %llu bytes since the map was built (%llu)", path,
			       (unsigned long long)st.st_size, (unsigned long long)h->file_size);
		goto fail;
	}
	nl2 = (uint64_t)h->l2_tables * h->per_l2;
	m->l1 = malloc(h->l2_tables * 8ull);
	m->l2 = malloc(nl2 * 8);
	if (!m->l1 || !m->l2) {
		rc = gvdk_fail(err, -ENOMEM, "%s: out of memory for a %llu-entry map", path,
			       (unsigned long long)nl2);
		goto fail;
	}
	rc = gvdk_read_all(fd, m->l1, h->l2_tables * 8ull, h->l1_offset);
	if (!rc)
		rc = gvdk_read_all(fd, m->l2, nl2 * 8, h->l2_offset);
	if (rc) {
		gvdk_fail(err, rc, "%s: reading map: %s", path, strerror(-rc));
		goto fail;
	}
	crc = gvdk_crc32c(gvdk_crc32c(0, m->l1, h->l2_tables * 8ull), m->l2, nl2 * 8);
	if (crc != h->map_crc) {
		rc = gvdk_fail(err, -EBADMSG, "%s: map checksum %#x, computed %#llx", path,
			       h->map_crc, (unsigned long long)crc);
		goto fail;
	}
	for (uint64_t i = 0; i < h->l2_tables; i++)
		if (m->l1[i] != h->l2_offset + i * h->block_size) {
			rc = gvdk_fail(err, -EBADMSG, "%s: L1 entry %llu points to %llu", path,
				       (unsigned long long)i, (unsigned long long)m->l1[i]);
			goto fail;
		}
	for (uint64_t b = 0; b < nl2; b++) {
		uint64_t v = m->l2[b];
		int bad = b < h->nblocks
			      ? (v == GVDK_ENTRY_INVALID || v % GVDK_LBA_SIZE || v < h->part_start)
			      : v != GVDK_ENTRY_INVALID;

		if (bad) {
			rc = gvdk_fail(err, -EBADMSG, "%s: L2 entry for block %llu is %#llx", path,
				       (unsigned long long)b, (unsigned long long)v);
			goto fail;
		}
	}
	if (st.st_ino != h->ino || major(st.st_dev) != h->dev_major ||
	    minor(st.st_dev) != h->dev_minor) {
		rc = gvdk_fail(err, -ESTALE,
			       "%s: map built for inode %llu on %u:%u, file is inode "
			       "%llu on %u:%u (copied or moved?)",
			       path, (unsigned long long)h->ino, h->dev_major, h->dev_minor,
			       (unsigned long long)st.st_ino, major(st.st_dev), minor(st.st_dev));
		goto fail;
	}
	if (!(flags & GVDK_LOAD_SKIP_FIEMAP)) {
		uint64_t part;

		rc = gvdk_part_start(st.st_dev, &part, err);
		if (rc)
			goto fail;
		if (part != h->part_start) {
			rc = gvdk_fail(err, -ESTALE,
				       "%s: partition now starts at %llu, map says %llu", path,
				       (unsigned long long)part, (unsigned long long)h->part_start);
			goto fail;
		}
		fresh = malloc(nl2 * 8);
		if (!fresh) {
			rc = gvdk_fail(err, -ENOMEM, "%s: out of memory", path);
			goto fail;
		}
		rc = gvdk_build_l2(fd, h, fresh, err);
		if (rc)
			goto fail;
		for (uint64_t b = 0; b < h->nblocks; b++)
			if (fresh[b] != m->l2[b]) {
				rc = gvdk_fail(err, -ESTALE,
					       "%s: block %llu mapped to device offset "
					       "%llu, file system now says %llu (moved or "
					       "defragmented)",
					       path, (unsigned long long)b,
					       (unsigned long long)m->l2[b],
					       (unsigned long long)fresh[b]);
				goto fail;
			}
		free(fresh);
	}
	close(fd);
	return 0;
fail:
	free(fresh);
	close(fd);
	gvdk_map_free(m);
	return rc;
}

void gvdk_map_free(struct gvdk_map *m)
{
	free(m->l1);
	free(m->l2);
	m->l1 = NULL;
	m->l2 = NULL;
}
