/* libFuzzer target for the vhost-user reply path (devices/virtio/vhost_user.c): bytes a hostile
 * back end writes on the socket, read by the front end as the replies to its requests.
 *
 * Input: [mode:1][bytes]: the bytes are what the back end sends, then it shuts its side (a
 * reply cut short ends in a hangup, never in a wait). Mode bit 0: the whole negotiation of a
 * connect (SET_OWNER, GET_FEATURES, protocol features, GET_QUEUE_NUM) reads them; else one
 * request, picked by bits 1-3, with REPLY_ACK on by bit 4. Also the bytes through the reply
 * parser itself. Nothing may crash, leak an fd or block. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "virtio/vhost_user.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint32_t reqs[8] = {
	    VHOST_USER_GET_FEATURES,	      VHOST_USER_GET_PROTOCOL_FEATURES,
	    VHOST_USER_GET_QUEUE_NUM,	      VHOST_USER_GET_VRING_BASE,
	    VHOST_USER_SET_FEATURES,	      VHOST_USER_SET_VRING_NUM,
	    VHOST_USER_SET_PROTOCOL_FEATURES, VHOST_USER_RESET_DEVICE,
	};
	struct vhost_user u;
	char err[256];
	uint64_t v = 0;
	int sv[2];
	unsigned mode;

	if (size < 1 || size > 8192)
		return 0;
	mode = data[0];
	data++;
	size--;
	vhost_user_parse_reply(data, size, reqs[(mode >> 1) & 7], &v, err, sizeof(err));
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return 0;
	if (size && write(sv[1], data, size) != (ssize_t)size) {
		close(sv[0]);
		close(sv[1]);
		return 0;
	}
	shutdown(sv[1], SHUT_WR);
	if (mode & 1) {
		if (vhost_user_open_fd(&u, "fuzz", sv[0], 2, err, sizeof(err)) == 0)
			vhost_user_close(&u);
	} else {
		memset(&u, 0, sizeof(u));
		u.fd = sv[0];
		u.timeout_ms = 50;
		snprintf(u.name, sizeof(u.name), "fuzz");
		if (mode & 16)
			u.protocol = 1ULL << VHOST_USER_PROTO_REPLY_ACK;
		vhost_user_call(&u, reqs[(mode >> 1) & 7], &v, 8, NULL, 0, &v);
		vhost_user_close(&u);
	}
	close(sv[1]);
	return 0;
}
