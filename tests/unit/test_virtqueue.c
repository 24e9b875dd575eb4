/* Split virtqueue walking against a hostile driver (loops, indices past the ring, buffers outside
 * RAM, lengths that overflow, bad indirect tables), the event index, and the virtio-pci
 * transport with virtio-rng driven through BAR 0 as a guest driver would. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "guest_mem.h"
#include "testutil.h"
#include "virtio/virtio_pci.h"
#include "virtio/virtio_rng.h"
#include "virtio/virtqueue.h"

#define RAM_SIZE  (1u << 20)
#define DESC_GPA  0x1000
#define AVAIL_GPA 0x2000
#define USED_GPA  0x3000
#define BUF_GPA	  0x10000
#define QSIZE	  16

static uint8_t *ram;
static struct guest_mem gm;
static struct virtq q;
static struct virtq_chain chain;
static uint16_t avail_idx;
static char err[256];

static void setup(void)
{
	ram = calloc(1, RAM_SIZE);
	ck_assert_ptr_nonnull(ram);
	gmem_init_buffer(&gm, ram, RAM_SIZE);
	avail_idx = 0;
	err[0] = 0;
	ck_assert_int_eq(virtq_start(&q, &gm, QSIZE, DESC_GPA, AVAIL_GPA, USED_GPA, true, true, err,
				     sizeof(err)),
			 0);
}

static void teardown(void)
{
	free(ram);
}

static void set_desc(uint64_t table, unsigned i, uint64_t addr, uint32_t len, uint16_t flags,
		     uint16_t next)
{
	struct virtq_desc d = {addr, len, flags, next};

	memcpy(ram + table + 16 * i, &d, sizeof(d));
}

static void put16(uint64_t gpa, uint16_t v)
{
	memcpy(ram + gpa, &v, 2);
}

static uint16_t get16(uint64_t gpa)
{
	uint16_t v;

	memcpy(&v, ram + gpa, 2);
	return v;
}

static uint32_t get32(uint64_t gpa)
{
	uint32_t v;

	memcpy(&v, ram + gpa, 4);
	return v;
}

/* The driver offers descriptor head. */
static void offer(uint16_t head)
{
	put16(AVAIL_GPA + 4 + 2 * (avail_idx % QSIZE), head);
	avail_idx++;
	put16(AVAIL_GPA + 2, avail_idx);
}

static void expect_refused(const char *needle)
{
	ck_assert_int_eq(virtq_pop(&q, &chain, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, needle) != NULL, "error '%s' does not say '%s'", err, needle);
	/* a broken ring is left alone until the driver resets the device */
	ck_assert(q.broken);
	ck_assert_int_eq(virtq_pop(&q, &chain, err, sizeof(err)), 0);
	ck_assert(!virtq_has_avail(&q));
}

START_TEST(test_empty_and_simple_chain)
{
	ck_assert_int_eq(virtq_pop(&q, &chain, err, sizeof(err)), 0);
	set_desc(DESC_GPA, 0, BUF_GPA, 100, VIRTQ_DESC_F_NEXT, 5);
	set_desc(DESC_GPA, 5, BUF_GPA + 0x1000, 200, VIRTQ_DESC_F_NEXT | VIRTQ_DESC_F_WRITE, 7);
	set_desc(DESC_GPA, 7, BUF_GPA + 0x2000, 300, VIRTQ_DESC_F_WRITE, 0);
	offer(0);
	ck_assert(virtq_has_avail(&q));
	ck_assert_int_eq(virtq_pop(&q, &chain, err, sizeof(err)), 1);
	ck_assert_uint_eq(chain.head, 0);
	ck_assert_uint_eq(chain.nseg, 3);
	ck_assert_uint_eq(chain.out_len, 100);
	ck_assert_uint_eq(chain.in_len, 500);
	ck_assert(!chain.seg[0].writable && chain.seg[1].writable && chain.seg[2].writable);
	ck_assert_ptr_eq(chain.seg[2].host, ram + BUF_GPA + 0x2000);
	ck_assert_int_eq(virtq_pop(&q, &chain, err, sizeof(err)), 0);
	/* the event index asks the driver to kick at the next entry */
	ck_assert(!virtq_has_avail(&q));
	ck_assert_uint_eq(get16(USED_GPA + 4 + 8 * QSIZE), 1);
	/* writing fills the writable segments in order */
	ck_assert_uint_eq(virtq_chain_write(&chain, "0123456789", 10), 10);
	ck_assert_int_eq(memcmp(ram + BUF_GPA + 0x1000, "0123456789", 10), 0);
	virtq_push(&q, chain.head, 10);
	ck_assert_uint_eq(get16(USED_GPA + 2), 1);
	ck_assert_uint_eq(get32(USED_GPA + 4), 0);
	ck_assert_uint_eq(get32(USED_GPA + 8), 10);
}
END_TEST

