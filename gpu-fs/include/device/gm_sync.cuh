/* Part of gemini_device.cuh (include that): the GPU side's synchronisation primitives. Acquire
 * and release atomics at GPU scope, the CQE status load at system scope, the GPU clock and the
 * bounded wait every spin of libgemini is built on, the shard spin lock and the statistics
 * counters. Errno values are the GPU side's own (no errno.h in device code). */
#ifndef GM_SYNC_CUH
#define GM_SYNC_CUH

#include <stdint.h>

#include "lightiov/nvme.h"

#define GM_ETIMEDOUT  110
#define GM_EIO	      5
#define GM_EOPNOTSUPP 95

#ifdef __CUDACC__

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

__device__ static inline void gm_add_release(int *p, int v)
{
	asm volatile("red.release.gpu.global.add.s32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ static inline void gm_sub_release(int *p, int v)
{
	gm_add_release(p, -v);
}

/* Adds v, returns the old value; later loads see what was released before that value. */
__device__ static inline int gm_add_acq_rel(int *p, int v)
{
	int old;

	asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], %2;"
		     : "=r"(old)
		     : "l"(p), "r"(v)
		     : "memory");
	return old;
}

/* Loads that bypass the SM's incoherent L1: values other SMs change under the caller. */
__device__ static inline int gm_ld_relaxed(const int *p)
{
	int v;

	asm volatile("ld.relaxed.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
	return v;
}

__device__ static inline unsigned long long gm_ld_relaxed_u64(const unsigned long long *p)
{
	unsigned long long v;

	asm volatile("ld.relaxed.gpu.global.b64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
	return v;
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

/* A CQE's status word (nvmeq_cqe_status), loaded with acquire at system scope: what the
 * controller wrote before it is visible to the loads that follow, without the system-wide fence
 * per poll that nvmeq_consume_fence would add. */
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

#endif /* __CUDACC__ */

#endif
