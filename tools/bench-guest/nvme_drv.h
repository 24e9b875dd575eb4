/* The bench guest's one NVMe driver core, used by the modes "nvme", "lio", "hostile" and "work":
 * PCI configuration access (ports or ECAM), capability lookup, BAR0 placement, controller
 * enable, polled queue pairs on the queue engine (include/lightiov/nvmeq.h) with plain or shadow
 * doorbells, and command helpers. Each mode owns its queue memory and one struct nvme_drv. */
#ifndef BENCH_NVME_DRV_H
#define BENCH_NVME_DRV_H

#include "bench.h"
#include "lightiov/nvme.h"
#include "workload.h"

#define NDRV_PAGE  4096
#define NDRV_MAX_Q (WORK_MAX_QUEUES + 1) /* the admin queue pair and the I/O pairs */

struct ndrv_q {
	volatile struct nvme_sqe *sq;
	volatile struct nvme_cqe *cq;
	uint32_t entries, sq_tail, cq_head;
	uint8_t phase;
};

struct nvme_drv {
	volatile uint8_t *regs;	 /* BAR0 */
	volatile uint32_t *ecam; /* configuration space through ECAM, or NULL: ports cf8/cfc */
	unsigned dstrd;
	bool shadow; /* Doorbell Buffer Config accepted: I/O doorbells go to dbs/eis */
	uint8_t *dbs, *eis;
	uint16_t next_cid;
	uint64_t db_mmio_writes; /* doorbell register writes (not shadow slot updates) */
	struct ndrv_q q[NDRV_MAX_Q];
};

/* The LightIOV vendor capability's fields (lightiov/vcap.h). */
struct ndrv_vcap {
	uint32_t mode;
	uint64_t lba_start, lba_size, dma_size;
};

uint32_t ndrv_cfg_read(struct nvme_drv *d, unsigned devfn, unsigned reg);
void ndrv_cfg_write(struct nvme_drv *d, unsigned devfn, unsigned reg, uint32_t v);
/* The first NVMe function (class 01/08/02) on bus 0: through ports, then (ecam_gpa != 0) through
 * ECAM at ecam_gpa, which stays selected when it finds one. */
bool ndrv_find(struct nvme_drv *d, unsigned *devfn, uint64_t ecam_gpa);
/* Offset of the first capability with this id in the list, 0 when absent. */
unsigned ndrv_find_cap(struct nvme_drv *d, unsigned devfn, unsigned id);
bool ndrv_read_vcap(struct nvme_drv *d, unsigned devfn, struct ndrv_vcap *v);
/* Decoding off, BAR0 (64-bit) at gpa, memory decoding and bus mastering on. */
void ndrv_place_bar0(struct nvme_drv *d, unsigned devfn, uint64_t gpa);

uint32_t ndrv_rd32(struct nvme_drv *d, unsigned off);
void ndrv_wr32(struct nvme_drv *d, unsigned off, uint32_t v);
uint64_t ndrv_cap(struct nvme_drv *d);

/* Disables the controller, then enables it with an admin queue pair of depth entries at asq/acq
 * (page aligned, acq zeroed here); shadow doorbells off. false on timeout or CSTS.CFS. */
bool ndrv_enable(struct nvme_drv *d, void *asq, void *acq, uint32_t depth);
/* I/O queue pair q's rings, fresh (tail, head 0, phase 1; cq zeroed here). */
void ndrv_queue(struct nvme_drv *d, unsigned q, volatile void *sq, void *cq, uint32_t entries);

/* A doorbell: the register, or with shadow doorbells on an I/O queue the shadow slot and the
 * register only when the EventIdx asks. */
void ndrv_ring(struct nvme_drv *d, unsigned q, bool cq, uint32_t v);
/* Copies c into q's SQ at the tail (8-byte stores) and advances the tail; no doorbell. */
void ndrv_place(struct nvme_drv *d, unsigned q, const struct nvme_sqe *c);
/* Rings q's SQ tail doorbell after the entries placed so far. */
void ndrv_kick(struct nvme_drv *d, unsigned q);
/* Gives c the next CID, places it and rings; returns the CID. */
uint16_t ndrv_submit(struct nvme_drv *d, unsigned q, struct nvme_sqe *c);
/* Waits for q's next completion: its status field (phase dropped, DNR kept), 0xffff after
 * timeout_ms; the CQ head doorbell is rung. */
uint16_t ndrv_reap(struct nvme_drv *d, unsigned q, uint32_t *dw0, uint64_t timeout_ms);
/* Takes up to max completions of q without waiting: their CIDs, errors counted; the CQ head
 * doorbell once per batch. */
unsigned ndrv_reap_batch(struct nvme_drv *d, unsigned q, uint16_t *cids, unsigned max,
			 unsigned *errors);
/* Submit and wait (5 s): the status code and type (bits 10:0), 0xffff on timeout. */
uint16_t ndrv_run(struct nvme_drv *d, unsigned q, struct nvme_sqe *c, uint32_t *dw0);

void ndrv_zero(void *p, size_t n);
struct nvme_sqe ndrv_cmd(uint8_t opcode);
/* PRP1/PRP2 for len bytes at buf (identity mapped), a PRP list in list when it needs one. */
void ndrv_prps(struct nvme_sqe *c, uint64_t buf, unsigned len, uint64_t *list);

#endif
