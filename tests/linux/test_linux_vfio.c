/* lvmm's VFIO library inside a Linux guest that plays the host (docs/vfio.md): the guest's vNVMe
 * (emulate mode on a file, emulated by this lvmm) is moved from nvme to vfio-pci in no-IOMMU mode
 * and tools/guest/vfio-test drives it through host-kmod/vfio/ (the library and nvme_pci.c, the
 * driver softssd --vfio uses): container, group, device, config
 * space and BAR0 against sysfs, registers through the mapping, MSI-X vectors on eventfds, the
 * controller up with queues addressed physically, Identify on an interrupt, a write and read of
 * 8 LBAs checked byte for byte, VFIO_DEVICE_RESET and the IRQ types. After the guest is gone,
 * the backing file holds the written pattern. One boot. */
#include <check.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ext4check.h"
#include "linuxboot.h"
#include "testutil.h"

/* Hang guards, not speed assertions: the guest kernel is emulated on kvm_pvm hosts. */
#define BOOT_LIMIT_S	1100
#define TCASE_TIMEOUT_S 1300
#define IMG_MB		32
#define DATA_MB		4
#define LBA		8 /* where vfio-test writes BLOCKS blocks of 512 bytes */
#define BLOCKS		8

static char dir[64], img[128], data[128];

/* The vNVMe is the one NVMe function (class 0x010802); it leaves nvme for vfio-pci. */
static const char init_script[] =
    "#!/bin/busybox sh\n"
    "b=/bin/busybox\n"
    "$b mount -t proc proc /proc\n"
    "$b mount -t sysfs sysfs /sys\n"
    "$b mount -t devtmpfs dev /dev\n"
    "echo LVMM-VFIO-UP\n"
    "dev=\n"
    "for d in /sys/bus/pci/devices/*; do\n"
    "\tread -r class <\"$d/class\"\n"
    "\t[ \"$class\" = 0x010802 ] && dev=${d##*/}\n"
    "done\n"
    "echo \"LVMM-VFIO-PCI dev=$dev\"\n"
    "echo \"$dev\" >\"/sys/bus/pci/devices/$dev/driver/unbind\"\n"
    "echo \"LVMM-VFIO-UNBIND-RC $?\"\n"
    "echo vfio-pci >\"/sys/bus/pci/devices/$dev/driver_override\"\n"
    "echo \"$dev\" >/sys/bus/pci/drivers/vfio-pci/bind\n"
    "echo \"LVMM-VFIO-BIND-RC $?\"\n"
    "read -r m </sys/module/vfio/parameters/enable_unsafe_noiommu_mode\n"
    "echo \"LVMM-VFIO-NOIOMMU $m\" $(cd /dev/vfio && echo *)\n"
    "/bin/vfio-test \"$dev\"\n"
    "echo \"LVMM-VFIO-TEST-RC $?\"\n"
    "exec $b reboot -f\n"; /* acpi=off: a reset ends lvmm run */

/* vfio-test's pattern (tools/guest/vfio-test.c) */
static uint8_t pattern(uint64_t i)
{
	return (uint8_t)(i * 7 + (i >> 9) + 0x5a);
}

static void setup(void)
{
	int fd;

	testutil_mkdtemp(dir, sizeof(dir), "/tmp/lvmm-vfio-");
	snprintf(img, sizeof(img), "%s/root.img", dir);
	snprintf(data, sizeof(data), "%s/data.img", dir);
	fd = open(data, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)DATA_MB << 20), 0);
	close(fd);
}

static void teardown(void)
{
	testutil_rmtree(dir);
}

static void must_see(const char *console, const char *what)
{
	ck_assert_msg(strstr(console, what), "the guest did not print '%s'", what);
}

