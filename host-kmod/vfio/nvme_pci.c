/* The user-space NVMe driver over VFIO: the controller's bring-up (reset, admin queue, enable,
 * identify, I/O queues), its DMA memory, its queues' submission and completion, and the
 * synchronous namespace I/O softssd's volume table goes through. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <linux/vfio.h>

#include "lightiov/nvmeq.h"
#include "vfio/nvme_pci.h"

#define NVME_PCI_IOVA_BASE (1ull << 32) /* type1: IOVAs handed out from here, never reused */
#define NVME_PCI_CMD_MS	   30000u	/* a synchronous command's limit */

/* ---- registers ---- */

static uint32_t nvme_rd32(struct nvme_pci *c, uint32_t off)
{
	uint32_t v = ~0u;

	if (c->bar && off + 4 <= c->bar_len)
		return *(volatile uint32_t *)(c->bar + off);
	if (vfio_region_read(&c->dev, VFIO_PCI_BAR0_REGION_INDEX, off, &v, 4))
		return ~0u;
	return v;
}

static void nvme_wr32(struct nvme_pci *c, uint32_t off, uint32_t v)
{
	if (c->bar && off + 4 <= c->bar_len)
		*(volatile uint32_t *)(c->bar + off) = v;
	else
		vfio_region_write(&c->dev, VFIO_PCI_BAR0_REGION_INDEX, off, &v, 4);
}

static uint64_t nvme_rd64(struct nvme_pci *c, uint32_t off)
{
	return nvme_rd32(c, off) | (uint64_t)nvme_rd32(c, off + 4) << 32;
}

static void nvme_wr64(struct nvme_pci *c, uint32_t off, uint64_t v)
{
	nvme_wr32(c, off, (uint32_t)v);
	nvme_wr32(c, off + 4, (uint32_t)(v >> 32));
}

static uint64_t nvme_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void nvme_pause(void)
{
	struct timespec ts = {0, 50000};

	nanosleep(&ts, NULL);
}

/* Waits until CSTS & mask == want, within CAP.TO. A fatal status or a register reading all
 * ones (the device is gone) ends the wait at once. */
static int nvme_wait_csts(struct nvme_pci *c, uint32_t mask, uint32_t want, const char *what,
			  char *err, unsigned errlen)
{
	uint64_t end = nvme_now_ms() + c->timeout_ms;

	for (;;) {
		uint32_t csts = nvme_rd32(c, NVME_REG_CSTS);

		if (csts == ~0u) {
			snprintf(err, errlen, "nvme %s: CSTS reads 0xffffffff while %s", c->name,
				 what);
			return -ENODEV;
		}
		if ((csts & mask) == want)
			return 0;
		if ((csts & NVME_CSTS_CFS) && want) {
			snprintf(err, errlen, "nvme %s: controller fatal status while %s", c->name,
				 what);
			return -EIO;
		}
		if (nvme_now_ms() > end) {
			snprintf(err, errlen, "nvme %s: CSTS 0x%x after %u ms while %s", c->name,
				 csts, c->timeout_ms, what);
			return -ETIMEDOUT;
		}
		nvme_pause();
	}
}

/* ---- DMA memory ---- */

int nvme_pci_dma_add(struct nvme_pci *c, struct nvme_dma_map *m, void *va, uint64_t size, char *err,
		     unsigned errlen)
{
	uint64_t n = size / NVME_PCI_PAGE;
	int r;

	memset(m, 0, sizeof(*m));
	if (!size || size % NVME_PCI_PAGE || (uintptr_t)va % NVME_PCI_PAGE) {
		snprintf(err, errlen, "nvme %s: DMA area of %llu bytes not page aligned", c->name,
			 (unsigned long long)size);
		return -EINVAL;
	}
	m->va = va;
	m->size = size;
	if (!c->noiommu) {
		m->iova = c->next_iova;
		r = vfio_dma_map(&c->cont, m->iova, size, va, true, err, errlen);
		if (r)
			return r;
		/* 2 MiB apart: a huge page never straddles two areas */
		c->next_iova += (size + (2u << 20) - 1) & ~((2ull << 20) - 1);
		return 0;
	}
	/* no-IOMMU: the controller sees physical addresses, which stay valid only while the pages
	 * are locked in memory */
	if (mlock(va, size)) {
		r = -errno;
		snprintf(err, errlen, "nvme %s: locking %llu bytes for DMA: %s", c->name,
			 (unsigned long long)size, strerror(errno));
		return r;
	}
	m->pages = malloc(n * sizeof(*m->pages));
	if (!m->pages) {
		munlock(va, size);
		snprintf(err, errlen, "nvme %s: out of memory for a page table of %llu pages",
			 c->name, (unsigned long long)n);
		return -ENOMEM;
	}
	/* one pagemap read for the whole area: thousands of pages cannot afford system calls per
	 * page where they are emulated (a nested guest) */
	r = vfio_virt_to_phys_range(va, n, m->pages);
	if (r) {
		snprintf(err, errlen, "nvme %s: physical addresses of %llu pages: %s", c->name,
			 (unsigned long long)n, strerror(-r));
		free(m->pages);
		m->pages = NULL;
		munlock(va, size);
		return r;
	}
	return 0;
}

