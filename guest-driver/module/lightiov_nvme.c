// SPDX-License-Identifier: GPL-2.0
/*
 * lightiov_nvme: the LightIOV passthrough frontend as an out-of-tree module.
 * A small blk-mq NVMe driver for vNVMe functions whose vendor capability says
 * "passthrough": polled admin queue, one MSI-X I/O queue pair with its SQ in
 * the CMB, every LBA moved into the VM's window and every PRP checked against
 * the DMA window before the doorbell.  It binds only through driver_override
 * (see install.sh), so a stock kernel gains the frontend without a rebuild.
 */
#include <linux/blk-mq.h>
#include <linux/blkdev.h>
#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/idr.h>
#include <linux/interrupt.h>
#include <linux/io.h>
#include <linux/io-64-nonatomic-lo-hi.h>
#include <linux/module.h>
#include <linux/nvme.h>
#include <linux/pci.h>
#include <linux/scatterlist.h>
#include <linux/version.h>

#define LIO_PCI_VENDOR		0x1b36
#define LIO_PCI_DEVICE		0x0110

/* the vendor capability (lvmm's include/lightiov/vcap.h) */
#define LIO_CAP_LEN		48
#define LIO_CAP_VERSION		1
#define LIO_CAP_MAGIC		0x4c494f56	/* "LIOV" */
#define LIO_CAP_MAGIC_OFS	4
#define LIO_CAP_MODE_OFS	8
#define LIO_CAP_LBA_START_OFS	16
#define LIO_CAP_LBA_SIZE_OFS	24
#define LIO_CAP_DMA_BASE_OFS	32
#define LIO_CAP_DMA_SIZE_OFS	40
#define LIO_MODE_PASSTHROUGH	1

#define LIO_PAGE		4096
#define LIO_ADMIN_DEPTH		16
#define LIO_IO_DEPTH		64
#define LIO_MAX_SEGS		64
/* one PRP list page covers any request of LIO_MAX_SEGS pages */
#define LIO_MAX_SECTORS		(LIO_MAX_SEGS * (LIO_PAGE >> SECTOR_SHIFT))
#define LIO_ADMIN_TIMEOUT_MS	5000

struct lio_queue {
	struct nvme_command *sq;	/* host memory (admin) */
	void __iomem *sq_cmb;		/* the CMB (I/O) */
	dma_addr_t sq_dma;
	struct nvme_completion *cq;
	dma_addr_t cq_dma;
	u32 __iomem *sq_db;
	u32 __iomem *cq_db;
	u16 depth;
	u16 sq_tail;
	u16 cq_head;
	u8 phase;
	spinlock_t lock;	/* SQ tail, CQ head and inflight */
	/* I/O command ids submitted and not completed: a CQE for another id is ignored */
	DECLARE_BITMAP(inflight, LIO_IO_DEPTH);
};

struct lio_dev {
	struct pci_dev *pdev;
	void __iomem *bar;
	void __iomem *cmb;
	resource_size_t cmb_size;
	u64 cap;
	u32 db_stride;
	struct lio_queue adminq;
	struct lio_queue ioq;
	struct mutex admin_lock;	/* one admin command at a time */
	bool ioq_live;			/* the I/O CQ exists: its vector is 0 too */
	struct blk_mq_tag_set tagset;
	struct gendisk *disk;
	struct dma_pool *prp_pool;
	int instance;
	unsigned int lba_shift;
	unsigned int max_sectors;
	bool vwc;
	u64 nsze;
	u64 lba_start;
	u64 lba_size;
	u64 dma_base;
	u64 dma_size;
};

struct lio_iod {
	struct nvme_command cmd;
	struct scatterlist sg[LIO_MAX_SEGS];
	int nents;
	__le64 *prp_list;
	dma_addr_t prp_dma;
	u16 status;
};

static DEFINE_IDA(lio_ida);

static u64 lio_cap64(struct pci_dev *pdev, int pos, int ofs)
{
	u32 lo, hi;

	pci_read_config_dword(pdev, pos + ofs, &lo);
	pci_read_config_dword(pdev, pos + ofs + 4, &hi);
	return (u64)hi << 32 | lo;
}

