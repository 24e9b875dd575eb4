/* softssd's data path: queue pairs and the worker threads that serve them (round-robin with a
 * per-pass budget, poll while busy, sleep when idle), io_uring between backing and guest memory. */
#ifndef SOFTSSD_QPAIR_H
#define SOFTSSD_QPAIR_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "lightiov/check.h"
#include "lightiov/nvme.h"
#include "lightiov/uapi.h"
#include "vfio/nvme_pci.h"

struct ssd_model;
struct ssd_engine;
struct ssd_worker;
struct ssd_req;

#define SSD_QP_BUDGET	  32	/* SQEs one queue pair may start per pass: fairness */
#define SSD_SPIN_NS	  50000 /* keep polling this long after the last work found */
#define SSD_POLL_SLEEP_MS 1	/* idle timer while doorbell pages must be watched */

/* A session's DMA window as the daemon maps it. Fixed while any queue pair uses it. */
struct ssd_window {
	unsigned n;
	struct lio_check_region cr[LIO_MAX_REGIONS];
	uint8_t *host[LIO_MAX_REGIONS];
	uint64_t map_bytes[LIO_MAX_REGIONS];
	struct nvme_pci *nvme;			  /* --vfio: each region reachable by it, */
	struct nvme_dma_map dma[LIO_MAX_REGIONS]; /* as dma[i] says */
};

/* Host pointer of [gpa, gpa + len) when it lies inside one region, else NULL. */
void *ssd_window_ptr(const struct ssd_window *w, uint64_t gpa, uint64_t len);

/* Counters (lightiov/counters.h; syncs: writes made durable because the session is
 * write-through), updated by the serving worker, read by anyone (relaxed atomics). */
struct ssd_counters {
	LIO_COUNTERS_KEPT(LIO_COUNTER_FIELD)
};
void ssd_counters_add(struct ssd_counters *lio_to, const struct ssd_counters *lio_from);
void ssd_counters_read(struct ssd_counters *lio_to, const struct ssd_counters *lio_from);

/* NEW -> ACTIVE (or QUIESCED when restored) -> DYING -> DEAD; ACTIVE -> QUIESCING -> QUIESCED
 * (nothing fetched, nothing in flight) -> ACTIVE again on resume. */
enum ssd_qp_state {
	SSD_QP_NEW,
	SSD_QP_ACTIVE,
	SSD_QP_DYING,
	SSD_QP_DEAD,
	SSD_QP_QUIESCING,
	SSD_QP_QUIESCED
};

struct ssd_qp {
	/* set by the server before ssd_qp_start, constant afterwards */
	uint32_t id;
	uint32_t mode, flags;
	uint16_t sqid, cqid;
	uint32_t sq_depth, cq_depth;
	struct nvme_sqe *sq; /* guest or queue memory: read once per entry, into a copy */
	struct nvme_cqe *cq;
	uint32_t *sq_tail_db; /* doorbell page word or shadow doorbell slot */
	uint32_t *cq_head_db;
	uint32_t *eventidx; /* the SQ's EventIdx slot, or NULL */
	int db_fd, irq_fd;  /* -1 when absent */
	uint32_t irq_coalesce;
	struct lio_check_ctx chk;
	uint64_t lba_lo, lba_hi; /* device LBAs any command may touch: [lo, hi) */
	const struct ssd_window *win;
	void *owner; /* the session */
	struct ssd_qp *next_in_owner;
	/* the session's LIO_SESSION_WRITE_THROUGH (VWC off): set by the server at any time,
	 * read by the worker per write (atomic) */
	int write_through;
	/* restored (LIO_OP_QP_RESTORE): sq_head, cq_tail, cq_head, phase and last_tail below are
	 * set by the server before ssd_qp_start, and the queue pair starts quiesced */
	bool restored;
	bool start_quiesced; /* under the worker's lock: cleared by a resume before it starts */

	/* the serving worker's */
	struct ssd_counters ctr;
	struct ssd_worker *w;
	int state; /* enum ssd_qp_state, atomic */
	uint32_t sq_head, cq_head, cq_tail;
	uint16_t phase;
	uint32_t inflight;    /* fetched, not yet posted */
	uint32_t irq_pending; /* CQEs posted since the last irq */
	uint32_t last_tail;   /* the SQ tail seen last (EventIdx) */
	bool stalled;	      /* CQ full: watch the CQ head by timer */
	bool bad_db;	      /* a doorbell value out of range was reported */
	struct ssd_req *reqs, *free_reqs;
};

/* Starts nr workers serving I/O on backing_fd (LBAs of 1 << lba_shift bytes); reads and writes
 * whose buffers allow it go to direct_fd (the backing opened with O_DIRECT; -1: none). With
 * nvme (softssd --vfio) the commands run on the controller instead, worker i on its I/O queue
 * ioq[i + 1] (nvme->nioq > nr). model may be NULL or inactive. 0 or a negative errno with err. */
int ssd_engine_start(struct ssd_engine **out, int backing_fd, int direct_fd, struct nvme_pci *nvme,
		     uint32_t lba_shift, unsigned nr, struct ssd_model *model, char *err,
		     unsigned errlen);
void ssd_engine_stop(struct ssd_engine *e);
unsigned ssd_engine_workers(const struct ssd_engine *e);

/* Hands a filled-in queue pair to the least loaded worker. 0 or -ENOMEM. */
int ssd_qp_start(struct ssd_engine *e, struct ssd_qp *qp);
/* Stops serving it: no SQE is fetched any more, every command already fetched completes (its
 * CQE posted), then the worker lets go. Returns when the qp may be freed. */
void ssd_qp_stop(struct ssd_qp *qp);
void ssd_qp_free(struct ssd_qp *qp);
/* Stops fetching, waits up to timeout_ms for every fetched command to complete and post its
 * CQE (interrupts signalled), then fills st's state fields (qp_id, timeout_ms untouched). On a
 * quiesced queue pair it just reports. -ETIMEDOUT (the queue pair serves on, *inflight gets
 * what was still outstanding) or 0. Control thread only. */
int ssd_qp_quiesce(struct ssd_qp *qp, uint32_t timeout_ms, struct lio_qp_state *st,
		   uint32_t *inflight);
/* Whether it is quiesced now (by QP_QUIESCE, or restored and not yet resumed). */
bool ssd_qp_is_quiesced(struct ssd_qp *qp);
/* A quiesced (or restored, not yet started) queue pair fetches again. -EINVAL if it is not. */
int ssd_qp_resume(struct ssd_qp *qp);

#endif
