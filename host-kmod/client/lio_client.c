/* Client side of the LightIOV backend: two transports with the same structs (softssd's socket:
 * one SOCK_SEQPACKET message per request and per reply, fds as SCM_RIGHTS; lightiov.ko's device
 * /dev/lightiov/NAME: one ioctl per request, fds in the struct fields), one function per
 * operation, and the lio_drv polled driver. */
#include "lightiov/nvmeq.h"
#include "lio_client.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define LIO_CLIENT_MAX_FDS   8
#define LIO_CLIENT_TIMEOUT_S 30 /* a reply never takes this long; a hung daemon is an error */

struct lio_client {
	int fd;
	bool dev; /* fd is lightiov.ko's device: ioctls instead of messages */
	/* The request/reply pairing is lost (a reply timed out, or one came unasked): a later
	 * reply could be an earlier request's answer, so no call is made on this connection
	 * again. The socket ABI has no sequence numbers; this is what stands in for them. */
	bool broken;
	unsigned timeout_ms; /* of a reply (SO_RCVTIMEO); 0: none */
	char label[LIO_NAME_MAX];
	char err[LIO_ERR_MAX + 64];
};

static double lio_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Milliseconds as the int that poll() and lio_drv_reap take, however far the deadline. */
static int lio_ms_int(double ms)
{
	return ms < INT_MAX ? (int)ms : INT_MAX;
}

bool lio_name_ok(const char *name)
{
	size_t n = name ? strnlen(name, LIO_NAME_MAX) : 0;

	if (n == 0 || n >= LIO_NAME_MAX || !strcmp(name, ".") || !strcmp(name, ".."))
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '-' || c == '.'))
			return false;
	}
	return true;
}

int lio_sock_path(const char *name, char *buf, size_t len)
{
	const char *dir = getenv("LVMM_RUN_DIR");
	int n;

	if (!name || !*name)
		return -EINVAL;
	if (strchr(name, '/')) {
		n = snprintf(buf, len, "%s", name);
	} else {
		if (strlen(name) >= LIO_NAME_MAX)
			return -EINVAL;
		n = snprintf(buf, len, "%s/ssd/%s.sock", dir && *dir ? dir : LIO_RUN_DIR_DEFAULT,
			     name);
	}
	if (n < 0 || (size_t)n >= len || (size_t)n >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return -ENAMETOOLONG;
	return 0;
}

int lio_dev_path(const char *name, char *buf, size_t len)
{
	const char *dir = getenv("LVMM_LIO_DEV_DIR");
	int n;

	if (!name || !*name || strchr(name, '/') || strlen(name) >= LIO_NAME_MAX)
		return -EINVAL;
	n = snprintf(buf, len, "%s/%s", dir && *dir ? dir : LIO_DEV_DIR_DEFAULT, name);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

bool lio_client_is_dev(const struct lio_client *c)
{
	return c->dev;
}

const char *lio_client_error(const struct lio_client *c)
{
	return c->err;
}

int lio_client_fd(const struct lio_client *c)
{
	return c->fd;
}

bool lio_client_broken(const struct lio_client *c)
{
	return c->broken;
}

int lio_client_set_timeout_ms(struct lio_client *c, unsigned ms)
{
	struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};

	if (c->dev)
		return 0;
	if (setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)))
		return -errno;
	c->timeout_ms = ms;
	return 0;
}

/* A string the backend wrote, to be printed: terminated within n bytes, and every byte that is not
 * printable ASCII (a terminal's escape sequences among them) shown as '?'. */
static void lio_printable(char *s, size_t n)
{
	s[n - 1] = 0;
	for (; *s; s++)
		if (*s < 0x20 || *s > 0x7e)
			*s = '?';
}

