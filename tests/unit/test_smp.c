/* Unit tests for the trampoline lookup behind AP start-up on kvm_pvm (vmm/smp.c): a header laid
 * out as Linux 6.1 does, with and without the SEV field, and hostile or missing headers. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "smp.h"
#include "testutil.h"

#define HDR	  0x99000u
#define START	  (HDR + 0x1000u) /* trampoline_start, one page above the header */
#define START64	  (HDR + 0x1200u)
#define TR_HEADER (HDR + 0x3000u)
#define PGD	  (HDR + 0x4000u)

static uint8_t ram[0x100000] __attribute__((aligned(4096)));

static void put32(uint32_t gpa, uint32_t v)
{
	memcpy(ram + gpa, &v, 4);
}

static void put64(uint32_t gpa, uint64_t v)
{
	memcpy(ram + gpa, &v, 8);
}

/* sev: the kernel has CONFIG_AMD_MEM_ENCRYPT (one more field before trampoline_start64). */
static void build(int sev)
{
	unsigned i = 0;

	memset(ram, 0, sizeof(ram));
	put32(HDR + 4 * i++, HDR);	    /* text_start */
	put32(HDR + 4 * i++, HDR + 0x2000); /* ro_end */
	put32(HDR + 4 * i++, START);	    /* trampoline_start */
	put32(HDR + 4 * i++, TR_HEADER);    /* trampoline_header */
	if (sev)
		put32(HDR + 4 * i++, HDR + 0x1100); /* sev_es_trampoline_start: cli */
	put32(HDR + 4 * i++, START64);		    /* trampoline_start64 */
	put32(HDR + 4 * i++, PGD);		    /* trampoline_pgd */
	ram[HDR + 0x1100] = 0xfa;
	memcpy(ram + START64, "\x0f\x01\x1d\x10\x00\x00\x00", 7); /* lidt tr_idt(%rip) */
	put64(TR_HEADER, 0xffffffff81000060ULL);		  /* start */
	put64(TR_HEADER + 8, 0x901);				  /* efer */
	put32(TR_HEADER + 16, 0xb0);				  /* cr4 */
}

START_TEST(test_header_found)
{
	struct guest_mem gm;
	struct smp_target t;
	int sev;

	gmem_init_buffer(&gm, ram, sizeof(ram));
	for (sev = 0; sev <= 1; sev++) {
		build(sev);
		memset(&t, 0, sizeof(t));
		ck_assert_int_eq(smp_find_target(&gm, START, &t), 0);
		ck_assert_uint_eq(t.rip, 0xffffffff81000060ULL);
		ck_assert_uint_eq(t.cr3, PGD);
		ck_assert_uint_eq(t.efer, 0x901);
		ck_assert_uint_eq(t.cr4, 0xb0);
	}
}
END_TEST

START_TEST(test_hostile_headers)
{
	struct guest_mem gm;
	struct smp_target t;

	gmem_init_buffer(&gm, ram, sizeof(ram));
	build(0);
	ck_assert_int_eq(smp_find_target(&gm, START + 0x10, &t), -ENOENT); /* no match */
	ck_assert_int_eq(smp_find_target(&gm, 0x100, &t), -ENOENT);	   /* scan stops at 0 */
	ck_assert_int_lt(smp_find_target(&gm, 0xfffff000ULL, &t), 0);	   /* outside RAM */
	ram[START64] = 0x90; /* not the 64-bit entry's first instruction */
	ck_assert_int_eq(smp_find_target(&gm, START, &t), -ENOEXEC);
	build(0);
	put64(TR_HEADER, 0); /* no kernel entry filled in */
	ck_assert_int_eq(smp_find_target(&gm, START, &t), -ENOEXEC);
	build(0);
	put32(HDR + 12, 0x7fffffff); /* trampoline_header beyond low memory: rejected */
	ck_assert_int_eq(smp_find_target(&gm, START, &t), -ENOENT);
	build(0);
	put32(HDR + 16, 0xfffffff0u); /* trampoline_start64 pointer out of range */
	ck_assert_int_eq(smp_find_target(&gm, START, &t), -ENOEXEC);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("smp");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_header_found);
	tcase_add_test(tc, test_hostile_headers);
	suite_add_tcase(s, tc);
	return testutil_run_suite(s);
}