void nvme_pci_dma_del(struct nvme_pci *c, struct nvme_dma_map *m)
{
	if (!m->va)
		return;
	if (m->pages) {
		free(m->pages);
		munlock(m->va, m->size);
	} else if (!c->noiommu) {
		vfio_dma_unmap(&c->cont, m->iova, m->size);
	}
	m->va = NULL;
	m->pages = NULL;
}

/* pages pages of the pool: their pointer, and their offset in the pool in *off. */
static void *nvme_pool_take(struct nvme_pci *c, uint64_t pages, uint64_t *off)
{
	uint64_t len = pages * NVME_PCI_PAGE;

	if (len > c->pool.size - c->pool_used)
		return NULL;
	*off = c->pool_used;
	c->pool_used += len;
	return c->pool.va + *off;
}

/* ---- queues ---- */

static uint32_t nvme_db(const struct nvme_pci *c, uint16_t qid, bool cq)
{
	return NVME_REG_DBS + (2u * qid + (cq ? 1 : 0)) * c->dstrd;
}

static int nvme_queue_init(struct nvme_pci *c, struct nvme_pci_queue *q, uint16_t qid,
			   uint32_t depth, bool lists, char *err, unsigned errlen)
{
	uint64_t sq_off, cq_off;
	uint32_t i;

	memset(q, 0, sizeof(*q));
	q->c = c;
	q->qid = qid;
	q->depth = depth;
	q->phase = 1;
	q->irq_fd = -1;
	q->sq = nvme_pool_take(c, 1, &sq_off);
	q->cq = nvme_pool_take(c, 1, &cq_off);
	if (lists)
		q->lists = nvme_pool_take(c, depth, &q->lists_off);
	q->ctx = calloc(depth, sizeof(*q->ctx));
	q->free = calloc(depth, sizeof(*q->free));
	if (!q->sq || !q->cq || (lists && !q->lists) || !q->ctx || !q->free) {
		snprintf(err, errlen, "nvme %s: no memory for queue %u", c->name, qid);
		return -ENOMEM;
	}
	memset(q->sq, 0, NVME_PCI_PAGE);
	memset((void *)q->cq, 0, NVME_PCI_PAGE);
	q->sq_addr = nvme_dma_addr(&c->pool, sq_off);
	q->cq_addr = nvme_dma_addr(&c->pool, cq_off);
	/* depth - 1 commands at most: one SQ slot stays empty */
	for (i = depth - 1; i > 0; i--)
		q->free[q->nfree++] = (uint16_t)(i - 1);
	return 0;
}

static void nvme_queue_fini(struct nvme_pci_queue *q)
{
	free(q->ctx);
	free(q->free);
	q->ctx = NULL;
	q->free = NULL;
	if (q->irq_fd >= 0)
		close(q->irq_fd);
	q->irq_fd = -1;
}

int nvme_pci_reserve(struct nvme_pci_queue *q)
{
	if (!q->nfree)
		return -EBUSY;
	return q->free[--q->nfree];
}

void nvme_pci_unreserve(struct nvme_pci_queue *q, uint16_t cid)
{
	q->free[q->nfree++] = cid;
}

void *nvme_pci_list(struct nvme_pci_queue *q, uint16_t cid, uint64_t *addr)
{
	uint64_t off = q->lists_off + (uint64_t)cid * NVME_PCI_PAGE;

	*addr = nvme_dma_addr(&q->c->pool, off);
	return q->lists + (uint64_t)cid * NVME_PCI_PAGE;
}

void nvme_pci_submit(struct nvme_pci_queue *q, const struct nvme_sqe *sqe, void *ctx)
{
	q->ctx[sqe->cid] = ctx;
	memcpy(&q->sq[q->sq_tail], sqe, sizeof(*sqe));
	nvmeq_step(&q->sq_tail, q->depth);
}

