/* libFuzzer target for virtio-vsock's packet parser (devices/virtio/virtio_vsock.c): packets a
 * hostile guest queues on the tx ring, run through the device as if the ring carried them, with
 * a host program listening at PATH_1 so that connection requests can succeed.
 *
 * Input: packets, each [flags:1][length:2][bytes]: the bytes are the packet (header and payload,
 * cut or padded by the length); flags bit 0 sets the header's addresses to a well-formed guest
 * -> host pair (CID 3 -> 2, stream type) so the fuzzer reaches the connection logic, bits 1-2
 * pick the operation among REQUEST, RW, SHUTDOWN and RST. Connections persist across inputs,
 * as in a guest that keeps sending; nothing may crash, leak an fd past the connection limit or
 * block. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "guest_mem.h"
#include "virtio/virtio_vsock.h"

static void *dev;
static uint8_t ram[1 << 16];
static struct guest_mem gm;

static void setup(void)
{
	static char dir[] = "/tmp/lvmm-fuzz-vsock-XXXXXX";
	struct virtio_vsock_config c = {.cid = 3};
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct dev_host h = {.gm = &gm, .cpus = 1};
	char err[256];
	int lfd;

	gmem_init_buffer(&gm, ram, sizeof(ram));
	if (!mkdtemp(dir))
		abort();
	snprintf(c.socket, sizeof(c.socket), "%s/v.sock", dir);
	if (virtio_vsock_model.create(&h, &c, "vsock0", 0, &dev, err, sizeof(err))) {
		fprintf(stderr, "fuzz_vsock: %s\n", err);
		abort();
	}
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s_1", c.socket);
	lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 512))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint16_t ops[4] = {1, 5, 4, 3}; /* REQUEST, RW, SHUTDOWN, RST */
	struct fz_in in = {data, size};
	uint8_t pkt[2048];

	if (!dev)
		setup();
	while (in.n >= 3) {
		unsigned flags = (unsigned)fz_take(&in, 1), len = (unsigned)fz_take(&in, 2);

		if (len > sizeof(pkt))
			len = sizeof(pkt);
		memset(pkt, 0, sizeof(pkt));
		for (unsigned i = 0; i < len && in.n; i++)
			pkt[i] = (uint8_t)fz_take(&in, 1);
		if ((flags & 1) && len >= 44) {
			memset(pkt, 0, 16);
			pkt[0] = 3;   /* src_cid */
			pkt[8] = 2;   /* dst_cid */
			pkt[16] &= 7; /* small guest ports, host port 0..3 */
			memset(pkt + 17, 0, 3);
			pkt[20] &= 3;
			memset(pkt + 21, 0, 3);
			pkt[28] = 1; /* stream */
			pkt[29] = 0;
			pkt[30] = (uint8_t)ops[(flags >> 1) & 3];
			pkt[31] = 0;
		}
		virtio_vsock_tx_packet(dev, pkt, len);
	}
	return 0;
}