/* The capability's windows; -ENODEV for anything but a sane passthrough one. */
static int lio_read_vcap(struct lio_dev *ld)
{
	struct pci_dev *pdev = ld->pdev;
	u32 hdr = 0, magic = 0, mode;
	int pos;

	for (pos = pci_find_capability(pdev, PCI_CAP_ID_VNDR); pos;
	     pos = pci_find_next_capability(pdev, pos, PCI_CAP_ID_VNDR)) {
		pci_read_config_dword(pdev, pos, &hdr);
		pci_read_config_dword(pdev, pos + LIO_CAP_MAGIC_OFS, &magic);
		if (magic == LIO_CAP_MAGIC)
			break;
	}
	if (!pos) {
		dev_info(&pdev->dev, "no LightIOV capability\n");
		return -ENODEV;
	}
	pci_read_config_dword(pdev, pos + LIO_CAP_MODE_OFS, &mode);
	if (((hdr >> 16) & 0xff) < LIO_CAP_LEN ||
	    (hdr >> 24) != LIO_CAP_VERSION) {
		dev_err(&pdev->dev, "LightIOV capability: length %u version %u not supported\n",
			(hdr >> 16) & 0xff, hdr >> 24);
		return -ENODEV;
	}
	if (mode != LIO_MODE_PASSTHROUGH) {
		dev_info(&pdev->dev, "LightIOV mode %u is host-enforced: the nvme driver serves it\n",
			 mode);
		return -ENODEV;
	}
	ld->lba_start = lio_cap64(pdev, pos, LIO_CAP_LBA_START_OFS);
	ld->lba_size = lio_cap64(pdev, pos, LIO_CAP_LBA_SIZE_OFS);
	ld->dma_base = lio_cap64(pdev, pos, LIO_CAP_DMA_BASE_OFS);
	ld->dma_size = lio_cap64(pdev, pos, LIO_CAP_DMA_SIZE_OFS);
	if (!ld->lba_size || ld->lba_size > U64_MAX - ld->lba_start ||
	    !ld->dma_size || ld->dma_size - 1 > U64_MAX - ld->dma_base) {
		dev_err(&pdev->dev, "LightIOV windows LBA %llu+%llu DMA %#llx+%#llx invalid\n",
			ld->lba_start, ld->lba_size, ld->dma_base, ld->dma_size);
		return -ENODEV;
	}
	return 0;
}

static bool lio_dma_ok(struct lio_dev *ld, u64 addr, u64 len)
{
	return addr >= ld->dma_base && len <= ld->dma_size &&
	       addr - ld->dma_base <= ld->dma_size - len;
}

static void lio_ring(struct lio_queue *q, struct nvme_command *cmd)
{
	if (q->sq_cmb)
		memcpy_toio(q->sq_cmb + (size_t)q->sq_tail * sizeof(*cmd), cmd,
			    sizeof(*cmd));
	else
		memcpy(&q->sq[q->sq_tail], cmd, sizeof(*cmd));
	if (++q->sq_tail == q->depth)
		q->sq_tail = 0;
	/* the entry must be visible before the device sees the new tail */
	wmb();
	writel(q->sq_tail, q->sq_db);
}

/* The next completion of q, or NULL; the caller advances with lio_cq_pop(). */
static struct nvme_completion *lio_cq_peek(struct lio_queue *q)
{
	struct nvme_completion *c = &q->cq[q->cq_head];

	if ((le16_to_cpu(READ_ONCE(c->status)) & 1) != q->phase)
		return NULL;
	dma_rmb();
	return c;
}

static void lio_cq_pop(struct lio_queue *q)
{
	if (++q->cq_head == q->depth) {
		q->cq_head = 0;
		q->phase ^= 1;
	}
}

/* A synchronous, polled admin command; the status field, or -ETIMEDOUT. */
static int lio_admin(struct lio_dev *ld, struct nvme_command *cmd, u32 *result)
{
	struct lio_queue *q = &ld->adminq;
	unsigned long deadline;
	struct nvme_completion *c;
	int ret = -ETIMEDOUT;

	mutex_lock(&ld->admin_lock);
	cmd->common.command_id = q->sq_tail;
	lio_ring(q, cmd);
	deadline = jiffies + msecs_to_jiffies(LIO_ADMIN_TIMEOUT_MS);
	while (time_before(jiffies, deadline)) {
		c = lio_cq_peek(q);
		if (c) {
			ret = le16_to_cpu(c->status) >> 1;
			if (result)
				*result = le32_to_cpu(c->result.u32);
			lio_cq_pop(q);
			writel(q->cq_head, q->cq_db);
			break;
		}
		usleep_range(10, 100);
	}
	mutex_unlock(&ld->admin_lock);
	if (ret)
		dev_err(&ld->pdev->dev, "admin opcode %#x failed: %d\n",
			cmd->common.opcode, ret);
	return ret;
}

