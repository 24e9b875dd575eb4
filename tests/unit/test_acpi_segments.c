/* ACPI tables with further PCI segments (cloud-hypervisor's platform.num_pci_segments): one MCFG
 * entry per segment with contiguous ECAM windows, a host bridge PCnn with _SEG n in the DSDT,
 * the motherboard resource covering every window, and ACPICA's disassembler agreeing. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acpi.h"
#include "layout.h"
#include "testutil.h"

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

static const uint8_t *table(uint64_t gpa, const char *sig)
{
	const uint8_t *t = ram + gpa;
	uint32_t len;

	ck_assert_uint_ge(gpa, LAYOUT_BIOS_START);
	ck_assert_uint_lt(gpa, LAYOUT_HIGH_RAM);
	ck_assert_msg(!memcmp(t, sig, 4), "table at 0x%llx is '%.4s', want %s",
		      (unsigned long long)gpa, (const char *)t, sig);
	len = testutil_le32(t + 4);
	ck_assert_uint_le(gpa + len, LAYOUT_HIGH_RAM);
	ck_assert_msg(testutil_sum8(t, len) == 0, "%s checksum", sig);
	return t;
}

static const uint8_t *find(uint64_t rsdp, const char *sig)
{
	const uint8_t *x = table(testutil_le64(ram + rsdp + 24), "XSDT");
	uint32_t n = (testutil_le32(x + 4) - 36) / 8;

	for (uint32_t i = 0; i < n; i++) {
		uint64_t a = testutil_le64(x + 36 + 8 * i);

		if (!memcmp(ram + a, sig, 4))
			return table(a, sig);
	}
	ck_abort_msg("no %s in the XSDT", sig);
	return NULL;
}

static uint64_t build(unsigned nseg)
{
	uint64_t rsdp = 0;

	err[0] = 0;
	ck_assert_msg(acpi_build_segments(&gm, 1, 1, nseg, 0, &rsdp, err, sizeof(err)) == 0, "%s",
		      err);
	return rsdp;
}

/* How often the 4 bytes of name occur in the DSDT followed by an integer value v (AML Name). */
static unsigned dsdt_name_int(const uint8_t *d, const char *name, unsigned v)
{
	uint32_t len = testutil_le32(d + 4);
	unsigned n = 0;

	for (uint32_t i = 36; i + 6 < len; i++) {
		uint64_t got;

		if (d[i] != 0x08 || memcmp(d + i + 1, name, 4))
			continue;
		switch (d[i + 5]) {
		case 0x00:
			got = 0;
			break;
		case 0x01:
			got = 1;
			break;
		case 0x0a:
			got = d[i + 6];
			break;
		default:
			continue;
		}
		n += got == v;
	}
	return n;
}

START_TEST(test_mcfg_per_segment)
{
	static const unsigned counts[] = {1, 2, 16, ACPI_MAX_PCI_SEGMENTS};

	for (unsigned k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
		unsigned nseg = counts[k];
		uint64_t rsdp = build(nseg);
		const uint8_t *m = find(rsdp, "MCFG");

		ck_assert_uint_eq(testutil_le32(m + 4), 44 + 16 * nseg);
		for (unsigned s = 0; s < nseg; s++) {
			const uint8_t *e = m + 44 + 16 * s;

			ck_assert_uint_eq(testutil_le64(e),
					  LAYOUT_ECAM_START + s * LAYOUT_ECAM_SIZE);
			ck_assert_uint_eq(e[8] | e[9] << 8, s);
			ck_assert_uint_eq(e[10], 0);
			ck_assert_uint_eq(e[11], LAYOUT_ECAM_BUSES - 1);
		}
		ck_assert_uint_le(LAYOUT_ECAM_START + nseg * LAYOUT_ECAM_SIZE, LAYOUT_IOAPIC);
	}
}
END_TEST

START_TEST(test_dsdt_bridges)
{
	uint64_t rsdp = build(4);
	const uint8_t *f = find(rsdp, "FACP");
	const uint8_t *d = table(testutil_le64(f + 140), "DSDT");
	uint32_t len = testutil_le32(d + 4);
	char name[5];

	for (unsigned s = 0; s < 4; s++) {
		ck_assert_uint_eq(dsdt_name_int(d, "_SEG", s), 1);
		if (!s)
			continue;
		snprintf(name, sizeof(name), "PC%02X", s);
		ck_assert_ptr_nonnull(memmem(d, len, name, 4));
	}
	/* one host bridge per segment */
	ck_assert_uint_eq(dsdt_name_int(d, "_BBN", 0), 4);
	ck_assert_ptr_null(memmem(d, len, "PC04", 4));
}
END_TEST

