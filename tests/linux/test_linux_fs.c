/* Linux's virtio_fs driver on lvmm's virtio-fs with /usr/lib/qemu/virtiofsd as the vhost-user
 * back end, one boot (root on a virtio-blk disk): the guest mounts the share, reads a host
 * file, writes one the host then reads, checksums an 8 MiB host file and a 4 MiB file of its
 * own both ways and times a read; then the test kills virtiofsd: the guest's next accesses fail
 * with an error (ENOTCONN) instead of hanging, lvmm keeps running and answers its API, and the
 * guest powers off cleanly. Run as root, lvmm is jailed (`--jail`: the back end connected
 * before the jail). */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ext4check.h"
#include "linuxboot.h"
#include "testutil.h"

#define VIRTIOFSD	"/usr/lib/qemu/virtiofsd"
#define BOOT_LIMIT_S	600 /* a safety net: one boot takes 30-90 s here, minutes when loaded */
#define TCASE_TIMEOUT_S 700
#define IMG_MB		32
#define TAG		"lvmmshare"

static char dir[64], img[128], sock[96], share[96], api[96];

/* /init: busybox for the mounts, the partial copy and the ls, shell builtins for small reads;
 * one io-check process (tools/guest/io-check.c) checksums and copies with 1 MiB system calls
 * (busybox's md5sum and cp move 4 KiB a call: with cache=none each is a round trip to virtiofsd,
 * and on kvm_pvm hosts each call costs milliseconds of emulated kernel). The timed read is the
 * 8 MiB checksum, whole-file 1 MiB reads as dd's were. The guest's 4 MiB file is made in a tmpfs:
 * the emulated ext4 write path of the root disk costs seconds a MiB. */
static const char init_script[] =
    "#!/bin/busybox sh\n"
    "b=/bin/busybox\n"
    "$b mount -t proc proc /proc\n"
    "$b mkdir -p /mnt /tmp\n"
    "$b mount -t tmpfs tmpfs /tmp\n"
    "$b mount -t virtiofs " TAG " /mnt && echo LVMM-FS-MOUNTED\n"
    /* the host's file has no newline: read's status is not the test */
    "hello=; read -r hello </mnt/hello.txt; echo \"LVMM-FS-HOSTFILE=$hello\"\n"
    "echo from-the-guest > /mnt/guest.txt && wrote=\"echo LVMM-FS-WROTE\"\n"
    "read -r t0 _ </proc/uptime\n"
    "/bin/io-check sync $wrote md5 LVMM-FS-BIGHOST= /mnt/big-host.bin\n"
    "read -r t1 _ </proc/uptime\n"
    "echo \"LVMM-FS-READTIME t0=$t0 t1=$t1\"\n"
    "$b dd if=/mnt/big-host.bin of=/tmp/g.bin bs=1M skip=3 count=4 2>/dev/null\n"
    "echo guest-tail >> /tmp/g.bin\n"
    "/bin/io-check copy /tmp/g.bin /mnt/big-guest.bin sync md5 LVMM-FS-BIGGUEST= /tmp/g.bin\n"
    "echo LVMM-FS-KILL-NOW\n"
    "i=0\n"
    "while [ $i -lt 60 ]; do\n"
    "  if ! $b cat /mnt/hello.txt >/dev/null 2>/tmp/err; then break; fi\n"
    "  $b sleep 0.5; i=$((i+1))\n"
    "done\n"
    "err=; read -r err </tmp/err; echo \"LVMM-FS-ERROR=$err\"\n"
    "$b ls /mnt >/dev/null 2>/tmp/err2; ls=$?; err=; read -r err </tmp/err2\n"
    "echo \"LVMM-FS-LS=$ls $err\"\n"
    "echo LVMM-FS-DONE\n"
    "exec $b poweroff -f\n";

struct host {
	pid_t fsd;
	bool killed;
	char api_answer[512];
};

/* Kills the back end when the guest asks, then checks that lvmm still answers its API. */
static void hook(const char *console, void *arg)
{
	struct host *h = arg;
	char cmd[256], *out = NULL;

	if (h->killed || !strstr(console, "LVMM-FS-KILL-NOW"))
		return;
	kill(h->fsd, SIGKILL);
	waitpid(h->fsd, NULL, 0);
	h->killed = true;
	testutil_sleep_ms(300);
	snprintf(cmd, sizeof(cmd),
		 "curl -s -m 10 --unix-socket %s http://localhost/api/v1/vm.counters", api);
	if (testutil_sh(cmd, &out) == 0 && out)
		snprintf(h->api_answer, sizeof(h->api_answer), "%s", out);
	free(out);
}

