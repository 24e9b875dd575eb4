/* PCI INTx on the platform (vmm/pci_intx.c) without KVM: a function's pin reaches the IOAPIC
 * input its slot swizzles to, functions sharing an input are ORed, and INTx Disable, MSI-X
 * and a reset gate the line; the guest's EOI reaches the functions on the input. */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "layout.h"
#include "pci.h"
#include "testutil.h"

static struct bus pio, mmio;
static struct pci_bus pb;
static struct pci_dev a, b;
static int next_gsi;
static bool line[24];
static unsigned nline[24];
static unsigned neoi_a, neoi_b, ngate, nmode;
static bool gate_open, pin_based;

static int fake_alloc_gsi(void *o)
{
	(void)o;
	return next_gsi < 64 ? next_gsi++ : -ENOSPC;
}

static int fake_route(void *o, unsigned gsi, uint64_t addr, uint32_t data, bool masked)
{
	(void)o, (void)gsi, (void)addr, (void)data, (void)masked;
	return 0;
}

static int fake_irqfd(void *o, unsigned gsi, int efd, bool assign)
{
	(void)o, (void)gsi, (void)efd, (void)assign;
	return 0;
}

static int fake_line(void *o, unsigned gsi, bool level)
{
	(void)o;
	ck_assert_uint_lt(gsi, 24);
	ck_assert_msg(line[gsi] != level, "input %u set to its own level", gsi);
	line[gsi] = level;
	nline[gsi]++;
	return 0;
}

static void eoi_a(struct pci_dev *d)
{
	neoi_a++;
	pci_intx_set(d, false); /* the device's handler ran: it lowers its line */
}

static void eoi_b(struct pci_dev *d)
{
	(void)d;
	neoi_b++;
}

static void gate(struct pci_dev *d, bool open)
{
	(void)d;
	ngate++;
	gate_open = open;
}

static void mode(struct pci_dev *d, bool on)
{
	(void)d;
	nmode++;
	pin_based = on;
}

static void setup(void)
{
	struct pci_platform_ops ops = {.alloc_gsi = fake_alloc_gsi,
				       .set_msi_route = fake_route,
				       .irqfd = fake_irqfd,
				       .intx_line = fake_line};
	char err[128];

	bus_init(&pio);
	bus_init(&mmio);
	next_gsi = 24;
	memset(line, 0, sizeof(line));
	memset(nline, 0, sizeof(nline));
	neoi_a = neoi_b = ngate = nmode = 0;
	pin_based = false;
	ck_assert_int_eq(pci_bus_init(&pb, &ops, &pio, &mmio, err, sizeof(err)), 0);
	pci_dev_init(&a, "a", 0x1b36, 0x0110, 0x010802, 0x1b36, 0x0110);
	ck_assert_int_eq(pci_dev_add_msix(&a, 2, 4, err, sizeof(err)), 0);
	pci_dev_set_intx_pin(&a, 1);
	a.intx_eoi = eoi_a;
	a.intx_gate = gate;
	ck_assert_int_eq(pci_bus_add(&pb, &a, err, sizeof(err)), 0); /* slot 1 */
}

static void teardown(void)
{
	pci_dev_exit(&a);
	pci_bus_exit(&pb);
}

static uint32_t cfg_rd(unsigned slot, unsigned reg)
{
	uint32_t v;

	pci_cfg_read(&pb, 0, slot << 3, reg, &v, 4);
	return v;
}

static void cfg_wr16(unsigned slot, unsigned reg, uint16_t v)
{
	pci_cfg_write(&pb, 0, slot << 3, reg, &v, 2);
}

/* Slot 1's pin A is input 17; Interrupt Line says so, Interrupt Pin is read-only. */
START_TEST(intx_route_and_registers)
{
	uint8_t v = 3;

	ck_assert_uint_eq(a.devfn, 1 << 3);
	ck_assert_uint_eq(a.intx_gsi, LAYOUT_PCI_INTX_ROUTE(1, 1));
	ck_assert_uint_eq(a.intx_gsi, 17);
	ck_assert_uint_eq(cfg_rd(1, PCI_INTERRUPT_LINE) & 0xffff, 0x0100 | 17);
	pci_cfg_write(&pb, 0, 1 << 3, PCI_INTERRUPT_PIN, &v, 1);
	ck_assert_uint_eq(cfg_rd(1, PCI_INTERRUPT_LINE) >> 8 & 0xff, 1);
	v = 0x42; /* the line register is the guest's scratch */
	pci_cfg_write(&pb, 0, 1 << 3, PCI_INTERRUPT_LINE, &v, 1);
	ck_assert_uint_eq(cfg_rd(1, PCI_INTERRUPT_LINE) & 0xff, 0x42);
	ck_assert_uint_eq(a.intx_gsi, 17);
	ck_assert(gate_open);
}
END_TEST

