/* Unit tests for the user-space IOAPIC (vmm/ioapic.c): register window, edge and level
 * delivery as MSI messages, masking, Remote IRR and EOI. */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "ioapic.h"
#include "testutil.h"

static unsigned nmsi;
static uint64_t last_addr;
static uint32_t last_data;

static int capture(void *opaque, uint64_t addr, uint32_t data)
{
	(void)opaque;
	nmsi++;
	last_addr = addr;
	last_data = data;
	return 0;
}

static void set_rte(struct ioapic *io, unsigned pin, uint64_t rte)
{
	ioapic_mmio_write(io, 0x00, 0x10 + 2 * pin);
	ioapic_mmio_write(io, 0x10, (uint32_t)rte);
	ioapic_mmio_write(io, 0x00, 0x10 + 2 * pin + 1);
	ioapic_mmio_write(io, 0x10, (uint32_t)(rte >> 32));
}

static uint64_t get_rte(struct ioapic *io, unsigned pin)
{
	uint64_t lo, hi;

	ioapic_mmio_write(io, 0x00, 0x10 + 2 * pin);
	lo = ioapic_mmio_read(io, 0x10);
	ioapic_mmio_write(io, 0x00, 0x10 + 2 * pin + 1);
	hi = ioapic_mmio_read(io, 0x10);
	return lo | hi << 32;
}

static void setup(struct ioapic *io)
{
	nmsi = 0;
	ioapic_init(io, capture, NULL);
}

START_TEST(test_version_and_reset_state)
{
	struct ioapic io;

	setup(&io);
	ioapic_mmio_write(&io, 0x00, 0x01);
	ck_assert_uint_eq(ioapic_mmio_read(&io, 0x10), 0x20 | (23 << 16));
	ck_assert(get_rte(&io, 4) & (1ULL << 16)); /* masked after reset */
	ck_assert_int_eq(ioapic_set_irq(&io, 4, true), 0);
	ck_assert_uint_eq(nmsi, 0);
	ck_assert_int_lt(ioapic_set_irq(&io, 24, true), 0);
	ck_assert_int_lt(ioapic_set_irq(&io, 1000, true), 0);
	ioapic_mmio_write(&io, 0x00, 0xff); /* unknown register reads as 0 */
	ck_assert_uint_eq(ioapic_mmio_read(&io, 0x10), 0);
}
END_TEST

START_TEST(test_edge_to_msi)
{
	struct ioapic io;

	setup(&io);
	set_rte(&io, 4, 0x31 | (3ULL << 56)); /* vector 0x31, fixed, physical, dest 3, edge */
	ck_assert(ioapic_set_irq(&io, 4, true) == 0);
	ck_assert_uint_eq(nmsi, 1);
	ck_assert_uint_eq(last_addr, 0xfee03000ULL);
	ck_assert_uint_eq(last_data, 0x31);
	ioapic_set_irq(&io, 4, true); /* no new edge */
	ck_assert_uint_eq(nmsi, 1);
	ioapic_set_irq(&io, 4, false);
	ioapic_set_irq(&io, 4, true);
	ck_assert_uint_eq(nmsi, 2);
}
END_TEST

START_TEST(test_level_remote_irr)
{
	struct ioapic io;

	setup(&io);
	set_rte(&io, 9, 0x41 | (1ULL << 15) | (1ULL << 11) | (1ULL << 56)); /* level, logical */
	ioapic_set_irq(&io, 9, true);
	ck_assert_uint_eq(nmsi, 1);
	ck_assert_uint_eq(last_addr, 0xfee01004ULL);
	ck_assert_uint_eq(last_data & 0xc0ff, 0xc041);
	ck_assert(get_rte(&io, 9) & (1ULL << 14)); /* Remote IRR set */
	ioapic_set_irq(&io, 9, true);
	ck_assert_uint_eq(nmsi, 1); /* gated until EOI */
	ioapic_eoi(&io, 0x41);
	ck_assert_uint_eq(nmsi, 2); /* still high: delivered again */
	ioapic_set_irq(&io, 9, false);
	ioapic_mmio_write(&io, 0x40, 0x41); /* EOI register */
	ck_assert_uint_eq(nmsi, 2);
	ck_assert(!(get_rte(&io, 9) & (1ULL << 14)));
	/* Remote IRR is read-only: a guest write cannot set it. */
	set_rte(&io, 9, 0x41 | (1ULL << 15) | (1ULL << 14));
	ck_assert(!(get_rte(&io, 9) & (1ULL << 14)));
}
END_TEST

