/* Unit tests for guest memory lookups (vmm/guest_mem.c): bounds, overflow, slot boundaries. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "guest_mem.h"
#include "testutil.h"

static uint8_t lo[0x4000], hi[0x2000];

/* Two slots with a hole between, like RAM split around the 32-bit PCI hole. */
static void two_slots(struct guest_mem *gm)
{
	memset(gm, 0, sizeof(*gm));
	gm->memfd = -1;
	gm->nslots = 2;
	gm->size = sizeof(lo) + sizeof(hi);
	gm->slots[0] = (struct gmem_slot){.gpa = 0, .size = sizeof(lo), .host = lo};
	gm->slots[1] = (struct gmem_slot){.gpa = 0x10000, .size = sizeof(hi), .host = hi};
}

START_TEST(test_ptr_bounds)
{
	struct guest_mem gm;

	two_slots(&gm);
	ck_assert_ptr_eq(gmem_ptr(&gm, 0, sizeof(lo)), lo);
	ck_assert_ptr_eq(gmem_ptr(&gm, 0x10, 0), lo + 0x10);
	ck_assert_ptr_null(gmem_ptr(&gm, 1, sizeof(lo)));
	ck_assert_ptr_null(gmem_ptr(&gm, sizeof(lo), 0));
	ck_assert_ptr_eq(gmem_ptr(&gm, 0x10fff, 1), hi + 0xfff);
	ck_assert_ptr_null(gmem_ptr(&gm, 0x8000, 1));
	ck_assert_ptr_null(gmem_ptr(&gm, 0x10, UINT64_MAX));
	ck_assert_ptr_null(gmem_ptr(&gm, UINT64_MAX, 2));
}
END_TEST

START_TEST(test_copy_spanning_and_hole)
{
	struct guest_mem gm;
	uint8_t buf[16];

	two_slots(&gm);
	memset(lo, 0, sizeof(lo));
	memset(hi, 0, sizeof(hi));
	ck_assert_int_eq(gmem_write(&gm, 0x11ff8, "0123456789abcdef", 16), -EFAULT);
	/* Nothing was written by the failed copy. */
	ck_assert_uint_eq(hi[0x1ff8], 0);
	ck_assert_int_eq(gmem_write(&gm, 0x3ff8, "0123456789abcdef", 16), -EFAULT);
	ck_assert_uint_eq(lo[0x3ff8], 0);
	ck_assert_int_eq(gmem_write(&gm, 0x10008, "0123456789abcdef", 16), 0);
	ck_assert_int_eq(gmem_read(&gm, 0x10008, buf, 16), 0);
	ck_assert_int_eq(memcmp(buf, "0123456789abcdef", 16), 0);
	ck_assert_int_eq(gmem_read(&gm, UINT64_MAX - 4, buf, 16), -EFAULT);
}
END_TEST

START_TEST(test_adjacent_slots_span)
{
	struct guest_mem gm;
	uint8_t buf[8];

	two_slots(&gm);
	gm.slots[1].gpa = sizeof(lo); /* contiguous: copies may cross the boundary */
	ck_assert_int_eq(gmem_write(&gm, sizeof(lo) - 4, "ABCDEFGH", 8), 0);
	ck_assert_int_eq(memcmp(lo + sizeof(lo) - 4, "ABCD", 4), 0);
	ck_assert_int_eq(memcmp(hi, "EFGH", 4), 0);
	ck_assert_int_eq(gmem_read(&gm, sizeof(lo) - 4, buf, 8), 0);
	ck_assert_int_eq(memcmp(buf, "ABCDEFGH", 8), 0);
	ck_assert_ptr_null(gmem_ptr(&gm, sizeof(lo) - 4, 8)); /* a pointer needs one slot */
}
END_TEST

START_TEST(test_init_buffer)
{
	struct guest_mem gm;
	uint8_t buf[64];

	gmem_init_buffer(&gm, buf, sizeof(buf));
	ck_assert_int_eq(gm.memfd, -1);
	ck_assert_uint_eq(gm.nslots, 1);
	ck_assert_ptr_eq(gmem_ptr(&gm, 63, 1), buf + 63);
	ck_assert_ptr_null(gmem_ptr(&gm, 63, 2));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("guest_mem");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_ptr_bounds);
	tcase_add_test(tc, test_copy_spanning_and_hole);
	tcase_add_test(tc, test_adjacent_slots_span);
	tcase_add_test(tc, test_init_buffer);
	suite_add_tcase(s, tc);
	return testutil_run_suite(s);
}
