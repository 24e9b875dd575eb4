/* vNVMe admin command set: Identify, features, log pages, I/O queue creation and deletion,
 * Abort, Async Event Request, Doorbell Buffer Config. Every field is checked before use. */
#include <stdio.h>
#include <string.h>

#include "nvme_int.h"

#define NVME_NSID_ALL		 0xffffffffu
#define NVME_DEFAULT_TEMP_THRESH 0x0157 /* 343 K over-temperature threshold */

void nvme_features_reset(struct nvme_ctrl *c)
{
	unsigned i;

	c->feat_arb = 0;
	c->feat_pm = 0;
	c->feat_temp_thresh = NVME_DEFAULT_TEMP_THRESH;
	c->feat_err_rec = 0;
	/* a backend told to write through goes back to caching with the reset value; if it is
	 * gone, a later Set Features reaches it no more either */
	if (!c->feat_vwc && c->hooks.vwc)
		c->hooks.vwc(c->hooks.opaque, true);
	c->feat_vwc = 1;
	c->feat_coalesce = 0;
	c->feat_aec = 0;
	c->feat_wr_atomic = 0;
	for (i = 0; i < c->p.nvectors; i++)
		c->feat_ivc[i] = i;
}

static uint64_t ns_blocks(const struct nvme_ctrl *c)
{
	return c->p.size >> c->p.lba_shift;
}

/* A stable 16-byte namespace identifier derived from the serial number (FNV-1a, twice). */
static void ns_nguid(const struct nvme_ctrl *c, uint8_t out[16])
{
	uint64_t h1 = 0xcbf29ce484222325ULL, h2 = 0x84222325cbf29ce4ULL;
	const char *s;

	for (s = c->p.serial; *s; s++) {
		h1 = (h1 ^ (uint8_t)*s) * 0x100000001b3ULL;
		h2 = (h2 ^ (uint8_t)*s) * 0x100000001b3ULL ^ c->p.cntlid;
	}
	memcpy(out, &h1, 8);
	memcpy(out + 8, &h2, 8);
}

static void id_ctrl_fill(struct nvme_ctrl *c, struct nvme_id_ctrl *id)
{
	const char *mn = c->p.model[0] ? c->p.model : "lvmm LightIOV vNVMe";
	size_t l;

	id->vid = 0x1b36;
	id->ssvid = 0x1af4;
	memset(id->sn, ' ', sizeof(id->sn));
	l = strnlen(c->p.serial, sizeof(id->sn));
	memcpy(id->sn, c->p.serial, l);
	memset(id->mn, ' ', sizeof(id->mn));
	l = strnlen(mn, sizeof(id->mn));
	memcpy(id->mn, mn, l);
	memcpy(id->fr, "1.0     ", 8);
	id->rab = 6;
	id->mdts = NVME_CTRL_MDTS;
	id->cntlid = c->p.cntlid;
	id->ver = NVME_VS_1_4;
	id->cntrltype = 1; /* I/O controller */
	id->oacs = c->p.no_dbbuf ? 0 : NVME_CTRL_OACS_DBBUF;
	id->acl = 3;
	id->aerl = NVME_CTRL_AERL;
	id->frmw = 0x3; /* one slot, read-only */
	id->lpa = 0;
	id->elpe = 0; /* one error log entry */
	id->npss = 0;
	id->wctemp = 0x0157;
	id->cctemp = 0x0175;
	id->sqes = (NVME_SQES_LOG2 << 4) | NVME_SQES_LOG2;
	id->cqes = (NVME_CQES_LOG2 << 4) | NVME_CQES_LOG2;
	id->maxcmd = 0;
	id->nn = 1;
	/* Save/Select (bit 4): Get Features answers every Select value, Set Features with Save
	 * answers Feature Not Saveable per feature, as the specification has it. */
	id->oncs = NVME_CTRL_ONCS_DSM | NVME_CTRL_ONCS_WRITE_ZEROES | NVME_CTRL_ONCS_FEAT_SAVE;
	id->vwc = NVME_CTRL_VWC_PRESENT;
	id->sgls = 0;
	/* The serial without the padding Identify gives SN: an NQN holds no spaces. */
	l = strnlen(c->p.serial, sizeof(id->sn));
	while (l && c->p.serial[l - 1] == ' ')
		l--;
	snprintf(id->subnqn, sizeof(id->subnqn), "nqn.2026-11.io.lvmm:nvme:%.*s", (int)l,
		 c->p.serial);
	id->psd[0].max_power = 2500; /* 25 W in 0.01 W units */
}

