/* Several vCPUs, each driving its own queue pairs: the bench guest with --cpus 2 and 4 queue
 * pairs on an emulated file image (lvmm starts the APs at the ELF entry, vmm/loader.h), data
 * written and checked by the guest and by the host, the APs parked when a mode does not use them.
 * The isolated-mode counterpart is test_vnvme_modes' case "mq" (it needs that file's softssd). */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#define RUN_LIMIT_S 60 /* a safety net against a hung VM, not an assertion on speed */
#define SPAN	    (1u << 20)
#define IMG_SIZE    (8u << 20)

static char img[64];

static void setup(void)
{
	strcpy(img, "/tmp/lvmm-mq-XXXXXX");
	testutil_tmpfile(img);
	ck_assert_int_eq(truncate(img, IMG_SIZE), 0);
}

static void teardown(void)
{
	unlink(img);
}

static void vm_run(struct testutil_run *r, const char *cpus, const char *cmdline)
{
	char vn[128];
	char *args[] = {"run",	      "--kernel",      (char *)testutil_bench_guest(),
			"--memory",   "64M",	       "--cpus",
			(char *)cpus, "--vnvme",       vn,
			"--cmdline",  (char *)cmdline, NULL};

	snprintf(vn, sizeof(vn), "file=%s,queues=4", img);
	testutil_run_lvmm(r, args, NULL, NULL, 0, RUN_LIMIT_S);
}

/* The number after "key=" on the guest's result line. */
static unsigned long long result_of(const char *out, const char *key)
{
	const char *l = strstr(out, "bench: work result"), *k;
	char want[32];

	ck_assert_msg(l, "no result line: %s", out);
	snprintf(want, sizeof(want), " %s=", key);
	k = strstr(l, want);
	ck_assert_msg(k, "no %s on: %s", key, l);
	return strtoull(k + strlen(want), NULL, 10);
}

/* A clean run whose two vCPUs both completed I/O without an error. */
static void assert_both_worked(const struct testutil_run *r, const char *what)
{
	const char *l;
	unsigned long long a, b;
	char *end;

	ck_assert_msg(WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0, "%s: status 0x%x: %s %s",
		      what, r->status, r->out, r->err);
	ck_assert_msg(strstr(r->err, "guest powered off"), "%s: %s", what, r->err);
	ck_assert_msg(strstr(r->out, "bench: 2 vCPUs"), "%s: %s", what, r->out);
	ck_assert_msg(!strstr(r->out, "FAIL"), "%s: %s", what, r->out);
	ck_assert_uint_eq(result_of(r->out, "errors"), 0);
	ck_assert_uint_eq(result_of(r->out, "vcpus"), 2);
	l = strstr(r->out, " vcpu_ios=");
	ck_assert_ptr_nonnull(l);
	a = strtoull(l + 10, &end, 10);
	ck_assert_int_eq(*end, ',');
	b = strtoull(end + 1, NULL, 10);
	ck_assert_msg(a > 0 && b > 0, "%s: vCPU I/O counts %llu and %llu", what, a, b);
	ck_assert_uint_eq(a + b, result_of(r->out, "ios"));
}

/* The guest's bench.verify pattern (tools/bench-guest/workload.c). */
static uint64_t pattern(uint64_t seed, uint64_t off)
{
	uint64_t x = (seed + 1) * 0x9e3779b97f4a7c15ULL ^ off;

	x ^= x >> 31;
	x *= 0xbf58476d1ce4e5b9ULL;
	return x ^ (x >> 29);
}

/* Sequential writes from both vCPUs cover the span, then random reads and writes on both are
 * checked by the guest; the host finds the pattern in every byte of the span. */
START_TEST(test_two_vcpus_four_qpairs)
{
	static uint64_t buf[SPAN / 8];
	struct testutil_run r;
	int fd;

	vm_run(&r, "2",
	       "bench.mode=work bench.cpus=2 bench.qp=4 bench.qd=4 bench.verify=on bench.span_mb=1 "
	       "bench.seed=21 bench.rw=write bench.ios=1024");
	assert_both_worked(&r, "write");
	ck_assert_uint_ge(result_of(r.out, "writes"), 1024);
	vm_run(&r, "2",
	       "bench.mode=work bench.cpus=2 bench.qp=4 bench.qd=4 bench.verify=on bench.span_mb=1 "
	       "bench.seed=21 bench.rw=randrw bench.ios=2000");
	assert_both_worked(&r, "randrw");
	ck_assert_uint_ge(result_of(r.out, "verified"), 500);
	ck_assert_uint_eq(result_of(r.out, "verified"), result_of(r.out, "reads"));

	fd = open(img, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, buf, SPAN, 0), SPAN);
	close(fd);
	for (unsigned i = 0; i < SPAN / 8; i++)
		ck_assert_msg(buf[i] == pattern(21, i * 8ULL), "offset %u: %llx", i * 8,
			      (unsigned long long)buf[i]);
}
END_TEST

/* The guest checks what it reads: a pattern of another seed is a failure, not a pass. */
START_TEST(test_verify_catches_other_data)
{
	struct testutil_run r;

	vm_run(&r, "2",
	       "bench.mode=work bench.cpus=2 bench.qp=4 bench.qd=2 bench.verify=on bench.span_mb=1 "
	       "bench.seed=5 bench.rw=randread bench.ios=100");
	ck_assert_msg(strstr(r.out, "bench: work verify FAIL"), "%s", r.out);
	ck_assert_uint_gt(result_of(r.out, "errors"), 0);
}
END_TEST

/* --cpus 2 without bench.cpus: the AP parks, the run is a one-vCPU run as before (no per-vCPU
 * fields); bench.cpus=2 on one vCPU says so instead of waiting for an AP that never comes. */
START_TEST(test_unused_and_missing_aps)
{
	struct testutil_run r;

	vm_run(&r, "2", "bench.mode=work bench.qp=4 bench.qd=4 bench.ios=400");
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "%s %s", r.out, r.err);
	ck_assert_uint_eq(result_of(r.out, "errors"), 0);
	ck_assert_msg(!strstr(r.out, "vcpus=") && !strstr(r.out, "vCPUs"), "%s", r.out);
	vm_run(&r, "1", "bench.mode=work bench.cpus=2 bench.qp=4 bench.ios=400");
	ck_assert_msg(strstr(r.out, "bench: FAIL 1 of 2 vCPUs came up"), "%s", r.out);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "%s", r.err);
}
END_TEST

static Suite *multiqueue_suite(void)
{
	Suite *s = suite_create("multiqueue");
	TCase *t = tcase_create("emulate");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 3 * RUN_LIMIT_S);
	tcase_add_test(t, test_two_vcpus_four_qpairs);
	tcase_add_test(t, test_verify_catches_other_data);
	tcase_add_test(t, test_unused_and_missing_aps);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	if (!testutil_kvm_usable()) {
		testutil_skip("multiqueue: /dev/kvm not usable here");
		return 0;
	}
	return testutil_run_suite(multiqueue_suite());
}
