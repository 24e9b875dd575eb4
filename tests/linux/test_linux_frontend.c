/* The LightIOV frontend in a Linux guest (issue #13): the test kernel's patched nvme driver on
 * passthrough-mode vNVMe functions over softssd volumes. Two boots with an ext4 root on one volume
 * (read-write, the host checks the exported volume between them); in each, NVMe ioctls from user
 * space out of the window or with an unknown opcode get EIO and change nothing on the SSD; in the
 * second, the other vNVMe moves to lightiov_nvme.ko (driver_override), is written and verified,
 * rmmod gives it back to nvme, which reads the same data; the host finds it in that volume.
 * Then lightiov_nvme.ko drives a third, file-backed function that misbehaves on purpose
 * (LVMM_FAULT_NVME: CMBSZ larger than the CMB BAR, every third I/O completion posted twice;
 * issue 29, item 7): the data reads back right and every duplicate is logged and ignored. */
#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../guest-driver/tests/lio-frontend-pattern.h"
#include "linuxboot.h"
#include "client/lio_client.h"
#include "ssdutil.h"
#include "ext4check.h"
#include "testutil.h"

/* A boot takes minutes on kvm_pvm hosts (emulated guest kernel). Not a speed assertion. */
#define BOOT_LIMIT_S	1100
#define TCASE_TIMEOUT_S 2400
#define ROOT_MB		64
#define SCRATCH_MB	16
#define PRE_MB		4
#define SSD		"lf0"
#define PRE_BYTE	0x5a
#define SCRATCH_BYTE	0x3c
#define FAULT_SERIAL	"liofault"

static char dir[64], img[128], logpath[128], last_mount[64];
static pid_t daemon_pid;

/* /init on the root volume: builtins but for the mounts, the probe and poweroff. */
static const char init_script[] =
    "#!/bin/busybox sh\n"
    "export PATH=/bin\n"
    "echo LVMM-FRONTEND-ROOT-UP\n"
    "/bin/busybox mount -t sysfs sysfs /sys\n"
    "/bin/busybox mount -t proc proc /proc\n"
    "/bin/busybox mount -t devtmpfs dev /dev\n"
    "read -r sz </sys/block/nvme0n1/size && echo \"LVMM-NVME-SIZE $sz\"\n"
    "while read -r line; do case $line in *\" / \"*) echo \"LVMM-MOUNT $line\";; esac; done "
    "</proc/mounts\n"
    "for f in /sys/bus/pci/devices/0000:00:0*/p2pmem; do read -r sz <$f/size; "
    "read -r av <$f/available; echo \"LVMM-CMB size=$sz used=$((sz - av))\"; done\n"
    "n=0; read -r n </boot-count; n=$((n + 1)); echo $n >/boot-count\n"
    "echo \"written by the guest, boot $n\" >/guest-was-here || echo LVMM-NVME-WRITE-FAILED\n"
    "if [ $n = 2 ]; then /bin/lio-frontend-probe module; . /lio-faults.sh; "
    "else /bin/lio-frontend-probe; fi\n"
    "echo \"LVMM-FRONTEND-ROOT-OK boot=$n\"\n"
    "exec /bin/busybox poweroff -f\n";

static void build_file(char *buf, size_t len, const char *rel)
{
	snprintf(buf, len, "%s/%s", testutil_env_or("BUILD", "build"), rel);
	ck_assert_msg(access(buf, R_OK) == 0, "%s missing: run make guest-driver", buf);
}

static void daemon_start(void)
{
	char backing[128];
	const char *opts[] = {"--backing", backing, "--size", "256M", NULL};

	snprintf(backing, sizeof(backing), "%s/backing.img", dir);
	daemon_pid = testutil_ssd_start(SSD, logpath, opts);
}

