/* The vNVMe controller inside a real KVM guest: the bench guest's ring-3 polled driver finds it
 * on PCI, moves BAR0, initialises it, writes/flushes/reads, runs the negative admin cases, then
 * QD1 loops with shadow doorbells and with its SQ in the CMB; the host then checks the image. Also:
 * bad --vnvme arguments give one-line errors. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define OUT_MAX	    65536
#define RUN_LIMIT_S 120 /* a safety net against a hung VM, not an assertion on speed */

struct run {
	char out[OUT_MAX], err[OUT_MAX];
	size_t nout, nerr;
	int status;
};

static char dir[64], img[128];

static const char *lvmm(void)
{
	const char *p = getenv("LVMM");

	return p && *p ? p : "build/lvmm";
}

static const char *guest(void)
{
	static char path[512];
	const char *b = getenv("BUILD");

	snprintf(path, sizeof(path), "%s/bench-guest/bench-guest.elf", b && *b ? b : "build");
	return path;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void drain(int fd, char *buf, size_t *n, int *open_)
{
	ssize_t r = read(fd, buf + *n, OUT_MAX - 1 - *n);

	if (r > 0)
		*n += (size_t)r;
	if ((r <= 0 && !(r < 0 && errno == EINTR)) || *n >= OUT_MAX - 1)
		*open_ = 0;
	buf[*n] = 0;
}

static void run_lvmm(struct run *r, char *const args[])
{
	int po[2], pe[2], oo = 1, eo = 1;
	double start = now_s();
	char *argv[32];
	pid_t pid;
	int i;

	memset(r, 0, sizeof(*r));
	argv[0] = (char *)lvmm();
	for (i = 0; args[i] && i < 30; i++)
		argv[i + 1] = args[i];
	argv[i + 1] = NULL;
	ck_assert_int_eq(pipe(po), 0);
	ck_assert_int_eq(pipe(pe), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (!pid) {
		int devnull = open("/dev/null", O_RDONLY);

		dup2(devnull, 0);
		dup2(po[1], 1);
		dup2(pe[1], 2);
		close(po[0]);
		close(pe[0]);
		execv(argv[0], argv);
		_exit(127);
	}
	close(po[1]);
	close(pe[1]);
	while (oo || eo) {
		struct pollfd p[2] = {{.fd = oo ? po[0] : -1, .events = POLLIN},
				      {.fd = eo ? pe[0] : -1, .events = POLLIN}};

		if (poll(p, 2, 200) > 0) {
			if (p[0].revents)
				drain(po[0], r->out, &r->nout, &oo);
			if (p[1].revents)
				drain(pe[0], r->err, &r->nerr, &eo);
		}
		if (now_s() - start > RUN_LIMIT_S) {
			kill(pid, SIGKILL);
			break;
		}
	}
	close(po[0]);
	close(pe[0]);
	ck_assert_int_eq(waitpid(pid, &r->status, 0), pid);
}

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/lvmm-nvme-it-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(img, sizeof(img), "%s/disk.img", dir);
}

static void teardown(void)
{
	unlink(img);
	rmdir(dir);
}

START_TEST(test_guest_driver)
{
	char vn[256];
	char *args[] = {"run", "--kernel",  (char *)guest(),   "--memory", "64M", "--cpus",
			"2",   "--cmdline", "bench.mode=nvme", "--vnvme",  vn,	  NULL};
	struct run r;
	uint8_t buf[65536];
	const char *lat;
	struct stat st;
	unsigned i;
	int fd;

	snprintf(vn, sizeof(vn), "file=%s,size=16M,serial=IT0001", img);
	run_lvmm(&r, args);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "status 0x%x: %s %s",
		      r.status, r.out, r.err);
	ck_assert_msg(strstr(r.out, "bench: nvme namespace 32768 blocks"), "%s", r.out);
	ck_assert_msg(strstr(r.out, "bench: nvme rw ok"), "%s", r.out);
	ck_assert_msg(strstr(r.out, "bench: nvme negative ok"), "%s", r.out);
	ck_assert_msg(strstr(r.out, "bench: nvme cmb ok"), "%s", r.out);
	ck_assert_msg(strstr(r.out, "bench: nvme passed (0 failures)"), "%s", r.out);
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

START_TEST(test_bad_vnvme)
{
	char vn[256];
	char *args[] = {"run", "--kernel", (char *)guest(), "--vnvme", vn, NULL};
	struct run r;

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
}
END_TEST

static Suite *nvme_guest_suite(void)
{
	Suite *s = suite_create("nvme_guest");
	TCase *t = tcase_create("kvm");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, RUN_LIMIT_S + 30);
	tcase_add_test(t, test_guest_driver);
	tcase_add_test(t, test_bad_vnvme);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(nvme_guest_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
