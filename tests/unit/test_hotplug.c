/* Unit tests for vmm/hotplug.c: the ACPI PCI hotplug registers as the guest's AML uses them
 * (read-to-clear slot masks, the eject write), the slot state machine, and hostile accesses. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "hotplug.h"
#include "testutil.h"

static struct hotplug hp;
static unsigned events;

static void count_event(void *opaque)
{
	unsigned *n = opaque;

	__atomic_add_fetch(n, 1, __ATOMIC_SEQ_CST);
}

static void setup(void)
{
	events = 0;
	hotplug_init(&hp, count_event, &events);
}

static void teardown(void)
{
	hotplug_destroy(&hp);
}

static uint32_t rd(uint64_t off)
{
	uint32_t v = 0xdeadbeef;

	hotplug_bus_ops.read(&hp, off, &v, 4);
	return v;
}

static void wr(uint64_t off, uint32_t v)
{
	hotplug_bus_ops.write(&hp, off, &v, 4);
}

START_TEST(plug_reports_once)
{
	ck_assert_int_eq(hotplug_plug(&hp, 3), 0);
	ck_assert_uint_eq(events, 1);
	ck_assert_uint_eq(hotplug_state(&hp, 3), HOTPLUG_PRESENT);
	/* the guest's scan reads the added slots once: the read clears them */
	ck_assert_uint_eq(rd(HOTPLUG_REG_PCIU), 1u << 3);
	ck_assert_uint_eq(rd(HOTPLUG_REG_PCIU), 0);
	ck_assert_uint_eq(rd(HOTPLUG_REG_PCID), 0);
	ck_assert_uint_eq(rd(HOTPLUG_REG_SLOT), 1u << 3);
	ck_assert_uint_eq(rd(HOTPLUG_REG_B0EJ), 0);
	/* a slot holds one device */
	ck_assert_int_eq(hotplug_plug(&hp, 3), -EBUSY);
	ck_assert_int_eq(hotplug_plug(&hp, 0), -EINVAL);
	ck_assert_int_eq(hotplug_plug(&hp, HOTPLUG_SLOTS), -EINVAL);
	ck_assert_uint_eq(events, 1);
}
END_TEST

START_TEST(unplug_eject_release)
{
	ck_assert_int_eq(hotplug_boot_present(&hp, 2), 0);
	ck_assert_uint_eq(events, 0); /* the guest's boot scan finds it: no event */
	ck_assert_uint_eq(rd(HOTPLUG_REG_PCIU), 0);
	ck_assert_int_eq(hotplug_unplug(&hp, 2), 0);
	ck_assert_uint_eq(events, 1);
	ck_assert_uint_eq(hotplug_state(&hp, 2), HOTPLUG_REMOVING);
	ck_assert_uint_eq(rd(HOTPLUG_REG_PCID), 1u << 2);
	ck_assert_uint_eq(rd(HOTPLUG_REG_PCID), 0);
	ck_assert_int_eq(hotplug_wait_eject(&hp, 2, 0), -ETIMEDOUT);
	wr(HOTPLUG_REG_B0EJ, 1u << 2); /* _EJ0 of S002 */
	ck_assert_uint_eq(hotplug_state(&hp, 2), HOTPLUG_EJECTED);
	ck_assert_int_eq(hotplug_wait_eject(&hp, 2, 0), 0);
	ck_assert_uint_eq(hp.ejects, 1);
	ck_assert_uint_eq(rd(HOTPLUG_REG_SLOT), 0);
	/* asking again after the eject is a no-op success */
	ck_assert_int_eq(hotplug_unplug(&hp, 2), 0);
	ck_assert_uint_eq(events, 1);
	hotplug_release(&hp, 2);
	ck_assert_uint_eq(hotplug_state(&hp, 2), HOTPLUG_EMPTY);
	ck_assert_int_eq(hotplug_unplug(&hp, 2), -ENOENT);
	/* the slot can take a new device */
	ck_assert_int_eq(hotplug_plug(&hp, 2), 0);
}
END_TEST

/* A guest that never ejects: the request can be repeated (notifying again), the wait times out,
 * and a release (VM reset) frees the slot. */
START_TEST(guest_never_ejects)
{
	ck_assert_int_eq(hotplug_plug(&hp, 5), 0);
	ck_assert_int_eq(hotplug_unplug(&hp, 5), 0);
	/* the add the guest never read is withdrawn: the scan must not re-add it */
	ck_assert_uint_eq(rd(HOTPLUG_REG_PCIU), 0);
	ck_assert_int_eq(hotplug_wait_eject(&hp, 5, 20), -ETIMEDOUT);
	ck_assert_int_eq(hotplug_unplug(&hp, 5), 0);
	ck_assert_uint_eq(events, 3);
	ck_assert_uint_eq(rd(HOTPLUG_REG_PCID), 1u << 5);
	ck_assert_uint_eq(hotplug_state(&hp, 5), HOTPLUG_REMOVING);
	hotplug_release(&hp, 5);
	ck_assert_uint_eq(hotplug_state(&hp, 5), HOTPLUG_EMPTY);
	ck_assert_uint_eq(rd(HOTPLUG_REG_PCID), 0);
	ck_assert_int_eq(hotplug_wait_eject(&hp, 5, 0), -ETIMEDOUT);
}
END_TEST

