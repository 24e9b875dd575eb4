/* The front end of the vhost-user protocol (QEMU's docs/interop/vhost-user.rst) over one Unix
 * stream socket: messages with their fds out, replies in. Every reply is untrusted: its type,
 * flags, size and payload are checked, and it must come within a timeout. */
#ifndef LVMM_VHOST_USER_H
#define LVMM_VHOST_USER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "guest_mem.h"

struct sockaddr_un;

enum vhost_user_req {
	VHOST_USER_GET_FEATURES = 1,
	VHOST_USER_SET_FEATURES = 2,
	VHOST_USER_SET_OWNER = 3,
	VHOST_USER_SET_MEM_TABLE = 5,
	VHOST_USER_SET_VRING_NUM = 8,
	VHOST_USER_SET_VRING_ADDR = 9,
	VHOST_USER_SET_VRING_BASE = 10,
	VHOST_USER_GET_VRING_BASE = 11,
	VHOST_USER_SET_VRING_KICK = 12,
	VHOST_USER_SET_VRING_CALL = 13,
	VHOST_USER_SET_VRING_ERR = 14,
	VHOST_USER_GET_PROTOCOL_FEATURES = 15,
	VHOST_USER_SET_PROTOCOL_FEATURES = 16,
	VHOST_USER_GET_QUEUE_NUM = 17,
	VHOST_USER_SET_VRING_ENABLE = 18,
	VHOST_USER_RESET_DEVICE = 34,
};

#define VHOST_USER_VERSION	   0x1u
#define VHOST_USER_VERSION_MASK	   0x3u
#define VHOST_USER_REPLY	   0x4u
#define VHOST_USER_NEED_REPLY	   0x8u
#define VHOST_USER_HDR_SIZE	   12u
#define VHOST_USER_MAX_REGIONS	   8u
#define VHOST_USER_PAYLOAD_MAX	   (8u + 32u * VHOST_USER_MAX_REGIONS) /* the memory table */
#define VHOST_USER_VRING_NOFD	   0x100u /* SET_VRING_KICK/CALL/ERR without an fd */
#define VHOST_USER_F_PROTOCOL	   30	  /* the feature bit that enables protocol features */
#define VHOST_USER_PROTO_MQ	   0
#define VHOST_USER_PROTO_REPLY_ACK 3
#define VHOST_USER_PROTO_RESET	   13
/* what lvmm speaks of the protocol features */
#define VHOST_USER_PROTO_OURS                                                                      \
	((1ULL << VHOST_USER_PROTO_MQ) | (1ULL << VHOST_USER_PROTO_REPLY_ACK) |                    \
	 (1ULL << VHOST_USER_PROTO_RESET))
#define VHOST_USER_TIMEOUT_MS	 2000 /* a reply later than this breaks the connection */
#define VHOST_USER_OP_TIMEOUT_MS 5000 /* an operation of many messages, all of them */

struct vhost_user {
	int fd;
	unsigned timeout_ms;
	uint64_t op_deadline; /* CLOCK_MONOTONIC ms: the current operation's end (0: none) */
	uint64_t features;    /* the back end's (GET_FEATURES) */
	uint64_t protocol;    /* negotiated protocol features */
	bool broken;	      /* a failure or hangup: no further messages */
	char name[64];
	char why[160]; /* the failure that broke it */
	uint64_t msgs, replies;
};

/* Opens an operation of many messages (the negotiation at open, a DRIVER_OK's hand-over of the
 * queues, a reset's stop): every call until vhost_user_op_end answers by now + ms at the latest,
 * so a back end answering each message just in time cannot hold the caller for minutes. */
void vhost_user_op_begin(struct vhost_user *u, unsigned ms);
void vhost_user_op_end(struct vhost_user *u);

/* connect(2) of a stream socket fd to a back end's socket, bounded by VHOST_USER_TIMEOUT_MS (a
 * back end that never accepts fills its listener's queue): 0, or -1 with errno (EAGAIN: timed
 * out). The same bound holds the fd's later blocking sends. */
int vhost_user_connect_fd(int fd, const struct sockaddr_un *sa);

/* Connects to path and negotiates: SET_OWNER, GET_FEATURES, protocol features (ours that the
 * back end offers), GET_QUEUE_NUM when MQ is offered (at least nqueues wanted). 0 or a negative
 * errno with err set; u->fd is -1 on failure. */
int vhost_user_connect(struct vhost_user *u, const char *name, const char *path, unsigned nqueues,
		       char *err, unsigned errlen);
/* Takes over a connected socket (one connected before a jail; tests) and negotiates as
 * vhost_user_connect. */
int vhost_user_open_fd(struct vhost_user *u, const char *name, int fd, unsigned nqueues, char *err,
		       unsigned errlen);
void vhost_user_close(struct vhost_user *u);

/* One request with an optional payload and fds; with REPLY_ACK negotiated (or a request that
 * has a reply) the reply is awaited. reply (8 bytes) may be NULL. 0 or a negative errno; any
 * failure breaks the connection (u->why says what). */
int vhost_user_call(struct vhost_user *u, uint32_t req, const void *payload, uint32_t len,
		    const int *fds, unsigned nfds, uint64_t *reply);
int vhost_user_set_u64(struct vhost_user *u, uint32_t req, uint64_t v);
int vhost_user_set_state(struct vhost_user *u, uint32_t req, uint32_t index, uint32_t num);
/* SET_VRING_KICK/CALL/ERR: fd < 0 sends the no-fd flag. */
int vhost_user_set_vring_fd(struct vhost_user *u, uint32_t req, uint32_t index, int fd);
int vhost_user_set_mem_table(struct vhost_user *u, const struct guest_mem *gm);

/* Checks one reply (header and payload as read) to request req whose payload must be 8 bytes:
 * the version, the REPLY flag, the type, the size. *val gets the payload. 0 or -EPROTO with
 * err set. The reply fuzz target's entry. */
int vhost_user_parse_reply(const uint8_t *buf, size_t len, uint32_t req, uint64_t *val, char *err,
			   unsigned errlen);

#endif
