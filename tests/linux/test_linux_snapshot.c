/* Snapshot and restore of a Linux guest with virtio-rng: /init (lvmm.test=snapshot, added to the
 * test initramfs as a second cpio archive here) prints a counter every ~200 ms and reads
 * /dev/hwrng and the first line of a virtio-blk disk each time, and writes a line tagged with
 * the count to a vNVMe on a file and reads it back from the device (page cache dropped). Pause,
 * vm.snapshot, SIGKILL the lvmm, vm.restore in a fresh one, resume: the counter goes on from the
 * saved value and the rng and disk still answer. Also: a running VM is not saved, a VMM that has a
 * VM restores nothing, a corrupt snapshot is refused with a message and that lvmm serves on. Prints
 * the figures docs/snapshot.md quotes. */
#include <check.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "apitest.h"
#include "linuxboot.h"
#include "ssdutil.h"
#include "testutil.h"

#define BOOT_LIMIT_S	300 /* to the 5th count, on a loaded kvm_pvm host */
#define RESUME_LIMIT_S	30
#define TCASE_TIMEOUT_S 700

static struct apitest T, T2; /* T2: the lvmm the restored guest migrates to */
static char kernel[4096], initrd[4096], snap[256], disk[256], nvme[256];

/* The guest side: builtins only (a fork costs seconds of emulated kernel time); a FIFO opened
 * read-write never has data, so read -t is the sleep. */
static const char script[] =
    "busybox mkfifo /snap-tick\n"
    "exec 3<>/snap-tick\n"
    "i=0\n"
    "while [ $i -lt 1000000 ]; do\n"
    "\ti=$((i + 1))\n"
    "\tr=no\n"
    "\tif read -r -n 4 x </dev/hwrng; then r=ok; fi\n"
    "\tn=none\n"
    "\tif [ -b /dev/nvme0n1 ]; then\n"
    "\t\techo \"LVMM-NVME-$i-$i-$i\" >/dev/nvme0n1\n"
    "\tfi\n"
    "\techo 3 >/proc/sys/vm/drop_caches\n"
    "\td=none\n"
    "\tread -r d </dev/vda\n"
    "\tif [ -b /dev/nvme0n1 ]; then\n"
    "\t\tread -r n </dev/nvme0n1\n"
    "\t\tif [ \"$n\" = \"LVMM-NVME-$i-$i-$i\" ]; then n=ok; else n=\"bad:$n\"; fi\n"
    "\tfi\n"
    "\techo \"LVMM-SNAP-COUNT $i rng=$r disk=$d nvme=$n\"\n"
    "\tread -r -t 0.2 x <&3\n"
    "done\n"
    "return 0\n";

/* lvmm.test=ssdsnap: numbered 4 KiB blocks written in order to the vNVMe (an SSD volume), synced
 * every 8 (each sync a fork: 1-2 s here); every 48 the page cache is dropped and every block so
 * far read back with one dd and compared with what was written (busybox read takes a byte per
 * system call: too slow), until the 4 MiB volume is full. Block i (1-based, at offset
 * (i - 1) * 4096) is "LVMM-BLK-<i, 8 digits>", blanks, a newline. */
#define SSD_VERIFY 48 /* blocks between two read-backs */
static const char ssd_script[] =
    "if [ ! -b /dev/nvme0n1 ]; then echo LVMM-BLK-NODEV; return 1; fi\n"
    "exec 4<>/dev/nvme0n1\n"
    "exec 5>/expect.bin\n"
    "i=0\n"
    "while [ $i -lt 1024 ]; do\n"
    "\ti=$((i + 1))\n"
    "\tprintf 'LVMM-BLK-%08d%4078s\\n' $i '' >&4\n"
    "\tprintf 'LVMM-BLK-%08d%4078s\\n' $i '' >&5\n"
    "\tif [ $((i % 8)) -eq 0 ]; then\n"
    "\t\tbusybox sync\n"
    "\t\techo \"LVMM-BLK-SYNCED $i\"\n"
    "\tfi\n"
    "\tif [ $((i % 48)) -eq 0 ]; then\n"
    "\t\techo 3 >/proc/sys/vm/drop_caches\n"
    "\t\tbusybox dd if=/dev/nvme0n1 of=/got.bin bs=4096 count=$i 2>/dev/null\n"
    "\t\tif busybox cmp -s /expect.bin /got.bin; then echo \"LVMM-BLK-VERIFY ok $i\"; else\n"
    "\t\t\techo \"LVMM-BLK-VERIFY bad $i\"; fi\n"
    "\tfi\n"
    "done\n"
    "return 0\n";

