/* The stock Linux nvme driver on an isolated-mode vNVMe: an ext4 root on a softssd volume, its
 * I/O queue pair bound to a backend queue pair (SQ in the CMB, polled doorbell pages, completions
 * by irqfd), mounted read-write across two boots; the host checks the exported volume between
 * them (mount count, last mount time, e2fsck, the files /init wrote) and lvmm's counters. The
 * second boot first resets the function through sysfs with FLR alone (pci_reset_function: the
 * driver's reset_prepare deletes its queues, the function resets, config space is restored and
 * the driver sets the controller up again), so that all its checks see the queue pair the driver
 * created after the reset; one boot less than a test of its own would cost. */
#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "linuxboot.h"
#include "client/lio_client.h"
#include "ssdutil.h"
#include "ext4check.h"
#include "testutil.h"

/* A boot takes minutes on kvm_pvm hosts (emulated guest kernel). Not a speed assertion. */
#define BOOT_LIMIT_S	1100
#define TCASE_TIMEOUT_S 2400
#define IMG_MB		64
#define SSD		"lx0"
/* Boot 1 also carries data volumes on vNVMe functions with eventfd doorbells: /init writes the
 * PATTERN_BYTES of /pattern to each and syncs, drops the volume's pages from the page cache
 * (checked with mincore), then reads them back with O_DIRECT and through the page cache. One
 * io-check process (tools/guest/io-check.c) a volume, in 1 MiB system calls: on kvm_pvm hosts a
 * fork/exec costs about a second and a call milliseconds. */
#define DATA_MB	      16
#define PATTERN_BYTES (1 << 20)

static char dir[64], img[128], logpath[128], last_mount[64];
static pid_t daemon_pid;

/* The boot that resets the function (the "2" in init_script): /boot-count on the volume tells
 * /init which boot it is. */
#define FLR_BOOT 2

/* /init on the root file system: builtins only but for the mounts, sync and poweroff. On boot
 * FLR_BOOT it writes a file, finds the vNVMe by its class, selects FLR as the only reset method
 * and resets the function, writes another file and syncs both through the new queue pair; the
 * checks after it then see the state the reset left. */
static const char init_script[] =
    "#!/bin/busybox sh\n"
    "export PATH=/bin\n"
    "echo LVMM-VNVME-ROOT-UP\n"
    "/bin/busybox mount -t sysfs sysfs /sys\n"
    "/bin/busybox mount -t proc proc /proc\n"
    "n=0; read -r n </boot-count; n=$((n + 1)); echo $n >/boot-count\n"
    "if [ $n = 2 ]; then\n"
    "echo 'before the reset' >/before-flr\n"
    "dev=\n"
    "for d in /sys/bus/pci/devices/*; do read -r c <$d/class; "
    "[ \"$c\" = 0x010802 ] && dev=$d; done\n"
    "read -r m <$dev/reset_method && echo \"LVMM-FLR-METHODS $m\"\n"
    "echo flr >$dev/reset_method && echo 1 >$dev/reset && echo LVMM-FLR-DONE\n"
    "echo 'written after the reset' >/after-flr || echo LVMM-FLR-WRITE-FAILED\n"
    "/bin/busybox sync && echo LVMM-FLR-SYNCED\n"
    "fi\n"
    "if [ $n = 1 ]; then\n"
    "/bin/busybox mount -t devtmpfs devtmpfs /dev\n"
    "for d in nvme1n1 nvme2n1; do\n"
    "if [ -b /dev/$d ]; then\n"
    "read -r sz </sys/block/$d/size && echo \"LVMM-EVFD-SIZE $d $sz\"\n"
    "IO_CHECK_TIMES=1 /bin/io-check copy /pattern /dev/$d echo \"LVMM-EVFD-WRITTEN $d\" "
    "evict /dev/$d "
    "same \"LVMM-EVFD-SAME $d\" /pattern /dev/$d direct "
    "same \"LVMM-EVFD-CACHED-SAME $d\" /pattern /dev/$d\n"
    "else echo \"LVMM-EVFD-NO-DISK $d\"; fi\n"
    "done\n"
    "fi\n"
    "read -r sz </sys/block/nvme0n1/size && echo \"LVMM-NVME-SIZE $sz\"\n"
    "while read -r line; do case $line in *nvme0q*) echo \"LVMM-IRQ $line\";; esac; done "
    "</proc/interrupts\n"
    "while read -r line; do case $line in *\" / \"*) echo \"LVMM-MOUNT $line\";; esac; done "
    "</proc/mounts\n"
    "for f in /sys/bus/pci/devices/0000:00:0*/p2pmem; do read -r sz <$f/size; "
    "read -r av <$f/available; echo \"LVMM-CMB size=$sz used=$((sz - av))\"; done\n"
    "echo \"written by the guest, boot $n\" >/guest-was-here || echo LVMM-NVME-WRITE-FAILED\n"
    "echo \"LVMM-VNVME-ROOT-OK boot=$n\"\n"
    "exec /bin/busybox poweroff -f\n";