/* Whether a message waits on the socket now (the daemon never writes unasked). */
static bool lio_msg_waiting(struct lio_client *c)
{
	char b;

	return recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

static int lio_break(struct lio_client *c, int e, const char *op, const char *why)
{
	c->broken = true;
	snprintf(c->err, sizeof(c->err), "%s: %s; the connection to the SSD is not used again", op,
		 why);
	return e;
}

static const char *const lio_op_names[LIO_OP_MAX] = {
    [LIO_OP_IDENTIFY] = "identify",	  [LIO_OP_DMA_REGISTER] = "dma-register",
    [LIO_OP_QMEM_ALLOC] = "qmem-alloc",	  [LIO_OP_QP_CREATE] = "qp-create",
    [LIO_OP_QP_DESTROY] = "qp-destroy",	  [LIO_OP_QP_STATS] = "qp-stats",
    [LIO_OP_VOL_CREATE] = "vol-create",	  [LIO_OP_VOL_DELETE] = "vol-delete",
    [LIO_OP_VOL_RESIZE] = "vol-resize",	  [LIO_OP_VOL_LIST] = "vol-list",
    [LIO_OP_VOL_ATTACH] = "vol-attach",	  [LIO_OP_VOL_DETACH] = "vol-detach",
    [LIO_OP_SSD_STATS] = "ssd-stats",	  [LIO_OP_SESSION_LIST] = "session-list",
    [LIO_OP_SESSION_SET] = "session-set", [LIO_OP_QP_QUIESCE] = "qp-quiesce",
    [LIO_OP_QP_RESUME] = "qp-resume",	  [LIO_OP_QP_RESTORE] = "qp-restore",
};

static const char *lio_op_name(uint32_t op)
{
	return op < LIO_OP_MAX && lio_op_names[op] ? lio_op_names[op] : "op";
}

static const unsigned long lio_op_ioctls[LIO_OP_MAX] = {
    [LIO_OP_IDENTIFY] = LIO_IOC_IDENTIFY,	[LIO_OP_DMA_REGISTER] = LIO_IOC_DMA_REGISTER,
    [LIO_OP_QMEM_ALLOC] = LIO_IOC_QMEM_ALLOC,	[LIO_OP_QP_CREATE] = LIO_IOC_QP_CREATE,
    [LIO_OP_QP_DESTROY] = LIO_IOC_QP_DESTROY,	[LIO_OP_QP_STATS] = LIO_IOC_QP_STATS,
    [LIO_OP_VOL_CREATE] = LIO_IOC_VOL_CREATE,	[LIO_OP_VOL_DELETE] = LIO_IOC_VOL_DELETE,
    [LIO_OP_VOL_RESIZE] = LIO_IOC_VOL_RESIZE,	[LIO_OP_VOL_LIST] = LIO_IOC_VOL_LIST,
    [LIO_OP_VOL_ATTACH] = LIO_IOC_VOL_ATTACH,	[LIO_OP_VOL_DETACH] = LIO_IOC_VOL_DETACH,
    [LIO_OP_SSD_STATS] = LIO_IOC_SSD_STATS,	[LIO_OP_SESSION_LIST] = LIO_IOC_SESSION_LIST,
    [LIO_OP_SESSION_SET] = LIO_IOC_SESSION_SET, [LIO_OP_QP_QUIESCE] = LIO_IOC_QP_QUIESCE,
    [LIO_OP_QP_RESUME] = LIO_IOC_QP_RESUME,	[LIO_OP_QP_RESTORE] = LIO_IOC_QP_RESTORE,
};

/* The ioctl transport: the request struct is the ioctl's argument (its size is in the command
 * number), the fds travel in its fields, queue memory comes back as lio_qmem.fd. The module
 * logs why it refused (the kernel log); the errno alone comes back here. */
static int lio_client_ioctl(struct lio_client *c, uint32_t op, const void *in, uint32_t inlen,
			    void *out, uint32_t outlen, uint32_t *outgot, int *rfds,
			    unsigned *nrfds)
{
	union {
		struct lio_dma_window w;
		struct lio_qp_create q;
		struct lio_vol_list vl;
		struct lio_session_list sl;
		struct lio_identify id;
		struct lio_ssd_stats st;
		struct lio_qmem qm;
		struct lio_qp_restore qr;
	} a;
	unsigned long cmd = op < LIO_OP_MAX ? lio_op_ioctls[op] : 0;
	uint32_t size = (uint32_t)_IOC_SIZE(cmd);
	unsigned room = nrfds ? *nrfds : 0;

	if (nrfds)
		*nrfds = 0;
	if (!cmd || size > sizeof(a) || inlen > size) {
		snprintf(c->err, sizeof(c->err), "%s: %u bytes for a request of %u (op %u)",
			 lio_op_name(op), inlen, size, op);
		return -EINVAL;
	}
	memset(&a, 0, sizeof(a));
	if (in && inlen)
		memcpy(&a, in, inlen);
	if (op == LIO_OP_QMEM_ALLOC)
		a.qm.fd = -1; /* a module that answers without one is not taken to mean fd 0 */
	if (ioctl(c->fd, cmd, &a) < 0) {
		int e = errno;

		snprintf(c->err, sizeof(c->err), "%s: %s (lightiov.ko logs why in the kernel log)",
			 lio_op_name(op), strerror(e));
		return -e;
	}
	if (out && outlen && (_IOC_DIR(cmd) & _IOC_READ))
		memcpy(out, &a, outlen < size ? outlen : size);
	if (outgot)
		*outgot = out && outlen && (_IOC_DIR(cmd) & _IOC_READ) ? size : 0;
	if (op == LIO_OP_QMEM_ALLOC) {
		if (a.qm.fd < 0) {
			snprintf(c->err, sizeof(c->err), "%s: no queue-memory fd in the answer",
				 lio_op_name(op));
			return -EPROTO;
		}
		if (rfds && room) {
			rfds[0] = a.qm.fd;
			*nrfds = 1;
		} else {
			close(a.qm.fd);
		}
	}
	return 0;
}

/* Closes every fd a received message carried (one that is refused as a whole). */
static void lio_close_fds(struct msghdr *m)
{
	struct cmsghdr *cm;

	for (cm = CMSG_FIRSTHDR(m); cm; cm = CMSG_NXTHDR(m, cm)) {
		unsigned n, i;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		n = (unsigned)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		for (i = 0; i < n; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			close(fd);
		}
	}
}

int lio_client_call(struct lio_client *c, uint32_t op, const void *in, uint32_t inlen,
		    const int *fds, unsigned nfds, void *out, uint32_t outlen, uint32_t *outgot,
		    int *rfds, unsigned *nrfds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * LIO_CLIENT_MAX_FDS)];
		struct cmsghdr align;
	} ctl;
	struct lio_msg_hdr h = {.magic = LIO_MAGIC, .op = op, .len = inlen, .nfds = nfds};
	struct lio_msg_reply rep;
	struct iovec iov[2] = {{&h, sizeof(h)}, {(void *)in, inlen}};
	struct msghdr m = {.msg_iov = iov, .msg_iovlen = in && inlen ? 2 : 1};
	unsigned maxr = nrfds ? *nrfds : 0, got = 0;
	struct cmsghdr *cm;
	double until;
	ssize_t r;

	c->err[0] = 0;
	if (outgot)
		*outgot = 0;
	if (c->dev)
		return lio_client_ioctl(c, op, in, inlen, out, outlen, outgot, rfds, nrfds);
	if (nrfds)
		*nrfds = 0;
	if (c->broken) {
		snprintf(c->err, sizeof(c->err),
			 "%s: the connection to the SSD was given up after an earlier error",
			 lio_op_name(op));
		return -ENOTCONN;
	}
	if (nfds > LIO_CLIENT_MAX_FDS)
		return -EINVAL;
	/* a reply to nothing: the pairing of requests and replies is lost */
	if (lio_msg_waiting(c))
		return lio_break(c, -EPROTO, lio_op_name(op),
				 "a reply came that was not asked for");
	memcpy(h.label, c->label, sizeof(h.label));
	memset(&ctl, 0, sizeof(ctl));
	if (nfds) {
		m.msg_control = ctl.buf;
		m.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		cm = CMSG_FIRSTHDR(&m);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * nfds);
	}
	do
		r = sendmsg(c->fd, &m, MSG_NOSIGNAL);
	while (r < 0 && errno == EINTR);
	if (r < 0) {
		r = -errno;
		snprintf(c->err, sizeof(c->err), "%s: send: %s", lio_op_name(op), strerror(errno));
		return (int)r;
	}

	memset(&m, 0, sizeof(m));
	memset(&ctl, 0, sizeof(ctl));
	iov[0] = (struct iovec){&rep, sizeof(rep)};
	iov[1] = (struct iovec){out, outlen};
	m.msg_iov = iov;
	m.msg_iovlen = out && outlen ? 2 : 1;
	m.msg_control = ctl.buf;
	m.msg_controllen = sizeof(ctl.buf);
	/* each interrupted receive starts SO_RCVTIMEO anew: signals coming faster than the
	 * timeout (a VMM kicks its threads) must not make a silent daemon wait for ever */
	until = c->timeout_ms ? lio_now_ms() + c->timeout_ms : 0;
	do
		r = recvmsg(c->fd, &m, MSG_CMSG_CLOEXEC);
	while (r < 0 && errno == EINTR && (!until || lio_now_ms() < until));
	if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		/* the reply may still come, and would be taken as the next request's */
		return lio_break(c, -ETIMEDOUT, lio_op_name(op), "no reply in time");
	if (r > 0 && r < (ssize_t)sizeof(rep)) {
		lio_close_fds(&m);
		return lio_break(c, -EPROTO, lio_op_name(op), "reply shorter than its header");
	}
	if (r <= 0) {
		/* an empty message may still carry fds (SCM_RIGHTS): closed; and the
		 * connection is done either way */
		int e = r < 0 ? errno : ECONNRESET;

		if (r == 0)
			lio_close_fds(&m);
		return lio_break(c, -e, lio_op_name(op),
				 r < 0 ? strerror(e) : "connection closed by the SSD");
	}
	/* a payload longer than the struct asked for (none asked: nothing is read from it) */
	if ((m.msg_flags & MSG_CTRUNC) || ((m.msg_flags & MSG_TRUNC) && out && outlen)) {
		lio_close_fds(&m);
		return lio_break(c, -EPROTO, lio_op_name(op),
				 m.msg_flags & MSG_TRUNC ? "reply longer than its struct"
							 : "reply with more fds than expected");
	}
	for (cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm)) {
		unsigned n, i;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		n = (unsigned)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		for (i = 0; i < n; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			if (got < maxr)
				rfds[got++] = fd;
			else
				close(fd);
		}
	}
	if (nrfds)
		*nrfds = got;
	if (rep.magic != LIO_MAGIC || rep.status > 0 || rep.status < -4095) {
		char why[64];

		for (unsigned i = 0; i < got; i++)
			close(rfds[i]);
		if (nrfds)
			*nrfds = 0;
		snprintf(why, sizeof(why), "reply magic 0x%x, status %d", rep.magic, rep.status);
		return lio_break(c, -EPROTO, lio_op_name(op), why);
	}
	/* answered twice (or a late answer queued behind this one): this reply may not be
	 * this request's, so nothing in it is used */
	if (lio_msg_waiting(c)) {
		for (unsigned i = 0; i < got; i++)
			close(rfds[i]);
		if (nrfds)
			*nrfds = 0;
		return lio_break(c, -EPROTO, lio_op_name(op), "more than one reply to a request");
	}
	if (outgot)
		*outgot = (uint32_t)r - (uint32_t)sizeof(rep);
	if (rep.status < 0) {
		lio_printable(rep.err, sizeof(rep.err));
		snprintf(c->err, sizeof(c->err), "%s",
			 rep.err[0] ? rep.err : strerror(-rep.status));
	}
	return rep.status;
}

