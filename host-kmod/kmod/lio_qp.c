// SPDX-License-Identifier: GPL-2.0
/* Queue pairs: a guest SQ/CQ (in the session's DMA window or its queue memory) served by one
 * controller queue pair. The doorbell (eventfd, or a polled page in queue memory) and the
 * controller's MSI-X vector both kick one work item, which copies new SQEs out of guest reach,
 * checks them (check.c), submits them with device LBAs and device DMA addresses, and copies
 * completions back into the guest CQ before signalling the irq eventfd. A DB_DIRECT queue pair
 * is the paper's passthrough instead: the controller's own rings in queue memory, its doorbell
 * pages mapped to the client, its vector signalling the irq eventfd (an IRQ-bypass producer).
 */
#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/file.h>
#include <linux/interrupt.h>
#include <linux/jiffies.h>
#include <linux/ktime.h>
#include <linux/mm.h>
#include <linux/slab.h>

#include "lio.h"

/* from's counters (updated by its work item meanwhile) added to to's. */
void lio_ctr_add(struct lio_ctr *lio_to, const struct lio_ctr *lio_from)
{
	LIO_COUNTERS_KEPT(LIO_COUNTER_ADD_ONCE)
}

static int lio_qp_read_prp(void *opaque, uint64_t gpa, uint64_t *out, unsigned int n)
{
	struct lio_qp *qp = opaque;
	unsigned int i;

	if (lio_win_copy(&qp->ss->win, gpa, out, n * sizeof(*out), false))
		return -EFAULT;
	for (i = 0; i < n; i++)
		out[i] = le64_to_cpu((__force __le64)out[i]);
	return 0;
}

/* One CQE into the guest CQ; the status word (with the phase tag) goes last. The fields are
 * little-endian on the wire, as nvmeq.h's host-order words are on the little-endian hosts the
 * module runs on.
 */
static void lio_qp_post(struct lio_qp *qp, u16 cid, u16 status, u32 dw0)
{
	struct nvme_cqe c = {};
	u64 gpa = qp->cq_gpa + (u64)qp->g_cq_tail * sizeof(c);
	__le16 st = cpu_to_le16(nvmeq_status_word(status, qp->g_phase));

	c.dw0 = cpu_to_le32(dw0);
	c.sq_head = cpu_to_le16(qp->g_sq_head);
	c.sq_id = cpu_to_le16(qp->sqid);
	c.cid = cpu_to_le16(cid);
	c.status = status;
	if (qp->cq_k) {
		nvmeq_cqe_publish(qp->cq_k + (u64)qp->g_cq_tail * sizeof(c), &c, qp->g_phase);
	} else {
		/* guest memory is reached through lio_win_copy (pages of the window, mapped one at
		 * a time), not a pointer nvmeq_cqe_publish could write: its fence and status word
		 * by hand, so that a guest polling the tag sees a whole entry
		 */
		lio_win_copy(&qp->ss->win, gpa, &c, offsetof(struct nvme_cqe, status), true);
		nvmeq_publish_fence();
		lio_win_copy(&qp->ss->win, gpa + offsetof(struct nvme_cqe, status), &st,
			     sizeof(st), true);
	}
	if (nvmeq_step(&qp->g_cq_tail, qp->cq_depth))
		qp->g_phase ^= 1;
	WRITE_ONCE(qp->ctr.cmds, qp->ctr.cmds + 1);
	if (status)
		WRITE_ONCE(qp->ctr.errors, qp->ctr.errors + 1);
	qp->irq_pending++;
}

static void lio_qp_irq_flush(struct lio_qp *qp, bool force)
{
	if (!qp->irq_pending)
		return;
	if (!force && qp->irq_coalesce && qp->irq_pending < qp->irq_coalesce)
		return;
	qp->irq_pending = 0;
	if (!qp->irq_ctx)
		return;
	eventfd_signal(qp->irq_ctx, 1);
	WRITE_ONCE(qp->ctr.irqs, qp->ctr.irqs + 1);
}

/* Free entries of the guest CQ by the head in the shadow doorbell; a head out of range leaves
 * no room (the queue stalls, nothing else happens).
 */
static u32 lio_qp_cq_room(struct lio_qp *qp)
{
	u32 head;

	if (qp->db_k)
		head = le32_to_cpu(READ_ONCE(qp->db_k[LIO_PAGE_SIZE / 4]));
	else if (lio_win_read32(&qp->ss->win, qp->shadow_gpa + 4, &head))
		return 0;
	if (head >= qp->cq_depth)
		return 0;
	return nvmeq_room(head, qp->g_cq_tail, qp->cq_depth);
}

/* The device's PRP1/PRP2 (and list in the slot's page) for the checked segments: split at page
 * boundaries again, each page translated to its DMA address.
 */
static int lio_qp_prps(struct lio_qp *qp, struct lio_slot *s, struct nvme_sqe *cmd)
{
	const struct lio_io *io = &qp->io;
	unsigned int i, n = 0;
	dma_addr_t d;

	for (i = 0; i < io->nsegs; i++) {
		u64 gpa = io->segs[i].gpa;
		u32 rem = io->segs[i].len;

		while (rem) {
			u32 chunk = min_t(u32, rem, LIO_PAGE_SIZE - (gpa & (LIO_PAGE_SIZE - 1)));

			if (lio_win_dma(&qp->ss->win, gpa, &d) || n > LIO_CHECK_MAX_SEGS)
				return -EFAULT;
			if (n == 0)
				cmd->prp1 = cpu_to_le64(d);
			else
				s->buf[n - 1] = cpu_to_le64(d);
			n++;
			gpa += chunk;
			rem -= chunk;
		}
	}
	if (n == 2)
		cmd->prp2 = (__force u64)s->buf[0]; /* already little-endian */
	else if (n > 2)
		cmd->prp2 = cpu_to_le64(s->buf_dma);
	return 0;
}

