/* Controller state shared by the register, admin and I/O halves of the vNVMe model.
 * Everything here is protected by nvme_ctrl.lock. */
#ifndef LVMM_NVME_INT_H
#define LVMM_NVME_INT_H

#include <pthread.h>

#include "nvme_ctrl.h"

/* Returned by command handlers that complete later (Async Event Request, backend I/O). */
#define NVME_NO_COMPLETE 0xffff

struct nvme_sq {
	bool valid;
	uint16_t qid, cqid;
	uint32_t size, head, tail;
	uint32_t gen;
	uint32_t inflight;
	uint64_t base;
	uint8_t *host;	   /* base as a host pointer (guest RAM or the CMB) */
	bool bound;	   /* served by a backend queue pair (hooks.bind): never fetched here */
	bool bind_pending; /* to be bound once Doorbell Buffer Config comes: never fetched here */
	uint32_t handle;
};

struct nvme_cq {
	bool valid;
	bool ien;
	uint8_t phase;
	uint16_t vector;
	uint32_t size, head, tail;
	uint32_t nsq;		/* SQs bound to this CQ */
	uint32_t reserved;	/* fetched commands that will complete here */
	uint32_t coal_pending;	/* entries posted since the last interrupt (coalescing) */
	uint64_t coal_deadline; /* CLOCK_MONOTONIC ns by which they must be signalled */
	uint64_t base;
	uint8_t *host;
	bool bound; /* its SQ is served by a backend queue pair: head doorbells are not ours */
};

#define NVME_AE_QUEUE 16

struct nvme_ctrl {
	pthread_mutex_t lock;
	struct nvme_ctrl_params p;
	struct guest_mem *gm;
	const struct nvme_backend_ops *bops;
	void *be;
	struct nvme_ctrl_hooks hooks;

	/* registers */
	uint64_t cap;
	uint32_t cc, csts, intms, aqa;
	uint64_t asq, acq;
	bool intx_open;		/* nvme_ctrl_intx_gate, atomic */
	bool intx_level;	/* what hooks.intx was told last */
	uint32_t cmbloc, cmbsz; /* read as zero until CMBMSC.CRE (CAP.CMBS: the 1.4 way) */
	uint64_t cmbmsc; /* as the host wrote it; kept across resets (Linux writes it once) */

	uint8_t *cmb;
	uint64_t cmb_gpa;

	uint32_t gen;	     /* bumps on every controller reset */
	uint32_t qgen;	     /* bumps on every queue creation */
	uint32_t inflight;   /* backend requests not yet done */
	bool resetting;	     /* CC.EN cleared while requests were in flight */
	bool paused;	     /* the VM is paused: nothing is fetched (nvme_ctrl_pause) */
	bool save_bound;     /* bound queues may be saved: their backend state is saved beside */
	pthread_cond_t idle; /* signalled when inflight drops to 0 */

	unsigned nq; /* entries of sqs/cqs: max_ioqs + 1 */
	struct nvme_sq *sqs;
	struct nvme_cq *cqs;
	unsigned coal_cqs; /* CQs with coalesced entries waiting; may be high until the next tick */
	unsigned nsqa, ncqa; /* I/O queues granted by Set Features Number of Queues */
	bool nq_set;

	/* shadow doorbells (Doorbell Buffer Config) */
	uint64_t dbbuf_dbs, dbbuf_eis;

	/* features */
	uint32_t feat_arb, feat_pm, feat_temp_thresh, feat_err_rec, feat_vwc, feat_coalesce;
	uint32_t feat_aec, feat_wr_atomic;
	uint32_t *feat_ivc; /* per vector: coalescing disable bit */

	/* async events */
	uint16_t aer_cids[NVME_CTRL_AERL + 1];
	unsigned naer;
	uint32_t ae_queue[NVME_AE_QUEUE];
	unsigned nae;
	uint8_t ae_masked; /* event types reported but whose log page was not read yet */

	/* error log: newest entry */
	uint64_t err_count;
	struct nvme_error_log err_last;

	struct nvme_ctrl_stats st;
	uint64_t units_read, units_written; /* 512-byte units for SMART */
	struct nvme_fault fault;	    /* test only: LVMM_FAULT_NVME */
};

/* nvme_ctrl.c */
void nvme_post_cqe(struct nvme_ctrl *c, struct nvme_sq *sq, uint16_t cid, uint16_t status,
		   uint32_t dw0);
void nvme_raise_event(struct nvme_ctrl *c, uint8_t type, uint8_t info, uint8_t log);
void nvme_events_deliver(struct nvme_ctrl *c);
void nvme_record_error(struct nvme_ctrl *c, uint16_t sqid, uint16_t cid, uint16_t status);
/* Completes the entry nvme_record_error() just made with the command's NSID and LBA. */
void nvme_error_note_cmd(struct nvme_ctrl *c, uint16_t sqid, const struct nvme_sqe *cmd);
void nvme_ctrl_process_locked(struct nvme_ctrl *c);
uint8_t *nvme_queue_host(struct nvme_ctrl *c, uint64_t base, uint64_t bytes, bool allow_cmb);
bool nvme_in_cmb(const struct nvme_ctrl *c, uint64_t base, uint64_t bytes);
void nvme_sq_unbind(struct nvme_ctrl *c, struct nvme_sq *sq);

/* nvme_admin.c: returns a status, or NVME_NO_COMPLETE; *dw0 gets the result dword */
uint16_t nvme_admin_exec(struct nvme_ctrl *c, const struct nvme_sqe *cmd, uint32_t *dw0);
void nvme_features_reset(struct nvme_ctrl *c);

/* nvme_io.c */
uint16_t nvme_io_exec(struct nvme_ctrl *c, struct nvme_sq *sq, const struct nvme_sqe *cmd);
/* Maps a PRP1/PRP2 data pointer pair of len bytes onto host iovecs; returns an NVMe status. */
uint16_t nvme_prp_map(struct nvme_ctrl *c, uint64_t prp1, uint64_t prp2, uint64_t len,
		      struct iovec *iov, unsigned maxiov, unsigned *niov);
/* Copies between buf and the guest buffer described by PRP1/PRP2. */
uint16_t nvme_prp_copy(struct nvme_ctrl *c, uint64_t prp1, uint64_t prp2, void *buf, uint64_t len,
		       bool to_guest);

static inline uint16_t nvme_sc(unsigned sct, unsigned sc, bool dnr)
{
	return NVME_STATUS(sct, sc) | (dnr ? NVME_STATUS_DNR : 0);
}
#define NVME_OK		  0
#define NVME_GENERIC(sc)  nvme_sc(NVME_SCT_GENERIC, (sc), true)
#define NVME_SPECIFIC(sc) nvme_sc(NVME_SCT_CMD_SPECIFIC, (sc), true)

#endif
