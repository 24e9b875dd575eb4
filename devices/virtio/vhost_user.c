/* vhost-user front end (vhost_user.h): the messages lvmm sends to a back end such as virtiofsd
 * and the checks every reply passes before lvmm believes a byte of it. */
#include "vhost_user.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int vhu_fail(struct vhost_user *u, int r, const char *fmt, ...)
{
	va_list ap;

	if (!u->broken) {
		va_start(ap, fmt);
		vsnprintf(u->why, sizeof(u->why), fmt, ap);
		va_end(ap);
		fprintf(stderr, "vhost-user %s: %s\n", u->name, u->why);
	}
	u->broken = true;
	return r;
}

/* Waits for events on the socket until the deadline: 0, -ETIMEDOUT or -EPIPE on hangup. */
static int vhu_wait(struct vhost_user *u, short events, uint64_t deadline)
{
	for (;;) {
		struct pollfd p = {.fd = u->fd, .events = events};
		uint64_t t = now_ms();
		struct timespec ts;
		int n;

		if (t >= deadline)
			return -ETIMEDOUT;
		ts.tv_sec = (time_t)((deadline - t) / 1000);
		ts.tv_nsec = (long)((deadline - t) % 1000) * 1000000;
		n = ppoll(&p, 1, &ts, NULL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ETIMEDOUT;
		if (p.revents & events)
			return 0;
		if (p.revents & (POLLHUP | POLLERR | POLLNVAL))
			return -EPIPE;
	}
}

static int vhu_send(struct vhost_user *u, const uint8_t *buf, size_t len, const int *fds,
		    unsigned nfds, uint64_t deadline)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int) * VHOST_USER_MAX_REGIONS)];
	} cm;
	size_t off = 0;

	while (off < len) {
		struct iovec iov = {(void *)(buf + off), len - off};
		struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
		ssize_t n;
		int r;

		if (nfds && !off) {
			memset(&cm, 0, sizeof(cm));
			m.msg_control = cm.b;
			m.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
			cm.h.cmsg_level = SOL_SOCKET;
			cm.h.cmsg_type = SCM_RIGHTS;
			cm.h.cmsg_len = CMSG_LEN(sizeof(int) * nfds);
			memcpy(CMSG_DATA(&cm.h), fds, sizeof(int) * nfds);
		}
		n = sendmsg(u->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN)
			return -errno;
		r = vhu_wait(u, POLLOUT, deadline);
		if (r)
			return r;
	}
	return 0;
}

int vhost_user_connect_fd(int fd, const struct sockaddr_un *sa)
{
	struct timeval tv = {.tv_sec = VHOST_USER_TIMEOUT_MS / 1000,
			     .tv_usec = (VHOST_USER_TIMEOUT_MS % 1000) * 1000};
	int r;

	/* a listener whose queue is full (a back end that never accepts) holds a blocking
	 * connect for ever; with a send timeout it fails with EAGAIN */
	if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)))
		return -1;
	do
		r = connect(fd, (const struct sockaddr *)sa, sizeof(*sa));
	while (r < 0 && errno == EINTR);
	return r < 0 && errno == EISCONN ? 0 : r; /* an interrupted one that completed */
}

/* Reads exactly len bytes. The back end has no reason to pass fds: with no room for them the
 * kernel drops any it sends without installing them here (closing one on a FUSE mount the back
 * end serves could block on its flush). */
static int vhu_recv(struct vhost_user *u, uint8_t *buf, size_t len, uint64_t deadline)
{
	size_t off = 0;

	while (off < len) {
		struct iovec iov = {buf + off, len - off};
		struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
		ssize_t n = recvmsg(u->fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		int r;

		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n == 0)
			return -EPIPE;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN)
			return -errno;
		r = vhu_wait(u, POLLIN, deadline);
		if (r)
			return r;
	}
	return 0;
}

static const char *vhu_errname(int r)
{
	return r == -ETIMEDOUT ? "no reply in time"
	       : r == -EPIPE   ? "back end hung up"
			       : strerror(-r);
}