static void make_image(void)
{
	char root[128], path[256], cmd[512], ko[256], probe[256];
	static const char *const sub[] = {"bin", "dev", "proc", "sys"};
	unsigned i;

	build_file(ko, sizeof(ko), "guest-driver/guest/lightiov_nvme.ko");
	build_file(probe, sizeof(probe), "guest-driver/lio-frontend-probe");
	snprintf(root, sizeof(root), "%s/root", dir);
	ck_assert_int_eq(mkdir(root, 0755), 0);
	for (i = 0; i < 4; i++) {
		snprintf(path, sizeof(path), "%s/%s", root, sub[i]);
		ck_assert_int_eq(mkdir(path, 0755), 0);
	}
	ck_assert_msg(testutil_system("cp /bin/busybox %s/bin/busybox", root) == 0,
		      "busybox-static is not installed");
	ck_assert_int_eq(
	    testutil_system(
		"cp %s %s/bin/lio-frontend-probe && cp %s tools/guest/tests/lio-faults.sh %s/",
		probe, root, ko, root),
	    0);
	snprintf(path, sizeof(path), "%s/init", root);
	testutil_write_file(path, init_script, strlen(init_script), 0755);
	snprintf(path, sizeof(path), "%s/boot-count", root);
	testutil_write_file(path, "0\n", 2, 0644);
	snprintf(cmd, sizeof(cmd), "mkfs.ext4 -q -F -d %s %s %dM 2>&1", root, img, ROOT_MB);
	ck_assert_msg(testutil_sh(cmd, NULL) == 0, "mkfs.ext4 failed");
	snprintf(cmd, sizeof(cmd),
		 "printf 'cd /dev\\nmknod console c 5 1\\nsif console mode 020600\\n"
		 "mknod null c 1 3\\nsif null mode 020666\\n' | debugfs -w -f - %s >/dev/null 2>&1",
		 img);
	ck_assert_msg(testutil_sh(cmd, NULL) == 0, "debugfs mknod failed");
	testutil_rmtree(root);
}

static void vol_copy(const char *op, const char *vol, const char *file)
{
	ck_assert_msg(testutil_system("%s ssd vol %s %s %s %s >/dev/null 2>&1", testutil_lvmm(), op,
				      SSD, vol, file) == 0,
		      "ssd vol %s %s %s failed", op, vol, file);
}

/* A file of mb MiB of one byte value, imported into vol. */
static void vol_fill(const char *vol, unsigned mb, int byte)
{
	char path[128];
	size_t len = (size_t)mb << 20;
	char *buf = malloc(len);

	ck_assert_ptr_nonnull(buf);
	memset(buf, byte, len);
	snprintf(path, sizeof(path), "%s/%s.fill", dir, vol);
	testutil_write_file(path, buf, len, 0644);
	free(buf);
	vol_copy("import", vol, path);
}

/* The volume's bytes, exported; *len set. */
static unsigned char *vol_read(const char *vol, size_t *len)
{
	char path[128];
	unsigned char *buf;
	struct stat st;
	int fd;

	snprintf(path, sizeof(path), "%s/%s.out", dir, vol);
	unlink(path);
	vol_copy("export", vol, path);
	fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &st), 0);
	buf = malloc(st.st_size ? st.st_size : 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(pread(fd, buf, st.st_size, 0), st.st_size);
	close(fd);
	*len = st.st_size;
	return buf;
}

/* Bytes [from, to) of buf all equal to byte; the first that is not otherwise. */
static long first_not(const unsigned char *buf, size_t from, size_t to, int byte)
{
	size_t i;

	for (i = from; i < to; i++)
		if (buf[i] != byte)
			return (long)i;
	return -1;
}

/* The neighbours: pre untouched; scratch untouched but where the module wrote its pattern. */
static void neighbour_checks(bool module_wrote)
{
	unsigned char *buf;
	size_t len;
	long at;

	buf = vol_read("pre", &len);
	ck_assert_uint_eq(len, (size_t)PRE_MB << 20);
	at = first_not(buf, 0, len, PRE_BYTE);
	ck_assert_msg(at < 0, "volume pre changed at byte %ld", at);
	free(buf);

	buf = vol_read("scratch", &len);
	ck_assert_uint_eq(len, (size_t)SCRATCH_MB << 20);
	if (!module_wrote) {
		at = first_not(buf, 0, len, SCRATCH_BYTE);
		ck_assert_msg(at < 0, "volume scratch changed at byte %ld", at);
	} else {
		at = first_not(buf, 0, LIO_PATTERN_OFF, SCRATCH_BYTE);
		ck_assert_msg(at < 0, "volume scratch changed at byte %ld", at);
		ck_assert_msg(
		    !lio_pattern_check(buf + LIO_PATTERN_OFF, LIO_PATTERN_OFF, 256 * 1024),
		    "the module's 256 KiB are not at 1 MiB in volume scratch");
		at = first_not(buf, LIO_PATTERN_OFF + 256 * 1024, len - 4096, SCRATCH_BYTE);
		ck_assert_msg(at < 0, "volume scratch changed at byte %ld", at);
		ck_assert_msg(!lio_pattern_check(buf + len - 4096, len - 4096, 4096),
			      "the module's last block is not the volume's last block");
	}
	free(buf);
}

