/* vNVMe controller state for snapshots (nvme_ctrl.h): a fixed head (registers, features, async
 * events, error log, shadow doorbell addresses), the per-vector interrupt configuration, one
 * record per queue that exists, then the CMB's bytes when they are not all zero. A restore reads
 * bytes from a file: every field is checked before the controller is touched. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lightiov/nvmeq.h"
#include "nvme_int.h"

#define NVME_SNAP_VERSION 1u

struct nvme_snap_head {
	uint32_t version;
	uint32_t nq; /* queue slots: max_ioqs + 1 */
	uint32_t nvectors;
	uint32_t nrec; /* queue records that follow the vector table */
	uint64_t cap, ns_size, cmb_size;
	uint32_t cc, csts, intms, aqa;
	uint64_t asq, acq, cmbmsc;
	uint32_t gen, qgen;
	uint32_t nsqa, ncqa, nq_set, cmb_saved;
	uint64_t dbbuf_dbs, dbbuf_eis;
	uint32_t feat_arb, feat_pm, feat_temp_thresh, feat_err_rec;
	uint32_t feat_vwc, feat_coalesce, feat_aec, feat_wr_atomic;
	uint16_t aer_cids[NVME_CTRL_AERL + 1];
	uint32_t naer;
	uint32_t ae_queue[NVME_AE_QUEUE];
	uint32_t nae, ae_masked, pad;
	uint64_t err_count;
	struct nvme_error_log err_last;
	uint64_t units_read, units_written;
};
_Static_assert(sizeof(struct nvme_snap_head) == 328, "vNVMe state head layout");

/* One SQ or CQ. */
struct nvme_snap_queue {
	uint16_t qid;
	uint8_t is_cq;
	uint8_t ien;   /* CQ */
	uint16_t link; /* SQ: its CQ; CQ: its vector */
	uint8_t phase; /* CQ */
	uint8_t pad;
	uint32_t size, head, tail, gen;
	uint64_t base;
};
_Static_assert(sizeof(struct nvme_snap_queue) == 32, "vNVMe queue record layout");

#define NVME_SNAP_CSTS_BITS   (NVME_CSTS_RDY | NVME_CSTS_CFS | NVME_CSTS_SHST_MASK)
#define NVME_SNAP_CMBMSC_BITS (NVME_CMBMSC_CBA_MASK | NVME_CMBMSC_CMSE | NVME_CMBMSC_CRE)

/* The serial without the blanks Identify pads it with: the name messages use. */
static void ctrl_name(const struct nvme_ctrl *c, char sn[21])
{
	size_t n = strnlen(c->p.serial, 20);

	while (n && c->p.serial[n - 1] == ' ')
		n--;
	memcpy(sn, c->p.serial, n);
	sn[n] = 0;
}

static bool cmb_nonzero(const struct nvme_ctrl *c)
{
	for (uint64_t i = 0; c->cmb && i < c->p.cmb_size; i++)
		if (c->cmb[i])
			return true;
	return false;
}

static unsigned count_queues(const struct nvme_ctrl *c)
{
	unsigned n = 0;

	for (unsigned q = 0; q < c->nq; q++)
		n += c->sqs[q].valid + c->cqs[q].valid;
	return n;
}

/* Why the controller cannot be saved now, or NULL. Lock held. */
static const char *unsaveable(const struct nvme_ctrl *c)
{
	if (!c->paused)
		return "the controller is not paused";
	if (c->inflight || c->resetting)
		return "commands in flight";
	if (c->st.bound && !c->save_bound)
		return "I/O queues bound to a backend";
	return NULL;
}

static size_t state_size_locked(const struct nvme_ctrl *c, bool *cmb)
{
	*cmb = cmb_nonzero(c);
	return sizeof(struct nvme_snap_head) + c->p.nvectors * sizeof(uint32_t) +
	       count_queues(c) * sizeof(struct nvme_snap_queue) + (*cmb ? c->p.cmb_size : 0);
}

size_t nvme_ctrl_state_size(struct nvme_ctrl *c, char *err, unsigned errlen)
{
	const char *why;
	size_t n = 0;
	char sn[21];
	bool cmb;

	ctrl_name(c, sn);
	pthread_mutex_lock(&c->lock);
	why = unsaveable(c);
	if (why)
		snprintf(err, errlen, "nvme %s: cannot be saved: %s", sn, why);
	else
		n = state_size_locked(c, &cmb);
	pthread_mutex_unlock(&c->lock);
	return n;
}

