/* Linux guest, user side of the vNVMe controller: nvme-cli (id-ctrl, list) and one fio process
 * writing a crc32c verify pattern to a second vNVMe in one boot, verify-only in the next boot. */
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

#include "linuxboot.h"
#include "testutil.h"

/* Each boot takes minutes on kvm_pvm hosts (emulated guest kernel, 1-2 s per exec). These are
 * hang guards, not speed assertions. */
#define BOOT_LIMIT_S	1200
#define TCASE_TIMEOUT_S 2700
#define DATA_MB		16
#define NMARKS		6

static char dir[64], root_img[128], data_img[128], init_path[128];

/* Markers whose first sighting on the console is timed (what each step of a boot costs). */
static const char *const marks[NMARKS + 1] = {
    "Run /init",	  "LVMM-USER-UP", "LVMM-IDCTRL-RC", "LVMM-LIST-RC", "LVMM-FIO-WRITE-RC",
    "LVMM-FIO-VERIFY-RC", NULL,
};

/* Guest /init: builtins except mount -a, nvme, fio and the final poweroff. fio gets System V
 * shared memory from a preloaded shim (the test kernel has no CONFIG_SYSVIPC). The data disk is
 * found by its serial, not by probe order; the root stays read-only so only fio writes. Every
 * fio option is the same in both phases: verify_only rebuilds the expected blocks from them. The
 * write phase does not read its blocks back (do_verify=0): the verify boot reads every one, and
 * on this host each guest I/O and system call costs milliseconds of emulated kernel time. */
static const char init_script[] =
    "#!/bin/busybox sh\n"
    "export PATH=/bin:/usr/bin:/usr/sbin\n"
    "/bin/busybox mount -a || echo LVMM-USER-MOUNT-FAILED\n"
    "echo LVMM-USER-UP\n"
    "read -r cmdline </proc/cmdline\n"
    "phase=\n"
    "for w in $cmdline; do case $w in lvmm.userphase=*) phase=${w#*=};; esac; done\n"
    "data=\n"
    "for s in /sys/class/nvme/nvme*/serial; do read -r sn <$s; case $sn in LVMMDATA*) "
    "d=${s%/serial}; data=/dev/${d##*/}n1;; esac; done\n"
    "echo \"LVMM-USER-DATA phase=$phase disk=$data\"\n"
    "cd /tmp\n"
    "set -- --name=lvmmverify --filename=$data --ioengine=psync --direct=1 --thread "
    "--rw=write --bs=64k --size=8M --verify=crc32c --verify_state_save=0\n"
    "case $phase in\n"
    "write)\n"
    "\t/usr/sbin/nvme id-ctrl /dev/nvme0; echo \"LVMM-IDCTRL-RC $?\"\n"
    "\t/usr/sbin/nvme list; echo \"LVMM-LIST-RC $?\"\n"
    "\tLD_PRELOAD=/usr/lib/lvmm-shm-shim.so /usr/bin/fio \"$@\" --do_verify=0; echo "
    "\"LVMM-FIO-WRITE-RC $?\"\n"
    "\t;;\n"
    "verify)\n"
    "\tLD_PRELOAD=/usr/lib/lvmm-shm-shim.so /usr/bin/fio \"$@\" --verify_only; echo "
    "\"LVMM-FIO-VERIFY-RC $?\"\n"
    "\t;;\n"
    "esac\n"
    "echo \"LVMM-USER-DONE $phase\"\n"
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