static int lio_wait_ready(struct lio_dev *ld, bool ready)
{
	unsigned long deadline = jiffies +
		msecs_to_jiffies((NVME_CAP_TIMEOUT(ld->cap) + 1) * 500);

	while (!!(readl(ld->bar + NVME_REG_CSTS) & NVME_CSTS_RDY) != ready) {
		if (time_after(jiffies, deadline)) {
			dev_err(&ld->pdev->dev, "CSTS.RDY did not become %d\n",
				ready);
			return -ENODEV;
		}
		usleep_range(1000, 2000);
	}
	return 0;
}

static void lio_disable(struct lio_dev *ld)
{
	writel(0, ld->bar + NVME_REG_CC);
	lio_wait_ready(ld, false);
}

static int lio_alloc_cq(struct lio_dev *ld, struct lio_queue *q, u16 depth)
{
	q->depth = depth;
	q->phase = 1;
	q->sq_tail = 0;
	q->cq_head = 0;
	q->cq = dma_alloc_coherent(&ld->pdev->dev, depth * sizeof(*q->cq),
				   &q->cq_dma, GFP_KERNEL);
	return q->cq ? 0 : -ENOMEM;
}

static void lio_free_queue(struct lio_dev *ld, struct lio_queue *q)
{
	if (q->cq)
		dma_free_coherent(&ld->pdev->dev, q->depth * sizeof(*q->cq),
				  q->cq, q->cq_dma);
	if (q->sq)
		dma_free_coherent(&ld->pdev->dev, q->depth * sizeof(*q->sq),
				  q->sq, q->sq_dma);
	q->cq = NULL;
	q->sq = NULL;
}

static void lio_set_dbs(struct lio_dev *ld, struct lio_queue *q, int qid)
{
	u32 __iomem *dbs = ld->bar + NVME_REG_DBS;

	q->sq_db = &dbs[2 * qid * ld->db_stride];
	q->cq_db = &dbs[(2 * qid + 1) * ld->db_stride];
}

static int lio_enable(struct lio_dev *ld)
{
	struct lio_queue *q = &ld->adminq;
	u32 cc;
	int ret;

	lio_disable(ld);
	ret = lio_alloc_cq(ld, q, LIO_ADMIN_DEPTH);
	if (ret)
		return ret;
	q->sq = dma_alloc_coherent(&ld->pdev->dev,
				   LIO_ADMIN_DEPTH * sizeof(*q->sq),
				   &q->sq_dma, GFP_KERNEL);
	if (!q->sq)
		return -ENOMEM;
	lio_set_dbs(ld, q, 0);
	writel((LIO_ADMIN_DEPTH - 1) << 16 | (LIO_ADMIN_DEPTH - 1),
	       ld->bar + NVME_REG_AQA);
	lo_hi_writeq(q->sq_dma, ld->bar + NVME_REG_ASQ);
	lo_hi_writeq(q->cq_dma, ld->bar + NVME_REG_ACQ);
	cc = NVME_CC_CSS_NVM | NVME_CC_AMS_RR | NVME_CC_SHN_NONE |
	     NVME_CC_IOSQES | NVME_CC_IOCQES | NVME_CC_ENABLE;
	writel(cc, ld->bar + NVME_REG_CC);
	return lio_wait_ready(ld, true);
}

