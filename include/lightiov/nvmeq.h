/* The NVMe queue engine: ring arithmetic, phase tags, completion publication and the shadow
 * doorbell EventIdx test, for both ends of a queue pair (a controller that fetches SQEs and posts
 * CQEs; a driver that places SQEs and reaps CQEs). Every queue of the project runs on it: the
 * vNVMe controller, softssd, lightiov.ko, the backend client library, the bench guest, the
 * kernel module's test program and gpu-fs.
 *
 * Header-only and freestanding: user-space C, the kernel (__KERNEL__) and CUDA C++ (host and
 * device code) compile it as is. Indices are uint32_t (a queue has at most 65536 entries);
 * nothing here checks that a size is non-zero: queue creation does, once. */
#ifndef LIGHTIOV_NVMEQ_H
#define LIGHTIOV_NVMEQ_H

#include "nvme.h"

#if defined(__CUDACC__)
#define NVMEQ_FN static inline __host__ __device__
#else
#define NVMEQ_FN static inline
#endif

#ifdef __KERNEL__
#include <linux/compiler.h>
#include <asm/barrier.h>
#elif !defined(__cplusplus)
#include <stdbool.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- ring arithmetic (head: the consumer's index, tail: the producer's) ---- */

/* The index after idx. */
NVMEQ_FN uint32_t nvmeq_next(uint32_t idx, uint32_t size)
{
	return idx + 1 == size ? 0 : idx + 1;
}

/* Advances *idx by one; true when it wrapped to 0, where a CQ's phase tag flips. */
NVMEQ_FN bool nvmeq_step(uint32_t *idx, uint32_t size)
{
	if (++*idx == size) {
		*idx = 0;
		return true;
	}
	return false;
}

/* Entries between head and tail: produced, not consumed yet. */
NVMEQ_FN uint32_t nvmeq_used(uint32_t head, uint32_t tail, uint32_t size)
{
	return (tail + size - head) % size;
}

/* Entries the producer may still add: one slot always stays empty (full != empty). */
NVMEQ_FN uint32_t nvmeq_room(uint32_t head, uint32_t tail, uint32_t size)
{
	return size - 1 - nvmeq_used(head, tail, size);
}

NVMEQ_FN bool nvmeq_full(uint32_t head, uint32_t tail, uint32_t size)
{
	return nvmeq_next(tail, size) == head;
}

/* Whether a consumer may move its head from head to new_head, with tail the producer's index:
 * in range, and only over entries that were produced. A doorbell value that fails this is the
 * NVMe "invalid doorbell write value" error. */
NVMEQ_FN bool nvmeq_head_ok(uint32_t new_head, uint32_t head, uint32_t tail, uint32_t size)
{
	return new_head < size && nvmeq_used(head, new_head, size) <= nvmeq_used(head, tail, size);
}

/* ---- phase tags ---- */

/* A CQE's status word: the status field above the phase tag. */
NVMEQ_FN uint16_t nvmeq_status_word(uint16_t status, uint32_t phase)
{
	return (uint16_t)((uint16_t)(status << 1) | (phase & 1));
}

/* Whether a status word read at the consumer's head carries the phase the consumer expects,
 * i.e. the entry is new. */
NVMEQ_FN bool nvmeq_phase_ok(uint16_t status_word, uint32_t phase)
{
	return (status_word & 1) == (phase & 1);
}

/* The phase tag of entries written at position pos of the endless sequence of a queue of size
 * entries (positions 0..size-1 are the first pass, tagged 1). Consumers that count positions
 * rather than keep a phase bit (tickets) use it. */
NVMEQ_FN uint32_t nvmeq_pos_phase(uint64_t pos, uint32_t size)
{
	return ((pos / size) & 1) ? 0 : 1;
}

/* ---- shadow doorbells (NVMe 1.3 Doorbell Buffer Config) ---- */

/* Whether moving a doorbell from old_idx to new_idx passes the EventIdx the controller published,
 * in which case the driver must also write the real doorbell (the 16-bit wrap is the spec's). */
NVMEQ_FN bool nvmeq_need_event(uint32_t event_idx, uint32_t new_idx, uint32_t old_idx)
{
	return (uint16_t)(new_idx - event_idx - 1) < (uint16_t)(new_idx - old_idx);
}

/* ---- completion entries in shared memory ---- */

/* Orders the entry's other fields before its status word (publication) and the status word
 * before the rest (consumption). Queues are shared with other CPUs, GPUs and devices: the
 * kernel's dma_ barriers cover both kinds of peer. */
NVMEQ_FN void nvmeq_publish_fence(void)
{
#if defined(__CUDA_ARCH__)
	__threadfence_system();
#elif defined(__KERNEL__)
	dma_wmb();
#else
	__atomic_thread_fence(__ATOMIC_RELEASE);
#endif
}

NVMEQ_FN void nvmeq_consume_fence(void)
{
#if defined(__CUDA_ARCH__)
	__threadfence_system();
#elif defined(__KERNEL__)
	dma_rmb();
#else
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
#endif
}

/* Writes c into the CQE at e with the status word (c->status's field, tagged with phase) last:
 * a consumer polling the tag sees the whole entry once it sees the new tag. The status word is
 * naturally aligned (CQs are page aligned, entries 16 bytes), so its store is single-copy atomic.
 */
NVMEQ_FN void nvmeq_cqe_publish(volatile struct nvme_cqe *e, const struct nvme_cqe *c,
				uint32_t phase)
{
	volatile uint16_t *st = (volatile uint16_t *)((volatile uint8_t *)e + 14);

	e->dw0 = c->dw0;
	e->dw1 = c->dw1;
	e->sq_head = c->sq_head;
	e->sq_id = c->sq_id;
	e->cid = c->cid;
	nvmeq_publish_fence();
	*st = nvmeq_status_word(c->status, phase);
}

/* The status word of the CQE at e, read once (no fence: a polling loop calls it often). */
NVMEQ_FN uint16_t nvmeq_cqe_status(const volatile struct nvme_cqe *e)
{
	return *(const volatile uint16_t *)((const volatile uint8_t *)e + 14);
}

/* Takes the CQE at e if it is new (carries phase): copies it to *out, the status word as read
 * (phase tag in bit 0), and returns true; the fields are read after the tag. */
NVMEQ_FN bool nvmeq_cqe_take(const volatile struct nvme_cqe *e, uint32_t phase,
			     struct nvme_cqe *out)
{
	uint16_t st = nvmeq_cqe_status(e);

	if (!nvmeq_phase_ok(st, phase))
		return false;
	nvmeq_consume_fence();
	out->dw0 = e->dw0;
	out->dw1 = e->dw1;
	out->sq_head = e->sq_head;
	out->sq_id = e->sq_id;
	out->cid = e->cid;
	out->status = st;
	return true;
}

#ifdef __cplusplus
}
#endif

#endif
