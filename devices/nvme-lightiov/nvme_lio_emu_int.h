/* The emulate path over an SSD, inside: the device's state, shared by its set-up and lone
 * commands (nvme_lio_emu.c) and its worker thread (nvme_lio_emu_worker.c). */
#ifndef LVMM_NVME_LIO_EMU_INT_H
#define LVMM_NVME_LIO_EMU_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "client/lio_client.h"
#include "nvme_ctrl.h"

#define EMU_LBA	  (1u << e->lba_shift)
#define EMU_CHUNK NVME_CTRL_MAX_XFER /* one command's data at most (MDTS) */
/* SQ entries asked for (fewer when the SSD grants fewer); a command id is its slot in the low
 * byte and the slot's use count above it */
#define EMU_DEPTH_MAX 256u
#define EMU_DEPTH_MIN 16u
/* The bounce pool: 8 MiB of pages the commands in flight share (a 4 KiB read takes one, the
 * largest transfer EMU_XFER_PAGES), so a deep queue of small commands costs no 128 KiB each. */
#define EMU_POOL_PAGES 2048u
#define EMU_XFER_PAGES (EMU_CHUNK / LIO_PAGE_SIZE)
#define EMU_CHECK_NS   1000000ull /* how often commands in flight are checked for a timeout */
#define EMU_YIELD_SPIN 64u	  /* idle passes between two sched_yield() while polling */
/* Idle passes in flight before the worker waits (emu_nap): only an SSD that holds commands this
 * long (far beyond a command's time) lets it nap; a nap after 1024 passes, woken by a completion
 * eventfd, cost QD1 and QD32 11-16 % on the idle 16-core machine (docs/vnvme.md). */
#define EMU_NAP_SPIN (1u << 20)
#define EMU_NAP_MS   1 /* the longest such wait */

struct emu_item {
	struct nvme_io_req *req;
	struct emu_item *next;
};

struct nvme_lio_emu {
	struct lio_client *c;
	struct lio_drv *d;
	/* the worker and its FIFO of requests */
	pthread_t th;
	bool running, stop;
	pthread_mutex_t qlock;
	pthread_cond_t qcond;
	struct emu_item *head, *tail;
	/* A command timed out and may still complete into the bounce buffer: nothing is sent
	 * through it again, every request fails and CSTS.CFS tells the guest (finding 5). */
	bool failed;
	char dev[64], vol[LIO_NAME_MAX];
	uint64_t bounce_gpa; /* the requests run alone */
	uint8_t *bounce;
	unsigned queued; /* requests on the FIFO (written under qlock, peeked without) */
	bool napping;	 /* the worker waits on the CQ eventfd and wake_fd (emu_nap) */
	int wake_fd;	 /* a request came while napping */
	/* the requests in flight, owned by the worker */
	struct emu_slot {
		struct nvme_io_req *req; /* NULL: free */
		uint16_t cid;
		uint8_t uses; /* the cid's high byte: a stale completion names an old use */
		unsigned npg; /* pool pages holding its data */
		uint32_t pg[EMU_XFER_PAGES];
		uint64_t prp_gpa; /* its own PRP-list page: the SQ slot's may be reused first */
		uint64_t *prp;
		uint64_t t0_ns; /* submitted (CLOCK_MONOTONIC) */
	} slot[EMU_DEPTH_MAX - 1];
	unsigned nslots, inflight;
	unsigned free_slot[EMU_DEPTH_MAX - 1], nfree_slot;
	/* the bounce pool: free page indexes as a stack */
	uint64_t pool_gpa;
	uint8_t *pool;
	uint32_t free_pg[EMU_POOL_PAGES];
	unsigned nfree_pg;
	/* the worker's own list: taken from the FIFO in one go, started in its order */
	struct emu_item *mine, *mine_tail;
	uint64_t lba_count;
	uint32_t lba_shift; /* the SSD's: 9 or 12 */
};

/* The worker thread (nvme_lio_emu_worker.c): every request of the FIFO, to its completion. */
void *nvme_lio_emu_worker(void *opaque);
/* A request that runs alone, to its end or its first error (nvme_lio_emu.c): req->status set. */
void nvme_lio_emu_exec(struct nvme_lio_emu *e, struct nvme_io_req *req);
/* The SSD's status as the guest's, a lost SSD (or a failed controller) as an internal error. */
uint16_t nvme_lio_emu_status(uint16_t st);

#endif