/* Ejects lvmm did not ask for, of several slots, of the host bridge, of nothing, and accesses of
 * other sizes or registers change no state. */
START_TEST(hostile_accesses)
{
	uint16_t w = 0xffff;
	uint8_t b[8];
	uint64_t q = ~0ULL;

	ck_assert_int_eq(hotplug_boot_present(&hp, 1), 0);
	ck_assert_int_eq(hotplug_plug(&hp, 4), 0);
	ck_assert_int_eq(hotplug_unplug(&hp, 4), 0);
	wr(HOTPLUG_REG_B0EJ, 1u << 1);		     /* present, not being removed */
	wr(HOTPLUG_REG_B0EJ, 1u << 9);		     /* empty */
	wr(HOTPLUG_REG_B0EJ, (1u << 4) | (1u << 1)); /* two slots at once */
	wr(HOTPLUG_REG_B0EJ, 1u);		     /* the host bridge */
	wr(HOTPLUG_REG_B0EJ, 0);
	wr(HOTPLUG_REG_PCIU, 1u << 4); /* read-only */
	wr(HOTPLUG_REG_PCID, ~0u);
	wr(0x10, 1u << 4);
	hotplug_bus_ops.write(&hp, HOTPLUG_REG_B0EJ, &w, 2);
	hotplug_bus_ops.write(&hp, HOTPLUG_REG_B0EJ, &q, 8);
	ck_assert_uint_eq(hotplug_state(&hp, 1), HOTPLUG_PRESENT);
	ck_assert_uint_eq(hotplug_state(&hp, 4), HOTPLUG_REMOVING);
	ck_assert_uint_eq(hotplug_state(&hp, 9), HOTPLUG_EMPTY);
	ck_assert_uint_eq(hp.ejects, 0);
	ck_assert_uint_eq(hp.bad_accesses, 10);
	/* reads of odd size or alignment return zeros and clear nothing */
	memset(b, 0xff, sizeof(b));
	hotplug_bus_ops.read(&hp, HOTPLUG_REG_PCID, b, 2);
	ck_assert_uint_eq(b[0] | b[1], 0);
	hotplug_bus_ops.read(&hp, HOTPLUG_REG_PCID + 1, b, 4);
	ck_assert_uint_eq(b[0] | b[1] | b[2] | b[3], 0);
	ck_assert_uint_eq(rd(HOTPLUG_REG_PCID), 1u << 4);
	ck_assert_uint_eq(rd(0x10), 0);
	/* the right eject still works */
	wr(HOTPLUG_REG_B0EJ, 1u << 4);
	ck_assert_uint_eq(hotplug_state(&hp, 4), HOTPLUG_EJECTED);
	ck_assert_int_eq(hotplug_wait_eject(&hp, 40, 0), -EINVAL);
}
END_TEST

struct ejector {
	unsigned slot;
};

static void *eject_later(void *arg)
{
	struct ejector *e = arg;

	/* waits for the request the way the guest's scan sees it, then ejects */
	while (hotplug_state(&hp, e->slot) != HOTPLUG_REMOVING)
		testutil_sleep_ms(1);
	wr(HOTPLUG_REG_B0EJ, 1u << e->slot);
	return NULL;
}

/* The API thread waits for an eject that a vCPU thread writes: the wait ends on the write. */
START_TEST(wait_wakes_on_eject)
{
	struct ejector e = {.slot = 7};
	pthread_t t;

	ck_assert_int_eq(hotplug_plug(&hp, 7), 0);
	ck_assert_int_eq(pthread_create(&t, NULL, eject_later, &e), 0);
	ck_assert_int_eq(hotplug_unplug(&hp, 7), 0);
	ck_assert_int_eq(hotplug_wait_eject(&hp, 7, 60000), 0);
	pthread_join(t, NULL);
	ck_assert_uint_eq(hotplug_state(&hp, 7), HOTPLUG_EJECTED);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("hotplug");
	TCase *tc = tcase_create("registers");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, plug_reports_once);
	tcase_add_test(tc, unplug_eject_release);
	tcase_add_test(tc, guest_never_ejects);
	tcase_add_test(tc, hostile_accesses);
	tcase_add_test(tc, wait_wakes_on_eject);
	suite_add_tcase(s, tc);
	return testutil_run_suite(s);
}
