/* lightiov.ko in one Linux boot: the guest's vNVMe (emulate mode) plays the physical SSD. /init
 * (tools/guest/kmod/init) loads the module, binds the controller through driver_override, runs
 * the VM-side program (both modes, eventfd completions, hostile commands, bad ioctl arguments,
 * queue memory with polled doorbells, the controller's own doorbells mapped, a volume moved by
 * its growth), sees rmmod refused while a session is open, unbinds, unloads and gives the disk
 * back to nvme. The host then reads the image: softssd's own tools find the volume where the
 * module moved it, the data sits where both LBA windows say (the old extent keeps its bytes),
 * and nothing else changed. */
#include <check.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lightiov/voltable.h"
#include "linuxboot.h"
#include "testutil.h"

/* Minutes on kvm_pvm hosts (the emulated kernel boots in ~2.5 min there). Hang guards only. */
#define BOOT_LIMIT_S	1200
#define TCASE_TIMEOUT_S 1500
#define IMG_MB		64
#define XFER		(128u << 10)

static char dir[64], img[128];

static const char *const marks[] = {"Run /init",    "LIO-GUEST-UP", "LIO-BIND-RC", "LIO-TEST-RC",
				    "LIO-RMMOD-RC", "LIO-DONE-ALL", NULL};

/* The pattern lio-kmod-test.c writes (same generator, same seeds). */
static void fill(uint8_t *p, uint32_t len, uint32_t seed)
{
	uint32_t i, x = seed;

	for (i = 0; i < len; i += 4) {
		x = x * 1103515245u + 12345u;
		memcpy(p + i, &x, 4);
	}
}

static void setup(void)
{
	testutil_mkdtemp(dir, sizeof(dir), "/tmp/lvmm-kmod-");
	snprintf(img, sizeof(img), "%s/ssd.img", dir);
}

static void teardown(void)
{
	testutil_rmtree(dir);
}

static void boot(struct linuxboot *b)
{
	const char *build = testutil_env_or("BUILD", "build");
	char kernel[4096], cpio[4096], vnvme[256];
	char *args[] = {"--kernel",	 kernel,   "--initramfs", cpio,	      "--cmdline",
			"console=ttyS0", "--cpus", "1",		  "--memory", "256M",
			"--vnvme",	 vnvme,	   NULL};
	int i;

	linuxboot_guest_file(kernel, sizeof(kernel), "vmlinux");
	snprintf(cpio, sizeof(cpio), "%s/kmod/initramfs.cpio", build);
	ck_assert_msg(access(cpio, R_OK) == 0, "%s missing: make %s", cpio, cpio);
	/* queues=4: the module keeps one controller queue for itself, one per queue pair */
	snprintf(vnvme, sizeof(vnvme), "file=%s,queues=4,serial=LIOKMOD", img);
	linuxboot_run(b, args, marks, BOOT_LIMIT_S, 0);
	printf("linux kmod boot: %.1f s to exit\n", b->t_exit);
	for (i = 0; marks[i]; i++)
		if (b->t_mark[i] >= 0)
			printf("  %-16s at %6.1f s\n", marks[i], b->t_mark[i]);
	fflush(stdout);
}

/* The first sign of a kernel problem or a failed check on the console, or NULL. */
static const char *console_bad(const char *c)
{
	static const char *const bad[] = {
	    "BUG:", "kernel BUG", "Oops", "WARNING:", "Call Trace", "LIO-FAIL", NULL};
	int i;

	for (i = 0; bad[i]; i++)
		if (strstr(c, bad[i]))
			return bad[i];
	return NULL;
}

