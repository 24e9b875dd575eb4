/* A minimal user-space NVMe driver on the VFIO library: BAR0 mapped, DMA memory (mapped through
 * the IOMMU, or locked and addressed physically in no-IOMMU mode), the admin queue, I/O queue
 * pairs, commands waited for on an MSI-X eventfd or by polling, disable and reset. It prints
 * nothing: errors come back as a negative errno with a message in the caller's buffer. */
#ifndef LVMM_VFIO_NVME_H
#define LVMM_VFIO_NVME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lightiov/nvme.h"
#include "vfio/vfio.h"

/* Memory the controller reads or writes: va for us, addr for it (IOVA or physical). */
struct unvme_dma {
	void *va;
	uint64_t addr;
	size_t size;
};

struct unvme_queue {
	uint16_t qid;
	uint32_t size; /* entries */
	struct unvme_dma sqm, cqm;
	volatile struct nvme_sqe *sq;
	volatile struct nvme_cqe *cq;
	uint32_t sq_tail, cq_head, phase;
	uint16_t cid;
	int efd;	 /* the eventfd of its MSI-X vector, -1: poll the CQ */
	uint64_t irqs;	 /* interrupts counted on efd */
	unsigned vector; /* the CQ's interrupt vector */
};

struct unvme {
	struct vfio_device *d;
	volatile uint8_t *bar0;
	uint64_t bar0_size;
	uint64_t cap;
	uint32_t db_stride;  /* bytes between doorbells: 4 << CAP.DSTRD */
	unsigned timeout_ms; /* CAP.TO */
	uint64_t next_iova;  /* type1: where the next DMA buffer is mapped */
	struct unvme_queue aq;
	char *err;
	unsigned errlen;
};

/* Takes d (open; its container's backend picks how DMA is addressed): memory and bus-master
 * enabled in the command register, BAR0 mapped, CAP read. err (errlen bytes) receives the
 * message of every later failure too. */
int unvme_attach(struct unvme *n, struct vfio_device *d, char *err, unsigned errlen);
void unvme_detach(struct unvme *n);

uint32_t unvme_reg32(struct unvme *n, unsigned off);
void unvme_wreg32(struct unvme *n, unsigned off, uint32_t v);
uint64_t unvme_reg64(struct unvme *n, unsigned off);

/* size bytes (whole pages; no-IOMMU: one page at most, so it is physically contiguous) of
 * zeroed, locked memory the controller can reach. */
int unvme_dma_alloc(struct unvme *n, struct unvme_dma *m, size_t size);
void unvme_dma_free(struct unvme *n, struct unvme_dma *m);

/* CC.EN = 0 and CSTS.RDY = 0 (then the admin queue's memory is freed). */
int unvme_disable(struct unvme *n);
/* Disables, then an admin queue of entries (at most a page of SQEs) whose completions are waited
 * for on efd (MSI-X vector 0; -1: polled), and CC.EN = 1 until CSTS.RDY. */
int unvme_enable(struct unvme *n, uint32_t entries, int efd);

/* Submits cmd (its cid set here) on q and waits for its completion into *cqe; an error
 * status is -EIO with the status in the message. */
int unvme_cmd(struct unvme *n, struct unvme_queue *q, struct nvme_sqe *cmd, struct nvme_cqe *cqe);

/* Identify (cns, nsid) into a page of the caller's DMA memory. */
int unvme_identify(struct unvme *n, uint32_t cns, uint32_t nsid, struct unvme_dma *buf);
/* I/O queue pair qid: a CQ on vector (waited for on efd, -1: polled) and its SQ. */
int unvme_create_ioq(struct unvme *n, struct unvme_queue *q, uint16_t qid, uint32_t entries,
		     unsigned vector, int efd);
/* Waits up to ms for q's eventfd (an interrupt the completion path did not consume yet). */
int unvme_wait_irq(struct unvme *n, struct unvme_queue *q, int ms);
int unvme_delete_ioq(struct unvme *n, struct unvme_queue *q);
/* Read or write nlb blocks at lba of namespace nsid to or from buf (one page at most). */
int unvme_rw(struct unvme *n, struct unvme_queue *q, uint8_t opcode, uint32_t nsid, uint64_t lba,
	     uint32_t nlb, struct unvme_dma *buf);

#endif