/* A call whose reply payload must be exactly outlen bytes. */
static int lio_call_fixed(struct lio_client *c, uint32_t op, const void *in, uint32_t inlen,
			  const int *fds, unsigned nfds, void *out, uint32_t outlen)
{
	uint32_t got = 0;
	int r = lio_client_call(c, op, in, inlen, fds, nfds, out, outlen, &got, NULL, NULL);

	if (r == 0 && out && got != outlen) {
		snprintf(c->err, sizeof(c->err), "%s: reply of %u bytes, expected %u",
			 lio_op_name(op), got, outlen);
		return -EPROTO;
	}
	return r;
}

static int lio_client_open_dev(struct lio_client **out, const char *name, const char *path,
			       struct lio_identify *id, char *err, unsigned errlen)
{
	struct lio_identify tmp;
	struct lio_client *c = calloc(1, sizeof(*c));
	int r;

	if (!c)
		return -ENOMEM;
	c->dev = true;
	snprintf(c->label, sizeof(c->label), "%s", "kmod");
	c->fd = open(path, O_RDWR | O_CLOEXEC);
	if (c->fd < 0) {
		r = -errno;
		snprintf(err, errlen, "ssd '%s': cannot open %s: %s", name, path, strerror(errno));
		free(c);
		return r;
	}
	r = lio_client_identify(c, id ? id : &tmp);
	if (r) {
		snprintf(err, errlen, "ssd '%s': %s: %s", name, path, c->err);
		lio_client_close(c);
		return r;
	}
	*out = c;
	return 0;
}

