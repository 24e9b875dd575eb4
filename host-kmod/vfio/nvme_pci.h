/* A user-space NVMe driver over VFIO (softssd --vfio): BAR0, controller reset and enable, the
 * admin queue, I/O queues on nvmeq.h, DMA memory the controller reaches (IOVAs in a type1
 * container, physical addresses in no-IOMMU mode), PRP lists, and every reply checked. */
#ifndef LVMM_NVME_PCI_H
#define LVMM_NVME_PCI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lightiov/nvme.h"
#include "vfio/vfio.h"

#define NVME_PCI_PAGE	     4096u
#define NVME_PCI_ADMIN_DEPTH 32u
#define NVME_PCI_IO_DEPTH    64u /* one page of SQEs: no-IOMMU memory is contiguous per page only */
#define NVME_PCI_PRP_MAX     (NVME_PCI_PAGE / 8 + 1) /* PRP1 and one list page */
#define NVME_PCI_MAX_IOQ     16u
#define NVME_PCI_BOUNCE	     (128u << 10) /* the synchronous path's transfer buffer */

/* Host memory the controller may reach: va..va+size, page aligned. Type1: mapped at iova in the
 * container; no-IOMMU: locked, each page's physical address in pages[]. */
struct nvme_dma_map {
	uint8_t *va;
	uint64_t size;
	uint64_t iova;	 /* type1 */
	uint64_t *pages; /* no-IOMMU: size / 4096 entries */
};

/* The controller's address of byte off of m (off < m->size). */
static inline uint64_t nvme_dma_addr(const struct nvme_dma_map *m, uint64_t off)
{
	if (m->pages)
		return m->pages[off / NVME_PCI_PAGE] + off % NVME_PCI_PAGE;
	return m->iova + off;
}

/* One submission/completion queue pair of the controller (same id, same depth). */
struct nvme_pci_queue {
	struct nvme_pci *c;
	uint16_t qid;
	uint32_t depth;
	struct nvme_sqe *sq;
	volatile struct nvme_cqe *cq;
	uint8_t *lists; /* one PRP-list page per cid */
	uint64_t sq_addr, cq_addr, lists_off;
	uint32_t sq_tail, sq_head, cq_head, phase, rung;
	void **ctx;	/* per cid: the caller's command, NULL when free */
	uint16_t *free; /* free cids, a stack */
	uint32_t nfree;
	int irq_fd;	   /* MSI-X vector's eventfd, or -1: polled */
	uint64_t irqs;	   /* interrupts taken on irq_fd by nvme_pci_wait */
	uint64_t bad_cqes; /* replies refused (unknown cid, wrong queue, bad SQ head) */
};

struct nvme_pci {
	char name[32]; /* the PCI address */
	struct vfio_container cont;
	struct vfio_device dev;
	bool opened, noiommu;
	volatile uint8_t *bar; /* BAR0 mapped, or NULL: registers through the device fd */
	uint64_t bar_len;
	uint64_t cap;
	uint32_t dstrd;		  /* doorbell stride in bytes */
	uint32_t timeout_ms;	  /* CAP.TO */
	struct nvme_dma_map pool; /* queues, PRP lists, identify and bounce buffers */
	uint64_t pool_used, next_iova;
	struct nvme_pci_queue admin;
	struct nvme_pci_queue ioq[NVME_PCI_MAX_IOQ]; /* ioq[0]: the synchronous path's */
	unsigned nioq;
	uint8_t *bounce; /* NVME_PCI_BOUNCE bytes in the pool */
	uint64_t bounce_off;
	uint32_t nsid, lba_shift, mdts_bytes;
	uint64_t nsze; /* namespace size in LBAs */
	bool vwc;      /* volatile write cache present */
	bool zeroes;   /* Write Zeroes supported */
	bool dsm;
	char model[41], serial[21];
};

/* ---- pure parts (nvme_pci_check.c): no device needed ---- */

/* PRP1/PRP2 for a transfer given as n controller addresses (entry 0 may start inside a page,
 * every later one starts a page; each but the last runs to its page's end, which the caller's
 * split ensures). Over two entries, entries 1.. go to list (one page at list_addr). 0, or
 * -EINVAL for n == 0, n > NVME_PCI_PRP_MAX or an entry after the first not page aligned. */
int nvme_prp_build(const uint64_t *ent, unsigned n, uint64_t *list, uint64_t list_addr,
		   uint64_t *prp1, uint64_t *prp2);

