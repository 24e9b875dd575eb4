/* Hot-removed functions give their resources back: BAR window space and MSI-X GSIs are reused
 * by the next function added, over 100 add/remove cycles (no KVM: fake platform ops). */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gsi.h"
#include "layout.h"
#include "pci.h"
#include "testutil.h"

static struct gsi_alloc gsis;

static int fk_alloc(void *o)
{
	return gsi_alloc_get(&gsis);
}

static int fk_free(void *o, unsigned gsi)
{
	return gsi_alloc_put(&gsis, gsi);
}

static uint64_t bar_of(struct pci_dev *d, unsigned i)
{
	uint64_t lo, hi;

	memcpy(&lo, d->cfg + PCI_BAR0 + 4 * i, 4);
	memcpy(&hi, d->cfg + PCI_BAR0 + 4 * (i + 1), 4);
	return ((lo & 0xffffffffull) | (hi & 0xffffffffull) << 32) & ~0xfull;
}

static void dev_make(struct pci_dev *d, struct pci_bus *b, const char *name)
{
	char err[128];

	memset(d, 0, sizeof(*d));
	pci_dev_init(d, name, 0x1b36, 0x0110, 0x010802, 0x1b36, 0x0110);
	ck_assert_int_eq(pci_dev_add_bar(d, 0, 0x4000, true, false, NULL, NULL, NULL), 0);
	ck_assert_int_eq(pci_dev_add_bar(d, 2, 0x10000, true, true, NULL, NULL, NULL), 0);
	ck_assert_int_eq(pci_dev_add_msix(d, 31, 4, err, sizeof(err)), 0);
	ck_assert_msg(pci_bus_add(b, d, err, sizeof(err)) == 0, "%s", err);
}

START_TEST(space_reused_over_100_cycles)
{
	struct pci_platform_ops ops = {.alloc_gsi = fk_alloc, .free_gsi = fk_free};
	static struct bus pio, mmio;
	static struct pci_bus pb;
	static struct pci_dev keep, hot;
	uint64_t b0 = 0, b2 = 0, b4 = 0, n32, n64;
	char err[128];
	unsigned cycle;

	gsi_alloc_init(&gsis, 24, 200); /* room for 5 functions of 32 GSIs, not 100 */
	bus_init(&pio);
	bus_init(&mmio);
	ck_assert_int_eq(pci_bus_init(&pb, &ops, &pio, &mmio, err, sizeof(err)), 0);
	dev_make(&keep, &pb, "nvme0");
	for (cycle = 0; cycle < 100; cycle++) {
		dev_make(&hot, &pb, "nvme1");
		ck_assert_uint_eq(gsi_alloc_count(&gsis), 62);
		if (!cycle) {
			b0 = bar_of(&hot, 0);
			b2 = bar_of(&hot, 2);
			b4 = bar_of(&hot, 4);
			ck_assert(b0 >= LAYOUT_MMIO32_START && b2 >= LAYOUT_MMIO64_START);
		}
		ck_assert_uint_eq(bar_of(&hot, 0), b0);
		ck_assert_uint_eq(bar_of(&hot, 2), b2);
		ck_assert_uint_eq(bar_of(&hot, 4), b4);
		pci_dev_exit(&hot);
		ck_assert_uint_eq(gsi_alloc_count(&gsis), 31);
		if (!cycle) { /* the alignment gap below the first BAR stays */
			n32 = pb.mmio32_next;
			n64 = pb.mmio64_next;
		}
		ck_assert_uint_eq(pb.mmio32_next, n32);
		ck_assert_uint_eq(pb.mmio64_next, n64);
	}
	/* Below the top of a window: kept in the free list and taken by the same size. */
	dev_make(&hot, &pb, "nvme1");
	pci_dev_exit(&keep);
	ck_assert_uint_gt(pb.nbar_free, 0);
	dev_make(&keep, &pb, "nvme2");
	ck_assert_uint_eq(pb.nbar_free, 0);
	ck_assert_uint_ne(bar_of(&keep, 0), bar_of(&hot, 0));
	pci_dev_exit(&hot);
	pci_dev_exit(&keep);
	ck_assert_uint_eq(gsi_alloc_count(&gsis), 0);
	pci_bus_exit(&pb);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("pci_space");
	TCase *tc = tcase_create("reuse");

	tcase_add_test(tc, space_reused_over_100_cycles);
	suite_add_tcase(s, tc);
	return testutil_run_suite(s);
}