/* The CMB as write-combined MMIO for the I/O SQ, as the backend expects. */
static int lio_map_cmb(struct lio_dev *ld)
{
	struct pci_dev *pdev = ld->pdev;
	u32 cmbsz = readl(ld->bar + NVME_REG_CMBSZ);
	u32 cmbloc = readl(ld->bar + NVME_REG_CMBLOC);
	u64 unit, offset, size;
	int bar;

	if (NVME_CAP_CMBS(ld->cap))
		writel(NVME_CMBMSC_CRE, ld->bar + NVME_REG_CMBMSC);
	cmbsz = readl(ld->bar + NVME_REG_CMBSZ);
	cmbloc = readl(ld->bar + NVME_REG_CMBLOC);
	if (!(cmbsz & NVME_CMBSZ_SQS)) {
		dev_err(&pdev->dev, "no CMB for submission queues (CMBSZ %#x)\n",
			cmbsz);
		return -ENODEV;
	}
	unit = 1ULL << (12 + 4 * ((cmbsz >> NVME_CMBSZ_SZU_SHIFT) &
				  NVME_CMBSZ_SZU_MASK));
	size = unit * ((cmbsz >> NVME_CMBSZ_SZ_SHIFT) & NVME_CMBSZ_SZ_MASK);
	offset = unit * NVME_CMB_OFST(cmbloc);
	bar = NVME_CMB_BIR(cmbloc);
	if (bar >= PCI_STD_NUM_BARS || offset > pci_resource_len(pdev, bar)) {
		dev_err(&pdev->dev, "CMB BAR %d offset %#llx size %#llx unusable\n",
			bar, offset, size);
		return -ENODEV;
	}
	/* the submission queue must fit in what is mapped, not in what CMBSZ claims */
	size = min_t(u64, size, pci_resource_len(pdev, bar) - offset);
	if (size < LIO_IO_DEPTH * sizeof(struct nvme_command)) {
		dev_err(&pdev->dev, "CMB BAR %d offset %#llx: %#llx bytes, too small\n",
			bar, offset, size);
		return -ENODEV;
	}
	if (NVME_CAP_CMBS(ld->cap))
		lo_hi_writeq(NVME_CMBMSC_CRE | NVME_CMBMSC_CMSE |
			     (pci_bus_address(pdev, bar) + offset),
			     ld->bar + NVME_REG_CMBMSC);
	ld->cmb = ioremap_wc(pci_resource_start(pdev, bar) + offset, size);
	if (!ld->cmb)
		return -ENOMEM;
	ld->cmb_size = size;
	ld->ioq.sq_cmb = ld->cmb;
	ld->ioq.sq_dma = pci_bus_address(pdev, bar) + offset;
	return 0;
}

static int lio_identify(struct lio_dev *ld)
{
	struct nvme_command cmd = { };
	struct nvme_id_ctrl *ic;
	struct nvme_id_ns *id;
	dma_addr_t dma;
	int ret, lbaf;

	id = dma_alloc_coherent(&ld->pdev->dev, LIO_PAGE, &dma, GFP_KERNEL);
	if (!id)
		return -ENOMEM;
	/* the transfer limit and the write cache, then the namespace */
	ic = (struct nvme_id_ctrl *)id;
	cmd.identify.opcode = nvme_admin_identify;
	cmd.identify.cns = NVME_ID_CNS_CTRL;
	cmd.identify.dptr.prp1 = cpu_to_le64(dma);
	ret = lio_admin(ld, &cmd, NULL);
	if (ret)
		goto out;
	ld->max_sectors = LIO_MAX_SECTORS;
	if (ic->mdts && ic->mdts < 16)
		ld->max_sectors = min_t(unsigned int, ld->max_sectors,
					(LIO_PAGE >> SECTOR_SHIFT) << ic->mdts);
	ld->vwc = ic->vwc & NVME_CTRL_VWC_PRESENT;

	memset(&cmd, 0, sizeof(cmd));
	cmd.identify.opcode = nvme_admin_identify;
	cmd.identify.nsid = cpu_to_le32(1);
	cmd.identify.cns = NVME_ID_CNS_NS;
	cmd.identify.dptr.prp1 = cpu_to_le64(dma);
	ret = lio_admin(ld, &cmd, NULL);
	if (!ret) {
		lbaf = id->flbas & NVME_NS_FLBAS_LBA_MASK;
		ld->lba_shift = id->lbaf[lbaf].ds;
		ld->nsze = le64_to_cpu(id->nsze);
		if (ld->lba_shift < SECTOR_SHIFT || ld->lba_shift > PAGE_SHIFT ||
		    id->lbaf[lbaf].ms) {
			dev_err(&ld->pdev->dev, "namespace 1: LBA format %u (2^%u bytes, %u metadata) unsupported\n",
				lbaf, ld->lba_shift,
				le16_to_cpu(id->lbaf[lbaf].ms));
			ret = -ENODEV;
		}
	}
out:
	dma_free_coherent(&ld->pdev->dev, LIO_PAGE, id, dma);
	return ret ? -EIO : 0;
}

