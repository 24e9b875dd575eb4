/* Linux guest, user side of the vNVMe controller: nvme-cli (id-ctrl, list) and one fio process
 * writing a crc32c verify pattern to a second vNVMe and reading every block back; after the VM
 * exits, the host checks every block's verify header and checksum in the image file. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lightiov/voltable.h"
#include "linuxboot.h"
#include "testutil.h"

/* The boot takes minutes on kvm_pvm hosts (emulated guest kernel, 1-2 s per exec). These are
 * hang guards, not speed assertions. */
#define BOOT_LIMIT_S	1200
#define TCASE_TIMEOUT_S 2700
#define DATA_MB		16
#define NMARKS		5
/* fio's region on the data disk and its block size (--size, --bs below) */
#define FIO_BYTES (8 << 20)
#define FIO_BS	  (64 << 10)

static char dir[64], root_img[128], data_img[128], init_path[128];

/* Markers whose first sighting on the console is timed (what each step of a boot costs). */
static const char *const marks[NMARKS + 1] = {
    "Run /init", "LVMM-USER-UP", "LVMM-IDCTRL-RC", "LVMM-LIST-RC", "LVMM-FIO-RC", NULL,
};

/* Guest /init: builtins except mount -a, nvme, fio and the final poweroff. fio gets System V
 * shared memory from a preloaded shim (the test kernel has no CONFIG_SYSVIPC). The data disk is
 * found by its serial, not by probe order; the root stays read-only so only fio writes. fio
 * writes its blocks, then reads every one back and checks it (do_verify): one fio process, since
 * loading its 63 shared libraries costs minutes of emulated kernel time on kvm_pvm hosts. That
 * the blocks outlive the VM is checked on the host, in the image file (data_check_blocks). */
static const char init_script[] =
    "#!/bin/busybox sh\n"
    "export PATH=/bin:/usr/bin:/usr/sbin\n"
    "/bin/busybox mount -a || echo LVMM-USER-MOUNT-FAILED\n"
    "echo LVMM-USER-UP\n"
    "data=\n"
    "for s in /sys/class/nvme/nvme*/serial; do read -r sn <$s; case $sn in LVMMDATA*) "
    "d=${s%/serial}; data=/dev/${d##*/}n1;; esac; done\n"
    "echo \"LVMM-USER-DATA disk=$data\"\n"
    "cd /tmp\n"
    "/usr/sbin/nvme id-ctrl /dev/nvme0; echo \"LVMM-IDCTRL-RC $?\"\n"
    "/usr/sbin/nvme list; echo \"LVMM-LIST-RC $?\"\n"
    "LD_PRELOAD=/usr/lib/lvmm-shm-shim.so /usr/bin/fio --name=lvmmverify --filename=$data "
    "--ioengine=psync --direct=1 --thread --rw=write --bs=64k --size=8M --verify=crc32c "
    "--verify_state_save=0 --do_verify=1; echo \"LVMM-FIO-RC $?\"\n"
    "echo LVMM-USER-DONE\n"
    "exec /bin/busybox poweroff -f\n";

static void make_images(void)
{
	const char *tool = testutil_env_or("LVMM_USER_ROOTFS", "tools/guest/user/rootfs.sh");
	char cmd[512], *out;
	int fd;

	fd = open(init_path, O_CREAT | O_TRUNC | O_WRONLY, 0755);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, init_script, strlen(init_script)), (ssize_t)strlen(init_script));
	close(fd);
	snprintf(cmd, sizeof(cmd), "%s %s %s 2>&1", tool, root_img, init_path);
	ck_assert_msg(testutil_sh(cmd, &out) == 0, "%s failed:\n%s", tool, out);
	free(out);
	/* The data disk starts as zeroes: only the guest's fio can put verify headers there. */
	fd = open(data_img, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)DATA_MB << 20), 0);
	close(fd);
}