static void id_ns_fill(struct nvme_ctrl *c, struct nvme_id_ns *ns)
{
	ns->nsze = ns->ncap = ns->nuse = ns_blocks(c);
	ns->nsfeat = 0;
	ns->nlbaf = 0;
	ns->flbas = 0;
	ns->dlfeat = 0x1 | 0x8; /* deallocated blocks read zeroes; Write Zeroes may deallocate */
	ns->lbaf[0].ds = c->p.lba_shift; /* the one format: the backend's own LBA size */
	ns_nguid(c, ns->nguid);
	if (c->p.readonly)
		ns->nsattr = 1; /* write protected */
}

static uint16_t admin_identify(struct nvme_ctrl *c, const struct nvme_sqe *cmd)
{
	union {
		struct nvme_id_ctrl ctrl;
		struct nvme_id_ns ns;
		uint32_t list[1024];
		uint8_t raw[4096];
	} buf;
	struct nvme_ns_id_desc *d;
	uint8_t cns = cmd->cdw10 & 0xff;

	memset(&buf, 0, sizeof(buf));
	switch (cns) {
	case NVME_ID_CNS_CTRL:
		id_ctrl_fill(c, &buf.ctrl);
		break;
	case NVME_ID_CNS_NS:
		/* FFFFFFFFh (capabilities common to all namespaces) is for controllers with
		 * Namespace Management, which OACS does not claim. */
		if (cmd->nsid != 1)
			return NVME_GENERIC(NVME_SC_INVALID_NS);
		id_ns_fill(c, &buf.ns);
		break;
	case NVME_ID_CNS_NS_ACTIVE_LIST:
		if (cmd->nsid >= 0xfffffffeu)
			return NVME_GENERIC(NVME_SC_INVALID_NS);
		if (cmd->nsid < 1)
			buf.list[0] = 1;
		break;
	case NVME_ID_CNS_NS_DESC_LIST:
		if (cmd->nsid != 1)
			return NVME_GENERIC(NVME_SC_INVALID_NS);
		d = (struct nvme_ns_id_desc *)buf.raw;
		d->nidt = NVME_NIDT_NGUID;
		d->nidl = 16;
		ns_nguid(c, buf.raw + sizeof(*d));
		break;
	default:
		return NVME_GENERIC(NVME_SC_INVALID_FIELD);
	}
	return nvme_prp_copy(c, cmd->prp1, cmd->prp2, buf.raw, sizeof(buf), true);
}

/* SMART counters are 128-bit little-endian fields at unaligned offsets. */
static void u128_set(void *dst, uint64_t v)
{
	uint64_t t[2] = {v, 0};

	memcpy(dst, t, sizeof(t));
}

