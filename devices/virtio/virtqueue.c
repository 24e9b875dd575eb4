/* Split virtqueue walking (virtqueue.h). The rings live in guest RAM that the driver may
 * rewrite at any moment: every descriptor is copied once before it is judged, every index is
 * bounded by the queue size, every buffer is checked to lie inside RAM. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "virtqueue.h"

static int virtq_fail(struct virtq *q, char *err, unsigned errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int virtq_fail(struct virtq *q, char *err, unsigned errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (err && errlen)
		vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	if (q)
		q->broken = true;
	return -EINVAL;
}

void virtq_reset(struct virtq *q)
{
	memset(q, 0, sizeof(*q));
}

int virtq_start(struct virtq *q, const struct guest_mem *gm, uint16_t size, uint64_t desc,
		uint64_t avail, uint64_t used, bool event_idx, bool indirect, char *err,
		unsigned errlen)
{
	uint64_t dlen = (uint64_t)size * sizeof(struct virtq_desc);
	uint64_t alen = 6 + 2 * (uint64_t)size, ulen = 6 + 8 * (uint64_t)size;

	virtq_reset(q);
	if (!size || (size & (size - 1)) || size > VIRTQ_MAX_SIZE)
		return virtq_fail(NULL, err, errlen, "queue size %u is not a power of two in 1..%u",
				  size, VIRTQ_MAX_SIZE);
	if ((desc & 15) || (avail & 1) || (used & 3))
		return virtq_fail(NULL, err, errlen,
				  "ring areas misaligned (desc 0x%llx, avail 0x%llx, used 0x%llx)",
				  (unsigned long long)desc, (unsigned long long)avail,
				  (unsigned long long)used);
	q->desc = gmem_ptr(gm, desc, dlen);
	q->avail = gmem_ptr(gm, avail, alen);
	q->used = gmem_ptr(gm, used, ulen);
	if (!q->desc || !q->avail || !q->used) {
		virtq_reset(q);
		return virtq_fail(
		    NULL, err, errlen,
		    "ring areas outside guest RAM (desc 0x%llx+%llu, avail 0x%llx+%llu, "
		    "used 0x%llx+%llu)",
		    (unsigned long long)desc, (unsigned long long)dlen, (unsigned long long)avail,
		    (unsigned long long)alen, (unsigned long long)used, (unsigned long long)ulen);
	}
	q->gm = gm;
	q->size = size;
	q->desc_gpa = desc;
	q->avail_gpa = avail;
	q->used_gpa = used;
	q->event_idx = event_idx;
	q->indirect = indirect;
	q->ready = true;
	return 0;
}

static uint16_t virtq_load16(const volatile uint16_t *p)
{
	return __atomic_load_n((const uint16_t *)p, __ATOMIC_ACQUIRE);
}

static void virtq_store16(volatile uint8_t *base, uint64_t off, uint16_t v)
{
	__atomic_store_n((uint16_t *)(base + off), v, __ATOMIC_RELEASE);
}

/* avail: flags, idx, ring[size], used_event */
#define AVAIL_IDX	    1
#define AVAIL_RING(i)	    (2 + (i))
#define AVAIL_USED_EVENT(q) (2 + (q)->size)
/* used: flags (0), idx (2), ring at 4 of {le32 id, le32 len}, avail_event after the ring */
#define USED_IDX_OFF		2
#define USED_RING_OFF(i)	(4 + 8 * (uint64_t)(i))
#define USED_AVAIL_EVENT_OFF(q) (4 + 8 * (uint64_t)(q)->size)

