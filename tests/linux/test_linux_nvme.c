/* Linux kernel side of the vNVMe controller: the stock nvme driver binds with MSI-X and one I/O
 * queue per vCPU, the ext4 root file system on /dev/nvme0n1 is mounted read-write, /init on it
 * writes a file; afterwards the host checks the image (mount count, last mount time, e2fsck after
 * journal recovery, the file) and a second boot mounts it again. The first boot also runs the
 * command sweep (tools/guest/nvme-sweep.c, the kernel's NVMe ioctls) against a second, scratch
 * controller: every command's status and the values that matter as NVMe 1.4 has them. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "linuxboot.h"
#include "ext4check.h"
#include "testutil.h"

/* A boot takes minutes on kvm_pvm hosts (emulated guest kernel). Not a speed assertion. */
#define BOOT_LIMIT_S	1200
#define TCASE_TIMEOUT_S 6000
#define IMG_MB		64
/* Commands and value checks of nvme-sweep.c: the test fails when one goes missing. */
#define SWEEP_RUN 136

static char dir[64], img[128], sweep_img[128], last_mount[64];

/* /init on the root file system: shell builtins only, except the two mounts and poweroff
 * (every fork costs seconds of emulated kernel time on kvm_pvm hosts). */
static const char init_script[] =
    "#!/bin/busybox sh\n"
    "export PATH=/bin:/usr/sbin\n"
    "echo LVMM-NVME-ROOT-UP\n"
    "/bin/busybox mount -t sysfs sysfs /sys\n"
    "/bin/busybox mount -t proc proc /proc\n"
    "read -r sz </sys/block/nvme0n1/size && echo \"LVMM-NVME-SIZE $sz\"\n"
    "while read -r line; do case $line in *nvme0q*) echo \"LVMM-IRQ $line\";; esac; done "
    "</proc/interrupts\n"
    "while read -r line; do case $line in *\" / \"*) echo \"LVMM-MOUNT $line\";; esac; done "
    "</proc/mounts\n"
    "for f in /sys/bus/pci/devices/0000:00:0*/msi_irqs/*; do read -r k <$f; "
    "echo \"LVMM-MSI ${f##*/} $k\"; done\n"
    "for f in /sys/bus/pci/devices/0000:00:0*/p2pmem; do read -r sz <$f/size; "
    "read -r av <$f/available; echo \"LVMM-CMB size=$sz used=$((sz - av))\"; done\n"
    "n=0; read -r n </boot-count; n=$((n + 1)); echo $n >/boot-count\n"
    "if [ $n = 1 ]; then /bin/busybox mount -t devtmpfs devtmpfs /dev && "
    "/bin/nvme-sweep LVMMSWEEP; fi\n"
    "echo \"written by the guest, boot $n\" >/guest-was-here || echo LVMM-NVME-WRITE-FAILED\n"
    "echo \"LVMM-NVME-ROOT-OK boot=$n\"\n"
    "exec /bin/busybox poweroff -f\n";

static void make_image(void)
{
	char root[128], path[256], cmd[512], sweep[256];

	snprintf(root, sizeof(root), "%s/root", dir);
	ck_assert_int_eq(mkdir(root, 0755), 0);
	snprintf(path, sizeof(path), "%s/bin", root);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	snprintf(cmd, sizeof(cmd), "cp /bin/busybox %s/bin/busybox", root);
	ck_assert_msg(testutil_sh(cmd, NULL) == 0, "busybox-static is not installed");
	snprintf(path, sizeof(path), "%s/dev", root);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/proc", root);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/sys", root);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/init", root);
	testutil_write_file(path, init_script, strlen(init_script), 0755);
	snprintf(path, sizeof(path), "%s/boot-count", root);
	testutil_write_file(path, "0\n", 2, 0644);
	/* the sweep: one static program, every command in one process */
	linuxboot_guest_file(sweep, sizeof(sweep), "nvme-sweep");
	snprintf(cmd, sizeof(cmd), "cp %s %s/bin/nvme-sweep", sweep, root);
	ck_assert_int_eq(testutil_sh(cmd, NULL), 0);
	snprintf(cmd, sizeof(cmd), "mkfs.ext4 -q -F -d %s %s %dM 2>&1", root, img, IMG_MB);
	ck_assert_msg(testutil_sh(cmd, NULL) == 0, "mkfs.ext4 failed");
	/* No devtmpfs automount in the test kernel: the console node lives on the image (made by
	 * debugfs, so the test needs no privilege for mknod). */
	snprintf(cmd, sizeof(cmd),
		 "printf 'cd /dev\\nmknod console c 5 1\\nsif console mode 020600\\n"
		 "mknod null c 1 3\\nsif null mode 020666\\n' | debugfs -w -f - %s >/dev/null 2>&1",
		 img);
	ck_assert_msg(testutil_sh(cmd, NULL) == 0, "debugfs mknod failed");
	testutil_rmtree(root);
}

