/* softssd's device model: --model parsing (presets, units, refusals naming the bad part) and the
 * completion times it hands out (fixed latency, IOPS token bucket with its burst). */
#include <check.h>
#include <string.h>

#include "softssd/model.h"
#include "testutil.h"

static struct ssd_model m;
static char err[256];

START_TEST(test_parse)
{
	ck_assert_int_eq(ssd_model_parse(&m, "none", err, sizeof(err)), 0);
	ck_assert(!ssd_model_active(&m));
	ck_assert_str_eq(m.desc, "none");
	ck_assert_int_eq(ssd_model_parse(&m, NULL, err, sizeof(err)), 0);
	ck_assert(!ssd_model_active(&m));

	ck_assert_int_eq(ssd_model_parse(&m, "p4510", err, sizeof(err)), 0);
	ck_assert_uint_eq(m.latency_ns, 80000);
	ck_assert_uint_eq(m.iops, 640000);
	ck_assert_str_eq(m.desc, "p4510");

	ck_assert_int_eq(ssd_model_parse(&m, "latency=1.5ms,iops=2m", err, sizeof(err)), 0);
	ck_assert_uint_eq(m.latency_ns, 1500000);
	ck_assert_uint_eq(m.iops, 2000000);
	ck_assert_uint_eq(m.interval_ns, 500);
	ck_assert_int_eq(ssd_model_parse(&m, "iops=100", err, sizeof(err)), 0);
	ck_assert_uint_eq(m.latency_ns, 0);
	ck_assert_uint_eq(m.interval_ns, 10000000);
	ck_assert_int_eq(ssd_model_parse(&m, "latency=250ns", err, sizeof(err)), 0);
	ck_assert_uint_eq(m.latency_ns, 250);
	ck_assert_uint_eq(m.iops, 0);
}
END_TEST

START_TEST(test_parse_refusals)
{
	static const char *const bad[] = {
	    "fast",	      "latency=80",   "latency=80xs", "latency=2s",    "iops=0",
	    "iops=1g",	      "latency=-1us", "iops=",	      "latency=80us,", "=80us",
	    "iops=10k,foo=1", "latency=us",   "iops=200m",    "p4510,iops=1k",
	};
	unsigned i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = 0;
		ck_assert_msg(ssd_model_parse(&m, bad[i], err, sizeof(err)) < 0, "'%s' accepted",
			      bad[i]);
		ck_assert_msg(strstr(err, "--model"), "'%s': error '%s'", bad[i], err);
	}
}
END_TEST

/* Latency only: due = submission + latency, never before the backing finished. */
START_TEST(test_due_latency)
{
	ck_assert_int_eq(ssd_model_parse(&m, "latency=100us", err, sizeof(err)), 0);
	ck_assert_uint_eq(ssd_model_due(&m, 1000000, 1010000), 1100000);
	ck_assert_uint_eq(ssd_model_due(&m, 1000000, 1500000), 1500000);
}
END_TEST

/* The bucket: an idle device passes a burst of 32 at once, then one command per interval. */
START_TEST(test_due_iops)
{
	uint64_t t = 10000000000ull, due, prev = 0;
	unsigned i;

	ck_assert_int_eq(ssd_model_parse(&m, "iops=1k", err, sizeof(err)), 0);
	for (i = 0; i < 32; i++) /* banked slots: no wait */
		ck_assert_uint_le(ssd_model_due(&m, t, t), t);
	for (i = 0; i < 100; i++) {
		due = ssd_model_due(&m, t, t);
		ck_assert_uint_ge(due, t);
		if (prev)
			ck_assert_uint_eq(due - prev, 1000000); /* 1 ms apart */
		prev = due;
	}
	/* 100 commands past the burst take 100 intervals, give or take the slot being used */
	ck_assert_uint_ge(prev - t, 98000000ull);
	ck_assert_uint_le(prev - t, 100000000ull);
	/* after a long idle time the bucket holds a burst again, not the whole idle time */
	t += 60000000000ull;
	for (i = 0; i < 40; i++)
		due = ssd_model_due(&m, t, t);
	ck_assert_uint_ge(due, t + 7000000ull);
}
END_TEST

static void teardown(void)
{
	ssd_model_destroy(&m);
}

int main(void)
{
	Suite *s = suite_create("softssd_model");
	TCase *t = tcase_create("model");

	tcase_add_checked_fixture(t, NULL, teardown);
	tcase_add_test(t, test_parse);
	tcase_add_test(t, test_parse_refusals);
	tcase_add_test(t, test_due_latency);
	tcase_add_test(t, test_due_iops);
	suite_add_tcase(s, t);
	return testutil_run_suite(s);
}