START_TEST(test_loop)
{
	set_desc(DESC_GPA, 0, BUF_GPA, 8, VIRTQ_DESC_F_NEXT, 1);
	set_desc(DESC_GPA, 1, BUF_GPA, 8, VIRTQ_DESC_F_NEXT, 2);
	set_desc(DESC_GPA, 2, BUF_GPA, 8, VIRTQ_DESC_F_NEXT, 0);
	offer(0);
	expect_refused("loops");
}
END_TEST

START_TEST(test_self_loop)
{
	set_desc(DESC_GPA, 3, BUF_GPA, 8, VIRTQ_DESC_F_NEXT, 3);
	offer(3);
	expect_refused("loops");
}
END_TEST

START_TEST(test_longest_chain_ok)
{
	/* every descriptor once: QSIZE buffers is legal, not a loop */
	for (unsigned i = 0; i < QSIZE; i++)
		set_desc(DESC_GPA, i, BUF_GPA + 64 * i, 64, i + 1 < QSIZE ? VIRTQ_DESC_F_NEXT : 0,
			 (uint16_t)(i + 1));
	offer(0);
	ck_assert_int_eq(virtq_pop(&q, &chain, err, sizeof(err)), 1);
	ck_assert_uint_eq(chain.nseg, QSIZE);
	ck_assert_uint_eq(chain.out_len, 64 * QSIZE);
}
END_TEST

START_TEST(test_next_out_of_range)
{
	set_desc(DESC_GPA, 0, BUF_GPA, 8, VIRTQ_DESC_F_NEXT, QSIZE);
	offer(0);
	expect_refused("past the table");
}
END_TEST

START_TEST(test_head_out_of_range)
{
	offer(QSIZE + 100);
	expect_refused("names descriptor");
}
END_TEST

START_TEST(test_avail_index_jump)
{
	/* the driver claims more new entries than the ring holds */
	put16(AVAIL_GPA + 2, QSIZE + 1);
	expect_refused("entries past");
}
END_TEST

START_TEST(test_buffer_outside_ram)
{
	set_desc(DESC_GPA, 0, RAM_SIZE - 4, 8, 0, 0);
	offer(0);
	expect_refused("outside guest RAM");
}
END_TEST

START_TEST(test_address_overflow)
{
	/* addr + len wraps around 2^64 */
	set_desc(DESC_GPA, 0, UINT64_MAX - 10, 100, VIRTQ_DESC_F_WRITE, 0);
	offer(0);
	expect_refused("outside guest RAM");
}
END_TEST

START_TEST(test_huge_length)
{
	set_desc(DESC_GPA, 0, BUF_GPA, UINT32_MAX, VIRTQ_DESC_F_WRITE, 0);
	offer(0);
	expect_refused("outside guest RAM");
}
END_TEST

START_TEST(test_readable_after_writable)
{
	set_desc(DESC_GPA, 0, BUF_GPA, 8, VIRTQ_DESC_F_WRITE | VIRTQ_DESC_F_NEXT, 1);
	set_desc(DESC_GPA, 1, BUF_GPA, 8, 0, 0);
	offer(0);
	expect_refused("readable buffer after a writable");
}
END_TEST

START_TEST(test_indirect)
{
	const uint64_t tbl = 0x8000;

	set_desc(tbl, 0, BUF_GPA, 16, VIRTQ_DESC_F_NEXT, 1);
	set_desc(tbl, 1, BUF_GPA + 16, 32, VIRTQ_DESC_F_WRITE, 0);
	set_desc(DESC_GPA, 2, tbl, 2 * 16, VIRTQ_DESC_F_INDIRECT, 0);
	offer(2);
	ck_assert_int_eq(virtq_pop(&q, &chain, err, sizeof(err)), 1);
	ck_assert_uint_eq(chain.head, 2);
	ck_assert_uint_eq(chain.nseg, 2);
	ck_assert_uint_eq(chain.in_len, 32);
}
END_TEST

