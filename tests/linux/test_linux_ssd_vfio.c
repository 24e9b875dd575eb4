/* softssd --vfio inside a Linux guest that plays the host (docs/vfio.md, "softssd --vfio"): the
 * guest's vNVMe (emulate mode on a file, emulated by this lvmm) moves from nvme to vfio-pci in
 * no-IOMMU mode, `ssd-guest serve ssd0 --vfio BDF --allow-noiommu` (lvmm's softssd, static)
 * drives it, a volume is created, and `vol import` / `vol export` (a client with a queue pair of
 * its own, isolated mode) write a pattern and read it back through the daemon and the
 * controller. After the guest is gone, the outer backing file holds the volume table at byte 0
 * (lightiov.ko's layout) and the pattern at the volume's LBAs. One boot. */
#include <check.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ext4check.h"
#include "lightiov/voltable.h"
#include "linuxboot.h"
#include "testutil.h"

/* Hang guards, not speed assertions: the guest kernel is emulated on kvm_pvm hosts. */
#define BOOT_LIMIT_S	1100
#define TCASE_TIMEOUT_S 1300
#define IMG_MB		32
#define DATA_MB		8
#define VOL_BYTES	(1u << 20)

static char dir[64], img[128], data[128], pat[128];

/* The vNVMe is the one NVMe function (class 0x010802); it leaves nvme for vfio-pci, then the
 * daemon serves it and the volume commands run as its clients. */
static const char init_script[] =
    "#!/bin/busybox sh\n"
    "b=/bin/busybox\n"
    "$b mount -t proc proc /proc\n"
    "$b mount -t sysfs sysfs /sys\n"
    "$b mount -t devtmpfs dev /dev\n"
    "echo LVMM-SSDVFIO-UP\n"
    "dev=\n"
    "for d in /sys/bus/pci/devices/*; do\n"
    "\tread -r class <\"$d/class\"\n"
    "\t[ \"$class\" = 0x010802 ] && dev=${d##*/}\n"
    "done\n"
    "echo \"LVMM-SSDVFIO-PCI dev=$dev\"\n"
    "echo \"$dev\" >\"/sys/bus/pci/devices/$dev/driver/unbind\"\n"
    "echo vfio-pci >\"/sys/bus/pci/devices/$dev/driver_override\"\n"
    "echo \"$dev\" >/sys/bus/pci/drivers/vfio-pci/bind\n"
    "echo \"LVMM-SSDVFIO-BIND-RC $?\"\n"
    "export LVMM_RUN_DIR=/tmp/run\n"
    "$b mkdir -p /tmp/run\n"
    "s=/bin/ssd-guest\n"
    "$s serve ssd0 --vfio \"$dev\" --allow-noiommu --workers 1 &\n"
    "pid=$!\n"
    "n=0\n"
    "while [ ! -S /tmp/run/ssd/ssd0.sock ] && [ $n -lt 600 ] && kill -0 $pid; do\n"
    "\t$b sleep 0.1; n=$((n + 1))\n"
    "done\n"
    "t=\"$b timeout 120\"\n" /* a hang guard: the daemon's counters are printed after */
    "$t $s vol create ssd0 v1 1M\n"
    "echo \"LVMM-SSDVFIO-CREATE-RC $?\"\n"
    /* serving clients, so confined as any softssd: its filter on, no capability left */
    "while read -r k v; do case $k in Seccomp: | CapEff:) echo \"LVMM-SSDVFIO-$k $v\";; esac; "
    "done </proc/$pid/status\n"
    "$t $s vol import ssd0 v1 /pattern.bin\n"
    "echo \"LVMM-SSDVFIO-IMPORT-RC $?\"\n"
    "$t $s vol export ssd0 v1 /tmp/out.bin\n"
    "echo \"LVMM-SSDVFIO-EXPORT-RC $?\"\n"
    "$t $s stats ssd0\n"
    "$b cmp /pattern.bin /tmp/out.bin && echo LVMM-SSDVFIO-CMP-OK\n"
    "$s vol list ssd0\n"
    "$b kill $pid\n"
    "wait $pid\n"
    "echo \"LVMM-SSDVFIO-SERVE-RC $?\"\n"
    "exec $b reboot -f\n"; /* acpi=off: a reset ends lvmm run */

/* never zero, so that import writes every chunk */
static uint8_t pattern(uint64_t i)
{
	return (uint8_t)((i * 13 + (i >> 9) * 7) % 255 + 1);
}

static void setup(void)
{
	uint8_t *buf = malloc(VOL_BYTES);
	int fd;

	ck_assert_ptr_nonnull(buf);
	testutil_mkdtemp(dir, sizeof(dir), "/tmp/lvmm-ssdvfio-");
	snprintf(img, sizeof(img), "%s/root.img", dir);
	snprintf(data, sizeof(data), "%s/data.img", dir);
	snprintf(pat, sizeof(pat), "%s/pattern.bin", dir);
	fd = open(data, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)DATA_MB << 20), 0);
	close(fd);
	for (uint64_t i = 0; i < VOL_BYTES; i++)
		buf[i] = pattern(i);
	fd = open(pat, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, buf, VOL_BYTES), VOL_BYTES);
	close(fd);
	free(buf);
}