static void setup(void)
{
	testutil_mkdtemp(dir, sizeof(dir), "/tmp/lvmm-fs-");
	snprintf(img, sizeof(img), "%s/root.img", dir);
	snprintf(sock, sizeof(sock), "%s/vfs.sock", dir);
	snprintf(share, sizeof(share), "%s/share", dir);
	snprintf(api, sizeof(api), "%s/api.sock", dir);
}

static void teardown(void)
{
	if (getenv("LVMM_TEST_FSD_DEBUG"))
		return;
	testutil_rmtree(dir);
}

static pid_t start_virtiofsd(void)
{
	char src[160];
	pid_t pid;

	snprintf(src, sizeof(src), "source=%s", share);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (!pid) {
		char logf[128], sp[160];

		snprintf(logf, sizeof(logf), "%s/virtiofsd.log", dir);
		if (!freopen(logf, "w", stderr) || !freopen("/dev/null", "w", stdout))
			_exit(126);
		snprintf(sp, sizeof(sp), "--socket-path=%s", sock);
		/* LVMM_TEST_FSD_DEBUG=1: virtiofsd logs every request (virtiofsd.log, kept) */
		execl(VIRTIOFSD, VIRTIOFSD, sp, "-o", src, "-o", "cache=none",
		      getenv("LVMM_TEST_FSD_DEBUG") ? "-d" : (char *)NULL, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 100 && access(sock, F_OK); i++)
		testutil_sleep_ms(50);
	ck_assert_msg(access(sock, F_OK) == 0, "virtiofsd made no socket at %s", sock);
	return pid;
}

/* md5sum of a host file, hex */
static void md5_of(const char *path, char *hex, size_t len)
{
	char cmd[256], *out = NULL;

	snprintf(cmd, sizeof(cmd), "md5sum '%s'", path);
	ck_assert_int_eq(testutil_sh(cmd, &out), 0);
	snprintf(hex, len, "%.32s", out);
	free(out);
}

/* The value after "KEY=" on the console, up to the line's end. */
static void console_value(const char *console, const char *key, char *buf, size_t len)
{
	const char *p = strstr(console, key);
	size_t n = 0;

	buf[0] = 0;
	if (!p)
		return;
	p += strlen(key);
	while (p[n] && p[n] != '\r' && p[n] != '\n' && n + 1 < len)
		n++;
	memcpy(buf, p, n);
	buf[n] = 0;
}

START_TEST(test_fs)
{
	char kernel[4096], disk[256], fs_arg[256], path[160], want[40], got[80], *data;
	char jroot[128], juid[32], io_check[4096];
	const char *const extra[] = {io_check, "bin/io-check", NULL};
	/* as root (CI), jailed: the back end is connected before the jail (test_linux_kata
	 * mounts a share without one) */
	bool jailed = !geteuid();
	char *args[] = {"--kernel",
			kernel,
			"--cmdline",
			"console=ttyS0 root=/dev/vda rw rootfstype=ext4 rootwait init=/init",
			"--cpus",
			"1",
			"--memory",
			"256M",
			"--disk",
			disk,
			"--fs",
			fs_arg,
			"--api-socket",
			api,
			jailed ? "--jail" : NULL,
			jroot,
			"--jail-uid",
			juid,
			NULL};
	struct host h = {0};
	struct linuxboot b;
	double t0 = 0, t1 = 0;
	const char *rt;

	if (access(VIRTIOFSD, X_OK)) {
		testutil_skip("%s is absent (Debian's qemu-system-common)", VIRTIOFSD);
		return;
	}
	linuxboot_guest_file(kernel, sizeof(kernel), "vmlinux");
	linuxboot_guest_file(io_check, sizeof(io_check), "io-check");
	ext4check_make_root(dir, img, IMG_MB, init_script, extra);
	ck_assert_int_eq(mkdir(share, 0755), 0);
	snprintf(path, sizeof(path), "%s/hello.txt", share);
	testutil_write_file(path, "hello from the host", 19, 0644);
	snprintf(path, sizeof(path), "%s/big-host.bin", share);
	ck_assert_int_eq(testutil_system("head -c 8388608 /dev/urandom > '%s'", path), 0);
	if (jailed) {
		uid_t u = 1400000000u + (uid_t)getpid();

		snprintf(jroot, sizeof(jroot), "%s/jail", dir);
		ck_assert_int_eq(mkdir(jroot, 0755), 0);
		ck_assert_int_eq(chmod(dir, 0755), 0);
		ck_assert_int_eq(chown(img, u, u), 0);
		snprintf(juid, sizeof(juid), "%u", (unsigned)u);
	}
	h.fsd = start_virtiofsd();
	snprintf(disk, sizeof(disk), "path=%s", img);
	snprintf(fs_arg, sizeof(fs_arg), "tag=" TAG ",socket=%s", sock);

	linuxboot_run_hook(&b, args, NULL, BOOT_LIMIT_S, 0, hook, &h);
	printf("linux fs%s: %.1f s to exit\n", jailed ? " (jailed)" : "", b.t_exit);
	linuxboot_report(&b, 3000);
	if (!h.killed) {
		kill(h.fsd, SIGKILL);
		waitpid(h.fsd, NULL, 0);
	}
	ck_assert_msg(!b.killed, "lvmm still running after %d s", BOOT_LIMIT_S);
	ck_assert_msg(WIFEXITED(b.status) && WEXITSTATUS(b.status) == 0,
		      "lvmm did not exit 0 (wait status %#x)", b.status);
	ck_assert_msg(strstr(b.console, "LVMM-FS-MOUNTED"), "the guest did not mount the share");
	ck_assert_msg(strstr(b.console, "LVMM-FS-HOSTFILE=hello from the host"),
		      "the guest did not read the host's file");
	/* the guest's small file, seen by the host */
	ck_assert_msg(strstr(b.console, "LVMM-FS-WROTE"), "the guest's write failed");
	snprintf(path, sizeof(path), "%s/guest.txt", share);
	data = testutil_slurp(path);
	ck_assert_msg(data && !strcmp(data, "from-the-guest\n"), "host sees '%s'",
		      data ? data : "(nothing)");
	free(data);
	/* 8 MiB host -> guest, 4 MiB guest -> host, by checksum */
	snprintf(path, sizeof(path), "%s/big-host.bin", share);
	md5_of(path, want, sizeof(want));
	console_value(b.console, "LVMM-FS-BIGHOST= ", got, sizeof(got));
	ck_assert_str_eq(got, want);
	snprintf(path, sizeof(path), "%s/big-guest.bin", share);
	md5_of(path, want, sizeof(want));
	console_value(b.console, "LVMM-FS-BIGGUEST= ", got, sizeof(got));
	ck_assert_str_eq(got, want);
	rt = strstr(b.console, "LVMM-FS-READTIME");
	ck_assert_ptr_nonnull(rt);
	ck_assert_int_eq(sscanf(rt, "LVMM-FS-READTIME t0=%lf t1=%lf", &t0, &t1), 2);
	printf("linux fs: 8 MiB read in %.2f s: %.0f MB/s (cache=none)\n", t1 - t0,
	       t1 > t0 ? 8.388608 / (t1 - t0) : 0.0);
	/* the back end killed: the guest sees errors, lvmm answered its API meanwhile */
	ck_assert_msg(h.killed, "the guest never asked for the kill");
	console_value(b.console, "LVMM-FS-ERROR=", got, sizeof(got));
	ck_assert_msg(strstr(got, "not connected") || strstr(got, "I/O error"),
		      "the guest's access after the kill: '%s'", got);
	ck_assert_msg(strstr(b.console, "LVMM-FS-LS=1"), "ls after the kill did not fail");
	ck_assert_msg(strstr(h.api_answer, "\"fs0\""), "vm.counters after the kill: '%s'",
		      h.api_answer);
	ck_assert_msg(strstr(b.log, "back end lost"), "lvmm did not report the back end's loss");
	ck_assert_msg(strstr(b.console, "LVMM-FS-DONE"), "the guest did not finish");
	linuxboot_free(&b);
}
END_TEST

static Suite *linux_fs_suite(void)
{
	Suite *s = suite_create("linux_fs");
	TCase *tc = tcase_create("virtiofsd");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, TCASE_TIMEOUT_S);
	tcase_add_test(tc, test_fs);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return testutil_run_suite(linux_fs_suite());
}