static uint16_t admin_get_log(struct nvme_ctrl *c, const struct nvme_sqe *cmd)
{
	uint8_t lid = cmd->cdw10 & 0xff;
	bool rae = cmd->cdw10 & (1u << 15);
	uint64_t numd = ((uint64_t)(cmd->cdw11 & 0xffff) << 16 | cmd->cdw10 >> 16) + 1;
	uint64_t len = numd * 4, off = (uint64_t)cmd->cdw13 << 32 | cmd->cdw12, size;
	union {
		struct nvme_error_log err;
		struct nvme_smart_log smart;
		struct nvme_fw_slot_log fw;
		uint8_t raw[512];
	} log;
	uint8_t type;
	uint16_t st;

	if (off & 3)
		return NVME_GENERIC(NVME_SC_INVALID_FIELD);
	memset(&log, 0, sizeof(log));
	switch (lid) {
	case NVME_LOG_ERROR:
		log.err = c->err_last;
		size = sizeof(log.err);
		type = NVME_AER_TYPE_ERROR;
		break;
	case NVME_LOG_SMART:
		/* LPA bit 0 clear: no per-namespace SMART, so only the controller-wide NSIDs. */
		if (cmd->nsid != 0 && cmd->nsid != NVME_NSID_ALL)
			return NVME_GENERIC(NVME_SC_INVALID_FIELD);
		log.smart.critical_warning = c->p.readonly ? NVME_SMART_CRIT_READONLY : 0;
		log.smart.temperature = 313;
		log.smart.avail_spare = 100;
		log.smart.spare_thresh = 10;
		u128_set(&log.smart.data_units_read, (c->units_read + 999) / 1000);
		u128_set(&log.smart.data_units_written, (c->units_written + 999) / 1000);
		u128_set(&log.smart.host_reads, c->st.reads);
		u128_set(&log.smart.host_writes, c->st.writes);
		u128_set(&log.smart.power_cycles, 1);
		u128_set(&log.smart.num_err_log_entries, c->err_count);
		size = sizeof(log.smart);
		type = NVME_AER_TYPE_SMART;
		break;
	case NVME_LOG_FW_SLOT:
		log.fw.afi = 1;
		memcpy(log.fw.frs[0], "1.0     ", 8);
		size = sizeof(log.fw);
		type = 0xff;
		break;
	default:
		return NVME_SPECIFIC(NVME_SC_INVALID_LOG_PAGE);
	}
	if (off > size)
		return NVME_GENERIC(NVME_SC_INVALID_FIELD);
	st = nvme_prp_copy(c, cmd->prp1, cmd->prp2, log.raw + off,
			   len < size - off ? len : size - off, true);
	if (st == NVME_OK && !rae && type != 0xff) {
		/* Reading the log page re-arms events of its type. */
		c->ae_masked &= (uint8_t) ~(1u << type);
	}
	return st;
}

static uint16_t feat_num_queues(struct nvme_ctrl *c, uint32_t cdw11, bool set, uint32_t *dw0)
{
	unsigned q;

	if (set) {
		uint32_t nsqr = cdw11 & 0xffff, ncqr = cdw11 >> 16;

		if (nsqr == 0xffff || ncqr == 0xffff)
			return NVME_GENERIC(NVME_SC_INVALID_FIELD);
		for (q = 1; q < c->nq; q++)
			if (c->sqs[q].valid || c->cqs[q].valid)
				return NVME_GENERIC(NVME_SC_CMD_SEQ_ERROR);
		c->nsqa = nsqr + 1 < c->p.max_ioqs ? nsqr + 1 : c->p.max_ioqs;
		c->ncqa = ncqr + 1 < c->p.max_ioqs ? ncqr + 1 : c->p.max_ioqs;
		c->nq_set = true;
	}
	*dw0 = (c->ncqa - 1) << 16 | (c->nsqa - 1);
	return NVME_OK;
}

