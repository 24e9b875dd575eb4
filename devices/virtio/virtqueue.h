/* The split virtqueue of virtio 1.x (spec 2.7) as a device walks it: descriptor chains popped
 * from the available ring with every guest-written index, address and length checked, used
 * elements pushed, and notifications suppressed with the event index (VIRTIO_F_EVENT_IDX). */
#ifndef LVMM_VIRTQUEUE_H
#define LVMM_VIRTQUEUE_H

#include <stdbool.h>
#include <stdint.h>

#include "guest_mem.h"

#define VIRTQ_MAX_SIZE 32768u /* the spec's largest split queue */
#define VIRTQ_MAX_SEGS 256u   /* buffers of one chain a device takes; longer chains are refused */

#define VIRTQ_DESC_F_NEXT	   1
#define VIRTQ_DESC_F_WRITE	   2
#define VIRTQ_DESC_F_INDIRECT	   4
#define VIRTQ_AVAIL_F_NO_INTERRUPT 1

#define VIRTIO_RING_F_INDIRECT_DESC 28
#define VIRTIO_RING_F_EVENT_IDX	    29

struct virtq_desc {
	uint64_t addr;
	uint32_t len;
	uint16_t flags;
	uint16_t next;
} __attribute__((packed));

struct virtq_seg {
	void *host; /* checked host pointer for [gpa, gpa+len) */
	uint64_t gpa;
	uint32_t len;
	bool writable;
};

/* One chain popped: readable segments first, then writable (the spec's order). */
struct virtq_chain {
	uint16_t head;
	unsigned nseg;
	uint64_t out_len; /* bytes the driver wrote (readable by the device) */
	uint64_t in_len;  /* bytes the device may write */
	struct virtq_seg seg[VIRTQ_MAX_SEGS];
};

struct virtq {
	const struct guest_mem *gm;
	uint16_t size; /* entries; a power of two, 1..VIRTQ_MAX_SIZE */
	uint64_t desc_gpa, avail_gpa, used_gpa;
	bool event_idx, indirect; /* negotiated features */
	bool ready;
	/* host views of the three areas, checked once by virtq_start() */
	struct virtq_desc *desc;
	volatile uint16_t *avail; /* flags, idx, ring[size], used_event */
	volatile uint8_t *used;	  /* flags, idx, ring[size] of {id, len}, avail_event */
	uint16_t last_avail;	  /* next available entry to take */
	uint16_t used_idx;	  /* next used entry to fill */
	uint16_t signalled_used;  /* used_idx at the last interrupt */
	bool signalled_valid;
	bool broken; /* the driver broke the ring: nothing more is taken until a reset */
};

/* Sets the queue up from the addresses the driver programmed: 0, or -EINVAL with a message
 * when the size is not a power of two in range, an area is misaligned or lies outside RAM. */
int virtq_start(struct virtq *q, const struct guest_mem *gm, uint16_t size, uint64_t desc,
		uint64_t avail, uint64_t used, bool event_idx, bool indirect, char *err,
		unsigned errlen);
void virtq_reset(struct virtq *q);

/* Takes the next available chain: 1 with c filled, 0 when the ring is empty, -EINVAL with a
 * message when the driver wrote something invalid (index past the ring, a loop, a buffer
 * outside RAM, lengths that overflow, a readable buffer after a writable one, a bad indirect
 * table); the queue is then broken until virtq_reset(). */
int virtq_pop(struct virtq *q, struct virtq_chain *c, char *err, unsigned errlen);

/* Returns a chain to the driver with len bytes written into its writable segments. */
void virtq_push(struct virtq *q, uint16_t head, uint32_t len);

/* Whether the driver wants an interrupt for what was pushed since the last one (event index
 * or VIRTQ_AVAIL_F_NO_INTERRUPT). Call once after a batch of pushes. */
bool virtq_should_notify(struct virtq *q);

/* Whether entries wait in the available ring. With the event index it also asks the driver to
 * kick at the next entry (avail_event), so a device that drains the ring misses none. */
bool virtq_has_avail(struct virtq *q);

/* Gives back the last n chains popped and not pushed (a device that found too few buffers for
 * what it holds): they are taken again later, and the driver's next buffer kicks the device. */
void virtq_unpop(struct virtq *q, uint16_t n);

/* Copies up to len bytes into the chain's writable segments; returns bytes written. */
uint32_t virtq_chain_write(const struct virtq_chain *c, const void *src, uint32_t len);

#endif