/* Assert raises the input and the Interrupt Status bit; deassert lowers both. */
START_TEST(intx_assert_deassert)
{
	pci_intx_set(&a, true);
	ck_assert(line[17]);
	ck_assert(pci_intx_high(&a));
	ck_assert(cfg_rd(1, PCI_COMMAND) >> 16 & PCI_STATUS_INTERRUPT);
	pci_intx_set(&a, true); /* no second edge */
	ck_assert_uint_eq(nline[17], 1);
	pci_intx_set(&a, false);
	ck_assert(!line[17]);
	ck_assert(!(cfg_rd(1, PCI_COMMAND) >> 16 & PCI_STATUS_INTERRUPT));
}
END_TEST

/* INTx Disable lowers the line of an asserted function and keeps it low; the status bit still
 * shows the function's interrupt; clearing the bit raises it again. */
START_TEST(intx_disable_bit)
{
	pci_intx_set(&a, true);
	cfg_wr16(1, PCI_COMMAND, PCI_COMMAND_MEMORY | PCI_COMMAND_INTX_DISABLE);
	ck_assert(!line[17]);
	ck_assert(!gate_open);
	ck_assert(cfg_rd(1, PCI_COMMAND) >> 16 & PCI_STATUS_INTERRUPT);
	pci_intx_set(&a, false);
	pci_intx_set(&a, true);
	ck_assert(!line[17]);
	cfg_wr16(1, PCI_COMMAND, PCI_COMMAND_MEMORY);
	ck_assert(line[17]);
	ck_assert(gate_open);
}
END_TEST

/* MSI-X on switches INTx off (the PCI rule), off again gives the line back. */
START_TEST(intx_off_under_msix)
{
	uint8_t cap = a.msix.cap;
	uint16_t ctl = (uint16_t)(cfg_rd(1, cap) >> 16);

	pci_intx_set(&a, true);
	ck_assert(line[17]);
	cfg_wr16(1, cap + PCI_MSIX_FLAGS, ctl | PCI_MSIX_FLAGS_ENABLE);
	ck_assert(a.msix.enabled);
	ck_assert(!line[17]);
	ck_assert(!gate_open);
	cfg_wr16(1, cap + PCI_MSIX_FLAGS, ctl);
	ck_assert(line[17]);
	ck_assert(gate_open);
}
END_TEST

/* The pin-based mode (a vNVMe works out its INTx condition only in it) follows MSI and MSI-X,
 * not INTx Disable: a function that asserts while the bit is set shows Interrupt Status (what
 * vfio-pci's unmask looks at), and its line rises when the bit clears, with no new event. */
START_TEST(intx_mode_not_disable)
{
	uint8_t cap = a.msix.cap;
	uint16_t ctl = (uint16_t)(cfg_rd(1, cap) >> 16);

	a.intx_mode = mode;
	cfg_wr16(1, PCI_COMMAND, PCI_COMMAND_MEMORY);
	ck_assert_uint_ge(nmode, 1);
	ck_assert(pin_based);
	cfg_wr16(1, PCI_COMMAND, PCI_COMMAND_MEMORY | PCI_COMMAND_INTX_DISABLE);
	ck_assert(!gate_open);
	ck_assert(pin_based);
	pci_intx_set(&a, true); /* a completion while masked */
	ck_assert(!line[17]);
	ck_assert(cfg_rd(1, PCI_COMMAND) >> 16 & PCI_STATUS_INTERRUPT);
	cfg_wr16(1, PCI_COMMAND, PCI_COMMAND_MEMORY); /* the unmask */
	ck_assert(line[17]);
	ck_assert(pin_based);
	cfg_wr16(1, cap + PCI_MSIX_FLAGS, ctl | PCI_MSIX_FLAGS_ENABLE);
	ck_assert(!pin_based);
	ck_assert(!line[17]);
	cfg_wr16(1, cap + PCI_MSIX_FLAGS, ctl);
	ck_assert(pin_based);
	/* guest writes that change nothing still leave it in step, and bounded */
	for (unsigned i = 0; i < 1000; i++)
		cfg_wr16(1, PCI_COMMAND, (uint16_t)(i & 1 ? PCI_COMMAND_INTX_DISABLE : 0));
	ck_assert(pin_based);
	ck_assert(!line[17]);
	cfg_wr16(1, PCI_COMMAND, PCI_COMMAND_MEMORY);
	ck_assert(line[17]);
	pci_intx_set(&a, false);
	ck_assert(!line[17]);
	ck_assert(!(cfg_rd(1, PCI_COMMAND) >> 16 & PCI_STATUS_INTERRUPT));
}
END_TEST