int nvme_ctrl_save(struct nvme_ctrl *c, void *buf, size_t len, char *err, unsigned errlen)
{
	struct nvme_snap_head h;
	uint8_t *p = buf;
	const char *why;
	size_t need;
	char sn[21];
	bool cmb;

	ctrl_name(c, sn);
	pthread_mutex_lock(&c->lock);
	why = unsaveable(c);
	if (why) {
		snprintf(err, errlen, "nvme %s: cannot be saved: %s", sn, why);
		pthread_mutex_unlock(&c->lock);
		return -EBUSY;
	}
	need = state_size_locked(c, &cmb);
	if (len != need) {
		snprintf(err, errlen, "nvme %s: state needs %zu bytes, %zu given", sn, need, len);
		pthread_mutex_unlock(&c->lock);
		return -ENOSPC;
	}
	memset(&h, 0, sizeof(h));
	h.version = NVME_SNAP_VERSION;
	h.nq = c->nq;
	h.nvectors = c->p.nvectors;
	h.nrec = count_queues(c);
	h.cap = c->cap;
	h.ns_size = c->p.size;
	h.cmb_size = c->cmb ? c->p.cmb_size : 0;
	h.cc = c->cc;
	h.csts = c->csts;
	h.intms = c->intms;
	h.aqa = c->aqa;
	h.asq = c->asq;
	h.acq = c->acq;
	h.cmbmsc = c->cmbmsc;
	h.gen = c->gen;
	h.qgen = c->qgen;
	h.nsqa = c->nsqa;
	h.ncqa = c->ncqa;
	h.nq_set = c->nq_set;
	h.cmb_saved = cmb;
	h.dbbuf_dbs = c->dbbuf_dbs;
	h.dbbuf_eis = c->dbbuf_eis;
	h.feat_arb = c->feat_arb;
	h.feat_pm = c->feat_pm;
	h.feat_temp_thresh = c->feat_temp_thresh;
	h.feat_err_rec = c->feat_err_rec;
	h.feat_vwc = c->feat_vwc;
	h.feat_coalesce = c->feat_coalesce;
	h.feat_aec = c->feat_aec;
	h.feat_wr_atomic = c->feat_wr_atomic;
	memcpy(h.aer_cids, c->aer_cids, sizeof(h.aer_cids));
	h.naer = c->naer;
	memcpy(h.ae_queue, c->ae_queue, sizeof(h.ae_queue));
	h.nae = c->nae;
	h.ae_masked = c->ae_masked;
	h.err_count = c->err_count;
	h.err_last = c->err_last;
	h.units_read = c->units_read;
	h.units_written = c->units_written;
	memcpy(p, &h, sizeof(h));
	p += sizeof(h);
	memcpy(p, c->feat_ivc, c->p.nvectors * sizeof(uint32_t));
	p += c->p.nvectors * sizeof(uint32_t);
	for (unsigned q = 0; q < c->nq; q++) {
		const struct nvme_sq *sq = &c->sqs[q];
		const struct nvme_cq *cq = &c->cqs[q];
		struct nvme_snap_queue r;

		if (cq->valid) {
			r = (struct nvme_snap_queue){.qid = (uint16_t)q,
						     .is_cq = 1,
						     .ien = cq->ien,
						     .link = cq->vector,
						     .phase = cq->phase,
						     .size = cq->size,
						     .head = cq->head,
						     .tail = cq->tail,
						     .base = cq->base};
			memcpy(p, &r, sizeof(r));
			p += sizeof(r);
		}
		if (sq->valid) {
			r = (struct nvme_snap_queue){.qid = (uint16_t)q,
						     .link = sq->cqid,
						     .size = sq->size,
						     .head = sq->head,
						     .tail = sq->tail,
						     .gen = sq->gen,
						     .base = sq->base};
			memcpy(p, &r, sizeof(r));
			p += sizeof(r);
		}
	}
	if (cmb)
		memcpy(p, c->cmb, c->p.cmb_size);
	pthread_mutex_unlock(&c->lock);
	return 0;
}

#define BAD(...)                                                                                   \
	do {                                                                                       \
		snprintf(err, errlen, __VA_ARGS__);                                                \
		goto bad;                                                                          \
	} while (0)

