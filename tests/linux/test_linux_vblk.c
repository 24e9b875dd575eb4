/* The stock Linux virtio-blk driver on lvmm's virtio-blk: an ext4 root on `--disk` (two request
 * queues offered, its own serial) mounted read-write across two boots, and a read-only second
 * disk. The guest reads a host file through the file system and copies it (written, flushed,
 * dropped from the page cache, read back), trims the file system (discard), reads the serial
 * (GET_ID) and finds the read-only disk refusing a write; the host checks the image between
 * boots (mount count, e2fsck, the file /init wrote, the guest's copy) and that the read-only
 * image is unchanged. lvmm's device counters (LVMM_STATS) show the I/O went through it. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ext4check.h"
#include "linuxboot.h"
#include "testutil.h"

/* A boot takes minutes on kvm_pvm hosts (emulated guest kernel). Not a speed assertion. */
#define BOOT_LIMIT_S	1100
#define TCASE_TIMEOUT_S 2400
#define IMG_MB		64
#define HOST_FILE_KB	4096

static char dir[64], img[128], roimg[128], last_mount[64];

/* /init on the root file system: busybox, mounts, the checks, a file for the host, poweroff. The
 * reads, the copy, the syncs, the trim and the write that must fail are one io-check process
 * (tools/guest/io-check.c) with 1 MiB I/Os: on kvm_pvm hosts a fork/exec costs about a second and
 * each system call milliseconds. The host file is read once, summed as it is copied; the copy,
 * fsynced, leaves the page cache (only its pages: dropping the whole cache took 7 s here, and
 * io-check checks with mincore that none stayed) and is read back from the disk. */
static const char init_script[] =
    "#!/bin/busybox sh\n"
    "b=/bin/busybox\n"
    "echo LVMM-VBLK-ROOT-UP\n"
    "$b mount -t sysfs sysfs /sys\n"
    "$b mount -t proc proc /proc\n"
    "n=0; [ -f /boot-count ] && read -r n </boot-count; n=$((n + 1)); echo $n >/boot-count\n"
    /* the attribute has no newline: read's status is not the test */
    "read -r s </sys/block/vda/serial; echo \"LVMM-VBLK-SERIAL $s\"\n"
    "read -r ro </sys/block/vdb/ro && echo \"LVMM-VBLK-RO $ro\"\n"
    "read -r sz </sys/block/vdb/size && echo \"LVMM-VBLK-RO-SIZE $sz\"\n"
    "read -r mm </sys/block/vdb/dev && $b rm -f /dev/vdb && "
    "$b mknod /dev/vdb b ${mm%:*} ${mm#*:}\n"
    "echo \"written by the guest, boot $n\" >/guest-was-here || echo LVMM-VBLK-WRITE-FAILED\n"
    "IO_CHECK_TIMES=1 /bin/io-check md5 LVMM-VBLK-RO-MD5 /dev/vdb 65536 "
    "write LVMM-VBLK-RO /dev/vdb md5copy LVMM-VBLK-HOST-MD5 /host-file /copy-$n evict /copy-$n "
    "md5 LVMM-VBLK-COPY-MD5 /copy-$n rm /copy-$((n - 1)) sync trim LVMM-VBLK-TRIMMED / sync "
    "|| echo LVMM-VBLK-IO-CHECK-FAILED\n"
    "echo \"LVMM-VBLK-ROOT-OK boot=$n\"\n"
    "exec $b poweroff -f\n";

static void make_image(void)
{
	char host_file[128], io_check[4096], cmd[512];
	const char *const extra[] = {host_file, "host-file", io_check, "bin/io-check", NULL};

	/* the file the guest reads and copies: 4 MiB of busybox's bytes */
	snprintf(host_file, sizeof(host_file), "%s/host-file", dir);
	snprintf(cmd, sizeof(cmd), "cat /bin/busybox /bin/busybox /bin/busybox | head -c %dK >%s",
		 HOST_FILE_KB, host_file);
	ck_assert_int_eq(testutil_sh(cmd, NULL), 0);
	linuxboot_guest_file(io_check, sizeof(io_check), "io-check");
	ext4check_make_root(dir, img, IMG_MB, init_script, extra);
	ck_assert_int_eq(unlink(host_file), 0);
	/* the read-only disk: 1 MiB of a known pattern */
	snprintf(cmd, sizeof(cmd), "head -c 1M /bin/busybox >%s", roimg);
	ck_assert_int_eq(testutil_sh(cmd, NULL), 0);
}

/* The md5 (hex) a shell command prints first. */
static char *md5_of(const char *cmd)
{
	char *out = NULL;

	ck_assert_int_eq(testutil_sh(cmd, &out), 0);
	out[strcspn(out, " \n")] = 0;
	return out;
}

static void setup(void)
{
	testutil_mkdtemp(dir, sizeof(dir), "/tmp/lvmm-vblk-linux-");
	snprintf(img, sizeof(img), "%s/root.img", dir);
	snprintf(roimg, sizeof(roimg), "%s/ro.img", dir);
	setenv("LVMM_STATS", "1", 1);
}

static void teardown(void)
{
	testutil_rmtree(dir);
}

static unsigned long long stat_of(const char *s, const char *tag, const char *key)
{
	const char *l = strstr(s, tag), *k = l ? strstr(l, key) : NULL;

	ck_assert_msg(k, "no '%s' ... '%s' in lvmm's output", tag, key);
	return strtoull(k + strlen(key), NULL, 10);
}

