/* The guest side of tests/linux/test_linux_frontend.c: against the patched nvme driver on a
 * passthrough vNVMe, out-of-window and unknown commands from user space (NVMe ioctls) must fail
 * with EIO; with "module", the second vNVMe moves from nvme to lightiov_nvme.ko and back. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/nvme_ioctl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "lio-frontend-pattern.h"

#define MODULE_KO "/lightiov_nvme.ko"
#define BIG	  (256 * 1024) /* more than two pages: a PRP list */

static int failures;

static void fail(const char *what)
{
	printf("LIO-PROBE-FAIL %s (errno %d: %s)\n", what, errno, strerror(errno));
	fflush(stdout);
	failures++;
}

static int sysfs_write(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY), ok;

	if (fd < 0)
		return -1;
	ok = write(fd, val, strlen(val)) == (ssize_t)strlen(val);
	close(fd);
	return ok ? 0 : -1;
}

static int wait_path(const char *path, int seconds)
{
	struct timespec ts = {0, 100 * 1000 * 1000};
	int i;

	for (i = 0; i < seconds * 10; i++) {
		if (!access(path, F_OK))
			return 0;
		nanosleep(&ts, NULL);
	}
	return -1;
}

static void *page_buf(size_t len)
{
	void *p = NULL;

	return posix_memalign(&p, 4096, len) ? NULL : p;
}

/* NVME_IOCTL_SUBMIT_IO of nblocks + 1 LBAs at slba: 0, or -errno. */
static int submit_io(int fd, unsigned char op, unsigned long long slba, unsigned nblocks, void *buf)
{
	struct nvme_user_io io = {
	    .opcode = op,
	    .nblocks = (unsigned short)nblocks,
	    .addr = (unsigned long)buf,
	    .slba = slba,
	};

	return ioctl(fd, NVME_IOCTL_SUBMIT_IO, &io) ? -errno : 0;
}

/* The patched in-kernel driver on nvme0n1: window translation and refusals, seen from user
 * space. */
static void probe_window(void)
{
	unsigned long long bytes = 0, nlb;
	struct nvme_passthru_cmd pt = {.opcode = 0x81, .nsid = 1};
	unsigned char *buf = page_buf(8192), *sb = page_buf(4096), *io_sb;
	int fd = open("/dev/nvme0n1", O_RDWR), r, lbs = 0;

	if (fd < 0 || !buf || !sb) {
		fail("open /dev/nvme0n1");
		return;
	}
	if (ioctl(fd, BLKGETSIZE64, &bytes) || ioctl(fd, BLKSSZGET, &lbs) || lbs < 512 ||
	    lbs > 4096) {
		fail("BLKGETSIZE64 or BLKSSZGET");
		return;
	}
	nlb = bytes / (unsigned)lbs;
	printf("LIO-WINDOW lbas=%llu\n", nlb);

	r = submit_io(fd, 0x02, nlb, 0, buf);
	printf("LIO-OOW read slba=%llu rc=%d\n", nlb, r);
	if (r != -EIO)
		fail("read past the window was not EIO");
	memset(buf, 0xa5, 8192);
	r = submit_io(fd, 0x01, nlb - 1, 1, buf);
	printf("LIO-OOW write slba=%llu nlb=2 rc=%d\n", nlb - 1, r);
	if (r != -EIO)
		fail("write across the window's end was not EIO");
	r = submit_io(fd, 0x01, 1ULL << 40, 0, buf);
	printf("LIO-OOW write slba=%llu rc=%d\n", 1ULL << 40, r);
	if (r != -EIO)
		fail("write far past the window was not EIO");
	r = ioctl(fd, NVME_IOCTL_IO_CMD, &pt) ? -errno : 0;
	printf("LIO-OOW opcode 0x81 rc=%d\n", r);
	if (r != -EIO)
		fail("vendor opcode was not EIO");

	/* In the window, the ioctl path and the block path see the same superblock: its magic
	 * and UUID, which the mounted file system never rewrites (the rest may be dirty in the
	 * page cache). Untranslated, LBA 2 of the SSD would be the volume before this one. */
	r = submit_io(fd, 0x02, 1024 / (unsigned)lbs, 0, buf);
	io_sb = buf + 1024 % (unsigned)lbs;
	if (r || pread(fd, sb, 1024, 1024) != 1024 || io_sb[0x38] != 0x53 || io_sb[0x39] != 0xef ||
	    memcmp(io_sb + 0x38, sb + 0x38, 2) || memcmp(io_sb + 0x68, sb + 0x68, 16))
		fail("ioctl read of LBA 2 is not the block device's ext4 superblock");
	else
		printf("LIO-IOCTL-READ ok\n");
	close(fd);
	free(buf);
	free(sb);
}

/* The PCI address of controller nvmeN, from its sysfs link. */
static int ctrl_bdf(const char *ctrl, char *bdf, size_t len)
{
	char path[128], link[256];
	const char *slash;
	ssize_t n;

	snprintf(path, sizeof(path), "/sys/class/nvme/%s/device", ctrl);
	n = readlink(path, link, sizeof(link) - 1);
	if (n <= 0)
		return -1;
	link[n] = 0;
	slash = strrchr(link, '/');
	snprintf(bdf, len, "%.40s", slash ? slash + 1 : link);
	return 0;
}

