/* softssd's fetch: a worker takes new SQEs of one queue pair (up to SSD_QP_BUDGET a pass) from
 * its SQ into private copies, never more than its CQ has room for, and starts them. */
#include <string.h>

#include "softssd/qpair_int.h"

/* Starts up to SSD_QP_BUDGET new commands of qp. */
unsigned ssd_qp_fetch(struct ssd_worker *w, struct ssd_qp *qp, uint64_t now)
{
	uint32_t tail = ssd_load_db(qp->sq_tail_db), cqh = ssd_load_db(qp->cq_head_db);
	unsigned n = 0;

	if (cqh < qp->cq_depth)
		qp->cq_head = cqh;
	if (tail >= qp->sq_depth || cqh >= qp->cq_depth) {
		/* a real controller would post an asynchronous event; this one ignores the write */
		if (!qp->bad_db)
			CTR_ADD(qp, errors, 1);
		qp->bad_db = true;
		if (tail >= qp->sq_depth)
			return 0;
	}
	qp->last_tail = tail;
	qp->stalled = false;
	while (qp->sq_head != tail && n < SSD_QP_BUDGET) {
		uint32_t room = nvmeq_room(qp->cq_head, qp->cq_tail, qp->cq_depth);
		struct ssd_req *req;

		if (qp->inflight >= room || !qp->free_reqs) {
			/* never overwrite an entry the guest has not consumed */
			qp->stalled = qp->inflight >= room;
			break;
		}
		if (w->ring_inflight >= SSD_RING_ENTRIES || (w->nq && !w->nq->nfree))
			break;
		req = qp->free_reqs;
		qp->free_reqs = req->next;
		memcpy(&req->sqe, &qp->sq[qp->sq_head], sizeof(req->sqe));
		nvmeq_step(&qp->sq_head, qp->sq_depth);
		qp->inflight++;
		ssd_req_start(w, req, now);
		n++;
	}
	if (n)
		CTR_ADD(qp, polls, 1);
	return n;
}