void nvme_pci_ring(struct nvme_pci_queue *q)
{
	if (q->rung == q->sq_tail)
		return;
	/* the entries before the doorbell that publishes them */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	nvme_wr32(q->c, nvme_db(q->c, q->qid, false), q->sq_tail);
	q->rung = q->sq_tail;
}

unsigned nvme_pci_reap(struct nvme_pci_queue *q,
		       void (*done)(void *ctx, const struct nvme_cqe *e, void *arg), void *arg)
{
	struct nvme_cqe e;
	unsigned n = 0;
	char err[128];

	while (n < q->depth && nvmeq_cqe_take(&q->cq[q->cq_head], q->phase, &e)) {
		if (nvmeq_step(&q->cq_head, q->depth))
			q->phase ^= 1;
		n++;
		e.status >>= 1;
		if (nvme_cqe_check(&e, q->qid, q->depth, q->ctx, err, sizeof(err))) {
			/* a reply for nothing we sent: never completes anyone's command */
			if (!q->bad_cqes++)
				fprintf(stderr, "nvme %s: %s (dropped)\n", q->c->name, err);
			continue;
		}
		void *ctx = q->ctx[e.cid];

		q->ctx[e.cid] = NULL;
		q->free[q->nfree++] = e.cid;
		q->sq_head = e.sq_head;
		done(ctx, &e, arg);
	}
	if (n)
		nvme_wr32(q->c, nvme_db(q->c, q->qid, true), q->cq_head);
	return n;
}

int nvme_pci_wait(struct nvme_pci_queue *q, int ms)
{
	struct pollfd pfd = {.fd = q->irq_fd, .events = POLLIN};
	uint64_t v;
	int n;

	if (q->irq_fd < 0)
		return -EINVAL;
	n = poll(&pfd, 1, ms);
	if (n < 0)
		return -errno;
	if (!n)
		return -ETIMEDOUT;
	if (read(q->irq_fd, &v, sizeof(v)) != (ssize_t)sizeof(v))
		return errno == EAGAIN ? -ETIMEDOUT : -EIO;
	q->irqs += v;
	return 0;
}

/* ---- synchronous commands (control thread) ---- */

struct nvme_sync {
	bool done;
	uint16_t status;
	uint32_t dw0;
};

static void nvme_sync_done(void *ctx, const struct nvme_cqe *e, void *arg)
{
	struct nvme_sync *s = ctx;

	s->done = true;
	s->status = e->status;
	s->dw0 = e->dw0;
}

/* Runs sqe on q (cid reserved by the caller) and waits for its completion. */
static int nvme_sync_run(struct nvme_pci_queue *q, struct nvme_sqe *sqe, uint32_t *dw0,
			 const char *what, char *err, unsigned errlen)
{
	struct nvme_pci *c = q->c;
	struct nvme_sync s = {0};
	uint64_t end = nvme_now_ms() + NVME_PCI_CMD_MS;
	char st[96];

	nvme_pci_submit(q, sqe, &s);
	nvme_pci_ring(q);
	while (!s.done) {
		if (nvme_pci_reap(q, nvme_sync_done, NULL))
			continue;
		if (nvme_rd32(c, NVME_REG_CSTS) & NVME_CSTS_CFS) {
			snprintf(err, errlen, "nvme %s: controller fatal status during %s", c->name,
				 what);
			return -EIO;
		}
		if (nvme_now_ms() > end) {
			/* the cid stays taken: the controller may still answer it */
			snprintf(err, errlen, "nvme %s: %s: no completion after %u ms", c->name,
				 what, NVME_PCI_CMD_MS);
			return -ETIMEDOUT;
		}
		/* an interrupt wakes us at once; the CQ is read again every 10 ms regardless */
		if (q->irq_fd >= 0)
			nvme_pci_wait(q, 10);
		else
			nvme_pause();
	}
	/* the interrupt of a completion found before it was waited for: taken, so the next
	 * command's wait does not wake for it */
	if (q->irq_fd >= 0)
		nvme_pci_wait(q, 0);
	if (s.status) {
		nvme_status_str(s.status, st, sizeof(st));
		snprintf(err, errlen, "nvme %s: %s failed: %s", c->name, what, st);
		return -EIO;
	}
	if (dw0)
		*dw0 = s.dw0;
	return 0;
}