/* The namespace block device the nvme driver made for bdf, waiting for its scan. */
static int nvme_disk_of(const char *bdf, char *disk, size_t len)
{
	char path[256];
	struct dirent *e;
	DIR *d;
	int i;

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/nvme", bdf);
	for (i = 0; i < 600; i++) {
		d = opendir(path);
		while (d && (e = readdir(d))) {
			char ns[320];

			if (strncmp(e->d_name, "nvme", 4))
				continue;
			snprintf(ns, sizeof(ns), "%s/%.20s/%.20sn1", path, e->d_name, e->d_name);
			if (!access(ns, F_OK)) {
				snprintf(disk, len, "/dev/%.20sn1", e->d_name);
				closedir(d);
				return wait_path(disk, 10);
			}
		}
		if (d)
			closedir(d);
		usleep(100 * 1000);
	}
	return -1;
}

static int check_at(int fd, const char *dev, off_t off, size_t len, unsigned char *buf)
{
	if (pread(fd, buf, len, off) != (ssize_t)len) {
		fail(dev);
		return -1;
	}
	if (lio_pattern_check(buf, off, len)) {
		printf("LIO-PROBE-FAIL %s: pattern differs at %lld\n", dev, (long long)off);
		failures++;
		return -1;
	}
	return 0;
}

/* nvme1 to lightiov_nvme.ko through driver_override, write and verify, rmmod, back to nvme,
 * verify again through the in-kernel driver. */
static void probe_module(void)
{
	char bdf[64], path[256], disk[64];
	unsigned long long bytes = 0;
	unsigned char *buf = page_buf(BIG);
	off_t last;
	int fd, i;

	if (!buf || ctrl_bdf("nvme1", bdf, sizeof(bdf))) {
		fail("no nvme1");
		return;
	}
	printf("LIO-MODULE nvme1 is %s\n", bdf);
	fflush(stdout);
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/driver_override", bdf);
	if (sysfs_write(path, "lightiov_nvme") ||
	    sysfs_write("/sys/bus/pci/drivers/nvme/unbind", bdf)) {
		fail("driver_override or unbind");
		return;
	}
	fd = open(MODULE_KO, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || syscall(SYS_finit_module, fd, "", 0)) {
		fail("finit_module " MODULE_KO);
		return;
	}
	close(fd);
	if (sysfs_write("/sys/bus/pci/drivers_probe", bdf) || wait_path("/dev/lionvme0", 30)) {
		fail("lightiov_nvme did not bind");
		return;
	}
	printf("LIO-MODULE bound\n");
	fflush(stdout);

	fd = open("/dev/lionvme0", O_RDWR | O_DIRECT);
	if (fd < 0 || ioctl(fd, BLKGETSIZE64, &bytes)) {
		fail("open /dev/lionvme0");
		return;
	}
	printf("LIO-MODULE size=%llu\n", bytes);
	last = (off_t)bytes - 4096;
	lio_pattern_fill(buf, LIO_PATTERN_OFF, BIG);
	if (pwrite(fd, buf, BIG, LIO_PATTERN_OFF) != BIG)
		fail("write through lightiov_nvme");
	lio_pattern_fill(buf, last, 4096);
	if (pwrite(fd, buf, 4096, last) != 4096)
		fail("write of the last block through lightiov_nvme");
	memset(buf, 0, BIG);
	if (!check_at(fd, "lionvme0", LIO_PATTERN_OFF, BIG, buf) &&
	    !check_at(fd, "lionvme0", last, 4096, buf))
		printf("LIO-MODULE verify ok\n");
	if (pread(fd, buf, 4096, (off_t)bytes) != 0)
		fail("read at the end of lionvme0 was not EOF");
	if (fsync(fd))
		fail("fsync lionvme0");
	close(fd);

	if (syscall(SYS_delete_module, "lightiov_nvme", O_NONBLOCK)) {
		fail("rmmod lightiov_nvme");
		return;
	}
	printf("LIO-MODULE removed\n");
	fflush(stdout);
	if (sysfs_write(path, "\n") || sysfs_write("/sys/bus/pci/drivers/nvme/bind", bdf) ||
	    nvme_disk_of(bdf, disk, sizeof(disk))) {
		fail("nvme did not take the function back");
		return;
	}
	printf("LIO-MODULE back on nvme as %s\n", disk);
	/* the node and sysfs entry come before the disk is live: ENXIO until then */
	for (i = 0; (fd = open(disk, O_RDONLY | O_DIRECT)) < 0 && errno == ENXIO && i < 300; i++)
		usleep(100 * 1000);
	if (fd < 0) {
		fail(disk);
		return;
	}
	memset(buf, 0, BIG);
	if (!check_at(fd, disk, LIO_PATTERN_OFF, BIG, buf) && !check_at(fd, disk, last, 4096, buf))
		printf("LIO-MODULE nvme verify ok\n");
	close(fd);
	free(buf);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	probe_window();
	if (argc > 1 && !strcmp(argv[1], "module"))
		probe_module();
	if (failures)
		printf("LIO-PROBE-DONE failures=%d\n", failures);
	else
		printf("LIO-PROBE-OK\n");
	return failures != 0;
}
