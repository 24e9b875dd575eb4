/* Device state for snapshots without KVM: a virtio-rng on a PCI bus with fake platform ops is
 * set up by its driver through config space, MSI-X and BAR 0, saved, and restored into a second
 * one; the second reads back as the first, answers a request on the restored queue where the
 * first left off, and refuses state that does not fit it. COM1, the IOAPIC and the legacy ports
 * round-trip as well. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus.h"
#include "device.h"
#include "guest_mem.h"
#include "ioapic.h"
#include "legacy.h"
#include "pci.h"
#include "serial.h"
#include "testutil.h"
#include "virtio/virtio_pci.h"
#include "virtio/virtio_rng.h"

#define DESC  0x1000
#define AVAIL 0x2000
#define USED  0x3000
#define BUF   0x4000

struct rig {
	struct bus pio, mmio;
	struct pci_bus pb;
	struct virtio_rng *rng;
	struct virtio_pci *vp;
	struct guest_mem gm;
	uint8_t *ram;
	int next_gsi;
	unsigned routes, irqfds;
};

static int fake_gsi(void *o)
{
	struct rig *r = o;

	return r->next_gsi++;
}

static int fake_route(void *o, unsigned gsi, uint64_t addr, uint32_t data, bool masked)
{
	struct rig *r = o;

	r->routes++;
	return 0;
}

static int fake_irqfd(void *o, unsigned gsi, int efd, bool assign)
{
	struct rig *r = o;

	r->irqfds += assign;
	return 0;
}

static void rig_up(struct rig *r)
{
	struct pci_platform_ops ops = {.opaque = r,
				       .alloc_gsi = fake_gsi,
				       .set_msi_route = fake_route,
				       .irqfd = fake_irqfd,
				       .remap_inline = true};
	char err[256];

	memset(r, 0, sizeof(*r));
	r->next_gsi = 24;
	r->ram = calloc(1, 1 << 16);
	ck_assert_ptr_nonnull(r->ram);
	gmem_init_buffer(&r->gm, r->ram, 1 << 16);
	bus_init(&r->pio);
	bus_init(&r->mmio);
	ck_assert_int_eq(pci_bus_init(&r->pb, &ops, &r->pio, &r->mmio, err, sizeof(err)), 0);
	ck_assert_int_eq(
	    virtio_rng_create(&r->rng, "rng0", "/dev/urandom", &r->gm, err, sizeof(err)), 0);
	ck_assert_int_eq(pci_bus_add(&r->pb, virtio_rng_pci(r->rng), err, sizeof(err)), 0);
	r->vp = virtio_rng_pci(r->rng)->priv;
}

static void rig_down(struct rig *r)
{
	virtio_rng_destroy(r->rng);
	pci_bus_exit(&r->pb);
	free(r->ram);
}

static void cfg_w(struct rig *r, unsigned reg, uint32_t v, unsigned len)
{
	pci_cfg_write(&r->pb, 0, virtio_rng_pci(r->rng)->devfn, reg, &v, len);
}

static uint32_t cfg_r(struct rig *r, unsigned reg, unsigned len)
{
	uint32_t v = 0;

	pci_cfg_read(&r->pb, 0, virtio_rng_pci(r->rng)->devfn, reg, &v, len);
	return v;
}

static void bar_w(struct rig *r, uint64_t off, uint64_t v, unsigned len)
{
	virtio_pci_bar_write(r->vp, off, &v, len);
}

static uint64_t bar_r(struct rig *r, uint64_t off, unsigned len)
{
	uint64_t v = 0;

	virtio_pci_bar_read(r->vp, off, &v, len);
	return v;
}

/* One 16-byte writable buffer offered at avail index n (head descriptor n % 4). */
static void offer(struct rig *r, uint16_t n)
{
	uint16_t d = n % 4, idx = (uint16_t)(n + 1);
	uint64_t addr = BUF + 16ULL * d;
	uint32_t len = 16;
	uint16_t flags = 2 /* WRITE */;

	memcpy(r->ram + DESC + 16 * d, &addr, 8);
	memcpy(r->ram + DESC + 16 * d + 8, &len, 4);
	memcpy(r->ram + DESC + 16 * d + 12, &flags, 2);
	memcpy(r->ram + AVAIL + 4 + 2 * (n % 8), &d, 2);
	memcpy(r->ram + AVAIL + 2, &idx, 2);
}