static void boot_nvme(unsigned cpus, struct linuxboot *b)
{
	char kernel[4096], vnvme_arg[256], sweep_arg[256], cpus_arg[16];
	char *args[] = {
	    "--kernel",	 kernel,
	    "--cmdline", "console=ttyS0 root=/dev/nvme0n1 rw rootfstype=ext4 rootwait init=/init",
	    "--cpus",	 cpus_arg,
	    "--memory",	 "128M",
	    "--vnvme",	 vnvme_arg,
	    "--vnvme",	 sweep_arg,
	    NULL};

	linuxboot_guest_file(kernel, sizeof(kernel), "vmlinux");
	snprintf(vnvme_arg, sizeof(vnvme_arg), "file=%s,serial=LVMMROOT", img);
	/* the sweep's scratch disk: commands write, zero and deallocate it */
	snprintf(sweep_arg, sizeof(sweep_arg), "file=%s,size=4M,serial=LVMMSWEEP", sweep_img);
	snprintf(cpus_arg, sizeof(cpus_arg), "%u", cpus);
	linuxboot_run(b, args, NULL, BOOT_LIMIT_S, 0);
	printf("linux nvme root boot, %u CPU(s): %.1f s to exit\n", cpus, b->t_exit);
	fflush(stdout);
}

static void setup(void)
{
	testutil_mkdtemp(dir, sizeof(dir), "/tmp/lvmm-nvme-linux-");
	snprintf(img, sizeof(img), "%s/root.img", dir);
	snprintf(sweep_img, sizeof(sweep_img), "%s/sweep.img", dir);
}

static void teardown(void)
{
	testutil_rmtree(dir);
}

/* The sweep ran every command and each answered as the specification says; the lines that did
 * not go into the failure message. */
static void sweep_check(const char *console)
{
	char want[64], bad[2048] = "", *p;
	const char *l;
	size_t n = 0;

	for (l = strstr(console, "MISMATCH"); l && n < sizeof(bad) - 200;
	     l = strstr(l + 1, "MISMATCH")) {
		const char *s = l;

		while (s > console && s[-1] != '\n')
			s--;
		p = strchr(l, '\n');
		n += (size_t)snprintf(bad + n, sizeof(bad) - n, "%.*s\n", (int)(l - s + 8), s);
		/* the output line that follows a mismatch */
		if (p && !strncmp(p + 1, "SWEEP-OUT", 9))
			n += (size_t)snprintf(bad + n, sizeof(bad) - n, "%.*s\n",
					      (int)strcspn(p + 1, "\r\n"), p + 1);
	}
	ck_assert_msg(strstr(console, "SWEEP-START"), "the NVMe command sweep did not start");
	snprintf(want, sizeof(want), "LVMM-SWEEP-DONE run=%d mismatches=0", SWEEP_RUN);
	ck_assert_msg(strstr(console, want), "NVMe command sweep: want '%s'\n%s", want, bad);
}

START_TEST(test_nvme_root)
{
	struct linuxboot b;
	char want[64];
	int boot;

	make_image();
	ck_assert_int_eq(ext4check_mounts(img, last_mount, sizeof(last_mount)), 0);
	ck_assert_str_eq(last_mount, "n/a");
	for (boot = 1; boot <= 2; boot++) {
		/* One vCPU, so one I/O queue: keeps two boots short where guest kernels run
		 * emulated. */
		boot_nvme(1, &b);
		linuxboot_report(&b, 4000);
		ck_assert_msg(!b.killed, "lvmm still running after %d s", BOOT_LIMIT_S);
		ck_assert_msg(WIFEXITED(b.status) && WEXITSTATUS(b.status) == 0,
			      "lvmm did not exit 0 (wait status %#x)", b.status);
		ck_assert_msg(strstr(b.console, "nvme nvme0: pci function"), "nvme did not bind");
		ck_assert_msg(strstr(b.console, "nvme nvme0: 1/0/0 default/read/poll queues"),
			      "not one I/O queue per vCPU");
		ck_assert_msg(strstr(b.console, "EXT4-fs (nvme0n1): mounted filesystem"),
			      "ext4 root not mounted");
		ck_assert_msg(strstr(b.console, "LVMM-NVME-SIZE 131072"),
			      "namespace size is not 64 MiB");
		ck_assert_msg(strstr(b.console, "nvme0q1"), "no I/O queue interrupt");
		ck_assert_msg(strstr(b.console, " msix") && !strstr(b.console, " msi\r") &&
				  !strstr(b.console, " msi\n"),
			      "nvme interrupts are not MSI-X");
		/* The driver registered the CMB as P2P memory and took its I/O SQ from it: one
		 * queue of MQES + 1 = 1024 entries of 64 bytes. */
		ck_assert_msg(!strstr(b.console, "failed to register the CMB"),
			      "the guest could not register the CMB");
		ck_assert_msg(strstr(b.console, "LVMM-CMB size=2097152 used=65536"),
			      "the I/O submission queue is not in the CMB");
		ck_assert_msg(strstr(b.console, "LVMM-MOUNT /dev/root / ext4 rw"),
			      "root not mounted read-write");
		if (boot == 1)
			sweep_check(b.console);
		snprintf(want, sizeof(want), "LVMM-NVME-ROOT-OK boot=%d", boot);
		ck_assert_msg(strstr(b.console, want), "/init on the vNVMe root did not finish");
		linuxboot_free(&b);
		ext4check_after_boot(img, boot, last_mount, sizeof(last_mount));
	}
}
END_TEST

static Suite *linux_nvme_suite(void)
{
	Suite *s = suite_create("linux_nvme");
	TCase *tc = tcase_create("root");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, TCASE_TIMEOUT_S);
	tcase_add_test(tc, test_nvme_root);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return testutil_run_suite(linux_nvme_suite());
}