int virtq_pop(struct virtq *q, struct virtq_chain *c, char *err, unsigned errlen)
{
	const struct virtq_desc *table;
	uint16_t avail_idx, head, idx;
	unsigned tsize, walked = 0;
	bool in_indirect = false, seen_writable = false;

	if (!q->ready || q->broken)
		return 0;
	avail_idx = virtq_load16(&q->avail[AVAIL_IDX]);
	if ((uint16_t)(avail_idx - q->last_avail) > q->size)
		return virtq_fail(
		    q, err, errlen, "available index %u is %u entries past %u in a queue of %u",
		    avail_idx, (uint16_t)(avail_idx - q->last_avail), q->last_avail, q->size);
	if (avail_idx == q->last_avail)
		return 0;
	head = virtq_load16(&q->avail[AVAIL_RING(q->last_avail & (q->size - 1))]);
	if (head >= q->size)
		return virtq_fail(q, err, errlen, "available entry %u names descriptor %u of %u",
				  q->last_avail, head, q->size);
	memset(c, 0, offsetof(struct virtq_chain, seg));
	c->head = head;
	table = q->desc;
	tsize = q->size;
	idx = head;
	for (;;) {
		struct virtq_desc d;
		void *host;

		/* one copy: the driver may rewrite the descriptor while we judge it */
		memcpy(&d, &table[idx], sizeof(d));
		if (d.flags & VIRTQ_DESC_F_INDIRECT) {
			if (!q->indirect)
				return virtq_fail(q, err, errlen,
						  "descriptor %u is indirect, a feature not "
						  "negotiated",
						  idx);
			if (in_indirect)
				return virtq_fail(q, err, errlen,
						  "indirect descriptor %u inside an indirect table",
						  idx);
			if (d.flags & VIRTQ_DESC_F_NEXT)
				return virtq_fail(q, err, errlen,
						  "descriptor %u is both indirect and chained",
						  idx);
			if (!d.len || d.len % sizeof(struct virtq_desc) ||
			    d.len / sizeof(struct virtq_desc) > VIRTQ_MAX_SIZE)
				return virtq_fail(
				    q, err, errlen,
				    "indirect table of %u bytes (descriptor %u) is not "
				    "1..%u descriptors",
				    d.len, idx, VIRTQ_MAX_SIZE);
			table = gmem_ptr(q->gm, d.addr, d.len);
			if (!table)
				return virtq_fail(q, err, errlen,
						  "indirect table 0x%llx+%u lies outside guest RAM",
						  (unsigned long long)d.addr, d.len);
			tsize = d.len / sizeof(struct virtq_desc);
			in_indirect = true;
			walked = 0;
			idx = 0;
			continue;
		}
		host = gmem_ptr(q->gm, d.addr, d.len);
		if (!host)
			return virtq_fail(q, err, errlen,
					  "descriptor %u: buffer 0x%llx+%u lies outside guest RAM",
					  idx, (unsigned long long)d.addr, d.len);
		if (d.flags & VIRTQ_DESC_F_WRITE)
			seen_writable = true;
		else if (seen_writable)
			return virtq_fail(q, err, errlen,
					  "descriptor %u: a readable buffer after a writable one",
					  idx);
		if (c->nseg >= VIRTQ_MAX_SEGS)
			return virtq_fail(q, err, errlen, "chain from %u longer than %u buffers",
					  head, VIRTQ_MAX_SEGS);
		c->seg[c->nseg++] =
		    (struct virtq_seg){host, d.addr, d.len, (d.flags & VIRTQ_DESC_F_WRITE) != 0};
		/* at most VIRTQ_MAX_SEGS lengths of 32 bits: no 64-bit overflow */
		if (d.flags & VIRTQ_DESC_F_WRITE)
			c->in_len += d.len;
		else
			c->out_len += d.len;
		if (!(d.flags & VIRTQ_DESC_F_NEXT))
			break;
		if (d.next >= tsize)
			return virtq_fail(q, err, errlen,
					  "descriptor %u: next %u past the table of %u", idx,
					  d.next, tsize);
		/* a chain visits each descriptor at most once: more steps than entries is a loop */
		if (++walked >= tsize)
			return virtq_fail(q, err, errlen, "descriptor chain from %u loops", head);
		idx = d.next;
	}
	if (c->in_len > UINT32_MAX)
		return virtq_fail(q, err, errlen,
				  "chain from %u offers %llu writable bytes, over 4 GiB", head,
				  (unsigned long long)c->in_len);
	q->last_avail++;
	return 1;
}

void virtq_push(struct virtq *q, uint16_t head, uint32_t len)
{
	volatile uint8_t *e;
	uint32_t id = head;

	if (!q->ready)
		return;
	e = q->used + USED_RING_OFF(q->used_idx & (q->size - 1));
	memcpy((void *)e, &id, 4);
	memcpy((void *)(e + 4), &len, 4);
	q->used_idx++;
	/* the element is visible before the index that publishes it */
	virtq_store16(q->used, USED_IDX_OFF, q->used_idx);
}

bool virtq_should_notify(struct virtq *q)
{
	uint16_t event, old = q->signalled_used, now = q->used_idx;
	bool valid = q->signalled_valid;

	if (!q->ready)
		return false;
	/* our used index store against the driver's flags / used_event store */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (!q->event_idx)
		return !(virtq_load16(&q->avail[0]) & VIRTQ_AVAIL_F_NO_INTERRUPT);
	event = virtq_load16(&q->avail[AVAIL_USED_EVENT(q)]);
	q->signalled_used = now;
	q->signalled_valid = true;
	/* the spec's vring_need_event(): did used_idx pass used_event since the last interrupt */
	return !valid || (uint16_t)(now - event - 1) < (uint16_t)(now - old);
}

bool virtq_has_avail(struct virtq *q)
{
	if (!q->ready || q->broken)
		return false;
	if (q->event_idx) {
		virtq_store16(q->used, USED_AVAIL_EVENT_OFF(q), q->last_avail);
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
	}
	return virtq_load16(&q->avail[AVAIL_IDX]) != q->last_avail;
}

void virtq_unpop(struct virtq *q, uint16_t n)
{
	if (!q->ready || q->broken)
		return;
	q->last_avail -= n;
	/* the chains are there already: the driver's next addition is what must kick */
	if (q->event_idx) {
		virtq_store16(q->used, USED_AVAIL_EVENT_OFF(q), virtq_load16(&q->avail[AVAIL_IDX]));
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
	}
}

uint32_t virtq_chain_write(const struct virtq_chain *c, const void *src, uint32_t len)
{
	const uint8_t *s = src;
	uint32_t done = 0;
	unsigned i;

	for (i = 0; i < c->nseg && done < len; i++) {
		uint32_t n;

		if (!c->seg[i].writable)
			continue;
		n = c->seg[i].len < len - done ? c->seg[i].len : len - done;
		memcpy(c->seg[i].host, s + done, n);
		done += n;
	}
	return done;
}
