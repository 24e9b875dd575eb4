/* softssd's data path inside: the worker, request and engine structs the qpair*.c files share,
 * the workers' fast clock read, counter updates and doorbell loads, and the functions one file
 * of the data path calls in another. */
#ifndef SOFTSSD_QPAIR_INT_H
#define SOFTSSD_QPAIR_INT_H

#include <liburing.h>
#include <stdint.h>
#include <sys/uio.h>

#include "lightiov/nvmeq.h"
#include "softssd/qpair.h"

#define SSD_RING_ENTRIES    256 /* io_uring SQ size of one worker: its commands in flight */
#define SSD_QP_MAX_INFLIGHT 256 /* fetched-not-posted commands of one queue pair */
#define SSD_DSM_MAX_RANGES  256
#define SSD_IDLE_MIN_NS	    20000 /* first idle sleep on polled doorbells; doubles up to the limit */
#define SSD_TIMER_SLACK_NS                                                                         \
	2000 /* workers' timer slack: the default 50 us would swamp the above                      \
	      */
#define SSD_EV_WAKE ((uint64_t)0)
#define SSD_EV_RING ((uint64_t)1)
#define SSD_EV_NVME ((uint64_t)2) /* the worker's controller queue's MSI-X vector (--vfio) */

/* Where a command is on the ring: its data transfer (or flush), its hole punches (Write Zeroes,
 * Deallocate: one per range), then with the write cache off the fdatasync that makes them
 * durable. Each step is an operation on the worker's ring, so none of them ever blocks the worker
 * and its other queue pairs: the kernel's io-wq threads wait instead. */
enum ssd_stage { SSD_STAGE_IO, SSD_STAGE_PUNCH, SSD_STAGE_SYNC };

struct ssd_req {
	struct ssd_qp *qp;
	struct ssd_req *next;
	struct nvme_sqe sqe; /* the private copy: the only SQE bytes ever used */
	struct lio_io io;
	uint16_t status;
	bool direct;	 /* submitted on the O_DIRECT fd */
	uint8_t stage;	 /* enum ssd_stage */
	bool sync_after; /* the punches are followed by an fdatasync (write cache off) */
	uint32_t ops;	 /* ring operations of this stage not yet completed */
	uint64_t submit_ns, due_ns;
	struct iovec iov[LIO_CHECK_MAX_SEGS];
};

struct ssd_worker {
	struct ssd_engine *e;
	unsigned idx;
	pthread_t thr;
	struct io_uring ring;
	int ring_efd, wake_fd, epfd;
	pthread_mutex_t lock; /* qps, nqps, changed; the qp state DEAD hand-off */
	pthread_cond_t cond;
	struct ssd_qp **qps;
	unsigned nqps, cap;
	int changed;
	/* worker-private */
	struct ssd_qp **mine;
	unsigned nmine, mycap, rr;
	unsigned ring_inflight;
	struct ssd_req *due_head; /* model: completions held until due_ns, sorted */
	bool worked;
	bool sync_io; /* no io_uring here (a sandbox without it): commands run in this thread */
	struct nvme_pci_queue *nq; /* --vfio: commands run on this queue of the controller */
	uint64_t last_ns;	   /* ssd_clock_ns's last answer */
	uint64_t idle_ns; /* the next idle sleep while doorbells are polled: grows to the limit */
};

struct ssd_engine {
	int fd;
	int dfd; /* the backing again with O_DIRECT, or -1 */
	uint32_t lba_shift;
	struct ssd_model *model;
	struct nvme_pci *nvme; /* --vfio: the controller in place of the backing fds */
	unsigned nr;
	int stop;
	struct ssd_worker *w;
};

/* ---- the workers' clock (qpair_clock.c) ---- */

struct ssd_clock {
	bool tsc;
	uint64_t base_tsc, base_ns;
	uint64_t mult; /* ns per TSC tick, << 32 */
};
extern struct ssd_clock ssd_clk;

uint64_t ssd_mono_ns(void);
/* Sets ssd_clk up: the TSC when it can be trusted (once, before the workers start). */
void ssd_clk_calibrate(void);

#if defined(__x86_64__)
#include <x86intrin.h>

static inline uint64_t ssd_tsc_ns(void)
{
	uint64_t t = __rdtsc();

	/* another CPU's TSC may lag the base by a few ticks */
	if (t <= ssd_clk.base_tsc)
		return ssd_clk.base_ns;
	return ssd_clk.base_ns +
	       (uint64_t)(((unsigned __int128)(t - ssd_clk.base_tsc) * ssd_clk.mult) >> 32);
}
#else
static inline uint64_t ssd_tsc_ns(void)
{
	return 0;
}
#endif

/* The worker's now, never going back (its thread may move to a CPU whose TSC lags). */
static inline uint64_t ssd_clock_ns(struct ssd_worker *w)
{
	uint64_t t = ssd_clk.tsc ? ssd_tsc_ns() : ssd_mono_ns();

	if (t < w->last_ns)
		return w->last_ns;
	w->last_ns = t;
	return t;
}
#define CTR_ADD(qp, f, v) __atomic_fetch_add(&(qp)->ctr.f, (v), __ATOMIC_RELAXED)

/* A doorbell word the client writes at will, read once. */
static inline uint32_t ssd_load_db(const uint32_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

/* ---- posting and running commands (qpair_exec.c) ---- */

/* Posts the completions the model held until now (all: every one). Returns how many. */
unsigned ssd_post_due(struct ssd_worker *w, uint64_t now, bool all);
/* Signals qp's irq eventfd for the CQEs posted since the last signal, as irq_coalesce says. */
void ssd_irq_flush(struct ssd_qp *qp);
/* The checker's read_prp over a session's window (opaque: the struct ssd_window). */
int ssd_read_prp(void *opaque, uint64_t gpa, uint64_t *out, unsigned n);
/* Checks the private copy req->sqe and starts it; refused or synchronous ones complete at once. */
void ssd_req_start(struct ssd_worker *w, struct ssd_req *req, uint64_t now);
/* Completions of the worker's ring: each finishes its command's stage, or the command. */
void ssd_reap(struct ssd_worker *w, uint64_t now, unsigned *work);
/* A command finished (or refused): its CQE now, or when the device model says. */
void ssd_req_done(struct ssd_worker *w, struct ssd_req *req, uint64_t now);
/* The DSM range list of req into r (private memory, read once), checked and translated: 0 with
 * *nr set, or the status. */
uint16_t ssd_dsm_ranges(struct ssd_req *req, struct nvme_dsm_range *r, unsigned *nr);

/* ---- on the controller (qpair_nvme.c, --vfio) ---- */

/* Starts a checked command on w->nq; one that cannot go completes at once with its status. */
void ssd_nvme_start(struct ssd_worker *w, struct ssd_req *req, uint64_t now);
/* The controller's completions on w->nq, each completing its command. */
void ssd_nvme_reap(struct ssd_worker *w, uint64_t now, unsigned *work);

/* ---- fetching (qpair_fetch.c) ---- */

unsigned ssd_qp_fetch(struct ssd_worker *w, struct ssd_qp *qp, uint64_t now);

/* ---- the worker (qpair_worker.c) ---- */

/* The worker thread: passes over its queue pairs until the engine stops, sleeping when idle. */
void *ssd_worker_main(void *arg);

#endif
