/* libFuzzer target for what a live-migration destination reads from its source
 * (migrate_proto.h): a byte stream cut into frames as vm_migrate_receive cuts it, every header
 * checked, every payload handed to the receiver's state machine, and a MEMORY frame's pages
 * copied into a RAM buffer of the announced size (at most 1 MiB here) at the offset it names.
 * Every byte is as untrusted as a peer on the migration socket. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "migrate_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_RAM (1u << 20)

static uint8_t ram[FZ_RAM];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mig_rx rx;
	size_t pos = 0;
	char err[256];

	mig_rx_init(&rx);
	while (size - pos >= sizeof(struct mig_hdr) && rx.phase != MIG_RX_END) {
		struct mig_hdr h;
		uint64_t off = 0, n = 0;
		const uint8_t *pages = NULL;
		uint8_t *payload;

		memcpy(&h, data + pos, sizeof(h));
		pos += sizeof(h);
		if (mig_check_hdr(&h, err, sizeof(err)) ||
		    mig_rx_expect(&rx, h.type, err, sizeof(err)))
			break;
		if (h.len > size - pos)
			break; /* the peer hung up mid-frame */
		/* a copy of exactly the payload: ASan sees any read past it */
		payload = malloc(h.len ? h.len : 1);
		if (!payload)
			break;
		memcpy(payload, data + pos, h.len);
		pos += h.len;
		if (mig_rx_frame(&rx, h.type, payload, h.len, &off, &pages, &n, err, sizeof(err))) {
			free(payload);
			break;
		}
		if (h.type == MIG_HELLO && rx.hello.memory > FZ_RAM) {
			free(payload);
			break; /* the real receiver builds a VM this big; here the buffer is fixed
				*/
		}
		if (n) {
			if (off + n > rx.hello.memory || off + n < off)
				abort(); /* the checks let a page run past the RAM */
			memcpy(ram + off, pages, n);
		}
		free(payload);
	}
	return 0;
}
