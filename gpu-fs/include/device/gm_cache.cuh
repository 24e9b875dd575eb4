/* Part of gemini_device.cuh (include that): the page cache in HBM. Sharded hash of pages, per
 * shard a second-chance list of every page, hits served without the shard lock (a reference
 * count that evictors claim), misses and eviction under it, write-back of dirty victims outside
 * the lock, warp-level acquisition (gm_rw). */
#ifndef GM_CACHE_CUH
#define GM_CACHE_CUH

#include "gm_queue.cuh"

#define GM_KEY_EMPTY	(~0ull)
#define GM_PAGE_INVALID 0u
#define GM_PAGE_LOADING 1u
#define GM_PAGE_VALID	2u
#define GM_PAGE_ERROR	3u

struct gm_shard {
	int lock;
	int lru_head; /* every page of the shard, oldest first */
	int lru_tail;
	int pad;
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
 * A page's reference count is also its claim. Hits take references without the shard lock
 * (gm_hit), so whoever changes a page's key or state under the lock first claims it: a compare
 * and swap from 0 to GM_REF_CLAIMED, which fails if a hit got there first. A hit whose add
 * finds the count negative gives its references back at once, so the claimer ends the claim
 * with an add, never a store (gm_unclaim), and the transient adds cancel out. A claim never
 * outlives its holder's critical section.
 */
#define GM_REF_CLAIMED (-(1 << 30))

__device__ static inline bool gm_claim(struct gemini_dev *d, int i)
{
	return gm_cas_acquire(&d->ref[i], 0, GM_REF_CLAIMED) == 0;
}

/* Ends a claim leaving n references; the page's new key and state are visible before. */
__device__ static inline void gm_unclaim(struct gemini_dev *d, int i, int n)
{
	gm_add_release(&d->ref[i], n - GM_REF_CLAIMED);
}

/*
 * Write-back of dirty page i, key k (shard lock held by the caller, who checked that the page is
 * dirty and valid; released here). The page is pinned with a reference (no eviction, no drop)
 * and flagged as being written, then the lock is dropped: the write runs without it, so hits
 * and other acquisitions of the shard go on meanwhile. A writer that changes the page during
 * the write sets it dirty again on release, so the newer bytes are written later. On failure
 * the page stays dirty (acknowledged data is never dropped) and the file's error count rises:
 * the next gemini_dev_sync of the file reports it. Returns 0, -EIO or -ETIMEDOUT.
 */
template <unsigned BK>
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
	rc = gm_file_io<BK>(d, fd, NVME_CMD_WRITE, off, (uint32_t)d->page_size, gm_page_data(d, i));
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
 * pages passed over go to the tail. The victim comes back claimed (gm_claim). -1 when every
 * page is referenced.
 */
__device__ static inline int gm_victim(struct gemini_dev *d, struct gm_shard *s)
{
	for (uint32_t steps = 2 * d->per_shard + 1; steps; steps--) {
		int i = s->lru_head;
		bool take;

		if (i < 0)
			return -1;
		take = gm_ld_acquire(&d->ref[i]) == 0 && !d->used[i] && gm_claim(d, i);
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
 * The hit path, without the shard lock: the page is found by a walk of its bucket and pinned
 * with one atomic add, then checked. Only a page nobody references can be claimed (gm_claim), so
 * a reference taken before any claim keeps the page's key and state as the check finds them,
 * and one taken on a claimed page (old count negative) is given back. Chains change under the
 * walk (an evicted page moves to another bucket): a walk that goes astray only ends at no match
 * or at its bound, and the locked path (gm_acquire) does the work. Only published pages are
 * hits here; loading and failed ones are left to the locked path too. Slot with n references,
 * or -1 (none taken).
 */
__device__ static inline int gm_hit(struct gemini_dev *d, const int *head, unsigned long long key,
				    int n)
{
	int i = gm_ld_relaxed(head);

	for (uint32_t steps = d->per_shard + 1; i >= 0; i = gm_ld_relaxed(&d->hnext[i])) {
		if ((uint32_t)i >= d->npages || !steps--)
			return -1;
		if (gm_ld_relaxed_u64(&d->key[i]) == key)
			break;
	}
	if (i < 0)
		return -1;
	if (gm_add_acq_rel(&d->ref[i], n) >= 0 && gm_ld_relaxed_u64(&d->key[i]) == key &&
	    (unsigned)gm_ld_acquire((const int *)&d->state[i]) == GM_PAGE_VALID) {
		if (!d->used[i])
			d->used[i] = 1;
		return i;
	}
	gm_sub_release(&d->ref[i], n);
	return -1;
}

/*
 * Takes n references on the page holding file fd's page number pg. On a miss the page is
 * returned LOADING with *missed set: the caller fills it and publishes it (gm_get_page).
 * Returns the slot or a negative value: -errno (no reference taken; -EBUSY/-EEXIST only when
 * prefetching), or GM_ERR_SLOT(slot) for a page whose load failed or never ended (references
 * taken). One lane per warp calls this for the whole warp (warp-level acquisition).
 *
 * A hit on a published page takes no lock (gm_hit). Everything else runs under the shard lock,
 * and a page's key or state changes only while its holder has claimed it (gm_claim), so a page
 * the lock holder claimed stays unreferenced until it lets go: eviction and reuse need no further
 * synchronisation with hits. A dirty victim is written back without the lock
 * (gm_writeback_unlock) and the search starts over; if that write fails the page is kept, dirty,
 * and the caller gets the error.
 */
template <unsigned BK>
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
	if (!prefetching) {
		i = gm_hit(d, head, key, n);
		if (i >= 0) {
			gm_stat(d, GM_STAT_HITS, 1);
			return i;
		}
	}
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
		if (i >= 0 && d->state[i] == GM_PAGE_ERROR && gm_claim(d, i)) {
			/* a failed load nobody holds any more: the same slot retries the device */
			d->state[i] = GM_PAGE_LOADING;
			gm_unclaim(d, i, n);
			gm_unlock(&s->lock);
			gm_stat(d, GM_STAT_MISSES, 1);
			*missed = true;
			return i;
		}
		if (i >= 0) {
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
		i = gm_victim(d, s);
		if (i >= 0 && d->key[i] != GM_KEY_EMPTY && d->dirty[i] &&
		    d->state[i] == GM_PAGE_VALID) {
			/* written back without the lock; then look again (the key may have been
			 * loaded meanwhile, and the victim hit again) */
			int rc;

			gm_unclaim(d, i, 0);
			rc = gm_writeback_unlock<BK>(d, s, i, d->key[i]);
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
	gm_unclaim(d, i, n);
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
template <unsigned BK>
__device__ static inline int gm_get_page(struct gemini_dev *d, int fd, uint64_t pg, int cnt,
					 bool full, bool *unpublished)
{
	const struct gm_file *f = &d->files[fd];
	int pre[16], npre = 0, slot;
	struct gm_batch b;
	bool missed;

	*unpublished = false;
	slot = gm_acquire<BK>(d, fd, pg, cnt, false, &missed);
	if (slot < 0 || !missed)
		return slot;
	if (full) {
		*unpublished = true;
		return slot;
	}
	b.n = 0;
	b.rc = 0;
	gm_file_add<BK>(d, fd, NVME_CMD_READ, pg << d->page_shift, (uint32_t)d->page_size,
			gm_page_data(d, slot), &b);
	for (uint32_t k = 1; k <= d->prefetch && npre < 16; k++) {
		uint64_t p = pg + k;
		bool m2;
		int i;

		if ((p << d->page_shift) >= f->data_size)
			break;
		i = gm_acquire<BK>(d, fd, p, 1, true, &m2);
		if (i < 0)
			continue;
		pre[npre++] = i;
		gm_file_add<BK>(d, fd, NVME_CMD_READ, p << d->page_shift, (uint32_t)d->page_size,
				gm_page_data(d, i), &b);
	}
	gm_batch_run<BK>(d, &b);
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
 * After a leader-only step the other lanes may run ahead: the next gemini_dev_read would then see a
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

/* -EINVAL (22) for a request on a descriptor that is not open, a write to a read-only file or a
 * range past the file's end (overflow-safe), else 0: the device calls' one request check. */
__device__ static inline int gm_req_check(const struct gemini_dev *d, int fd, uint64_t off,
					  uint64_t len, bool write)
{
	const struct gm_file *f;

	if (fd < 0 || fd >= 16 || !d->files[fd].open)
		return -22;
	f = &d->files[fd];
	if ((write && !f->writable) || off > f->data_size || len > f->data_size - off)
		return -22;
	return 0;
}

/* True when every lane of `active` passes the same request: the lanes then split it. */
__device__ static inline bool gm_same_request(unsigned active, int fd, uint64_t off, uint64_t len,
					      const void *buf)
{
	int a, b, c, e;

	__match_all_sync(active, (unsigned long long)buf, &a);
	__match_all_sync(active, off, &b);
	__match_all_sync(active, len, &c);
	__match_all_sync(active, fd, &e);
	return a && b && c && e;
}

/*
 * The body of gemini_dev_read and gemini_dev_write: every active lane passes its own request. Lanes
 * wanting the same page are served by one acquisition (the lowest lane takes the shard lock); when
 * the whole warp passes the same request, all lanes copy it together (coalesced). Returns bytes
 * transferred or a negative errno.
 */
template <unsigned BK>
__device__ static inline int64_t gm_rw(struct gemini_dev *d, int fd, uint64_t off, uint64_t len,
				       uint8_t *buf, bool write)
{
	const unsigned active = __activemask();
	const int lane = threadIdx.x & 31;
	int64_t ret = 0;
	/* a context whose queue driver is not compiled into this kernel, or a bad request */
	bool bad = !gm_bk_ok<BK>(d) || gm_req_check(d, fd, off, len, write);
	uint64_t pos = off, end = bad ? off : off + len;
	const bool all_same = gm_same_request(active, fd, off, len, buf);
	if (bad) /* -EINVAL: closed descriptor, read-only file or out of bounds */
		ret = gm_bk_ok<BK>(d) ? -22 : -GM_EOPNOTSUPP;
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
				slot = gm_get_page<BK>(d, fd, pg, 1, write && n == d->page_size,
						       &unpub);
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

			slot = gm_get_page<BK>(d, fd, pos >> d->page_shift, __popc(group), false,
					       &unpub);
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

#endif /* __CUDACC__ */

#endif