START_TEST(test_indirect_hostile)
{
	static const struct {
		uint64_t addr;
		uint32_t len;
		uint16_t flags;
		const char *needle;
	} cases[] = {
	    {0x8000, 20, VIRTQ_DESC_F_INDIRECT, "not 1..32768"},
	    {0x8000, 0, VIRTQ_DESC_F_INDIRECT, "not 1..32768"},
	    {0x8000, 16 * (VIRTQ_MAX_SIZE + 1), VIRTQ_DESC_F_INDIRECT, "not 1..32768"},
	    {RAM_SIZE - 16, 32, VIRTQ_DESC_F_INDIRECT, "outside guest RAM"},
	    {0x8000, 32, VIRTQ_DESC_F_INDIRECT | VIRTQ_DESC_F_NEXT, "both indirect and chained"},
	};

	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		teardown();
		setup();
		set_desc(DESC_GPA, 0, cases[i].addr, cases[i].len, cases[i].flags, 1);
		offer(0);
		expect_refused(cases[i].needle);
	}
	/* nested indirect, and a loop inside the table */
	teardown();
	setup();
	set_desc(0x8000, 0, 0x9000, 16, VIRTQ_DESC_F_INDIRECT, 0);
	set_desc(DESC_GPA, 0, 0x8000, 16, VIRTQ_DESC_F_INDIRECT, 0);
	offer(0);
	expect_refused("inside an indirect table");
	teardown();
	setup();
	set_desc(0x8000, 0, BUF_GPA, 8, VIRTQ_DESC_F_NEXT, 1);
	set_desc(0x8000, 1, BUF_GPA, 8, VIRTQ_DESC_F_NEXT, 0);
	set_desc(DESC_GPA, 0, 0x8000, 32, VIRTQ_DESC_F_INDIRECT, 0);
	offer(0);
	expect_refused("loops");
	/* without the feature negotiated an indirect descriptor is refused */
	ck_assert_int_eq(virtq_start(&q, &gm, QSIZE, DESC_GPA, AVAIL_GPA, USED_GPA, true, false,
				     err, sizeof(err)),
			 0);
	avail_idx = 0;
	offer(0);
	expect_refused("not negotiated");
}
END_TEST

START_TEST(test_too_many_segments)
{
	const uint64_t tbl = 0x20000;
	const unsigned n = VIRTQ_MAX_SEGS + 44;

	for (unsigned i = 0; i < n; i++)
		set_desc(tbl, i, BUF_GPA, 4, i + 1 < n ? VIRTQ_DESC_F_NEXT : 0, (uint16_t)(i + 1));
	set_desc(DESC_GPA, 0, tbl, 16 * n, VIRTQ_DESC_F_INDIRECT, 0);
	offer(0);
	expect_refused("longer than");
}
END_TEST

START_TEST(test_start_refusals)
{
	ck_assert_int_eq(
	    virtq_start(&q, &gm, 12, DESC_GPA, AVAIL_GPA, USED_GPA, false, false, err, sizeof(err)),
	    -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "power of two"));
	ck_assert_int_eq(
	    virtq_start(&q, &gm, 0, DESC_GPA, AVAIL_GPA, USED_GPA, false, false, err, sizeof(err)),
	    -EINVAL);
	ck_assert_int_eq(virtq_start(&q, &gm, QSIZE, DESC_GPA + 8, AVAIL_GPA, USED_GPA, false,
				     false, err, sizeof(err)),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "misaligned"));
	ck_assert_int_eq(virtq_start(&q, &gm, QSIZE, DESC_GPA, AVAIL_GPA, RAM_SIZE - 8, false,
				     false, err, sizeof(err)),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "outside guest RAM"));
	ck_assert_int_eq(virtq_start(&q, &gm, 32768, 0, AVAIL_GPA, RAM_SIZE - 0x1000, false, false,
				     err, sizeof(err)),
			 -EINVAL); /* the largest queue's used ring runs past RAM */
	ck_assert(!q.ready);
	ck_assert_int_eq(virtq_pop(&q, &chain, err, sizeof(err)), 0);
}
END_TEST

