/* Part of gemini_device.cuh (include that): command batches and the GPU-driven NVMe queues of
 * the in-process (host) controller. A batch holds the commands of one request, one per
 * physically contiguous run of the file (gm_file_add); gm_batch_run hands it to this warp's
 * queue, or to the lio driver (gm_lioq.cuh) when the context has LightIOV queue pairs.
 * Every function on the way to gm_batch_run takes the set of queue drivers compiled in (BK,
 * GEMINI_BK_*): a kernel built without GEMINI_BK_LIO holds none of the lio driver's code and
 * none of its registers (gemini_device.cuh). */
#ifndef GM_QUEUE_CUH
#define GM_QUEUE_CUH

#include "lightiov/nvmeq.h"
#include "gm_sync.cuh"

#define GM_MAX_CMD (128u << 10) /* largest single command: LIO_MDTS_BYTES, the checker's MDTS */
/*
 * The in-process controller's DMA window, as the GPU addresses it in PRPs: an address x of this
 * process's arena mapping (or of a registered buffer) is GPA x - dma_base + GM_GPA_ARENA, the
 * same in every process that maps the arena (IPC); PRP-list pages are GM_GPA_QMEM plus their
 * offset in the shared queue memory. Pages are 4 KiB (the arena is 2 MiB aligned, so a GPA is
 * page aligned exactly where the address is).
 */
#define GM_GPA_ARENA (1ull << 62)
#define GM_GPA_QMEM  (3ull << 62)
#define GM_PRP_LIST  256u /* bytes of PRP list per SQ slot: MDTS / 4 KiB entries */
/* GPU-side status of a command whose completion never came (queue dead or wait past the bound):
 * outside the 15-bit range a controller can report */
#define GM_SC_TIMEOUT	  0x10000
#define GM_Q_DEAD	  2 /* ctl word: set once a wait on the queue ran past the bound */
#define GM_CTL_WORDS	  4
#define GM_SC_WRITE_FAULT NVME_STATUS(NVME_SCT_MEDIA, NVME_SC_WRITE_FAULT)
#define GM_SC_READ_ERROR  NVME_STATUS(NVME_SCT_MEDIA, NVME_SC_READ_ERROR)

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

#ifdef __CUDACC__

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
 * hands the slot to the ticket one round later. Tickets are positions in the queue's endless
 * sequence: the CQE of ticket t carries nvmeq_pos_phase(t) (the controller posts it so). Past the
 * bound, or once another thread found the queue dead, GM_SC_TIMEOUT: the queue is marked dead (its
 * slots can no longer be trusted to turn over) and every later command on it fails at once.
 */
__device__ static inline int gm_wait(const struct gemini_dev *d, struct gm_queue *q, uint32_t t)
{
	uint32_t slot = t & (q->depth - 1), round = t / q->depth;
	uint32_t phase = nvmeq_pos_phase(t, q->depth);
	unsigned short st;
	unsigned ns = 128;
	uint64_t t0 = 0;

	for (;;) {
		st = gm_ld_status(&q->cq[slot]);
		if (nvmeq_phase_ok(st, phase))
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

/* Whether the queue driver of d's context is among the drivers BK compiled in. */
template <unsigned BK> __device__ static inline bool gm_bk_ok(const struct gemini_dev *d)
{
	return (BK & (d->lioq ? GEMINI_BK_LIO : GEMINI_BK_HOST)) != 0;
}

template <unsigned BK>
__device__ static inline void gm_batch_run(struct gemini_dev *d, struct gm_batch *b)
{
	struct gm_queue *q;
	uint32_t depth;

	if (!gm_bk_ok<BK>(d)) {
		/* a driver this kernel was built without (gm_rw refuses such calls first) */
		gm_batch_fail(b, NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD) |
				     NVME_STATUS_DNR);
		b->n = 0;
		return;
	}
	if ((BK & GEMINI_BK_LIO) && d->lioq) {
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

/* The errno of a failed batch: -ETIMEDOUT when the controller did not answer, else -EIO. */
__device__ static inline int gm_batch_errno(const struct gm_batch *b)
{
	return !b->rc ? 0 : b->rc == GM_SC_TIMEOUT ? -GM_ETIMEDOUT : -GM_EIO;
}

template <unsigned BK>
__device__ static inline void gm_batch_add(struct gemini_dev *d, struct gm_batch *b, uint8_t op,
					   uint64_t dev, uint32_t len, uint8_t *buf)
{
	struct gm_cmd *c;

	if (b->n == GM_MAX_TICKETS)
		gm_batch_run<BK>(d, b);
	c = &b->cmd[b->n++];
	c->op = op;
	c->dev = dev;
	c->len = len;
	c->buf = buf;
}

/* One raw command (device offset, no map, no cache); its NVMe status field or GM_SC_TIMEOUT. */
template <unsigned BK>
__device__ static inline int gm_raw_cmd(struct gemini_dev *d, uint8_t op, uint64_t dev,
					uint32_t len, uint8_t *buf)
{
	struct gm_batch b;

	b.n = 0;
	b.rc = 0;
	gm_batch_add<BK>(d, &b, op, dev, len, buf);
	gm_batch_run<BK>(d, &b);
	return b.rc;
}

/* Adds the commands for len bytes of file fd at off, one per physically contiguous run. */
template <unsigned BK>
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
		gm_batch_add<BK>(d, b, op, dev, run, buf);
		off += run;
		buf += run;
		len -= run;
	}
}

/* Synchronous transfer of len bytes; one thread. 0, -EIO or -ETIMEDOUT. */
template <unsigned BK>
__device__ static inline int gm_file_io(struct gemini_dev *d, int fd, uint8_t op, uint64_t off,
					uint32_t len, uint8_t *buf)
{
	struct gm_batch b;

	b.n = 0;
	b.rc = 0;
	gm_file_add<BK>(d, fd, op, off, len, buf, &b);
	gm_batch_run<BK>(d, &b);
	if (b.rc)
		gm_stat(d, GM_STAT_IOERR, 1);
	return gm_batch_errno(&b);
}

#endif /* __CUDACC__ */

#endif