START_TEST(test_mask)
{
	struct ioapic io;

	setup(&io);
	set_rte(&io, 2, 0x30 | (1ULL << 16));
	ioapic_set_irq(&io, 2, true);
	ck_assert_uint_eq(nmsi, 0);
	ioapic_set_irq(&io, 2, false);
	set_rte(&io, 2, 0x30);
	ioapic_set_irq(&io, 2, true);
	ck_assert_uint_eq(nmsi, 1);
}
END_TEST

/* A PCI function's INTx on pin 17 (level): the EOI is told to the source before the pin is
 * delivered again, so a source that lowers its line then (a passed-through function whose
 * line VFIO masked) is not delivered again; one that stays high is. */
static struct ioapic *eoi_io;
static unsigned neoi, eoi_pin, eoi_lower;

static void on_eoi(void *opaque, unsigned pin)
{
	(void)opaque;
	neoi++;
	eoi_pin = pin;
	if (eoi_lower)
		ck_assert_int_eq(ioapic_set_irq(eoi_io, pin, false), 0); /* without the lock */
}

START_TEST(test_level_eoi_source_first)
{
	struct ioapic io;

	setup(&io);
	eoi_io = &io;
	neoi = eoi_lower = 0;
	io.eoi = on_eoi;
	set_rte(&io, 17, 0x51 | (1ULL << 15) | (1ULL << 13)); /* level, active low */
	ioapic_set_irq(&io, 17, true);
	ck_assert_uint_eq(nmsi, 1);
	ioapic_eoi(&io, 0x52); /* another vector: nothing */
	ck_assert_uint_eq(neoi, 0);
	eoi_lower = 1;
	ioapic_eoi(&io, 0x51);
	ck_assert_uint_eq(neoi, 1);
	ck_assert_uint_eq(eoi_pin, 17);
	ck_assert_uint_eq(nmsi, 1); /* lowered by the source at the EOI */
	ioapic_eoi(&io, 0x51);	    /* no Remote IRR: not a second EOI */
	ck_assert_uint_eq(neoi, 1);
	eoi_lower = 0;
	ioapic_set_irq(&io, 17, true);
	ck_assert_uint_eq(nmsi, 2);
	ioapic_eoi(&io, 0x51);
	ck_assert_uint_eq(neoi, 2);
	ck_assert_uint_eq(nmsi, 3); /* still high */
}
END_TEST

/* KVM exits with an EOI only for vectors of level MSI routes on the pins: the route follows the
 * redirection entry, on while level triggered and unmasked. */
static unsigned nroute, route_pin;
static uint64_t route_addr;
static uint32_t route_data;
static bool route_on;

static void on_route(void *opaque, unsigned pin, uint64_t addr, uint32_t data, bool on)
{
	(void)opaque;
	nroute++;
	route_pin = pin;
	route_addr = addr;
	route_data = data;
	route_on = on;
}

START_TEST(test_level_routes)
{
	struct ioapic io;
	struct ioapic_state st;

	setup(&io);
	nroute = 0;
	io.route = on_route;
	set_rte(&io, 18, 0x61 | (1ULL << 15) | (2ULL << 56));
	ck_assert_uint_ge(nroute, 1);
	ck_assert_uint_eq(route_pin, 18);
	ck_assert(route_on);
	ck_assert_uint_eq(route_addr, 0xfee02000ULL);
	ck_assert_uint_eq(route_data & 0x80ff, 0x8061);	      /* level trigger, vector */
	set_rte(&io, 18, 0x61 | (1ULL << 15) | (1ULL << 16)); /* masked */
	ck_assert(!route_on);
	set_rte(&io, 18, 0x61); /* edge: KVM need not tell its EOI */
	ck_assert(!route_on);
	set_rte(&io, 18, 0x62 | (1ULL << 15));
	ck_assert(route_on);
	/* a restore sets every pin's route again */
	ioapic_save(&io, &st);
	nroute = 0;
	ck_assert_int_eq(ioapic_restore(&io, &st), 0);
	ck_assert_uint_eq(nroute, 24);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ioapic");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_version_and_reset_state);
	tcase_add_test(tc, test_edge_to_msi);
	tcase_add_test(tc, test_level_remote_irr);
	tcase_add_test(tc, test_mask);
	tcase_add_test(tc, test_level_eoi_source_first);
	tcase_add_test(tc, test_level_routes);
	suite_add_tcase(s, tc);
	return testutil_run_suite(s);
}