static void setup(void)
{
	testutil_mkdtemp(dir, sizeof(dir), "/tmp/lvmm-frontend-linux-");
	snprintf(img, sizeof(img), "%s/root.img", dir);
	snprintf(logpath, sizeof(logpath), "%s/daemon.log", dir);
	setenv("LVMM_RUN_DIR", dir, 1);
	setenv("LVMM_STATE_DIR", "/proc/lvmm-none", 1);
	setenv("LVMM_FAULT_NVME", FAULT_SERIAL ":dup-cqe@3+cmb-oversize", 1);
	daemon_start();
}

static void teardown(void)
{
	testutil_ssd_stop(&daemon_pid, SIGTERM);
	unsetenv("LVMM_FAULT_NVME");
	testutil_rmtree(dir);
}

/* The exported root volume after boot n: mounted once more, at a new time, clean after the
 * journal replay, with the file /init wrote; then back into the volume for the next boot. */
static void root_checks(int boot)
{
	unlink(img);
	vol_copy("export", "root", img);
	ext4check_after_boot(img, boot, last_mount, sizeof(last_mount));
	vol_copy("import", "root", img);
}

/* The first LBA of volume vol as lvmm reported it ("... volume VOL on ssd ...: N MiB at LBA S"). */
static unsigned long long lba_start_of(const char *log, const char *vol)
{
	char key[64];
	const char *p;

	snprintf(key, sizeof(key), "passthrough volume %s on ssd " SSD, vol);
	p = strstr(log, key);
	ck_assert_msg(p, "no '%s' in lvmm's output:\n%s", key, log);
	p = strstr(p, " at LBA ");
	ck_assert_ptr_nonnull(p);
	return strtoull(p + strlen(" at LBA "), NULL, 10);
}

/* The faulty function's part of boot 2 (tools/guest/tests/lio-faults.sh). */
static void fault_checks(const struct linuxboot *b)
{
	static const char *const bad[] = {"WARNING:", "BUG:", "Oops", "double", "Call Trace"};
	unsigned i;

	/* before the fix, the first duplicate completed a freed request: an oops in lio_irq */
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(!strstr(b->console, bad[i]), "'%s' in the guest console", bad[i]);
	ck_assert_msg(strstr(b->log, "nvme " FAULT_SERIAL ": fault: CMBSZ claims 4194304 bytes"),
		      "lvmm did not inflate CMBSZ");
	ck_assert_msg(strstr(b->console, "LIO-FAULT bound"),
		      "lightiov_nvme did not bind the faulty function");
	ck_assert_msg(strstr(b->log, "completed twice"), "lvmm posted no duplicate completion");
	ck_assert_msg(strstr(b->console, "LIO-FAULT verify 4k ok"), "4 KiB I/O wrong");
	ck_assert_msg(strstr(b->console, "LIO-FAULT verify 64k ok"), "64 KiB I/O wrong");
	ck_assert_msg(strstr(b->console, "(ignored)"),
		      "lightiov_nvme did not log a duplicate completion as ignored");
	ck_assert_msg(strstr(b->console, "LIO-FAULT removed"), "rmmod after the faults");
}

