/* Faults under the guest and the API: backing-file errors (injected with LVMM_FAULT_FILE, and a
 * real ENOSPC on a tiny tmpfs) reach the guest's NVMe driver as failed commands, never as
 * success; clients that vanish mid-request leave the server serving with no fd left behind;
 * 100 create/boot/shutdown/delete cycles through the API grow neither fds nor memory. */
#include <check.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "apitest.h"
#include "testutil.h"

#define RUN_LIMIT_S 120

static char dir[64], img[160];

static void setup(void)
{
	testutil_mkdtemp(dir, sizeof(dir), "/tmp/lvmm-faults-");
	snprintf(img, sizeof(img), "%s/disk.img", dir);
}

static void teardown(void)
{
	testutil_rmtree(dir);
}

/* The bench guest's NVMe driver (write 64 KiB, flush, read back, QD1 reads) on img. */
static void run_guest(struct testutil_run *r, const char *image)
{
	char vn[256];
	char *args[] = {"run",
			"--kernel",
			(char *)testutil_bench_guest(),
			"--memory",
			"64M",
			"--cmdline",
			"bench.mode=nvme",
			"--vnvme",
			vn,
			NULL};

	snprintf(vn, sizeof(vn), "file=%s,size=16M", image);
	testutil_run_lvmm(r, args, NULL, NULL, 0, RUN_LIMIT_S);
	/* lvmm itself carries on: the failure is the guest's to see */
	ck_assert_msg(WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0, "status 0x%x: %s %s",
		      r->status, r->out, r->err);
}

static void expect_guest_saw(const char *fault, const char *fail_line)
{
	struct testutil_run r;

	setenv("LVMM_FAULT_FILE", fault, 1);
	run_guest(&r, img);
	unsetenv("LVMM_FAULT_FILE");
	ck_assert_msg(strstr(r.err, "injecting faults"), "%s: %s", fault, r.err);
	ck_assert_msg(strstr(r.out, fail_line), "%s: no '%s' from the guest:\n%s", fault, fail_line,
		      r.out);
	ck_assert_msg(strstr(r.out, "bench: nvme FAILED"), "%s:\n%s", fault, r.out);
	ck_assert_msg(!strstr(r.out, "bench: nvme rw ok"), "%s: reported success:\n%s", fault,
		      r.out);
}

START_TEST(test_no_fault_passes)
{
	struct testutil_run r;

	unsetenv("LVMM_FAULT_FILE");
	run_guest(&r, img);
	ck_assert_msg(strstr(r.out, "bench: nvme passed (0 failures)"), "%s", r.out);
}
END_TEST

START_TEST(test_write_eio)
{
	expect_guest_saw("eio-write", "bench: nvme FAIL write 64 KiB");
}
END_TEST

START_TEST(test_write_enospc)
{
	expect_guest_saw("enospc", "bench: nvme FAIL write 64 KiB");
}
END_TEST

START_TEST(test_short_write)
{
	expect_guest_saw("short-write", "bench: nvme FAIL write 64 KiB");
}
END_TEST

START_TEST(test_read_eio)
{
	expect_guest_saw("eio-read", "bench: nvme FAIL read 64 KiB");
}
END_TEST

START_TEST(test_flush_eio)
{
	expect_guest_saw("eio-flush", "bench: nvme FAIL flush");
}
END_TEST

/* The first write succeeds, the ones after it fail: @N counts matching requests. */
START_TEST(test_fault_after_n)
{
	struct testutil_run r;

	setenv("LVMM_FAULT_FILE", "eio-write@1", 1);
	run_guest(&r, img);
	unsetenv("LVMM_FAULT_FILE");
	ck_assert_msg(strstr(r.out, "bench: nvme rw ok"), "%s", r.out);
	setenv("LVMM_FAULT_FILE", "bogus", 1);
	run_guest(&r, img);
	unsetenv("LVMM_FAULT_FILE");
	ck_assert_msg(strstr(r.err, "LVMM_FAULT_FILE=bogus not understood"), "%s", r.err);
	ck_assert_msg(strstr(r.out, "bench: nvme passed (0 failures)"), "%s", r.out);
}
END_TEST

