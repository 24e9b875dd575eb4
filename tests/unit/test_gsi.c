/* Unit tests of the MSI GSI allocator (vmm/gsi.c): lowest free first, reuse after free,
 * exhaustion, and refusal of foreign or doubly freed GSIs. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>

#include "../../vmm/gsi.h"
#include "testutil.h"

START_TEST(gsi_lowest_first_and_reuse)
{
	struct gsi_alloc a;
	int g[31];
	unsigned i, cycle;

	gsi_alloc_init(&a, 24, 1024);
	ck_assert_int_eq(gsi_alloc_get(&a), 24);
	ck_assert_int_eq(gsi_alloc_get(&a), 25);
	ck_assert_int_eq(gsi_alloc_put(&a, 24), 0);
	ck_assert_int_eq(gsi_alloc_get(&a), 24);
	ck_assert_int_eq(gsi_alloc_put(&a, 24), 0);
	ck_assert_int_eq(gsi_alloc_put(&a, 25), 0);
	ck_assert_uint_eq(gsi_alloc_count(&a), 0);
	/* 100 adds and removals of a 31-vector function: always the same GSIs, never ENOSPC. */
	for (cycle = 0; cycle < 100; cycle++) {
		for (i = 0; i < 31; i++) {
			g[i] = gsi_alloc_get(&a);
			ck_assert_int_eq(g[i], 24 + (int)i);
		}
		ck_assert_uint_eq(gsi_alloc_count(&a), 31);
		for (i = 0; i < 31; i++)
			ck_assert_int_eq(gsi_alloc_put(&a, (unsigned)g[i]), 0);
	}
	ck_assert_uint_eq(gsi_alloc_count(&a), 0);
}
END_TEST

START_TEST(gsi_exhaustion_and_bad_free)
{
	struct gsi_alloc a;
	unsigned i;

	gsi_alloc_init(&a, 24, 200);
	for (i = 24; i < 200; i++)
		ck_assert_int_eq(gsi_alloc_get(&a), (int)i);
	ck_assert_int_eq(gsi_alloc_get(&a), -ENOSPC);
	ck_assert_int_eq(gsi_alloc_put(&a, 130), 0);
	ck_assert_int_eq(gsi_alloc_get(&a), 130); /* a hole in a full word is found */
	ck_assert_int_eq(gsi_alloc_put(&a, 130), 0);
	ck_assert_int_eq(gsi_alloc_put(&a, 130), -EINVAL); /* double free */
	ck_assert_int_eq(gsi_alloc_put(&a, 5), -EINVAL);   /* an IOAPIC pin */
	ck_assert_int_eq(gsi_alloc_put(&a, 200), -EINVAL); /* past the range */
	ck_assert_int_eq(gsi_alloc_put(&a, 4000000), -EINVAL);
	ck_assert_uint_eq(gsi_alloc_count(&a), 175);
	gsi_alloc_init(&a, 24, 100000); /* clamped to the table */
	ck_assert_uint_eq(a.limit, GSI_ALLOC_MAX);
	gsi_alloc_init(&a, 50, 10);
	ck_assert_int_eq(gsi_alloc_get(&a), -ENOSPC);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("gsi");
	TCase *tc = tcase_create("alloc");

	tcase_add_test(tc, gsi_lowest_first_and_reuse);
	tcase_add_test(tc, gsi_exhaustion_and_bad_free);
	suite_add_tcase(s, tc);
	return testutil_run_suite(s);
}
