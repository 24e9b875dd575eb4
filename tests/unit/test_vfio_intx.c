/* INTx of a passed-through function (devices/vfio/vfio_intx.c) over a fake VFIO function on a
 * real PCI bus without KVM: the pin offered only when the device and VFIO have one; with lvmm's
 * IOAPIC the trigger raises the pin, the guest's EOI lowers it and unmasks VFIO; with KVM's a
 * resample irqfd; INTx Disable reaches the device and gates the pin; MSI and MSI-X switch VFIO's
 * INTx off first and back on after; a failed start withdraws the pin. */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "layout.h"
#include "pci.h"
#include "testutil.h"
#include "vfio_fake.h"

static struct bus pio, mmio;
static struct pci_bus pb;
static struct fake_vfio fake;
static struct vfio_pci vp;
static bool plugged;
static int next_gsi;
static volatile bool line[24];
static int kvm_mode; /* the platform has a resample irqfd */
static struct {
	int gsi, efd, resample;
} irqfd;

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
	line[gsi] = level;
	return 0;
}

static int fake_intx_irqfd(void *o, unsigned gsi, int efd, int resample, bool assign)
{
	(void)o;
	if (!kvm_mode)
		return -EOPNOTSUPP;
	irqfd.gsi = assign ? (int)gsi : -1;
	irqfd.efd = assign ? efd : -1;
	irqfd.resample = assign ? resample : -1;
	return 0;
}

static void setup(void)
{
	struct pci_platform_ops ops = {.alloc_gsi = fake_alloc_gsi,
				       .set_msi_route = fake_route,
				       .irqfd = fake_irqfd,
				       .intx_line = fake_line,
				       .intx_irqfd = fake_intx_irqfd};
	char err[160];

	bus_init(&pio);
	bus_init(&mmio);
	next_gsi = 24;
	memset((void *)line, 0, sizeof(line));
	kvm_mode = 0;
	irqfd.gsi = irqfd.efd = irqfd.resample = -1;
	fake_vfio_init(&fake);
	plugged = false;
	ck_assert_int_eq(pci_bus_init(&pb, &ops, &pio, &mmio, err, sizeof(err)), 0);
}

static void teardown(void)
{
	if (plugged) {
		vfio_pci_exit(&vp);
		ck_assert_int_eq(vp.intx_trigger, -1);
		ck_assert_int_eq(fake.intx_fd, -1); /* VFIO's INTx off at exit */
		ck_assert_int_eq(irqfd.gsi, -1);    /* the irqfd gone */
	}
	pci_bus_exit(&pb);
}

/* Built, placed on slot 1 and realized as vfio_dev.c does. */
static void plug(bool start)
{
	char err[160];

	ck_assert_msg(vfio_pci_init(&vp, "dev0", &fake.info, &fake_vfio_ops, &fake, NULL, err,
				    sizeof(err)) == 0,
		      "%s", err);
	ck_assert_msg(pci_bus_add(&pb, &vp.pci, err, sizeof(err)) == 0, "%s", err);
	plugged = true;
	if (start)
		ck_assert_msg(vfio_pci_intx_start(&vp, err, sizeof(err)) == 0, "%s", err);
	vfio_pci_cfg_sync_command(&vp);
}

static uint32_t cfg_rd(unsigned reg)
{
	uint32_t v;

	pci_cfg_read(&pb, 0, vp.pci.devfn, reg, &v, 4);
	return v;
}

static void cfg_wr16(unsigned reg, uint16_t v)
{
	pci_cfg_write(&pb, 0, vp.pci.devfn, reg, &v, 2);
}

static uint16_t dev_cmd(void)
{
	return (uint16_t)(fake.cfg[PCI_COMMAND] | fake.cfg[PCI_COMMAND + 1] << 8);
}

/* The device fires: VFIO signals its trigger eventfd. */
static void fire(void)
{
	uint64_t one = 1;

	ck_assert_int_eq(write(fake.intx_fd, &one, sizeof(one)), sizeof(one));
}

/* The reader thread raises the pin (or not) within a second. */
static bool wait_line(unsigned gsi, bool level)
{
	for (int i = 0; i < 1000; i++) {
		if (line[gsi] == level)
			return true;
		poll(NULL, 0, 1);
	}
	return false;
}