int vhost_user_parse_reply(const uint8_t *buf, size_t len, uint32_t req, uint64_t *val, char *err,
			   unsigned errlen)
{
	uint32_t h[3];

	*val = 0;
	if (len < VHOST_USER_HDR_SIZE) {
		snprintf(err, errlen, "reply to request %u: %zu bytes, shorter than a header", req,
			 len);
		return -EPROTO;
	}
	memcpy(h, buf, sizeof(h));
	if (h[0] != req) {
		snprintf(err, errlen, "reply to request %u is of type %u", req, h[0]);
		return -EPROTO;
	}
	if ((h[1] & VHOST_USER_VERSION_MASK) != VHOST_USER_VERSION || !(h[1] & VHOST_USER_REPLY)) {
		snprintf(err, errlen,
			 "reply to request %u: flags 0x%x (version 1 and REPLY wanted)", req, h[1]);
		return -EPROTO;
	}
	if (h[2] != 8 || len != VHOST_USER_HDR_SIZE + 8) {
		snprintf(err, errlen, "reply to request %u: payload of %u bytes (%zu read), not 8",
			 req, h[2], len - VHOST_USER_HDR_SIZE);
		return -EPROTO;
	}
	memcpy(val, buf + VHOST_USER_HDR_SIZE, 8);
	return 0;
}

static bool vhu_has_reply(uint32_t req)
{
	return req == VHOST_USER_GET_FEATURES || req == VHOST_USER_GET_PROTOCOL_FEATURES ||
	       req == VHOST_USER_GET_VRING_BASE || req == VHOST_USER_GET_QUEUE_NUM;
}

int vhost_user_call(struct vhost_user *u, uint32_t req, const void *payload, uint32_t len,
		    const int *fds, unsigned nfds, uint64_t *reply)
{
	uint8_t buf[VHOST_USER_HDR_SIZE + VHOST_USER_PAYLOAD_MAX];
	bool ack = !vhu_has_reply(req) && (u->protocol & (1ULL << VHOST_USER_PROTO_REPLY_ACK));
	uint32_t h[3] = {req, VHOST_USER_VERSION | (ack ? VHOST_USER_NEED_REPLY : 0), len};
	uint64_t deadline, val;
	char err[160];
	uint32_t size;
	int r;

	if (u->broken || u->fd < 0)
		return -EPIPE;
	if (len > VHOST_USER_PAYLOAD_MAX || nfds > VHOST_USER_MAX_REGIONS)
		return -EINVAL;
	memcpy(buf, h, sizeof(h));
	if (len)
		memcpy(buf + VHOST_USER_HDR_SIZE, payload, len);
	deadline = now_ms() + u->timeout_ms;
	if (u->op_deadline && u->op_deadline < deadline)
		deadline = u->op_deadline;
	r = vhu_send(u, buf, VHOST_USER_HDR_SIZE + len, fds, nfds, deadline);
	if (r)
		return vhu_fail(u, r, "request %u: %s", req, vhu_errname(r));
	u->msgs++;
	if (!ack && !vhu_has_reply(req))
		return 0;
	r = vhu_recv(u, buf, VHOST_USER_HDR_SIZE, deadline);
	if (r)
		return vhu_fail(u, r, "reply to request %u: %s", req, vhu_errname(r));
	memcpy(&size, buf + 8, 4);
	if (size > VHOST_USER_PAYLOAD_MAX)
		return vhu_fail(u, -EPROTO, "reply to request %u: payload of %u bytes", req, size);
	r = vhu_recv(u, buf + VHOST_USER_HDR_SIZE, size, deadline);
	if (r)
		return vhu_fail(u, r, "reply to request %u: %s", req, vhu_errname(r));
	r = vhost_user_parse_reply(buf, VHOST_USER_HDR_SIZE + size, req, &val, err, sizeof(err));
	if (r)
		return vhu_fail(u, r, "%s", err);
	u->replies++;
	if (ack && val)
		return vhu_fail(u, -EIO, "request %u refused (status %llu)", req,
				(unsigned long long)val);
	if (reply)
		*reply = val;
	return 0;
}

int vhost_user_set_u64(struct vhost_user *u, uint32_t req, uint64_t v)
{
	return vhost_user_call(u, req, &v, sizeof(v), NULL, 0, NULL);
}

int vhost_user_set_state(struct vhost_user *u, uint32_t req, uint32_t index, uint32_t num)
{
	uint32_t s[2] = {index, num};

	return vhost_user_call(u, req, s, sizeof(s), NULL, 0, NULL);
}

int vhost_user_set_vring_fd(struct vhost_user *u, uint32_t req, uint32_t index, int fd)
{
	uint64_t v = index | (fd < 0 ? VHOST_USER_VRING_NOFD : 0);

	return vhost_user_call(u, req, &v, sizeof(v), fd < 0 ? NULL : &fd, fd < 0 ? 0 : 1, NULL);
}

