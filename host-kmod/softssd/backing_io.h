/* Byte-level I/O on an SSD's backing (file or block device, or namespace 1 of an NVMe controller
 * softssd drives through VFIO) shared by the volume manager and `lvmm ssd vol`'s offline path.
 * Every call returns 0 or a negative errno. */
#ifndef SOFTSSD_BACKING_IO_H
#define SOFTSSD_BACKING_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct nvme_pci;

/* Where the bytes are: a file or block device (fd), or a controller's namespace 1 (nvme: the
 * daemon's control thread only, byte offsets and lengths in whole LBAs). */
struct ssd_dev {
	int fd;
	struct nvme_pci *nvme;
};

int ssd_dev_pread(const struct ssd_dev *d, void *buf, size_t len, uint64_t off);
int ssd_dev_pwrite(const struct ssd_dev *d, const void *buf, size_t len, uint64_t off);
/* Makes what was written durable (fdatasync, or NVMe Flush). */
int ssd_dev_flush(const struct ssd_dev *d);
/* ssd_backing_zero and ssd_backing_copy on either kind. */
int ssd_dev_zero(const struct ssd_dev *d, uint64_t off, uint64_t len);
int ssd_dev_copy(const struct ssd_dev *d, uint64_t src, uint64_t dst, uint64_t len, void *buf,
		 size_t buflen);

/* Whole transfers (retried on EINTR and short counts); a read past the end gives zeros. */
int ssd_backing_pwrite(int fd, const void *buf, size_t len, uint64_t off);
int ssd_backing_pread(int fd, void *buf, size_t len, uint64_t off);

/* Makes len bytes at off read as zeros (hole punch, else zero range, else written zeros) and
 * flushes. */
int ssd_backing_zero(int fd, uint64_t off, uint64_t len);

/* Copies len bytes from src to dst through buf (buflen bytes), skipping all-zero chunks: dst
 * must read as zeros already (ssd_backing_zero), and stays sparse where src is. Then flushes. */
int ssd_backing_copy(int fd, uint64_t src, uint64_t dst, uint64_t len, void *buf, size_t buflen);

/* len (a multiple of 8) bytes of buf are all zero. */
bool ssd_all_zero(const void *buf, size_t len);

/* "10G", "1.5G", "1030M": the largest binary unit that states the size exactly in at most four
 * digits and one decimal; else the largest unit, one decimal rounded down ("5.9G"); plain bytes
 * below 1K. */
void ssd_size_str(uint64_t bytes, char *buf, unsigned len);

#endif