static void guest_checks(const struct linuxboot *b)
{
	const char *c = b->console, *bad;

	ck_assert_msg(!b->killed, "lvmm still running after %d s", BOOT_LIMIT_S);
	ck_assert_msg(WIFEXITED(b->status) && WEXITSTATUS(b->status) == 0,
		      "lvmm did not exit 0 (wait status %#x)", b->status);
	ck_assert_msg(strstr(c, "LIO-GUEST-UP"), "/init did not start");
	ck_assert_msg(strstr(c, "LIO-INSMOD-RC 0"), "insmod lightiov.ko failed");
	ck_assert_msg(strstr(c, "LIO-NVME-UNBIND-RC 0"), "unbinding nvme failed");
	ck_assert_msg(strstr(c, "LIO-BIND-RC 0"),
		      "binding lightiov through driver_override failed");
	ck_assert_msg(strstr(c, "wrote an empty volume table"), "no volume table written");
	ck_assert_msg(strstr(c, "LIO-NODE /dev/lightiov/lio0"), "no /dev/lightiov/lio0");
	/* every check of the VM-side program, by name */
	ck_assert_msg(strstr(c, "LIO-OK identify:"), "identify");
	ck_assert_msg(strstr(c, "LIO-OK dma-register overlapping regions"), "overlap accepted");
	ck_assert_msg(strstr(c, "LIO-OK vol-attach of an unknown volume"), "unknown volume");
	ck_assert_msg(strstr(c, "LIO-OK qp-create SQ running off the window"), "ring bounds");
	ck_assert_msg(strstr(c, "LIO-OK isolated: data read back matches"), "isolated data");
	ck_assert_msg(strstr(c, "LIO-OK hostile: write past the LBA window"), "LBA window");
	ck_assert_msg(strstr(c, "LIO-OK hostile: read into memory outside the DMA window"),
		      "DMA window");
	ck_assert_msg(strstr(c, "LIO-OK hostile: PRP list entry outside the DMA window"),
		      "PRP list");
	ck_assert_msg(strstr(c, "LIO-OK passthrough: data read back matches"), "passthrough data");
	ck_assert_msg(strstr(c, "LIO-OK isolated: 14 commands completed"), "isolated irqs");
	ck_assert_msg(strstr(c, "LIO-OK passthrough: 3 commands completed"), "passthrough irqs");
	ck_assert_msg(strstr(c, "LIO-OK lio_client: ssd lio0 resolved to lightiov.ko's device"),
		      "lio_client's device resolution");
	ck_assert_msg(strstr(c, "LIO-OK lio_client: read back through queue 1 matches"),
		      "lio_client's ioctl transport data");
	ck_assert_msg(strstr(c, "LIO-OK lio_client: zeros written back"), "lio_client zeros");
	ck_assert_msg(strstr(c, "LIO-OK qmem-alloc past 64 MiB"), "qmem size bound");
	ck_assert_msg(strstr(c, "LIO-OK second qmem-alloc of the session"), "qmem twice");
	ck_assert_msg(strstr(c, "LIO-OK qmem-alloc of 2048 KiB: mapped"), "qmem mapping");
	ck_assert_msg(strstr(c, "LIO-OK qmem-polled: data read back matches"), "polled data");
	ck_assert_msg(strstr(c, "LIO-OK qmem-polled: qp-stats cmds 3"), "polled counters");
	ck_assert_msg(strstr(c, "LIO-OK session-set of an unknown flag"), "session-set mask");
	ck_assert_msg(strstr(c, "LIO-OK write-through: 1 write sent with FUA"), "write-through");
	ck_assert_msg(strstr(c, "LIO-OK qp-create DB_DIRECT without IOMMU and without direct_"),
		      "direct refused without direct_noiommu");
	ck_assert_msg(strstr(c, "LIO-OK mmap of 3 doorbell pages"), "doorbell mapping bound");
	ck_assert_msg(strstr(c, "LIO-OK mmap of the controller's doorbell pages"), "doorbell mmap");
	ck_assert_msg(strstr(c, "LIO-OK direct: data read back matches"), "direct data");
	ck_assert_msg(strstr(c, "LIO-OK direct: qp-stats cmds 0"), "direct bypasses the module");
	ck_assert_msg(strstr(c, "LIO-OK direct: 3 commands completed"), "direct irqs");
	ck_assert_msg(strstr(c, "LIO-OK vol-resize of an attached volume"), "resize busy");
	ck_assert_msg(strstr(c, "LIO-OK vol-resize to 1 PiB"), "resize ENOSPC");
	ck_assert_msg(strstr(c, "LIO-OK vol-resize shrinking"), "resize shrinking");
	ck_assert_msg(strstr(c, "LIO-OK vol-resize moved kmodvol"), "resize moved");
	ck_assert_msg(strstr(c, "LIO-OK moved: data at window LBA 0 came along"), "moved data");
	ck_assert_msg(strstr(c, "LIO-OK moved: the added LBAs read zeros"), "moved zeros");
	ck_assert_msg(strstr(c, "LIO-DONE failures=0"), "the VM-side program reported failures");
	ck_assert_msg(strstr(c, "LIO-TEST-RC 0"), "the VM-side program did not exit 0");
	ck_assert_msg(strstr(c, "LIO-OK passthrough: read past the attached volume"),
		      "passthrough read outside its volume");
	ck_assert_msg(strstr(c, "LIO-OK passthrough: write past the attached volume"),
		      "passthrough write outside its volume");
	ck_assert_msg(strstr(c, "LIO-OK qp-create DB_DIRECT without allow_db_direct"),
		      "DB_DIRECT without the operator's grant");
	ck_assert_msg(strstr(c, "LIO-OK open of a second session over max_sessions"),
		      "sessions per SSD");
	ck_assert_msg(strstr(c, "LIO-OK qp-create over max_session_qpairs"),
		      "queue pairs per session");
	ck_assert_msg(strstr(c, "LIO-OK nonroot: dma-register of 2 MiB over RLIMIT_MEMLOCK"),
		      "RLIMIT_MEMLOCK");
	ck_assert_msg(strstr(c, "LIO-OK nonroot: vol-attach of root's volume"),
		      "another uid's volume");
	ck_assert_msg(strstr(c, "LIO-OK nonroot: vol-list shows its own volume only"),
		      "vol-list per uid");
	ck_assert_msg(strstr(c, "LIO-OK nonroot: child as uid 1000 passed"), "non-root child");
	/* 8 hostile commands on the isolated queue pair, 2 on the passthrough one */
	ck_assert_msg(strstr(c, "LIO-SYSFS rejected 10"), "sysfs counters: 10 rejected commands");
	ck_assert_msg(strstr(c, "LIO-SYSFS-VOL kmodvol "), "sysfs volumes");
	ck_assert_msg(strstr(c, "LIO-RMMOD-BUSY-RC 1"), "rmmod not refused with a session open");
	ck_assert_msg(strstr(c, "LIO-UNBIND-RC 0"), "unbinding lightiov failed");
	ck_assert_msg(!strstr(c, "LIO-NODE-STILL-THERE"), "device node survived the unbind");
	ck_assert_msg(strstr(c, "LIO-RMMOD-RC 0"), "rmmod lightiov failed");
	ck_assert_msg(strstr(c, "LIO-NVME-BIND-RC 0"), "the stock nvme driver did not bind again");
	ck_assert_msg(strstr(c, "LIO-NVME-READ LIOVTBL1"),
		      "the stock driver did not read the volume table back");
	ck_assert_msg(strstr(c, "LIO-DONE-ALL"), "/init did not finish");
	bad = console_bad(c);
	ck_assert_msg(!bad, "guest console shows \"%s\"", bad);
}

