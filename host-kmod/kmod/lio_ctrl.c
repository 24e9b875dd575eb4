// SPDX-License-Identifier: GPL-2.0
/* The NVMe controller as lightiov.ko drives it: reset and enable, the polled admin queue,
 * Identify, controller queue pairs, and the polled internal queue the volume table uses.
 */
#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/io-64-nonatomic-lo-hi.h>
#include <linux/slab.h>

#include "lio.h"

static u32 __iomem *lio_db(struct lio_ssd *ssd, u16 qid, bool cq)
{
	return ssd->bar + NVME_REG_DBS + (2 * qid + cq) * ssd->db_stride;
}

/* The bus address of the SQ tail doorbell of qid (its CQ head doorbell is one stride on). */
phys_addr_t lio_ctrl_db_phys(struct lio_ssd *ssd, u16 qid)
{
	return pci_resource_start(ssd->pdev, 0) + NVME_REG_DBS + 2 * qid * ssd->db_stride;
}

/* q without rings of its own: the caller sets sq/cq and their DMA addresses. */
void lio_hwq_init(struct lio_ssd *ssd, struct lio_hwq *q, u16 qid, u16 depth)
{
	memset(q, 0, sizeof(*q));
	q->qid = qid;
	q->depth = depth;
	q->cq_phase = 1;
	q->sq_db = lio_db(ssd, qid, false);
	q->cq_db = lio_db(ssd, qid, true);
}

int lio_hwq_alloc(struct lio_ssd *ssd, struct lio_hwq *q, u16 qid, u16 depth)
{
	struct device *dev = &ssd->pdev->dev;

	lio_hwq_init(ssd, q, qid, depth);
	q->sq = dma_alloc_coherent(dev, depth * sizeof(*q->sq), &q->sq_dma, GFP_KERNEL);
	q->cq = dma_alloc_coherent(dev, depth * sizeof(*q->cq), &q->cq_dma, GFP_KERNEL);
	if (!q->sq || !q->cq) {
		lio_hwq_free(ssd, q);
		return -ENOMEM;
	}
	return 0;
}

void lio_hwq_free(struct lio_ssd *ssd, struct lio_hwq *q)
{
	struct device *dev = &ssd->pdev->dev;

	if (q->sq)
		dma_free_coherent(dev, q->depth * sizeof(*q->sq), q->sq, q->sq_dma);
	if (q->cq)
		dma_free_coherent(dev, q->depth * sizeof(*q->cq), q->cq, q->cq_dma);
	q->sq = NULL;
	q->cq = NULL;
}

static void lio_hwq_submit(struct lio_hwq *q, const struct nvme_sqe *sqe)
{
	memcpy(&q->sq[q->sq_tail], sqe, sizeof(*sqe));
	nvmeq_step(&q->sq_tail, q->depth);
	writel(q->sq_tail, q->sq_db);
}

/* Polls q for the completion of cid (the admin and internal queues have no interrupt: they
 * run only on the control path, under ssd->lock). Stale completions of timed-out commands are
 * consumed and skipped.
 */
static int lio_hwq_wait(struct lio_ssd *ssd, struct lio_hwq *q, u16 cid, u32 *result)
{
	unsigned long end = jiffies + msecs_to_jiffies(LIO_CMD_TIMEOUT_MS);

	for (;;) {
		struct nvme_cqe c;

		if (nvmeq_cqe_take(&q->cq[q->cq_head], q->cq_phase, &c)) {
			u16 st = le16_to_cpu(c.status), ccid = le16_to_cpu(c.cid);
			u32 dw0 = le32_to_cpu(c.dw0);

			if (nvmeq_step(&q->cq_head, q->depth))
				q->cq_phase ^= 1;
			writel(q->cq_head, q->cq_db);
			if (ccid != cid)
				continue;
			if (result)
				*result = dw0;
			if (st >> 1) {
				dev_err(&ssd->pdev->dev, "queue %u: command %u failed with status 0x%x\n",
					q->qid, cid, st >> 1);
				return -EIO;
			}
			return 0;
		}
		if (time_after(jiffies, end)) {
			dev_err(&ssd->pdev->dev, "queue %u: command %u timed out\n", q->qid, cid);
			return -ETIMEDOUT;
		}
		usleep_range(20, 200);
	}
}

int lio_ctrl_admin(struct lio_ssd *ssd, struct nvme_sqe *sqe, u32 *result)
{
	sqe->cid = cpu_to_le16(ssd->next_cid++);
	lio_hwq_submit(&ssd->admin, sqe);
	return lio_hwq_wait(ssd, &ssd->admin, le16_to_cpu(sqe->cid), result);
}

