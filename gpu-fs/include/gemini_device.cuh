/* libgemini device side: G_read/G_write/G_sync, the warp-level GPU page cache (sharded hash +
 * second-chance page lists) and the GPU NVMe queue driver. Header-only: kernels inline it. */
#ifndef GEMINI_DEVICE_CUH
#define GEMINI_DEVICE_CUH

#include <stdint.h>

#include "gemini_nvme.h"

#define GM_KEY_EMPTY	(~0ull)
#define GM_PAGE_INVALID 0u
#define GM_PAGE_LOADING 1u
#define GM_PAGE_VALID	2u
#define GM_PAGE_ERROR	3u
#define GM_MAX_CMD	(1u << 20) /* largest single command the queues carry */
#define GM_STAT_HITS	0
#define GM_STAT_MISSES	1
#define GM_STAT_EVICT	2
#define GM_STAT_WB	3
#define GM_STAT_IOERR	4
#define GM_STAT_CMDS	5
#define GM_NSTATS	8

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
	struct gm_nvme_sqe *sq;
	struct gm_nvme_cqe *cq;
	uint32_t *sq_doorbell; /* free-running tail: the controller reads it */
	uint32_t *turn;	       /* per slot: 2 * round when free for that round */
	uint32_t *ctl;	       /* [0] next ticket, [1] tickets whose doorbell was rung */
	uint32_t depth;
	uint32_t qid;
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
	uint64_t *dma_base; /* the arena base the queues' SGL addresses are relative to */
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
	unsigned int *sync_count;
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