static void boot_user(struct linuxboot *b)
{
	const char *build = testutil_env_or("BUILD", "build");
	char kernel_def[4096], root_arg[256], data_arg[256];
	char cmdline[] = "console=ttyS0 root=/dev/nvme0n1 ro rootfstype=ext4 rootwait init=/init";
	const char *kernel;
	int i;

	snprintf(kernel_def, sizeof(kernel_def), "%s/guest/vmlinux", build);
	kernel = testutil_env_or("LVMM_GUEST_KERNEL", kernel_def);
	ck_assert_msg(access(kernel, R_OK) == 0, "%s missing: run make guest", kernel);
	snprintf(root_arg, sizeof(root_arg), "file=%s,serial=LVMMROOT", root_img);
	snprintf(data_arg, sizeof(data_arg), "file=%s,serial=LVMMDATA", data_img);
	char *args[] = {"--kernel",  (char *)kernel,
			"--cmdline", cmdline,
			"--cpus",    "1",
			"--memory",  (char *)testutil_env_or("LVMM_USER_MEMORY", "192M"),
			"--vnvme",   root_arg,
			"--vnvme",   data_arg,
			NULL};

	linuxboot_run(b, args, marks, BOOT_LIMIT_S, 0);
	printf("linux nvme user side: %.1f s to exit\n", b->t_exit);
	for (i = 0; i < NMARKS; i++)
		if (b->t_mark[i] >= 0)
			printf("  %-20s at %6.1f s\n", marks[i], b->t_mark[i]);
	fflush(stdout);
}

static void boot_report(const struct linuxboot *b)
{
	const char *user = strstr(b->console, "LVMM-USER-UP");
	size_t len = strlen(b->console);

	/* Everything user space printed, or the tail of the kernel log when it never started. */
	fprintf(stderr, "---- lvmm output ----\n%s---- console ----\n%s\n----\n", b->log,
		user ? user : b->console + (len > 4000 ? len - 4000 : 0));
}

static void boot_check(const struct linuxboot *b)
{
	ck_assert_msg(!b->killed, "lvmm still running after %d s", BOOT_LIMIT_S);
	ck_assert_msg(WIFEXITED(b->status) && WEXITSTATUS(b->status) == 0,
		      "lvmm did not exit 0 (wait status %#x)", b->status);
	ck_assert_msg(strstr(b->console, "LVMM-USER-UP"), "guest user space did not start");
	ck_assert_msg(!strstr(b->console, "LVMM-USER-MOUNT-FAILED"), "mount -a failed");
	ck_assert_msg(strstr(b->console, "disk=/dev/nvme1n1"),
		      "data disk (serial LVMMDATA) not found as /dev/nvme1n1");
	ck_assert_msg(strstr(b->console, "LVMM-USER-DONE"), "/init did not finish");
	/* fio prints "err= 0" per job; any other value or a verify report is a failure. */
	ck_assert_msg(strstr(b->console, "lvmmverify: (groupid=0, jobs=1): err= 0"),
		      "fio job reported an error");
	ck_assert_msg(!strstr(b->console, "verify failed") && !strstr(b->console, "bad magic") &&
			  !strstr(b->console, "fio: pid="),
		      "fio reported a verify failure");
}

/* fio's verify header (fio 3.x, little endian) at the start of every block it writes: magic,
 * checksum type, block length, random seed, the block's offset, time, thread and I/O number, a
 * CRC-32C of the header before this field, then the crc32c type's own header: the CRC-32C of the
 * rest of the block. fio's CRC-32C starts from all ones but leaves out the final inversion. */
#define VHDR_MAGIC  0xacca
#define VHDR_CRC32C 5 /* fio's VERIFY_CRC32C */
#define VHDR_OFFSET 16
#define VHDR_CRC    36
#define VHDR_DATA   44

static uint32_t fio_crc(const unsigned char *p, size_t len)
{
	return ~lio_crc32c(0, p, len);
}

static uint64_t le_get(const unsigned char *p, int n)
{
	uint64_t v = 0;

	while (n--)
		v = v << 8 | p[n];
	return v;
}