static int lio_create_ioq(struct lio_dev *ld)
{
	struct lio_queue *q = &ld->ioq;
	struct nvme_command cmd = { };
	u32 result;
	int ret;

	ret = lio_alloc_cq(ld, q, LIO_IO_DEPTH);
	if (ret)
		return ret;
	lio_set_dbs(ld, q, 1);
	cmd.features.opcode = nvme_admin_set_features;
	cmd.features.fid = cpu_to_le32(NVME_FEAT_NUM_QUEUES);
	cmd.features.dword11 = 0;	/* one SQ and one CQ, 0's based */
	if (lio_admin(ld, &cmd, &result))
		return -EIO;

	memset(&cmd, 0, sizeof(cmd));
	cmd.create_cq.opcode = nvme_admin_create_cq;
	cmd.create_cq.prp1 = cpu_to_le64(q->cq_dma);
	cmd.create_cq.cqid = cpu_to_le16(1);
	cmd.create_cq.qsize = cpu_to_le16(LIO_IO_DEPTH - 1);
	cmd.create_cq.cq_flags = cpu_to_le16(NVME_QUEUE_PHYS_CONTIG |
					     NVME_CQ_IRQ_ENABLED);
	cmd.create_cq.irq_vector = 0;
	if (lio_admin(ld, &cmd, NULL))
		return -EIO;

	memset(&cmd, 0, sizeof(cmd));
	cmd.create_sq.opcode = nvme_admin_create_sq;
	cmd.create_sq.prp1 = cpu_to_le64(q->sq_dma);
	cmd.create_sq.sqid = cpu_to_le16(1);
	cmd.create_sq.qsize = cpu_to_le16(LIO_IO_DEPTH - 1);
	cmd.create_sq.sq_flags = cpu_to_le16(NVME_QUEUE_PHYS_CONTIG);
	cmd.create_sq.cqid = cpu_to_le16(1);
	if (lio_admin(ld, &cmd, NULL))
		return -EIO;
	WRITE_ONCE(ld->ioq_live, true);
	return 0;
}

static void lio_delete_ioq(struct lio_dev *ld)
{
	struct nvme_command cmd = { };

	WRITE_ONCE(ld->ioq_live, false);
	synchronize_irq(pci_irq_vector(ld->pdev, 0));
	cmd.delete_queue.opcode = nvme_admin_delete_sq;
	cmd.delete_queue.qid = cpu_to_le16(1);
	lio_admin(ld, &cmd, NULL);
	cmd.delete_queue.opcode = nvme_admin_delete_cq;
	lio_admin(ld, &cmd, NULL);
}

/*
 * PRPs for a mapped scatterlist.  The queue's virt_boundary makes every
 * segment but the first start, and every segment but the last end, on a page
 * boundary, so the pages of the list are the pages of the segments.
 */
static blk_status_t lio_build_prps(struct lio_dev *ld, struct lio_iod *iod,
				   int mapped)
{
	struct scatterlist *sg;
	u64 addr, first = 0, second = 0;
	unsigned int n = 0, len;
	int i;

	for_each_sg(iod->sg, sg, mapped, i) {
		addr = sg_dma_address(sg);
		len = sg_dma_len(sg);
		if (!lio_dma_ok(ld, addr, len))
			goto refuse;
		while (len) {
			unsigned int chunk = min_t(unsigned int, len,
						   LIO_PAGE - (addr & (LIO_PAGE - 1)));

			if (n == 0) {
				first = addr;
			} else {
				if (n == 1)
					second = addr;
				if (n - 1 >= LIO_PAGE / 8)
					goto refuse;
				iod->prp_list[n - 1] = cpu_to_le64(addr);
			}
			n++;
			addr += chunk;
			len -= chunk;
		}
	}
	iod->cmd.rw.dptr.prp1 = cpu_to_le64(first);
	if (n <= 1)
		iod->cmd.rw.dptr.prp2 = 0;
	else if (n == 2)
		iod->cmd.rw.dptr.prp2 = cpu_to_le64(second);
	else if (lio_dma_ok(ld, iod->prp_dma, (u64)(n - 1) * 8))
		iod->cmd.rw.dptr.prp2 = cpu_to_le64(iod->prp_dma);
	else
		goto refuse;
	return BLK_STS_OK;
refuse:
	dev_warn_ratelimited(&ld->pdev->dev, "data outside the DMA window refused\n");
	return BLK_STS_IOERR;
}