static uint16_t used_idx(struct rig *r)
{
	uint16_t v;

	memcpy(&v, r->ram + USED + 2, 2);
	return v;
}

/* The driver's side of bring-up: MSI-X on with vector 1 unmasked, features, queue 0 of 8 at
 * DESC/AVAIL/USED, DRIVER_OK; two requests served. */
static void drive(struct rig *r)
{
	unsigned cap = virtio_rng_pci(r->rng)->msix.cap;

	cfg_w(r, cap + 2, 0x8000, 2); /* MSI-X enable */
	/* table entry 1 in BAR 2: address, data, unmasked (through the BAR's MMIO handler) */
	{
		struct pci_dev *d = virtio_rng_pci(r->rng);
		uint32_t e[4] = {0xfee00000u, 0, 0x4041, 0};

		d->bar[VIRTIO_PCI_MSIX_BAR].ops->write(d->bar[VIRTIO_PCI_MSIX_BAR].opaque, 16, e,
						       4);
		d->bar[VIRTIO_PCI_MSIX_BAR].ops->write(d->bar[VIRTIO_PCI_MSIX_BAR].opaque, 24,
						       &e[2], 4);
		d->bar[VIRTIO_PCI_MSIX_BAR].ops->write(d->bar[VIRTIO_PCI_MSIX_BAR].opaque, 28,
						       &e[3], 4);
	}
	bar_w(r, VIRTIO_PCI_STATUS, 1 | 2, 1);
	bar_w(r, VIRTIO_PCI_GFSELECT, 1, 4);
	bar_w(r, VIRTIO_PCI_GF, 1, 4); /* VERSION_1 */
	bar_w(r, VIRTIO_PCI_STATUS, 1 | 2 | 8, 1);
	bar_w(r, VIRTIO_PCI_Q_SELECT, 0, 2);
	bar_w(r, VIRTIO_PCI_Q_SIZE, 8, 2);
	bar_w(r, VIRTIO_PCI_Q_MSIX, 1, 2);
	bar_w(r, VIRTIO_PCI_Q_DESC, DESC, 8);
	bar_w(r, VIRTIO_PCI_Q_DRIVER, AVAIL, 8);
	bar_w(r, VIRTIO_PCI_Q_DEVICE, USED, 8);
	bar_w(r, VIRTIO_PCI_Q_ENABLE, 1, 2);
	bar_w(r, VIRTIO_PCI_STATUS, 1 | 2 | 8 | 4, 1);
	for (uint16_t n = 0; n < 2; n++) {
		offer(r, n);
		bar_w(r, VIRTIO_PCI_NOTIFY_OFF, 0, 2);
	}
	ck_assert_uint_eq(used_idx(r), 2);
}

static void *save(struct rig *r, uint64_t *len)
{
	char err[256];
	void *buf;

	ck_assert_int_eq(virtio_rng_model.save(r->rng, NULL, len, err, sizeof(err)), 0);
	buf = malloc(*len);
	ck_assert_int_eq(virtio_rng_model.save(r->rng, buf, len, err, sizeof(err)), 0);
	return buf;
}

