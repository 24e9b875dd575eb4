/* Linux boot test: runs $LVMM with $BUILD/guest/vmlinux and checks from the serial console that
 * the CPUs came up, /init ran its marker and a test script (short-lived processes in pipelines,
 * each result checked), and the VM powered off. The two-vCPU case boots from initramfs.cpio with
 * ACPI. The one-vCPU case boots the fastest way docs/boot.md offers: acpi=off (MP table and conf1
 * PCI only; /init ends the VM with a reset) and the same root as a read-only ext4 image on a
 * virtio-blk disk (rootfs.img, root=/dev/vda) instead of an initramfs. */
#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "linuxboot.h"
#include "testutil.h"

/* A boot takes minutes on kvm_pvm hosts (emulated guest kernel); CI runs this on 2 cores. */
#define BOOT_LIMIT_S 1000
/* Console silent this long: the guest hangs (the longest quiet phase seen was ~100 s). */
#define STALL_LIMIT_S	400
#define TCASE_TIMEOUT_S 1100

/* Console markers timed by the harness. */
static const char *const marks[] = {"Run /init", "LVMM-GUEST-UP", NULL};
enum { MARK_INIT, MARK_UP };

/* Boots cpus vCPUs with cmdline; root_disk: rootfs.img as a read-only virtio-blk disk and the root
 * file system, otherwise initramfs.cpio. */
static void boot_guest(unsigned cpus, const char *cmdline, bool root_disk, struct linuxboot *b)
{
	char kernel[4096], image[4096], disk[4200], line[512], cpus_arg[16];
	char *args[] = {"--kernel", kernel,   "--initramfs", image,  "--cmdline", line,
			"--cpus",   cpus_arg, "--memory",    "128M", NULL};

	linuxboot_guest_file(kernel, sizeof(kernel), "vmlinux");
	linuxboot_guest_file(image, sizeof(image), root_disk ? "rootfs.img" : "initramfs.cpio");
	snprintf(line, sizeof(line), "%s%s", cmdline,
		 root_disk ? " root=/dev/vda ro init=/init" : "");
	if (root_disk) {
		snprintf(disk, sizeof(disk), "path=%s,readonly=on", image);
		args[2] = "--disk";
		args[3] = disk;
	}
	snprintf(cpus_arg, sizeof(cpus_arg), "%u", cpus);
	linuxboot_run(b, args, marks, BOOT_LIMIT_S, STALL_LIMIT_S);
	printf("linux boot, %u CPU(s), root on %s: host time to \"Run /init\" %.1f s, to marker "
	       "%.1f s, to exit %.1f s; kernel printk time at \"Run /init\" %.1f s\n",
	       cpus, root_disk ? "a virtio-blk disk" : "the initramfs", b->t_mark[MARK_INIT],
	       b->t_mark[MARK_UP], b->t_exit, linuxboot_printk_time(b->console, "Run /init"));
	fflush(stdout);
}

/* pipes.sh's iterations and processes: lvmm.pipes=PIPES_ITER runs 4 checks per iteration, nine
 * processes (forks and execs of busybox) in all. */
#define PIPES_ITER "8"
#define PIPES_OK   "32"

/* Every pipeline's result was right and no guest process died of a fault: on kvm_pvm hosts the
 * processes of a pipeline read each other's AVX registers unless lvmm keeps glibc off them. */
static void assert_pipes(const struct linuxboot *b)
{
	ck_assert_msg(
	    strstr(b->console, "LVMM-PIPES ok=" PIPES_OK " bad=0 iterations=" PIPES_ITER),
	    "a pipeline or command substitution gave a wrong result (LVMM-PIPES-BAD lines)");
	ck_assert_msg(!strstr(b->console, "segfault at") &&
			  !strstr(b->console, "general protection"),
		      "a guest process died of a fault");
}