static void lio_unmap(struct lio_dev *ld, struct request *req)
{
	struct lio_iod *iod = blk_mq_rq_to_pdu(req);

	if (iod->nents)
		dma_unmap_sg(&ld->pdev->dev, iod->sg, iod->nents,
			     rq_dma_dir(req));
	iod->nents = 0;
	if (iod->prp_list)
		dma_pool_free(ld->prp_pool, iod->prp_list, iod->prp_dma);
	iod->prp_list = NULL;
}

static blk_status_t lio_queue_rq(struct blk_mq_hw_ctx *hctx,
				 const struct blk_mq_queue_data *bd)
{
	struct lio_dev *ld = hctx->queue->queuedata;
	struct request *req = bd->rq;
	struct lio_iod *iod = blk_mq_rq_to_pdu(req);
	struct lio_queue *q = &ld->ioq;
	unsigned long flags;
	u64 slba, nlb;
	blk_status_t ret;
	int nsegs, mapped;

	memset(&iod->cmd, 0, sizeof(iod->cmd));
	iod->nents = 0;
	iod->prp_list = NULL;
	switch (req_op(req)) {
	case REQ_OP_READ:
		iod->cmd.rw.opcode = nvme_cmd_read;
		break;
	case REQ_OP_WRITE:
		iod->cmd.rw.opcode = nvme_cmd_write;
		break;
	case REQ_OP_FLUSH:
		iod->cmd.common.opcode = nvme_cmd_flush;
		break;
	default:
		return BLK_STS_NOTSUPP;
	}
	iod->cmd.common.nsid = cpu_to_le32(1);
	iod->cmd.common.command_id = req->tag;

	if (req_op(req) != REQ_OP_FLUSH) {
		slba = blk_rq_pos(req) >> (ld->lba_shift - SECTOR_SHIFT);
		nlb = blk_rq_bytes(req) >> ld->lba_shift;
		/* the window is all the device must ever see of the SSD */
		if (!nlb || nlb > 0x10000 || slba >= ld->lba_size ||
		    nlb > ld->lba_size - slba) {
			dev_warn_ratelimited(&ld->pdev->dev,
					     "LBA %llu+%llu outside the window of %llu\n",
					     slba, nlb, ld->lba_size);
			return BLK_STS_IOERR;
		}
		iod->cmd.rw.slba = cpu_to_le64(ld->lba_start + slba);
		iod->cmd.rw.length = cpu_to_le16(nlb - 1);

		iod->prp_list = dma_pool_alloc(ld->prp_pool, GFP_ATOMIC,
					       &iod->prp_dma);
		if (!iod->prp_list)
			return BLK_STS_RESOURCE;
		sg_init_table(iod->sg, LIO_MAX_SEGS);
		nsegs = blk_rq_map_sg(req->q, req, iod->sg);
		mapped = nsegs ? dma_map_sg(&ld->pdev->dev, iod->sg, nsegs,
					    rq_dma_dir(req)) : 0;
		if (!mapped) {
			lio_unmap(ld, req);
			return BLK_STS_RESOURCE;
		}
		iod->nents = nsegs;
		ret = lio_build_prps(ld, iod, mapped);
		if (ret) {
			lio_unmap(ld, req);
			return ret;
		}
	}

	blk_mq_start_request(req);
	spin_lock_irqsave(&q->lock, flags);
	__set_bit(req->tag, q->inflight);
	lio_ring(q, &iod->cmd);
	spin_unlock_irqrestore(&q->lock, flags);
	return BLK_STS_OK;
}

