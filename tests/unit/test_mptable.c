/* Unit tests for vmm/mptable.c: finds the floating pointer where Linux scans for it, checks both
 * checksums, walks every entry and counts CPUs, buses, IOAPICs and interrupt routes. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layout.h"
#include "testutil.h"
#include "mptable.h"

#define RAM_SIZE (16ULL << 20)

static uint8_t *ram;
static struct guest_mem gm;
static char err[512];

static void setup(void)
{
	ram = testutil_guest_ram(&gm, RAM_SIZE);
}

static void teardown(void)
{
	free(ram);
}

struct mp_counts {
	unsigned cpus, bsp, buses, ioapics, ioints, lints, extint;
	uint32_t table_gpa;
	int irq_pin[16];
	int pci_pin[32][4]; /* IOAPIC pin of bus 0's slot, INTx pin (A = 0), -1 if none */
	unsigned pci_ints;
};

static struct mp_counts dump(void)
{
	struct mp_counts c = {0};
	const uint8_t *fp = NULL, *t, *e;
	uint16_t len, count;

	/* Linux scans the last KiB of base memory in 16-byte steps */
	for (uint64_t a = LAYOUT_EBDA_END - 1024; a < LAYOUT_EBDA_END; a += 16) {
		if (!memcmp(ram + a, "_MP_", 4)) {
			fp = ram + a;
			break;
		}
	}
	ck_assert_ptr_nonnull(fp);
	ck_assert_uint_eq(fp[8], 1);
	ck_assert_uint_eq(fp[9], 4);
	ck_assert_uint_eq(testutil_sum8(fp, 16), 0);
	c.table_gpa = testutil_le32(fp + 4);
	ck_assert_uint_lt(c.table_gpa, LAYOUT_HIGH_RAM);
	t = ram + c.table_gpa;
	ck_assert_int_eq(memcmp(t, "PCMP", 4), 0);
	len = testutil_le16(t + 4);
	ck_assert_uint_eq(testutil_sum8(t, len), 0);
	ck_assert_uint_eq(testutil_le32(t + 36), LAYOUT_LAPIC);
	count = testutil_le16(t + 34);
	for (unsigned i = 0; i < 16; i++)
		c.irq_pin[i] = -1;
	memset(c.pci_pin, 0xff, sizeof(c.pci_pin));
	e = t + 44;
	for (unsigned i = 0; i < count; i++) {
		ck_assert_uint_lt((size_t)(e - t), len);
		switch (e[0]) {
		case 0:
			ck_assert_uint_eq(e[1], c.cpus); /* APIC ids 0..n-1 */
			ck_assert_uint_eq(e[3] & 1, 1);
			if (e[3] & 2)
				c.bsp++;
			c.cpus++;
			e += 20;
			break;
		case 1:
			/* PCI bus 0 is MP bus 0 (Linux matches the ids), ISA bus 1 */
			ck_assert_uint_eq(e[1], c.buses);
			ck_assert_int_eq(memcmp(e + 2, c.buses ? "ISA   " : "PCI   ", 6), 0);
			c.buses++;
			e += 8;
			break;
		case 2:
			ck_assert_uint_eq(e[3] & 1, 1);
			ck_assert_uint_eq(testutil_le32(e + 4), LAYOUT_IOAPIC);
			c.ioapics++;
			e += 8;
			break;
		case 3:
			if (e[1] == 3) {
				c.extint++;
			} else if (e[1] == 0 && e[4] == 0) {
				/* PCI: level, active low; bus IRQ slot << 2 | pin */
				ck_assert_uint_eq(testutil_le16(e + 2), 0x000f);
				ck_assert_int_eq(c.pci_pin[e[5] >> 2][e[5] & 3], -1);
				c.pci_pin[e[5] >> 2][e[5] & 3] = e[7];
				c.pci_ints++;
			} else if (e[1] == 0 && e[4] == 1 && e[5] < 16) {
				ck_assert_uint_eq(testutil_le16(e + 2), 0);
				c.irq_pin[e[5]] = e[7];
			}
			c.ioints++;
			e += 8;
			break;
		case 4:
			c.lints++;
			e += 8;
			break;
		default:
			ck_abort_msg("unexpected MP entry type %u", e[0]);
		}
	}
	ck_assert_uint_eq((size_t)(e - t), len);
	return c;
}