/* DSM: the range list copied into the slot's page, checked and translated there. */
static u16 lio_qp_dsm(struct lio_qp *qp, struct lio_slot *s, struct nvme_sqe *cmd)
{
	struct nvme_dsm_range *rg = (struct nvme_dsm_range *)s->buf;
	const struct lio_io *io = &qp->io;
	unsigned int nr = io->bytes / sizeof(*rg), i, off = 0;
	u16 st;

	for (i = 0; i < io->nsegs; i++) {
		if (lio_win_copy(&qp->ss->win, io->segs[i].gpa, (u8 *)rg + off, io->segs[i].len,
				 false))
			return NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_DATA_XFER_ERROR);
		off += io->segs[i].len;
	}
	for (i = 0; i < nr; i++) {
		rg[i].cattr = le32_to_cpu(rg[i].cattr);
		rg[i].nlb = le32_to_cpu(rg[i].nlb);
		rg[i].slba = le64_to_cpu(rg[i].slba);
	}
	st = lio_dsm_check(&qp->chk, rg, nr);
	if (st)
		return st;
	for (i = 0; i < nr; i++) {
		if (!rg[i].nlb)
			rg[i].slba = qp->chk.lba_start; /* skipped, but never outside the window */
		rg[i].cattr = cpu_to_le32(rg[i].cattr);
		rg[i].nlb = cpu_to_le32(rg[i].nlb);
		rg[i].slba = cpu_to_le64(rg[i].slba);
	}
	cmd->prp1 = cpu_to_le64(s->buf_dma);
	cmd->cdw10 = cpu_to_le32(nr - 1);
	cmd->cdw11 = cpu_to_le32(io->dsm_attr);
	return 0;
}

/* Checks the private copy sqe and puts the device's command on the controller SQ (no doorbell
 * yet). 0, or the NVMe status to complete the guest's command with.
 */
static u16 lio_qp_start(struct lio_qp *qp, const struct nvme_sqe *sqe)
{
	struct lio_io *io = &qp->io;
	struct nvme_sqe cmd = {};
	struct lio_slot *s = NULL;
	unsigned int i;
	u16 st;

	st = lio_sqe_check(&qp->chk, sqe, io);
	if (st) {
		WRITE_ONCE(qp->ctr.rejected, qp->ctr.rejected + 1);
		return st;
	}
	for (i = 0; i < qp->hw.depth - 1; i++) {
		if (!qp->slots[i].busy) {
			s = &qp->slots[i];
			break;
		}
	}
	if (!s)
		return NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_INTERNAL);
	cmd.opcode = sqe->opcode;
	cmd.cid = cpu_to_le16(i);
	/* the VM's write cache is off: each write durable before its completion, as with FUA */
	s->sync = io->kind == LIO_IO_WRITE && !io->fua &&
		  (READ_ONCE(qp->ss->flags) & LIO_SESSION_WRITE_THROUGH);
	cmd.nsid = cpu_to_le32(1);
	switch (io->kind) {
	case LIO_IO_READ:
	case LIO_IO_WRITE:
		if (lio_qp_prps(qp, s, &cmd))
			return NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_DATA_XFER_ERROR) |
			       NVME_STATUS_DNR;
		fallthrough;
	case LIO_IO_ZEROES:
		cmd.cdw10 = cpu_to_le32(lower_32_bits(io->dev_lba));
		cmd.cdw11 = cpu_to_le32(upper_32_bits(io->dev_lba));
		cmd.cdw12 = cpu_to_le32((io->nlb - 1) | (io->fua || s->sync ? NVME_RW_FUA : 0) |
					(io->kind == LIO_IO_ZEROES ?
					 le32_to_cpu(sqe->cdw12) & NVME_WZ_DEAC : 0));
		break;
	case LIO_IO_DSM:
		st = lio_qp_dsm(qp, s, &cmd);
		if (st)
			return st;
		break;
	case LIO_IO_FLUSH:
		break;
	}
	s->busy = true;
	s->guest_cid = le16_to_cpu(sqe->cid);
	s->kind = io->kind;
	s->bytes = io->kind == LIO_IO_READ || io->kind == LIO_IO_WRITE ? io->bytes : 0;
	memcpy(&qp->hw.sq[qp->hw.sq_tail], &cmd, sizeof(cmd));
	nvmeq_step(&qp->hw.sq_tail, qp->hw.depth);
	qp->inflight++;
	return 0;
}