static uint16_t admin_features(struct nvme_ctrl *c, const struct nvme_sqe *cmd, bool set,
			       uint32_t *dw0)
{
	uint8_t fid = cmd->cdw10 & 0xff, sel = NVME_FEAT_SEL(cmd->cdw10);
	uint32_t v = cmd->cdw11, *slot;
	uint32_t iv = 0;

	if (set && (cmd->cdw10 & NVME_FEAT_SAVE))
		return NVME_SPECIFIC(NVME_SC_FEATURE_NOT_SAVEABLE);
	if (!set && sel > 3)
		return NVME_GENERIC(NVME_SC_INVALID_FIELD);
	switch (fid) {
	case NVME_FEAT_ARBITRATION:
		slot = &c->feat_arb;
		break;
	case NVME_FEAT_POWER_MGMT:
		if (set && (v & 0x1f) != 0)
			return NVME_GENERIC(NVME_SC_INVALID_FIELD); /* only power state 0 */
		slot = &c->feat_pm;
		break;
	case NVME_FEAT_TEMP_THRESH:
		/* Composite temperature, over-temperature threshold only. */
		if ((v >> 16) & 0x3f)
			return NVME_GENERIC(NVME_SC_INVALID_FIELD);
		slot = &c->feat_temp_thresh;
		v &= 0xffff;
		break;
	case NVME_FEAT_ERR_RECOVERY:
		slot = &c->feat_err_rec;
		break;
	case NVME_FEAT_VOLATILE_WC:
		slot = &c->feat_vwc;
		v &= 1;
		if (set && v != c->feat_vwc && c->hooks.vwc) {
			uint16_t st = c->hooks.vwc(c->hooks.opaque, v);

			if (st != NVME_OK)
				return st;
		}
		break;
	case NVME_FEAT_NUM_QUEUES:
		if (!set && sel == 3) {
			*dw0 = 0;
			return NVME_OK;
		}
		return feat_num_queues(c, v, set, dw0);
	case NVME_FEAT_IRQ_COALESCE:
		slot = &c->feat_coalesce;
		v &= 0xffff;
		break;
	case NVME_FEAT_IRQ_CONFIG:
		iv = v & 0xffff;
		if (iv >= c->p.nvectors)
			return NVME_GENERIC(NVME_SC_INVALID_FIELD);
		slot = &c->feat_ivc[iv];
		v &= 0x1ffff;
		break;
	case NVME_FEAT_WRITE_ATOMIC:
		slot = &c->feat_wr_atomic;
		v &= 1;
		break;
	case NVME_FEAT_ASYNC_EVENT:
		slot = &c->feat_aec;
		v &= 0x3ff;
		break;
	default:
		return NVME_GENERIC(NVME_SC_INVALID_FIELD);
	}
	if (set) {
		*slot = v;
		*dw0 = 0;
	} else if (sel == 3) {
		*dw0 = 1u << 2; /* changeable, not saveable, not namespace specific */
	} else if (sel == 0) {
		*dw0 = *slot;
	} else if (fid == NVME_FEAT_TEMP_THRESH) {
		*dw0 = NVME_DEFAULT_TEMP_THRESH; /* default and saved values are the reset values */
	} else if (fid == NVME_FEAT_VOLATILE_WC) {
		*dw0 = 1;
	} else if (fid == NVME_FEAT_IRQ_CONFIG) {
		*dw0 = iv;
	} else {
		*dw0 = 0;
	}
	return NVME_OK;
}

/* A new queue starts at 0 in the shadow doorbell and event index buffers too. */
static void dbbuf_reset_slot(struct nvme_ctrl *c, unsigned qid, bool is_cq)
{
	uint64_t off = (uint64_t)(2 * qid + is_cq) * (4u << c->p.dstrd);
	uint32_t zero = 0;

	if (!c->dbbuf_dbs)
		return;
	gmem_write(c->gm, c->dbbuf_dbs + off, &zero, 4);
	gmem_write(c->gm, c->dbbuf_eis + off, &zero, 4);
}

static uint16_t admin_create_cq(struct nvme_ctrl *c, const struct nvme_sqe *cmd)
{
	uint32_t qid = cmd->cdw10 & 0xffff, size = (cmd->cdw10 >> 16) + 1;
	uint32_t iv = cmd->cdw11 >> 16;
	bool pc = cmd->cdw11 & 1, ien = cmd->cdw11 & 2;
	struct nvme_cq *cq;
	uint8_t *host;

	if (qid == 0 || qid >= c->nq || qid > c->ncqa || c->cqs[qid].valid)
		return NVME_SPECIFIC(NVME_SC_QID_INVALID);
	if (size < 2 || size > NVME_CAP_MQES(c->cap) + 1u)
		return NVME_SPECIFIC(NVME_SC_QUEUE_SIZE);
	if (ien && iv >= c->p.nvectors)
		return NVME_SPECIFIC(NVME_SC_INVALID_VECTOR);
	if (!pc || NVME_CC_IOCQES(c->cc) != NVME_CQES_LOG2)
		return NVME_GENERIC(NVME_SC_INVALID_FIELD);
	if (cmd->prp1 & (NVME_CTRL_PAGE - 1))
		return NVME_GENERIC(NVME_SC_INVALID_PRP_OFFSET);
	host = nvme_queue_host(c, cmd->prp1, (uint64_t)size * sizeof(struct nvme_cqe), false);
	if (!host || !cmd->prp1)
		return NVME_GENERIC(NVME_SC_INVALID_FIELD);
	cq = &c->cqs[qid];
	memset(cq, 0, sizeof(*cq));
	cq->valid = true;
	cq->ien = ien;
	cq->vector = (uint16_t)iv;
	cq->phase = 1;
	cq->size = size;
	cq->base = cmd->prp1;
	cq->host = host;
	dbbuf_reset_slot(c, qid, true);
	return NVME_OK;
}