/* Synchronous I/O on the internal queue; the data buffer is ssd->vt_buf from the page-aligned
 * buf_off (bytes <= MDTS).
 */
int lio_ctrl_io(struct lio_ssd *ssd, u8 opcode, u64 lba, u32 buf_off, u32 bytes)
{
	dma_addr_t dma = ssd->vt_dma + buf_off;
	struct nvme_sqe sqe = { .opcode = opcode, .nsid = cpu_to_le32(1) };
	unsigned int npages = DIV_ROUND_UP(bytes, LIO_PAGE_SIZE), i;

	if (bytes) {
		if (bytes > ssd->mdts_bytes || bytes & ((1u << ssd->lba_shift) - 1))
			return -EINVAL;
		sqe.prp1 = cpu_to_le64(dma);
		if (npages == 2) {
			sqe.prp2 = cpu_to_le64(dma + LIO_PAGE_SIZE);
		} else if (npages > 2) {
			for (i = 1; i < npages; i++)
				ssd->vt_prp[i - 1] = cpu_to_le64(dma + i * LIO_PAGE_SIZE);
			sqe.prp2 = cpu_to_le64(ssd->vt_prp_dma);
		}
		sqe.cdw10 = cpu_to_le32(lower_32_bits(lba));
		sqe.cdw11 = cpu_to_le32(upper_32_bits(lba));
		sqe.cdw12 = cpu_to_le32((bytes >> ssd->lba_shift) - 1);
	}
	sqe.cid = cpu_to_le16(ssd->next_cid++);
	lio_hwq_submit(&ssd->ioq, &sqe);
	return lio_hwq_wait(ssd, &ssd->ioq, le16_to_cpu(sqe.cid), NULL);
}

/* Creates the CQ and SQ of q on the controller; vector < 0: no interrupt (polled). */
int lio_ctrl_create_ioq(struct lio_ssd *ssd, struct lio_hwq *q, int vector)
{
	struct nvme_sqe sqe = { .opcode = NVME_ADMIN_CREATE_CQ };
	u32 qsize = (u32)(q->depth - 1) << 16 | q->qid;
	int r;

	sqe.prp1 = cpu_to_le64(q->cq_dma);
	sqe.cdw10 = cpu_to_le32(qsize);
	sqe.cdw11 = cpu_to_le32(vector < 0 ? 1 : 1 | 2 | (u32)vector << 16);
	r = lio_ctrl_admin(ssd, &sqe, NULL);
	if (r)
		return r;
	memset(&sqe, 0, sizeof(sqe));
	sqe.opcode = NVME_ADMIN_CREATE_SQ;
	sqe.prp1 = cpu_to_le64(q->sq_dma);
	sqe.cdw10 = cpu_to_le32(qsize);
	sqe.cdw11 = cpu_to_le32(1 | (u32)q->qid << 16);
	r = lio_ctrl_admin(ssd, &sqe, NULL);
	if (r) {
		memset(&sqe, 0, sizeof(sqe));
		sqe.opcode = NVME_ADMIN_DELETE_CQ;
		sqe.cdw10 = cpu_to_le32(q->qid);
		lio_ctrl_admin(ssd, &sqe, NULL);
	}
	return r;
}

/* Deleting the SQ first makes the controller finish or abort what it holds of it. */
void lio_ctrl_delete_ioq(struct lio_ssd *ssd, struct lio_hwq *q)
{
	struct nvme_sqe sqe = { .opcode = NVME_ADMIN_DELETE_SQ };

	sqe.cdw10 = cpu_to_le32(q->qid);
	lio_ctrl_admin(ssd, &sqe, NULL);
	memset(&sqe, 0, sizeof(sqe));
	sqe.opcode = NVME_ADMIN_DELETE_CQ;
	sqe.cdw10 = cpu_to_le32(q->qid);
	lio_ctrl_admin(ssd, &sqe, NULL);
}

static int lio_ctrl_wait_ready(struct lio_ssd *ssd, bool ready)
{
	unsigned int to_ms = ((ssd->cap >> NVME_CAP_TO_SHIFT) & 0xff) * 500 + 500;
	unsigned long end = jiffies + msecs_to_jiffies(to_ms);
	u32 csts;

	for (;;) {
		csts = readl(ssd->bar + NVME_REG_CSTS);
		if (csts == ~0u)
			return -ENODEV;
		if (!!(csts & NVME_CSTS_RDY) == ready)
			return 0;
		if (ready && (csts & NVME_CSTS_CFS)) {
			dev_err(&ssd->pdev->dev, "controller fatal status (CSTS 0x%x)\n", csts);
			return -EIO;
		}
		if (time_after(jiffies, end)) {
			dev_err(&ssd->pdev->dev, "CSTS.RDY did not become %d in %u ms\n", ready,
				to_ms);
			return -ETIMEDOUT;
		}
		usleep_range(1000, 2000);
	}
}