int lio_client_connect(struct lio_client **out, const char *name, const char *label,
		       struct lio_identify *id, char *err, unsigned errlen)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct lio_identify tmp;
	struct lio_client *c;
	char dev[256];
	struct stat st;
	int r;

	/* lightiov.ko's device when there is one by that name (or the name is its path) */
	if ((!lio_dev_path(name, dev, sizeof(dev)) && !stat(dev, &st) && S_ISCHR(st.st_mode)) ||
	    (name && strchr(name, '/') && !stat(name, &st) && S_ISCHR(st.st_mode) &&
	     snprintf(dev, sizeof(dev), "%s", name) < (int)sizeof(dev)))
		return lio_client_open_dev(out, name, dev, id, err, errlen);
	r = lio_sock_path(name, sa.sun_path, sizeof(sa.sun_path));
	if (r) {
		snprintf(err, errlen, "ssd '%s': not a valid SSD name or socket path", name);
		return r;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	snprintf(c->label, sizeof(c->label), "%s", label && *label ? label : "client");
	c->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&sa, sizeof(sa))) {
		r = -errno;
		snprintf(err, errlen, "ssd '%s': cannot connect to %s: %s", name, sa.sun_path,
			 strerror(errno));
		if (c->fd >= 0)
			close(c->fd);
		free(c);
		return r;
	}
	lio_client_set_timeout_ms(c, LIO_CLIENT_TIMEOUT_S * 1000);
	r = lio_client_identify(c, id ? id : &tmp);
	if (r) {
		snprintf(err, errlen, "ssd '%s': %s", name, c->err);
		lio_client_close(c);
		return r;
	}
	*out = c;
	return 0;
}

void lio_client_close(struct lio_client *c)
{
	if (!c)
		return;
	close(c->fd);
	free(c);
}

int lio_client_identify(struct lio_client *c, struct lio_identify *id)
{
	int r = lio_call_fixed(c, LIO_OP_IDENTIFY, NULL, 0, NULL, 0, id, sizeof(*id));

	/* printed in messages: strings, whatever the backend put there */
	lio_printable(id->name, sizeof(id->name));
	lio_printable(id->model, sizeof(id->model));
	if (r)
		return r;
	/* every size the client computes shifts by lba_shift */
	if (id->abi_version != LIO_ABI_VERSION || (id->lba_shift != 9 && id->lba_shift != 12)) {
		snprintf(
		    c->err, sizeof(c->err),
		    "identify: ABI version %u (this client speaks %u), LBA shift %u (9 or 12): "
		    "refused",
		    id->abi_version, LIO_ABI_VERSION, id->lba_shift);
		return -EPROTO;
	}
	return 0;
}

int lio_client_dma_register(struct lio_client *c, const struct lio_dma_window *w)
{
	int fds[LIO_MAX_REGIONS];
	unsigned i, n = w->nr_regions <= LIO_MAX_REGIONS ? w->nr_regions : LIO_MAX_REGIONS;

	for (i = 0; i < n; i++)
		fds[i] = w->r[i].fd;
	return lio_call_fixed(c, LIO_OP_DMA_REGISTER, w, sizeof(*w), fds, n, NULL, 0);
}

int lio_client_qmem_alloc(struct lio_client *c, struct lio_qmem *q)
{
	struct lio_qmem rq = {0};
	int fd = -1;
	unsigned n = 1;
	uint32_t got = 0;
	int r = lio_client_call(c, LIO_OP_QMEM_ALLOC, q, sizeof(*q), NULL, 0, &rq, sizeof(rq), &got,
				&fd, &n);

	if (r == 0 && (n != 1 || got != sizeof(rq) || rq.size != q->size)) {
		snprintf(c->err, sizeof(c->err),
			 n != 1 ? "qmem-alloc: reply without the queue-memory fd"
				: "qmem-alloc: reply of %u bytes for %llu bytes of queue memory",
			 got, (unsigned long long)rq.size);
		r = -EPROTO;
	}
	if (r && n == 1)
		close(fd);
	/* the size stays the one asked for: the caller maps that much, and checks the fd */
	q->fd = r == 0 ? fd : -1;
	return r;
}

int lio_qmem_fd_check(const struct lio_client *c, int fd, uint64_t size, char *err, unsigned errlen)
{
	struct stat st;
	int seals;

	/* lightiov.ko's queue memory is its own anonymous file, sized by the module */
	if (c->dev)
		return 0;
	if (fstat(fd, &st)) {
		snprintf(err, errlen, "queue-memory fd: fstat: %s", strerror(errno));
		return -errno;
	}
	if (!S_ISREG(st.st_mode) || st.st_size < 0 || (uint64_t)st.st_size < size) {
		snprintf(err, errlen,
			 "queue-memory fd is %s of %lld bytes, not a memfd of %llu: refused",
			 S_ISREG(st.st_mode) ? "a file" : "no file", (long long)st.st_size,
			 (unsigned long long)size);
		return -EPROTO;
	}
	/* a backend that could shrink it later would fault lvmm (and the guest) on access */
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
		snprintf(err, errlen, "queue-memory fd is not sealed against shrinking: refused");
		return -EPROTO;
	}
	return 0;
}

bool lio_range_ok(uint64_t off, uint64_t len, uint64_t size)
{
	return off <= size && len <= size - off;
}

int lio_client_qp_create(struct lio_client *c, struct lio_qp_create *q)
{
	struct lio_qp_create rq;
	int fds[2], r;
	unsigned n = 0;

	if (q->flags & LIO_QP_DB_EVENTFD)
		fds[n++] = q->db_fd;
	if (q->flags & LIO_QP_IRQ_ENABLED)
		fds[n++] = q->irq_fd;
	r = lio_call_fixed(c, LIO_OP_QP_CREATE, q, sizeof(*q), fds, n, &rq, sizeof(rq));
	if (r)
		return r;
	/* only the out fields: what was asked for stays what the caller asked for */
	q->qp_id = rq.qp_id;
	q->sq_off = rq.sq_off;
	q->cq_off = rq.cq_off;
	q->db_off = rq.db_off;
	return 0;
}

int lio_client_qp_quiesce(struct lio_client *c, uint32_t qp_id, uint32_t timeout_ms,
			  struct lio_qp_state *st)
{
	struct lio_qp_state rq = {.qp_id = qp_id, .timeout_ms = timeout_ms};
	int r = lio_call_fixed(c, LIO_OP_QP_QUIESCE, &rq, sizeof(rq), NULL, 0, st, sizeof(*st));