/* lvmm exited 0 after the guest's poweroff (ACPI S5) or, booted with acpi=off, its reset. */
static void assert_guest_ended(const struct linuxboot *b, bool acpi)
{
	ck_assert_msg(!b->killed, "lvmm stopped by the test: the guest hung or took over %d s",
		      BOOT_LIMIT_S);
	ck_assert_msg(WIFEXITED(b->status) && WEXITSTATUS(b->status) == 0,
		      "lvmm did not exit 0 (wait status %#x)", b->status);
	if (acpi) {
		ck_assert_msg(strstr(b->log, "powered off"),
			      "lvmm did not report a guest poweroff");
		ck_assert_msg(strstr(b->console, "lvmm-init: powering off"),
			      "/init did not reach poweroff");
	} else {
		ck_assert_msg(strstr(b->console, "ACPI: Interpreter disabled"),
			      "acpi=off did not keep ACPI off");
		ck_assert_msg(strstr(b->log, "guest rebooted"),
			      "lvmm did not report a guest reset");
		ck_assert_msg(strstr(b->console, "lvmm-init: rebooting (no ACPI"),
			      "/init did not take its reset path without ACPI");
	}
}

START_TEST(test_boot_smp2)
{
	struct linuxboot b;

	boot_guest(2, "console=ttyS0 lvmm.test=smoke lvmm.pipes=" PIPES_ITER, false, &b);
	linuxboot_report(&b, 3000);
	ck_assert_msg(strstr(b.console, "smp: Brought up 1 node, 2 CPUs"),
		      "the kernel did not bring up both CPUs");
	ck_assert_msg(strstr(b.console, "LVMM-GUEST-UP cpus=2"), "no /init marker with cpus=2");
	ck_assert_msg(strstr(b.console, "LVMM-SMOKE-OK"), "the smoke test script did not pass");
	assert_pipes(&b);
	ck_assert_msg(strstr(b.console, "LVMM-TEST-DONE smoke rc=0"), "smoke test rc != 0");
	assert_guest_ended(&b, true);
	linuxboot_free(&b);
}
END_TEST

/* One vCPU separates "Linux user space works" from "SMP bring-up works" when the test above fails;
 * the pipelines run on one and on two vCPUs, from an initramfs and from a disk root (whose /tmp is
 * a tmpfs). */
START_TEST(test_boot_up1)
{
	struct linuxboot b;

	boot_guest(1, "console=ttyS0 acpi=off lvmm.test=pipes lvmm.pipes=" PIPES_ITER, true, &b);
	linuxboot_report(&b, 3000);
	ck_assert_msg(strstr(b.console, "VFS: Mounted root (ext4 filesystem) readonly"),
		      "the root is not the read-only ext4 disk");
	ck_assert_msg(!strstr(b.console, "Unpacking initramfs"), "an initramfs was unpacked");
	ck_assert_msg(strstr(b.console, "LVMM-GUEST-UP cpus=1"), "no /init marker with cpus=1");
	ck_assert_msg(!strstr(b.console, "LVMM-SMOKE-OK"), "a test other than lvmm.test= ran");
	assert_pipes(&b);
	ck_assert_msg(strstr(b.console, "LVMM-TEST-DONE pipes rc=0"), "pipes test rc != 0");
	assert_guest_ended(&b, false);
	linuxboot_free(&b);
}
END_TEST

/* Separate cases so CK_RUN_CASE=up1 or smp2 boots one configuration only. */
static Suite *linux_boot_suite(void)
{
	Suite *s = suite_create("linux_boot");
	TCase *up1 = tcase_create("up1");
	TCase *smp2 = tcase_create("smp2");

	tcase_set_timeout(up1, TCASE_TIMEOUT_S);
	tcase_add_test(up1, test_boot_up1);
	suite_add_tcase(s, up1);
	tcase_set_timeout(smp2, TCASE_TIMEOUT_S);
	tcase_add_test(smp2, test_boot_smp2);
	suite_add_tcase(s, smp2);
	return s;
}

int main(void)
{
	return testutil_run_suite(linux_boot_suite());
}
