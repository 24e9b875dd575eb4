/* libgemini device side: gemini_dev_read/gemini_dev_write/gemini_dev_sync, the warp-level GPU page
 * cache (sharded hash + second-chance page lists) and the GPU NVMe queue drivers, every wait of it
 * bounded in time. Header-only: kernels inline it. Commands and completions are
 * include/lightiov/nvme.h's. The one header users include (through gemini.h): it defines the device
 * struct and the public calls, and includes the parts, each on top of the ones before it:
 *   device/gm_sync.cuh   acquire/release atomics, the clock, bounded waits, the spin lock
 *   device/gm_queue.cuh  command batches, the in-process controller's GPU-driven queues
 *   device/gm_lioq.cuh   the queue pairs of a LightIOV backend (lio backend)
 *   device/gm_cache.cuh  the page cache: sharded hash, second-chance lists, gm_rw
 *   device/gm_mapped.cuh the mapped path: SM copies to/from a memory-namespace file's image */
#ifndef GEMINI_DEVICE_CUH
#define GEMINI_DEVICE_CUH

#include <stdint.h>

#include "gemini.h" /* GEMINI_BK_*: the queue drivers a kernel is built with */
#include "lightiov/nvme.h"

#define GM_STAT_HITS   0
#define GM_STAT_MISSES 1
#define GM_STAT_EVICT  2
#define GM_STAT_WB     3
#define GM_STAT_IOERR  4
#define GM_STAT_CMDS   5
#define GM_NSTATS      8

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
	/* memory namespace: the GPU's alias of the file's pinned host image at data byte 0
	 * (gemini_dev_read_mapped); NULL for every other backend and in importers */
	uint8_t *image;
};

/* The parts' types, defined there */
struct gm_queue;
struct gm_lioq;
struct gm_shard;

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
	/* per file: failed write-backs [fd]; [16 + fd] the count a clean gemini_dev_sync covered */
	uint32_t *wb_err;
	uint64_t timeout_ns;  /* bound on every wait for the controller or another warp/process */
	struct gm_lioq *lioq; /* lio backend: its queue pairs (NULL: the in-process controller) */
	uint32_t nlioq;
	uint32_t pad_lio;
};

#include "device/gm_sync.cuh"
#include "device/gm_queue.cuh"
#include "device/gm_lioq.cuh"
#include "device/gm_cache.cuh"
#include "device/gm_mapped.cuh"

#ifdef __CUDACC__

/*
 * The device calls. B: the queue drivers compiled into the calling kernel (GEMINI_BK_*, gemini.h);
 * the default holds both. A context whose driver B lacks gets -EOPNOTSUPP (95).
 */

/* Reads len bytes of file fd at off into buf through the page cache; bytes or -errno. */
template <unsigned B = GEMINI_BK_ALL>
__device__ static inline int64_t gemini_dev_read(struct gemini_dev *d, int fd, uint64_t off,
						 uint64_t len, void *buf)
{
	return gm_rw<B>(d, fd, off, len, (uint8_t *)buf, false);
}

/* Writes into the page cache; data reaches the backing on eviction or gemini_dev_sync. */
template <unsigned B = GEMINI_BK_ALL>
__device__ static inline int64_t gemini_dev_write(struct gemini_dev *d, int fd, uint64_t off,
						  uint64_t len, const void *buf)
{
	return gm_rw<B>(d, fd, off, len, (uint8_t *)buf, true);
}

/* Reads straight from the backing into buf, bypassing the cache (one thread, block aligned). */
template <unsigned B = GEMINI_BK_ALL>
__device__ static inline int gemini_dev_read_direct(struct gemini_dev *d, int fd, uint64_t off,
						    uint32_t len, void *buf)
{
	if (!gm_bk_ok<B>(d))
		return -GM_EOPNOTSUPP;
	if (gm_req_check(d, fd, off, len, false) || (off | len) & 511 || (uintptr_t)buf & 3)
		return -22; /* PRP1 must be dword aligned */
	return gm_file_io<B>(d, fd, NVME_CMD_READ, off, len, (uint8_t *)buf);
}

/*
 * The mapped path (memory namespace only): reads or writes len bytes of fd at off straight from
 * or to the file's pinned host image with SM loads and stores, no controller. Same calling
 * convention as gemini_dev_read: when every active lane of a warp passes the same request the
 * lanes split it (16-byte accesses where buf and the image share their alignment). Coherent
 * with the page cache: dirty cached pages of the range are written back first, and a write
 * drops the range's cached pages (docs/gpu-fs.md, "The mapped path"). Bytes or -errno:
 * -EOPNOTSUPP when the file has no image (other backends, importers: use gemini_dev_read),
 * -EINVAL (descriptor, bounds, a write to a read-only file), -EIO or -ETIMEDOUT (a write-back).
 */
template <unsigned B = GEMINI_BK_ALL>
__device__ static inline int64_t gemini_dev_read_mapped(struct gemini_dev *d, int fd, uint64_t off,
							uint64_t len, void *buf)
{
	return gm_mapped_rw<B>(d, fd, off, len, (uint8_t *)buf, false);
}

template <unsigned B = GEMINI_BK_ALL>
__device__ static inline int64_t gemini_dev_write_mapped(struct gemini_dev *d, int fd, uint64_t off,
							 uint64_t len, const void *buf)
{
	return gm_mapped_rw<B>(d, fd, off, len, (uint8_t *)buf, true);
}

/*
 * gemini_dev_sync(d, fd): makes fd's writes durable.
 *
 * Covers every gemini_dev_write to fd that completed before the call in the calling thread, or in
 * any thread whose completion is ordered before the call (an earlier kernel, a __syncthreads or a
 * grid sync before it); writes of other threads racing with the call may or may not be
 * covered. Who waits: every calling thread returns only after those pages are written and a
 * flush has completed. Any set of threads may call it (one thread, some warps, a whole grid,
 * several files at once from different threads): the active lanes of each calling warp split
 * the scan of the cache between them and the warp's leader then sends its own flush; a page
 * that another thread is writing back is waited for, not skipped. Nothing is shared between
 * calls, so a partial grid leaves no state behind.
 *
 * Returns 0, -EINVAL (descriptor), -ETIMEDOUT (a wait ran past the bound) or -EIO: a write-back
 * of this file failed, in this call or earlier (an eviction's), and no gemini_dev_sync has since
 * written the file's pages without error. Failed pages stay dirty, so a later gemini_dev_sync
 * retries them and clears the error once they reach the backing.
 */
template <unsigned B = GEMINI_BK_ALL>
__device__ static inline int gemini_dev_sync(struct gemini_dev *d, int fd)
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

	if (!gm_bk_ok<B>(d))
		return -GM_EOPNOTSUPP;
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
			rc = gm_writeback_unlock<B>(d, s, (int)i, k);
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
			int st = gm_raw_cmd<B>(d, NVME_CMD_FLUSH, 0, 0, d->data);

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