/* The (valid or about to be) SQ and its CQ as a backend queue pair sees them. */
static struct nvme_qp_bind sq_bind_info(struct nvme_ctrl *c, const struct nvme_sq *sq)
{
	const struct nvme_cq *cq = &c->cqs[sq->cqid];
	struct nvme_qp_bind b = {
	    .sqid = sq->qid,
	    .cqid = sq->cqid,
	    .sq_depth = sq->size,
	    .cq_depth = cq->size,
	    .sq_gpa = sq->base,
	    .cq_gpa = cq->base,
	    .sq_in_cmb = nvme_in_cmb(c, sq->base, (uint64_t)sq->size * sizeof(struct nvme_sqe)),
	    .ien = cq->ien,
	    .vector = cq->vector,
	    .dbbuf_dbs = c->dbbuf_dbs,
	    .dbbuf_eis = c->dbbuf_eis,
	    .dstrd = c->p.dstrd,
	};

	return b;
}

/* Hands the (valid or about to be) SQ and its CQ to a backend queue pair. */
static uint16_t sq_bind(struct nvme_ctrl *c, struct nvme_sq *sq)
{
	struct nvme_cq *cq = &c->cqs[sq->cqid];
	struct nvme_qp_bind b = sq_bind_info(c, sq);
	uint16_t st;

	st = c->hooks.bind(c->hooks.opaque, &b, &sq->handle);
	if (st != NVME_OK)
		return st;
	sq->bind_pending = false;
	sq->bound = true;
	cq->bound = true;
	c->st.bound++;
	return NVME_OK;
}

static uint16_t admin_create_sq(struct nvme_ctrl *c, const struct nvme_sqe *cmd)
{
	uint32_t qid = cmd->cdw10 & 0xffff, size = (cmd->cdw10 >> 16) + 1;
	uint32_t cqid = cmd->cdw11 >> 16;
	bool pc = cmd->cdw11 & 1;
	struct nvme_sq *sq;
	uint8_t *host;

	if (qid == 0 || qid >= c->nq || qid > c->nsqa || c->sqs[qid].valid)
		return NVME_SPECIFIC(NVME_SC_QID_INVALID);
	if (cqid == 0 || cqid >= c->nq || !c->cqs[cqid].valid)
		return NVME_SPECIFIC(NVME_SC_CQ_INVALID);
	if (size < 2 || size > NVME_CAP_MQES(c->cap) + 1u)
		return NVME_SPECIFIC(NVME_SC_QUEUE_SIZE);
	if (!pc || NVME_CC_IOSQES(c->cc) != NVME_SQES_LOG2)
		return NVME_GENERIC(NVME_SC_INVALID_FIELD);
	if (cmd->prp1 & (NVME_CTRL_PAGE - 1))
		return NVME_GENERIC(NVME_SC_INVALID_PRP_OFFSET);
	host = nvme_queue_host(c, cmd->prp1, (uint64_t)size * sizeof(struct nvme_sqe), true);
	if (!host || !cmd->prp1)
		return NVME_GENERIC(NVME_SC_INVALID_FIELD);
	/* A backend queue pair is one SQ with its own CQ: a second SQ on a CQ cannot be bound. */
	if (c->hooks.bind && c->cqs[cqid].nsq)
		return NVME_SPECIFIC(NVME_SC_CQ_INVALID);
	sq = &c->sqs[qid];
	memset(sq, 0, sizeof(*sq));
	sq->qid = (uint16_t)qid;
	sq->cqid = (uint16_t)cqid;
	sq->size = size;
	sq->base = cmd->prp1;
	sq->host = host;
	dbbuf_reset_slot(c, qid, false);
	if (c->hooks.bind) {
		uint16_t st;

		/* The backend starts from an empty CQ: entries lvmm posted (none for a fresh
		 * queue) would be overwritten. */
		if (c->cqs[cqid].head != c->cqs[cqid].tail || c->cqs[cqid].reserved) {
			memset(sq, 0, sizeof(*sq));
			return NVME_SPECIFIC(NVME_SC_CQ_INVALID);
		}
		/* Linux sends Doorbell Buffer Config only after it created its I/O queues: such
		 * an SQ waits (nothing fetched) and is bound when the shadow buffer is known. */
		if (c->p.bind_needs_dbbuf && !c->dbbuf_dbs) {
			sq->bind_pending = true;
		} else {
			st = sq_bind(c, sq);
			if (st != NVME_OK) {
				memset(sq, 0, sizeof(*sq));
				return st;
			}
		}
	}
	sq->valid = true;
	sq->gen = ++c->qgen;
	c->cqs[cqid].nsq++;
	return NVME_OK;
}