START_TEST(test_linux_vfio)
{
	char kernel[4096], prog[256], disk[256], vnvme[256];
	const char *const extra[] = {prog, "bin/vfio-test", NULL};
	char *args[] = {
	    "--kernel",
	    kernel,
	    "--cmdline",
	    "console=ttyS0 acpi=off root=/dev/vda rw rootfstype=ext4 rootwait init=/init "
	    "vfio.enable_unsafe_noiommu_mode=1",
	    "--cpus",
	    "1",
	    "--memory",
	    "160M",
	    "--disk",
	    disk,
	    "--vnvme",
	    vnvme,
	    NULL};
	uint8_t got[BLOCKS * 512];
	struct linuxboot b;
	const char *c;
	int fd;

	TESTUTIL_NEED_KVM();
	linuxboot_guest_file(kernel, sizeof(kernel), "vmlinux");
	linuxboot_guest_file(prog, sizeof(prog), "vfio-test");
	ext4check_make_root(dir, img, IMG_MB, init_script, extra);
	snprintf(disk, sizeof(disk), "path=%s", img);
	/* two I/O queue pairs: nvme_pci's polled one and the one on MSI-X vector 1 */
	snprintf(vnvme, sizeof(vnvme), "file=%s,serial=LVMMVFIO,queues=2", data);

	linuxboot_run(&b, args, NULL, BOOT_LIMIT_S, 0);
	printf("linux vfio: %.1f s to exit\n", b.t_exit);
	linuxboot_report(&b, 6000);
	c = b.console;
	ck_assert_msg(!b.killed, "lvmm still running after %d s", BOOT_LIMIT_S);
	ck_assert_msg(WIFEXITED(b.status) && WEXITSTATUS(b.status) == 0,
		      "lvmm did not exit 0 (wait status %#x)", b.status);
	must_see(c, "LVMM-VFIO-UP");
	ck_assert_msg(!strstr(c, "LVMM-VFIO-PCI dev=\n") && !strstr(c, "LVMM-VFIO-PCI dev=\r"),
		      "no NVMe function in the guest");
	must_see(c, "LVMM-VFIO-UNBIND-RC 0");
	must_see(c, "LVMM-VFIO-BIND-RC 0");
	must_see(c, "LVMM-VFIO-NOIOMMU Y");
	must_see(c, "noiommu-0 vfio");
	/* vfio-test's steps, in order of the library's layers */
	must_see(c, "VFIO-NOFLAG ok refused: vfio 0000:");
	must_see(c, "is a no-IOMMU group: not allowed without the no-IOMMU flag");
	must_see(c, "VFIO-CONTAINER ok");
	must_see(c, "backend=noiommu");
	must_see(c, "reset=yes");
	must_see(c, "VFIO-CONFIG ok vendor=0x1b36");
	must_see(c, "VFIO-BAR0 ok size=");
	must_see(c, "VFIO-REFUSALS ok");
	must_see(c, "VFIO-REGS ok cap=");
	must_see(c, "vs=0x10400");
	must_see(c, "VFIO-MSIX ok");
	must_see(c, "eventfds=2");
	must_see(c, "VFIO-ENABLE ok");
	must_see(c, "VFIO-IDENTIFY ok vid=0x1b36 sn=LVMMVFIO");
	/* nvme_pci's second I/O queue pair: 64 entries (VNVME_MQES is larger), MSI-X vector 1 */
	must_see(c, "VFIO-IOQ ok qid=2 entries=64 vector=1 lba-size=512");
	must_see(c, "VFIO-IO ok lba=8 blocks=8 bytes=4096 written and read back equal");
	/* the vNVMe's pin through lvmm's INTx route to the guest's vfio-pci, twice (an unmask
	 * between): MSI-X is off, so only INTx can have signalled the eventfd */
	must_see(c, "VFIO-INTX-IRQ ok commands=2 interrupts=");
	must_see(c, "VFIO-RESET ok csts.rdy=0 cc=0");
	must_see(c, "VFIO-IRQINFO ok");
	must_see(c, "VFIO-INTX ok");
	must_see(c, "VFIO-DONE ok");
	must_see(c, "LVMM-VFIO-TEST-RC 0");
	ck_assert_msg(!strstr(c, " FAIL "), "a vfio-test step failed");
	ck_assert_msg(!strstr(c, "interrupts=0"), "a step saw no interrupt");
	linuxboot_free(&b);

	/* the write went through the emulated controller to the file */
	fd = open(data, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, got, sizeof(got), LBA * 512), (ssize_t)sizeof(got));
	close(fd);
	for (unsigned i = 0; i < sizeof(got); i++)
		ck_assert_msg(got[i] == pattern(i), "backing file byte %u: %#x, want %#x",
			      LBA * 512 + i, got[i], pattern(i));
}
END_TEST

static Suite *linux_vfio_suite(void)
{
	Suite *s = suite_create("linux_vfio");
	TCase *tc = tcase_create("noiommu");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, TCASE_TIMEOUT_S);
	tcase_add_test(tc, test_linux_vfio);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return testutil_run_suite(linux_vfio_suite());
}
