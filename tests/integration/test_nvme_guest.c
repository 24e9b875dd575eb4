/* The vNVMe controller inside a real KVM guest: the bench guest's ring-3 polled driver finds it
 * on PCI, moves BAR0, initialises it, writes/flushes/reads, runs the negative admin cases, then
 * QD1 loops with shadow doorbells and with its SQ in the CMB; the host then checks the image. Also:
 * bad --vnvme arguments give one-line errors. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#define RUN_LIMIT_S 120 /* a safety net against a hung VM, not an assertion on speed */

static char dir[64], img[128];

static void run_lvmm(struct testutil_run *r, char *const args[])
{
	testutil_run_lvmm(r, args, NULL, NULL, 0, RUN_LIMIT_S);
}

static void setup(void)
{
	testutil_mkdtemp(dir, sizeof(dir), "/tmp/lvmm-nvme-it-");
	snprintf(img, sizeof(img), "%s/disk.img", dir);
}

static void teardown(void)
{
	unlink(img);
	rmdir(dir);
}

/* Runs the bench guest's NVMe driver against a 16 MiB image with the given extra --vnvme options
 * and CPU count; checks that every step passed and the doorbell stride the guest saw. */
static void guest_driver(struct testutil_run *r, const char *opts, const char *cpus,
			 const char *dstrd)
{
	char vn[256], want[64];
	char *args[] = {"run",	      "--kernel",  (char *)testutil_bench_guest(),
			"--memory",   "64M",	   "--cpus",
			(char *)cpus, "--cmdline", "bench.mode=nvme",
			"--vnvme",    vn,	   NULL};

	snprintf(vn, sizeof(vn), "file=%s,size=16M%s", img, opts);
	run_lvmm(r, args);
	ck_assert_msg(WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0, "status 0x%x: %s %s",
		      r->status, r->out, r->err);
	snprintf(want, sizeof(want), "mqes 1024 dstrd %s\r\n", dstrd);
	ck_assert_msg(strstr(r->out, want), "%s", r->out);
	ck_assert_msg(strstr(r->out, "bench: nvme namespace 32768 blocks"), "%s", r->out);
	ck_assert_msg(strstr(r->out, "bench: nvme rw ok"), "%s", r->out);
	ck_assert_msg(strstr(r->out, "bench: nvme negative ok"), "%s", r->out);
	ck_assert_msg(strstr(r->out, "bench: nvme cmb ok"), "%s", r->out);
	ck_assert_msg(strstr(r->out, "bench: nvme passed (0 failures)"), "%s", r->out);
}

START_TEST(test_guest_driver)
{
	struct testutil_run r;
	uint8_t buf[65536];
	const char *lat;
	struct stat st;
	unsigned i;
	int fd;

	guest_driver(&r, ",serial=IT0001", "2", "10");
	for (lat = strstr(r.out, "bench: nvme qd1"); lat; lat = strstr(lat + 1, "bench: nvme qd1"))
		fprintf(stderr, "%.*s\n", (int)strcspn(lat, "\r\n"), lat);
	/* The image was created at the requested size and holds what the guest wrote. */
	ck_assert_int_eq(stat(img, &st), 0);
	ck_assert_int_eq(st.st_size, 16 << 20);
	fd = open(img, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	close(fd);
	for (i = 0; i < sizeof(buf); i++)
		ck_assert_uint_eq(buf[i], (uint8_t)(i * 13 + (i >> 9) + 0x5a));
}
END_TEST

/* 4096 I/O queue pairs: doorbells packed 4 bytes apart, 32 MSI-X vectors shared by the queues;
 * the guest driver runs the same checks through them. */
START_TEST(test_guest_driver_many_queues)
{
	struct testutil_run r;

	guest_driver(&r, ",queues=4096", "1", "0");
}
END_TEST

START_TEST(test_bad_vnvme)
{
	char vn[256];
	char *args[] = {"run", "--kernel", (char *)testutil_bench_guest(), "--vnvme", vn, NULL};
	struct testutil_run r;

	/* A read-only image that does not exist. */
	snprintf(vn, sizeof(vn), "file=%s/none.img,readonly=on", dir);
	run_lvmm(&r, args);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) != 0, "status 0x%x", r.status);
	ck_assert_msg(strstr(r.err, "none.img"), "stderr: %s", r.err);
	ck_assert_msg(strchr(r.err, '\n') == r.err + strlen(r.err) - 1, "stderr: %s", r.err);
	/* A new image without a size. */
	snprintf(vn, sizeof(vn), "file=%s/new.img", dir);
	run_lvmm(&r, args);
	ck_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) != 0);
	ck_assert_msg(strstr(r.err, "new.img"), "stderr: %s", r.err);
	ck_assert_msg(access(vn + 5, F_OK) != 0, "an empty image was left behind");
	/* An ssd nobody serves, where lvmm cannot start one (no state directory for its backing):
	 * refused, naming the device and the ssd. */
	snprintf(vn, sizeof(vn), "ssd0:10G");
	setenv("LVMM_RUN_DIR", dir, 1);
	setenv("LVMM_STATE_DIR", "/proc/lvmm-none", 1);
	run_lvmm(&r, args);
	unsetenv("LVMM_STATE_DIR");
	unsetenv("LVMM_RUN_DIR");
	ck_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) != 0);
	ck_assert_msg(strstr(r.err, "nvme0") && strstr(r.err, "ssd0"), "stderr: %s", r.err);
	/* More queue pairs than NVMe can number. */
	snprintf(vn, sizeof(vn), "file=%s/q.img,size=1M,queues=65536", dir);
	run_lvmm(&r, args);
	ck_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) != 0);
	ck_assert_msg(strstr(r.err, "queues '65536'"), "stderr: %s", r.err);
}
END_TEST

static Suite *nvme_guest_suite(void)
{
	Suite *s = suite_create("nvme_guest");
	TCase *t = tcase_create("kvm");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, RUN_LIMIT_S + 30);
	tcase_add_test(t, test_guest_driver);
	tcase_add_test(t, test_guest_driver_many_queues);
	tcase_add_test(t, test_bad_vnvme);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	if (!testutil_kvm_usable()) {
		testutil_skip("nvme_guest: /dev/kvm not usable here");
		return 0;
	}
	return testutil_run_suite(nvme_guest_suite());
}