static void want_line(const char *console, const char *tag, const char *value)
{
	char want[256];

	snprintf(want, sizeof(want), "%s %s", tag, value);
	ck_assert_msg(strstr(console, want), "no '%s' on the console", want);
}

START_TEST(test_vblk_root)
{
	char kernel[4096], root_disk[256], ro_disk[256], want[64], cmd[512];
	char *args[] = {
	    "--kernel",	 kernel,
	    "--cmdline", "console=ttyS0 root=/dev/vda rw rootfstype=ext4 rootwait init=/init",
	    "--cpus",	 "1",
	    "--memory",	 "128M",
	    "--disk",	 root_disk,
	    "--disk",	 ro_disk,
	    NULL};
	char *host_md5, *ro_md5, *ro_md5_64k, *out;
	struct linuxboot b;
	int boot;

	linuxboot_guest_file(kernel, sizeof(kernel), "vmlinux");
	make_image();
	snprintf(root_disk, sizeof(root_disk), "path=%s,num_queues=2,serial=lvmm-root-1", img);
	snprintf(ro_disk, sizeof(ro_disk), "path=%s,readonly=on,id=ro0", roimg);
	snprintf(cmd, sizeof(cmd), "md5sum %s", roimg);
	ro_md5 = md5_of(cmd);
	snprintf(cmd, sizeof(cmd), "head -c 64K %s | md5sum", roimg);
	ro_md5_64k = md5_of(cmd);
	snprintf(cmd, sizeof(cmd),
		 "cat /bin/busybox /bin/busybox /bin/busybox | head -c %dK | md5sum", HOST_FILE_KB);
	host_md5 = md5_of(cmd);
	ck_assert_int_eq(ext4check_mounts(img, last_mount, sizeof(last_mount)), 0);
	for (boot = 1; boot <= 2; boot++) {
		linuxboot_run(&b, args, NULL, BOOT_LIMIT_S, 0);
		printf("linux virtio-blk root boot %d: %.1f s to exit\n", boot, b.t_exit);
		fflush(stdout);
		linuxboot_report(&b, 4000);
		ck_assert_msg(!b.killed, "lvmm still running after %d s", BOOT_LIMIT_S);
		ck_assert_msg(WIFEXITED(b.status) && WEXITSTATUS(b.status) == 0,
			      "lvmm did not exit 0 (wait status %#x)", b.status);
		ck_assert_msg(strstr(b.console, "EXT4-fs (vda): mounted filesystem"),
			      "ext4 root on /dev/vda not mounted");
		want_line(b.console, "LVMM-VBLK-SERIAL", "lvmm-root-1");
		want_line(b.console, "LVMM-VBLK-RO", "1");
		want_line(b.console, "LVMM-VBLK-RO-SIZE", "2048");
		want_line(b.console, "LVMM-VBLK-RO-MD5", ro_md5_64k);
		ck_assert_msg(strstr(b.console, "LVMM-VBLK-RO-REFUSED"),
			      "a write to the read-only disk did not fail");
		want_line(b.console, "LVMM-VBLK-HOST-MD5", host_md5);
		want_line(b.console, "LVMM-VBLK-COPY-MD5", host_md5);
		ck_assert_msg(strstr(b.console, "LVMM-VBLK-TRIMMED"), "fstrim failed");
		ck_assert_msg(!strstr(b.console, "LVMM-VBLK-WRITE-FAILED"), "write failed");
		ck_assert_msg(!strstr(b.console, "LVMM-VBLK-IO-CHECK-FAILED"), "io-check failed");
		snprintf(want, sizeof(want), "LVMM-VBLK-ROOT-OK boot=%d", boot);
		ck_assert_msg(strstr(b.console, want), "/init on the disk did not finish");
		/* the data went through lvmm's device, reads and writes and flushes */
		ck_assert_uint_ge(stat_of(b.log, "device disk0:", "reads "), 20);
		ck_assert_uint_ge(stat_of(b.log, "device disk0:", "write_bytes "),
				  HOST_FILE_KB * 1024ULL);
		ck_assert_uint_ge(stat_of(b.log, "device disk0:", "flushes "), 1);
		ck_assert_uint_eq(stat_of(b.log, "device disk0:", "errors "), 0);
		ck_assert_uint_eq(stat_of(b.log, "device ro0:", "write_bytes "), 0);
		linuxboot_free(&b);
		/* the host sees what the guest wrote; the read-only image is unchanged */
		ext4check_after_boot(img, boot, last_mount, sizeof(last_mount));
		snprintf(cmd, sizeof(cmd), "debugfs -R 'cat /copy-%d' %s 2>/dev/null | md5sum",
			 boot, img);
		out = md5_of(cmd);
		ck_assert_msg(!strcmp(out, host_md5), "/copy-%d on the image: md5 %s", boot, out);
		free(out);
		snprintf(cmd, sizeof(cmd), "md5sum %s", roimg);
		out = md5_of(cmd);
		ck_assert_str_eq(out, ro_md5);
		free(out);
	}
	free(host_md5);
	free(ro_md5);
	free(ro_md5_64k);
}
END_TEST

static Suite *linux_vblk_suite(void)
{
	Suite *s = suite_create("linux_vblk");
	TCase *tc = tcase_create("root");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, TCASE_TIMEOUT_S);
	tcase_add_test(tc, test_vblk_root);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return testutil_run_suite(linux_vblk_suite());
}
