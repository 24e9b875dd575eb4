/* Unit tests for the host-compatibility layer (vmm/hostcompat.c): host decision, command line,
 * the emulation-failure decoder and instruction fetch through guest page tables. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "hostcompat.h"
#include "testutil.h"

START_TEST(test_decide)
{
	ck_assert(hostcompat_decide(NULL, true));
	ck_assert(!hostcompat_decide(NULL, false));
	ck_assert(hostcompat_decide("on", false));
	ck_assert(!hostcompat_decide("off", true));
	ck_assert(hostcompat_decide("junk", true));
}
END_TEST

START_TEST(test_cmdline)
{
	char out[512];

	ck_assert_int_eq(hostcompat_cmdline("console=ttyS0", true, out, sizeof(out)), 0);
	ck_assert_str_eq(out, "console=ttyS0 " HOSTCOMPAT_PVM_CMDLINE);
	ck_assert_ptr_nonnull(strstr(out, "lvmm_pvm_syscall=1"));
	ck_assert_ptr_nonnull(strstr(out, "clearcpuid=cx16,smap,ssse3,popcnt,erms,fsrm"));
	ck_assert_int_eq(hostcompat_cmdline("", true, out, sizeof(out)), 0);
	ck_assert_str_eq(out, HOSTCOMPAT_PVM_CMDLINE);
	ck_assert_int_eq(hostcompat_cmdline("console=ttyS0", false, out, sizeof(out)), 0);
	ck_assert_str_eq(out, "console=ttyS0");
	ck_assert_int_eq(hostcompat_cmdline("console=ttyS0", true, out, 20), -ENAMETOOLONG);
}
END_TEST

START_TEST(test_decode)
{
	const uint8_t int3[] = {0xcc, 0x90}, fwait[] = {0x9b}, clac[] = {0x0f, 0x01, 0xca},
		      stac[] = {0x0f, 0x01, 0xcb}, xrstor[] = {0x0f, 0xae, 0x2f},
		      popcnt[] = {0xf3, 0x0f, 0xb8, 0xc0};
	unsigned len = 99;

	ck_assert_int_eq(hostcompat_decode(int3, 2, &len), HC_INSN_INT3);
	ck_assert_uint_eq(len, 1);
	ck_assert_int_eq(hostcompat_decode(fwait, 1, &len), HC_INSN_FWAIT);
	ck_assert_uint_eq(len, 1);
	ck_assert_int_eq(hostcompat_decode(clac, 3, &len), HC_INSN_CLAC);
	ck_assert_uint_eq(len, 3);
	ck_assert_int_eq(hostcompat_decode(stac, 3, &len), HC_INSN_STAC);
	ck_assert_int_eq(hostcompat_decode(clac, 2, &len), HC_INSN_UNKNOWN); /* truncated */
	ck_assert_int_eq(hostcompat_decode(xrstor, 3, &len), HC_INSN_UNKNOWN);
	ck_assert_int_eq(hostcompat_decode(popcnt, 4, &len), HC_INSN_UNKNOWN);
	ck_assert_int_eq(hostcompat_decode(int3, 0, &len), HC_INSN_UNKNOWN);
	ck_assert_str_eq(hostcompat_insn_name(HC_INSN_STAC), "stac");
}
END_TEST

START_TEST(test_format_bytes)
{
	const uint8_t b[] = {0x0f, 0xae, 0x2f};
	char out[64];

	hostcompat_format_bytes(b, 3, out, sizeof(out));
	ck_assert_str_eq(out, "0f ae 2f");
	hostcompat_format_bytes(b, 0, out, sizeof(out));
	ck_assert_str_eq(out, "(unreadable)");
	hostcompat_format_bytes(b, 3, out, 5);
	ck_assert_str_eq(out, "0f");
}
END_TEST

static uint8_t ram[0x40000] __attribute__((aligned(4096)));

static void put64(uint64_t gpa, uint64_t v)
{
	memcpy(ram + gpa, &v, 8);
}

