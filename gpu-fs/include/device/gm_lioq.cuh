/* Part of gemini_device.cuh (include that): the GPU's driver of the queue pairs of a LightIOV
 * backend (the lio backend; softssd, or lightiov.ko over an SSD, is the controller). */
#ifndef GM_LIOQ_CUH
#define GM_LIOQ_CUH

#include "gm_queue.cuh"

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
	uint32_t done[GM_LIO_INFLIGHT]; /* per slot: nvmeq_status_word(status, 1) once reaped */
};

#ifdef __CUDACC__

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

		if (!nvmeq_phase_ok(st, q->phase))
			break;
		cid = *(volatile uint16_t *)&e->cid;
		if (cid >= GM_LIO_INFLIGHT || !(q->posted & (1u << cid)))
			return false;
		q->posted &= ~(1u << cid);
		gm_st_release((int *)&q->done[cid], (int)nvmeq_status_word(st >> 1, 1));
		if (nvmeq_step(&q->head, q->depth))
			q->phase ^= 1;
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
				q->tail = nvmeq_next(q->tail, q->depth);
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

#endif /* __CUDACC__ */

#endif