/* Two functions on one input (slots 1 and 5, pin A): the input stays high until both lower;
 * the EOI reaches both, and only them. */
START_TEST(intx_shared_input)
{
	struct pci_dev c, fill[3];
	char err[128];

	pci_dev_init(&b, "b", 0x1b36, 0x0110, 0x010802, 0x1b36, 0x0110);
	pci_dev_set_intx_pin(&b, 1);
	b.intx_eoi = eoi_b;
	for (unsigned i = 0; i < 3; i++) {
		pci_dev_init(&c, "c", 0x1b36, 0x0110, 0x010802, 0x1b36, 0x0110);
		pci_dev_set_intx_pin(&c, 9); /* not a pin: none */
		ck_assert_int_eq(pci_bus_add(&pb, &c, err, sizeof(err)), 0);
		ck_assert_uint_eq(c.intx_gsi, 0);
		ck_assert_uint_eq(cfg_rd(c.devfn >> 3, PCI_INTERRUPT_LINE) >> 8 & 0xff, 0);
		pci_intx_set(&c, true); /* no input: nothing happens */
		pci_dev_exit(&c);
	}
	/* slots 2-4 are free again; fill them so that b lands on slot 5 */
	for (unsigned i = 0; i < 3; i++) {
		pci_dev_init(&fill[i], "f", 0x1b36, 0x0110, 0x010802, 0x1b36, 0x0110);
		ck_assert_int_eq(pci_bus_add(&pb, &fill[i], err, sizeof(err)), 0);
	}
	ck_assert_int_eq(pci_bus_add(&pb, &b, err, sizeof(err)), 0);
	ck_assert_uint_eq(b.devfn >> 3, 5);
	ck_assert_uint_eq(b.intx_gsi, 17);
	pci_intx_set(&a, true);
	pci_intx_set(&b, true);
	ck_assert_uint_eq(nline[17], 1);
	pci_intx_set(&a, false);
	ck_assert(line[17]);
	pci_bus_intx_eoi(&pb, 18); /* another input: nobody */
	ck_assert_uint_eq(neoi_a + neoi_b, 0);
	pci_intx_set(&a, true);
	pci_bus_intx_eoi(&pb, 17);
	ck_assert_uint_eq(neoi_a, 1);
	ck_assert_uint_eq(neoi_b, 1);
	ck_assert(line[17]); /* b still asserts */
	pci_dev_exit(&b);    /* a departing function lets go of the line */
	ck_assert(!line[17]);
	for (unsigned i = 0; i < 3; i++)
		pci_dev_exit(&fill[i]);
	pci_intx_set(&a, true);
	ck_assert(line[17]);
}
END_TEST

/* A function without a pin never touches an input nor shows an interrupt. */
START_TEST(intx_no_pin)
{
	struct pci_dev c;
	char err[128];

	pci_dev_init(&c, "c", 0x1b36, 0x0110, 0x010802, 0x1b36, 0x0110);
	ck_assert_int_eq(pci_bus_add(&pb, &c, err, sizeof(err)), 0);
	ck_assert_uint_eq(cfg_rd(2, PCI_INTERRUPT_LINE) & 0xffff, 0);
	pci_intx_set(&c, true);
	for (unsigned i = 0; i < 24; i++)
		ck_assert_uint_eq(nline[i], 0);
	ck_assert(!(cfg_rd(2, PCI_COMMAND) >> 16 & PCI_STATUS_INTERRUPT));
	pci_dev_exit(&c);
}
END_TEST

static Suite *intx_suite(void)
{
	Suite *s = suite_create("pci_intx");
	TCase *t = tcase_create("intx");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, intx_route_and_registers);
	tcase_add_test(t, intx_assert_deassert);
	tcase_add_test(t, intx_disable_bit);
	tcase_add_test(t, intx_off_under_msix);
	tcase_add_test(t, intx_mode_not_disable);
	tcase_add_test(t, intx_shared_input);
	tcase_add_test(t, intx_no_pin);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return testutil_run_suite(intx_suite());
}
