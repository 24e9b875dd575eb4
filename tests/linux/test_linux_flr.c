/* Function Level Reset under the stock Linux nvme driver: an ext4 root on an isolated volume,
 * /init resets the vNVMe through sysfs with the FLR method only (pci_reset_function: the
 * driver's reset_prepare deletes its queues, the function resets, config space is restored and
 * the driver sets the controller up again), then writes and syncs a file through the new queue
 * pair; the host finds it in the exported volume and the file system clean. */
#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "linuxboot.h"
#include "nvme-lightiov/lio_client.h"
#include "testutil.h"

/* A boot takes minutes on kvm_pvm hosts (emulated guest kernel). Not a speed assertion. */
#define BOOT_LIMIT_S	1100
#define TCASE_TIMEOUT_S 1300
#define IMG_MB		64
#define SSD		"lxf"

static char dir[64], img[128], logpath[128];
static pid_t daemon_pid;

/* /init: builtins but for the mounts, sync and poweroff. The function is found by its class. */
static const char init_script[] =
    "#!/bin/busybox sh\n"
    "export PATH=/bin\n"
    "/bin/busybox mount -t sysfs sysfs /sys\n"
    "/bin/busybox mount -t proc proc /proc\n"
    "echo 'before the reset' >/before-flr\n"
    "dev=\n"
    "for d in /sys/bus/pci/devices/*; do read -r c <$d/class; "
    "[ \"$c\" = 0x010802 ] && dev=$d; done\n"
    "read -r m <$dev/reset_method && echo \"LVMM-FLR-METHODS $m\"\n"
    "echo flr >$dev/reset_method && echo 1 >$dev/reset && echo LVMM-FLR-DONE\n"
    "echo 'written after the reset' >/after-flr || echo LVMM-FLR-WRITE-FAILED\n"
    "/bin/busybox sync && echo LVMM-FLR-SYNCED\n"
    "while read -r line; do case $line in *nvme0q*) echo \"LVMM-IRQ $line\";; esac; done "
    "</proc/interrupts\n"
    "echo LVMM-FLR-OK\n"
    "exec /bin/busybox poweroff -f\n";

static void daemon_start(void)
{
	char backing[128];
	const char *argv[] = {testutil_lvmm(), "ssd",	 "serve", SSD, "--backing",
			      backing,	       "--size", "256M",  NULL};
	int i;

	snprintf(backing, sizeof(backing), "%s/backing.img", dir);
	daemon_pid = fork();
	ck_assert_int_ge(daemon_pid, 0);
	if (!daemon_pid) {
		int fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND, 0600);

		dup2(fd, 1);
		dup2(fd, 2);
		execv(argv[0], (char **)argv);
		_exit(127);
	}
	for (i = 0; i < 800; i++) { /* 20 s at most */
		struct lio_client *c;
		char err[256];

		if (!lio_client_connect(&c, SSD, "probe", NULL, err, sizeof(err))) {
			lio_client_close(c);
			return;
		}
		testutil_sleep_ms(25);
	}
	ck_abort_msg("softssd did not come up: %s", testutil_slurp(logpath));
}

static void make_image(void)
{
	char root[128], path[256], cmd[512];
	static const char *const sub[] = {"bin", "dev", "proc", "sys"};
	unsigned i;

	snprintf(root, sizeof(root), "%s/root", dir);
	ck_assert_int_eq(mkdir(root, 0755), 0);
	for (i = 0; i < 4; i++) {
		snprintf(path, sizeof(path), "%s/%s", root, sub[i]);
		ck_assert_int_eq(mkdir(path, 0755), 0);
	}
	snprintf(cmd, sizeof(cmd), "cp /bin/busybox %s/bin/busybox", root);
	ck_assert_msg(testutil_sh(cmd, NULL) == 0, "busybox-static is not installed");
	snprintf(path, sizeof(path), "%s/init", root);
	testutil_write_file(path, init_script, strlen(init_script), 0755);
	snprintf(cmd, sizeof(cmd), "mkfs.ext4 -q -F -d %s %s %dM 2>&1", root, img, IMG_MB);
	ck_assert_msg(testutil_sh(cmd, NULL) == 0, "mkfs.ext4 failed");
	snprintf(cmd, sizeof(cmd),
		 "printf 'cd /dev\\nmknod console c 5 1\\nsif console mode 020600\\n"
		 "mknod null c 1 3\\nsif null mode 020666\\n' | debugfs -w -f - %s >/dev/null 2>&1",
		 img);
	ck_assert_msg(testutil_sh(cmd, NULL) == 0, "debugfs mknod failed");
	testutil_rmtree(root);
}