static void offer_case(uint8_t pin, unsigned intx_count, uint8_t want)
{
	fake_vfio_init(&fake);
	fake.cfg[PCI_INTERRUPT_PIN] = pin;
	fake.info.irqs[0].count = intx_count;
	plug(true);
	ck_assert_uint_eq(cfg_rd(PCI_INTERRUPT_LINE) >> 8 & 0xff, want);
	ck_assert_int_eq(vp.intx_mode, want ? VFIO_INTX_USER : VFIO_INTX_NONE);
	if (!want) {
		ck_assert_uint_eq(fake.intx_sets, 0);
		ck_assert(dev_cmd() & PCI_COMMAND_INTX_DISABLE); /* nothing routed: kept off */
	}
	vfio_pci_exit(&vp);
	plugged = false;
	pci_bus_exit(&pb);
	setup();
}

/* The pin only when the device has one (A-D) and VFIO an INTx interrupt; Interrupt Line is
 * slot 1's route for pin A (17), for pin C 19. */
START_TEST(intx_offered)
{
	offer_case(1, 1, 1);
	offer_case(3, 1, 3);
	offer_case(0, 1, 0);
	offer_case(1, 0, 0);
	offer_case(7, 1, 0); /* not a pin */
	offer_case(0xff, 1, 0);
	plug(true);
	ck_assert_uint_eq(cfg_rd(PCI_INTERRUPT_LINE) & 0xffff, 0x0100 | 17);
	ck_assert_int_eq(fake.intx_fd, vp.intx_trigger);
	ck_assert(!(dev_cmd() & PCI_COMMAND_INTX_DISABLE)); /* the guest's now, clear */
}
END_TEST

/* lvmm's IOAPIC: trigger, pin high, the guest's EOI lowers it and unmasks VFIO; again. */
START_TEST(intx_user_trigger_eoi_unmask)
{
	plug(true);
	ck_assert_int_eq(vp.intx_mode, VFIO_INTX_USER);
	ck_assert(vp.intx_thread_up);
	ck_assert_uint_eq(fake.intx_sets, 1);
	for (unsigned round = 1; round <= 3; round++) {
		fire();
		ck_assert(wait_line(17, true));
		ck_assert(cfg_rd(PCI_COMMAND) >> 16 & PCI_STATUS_INTERRUPT);
		ck_assert_uint_eq(fake.intx_unmasks, round - 1);
		pci_bus_intx_eoi(&pb, 18); /* another pin's EOI: not ours */
		ck_assert(line[17]);
		pci_bus_intx_eoi(&pb, 17);
		ck_assert(!line[17]);
		ck_assert(!(cfg_rd(PCI_COMMAND) >> 16 & PCI_STATUS_INTERRUPT));
		ck_assert_uint_eq(fake.intx_unmasks, round);
		ck_assert_int_eq(fake.intx_unmask_fd, -1); /* unmask now */
	}
	ck_assert_uint_eq(vp.intx_fired, 3);
	ck_assert_uint_eq(vp.intx_eois, 3);
}
END_TEST

/* INTx Disable: written to the device (vfio-pci masks by it) and the pin gated off while set;
 * cleared, a still-pending interrupt raises the pin again. */
START_TEST(intx_disable_masks)
{
	plug(true);
	fire();
	ck_assert(wait_line(17, true));
	cfg_wr16(PCI_COMMAND, PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER | PCI_COMMAND_INTX_DISABLE);
	ck_assert(dev_cmd() & PCI_COMMAND_INTX_DISABLE);
	ck_assert(!line[17]);
	cfg_wr16(PCI_COMMAND, PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER);
	ck_assert(!(dev_cmd() & PCI_COMMAND_INTX_DISABLE));
	ck_assert(line[17]);
	pci_bus_intx_eoi(&pb, 17);
	ck_assert(!line[17]);
	ck_assert_uint_eq(fake.intx_unmasks, 1);
}
END_TEST

/* MSI-X on: VFIO's INTx goes off before MSI-X goes to VFIO (it takes one type at a time), the
 * pin drops, a stale trigger raises nothing; off: INTx is VFIO's again. MSI the same. */