	/* the reply is the backend's word: a client keeps it only as a state to check later */
	if (!r && st->qp_id != qp_id) {
		snprintf(c->err, sizeof(c->err), "qp-quiesce: reply for queue pair %u, asked %u",
			 st->qp_id, qp_id);
		r = -EPROTO;
	}
	return r;
}

int lio_client_qp_resume(struct lio_client *c, uint32_t qp_id)
{
	struct lio_qp_ref ref = {.qp_id = qp_id};

	return lio_call_fixed(c, LIO_OP_QP_RESUME, &ref, sizeof(ref), NULL, 0, NULL, 0);
}

int lio_client_qp_restore(struct lio_client *c, struct lio_qp_restore *q)
{
	struct lio_qp_restore rq;
	int fds[2], r;
	unsigned n = 0;

	if (q->qp.flags & LIO_QP_DB_EVENTFD)
		fds[n++] = q->qp.db_fd;
	if (q->qp.flags & LIO_QP_IRQ_ENABLED)
		fds[n++] = q->qp.irq_fd;
	r = lio_call_fixed(c, LIO_OP_QP_RESTORE, q, sizeof(*q), fds, n, &rq, sizeof(rq));
	if (r)
		return r;
	q->qp.qp_id = rq.qp.qp_id;
	q->qp.sq_off = rq.qp.sq_off;
	q->qp.cq_off = rq.qp.cq_off;
	q->qp.db_off = rq.qp.db_off;
	return 0;
}

int lio_client_qp_destroy(struct lio_client *c, uint32_t qp_id)
{
	struct lio_qp_ref ref = {.qp_id = qp_id};

	return lio_call_fixed(c, LIO_OP_QP_DESTROY, &ref, sizeof(ref), NULL, 0, NULL, 0);
}

int lio_client_qp_stats(struct lio_client *c, uint32_t qp_id, struct lio_qp_stats *s)
{
	struct lio_qp_ref ref = {.qp_id = qp_id};

	return lio_call_fixed(c, LIO_OP_QP_STATS, &ref, sizeof(ref), NULL, 0, s, sizeof(*s));
}

int lio_client_session_set(struct lio_client *c, struct lio_session_set *s)
{
	return lio_call_fixed(c, LIO_OP_SESSION_SET, s, sizeof(*s), NULL, 0, s, sizeof(*s));
}

int lio_client_vol_create(struct lio_client *c, const struct lio_vol *v)
{
	return lio_call_fixed(c, LIO_OP_VOL_CREATE, v, sizeof(*v), NULL, 0, NULL, 0);
}

int lio_client_vol_delete(struct lio_client *c, const struct lio_vol *v)
{
	return lio_call_fixed(c, LIO_OP_VOL_DELETE, v, sizeof(*v), NULL, 0, NULL, 0);
}

int lio_client_vol_resize(struct lio_client *c, const struct lio_vol *v)
{
	return lio_call_fixed(c, LIO_OP_VOL_RESIZE, v, sizeof(*v), NULL, 0, NULL, 0);
}

/* A page of a list: at most max entries, no more than the total left after first, and a total a
 * backend can have (callers page on while first < total). */
static int lio_list_check(struct lio_client *c, const char *what, uint32_t first, uint32_t count,
			  uint32_t total, uint32_t max, uint32_t max_total)
{
	if (count <= max && total <= max_total &&
	    (first >= total ? !count : count <= total - first))
		return 0;
	snprintf(c->err, sizeof(c->err),
		 "%s: %u entries from %u of %u (at most %u a page, %u in all): refused", what,
		 count, first, total, max, max_total);
	return -EPROTO;
}

int lio_client_vol_list(struct lio_client *c, struct lio_vol_list *l)
{
	uint32_t first = l->first;
	int r = lio_call_fixed(c, LIO_OP_VOL_LIST, l, sizeof(*l), NULL, 0, l, sizeof(*l));

	if (r)
		return r;
	l->first = first;
	r = lio_list_check(c, "vol-list", first, l->count, l->total, LIO_VOL_LIST_MAX,
			   LIO_MAX_VOLUMES);
	if (r)
		return r;
	for (unsigned i = 0; i < l->count; i++)
		lio_printable(l->v[i].name, sizeof(l->v[i].name));
	return 0;
}

int lio_client_vol_attach(struct lio_client *c, struct lio_vol_attach *a)
{
	int r = lio_call_fixed(c, LIO_OP_VOL_ATTACH, a, sizeof(*a), NULL, 0, a, sizeof(*a));

	a->name[sizeof(a->name) - 1] = 0;
	return r;
}

int lio_attach_check(const struct lio_vol_attach *a, uint32_t lba_shift, char *err, unsigned errlen)
{
	/* the namespace is lba_count << lba_shift bytes and the window [lba_start, +count) */
	if (!a->lba_count || lba_shift > 12 || a->lba_count > (UINT64_MAX >> 12) ||
	    a->lba_start > UINT64_MAX - a->lba_count || !lio_name_ok(a->name)) {
		snprintf(err, errlen,
			 "volume reply: %llu LBAs at %llu, name '%.31s': not a volume, refused",
			 (unsigned long long)a->lba_count, (unsigned long long)a->lba_start,
			 lio_name_ok(a->name) ? a->name : "?");
		return -EPROTO;
	}
	return 0;
}

int lio_client_vol_detach(struct lio_client *c, uint32_t vol_id)
{
	struct lio_vol_attach a = {.vol_id = vol_id};

	return lio_call_fixed(c, LIO_OP_VOL_DETACH, &a, sizeof(a), NULL, 0, NULL, 0);
}

int lio_client_ssd_stats(struct lio_client *c, struct lio_ssd_stats *s)
{
	return lio_call_fixed(c, LIO_OP_SSD_STATS, NULL, 0, NULL, 0, s, sizeof(*s));
}