static void cpio_entry(FILE *f, const char *name, unsigned mode, const void *data, size_t len)
{
	static unsigned ino = 0x7000;
	static const char zero[4];
	size_t nlen = strlen(name) + 1;

	fprintf(f, "070701%08X%08X%08X%08X%08X%08X%08zX%08X%08X%08X%08X%08zX%08X", ino++, mode, 0,
		0, 1, 0, len, 0, 0, 0, 0, nlen, 0);
	fwrite(name, 1, nlen, f);
	fwrite(zero, 1, (4 - (110 + nlen) % 4) % 4, f);
	if (len)
		fwrite(data, 1, len, f);
	fwrite(zero, 1, (4 - len % 4) % 4, f);
}

/* The test initramfs followed by an archive with /lvmm-tests/snapshot.sh: the kernel unpacks
 * both, so the guest build stays as it is. */
static void make_initrd(const char *base)
{
	char *img;
	size_t n;
	FILE *f;

	snprintf(initrd, sizeof(initrd), "%s/initrd.cpio", T.dir);
	f = fopen(initrd, "w");
	ck_assert_ptr_nonnull(f);
	img = malloc(64 << 20);
	ck_assert_ptr_nonnull(img);
	n = testutil_read_file(base, img, 64 << 20);
	ck_assert_uint_gt(n, 0);
	fwrite(img, 1, n, f);
	free(img);
	while (ftell(f) % 4)
		fputc(0, f);
	cpio_entry(f, "lvmm-tests", 040755, NULL, 0);
	cpio_entry(f, "lvmm-tests/snapshot.sh", 0100644, script, sizeof(script) - 1);
	cpio_entry(f, "lvmm-tests/ssdsnap.sh", 0100644, ssd_script, sizeof(ssd_script) - 1);
	cpio_entry(f, "TRAILER!!!", 0, NULL, 0);
	ck_assert_int_eq(fclose(f), 0);
}

static void setup(void)
{
	char gdir[3900], base[4096];

	apitest_init(&T, "/tmp/lvmm-ltest-snap-");
	T.curl_max_s = 60;
	snprintf(gdir, sizeof(gdir), "%s", testutil_env_or("LVMM_GUEST_DIR", ""));
	if (!*gdir)
		snprintf(gdir, sizeof(gdir), "%s/guest", testutil_env_or("BUILD", "build"));
	snprintf(kernel, sizeof(kernel), "%s/vmlinux", gdir);
	snprintf(base, sizeof(base), "%s/initramfs.cpio", gdir);
	ck_assert_msg(access(kernel, R_OK) == 0, "%s missing: run make guest", kernel);
	ck_assert_msg(access(base, R_OK) == 0, "%s missing: run make guest", base);
	make_initrd(base);
	snprintf(snap, sizeof(snap), "%s/snap", T.dir);
	ck_assert_int_eq(mkdir(snap, 0700), 0);
	/* a disk whose first line the guest reads through virtio-blk every count */
	snprintf(disk, sizeof(disk), "%s/disk.img", T.dir);
	testutil_write_file(disk, "LVMM-DISK-OK\n", 13, 0600);
	ck_assert_int_eq(truncate(disk, 1 << 20), 0);
	/* a vNVMe on a file: the guest writes a line tagged with its count, reads it back */
	snprintf(nvme, sizeof(nvme), "%s/nvme.img", T.dir);
	testutil_write_file(nvme, "", 0, 0600);
	ck_assert_int_eq(truncate(nvme, 1 << 20), 0);
}