int nvme_pci_admin(struct nvme_pci *c, struct nvme_sqe *sqe, uint32_t *dw0, const char *what,
		   char *err, unsigned errlen)
{
	int cid = nvme_pci_reserve(&c->admin);

	if (cid < 0) {
		snprintf(err, errlen, "nvme %s: %s: admin queue full", c->name, what);
		return -EBUSY;
	}
	sqe->cid = (uint16_t)cid;
	return nvme_sync_run(&c->admin, sqe, dw0, what, err, errlen);
}

/* Identify cns (nsid) into the pool page at off. */
static int nvme_identify(struct nvme_pci *c, uint8_t cns, uint32_t nsid, uint64_t off, char *err,
			 unsigned errlen)
{
	struct nvme_sqe sqe = {.opcode = NVME_ADMIN_IDENTIFY, .nsid = nsid, .cdw10 = cns};

	sqe.prp1 = nvme_dma_addr(&c->pool, off);
	return nvme_pci_admin(c, &sqe, NULL, cns ? "Identify Controller" : "Identify Namespace",
			      err, errlen);
}

static void nvme_copy_str(char *dst, const char *src, size_t n)
{
	while (n && (src[n - 1] == ' ' || !src[n - 1]))
		n--;
	for (size_t i = 0; i < n; i++)
		dst[i] = src[i] >= 0x20 && src[i] < 0x7f ? src[i] : '?';
	dst[n] = 0;
}

static int nvme_identify_all(struct nvme_pci *c, char *err, unsigned errlen)
{
	const struct nvme_id_ctrl *idc;
	const struct nvme_id_ns *idn;
	uint64_t off, mdts;
	unsigned fmt;
	void *page = nvme_pool_take(c, 1, &off);
	int r;

	if (!page)
		return -ENOMEM;
	r = nvme_identify(c, NVME_ID_CNS_CTRL, 0, off, err, errlen);
	if (r)
		return r;
	idc = page;
	nvme_copy_str(c->model, idc->mn, sizeof(idc->mn));
	nvme_copy_str(c->serial, idc->sn, sizeof(idc->sn));
	c->vwc = idc->vwc & NVME_CTRL_VWC_PRESENT;
	c->zeroes = idc->oncs & NVME_CTRL_ONCS_WRITE_ZEROES;
	c->dsm = idc->oncs & NVME_CTRL_ONCS_DSM;
	/* MDTS in units of the minimum page size (4 KiB: CAP.MPSMIN 0 was required); 0: none */
	mdts = idc->mdts && idc->mdts < 20 ? (uint64_t)NVME_PCI_PAGE << idc->mdts : UINT64_MAX;
	c->mdts_bytes = (uint32_t)(mdts < NVME_PCI_BOUNCE ? mdts : NVME_PCI_BOUNCE);
	memset(page, 0, NVME_PCI_PAGE);
	c->nsid = 1;
	r = nvme_identify(c, NVME_ID_CNS_NS, c->nsid, off, err, errlen);
	if (r)
		return r;
	idn = page;
	fmt = idn->flbas & 0xf;
	if (fmt > idn->nlbaf || fmt >= 16) {
		snprintf(err, errlen, "nvme %s: namespace 1 uses LBA format %u of %u", c->name, fmt,
			 idn->nlbaf + 1u);
		return -EPROTO;
	}
	c->lba_shift = idn->lbaf[fmt].ds;
	c->nsze = idn->nsze;
	if (c->lba_shift != 9 && c->lba_shift != 12) {
		snprintf(err, errlen,
			 "nvme %s: namespace 1 has %u-byte LBAs (softssd needs 512 or 4096)",
			 c->name, c->lba_shift < 32 ? 1u << c->lba_shift : 0);
		return -EOPNOTSUPP;
	}
	if (idn->lbaf[fmt].ms) {
		snprintf(err, errlen, "nvme %s: namespace 1 has %u bytes of metadata per LBA",
			 c->name, idn->lbaf[fmt].ms);
		return -EOPNOTSUPP;
	}
	if (!c->nsze || c->nsze > (UINT64_MAX >> c->lba_shift)) {
		snprintf(err, errlen, "nvme %s: namespace 1 size %llu LBAs", c->name,
			 (unsigned long long)c->nsze);
		return -EPROTO;
	}
	if (c->mdts_bytes < (1u << c->lba_shift)) {
		snprintf(err, errlen, "nvme %s: MDTS %llu bytes is below one LBA", c->name,
			 (unsigned long long)mdts);
		return -EOPNOTSUPP;
	}
	return 0;
}