static void daemon_start(void)
{
	char backing[128];
	const char *opts[] = {"--backing", backing, "--size", "256M", NULL};

	snprintf(backing, sizeof(backing), "%s/backing.img", dir);
	daemon_pid = testutil_ssd_start(SSD, logpath, opts);
}

/* The bytes boot 1 writes to the eventfd-doorbell volume: not zero, not repeating per block. */
static unsigned char *pattern(void)
{
	unsigned char *p = malloc(PATTERN_BYTES);
	uint32_t x = 0x2545f491;
	size_t i;

	ck_assert_ptr_nonnull(p);
	for (i = 0; i < PATTERN_BYTES; i++) {
		x = x * 1664525u + 1013904223u;
		p[i] = (unsigned char)(x >> 24);
	}
	return p;
}

static void make_image(void)
{
	char root[128], path[256], cmd[4300], io_check[4096];
	static const char *const sub[] = {"bin", "dev", "proc", "sys"};
	unsigned char *pat;
	unsigned i;

	snprintf(root, sizeof(root), "%s/root", dir);
	ck_assert_int_eq(mkdir(root, 0755), 0);
	for (i = 0; i < 4; i++) {
		snprintf(path, sizeof(path), "%s/%s", root, sub[i]);
		ck_assert_int_eq(mkdir(path, 0755), 0);
	}
	snprintf(cmd, sizeof(cmd), "cp /bin/busybox %s/bin/busybox", root);
	ck_assert_msg(testutil_sh(cmd, NULL) == 0, "busybox-static is not installed");
	linuxboot_guest_file(io_check, sizeof(io_check), "io-check");
	snprintf(cmd, sizeof(cmd), "cp %s %s/bin/io-check", io_check, root);
	ck_assert_msg(testutil_sh(cmd, NULL) == 0, "%s", cmd);
	snprintf(path, sizeof(path), "%s/init", root);
	testutil_write_file(path, init_script, strlen(init_script), 0755);
	pat = pattern();
	snprintf(path, sizeof(path), "%s/pattern", root);
	testutil_write_file(path, pat, PATTERN_BYTES, 0644);
	free(pat);
	snprintf(path, sizeof(path), "%s/boot-count", root);
	testutil_write_file(path, "0\n", 2, 0644);
	snprintf(cmd, sizeof(cmd), "mkfs.ext4 -q -F -d %s %s %dM 2>&1", root, img, IMG_MB);
	ck_assert_msg(testutil_sh(cmd, NULL) == 0, "mkfs.ext4 failed");
	snprintf(cmd, sizeof(cmd),
		 "printf 'cd /dev\\nmknod console c 5 1\\nsif console mode 020600\\n"
		 "mknod null c 1 3\\nsif null mode 020666\\n' | debugfs -w -f - %s >/dev/null 2>&1",
		 img);
	ck_assert_msg(testutil_sh(cmd, NULL) == 0, "debugfs mknod failed");
	testutil_rmtree(root);
}

/* The volume's content to img (export) or img into the volume (import). */
static void vol_copy(const char *op)
{
	ck_assert_int_eq(testutil_system("%s ssd vol %s %s root %s >/dev/null 2>&1",
					 testutil_lvmm(), op, SSD, img),
			 0);
}