static void teardown(void)
{
	testutil_rmtree(snap);
	apitest_fini(&T);
}

static int curl(const char *method, const char *endpoint, const char *data, json_t **body)
{
	return apitest_curl(&T, method, endpoint, data, body);
}

static int put(const char *endpoint, const char *data)
{
	return curl("PUT", endpoint, data, NULL);
}

static void expect_error(const char *endpoint, const char *data, int want, const char *needle)
{
	apitest_expect_error(&T, endpoint, data, want, needle);
}

/* Whether console text c has "LVMM-SNAP-COUNT n " and, with devs, that line says the rng
 * answered and the disk's first line was read from the device (the page cache dropped). */
static bool has_count(const char *c, long n, bool devs)
{
	char want[96];
	const char *p;

	snprintf(want, sizeof(want), "LVMM-SNAP-COUNT %ld %s", n,
		 devs ? "rng=ok disk=LVMM-DISK-OK nvme=ok" : "");
	p = strstr(c, want);
	return p != NULL;
}

/* The number after the console's last tag (which ends in a blank), -1 when there is none. */
static long last_number(const char *tag)
{
	char *c = testutil_slurp(T.console), *p, *last = NULL;
	long n = -1;

	for (p = c; p && (p = strstr(p, tag)); p++)
		last = p;
	if (last)
		n = strtol(last + strlen(tag), NULL, 10);
	free(c);
	return n;
}

static long last_count(void)
{
	return last_number("LVMM-SNAP-COUNT ");
}

static bool count_reaches(long n, unsigned limit_s)
{
	for (unsigned t = 0; t < limit_s * 10; t++) {
		if (last_count() >= n)
			return true;
		testutil_sleep_ms(100);
	}
	return false;
}

static char *url(const char *key, const char *more)
{
	static char b[512];

	snprintf(b, sizeof(b), "{\"%s\": \"file://%s\"%s}", key, snap, more ? more : "");
	return b;
}

static void kill_lvmm(void)
{
	int st;

	ck_assert_int_gt(T.pid, 0);
	ck_assert_int_eq(kill(T.pid, SIGKILL), 0);
	ck_assert_int_eq(waitpid(T.pid, &st, 0), T.pid);
	T.pid = 0;
}