__device__ static inline void gm_lock(int *l)
{
	unsigned ns = 32;

	while (gm_cas_acquire(l, 0, 1) != 0) {
		__nanosleep(ns);
		if (ns < 1024)
			ns *= 2;
	}
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

__device__ static inline unsigned short gm_ld_status(const struct gm_nvme_cqe *c)
{
	unsigned short v;

	asm volatile("ld.acquire.sys.global.u16 %0, [%1];" : "=h"(v) : "l"(&c->status) : "memory");
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

/* Polls the completion of ticket t's slot; returns the NVMe status code (0 = success) and
 * hands the slot to the ticket one round later. */
__device__ static inline int gm_wait(struct gm_queue *q, uint32_t t)
{
	uint32_t slot = t & (q->depth - 1), round = t / q->depth;
	unsigned short phase = (round & 1) ? 0 : 1, st;
	unsigned ns = 128;

	for (;;) {
		st = gm_ld_status(&q->cq[slot]);
		if ((st & 1) == phase)
			break;
		__nanosleep(ns);
		if (ns < 2048)
			ns *= 2;
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
	int rc;
};

/*
 * Submits the batch's commands to this warp's queue and waits for all of them. The slots are
 * reserved with one atomic add (at most a queue's depth at a time), filled, and made visible
 * with one doorbell write; doorbells are rung in reservation order. The previous user of each
 * slot is an earlier reservation, so by induction on that order every reservation gets
 * through: nothing between the reservation and the waits depends on anything but earlier
 * reservations and the controller. Taking slots one at a time, or holding one while taking a
 * lock, deadlocks once other warps lap the queue (test readahead_on_a_shallow_queue).
 */
__device__ static inline void gm_batch_run(struct gemini_dev *d, struct gm_batch *b)
{
	struct gm_queue *q = gm_my_queue(d);
	const uint32_t depth = q->depth;

	for (int i0 = 0; i0 < b->n;) {
		uint32_t k = min((uint32_t)(b->n - i0), depth);
		uint32_t t0 = atomicAdd(&q->ctl[0], k);
		unsigned ns;

		for (uint32_t j = 0; j < k; j++) {
			const struct gm_cmd *c = &b->cmd[i0 + j];
			uint32_t t = t0 + j, slot = t & (depth - 1);
			struct gm_nvme_sqe *s = &q->sq[slot];

			ns = 64;
			while (*(volatile uint32_t *)&q->turn[slot] != 2u * (t / depth)) {
				__nanosleep(ns);
				if (ns < 2048)
					ns *= 2;
			}
			s->opcode = c->op;
			s->flags = GM_NVME_PSDT_SGL;
			s->cid = (uint16_t)slot;
			s->nsid = 1;
			s->sgl_addr = (uint64_t)(c->buf - (const uint8_t *)d->dma_base);
			s->sgl_len = c->len;
			s->sgl_type = GM_NVME_SGL_DATA_BLOCK << 4;
			s->slba = c->dev / 512;
			s->nlb = (uint16_t)(c->len ? c->len / 512 - 1 : 0);
			s->control = 0;
		}
		__threadfence_system();
		ns = 32;
		while (*(volatile uint32_t *)&q->ctl[1] != t0) {
			__nanosleep(ns);
			if (ns < 1024)
				ns *= 2;
		}
		*(volatile uint32_t *)q->sq_doorbell = t0 + k;
		__threadfence_system();
		atomicExch(&q->ctl[1], t0 + k);
		gm_stat(d, GM_STAT_CMDS, k);
		for (uint32_t j = 0; j < k; j++)
			b->rc |= gm_wait(q, t0 + j);
		i0 += (int)k;
	}
	b->n = 0;
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

/* One raw command (device offset, no map, no cache); its NVMe status. */
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

/* Synchronous transfer of len bytes; one thread. */
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
	return b.rc ? -5 : 0;
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

__device__ static inline int gm_writeback(struct gemini_dev *d, int i)
{
	unsigned long long k = d->key[i];
	int fd = (int)(k >> 48);
	uint64_t off = (k & ((1ull << 48) - 1)) << d->page_shift;
	int rc;

	d->dirty[i] = 0;
	__threadfence();
	rc = gm_file_io(d, fd, GM_NVME_OP_WRITE, off, (uint32_t)d->page_size, gm_page_data(d, i));
	if (rc)
		d->dirty[i] = 1;
	gm_stat(d, GM_STAT_WB, 1);
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

/*
 * Takes n references on the page holding file fd's page number pg. On a miss the page is
 * returned LOADING with *missed set: the caller fills it and publishes it (gm_get_page).
 * Returns the slot or a negative errno. One lane per warp calls this for the whole warp
 * (warp-level acquisition).
 *
 * References are only taken under the shard lock and dropped without it (gm_release), so a
 * page the lock holder sees unreferenced stays unreferenced until it lets go: eviction and
 * reuse need no further synchronisation with hits.
 */
__device__ static inline int gm_acquire(struct gemini_dev *d, int fd, uint64_t pg, int n,
					bool prefetching, bool *missed)
{
	unsigned long long key = ((unsigned long long)fd << 48) | pg;
	uint64_t h = gm_mix(key);
	struct gm_shard *s = gm_shard_of(d, h);
	int *head = gm_bucket(d, h);
	unsigned ns = 256;
	int i;

	*missed = false;
	for (;;) {
		/* read-ahead is optional: a loader that already holds its page never waits for a
		 * lock that warps waiting for a free page keep taking */
		if (!prefetching)
			gm_lock(&s->lock);
		else if (gm_cas_acquire(&s->lock, 0, 1) != 0)
			return -16;
		for (i = *head; i >= 0; i = d->hnext[i])
			if (d->key[i] == key)
				break;
		if (i >= 0 && !(d->state[i] == GM_PAGE_ERROR && d->ref[i] == 0)) {
			if (prefetching) {
				gm_unlock(&s->lock);
				return -17; /* already cached: nothing to read ahead */
			}
			unsigned st;

			atomicAdd(&d->ref[i], n);
			d->used[i] = 1;
			gm_unlock(&s->lock);
			while ((st = (unsigned)gm_ld_acquire((const int *)&d->state[i])) ==
			       GM_PAGE_LOADING)
				__nanosleep(128);
			gm_stat(d, GM_STAT_HITS, 1);
			if (st == GM_PAGE_ERROR)
				return -(5 << 8) - i - 1; /* error carrying the slot to release */
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
		if (i >= 0)
			break;
		gm_unlock(&s->lock);
		if (prefetching)
			return -16;
		__nanosleep(ns); /* every page of this shard is referenced: wait for a release */
		if (ns < 8192)
			ns *= 2;
	}
	if (d->key[i] != GM_KEY_EMPTY) {
		/* under the shard lock: nobody can look the old page up while it is written */
		if (d->dirty[i] && d->state[i] == GM_PAGE_VALID)
			gm_writeback(d, i);
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
 * overwrites the whole page, so a miss needs no read. Slot or a negative value (see above).
 */
__device__ static inline int gm_get_page(struct gemini_dev *d, int fd, uint64_t pg, int cnt,
					 bool full)
{
	const struct gm_file *f = &d->files[fd];
	int pre[16], npre = 0, slot;
	struct gm_batch b;
	bool missed;

	slot = gm_acquire(d, fd, pg, cnt, false, &missed);
	if (slot < 0 || !missed)
		return slot;
	if (full) {
		gm_publish(d, slot, true);
		return slot;
	}
	b.n = 0;
	b.rc = 0;
	gm_file_add(d, fd, GM_NVME_OP_READ, pg << d->page_shift, (uint32_t)d->page_size,
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
		gm_file_add(d, fd, GM_NVME_OP_READ, p << d->page_shift, (uint32_t)d->page_size,
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
	return b.rc ? -(5 << 8) - slot - 1 : slot;
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

			if (lane == leader) {
				slot = gm_get_page(d, fd, pg, 1, write && n == d->page_size);
			}
			slot = __shfl_sync(active, slot, leader);
			if (slot < 0) {
				if (lane == leader && slot < -(5 << 8) + 1)
					gm_release(d, -slot - (5 << 8) - 1, 1, false);
				gm_reconverge(active);
				ret = -5;
				break;
			}
			if (write)
				gm_copy(gm_page_data(d, slot) + po, buf + (pos - off), n, rank, nl);
			else
				gm_copy(buf + (pos - off), gm_page_data(d, slot) + po, n, rank, nl);
			__syncwarp(active);
			if (lane == leader)
				gm_release(d, slot, 1, write);
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

		if (lane == leader)
			slot = gm_get_page(d, fd, pos >> d->page_shift, __popc(group), false);
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
				ret = -5;
			}
		}
		__syncwarp(active);
		if (lane == leader) {
			if (slot >= 0)
				gm_release(d, slot, __popc(group), write);
			else if (slot < -(5 << 8) + 1)
				gm_release(d, -slot - (5 << 8) - 1, __popc(group), false);
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
	    len > d->files[fd].data_size - off || (off | len) & 511)
		return -22;
	return gm_file_io(d, fd, GM_NVME_OP_READ, off, len, (uint8_t *)buf);
}

/*
 * Writes back every dirty page of fd; the calling threads split the slots between them, and the
 * last one to finish sends a flush so the data is durable. Call from every thread of the grid
 * (or from one thread of a one-thread grid). Returns 0 or -EIO.
 */
__device__ static inline int G_sync(struct gemini_dev *d, int fd)
{
	unsigned long long tid = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	unsigned long long nth = (unsigned long long)gridDim.x * blockDim.x;
	int rc = 0;

	if (fd < 0 || fd >= 16 || !d->files[fd].open)
		return -22;
	for (unsigned long long i = tid; i < d->npages; i += nth) {
		unsigned long long k = d->key[i];
		struct gm_shard *s;

		if (!d->dirty[i] || k == GM_KEY_EMPTY || (int)(k >> 48) != fd)
			continue;
		s = gm_shard_of(d, gm_mix(k));
		gm_lock(&s->lock);
		if (d->dirty[i] && d->key[i] == k && d->state[i] == GM_PAGE_VALID)
			rc |= gm_writeback(d, (int)i);
		gm_unlock(&s->lock);
	}
	__threadfence();
	if (atomicAdd(d->sync_count, 1u) == nth - 1) {
		rc |= gm_raw_cmd(d, GM_NVME_OP_FLUSH, 0, 0, d->data);
		atomicExch(d->sync_count, 0u);
	}
	return rc ? -5 : 0;
}

#endif /* __CUDACC__ */

#endif