static uint16_t admin_delete_sq(struct nvme_ctrl *c, const struct nvme_sqe *cmd)
{
	uint32_t qid = cmd->cdw10 & 0xffff;
	struct nvme_sq *sq;
	struct nvme_cq *cq;

	if (qid == 0 || qid >= c->nq || !c->sqs[qid].valid)
		return NVME_SPECIFIC(NVME_SC_QID_INVALID);
	sq = &c->sqs[qid];
	cq = &c->cqs[sq->cqid];
	/* A bound pair: the backend finishes what it fetched and stops before the rings go. */
	nvme_sq_unbind(c, sq);
	/* Commands still at the backend complete into the void (generation check). */
	cq->reserved = cq->reserved > sq->inflight ? cq->reserved - sq->inflight : 0;
	if (cq->nsq)
		cq->nsq--;
	memset(sq, 0, sizeof(*sq));
	return NVME_OK;
}

static uint16_t admin_delete_cq(struct nvme_ctrl *c, const struct nvme_sqe *cmd)
{
	uint32_t qid = cmd->cdw10 & 0xffff;

	if (qid == 0 || qid >= c->nq || !c->cqs[qid].valid)
		return NVME_SPECIFIC(NVME_SC_QID_INVALID);
	if (c->cqs[qid].nsq)
		return NVME_SPECIFIC(NVME_SC_INVALID_QUEUE_DELETION);
	memset(&c->cqs[qid], 0, sizeof(c->cqs[qid]));
	return NVME_OK;
}

static uint16_t admin_dbbuf(struct nvme_ctrl *c, const struct nvme_sqe *cmd)
{
	uint64_t dbs = cmd->prp1, eis = cmd->prp2;
	uint16_t st = NVME_OK;
	unsigned q;

	if (!dbs || !eis || (dbs | eis) & (NVME_CTRL_PAGE - 1) ||
	    !gmem_ptr(c->gm, dbs, NVME_CTRL_PAGE) || !gmem_ptr(c->gm, eis, NVME_CTRL_PAGE))
		return NVME_GENERIC(NVME_SC_INVALID_FIELD);
	c->dbbuf_dbs = dbs;
	c->dbbuf_eis = eis;
	/* Queues that already exist continue from their current doorbell values. */
	for (q = 1; q < c->nq; q++) {
		uint64_t off = (uint64_t)2 * q * (4u << c->p.dstrd);

		if (c->sqs[q].bound) {
			/* the backend owns its doorbell values, and may move to the buffer */
			struct nvme_qp_bind b = sq_bind_info(c, &c->sqs[q]);
			uint16_t r = c->hooks.redoorbell ? c->hooks.redoorbell(c->hooks.opaque, &b,
									       &c->sqs[q].handle)
							 : NVME_OK;

			if (r != NVME_OK)
				st = r;
			continue;
		}
		if (c->sqs[q].valid) {
			gmem_write(c->gm, dbs + off, &c->sqs[q].tail, 4);
			gmem_write(c->gm, eis + off, &c->sqs[q].tail, 4);
		}
		if (c->cqs[q].valid)
			gmem_write(c->gm, dbs + off + (4u << c->p.dstrd), &c->cqs[q].head, 4);
	}
	if (c->hooks.dbbuf)
		c->hooks.dbbuf(c->hooks.opaque, true);
	/* SQs created before this command go to the backend now, which reads their doorbells
	 * (lvmm's values, just copied to the shadow slots) from the buffer. A bind that fails
	 * leaves its SQ waiting and fails this command: the driver's I/O on it times out and
	 * its controller reset starts over. */
	for (q = 1; q < c->nq; q++) {
		uint16_t r;

		if (!c->sqs[q].valid || !c->sqs[q].bind_pending)
			continue;
		r = sq_bind(c, &c->sqs[q]);
		if (r != NVME_OK) {
			fprintf(stderr,
				"nvme: SQ %u: no backend queue pair after Doorbell Buffer "
				"Config (status %#x)\n",
				q, r);
			st = r;
		}
	}
	return st;
}