/* The head's registers and features against this controller and the rules of guest writes. */
static int check_head(const struct nvme_ctrl *c, const struct nvme_snap_head *h, size_t len,
		      char *err, unsigned errlen)
{
	char sn[21];
	uint64_t need;

	ctrl_name(c, sn);
	if (h->version != NVME_SNAP_VERSION)
		BAD("nvme %s: state version %u, this lvmm reads %u", sn, h->version,
		    NVME_SNAP_VERSION);
	if (h->nq != c->nq || h->nvectors != c->p.nvectors || h->cap != c->cap ||
	    h->ns_size != c->p.size || h->cmb_size != (c->cmb ? c->p.cmb_size : 0))
		BAD("nvme %s: saved with %u queues, %u vectors, CAP 0x%llx, %llu bytes, CMB "
		    "%llu; the config makes %u, %u, 0x%llx, %llu, %llu",
		    sn, h->nq - 1, h->nvectors, (unsigned long long)h->cap,
		    (unsigned long long)h->ns_size, (unsigned long long)h->cmb_size, c->nq - 1,
		    c->p.nvectors, (unsigned long long)c->cap, (unsigned long long)c->p.size,
		    (unsigned long long)(c->cmb ? c->p.cmb_size : 0));
	if (h->nrec > 2 * (uint64_t)c->nq || h->cmb_saved > 1 || (h->cmb_saved && !c->cmb))
		BAD("nvme %s: %u queue records, CMB flag %u", sn, h->nrec, h->cmb_saved);
	need = sizeof(*h) + (uint64_t)h->nvectors * sizeof(uint32_t) +
	       (uint64_t)h->nrec * sizeof(struct nvme_snap_queue) +
	       (h->cmb_saved ? c->p.cmb_size : 0);
	if (len != need)
		BAD("nvme %s: state of %zu bytes, its head describes %llu", sn, len,
		    (unsigned long long)need);
	if (h->csts & ~(uint32_t)NVME_SNAP_CSTS_BITS || h->aqa & ~0x0fff0fffu ||
	    h->cmbmsc & ~(uint64_t)NVME_SNAP_CMBMSC_BITS || (!c->cmb && h->cmbmsc))
		BAD("nvme %s: CSTS 0x%x, AQA 0x%x or CMBMSC 0x%llx has bits no write sets", sn,
		    h->csts, h->aqa, (unsigned long long)h->cmbmsc);
	if ((h->csts & NVME_CSTS_RDY) && !(h->cc & NVME_CC_EN))
		BAD("nvme %s: CSTS.RDY without CC.EN", sn);
	if (h->nsqa < 1 || h->nsqa > c->p.max_ioqs || h->ncqa < 1 || h->ncqa > c->p.max_ioqs ||
	    h->nq_set > 1)
		BAD("nvme %s: Number of Queues %u/%u outside 1..%u", sn, h->nsqa, h->ncqa,
		    c->p.max_ioqs);
	if ((h->feat_pm & 0x1f) || h->feat_temp_thresh > 0xffff || h->feat_vwc > 1 ||
	    h->feat_coalesce > 0xffff || h->feat_wr_atomic > 1 || h->feat_aec > 0x3ff)
		BAD("nvme %s: a feature value no Set Features makes", sn);
	if (h->naer > NVME_CTRL_AERL + 1 || h->nae > NVME_AE_QUEUE || h->ae_masked > 0xff)
		BAD("nvme %s: %u async event requests (at most %u), %u events (at most %u)", sn,
		    h->naer, NVME_CTRL_AERL + 1, h->nae, NVME_AE_QUEUE);
	for (unsigned i = 0; i < h->nae; i++)
		if (h->ae_queue[i] >> 24)
			BAD("nvme %s: async event 0x%x is malformed", sn, h->ae_queue[i]);
	if ((h->dbbuf_dbs != 0) != (h->dbbuf_eis != 0) ||
	    ((h->dbbuf_dbs | h->dbbuf_eis) & (NVME_CTRL_PAGE - 1)) ||
	    (h->dbbuf_dbs && (c->p.no_dbbuf || !gmem_ptr(c->gm, h->dbbuf_dbs, NVME_CTRL_PAGE) ||
			      !gmem_ptr(c->gm, h->dbbuf_eis, NVME_CTRL_PAGE))))
		BAD("nvme %s: shadow doorbell buffers 0x%llx/0x%llx are not pages of guest RAM", sn,
		    (unsigned long long)h->dbbuf_dbs, (unsigned long long)h->dbbuf_eis);
	if (!(h->csts & NVME_CSTS_RDY) && (h->nrec || h->naer || h->nae || h->dbbuf_dbs))
		BAD("nvme %s: queues, events or shadow doorbells on a controller not ready", sn);
	if ((h->csts & NVME_CSTS_RDY) && h->nrec < 2)
		BAD("nvme %s: a ready controller without its admin queues", sn);
	return 0;
bad:
	return -EINVAL;
}