int lio_client_session_list(struct lio_client *c, struct lio_session_list *l)
{
	uint32_t first = l->first;
	int r = lio_call_fixed(c, LIO_OP_SESSION_LIST, l, sizeof(*l), NULL, 0, l, sizeof(*l));

	if (r)
		return r;
	l->first = first;
	/* sessions: at most --max-clients (LIO_MAX_QPAIRS), and the one asking */
	r = lio_list_check(c, "session-list", first, l->count, l->total, LIO_SESSION_LIST_MAX,
			   LIO_MAX_QPAIRS + 1);
	if (r)
		return r;
	for (unsigned i = 0; i < l->count; i++)
		lio_printable(l->s[i].label, sizeof(l->s[i].label));
	return 0;
}

/* ---- lio_drv ---- */

static uint64_t lio_pages(uint64_t bytes)
{
	return (bytes + LIO_PAGE_SIZE - 1) & ~(uint64_t)(LIO_PAGE_SIZE - 1);
}

uint64_t lio_drv_alloc(struct lio_drv *d, uint64_t bytes)
{
	uint64_t b = lio_pages(bytes), gpa;

	if (!b || b > d->mem_bytes - d->brk)
		return 0;
	gpa = LIO_DRV_GPA_BASE + d->brk;
	d->brk += b;
	memset(d->mem + (gpa - LIO_DRV_GPA_BASE), 0, b);
	return gpa;
}

void *lio_drv_ptr(struct lio_drv *d, uint64_t gpa)
{
	if (gpa < LIO_DRV_GPA_BASE || gpa - LIO_DRV_GPA_BASE >= d->mem_bytes)
		return NULL;
	return d->mem + (gpa - LIO_DRV_GPA_BASE);
}