START_TEST(test_one_segment_unchanged)
{
	static uint8_t a[16384], b[16384];
	size_t la = acpi_dsdt_aml(a, sizeof(a)), lb = acpi_dsdt_aml_segments(b, sizeof(b), 1, 0);

	ck_assert_uint_gt(la, 0);
	ck_assert_uint_eq(la, lb);
	ck_assert_int_eq(memcmp(a, b, la), 0);
	ck_assert_ptr_null(memmem(a, la, "PC01", 4));
	ck_assert_uint_eq(acpi_dsdt_aml_segments(b, sizeof(b), 0, 0), 0);
	ck_assert_uint_eq(acpi_dsdt_aml_segments(b, 64, 2, 0), 0);
}
END_TEST

/* A 64-bit window grown for large BARs (passed-through GPUs): PCI0's QWord memory range says so,
 * and the default window is gone from it. */
START_TEST(test_mmio64_window_size)
{
	static uint8_t b[16384];
	uint64_t big = 1ULL << 40, end = LAYOUT_MMIO64_START + big - 1,
		 dflt = LAYOUT_MMIO64_START + LAYOUT_MMIO64_SIZE - 1;
	size_t lb = acpi_dsdt_aml_segments(b, sizeof(b), 1, big);

	ck_assert_uint_gt(lb, 0);
	ck_assert_ptr_nonnull(memmem(b, lb, &big, 8));
	ck_assert_ptr_nonnull(memmem(b, lb, &end, 8));
	ck_assert_ptr_null(memmem(b, lb, &dflt, 8));
	lb = acpi_dsdt_aml_segments(b, sizeof(b), 1, 0);
	ck_assert_ptr_nonnull(memmem(b, lb, &dflt, 8));
}
END_TEST

START_TEST(test_refusals)
{
	uint64_t rsdp = 0;

	ck_assert_int_eq(acpi_build_segments(&gm, 1, 1, 0, 0, &rsdp, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "PCI segments"));
	ck_assert_int_eq(
	    acpi_build_segments(&gm, 1, 1, ACPI_MAX_PCI_SEGMENTS + 1, 0, &rsdp, err, sizeof(err)),
	    -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "97"));
	ck_assert_uint_eq(rsdp, 0);
}
END_TEST

/* ACPICA's disassembler accepts the DSDT with 3 segments and finds the bridges. */
START_TEST(test_iasl)
{
	char dir[] = "/tmp/lvmm-acpiseg-XXXXXX", cmd[512], path[600], line[512];
	unsigned seg1 = 0, seg2 = 0;
	const uint8_t *f, *d;
	FILE *fp;

	if (system("command -v iasl >/dev/null 2>&1")) {
		testutil_skip("test_acpi_segments: iasl not installed (acpica-tools)");
		return;
	}
	f = find(build(3), "FACP");
	d = table(testutil_le64(f + 140), "DSDT");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/dsdt.aml", dir);
	fp = fopen(path, "wb");
	ck_assert_ptr_nonnull(fp);
	ck_assert_uint_eq(fwrite(d, 1, testutil_le32(d + 4), fp), testutil_le32(d + 4));
	fclose(fp);
	snprintf(cmd, sizeof(cmd), "cd %s && iasl -d dsdt.aml >iasl.log 2>&1", dir);
	ck_assert_msg(system(cmd) == 0, "iasl -d failed, see %s/iasl.log", dir);
	snprintf(path, sizeof(path), "%s/dsdt.dsl", dir);
	fp = fopen(path, "r");
	ck_assert_ptr_nonnull(fp);
	while (fgets(line, sizeof(line), fp)) {
		seg1 += strstr(line, "Device (PC01)") != NULL;
		seg2 += strstr(line, "Device (PC02)") != NULL;
	}
	fclose(fp);
	ck_assert_msg(seg1 == 1 && seg2 == 1, "iasl output lacks PC01/PC02, see %s", dir);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("acpi_segments");
	TCase *tc = tcase_create("segments");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_mcfg_per_segment);
	tcase_add_test(tc, test_dsdt_bridges);
	tcase_add_test(tc, test_one_segment_unchanged);
	tcase_add_test(tc, test_mmio64_window_size);
	tcase_add_test(tc, test_refusals);
	tcase_add_test(tc, test_iasl);
	suite_add_tcase(s, tc);
	return testutil_run_suite(s);
}
