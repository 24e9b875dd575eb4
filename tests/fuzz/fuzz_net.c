/* libFuzzer target for virtio-net's parsers (devices/virtio/virtio_net.c): the virtio_net_hdr_v1
 * and frame checks of the transmit path, and control-queue commands, as a hostile guest queues
 * them, on a device whose tap is one end of a socket pair.
 *
 * Input: records of [kind:1][length:2][bytes]: kind bit 0 set, a control command (class,
 * command, data); else bit 2 set, a transmit chain through the whole transmit path (header copy
 * across segment boundaries, checks, the write to the fd): the bytes cut into up to 8 segments
 * at lengths the next bytes give, the last ones writable when bit 3 says so; else a frame
 * (header included) through the header checks alone. Bit 1 sets the header's flags and gso
 * type from the next byte's low bits so the offload checks are reached more often.
 * Nothing may crash, read past its input or leave the device wedged. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "guest_mem.h"
#include "virtio/virtio_net.h"

static void *dev;
static int peer = -1;
static struct virtq_chain chain;
static uint8_t ram[1 << 16];
static struct guest_mem gm;

static void setup(void)
{
	struct virtio_net_config c = {.num_queues = 2, .nfds = 1};
	struct dev_host h = {.gm = &gm, .cpus = 1};
	char err[256];
	int sv[2];

	gmem_init_buffer(&gm, ram, sizeof(ram));
	if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv))
		abort();
	c.fds[0] = sv[0];
	peer = sv[1];
	if (virtio_net_model.create(&h, &c, "net0", 0, &dev, err, sizeof(err))) {
		fprintf(stderr, "fuzz_net: %s\n", err);
		abort();
	}
	close(sv[0]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t gso[4] = {0, 1, 3, 4};
	struct fz_in in = {data, size};
	static uint8_t buf[70000];

	if (!dev)
		setup();
	while (in.n >= 3) {
		unsigned kind = (unsigned)fz_take(&in, 1), len = (unsigned)fz_take(&in, 2);

		memset(buf, 0, len + 2);
		for (unsigned i = 0; i < len && in.n; i++)
			buf[i] = (uint8_t)fz_take(&in, 1);
		if (kind & 1) {
			uint8_t ack = virtio_net_ctrl_cmd(dev, buf, len);

			if (ack > 1)
				abort(); /* only OK or ERR exist */
			continue;
		}
		if ((kind & 2) && len >= 2) {
			buf[0] &= 3;
			buf[1] = gso[buf[1] & 3] | (buf[1] & 0x80);
		}
		if (kind & 4) {
			unsigned nseg = 1 + (len ? buf[len - 1] % 8 : 0), off = 0;
			char sink[70000];

			memset(&chain, 0, sizeof(chain));
			for (unsigned i = 0; i < nseg && off <= len; i++) {
				unsigned sl =
				    i + 1 == nseg ? len - off : (buf[i] * 37u) % (len - off + 1);
				bool w = (kind & 8) && i + 1 == nseg && nseg > 1;

				chain.seg[i] = (struct virtq_seg){buf + off, off, sl, w};
				if (w)
					chain.in_len += sl;
				else
					chain.out_len += sl;
				chain.nseg++;
				off += sl;
			}
			virtio_net_tx_chain(dev, &chain);
			while (recv(peer, sink, sizeof(sink), MSG_DONTWAIT) > 0)
				;
			continue;
		}
		(void)virtio_net_tx_check(dev, buf, len);
	}
	return 0;
}
