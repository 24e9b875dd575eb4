/* Unit tests for include/lightiov/nvmeq.h, the one NVMe queue engine: ring arithmetic against a
 * model that counts entries, head validation, phase tags over many wraps, the EventIdx test
 * against its definition, and a producer/consumer pair exchanging CQEs through one ring. */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "lightiov/nvmeq.h"
#include "testutil.h"

START_TEST(ring_arithmetic)
{
	static const uint32_t sizes[] = {2, 3, 4, 16, 1024, 65536};

	for (unsigned s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		uint32_t size = sizes[s], head = 0, tail = 0, count = 0;

		/* a walk that fills and drains in uneven steps, checked against a counter */
		for (unsigned i = 0; i < 3 * size + 7; i++) {
			bool produce = (i % 5) < 3;

			TESTUTIL_CHECK(nvmeq_used(head, tail, size) == count,
				       "size %u step %u used", size, i);
			TESTUTIL_CHECK(nvmeq_room(head, tail, size) == size - 1 - count,
				       "size %u step %u room", size, i);
			TESTUTIL_CHECK(nvmeq_full(head, tail, size) == (count == size - 1),
				       "size %u step %u full", size, i);
			if (produce && count < size - 1) {
				TESTUTIL_CHECK(nvmeq_next(tail, size) == (tail + 1) % size,
					       "size %u step %u next", size, i);
				nvmeq_step(&tail, size);
				count++;
			} else if (count) {
				nvmeq_step(&head, size);
				count--;
			}
		}
	}
}
END_TEST

START_TEST(step_wraps)
{
	uint32_t idx = 0, wraps = 0;

	for (unsigned i = 0; i < 3 * 7; i++)
		wraps += nvmeq_step(&idx, 7);
	ck_assert_uint_eq(wraps, 3);
	ck_assert_uint_eq(idx, 0);
	ck_assert_uint_eq(nvmeq_next(6, 7), 0);
	ck_assert_uint_eq(nvmeq_next(65535, 65536), 0);
}
END_TEST

START_TEST(head_validation)
{
	const uint32_t size = 8;

	/* every (head, tail, new_head): allowed exactly when new_head lies in [head, tail] */
	for (uint32_t head = 0; head < size; head++)
		for (uint32_t tail = 0; tail < size; tail++)
			for (uint32_t nh = 0; nh < size + 3; nh++) {
				bool want = false;

				for (uint32_t k = 0, i = head;; k++, i = (i + 1) % size) {
					if (i == nh)
						want = true;
					if (i == tail)
						break;
				}
				TESTUTIL_CHECK(nvmeq_head_ok(nh, head, tail, size) == want,
					       "head %u tail %u new %u", head, tail, nh);
			}
}
END_TEST

START_TEST(phase_tags)
{
	ck_assert_uint_eq(nvmeq_status_word(0, 1), 1);
	ck_assert_uint_eq(nvmeq_status_word(0x4002 >> 1, 0), 0x4002);
	ck_assert_uint_eq(nvmeq_status_word(0x7fff, 1), 0xffff);
	/* only the low bit of phase is used */
	ck_assert_uint_eq(nvmeq_status_word(3, 2), 6);
	ck_assert(nvmeq_phase_ok(0x0003, 1));
	ck_assert(!nvmeq_phase_ok(0x0002, 1));
	ck_assert(nvmeq_phase_ok(0xfffe, 0));
	for (uint64_t pos = 0; pos < 5 * 12; pos++)
		ck_assert_uint_eq(nvmeq_pos_phase(pos, 12), (pos / 12) % 2 ? 0 : 1);
	ck_assert_uint_eq(nvmeq_pos_phase(((1ull << 40) + 1) * 4, 4), 0);
}
END_TEST

/* EventIdx, NVMe 1.3 section 5.7 and Linux's nvme_dbbuf_need_event(): ring when event_idx lies in
 * [old, new) modulo 2^16. */
START_TEST(event_index)
{
	for (uint32_t old = 0; old < 70000; old += 997)
		for (uint32_t d = 0; d < 40; d++)
			for (uint32_t e = 0; e < 50; e++) {
				uint32_t nw = old + d, ei = (old + e - 5) & 0xffff;
				bool want = (uint16_t)(ei - old) < (uint16_t)(nw - old);

				TESTUTIL_CHECK(nvmeq_need_event(ei, nw & 0xffff, old & 0xffff) ==
						   want,
					       "old %u new %u ei %u", old, nw, ei);
			}
}
END_TEST

/* A producer posts 5 passes of CQEs through a 4-entry ring; the consumer takes each exactly once,
 * in order, with its fields, and never takes a stale entry. */
START_TEST(cqe_exchange)
{
	struct nvme_cqe ring[4];
	uint32_t ptail = 0, pphase = 1, chead = 0, cphase = 1;
	struct nvme_cqe out;

	memset(ring, 0, sizeof(ring));
	ck_assert(!nvmeq_cqe_take(&ring[0], cphase, &out));
	for (uint16_t cid = 0; cid < 20; cid++) {
		struct nvme_cqe c = {.dw0 = 0x1000u + cid,
				     .dw1 = 7,
				     .sq_head = cid,
				     .sq_id = 3,
				     .cid = cid,
				     .status = (uint16_t)(cid & 1 ? 0x2 : 0)};

		nvmeq_cqe_publish(&ring[ptail], &c, pphase);
		if (nvmeq_step(&ptail, 4))
			pphase ^= 1;
		ck_assert(nvmeq_cqe_take(&ring[chead], cphase, &out));
		ck_assert_uint_eq(out.cid, cid);
		ck_assert_uint_eq(out.dw0, 0x1000u + cid);
		ck_assert_uint_eq(out.dw1, 7);
		ck_assert_uint_eq(out.sq_id, 3);
		ck_assert_uint_eq(out.status >> 1, cid & 1 ? 2 : 0);
		ck_assert_uint_eq(nvmeq_cqe_status(&ring[chead]), out.status);
		if (nvmeq_step(&chead, 4))
			cphase ^= 1;
		/* the next slot holds last pass's entry: its tag says so */
		ck_assert(!nvmeq_cqe_take(&ring[chead], cphase, &out));
	}
}
END_TEST

static Suite *nvmeq_suite(void)
{
	Suite *s = suite_create("nvmeq");
	TCase *tc = tcase_create("engine");

	tcase_add_test(tc, ring_arithmetic);
	tcase_add_test(tc, step_wraps);
	tcase_add_test(tc, head_validation);
	tcase_add_test(tc, phase_tags);
	tcase_add_test(tc, event_index);
	tcase_add_test(tc, cqe_exchange);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return testutil_run_suite(nvmeq_suite());
}