/* Every RAM slot, each with the memfd (the same file at its own offset). */
int vhost_user_set_mem_table(struct vhost_user *u, const struct guest_mem *gm)
{
	uint8_t p[VHOST_USER_PAYLOAD_MAX];
	int fds[VHOST_USER_MAX_REGIONS];
	uint32_t n = gm->nslots;

	if (gm->memfd < 0 || !n || n > VHOST_USER_MAX_REGIONS)
		return vhu_fail(u, -EINVAL, "guest RAM is not a memfd of 1..8 slots");
	memset(p, 0, sizeof(p));
	memcpy(p, &n, 4);
	for (uint32_t i = 0; i < n; i++) {
		uint64_t r[4] = {gm->slots[i].gpa, gm->slots[i].size,
				 (uint64_t)(uintptr_t)gm->slots[i].host, gm->slots[i].fd_off};

		memcpy(p + 8 + 32 * i, r, sizeof(r));
		fds[i] = gm->memfd;
	}
	return vhost_user_call(u, VHOST_USER_SET_MEM_TABLE, p, 8 + 32 * n, fds, n, NULL);
}

void vhost_user_op_begin(struct vhost_user *u, unsigned ms)
{
	u->op_deadline = now_ms() + ms;
}

void vhost_user_op_end(struct vhost_user *u)
{
	u->op_deadline = 0;
}

int vhost_user_open_fd(struct vhost_user *u, const char *name, int fd, unsigned nqueues, char *err,
		       unsigned errlen)
{
	uint64_t pf = 0, qn = 0;
	int r;

	memset(u, 0, sizeof(*u));
	u->fd = fd;
	u->timeout_ms = VHOST_USER_TIMEOUT_MS;
	snprintf(u->name, sizeof(u->name), "%s", name);
	vhost_user_op_begin(u, VHOST_USER_OP_TIMEOUT_MS);
	r = vhost_user_call(u, VHOST_USER_SET_OWNER, NULL, 0, NULL, 0, NULL);
	if (!r)
		r = vhost_user_call(u, VHOST_USER_GET_FEATURES, NULL, 0, NULL, 0, &u->features);
	if (!r && (u->features & (1ULL << VHOST_USER_F_PROTOCOL))) {
		r = vhost_user_call(u, VHOST_USER_GET_PROTOCOL_FEATURES, NULL, 0, NULL, 0, &pf);
		if (!r)
			r = vhost_user_set_u64(u, VHOST_USER_SET_PROTOCOL_FEATURES,
					       pf & VHOST_USER_PROTO_OURS);
		/* REPLY_ACK applies from the next message on */
		u->protocol = pf & VHOST_USER_PROTO_OURS;
	}
	if (!r && (u->protocol & (1ULL << VHOST_USER_PROTO_MQ))) {
		r = vhost_user_call(u, VHOST_USER_GET_QUEUE_NUM, NULL, 0, NULL, 0, &qn);
		if (!r && qn < nqueues)
			r = vhu_fail(u, -EINVAL, "the back end serves %llu queues, %u wanted",
				     (unsigned long long)qn, nqueues);
	}
	vhost_user_op_end(u);
	if (r) {
		snprintf(err, errlen, "vhost-user %s: %s", name, u->why);
		vhost_user_close(u);
	}
	return r;
}

int vhost_user_connect(struct vhost_user *u, const char *name, const char *path, unsigned nqueues,
		       char *err, unsigned errlen)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd;

	u->fd = -1;
	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "vhost-user %s: socket path too long", name);
		return -ENAMETOOLONG;
	}
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "vhost-user %s: socket: %s", name, strerror(errno));
		return -errno;
	}
	if (vhost_user_connect_fd(fd, &sa) < 0) {
		int e = errno;

		snprintf(err, errlen, "vhost-user %s: connect %s: %s", name, path,
			 e == EAGAIN ? "the back end accepts no connection (timed out)"
				     : strerror(e));
		close(fd);
		return -e;
	}
	return vhost_user_open_fd(u, name, fd, nqueues, err, errlen);
}

void vhost_user_close(struct vhost_user *u)
{
	if (u->fd >= 0)
		close(u->fd);
	u->fd = -1;
	u->broken = true;
}
