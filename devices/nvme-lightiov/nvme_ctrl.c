/* vNVMe controller core: BAR0 registers, enable/reset/shutdown, doorbells (MMIO and shadow),
 * SQ fetch with CQ space reservation, CQE posting with phase tags, interrupts, async events. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lightiov/nvmeq.h"
#include "nvme_int.h"

static inline uint32_t db_stride(const struct nvme_ctrl *c)
{
	return 4u << c->p.dstrd;
}

uint64_t nvme_ctrl_bar0_size(const struct nvme_ctrl *c)
{
	uint64_t need = NVME_REG_DBS + (uint64_t)2 * c->nq * db_stride(c);
	uint64_t sz = 0x4000;

	while (sz < need)
		sz <<= 1;
	return sz;
}

/* A queue ring as a host pointer: guest RAM, or the CMB for SQs when the host placed it there. */
/* NVMe 1.4: the controller memory space is enabled (CMBMSC.CMSE) at the base the host gave
 * (CBA). Controller addresses are guest-physical here, so the only base that works is where the
 * CMB BAR decodes now; any other reads back as Controller Base Address Invalid. */
static bool cmb_space_on(const struct nvme_ctrl *c)
{
	return c->cmb && c->cmb_gpa != ~0ULL && (c->cmbmsc & NVME_CMBMSC_CRE) &&
	       (c->cmbmsc & NVME_CMBMSC_CMSE) && (c->cmbmsc & NVME_CMBMSC_CBA_MASK) == c->cmb_gpa;
}

bool nvme_in_cmb(const struct nvme_ctrl *c, uint64_t base, uint64_t bytes)
{
	return cmb_space_on(c) && base >= c->cmb_gpa && base - c->cmb_gpa < c->p.cmb_size &&
	       bytes <= c->p.cmb_size - (base - c->cmb_gpa);
}

uint8_t *nvme_queue_host(struct nvme_ctrl *c, uint64_t base, uint64_t bytes, bool allow_cmb)
{
	if (allow_cmb && nvme_in_cmb(c, base, bytes))
		return c->cmb + (base - c->cmb_gpa);
	return gmem_ptr(c->gm, base, bytes);
}

/* The backend lets go of the queue pair; its CQ becomes an ordinary (empty) one again. */
void nvme_sq_unbind(struct nvme_ctrl *c, struct nvme_sq *sq)
{
	if (!sq->bound)
		return;
	if (c->hooks.unbind)
		c->hooks.unbind(c->hooks.opaque, sq->qid, sq->handle);
	sq->bound = false;
	if (sq->cqid < c->nq)
		c->cqs[sq->cqid].bound = false;
	if (c->st.bound)
		c->st.bound--;
}

static void unbind_all_locked(struct nvme_ctrl *c)
{
	unsigned q;

	for (q = 1; c->st.bound && q < c->nq; q++)
		nvme_sq_unbind(c, &c->sqs[q]);
}

void nvme_ctrl_unbind_all(struct nvme_ctrl *c)
{
	pthread_mutex_lock(&c->lock);
	unbind_all_locked(c);
	pthread_mutex_unlock(&c->lock);
}

