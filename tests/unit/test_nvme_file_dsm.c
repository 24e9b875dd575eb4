/* vNVMe over the file backend: Write Zeroes and Deallocate run on the I/O thread in bounded
 * steps without the controller lock, and a stop request ends a long Deallocate between two
 * steps (issue 23, finding 8). A hook the backend calls before each step observes both. */
#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nvme-lightiov/nvme_int.h"
#include "nvmerig.h"
#include "testutil.h"

#define MIB	(1u << 20)
#define NRANGES 4
#define RANGE	(2 * MIB) /* two steps each */

static struct {
	unsigned steps, unlocked;
	bool stop_at_first;
} seen;

static void step_hook(struct nvme_file *f, void *opaque)
{
	(void)opaque;
	seen.steps++;
	/* The hook runs on the I/O thread: a held controller lock (its own or anyone's) is busy. */
	if (pthread_mutex_trylock(&rig.ctrl->lock) == 0) {
		seen.unlocked++;
		pthread_mutex_unlock(&rig.ctrl->lock);
	}
	if (seen.stop_at_first && seen.steps == 1)
		nvme_file_request_stop(f);
}

/* The image filled with 0xa5, then a Deallocate of NRANGES ranges of RANGE bytes spaced
 * 2 * RANGE apart (the hook stops the backend at the first step when asked): its status. */
static uint16_t fill_and_deallocate(bool stop_at_first)
{
	struct nvme_dsm_range *r = (void *)(rig.ram + DATA_GPA);
	uint8_t *buf = malloc(MIB);
	struct nvme_sqe c;
	unsigned i;
	int fd;

	memset(&seen, 0, sizeof(seen));
	seen.stop_at_first = stop_at_first;
	rig_start(2 * NRANGES * RANGE, false);
	fd = open(rig.path, O_WRONLY);
	ck_assert_int_ge(fd, 0);
	memset(buf, 0xa5, MIB);
	for (i = 0; i < 2 * NRANGES * RANGE / MIB; i++)
		ck_assert_int_eq(pwrite(fd, buf, MIB, (off_t)i * MIB), MIB);
	close(fd);
	free(buf);
	nvme_file_set_zero_hook(rig.nf, step_hook, NULL);
	rig_bring_up();
	for (i = 0; i < NRANGES; i++)
		r[i] = (struct nvme_dsm_range){.slba = 2 * i * RANGE / 512, .nlb = RANGE / 512};
	c = rig_mk(NVME_CMD_DSM, 30, 1);
	c.cdw10 = NRANGES - 1;
	c.cdw11 = NVME_DSM_AD;
	c.prp1 = DATA_GPA;
	return rig_cmd(1, &c);
}

static uint8_t byte_at(uint64_t off)
{
	uint8_t b = 0xff;
	int fd = open(rig.path, O_RDONLY);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, &b, 1, (off_t)off), 1);
	close(fd);
	return b;
}

START_TEST(test_dsm_steps_without_the_lock)
{
	unsigned i;

	ck_assert_uint_eq(fill_and_deallocate(false), 0);
	/* every range in steps of at most 1 MiB, none of them under the controller lock */
	ck_assert_uint_eq(seen.steps, NRANGES * RANGE / MIB);
	ck_assert_uint_eq(seen.unlocked, seen.steps);
	for (i = 0; i < NRANGES; i++) {
		ck_assert_uint_eq(byte_at(2 * i * RANGE), 0);
		ck_assert_uint_eq(byte_at(2 * i * RANGE + RANGE - 1), 0);
		ck_assert_uint_eq(byte_at((2 * i + 1) * RANGE), 0xa5);
	}
}
END_TEST

START_TEST(test_stop_ends_dsm_between_steps)
{
	/* the stop comes during the first step: the command fails, nothing after it is zeroed */
	ck_assert_uint_ne(fill_and_deallocate(true), 0);
	ck_assert_uint_eq(seen.steps, 1);
	ck_assert_uint_eq(byte_at(0), 0);
	ck_assert_uint_eq(byte_at(MIB), 0xa5);
	ck_assert_uint_eq(byte_at(2 * RANGE), 0xa5);
	ck_assert_uint_eq(byte_at(2 * (NRANGES - 1) * RANGE), 0xa5);
}
END_TEST

static Suite *dsm_suite(void)
{
	Suite *s = suite_create("nvme_file_dsm");
	TCase *t = tcase_create("dsm");

	tcase_add_checked_fixture(t, rig_setup, rig_teardown);
	tcase_set_timeout(t, 30);
	tcase_add_test(t, test_dsm_steps_without_the_lock);
	tcase_add_test(t, test_stop_ends_dsm_between_steps);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return testutil_run_suite(dsm_suite());
}