static void boot_user(const char *phase, struct linuxboot *b)
{
	const char *build = testutil_env_or("BUILD", "build");
	char kernel_def[4096], cmdline[256], root_arg[256], data_arg[256];
	const char *kernel;
	int i;

	snprintf(kernel_def, sizeof(kernel_def), "%s/guest/vmlinux", build);
	kernel = testutil_env_or("LVMM_GUEST_KERNEL", kernel_def);
	ck_assert_msg(access(kernel, R_OK) == 0, "%s missing: run make guest", kernel);
	snprintf(cmdline, sizeof(cmdline),
		 "console=ttyS0 root=/dev/nvme0n1 ro rootfstype=ext4 rootwait init=/init "
		 "lvmm.userphase=%s",
		 phase);
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
	printf("linux nvme user side, phase %s: %.1f s to exit\n", phase, b->t_exit);
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

static void boot_check_common(const struct linuxboot *b, const char *phase)
{
	char want[64];

	ck_assert_msg(!b->killed, "lvmm still running after %d s", BOOT_LIMIT_S);
	ck_assert_msg(WIFEXITED(b->status) && WEXITSTATUS(b->status) == 0,
		      "lvmm did not exit 0 (wait status %#x)", b->status);
	ck_assert_msg(strstr(b->console, "LVMM-USER-UP"), "guest user space did not start");
	ck_assert_msg(!strstr(b->console, "LVMM-USER-MOUNT-FAILED"), "mount -a failed");
	ck_assert_msg(strstr(b->console, "disk=/dev/nvme1n1"),
		      "data disk (serial LVMMDATA) not found as /dev/nvme1n1");
	snprintf(want, sizeof(want), "LVMM-USER-DONE %s", phase);
	ck_assert_msg(strstr(b->console, want), "/init did not finish phase %s", phase);
	/* fio prints "err= 0" per job; any other value or a verify report is a failure. */
	ck_assert_msg(strstr(b->console, "lvmmverify: (groupid=0, jobs=1): err= 0"),
		      "fio job reported an error");
	ck_assert_msg(!strstr(b->console, "verify failed") && !strstr(b->console, "bad magic") &&
			  !strstr(b->console, "fio: pid="),
		      "fio reported a verify failure");
}

/* fio's verify header starts every 64 KiB block with its magic (0xacca, little endian): the
 * guest's writes reached the host file, not only the guest's caches. */
static void data_check_headers(void)
{
	unsigned char hdr[2];
	int fd = open(data_img, O_RDONLY), blk, seen = 0;

	ck_assert_int_ge(fd, 0);
	for (blk = 0; blk < (8 << 20) / (64 << 10); blk++) {
		ck_assert_int_eq(pread(fd, hdr, 2, (off_t)blk << 16), 2);
		seen += hdr[0] == 0xca && hdr[1] == 0xac;
	}
	ck_assert_int_eq(pread(fd, hdr, 2, 8 << 20), 2);
	close(fd);
	ck_assert_msg(seen == 128, "%d of 128 blocks carry fio's verify header", seen);
	ck_assert_msg(hdr[0] == 0 && hdr[1] == 0, "fio wrote past its 8 MiB region");
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

	/* Boot 1: nvme-cli against the controller, fio writes and verifies the pattern. */
	boot_user("write", &b);
	boot_report(&b);
	boot_check_common(&b, "write");
	ck_assert_msg(strstr(b.console, "LVMM-IDCTRL-RC 0"), "nvme id-ctrl failed");
	ck_assert_msg(strstr(b.console, "sn        : LVMMROOT"), "id-ctrl: no serial LVMMROOT");
	ck_assert_msg(strstr(b.console, "mn        : "), "id-ctrl: no model number");
	ck_assert_msg(strstr(b.console, "LVMM-LIST-RC 0"), "nvme list failed");
	ck_assert_msg(strstr(b.console, "/dev/nvme0n1") && strstr(b.console, "/dev/nvme1n1"),
		      "nvme list does not show both namespaces");
	ck_assert_msg(strstr(b.console, "LVMM-FIO-WRITE-RC 0"), "fio write+verify failed");
	ck_assert_msg(strstr(b.console, "write: IOPS="), "fio wrote nothing");
	linuxboot_free(&b);
	data_check_headers();

	/* Boot 2: a new lvmm process and guest read the region back and check every block. */
	boot_user("verify", &b);
	boot_report(&b);
	boot_check_common(&b, "verify");
	ck_assert_msg(strstr(b.console, "LVMM-FIO-VERIFY-RC 0"), "fio verify_only failed");
	ck_assert_msg(strstr(b.console, "read: IOPS="), "fio verify_only read nothing");
	linuxboot_free(&b);
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
