/* libFuzzer target for the split virtqueue parser (devices/virtio/virtqueue.c): random bytes as
 * the guest RAM holding the rings, the descriptors and the indirect tables a hostile driver
 * wrote.
 *
 * Input: [0] queue size exponent (low 4 bits, size 1..32768 capped to what fits) and features
 * (bit 4: event index, bit 5: indirect descriptors); [1] how many chains to take; then the
 * guest RAM (64 KiB, zero-padded): descriptors at 0, available ring at 0x8000, used ring at
 * 0xa000. Every chain taken must lie in RAM, within the segment limit, with the lengths it
 * reports; a refused ring stays refused; pushing and notifying never touch memory outside.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "guest_mem.h"
#include "virtio/virtqueue.h"

#define RAM   0x10000
#define AVAIL 0x8000
#define USED  0xa000

static uint8_t ram[RAM];
static struct virtq_chain chain;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct guest_mem gm;
	struct virtq q;
	char err[256];
	uint16_t qsize;
	unsigned rounds, i, k;

	if (size < 2)
		return 0;
	qsize = (uint16_t)(1u << (data[0] & 15));
	/* desc table below AVAIL, used ring inside RAM */
	while (qsize > 1 && (qsize * 16u > AVAIL || USED + 6 + 8u * qsize > RAM))
		qsize >>= 1;
	rounds = data[1] % 64 + 1;
	memset(ram, 0, sizeof(ram));
	memcpy(ram, data + 2, size - 2 < RAM ? size - 2 : RAM);
	gmem_init_buffer(&gm, ram, RAM);
	if (virtq_start(&q, &gm, qsize, 0, AVAIL, USED, data[0] & 16, data[0] & 32, err,
			sizeof(err)))
		abort(); /* a valid layout must be accepted */
	for (i = 0; i < rounds; i++) {
		uint64_t in = 0, out = 0;
		int r = virtq_pop(&q, &chain, err, sizeof(err));

		if (r < 0) {
			if (!q.broken || !err[0])
				abort();
			if (virtq_pop(&q, &chain, err, sizeof(err)) != 0 || virtq_has_avail(&q))
				abort();
			break;
		}
		if (!r) {
			if (!virtq_has_avail(&q))
				break;
			continue;
		}
		if (chain.head >= qsize || !chain.nseg || chain.nseg > VIRTQ_MAX_SEGS)
			abort();
		for (k = 0; k < chain.nseg; k++) {
			const struct virtq_seg *s = &chain.seg[k];
			uint8_t *h = s->host;

			if (h < ram || h + s->len > ram + RAM || h - ram != (ptrdiff_t)s->gpa)
				abort();
			if (k && chain.seg[k - 1].writable && !s->writable)
				abort();
			if (s->writable)
				in += s->len;
			else
				out += s->len;
		}
		if (in != chain.in_len || out != chain.out_len)
			abort();
		/* the device writes what the chain offers (the writable buffers may overlap the
		 * rings: a hostile driver's choice, still inside RAM) */
		virtq_push(&q, chain.head,
			   virtq_chain_write(&chain, data, (uint32_t)(size < 4096 ? size : 4096)));
		(void)virtq_should_notify(&q);
	}
	return 0;
}