/* 4-level tables at 0x1000.. mapping linear 0xffffffff81000000 (4K page) -> 0x20000 and
 * 0x40000000 (2M page) -> 0 (phys 0..2M). */
static void build_tables(void)
{
	uint64_t va = 0xffffffff81000000ULL;

	memset(ram, 0, sizeof(ram));
	put64(0x1000 + ((va >> 39) & 511) * 8, 0x2000 | 3);
	put64(0x2000 + ((va >> 30) & 511) * 8, 0x3000 | 3);
	put64(0x3000 + ((va >> 21) & 511) * 8, 0x4000 | 3);
	put64(0x4000 + ((va >> 12) & 511) * 8, 0x20000 | 3);
	put64(0x1000, 0x5000 | 3);
	put64(0x5000 + 1 * 8, 0x6000 | 3);
	put64(0x6000, 0x0 | 0x83); /* 2 MiB page at 1 GiB */
}

START_TEST(test_translate_long_mode)
{
	struct guest_mem gm;
	struct hostcompat_paging pg = {
	    .cr0 = 0x80000001, .cr3 = 0x1000, .cr4 = 0x20, .efer = 0x500};
	uint64_t gpa;
	uint8_t bytes[8];

	build_tables();
	gmem_init_buffer(&gm, ram, sizeof(ram));
	ck_assert_int_eq(hostcompat_translate(&gm, &pg, 0xffffffff81000123ULL, &gpa), 0);
	ck_assert_uint_eq(gpa, 0x20123);
	ck_assert_int_eq(hostcompat_translate(&gm, &pg, 0x40012345ULL, &gpa), 0);
	ck_assert_uint_eq(gpa, 0x12345);
	ck_assert_int_eq(hostcompat_translate(&gm, &pg, 0x80000000ULL, &gpa), -EFAULT);

	/* The bytes of an xrstor at the kernel address, fetched through the tables. */
	memcpy(ram + 0x20ffe, "\x0f\xae", 2);
	ck_assert_uint_eq(hostcompat_fetch(&gm, &pg, 0xffffffff81000ffeULL, bytes, 8), 2);
	ck_assert_uint_eq(bytes[0], 0x0f);
	ck_assert_uint_eq(bytes[1], 0xae);

	/* A table pointer outside RAM is refused, not followed. */
	put64(0x3000 + (((0xffffffff81200000ULL) >> 21) & 511) * 8, 0x7fff0000ULL | 3);
	ck_assert_int_eq(hostcompat_translate(&gm, &pg, 0xffffffff81200000ULL, &gpa), -EFAULT);
}
END_TEST

START_TEST(test_translate_no_paging_and_32bit)
{
	struct guest_mem gm;
	struct hostcompat_paging real = {.cr0 = 0x1};
	struct hostcompat_paging p32 = {.cr0 = 0x80000001, .cr3 = 0x1000, .cr4 = 0x10};
	uint64_t gpa;
	uint32_t e;

	build_tables();
	gmem_init_buffer(&gm, ram, sizeof(ram));
	ck_assert_int_eq(hostcompat_translate(&gm, &real, 0x1234, &gpa), 0);
	ck_assert_uint_eq(gpa, 0x1234);
	memset(ram + 0x1000, 0, 0x1000);
	e = 0x00000083; /* 4 MiB page at 0 for linear 0xc0000000 */
	memcpy(ram + 0x1000 + (0xc0000000u >> 22) * 4, &e, 4);
	ck_assert_int_eq(hostcompat_translate(&gm, &p32, 0xc0001234u, &gpa), 0);
	ck_assert_uint_eq(gpa, 0x1234);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("hostcompat");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_decide);
	tcase_add_test(tc, test_cmdline);
	tcase_add_test(tc, test_decode);
	tcase_add_test(tc, test_format_bytes);
	tcase_add_test(tc, test_translate_long_mode);
	tcase_add_test(tc, test_translate_no_paging_and_32bit);
	suite_add_tcase(s, tc);
	return testutil_run_suite(s);
}