/* The queue records into sqs/cqs (scratch arrays of nq entries), checked as Create I/O
 * SQ/CQ and the admin queue registers check them. The CMB must be in place (nvme_in_cmb). */
static int load_queues(struct nvme_ctrl *c, const struct nvme_snap_head *h, const uint8_t *p,
		       struct nvme_sq *sqs, struct nvme_cq *cqs, char *err, unsigned errlen)
{
	char sn[21];
	uint32_t maxq = NVME_CAP_MQES(c->cap) + 1u;
	unsigned i, q;

	ctrl_name(c, sn);
	for (i = 0; i < h->nrec; i++) {
		struct nvme_snap_queue r;
		uint64_t bytes;

		memcpy(&r, p + i * sizeof(r), sizeof(r));
		if (r.qid >= c->nq || r.is_cq > 1 ||
		    (r.is_cq ? cqs[r.qid].valid : sqs[r.qid].valid))
			BAD("nvme %s: queue record %u: %s %u is out of range or twice", sn, i,
			    r.is_cq ? "CQ" : "SQ", r.qid);
		if (r.qid == 0 &&
		    r.size != (r.is_cq ? NVME_AQA_ACQS(h->aqa) : NVME_AQA_ASQS(h->aqa)) + 1u)
			BAD("nvme %s: admin %s of %u entries, AQA says %u", sn,
			    r.is_cq ? "CQ" : "SQ", r.size,
			    (r.is_cq ? NVME_AQA_ACQS(h->aqa) : NVME_AQA_ASQS(h->aqa)) + 1u);
		if (r.qid == 0 && r.base != (r.is_cq ? h->acq : h->asq))
			BAD("nvme %s: admin %s at 0x%llx, its register says otherwise", sn,
			    r.is_cq ? "CQ" : "SQ", (unsigned long long)r.base);
		if (r.size < 2 || (r.qid && r.size > maxq) || r.head >= r.size ||
		    r.tail >= r.size || (r.is_cq && r.phase > 1) || r.ien > 1 || r.pad)
			BAD("nvme %s: %s %u: size %u (2..%u), head %u, tail %u or flags out of "
			    "range",
			    sn, r.is_cq ? "CQ" : "SQ", r.qid, r.size, maxq, r.head, r.tail);
		bytes = (uint64_t)r.size *
			(r.is_cq ? sizeof(struct nvme_cqe) : sizeof(struct nvme_sqe));
		if (!r.base || (r.base & (NVME_CTRL_PAGE - 1)))
			BAD("nvme %s: %s %u at 0x%llx is not page aligned", sn,
			    r.is_cq ? "CQ" : "SQ", r.qid, (unsigned long long)r.base);
		if (r.is_cq) {
			struct nvme_cq *cq = &cqs[r.qid];

			if (r.ien && r.link >= c->p.nvectors)
				BAD("nvme %s: CQ %u on vector %u, the function has %u", sn, r.qid,
				    r.link, c->p.nvectors);
			cq->host = nvme_queue_host(c, r.base, bytes, false);
			if (!cq->host)
				BAD("nvme %s: CQ %u at 0x%llx (%llu bytes) is not guest RAM", sn,
				    r.qid, (unsigned long long)r.base, (unsigned long long)bytes);
			cq->valid = true;
			cq->ien = r.ien;
			cq->phase = r.phase;
			cq->vector = r.link;
			cq->size = r.size;
			cq->head = r.head;
			cq->tail = r.tail;
			cq->base = r.base;
		} else {
			struct nvme_sq *sq = &sqs[r.qid];

			if ((r.qid == 0) != (r.link == 0) || r.link >= c->nq)
				BAD("nvme %s: SQ %u on CQ %u", sn, r.qid, r.link);
			sq->host = nvme_queue_host(c, r.base, bytes, true);
			if (!sq->host)
				BAD("nvme %s: SQ %u at 0x%llx (%llu bytes) is neither guest RAM "
				    "nor the CMB",
				    sn, r.qid, (unsigned long long)r.base,
				    (unsigned long long)bytes);
			sq->valid = true;
			sq->qid = r.qid;
			sq->cqid = r.link;
			sq->size = r.size;
			sq->head = r.head;
			sq->tail = r.tail;
			sq->gen = r.gen;
			sq->base = r.base;
		}
	}
	if (!sqs[0].valid || !cqs[0].valid)
		BAD("nvme %s: a ready controller without its admin queues", sn);
	for (q = 0; q < c->nq; q++) {
		if (!sqs[q].valid)
			continue;
		if (!cqs[sqs[q].cqid].valid)
			BAD("nvme %s: SQ %u on CQ %u, which does not exist", sn, q, sqs[q].cqid);
		cqs[sqs[q].cqid].nsq++;
	}
	/* outstanding Async Event Requests hold admin CQ slots, as when they were fetched */
	if (h->naer > nvmeq_room(cqs[0].head, cqs[0].tail, cqs[0].size))
		BAD("nvme %s: %u async event requests, the admin CQ has room for %u", sn, h->naer,
		    nvmeq_room(cqs[0].head, cqs[0].tail, cqs[0].size));
	cqs[0].reserved = h->naer;
	return 0;
bad:
	return -EINVAL;
}