static unsigned int lio_qp_reap(struct lio_qp *qp)
{
	struct lio_hwq *q = &qp->hw;
	unsigned int n = 0;

	for (;;) {
		struct nvme_cqe c;
		struct lio_slot *s;
		u16 st, cid;
		u32 dw0;

		if (!nvmeq_cqe_take(&q->cq[q->cq_head], q->cq_phase, &c))
			break;
		st = le16_to_cpu(c.status);
		cid = le16_to_cpu(c.cid);
		dw0 = le32_to_cpu(c.dw0);
		if (nvmeq_step(&q->cq_head, q->depth))
			q->cq_phase ^= 1;
		n++;
		if (cid >= q->depth - 1 || !qp->slots[cid].busy) {
			lio_err(qp->ssd, "qp %u: controller completed unknown command %u",
				qp->id, cid);
			continue;
		}
		s = &qp->slots[cid];
		s->busy = false;
		qp->inflight--;
		st >>= 1;
		if (!st && s->kind == LIO_IO_READ)
			WRITE_ONCE(qp->ctr.read_bytes, qp->ctr.read_bytes + s->bytes);
		else if (!st && s->kind == LIO_IO_WRITE)
			WRITE_ONCE(qp->ctr.write_bytes, qp->ctr.write_bytes + s->bytes);
		if (!st && s->sync)
			WRITE_ONCE(qp->ctr.syncs, qp->ctr.syncs + 1);
		lio_qp_post(qp, s->guest_cid, st, dw0);
	}
	if (n)
		writel(q->cq_head, q->cq_db);
	return n;
}

/* The guest's SQ tail: its doorbell page in queue memory, or the shadow doorbell slot. */
static int lio_qp_sq_tail(struct lio_qp *qp, u32 *tail)
{
	if (qp->db_k) {
		*tail = le32_to_cpu(READ_ONCE(qp->db_k[0]));
		return 0;
	}
	return lio_win_read32(&qp->ss->win, qp->shadow_gpa, tail);
}

static int lio_qp_read_sqe(struct lio_qp *qp, u32 idx, struct nvme_sqe *sqe)
{
	if (qp->sq_k) {
		memcpy(sqe, qp->sq_k + (u64)idx * sizeof(*sqe), sizeof(*sqe));
		return 0;
	}
	return lio_win_copy(&qp->ss->win, qp->sq_gpa + (u64)idx * sizeof(*sqe), sqe, sizeof(*sqe),
			    false);
}

/* New SQEs up to the tail in the doorbell, while the guest CQ has room for every command
 * in flight plus this one (so a completion never waits for CQ space).
 */
static unsigned int lio_qp_fetch(struct lio_qp *qp)
{
	const struct lio_window *win = &qp->ss->win;
	unsigned int n = 0, queued = 0;
	struct nvme_sqe sqe;
	bool stalled = false;
	u32 tail, room;
	u16 st;

	if (qp->broken || READ_ONCE(qp->quiesced) || lio_qp_sq_tail(qp, &tail))
		return 0;
	if (tail >= qp->sq_depth) {
		lio_err(qp->ssd, "qp %u: SQ tail %u outside depth %u: queue stopped", qp->id, tail,
			qp->sq_depth);
		qp->broken = true;
		return 0;
	}
	/* the guest wrote its SQEs before the tail: read them after it */
	smp_rmb();
	room = lio_qp_cq_room(qp);
	while (qp->g_sq_head != tail) {
		if (room <= qp->inflight) {
			stalled = true;
			break;
		}
		if (qp->inflight >= qp->hw.depth - 1)
			break; /* the controller's completion kicks us again */
		if (lio_qp_read_sqe(qp, qp->g_sq_head, &sqe))
			break;
		nvmeq_step(&qp->g_sq_head, qp->sq_depth);
		n++;
		st = lio_qp_start(qp, &sqe);
		if (st) {
			lio_qp_post(qp, le16_to_cpu(sqe.cid), st, 0);
			room--;
		} else {
			queued++;
		}
	}
	if (queued)
		writel(qp->hw.sq_tail, qp->hw.sq_db);
	if (!qp->db_k && qp->eventidx_gpa)
		lio_win_write32(win, qp->eventidx_gpa, qp->g_sq_head);
	if (n)
		WRITE_ONCE(qp->ctr.polls, qp->ctr.polls + 1);
	if (stalled) /* the guest frees CQ entries without telling us: look again soon */
		mod_delayed_work(lio_wq, &qp->work, 1);
	return n;
}

static void lio_qp_work(struct work_struct *w)
{
	struct lio_qp *qp = container_of(to_delayed_work(w), struct lio_qp, work);
	unsigned int n;

	if (READ_ONCE(qp->stopping))
		return;
	n = lio_qp_reap(qp);
	n += lio_qp_fetch(qp);
	lio_qp_irq_flush(qp, qp->inflight == 0);
	if (!n)
		WRITE_ONCE(qp->ctr.sleeps, qp->ctr.sleeps + 1);
	/* DB_POLL: nothing tells us of a new tail; look again at the next tick */
	if (qp->db_k && !READ_ONCE(qp->stopping))
		queue_delayed_work(lio_wq, &qp->work, 1);
}

static irqreturn_t lio_qp_irq(int irq, void *data)
{
	struct lio_qp *qp = data;

	mod_delayed_work(lio_wq, &qp->work, 0);
	return IRQ_HANDLED;
}

/* DB_DIRECT: the CQ is the guest's own; the vector only tells it so (where KVM takes the vector
 * through IRQ bypass, this handler no longer runs).
 */
static irqreturn_t lio_qp_direct_irq(int irq, void *data)
{
	struct lio_qp *qp = data;

	if (qp->irq_ctx) {
		eventfd_signal(qp->irq_ctx, 1);
		WRITE_ONCE(qp->ctr.irqs, qp->ctr.irqs + 1);
	}
	return IRQ_HANDLED;
}