static void lio_complete_rq(struct request *req)
{
	struct lio_dev *ld = req->q->queuedata;
	struct lio_iod *iod = blk_mq_rq_to_pdu(req);

	lio_unmap(ld, req);
	blk_mq_end_request(req, iod->status ? BLK_STS_IOERR : BLK_STS_OK);
}

static irqreturn_t lio_irq(int irq, void *data)
{
	struct lio_dev *ld = data;
	struct lio_queue *q = &ld->ioq;
	struct nvme_completion *c;
	struct request *req;
	irqreturn_t ret = IRQ_NONE;
	u16 cid;

	if (!READ_ONCE(ld->ioq_live))
		return IRQ_NONE;
	spin_lock(&q->lock);
	while ((c = lio_cq_peek(q))) {
		cid = c->command_id;
		/* a duplicate or made-up CQE must not complete a request twice */
		req = cid < LIO_IO_DEPTH &&
		      __test_and_clear_bit(cid, q->inflight) ?
			blk_mq_tag_to_rq(ld->tagset.tags[0], cid) : NULL;
		if (req) {
			struct lio_iod *iod = blk_mq_rq_to_pdu(req);

			iod->status = le16_to_cpu(c->status) >> 1;
			if (iod->status)
				dev_warn_ratelimited(&ld->pdev->dev,
						     "command %u status %#x\n",
						     cid, iod->status);
			blk_mq_complete_request(req);
		} else {
			dev_warn_ratelimited(&ld->pdev->dev,
					     "completion for a command not in flight %u (ignored)\n",
					     cid);
		}
		lio_cq_pop(q);
		ret = IRQ_HANDLED;
	}
	if (ret == IRQ_HANDLED)
		writel(q->cq_head, q->cq_db);
	spin_unlock(&q->lock);
	return ret;
}

static const struct blk_mq_ops lio_mq_ops = {
	.queue_rq	= lio_queue_rq,
	.complete	= lio_complete_rq,
};

static const struct block_device_operations lio_fops = {
	.owner		= THIS_MODULE,
};

static int lio_add_disk(struct lio_dev *ld)
{
	struct blk_mq_tag_set *set = &ld->tagset;
	struct gendisk *disk;
	int ret;

	set->ops = &lio_mq_ops;
	set->nr_hw_queues = 1;
	set->queue_depth = LIO_IO_DEPTH - 1;
	set->numa_node = dev_to_node(&ld->pdev->dev);
	set->cmd_size = sizeof(struct lio_iod);
	set->flags = BLK_MQ_F_SHOULD_MERGE;
	set->driver_data = ld;
	ret = blk_mq_alloc_tag_set(set);
	if (ret)
		return ret;
	disk = blk_mq_alloc_disk(set, ld);
	if (IS_ERR(disk)) {
		blk_mq_free_tag_set(set);
		return PTR_ERR(disk);
	}
	blk_queue_logical_block_size(disk->queue, 1 << ld->lba_shift);
	blk_queue_max_hw_sectors(disk->queue, ld->max_sectors);
	/* flushes reach the device only when it has a volatile cache */
	blk_queue_write_cache(disk->queue, ld->vwc, false);
	blk_queue_max_segments(disk->queue, LIO_MAX_SEGS);
	blk_queue_virt_boundary(disk->queue, LIO_PAGE - 1);
	blk_queue_dma_alignment(disk->queue, 3);
	disk->fops = &lio_fops;
	disk->private_data = ld;
	snprintf(disk->disk_name, DISK_NAME_LEN, "lionvme%d", ld->instance);
	/* the namespace as the guest sees it: never more than the window */
	set_capacity(disk, min(ld->nsze, ld->lba_size) <<
			   (ld->lba_shift - SECTOR_SHIFT));
	ret = add_disk(disk);
	if (ret) {
		put_disk(disk);
		blk_mq_free_tag_set(set);
		return ret;
	}
	ld->disk = disk;
	return 0;
}

static void lio_teardown(struct lio_dev *ld)
{
	lio_disable(ld);
	lio_free_queue(ld, &ld->ioq);
	lio_free_queue(ld, &ld->adminq);
	if (ld->cmb)
		iounmap(ld->cmb);
	ld->cmb = NULL;
}