static void setup(void)
{
	testutil_mkdtemp(dir, sizeof(dir), "/tmp/lvmm-vnvme-linux-");
	snprintf(img, sizeof(img), "%s/root.img", dir);
	snprintf(logpath, sizeof(logpath), "%s/daemon.log", dir);
	setenv("LVMM_RUN_DIR", dir, 1);
	setenv("LVMM_STATE_DIR", "/proc/lvmm-none", 1);
	setenv("LVMM_STATS", "1", 1);
	daemon_start();
}

static void teardown(void)
{
	testutil_ssd_stop(&daemon_pid, SIGTERM);
	testutil_rmtree(dir);
}

/* The exported volume after boot n: mounted once more, at a new time, clean after the journal
 * replay, with the file /init wrote; then back into the volume for the next boot. */
static void host_checks(int boot)
{
	char *out;

	vol_copy("export");
	ext4check_after_boot(img, boot, last_mount, sizeof(last_mount));
	if (boot == FLR_BOOT) {
		/* dirty before the reset, written back through the new queue pair after it */
		out = ext4check_cat(img, "/before-flr");
		ck_assert_msg(strstr(out, "before the reset"), "/before-flr on the volume: '%s'",
			      out);
		free(out);
		out = ext4check_cat(img, "/after-flr");
		ck_assert_msg(strstr(out, "written after the reset"),
			      "/after-flr on the volume: '%s'", out);
		free(out);
	}
	vol_copy("import");
}

static unsigned long long stat_of(const char *s, const char *tag, const char *key)
{
	const char *l = strstr(s, tag), *k = l ? strstr(l, key) : NULL;

	ck_assert_msg(k, "no '%s' ... '%s' in lvmm's output", tag, key);
	return strtoull(k + strlen(key), NULL, 10);
}

static unsigned count_of(const char *s, const char *what)
{
	unsigned n = 0;

	for (; (s = strstr(s, what)); s += strlen(what))
		n++;
	return n;
}

/* The console of boot FLR_BOOT: the reset through sysfs with FLR alone, the driver's queue set up
 * again after it, the write and the sync after it; lvmm counted exactly that one FLR. */
static void flr_checks(const struct linuxboot *b)
{
	const char *m = strstr(b->console, "LVMM-FLR-METHODS");
	char methods[128];

	ck_assert_msg(m, "the function's reset methods were not read");
	snprintf(methods, sizeof(methods), "%.*s", (int)strcspn(m, "\r\n"), m);
	ck_assert_msg(strstr(methods, " flr"), "FLR is not among the reset methods: '%s'", methods);
	ck_assert_msg(strstr(b->console, "LVMM-FLR-DONE"), "the FLR through sysfs failed");
	ck_assert_msg(!strstr(b->console, "LVMM-FLR-WRITE-FAILED"), "write after the FLR failed");
	ck_assert_msg(strstr(b->console, "LVMM-FLR-SYNCED"), "sync after the FLR failed");
	ck_assert_uint_eq(count_of(b->console, "nvme nvme0: 1/0/0 default/read/poll queues"), 2);
	ck_assert_uint_eq(stat_of(b->log, "mode isolated", "flrs "), 1);
}

/* Boot 1's second and third vNVMe, eventfd doorbells on data volumes, isolated (nvme1) and
 * passthrough (nvme2, the test kernel's driver adds lba_start): the stock driver configures the
 * shadow doorbell buffer only after it created its I/O queue, which the vNVMe must accept; then
 * the pattern went out and came back the same, and the host finds it on the volume. */