static void setup(void)
{
	testutil_mkdtemp(dir, sizeof(dir), "/tmp/lvmm-flr-linux-");
	snprintf(img, sizeof(img), "%s/root.img", dir);
	snprintf(logpath, sizeof(logpath), "%s/daemon.log", dir);
	setenv("LVMM_RUN_DIR", dir, 1);
	setenv("LVMM_STATE_DIR", "/proc/lvmm-none", 1);
	setenv("LVMM_STATS", "1", 1);
	daemon_start();
}

static void teardown(void)
{
	if (daemon_pid > 0) {
		kill(daemon_pid, SIGTERM);
		testutil_wait_limit(daemon_pid, "softssd", 20);
	}
	testutil_rmtree(dir);
}

START_TEST(test_flr_stock_linux)
{
	char kernel[4096], cmd[256], *out;
	char *args[] = {
	    "--kernel",	 kernel,
	    "--cmdline", "console=ttyS0 root=/dev/nvme0n1 rw rootfstype=ext4 rootwait init=/init",
	    "--cpus",	 "1",
	    "--memory",	 "128M",
	    "--vnvme",	 SSD ",vol=root",
	    NULL};
	struct linuxboot b;
	const char *irq;
	int rc;

	linuxboot_guest_file(kernel, sizeof(kernel), "vmlinux");
	make_image();
	ck_assert_int_eq(testutil_system("%s ssd vol create %s root %dM >/dev/null 2>&1",
					 testutil_lvmm(), SSD, IMG_MB),
			 0);
	ck_assert_int_eq(testutil_system("%s ssd vol import %s root %s >/dev/null 2>&1",
					 testutil_lvmm(), SSD, img),
			 0);
	linuxboot_run(&b, args, NULL, BOOT_LIMIT_S, 0);
	printf("linux FLR: %.1f s to exit\n", b.t_exit);
	fflush(stdout);
	linuxboot_report(&b, 6000);
	ck_assert_msg(!b.killed, "lvmm still running after %d s", BOOT_LIMIT_S);
	ck_assert_msg(WIFEXITED(b.status) && WEXITSTATUS(b.status) == 0,
		      "lvmm did not exit 0 (wait status %#x)", b.status);
	ck_assert_msg(strstr(b.console, "EXT4-fs (nvme0n1): mounted filesystem"),
		      "ext4 root not mounted");
	ck_assert_msg(strstr(b.console, "LVMM-FLR-METHODS") && strstr(b.console, "flr"),
		      "FLR is not among the function's reset methods");
	ck_assert_msg(strstr(b.console, "LVMM-FLR-DONE"), "the FLR through sysfs failed");
	ck_assert_msg(strstr(b.console, "LVMM-FLR-SYNCED"), "sync after the FLR failed");
	ck_assert_msg(!strstr(b.console, "LVMM-FLR-WRITE-FAILED"), "write after the FLR failed");
	ck_assert_msg(strstr(b.console, "LVMM-FLR-OK"), "/init did not finish");
	/* the driver's queue came back with its interrupts: the backend raised them after FLR */
	irq = strstr(b.console, "LVMM-IRQ");
	ck_assert_msg(irq && strstr(irq, "nvme0q1"), "no I/O queue interrupt line");
	ck_assert_msg(!strstr(b.console, "timeout, "), "nvme commands timed out");
	linuxboot_free(&b);
	ck_assert_int_eq(testutil_system("%s ssd vol export %s root %s >/dev/null 2>&1",
					 testutil_lvmm(), SSD, img),
			 0);
	snprintf(cmd, sizeof(cmd), "e2fsck -fy %s 2>&1", img);
	rc = testutil_sh(cmd, &out);
	ck_assert_msg(rc == 0 || rc == 1, "e2fsck -fy: rc %d\n%s", rc, out);
	free(out);
	snprintf(cmd, sizeof(cmd), "debugfs -R 'cat /after-flr' %s 2>/dev/null", img);
	ck_assert_int_eq(testutil_sh(cmd, &out), 0);
	ck_assert_msg(strstr(out, "written after the reset"), "file on the volume: '%s'", out);
	free(out);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("linux_flr");
	TCase *tc = tcase_create("isolated");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, TCASE_TIMEOUT_S);
	tcase_add_test(tc, test_flr_stock_linux);
	suite_add_tcase(s, tc);
	return testutil_run_suite(s);
}