/* The volume through softssd's offline tools: the module's table is softssd's format. */
static void softssd_checks(uint64_t *lba_start, uint64_t *lba_count)
{
	char cmd[512], *out, *p;
	unsigned long long s = 0, n = 0;

	snprintf(cmd, sizeof(cmd), "%s ssd vol list lio0 --backing %s 2>&1", testutil_lvmm(), img);
	ck_assert_msg(testutil_sh(cmd, &out) == 0, "%s:\n%s", cmd, out);
	p = strstr(out, "\nkmodvol ");
	ck_assert_msg(p && sscanf(p + 9, " %*s %llu %llu", &s, &n) == 2,
		      "softssd lists no kmodvol:\n%s", out);
	free(out);
	*lba_start = s;
	*lba_count = n;
}

static void image_checks(const struct linuxboot *b)
{
	static uint8_t copy_a[LIO_VT_COPY_BYTES], copy_b[LIO_VT_COPY_BYTES];
	static struct lio_vt vt;
	unsigned long long gs = 0, gn = 0;
	uint64_t s, n, off, base, i;
	const char *p = strstr(b->console, "LIO-VOL kmodvol");
	const char *m = strstr(b->console, "LIO-VOL-MOVED kmodvol");
	unsigned long long ms = 0, mn = 0;
	uint8_t *data, *want;
	int fd, idx;

	ck_assert_msg(p &&
			  sscanf(p, "LIO-VOL kmodvol lba_start=%llu lba_count=%llu", &gs, &gn) == 2,
		      "no LIO-VOL line");
	ck_assert_msg(
	    m && sscanf(m, "LIO-VOL-MOVED kmodvol lba_start=%llu lba_count=%llu", &ms, &mn) == 2,
	    "no LIO-VOL-MOVED line");
	ck_assert_msg(mn == 2 * gn && ms != gs, "moved to %llu+%llu from %llu+%llu", ms, mn, gs,
		      gn);
	softssd_checks(&s, &n);
	ck_assert_msg(s == ms && n == mn, "softssd: kmodvol at %llu+%llu, the guest saw %llu+%llu",
		      (unsigned long long)s, (unsigned long long)n, ms, mn);

	fd = open(img, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, copy_a, sizeof(copy_a), LIO_VT_COPY_OFF(0)), sizeof(copy_a));
	ck_assert_int_eq(pread(fd, copy_b, sizeof(copy_b), LIO_VT_COPY_OFF(1)), sizeof(copy_b));
	ck_assert_int_eq(lio_vt_load(copy_a, copy_b, &vt, NULL), 0);
	idx = lio_vt_find(&vt, "kmodvol");
	ck_assert_int_ge(idx, 0);
	ck_assert_uint_eq(vt.e[idx].lba_start, s);
	ck_assert_uint_eq(vt.lba_shift, 9);
	ck_assert_uint_eq(vt.capacity_lbas, (uint64_t)IMG_MB << 11);

	/* the image as the guest must have left it: the table's megabyte, five patterns at the
	 * first extent and the same copied to the second (whose added half reads zeros), zeros */
	data = malloc((size_t)IMG_MB << 20);
	want = calloc(1, (size_t)IMG_MB << 20);
	ck_assert_ptr_nonnull(data);
	ck_assert_ptr_nonnull(want);
	ck_assert_int_eq(pread(fd, data, (size_t)IMG_MB << 20, 0), (ssize_t)IMG_MB << 20);
	close(fd);
	memcpy(want, data, LIO_VT_RESERVED_BYTES);
	for (i = 0; i < 2; i++) {
		base = (i ? s : gs) << 9;
		fill(want + base, XFER, 1);			 /* isolated, window LBA 0 */
		fill(want + base + ((gn << 9) - 8192), 8192, 2); /* isolated, the window's end */
		fill(want + base + XFER, XFER, 3);		 /* passthrough, lba_start + 256 */
		fill(want + base + 2 * XFER, XFER, 4);		 /* queue memory, polled */
		fill(want + base + 3 * XFER, 8192, 5);		 /* DB_DIRECT */
	}
	for (off = 0; off < ((uint64_t)IMG_MB << 20); off += 4096) {
		if (!memcmp(data + off, want + off, 4096))
			continue;
		for (i = off; data[i] == want[i]; i++)
			;
		ck_abort_msg("image differs at byte %llu (%s the volume's window %llu..%llu): "
			     "0x%02x, want 0x%02x",
			     (unsigned long long)i,
			     i >= base && i < base + (n << 9) ? "inside" : "outside",
			     (unsigned long long)base, (unsigned long long)(base + (n << 9)),
			     data[i], want[i]);
	}
	free(data);
	free(want);
}

START_TEST(test_kmod)
{
	struct linuxboot b;
	int fd;

	/* a blank disk: the module writes the volume table (format_blank=1) */
	fd = open(img, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)IMG_MB << 20), 0);
	close(fd);
	boot(&b);
	if (!strstr(b.console, "LIO-DONE-ALL") || console_bad(b.console))
		linuxboot_report(&b, 24000);
	guest_checks(&b);
	image_checks(&b);
	linuxboot_free(&b);
}
END_TEST

static Suite *linux_kmod_suite(void)
{
	Suite *s = suite_create("linux_kmod");
	TCase *tc = tcase_create("kmod");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, TCASE_TIMEOUT_S);
	tcase_add_test(tc, test_kmod);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return testutil_run_suite(linux_kmod_suite());
}