static void lio_qp_bypass_add(struct lio_qp *qp)
{
#if IS_ENABLED(CONFIG_IRQ_BYPASS_MANAGER)
	int r;

	/* the token KVM's irqfd consumer carries: the eventfd context of the guest's vector */
	qp->bypass.token = qp->irq_ctx;
	qp->bypass.irq = qp->irq;
	r = irq_bypass_register_producer(&qp->bypass);
	if (r)
		lio_err(qp->ssd, "qp %u: IRQ bypass producer not registered (%d): eventfd only",
			qp->id, r);
	else
		qp->bypass_on = true;
#endif
}

static void lio_qp_bypass_del(struct lio_qp *qp)
{
#if IS_ENABLED(CONFIG_IRQ_BYPASS_MANAGER)
	if (qp->bypass_on)
		irq_bypass_unregister_producer(&qp->bypass);
	qp->bypass_on = false;
#endif
}

/* The doorbell eventfd's wake-up, under its wait-queue lock: consume the count, kick the work. */
static int lio_qp_db_wake(wait_queue_entry_t *wait, unsigned int mode, int sync, void *key)
{
	struct lio_qp *qp = container_of(wait, struct lio_qp, db_wait);
	u64 cnt;

	if (key_to_poll(key) & EPOLLIN) {
		eventfd_ctx_do_read(qp->db_ctx, &cnt);
		mod_delayed_work(lio_wq, &qp->work, 0);
	}
	return 0;
}

static void lio_qp_db_queue(struct file *file, wait_queue_head_t *wqh, poll_table *pt)
{
	struct lio_qp *qp = container_of(pt, struct lio_qp, db_pt);

	qp->db_wqh = wqh;
	add_wait_queue(wqh, &qp->db_wait);
}

static int lio_qp_db_attach(struct lio_qp *qp, int fd)
{
	struct file *f = eventfd_fget(fd);
	__poll_t events;

	if (IS_ERR(f))
		return PTR_ERR(f);
	qp->db_ctx = eventfd_ctx_fileget(f);
	if (IS_ERR(qp->db_ctx)) {
		qp->db_ctx = NULL;
		fput(f);
		return -EBADF;
	}
	init_waitqueue_func_entry(&qp->db_wait, lio_qp_db_wake);
	init_poll_funcptr(&qp->db_pt, lio_qp_db_queue);
	events = vfs_poll(f, &qp->db_pt);
	fput(f);
	if (events & EPOLLIN)
		mod_delayed_work(lio_wq, &qp->work, 0);
	return 0;
}

struct lio_qp *lio_qp_find(struct lio_ssd *ssd, u32 id)
{
	struct lio_session *s;
	struct lio_qp *qp;

	list_for_each_entry(s, &ssd->sessions, node)
		list_for_each_entry(qp, &s->qps, node)
			if (qp->id == id)
				return qp;
	return NULL;
}

static u32 lio_qp_new_id(struct lio_ssd *ssd)
{
	u32 i, id;

	for (i = 0; i < LIO_MAX_QPAIRS; i++) {
		id = (ssd->next_qp_id + i) % LIO_MAX_QPAIRS + 1;
		if (!lio_qp_find(ssd, id)) {
			ssd->next_qp_id = id;
			return id;
		}
	}
	return 0;
}

/* The paper's passthrough: what the controller and the platform must offer for it (its shape,
 * passthrough with both rings in queue memory, is the ABI's: lio_abi_qp_create checked it).
 */
static int lio_qp_validate_direct(struct lio_ssd *ssd, const struct lio_qp_create *q)
{
	if (q->sq_depth > NVME_CAP_MQES(ssd->cap) + 1) {
		lio_err(ssd, "qp-create: DB_DIRECT: sq_depth %u is more than the controller's %u",
			q->sq_depth, NVME_CAP_MQES(ssd->cap) + 1);
		return -EINVAL;
	}
	/* the controller's own doorbells: no command passes the module, no LBA is checked */
	if (!lio_allow_db_direct) {
		lio_err(ssd, "qp-create: DB_DIRECT reaches every LBA of the SSD unchecked: load with allow_db_direct=1 to grant it");
		return -EPERM;
	}
	if (ssd->db_stride < PAGE_SIZE) {
		lio_err(ssd, "qp-create: DB_DIRECT: CAP.DSTRD %u (doorbell stride %u bytes) puts the doorbells of several queues on one page",
			NVME_CAP_DSTRD(ssd->cap), ssd->db_stride);
		return -EOPNOTSUPP;
	}
	if (device_iommu_mapped(&ssd->pdev->dev)) {
		lio_err(ssd, "qp-create: DB_DIRECT behind an IOMMU needs an IOVA = GPA domain per VM, which lightiov.ko does not build yet");
		return -EOPNOTSUPP;
	}
	if (!lio_direct_noiommu) {
		lio_err(ssd, "qp-create: DB_DIRECT without an IOMMU lets the client DMA anywhere: load with direct_noiommu=1 to trust it");
		return -EPERM;
	}
	return 0;
}

/* The ABI's rules (common/abi.c), then the module's own in the order abi.h gives: DB_DIRECT's
 * grants and controller, the limits (the session's queue pairs, then the SSD's). The volume and
 * the resources follow in lio_qp_create and lio_qp_setup.
 */
