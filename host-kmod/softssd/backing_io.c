/* Byte-level I/O on an SSD's backing for the volume manager and `lvmm ssd vol`: whole transfers,
 * zeroing that keeps files sparse, sparse-preserving copies, and sizes as people write them. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "softssd/backing_io.h"
#include "vfio/nvme_pci.h"

#define BIO_ALIGN 4096u	     /* buffers fit a backing opened with O_DIRECT */
#define BIO_CHUNK (1u << 20) /* unit of written zeros */

void ssd_size_str(uint64_t bytes, char *buf, unsigned len)
{
	static const char units[] = "KMGT";
	uint64_t unit;
	int i;

	/* The largest unit that states the size exactly in a short figure (one decimal at most,
	 * four digits before it)... */
	for (i = 3; i >= 0; i--) {
		unit = 1ULL << (10 * (i + 1));
		if (bytes < unit || bytes / unit > 9999 || (bytes % unit) * 10 % unit)
			continue;
		if (bytes % unit == 0)
			snprintf(buf, len, "%" PRIu64 "%c", bytes / unit, units[i]);
		else
			snprintf(buf, len, "%" PRIu64 ".%" PRIu64 "%c", bytes / unit,
				 (bytes % unit) * 10 / unit, units[i]);
		return;
	}
	/* ...else the largest that fits, rounded down: free space is never overstated. */
	for (i = 3; i >= 0; i--) {
		unit = 1ULL << (10 * (i + 1));
		if (bytes >= unit) {
			snprintf(buf, len, "%" PRIu64 ".%" PRIu64 "%c", bytes / unit,
				 (bytes % unit) * 10 / unit, units[i]);
			return;
		}
	}
	snprintf(buf, len, "%" PRIu64, bytes);
}

int ssd_backing_pwrite(int fd, const void *buf, size_t len, uint64_t off)
{
	const char *p = buf;

	while (len) {
		ssize_t n = pwrite(fd, p, len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

int ssd_backing_pread(int fd, void *buf, size_t len, uint64_t off)
{
	char *p = buf;

	while (len) {
		ssize_t n = pread(fd, p, len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0) {
			memset(p, 0, len);
			return 0;
		}
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

bool ssd_all_zero(const void *buf, size_t len)
{
	const uint64_t *w = buf;
	size_t i;

	for (i = 0; i < len / 8; i++)
		if (w[i])
			return false;
	return true;
}

int ssd_backing_zero(int fd, uint64_t off, uint64_t len)
{
	void *zero;
	int r = 0;

	if (!fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) ||
	    !fallocate(fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len))
		return fdatasync(fd) ? -errno : 0;
	/* Neither is supported here: write the zeros. */
	if (posix_memalign(&zero, BIO_ALIGN, BIO_CHUNK))
		return -ENOMEM;
	memset(zero, 0, BIO_CHUNK);
	while (len && !r) {
		size_t n = len < BIO_CHUNK ? (size_t)len : BIO_CHUNK;

		r = ssd_backing_pwrite(fd, zero, n, off);
		off += n;
		len -= n;
	}
	free(zero);
	if (!r && fdatasync(fd))
		r = -errno;
	return r;
}

int ssd_backing_copy(int fd, uint64_t src, uint64_t dst, uint64_t len, void *buf, size_t buflen)
{
	const struct ssd_dev d = {.fd = fd};

	return ssd_dev_copy(&d, src, dst, len, buf, buflen);
}

/* ---- either kind of backing ---- */

/* The driver's error line goes to the daemon's output; the caller gets the errno. */
static int ssd_dev_said(int r, const char *err)
{
	if (r)
		fprintf(stderr, "softssd: %s\n", err);
	return r;
}

int ssd_dev_pread(const struct ssd_dev *d, void *buf, size_t len, uint64_t off)
{
	char err[160];

	if (!d->nvme)
		return ssd_backing_pread(d->fd, buf, len, off);
	return ssd_dev_said(nvme_pci_read(d->nvme, off, buf, len, err, sizeof(err)), err);
}

int ssd_dev_pwrite(const struct ssd_dev *d, const void *buf, size_t len, uint64_t off)
{
	char err[160];

	if (!d->nvme)
		return ssd_backing_pwrite(d->fd, buf, len, off);
	return ssd_dev_said(nvme_pci_write(d->nvme, off, buf, len, err, sizeof(err)), err);
}

int ssd_dev_flush(const struct ssd_dev *d)
{
	char err[160];

	if (!d->nvme)
		return fdatasync(d->fd) ? -errno : 0;
	return ssd_dev_said(nvme_pci_flush(d->nvme, err, sizeof(err)), err);
}

int ssd_dev_zero(const struct ssd_dev *d, uint64_t off, uint64_t len)
{
	char err[160];
	int r;

	if (!d->nvme)
		return ssd_backing_zero(d->fd, off, len);
	r = ssd_dev_said(nvme_pci_zero(d->nvme, off, len, err, sizeof(err)), err);
	return r ? r : ssd_dev_flush(d);
}

int ssd_dev_copy(const struct ssd_dev *d, uint64_t src, uint64_t dst, uint64_t len, void *buf,
		 size_t buflen)
{
	int r;

	while (len) {
		size_t n = len < buflen ? (size_t)len : buflen;

		r = ssd_dev_pread(d, buf, n, src);
		if (r)
			return r;
		if (!ssd_all_zero(buf, n)) {
			r = ssd_dev_pwrite(d, buf, n, dst);
			if (r)
				return r;
		}
		src += n;
		dst += n;
		len -= n;
	}
	return ssd_dev_flush(d);
}