static void eventfd_checks(const struct linuxboot *b, const char *mode, const char *vol,
			   const char *ctrl, const char *disk)
{
	char path[160], want[128];
	unsigned char *pat, *got;
	size_t len;
	FILE *f;

	snprintf(want, sizeof(want), "%s volume %s on ssd " SSD, mode, vol);
	ck_assert_msg(strstr(b->log, want), "no '%s': %s", want, b->log);
	ck_assert_msg(strstr(strstr(b->log, want), "eventfd doorbells"), "%s: not eventfd", vol);
	snprintf(want, sizeof(want), "nvme %s: 1/0/0 default/read/poll queues", ctrl);
	ck_assert_msg(strstr(b->console, want), "%s has not one I/O queue", ctrl);
	snprintf(want, sizeof(want), "LVMM-EVFD-NO-DISK %s", disk);
	ck_assert_msg(!strstr(b->console, want), "no block device %s", disk);
	snprintf(want, sizeof(want), "LVMM-EVFD-SIZE %s %u", disk, DATA_MB * 2048);
	ck_assert_msg(strstr(b->console, want), "%s is not %d MiB", disk, DATA_MB);
	snprintf(want, sizeof(want), "LVMM-EVFD-WRITTEN %s", disk);
	ck_assert_msg(strstr(b->console, want), "write to %s failed", disk);
	snprintf(want, sizeof(want), "LVMM-EVFD-SAME %s", disk);
	ck_assert_msg(strstr(b->console, want), "%s: O_DIRECT read-back differs", disk);
	snprintf(want, sizeof(want), "LVMM-EVFD-CACHED-SAME %s", disk);
	ck_assert_msg(strstr(b->console, want), "%s: read-back differs", disk);
	snprintf(path, sizeof(path), "%s/%s.img", dir, vol);
	ck_assert_int_eq(testutil_system("%s ssd vol export %s %s %s >/dev/null 2>&1",
					 testutil_lvmm(), SSD, vol, path),
			 0);
	pat = pattern();
	got = malloc(PATTERN_BYTES);
	ck_assert_ptr_nonnull(got);
	f = fopen(path, "rb");
	ck_assert_ptr_nonnull(f);
	len = fread(got, 1, PATTERN_BYTES, f);
	fclose(f);
	ck_assert_uint_eq(len, PATTERN_BYTES);
	ck_assert_msg(!memcmp(pat, got, PATTERN_BYTES), "volume %s does not hold the pattern", vol);
	free(pat);
	free(got);
	unlink(path);
}