static int lio_qp_validate(struct lio_session *ss, const struct lio_qp_create *q,
			   const struct lio_qp_restore *rq)
{
	struct lio_abi_session as = lio_abi_session(ss);
	struct lio_ssd *ssd = ss->ssd;
	struct lio_abi_err e;
	int r;

	/* the ioctl's fd fields are the fds themselves */
	if (rq)
		r = lio_abi_qp_restore(rq, &as, LIO_QP_FLAGS_ALL & ~LIO_QP_DB_STRIDE, true, &e);
	else
		r = lio_abi_qp_create(q, &as, LIO_QP_FLAGS_ALL & ~LIO_QP_DB_STRIDE, true, &e);
	if (r)
		return lio_abi_refuse(ssd, rq ? "qp-restore" : "qp-create", r, &e);
	if (rq && (q->flags & LIO_QP_DB_DIRECT)) {
		lio_err(ssd, "qp-restore: DB_DIRECT rings are the controller's: no state to restore");
		return -EOPNOTSUPP;
	}
	if (q->flags & LIO_QP_DB_DIRECT) {
		r = lio_qp_validate_direct(ssd, q);
		if (r)
			return r;
	}
	if (ss->nqps >= lio_max_session_qpairs) {
		lio_err(ssd, "qp-create: the session has %u queue pairs, its limit (max_session_qpairs)",
			ss->nqps);
		return -ENOSPC;
	}
	/* DB_DIRECT ones too: each takes a controller queue like any other */
	if (ssd->nqpairs >= lio_max_qpairs) {
		lio_err(ssd, "qp-create: the SSD serves %u queue pairs, its limit", ssd->nqpairs);
		return -ENOSPC;
	}
	return 0;
}

static void lio_qp_free(struct lio_qp *qp)
{
	struct device *dev = &qp->ssd->pdev->dev;
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(qp->slots); i++)
		if (qp->slots[i].buf)
			dma_free_coherent(dev, LIO_PAGE_SIZE, qp->slots[i].buf,
					  qp->slots[i].buf_dma);
	lio_hwq_free(qp->ssd, &qp->hw);
	if (qp->hw.qid)
		clear_bit(qp->hw.qid, qp->ssd->qid_used);
	if (qp->db_ctx)
		eventfd_ctx_put(qp->db_ctx);
	if (qp->irq_ctx)
		eventfd_ctx_put(qp->irq_ctx);
	lio_qmem_release(qp->ss->qm, qp->sq_off, (u64)qp->sq_depth * sizeof(struct nvme_sqe));
	lio_qmem_release(qp->ss->qm, qp->cq_off, (u64)qp->cq_depth * sizeof(struct nvme_cqe));
	lio_qmem_release(qp->ss->qm, qp->db_off, 2 * LIO_PAGE_SIZE);
	kfree(qp);
}

/* Rings and doorbell pages the flags put in queue memory, carved and zeroed. */
static int lio_qp_carve(struct lio_qp *qp, const struct lio_qp_create *q)
{
	struct lio_qmem_area *qm = qp->ss->qm;
	u64 sqb = (u64)q->sq_depth * sizeof(struct nvme_sqe);
	u64 cqb = (u64)q->cq_depth * sizeof(struct nvme_cqe);

	if (q->flags & LIO_QP_SQ_QMEM) {
		qp->sq_off = lio_qmem_carve(qm, sqb);
		if (qp->sq_off < 0)
			goto full;
		qp->sq_k = lio_qmem_ptr(qm, qp->sq_off);
	}
	if (q->flags & LIO_QP_CQ_QMEM) {
		qp->cq_off = lio_qmem_carve(qm, cqb);
		if (qp->cq_off < 0)
			goto full;
		qp->cq_k = lio_qmem_ptr(qm, qp->cq_off);
	}
	if (q->flags & LIO_QP_DB_POLL) {
		qp->db_off = lio_qmem_carve(qm, 2 * LIO_PAGE_SIZE);
		if (qp->db_off < 0)
			goto full;
		qp->db_k = lio_qmem_ptr(qm, qp->db_off);
	}
	return 0;
full:
	lio_err(qp->ssd, "qp-create: queue memory of %llu bytes has no room for SQ %llu + CQ %llu + doorbells",
		qm->size, sqb, cqb);
	return -ENOSPC;
}

static int lio_qp_irq_ctx(struct lio_qp *qp, const struct lio_qp_create *q)
{
	qp->irq_ctx = NULL;
	if (!(q->flags & LIO_QP_IRQ_ENABLED))
		return 0;
	qp->irq_ctx = eventfd_ctx_fdget(q->irq_fd);
	if (IS_ERR(qp->irq_ctx)) {
		qp->irq_ctx = NULL;
		lio_err(qp->ssd, "qp-create: irq_fd %d is not an eventfd", q->irq_fd);
		return -EBADF;
	}
	return 0;
}

static int lio_qp_vector(struct lio_ssd *ssd, unsigned long qid)
{
	return qid < ssd->nvec ? qid : 1 + qid % (ssd->nvec - 1);
}

/* DB_DIRECT: the controller queue's rings are the carved ones; nothing of the module runs on
 * the data path, the vector goes to the irq eventfd (or to KVM through IRQ bypass).
 */