START_TEST(test_frontend_passthrough)
{
	char kernel[4096], want[128], fault_arg[128];
	char *args[] = {
	    "--kernel",	 kernel,
	    "--cmdline", "console=ttyS0 root=/dev/nvme0n1 rw rootfstype=ext4 rootwait init=/init",
	    "--cpus",	 "1",
	    "--memory",	 "128M",
	    "--vnvme",	 SSD ",vol=root,mode=passthrough",
	    "--vnvme",	 SSD ",vol=scratch,mode=passthrough",
	    "--vnvme",	 fault_arg,
	    NULL};
	struct linuxboot b;
	unsigned long long root_start;
	int boot;

	linuxboot_guest_file(kernel, sizeof(kernel), "vmlinux");
	snprintf(fault_arg, sizeof(fault_arg), "file=%s/fault.img,size=8M,serial=" FAULT_SERIAL,
		 dir);
	ck_assert_int_eq(testutil_system("truncate -s 8M %s/fault.img", dir), 0);
	make_image();
	ck_assert_int_eq(testutil_system("%s ssd vol create %s pre %dM >/dev/null 2>&1",
					 testutil_lvmm(), SSD, PRE_MB),
			 0);
	ck_assert_int_eq(testutil_system("%s ssd vol create %s root %dM >/dev/null 2>&1",
					 testutil_lvmm(), SSD, ROOT_MB),
			 0);
	ck_assert_int_eq(testutil_system("%s ssd vol create %s scratch %dM >/dev/null 2>&1",
					 testutil_lvmm(), SSD, SCRATCH_MB),
			 0);
	vol_fill("pre", PRE_MB, PRE_BYTE);
	vol_fill("scratch", SCRATCH_MB, SCRATCH_BYTE);
	vol_copy("import", "root", img);
	ck_assert_int_eq(ext4check_mounts(img, last_mount, sizeof(last_mount)), 0);

	for (boot = 1; boot <= 2; boot++) {
		linuxboot_run(&b, args, NULL, BOOT_LIMIT_S, 0);
		printf("linux LightIOV frontend boot %d: %.1f s to exit\n", boot, b.t_exit);
		fflush(stdout);
		linuxboot_report(&b, 6000);
		ck_assert_msg(!b.killed, "lvmm still running after %d s", BOOT_LIMIT_S);
		ck_assert_msg(WIFEXITED(b.status) && WEXITSTATUS(b.status) == 0,
			      "lvmm did not exit 0 (wait status %#x)", b.status);
		/* the root volume does not start at LBA 0 of the SSD: the frontend's offset is
		 * what puts the file system where the host finds it */
		root_start = lba_start_of(b.log, "root");
		ck_assert_uint_gt(root_start, 0);
		snprintf(want, sizeof(want), "LightIOV passthrough: LBA window %llu+%u", root_start,
			 ROOT_MB * 2048);
		ck_assert_msg(strstr(b.console, want), "no '%s' from the guest kernel", want);
		ck_assert_msg(strstr(b.console, "EXT4-fs (nvme0n1): mounted filesystem"),
			      "ext4 root not mounted");
		ck_assert_msg(strstr(b.console, "LVMM-NVME-SIZE 131072"), "namespace not 64 MiB");
		ck_assert_msg(strstr(b.console, "LVMM-MOUNT /dev/root / ext4 rw"),
			      "root not mounted read-write");
		/* the I/O SQ of each function in its CMB */
		ck_assert_msg(strstr(b.console, "LVMM-CMB size=2097152 used=65536"),
			      "the I/O submission queue is not in the CMB");
		ck_assert_msg(!strstr(b.console, "not in the CMB"), "an SQ fell back to RAM");
		/* out of the window from user space: EIO, refused in the guest */
		ck_assert_msg(strstr(b.console, "LIO-OOW read slba=131072 rc=-5"), "read past");
		ck_assert_msg(strstr(b.console, "LIO-OOW write slba=131071 nlb=2 rc=-5"),
			      "write across the end");
		ck_assert_msg(strstr(b.console, "LIO-OOW write slba=1099511627776 rc=-5"),
			      "write far past the end");
		ck_assert_msg(strstr(b.console, "LIO-OOW opcode 0x81 rc=-5"), "vendor opcode");
		ck_assert_msg(strstr(b.console, "outside the window of 131072"),
			      "the driver did not say why it refused");
		ck_assert_msg(strstr(b.console, "LIO-IOCTL-READ ok"), "in-window ioctl read");
		if (boot == 2) {
			ck_assert_msg(strstr(b.console, "LIO-MODULE bound"), "module did not bind");
			ck_assert_msg(strstr(b.console, "lionvme0: LightIOV passthrough"),
				      "lightiov_nvme did not report its windows");
			snprintf(want, sizeof(want), "LIO-MODULE size=%u", SCRATCH_MB << 20);
			ck_assert_msg(strstr(b.console, want), "lionvme0 is not the volume's size");
			ck_assert_msg(strstr(b.console, "LIO-MODULE verify ok"), "module verify");
			ck_assert_msg(strstr(b.console, "LIO-MODULE removed"), "rmmod");
			ck_assert_msg(strstr(b.console, "LIO-MODULE nvme verify ok"),
				      "nvme did not take the function back with the data");
			fault_checks(&b);
		}
		ck_assert_msg(strstr(b.console, "LIO-PROBE-OK"), "the guest probe failed");
		snprintf(want, sizeof(want), "LVMM-FRONTEND-ROOT-OK boot=%d", boot);
		ck_assert_msg(strstr(b.console, want), "/init on the volume did not finish");
		linuxboot_free(&b);
		root_checks(boot);
		neighbour_checks(boot == 2);
	}
}
END_TEST

static Suite *linux_frontend_suite(void)
{
	Suite *s = suite_create("linux_frontend");
	TCase *tc = tcase_create("passthrough");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, TCASE_TIMEOUT_S);
	tcase_add_test(tc, test_frontend_passthrough);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return testutil_run_suite(linux_frontend_suite());
}
