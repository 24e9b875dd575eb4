/* Unit tests for the user-space NVMe driver's parts that need no device: PRP building, the
 * checks every controller completion passes, status names, and a queue's submission and
 * completion against a register block in plain memory playing the controller. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lightiov/nvmeq.h"
#include "testutil.h"
#include "vfio/nvme_pci.h"

START_TEST(prp_one_two_many)
{
	uint64_t list[NVME_PCI_PAGE / 8], ent[NVME_PCI_PRP_MAX + 1], p1, p2;
	unsigned i;

	for (i = 0; i <= NVME_PCI_PRP_MAX; i++)
		ent[i] = 0x100000 + (uint64_t)i * 0x3000; /* scattered pages */
	ent[0] += 0x200;				  /* the first may start inside its page */
	ck_assert_int_eq(nvme_prp_build(ent, 1, list, 0xabc000, &p1, &p2), 0);
	ck_assert_uint_eq(p1, ent[0]);
	ck_assert_uint_eq(p2, 0);
	ck_assert_int_eq(nvme_prp_build(ent, 2, list, 0xabc000, &p1, &p2), 0);
	ck_assert_uint_eq(p1, ent[0]);
	ck_assert_uint_eq(p2, ent[1]);
	memset(list, 0xee, sizeof(list));
	ck_assert_int_eq(nvme_prp_build(ent, 33, list, 0xabc000, &p1, &p2), 0);
	ck_assert_uint_eq(p1, ent[0]);
	ck_assert_uint_eq(p2, 0xabc000);
	for (i = 1; i < 33; i++)
		ck_assert_uint_eq(list[i - 1], ent[i]);
	ck_assert_uint_eq(list[32], 0xeeeeeeeeeeeeeeeeull); /* nothing past the last entry */
	ck_assert_int_eq(nvme_prp_build(ent, NVME_PCI_PRP_MAX, list, 0xabc000, &p1, &p2), 0);
	ck_assert_uint_eq(list[NVME_PCI_PRP_MAX - 2], ent[NVME_PCI_PRP_MAX - 1]);
}
END_TEST

START_TEST(prp_refusals)
{
	uint64_t list[NVME_PCI_PAGE / 8], ent[4] = {0x1000, 0x5000, 0x9000, 0xd000}, p1, p2;

	ck_assert_int_eq(nvme_prp_build(ent, 0, list, 0, &p1, &p2), -EINVAL);
	ck_assert_int_eq(nvme_prp_build(ent, NVME_PCI_PRP_MAX + 1, list, 0, &p1, &p2), -EINVAL);
	ent[2] = 0x9008; /* a later entry inside a page */
	ck_assert_int_eq(nvme_prp_build(ent, 3, list, 0, &p1, &p2), -EINVAL);
	ent[2] = 0x9000;
	ent[0] = 0x1002; /* not dword aligned */
	ck_assert_int_eq(nvme_prp_build(ent, 3, list, 0, &p1, &p2), -EINVAL);
}
END_TEST

START_TEST(cqe_checks)
{
	void *ctx[8] = {0};
	int a;
	struct nvme_cqe e = {.sq_id = 3, .sq_head = 2, .cid = 5};
	char err[128];

	ctx[5] = &a;
	ck_assert_int_eq(nvme_cqe_check(&e, 3, 8, ctx, err, sizeof(err)), 0);
	e.sq_id = 4;
	ck_assert_int_eq(nvme_cqe_check(&e, 3, 8, ctx, err, sizeof(err)), -EPROTO);
	ck_assert_str_eq(err, "completion on queue 3 names SQ 4");
	e.sq_id = 3;
	e.sq_head = 8;
	ck_assert_int_eq(nvme_cqe_check(&e, 3, 8, ctx, err, sizeof(err)), -EPROTO);
	ck_assert_str_eq(err, "queue 3: completion SQ head 8 beyond depth 8");
	e.sq_head = 7;
	e.cid = 4; /* not in flight */
	ck_assert_int_eq(nvme_cqe_check(&e, 3, 8, ctx, err, sizeof(err)), -EPROTO);
	ck_assert_str_eq(err, "queue 3: completion for cid 4, which is not in flight");
	e.cid = 0xffff; /* beyond the queue */
	ck_assert_int_eq(nvme_cqe_check(&e, 3, 8, ctx, err, sizeof(err)), -EPROTO);
}
END_TEST

START_TEST(status_names)
{
	char buf[96];

	nvme_status_str(NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD) | NVME_STATUS_DNR, buf,
			sizeof(buf));
	ck_assert_str_eq(buf, "Invalid Field in Command (SCT 0x0 SC 0x02, DNR)");
	nvme_status_str(NVME_STATUS(NVME_SCT_MEDIA, NVME_SC_READ_ERROR), buf, sizeof(buf));
	ck_assert_str_eq(buf, "Unrecovered Read Error (SCT 0x2 SC 0x81)");
	nvme_status_str(NVME_STATUS(7, 0xee), buf, sizeof(buf));
	ck_assert_str_eq(buf, "Unknown status (SCT 0x7 SC 0xee)");
}
END_TEST

struct done_log {
	unsigned n;
	void *ctx[16];
	uint16_t status[16];
};