static void teardown(void)
{
	testutil_rmtree(dir);
}

static void must_see(const char *console, const char *what)
{
	ck_assert_msg(strstr(console, what), "the guest did not print '%s'", what);
}

START_TEST(test_linux_ssd_vfio)
{
	char kernel[4096], prog[256], disk[256], vnvme[256];
	const char *const extra[] = {prog, "bin/ssd-guest", pat, "pattern.bin", NULL};
	char *args[] = {
	    "--kernel",
	    kernel,
	    "--cmdline",
	    "console=ttyS0 acpi=off root=/dev/vda rw rootfstype=ext4 rootwait init=/init "
	    "vfio.enable_unsafe_noiommu_mode=1",
	    "--cpus",
	    "1",
	    "--memory",
	    "192M",
	    "--disk",
	    disk,
	    "--vnvme",
	    vnvme,
	    NULL};
	static struct lio_vt vt;
	uint8_t *area, *got;
	struct linuxboot b;
	const char *c;
	int fd, which, v;

	TESTUTIL_NEED_KVM();
	linuxboot_guest_file(kernel, sizeof(kernel), "vmlinux");
	linuxboot_guest_file(prog, sizeof(prog), "ssd-guest");
	if (access(prog, X_OK)) {
		testutil_skip("no %s (make %s)", prog, "build/guest/ssd-guest");
		return;
	}
	ext4check_make_root(dir, img, IMG_MB, init_script, extra);
	snprintf(disk, sizeof(disk), "path=%s", img);
	/* two I/O queues: the volume table's and the worker's */
	snprintf(vnvme, sizeof(vnvme), "file=%s,serial=LVMMSSDVFIO,queues=2", data);

	linuxboot_run(&b, args, NULL, BOOT_LIMIT_S, 0);
	printf("linux ssd vfio: %.1f s to exit\n", b.t_exit);
	linuxboot_report(&b, 8000);
	c = b.console;
	ck_assert_msg(!b.killed, "lvmm still running after %d s", BOOT_LIMIT_S);
	ck_assert_msg(WIFEXITED(b.status) && WEXITSTATUS(b.status) == 0,
		      "lvmm did not exit 0 (wait status %#x)", b.status);
	must_see(c, "LVMM-SSDVFIO-UP");
	must_see(c, "LVMM-SSDVFIO-BIND-RC 0");
	/* the daemon found the controller and served it */
	must_see(c, "serial LVMMSSDVFIO)");
	must_see(c, "no-IOMMU, 16384 LBAs of 512 bytes");
	must_see(c, "ssd0: serving 0000:");
	must_see(c, "LVMM-SSDVFIO-Seccomp: 2");
	must_see(c, "LVMM-SSDVFIO-CapEff: 0000000000000000");
	must_see(c, "LVMM-SSDVFIO-CREATE-RC 0");
	must_see(c, "LVMM-SSDVFIO-IMPORT-RC 0");
	must_see(c, "LVMM-SSDVFIO-EXPORT-RC 0");
	must_see(c, "LVMM-SSDVFIO-CMP-OK");
	must_see(c, "LVMM-SSDVFIO-SERVE-RC 0");
	linuxboot_free(&b);

	/* the table as lightiov.ko reads it, and the pattern where it says the volume is */
	area = malloc(LIO_VT_RESERVED_BYTES);
	got = malloc(VOL_BYTES);
	ck_assert_ptr_nonnull(area);
	ck_assert_ptr_nonnull(got);
	fd = open(data, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, area, LIO_VT_RESERVED_BYTES, 0), LIO_VT_RESERVED_BYTES);
	ck_assert_int_eq(
	    lio_vt_load(area + LIO_VT_COPY_OFF(0), area + LIO_VT_COPY_OFF(1), &vt, &which), 0);
	ck_assert_str_eq(vt.ssd_name, "ssd0");
	ck_assert_uint_eq(vt.lba_shift, 9);
	v = lio_vt_find(&vt, "v1");
	ck_assert_int_ge(v, 0);
	ck_assert_uint_eq(vt.e[v].lba_count, VOL_BYTES / 512);
	ck_assert_uint_ge(vt.e[v].lba_start, LIO_VT_RESERVED_BYTES / 512);
	ck_assert_int_eq(pread(fd, got, VOL_BYTES, (off_t)(vt.e[v].lba_start * 512)), VOL_BYTES);
	close(fd);
	for (unsigned i = 0; i < VOL_BYTES; i++)
		ck_assert_msg(
		    got[i] == pattern(i), "backing byte %llu (volume byte %u): %#x, want %#x",
		    (unsigned long long)(vt.e[v].lba_start * 512 + i), i, got[i], pattern(i));
	free(area);
	free(got);
}
END_TEST

static Suite *linux_ssd_vfio_suite(void)
{
	Suite *s = suite_create("linux_ssd_vfio");
	TCase *tc = tcase_create("noiommu");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, TCASE_TIMEOUT_S);
	tcase_add_test(tc, test_linux_ssd_vfio);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return testutil_run_suite(linux_ssd_vfio_suite());
}