static int lio_qp_setup_direct(struct lio_qp *qp, const struct lio_qp_create *q)
{
	struct lio_ssd *ssd = qp->ssd;
	struct lio_qmem_area *qm = qp->ss->qm;
	unsigned long qid;
	int vec, r;

	r = lio_qp_irq_ctx(qp, q);
	if (r)
		return r;
	qid = find_first_zero_bit(ssd->qid_used, ssd->nr_ioq + 1);
	if (qid > ssd->nr_ioq) {
		lio_err(ssd, "qp-create: all %u controller queues are in use", ssd->nr_ioq);
		return -ENOSPC;
	}
	lio_hwq_init(ssd, &qp->hw, qid, q->sq_depth);
	set_bit(qid, ssd->qid_used);
	/* the rings stay the session's: lio_hwq_free must not free them (sq, cq stay NULL) */
	qp->hw.sq_dma = lio_qmem_dma(qm, qp->sq_off);
	qp->hw.cq_dma = lio_qmem_dma(qm, qp->cq_off);
	vec = lio_qp_vector(ssd, qid);
	r = lio_ctrl_create_ioq(ssd, &qp->hw, qp->irq_ctx ? vec : -1);
	if (r)
		return r;
	if (qp->irq_ctx) {
		qp->irq = pci_irq_vector(ssd->pdev, vec);
		r = request_irq(qp->irq, lio_qp_direct_irq, IRQF_SHARED, "lightiov", qp);
		if (r) {
			qp->irq = -1;
			lio_ctrl_delete_ioq(ssd, &qp->hw);
			return r;
		}
		lio_qp_bypass_add(qp);
	}
	qp->direct = true;
	/* two pages per queue-pair id: never the same offset for two queue pairs of the SSD */
	qp->mmap_off = (u64)qp->id << (PAGE_SHIFT + 1);
	return 0;
}

static int lio_qp_setup(struct lio_qp *qp, const struct lio_qp_create *q,
			const struct lio_attached *vol)
{
	struct lio_session *ss = qp->ss;
	struct lio_ssd *ssd = ss->ssd;
	u16 depth = min_t(u32, LIO_IOQ_DEPTH, NVME_CAP_MQES(ssd->cap) + 1);
	unsigned long qid;
	unsigned int i;
	int vec, r;

	qp->chk.regions = ss->win.cr;
	qp->chk.nr_regions = ss->win.n;
	qp->chk.lba_shift = ssd->lba_shift;
	qp->chk.nsid = 1;
	qp->chk.mdts_bytes = ssd->mdts_bytes;
	qp->chk.read_prp = lio_qp_read_prp;
	qp->chk.opaque = qp;
	/* both modes stay inside the attached volume: isolated SQEs carry volume-relative LBAs
	 * (translated), passthrough ones absolute LBAs, checked against the same range without
	 * the translation (as softssd does)
	 */
	qp->chk.lba_start = vol->lba_start;
	qp->chk.lba_count = vol->lba_count;
	if (q->mode == LIGHTIOV_MODE_ISOLATED)
		qp->chk.flags = LIO_CHECK_TRANSLATE;
	if ((q->flags & LIO_QP_READONLY) || (vol->flags & LIO_ATTACH_READONLY))
		qp->chk.flags |= LIO_CHECK_READONLY;

	if ((vol->flags & LIO_ATTACH_READONLY) && (q->flags & LIO_QP_DB_DIRECT)) {
		lio_err(ssd, "qp-create: DB_DIRECT on read-only volume %s: writes could not be refused",
			vol->name);
		return -EINVAL;
	}
	r = lio_qp_carve(qp, q);
	if (r)
		return r;
	if (q->flags & LIO_QP_DB_DIRECT)
		return lio_qp_setup_direct(qp, q);
	/* the rings and doorbell slots in the window: lio_abi_qp_create checked them */
	r = lio_qp_irq_ctx(qp, q);
	if (r)
		return r;
	qid = find_first_zero_bit(ssd->qid_used, ssd->nr_ioq + 1);
	if (qid > ssd->nr_ioq) {
		lio_err(ssd, "qp-create: all %u controller queues are in use", ssd->nr_ioq);
		return -ENOSPC;
	}
	r = lio_hwq_alloc(ssd, &qp->hw, qid, depth);
	if (r)
		return r;
	set_bit(qid, ssd->qid_used);
	for (i = 0; i < depth - 1; i++) {
		qp->slots[i].buf = dma_alloc_coherent(&ssd->pdev->dev, LIO_PAGE_SIZE,
						      &qp->slots[i].buf_dma, GFP_KERNEL);
		if (!qp->slots[i].buf)
			return -ENOMEM;
	}
	vec = lio_qp_vector(ssd, qid);
	r = lio_ctrl_create_ioq(ssd, &qp->hw, vec);
	if (r)
		return r;
	qp->irq = pci_irq_vector(ssd->pdev, vec);
	r = request_irq(qp->irq, lio_qp_irq, IRQF_SHARED, "lightiov", qp);
	if (r) {
		qp->irq = -1;
		lio_ctrl_delete_ioq(ssd, &qp->hw);
		return r;
	}
	if (qp->db_k) {
		/* polled from the first tick on */
		mod_delayed_work(lio_wq, &qp->work, 1);
		return 0;
	}
	r = lio_qp_db_attach(qp, q->db_fd);
	if (r) {
		lio_err(ssd, "qp-create: db_fd %d is not an eventfd", q->db_fd);
		WRITE_ONCE(qp->stopping, true);
		free_irq(qp->irq, qp);
		qp->irq = -1;
		cancel_delayed_work_sync(&qp->work);
		lio_ctrl_delete_ioq(ssd, &qp->hw);
		return -EBADF;
	}
	return 0;
}