/* Creates I/O queue pair q on the controller: its CQ (interrupt vector iv when q->irq_fd is set)
 * then its SQ. */
static int nvme_create_ioq(struct nvme_pci *c, struct nvme_pci_queue *q, uint16_t iv, char *err,
			   unsigned errlen)
{
	struct nvme_sqe sqe = {.opcode = NVME_ADMIN_CREATE_CQ};
	int r;

	sqe.prp1 = q->cq_addr;
	sqe.cdw10 = ((q->depth - 1) << 16) | q->qid;
	sqe.cdw11 = 1u | (q->irq_fd >= 0 ? 2u | ((uint32_t)iv << 16) : 0);
	r = nvme_pci_admin(c, &sqe, NULL, "Create I/O Completion Queue", err, errlen);
	if (r)
		return r;
	sqe = (struct nvme_sqe){.opcode = NVME_ADMIN_CREATE_SQ};
	sqe.prp1 = q->sq_addr;
	sqe.cdw10 = ((q->depth - 1) << 16) | q->qid;
	sqe.cdw11 = ((uint32_t)q->qid << 16) | 1u;
	return nvme_pci_admin(c, &sqe, NULL, "Create I/O Submission Queue", err, errlen);
}

static int nvme_setup_irqs(struct nvme_pci *c, char *err, unsigned errlen)
{
	int fds[NVME_PCI_MAX_IOQ];
	unsigned i;
	int r;

	if (c->dev.irqs[VFIO_PCI_MSIX_IRQ_INDEX].count < c->nioq)
		return 0; /* polled */
	/* vector 0: the admin queue's (its CQ always signals vector 0); ioq[0] stays polled */
	for (i = 0; i < c->nioq; i++) {
		struct nvme_pci_queue *q = i ? &c->ioq[i] : &c->admin;

		q->irq_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (q->irq_fd < 0) {
			snprintf(err, errlen, "nvme %s: eventfd: %s", c->name, strerror(errno));
			return -errno;
		}
		fds[i] = q->irq_fd;
	}
	r = vfio_irq_set(&c->dev, VFIO_PCI_MSIX_IRQ_INDEX, 0, c->nioq, fds);
	if (r) {
		snprintf(err, errlen, "nvme %s: enabling %u MSI-X vectors: %s", c->name, c->nioq,
			 strerror(-r));
		return r;
	}
	return 0;
}

static int nvme_enable(struct nvme_pci *c, char *err, unsigned errlen)
{
	uint16_t cmd;
	uint32_t mqes, mpsmin, cc;
	int r;

	/* memory decoding and bus mastering on, INTx off (polled or MSI-X) */
	if (vfio_cfg_read(&c->dev, 4, &cmd, 2) == 0) {
		cmd |= (1u << 1) | (1u << 2) | (1u << 10);
		vfio_cfg_write(&c->dev, 4, &cmd, 2);
	}
	c->cap = nvme_rd64(c, NVME_REG_CAP);
	if (c->cap == ~0ull) {
		snprintf(err, errlen, "nvme %s: CAP reads all ones (no device behind BAR0)",
			 c->name);
		return -ENODEV;
	}
	mqes = NVME_CAP_MQES(c->cap) + 1;
	mpsmin = (uint32_t)((c->cap >> NVME_CAP_MPSMIN_SHIFT) & 0xf);
	c->timeout_ms = (uint32_t)((c->cap >> NVME_CAP_TO_SHIFT) & 0xff) * 500;
	if (!c->timeout_ms)
		c->timeout_ms = 500;
	c->dstrd = 4u << NVME_CAP_DSTRD(c->cap);
	/* the registers and our queues' doorbells mapped; through the fd when not mappable */
	c->bar_len = NVME_REG_DBS + 2ull * NVME_PCI_MAX_IOQ * c->dstrd;
	c->bar_len = (c->bar_len + NVME_PCI_PAGE - 1) & ~(uint64_t)(NVME_PCI_PAGE - 1);
	if (c->bar_len > c->dev.regions[VFIO_PCI_BAR0_REGION_INDEX].size)
		c->bar_len = c->dev.regions[VFIO_PCI_BAR0_REGION_INDEX].size &
			     ~(uint64_t)(NVME_PCI_PAGE - 1);
	c->bar = vfio_region_mmap(&c->dev, VFIO_PCI_BAR0_REGION_INDEX, 0, c->bar_len,
				  PROT_READ | PROT_WRITE);
	if (!(c->cap & NVME_CAP_CSS_NVM) || mpsmin || mqes < 2) {
		snprintf(
		    err, errlen,
		    "nvme %s: CAP 0x%llx: needs the NVM command set, 4 KiB pages and queues of "
		    "2 entries",
		    c->name, (unsigned long long)c->cap);
		return -EOPNOTSUPP;
	}
	if (nvme_rd32(c, NVME_REG_CC) & NVME_CC_EN)
		nvme_wr32(c, NVME_REG_CC, 0);
	r = nvme_wait_csts(c, NVME_CSTS_RDY, 0, "disabling", err, errlen);
	if (r)
		return r;
	r = nvme_queue_init(c, &c->admin, 0, NVME_PCI_ADMIN_DEPTH, false, err, errlen);
	if (r)
		return r;
	nvme_wr32(c, NVME_REG_AQA, ((NVME_PCI_ADMIN_DEPTH - 1) << 16) | (NVME_PCI_ADMIN_DEPTH - 1));
	nvme_wr64(c, NVME_REG_ASQ, c->admin.sq_addr);
	nvme_wr64(c, NVME_REG_ACQ, c->admin.cq_addr);
	cc = NVME_CC_EN | (NVME_SQES_LOG2 << 16) | (NVME_CQES_LOG2 << 20);
	nvme_wr32(c, NVME_REG_CC, cc);
	r = nvme_wait_csts(c, NVME_CSTS_RDY, NVME_CSTS_RDY, "enabling", err, errlen);
	if (r)
		return r;
	c->ioq[0].depth = mqes < NVME_PCI_IO_DEPTH ? mqes : NVME_PCI_IO_DEPTH;
	return 0;
}