/* Every block fio wrote reached the host file whole: what a new lvmm process serving this image
 * would give the next guest. Each block carries fio's header for its own offset, and both
 * checksums match; past fio's region the disk is still zeroes. */
static void data_check_blocks(void)
{
	unsigned char *blk = malloc(FIO_BS);
	int fd = open(data_img, O_RDONLY), i, good = 0, zero = 1;
	off_t off;

	ck_assert_ptr_nonnull(blk);
	ck_assert_int_ge(fd, 0);
	for (i = 0; i < FIO_BYTES / FIO_BS; i++) {
		bool ok;

		off = (off_t)i * FIO_BS;
		ck_assert_int_eq(pread(fd, blk, FIO_BS, off), FIO_BS);
		ok = le_get(blk, 2) == VHDR_MAGIC && le_get(blk + 2, 2) == VHDR_CRC32C &&
		     le_get(blk + 4, 4) == FIO_BS &&
		     le_get(blk + VHDR_OFFSET, 8) == (uint64_t)off &&
		     le_get(blk + VHDR_CRC, 4) == fio_crc(blk, VHDR_CRC) &&
		     le_get(blk + VHDR_CRC + 4, 4) == fio_crc(blk + VHDR_DATA, FIO_BS - VHDR_DATA);
		if (!ok && i - good < 4)
			fprintf(stderr, "data disk block %d (offset %#llx): not fio's block\n", i,
				(unsigned long long)off);
		good += ok;
	}
	for (off = FIO_BYTES; off < (off_t)DATA_MB << 20; off += FIO_BS) {
		ck_assert_int_eq(pread(fd, blk, FIO_BS, off), FIO_BS);
		for (i = 0; i < FIO_BS; i++)
			zero &= !blk[i];
	}
	close(fd);
	free(blk);
	ck_assert_msg(good == FIO_BYTES / FIO_BS, "%d of %d blocks on the host are fio's, whole",
		      good, FIO_BYTES / FIO_BS);
	ck_assert_msg(zero, "fio wrote past its 8 MiB region");
}

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/lvmm-nvme-user-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(root_img, sizeof(root_img), "%s/root.img", dir);
	snprintf(data_img, sizeof(data_img), "%s/data.img", dir);
	snprintf(init_path, sizeof(init_path), "%s/init", dir);
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	testutil_sh(cmd, NULL);
}

START_TEST(test_nvme_user)
{
	struct linuxboot b;

	make_images();
	boot_user(&b);
	boot_report(&b);
	boot_check(&b);
	ck_assert_msg(strstr(b.console, "LVMM-IDCTRL-RC 0"), "nvme id-ctrl failed");
	ck_assert_msg(strstr(b.console, "sn        : LVMMROOT"), "id-ctrl: no serial LVMMROOT");
	ck_assert_msg(strstr(b.console, "mn        : "), "id-ctrl: no model number");
	ck_assert_msg(strstr(b.console, "LVMM-LIST-RC 0"), "nvme list failed");
	ck_assert_msg(strstr(b.console, "/dev/nvme0n1") && strstr(b.console, "/dev/nvme1n1"),
		      "nvme list does not show both namespaces");
	ck_assert_msg(strstr(b.console, "LVMM-FIO-RC 0"), "fio write+verify failed");
	ck_assert_msg(strstr(b.console, "write: IOPS="), "fio wrote nothing");
	ck_assert_msg(strstr(b.console, "read: IOPS="), "fio read nothing back");
	ck_assert_msg(strstr(b.console, "issued rwts: total=128,128,"),
		      "fio did not write and read back each of its 128 blocks");
	linuxboot_free(&b);
	data_check_blocks();
}
END_TEST

static Suite *linux_nvme_user_suite(void)
{
	Suite *s = suite_create("linux_nvme_user");
	TCase *tc = tcase_create("user");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, TCASE_TIMEOUT_S);
	tcase_add_test(tc, test_nvme_user);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return testutil_run_suite(linux_nvme_user_suite());
}