/* Checks a completion the controller posted on queue qid of depth entries: SQ id, SQ head in
 * range, cid a command in flight (ctx[cid] set). 0 or -EPROTO with err naming the field. */
int nvme_cqe_check(const struct nvme_cqe *e, uint16_t qid, uint32_t depth, void *const *ctx,
		   char *err, unsigned errlen);

/* "Invalid Field (SCT 0x0 SC 0x02, DNR)" for a status field (without the phase tag). */
void nvme_status_str(uint16_t status, char *buf, unsigned len);

/* ---- the controller (nvme_pci.c) ---- */

/* Opens bdf through VFIO (allow_noiommu: accept a no-IOMMU group), resets and enables the
 * controller, identifies it and namespace 1, and creates nr_io + 1 I/O queues (the first for
 * the synchronous calls below; fewer, nioq, when the controller grants fewer but 2). With msix
 * and nioq vectors on the device, the admin queue takes vector 0 and ioq[i] vector i (i >= 1;
 * ioq[0] stays polled), each on an eventfd (irq_fd); else all are polled. 0 or a negative errno
 * with err naming the device and the value. */
int nvme_pci_open(struct nvme_pci *c, const char *bdf, bool allow_noiommu, unsigned nr_io,
		  bool msix, char *err, unsigned errlen);
/* An admin command (sqe->cid set here) run to its completion, dw0 of the reply in *dw0 (may be
 * NULL); waited for on the admin queue's eventfd (MSI-X vector 0) when open set one up, else
 * polled. 0, -EIO with the status in err, or another negative errno with err. */
int nvme_pci_admin(struct nvme_pci *c, struct nvme_sqe *sqe, uint32_t *dw0, const char *what,
		   char *err, unsigned errlen);
/* Shuts the controller down (CC.SHN, so its cache is written back) and releases everything. */
void nvme_pci_close(struct nvme_pci *c);

/* Makes [va, va + size) reachable by the controller (page aligned; locked for no-IOMMU).
 * 0 or a negative errno with err. */
int nvme_pci_dma_add(struct nvme_pci *c, struct nvme_dma_map *m, void *va, uint64_t size, char *err,
		     unsigned errlen);
void nvme_pci_dma_del(struct nvme_pci *c, struct nvme_dma_map *m);

/* Synchronous I/O on namespace 1 through the bounce buffer and ioq[0] (control thread only):
 * byte offsets and lengths in whole LBAs. 0 or a negative errno with err. */
int nvme_pci_read(struct nvme_pci *c, uint64_t off, void *buf, uint64_t len, char *err,
		  unsigned errlen);
int nvme_pci_write(struct nvme_pci *c, uint64_t off, const void *buf, uint64_t len, char *err,
		   unsigned errlen);
int nvme_pci_flush(struct nvme_pci *c, char *err, unsigned errlen);
/* Write Zeroes where the controller has it, else written zeros. */
int nvme_pci_zero(struct nvme_pci *c, uint64_t off, uint64_t len, char *err, unsigned errlen);

/* ---- the data path: one queue per worker ---- */

/* A command id for the next command, or -EBUSY when the queue is full. The cid owns a page of
 * pool memory (nvme_pci_list) until its completion is taken. */
int nvme_pci_reserve(struct nvme_pci_queue *q);
/* The page of cid (a PRP list, or a DSM range list), its controller address in *addr. */
void *nvme_pci_list(struct nvme_pci_queue *q, uint16_t cid, uint64_t *addr);
/* Gives a reserved cid back unused. */
void nvme_pci_unreserve(struct nvme_pci_queue *q, uint16_t cid);
/* Places sqe (sqe->cid reserved) with ctx as its owner; the doorbell waits for nvme_pci_ring. */
void nvme_pci_submit(struct nvme_pci_queue *q, const struct nvme_sqe *sqe, void *ctx);
void nvme_pci_ring(struct nvme_pci_queue *q);
/* Takes the new completions: done(ctx, cqe, arg) for each valid one, cqe->status the status
 * field (phase tag removed); replies that fail nvme_cqe_check are counted in bad_cqes and
 * dropped. Returns how many entries were consumed. */
unsigned nvme_pci_reap(struct nvme_pci_queue *q,
		       void (*done)(void *ctx, const struct nvme_cqe *e, void *arg), void *arg);

/* Waits up to ms for an interrupt on q's eventfd and takes it (q->irqs counts them): 0,
 * -ETIMEDOUT, or -EINVAL for a polled queue. The completions are then nvme_pci_reap's. */
int nvme_pci_wait(struct nvme_pci_queue *q, int ms);

#endif