int nvme_pci_open(struct nvme_pci *c, const char *bdf, bool allow_noiommu, unsigned nr_io,
		  bool msix, char *err, unsigned errlen)
{
	uint64_t pool_pages;
	uint32_t depth, dw0, got;
	unsigned i;
	void *va;
	int r;

	memset(c, 0, sizeof(*c));
	for (i = 0; i < NVME_PCI_MAX_IOQ; i++)
		c->ioq[i].irq_fd = -1;
	c->admin.irq_fd = -1;
	r = vfio_parse_bdf(bdf, c->name, sizeof(c->name), err, errlen);
	if (r)
		return r;
	if (nr_io + 1 > NVME_PCI_MAX_IOQ) {
		snprintf(err, errlen, "nvme %s: %u I/O queues (at most %u)", c->name, nr_io,
			 NVME_PCI_MAX_IOQ - 1);
		return -EINVAL;
	}
	r = vfio_container_open(&c->cont, allow_noiommu, err, errlen);
	if (r)
		return r;
	r = vfio_device_open(&c->cont, c->name, &c->dev, err, errlen);
	if (r) {
		vfio_container_close(&c->cont);
		return r;
	}
	c->opened = true;
	c->noiommu = c->cont.backend == VFIO_BACKEND_NOIOMMU;
	/* no-IOMMU DMA areas are translated through pagemap, later too (a client's window): kept
	 * open now, while the opener may still see frame numbers */
	if (c->noiommu) {
		r = vfio_pagemap_keep();
		if (r) {
			snprintf(err, errlen, "nvme %s: /proc/self/pagemap: %s", c->name,
				 strerror(-r));
			goto fail;
		}
	}
	c->next_iova = NVME_PCI_IOVA_BASE;
	if (c->dev.regions[VFIO_PCI_BAR0_REGION_INDEX].size < 0x2000) {
		snprintf(err, errlen, "nvme %s: BAR0 is %llu bytes (an NVMe controller has 8 KiB+)",
			 c->name, (unsigned long long)c->dev.regions[0].size);
		r = -ENODEV;
		goto fail;
	}
	/* the pool: admin queue, identify page, bounce buffer, each I/O queue with its lists */
	c->nioq = nr_io + 1;
	pool_pages = 2 + 1 + NVME_PCI_BOUNCE / NVME_PCI_PAGE + c->nioq * (2 + NVME_PCI_IO_DEPTH);
	va = mmap(NULL, pool_pages * NVME_PCI_PAGE, PROT_READ | PROT_WRITE,
		  MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (va == MAP_FAILED) {
		r = -errno;
		snprintf(err, errlen, "nvme %s: DMA pool of %llu KiB: %s", c->name,
			 (unsigned long long)pool_pages * 4, strerror(errno));
		goto fail;
	}
	r = nvme_pci_dma_add(c, &c->pool, va, pool_pages * NVME_PCI_PAGE, err, errlen);
	if (r) {
		munmap(va, pool_pages * NVME_PCI_PAGE);
		c->pool.va = NULL;
		goto fail;
	}
	c->bounce = nvme_pool_take(c, NVME_PCI_BOUNCE / NVME_PCI_PAGE, &c->bounce_off);
	r = nvme_enable(c, err, errlen);
	if (r)
		goto fail;
	r = nvme_identify_all(c, err, errlen);
	if (r)
		goto fail;
	{
		struct nvme_sqe sqe = {.opcode = NVME_ADMIN_SET_FEATURES,
				       .cdw10 = NVME_FEAT_NUM_QUEUES};

		sqe.cdw11 = ((c->nioq - 1) << 16) | (c->nioq - 1);
		r = nvme_pci_admin(c, &sqe, &dw0, "Set Features (Number of Queues)", err, errlen);
		if (r)
			goto fail;
		got = (dw0 & 0xffff) < (dw0 >> 16) ? (dw0 & 0xffff) + 1 : (dw0 >> 16) + 1;
		if (got < c->nioq) {
			snprintf(err, errlen,
				 "nvme %s: the controller grants %u I/O queues, not %u", c->name,
				 got, c->nioq);
			r = -EOPNOTSUPP;
			goto fail;
		}
	}
	depth = c->ioq[0].depth;
	for (i = 0; i < c->nioq; i++) {
		r = nvme_queue_init(c, &c->ioq[i], (uint16_t)(i + 1), depth, true, err, errlen);
		if (r)
			goto fail;
	}
	if (msix) {
		r = nvme_setup_irqs(c, err, errlen);
		if (r)
			goto fail;
	}
	for (i = 0; i < c->nioq; i++) {
		r = nvme_create_ioq(c, &c->ioq[i], (uint16_t)i, err, errlen);
		if (r)
			goto fail;
	}
	return 0;
fail:
	nvme_pci_close(c);
	return r;
}

void nvme_pci_close(struct nvme_pci *c)
{
	unsigned i;
	uint32_t cc;
	char err[160];

	if (!c->opened)
		return;
	cc = nvme_rd32(c, NVME_REG_CC);
	if (cc != ~0u && (cc & NVME_CC_EN)) {
		/* a normal shutdown: the controller writes its cache back */
		nvme_wr32(c, NVME_REG_CC, (cc & ~(3u << 14)) | (NVME_CC_SHN_NORMAL << 14));
		if (nvme_wait_csts(c, NVME_CSTS_SHST_MASK, NVME_CSTS_SHST_CMPLT, "shutting down",
				   err, sizeof(err)))
			fprintf(stderr, "%s\n", err);
		nvme_wr32(c, NVME_REG_CC, 0);
	}
	vfio_irq_disable(&c->dev, VFIO_PCI_MSIX_IRQ_INDEX);
	for (i = 0; i < NVME_PCI_MAX_IOQ; i++)
		nvme_queue_fini(&c->ioq[i]);
	nvme_queue_fini(&c->admin);
	if (c->bar)
		munmap((void *)c->bar, c->bar_len);
	c->bar = NULL;
	if (c->pool.va) {
		void *va = c->pool.va;
		uint64_t size = c->pool.size;

		nvme_pci_dma_del(c, &c->pool);
		munmap(va, size);
	}
	vfio_device_close(&c->dev);
	vfio_container_close(&c->cont);
	c->opened = false;
}

/* ---- synchronous namespace I/O (the volume table, volume zeroing and copies) ---- */

static int nvme_check_range(struct nvme_pci *c, uint64_t off, uint64_t len, char *err,
			    unsigned errlen)
{
	uint64_t mask = (1ull << c->lba_shift) - 1, end = c->nsze << c->lba_shift;

	if ((off | len) & mask || off > end || len > end - off) {
		snprintf(err, errlen,
			 "nvme %s: I/O of %llu bytes at %llu outside namespace 1 or "
			 "not in whole LBAs",
			 c->name, (unsigned long long)len, (unsigned long long)off);
		return -EINVAL;
	}
	return 0;
}

/* One command of len <= mdts bytes on ioq[0] with the bounce buffer as its data. */
static int nvme_bounce_io(struct nvme_pci *c, uint8_t opcode, uint64_t off, uint32_t len, char *err,
			  unsigned errlen)
{
	struct nvme_pci_queue *q = &c->ioq[0];
	uint64_t ent[NVME_PCI_BOUNCE / NVME_PCI_PAGE], list_addr;
	struct nvme_sqe sqe = {.opcode = opcode, .nsid = c->nsid};
	unsigned n = (len + NVME_PCI_PAGE - 1) / NVME_PCI_PAGE, i;
	uint64_t lba = off >> c->lba_shift;
	uint64_t *list, prp1, prp2;
	int cid = nvme_pci_reserve(q);

	if (cid < 0) {
		snprintf(err, errlen, "nvme %s: I/O queue 1 full", c->name);
		return -EBUSY;
	}
	sqe.cid = (uint16_t)cid;
	for (i = 0; i < n; i++)
		ent[i] = nvme_dma_addr(&c->pool, c->bounce_off + (uint64_t)i * NVME_PCI_PAGE);
	list = nvme_pci_list(q, sqe.cid, &list_addr);
	nvme_prp_build(ent, n, list, list_addr, &prp1, &prp2);
	sqe.prp1 = prp1;
	sqe.prp2 = prp2;
	sqe.cdw10 = (uint32_t)lba;
	sqe.cdw11 = (uint32_t)(lba >> 32);
	sqe.cdw12 = (len >> c->lba_shift) - 1;
	return nvme_sync_run(q, &sqe, NULL, opcode == NVME_CMD_READ ? "read" : "write", err,
			     errlen);
}

int nvme_pci_read(struct nvme_pci *c, uint64_t off, void *buf, uint64_t len, char *err,
		  unsigned errlen)
{
	int r = nvme_check_range(c, off, len, err, errlen);

	while (!r && len) {
		uint32_t n = len < c->mdts_bytes ? (uint32_t)len : c->mdts_bytes;

		r = nvme_bounce_io(c, NVME_CMD_READ, off, n, err, errlen);
		if (r)
			break;
		memcpy(buf, c->bounce, n);
		buf = (uint8_t *)buf + n;
		off += n;
		len -= n;
	}
	return r;
}

int nvme_pci_write(struct nvme_pci *c, uint64_t off, const void *buf, uint64_t len, char *err,
		   unsigned errlen)
{
	int r = nvme_check_range(c, off, len, err, errlen);

	while (!r && len) {
		uint32_t n = len < c->mdts_bytes ? (uint32_t)len : c->mdts_bytes;

		if (buf)
			memcpy(c->bounce, buf, n);
		else
			memset(c->bounce, 0, n);
		r = nvme_bounce_io(c, NVME_CMD_WRITE, off, n, err, errlen);
		if (buf)
			buf = (const uint8_t *)buf + n;
		off += n;
		len -= n;
	}
	return r;
}

int nvme_pci_flush(struct nvme_pci *c, char *err, unsigned errlen)
{
	struct nvme_sqe sqe = {.opcode = NVME_CMD_FLUSH, .nsid = c->nsid};

	int cid = nvme_pci_reserve(&c->ioq[0]);

	if (cid < 0) {
		snprintf(err, errlen, "nvme %s: I/O queue 1 full", c->name);
		return -EBUSY;
	}
	sqe.cid = (uint16_t)cid;
	return nvme_sync_run(&c->ioq[0], &sqe, NULL, "flush", err, errlen);
}

int nvme_pci_zero(struct nvme_pci *c, uint64_t off, uint64_t len, char *err, unsigned errlen)
{
	int r = nvme_check_range(c, off, len, err, errlen);

	if (r || !c->zeroes)
		return r ? r : nvme_pci_write(c, off, NULL, len, err, errlen);
	while (len) {
		uint64_t nlb = len >> c->lba_shift;
		struct nvme_sqe sqe = {.opcode = NVME_CMD_WRITE_ZEROES, .nsid = c->nsid};
		uint64_t lba = off >> c->lba_shift;

		int cid = nvme_pci_reserve(&c->ioq[0]);

		if (nlb > 65536)
			nlb = 65536;
		if (cid < 0) {
			snprintf(err, errlen, "nvme %s: I/O queue 1 full", c->name);
			return -EBUSY;
		}
		sqe.cid = (uint16_t)cid;
		sqe.cdw10 = (uint32_t)lba;
		sqe.cdw11 = (uint32_t)(lba >> 32);
		sqe.cdw12 = (uint32_t)(nlb - 1);
		r = nvme_sync_run(&c->ioq[0], &sqe, NULL, "write zeroes", err, errlen);
		if (r)
			return r;
		off += nlb << c->lba_shift;
		len -= nlb << c->lba_shift;
	}
	return 0;
}