static int lio_ctrl_identify(struct lio_ssd *ssd)
{
	struct device *dev = &ssd->pdev->dev;
	struct nvme_sqe sqe = { .opcode = NVME_ADMIN_IDENTIFY };
	struct nvme_id_ctrl *ic;
	struct nvme_id_ns *ns;
	dma_addr_t dma;
	void *buf;
	int r, i;

	buf = dma_alloc_coherent(dev, LIO_PAGE_SIZE, &dma, GFP_KERNEL);
	if (!buf)
		return -ENOMEM;
	sqe.prp1 = cpu_to_le64(dma);
	sqe.cdw10 = cpu_to_le32(NVME_ID_CNS_CTRL);
	r = lio_ctrl_admin(ssd, &sqe, NULL);
	if (r)
		goto out;
	ic = buf;
	ssd->mdts_bytes = LIO_MDTS_BYTES;
	if (ic->mdts && ic->mdts < 6)
		ssd->mdts_bytes = LIO_PAGE_SIZE << ic->mdts;
	memcpy(ssd->model, ic->mn, sizeof(ssd->model) - 1);
	for (i = sizeof(ssd->model) - 2; i >= 0 && ssd->model[i] == ' '; i--)
		ssd->model[i] = 0;
	if (le32_to_cpu(ic->nn) < 1) {
		dev_err(dev, "controller has no namespace\n");
		r = -ENODEV;
		goto out;
	}

	memset(&sqe, 0, sizeof(sqe));
	sqe.opcode = NVME_ADMIN_IDENTIFY;
	sqe.nsid = cpu_to_le32(1);
	sqe.prp1 = cpu_to_le64(dma);
	sqe.cdw10 = cpu_to_le32(NVME_ID_CNS_NS);
	r = lio_ctrl_admin(ssd, &sqe, NULL);
	if (r)
		goto out;
	ns = buf;
	ssd->nsze = le64_to_cpu(ns->nsze);
	ssd->lba_shift = ns->lbaf[ns->flbas & 0xf].ds;
	if (ssd->lba_shift != 9 && ssd->lba_shift != 12) {
		dev_err(dev, "namespace 1: LBA size 2^%u is neither 512 nor 4096\n",
			ssd->lba_shift);
		r = -ENODEV;
	} else if (ssd->nsze <= (LIO_VT_RESERVED_BYTES >> ssd->lba_shift)) {
		dev_err(dev, "namespace 1: %llu LBAs leave no room after the volume table\n",
			ssd->nsze);
		r = -ENODEV;
	}
out:
	dma_free_coherent(dev, LIO_PAGE_SIZE, buf, dma);
	return r;
}

/* Asks for as many I/O queues as queue pairs may be served (+ the internal one). */
static int lio_ctrl_queues(struct lio_ssd *ssd)
{
	struct nvme_sqe sqe = { .opcode = NVME_ADMIN_SET_FEATURES };
	u32 want = min_t(u32, lio_max_qpairs + 1, 0xffff), got;
	int r;

	sqe.cdw10 = cpu_to_le32(NVME_FEAT_NUM_QUEUES);
	sqe.cdw11 = cpu_to_le32((want - 1) | (want - 1) << 16);
	r = lio_ctrl_admin(ssd, &sqe, &got);
	if (r)
		return r;
	ssd->nr_ioq = min3(want, (got & 0xffff) + 1, (got >> 16) + 1);
	if (pci_resource_len(ssd->pdev, 0) <
	    NVME_REG_DBS + 2ull * (ssd->nr_ioq + 1) * ssd->db_stride) {
		dev_err(&ssd->pdev->dev, "BAR0 of %llu bytes is too small for %u queues\n",
			(u64)pci_resource_len(ssd->pdev, 0), ssd->nr_ioq);
		return -ENODEV;
	}
	ssd->qid_used = bitmap_zalloc(ssd->nr_ioq + 1, GFP_KERNEL);
	if (!ssd->qid_used)
		return -ENOMEM;
	set_bit(0, ssd->qid_used);
	set_bit(LIO_INTERNAL_QID, ssd->qid_used);
	/* vector 0 stays unused (the admin queue is polled); vector n serves queue n */
	ssd->nvec = pci_alloc_irq_vectors(ssd->pdev, 1, ssd->nr_ioq + 1, PCI_IRQ_MSIX);
	if (ssd->nvec < 2) {
		dev_err(&ssd->pdev->dev, "MSI-X: %d vectors (needs 2 or more)\n", ssd->nvec);
		if (ssd->nvec > 0)
			pci_free_irq_vectors(ssd->pdev);
		ssd->nvec = 0;
		return -ENODEV;
	}
	return 0;
}