static int lio_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	struct lio_dev *ld;
	int ret;

	ld = devm_kzalloc(&pdev->dev, sizeof(*ld), GFP_KERNEL);
	if (!ld)
		return -ENOMEM;
	ld->pdev = pdev;
	mutex_init(&ld->admin_lock);
	spin_lock_init(&ld->adminq.lock);
	spin_lock_init(&ld->ioq.lock);
	ret = lio_read_vcap(ld);
	if (ret)
		return ret;
	ret = pcim_enable_device(pdev);
	if (ret)
		return ret;
	pci_set_master(pdev);
	ret = dma_set_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(64));
	if (ret)
		return ret;
	ret = pcim_iomap_regions(pdev, BIT(0), KBUILD_MODNAME);
	if (ret)
		return ret;
	ld->bar = pcim_iomap_table(pdev)[0];
	ld->cap = lo_hi_readq(ld->bar + NVME_REG_CAP);
	ld->db_stride = 1 << NVME_CAP_STRIDE(ld->cap);
	if (NVME_CAP_MQES(ld->cap) + 1 < LIO_IO_DEPTH ||
	    pci_resource_len(pdev, 0) < NVME_REG_DBS +
	    4 * 4 * ld->db_stride) {
		dev_err(&pdev->dev, "CAP %#llx: queues or doorbells too small\n",
			ld->cap);
		return -ENODEV;
	}
	ld->prp_pool = dmam_pool_create(KBUILD_MODNAME, &pdev->dev, LIO_PAGE,
					LIO_PAGE, 0);
	if (!ld->prp_pool)
		return -ENOMEM;
	ret = pci_alloc_irq_vectors(pdev, 1, 1, PCI_IRQ_MSIX);
	if (ret < 0)
		return ret;
	ret = request_irq(pci_irq_vector(pdev, 0), lio_irq, 0, KBUILD_MODNAME,
			  ld);
	if (ret)
		goto out_vectors;

	ret = lio_map_cmb(ld);
	if (!ret)
		ret = lio_enable(ld);
	if (!ret)
		ret = lio_identify(ld);
	if (!ret)
		ret = lio_create_ioq(ld);
	if (ret)
		goto out_teardown;

	ld->instance = ida_alloc(&lio_ida, GFP_KERNEL);
	if (ld->instance < 0) {
		ret = ld->instance;
		goto out_ioq;
	}
	ret = lio_add_disk(ld);
	if (ret)
		goto out_ida;
	pci_set_drvdata(pdev, ld);
	dev_info(&pdev->dev, "%s: LightIOV passthrough, LBA window %llu+%llu, DMA window %#llx+%#llx, SQ in the CMB\n",
		 ld->disk->disk_name, ld->lba_start, ld->lba_size,
		 ld->dma_base, ld->dma_size);
	return 0;

out_ida:
	ida_free(&lio_ida, ld->instance);
out_ioq:
	lio_delete_ioq(ld);
out_teardown:
	lio_teardown(ld);
	free_irq(pci_irq_vector(pdev, 0), ld);
out_vectors:
	pci_free_irq_vectors(pdev);
	return ret;
}

static void lio_remove(struct pci_dev *pdev)
{
	struct lio_dev *ld = pci_get_drvdata(pdev);

	del_gendisk(ld->disk);
	lio_delete_ioq(ld);
	lio_teardown(ld);
	free_irq(pci_irq_vector(pdev, 0), ld);
	pci_free_irq_vectors(pdev);
	put_disk(ld->disk);
	blk_mq_free_tag_set(&ld->tagset);
	ida_free(&lio_ida, ld->instance);
}

/*
 * The nvme driver claims every NVMe class device first; this driver gets a
 * vNVMe function only when user space moves it here with driver_override,
 * and probe refuses any function without a passthrough capability.  No
 * MODULE_DEVICE_TABLE: udev must not load it in a race with nvme.
 */
static const struct pci_device_id lio_ids[] = {
	{ PCI_DEVICE(LIO_PCI_VENDOR, LIO_PCI_DEVICE) },
	{ }
};

static struct pci_driver lio_driver = {
	.name		= "lightiov_nvme",
	.id_table	= lio_ids,
	.probe		= lio_probe,
	.remove		= lio_remove,
};
module_pci_driver(lio_driver);

MODULE_DESCRIPTION("LightIOV passthrough frontend for vNVMe functions");
MODULE_LICENSE("GPL");