void nvme_error_note_cmd(struct nvme_ctrl *c, uint16_t sqid, const struct nvme_sqe *cmd)
{
	/* The entry names the namespace and the first LBA of the failed command, so a host can
	 * tell which request an LBA Out of Range (or a media error) was about. */
	c->err_last.nsid = cmd->nsid;
	if (!sqid)
		return;
	switch (cmd->opcode) {
	case NVME_CMD_READ:
	case NVME_CMD_WRITE:
	case NVME_CMD_WRITE_ZEROES:
		c->err_last.lba = (uint64_t)cmd->cdw11 << 32 | cmd->cdw10;
		break;
	default:
		break;
	}
}

uint16_t nvme_admin_exec(struct nvme_ctrl *c, const struct nvme_sqe *cmd, uint32_t *dw0)
{
	*dw0 = 0;
	if (NVME_SQE_FUSE(cmd->flags) || NVME_SQE_PSDT(cmd->flags))
		return NVME_GENERIC(NVME_SC_INVALID_FIELD);
	switch (cmd->opcode) {
	case NVME_ADMIN_IDENTIFY:
		return admin_identify(c, cmd);
	case NVME_ADMIN_GET_LOG_PAGE:
		return admin_get_log(c, cmd);
	case NVME_ADMIN_SET_FEATURES:
		return admin_features(c, cmd, true, dw0);
	case NVME_ADMIN_GET_FEATURES:
		return admin_features(c, cmd, false, dw0);
	case NVME_ADMIN_CREATE_CQ:
		return admin_create_cq(c, cmd);
	case NVME_ADMIN_CREATE_SQ:
		return admin_create_sq(c, cmd);
	case NVME_ADMIN_DELETE_SQ:
		return admin_delete_sq(c, cmd);
	case NVME_ADMIN_DELETE_CQ:
		return admin_delete_cq(c, cmd);
	case NVME_ADMIN_ABORT:
		*dw0 = 1; /* commands run to completion: never aborted */
		return NVME_OK;
	case NVME_ADMIN_ASYNC_EVENT:
		if (c->naer > NVME_CTRL_AERL)
			return NVME_SPECIFIC(NVME_SC_ASYNC_LIMIT);
		c->aer_cids[c->naer++] = cmd->cid;
		/* No CQ slot is held while an event is awaited. */
		if (c->cqs[0].reserved)
			c->cqs[0].reserved--;
		return NVME_NO_COMPLETE;
	/* KAS is 0: Keep Alive is not supported, so it is an opcode like any unknown one. */
	case NVME_ADMIN_DBBUF:
		if (c->p.no_dbbuf)
			return NVME_GENERIC(NVME_SC_INVALID_OPCODE);
		return admin_dbbuf(c, cmd);
	default:
		return NVME_GENERIC(NVME_SC_INVALID_OPCODE);
	}
}