int lio_ctrl_enable(struct lio_ssd *ssd)
{
	struct device *dev = &ssd->pdev->dev;
	u32 cc;
	int r;

	ssd->cap = lo_hi_readq(ssd->bar + NVME_REG_CAP);
	if (ssd->cap == ~0ull)
		return -ENODEV;
	ssd->db_stride = 4u << NVME_CAP_DSTRD(ssd->cap);
	if ((ssd->cap >> NVME_CAP_MPSMIN_SHIFT) & 0xf) {
		dev_err(dev, "CAP.MPSMIN excludes 4 KiB pages (CAP 0x%llx)\n", ssd->cap);
		return -ENODEV;
	}
	if (!(ssd->cap & NVME_CAP_CSS_NVM) || NVME_CAP_MQES(ssd->cap) < 1) {
		dev_err(dev, "no NVM command set or queues of one entry (CAP 0x%llx)\n", ssd->cap);
		return -ENODEV;
	}
	cc = readl(ssd->bar + NVME_REG_CC);
	if (cc & NVME_CC_EN)
		writel(cc & ~NVME_CC_EN, ssd->bar + NVME_REG_CC);
	r = lio_ctrl_wait_ready(ssd, false);
	if (r)
		return r;
	r = lio_hwq_alloc(ssd, &ssd->admin, 0, LIO_ADMIN_DEPTH);
	if (r)
		return r;
	writel((LIO_ADMIN_DEPTH - 1) << 16 | (LIO_ADMIN_DEPTH - 1), ssd->bar + NVME_REG_AQA);
	lo_hi_writeq(ssd->admin.sq_dma, ssd->bar + NVME_REG_ASQ);
	lo_hi_writeq(ssd->admin.cq_dma, ssd->bar + NVME_REG_ACQ);
	writel(NVME_CC_EN | NVME_SQES_LOG2 << 16 | NVME_CQES_LOG2 << 20, ssd->bar + NVME_REG_CC);
	r = lio_ctrl_wait_ready(ssd, true);
	if (r)
		goto fail_admin;
	r = lio_ctrl_identify(ssd);
	if (r)
		goto fail_disable;
	r = lio_ctrl_queues(ssd);
	if (r)
		goto fail_disable;
	r = lio_hwq_alloc(ssd, &ssd->ioq, LIO_INTERNAL_QID,
			  min_t(u32, LIO_ADMIN_DEPTH, NVME_CAP_MQES(ssd->cap) + 1));
	if (r)
		goto fail_vec;
	r = lio_ctrl_create_ioq(ssd, &ssd->ioq, -1);
	if (r)
		goto fail_ioq;
	return 0;

fail_ioq:
	lio_hwq_free(ssd, &ssd->ioq);
fail_vec:
	pci_free_irq_vectors(ssd->pdev);
	ssd->nvec = 0;
	bitmap_free(ssd->qid_used);
	ssd->qid_used = NULL;
fail_disable:
	writel(0, ssd->bar + NVME_REG_CC);
	lio_ctrl_wait_ready(ssd, false);
fail_admin:
	lio_hwq_free(ssd, &ssd->admin);
	return r;
}

/* Leaves the controller disabled (CC.EN = 0), as the next driver expects to find it. */
void lio_ctrl_disable(struct lio_ssd *ssd)
{
	if (ssd->ioq.sq) {
		lio_ctrl_delete_ioq(ssd, &ssd->ioq);
		lio_hwq_free(ssd, &ssd->ioq);
	}
	writel(0, ssd->bar + NVME_REG_CC);
	lio_ctrl_wait_ready(ssd, false);
	lio_hwq_free(ssd, &ssd->admin);
	if (ssd->nvec)
		pci_free_irq_vectors(ssd->pdev);
	ssd->nvec = 0;
	bitmap_free(ssd->qid_used);
	ssd->qid_used = NULL;
}