START_TEST(test_event_idx)
{
	/* used_event = 1: the driver wants an interrupt once entry 1 is used */
	put16(AVAIL_GPA + 4 + 2 * QSIZE, 1);
	virtq_push(&q, 0, 0);
	ck_assert(virtq_should_notify(&q)); /* the first one always */
	virtq_push(&q, 0, 0);
	ck_assert(virtq_should_notify(&q)); /* used passed 1 */
	virtq_push(&q, 0, 0);
	ck_assert(!virtq_should_notify(&q)); /* the driver did not move used_event */
	put16(AVAIL_GPA + 4 + 2 * QSIZE, 4);
	virtq_push(&q, 0, 0);
	virtq_push(&q, 0, 0);
	ck_assert(virtq_should_notify(&q)); /* 3 -> 5 passes 4 */
	/* without the event index the flag decides */
	ck_assert_int_eq(virtq_start(&q, &gm, QSIZE, DESC_GPA, AVAIL_GPA, USED_GPA, false, false,
				     err, sizeof(err)),
			 0);
	put16(AVAIL_GPA, VIRTQ_AVAIL_F_NO_INTERRUPT);
	virtq_push(&q, 0, 0);
	ck_assert(!virtq_should_notify(&q));
	put16(AVAIL_GPA, 0);
	ck_assert(virtq_should_notify(&q));
}
END_TEST

/* --- virtio-pci + virtio-rng, programmed through BAR 0 as Linux's virtio_pci_modern does --- */

static struct virtio_rng *rng;
static struct virtio_pci *vp;

static void bar_w(uint64_t off, uint64_t v, unsigned len)
{
	virtio_pci_bar_write(vp, off, &v, len);
}

static uint64_t bar_r(uint64_t off, unsigned len)
{
	uint64_t v = 0;

	virtio_pci_bar_read(vp, off, &v, len);
	return v;
}

static void rng_setup(void)
{
	setup();
	ck_assert_int_eq(virtio_rng_create(&rng, "rng0", "/dev/urandom", &gm, err, sizeof(err)), 0);
	vp = virtio_rng_pci(rng)->priv;
}

static void rng_teardown(void)
{
	virtio_rng_destroy(rng);
	teardown();
}

/* Feature negotiation and queue 0 set up; returns the status read back. */
static uint8_t rng_driver_init(uint64_t features)
{
	bar_w(VIRTIO_PCI_STATUS, 0, 1);
	bar_w(VIRTIO_PCI_STATUS, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER, 1);
	bar_w(VIRTIO_PCI_GFSELECT, 0, 4);
	bar_w(VIRTIO_PCI_GF, features & 0xffffffff, 4);
	bar_w(VIRTIO_PCI_GFSELECT, 1, 4);
	bar_w(VIRTIO_PCI_GF, features >> 32, 4);
	bar_w(VIRTIO_PCI_STATUS,
	      VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK, 1);
	if (!(bar_r(VIRTIO_PCI_STATUS, 1) & VIRTIO_STATUS_FEATURES_OK))
		return (uint8_t)bar_r(VIRTIO_PCI_STATUS, 1);
	bar_w(VIRTIO_PCI_Q_SELECT, 0, 2);
	bar_w(VIRTIO_PCI_Q_SIZE, QSIZE, 2);
	bar_w(VIRTIO_PCI_Q_DESC, DESC_GPA, 4);
	bar_w(VIRTIO_PCI_Q_DESC + 4, 0, 4);
	bar_w(VIRTIO_PCI_Q_DRIVER, AVAIL_GPA, 8);
	bar_w(VIRTIO_PCI_Q_DEVICE, USED_GPA, 4);
	bar_w(VIRTIO_PCI_Q_MSIX, 1, 2);
	bar_w(VIRTIO_PCI_MSIX_CONFIG, 0, 2);
	bar_w(VIRTIO_PCI_Q_ENABLE, 1, 2);
	bar_w(VIRTIO_PCI_STATUS,
	      VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK |
		  VIRTIO_STATUS_DRIVER_OK,
	      1);
	return (uint8_t)bar_r(VIRTIO_PCI_STATUS, 1);
}