static int lio_drv_qp_open(struct lio_drv *d, unsigned qi, uint64_t shadow, char *err,
			   unsigned errlen)
{
	struct lio_drv_qp *q = &d->qp[qi];
	const struct lio_drv_opts *o = &d->o;
	struct lio_qp_create c = {
	    .vol_id = o->vol_id,
	    .mode = o->mode,
	    .flags = o->qp_flags,
	    .sqid = (uint16_t)(qi + 1),
	    .cqid = (uint16_t)(qi + 1),
	    .sq_depth = o->depth,
	    .cq_depth = o->depth,
	    .db_fd = -1,
	    .irq_fd = -1,
	};
	int r;

	q->db_fd = q->irq_fd = -1;
	q->depth = o->depth;
	q->phase = 1;
	q->prp_gpa = lio_drv_alloc(d, (uint64_t)o->depth * LIO_PAGE_SIZE);
	if (!(o->qp_flags & LIO_QP_SQ_QMEM))
		c.sq_gpa = lio_drv_alloc(d, (uint64_t)o->depth * sizeof(struct nvme_sqe));
	if (!(o->qp_flags & LIO_QP_CQ_QMEM))
		c.cq_gpa = lio_drv_alloc(d, (uint64_t)o->depth * sizeof(struct nvme_cqe));
	if (!q->prp_gpa || (!(o->qp_flags & LIO_QP_SQ_QMEM) && !c.sq_gpa) ||
	    (!(o->qp_flags & LIO_QP_CQ_QMEM) && !c.cq_gpa)) {
		snprintf(err, errlen, "lio_drv: DMA window of %llu bytes too small for queue %u",
			 (unsigned long long)d->mem_bytes, qi);
		return -ENOMEM;
	}
	if (o->qp_flags & LIO_QP_DB_EVENTFD) {
		c.shadow_db_gpa = shadow + qi * 8;
		c.eventidx_gpa = shadow + LIO_PAGE_SIZE + qi * 8;
		q->db_fd = c.db_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	}
	if (o->qp_flags & LIO_QP_IRQ_ENABLED)
		q->irq_fd = c.irq_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	r = lio_client_qp_create(d->c, &c);
	if (r) {
		snprintf(err, errlen, "lio_drv: queue %u: %s", qi, lio_client_error(d->c));
		return r;
	}
	q->qp_id = c.qp_id;
	/* the backend's offsets into queue memory: rings and doorbell pages inside it, aligned */
	if (((o->qp_flags & LIO_QP_SQ_QMEM) &&
	     (c.sq_off % LIO_PAGE_SIZE ||
	      !lio_range_ok(c.sq_off, (uint64_t)o->depth * sizeof(struct nvme_sqe),
			    d->qmem_bytes))) ||
	    ((o->qp_flags & LIO_QP_CQ_QMEM) &&
	     (c.cq_off % LIO_PAGE_SIZE ||
	      !lio_range_ok(c.cq_off, (uint64_t)o->depth * sizeof(struct nvme_cqe),
			    d->qmem_bytes))) ||
	    ((o->qp_flags & LIO_QP_DB_POLL) &&
	     (c.db_off % LIO_PAGE_SIZE ||
	      !lio_range_ok(c.db_off, 2 * LIO_PAGE_SIZE, d->qmem_bytes)))) {
		snprintf(
		    err, errlen,
		    "lio_drv: queue %u: offsets sq 0x%llx cq 0x%llx db 0x%llx outside the %llu "
		    "bytes of queue memory: refused",
		    qi, (unsigned long long)c.sq_off, (unsigned long long)c.cq_off,
		    (unsigned long long)c.db_off, (unsigned long long)d->qmem_bytes);
		lio_client_qp_destroy(d->c, c.qp_id);
		return -EPROTO;
	}
	q->sq = o->qp_flags & LIO_QP_SQ_QMEM ? (struct nvme_sqe *)(d->qmem + c.sq_off)
					     : lio_drv_ptr(d, c.sq_gpa);
	q->cq = o->qp_flags & LIO_QP_CQ_QMEM ? (struct nvme_cqe *)(d->qmem + c.cq_off)
					     : lio_drv_ptr(d, c.cq_gpa);
	if (o->qp_flags & LIO_QP_DB_POLL) {
		q->sq_db = (uint32_t *)(d->qmem + c.db_off);
		q->cq_db = (uint32_t *)(d->qmem + c.db_off + LIO_PAGE_SIZE);
	} else {
		q->sq_db = lio_drv_ptr(d, c.shadow_db_gpa);
		q->cq_db = lio_drv_ptr(d, c.shadow_db_gpa + 4);
	}
	if (!q->sq || !q->cq || !q->sq_db || !q->cq_db) {
		snprintf(err, errlen, "lio_drv: queue %u: a ring or doorbell outside the window",
			 qi);
		lio_client_qp_destroy(d->c, c.qp_id);
		return -EPROTO;
	}
	return 0;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* The window's pages are this process's before an SSD sees them (issue 23, finding 6): a
 * softssd's first touch of one would be charged to the daemon, and --require-resident refuses a
 * window with pages not populated. MADV_POPULATE_WRITE, or a write to each page where the kernel
 * lacks it (before 5.14). Kept here, not vmm/guest_mem's, as gpu-fs and the kmod test build this
 * file on its own. */
static int lio_drv_populate(void *mem, uint64_t len)
{
	volatile uint8_t *p = mem;
	uint64_t off;

	for (;;) {
		if (!madvise(mem, len, MADV_POPULATE_WRITE))
			return 0;
		if (errno != EINTR)
			break;
	}
	if (errno != EINVAL)
		return errno == EFAULT ? -ENOMEM : -errno; /* EFAULT: a page could not be had */
	for (off = 0; off < len; off += LIO_PAGE_SIZE)
		p[off] = p[off];
	return 0;
}

int lio_drv_open(struct lio_drv **out, struct lio_client *c, const struct lio_drv_opts *o,
		 char *err, unsigned errlen)
{
	bool want_qmem = o->qp_flags & (LIO_QP_SQ_QMEM | LIO_QP_CQ_QMEM | LIO_QP_DB_POLL);
	struct lio_dma_window w = {.nr_regions = 1};
	struct lio_drv *d;
	uint64_t shadow = 0;
	unsigned i;
	int r;

	if (!o->nr_qp || o->nr_qp > LIO_DRV_MAX_QP || o->depth < 2 || o->depth > LIO_MAX_QDEPTH) {
		snprintf(err, errlen, "lio_drv: %u queues of depth %u out of range", o->nr_qp,
			 o->depth);
		return -EINVAL;
	}
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->c = c;
	d->o = *o;
	d->qmem_fd = -1;
	d->mem_bytes = lio_pages(o->mem_bytes ? o->mem_bytes : 16ull << 20);
	d->memfd = memfd_create("lio-drv", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (d->memfd < 0 || ftruncate(d->memfd, (off_t)d->mem_bytes) ||
	    fcntl(d->memfd, F_ADD_SEALS, F_SEAL_SHRINK)) {
		r = -errno;
		snprintf(err, errlen, "lio_drv: memfd of %llu bytes: %s",
			 (unsigned long long)d->mem_bytes, strerror(errno));
		goto fail;
	}
	d->mem = mmap(NULL, d->mem_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, d->memfd, 0);
	if (d->mem == MAP_FAILED) {
		d->mem = NULL;
		r = -errno;
		snprintf(err, errlen, "lio_drv: mmap: %s", strerror(errno));
		goto fail;
	}
	r = lio_drv_populate(d->mem, d->mem_bytes);
	if (r) {
		snprintf(err, errlen, "lio_drv: populating %llu bytes: %s",
			 (unsigned long long)d->mem_bytes, strerror(-r));
		goto fail;
	}
	w.r[0] = (struct lio_dma_region){
	    .gpa = LIO_DRV_GPA_BASE, .size = d->mem_bytes, .fd_offset = 0, .fd = d->memfd};
	r = lio_client_dma_register(c, &w);
	if (r) {
		snprintf(err, errlen, "lio_drv: %s", lio_client_error(c));
		goto fail;
	}
	if (want_qmem) {
		uint64_t per = lio_pages((uint64_t)o->depth * sizeof(struct nvme_sqe)) +
			       lio_pages((uint64_t)o->depth * sizeof(struct nvme_cqe)) +
			       2 * LIO_PAGE_SIZE;
		struct lio_qmem q = {.size = per * o->nr_qp};

		r = lio_client_qmem_alloc(c, &q);
		if (r) {
			snprintf(err, errlen, "lio_drv: %s", lio_client_error(c));
			goto fail;
		}
		d->qmem_fd = q.fd;
		d->qmem_bytes = q.size;
		r = lio_qmem_fd_check(c, q.fd, q.size, err, errlen);
		if (r)
			goto fail;
		d->qmem = mmap(NULL, q.size, PROT_READ | PROT_WRITE, MAP_SHARED, q.fd, 0);
		if (d->qmem == MAP_FAILED) {
			d->qmem = NULL;
			r = -errno;
			snprintf(err, errlen, "lio_drv: mmap of queue memory: %s", strerror(errno));
			goto fail;
		}
	}
	if (o->qp_flags & LIO_QP_DB_EVENTFD) {
		shadow = lio_drv_alloc(d, 2 * LIO_PAGE_SIZE);
		if (!shadow) {
			r = -ENOMEM;
			snprintf(err, errlen, "lio_drv: no room for the shadow doorbells");
			goto fail;
		}
	}
	for (i = 0; i < o->nr_qp; i++) {
		r = lio_drv_qp_open(d, i, shadow, err, errlen);
		d->nr_qp = i + (r == 0);
		if (r)
			goto fail;
	}
	*out = d;
	return 0;
fail:
	lio_drv_close(d);
	return r;
}

void lio_drv_close(struct lio_drv *d)
{
	unsigned i;

	if (!d)
		return;
	for (i = 0; i < d->nr_qp; i++)
		lio_client_qp_destroy(d->c, d->qp[i].qp_id);
	for (i = 0; i < LIO_DRV_MAX_QP; i++) {
		if (d->qp[i].db_fd > 0)
			close(d->qp[i].db_fd);
		if (d->qp[i].irq_fd > 0)
			close(d->qp[i].irq_fd);
	}
	if (d->qmem)
		munmap(d->qmem, d->qmem_bytes);
	if (d->qmem_fd >= 0)
		close(d->qmem_fd);
	if (d->mem)
		munmap(d->mem, d->mem_bytes);
	if (d->memfd >= 0)
		close(d->memfd);
	free(d);
}

int lio_drv_queue(struct lio_drv *d, unsigned qi, const struct nvme_sqe *sqe)
{
	struct lio_drv_qp *q = &d->qp[qi];

	if (q->outstanding >= q->depth - 1)
		return -EBUSY;
	memcpy(&q->sq[q->sq_tail], sqe, sizeof(*sqe));
	q->sq_tail = nvmeq_next(q->sq_tail, q->depth);
	q->outstanding++;
	return 0;
}

void lio_drv_ring(struct lio_drv *d, unsigned qi)
{
	struct lio_drv_qp *q = &d->qp[qi];

	__atomic_store_n(q->sq_db, q->sq_tail, __ATOMIC_RELEASE);
	if (q->db_fd >= 0)
		eventfd_write(q->db_fd, 1);
}

int lio_drv_submit(struct lio_drv *d, unsigned qi, struct nvme_sqe *sqe)
{
	struct lio_drv_qp *q = &d->qp[qi];

	if (q->outstanding >= q->depth - 1)
		return -EBUSY;
	sqe->cid = q->next_cid++;
	lio_drv_queue(d, qi, sqe);
	lio_drv_ring(d, qi);
	return sqe->cid;
}

int lio_drv_reap(struct lio_drv *d, unsigned qi, struct nvme_cqe *out, unsigned max, int timeout_ms)
{
	struct lio_drv_qp *q = &d->qp[qi];
	/* no clock for a look without a wait: a caller polling at depth looks very often */
	double until = timeout_ms > 0 ? lio_now_ms() + timeout_ms : 0, now;
	unsigned n = 0, spins = 0;

	for (;;) {
		while (n < max && nvmeq_cqe_take(&q->cq[q->cq_head], q->phase, &out[n])) {
			n++;
			if (nvmeq_step(&q->cq_head, q->depth))
				q->phase ^= 1;
			if (q->outstanding)
				q->outstanding--;
		}
		if (n) {
			__atomic_store_n(q->cq_db, q->cq_head, __ATOMIC_RELEASE);
			return (int)n;
		}
		if (timeout_ms <= 0)
			return 0;
		now = lio_now_ms();
		if (now > until)
			return 0;
		if (q->irq_fd >= 0) {
			/* asleep until the interrupt or the deadline: the backend signals every
			 * completion it posts (coalesced ones at the latest when the queue has none
			 * left in flight), and a signal that came before this wait is still
			 * counted, so nothing is missed; a wait that woke every millisecond made a
			 * few hundred idle clients a scheduler storm */
			struct pollfd p = {.fd = q->irq_fd, .events = POLLIN};
			eventfd_t v;

			if (poll(&p, 1, lio_ms_int(until - now + 1)) > 0)
				eventfd_read(q->irq_fd, &v);
		} else if (++spins % 64 == 0) {
			sched_yield();
		}
	}
}

void lio_drv_prp(struct lio_drv *d, unsigned qi, struct nvme_sqe *sqe, uint64_t gpa, uint32_t len)
{
	struct lio_drv_qp *q = &d->qp[qi];
	uint64_t first = LIO_PAGE_SIZE - (gpa & (LIO_PAGE_SIZE - 1));
	uint64_t next = (gpa + first);
	uint64_t *list;
	unsigned i;

	sqe->prp1 = gpa;
	sqe->prp2 = 0;
	if (len <= first)
		return;
	if (len <= first + LIO_PAGE_SIZE) {
		sqe->prp2 = next;
		return;
	}
	/* the list page of the SQ slot this command is about to take */
	sqe->prp2 = q->prp_gpa + (uint64_t)q->sq_tail * LIO_PAGE_SIZE;
	list = lio_drv_ptr(d, sqe->prp2);
	for (i = 0; first + (uint64_t)i * LIO_PAGE_SIZE < len && i < LIO_PAGE_SIZE / 8; i++)
		list[i] = next + (uint64_t)i * LIO_PAGE_SIZE;
}

uint16_t lio_drv_io(struct lio_drv *d, unsigned qi, uint8_t opcode, uint64_t lba, uint32_t nlb,
		    uint64_t gpa)
{
	struct nvme_sqe sqe = {.opcode = opcode, .nsid = 1};
	struct nvme_cqe cqe;
	double until;
	int cid;

	if (d->o.mode == LIGHTIOV_MODE_PASSTHROUGH)
		lba += d->o.lba_start;
	if (opcode != NVME_CMD_FLUSH) {
		sqe.cdw10 = (uint32_t)lba;
		sqe.cdw11 = (uint32_t)(lba >> 32);
		sqe.cdw12 = nlb ? nlb - 1 : 0;
		if (opcode == NVME_CMD_READ || opcode == NVME_CMD_WRITE)
			lio_drv_prp(d, qi, &sqe, gpa, nlb << d->o.lba_shift);
	}
	cid = lio_drv_submit(d, qi, &sqe);
	if (cid < 0)
		return 0xffff;
	/* one deadline for the command, and no more completions of other commands than the queue
	 * can hold: a backend posting stray ones cannot keep this waiting */
	until = lio_now_ms() + (d->io_timeout_ms > 0 ? d->io_timeout_ms : LIO_DRV_IO_TIMEOUT_MS);
	for (unsigned stray = 0; stray <= d->o.depth; stray++) {
		double left = until - lio_now_ms();

		if (left < 1 || lio_drv_reap(d, qi, &cqe, 1, lio_ms_int(left)) != 1)
			return 0xffff;
		if (cqe.cid == (uint16_t)cid)
			return (uint16_t)(cqe.status >> 1);
	}
	return 0xffff;
}
