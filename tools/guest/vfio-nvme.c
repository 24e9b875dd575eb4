/* A minimal user-space NVMe driver on the VFIO library (vfio-nvme.h): registers through the
 * mapped BAR0, queues in DMA memory, completions by phase tag after an MSI-X eventfd or polling. */
#include "vfio-nvme.h"

#include <errno.h>
#include <linux/vfio.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "lightiov/nvmeq.h"

#define UNVME_IOVA_BASE	  (1ull << 32) /* type1: DMA buffers from here up */
#define UNVME_PCI_CMD	  0x04
#define UNVME_PCI_CMD_MEM 0x2
#define UNVME_PCI_CMD_BM  0x4

__attribute__((format(printf, 3, 4))) static int unvme_fail(struct unvme *n, int rc,
							    const char *fmt, ...)
{
	va_list ap;

	if (n->err && n->errlen) {
		va_start(ap, fmt);
		vsnprintf(n->err, n->errlen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

static uint64_t unvme_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint32_t unvme_reg32(struct unvme *n, unsigned off)
{
	return *(volatile uint32_t *)(n->bar0 + off);
}

void unvme_wreg32(struct unvme *n, unsigned off, uint32_t v)
{
	*(volatile uint32_t *)(n->bar0 + off) = v;
}

/* Two 32-bit halves, low first: the controller takes either order, and not every path from a
 * CPU to a device carries a 64-bit access whole. */
uint64_t unvme_reg64(struct unvme *n, unsigned off)
{
	uint64_t lo = unvme_reg32(n, off);

	return lo | (uint64_t)unvme_reg32(n, off + 4) << 32;
}

static void unvme_wreg64(struct unvme *n, unsigned off, uint64_t v)
{
	unvme_wreg32(n, off, (uint32_t)v);
	unvme_wreg32(n, off + 4, (uint32_t)(v >> 32));
}

int unvme_attach(struct unvme *n, struct vfio_device *d, char *err, unsigned errlen)
{
	const struct vfio_region *r = &d->regions[VFIO_PCI_BAR0_REGION_INDEX];
	uint16_t cmd;
	int rc;
	void *p;

	memset(n, 0, sizeof(*n));
	n->d = d;
	n->err = err;
	n->errlen = errlen;
	n->next_iova = UNVME_IOVA_BASE;
	n->aq.efd = -1;
	if (r->size < 0x2000)
		return unvme_fail(n, -ENODEV,
				  "nvme %s: BAR0 of %#llx bytes is no NVMe register block", d->name,
				  (unsigned long long)r->size);
	/* DMA needs bus mastering, which vfio-pci leaves to the user */
	rc = vfio_cfg_read(d, UNVME_PCI_CMD, &cmd, sizeof(cmd));
	if (!rc) {
		cmd |= UNVME_PCI_CMD_MEM | UNVME_PCI_CMD_BM;
		rc = vfio_cfg_write(d, UNVME_PCI_CMD, &cmd, sizeof(cmd));
	}
	if (rc)
		return unvme_fail(n, rc, "nvme %s: PCI command register: %s", d->name,
				  strerror(-rc));
	p = vfio_region_mmap(d, VFIO_PCI_BAR0_REGION_INDEX, 0, r->size, PROT_READ | PROT_WRITE);
	if (!p)
		return unvme_fail(n, -errno, "nvme %s: mmap BAR0 (%#llx bytes): %s", d->name,
				  (unsigned long long)r->size, strerror(errno));
	n->bar0 = p;
	n->bar0_size = r->size;
	n->cap = unvme_reg64(n, NVME_REG_CAP);
	n->db_stride = 4u << NVME_CAP_DSTRD(n->cap);
	n->timeout_ms = (unsigned)((n->cap >> NVME_CAP_TO_SHIFT) & 0xff) * 500;
	if (!n->timeout_ms)
		n->timeout_ms = 500;
	return 0;
}

void unvme_detach(struct unvme *n)
{
	if (n->bar0)
		munmap((void *)n->bar0, n->bar0_size);
	n->bar0 = NULL;
}

int unvme_dma_alloc(struct unvme *n, struct unvme_dma *m, size_t size)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	bool noiommu = n->d->c->backend == VFIO_BACKEND_NOIOMMU;
	int rc;

	memset(m, 0, sizeof(*m));
	if (!size || size % pg || (noiommu && size > pg))
		return unvme_fail(n, -EINVAL, "nvme %s: DMA buffer of %zu bytes (%s)", n->d->name,
				  size, noiommu ? "no-IOMMU: one page at most" : "whole pages");
	m->va = mmap(NULL, size, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE | MAP_LOCKED, -1, 0);
	if (m->va == MAP_FAILED) {
		m->va = NULL;
		return unvme_fail(n, -errno, "nvme %s: %zu bytes of locked memory: %s", n->d->name,
				  size, strerror(errno));
	}
	m->size = size;
	if (noiommu) {
		rc = vfio_virt_to_phys(m->va, &m->addr);
		if (rc) {
			unvme_dma_free(n, m);
			return unvme_fail(n, rc, "nvme %s: physical address of a DMA page: %s",
					  n->d->name, strerror(-rc));
		}
		return 0;
	}
	rc = vfio_dma_map(n->d->c, n->next_iova, size, m->va, true, n->err, n->errlen);
	if (rc) {
		munmap(m->va, size);
		m->va = NULL;
		return rc;
	}
	m->addr = n->next_iova;
	n->next_iova += size;
	return 0;
}

void unvme_dma_free(struct unvme *n, struct unvme_dma *m)
{
	if (!m->va)
		return;
	if (n->d->c->backend == VFIO_BACKEND_TYPE1)
		vfio_dma_unmap(n->d->c, m->addr, m->size);
	munmap(m->va, m->size);
	memset(m, 0, sizeof(*m));
}

static int unvme_wait_rdy(struct unvme *n, bool rdy)
{
	uint64_t end = unvme_now_ms() + n->timeout_ms;
	uint32_t csts;

	for (;;) {
		csts = unvme_reg32(n, NVME_REG_CSTS);
		if (csts == ~0u || csts & NVME_CSTS_CFS)
			return unvme_fail(n, -EIO, "nvme %s: controller fatal status (CSTS %#x)",
					  n->d->name, csts);
		if (!!(csts & NVME_CSTS_RDY) == rdy)
			return 0;
		if (unvme_now_ms() > end)
			return unvme_fail(n, -ETIMEDOUT, "nvme %s: CSTS.RDY not %d after %u ms",
					  n->d->name, rdy, n->timeout_ms);
		usleep(1000);
	}
}

static int unvme_queue_mem(struct unvme *n, struct unvme_queue *q, uint16_t qid, uint32_t entries)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	int rc;

	if (entries < 2 || entries * sizeof(struct nvme_sqe) > pg ||
	    entries > NVME_CAP_MQES(n->cap) + 1u)
		return unvme_fail(n, -EINVAL, "nvme %s: queue %u of %u entries (2 to %u)",
				  n->d->name, qid, entries, NVME_CAP_MQES(n->cap) + 1u);
	memset(q, 0, sizeof(*q));
	q->qid = qid;
	q->size = entries;
	q->phase = 1;
	q->efd = -1;
	rc = unvme_dma_alloc(n, &q->sqm, pg);
	if (!rc)
		rc = unvme_dma_alloc(n, &q->cqm, pg);
	if (rc) {
		unvme_dma_free(n, &q->sqm);
		return rc;
	}
	q->sq = q->sqm.va;
	q->cq = q->cqm.va;
	return 0;
}

static void unvme_queue_free(struct unvme *n, struct unvme_queue *q)
{
	unvme_dma_free(n, &q->sqm);
	unvme_dma_free(n, &q->cqm);
	q->sq = NULL;
	q->cq = NULL;
}

int unvme_disable(struct unvme *n)
{
	int rc;

	unvme_wreg32(n, NVME_REG_CC, unvme_reg32(n, NVME_REG_CC) & ~NVME_CC_EN);
	rc = unvme_wait_rdy(n, false);
	if (!rc && n->aq.sq)
		unvme_queue_free(n, &n->aq);
	return rc;
}

int unvme_enable(struct unvme *n, uint32_t entries, int efd)
{
	uint32_t cc = NVME_CC_EN | NVME_SQES_LOG2 << 16 | NVME_CQES_LOG2 << 20;
	int rc;

	rc = unvme_disable(n);
	if (!rc)
		rc = unvme_queue_mem(n, &n->aq, 0, entries);
	if (rc)
		return rc;
	n->aq.efd = efd;
	n->aq.vector = 0;
	unvme_wreg32(n, NVME_REG_AQA, (entries - 1) << 16 | (entries - 1));
	unvme_wreg64(n, NVME_REG_ASQ, n->aq.sqm.addr);
	unvme_wreg64(n, NVME_REG_ACQ, n->aq.cqm.addr);
	unvme_wreg32(n, NVME_REG_CC, cc);
	return unvme_wait_rdy(n, true);
}

static volatile uint32_t *unvme_db(struct unvme *n, uint16_t qid, bool cq)
{
	return (volatile uint32_t *)(n->bar0 + NVME_REG_DBS + (2u * qid + cq) * n->db_stride);
}

/* The next CQE of q: after its eventfd fires, or by polling; -ETIMEDOUT after 10 s. */
static int unvme_reap(struct unvme *n, struct unvme_queue *q, struct nvme_cqe *cqe)
{
	uint64_t end = unvme_now_ms() + 10000;
	uint64_t v;

	while (!nvmeq_cqe_take(&q->cq[q->cq_head], q->phase, cqe)) {
		uint64_t now = unvme_now_ms();

		if (now > end)
			return unvme_fail(n, -ETIMEDOUT,
					  "nvme %s: queue %u: no completion in 10 s%s", n->d->name,
					  q->qid, q->efd >= 0 ? " (no interrupt)" : "");
		if (q->efd >= 0) {
			struct pollfd p = {.fd = q->efd, .events = POLLIN};

			if (poll(&p, 1, (int)(end - now)) > 0) {
				if (read(q->efd, &v, sizeof(v)) != sizeof(v))
					return unvme_fail(n, -EIO, "nvme %s: queue %u eventfd read",
							  n->d->name, q->qid);
				q->irqs += v;
			}
		} else {
			usleep(100);
		}
	}
	if (nvmeq_step(&q->cq_head, q->size))
		q->phase ^= 1;
	*unvme_db(n, q->qid, true) = q->cq_head;
	return 0;
}

int unvme_cmd(struct unvme *n, struct unvme_queue *q, struct nvme_sqe *cmd, struct nvme_cqe *cqe)
{
	uint16_t st;
	int rc;

	cmd->cid = q->cid++;
	memcpy((void *)&q->sq[q->sq_tail], cmd, sizeof(*cmd));
	nvmeq_publish_fence();
	nvmeq_step(&q->sq_tail, q->size);
	*unvme_db(n, q->qid, false) = q->sq_tail;
	rc = unvme_reap(n, q, cqe);
	if (rc)
		return rc;
	st = cqe->status >> 1;
	if (cqe->cid != cmd->cid || cqe->sq_id != q->qid)
		return unvme_fail(n, -EIO, "nvme %s: queue %u: completion for cid %u sq %u, not %u",
				  n->d->name, q->qid, cqe->cid, cqe->sq_id, cmd->cid);
	if (st)
		return unvme_fail(n, -EIO, "nvme %s: queue %u opcode %#x: status sct %u sc %#x",
				  n->d->name, q->qid, cmd->opcode, NVME_STATUS_SCT(st),
				  NVME_STATUS_SC(st));
	return 0;
}

int unvme_identify(struct unvme *n, uint32_t cns, uint32_t nsid, struct unvme_dma *buf)
{
	struct nvme_sqe c = {.opcode = NVME_ADMIN_IDENTIFY, .nsid = nsid, .cdw10 = cns};
	struct nvme_cqe e;

	c.prp1 = buf->addr;
	return unvme_cmd(n, &n->aq, &c, &e);
}

int unvme_create_ioq(struct unvme *n, struct unvme_queue *q, uint16_t qid, uint32_t entries,
		     unsigned vector, int efd)
{
	struct nvme_sqe c;
	struct nvme_cqe e;
	int rc;

	rc = unvme_queue_mem(n, q, qid, entries);
	if (rc)
		return rc;
	q->efd = efd;
	q->vector = vector;
	/* physically contiguous (PC), interrupts enabled (IEN) when waited for on an eventfd */
	c = (struct nvme_sqe){.opcode = NVME_ADMIN_CREATE_CQ,
			      .cdw10 = (entries - 1) << 16 | qid,
			      .cdw11 = vector << 16 | (efd >= 0 ? 2u : 0u) | 1u};
	c.prp1 = q->cqm.addr;
	rc = unvme_cmd(n, &n->aq, &c, &e);
	if (rc)
		goto fail;
	c = (struct nvme_sqe){.opcode = NVME_ADMIN_CREATE_SQ,
			      .cdw10 = (entries - 1) << 16 | qid,
			      .cdw11 = (uint32_t)qid << 16 | 1u};
	c.prp1 = q->sqm.addr;
	rc = unvme_cmd(n, &n->aq, &c, &e);
	if (rc) {
		c = (struct nvme_sqe){.opcode = NVME_ADMIN_DELETE_CQ, .cdw10 = qid};
		unvme_cmd(n, &n->aq, &c, &e);
		goto fail;
	}
	return 0;
fail:
	unvme_queue_free(n, q);
	return rc;
}

int unvme_wait_irq(struct unvme *n, struct unvme_queue *q, int ms)
{
	struct pollfd p = {.fd = q->efd, .events = POLLIN};
	uint64_t v;

	if (q->efd < 0)
		return unvme_fail(n, -EINVAL, "nvme %s: queue %u has no eventfd", n->d->name,
				  q->qid);
	if (poll(&p, 1, ms) <= 0)
		return unvme_fail(n, -ETIMEDOUT, "nvme %s: queue %u: no interrupt in %d ms",
				  n->d->name, q->qid, ms);
	if (read(q->efd, &v, sizeof(v)) != sizeof(v))
		return unvme_fail(n, -EIO, "nvme %s: queue %u eventfd read", n->d->name, q->qid);
	q->irqs += v;
	return 0;
}

int unvme_delete_ioq(struct unvme *n, struct unvme_queue *q)
{
	struct nvme_sqe c = {.opcode = NVME_ADMIN_DELETE_SQ, .cdw10 = q->qid};
	struct nvme_cqe e;
	int rc;

	rc = unvme_cmd(n, &n->aq, &c, &e);
	if (!rc) {
		c = (struct nvme_sqe){.opcode = NVME_ADMIN_DELETE_CQ, .cdw10 = q->qid};
		rc = unvme_cmd(n, &n->aq, &c, &e);
	}
	if (!rc)
		unvme_queue_free(n, q);
	return rc;
}

int unvme_rw(struct unvme *n, struct unvme_queue *q, uint8_t opcode, uint32_t nsid, uint64_t lba,
	     uint32_t nlb, struct unvme_dma *buf)
{
	struct nvme_sqe c = {.opcode = opcode,
			     .nsid = nsid,
			     .cdw10 = (uint32_t)lba,
			     .cdw11 = (uint32_t)(lba >> 32),
			     .cdw12 = nlb - 1};
	struct nvme_cqe e;

	if (!nlb || nlb > 0x10000 || buf->size > (size_t)sysconf(_SC_PAGESIZE))
		return unvme_fail(n, -EINVAL, "nvme %s: %u blocks into a %zu-byte buffer",
				  n->d->name, nlb, buf->size);
	c.prp1 = buf->addr;
	return unvme_cmd(n, q, &c, &e);
}