START_TEST(test_pci_capabilities)
{
	struct pci_dev *d = virtio_rng_pci(rng);
	unsigned off = d->cfg[PCI_CAPABILITY_LIST], seen = 0, guard = 0;

	ck_assert_uint_eq(d->cfg[PCI_VENDOR_ID] | d->cfg[PCI_VENDOR_ID + 1] << 8, 0x1af4);
	ck_assert_uint_eq(d->cfg[PCI_DEVICE_ID] | d->cfg[PCI_DEVICE_ID + 1] << 8, 0x1044);
	ck_assert_uint_eq(d->cfg[PCI_REVISION_ID], 1);
	while (off && guard++ < 48) {
		if (d->cfg[off] == PCI_CAP_ID_VNDR) {
			unsigned type = d->cfg[off + 3];

			ck_assert_uint_eq(d->cfg[off + 4], VIRTIO_PCI_BAR);
			seen |= 1u << type;
			if (type == VIRTIO_PCI_CAP_NOTIFY_CFG)
				ck_assert_uint_eq(d->cfg[off + 16], VIRTIO_PCI_NOTIFY_MULT);
		}
		off = d->cfg[off + 1];
	}
	ck_assert_uint_eq(seen & 0x1e, 0x1e); /* common, notify, ISR, device config */
	ck_assert_uint_eq(d->msix.nvec, 2);
	/* features offered: VERSION_1, EVENT_IDX, INDIRECT_DESC */
	bar_w(VIRTIO_PCI_DFSELECT, 1, 4);
	ck_assert_uint_eq(bar_r(VIRTIO_PCI_DF, 4) & 1, 1);
	bar_w(VIRTIO_PCI_DFSELECT, 0, 4);
	ck_assert_uint_eq(bar_r(VIRTIO_PCI_DF, 4) & (3u << 28), 3u << 28);
	bar_w(VIRTIO_PCI_DFSELECT, 7, 4);
	ck_assert_uint_eq(bar_r(VIRTIO_PCI_DF, 4), 0);
	ck_assert_uint_eq(bar_r(VIRTIO_PCI_NUM_QUEUES, 2), 1);
	/* a queue that does not exist reads size 0 */
	bar_w(VIRTIO_PCI_Q_SELECT, 3, 2);
	ck_assert_uint_eq(bar_r(VIRTIO_PCI_Q_SIZE, 2), 0);
}
END_TEST

START_TEST(test_rng_fills_buffers)
{
	uint64_t f = 1ULL << VIRTIO_F_VERSION_1 | 1ULL << VIRTIO_RING_F_EVENT_IDX;
	uint64_t irqs = virtio_rng_pci(rng)->msix.fired + virtio_rng_pci(rng)->msix.pended;
	static const uint8_t zero[256];

	ck_assert_uint_eq(rng_driver_init(f) & VIRTIO_STATUS_DRIVER_OK, VIRTIO_STATUS_DRIVER_OK);
	set_desc(DESC_GPA, 0, BUF_GPA, 256, VIRTQ_DESC_F_WRITE, 0);
	set_desc(DESC_GPA, 1, BUF_GPA + 0x1000, 64, VIRTQ_DESC_F_WRITE, 0);
	offer(0);
	offer(1);
	bar_w(VIRTIO_PCI_NOTIFY_OFF, 0, 2);
	ck_assert_uint_eq(get16(USED_GPA + 2), 2);
	ck_assert_uint_eq(get32(USED_GPA + 8), 256);
	ck_assert_uint_eq(get32(USED_GPA + 16), 64);
	ck_assert_int_ne(memcmp(ram + BUF_GPA, zero, 256), 0);
	ck_assert_uint_eq(virtio_rng_bytes(rng), 320);
	ck_assert_uint_gt(virtio_rng_pci(rng)->msix.fired + virtio_rng_pci(rng)->msix.pended, irqs);
	/* the event index now asks for a kick at entry 2 */
	ck_assert_uint_eq(get16(USED_GPA + 4 + 8 * QSIZE), 2);
	ck_assert_uint_eq(bar_r(VIRTIO_PCI_ISR_OFF, 1), 1);
	ck_assert_uint_eq(bar_r(VIRTIO_PCI_ISR_OFF, 1), 0); /* read clears */
}
END_TEST