static uint32_t check(unsigned cpus)
{
	struct mp_counts c;

	memset(ram, 0, RAM_SIZE);
	err[0] = 0;
	ck_assert_msg(mptable_build(&gm, cpus, err, sizeof(err)) == 0, "%s", err);
	c = dump();
	ck_assert_uint_eq(c.cpus, cpus);
	ck_assert_uint_eq(c.bsp, 1);
	ck_assert_uint_eq(c.buses, 2);
	ck_assert_uint_eq(c.ioapics, 1);
	ck_assert_uint_eq(c.extint, 1);
	ck_assert_uint_eq(c.lints, 2);
	ck_assert_int_eq(c.irq_pin[0], 2); /* PIT on pin 2 */
	ck_assert_int_eq(c.irq_pin[2], -1);
	ck_assert_int_eq(c.irq_pin[LAYOUT_COM1_IRQ], LAYOUT_COM1_IRQ);
	ck_assert_int_eq(c.irq_pin[15], 15);
	/* every slot but the host bridge's, its four pins swizzled onto the PCI pins 16-19 */
	ck_assert_uint_eq(c.pci_ints, 31 * 4);
	for (unsigned pin = 0; pin < 4; pin++)
		ck_assert_int_eq(c.pci_pin[0][pin], -1);
	for (unsigned slot = 1; slot < 32; slot++)
		for (unsigned pin = 0; pin < 4; pin++)
			ck_assert_int_eq(c.pci_pin[slot][pin], 16 + (slot + pin) % 4);
	ck_assert_int_eq(c.pci_pin[1][0], 17);
	ck_assert_int_eq(c.pci_pin[3][1], 16);
	if (c.table_gpa < LAYOUT_EBDA_END)
		ck_assert_uint_ge(c.table_gpa, LAYOUT_MPTABLE);
	else
		ck_assert_uint_eq(c.table_gpa, MPTABLE_ALT_START);
	return c.table_gpa;
}

START_TEST(mp_cpu_counts)
{
	check(1);
	check(2);
	check(8);
}
END_TEST

/* The PCI slots' routes (1 KiB) leave no room in base memory above the pointer: the table is in
 * the BIOS area for one CPU as for many; the pointer stays where Linux looks. */
START_TEST(mp_many_cpus)
{
	ck_assert_uint_eq(check(1), MPTABLE_ALT_START);
	ck_assert_uint_eq(check(40), MPTABLE_ALT_START);
	ck_assert_uint_eq(check(255), MPTABLE_ALT_START);
}
END_TEST

/* The $PIR header Linux finds at its first probe of the F segment (without ACPI). */
START_TEST(mp_pirq_table)
{
	const uint8_t *p;
	uint8_t sum = 0;

	check(1);
	p = ram + MPTABLE_PIR_START;
	ck_assert_mem_eq(p, "$PIR", 4);
	ck_assert_uint_eq(p[4] | p[5] << 8, 0x0100);	      /* version 1.0 */
	ck_assert_uint_eq(p[6] | p[7] << 8, MPTABLE_PIR_LEN); /* header only: no slots */
	ck_assert_uint_eq(MPTABLE_PIR_LEN % 16, 0);
	for (unsigned i = 0; i < MPTABLE_PIR_LEN; i++)
		sum = (uint8_t)(sum + p[i]);
	ck_assert_uint_eq(sum, 0);
	/* a table for 255 CPUs lies after it and leaves it intact */
	check(255);
	ck_assert_mem_eq(ram + MPTABLE_PIR_START, "$PIR", 4);
	ck_assert_uint_ge(MPTABLE_ALT_START, MPTABLE_PIR_START + MPTABLE_PIR_LEN);
}
END_TEST

START_TEST(mp_rejects)
{
	struct guest_mem small;
	uint8_t buf[4096];

	ck_assert_int_eq(mptable_build(&gm, 0, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "0 CPUs"));
	ck_assert_int_eq(mptable_build(&gm, 256, err, sizeof(err)), -EINVAL);
	gmem_init_buffer(&small, buf, sizeof(buf));
	ck_assert_int_eq(mptable_build(&small, 1, err, sizeof(err)), -EFAULT);
	ck_assert_ptr_nonnull(strstr(err, "cannot write"));
}
END_TEST

static Suite *mptable_suite(void)
{
	Suite *s = suite_create("mptable");
	TCase *tc = tcase_create("tables");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, mp_cpu_counts);
	tcase_add_test(tc, mp_many_cpus);
	tcase_add_test(tc, mp_pirq_table);
	tcase_add_test(tc, mp_rejects);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return testutil_run_suite(mptable_suite());
}