/* QP_CREATE, or with rq QP_RESTORE: the same queue pair, quiesced at rq->st. */
static int lio_qp_make(struct lio_session *ss, struct lio_qp_create *q,
		       const struct lio_qp_restore *rq)
{
	struct lio_ssd *ssd = ss->ssd;
	struct lio_attached *vol = NULL;
	struct lio_qp *qp;
	unsigned int i;
	int r;

	r = lio_qp_validate(ss, q, rq);
	if (r)
		return r;
	for (i = 0; i < ss->nvols; i++)
		if (ss->vols[i].vol_id == q->vol_id)
			vol = &ss->vols[i];
	if (!vol) {
		lio_err(ssd, "qp-create: volume %u is not attached to this session", q->vol_id);
		return -ENOENT;
	}
	qp = kzalloc(sizeof(*qp), GFP_KERNEL);
	if (!qp)
		return -ENOMEM;
	qp->ssd = ssd;
	qp->ss = ss;
	qp->irq = -1;
	qp->mode = q->mode;
	qp->flags = q->flags;
	qp->vol_id = q->vol_id;
	qp->sqid = q->sqid;
	qp->cqid = q->cqid;
	qp->sq_depth = q->sq_depth;
	qp->cq_depth = q->cq_depth;
	qp->irq_coalesce = q->irq_coalesce;
	qp->sq_gpa = q->sq_gpa;
	qp->cq_gpa = q->cq_gpa;
	qp->shadow_gpa = q->shadow_db_gpa;
	qp->eventidx_gpa = q->eventidx_gpa;
	qp->g_phase = 1;
	if (rq) {
		/* before the doorbell or the first tick can run the work item */
		qp->quiesced = true;
		qp->g_sq_head = rq->st.sq_head;
		qp->g_cq_tail = rq->st.cq_tail;
		qp->g_phase = rq->st.phase;
	}
	qp->sq_off = -1;
	qp->cq_off = -1;
	qp->db_off = -1;
	INIT_DELAYED_WORK(&qp->work, lio_qp_work);
	qp->id = lio_qp_new_id(ssd);
	if (!qp->id) {
		lio_err(ssd, "qp-create: no free queue-pair id");
		kfree(qp);
		return -ENOSPC;
	}
	/* on the list before the doorbell can fire: ids stay unique, destroy finds it */
	list_add(&qp->node, &ss->qps);
	ss->nqps++;
	ssd->nqpairs++;
	r = lio_qp_setup(qp, q, vol);
	if (r) {
		list_del(&qp->node);
		ss->nqps--;
		ssd->nqpairs--;
		cancel_delayed_work_sync(&qp->work);
		lio_qp_free(qp);
		return r;
	}
	q->qp_id = qp->id;
	q->db_fd = -1;
	q->irq_fd = -1;
	q->sq_off = qp->sq_off >= 0 ? qp->sq_off : 0;
	q->cq_off = qp->cq_off >= 0 ? qp->cq_off : 0;
	q->db_off = qp->db_off >= 0 ? qp->db_off : qp->direct ? qp->mmap_off : 0;
	if (rq && qp->db_k) {
		/* the fresh doorbell pages get the values the queue pair had */
		WRITE_ONCE(qp->db_k[0], cpu_to_le32(rq->st.sq_tail_db));
		WRITE_ONCE(qp->db_k[LIO_PAGE_SIZE / 4], cpu_to_le32(rq->st.cq_head_db));
	}
	return 0;
}

int lio_qp_create(struct lio_session *ss, struct lio_qp_create *q)
{
	return lio_qp_make(ss, q, NULL);
}

int lio_qp_restore(struct lio_session *ss, struct lio_qp_restore *rq)
{
	int r = lio_qp_make(ss, &rq->qp, rq);

	if (!r)
		rq->st.qp_id = rq->qp.qp_id;
	return r;
}

static struct lio_qp *lio_qp_mine(struct lio_session *ss, u32 id)
{
	struct lio_qp *qp;

	list_for_each_entry(qp, &ss->qps, node)
		if (qp->id == id)
			return qp;
	return NULL;
}

static void lio_qp_report(struct lio_qp *qp, struct lio_qp_state *st)
{
	u32 v = 0;

	st->sq_head = qp->g_sq_head;
	st->cq_tail = qp->g_cq_tail;
	st->phase = qp->g_phase;
	lio_qp_sq_tail(qp, &v);
	st->sq_tail_db = v;
	v = 0;
	if (qp->db_k)
		v = le32_to_cpu(READ_ONCE(qp->db_k[LIO_PAGE_SIZE / 4]));
	else
		lio_win_read32(&qp->ss->win, qp->shadow_gpa + 4, &v);
	st->cq_head_db = v;
	st->cq_head = v < qp->cq_depth ? v : 0;
	st->sq_depth = qp->sq_depth;
	st->cq_depth = qp->cq_depth;
	st->flags = qp->broken ? LIO_QPS_BAD_DB : 0;
	st->rsvd = 0;
}

/* Stops fetching, waits for the controller to complete what was fetched (each completion
 * posted to the guest by the work item, its interrupt raised once none is left), then reports.
 */
