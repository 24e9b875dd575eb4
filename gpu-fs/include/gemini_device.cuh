/* libgemini device side: G_read/G_write/G_sync, the warp-level GPU page cache (sharded hash +
 * second-chance page lists) and the GPU NVMe queue driver, every wait of it bounded in time.
 * Header-only: kernels inline it. Commands and completions are include/lightiov/nvme.h's. */
#ifndef GEMINI_DEVICE_CUH
#define GEMINI_DEVICE_CUH

#include <stdint.h>

#include "lightiov/nvme.h"

#define GM_KEY_EMPTY	(~0ull)
#define GM_PAGE_INVALID 0u
#define GM_PAGE_LOADING 1u
#define GM_PAGE_VALID	2u
#define GM_PAGE_ERROR	3u
#define GM_MAX_CMD	(128u << 10) /* largest single command: LIO_MDTS_BYTES, the checker's MDTS */
/*
 * The in-process controller's DMA window, as the GPU addresses it in PRPs: an address x of this
 * process's arena mapping (or of a registered buffer) is GPA x - dma_base + GM_GPA_ARENA, the
 * same in every process that maps the arena (IPC); PRP-list pages are GM_GPA_QMEM plus their
 * offset in the shared queue memory. Pages are 4 KiB (the arena is 2 MiB aligned, so a GPA is
 * page aligned exactly where the address is).
 */
#define GM_GPA_ARENA   (1ull << 62)
#define GM_GPA_QMEM    (3ull << 62)
#define GM_PRP_LIST    256u /* bytes of PRP list per SQ slot: MDTS / 4 KiB entries */
#define GM_STAT_HITS   0
#define GM_STAT_MISSES 1
#define GM_STAT_EVICT  2
#define GM_STAT_WB     3
#define GM_STAT_IOERR  4
#define GM_STAT_CMDS   5
#define GM_NSTATS      8
/* GPU-side status of a command whose completion never came (queue dead or wait past the bound):
 * outside the 15-bit range a controller can report */
#define GM_SC_TIMEOUT	  0x10000
#define GM_ETIMEDOUT	  110
#define GM_EIO		  5
#define GM_Q_DEAD	  2 /* ctl word: set once a wait on the queue ran past the bound */
#define GM_CTL_WORDS	  4
#define GM_SC_WRITE_FAULT NVME_STATUS(NVME_SCT_MEDIA, NVME_SC_WRITE_FAULT)
#define GM_SC_READ_ERROR  NVME_STATUS(NVME_SCT_MEDIA, NVME_SC_READ_ERROR)

/* One open file as the GPU sees it: bounds and the cached two-level map. */
struct gm_file {
	uint64_t data_size;
	uint64_t nblocks;
	uint32_t block_shift;
	uint32_t per_l2_shift;
	uint32_t open;
	uint32_t writable;
	const uint64_t *l1; /* index of each L2 table's first entry in l2 */
	const uint64_t *l2; /* device byte offsets */
};

/* One I/O queue pair. SQ, CQ and the doorbell sit in pinned host memory the GPU writes over
 * PCIe; turn and ctl (in HBM) order the GPU threads, of every sharing process, that use it. */
struct gm_queue {
	struct nvme_sqe *sq;
	struct nvme_cqe *cq;
	uint32_t *sq_doorbell; /* free-running tail: the controller reads it */
	uint64_t *prp;	       /* per slot GM_PRP_LIST bytes of PRP list, in the queue memory */
	uint64_t prp_gpa;      /* GPA of prp[0] (GM_GPA_QMEM-based: the same in every process) */
	uint32_t *turn;	       /* per slot: 2 * round when free for that round */
	uint32_t *ctl;	       /* [0] next ticket, [1] tickets rung, [GM_Q_DEAD] dead flag */
	uint32_t depth;
	uint32_t qid;
};

/*
 * One queue pair of a LightIOV backend (lio backend), with the semantics uapi.h gives a VM: SQ
 * and CQ rings and the doorbell page pair in the backend's queue memory, data and PRP lists in
 * the session's DMA window (both host memory the client mapped and registered with CUDA); the
 * SQ tail doorbell holds a wrapped index, the CQ carries phase tags and its head is written to
 * the CQ head doorbell. Data pointers are PRPs (GPAs of the window); the backend (softssd in
 * isolated mode) copies each SQE out of reach and checks it with lio_sqe_check before it runs.
 * tail/head/phase are the driver's state, in HBM, changed only by the holder of lock.
 */
#define GM_LIO_CHUNK	(128u << 10) /* LIO_MDTS_BYTES: largest transfer of one command */
#define GM_LIO_INFLIGHT 16	     /* commands of one round: staging slots of a queue pair */
#define GM_LIO_PAGE	4096u	     /* LIO_PAGE_SIZE */

struct gm_lioq {
	struct nvme_sqe *sq;
	struct nvme_cqe *cq;
	uint32_t *sq_db;
	uint32_t *cq_db;
	uint8_t *stage; /* GM_LIO_INFLIGHT x GM_LIO_CHUNK bytes of the DMA window */
	uint64_t *prp;	/* GM_LIO_INFLIGHT PRP-list pages of the DMA window */
	uint64_t stage_gpa;
	uint64_t prp_gpa;
	uint32_t depth;
	uint32_t tail;
	uint32_t head;
	uint32_t phase;
	int lock; /* SQ tail and CQ head: placing commands, reaping completions */
	uint32_t dead;
	uint32_t lba_shift;
	uint32_t free_mask; /* staging slots (= CIDs) free: min(GM_LIO_INFLIGHT, depth - 2) */
	uint32_t posted;    /* slots whose command is in the rings (under lock) */
	int owner;	    /* GM_LIO_SERIAL (profile builds): one batch per pair at a time */
	uint32_t done[GM_LIO_INFLIGHT]; /* per slot: (status << 1) | 1 once reaped, else 0 */
};

struct gm_shard {
	int lock;
	int lru_head; /* every page of the shard, oldest first */
	int lru_tail;
	int pad;
};

struct gemini_dev {
	struct gm_file files[16];
	uint64_t page_size;
	uint32_t page_shift;
	uint32_t npages;
	uint32_t nshards;
	uint32_t per_shard;
	uint32_t nbuckets; /* per shard, power of two */
	uint32_t prefetch;
	uint32_t nqueues;
	uint32_t backend;
	uint8_t *data;	    /* npages * page_size */
	uint64_t *dma_base; /* the arena base the queues' PRP addresses are relative to */
	unsigned long long *key;
	uint32_t *state;
	int *ref;
	uint32_t *dirty;
	uint32_t *used; /* hit since eviction last passed the page (second chance) */
	int *hnext;
	int *lprev;
	int *lnext;
	int *bucket; /* nshards * nbuckets chain heads */
	struct gm_shard *shards;
	struct gm_queue *queues;
	unsigned long long *stats; /* 64 * GM_NSTATS, summed by the host */
	uint32_t *wb; /* per page: a write-back is in flight (the writer holds a ref) */
	/* per file: failed write-backs [fd], and [16 + fd] the count a clean G_sync covered */
	uint32_t *wb_err;
	uint64_t timeout_ns;  /* bound on every wait for the controller or another warp/process */
	struct gm_lioq *lioq; /* lio backend: its queue pairs (NULL: the in-process controller) */
	uint32_t nlioq;
	uint32_t pad_lio;
};