/* A real full file system: the image on a 32 KiB tmpfs, the guest's 64 KiB write cannot land. */
START_TEST(test_real_enospc)
{
	char mnt[128], small[192];
	struct testutil_run r;

	snprintf(mnt, sizeof(mnt), "%s/tiny", dir);
	ck_assert_int_eq(mkdir(mnt, 0755), 0);
	if (mount("tmpfs", mnt, "tmpfs", 0, "size=32k")) {
		testutil_skip("faults: cannot mount a tmpfs here (not root?)");
		return;
	}
	snprintf(small, sizeof(small), "%s/disk.img", mnt);
	run_guest(&r, small);
	umount2(mnt, MNT_DETACH);
	ck_assert_msg(strstr(r.out, "bench: nvme FAIL write 64 KiB"), "%s", r.out);
	ck_assert_msg(!strstr(r.out, "bench: nvme rw ok"), "%s", r.out);
}
END_TEST

/* SIGKILL once the guest's 64 KiB write and its flush completed: what the guest was told is
 * written is in the image, byte for byte (the process's death loses nothing acknowledged). */
START_TEST(test_sigkill_after_acknowledged_write)
{
	char vn[256];
	char *args[] = {"run",
			"--kernel",
			(char *)testutil_bench_guest(),
			"--memory",
			"64M",
			"--cmdline",
			"bench.mode=nvme",
			"--vnvme",
			vn,
			NULL};
	struct testutil_run r;
	uint8_t *got;
	size_t n;
	unsigned i;

	snprintf(vn, sizeof(vn), "file=%s,size=16M", img);
	testutil_run_lvmm(&r, args, NULL, "bench: nvme rw ok", SIGKILL, RUN_LIMIT_S);
	ck_assert_msg(WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGKILL, "status 0x%x: %s",
		      r.status, r.out);
	got = malloc(65537);
	ck_assert_ptr_nonnull(got);
	n = testutil_read_file(img, (char *)got, 65537);
	ck_assert_uint_eq(n, 65536);
	/* the bench guest's pattern (tools/bench-guest/nvme.c) at LBA 0 */
	for (i = 0; i < 65536; i++)
		ck_assert_msg(got[i] == (uint8_t)(i * 13 + (i >> 9) + 0x5a),
			      "byte %u is 0x%02x after SIGKILL", i, got[i]);
	free(got);
}
END_TEST