int nvme_ctrl_restore(struct nvme_ctrl *c, const void *buf, size_t len, char *err, unsigned errlen)
{
	const uint8_t *p = buf;
	struct nvme_snap_head h;
	struct nvme_sq *sqs = NULL;
	struct nvme_cq *cqs = NULL;
	const uint8_t *ivc_at, *rec_at, *cmb_at;
	uint64_t old_cmbmsc;
	char sn[21];
	unsigned i;
	int r;

	ctrl_name(c, sn);
	if (len < sizeof(h)) {
		snprintf(err, errlen, "nvme %s: state of %zu bytes is too short", sn, len);
		return -EINVAL;
	}
	memcpy(&h, p, sizeof(h));
	pthread_mutex_lock(&c->lock);
	r = check_head(c, &h, len, err, errlen);
	if (r)
		goto out;
	ivc_at = p + sizeof(h);
	rec_at = p + sizeof(h) + (size_t)h.nvectors * sizeof(uint32_t);
	cmb_at = rec_at + (size_t)h.nrec * sizeof(struct nvme_snap_queue);
	for (i = 0; i < h.nvectors; i++) {
		uint32_t v;

		memcpy(&v, ivc_at + (size_t)i * sizeof(v), sizeof(v));
		if (v > 0x1ffff || (v & 0xffff) != i) {
			snprintf(err, errlen,
				 "nvme %s: interrupt vector configuration 0x%x for vector %u", sn,
				 v, i);
			r = -EINVAL;
			goto out;
		}
	}
	if (c->inflight || c->st.bound || (c->cc & NVME_CC_EN)) {
		snprintf(err, errlen, "nvme %s: restore into a controller already in use", sn);
		r = -EBUSY;
		goto out;
	}
	sqs = calloc(c->nq, sizeof(*sqs));
	cqs = calloc(c->nq, sizeof(*cqs));
	if (!sqs || !cqs) {
		snprintf(err, errlen, "nvme %s: out of memory", sn);
		r = -ENOMEM;
		goto out;
	}
	/* SQs in the CMB are found through CMBMSC (the BAR's address came with the PCI state) */
	old_cmbmsc = c->cmbmsc;
	c->cmbmsc = h.cmbmsc;
	if ((h.csts & NVME_CSTS_RDY) && (r = load_queues(c, &h, rec_at, sqs, cqs, err, errlen))) {
		c->cmbmsc = old_cmbmsc;
		goto out;
	}
	/* checked whole: from here on nothing fails */
	memcpy(c->sqs, sqs, c->nq * sizeof(*sqs));
	memcpy(c->cqs, cqs, c->nq * sizeof(*cqs));
	if (h.cmb_saved)
		memcpy(c->cmb, cmb_at, c->p.cmb_size);
	c->cc = h.cc;
	c->csts = h.csts;
	c->intms = h.intms;
	c->aqa = h.aqa;
	c->asq = h.asq;
	c->acq = h.acq;
	c->gen = h.gen;
	c->qgen = h.qgen;
	c->nsqa = h.nsqa;
	c->ncqa = h.ncqa;
	c->nq_set = h.nq_set;
	c->dbbuf_dbs = h.dbbuf_dbs;
	c->dbbuf_eis = h.dbbuf_eis;
	c->feat_arb = h.feat_arb;
	c->feat_pm = h.feat_pm;
	c->feat_temp_thresh = h.feat_temp_thresh;
	c->feat_err_rec = h.feat_err_rec;
	c->feat_vwc = h.feat_vwc;
	c->feat_coalesce = h.feat_coalesce;
	c->feat_aec = h.feat_aec;
	c->feat_wr_atomic = h.feat_wr_atomic;
	memcpy(c->feat_ivc, ivc_at, h.nvectors * sizeof(uint32_t));
	memcpy(c->aer_cids, h.aer_cids, sizeof(c->aer_cids));
	c->naer = h.naer;
	memcpy(c->ae_queue, h.ae_queue, sizeof(c->ae_queue));
	c->nae = h.nae;
	c->ae_masked = (uint8_t)h.ae_masked;
	c->err_count = h.err_count;
	c->err_last = h.err_last;
	c->units_read = h.units_read;
	c->units_written = h.units_written;
	c->coal_cqs = 0;
	c->paused = true; /* the VM resumes it */
	if (c->hooks.vwc && !c->feat_vwc)
		c->hooks.vwc(c->hooks.opaque, false);
	if (c->dbbuf_dbs && c->hooks.dbbuf)
		c->hooks.dbbuf(c->hooks.opaque, true);
	r = 0;
out:
	pthread_mutex_unlock(&c->lock);
	free(sqs);
	free(cqs);
	return r;
}