#ifdef __CUDACC__

__device__ static inline uint64_t gm_mix(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	k *= 0xc4ceb9fe1a85ec53ull;
	k ^= k >> 33;
	return k;
}

/* The shard and the hash bucket of a key whose gm_mix is h. */
__device__ static inline struct gm_shard *gm_shard_of(struct gemini_dev *d, uint64_t h)
{
	return &d->shards[h & (d->nshards - 1)];
}

__device__ static inline int *gm_bucket(struct gemini_dev *d, uint64_t h)
{
	return &d->bucket[(h & (d->nshards - 1)) * d->nbuckets + ((h >> 32) & (d->nbuckets - 1))];
}

/* Acquire/release at GPU scope: cheaper than __threadfence() (a sequentially consistent fence)
 * and all the page-cache locks and reference counts need. */
__device__ static inline int gm_cas_acquire(int *p, int cmp, int val)
{
	int old;

	asm volatile("atom.acquire.gpu.global.cas.b32 %0, [%1], %2, %3;"
		     : "=r"(old)
		     : "l"(p), "r"(cmp), "r"(val)
		     : "memory");
	return old;
}

__device__ static inline void gm_st_release(int *p, int v)
{
	asm volatile("st.release.gpu.global.b32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ static inline int gm_ld_acquire(const int *p)
{
	int v;

	asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
	return v;
}

__device__ static inline void gm_sub_release(int *p, int v)
{
	asm volatile("red.release.gpu.global.add.s32 [%0], %1;" ::"l"(p), "r"(-v) : "memory");
}

/* The GPU's nanosecond clock: bounds every wait (coarse ticks are enough for seconds). */
__device__ static inline uint64_t gm_now(void)
{
	uint64_t t;

	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

/*
 * One step of a bounded wait: sleeps with exponential backoff up to max_ns and says whether the
 * wait, started at *t0 (0: not yet), has run past the device's bound. A dead controller, a dead
 * exporter or a lost lock holder then fails the caller instead of hanging the GPU.
 */
__device__ static inline bool gm_wait_step(const struct gemini_dev *d, uint64_t *t0, unsigned *ns,
					   unsigned max_ns)
{
	uint64_t now;

	__nanosleep(*ns);
	if (*ns < max_ns)
		*ns *= 2;
	now = gm_now();
	if (!*t0) {
		*t0 = now;
		return false;
	}
	return now - *t0 > d->timeout_ns;
}

/* 0, or -ETIMEDOUT when the lock stayed taken past the bound (its holder died or hangs). */
__device__ static inline int gm_lock(const struct gemini_dev *d, int *l)
{
	unsigned ns = 32;
	uint64_t t0 = 0;

	while (gm_cas_acquire(l, 0, 1) != 0)
		if (gm_wait_step(d, &t0, &ns, 1024))
			return -GM_ETIMEDOUT;
	return 0;
}

__device__ static inline void gm_unlock(int *l)
{
	gm_st_release(l, 0);
}

__device__ static inline unsigned gm_ld_acquire_sys(const uint32_t *p)
{
	unsigned v;

	asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
	return v;
}

__device__ static inline unsigned short gm_ld_status(const struct nvme_cqe *c)
{
	const uint8_t *p = (const uint8_t *)c + NVME_OFFSETOF(struct nvme_cqe, status);
	unsigned short v;

	asm volatile("ld.acquire.sys.global.u16 %0, [%1];" : "=h"(v) : "l"(p) : "memory");
	return v;
}

__device__ static inline void gm_stat(struct gemini_dev *d, int i, unsigned long long n)
{
	/* spread over 64 copies so hot counters do not serialise the warps */
	atomicAdd(&d->stats[(blockIdx.x & 63) * GM_NSTATS + i], n);
}

/* Device byte offset of file byte off (off < data_size), through the cached L1/L2 map. */
__device__ static inline uint64_t gm_map(const struct gm_file *f, uint64_t off)
{
	uint64_t b = off >> f->block_shift;
	uint64_t t = b >> f->per_l2_shift;
	uint64_t base = f->l1[t];

	return f->l2[base + (b & ((1ull << f->per_l2_shift) - 1))] +
	       (off & ((1ull << f->block_shift) - 1));
}

__device__ static inline bool gm_q_dead(struct gm_queue *q)
{
	return *(volatile uint32_t *)&q->ctl[GM_Q_DEAD] != 0;
}

/*
 * Polls the completion of ticket t's slot; returns the NVMe status field (0 = success) and
 * hands the slot to the ticket one round later. Past the bound, or once another thread found
 * the queue dead, GM_SC_TIMEOUT: the queue is marked dead (its slots can no longer be trusted to
 * turn over) and every later command on it fails at once.
 */
__device__ static inline int gm_wait(const struct gemini_dev *d, struct gm_queue *q, uint32_t t)
{
	uint32_t slot = t & (q->depth - 1), round = t / q->depth;
	unsigned short phase = (round & 1) ? 0 : 1, st;
	unsigned ns = 128;
	uint64_t t0 = 0;

	for (;;) {
		st = gm_ld_status(&q->cq[slot]);
		if ((st & 1) == phase)
			break;
		if (gm_q_dead(q) || gm_wait_step(d, &t0, &ns, 2048)) {
			atomicExch(&q->ctl[GM_Q_DEAD], 1u);
			return GM_SC_TIMEOUT;
		}
	}
	atomicExch(&q->turn[slot], 2u * (round + 1));
	return st >> 1;
}

__device__ static inline struct gm_queue *gm_my_queue(struct gemini_dev *d)
{
	unsigned warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;

	return &d->queues[warp % d->nqueues];
}

#define GM_MAX_TICKETS 32

/* One NVMe command, built before any queue slot is taken. */
struct gm_cmd {
	uint8_t *buf;
	uint64_t dev;
	uint32_t len;
	uint8_t op;
};

struct gm_batch {
	struct gm_cmd cmd[GM_MAX_TICKETS];
	int n;
	int rc; /* first failing status, GM_SC_TIMEOUT if any wait ran out */
};

__device__ static inline void gm_batch_fail(struct gm_batch *b, int st)
{
	if (st == GM_SC_TIMEOUT || !b->rc)
		b->rc = st;
}

/*
 * The 64-byte command in the queue: built in registers, stored as four 16-byte writes (the SQ is
 * host memory the GPU reaches over PCIe). The data pointer is a PRP pair, or PRP1 and a list in
 * the slot's list page (written before the doorbell's system fence), as the controller's
 * lio_sqe_check wants them; a command longer than MDTS gets no more than a list page holds and
 * is refused there.
 */
__device__ static inline void gm_sqe_put(struct gm_queue *q, uint32_t slot,
					 const struct gemini_dev *d, const struct gm_cmd *c)
{
	union {
		struct nvme_sqe s;
		uint4 v[4];
	} u;
	uint4 *out = (uint4 *)&q->sq[slot];
	uint64_t gpa = (uint64_t)(c->buf - (const uint8_t *)d->dma_base) + GM_GPA_ARENA;
	uint64_t pg = gpa & ~4095ull;
	uint32_t pages = (uint32_t)(((gpa & 4095) + c->len + 4095) / 4096);

	u.v[0] = u.v[1] = u.v[2] = u.v[3] = make_uint4(0, 0, 0, 0);
	u.s.opcode = c->op;
	u.s.cid = (uint16_t)slot;
	u.s.nsid = 1;
	u.s.prp1 = c->len ? gpa : 0;
	if (pages == 2) {
		u.s.prp2 = pg + 4096;
	} else if (pages > 2) {
		uint64_t *l = q->prp + (uint64_t)slot * (GM_PRP_LIST / 8);

		for (uint32_t p = 1; p < pages && p <= GM_PRP_LIST / 8; p++)
			l[p - 1] = pg + (uint64_t)p * 4096;
		u.s.prp2 = q->prp_gpa + (uint64_t)slot * GM_PRP_LIST;
	}
	u.s.cdw10 = (uint32_t)(c->dev / 512);
	u.s.cdw11 = (uint32_t)((c->dev / 512) >> 32);
	u.s.cdw12 = c->len ? c->len / 512 - 1 : 0; /* NLB, zero based; control bits 0 */
	for (int i = 0; i < 4; i++)
		out[i] = u.v[i];
}

/*
 * Submits the batch's commands to this warp's queue and waits for all of them. The slots are
 * reserved with one atomic add (at most a queue's depth at a time), filled, and made visible
 * with one doorbell write; doorbells are rung in reservation order. The previous user of each
 * slot is an earlier reservation, so by induction on that order every reservation gets
 * through: nothing between the reservation and the waits depends on anything but earlier
 * reservations and the controller. Taking slots one at a time, or holding one while taking a
 * lock, deadlocks once other warps lap the queue (test readahead_on_a_shallow_queue).
 * Every wait is bounded: past d->timeout_ns the queue is declared dead and the batch fails with
 * GM_SC_TIMEOUT (a reservation that cannot be filled leaves the queue unusable anyway).
 */
__device__ static inline void gm_lio_batch_run(struct gemini_dev *d, struct gm_batch *b);

__device__ static inline void gm_batch_run(struct gemini_dev *d, struct gm_batch *b)
{
	struct gm_queue *q;
	uint32_t depth;

	if (d->lioq) {
		gm_lio_batch_run(d, b);
		return;
	}
	q = gm_my_queue(d);
	depth = q->depth;

	for (int i0 = 0; i0 < b->n;) {
		uint32_t k = min((uint32_t)(b->n - i0), depth);
		uint32_t t0;
		uint64_t w0 = 0;
		unsigned ns;

		if (gm_q_dead(q)) {
			gm_batch_fail(b, GM_SC_TIMEOUT);
			break;
		}
		t0 = atomicAdd(&q->ctl[0], k);
		for (uint32_t j = 0; j < k; j++) {
			uint32_t t = t0 + j, slot = t & (depth - 1);

			ns = 64;
			while (*(volatile uint32_t *)&q->turn[slot] != 2u * (t / depth))
				if (gm_q_dead(q) || gm_wait_step(d, &w0, &ns, 2048))
					goto dead;
			gm_sqe_put(q, slot, d, &b->cmd[i0 + j]);
		}
		__threadfence_system();
		ns = 32;
		while (*(volatile uint32_t *)&q->ctl[1] != t0)
			if (gm_q_dead(q) || gm_wait_step(d, &w0, &ns, 1024))
				goto dead;
		*(volatile uint32_t *)q->sq_doorbell = t0 + k;
		__threadfence_system();
		atomicExch(&q->ctl[1], t0 + k);
		gm_stat(d, GM_STAT_CMDS, k);
		for (uint32_t j = 0; j < k; j++) {
			int st = gm_wait(d, q, t0 + j);

			if (st)
				gm_batch_fail(b, st);
		}
		i0 += (int)k;
	}
	b->n = 0;
	return;
dead:
	atomicExch(&q->ctl[GM_Q_DEAD], 1u);
	gm_batch_fail(b, GM_SC_TIMEOUT);
	b->n = 0;
}

/*
 * lio profile (bench_lio_prof, built with -DGM_LIO_PROFILE): where a batch's time goes, summed
 * over every batch in nanoseconds of the GPU's clock. Off in the library and the tests.
 */
enum {
	GM_PROF_BATCHES,
	GM_PROF_LOCK_NS, /* waiting for the pair (GM_LIO_SERIAL: another warp's whole batch) */
	GM_PROF_ROUNDS,	 /* submissions: commands placed under the lock, one doorbell */
	GM_PROF_CMDS,
	GM_PROF_STAGE_NS, /* per submission: slots claimed, write data staged, SQEs placed, rung */
	GM_PROF_FIRST_NS, /* doorbell to the batch's first completion seen (softssd's poll, its
			   * check and the backing I/O; other warps' reaping in between) */
	GM_PROF_ROUND_NS, /* the whole batch, waits and copies included */
	GM_PROF_OUT_NS,	  /* read data copied from the window into HBM */
	GM_PROF_OUT_BYTES,
	GM_PROF_N
};
#ifdef GM_LIO_PROFILE
static __device__ unsigned long long gm_lio_prof[GM_PROF_N];
#define GM_PROF(i, v) atomicAdd(&gm_lio_prof[i], (unsigned long long)(v))
#else
#define GM_PROF(i, v) ((void)0)
#endif
#if GM_MAX_CMD != GM_LIO_CHUNK
#error "a batch command is one lio command: GM_MAX_CMD must be GM_LIO_CHUNK"
#endif

/* Loads in flight per copying thread: each is a PCIe round trip when src is the window (host
 * memory), so a single thread's copy is bound by round trips, not bandwidth (measured, section 4
 * of docs/gpu-fs.md: 8 in flight before). */
#ifndef GM_LIO_ILP
#define GM_LIO_ILP 32
#endif

/* Copies len bytes between HBM and the (host) DMA window: 16-byte words when both ends allow. */
__device__ static inline void gm_lio_copy(uint8_t *dst, const uint8_t *src, uint32_t len)
{
	if (!(((uintptr_t)dst | (uintptr_t)src | len) & 15)) {
		uint4 *o = (uint4 *)dst;
		const uint4 *i = (const uint4 *)src;
		uint32_t n = len / 16, j = 0;

		for (; j + GM_LIO_ILP <= n; j += GM_LIO_ILP) {
			uint4 v[GM_LIO_ILP];

#pragma unroll
			for (int u = 0; u < GM_LIO_ILP; u++)
				v[u] = i[j + u];
#pragma unroll
			for (int u = 0; u < GM_LIO_ILP; u++)
				o[j + u] = v[u];
		}
		for (; j < n; j++)
			o[j] = i[j];
		return;
	}
	for (uint32_t j = 0; j < len; j++)
		dst[j] = src[j];
}

/* The data pointer of slot j's len bytes: PRP1, PRP2 or a PRP list in slot j's list page. */
__device__ static inline void gm_lio_prp(struct gm_lioq *q, uint32_t j, uint32_t len,
					 struct nvme_sqe *s)
{
	uint64_t gpa = q->stage_gpa + (uint64_t)j * GM_LIO_CHUNK;
	uint32_t pages = (len + GM_LIO_PAGE - 1) / GM_LIO_PAGE;

	s->prp1 = len ? gpa : 0;
	s->prp2 = 0;
	if (pages == 2) {
		s->prp2 = gpa + GM_LIO_PAGE;
	} else if (pages > 2) {
		uint64_t *l = q->prp + (uint64_t)j * (GM_LIO_PAGE / 8);

		for (uint32_t p = 1; p < pages; p++)
			l[p - 1] = gpa + (uint64_t)p * GM_LIO_PAGE;
		s->prp2 = q->prp_gpa + (uint64_t)j * GM_LIO_PAGE;
	}
}

/*
 * Takes every completion the controller has posted on q (the caller holds q->lock): each CQE's
 * status goes to its slot's done word, for the warp that owns the slot, and the CQ head doorbell
 * is written once. false when the ring is out of step for good (a CID no command of ours holds).
 */
__device__ static inline bool gm_lio_reap(struct gm_lioq *q)
{
	uint32_t n = 0;

	for (;;) {
		struct nvme_cqe *e = &q->cq[q->head];
		unsigned short st = gm_ld_status(e);
		uint16_t cid;

		if ((st & 1) != q->phase)
			break;
		cid = *(volatile uint16_t *)&e->cid;
		if (cid >= GM_LIO_INFLIGHT || !(q->posted & (1u << cid)))
			return false;
		q->posted &= ~(1u << cid);
		gm_st_release((int *)&q->done[cid], (int)((st & 0xfffeu) | 1u));
		if (++q->head == q->depth) {
			q->head = 0;
			q->phase ^= 1;
		}
		n++;
	}
	if (n) {
		*(volatile uint32_t *)q->cq_db = q->head;
		__threadfence_system();
	}
	return true;
}

/* A free staging slot of q (its CID while the command runs), or -1. */
__device__ static inline int gm_lio_claim(struct gm_lioq *q)
{
	for (;;) {
		uint32_t m = *(volatile uint32_t *)&q->free_mask;
		int s;

		if (!m)
			return -1;
		s = __ffs(m) - 1;
		if (atomicAnd(&q->free_mask, ~(1u << s)) & (1u << s))
			return s;
	}
}

/* Gives slot s back once its data has been copied out (the fence orders those reads first). */
__device__ static inline void gm_lio_free(struct gm_lioq *q, int s)
{
	q->done[s] = 0;
	__threadfence();
	atomicOr(&q->free_mask, 1u << s);
}

/*
 * The batch on this warp's LightIOV queue pair, with the commands of other warps on the same
 * pair in flight at once. Each command takes a free staging slot of the pair (its CID, and its
 * PRP-list page), its write data is copied into the slot without any lock; then, under the pair's
 * lock, held only for that, the SQEs are placed at the SQ tail, one system-scope fence, the
 * wrapped tail written to the SQ doorbell page (softssd polls it), and every completion posted so
 * far is reaped (gm_lio_reap: status to the slot's done word, CQ head doorbell written). A warp
 * waiting for its completions reaps too whenever the lock is free, so completions are taken in
 * CQ order by whoever comes first; each warp copies its own read data out of its slots and frees
 * them. At most min(GM_LIO_INFLIGHT, depth - 2) slots exist, so commands in flight plus CQ
 * entries not yet released stay below softssd's limit of depth - 1 and neither ring overflows.
 * Every wait is bounded: past d->timeout_ns the pair is declared dead (its ring state can no
 * longer be trusted) and the batch fails with GM_SC_TIMEOUT; later batches on it fail at once.
 * (Before, a warp held the pair's lock for its whole round trip: one batch in flight per pair,
 * at most 15 in all; docs/gpu-fs.md section 4 measures the difference.)
 */
__device__ static inline void gm_lio_batch_run(struct gemini_dev *d, struct gm_batch *b)
{
	unsigned warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
	struct gm_lioq *q = &d->lioq[warp % d->nlioq];
	const uint32_t lmask = (1u << q->lba_shift) - 1;
	int8_t slot[GM_MAX_TICKETS];
	uint32_t left = (uint32_t)b->n, next = 0; /* unfinished; first not yet submitted */
	uint64_t t0 = 0;
	unsigned ns = 128;
#ifdef GM_LIO_PROFILE
	uint64_t pstart = gm_now(), pdb = 0;
	bool pfirst = true;
#endif

	for (int i = 0; i < b->n; i++)
		slot[i] = -1;
#ifdef GM_LIO_SERIAL
	/* the driver of before, for the profile's comparison: a warp has the pair to itself for
	 * its whole round trip, so one batch per pair is in flight */
	if (gm_lock(d, &q->owner)) {
		gm_batch_fail(b, GM_SC_TIMEOUT);
		b->n = 0;
		return;
	}
#endif
#ifdef GM_LIO_PROFILE
	GM_PROF(GM_PROF_BATCHES, 1);
	GM_PROF(GM_PROF_LOCK_NS, gm_now() - pstart);
#endif
	while (left) {
		uint32_t mine = 0, k = 0;
		bool progress = false;

		if (*(volatile uint32_t *)&q->dead) {
			gm_batch_fail(b, GM_SC_TIMEOUT);
			break;
		}
		/* claim slots and stage the next commands, no lock held */
#ifdef GM_LIO_PROFILE
		uint64_t ps = gm_now();
#endif
		while (next < (uint32_t)b->n) {
			const struct gm_cmd *c = &b->cmd[next];
			int s;

			if ((c->dev & lmask) || (c->len & lmask) || c->len > GM_LIO_CHUNK) {
				/* the volume is addressed in whole LBAs: refuse, never round */
				gm_batch_fail(b,
					      NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD) |
						  NVME_STATUS_DNR);
				next++;
				left--;
				progress = true;
				continue;
			}
			s = gm_lio_claim(q);
			if (s < 0)
				break;
			slot[next] = (int8_t)s;
			if (c->op == NVME_CMD_WRITE)
				gm_lio_copy(q->stage + (uint64_t)s * GM_LIO_CHUNK, c->buf, c->len);
			mine |= 1u << s;
			next++;
			k++;
		}
		if (k) {
			uint32_t i0 = next - k;

			if (gm_lock(d, &q->lock)) {
				atomicExch(&q->dead, 1u);
				gm_batch_fail(b, GM_SC_TIMEOUT);
				break;
			}
			for (uint32_t i = i0; i < next; i++) {
				const struct gm_cmd *c = &b->cmd[i];
				union {
					struct nvme_sqe s;
					uint4 v[4];
				} u;
				uint4 *out = (uint4 *)&q->sq[q->tail];

				if (slot[i] < 0)
					continue; /* refused above */
				u.v[0] = u.v[1] = u.v[2] = u.v[3] = make_uint4(0, 0, 0, 0);
				u.s.opcode = c->op;
				u.s.cid = (uint16_t)slot[i];
				u.s.nsid = 1;
				gm_lio_prp(q, (uint32_t)slot[i], c->len, &u.s);
				if (c->op != NVME_CMD_FLUSH) {
					uint64_t slba =
					    c->dev >> q->lba_shift; /* volume-relative */

					u.s.cdw10 = (uint32_t)slba;
					u.s.cdw11 = (uint32_t)(slba >> 32);
					u.s.cdw12 =
					    (c->len >> q->lba_shift) - 1; /* NLB, zero based */
				}
				for (int j = 0; j < 4; j++)
					out[j] = u.v[j];
				q->tail = q->tail + 1 == q->depth ? 0 : q->tail + 1;
			}
			q->posted |= mine;
			__threadfence_system();
			*(volatile uint32_t *)q->sq_db = q->tail;
			__threadfence_system();
			gm_stat(d, GM_STAT_CMDS, k);
#ifdef GM_LIO_PROFILE
			pdb = gm_now();
			GM_PROF(GM_PROF_STAGE_NS, pdb - ps);
			GM_PROF(GM_PROF_ROUNDS, 1);
			GM_PROF(GM_PROF_CMDS, k);
#endif
			if (!gm_lio_reap(q))
				atomicExch(&q->dead, 1u);
			gm_unlock(&q->lock);
			progress = true;
		} else if (gm_cas_acquire(&q->lock, 0, 1) == 0) {
			if (!gm_lio_reap(q))
				atomicExch(&q->dead, 1u);
			gm_unlock(&q->lock);
		}
		/* this warp's completions: status, read data out of the slot, slot freed */
		for (uint32_t i = 0; i < next; i++) {
			const struct gm_cmd *c = &b->cmd[i];
			int s = slot[i];
			unsigned st;

			if (s < 0)
				continue;
			st = (unsigned)gm_ld_acquire((const int *)&q->done[s]);
			if (!st)
				continue;
#ifdef GM_LIO_PROFILE
			if (pfirst) {
				GM_PROF(GM_PROF_FIRST_NS, gm_now() - pdb);
				pfirst = false;
			}
#endif
			if (st >> 1) {
				gm_batch_fail(b, (int)(st >> 1));
			} else if (c->op == NVME_CMD_READ) {
#ifdef GM_LIO_PROFILE
				uint64_t c0 = gm_now();
#endif
				gm_lio_copy(c->buf, q->stage + (uint64_t)s * GM_LIO_CHUNK, c->len);
#ifdef GM_LIO_PROFILE
				GM_PROF(GM_PROF_OUT_NS, gm_now() - c0);
				GM_PROF(GM_PROF_OUT_BYTES, c->len);
#endif
			}
			gm_lio_free(q, s);
			slot[i] = -1;
			left--;
			progress = true;
		}
		if (progress) {
			t0 = 0;
			ns = 128;
		} else if (gm_wait_step(d, &t0, &ns, 2048)) {
			atomicExch(&q->dead, 1u);
			gm_batch_fail(b, GM_SC_TIMEOUT);
			break;
		}
	}
#ifdef GM_LIO_SERIAL
	gm_unlock(&q->owner);
#endif
#ifdef GM_LIO_PROFILE
	GM_PROF(GM_PROF_ROUND_NS, gm_now() - pstart);
#endif
	b->n = 0;
}

/* The errno of a failed batch: -ETIMEDOUT when the controller did not answer, else -EIO. */
__device__ static inline int gm_batch_errno(const struct gm_batch *b)
{
	return !b->rc ? 0 : b->rc == GM_SC_TIMEOUT ? -GM_ETIMEDOUT : -GM_EIO;
}

__device__ static inline void gm_batch_add(struct gemini_dev *d, struct gm_batch *b, uint8_t op,
					   uint64_t dev, uint32_t len, uint8_t *buf)
{
	struct gm_cmd *c;

	if (b->n == GM_MAX_TICKETS)
		gm_batch_run(d, b);
	c = &b->cmd[b->n++];
	c->op = op;
	c->dev = dev;
	c->len = len;
	c->buf = buf;
}

/* One raw command (device offset, no map, no cache); its NVMe status field or GM_SC_TIMEOUT. */
__device__ static inline int gm_raw_cmd(struct gemini_dev *d, uint8_t op, uint64_t dev,
					uint32_t len, uint8_t *buf)
{
	struct gm_batch b;

	b.n = 0;
	b.rc = 0;
	gm_batch_add(d, &b, op, dev, len, buf);
	gm_batch_run(d, &b);
	return b.rc;
}

/* Adds the commands for len bytes of file fd at off, one per physically contiguous run. */
__device__ static inline void gm_file_add(struct gemini_dev *d, int fd, uint8_t op, uint64_t off,
					  uint32_t len, uint8_t *buf, struct gm_batch *b)
{
	const struct gm_file *f = &d->files[fd];
	uint64_t step = 1ull << f->block_shift;

	if (off >= f->data_size)
		return;
	if (len > f->data_size - off)
		len = (uint32_t)(f->data_size - off);
	while (len) {
		uint64_t dev = gm_map(f, off);
		uint32_t run = (uint32_t)min((uint64_t)len, step - (off & (step - 1)));

		/* extend the run while the next block follows physically */
		while (run < len && run < GM_MAX_CMD && gm_map(f, off + run) == dev + run)
			run += (uint32_t)min((uint64_t)(len - run), step);
		if (run > GM_MAX_CMD)
			run = GM_MAX_CMD;
		gm_batch_add(d, b, op, dev, run, buf);
		off += run;
		buf += run;
		len -= run;
	}
}

/* Synchronous transfer of len bytes; one thread. 0, -EIO or -ETIMEDOUT. */
__device__ static inline int gm_file_io(struct gemini_dev *d, int fd, uint8_t op, uint64_t off,
					uint32_t len, uint8_t *buf)
{
	struct gm_batch b;

	b.n = 0;
	b.rc = 0;
	gm_file_add(d, fd, op, off, len, buf, &b);
	gm_batch_run(d, &b);
	if (b.rc)
		gm_stat(d, GM_STAT_IOERR, 1);
	return gm_batch_errno(&b);
}

__device__ static inline void gm_lru_remove(struct gemini_dev *d, struct gm_shard *s, int i)
{
	int p = d->lprev[i], n = d->lnext[i];

	if (p >= 0)
		d->lnext[p] = n;
	else
		s->lru_head = n;
	if (n >= 0)
		d->lprev[n] = p;
	else
		s->lru_tail = p;
	d->lprev[i] = d->lnext[i] = -2; /* not on the list */
}

__device__ static inline void gm_lru_append(struct gemini_dev *d, struct gm_shard *s, int i)
{
	d->lprev[i] = s->lru_tail;
	d->lnext[i] = -1;
	if (s->lru_tail >= 0)
		d->lnext[s->lru_tail] = i;
	else
		s->lru_head = i;
	s->lru_tail = i;
}

__device__ static inline void gm_lru_prepend(struct gemini_dev *d, struct gm_shard *s, int i)
{
	d->lnext[i] = s->lru_head;
	d->lprev[i] = -1;
	if (s->lru_head >= 0)
		d->lprev[s->lru_head] = i;
	else
		s->lru_tail = i;
	s->lru_head = i;
}

__device__ static inline void gm_hash_remove(struct gemini_dev *d, int *head, int i)
{
	for (int *pp = head; *pp >= 0; pp = &d->hnext[*pp])
		if (*pp == i) {
			*pp = d->hnext[i];
			return;
		}
}

__device__ static inline uint8_t *gm_page_data(struct gemini_dev *d, int i)
{
	return d->data + ((uint64_t)i << d->page_shift);
}

/*
 * Write-back of dirty page i, key k (shard lock held by the caller, who checked that the page is
 * dirty and valid; released here). The page is pinned with a reference (no eviction, no drop)
 * and flagged as being written, then the lock is dropped: the write runs without it, so hits
 * and other acquisitions of the shard go on meanwhile. A writer that changes the page during
 * the write sets it dirty again on release, so the newer bytes are written later. On failure
 * the page stays dirty (acknowledged data is never dropped) and the file's error count rises:
 * the next G_sync of the file reports it. Returns 0, -EIO or -ETIMEDOUT.
 */
__device__ static inline int gm_writeback_unlock(struct gemini_dev *d, struct gm_shard *s, int i,
						 unsigned long long k)
{
	int fd = (int)(k >> 48);
	uint64_t off = (k & ((1ull << 48) - 1)) << d->page_shift;
	int rc;

	atomicAdd(&d->ref[i], 1);
	atomicExch(&d->wb[i], 1u);
	atomicExch(&d->dirty[i], 0u);
	gm_unlock(&s->lock);
	__threadfence();
	rc = gm_file_io(d, fd, NVME_CMD_WRITE, off, (uint32_t)d->page_size, gm_page_data(d, i));
	if (rc) {
		atomicExch(&d->dirty[i], 1u);
		__threadfence(); /* the page is dirty again before the failure is counted */
		atomicAdd(&d->wb_err[fd], 1u);
	} else {
		gm_stat(d, GM_STAT_WB, 1);
	}
	__threadfence();
	atomicExch(&d->wb[i], 0u);
	gm_sub_release(&d->ref[i], 1);
	return rc;
}

/*
 * The replacement victim of shard s (lock held): the oldest page on its list that nobody
 * references and that was not hit since eviction last passed it (second chance: a hit page
 * goes to the tail with its used bit cleared). Every page of the shard stays on the list;
 * pages passed over go to the tail. -1 when every page is referenced.
 */
__device__ static inline int gm_victim(struct gemini_dev *d, struct gm_shard *s)
{
	for (uint32_t steps = 2 * d->per_shard + 1; steps; steps--) {
		int i = s->lru_head;
		bool take;

		if (i < 0)
			return -1;
		take = gm_ld_acquire(&d->ref[i]) == 0 && !d->used[i];
		d->used[i] = 0;
		gm_lru_remove(d, s, i);
		gm_lru_append(d, s, i);
		if (take)
			return i;
	}
	return -1;
}

/* Slot i carried inside an error (the caller holds references on i and must drop them). */
#define GM_ERR_SLOT(i)	   (-(GM_EIO << 8) - (i)-1)
#define GM_ERR_HAS_SLOT(r) ((r) <= -(GM_EIO << 8) - 1)
#define GM_ERR_SLOT_OF(r)  (-(r) - (GM_EIO << 8) - 1)

/*
 * Takes n references on the page holding file fd's page number pg. On a miss the page is
 * returned LOADING with *missed set: the caller fills it and publishes it (gm_get_page).
 * Returns the slot or a negative value: -errno (no reference taken; -EBUSY/-EEXIST only when
 * prefetching), or GM_ERR_SLOT(slot) for a page whose load failed or never ended (references
 * taken). One lane per warp calls this for the whole warp (warp-level acquisition).
 *
 * References are only taken under the shard lock and dropped with one release atomic, without
 * it, so a page the lock holder sees unreferenced stays unreferenced until it lets go: eviction
 * and reuse need no further synchronisation with hits. A dirty victim is written back without
 * the lock (gm_writeback_unlock) and the search starts over; if that write fails the page is
 * kept, dirty, and the caller gets the error.
 */
__device__ static inline int gm_acquire(struct gemini_dev *d, int fd, uint64_t pg, int n,
					bool prefetching, bool *missed)
{
	unsigned long long key = ((unsigned long long)fd << 48) | pg;
	uint64_t h = gm_mix(key);
	struct gm_shard *s = gm_shard_of(d, h);
	int *head = gm_bucket(d, h);
	unsigned ns = 256;
	uint64_t t0 = 0;
	int i;

	*missed = false;
	for (;;) {
		/* read-ahead is optional: a loader that already holds its page never waits for a
		 * lock that warps waiting for a free page keep taking */
		if (!prefetching) {
			if (gm_lock(d, &s->lock))
				return -GM_ETIMEDOUT;
		} else if (gm_cas_acquire(&s->lock, 0, 1) != 0) {
			return -16;
		}
		for (i = *head; i >= 0; i = d->hnext[i])
			if (d->key[i] == key)
				break;
		if (i >= 0 && !(d->state[i] == GM_PAGE_ERROR && d->ref[i] == 0)) {
			if (prefetching) {
				gm_unlock(&s->lock);
				return -17; /* already cached: nothing to read ahead */
			}
			unsigned st, wns = 128;
			uint64_t w0 = 0;

			atomicAdd(&d->ref[i], n);
			d->used[i] = 1;
			gm_unlock(&s->lock);
			while ((st = (unsigned)gm_ld_acquire((const int *)&d->state[i])) ==
			       GM_PAGE_LOADING)
				if (gm_wait_step(d, &w0, &wns, 1024))
					return GM_ERR_SLOT(i); /* its loader never published it */
			gm_stat(d, GM_STAT_HITS, 1);
			if (st == GM_PAGE_ERROR)
				return GM_ERR_SLOT(i);
			return i;
		}
		if (i >= 0) {
			/* a failed load nobody holds any more: the same slot retries the device */
			d->state[i] = GM_PAGE_LOADING;
			atomicExch(&d->ref[i], n);
			gm_unlock(&s->lock);
			gm_stat(d, GM_STAT_MISSES, 1);
			*missed = true;
			return i;
		}
		i = gm_victim(d, s);
		if (i >= 0 && d->key[i] != GM_KEY_EMPTY && d->dirty[i] &&
		    d->state[i] == GM_PAGE_VALID) {
			/* written back without the lock; then look again (the key may have been
			 * loaded meanwhile, and the victim hit again) */
			int rc = gm_writeback_unlock(d, s, i, d->key[i]);

			if (rc)
				return prefetching ? -16 : rc;
			/* bounded like every wait here: victims may keep turning dirty */
			if (!t0)
				t0 = gm_now();
			else if (gm_now() - t0 > d->timeout_ns)
				return -GM_ETIMEDOUT;
			continue;
		}
		if (i >= 0)
			break;
		gm_unlock(&s->lock);
		if (prefetching)
			return -16;
		/* every page of this shard is referenced: wait for a release */
		if (gm_wait_step(d, &t0, &ns, 8192))
			return -GM_ETIMEDOUT;
	}
	if (d->key[i] != GM_KEY_EMPTY) {
		gm_hash_remove(d, gm_bucket(d, gm_mix(d->key[i])), i);
		gm_stat(d, GM_STAT_EVICT, 1);
	}
	d->key[i] = key;
	d->state[i] = GM_PAGE_LOADING;
	d->dirty[i] = 0;
	d->hnext[i] = *head;
	*head = i;
	atomicExch(&d->ref[i], n);
	gm_unlock(&s->lock);
	gm_stat(d, GM_STAT_MISSES, 1);
	*missed = true;
	return i;
}

/* Drops n references; no lock (see gm_acquire). dirty: the caller wrote into the page. */
__device__ static inline void gm_release(struct gemini_dev *d, int i, int n, bool dirty)
{
	if (dirty)
		atomicExch(&d->dirty[i], 1u);
	/* release: this warp's accesses to the page and the dirty bit come before the drop; the
	 * evictor reads the count with acquire (gm_victim) */
	gm_sub_release(&d->ref[i], n);
}

__device__ static inline void gm_publish(struct gemini_dev *d, int i, bool ok)
{
	__threadfence();
	atomicExch(&d->state[i], ok ? GM_PAGE_VALID : GM_PAGE_ERROR);
}

/*
 * Leader lane: the page for cnt lanes, loaded on a miss together with up to d->prefetch
 * following pages that are not cached (all commands in flight at once). full: the caller
 * overwrites the whole page, so a miss needs no read; the page then comes back still LOADING
 * with *unpublished set, and the caller publishes it after its copy (gm_publish). Published
 * before the copy, a reader of the same page would see the bytes of the evicted page, which
 * may belong to another file. Slot or a negative value (see gm_acquire).
 */
__device__ static inline int gm_get_page(struct gemini_dev *d, int fd, uint64_t pg, int cnt,
					 bool full, bool *unpublished)
{
	const struct gm_file *f = &d->files[fd];
	int pre[16], npre = 0, slot;
	struct gm_batch b;
	bool missed;

	*unpublished = false;
	slot = gm_acquire(d, fd, pg, cnt, false, &missed);
	if (slot < 0 || !missed)
		return slot;
	if (full) {
		*unpublished = true;
		return slot;
	}
	b.n = 0;
	b.rc = 0;
	gm_file_add(d, fd, NVME_CMD_READ, pg << d->page_shift, (uint32_t)d->page_size,
		    gm_page_data(d, slot), &b);
	for (uint32_t k = 1; k <= d->prefetch && npre < 16; k++) {
		uint64_t p = pg + k;
		bool m2;
		int i;

		if ((p << d->page_shift) >= f->data_size)
			break;
		i = gm_acquire(d, fd, p, 1, true, &m2);
		if (i < 0)
			continue;
		pre[npre++] = i;
		gm_file_add(d, fd, NVME_CMD_READ, p << d->page_shift, (uint32_t)d->page_size,
			    gm_page_data(d, i), &b);
	}
	gm_batch_run(d, &b);
	if (b.rc)
		gm_stat(d, GM_STAT_IOERR, 1);
	for (int k = 0; k < npre; k++) {
		gm_publish(d, pre[k], !b.rc);
		gm_release(d, pre[k], 1, false);
	}
	gm_publish(d, slot, !b.rc);
	return b.rc ? GM_ERR_SLOT(slot) : slot;
}

/* The errno a failed gm_get_page means for the caller. */
__device__ static inline int gm_page_errno(int r)
{
	return GM_ERR_HAS_SLOT(r) ? -GM_EIO : r;
}

/*
 * After a leader-only step the other lanes may run ahead: the next G_read would then see a
 * partial __activemask() and one lane would copy a whole page alone (measured: about 1 ms per
 * 64 KiB acquisition at 64 warps, 20-25 thousand such partial-warp reads at 8192 warps).
 * Waiting for the leader here keeps the warp together.
 */
__device__ static inline void gm_reconverge(unsigned active)
{
#ifndef GM_NO_RECONVERGE /* the hit bench builds a variant without it, for comparison */
	__syncwarp(active);
#endif
}

__device__ static inline void gm_copy(uint8_t *dst, const uint8_t *src, uint32_t len, int lane,
				      int nl)
{
	if ((((uintptr_t)dst | (uintptr_t)src | len) & 15) == 0) {
		const uint4 *s = (const uint4 *)src;
		uint4 *t = (uint4 *)dst;

		for (uint32_t k = lane; k < len / 16; k += nl)
			t[k] = s[k];
		return;
	}
	for (uint32_t k = lane; k < len; k += nl)
		dst[k] = src[k];
}

/*
 * The body of G_read and G_write: every active lane passes its own request. Lanes wanting the
 * same page are served by one acquisition (the lowest lane takes the shard lock); when the whole
 * warp passes the same request, all lanes copy it together (coalesced).
 * Returns bytes transferred or a negative errno.
 */
__device__ static inline int64_t gm_rw(struct gemini_dev *d, int fd, uint64_t off, uint64_t len,
				       uint8_t *buf, bool write)
{
	const unsigned active = __activemask();
	const int lane = threadIdx.x & 31;
	int64_t ret = 0;
	bool bad = false;

	if (fd < 0 || fd >= 16 || !d->files[fd].open)
		bad = true;
	else {
		const struct gm_file *f = &d->files[fd];

		if (write && !f->writable)
			bad = true;
		else if (off > f->data_size || len > f->data_size - off)
			bad = true;
	}
	uint64_t pos = off, end = bad ? off : off + len;
	bool all_same = false;
	{
		int pred;
		__match_all_sync(active, (unsigned long long)buf, &pred);
		all_same = pred;
		__match_all_sync(active, off, &pred);
		all_same = all_same && pred;
		__match_all_sync(active, len, &pred);
		all_same = all_same && pred;
		__match_all_sync(active, fd, &pred);
		all_same = all_same && pred;
	}
	if (bad)
		ret = -22; /* -EINVAL: closed descriptor, read-only file or out of bounds */
	if (all_same) {
		const int nl = __popc(active);
		const int rank = __popc(active & ((1u << lane) - 1));
		const int leader = __ffs(active) - 1;

		while (!bad && pos < end) {
			uint64_t pg = pos >> d->page_shift;
			uint32_t po = (uint32_t)(pos & (d->page_size - 1));
			uint32_t n = (uint32_t)min((uint64_t)(d->page_size - po), end - pos);
			int slot = 0;

			bool unpub = false;

			if (lane == leader)
				slot =
				    gm_get_page(d, fd, pg, 1, write && n == d->page_size, &unpub);
			slot = __shfl_sync(active, slot, leader);
			if (slot < 0) {
				if (lane == leader && GM_ERR_HAS_SLOT(slot))
					gm_release(d, GM_ERR_SLOT_OF(slot), 1, false);
				gm_reconverge(active);
				ret = gm_page_errno(slot);
				break;
			}
			if (write)
				gm_copy(gm_page_data(d, slot) + po, buf + (pos - off), n, rank, nl);
			else
				gm_copy(buf + (pos - off), gm_page_data(d, slot) + po, n, rank, nl);
			__syncwarp(active);
			if (lane == leader) {
				if (unpub) /* a whole-page write: readers may see it only now */
					gm_publish(d, slot, true);
				gm_release(d, slot, 1, write);
			}
			gm_reconverge(active);
			pos += n;
			ret += n;
		}
		return ret;
	}
	/*
	 * Divergent requests: the lowest pending lane and every lane wanting the same page form a
	 * group served by one acquisition. Groups go one after another, so a warp never holds one
	 * page while waiting for another (no hold-and-wait, no deadlock in a full cache).
	 */
	for (;;) {
		bool want = !bad && pos < end;
		unsigned pending = __ballot_sync(active, want);
		unsigned long long key =
		    want ? ((unsigned long long)fd << 48) | (pos >> d->page_shift) : ~0ull;

		if (!pending)
			break;
		const int leader = __ffs(pending) - 1;
		const unsigned long long lkey = __shfl_sync(active, key, leader);
		const unsigned group = __ballot_sync(active, want && key == lkey);
		const bool mine = (group >> lane) & 1;
		int slot = 0;

		if (lane == leader) {
			bool unpub;

			slot =
			    gm_get_page(d, fd, pos >> d->page_shift, __popc(group), false, &unpub);
		}
		slot = __shfl_sync(active, slot, leader);
		if (mine) {
			uint32_t po = (uint32_t)(pos & (d->page_size - 1));
			uint32_t n = (uint32_t)min((uint64_t)(d->page_size - po), end - pos);

			if (slot >= 0) {
				if (write)
					gm_copy(gm_page_data(d, slot) + po, buf + (pos - off), n, 0,
						1);
				else
					gm_copy(buf + (pos - off), gm_page_data(d, slot) + po, n, 0,
						1);
				pos += n;
				ret += n;
			} else {
				bad = true;
				ret = gm_page_errno(slot);
			}
		}
		__syncwarp(active);
		if (lane == leader) {
			if (slot >= 0)
				gm_release(d, slot, __popc(group), write);
			else if (GM_ERR_HAS_SLOT(slot))
				gm_release(d, GM_ERR_SLOT_OF(slot), __popc(group), false);
		}
		gm_reconverge(active);
	}
	return ret;
}

/* Reads len bytes of file fd at off into buf through the page cache; bytes or -errno. */
__device__ static inline int64_t G_read(struct gemini_dev *d, int fd, uint64_t off, uint64_t len,
					void *buf)
{
	return gm_rw(d, fd, off, len, (uint8_t *)buf, false);
}

/* Writes into the page cache; data reaches the backing on eviction or G_sync. */
__device__ static inline int64_t G_write(struct gemini_dev *d, int fd, uint64_t off, uint64_t len,
					 const void *buf)
{
	return gm_rw(d, fd, off, len, (uint8_t *)buf, true);
}

/* Reads straight from the backing into buf, bypassing the cache (one thread, block aligned). */
__device__ static inline int G_read_direct(struct gemini_dev *d, int fd, uint64_t off, uint32_t len,
					   void *buf)
{
	if (fd < 0 || fd >= 16 || !d->files[fd].open || off > d->files[fd].data_size ||
	    len > d->files[fd].data_size - off || (off | len) & 511 || (uintptr_t)buf & 3)
		return -22; /* PRP1 must be dword aligned */
	return gm_file_io(d, fd, NVME_CMD_READ, off, len, (uint8_t *)buf);
}

/*
 * G_sync(d, fd): makes fd's writes durable.
 *
 * Covers every G_write to fd that completed before the call in the calling thread, or in any
 * thread whose completion is ordered before the call (an earlier kernel, a __syncthreads or a
 * grid sync before it); writes of other threads racing with the call may or may not be
 * covered. Who waits: every calling thread returns only after those pages are written and a
 * flush has completed. Any set of threads may call it (one thread, some warps, a whole grid,
 * several files at once from different threads): the active lanes of each calling warp split
 * the scan of the cache between them and the warp's leader then sends its own flush; a page
 * that another thread is writing back is waited for, not skipped. Nothing is shared between
 * calls, so a partial grid leaves no state behind.
 *
 * Returns 0, -EINVAL (descriptor), -ETIMEDOUT (a wait ran past the bound) or -EIO: a write-back
 * of this file failed, in this call or earlier (an eviction's), and no G_sync has since written
 * the file's pages without error. Failed pages stay dirty, so a later G_sync retries them and
 * clears the error once they reach the backing.
 */
__device__ static inline int G_sync(struct gemini_dev *d, int fd)
{
	const unsigned active = __activemask();
	const int lane = threadIdx.x & 31;
	const int nl = __popc(active);
	const int rank = __popc(active & ((1u << lane) - 1));
	const int leader = __ffs(active) - 1;
	const uint64_t warp = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
	const uint32_t n = d->npages;
	/* warps start at different pages so that their write-backs spread out */
	const uint32_t start = (uint32_t)((warp * 32 * 7) % n);
	uint32_t e0 = 0;
	int rc = 0, worst;

	if (fd < 0 || fd >= 16 || !d->files[fd].open)
		return -22;
	if (lane == leader)
		e0 = *(volatile uint32_t *)&d->wb_err[fd];
	e0 = __shfl_sync(active, e0, leader);
	for (uint32_t j = (uint32_t)rank; j < n && !rc; j += (uint32_t)nl) {
		uint32_t i = (start + j) % n;
		unsigned long long k = d->key[i];
		struct gm_shard *s;

		if (k == GM_KEY_EMPTY || (int)(k >> 48) != fd)
			continue;
		if (!*(volatile uint32_t *)&d->dirty[i] && !*(volatile uint32_t *)&d->wb[i])
			continue;
		s = gm_shard_of(d, gm_mix(k));
		if (gm_lock(d, &s->lock)) {
			rc = -GM_ETIMEDOUT;
			break;
		}
		if (d->key[i] == k && d->dirty[i] && d->state[i] == GM_PAGE_VALID) {
			rc = gm_writeback_unlock(d, s, (int)i, k);
		} else {
			unsigned ns = 64;
			uint64_t t0 = 0;

			gm_unlock(&s->lock);
			/* another thread's write-back of the page: wait for it to end */
			while (*(volatile uint32_t *)&d->wb[i])
				if (gm_wait_step(d, &t0, &ns, 2048)) {
					rc = -GM_ETIMEDOUT;
					break;
				}
		}
	}
	/* the warp's verdict, then one flush per warp */
	worst = __reduce_min_sync(active, rc);
	if (lane == leader) {
		if (!worst) {
			int st = gm_raw_cmd(d, NVME_CMD_FLUSH, 0, 0, d->data);

			worst = st == GM_SC_TIMEOUT ? -GM_ETIMEDOUT : st ? -GM_EIO : 0;
		}
		if (!worst) {
			/* every failure counted before e0 was on a page that stayed dirty, so this
			 * scan wrote it */
			atomicMax(&d->wb_err[16 + fd], e0);
			__threadfence();
			if (*(volatile uint32_t *)&d->wb_err[fd] !=
			    *(volatile uint32_t *)&d->wb_err[16 + fd])
				worst = -GM_EIO;
		}
	}
	return __shfl_sync(active, worst, leader);
}

#endif /* __CUDACC__ */

#endif
