/* Unit tests for the PIO/MMIO bus (vmm/bus.c): registration rules and dispatch by address. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "bus.h"
#include "testutil.h"

struct dev {
	uint64_t last_off;
	unsigned last_len, reads, writes;
	uint8_t last_val;
};

static void dev_read(void *opaque, uint64_t off, void *data, unsigned len)
{
	struct dev *d = opaque;

	d->reads++;
	d->last_off = off;
	d->last_len = len;
	memset(data, 0x5a, len);
}

static void dev_write(void *opaque, uint64_t off, const void *data, unsigned len)
{
	struct dev *d = opaque;

	d->writes++;
	d->last_off = off;
	d->last_len = len;
	d->last_val = *(const uint8_t *)data;
}

static const struct bus_ops ops = {.read = dev_read, .write = dev_write};

START_TEST(test_dispatch_offset)
{
	struct bus b;
	struct dev d = {0};
	uint32_t v = 0;
	uint8_t w = 0x42;

	bus_init(&b);
	ck_assert_int_eq(bus_register(&b, 0x3f8, 8, &ops, &d, "uart"), 0);
	ck_assert(bus_access(&b, 0x3fd, &v, 1, false));
	ck_assert_uint_eq(d.last_off, 5);
	ck_assert_uint_eq(v & 0xff, 0x5a);
	ck_assert(bus_access(&b, 0x3f8, &w, 1, true));
	ck_assert_uint_eq(d.last_val, 0x42);
	ck_assert_uint_eq(d.last_off, 0);
	ck_assert_uint_eq(d.writes, 1);
}
END_TEST

START_TEST(test_unmapped_reads_all_ones)
{
	struct bus b;
	uint64_t v = 0;
	uint8_t w = 1;

	bus_init(&b);
	ck_assert(!bus_access(&b, 0x1234, &v, 8, false));
	ck_assert_uint_eq(v, UINT64_MAX);
	ck_assert(!bus_access(&b, 0x1234, &w, 1, true));
}
END_TEST

START_TEST(test_overlap_and_edges)
{
	struct bus b;
	struct dev d1 = {0}, d2 = {0};
	uint32_t v;

	bus_init(&b);
	ck_assert_int_eq(bus_register(&b, 0x1000, 0x100, &ops, &d1, "a"), 0);
	ck_assert_int_eq(bus_register(&b, 0x10ff, 2, &ops, &d2, "b"), -EEXIST);
	ck_assert_int_eq(bus_register(&b, 0xfff, 2, &ops, &d2, "b"), -EEXIST);
	ck_assert_int_eq(bus_register(&b, 0x1100, 0x10, &ops, &d2, "b"), 0);
	ck_assert_int_eq(bus_register(&b, 0x10, 0, &ops, &d2, "empty"), -EINVAL);
	ck_assert_int_eq(bus_register(&b, UINT64_MAX - 1, 4, &ops, &d2, "wraps"), -EINVAL);
	/* An access straddling the end of a range belongs to nobody. */
	ck_assert(!bus_access(&b, 0x10fe, &v, 4, false));
	ck_assert_uint_eq(d1.reads, 0);
	ck_assert(bus_access(&b, 0x1100, &v, 4, false));
	ck_assert_uint_eq(d2.reads, 1);
	ck_assert(bus_access(&b, 0x10fc, &v, 4, false));
	ck_assert_uint_eq(d1.last_off, 0xfc);
}
END_TEST

START_TEST(test_unregister_and_full)
{
	struct bus b;
	struct dev d = {0};
	uint8_t v;
	unsigned i;

	bus_init(&b);
	for (i = 0; i < BUS_MAX_RANGES; i++)
		ck_assert_int_eq(bus_register(&b, (BUS_MAX_RANGES - i) * 16ULL, 8, &ops, &d, "x"),
				 0);
	ck_assert_int_eq(bus_register(&b, 0x10000, 8, &ops, &d, "x"), -ENOSPC);
	/* Registered in descending order: lookups still find each one (table kept sorted). */
	for (i = 1; i <= BUS_MAX_RANGES; i++)
		ck_assert(bus_access(&b, i * 16ULL + 7, &v, 1, false));
	ck_assert_int_eq(bus_unregister(&b, 32, &d), 0);
	ck_assert_int_eq(bus_unregister(&b, 32, &d), -ENOENT);
	ck_assert(!bus_access(&b, 32, &v, 1, false));
	ck_assert_int_eq(bus_register(&b, 0x10000, 8, &ops, &d, "x"), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("bus");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_dispatch_offset);
	tcase_add_test(tc, test_unmapped_reads_all_ones);
	tcase_add_test(tc, test_overlap_and_edges);
	tcase_add_test(tc, test_unregister_and_full);
	suite_add_tcase(s, tc);
	return testutil_run_suite(s);
}
