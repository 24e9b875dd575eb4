/* gmem_populate: every page of a shared memfd mapping resident afterwards (what softssd
 * --require-resident checks with mincore), contents kept (issue 23, finding 6). */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "guest_mem.h"
#include "testutil.h"

#define LEN (4u << 20)

static uint64_t resident_pages(void *p, uint64_t len)
{
	unsigned char *vec = malloc(len / 4096);
	uint64_t i, n = 0;

	ck_assert_ptr_nonnull(vec);
	ck_assert_int_eq(mincore(p, len, vec), 0);
	for (i = 0; i < len / 4096; i++)
		n += vec[i] & 1;
	free(vec);
	return n;
}

START_TEST(test_populate_memfd)
{
	int fd = memfd_create("t", MFD_CLOEXEC);
	uint8_t *p;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, LEN), 0);
	p = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
	ck_assert_ptr_ne(p, MAP_FAILED);
	p[5 * 4096 + 7] = 0x5a;
	ck_assert_uint_lt(resident_pages(p, LEN), LEN / 4096);
	ck_assert_int_eq(gmem_populate(p, LEN), 0);
	ck_assert_uint_eq(resident_pages(p, LEN), LEN / 4096);
	ck_assert_uint_eq(p[5 * 4096 + 7], 0x5a);
	ck_assert_uint_eq(p[LEN - 1], 0);
	ck_assert_int_eq(gmem_populate(p, 0), 0);
	munmap(p, LEN);
	close(fd);
}
END_TEST

static Suite *populate_suite(void)
{
	Suite *s = suite_create("gmem_populate");
	TCase *t = tcase_create("populate");

	tcase_add_test(t, test_populate_memfd);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return testutil_run_suite(populate_suite());
}