START_TEST(test_rng_round_trip)
{
	struct rig a, b;
	uint64_t len;
	uint8_t *st;
	char err[256];

	rig_up(&a);
	drive(&a);
	st = save(&a, &len);
	ck_assert_uint_eq(len, virtio_pci_state_size(a.vp));

	rig_up(&b);
	memcpy(b.ram, a.ram, 1 << 16); /* the snapshot's RAM */
	ck_assert_int_eq(virtio_rng_model.restore(b.rng, st, len, err, sizeof(err)), 0);
	/* config space, transport and queue registers read as the first device's */
	for (unsigned reg = 0; reg < 0x40; reg += 4)
		ck_assert_uint_eq(cfg_r(&b, reg, 4), cfg_r(&a, reg, 4));
	ck_assert_uint_eq(cfg_r(&b, virtio_rng_pci(b.rng)->msix.cap + 2, 2),
			  cfg_r(&a, virtio_rng_pci(a.rng)->msix.cap + 2, 2));
	ck_assert_uint_eq(bar_r(&b, VIRTIO_PCI_STATUS, 1), 15);
	bar_w(&b, VIRTIO_PCI_GFSELECT, 1, 4);
	ck_assert_uint_eq(bar_r(&b, VIRTIO_PCI_GF, 4), 1);
	bar_w(&b, VIRTIO_PCI_Q_SELECT, 0, 2);
	ck_assert_uint_eq(bar_r(&b, VIRTIO_PCI_Q_SIZE, 2), 8);
	ck_assert_uint_eq(bar_r(&b, VIRTIO_PCI_Q_MSIX, 2), 1);
	ck_assert_uint_eq(bar_r(&b, VIRTIO_PCI_Q_ENABLE, 2), 1);
	ck_assert_uint_eq(bar_r(&b, VIRTIO_PCI_Q_DESC, 8), DESC);
	ck_assert_uint_eq(bar_r(&b, VIRTIO_PCI_Q_DEVICE, 8), USED);
	/* MSI-X vector 1 is routed and live again; its table entry came across */
	ck_assert_uint_gt(b.routes, 0);
	ck_assert_uint_gt(b.irqfds, 0);
	ck_assert_uint_eq(virtio_rng_pci(b.rng)->msix.table[1].data, 0x4041);
	ck_assert(virtio_rng_pci(b.rng)->msix.enabled);
	/* the next request is the only one served (the restored queue took up at avail entry 2,
	 * not 0) and lands at used index 2 */
	ck_assert_uint_eq(virtio_rng_bytes(b.rng), 0);
	offer(&b, 2);
	bar_w(&b, VIRTIO_PCI_NOTIFY_OFF, 0, 2);
	ck_assert_uint_eq(virtio_rng_bytes(b.rng), 16);
	ck_assert_uint_eq(used_idx(&b), 3);
	{
		uint32_t id;

		memcpy(&id, b.ram + USED + 4 + 8 * 2, 4);
		ck_assert_uint_eq(id, 2); /* used ring entry 2 names descriptor 2 */
	}
	free(st);
	rig_down(&a);
	rig_down(&b);
}
END_TEST

START_TEST(test_rng_refusals)
{
	struct rig a, b;
	uint64_t len;
	uint8_t *st, *bad;
	char err[256];

	rig_up(&a);
	drive(&a);
	st = save(&a, &len);
	rig_up(&b);
	memcpy(b.ram, a.ram, 1 << 16);
	bad = malloc(len);

	ck_assert_int_eq(virtio_rng_model.restore(b.rng, st, len - 1, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "bytes, expected"));
	/* another queue count */
	memcpy(bad, st, len);
	bad[4] = 2;
	ck_assert_int_eq(virtio_rng_model.restore(b.rng, bad, len, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "does not fit"));
	/* accepted features beyond the offered ones */
	memcpy(bad, st, len);
	bad[16 + 7] = 0x80;
	ck_assert_int_eq(virtio_rng_model.restore(b.rng, bad, len, err, sizeof(err)), -EINVAL);
	/* a queue size over the maximum */
	memcpy(bad, st, len);
	{
		uint16_t big = 4096;

		memcpy(bad + 40, &big, 2); /* q[0].size */
	}
	ck_assert_int_eq(virtio_rng_model.restore(b.rng, bad, len, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "queue 0"));
	/* rings outside guest RAM */
	memcpy(bad, st, len);
	{
		uint64_t far = 1ULL << 40;

		memcpy(bad + 56, &far, 8); /* q[0].desc */
	}
	ck_assert_int_eq(virtio_rng_model.restore(b.rng, bad, len, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "outside guest RAM"));
	/* another PCI function's config */
	memcpy(bad, st, len);
	bad[virtio_pci_state_size(a.vp) - pci_dev_state_size(virtio_rng_pci(a.rng)) + 8 + 2] ^= 1;
	ck_assert_int_eq(virtio_rng_model.restore(b.rng, bad, len, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "is not this function's"));
	/* after all that, the good state still restores */
	ck_assert_int_eq(virtio_rng_model.restore(b.rng, st, len, err, sizeof(err)), 0);
	free(bad);
	free(st);
	rig_down(&a);
	rig_down(&b);
}
END_TEST

