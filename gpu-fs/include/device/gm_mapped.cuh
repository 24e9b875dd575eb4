/* Part of gemini_device.cuh (include that): the mapped path. A file on the memory namespace has a
 * GPU-mapped host image; these calls move bytes between it and GPU memory with SM loads and
 * stores, keeping the page cache coherent (gm_mapped_coherent), without the controller. */
#ifndef GM_MAPPED_CUH
#define GM_MAPPED_CUH

#include "gm_cache.cuh"

#ifdef __CUDACC__

/*
 * Coherence of a mapped access to pages pg0..pg1 of file fd with the page cache (one thread;
 * any number of threads may run it at once, as gemini_dev_sync's lanes do). Every cached page
 * of the range that is dirty is written back to the image first (so the image holds its bytes,
 * those outside the range too), and a write-back another thread has in flight is waited for.
 * drop (before a mapped write): the page is then forgotten, so that no cached copy can go stale
 * when the image changes under it; a page somebody references is waited for, bounded. Clean
 * pages stay for a mapped read: they equal the image. Returns 0, -EIO (a write-back failed; the
 * page stays dirty and the file's error count rose, as for an eviction) or -ETIMEDOUT.
 */
template <unsigned BK>
__device__ static inline int gm_mapped_coherent(struct gemini_dev *d, int fd, uint64_t pg0,
						uint64_t pg1, bool drop)
{
	for (uint64_t pg = pg0; pg <= pg1; pg++) {
		const unsigned long long key = ((unsigned long long)fd << 48) | pg;
		const uint64_t h = gm_mix(key);
		struct gm_shard *s = gm_shard_of(d, h);
		int *head = gm_bucket(d, h);
		unsigned ns = 64;
		uint64_t t0 = 0;

		for (;;) {
			int i;

			if (gm_lock(d, &s->lock))
				return -GM_ETIMEDOUT;
			for (i = *head; i >= 0; i = d->hnext[i])
				if (d->key[i] == key)
					break;
			if (i < 0) {
				gm_unlock(&s->lock);
				break;
			}
			if (*(volatile uint32_t *)&d->dirty[i] && d->state[i] == GM_PAGE_VALID) {
				int rc = gm_writeback_unlock<BK>(d, s, i, key);

				if (rc)
					return rc;
				continue; /* look again: it may have turned dirty meanwhile */
			}
			if (!drop && !*(volatile uint32_t *)&d->wb[i]) {
				gm_unlock(&s->lock);
				break;
			}
			if (drop && d->state[i] != GM_PAGE_LOADING && gm_claim(d, i)) {
				gm_hash_remove(d, head, i);
				d->key[i] = GM_KEY_EMPTY;
				d->state[i] = GM_PAGE_INVALID;
				d->dirty[i] = 0;
				gm_unclaim(d, i, 0);
				gm_lru_remove(d, s, i);
				gm_lru_prepend(d, s, i); /* the next victim */
				gm_unlock(&s->lock);
				break;
			}
			/* referenced, loading, or being written back by another thread */
			gm_unlock(&s->lock);
			if (gm_wait_step(d, &t0, &ns, 2048))
				return -GM_ETIMEDOUT;
		}
	}
	return 0;
}

/* 0 when fd's image may be accessed at [off, off + len), else -errno: -EOPNOTSUPP (no image:
 * not the memory namespace, or an imported context; or a kernel without the host driver),
 * -EINVAL (descriptor, bounds, a write to a read-only file). */
template <unsigned BK>
__device__ static inline int gm_mapped_check(const struct gemini_dev *d, int fd, uint64_t off,
					     uint64_t len, bool write)
{
	if (!gm_bk_ok<BK>(d) || !(BK & GEMINI_BK_HOST))
		return -GM_EOPNOTSUPP;
	if (fd < 0 || fd >= 16 || !d->files[fd].open)
		return -22;
	if (!d->files[fd].image)
		return -GM_EOPNOTSUPP;
	return gm_req_check(d, fd, off, len, write);
}

/* Copy between GPU memory and the mapped image: 16-byte accesses where both sides share their
 * alignment, bytes for the head and tail (and everything, where they do not). */
__device__ static inline void gm_copy_mapped(uint8_t *dst, const uint8_t *src, uint64_t len,
					     int lane, int nl)
{
	uint64_t head = 0, body = 0;

	if ((((uintptr_t)dst ^ (uintptr_t)src) & 15) == 0) {
		head = (16 - ((uintptr_t)dst & 15)) & 15;
		if (head > len)
			head = len;
		body = (len - head) & ~15ull;
	}
	for (uint64_t k = lane; k < head; k += nl)
		dst[k] = src[k];
	{
		const uint4 *s = (const uint4 *)(src + head);
		uint4 *t = (uint4 *)(dst + head);

		for (uint64_t k = lane; k < body / 16; k += nl)
			t[k] = s[k];
	}
	for (uint64_t k = head + body + lane; k < len; k += nl)
		dst[k] = src[k];
}

/*
 * Body of gemini_dev_read_mapped/gemini_dev_write_mapped. When every active lane passes the same
 * request, the leader makes the range coherent and all lanes copy it together; otherwise each
 * lane does its own request alone. A write is fenced at system scope before returning, so the
 * host and the copy engines see it once the call returns. Bytes or -errno.
 */
template <unsigned BK>
__device__ static inline int64_t gm_mapped_rw(struct gemini_dev *d, int fd, uint64_t off,
					      uint64_t len, uint8_t *buf, bool write)
{
	const unsigned active = __activemask();
	const int lane = threadIdx.x & 31;
	int rc = gm_mapped_check<BK>(d, fd, off, len, write);

	if (gm_same_request(active, fd, off, len, buf)) {
		const int leader = __ffs(active) - 1;

		if (lane == leader && !rc && len)
			rc = gm_mapped_coherent<BK>(d, fd, off >> d->page_shift,
						    (off + len - 1) >> d->page_shift, write);
		rc = __shfl_sync(active, rc, leader);
		if (rc)
			return rc;
		__syncwarp(active); /* what the leader's write-backs stored is visible to all */
		if (write)
			gm_copy_mapped(d->files[fd].image + off, buf, len,
				       __popc(active & ((1u << lane) - 1)), __popc(active));
		else
			gm_copy_mapped(buf, d->files[fd].image + off, len,
				       __popc(active & ((1u << lane) - 1)), __popc(active));
		if (write)
			__threadfence_system();
		__syncwarp(active);
		return (int64_t)len;
	}
	if (!rc && len)
		rc = gm_mapped_coherent<BK>(d, fd, off >> d->page_shift,
					    (off + len - 1) >> d->page_shift, write);
	if (rc)
		return rc;
	if (write) {
		gm_copy_mapped(d->files[fd].image + off, buf, len, 0, 1);
		__threadfence_system();
	} else {
		gm_copy_mapped(buf, d->files[fd].image + off, len, 0, 1);
	}
	return (int64_t)len;
}

#endif /* __CUDACC__ */

#endif