unsigned nvme_ctrl_bound(struct nvme_ctrl *c, uint16_t *qid, uint32_t *handle, unsigned max)
{
	unsigned q, n = 0;

	pthread_mutex_lock(&c->lock);
	for (q = 1; q < c->nq && n < max; q++) {
		if (c->sqs[q].valid && c->sqs[q].bound) {
			qid[n] = (uint16_t)q;
			handle[n++] = c->sqs[q].handle;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return n;
}

static void ctrl_irq(struct nvme_ctrl *c, unsigned vector)
{
	c->st.irqs++;
	if (c->hooks.irq)
		c->hooks.irq(c->hooks.opaque, vector);
}

/* Pin-based interrupts (NVMe base specification, interrupts without MSI-X): the pin is asserted
 * while an interrupt-enabled CQ holds entries the host has not consumed (its head doorbell
 * behind the tail) and INTMS bit 0 is clear; every CQ shares the one pin. Bound queue pairs
 * signal their MSI-X vectors themselves and are not counted. Lock held. */
static void ctrl_intx(struct nvme_ctrl *c)
{
	bool level = false;

	if (!c->hooks.intx)
		return;
	if (__atomic_load_n(&c->intx_open, __ATOMIC_ACQUIRE) && !(c->intms & 1))
		for (unsigned i = 0; i < c->nq && !level; i++) {
			const struct nvme_cq *cq = &c->cqs[i];

			level = cq->valid && cq->ien && !cq->bound && cq->head != cq->tail;
		}
	if (level != c->intx_level) {
		c->intx_level = level;
		c->hooks.intx(c->hooks.opaque, level);
	}
}

void nvme_ctrl_intx_gate(struct nvme_ctrl *c, bool open)
{
	__atomic_store_n(&c->intx_open, open, __ATOMIC_RELEASE);
}

static uint32_t cq_free(const struct nvme_cq *cq)
{
	return nvmeq_room(cq->head, cq->tail, cq->size);
}

uint64_t nvme_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Interrupt Coalescing (feature 08h): aggregation threshold (0-based) and time (100 us units). */
static uint32_t coal_thr(const struct nvme_ctrl *c)
{
	return c->feat_coalesce & 0xff;
}

static uint32_t coal_time(const struct nvme_ctrl *c)
{
	return (c->feat_coalesce >> 8) & 0xff;
}

/*
 * Coalescing applies to I/O CQs whose vector has Coalescing Disable clear in feature 09h.
 * TIME = 0 means no delay is allowed and THR = 0 means one entry per interrupt, so either turns
 * it off.
 */
static bool cq_coalesced(const struct nvme_ctrl *c, const struct nvme_cq *cq)
{
	return cq != &c->cqs[0] && coal_thr(c) && coal_time(c) && cq->vector < c->p.nvectors &&
	       !(c->feat_ivc[cq->vector] & NVME_FEAT_IVC_CD);
}

/* An entry was posted: interrupt now, or once THR + 1 entries are pending or TIME * 100 us after
 * the first of them (nvme_ctrl_irq_tick), whichever comes first. */
static void cq_signal(struct nvme_ctrl *c, struct nvme_cq *cq)
{
	if (cq_coalesced(c, cq)) {
		if (cq->coal_pending++ == 0) {
			cq->coal_deadline = nvme_now_ns() + coal_time(c) * 100000ULL;
			c->coal_cqs++;
		}
		if (cq->coal_pending <= coal_thr(c))
			return;
	}
	cq->coal_pending = 0;
	ctrl_irq(c, cq->vector);
}

int64_t nvme_ctrl_irq_tick(struct nvme_ctrl *c, uint64_t now)
{
	int64_t next = -1;
	unsigned q;

	pthread_mutex_lock(&c->lock);
	/* the I/O thread ticks on every wake-up: no scan of up to 64K CQs unless one waits */
	if (!c->coal_cqs) {
		pthread_mutex_unlock(&c->lock);
		return -1;
	}
	c->coal_cqs = 0; /* recounted: CQs deleted or reset while waiting drop out here */
	for (q = 1; q < c->nq; q++) {
		struct nvme_cq *cq = &c->cqs[q];

		if (!cq->valid || !cq->coal_pending)
			continue;
		/* also when coalescing was turned off while entries waited */
		if (now >= cq->coal_deadline || !cq_coalesced(c, cq)) {
			cq->coal_pending = 0;
			if (cq->ien)
				ctrl_irq(c, cq->vector);
			continue;
		}
		c->coal_cqs++;
		if (next < 0 || (int64_t)(cq->coal_deadline - now) < next)
			next = (int64_t)(cq->coal_deadline - now);
	}
	pthread_mutex_unlock(&c->lock);
	return next;
}

/* Writes one CQE; space was reserved when the command was fetched. */
static void cq_write(struct nvme_ctrl *c, struct nvme_cq *cq, uint16_t sqid, uint16_t sqhead,
		     uint16_t cid, uint16_t status, uint32_t dw0)
{
	struct nvme_cqe *e = (struct nvme_cqe *)(cq->host + (uint64_t)cq->tail * sizeof(*e));
	struct nvme_cqe v = {
	    .dw0 = dw0, .sq_head = sqhead, .sq_id = sqid, .cid = cid, .status = status};

	/* the phase tag publishes the entry: it becomes visible last */
	nvmeq_cqe_publish(e, &v, cq->phase);
	if (nvmeq_step(&cq->tail, cq->size))
		cq->phase ^= 1;
	if (cq->ien && !(c->intms & (1u << (cq->vector & 31))))
		cq_signal(c, cq);
	ctrl_intx(c);
}

void nvme_record_error(struct nvme_ctrl *c, uint16_t sqid, uint16_t cid, uint16_t status)
{
	c->err_count++;
	memset(&c->err_last, 0, sizeof(c->err_last));
	c->err_last.error_count = c->err_count;
	c->err_last.sqid = sqid;
	c->err_last.cmdid = cid;
	c->err_last.status_field = (uint16_t)(status << 1);
	c->err_last.param_error_location = 0xffff;
}

void nvme_post_cqe(struct nvme_ctrl *c, struct nvme_sq *sq, uint16_t cid, uint16_t status,
		   uint32_t dw0)
{
	struct nvme_cq *cq = &c->cqs[sq->cqid];

	if (cq->reserved)
		cq->reserved--;
	if (!cq->valid)
		return;
	cq_write(c, cq, sq->qid, (uint16_t)sq->head, cid, status, dw0);
}

/* Pairs outstanding Async Event Requests with queued events, as admin CQ space allows. */
void nvme_events_deliver(struct nvme_ctrl *c)
{
	struct nvme_cq *acq = &c->cqs[0];
	unsigned i = 0;

	while (i < c->nae && c->naer && acq->valid && cq_free(acq) > acq->reserved) {
		uint32_t ev = c->ae_queue[i];
		uint8_t type = ev & 0x7;

		if (c->ae_masked & (1u << type)) {
			i++;
			continue;
		}
		c->ae_masked |= 1u << type;
		cq_write(c, acq, 0, (uint16_t)c->sqs[0].head, c->aer_cids[0], NVME_OK, ev);
		memmove(c->aer_cids, c->aer_cids + 1, (c->naer - 1) * sizeof(c->aer_cids[0]));
		c->naer--;
		memmove(c->ae_queue + i, c->ae_queue + i + 1, (c->nae - i - 1) * sizeof(uint32_t));
		c->nae--;
	}
}

void nvme_raise_event(struct nvme_ctrl *c, uint8_t type, uint8_t info, uint8_t log)
{
	uint32_t ev = type | (uint32_t)info << 8 | (uint32_t)log << 16;
	unsigned i;

	for (i = 0; i < c->nae; i++)
		if (c->ae_queue[i] == ev)
			return; /* already pending: the host learns of it once */
	if (c->nae < NVME_AE_QUEUE)
		c->ae_queue[c->nae++] = ev;
	nvme_events_deliver(c);
}

static void queues_reset(struct nvme_ctrl *c)
{
	memset(c->sqs, 0, c->nq * sizeof(*c->sqs));
	memset(c->cqs, 0, c->nq * sizeof(*c->cqs));
}

/* Controller Level Reset: everything but the registers the host owns goes back to defaults. */
static void ctrl_reset(struct nvme_ctrl *c)
{
	bool had_dbbuf = c->dbbuf_dbs != 0;

	c->gen++;
	unbind_all_locked(c); /* the backend stops fetching before the rings are forgotten */
	queues_reset(c);
	c->nsqa = c->ncqa = c->p.max_ioqs;
	c->nq_set = false;
	c->dbbuf_dbs = c->dbbuf_eis = 0;
	c->naer = 0;
	c->nae = 0;
	c->ae_masked = 0;
	c->intms = 0;
	nvme_features_reset(c);
	if (had_dbbuf && c->hooks.dbbuf)
		c->hooks.dbbuf(c->hooks.opaque, false);
	c->csts &= ~(NVME_CSTS_SHST_MASK | NVME_CSTS_CFS);
	if (c->inflight)
		c->resetting = true; /* RDY drops when the backend has returned every request */
	else
		c->csts &= ~NVME_CSTS_RDY;
}

void nvme_ctrl_flr(struct nvme_ctrl *c)
{
	pthread_mutex_lock(&c->lock);
	/* a Controller Level Reset first (queue pairs handed back), then what only a function
	 * reset clears: the registers the host owns */
	ctrl_reset(c);
	c->cc = 0;
	c->aqa = 0;
	c->asq = c->acq = 0;
	c->intms = 0;
	ctrl_intx(c);
	/* CMBMSC stays, as across CC.EN = 0: Linux writes it once, at probe, and restores only
	 * config space after an FLR, so a cleared one would leave its CMB queues refused */
	c->st.flrs++;
	pthread_mutex_unlock(&c->lock);
}

static bool ctrl_enable(struct nvme_ctrl *c)
{
	uint32_t asqs = NVME_AQA_ASQS(c->aqa) + 1, acqs = NVME_AQA_ACQS(c->aqa) + 1;
	struct nvme_sq *sq = &c->sqs[0];
	struct nvme_cq *cq = &c->cqs[0];

	if (NVME_CC_CSS(c->cc) != 0 || NVME_CC_MPS(c->cc) != 0 || NVME_CC_AMS(c->cc) != 0 ||
	    asqs < 2 || acqs < 2 || (c->asq & (NVME_CTRL_PAGE - 1)) ||
	    (c->acq & (NVME_CTRL_PAGE - 1)))
		return false;
	cq->host = nvme_queue_host(c, c->acq, (uint64_t)acqs * sizeof(struct nvme_cqe), false);
	sq->host = nvme_queue_host(c, c->asq, (uint64_t)asqs * sizeof(struct nvme_sqe), true);
	if (!cq->host || !sq->host)
		return false;
	cq->valid = true;
	cq->ien = true;
	cq->phase = 1;
	cq->size = acqs;
	cq->base = c->acq;
	cq->nsq = 1;
	sq->valid = true;
	sq->size = asqs;
	sq->base = c->asq;
	sq->gen = ++c->qgen;
	return true;
}

static void cc_write(struct nvme_ctrl *c, uint32_t val)
{
	uint32_t old = c->cc;

	c->cc = val;
	if ((old & NVME_CC_EN) && !(val & NVME_CC_EN)) {
		ctrl_reset(c);
		return;
	}
	if (!(old & NVME_CC_EN) && (val & NVME_CC_EN)) {
		if (c->resetting || (c->csts & NVME_CSTS_RDY))
			return; /* host did not wait for RDY=0; enable takes effect never */
		if (ctrl_enable(c)) {
			c->csts |= NVME_CSTS_RDY;
		} else {
			c->csts |= NVME_CSTS_CFS;
			queues_reset(c);
		}
	}
	if ((val & NVME_CC_EN) && NVME_CC_SHN(val) && !NVME_CC_SHN(old)) {
		/* Nothing is cached beyond the backend: shutdown completes at once. */
		c->csts = (c->csts & ~NVME_CSTS_SHST_MASK) | NVME_CSTS_SHST_CMPLT;
	} else if (!NVME_CC_SHN(val)) {
		c->csts &= ~NVME_CSTS_SHST_MASK;
	}
}

static void ctrl_kick(struct nvme_ctrl *c)
{
	if (c->hooks.kick) {
		c->hooks.kick(c->hooks.opaque);
	} else {
		c->st.wakeups++;
		nvme_ctrl_process_locked(c);
	}
}

static void doorbell_write(struct nvme_ctrl *c, uint64_t off, uint32_t val)
{
	uint64_t idx = (off - NVME_REG_DBS) / db_stride(c);
	uint64_t qid = idx / 2;
	bool is_cq = idx & 1;

	c->st.doorbells++;
	if ((off - NVME_REG_DBS) % db_stride(c) || !(c->csts & NVME_CSTS_RDY) || c->resetting)
		return;
	if (qid >= c->nq || !(is_cq ? c->cqs[qid].valid : c->sqs[qid].valid)) {
		nvme_raise_event(c, NVME_AER_TYPE_ERROR, NVME_AER_ERR_INVALID_DB_REG,
				 NVME_LOG_ERROR);
		return;
	}
	/* A bound queue's doorbell reached lvmm (its page not mapped yet, or packed doorbells
	 * without an ioeventfd): the backend reads the value from its own page or the shadow
	 * buffer, so there is nothing to do here. */
	if (is_cq ? c->cqs[qid].bound : c->sqs[qid].bound)
		return;
	if (is_cq) {
		struct nvme_cq *cq = &c->cqs[qid];

		/* The new head may only consume entries the controller has posted. */
		if (!nvmeq_head_ok(val, cq->head, cq->tail, cq->size)) {
			nvme_raise_event(c, NVME_AER_TYPE_ERROR, NVME_AER_ERR_INVALID_DB_VALUE,
					 NVME_LOG_ERROR);
			return;
		}
		bool was_full = cq_free(cq) <= cq->reserved;

		cq->head = val;
		if (qid == 0)
			nvme_events_deliver(c);
		/* Only a CQ that was holding back SQ fetches needs the I/O thread. */
		if (!was_full)
			return;
	} else {
		struct nvme_sq *sq = &c->sqs[qid];

		if (val >= sq->size) {
			nvme_raise_event(c, NVME_AER_TYPE_ERROR, NVME_AER_ERR_INVALID_DB_VALUE,
					 NVME_LOG_ERROR);
			return;
		}
		sq->tail = val;
	}
	ctrl_kick(c);
}

static uint32_t reg_read32(struct nvme_ctrl *c, uint64_t off)
{
	switch (off) {
	case NVME_REG_CAP:
		return (uint32_t)c->cap;
	case NVME_REG_CAP + 4:
		return (uint32_t)(c->cap >> 32);
	case NVME_REG_VS:
		return NVME_VS_1_4;
	case NVME_REG_INTMS:
	case NVME_REG_INTMC:
		return c->intms;
	case NVME_REG_CC:
		return c->cc;
	case NVME_REG_CSTS:
		if (c->hooks.alive && (c->cc & NVME_CC_EN) && !c->hooks.alive(c->hooks.opaque))
			c->csts |= NVME_CSTS_CFS;
		return c->csts;
	case NVME_REG_AQA:
		return c->aqa;
	case NVME_REG_ASQ:
		return (uint32_t)c->asq;
	case NVME_REG_ASQ + 4:
		return (uint32_t)(c->asq >> 32);
	case NVME_REG_ACQ:
		return (uint32_t)c->acq;
	case NVME_REG_ACQ + 4:
		return (uint32_t)(c->acq >> 32);
	case NVME_REG_CMBLOC:
		return c->cmbmsc & NVME_CMBMSC_CRE ? c->cmbloc : 0;
	case NVME_REG_CMBSZ:
		return c->cmbmsc & NVME_CMBMSC_CRE ? c->cmbsz : 0;
	case NVME_REG_CMBMSC:
		return (uint32_t)c->cmbmsc;
	case NVME_REG_CMBMSC + 4:
		return (uint32_t)(c->cmbmsc >> 32);
	case NVME_REG_CMBSTS:
		return (c->cmbmsc & NVME_CMBMSC_CMSE) && !cmb_space_on(c) ? NVME_CMBSTS_CBAI : 0;
	default:
		return 0;
	}
}

void nvme_ctrl_bar0_read(void *opaque, uint64_t off, void *data, unsigned len)
{
	struct nvme_ctrl *c = opaque;
	uint64_t v = 0;

	pthread_mutex_lock(&c->lock);
	c->st.mmio_exits++;
	/* Doorbells are write-only and unaligned register reads return zero. */
	if (off < NVME_REG_DBS && (off & 3) == 0) {
		v = reg_read32(c, off);
		if (len == 8)
			v |= (uint64_t)reg_read32(c, off + 4) << 32;
	}
	pthread_mutex_unlock(&c->lock);
	memcpy(data, &v, len > 8 ? 8 : len);
}

static void reg_write32(struct nvme_ctrl *c, uint64_t off, uint32_t val)
{
	bool en = c->cc & NVME_CC_EN;

	switch (off) {
	case NVME_REG_INTMS:
		c->intms |= val;
		break;
	case NVME_REG_INTMC:
		c->intms &= ~val;
		break;
	case NVME_REG_CC:
		cc_write(c, val);
		break;
	case NVME_REG_CMBMSC:
	case NVME_REG_CMBMSC + 4:
		/* reserved without a CMB (CAP.CMBS clear); either half may come first (Linux
		 * writes the high one first), so validity is judged on use, not here */
		if (c->cmb) {
			unsigned sh = off == NVME_REG_CMBMSC ? 0 : 32;
			uint64_t v = (c->cmbmsc & ~(0xffffffffULL << sh)) | (uint64_t)val << sh;

			c->cmbmsc = v & (NVME_CMBMSC_CBA_MASK | NVME_CMBMSC_CMSE | NVME_CMBMSC_CRE);
		}
		break;
	case NVME_REG_AQA:
		if (!en)
			c->aqa = val & 0x0fff0fff;
		break;
	case NVME_REG_ASQ:
		if (!en)
			c->asq = (c->asq & ~0xffffffffULL) | val;
		break;
	case NVME_REG_ASQ + 4:
		if (!en)
			c->asq = (c->asq & 0xffffffffULL) | (uint64_t)val << 32;
		break;
	case NVME_REG_ACQ:
		if (!en)
			c->acq = (c->acq & ~0xffffffffULL) | val;
		break;
	case NVME_REG_ACQ + 4:
		if (!en)
			c->acq = (c->acq & 0xffffffffULL) | (uint64_t)val << 32;
		break;
	default:
		break; /* read-only or reserved: ignored */
	}
}

void nvme_ctrl_bar0_write(void *opaque, uint64_t off, const void *data, unsigned len)
{
	struct nvme_ctrl *c = opaque;
	uint64_t v = 0;

	memcpy(&v, data, len > 8 ? 8 : len);
	pthread_mutex_lock(&c->lock);
	c->st.mmio_exits++;
	if (off >= NVME_REG_DBS) {
		if (len == 4 && off < nvme_ctrl_bar0_size(c))
			doorbell_write(c, off, (uint32_t)v);
	} else if ((off & 3) == 0 && (len == 4 || len == 8)) {
		reg_write32(c, off, (uint32_t)v);
		if (len == 8)
			reg_write32(c, off + 4, (uint32_t)(v >> 32));
	}
	ctrl_intx(c); /* a CQ head, INTMS/INTMC or a reset may have moved the pin */
	pthread_mutex_unlock(&c->lock);
}

const struct bus_ops nvme_ctrl_bar0_ops = {
    .read = nvme_ctrl_bar0_read,
    .write = nvme_ctrl_bar0_write,
};

static void cmb_read(void *opaque, uint64_t off, void *data, unsigned len)
{
	struct nvme_ctrl *c = opaque;

	if (off < c->p.cmb_size && len <= c->p.cmb_size - off)
		memcpy(data, c->cmb + off, len);
	else
		memset(data, 0xff, len);
}

static void cmb_write(void *opaque, uint64_t off, const void *data, unsigned len)
{
	struct nvme_ctrl *c = opaque;

	if (off < c->p.cmb_size && len <= c->p.cmb_size - off)
		memcpy(c->cmb + off, data, len);
}

const struct bus_ops nvme_ctrl_cmb_ops = {
    .read = cmb_read,
    .write = cmb_write,
};

void *nvme_ctrl_cmb(const struct nvme_ctrl *c, uint64_t *size)
{
	*size = c->cmb ? c->p.cmb_size : 0;
	return c->cmb;
}

void nvme_ctrl_set_cmb_gpa(struct nvme_ctrl *c, uint64_t gpa)
{
	pthread_mutex_lock(&c->lock);
	c->cmb_gpa = gpa;
	pthread_mutex_unlock(&c->lock);
}

/* Shadow doorbell of queue (qid, is_cq) in guest memory, NULL when not configured. */
static uint32_t *dbbuf_slot(struct nvme_ctrl *c, uint64_t base, unsigned qid, bool is_cq)
{
	/* The buffers span (2 * queues) doorbell strides, as the host driver sizes them. */
	uint64_t off = (uint64_t)(2 * qid + is_cq) * db_stride(c);

	if (!base)
		return NULL;
	return gmem_ptr(c->gm, base + off, 4);
}

static void sq_refresh_shadow(struct nvme_ctrl *c, struct nvme_sq *sq)
{
	uint32_t *db = dbbuf_slot(c, c->dbbuf_dbs, sq->qid, false);
	uint32_t tail;

	if (!db || sq->qid == 0)
		return;
	tail = __atomic_load_n(db, __ATOMIC_ACQUIRE);
	if (tail < sq->size)
		sq->tail = tail;
	else
		nvme_raise_event(c, NVME_AER_TYPE_ERROR, NVME_AER_ERR_INVALID_DB_VALUE,
				 NVME_LOG_ERROR);
}

static void cq_refresh_shadow(struct nvme_ctrl *c, struct nvme_cq *cq, unsigned qid)
{
	uint32_t *db = dbbuf_slot(c, c->dbbuf_dbs, qid, true);
	uint32_t head;

	if (!db || qid == 0)
		return;
	head = __atomic_load_n(db, __ATOMIC_ACQUIRE);
	if (nvmeq_head_ok(head, cq->head, cq->tail, cq->size))
		cq->head = head;
}

static void sq_publish_eventidx(struct nvme_ctrl *c, struct nvme_sq *sq)
{
	uint32_t *ei = dbbuf_slot(c, c->dbbuf_eis, sq->qid, false);

	if (ei && sq->qid) {
		__atomic_store_n(ei, sq->tail, __ATOMIC_RELEASE);
		/* The next shadow read must not pass this store: the driver decides whether to
		 * ring from the event index, we decide whether to look again from the tail. */
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
	}
}

/* Fetches up to budget commands of one SQ; returns how many were fetched. */
static unsigned sq_run(struct nvme_ctrl *c, struct nvme_sq *sq, unsigned budget)
{
	struct nvme_cq *cq = &c->cqs[sq->cqid];
	unsigned n = 0;

	while (n < budget && sq->valid && sq->head != sq->tail && cq->valid &&
	       cq_free(cq) > cq->reserved) {
		struct nvme_sqe cmd;
		uint32_t dw0 = 0;
		uint16_t st;

		memcpy(&cmd, sq->host + (uint64_t)sq->head * sizeof(cmd), sizeof(cmd));
		nvmeq_step(&sq->head, sq->size);
		cq->reserved++;
		n++;
		if (sq->qid == 0)
			st = nvme_admin_exec(c, &cmd, &dw0);
		else
			st = nvme_io_exec(c, sq, &cmd);
		if (st != NVME_NO_COMPLETE) {
			if (st != NVME_OK) {
				nvme_record_error(c, sq->qid, cmd.cid, st);
				nvme_error_note_cmd(c, sq->qid, &cmd);
			}
			/* An admin command may have deleted this very queue pair. */
			if (sq->qid == 0 || sq->valid)
				nvme_post_cqe(c, sq, cmd.cid, st, dw0);
		}
		/* Events the command unmasked or armed go out after its own completion. */
		if (sq->qid == 0)
			nvme_events_deliver(c);
	}
	/* Held back by a full CQ: with shadow doorbells, ask the driver to ring when it frees
	 * entries (it otherwise never writes the CQ head doorbell). */
	if (sq->valid && sq->head != sq->tail && cq->valid && cq_free(cq) <= cq->reserved &&
	    sq->cqid && c->dbbuf_eis) {
		uint32_t *ei = dbbuf_slot(c, c->dbbuf_eis, sq->cqid, true);
		uint32_t head = cq->head;

		if (ei) {
			__atomic_store_n(ei, head, __ATOMIC_RELEASE);
			/* The driver may have moved the head before it could see the index: look
			 * once more, and count a move as progress so the caller runs again. */
			__atomic_thread_fence(__ATOMIC_SEQ_CST);
			cq_refresh_shadow(c, cq, sq->cqid);
			if (cq->head != head)
				n++;
		}
	}
	return n;
}

/* Commands one wake-up of the I/O thread may run. With shadow doorbells a guest that keeps
 * moving its tails would otherwise hold the thread here for ever (completions, the coalescing
 * timer and stop requests starve); past the budget the thread kicks itself and comes back. */
#define NVME_PROCESS_BUDGET 1024

void nvme_ctrl_process_locked(struct nvme_ctrl *c)
{
	unsigned q, progress, done = 0;

	if (!(c->csts & NVME_CSTS_RDY) || c->resetting || (c->csts & NVME_CSTS_CFS) || c->paused)
		return;
	if (c->hooks.bus_master && !c->hooks.bus_master(c->hooks.opaque))
		return;
	do {
		progress = 0;
		for (q = 0; q < c->nq; q++) {
			struct nvme_sq *sq = &c->sqs[q];

			if (!sq->valid || sq->bound || sq->bind_pending)
				continue;
			if (c->dbbuf_dbs) {
				sq_refresh_shadow(c, sq);
				cq_refresh_shadow(c, &c->cqs[sq->cqid], sq->cqid);
			}
			progress += sq_run(c, sq, 64);
			if (c->dbbuf_dbs && sq->valid)
				sq_publish_eventidx(c, sq);
		}
		if (!(c->csts & NVME_CSTS_RDY) || c->resetting)
			break;
		done += progress;
		if (progress && done >= NVME_PROCESS_BUDGET && c->hooks.kick) {
			c->hooks.kick(c->hooks.opaque);
			break;
		}
	} while (progress);
}

void nvme_ctrl_process(struct nvme_ctrl *c)
{
	pthread_mutex_lock(&c->lock);
	c->st.wakeups++;
	nvme_ctrl_process_locked(c);
	pthread_mutex_unlock(&c->lock);
}

/* ---- test only: LVMM_FAULT_NVME (see nvme_ctrl.h); nothing here runs unless it is set ---- */

int nvme_fault_parse(const char *spec, const char *serial, struct nvme_fault *f)
{
	const char *colon = spec ? strchr(spec, ':') : NULL;
	const char *k;

	memset(f, 0, sizeof(*f));
	if (!spec || !*spec)
		return 0;
	if (!colon || colon == spec || !colon[1])
		return -EINVAL;
	for (k = colon + 1; *k;) {
		size_t n = strcspn(k, "@+");
		unsigned long every = 1;

		if (n == 7 && !strncmp(k, "dup-cqe", n)) {
			if (k[n] == '@') {
				char *end;

				errno = 0;
				every = strtoul(k + n + 1, &end, 10);
				if (errno || end == k + n + 1 || every < 1 || every > 1000000 ||
				    (*end && *end != '+'))
					return -EINVAL;
				n = (size_t)(end - k);
			}
			f->dup_every = (uint32_t)every;
		} else if (n == 12 && !strncmp(k, "cmb-oversize", n) && k[n] != '@') {
			f->cmb_oversize = true;
		} else {
			return -EINVAL;
		}
		k += n;
		if (*k == '+' && !*++k)
			return -EINVAL;
	}
	if (strlen(serial) != (size_t)(colon - spec) || strncmp(spec, serial, strlen(serial)))
		memset(f, 0, sizeof(*f)); /* well formed, for another controller */
	else
		f->on = true;
	return 0;
}

/* The serial without the blanks Identify pads it with. */
static int fault_serial_len(const struct nvme_ctrl *c)
{
	int n = (int)strlen(c->p.serial);

	while (n > 0 && c->p.serial[n - 1] == ' ')
		n--;
	return n;
}

bool nvme_ctrl_fault_frontend(const struct nvme_ctrl *c, uint64_t *lbas)
{
	*lbas = c->p.size >> c->p.lba_shift;
	return c->fault.on;
}

/* Every Nth I/O completion posted again: the same command id, already completed. Only into a
 * slot no fetched command has reserved, so no real completion is ever lost. Lock held. */
static void fault_dup_cqe(struct nvme_ctrl *c, struct nvme_sq *sq, uint16_t cid)
{
	struct nvme_cq *cq = &c->cqs[sq->cqid];

	if (++c->fault.completions % c->fault.dup_every || !cq->valid ||
	    cq_free(cq) <= cq->reserved)
		return;
	cq_write(c, cq, sq->qid, (uint16_t)sq->head, cid, NVME_OK, 0);
	fprintf(stderr, "nvme %.*s: fault: command %u on SQ %u completed twice\n",
		fault_serial_len(c), c->p.serial, (unsigned)cid, (unsigned)sq->qid);
}

/* ---- end of the test-only faults ---- */

/* One request's completion, the controller lock held; the caller frees req after the unlock. */
static void io_done_locked(struct nvme_ctrl *c, struct nvme_io_req *req)
{
	if (req->gen == c->gen && req->sqid < c->nq) {
		struct nvme_sq *sq = &c->sqs[req->sqid];

		if (sq->valid && sq->gen == req->sqgen) {
			sq->inflight--;
			if (req->status != NVME_OK)
				nvme_record_error(c, req->sqid, req->cid, req->status);
			nvme_post_cqe(c, sq, req->cid, req->status, 0);
			if (c->fault.dup_every && req->sqid)
				fault_dup_cqe(c, sq, req->cid);
		}
	}
	if (c->inflight)
		c->inflight--;
	if (!c->inflight)
		pthread_cond_broadcast(&c->idle);
	if (c->resetting && !c->inflight) {
		c->resetting = false;
		c->csts &= ~NVME_CSTS_RDY;
	}
}

void nvme_ctrl_io_done(struct nvme_io_req *req)
{
	struct nvme_ctrl *c = req->ctrl;

	pthread_mutex_lock(&c->lock);
	io_done_locked(c, req);
	pthread_mutex_unlock(&c->lock);
	free(req->ranges);
	free(req);
}

void nvme_ctrl_io_done_many(struct nvme_io_req **reqs, unsigned n)
{
	struct nvme_ctrl *c = n ? reqs[0]->ctrl : NULL;
	unsigned i;

	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	for (i = 0; i < n; i++)
		io_done_locked(c, reqs[i]);
	pthread_mutex_unlock(&c->lock);
	for (i = 0; i < n; i++) {
		free(reqs[i]->ranges);
		free(reqs[i]);
	}
}

void nvme_ctrl_pause(struct nvme_ctrl *c)
{
	unsigned q;

	pthread_mutex_lock(&c->lock);
	c->paused = true;
	while (c->inflight)
		pthread_cond_wait(&c->idle, &c->lock);
	/* entries held back by interrupt coalescing are signalled now: their deadline is a host
	 * clock that a restored device would not share */
	for (q = 1; c->coal_cqs && q < c->nq; q++) {
		struct nvme_cq *cq = &c->cqs[q];

		if (!cq->valid || !cq->coal_pending)
			continue;
		cq->coal_pending = 0;
		if (cq->ien)
			ctrl_irq(c, cq->vector);
	}
	c->coal_cqs = 0;
	pthread_mutex_unlock(&c->lock);
}

void nvme_ctrl_resume(struct nvme_ctrl *c)
{
	pthread_mutex_lock(&c->lock);
	c->paused = false;
	/* doorbells rung just before the pause, or restored queues with commands waiting, for the
	 * I/O thread; without one, commands ran on the vCPU that rang and none can be waiting */
	if ((c->csts & NVME_CSTS_RDY) && c->hooks.kick)
		c->hooks.kick(c->hooks.opaque);
	pthread_mutex_unlock(&c->lock);
}

void nvme_ctrl_get_stats(struct nvme_ctrl *c, struct nvme_ctrl_stats *st)
{
	pthread_mutex_lock(&c->lock);
	*st = c->st;
	pthread_mutex_unlock(&c->lock);
}

static void copy_padded(char *dst, size_t n, const char *src)
{
	size_t l = strnlen(src, n);

	memset(dst, ' ', n);
	memcpy(dst, src, l);
}

int nvme_ctrl_create(const struct nvme_ctrl_params *p, struct guest_mem *gm,
		     const struct nvme_backend_ops *bops, void *be,
		     const struct nvme_ctrl_hooks *hooks, struct nvme_ctrl **out, char *err,
		     unsigned errlen)
{
	struct nvme_ctrl *c;
	uint64_t mqes = p->mqes ? p->mqes : 1023, lba;
	struct nvme_fault fault;

	if (p->max_ioqs < 1 || p->max_ioqs > 65535) {
		snprintf(err, errlen, "nvme %s: %u I/O queues is outside 1..65535", p->serial,
			 p->max_ioqs);
		return -EINVAL;
	}
	if (p->nvectors < 1 || p->nvectors > 2048 || p->dstrd > 15 || mqes < 1) {
		snprintf(err, errlen, "nvme %s: bad vectors %u / doorbell stride %u / MQES %u",
			 p->serial, p->nvectors, p->dstrd, (unsigned)mqes);
		return -EINVAL;
	}
	if (p->lba_shift && p->lba_shift != 9 && p->lba_shift != 12) {
		snprintf(err, errlen, "nvme %s: %u-byte LBAs (512 or 4096 are offered)", p->serial,
			 1u << (p->lba_shift & 31));
		return -EINVAL;
	}
	lba = 1ULL << (p->lba_shift ? p->lba_shift : NVME_LBA_SHIFT);
	if (p->size < lba || (p->size & (lba - 1))) {
		snprintf(err, errlen, "nvme %s: size %llu is not a non-zero multiple of %llu",
			 p->serial, (unsigned long long)p->size, (unsigned long long)lba);
		return -EINVAL;
	}
	if (p->cmb_size & (NVME_CTRL_PAGE - 1) || p->cmb_size > (1ULL << 30)) {
		snprintf(err, errlen, "nvme %s: CMB size %llu is not a 4 KiB multiple up to 1 GiB",
			 p->serial, (unsigned long long)p->cmb_size);
		return -EINVAL;
	}
	if (nvme_fault_parse(getenv("LVMM_FAULT_NVME"), p->serial[0] ? p->serial : "LVMM0001",
			     &fault)) {
		snprintf(err, errlen, "LVMM_FAULT_NVME=%s not understood",
			 getenv("LVMM_FAULT_NVME"));
		return -EINVAL;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		snprintf(err, errlen, "nvme %s: out of memory", p->serial);
		return -ENOMEM;
	}
	c->p = *p;
	c->fault = fault;
	c->p.mqes = (uint16_t)mqes;
	if (!c->p.lba_shift)
		c->p.lba_shift = NVME_LBA_SHIFT;
	copy_padded(c->p.serial, sizeof(c->p.serial) - 1, p->serial[0] ? p->serial : "LVMM0001");
	c->p.serial[20] = 0;
	c->gm = gm;
	c->bops = bops;
	c->be = be;
	if (hooks)
		c->hooks = *hooks;
	c->nq = p->max_ioqs + 1;
	c->sqs = calloc(c->nq, sizeof(*c->sqs));
	c->cqs = calloc(c->nq, sizeof(*c->cqs));
	c->feat_ivc = calloc(p->nvectors, sizeof(*c->feat_ivc));
	if (p->cmb_size)
		c->cmb = p->cmb_host ? p->cmb_host : aligned_alloc(NVME_CTRL_PAGE, p->cmb_size);
	if (!c->sqs || !c->cqs || !c->feat_ivc || (p->cmb_size && !c->cmb)) {
		snprintf(err, errlen, "nvme %s: out of memory for %u queues", p->serial,
			 p->max_ioqs + 1);
		nvme_ctrl_destroy(c);
		return -ENOMEM;
	}
	if (c->cmb && !p->cmb_host)
		memset(c->cmb, 0, p->cmb_size);
	c->cmb_gpa = ~0ULL;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->idle, NULL);
	c->cap = mqes | NVME_CAP_CQR | (30ULL << NVME_CAP_TO_SHIFT) |
		 ((uint64_t)p->dstrd << NVME_CAP_DSTRD_SHIFT) | NVME_CAP_CSS_NVM;
	if (c->cmb) {
		/* Described the 1.4 way: CMBLOC/CMBSZ show once the host sets CMBMSC.CRE, and SQs
		 * go in once it enables the controller memory space at the BAR's address. */
		c->cap |= NVME_CAP_CMBS;
		/* SZU 4 KiB units; SQs only (data in the CMB is not supported). */
		c->cmbloc = p->cmb_bir & 7;
		c->cmbsz = NVME_CMBSZ_SQS | (uint32_t)(p->cmb_size >> 12) << NVME_CMBSZ_SZ_SHIFT;
		if (c->fault.cmb_oversize) { /* test only: claims more than the BAR holds */
			c->cmbsz = NVME_CMBSZ_SQS | (uint32_t)(p->cmb_size >> 11)
							<< NVME_CMBSZ_SZ_SHIFT;
			fprintf(
			    stderr, "nvme %.*s: fault: CMBSZ claims %llu bytes, the BAR has %llu\n",
			    fault_serial_len(c), c->p.serial, (unsigned long long)(p->cmb_size * 2),
			    (unsigned long long)p->cmb_size);
		}
	}
	c->nsqa = c->ncqa = p->max_ioqs;
	c->feat_vwc = 1; /* the backend starts caching: nothing to tell the vwc hook yet */
	nvme_features_reset(c);
	*out = c;
	return 0;
}

void nvme_ctrl_destroy(struct nvme_ctrl *c)
{
	if (!c)
		return;
	if (c->sqs && c->cqs)
		unbind_all_locked(c);
	free(c->sqs);
	free(c->cqs);
	free(c->feat_ivc);
	if (!c->p.cmb_host)
		free(c->cmb);
	free(c);
}