/* T2 receiving at its mig.sock in a child `lvmm api`; its pid once the socket is there. */
static pid_t t2_receive(const char *u, const char *mig, const char *out)
{
	struct stat st;
	pid_t rp = fork();

	ck_assert_int_ge(rp, 0);
	if (!rp) {
		int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		dup2(fd, 1);
		dup2(fd, 2);
		execl(T2.lvmm, T2.lvmm, "api", "--socket", T2.sock, "receive-migration", u,
		      (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 400 && stat(mig, &st); i++)
		testutil_sleep_ms(25);
	return rp;
}

static int t2_status(pid_t rp)
{
	int status;

	ck_assert_int_eq(waitpid(rp, &status, 0), rp);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* vm.send-migration on T: its status, the error text in err. */
static int send_migration(const char *u, char *err, size_t len)
{
	char body[300];
	json_t *j = NULL;
	char *txt;
	int code;

	snprintf(body, sizeof(body), "{\"destination_url\": \"%s\"}", u);
	T.curl_max_s = 120;
	code = curl("PUT", "vm.send-migration", body, &j);
	txt = j ? json_dumps(j, 0) : NULL;
	snprintf(err, len, "%s", txt ? txt : "");
	free(txt);
	json_decref(j);
	return code;
}

/* T2, the third lvmm, started without a VM; where it receives (mig, as a URL in u) and the
 * receiving `lvmm api`'s output file. */
static void t2_open(char mig[200], char u[220], char out[300])
{
	apitest_init(&T2, "/tmp/lvmm-ltest-mig-");
	apitest_start(&T2, NULL);
	snprintf(mig, 200, "%s/mig.sock", T2.dir);
	snprintf(u, 220, "unix:%s", mig);
	snprintf(out, 300, "%s/receive.out", T2.dir);
}

/* T's running guest moved live (copy, KVM dirty log) to T2: T answers 204 and exits, T2 runs
 * it; T's log line with the figures is printed. */
static void t2_take_over(const char *u, const char *mig, const char *out)
{
	char err[600];
	pid_t rp = t2_receive(u, mig, out);
	double t0 = testutil_now_s();
	int code;

	/* the guest acknowledges a device's removal in its own time: a migration waits for it */
	while ((code = send_migration(u, err, sizeof(err))) == 409 && strstr(err, "hot-plug") &&
	       testutil_now_s() - t0 < RESUME_LIMIT_S)
		testutil_sleep_ms(500);
	ck_assert_msg(code == 204, "vm.send-migration: %d %s (destination: %s)", code, err,
		      testutil_slurp(out));
	ck_assert_int_eq(t2_status(rp), 0);
	ck_assert_int_eq(apitest_wait(&T, 30), 0);
	{
		char *log = testutil_slurp(T.log);
		char *line = log ? strstr(log, "lvmm: migrated to") : NULL;

		ck_assert_ptr_nonnull(line);
		fprintf(stderr, "test_linux_snapshot: %.*s\n", (int)strcspn(line, "\n"), line);
		free(log);
	}
	ck_assert_str_eq(apitest_vm_state(&T2), "Running");
}

static void t2_close(void)
{
	ck_assert_int_eq(apitest_curl(&T2, "PUT", "vm.shutdown", NULL, NULL), 204);
	ck_assert_int_eq(apitest_curl(&T2, "PUT", "vmm.shutdown", NULL, NULL), 204);
	ck_assert_int_eq(apitest_wait(&T2, 30), 0);
	apitest_fini(&T2);
}

/* The running restored guest moved live from T to T2 while it writes and reads back its
 * numbered vNVMe lines and reads its virtio-blk disk: T lets the disk image's lock go once
 * paused and saved, T2 opens it at STATE; T exits and the guest counts on in T2, every vNVMe
 * line read back intact and the disk still answering. */
static void migrate_to_t2(void)
{
	char mig[200], u[220], out[300], want[96], *c;
	long before;

	t2_open(mig, u, out);
	t2_take_over(u, mig, out);
	before = last_count();
	fprintf(stderr, "test_linux_snapshot: vm.send-migration done at count %ld\n", before);
	ck_assert_msg(count_reaches(before + 5, RESUME_LIMIT_S), "the migrated guest stalls");
	c = testutil_slurp(T.console);
	snprintf(want, sizeof(want), "LVMM-SNAP-COUNT %ld rng=ok disk=LVMM-DISK-OK nvme=ok",
		 before + 5);
	ck_assert_msg(strstr(c, want), "the migrated guest's devices fail:\n%s", c);
	ck_assert_msg(!strstr(c, "nvme=bad") && !strstr(c, "I/O error") && !strstr(c, "resetting"),
		      "the migrated guest's vNVMe misbehaved:\n%s", c);
	free(c);
	t2_close();
}

START_TEST(test_linux_snapshot_restore)
{
	char cfg[12000], path[512], *c;
	double t0, t_save, t_restore, t_resumed;
	long saved;
	struct stat st;
	int fd;

	TESTUTIL_NEED_KVM();
	apitest_start(&T, NULL);
	snprintf(cfg, sizeof(cfg),
		 "{\"cpus\": {\"boot_vcpus\": 1}, \"memory\": {\"size\": 134217728},"
		 " \"payload\": {\"kernel\": \"%s\", \"initramfs\": \"%s\","
		 " \"cmdline\": \"console=ttyS0 lvmm.test=snapshot\"},"
		 " \"rng\": {\"src\": \"/dev/urandom\"}, \"disks\": [{\"path\": \"%s\"}],"
		 " \"vnvme\": [{\"path\": \"%s\"}],"
		 " \"serial\": {\"mode\": \"File\", \"file\": \"%s\"}}",
		 kernel, initrd, disk, nvme, T.console);
	ck_assert_int_eq(put("vm.create", cfg), 204);
	ck_assert_int_eq(put("vm.boot", NULL), 204);
	ck_assert_msg(count_reaches(5, BOOT_LIMIT_S), "the guest never counted to 5");
	c = testutil_slurp(T.console);
	/* line 4: whole by now (line 5 may still be coming out) */
	ck_assert_msg(has_count(c, 4, true), "the guest's rng or disk does not answer:\n%s", c);
	free(c);
	expect_error("vm.snapshot", url("destination_url", NULL), 405, "Running");

	ck_assert_int_eq(put("vm.pause", NULL), 204);
	saved = last_count();
	t0 = testutil_now_s();
	ck_assert_int_eq(put("vm.snapshot", url("destination_url", NULL)), 204);
	t_save = testutil_now_s() - t0;
	snprintf(path, sizeof(path), "%s/memory.bin", snap);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(st.st_size, 134217728 + 64); /* the RAM, then the snapshot-id trailer */
	fprintf(stderr,
		"test_linux_snapshot: saved at count %ld in %.3f s; memory.bin %lld MiB allocated "
		"of %lld MiB\n",
		saved, t_save, (long long)st.st_blocks * 512 >> 20, (long long)st.st_size >> 20);
	snprintf(path, sizeof(path), "%s/state.bin", snap);
	ck_assert_int_eq(stat(path, &st), 0);
	fprintf(stderr, "test_linux_snapshot: state.bin %lld bytes\n", (long long)st.st_size);
	kill_lvmm();

	/* a fresh lvmm: the saved VM comes back paused and resumes where it stopped */
	apitest_start(&T, NULL);
	ck_assert_int_eq(truncate(T.console, 0), 0);
	t0 = testutil_now_s();
	ck_assert_int_eq(put("vm.restore", url("source_url", NULL)), 204);
	t_restore = testutil_now_s() - t0;
	ck_assert_str_eq(apitest_vm_state(&T), "Paused");
	expect_error("vm.restore", url("source_url", NULL), 409, "already exists");
	ck_assert_int_eq(put("vm.resume", NULL), 204);
	ck_assert_msg(count_reaches(saved + 1, RESUME_LIMIT_S), "no count after the restore");
	t_resumed = testutil_now_s() - t0;
	ck_assert_msg(count_reaches(saved + 5, RESUME_LIMIT_S), "the restored guest stalls");
	c = testutil_slurp(T.console);
	/* saved + 2 and + 4: lines written whole after the restore (a pause may split saved + 1,
	 * and saved + 5 may still be coming out when the console is read) */
	ck_assert_msg(has_count(c, saved + 2, true) && has_count(c, saved + 4, true),
		      "the restored guest did not go on from %ld with a working rng and disk:\n%s",
		      saved, c);
	ck_assert_msg(!strstr(c, "LVMM-SNAP-COUNT 1 "), "the restored guest counted from 1");
	ck_assert_msg(!strstr(c, LINUXBOOT_BANNER), "the restored guest booted again");
	/* the guest's NVMe driver saw nothing go wrong: no error, timeout or reset */
	ck_assert_msg(!strstr(c, "I/O error") && !strstr(c, "timeout") && !strstr(c, "resetting") &&
			  !strstr(c, "nvme=bad"),
		      "the restored guest's vNVMe misbehaved:\n%s", c);
	free(c);
	/* the restored lvmm's own device served the guest's reads (none came from a cache) */
	{
		json_t *j = NULL;

		ck_assert_int_eq(curl("GET", "vm.counters", NULL, &j), 200);
		ck_assert_int_gt(
		    json_integer_value(json_object_get(json_object_get(j, "disk0"), "read_ops")),
		    0);
		ck_assert_int_gt(
		    json_integer_value(json_object_get(json_object_get(j, "nvme0"), "read_ops")),
		    0);
		ck_assert_int_gt(
		    json_integer_value(json_object_get(json_object_get(j, "nvme0"), "write_ops")),
		    0);
		json_decref(j);
	}
	fprintf(stderr,
		"test_linux_snapshot: vm.restore %.3f s; restore to the first new count %.3f s\n",
		t_restore, t_resumed);
	ck_assert_int_eq(put("vm.pause", NULL), 204);
	{
		/* the image holds the line of the last count (or the one about to be written) */
		char line[128] = "", want[96];
		long last = last_count();
		int nfd = open(nvme, O_RDONLY);

		ck_assert_int_ge(nfd, 0);
		ck_assert_int_gt(pread(nfd, line, sizeof(line) - 1, 0), 0);
		close(nfd);
		snprintf(want, sizeof(want), "LVMM-NVME-%ld-%ld-%ld\n", last, last, last);
		if (strncmp(line, want, strlen(want)))
			snprintf(want, sizeof(want), "LVMM-NVME-%ld-%ld-%ld\n", last + 1, last + 1,
				 last + 1);
		ck_assert_msg(!strncmp(line, want, strlen(want)),
			      "the image holds '%.40s' at count %ld", line, last);
	}
	ck_assert_int_eq(put("vm.resume", NULL), 204);
	ck_assert_msg(count_reaches(last_count() + 2, RESUME_LIMIT_S), "no count after resume");
	migrate_to_t2();

	/* a corrupt state file: refused with a message, the lvmm serves on without a VM */
	snprintf(path, sizeof(path), "%s/state.bin", snap);
	fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, "XX", 2, 300), 2);
	close(fd);
	apitest_start(&T, NULL);
	expect_error("vm.restore", url("source_url", NULL), 400, "checksum");
	ck_assert_int_eq(curl("GET", "vm.info", NULL, NULL), 404);
	ck_assert_int_eq(put("vmm.shutdown", NULL), 204);
	ck_assert_int_eq(apitest_wait(&T, 30), 0);
}
END_TEST

/* The console has s (polling for limit_s). */
static bool console_has(const char *s, unsigned limit_s)
{
	for (unsigned t = 0; t < limit_s * 10; t++) {
		char *c = testutil_slurp(T.console);
		bool yes = c && strstr(c, s);

		free(c);
		if (yes)
			return true;
		testutil_sleep_ms(100);
	}
	return false;
}

/* A Linux guest writes numbered, synced 4 KiB blocks to a vNVMe whose queue pairs a softssd
 * serves (mode, doorbell); the host pauses it mid-run, snapshots it, SIGKILLs that lvmm,
 * restores it in a fresh one on the same volume and resumes; the guest reads every block back
 * intact. Then it is migrated live to a third lvmm (not local: the volume's session hands
 * guest RAM to the backend) while it writes, and there reads every block back intact again;
 * its NVMe driver saw no error, timeout or reset, and the volume holds every block. */
static void linux_ssd_snapshot(const char *mode, const char *doorbell)
{
	const char *opts[] = {"--backing", NULL, "--size", "64M", NULL};
	char cfg[12000], backing[512], logp[512], vol[512], want[64], mig[200], u[220], out[300];
	char *c;
	double t0, t_save, t_restore;
	long synced, verified;
	pid_t ssd;
	unsigned i;

	TESTUTIL_NEED_KVM();
	setenv("LVMM_RUN_DIR", T.dir, 1);
	snprintf(backing, sizeof(backing), "%s/ssd.img", T.dir);
	snprintf(logp, sizeof(logp), "%s/ssd.log", T.dir);
	opts[1] = backing;
	ssd = testutil_ssd_start("lsnap", logp, opts);
	ck_assert_int_eq(
	    testutil_system("%s ssd vol create lsnap lvm1 4M >/dev/null", testutil_lvmm()), 0);
	apitest_start(&T, NULL);
	snprintf(cfg, sizeof(cfg),
		 "{\"cpus\": {\"boot_vcpus\": 1}, \"memory\": {\"size\": 134217728},"
		 " \"payload\": {\"kernel\": \"%s\", \"initramfs\": \"%s\","
		 " \"cmdline\": \"console=ttyS0 lvmm.test=ssdsnap\"},"
		 " \"vnvme\": [{\"ssd\": \"lsnap\", \"vol\": \"lvm1\", \"mode\": \"%s\","
		 " \"doorbell\": \"%s\"}],"
		 " \"serial\": {\"mode\": \"File\", \"file\": \"%s\"}}",
		 kernel, initrd, mode, doorbell, T.console);
	ck_assert_int_eq(put("vm.create", cfg), 204);
	ck_assert_int_eq(put("vm.boot", NULL), 204);
	ck_assert_msg(console_has("LVMM-BLK-SYNCED 16", BOOT_LIMIT_S), "no 16 blocks synced");
	ck_assert_int_eq(put("vm.pause", NULL), 204);
	t0 = testutil_now_s();
	ck_assert_int_eq(put("vm.snapshot", url("destination_url", NULL)), 204);
	t_save = testutil_now_s() - t0;
	c = testutil_slurp(T.console);
	ck_assert_msg(!strstr(c, "LVMM-BLK-VERIFY"), "the run ended before the pause:\n%s", c);
	free(c);
	c = testutil_slurp(T.log);
	{
		static const char tail[] = " queue pairs of volume lvm1 saved";
		const char *q = c ? strstr(c, "vnvme nvme0: ") : NULL, *e = NULL;
		long nqp = 0;

		/* the guest's I/O queue pairs were the backend's, and were saved */
		for (; q; q = strstr(q + 1, "vnvme nvme0: ")) {
			char *end;

			nqp = strtol(q + 13, &end, 10);
			if (!strncmp(end, tail, sizeof(tail) - 1)) {
				e = strchr(q, '\n');
				break;
			}
		}
		ck_assert_msg(q && nqp >= 1, "no queue pair saved: %s", c);
		fprintf(stderr, "linux_ssd_snapshot %s/%s: vm.snapshot %.3f s; lvmm: %.*s\n", mode,
			doorbell, t_save, e ? (int)(e - q) : 80, q);
	}
	free(c);
	kill_lvmm();

	apitest_start(&T, NULL);
	ck_assert_int_eq(truncate(T.console, 0), 0);
	t0 = testutil_now_s();
	ck_assert_int_eq(put("vm.restore", url("source_url", NULL)), 204);
	t_restore = testutil_now_s() - t0;
	ck_assert_int_eq(put("vm.resume", NULL), 204);
	snprintf(want, sizeof(want), "LVMM-BLK-VERIFY ok %d", SSD_VERIFY);
	if (!console_has(want, 120)) {
		char *con = testutil_slurp(T.console), *lg = testutil_slurp(T.log);
		size_t a = con ? strlen(con) : 0, b = lg ? strlen(lg) : 0;

		ck_abort_msg("the restored guest never verified; console:\n%s\nlvmm:\n%s",
			     con ? con + (a > 3000 ? a - 3000 : 0) : "",
			     lg ? lg + (b > 3000 ? b - 3000 : 0) : "");
	}
	c = testutil_slurp(T.console);
	ck_assert_msg(!strstr(c, "LVMM-BLK-VERIFY bad"), "blocks lost or wrong:\n%s", c);
	ck_assert_msg(!strstr(c, LINUXBOOT_BANNER), "the restored guest booted again");
	ck_assert_msg(!strstr(c, "I/O error") && !strstr(c, "timeout") && !strstr(c, "resetting"),
		      "the restored guest's vNVMe misbehaved:\n%s", c);
	free(c);
	fprintf(stderr, "linux_ssd_snapshot %s/%s: vm.restore %.3f s\n", mode, doorbell, t_restore);

	/* live, to a third lvmm: never local (the backend maps the source's RAM memfd) */
	expect_error("vm.send-migration",
		     "{\"destination_url\": \"unix:/nonexistent\", \"local\": true}", 400,
		     "hands guest RAM");
	t2_open(mig, u, out);
	t2_take_over(u, mig, out);
	/* the next read-back is the destination's: the source has exited */
	synced = last_number("LVMM-BLK-SYNCED ");
	verified = (synced / SSD_VERIFY + 1) * SSD_VERIFY;
	fprintf(stderr, "linux_ssd_snapshot %s/%s: migrated at block %ld\n", mode, doorbell,
		synced);
	snprintf(want, sizeof(want), "LVMM-BLK-VERIFY ok %ld", verified);
	if (!console_has(want, 120)) {
		char *con = testutil_slurp(T.console), *lg = testutil_slurp(T2.log);
		size_t a = con ? strlen(con) : 0, b = lg ? strlen(lg) : 0;

		ck_abort_msg(
		    "the migrated guest never verified %ld blocks; console:\n%s\nlvmm:\n%s",
		    verified, con ? con + (a > 3000 ? a - 3000 : 0) : "",
		    lg ? lg + (b > 3000 ? b - 3000 : 0) : "");
	}
	c = testutil_slurp(T.console);
	ck_assert_msg(!strstr(c, "LVMM-BLK-VERIFY bad"), "blocks lost or wrong:\n%s", c);
	ck_assert_msg(!strstr(c, "I/O error") && !strstr(c, "timeout") && !strstr(c, "resetting"),
		      "the migrated guest's vNVMe misbehaved:\n%s", c);
	free(c);
	t2_close();
	/* the volume holds every block the guest verified */
	snprintf(vol, sizeof(vol), "%s/lvm1.img", T.dir);
	for (i = 0; i < 100 && testutil_system("%s ssd vol export lsnap lvm1 %s >/dev/null 2>&1",
					       testutil_lvmm(), vol);
	     i++)
		testutil_sleep_ms(50);
	ck_assert_uint_lt(i, 100);
	{
		static char blk[4096];
		int fd = open(vol, O_RDONLY);

		ck_assert_int_ge(fd, 0);
		for (i = 1; i <= (unsigned)verified; i++) {
			ck_assert_int_eq(pread(fd, blk, sizeof(blk), (off_t)(i - 1) * 4096), 4096);
			snprintf(want, sizeof(want), "LVMM-BLK-%08u ", i);
			ck_assert_msg(!memcmp(blk, want, strlen(want)) && blk[4095] == '\n',
				      "volume block %u: '%.20s'", i, blk);
		}
		close(fd);
	}
	ck_assert_int_eq(testutil_ssd_stop(&ssd, SIGTERM), 0);
}

START_TEST(test_linux_ssd_isolated)
{
	linux_ssd_snapshot("isolated", "poll");
}
END_TEST

START_TEST(test_linux_ssd_passthrough)
{
	linux_ssd_snapshot("passthrough", "poll");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("linux_snapshot");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, TCASE_TIMEOUT_S);
	tcase_add_test(tc, test_linux_snapshot_restore);
	suite_add_tcase(s, tc);
	/* CK_RUN_CASE=ssd: vNVMe queue pairs served by a softssd, one boot per mode */
	tc = tcase_create("ssd");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, TCASE_TIMEOUT_S);
	tcase_add_test(tc, test_linux_ssd_isolated);
	tcase_add_test(tc, test_linux_ssd_passthrough);
	suite_add_tcase(s, tc);
	return testutil_run_suite(s);
}