START_TEST(test_rng_hostile_driver)
{
	uint64_t f = 1ULL << VIRTIO_F_VERSION_1;

	/* VERSION_1 missing, or a feature never offered: FEATURES_OK does not stick */
	ck_assert_uint_eq(rng_driver_init(0) & VIRTIO_STATUS_FEATURES_OK, 0);
	ck_assert_uint_eq(rng_driver_init(f | 1ULL << 40) & VIRTIO_STATUS_FEATURES_OK, 0);
	/* a queue size that is no power of two: the enable fails, the device needs a reset */
	bar_w(VIRTIO_PCI_STATUS, 0, 1);
	bar_w(VIRTIO_PCI_Q_SIZE, 12, 2);
	bar_w(VIRTIO_PCI_Q_ENABLE, 1, 2);
	ck_assert_uint_eq(bar_r(VIRTIO_PCI_Q_ENABLE, 2), 0);
	ck_assert_uint_eq(bar_r(VIRTIO_PCI_STATUS, 1) & VIRTIO_STATUS_NEEDS_RESET,
			  VIRTIO_STATUS_NEEDS_RESET);
	/* a looping chain breaks the ring, not the VMM; a reset brings the device back */
	ck_assert_uint_eq(rng_driver_init(f) & VIRTIO_STATUS_NEEDS_RESET, 0);
	set_desc(DESC_GPA, 0, BUF_GPA, 8, VIRTQ_DESC_F_WRITE | VIRTQ_DESC_F_NEXT, 0);
	offer(0);
	bar_w(VIRTIO_PCI_NOTIFY_OFF, 0, 2);
	ck_assert_uint_eq(bar_r(VIRTIO_PCI_STATUS, 1) & VIRTIO_STATUS_NEEDS_RESET,
			  VIRTIO_STATUS_NEEDS_RESET);
	ck_assert_uint_eq(get16(USED_GPA + 2), 0);
	bar_w(VIRTIO_PCI_STATUS, 0, 1);
	ck_assert_uint_eq(bar_r(VIRTIO_PCI_STATUS, 1), 0);
	ck_assert_uint_eq(bar_r(VIRTIO_PCI_Q_ENABLE, 2), 0);
	/* odd widths and offsets are ignored, never fatal */
	bar_w(VIRTIO_PCI_Q_DESC + 2, ~0ULL, 4);
	bar_w(VIRTIO_PCI_NOTIFY_OFF + 4 * 7, 0, 2);
	bar_w(0x3ff8, ~0ULL, 8);
	(void)bar_r(VIRTIO_PCI_COMMON_LEN - 1, 4);
	(void)bar_r(0x3fff, 1);
	bar_w(VIRTIO_PCI_MSIX_CONFIG, 500, 2);
	ck_assert_uint_eq(bar_r(VIRTIO_PCI_MSIX_CONFIG, 2), VIRTIO_NO_VECTOR);
	/* kicks before DRIVER_OK are dropped */
	avail_idx = 0;
	set_desc(DESC_GPA, 0, BUF_GPA, 8, VIRTQ_DESC_F_WRITE, 0);
	offer(0);
	bar_w(VIRTIO_PCI_NOTIFY_OFF, 0, 2);
	ck_assert_uint_eq(virtio_rng_bytes(rng), 0);
}
END_TEST

START_TEST(test_rng_bad_source)
{
	struct virtio_rng *r2 = NULL;

	ck_assert_int_eq(virtio_rng_create(&r2, "rng1", "/nonexistent/rng", &gm, err, sizeof(err)),
			 -ENOENT);
	ck_assert_ptr_null(r2);
	ck_assert_ptr_nonnull(strstr(err, "/nonexistent/rng"));
}
END_TEST

static Suite *virtqueue_suite(void)
{
	Suite *s = suite_create("virtqueue");
	TCase *tc = tcase_create("ring");
	TCase *tp = tcase_create("virtio_pci");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_empty_and_simple_chain);
	tcase_add_test(tc, test_loop);
	tcase_add_test(tc, test_self_loop);
	tcase_add_test(tc, test_longest_chain_ok);
	tcase_add_test(tc, test_next_out_of_range);
	tcase_add_test(tc, test_head_out_of_range);
	tcase_add_test(tc, test_avail_index_jump);
	tcase_add_test(tc, test_buffer_outside_ram);
	tcase_add_test(tc, test_address_overflow);
	tcase_add_test(tc, test_huge_length);
	tcase_add_test(tc, test_readable_after_writable);
	tcase_add_test(tc, test_indirect);
	tcase_add_test(tc, test_indirect_hostile);
	tcase_add_test(tc, test_too_many_segments);
	tcase_add_test(tc, test_start_refusals);
	tcase_add_test(tc, test_event_idx);
	suite_add_tcase(s, tc);
	tcase_add_checked_fixture(tp, rng_setup, rng_teardown);
	tcase_add_test(tp, test_pci_capabilities);
	tcase_add_test(tp, test_rng_fills_buffers);
	tcase_add_test(tp, test_rng_hostile_driver);
	tcase_add_test(tp, test_rng_bad_source);
	suite_add_tcase(s, tp);
	return s;
}

int main(void)
{
	return testutil_run_suite(virtqueue_suite());
}