static void no_irq(void *o, bool level)
{
	(void)o;
	(void)level;
}

START_TEST(test_platform_round_trip)
{
	struct serial s1, s2;
	struct serial_state ss;
	struct ioapic i1, i2;
	struct ioapic_state is;
	struct legacy l1, l2;
	struct legacy_state ls;

	memset(&s1, 0, sizeof(s1));
	memset(&s2, 0, sizeof(s2));
	serial_init(&s1, -1, no_irq, NULL);
	serial_init(&s2, -1, no_irq, NULL);
	serial_write(&s1, 3, 0x83); /* DLAB */
	serial_write(&s1, 0, 0x01);
	serial_write(&s1, 3, 0x03);
	serial_write(&s1, 7, 0x5a);
	ck_assert_uint_eq(serial_receive(&s1, (const uint8_t *)"ab", 2), 2);
	serial_save(&s1, &ss);
	ck_assert_int_eq(serial_restore(&s2, &ss), 0);
	ck_assert_uint_eq(serial_read(&s2, 3), 0x03);
	ck_assert_uint_eq(serial_read(&s2, 7), 0x5a);
	ck_assert_uint_eq(serial_read(&s2, 0), 'a');
	ck_assert_uint_eq(serial_read(&s2, 0), 'b');
	ss.rx_count = SERIAL_RX_FIFO + 1;
	ck_assert_int_eq(serial_restore(&s2, &ss), -EINVAL);

	ioapic_init(&i1, NULL, NULL);
	ioapic_init(&i2, NULL, NULL);
	ioapic_mmio_write(&i1, 0x00, 0x10 + 2 * 4);
	ioapic_mmio_write(&i1, 0x10, 0x10031); /* masked, vector 0x31 */
	ioapic_save(&i1, &is);
	ck_assert_int_eq(ioapic_restore(&i2, &is), 0);
	ioapic_mmio_write(&i2, 0x00, 0x10 + 2 * 4);
	ck_assert_uint_eq(ioapic_mmio_read(&i2, 0x10), 0x10031);
	is.level[3] = 2;
	ck_assert_int_eq(ioapic_restore(&i2, &is), -EINVAL);

	legacy_init(&l1, NULL, NULL, NULL);
	legacy_init(&l2, NULL, NULL, NULL);
	l1.cmos[0x40] = 0x77;
	l1.pm1_en = 0x100;
	legacy_save(&l1, &ls);
	ls.pm1_cnt |= 1u << 13; /* asleep: never restored so */
	ls.cmos[0] = 0x99;	/* a clock byte: the host's */
	legacy_restore(&l2, &ls);
	ck_assert_uint_eq(l2.cmos[0x40], 0x77);
	ck_assert_uint_eq(l2.pm1_en, 0x100);
	ck_assert(!(l2.pm1_cnt & (1u << 13)));
	ck_assert(l2.pm1_cnt & 1);
	ck_assert_uint_ne(l2.cmos[0], 0x99);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("virtio_snapshot");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_rng_round_trip);
	tcase_add_test(tc, test_rng_refusals);
	tcase_add_test(tc, test_platform_round_trip);
	suite_add_tcase(s, tc);
	return testutil_run_suite(s);
}