void nvme_ctrl_set_save_bound(struct nvme_ctrl *c, bool on)
{
	pthread_mutex_lock(&c->lock);
	c->save_bound = on;
	pthread_mutex_unlock(&c->lock);
}

int nvme_ctrl_rebind(struct nvme_ctrl *c, uint16_t sqid, nvme_rebind_fn fn, void *arg, char *err,
		     unsigned errlen)
{
	struct nvme_sq *sq;
	struct nvme_cq *cq;
	char sn[21];
	int r = 0;

	ctrl_name(c, sn);
	pthread_mutex_lock(&c->lock);
	if (!sqid || sqid >= c->nq || !c->sqs[sqid].valid || c->sqs[sqid].bound) {
		snprintf(err, errlen, "nvme %s: bound queue pair %u: no such SQ in the state", sn,
			 sqid);
		r = -EINVAL;
		goto out;
	}
	sq = &c->sqs[sqid];
	cq = &c->cqs[sq->cqid];
	/* as at Create I/O SQ: one SQ per backend CQ, which lvmm never posted to */
	if (cq->nsq != 1 || cq->head != cq->tail || cq->reserved) {
		snprintf(err, errlen,
			 "nvme %s: bound queue pair %u: its CQ %u is shared or not empty", sn, sqid,
			 sq->cqid);
		r = -EINVAL;
		goto out;
	}
	{
		struct nvme_qp_bind b = {
		    .sqid = sqid,
		    .cqid = sq->cqid,
		    .sq_depth = sq->size,
		    .cq_depth = cq->size,
		    .sq_gpa = sq->base,
		    .cq_gpa = cq->base,
		    .sq_in_cmb =
			nvme_in_cmb(c, sq->base, (uint64_t)sq->size * sizeof(struct nvme_sqe)),
		    .ien = cq->ien,
		    .vector = cq->vector,
		    .dbbuf_dbs = c->dbbuf_dbs,
		    .dbbuf_eis = c->dbbuf_eis,
		    .dstrd = c->p.dstrd,
		};
		uint16_t st = fn(c->hooks.opaque, &b, arg, &sq->handle);

		if (st) {
			snprintf(
			    err, errlen,
			    "nvme %s: bound queue pair %u: its saved state was refused (out of "
			    "range, or by the backend: status 0x%x)",
			    sn, sqid, st);
			r = -EINVAL;
			goto out;
		}
	}
	sq->bound = true;
	cq->bound = true;
	c->st.bound++;
out:
	pthread_mutex_unlock(&c->lock);
	return r;
}

unsigned nvme_ctrl_io_sqs(struct nvme_ctrl *c)
{
	unsigned q, n = 0;

	pthread_mutex_lock(&c->lock);
	for (q = 1; q < c->nq; q++)
		n += c->sqs[q].valid;
	pthread_mutex_unlock(&c->lock);
	return n;
}