static void log_done(void *ctx, const struct nvme_cqe *e, void *arg)
{
	struct done_log *l = arg;

	l->ctx[l->n] = ctx;
	l->status[l->n++] = e->status;
}

/* The controller's side of queue 1, played here: reads SQEs, posts CQEs with nvmeq.h. */
static void post(struct nvme_pci_queue *q, uint32_t *tail, uint32_t *phase, uint16_t sqid,
		 uint16_t cid, uint16_t status)
{
	struct nvme_cqe c = {.sq_id = sqid, .cid = cid, .status = status, .sq_head = 1};

	nvmeq_cqe_publish(&q->cq[*tail], &c, *phase);
	if (nvmeq_step(tail, q->depth))
		*phase ^= 1;
}

START_TEST(queue_submit_reap)
{
	static struct nvme_pci c;
	struct nvme_pci_queue *q = &c.ioq[1];
	uint8_t *bar = aligned_alloc(4096, 0x2000);
	struct nvme_sqe *sq = aligned_alloc(4096, 4096);
	struct nvme_cqe *cq = aligned_alloc(4096, 4096);
	void *ctx[8] = {0};
	uint16_t free_ids[8];
	struct done_log log = {0};
	uint32_t tail = 0, phase = 1;
	int a, b, cid_a, cid_b;
	struct nvme_sqe s = {.opcode = NVME_CMD_READ};

	memset(bar, 0, 0x2000);
	memset(cq, 0, 4096);
	snprintf(c.name, sizeof(c.name), "0000:00:04.0");
	c.bar = bar;
	c.bar_len = 0x2000;
	c.dstrd = 4;
	*q = (struct nvme_pci_queue){.c = &c,
				     .qid = 2,
				     .depth = 8,
				     .sq = sq,
				     .cq = cq,
				     .phase = 1,
				     .ctx = ctx,
				     .free = free_ids,
				     .irq_fd = -1};
	for (unsigned i = 7; i > 0; i--)
		q->free[q->nfree++] = (uint16_t)(i - 1);
	cid_a = nvme_pci_reserve(q);
	cid_b = nvme_pci_reserve(q);
	ck_assert_int_ge(cid_a, 0);
	ck_assert_int_ne(cid_a, cid_b);
	s.cid = (uint16_t)cid_a;
	nvme_pci_submit(q, &s, &a);
	s.cid = (uint16_t)cid_b;
	nvme_pci_submit(q, &s, &b);
	/* nothing rung until ring: then SQ 2's tail doorbell (0x1000 + 2 * 2 * 4) says 2 */
	ck_assert_uint_eq(*(uint32_t *)(bar + 0x1010), 0);
	nvme_pci_ring(q);
	ck_assert_uint_eq(*(uint32_t *)(bar + 0x1010), 2);
	ck_assert_uint_eq(sq[1].cid, cid_b);

	/* a reply for another SQ, one for a cid never sent, then the two real ones */
	post(q, &tail, &phase, 3, (uint16_t)cid_a, 0);
	post(q, &tail, &phase, 2, 6, 0);
	post(q, &tail, &phase, 2, (uint16_t)cid_b, NVME_STATUS(NVME_SCT_MEDIA, NVME_SC_READ_ERROR));
	post(q, &tail, &phase, 2, (uint16_t)cid_a, 0);
	ck_assert_uint_eq(nvme_pci_reap(q, log_done, &log), 4);
	ck_assert_uint_eq(q->bad_cqes, 2);
	ck_assert_uint_eq(log.n, 2);
	ck_assert_ptr_eq(log.ctx[0], &b);
	ck_assert_uint_eq(log.status[0], NVME_STATUS(NVME_SCT_MEDIA, NVME_SC_READ_ERROR));
	ck_assert_ptr_eq(log.ctx[1], &a);
	ck_assert_uint_eq(log.status[1], 0);
	/* CQ 2's head doorbell (0x1000 + (2 * 2 + 1) * 4) moved past all four */
	ck_assert_uint_eq(*(uint32_t *)(bar + 0x1014), 4);
	/* a repeated reply for a completed cid is refused too */
	post(q, &tail, &phase, 2, (uint16_t)cid_a, 0);
	ck_assert_uint_eq(nvme_pci_reap(q, log_done, &log), 1);
	ck_assert_uint_eq(log.n, 2);
	ck_assert_uint_eq(q->bad_cqes, 3);
	/* nothing new: nothing taken (the old entries carry last pass's tag after a wrap) */
	ck_assert_uint_eq(nvme_pci_reap(q, log_done, &log), 0);
	ck_assert_uint_eq(q->nfree, 7);
	free(bar);
	free(sq);
	free(cq);
}
END_TEST

static Suite *nvme_pci_suite(void)
{
	Suite *s = suite_create("nvme_pci");
	TCase *tc = tcase_create("driver");

	tcase_add_test(tc, prp_one_two_many);
	tcase_add_test(tc, prp_refusals);
	tcase_add_test(tc, cqe_checks);
	tcase_add_test(tc, status_names);
	tcase_add_test(tc, queue_submit_reap);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return testutil_run_suite(nvme_pci_suite());
}