START_TEST(intx_msix_msi_switch)
{
	uint16_t ctl;

	plug(true);
	fire();
	ck_assert(wait_line(17, true));
	ctl = (uint16_t)(cfg_rd(vp.pci.msix.cap) >> 16);
	cfg_wr16(vp.pci.msix.cap + PCI_MSIX_FLAGS, ctl | PCI_MSIX_FLAGS_ENABLE);
	ck_assert(vp.msix_on);
	ck_assert_int_eq(fake.intx_fd, -1);
	ck_assert_uint_lt(fake.intx_off_order, fake.msix_order);
	ck_assert(!line[17]);
	ck_assert(!(cfg_rd(PCI_COMMAND) >> 16 & PCI_STATUS_INTERRUPT));
	ck_assert_int_eq(write(vp.intx_trigger, &(uint64_t){1}, 8), 8); /* crossed the switch */
	poll(NULL, 0, 20);
	ck_assert(!line[17]);
	cfg_wr16(vp.pci.msix.cap + PCI_MSIX_FLAGS, ctl);
	ck_assert(!vp.msix_on);
	ck_assert_int_eq(fake.intx_fd, vp.intx_trigger);
	fire();
	ck_assert(wait_line(17, true));
	pci_bus_intx_eoi(&pb, 17);
	ck_assert(!line[17]);
	/* MSI: the same */
	cfg_wr16(FAKE_MSI_CAP + PCI_MSI_FLAGS, PCI_MSI_FLAGS_ENABLE);
	ck_assert_uint_eq(vp.msi_on, 1);
	ck_assert_int_eq(fake.intx_fd, -1);
	cfg_wr16(FAKE_MSI_CAP + PCI_MSI_FLAGS, 0);
	ck_assert_uint_eq(vp.msi_on, 0);
	ck_assert_int_eq(fake.intx_fd, vp.intx_trigger);
}
END_TEST

/* KVM's IOAPIC: the trigger is a KVM irqfd on GSI 17 whose resample eventfd unmasks VFIO; no
 * thread, no EOI work in lvmm; the unmask eventfd given again when INTx comes back. */
START_TEST(intx_kvm_resample)
{
	kvm_mode = 1;
	plug(true);
	ck_assert_int_eq(vp.intx_mode, VFIO_INTX_KVM);
	ck_assert(!vp.intx_thread_up);
	ck_assert_int_eq(irqfd.gsi, 17);
	ck_assert_int_eq(irqfd.efd, vp.intx_trigger);
	ck_assert_int_eq(irqfd.resample, vp.intx_unmask);
	ck_assert_int_eq(fake.intx_fd, vp.intx_trigger);
	ck_assert_uint_eq(fake.intx_unmasks, 1);
	ck_assert_int_eq(fake.intx_unmask_fd, vp.intx_unmask);
	pci_bus_intx_eoi(&pb, 17); /* not told with KVM's IOAPIC; harmless if it were */
	ck_assert_uint_eq(fake.intx_unmasks, 1);
	cfg_wr16(FAKE_MSI_CAP + PCI_MSI_FLAGS, PCI_MSI_FLAGS_ENABLE);
	ck_assert_int_eq(fake.intx_fd, -1);
	cfg_wr16(FAKE_MSI_CAP + PCI_MSI_FLAGS, 0);
	ck_assert_int_eq(fake.intx_fd, vp.intx_trigger);
	ck_assert_uint_eq(fake.intx_unmasks, 2);
	ck_assert_int_eq(fake.intx_unmask_fd, vp.intx_unmask);
}
END_TEST

/* VFIO refusing the trigger withdraws the pin: the guest sees none and INTx stays off. */
START_TEST(intx_start_fails)
{
	char err[160];

	plug(false);
	ck_assert_uint_eq(cfg_rd(PCI_INTERRUPT_LINE) >> 8 & 0xff, 1);
	fake.info.irqs[0].count = 1;
	kvm_mode = 1;
	fake.fail_irq = -EINVAL;
	ck_assert_int_eq(vfio_pci_intx_start(&vp, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "dev0"));
	fake.fail_irq = 0;
	ck_assert_uint_eq(cfg_rd(PCI_INTERRUPT_LINE) >> 8 & 0xff, 0);
	ck_assert_int_eq(vp.intx_mode, VFIO_INTX_NONE);
	ck_assert_int_eq(irqfd.gsi, -1);
	vfio_pci_cfg_sync_command(&vp);
	ck_assert(dev_cmd() & PCI_COMMAND_INTX_DISABLE);
	cfg_wr16(PCI_COMMAND, PCI_COMMAND_MEMORY);
	ck_assert(dev_cmd() & PCI_COMMAND_INTX_DISABLE);
	ck_assert_int_eq(vfio_pci_intx_start(&vp, err, sizeof(err)), 0); /* no pin: nothing */
}
END_TEST

static Suite *vfio_intx_suite(void)
{
	Suite *s = suite_create("vfio_intx");
	TCase *t = tcase_create("intx");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, intx_offered);
	tcase_add_test(t, intx_user_trigger_eoi_unmask);
	tcase_add_test(t, intx_disable_masks);
	tcase_add_test(t, intx_msix_msi_switch);
	tcase_add_test(t, intx_kvm_resample);
	tcase_add_test(t, intx_start_fails);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return testutil_run_suite(vfio_intx_suite());
}