static unsigned fd_count(pid_t pid)
{
	char path[64];
	struct dirent *e;
	unsigned n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

static unsigned long rss_kib(pid_t pid)
{
	char path[64], *s, *p;
	unsigned long kib = 0;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	s = testutil_slurp(path);
	ck_assert_ptr_nonnull(s);
	p = strstr(s, "\nVmRSS:");
	if (p)
		kib = strtoul(p + 7, NULL, 10);
	free(s);
	return kib;
}

static int raw_connect(const char *sock)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	ck_assert_uint_lt(strlen(sock), sizeof(sa.sun_path));
	memcpy(sa.sun_path, sock, strlen(sock) + 1);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* Clients that go away mid-request: half a header, a body shorter than its Content-Length, a
 * full request whose answer nobody reads. */
START_TEST(test_vanished_clients)
{
	static const char *const partial[] = {
	    "PUT /api/v1/vm.create HTTP/1.1\r\nHost: lo",
	    "PUT /api/v1/vm.create HTTP/1.1\r\nHost: localhost\r\nContent-Type: "
	    "application/json\r\n"
	    "Content-Length: 400\r\n\r\n{\"cpus\": {",
	    "GET /api/v1/vmm.ping HTTP/1.1\r\nHost: localhost\r\n\r\n",
	};
	struct apitest t;
	unsigned before, after, i;

	apitest_init(&t, "/tmp/lvmm-faults-api-");
	apitest_start(&t, NULL);
	ck_assert_int_gt(t.pid, 0);
	ck_assert(apitest_ping(&t));
	before = fd_count(t.pid);
	for (i = 0; i < 60; i++) {
		const char *req = partial[i % 3];
		int fd = raw_connect(t.sock);

		ck_assert_int_eq(write(fd, req, strlen(req)), (ssize_t)strlen(req));
		close(fd);
	}
	/* the server answers at once and has closed every one of them */
	ck_assert(apitest_ping(&t));
	for (i = 0; i < 100; i++) {
		after = fd_count(t.pid);
		if (after <= before)
			break;
		testutil_sleep_ms(50);
	}
	ck_assert_msg(after <= before, "fds %u before, %u after 60 vanished clients", before,
		      after);
	ck_assert_int_eq(apitest_curl(&t, "PUT", "vmm.shutdown", NULL, NULL), 204);
	ck_assert_int_eq(apitest_wait(&t, 15), 0);
	apitest_fini(&t);
}
END_TEST

/* 100 VM lifetimes through the API: fds back to the same count, RSS within a bound. */
START_TEST(test_hundred_cycles)
{
	char body[1024];
	struct apitest t;
	unsigned fds10 = 0, fds;
	unsigned long rss10 = 0, rss;

	apitest_init(&t, "/tmp/lvmm-faults-cycles-");
	apitest_start(&t, NULL);
	ck_assert_int_gt(t.pid, 0);
	snprintf(body, sizeof(body),
		 "{\"cpus\": {\"boot_vcpus\": 1}, \"memory\": {\"size\": 33554432},"
		 " \"payload\": {\"kernel\": \"%s\", \"cmdline\": \"bench.mode=spin\"},"
		 " \"serial\": {\"mode\": \"File\", \"file\": \"%s\"},"
		 " \"vnvme\": [{\"path\": \"%s\", \"size\": 1048576}]}",
		 testutil_bench_guest(), t.console, img);
	for (unsigned i = 1; i <= 100; i++) {
		json_t *why = NULL;
		int code = apitest_curl(&t, "PUT", "vm.create", body, &why);
		char *msg = why ? json_dumps(why, JSON_COMPACT) : NULL;

		/* the answer's error text in the failure message: what a flake was */
		ck_assert_msg(code == 204, "cycle %u: vm.create answered %d: %s", i, code,
			      msg ? msg : "(no body)");
		free(msg);
		json_decref(why);
		ck_assert_int_eq(apitest_curl(&t, "PUT", "vm.boot", NULL, NULL), 204);
		ck_assert_int_eq(apitest_curl(&t, "PUT", "vm.shutdown", NULL, NULL), 204);
		ck_assert_int_eq(apitest_curl(&t, "PUT", "vm.delete", NULL, NULL), 204);
		if (i == 10) {
			fds10 = fd_count(t.pid);
			rss10 = rss_kib(t.pid);
		}
	}
	fds = fd_count(t.pid);
	rss = rss_kib(t.pid);
	printf("faults: after 10 cycles %u fds, %lu KiB RSS; after 100 %u fds, %lu KiB RSS\n",
	       fds10, rss10, fds, rss);
	/* a client connection the server is still closing may be counted in either sample */
	ck_assert_msg(fds <= fds10, "fds grew from %u to %u over 90 cycles", fds10, fds);
	/* 90 leaked guest RAM mappings or vCPU structures would be far above this */
	ck_assert_msg(rss <= rss10 + 4096, "RSS grew from %lu to %lu KiB over 90 cycles", rss10,
		      rss);
	ck_assert_int_eq(apitest_curl(&t, "PUT", "vmm.shutdown", NULL, NULL), 204);
	ck_assert_int_eq(apitest_wait(&t, 15), 0);
	apitest_fini(&t);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("faults");
	TCase *tc = tcase_create("faults");

	if (!testutil_kvm_usable()) {
		testutil_skip("faults: /dev/kvm not usable here");
		return 0;
	}
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_no_fault_passes);
	tcase_add_test(tc, test_write_eio);
	tcase_add_test(tc, test_write_enospc);
	tcase_add_test(tc, test_short_write);
	tcase_add_test(tc, test_read_eio);
	tcase_add_test(tc, test_flush_eio);
	tcase_add_test(tc, test_fault_after_n);
	tcase_add_test(tc, test_real_enospc);
	tcase_add_test(tc, test_sigkill_after_acknowledged_write);
	tcase_add_test(tc, test_vanished_clients);
	tcase_add_test(tc, test_hundred_cycles);
	tcase_set_timeout(tc, 300);
	suite_add_tcase(s, tc);
	return testutil_run_suite(s);
}