int lio_qp_quiesce(struct lio_session *ss, struct lio_qp_state *st)
{
	struct lio_ssd *ssd = ss->ssd;
	u32 ms = st->timeout_ms ? st->timeout_ms : LIO_QUIESCE_TIMEOUT_MS;
	struct lio_abi_err e;
	unsigned long deadline;
	struct lio_qp *qp;
	u64 t0;
	int r;

	r = lio_abi_qp_quiesce(st, &e);
	if (r)
		return lio_abi_refuse(ssd, "qp-quiesce", r, &e);
	qp = lio_qp_mine(ss, st->qp_id);
	if (!qp) {
		lio_err(ssd, "qp-quiesce: queue pair %u is not one of this session's", st->qp_id);
		return -ENOENT;
	}
	if (qp->direct) {
		lio_err(ssd, "qp-quiesce: queue pair %u is DB_DIRECT: the client drives the controller",
			qp->id);
		return -EOPNOTSUPP;
	}
	t0 = ktime_get_ns();
	WRITE_ONCE(qp->quiesced, true);
	/* a fetch running now finishes; after this none starts */
	flush_delayed_work(&qp->work);
	deadline = jiffies + msecs_to_jiffies(ms);
	while (READ_ONCE(qp->inflight) && time_before(jiffies, deadline)) {
		mod_delayed_work(lio_wq, &qp->work, 0);
		flush_delayed_work(&qp->work);
		if (READ_ONCE(qp->inflight))
			usleep_range(200, 500);
	}
	if (READ_ONCE(qp->inflight)) {
		lio_err(ssd, "qp-quiesce: queue pair %u: %u commands still in flight after %u ms",
			qp->id, qp->inflight, ms);
		WRITE_ONCE(qp->quiesced, false);
		mod_delayed_work(lio_wq, &qp->work, 0);
		return -ETIMEDOUT;
	}
	/* the last reap's interrupt: the work item raises it once nothing is in flight */
	mod_delayed_work(lio_wq, &qp->work, 0);
	flush_delayed_work(&qp->work);
	lio_qp_report(qp, st);
	st->timeout_ms = ms;
	st->quiesce_ns = ktime_get_ns() - t0;
	return 0;
}

int lio_qp_resume(struct lio_session *ss, u32 qp_id)
{
	struct lio_qp *qp = lio_qp_mine(ss, qp_id);

	if (!qp) {
		lio_err(ss->ssd, "qp-resume: queue pair %u is not one of this session's", qp_id);
		return -ENOENT;
	}
	if (!READ_ONCE(qp->quiesced)) {
		lio_err(ss->ssd, "qp-resume: queue pair %u is not quiesced", qp_id);
		return -EINVAL;
	}
	WRITE_ONCE(qp->quiesced, false);
	mod_delayed_work(lio_wq, &qp->work, 0);
	return 0;
}

/* Stops the kicks (doorbell, interrupt), waits out the work item, then deletes the controller
 * queues, which completes or aborts whatever the controller still held.
 */
void lio_qp_destroy(struct lio_qp *qp)
{
	struct lio_ssd *ssd = qp->ssd;
	u64 cnt;

	WRITE_ONCE(qp->stopping, true);
	/* the client's doorbell mappings go first: nobody rings a queue about to be deleted */
	if (qp->direct && qp->ss->mapping)
		unmap_mapping_range(qp->ss->mapping, qp->mmap_off, 2 * PAGE_SIZE, 1);
	lio_qp_bypass_del(qp);
	if (qp->db_wqh)
		eventfd_ctx_remove_wait_queue(qp->db_ctx, &qp->db_wait, &cnt);
	if (qp->irq >= 0)
		free_irq(qp->irq, qp);
	cancel_delayed_work_sync(&qp->work);
	lio_ctrl_delete_ioq(ssd, &qp->hw);
	list_del(&qp->node);
	qp->ss->nqps--;
	ssd->nqpairs--;
	lio_ctr_add(&qp->ss->retired, &qp->ctr);
	lio_qp_free(qp);
}

/* mmap() of the device file at a DB_DIRECT queue pair's db_off: the controller's SQ tail and CQ
 * head doorbell pages of its queue (DSTRD puts each on its own page; validated at create time).
 */
int lio_qp_mmap(struct lio_session *ss, struct vm_area_struct *vma)
{
	u64 off = (u64)vma->vm_pgoff << PAGE_SHIFT, len = vma->vm_end - vma->vm_start;
	struct lio_ssd *ssd = ss->ssd;
	struct lio_qp *qp;

	list_for_each_entry(qp, &ss->qps, node) {
		if (!qp->direct || qp->mmap_off != off)
			continue;
		if (len > 2 * PAGE_SIZE) {
			lio_err(ssd, "mmap: %llu bytes at 0x%llx: a queue pair's doorbells are 2 pages",
				len, off);
			return -EINVAL;
		}
		vma->vm_flags |= VM_DONTCOPY;
		vma->vm_page_prot = pgprot_noncached(vma->vm_page_prot);
		return io_remap_pfn_range(vma, vma->vm_start,
					  lio_ctrl_db_phys(ssd, qp->hw.qid) >> PAGE_SHIFT, len,
					  vma->vm_page_prot);
	}
	lio_err(ssd, "mmap: offset 0x%llx is not the doorbell pages of a DB_DIRECT queue pair of this session",
		off);
	return -EINVAL;
}