START_TEST(test_vnvme_isolated_root)
{
	char kernel[4096];
	char *args[] = {
	    "--kernel",	 kernel,
	    "--cmdline", "console=ttyS0 root=/dev/nvme0n1 rw rootfstype=ext4 rootwait init=/init",
	    "--cpus",	 "1",
	    "--memory",	 "128M",
	    "--vnvme",	 SSD ",vol=root",
	    NULL,	 NULL,
	    NULL,	 NULL,
	    NULL};
	struct linuxboot b;
	char want[64];
	const char *irq;
	int boot;

	linuxboot_guest_file(kernel, sizeof(kernel), "vmlinux");
	make_image();
	ck_assert_int_eq(testutil_system("%s ssd vol create %s root %dM >/dev/null 2>&1",
					 testutil_lvmm(), SSD, IMG_MB),
			 0);
	vol_copy("import");
	ck_assert_int_eq(testutil_system("%s ssd vol create %s data %dM >/dev/null 2>&1 && "
					 "%s ssd vol create %s pdata %dM >/dev/null 2>&1",
					 testutil_lvmm(), SSD, DATA_MB, testutil_lvmm(), SSD,
					 DATA_MB),
			 0);
	ck_assert_int_eq(ext4check_mounts(img, last_mount, sizeof(last_mount)), 0);
	for (boot = 1; boot <= 2; boot++) {
		unsigned long long cmds, db;

		/* boot 1 only: the FLR of boot 2 finds the vNVMe by its class. The stats lines and
		 * checks below that look for "mode isolated" find nvme0's, printed first. */
		args[10] = boot == 1 ? "--vnvme" : NULL;
		args[11] = SSD ",vol=data,doorbell=eventfd";
		args[12] = "--vnvme";
		args[13] = SSD ",vol=pdata,mode=passthrough,doorbell=eventfd";
		linuxboot_run(&b, args, NULL, BOOT_LIMIT_S, 0);
		printf("linux isolated vNVMe root boot %d: %.1f s to exit\n", boot, b.t_exit);
		fflush(stdout);
		linuxboot_report(&b, 4000);
		ck_assert_msg(!b.killed, "lvmm still running after %d s", BOOT_LIMIT_S);
		ck_assert_msg(WIFEXITED(b.status) && WEXITSTATUS(b.status) == 0,
			      "lvmm did not exit 0 (wait status %#x)", b.status);
		ck_assert_msg(strstr(b.log, "isolated volume root on ssd " SSD), "%s", b.log);
		ck_assert_msg(strstr(b.console, "nvme nvme0: pci function"), "nvme did not bind");
		ck_assert_msg(strstr(b.console, "nvme nvme0: 1/0/0 default/read/poll queues"),
			      "not one I/O queue");
		ck_assert_msg(!strstr(b.console, "timeout, "), "nvme commands timed out");
		if (boot == 1) {
			ck_assert_msg(!strstr(b.console, "IO queues not created"), "no I/O queues");
			eventfd_checks(&b, "isolated", "data", "nvme1", "nvme1n1");
			eventfd_checks(&b, "passthrough", "pdata", "nvme2", "nvme2n1");
		}
		if (boot == FLR_BOOT) {
			flr_checks(&b);
		} else {
			ck_assert_msg(!strstr(b.console, "LVMM-FLR-"), "FLR on boot %d", boot);
			ck_assert_uint_eq(stat_of(b.log, "mode isolated", "flrs "), 0);
		}
		ck_assert_msg(strstr(b.console, "EXT4-fs (nvme0n1): mounted filesystem"),
			      "ext4 root not mounted");
		ck_assert_msg(strstr(b.console, "LVMM-NVME-SIZE 131072"), "namespace not 64 MiB");
		/* completions arrive as MSI-X interrupts the backend raised through the irqfd (on
		 * FLR_BOOT after the reset too: the driver's queue came back with its vectors) */
		irq = strstr(b.console, "LVMM-IRQ");
		ck_assert_msg(irq && strstr(irq, "nvme0q1"), "no I/O queue interrupt line");
		ck_assert_msg(strtoul(strchr(irq, ':') + 1, NULL, 10) > 0, "no I/O interrupts");
		ck_assert_msg(strstr(b.console, "LVMM-CMB size=2097152 used=65536"),
			      "the I/O submission queue is not in the CMB");
		ck_assert_msg(strstr(b.console, "LVMM-MOUNT /dev/root / ext4 rw"),
			      "root not mounted read-write");
		snprintf(want, sizeof(want), "LVMM-VNVME-ROOT-OK boot=%d", boot);
		ck_assert_msg(strstr(b.console, want), "/init on the volume did not finish");
		/* every data command went to the backend; doorbells reaching lvmm are the admin
		 * queue's (the I/O doorbell pages are guest memory the backend polls) */
		cmds = stat_of(b.log, "mode isolated", "backend cmds ");
		db = stat_of(b.log, "mode isolated", "doorbells ");
		printf("boot %d: %llu backend commands, %llu doorbells reached lvmm\n", boot, cmds,
		       db);
		ck_assert_uint_ge(cmds, 20);
		/* nvme0 is doorbell=auto: its queue pair starts on doorbell pages and moves to
		 * eventfd doorbells when the driver sends Doorbell Buffer Config (again after the
		 * FLR, which gives the pair back) */
		ck_assert_msg(strstr(b.log, "vnvme nvme0: Doorbell Buffer Config: queue pairs move "
					    "to eventfd doorbells"),
			      "nvme0 stayed on doorbell pages: %s", b.log);
		ck_assert_uint_eq(stat_of(b.log, "mode isolated", "db-switched "),
				  boot == FLR_BOOT ? 2 : 1);
		ck_assert_uint_eq(stat_of(b.log, "mode isolated", "reads "), 0);
		ck_assert_uint_eq(stat_of(b.log, "mode isolated", "writes "), 0);
		linuxboot_free(&b);
		host_checks(boot);
	}
}
END_TEST

static Suite *linux_vnvme_suite(void)
{
	Suite *s = suite_create("linux_vnvme");
	TCase *tc = tcase_create("isolated");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, TCASE_TIMEOUT_S);
	tcase_add_test(tc, test_vnvme_isolated_root);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return testutil_run_suite(linux_vnvme_suite());
}
