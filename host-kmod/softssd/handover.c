/* softssd's hand-over records: sending them with their fds, receiving them with a deadline, and
 * the checks of a record's header and of the fields its fds and sizes depend on. */
#include "softssd/handover.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "softssd/server_int.h"

static const uint32_t ssd_ho_size[SSD_HO_KIND_MAX] = {
    [SSD_HO_REQUEST] = sizeof(struct ssd_ho_request),
    [SSD_HO_SERVER] = sizeof(struct ssd_ho_server),
    [SSD_HO_SESSION] = sizeof(struct ssd_ho_session),
    [SSD_HO_QP] = sizeof(struct ssd_ho_qp),
    [SSD_HO_END] = sizeof(struct ssd_ho_end),
    [SSD_HO_ACK] = sizeof(struct ssd_ho_ack),
    [SSD_HO_ABORT] = sizeof(struct ssd_ho_ack),
};

static const char *const ssd_ho_name[SSD_HO_KIND_MAX] = {
    [SSD_HO_REQUEST] = "request", [SSD_HO_SERVER] = "server", [SSD_HO_SESSION] = "session",
    [SSD_HO_QP] = "queue pair",	  [SSD_HO_END] = "end",	      [SSD_HO_ACK] = "ack",
    [SSD_HO_ABORT] = "abort",
};

_Static_assert(sizeof(struct ssd_ho_hdr) + sizeof(struct ssd_ho_session) <= SSD_HO_MAX_BYTES,
	       "a session record fits one message");
_Static_assert(sizeof(struct ssd_ho_hdr) + sizeof(struct ssd_ho_server) <= SSD_HO_MAX_BYTES,
	       "a server record fits one message");

unsigned ssd_ho_fds_for(const struct ssd_ho_rec *rec)
{
	switch (rec->kind) {
	case SSD_HO_SERVER:
		return 4 + !!(rec->u.srv.flags & SSD_HO_SRV_DIRECT);
	case SSD_HO_SESSION:
		return 1 + rec->u.sess.win.nr_regions + !!rec->u.sess.qmem_bytes;
	case SSD_HO_QP:
		return !!(rec->u.qp.rq.qp.flags & LIO_QP_DB_EVENTFD) +
		       !!(rec->u.qp.rq.qp.flags & LIO_QP_IRQ_ENABLED);
	default:
		return 0;
	}
}

/* The fields the record's fd count and the new daemon's arrays depend on. */
static int ssd_ho_check_fields(const struct ssd_ho_rec *rec, char *err, unsigned errlen)
{
	const struct ssd_ho_server *sv = &rec->u.srv;
	const struct ssd_ho_session *ss = &rec->u.sess;
	const struct ssd_ho_qp *qp = &rec->u.qp;

	switch (rec->kind) {
	case SSD_HO_SERVER:
		if (!memchr(sv->name, 0, sizeof(sv->name)) ||
		    !memchr(sv->model, 0, sizeof(sv->model))) {
			snprintf(err, errlen,
				 "hand-over: server record: name or model not terminated");
			return -EINVAL;
		}
		if (sv->flags & ~SSD_HO_SRV_ALL) {
			snprintf(err, errlen, "hand-over: server record: flags 0x%x unknown",
				 sv->flags);
			return -EINVAL;
		}
		if (sv->lba_shift != 9 && sv->lba_shift != 12) {
			snprintf(err, errlen, "hand-over: server record: lba_shift %u",
				 sv->lba_shift);
			return -EINVAL;
		}
		if (!sv->workers || sv->workers > 64 || !sv->max_clients || !sv->max_qp_client ||
		    !sv->max_qpairs || sv->max_qpairs > LIO_MAX_QPAIRS || sv->seccomp > 2 ||
		    sv->next_qp_id > LIO_MAX_QPAIRS) {
			snprintf(err, errlen,
				 "hand-over: server record: workers %u, max_clients %u, "
				 "max_qp_client %u, max_qpairs %u, seccomp %u or next_qp_id %u "
				 "out of range",
				 sv->workers, sv->max_clients, sv->max_qp_client, sv->max_qpairs,
				 sv->seccomp, sv->next_qp_id);
			return -EINVAL;
		}
		return 0;
	case SSD_HO_SESSION:
		if (ss->win.nr_regions > LIO_MAX_REGIONS || ss->nvols > LIO_MAX_ATTACHED ||
		    ss->admin > 1 || !ss->owner || ss->nqps > LIO_MAX_QPAIRS) {
			snprintf(
			    err, errlen,
			    "hand-over: session record: %u regions, %u volumes, %u queue pairs, "
			    "admin %u or owner %llu out of range",
			    ss->win.nr_regions, ss->nvols, ss->nqps, ss->admin,
			    (unsigned long long)ss->owner);
			return -EINVAL;
		}
		if (!memchr(ss->label, 0, sizeof(ss->label))) {
			snprintf(err, errlen, "hand-over: session record: label not terminated");
			return -EINVAL;
		}
		return 0;
	case SSD_HO_QP:
		if (!qp->qp_id || qp->qp_id > LIO_MAX_QPAIRS || (qp->flags & ~SSD_HO_QP_ALL)) {
			snprintf(err, errlen, "hand-over: queue-pair record: id %u, flags 0x%x",
				 qp->qp_id, qp->flags);
			return -EINVAL;
		}
		return 0;
	case SSD_HO_ACK:
	case SSD_HO_ABORT:
		if (!memchr(rec->u.ack.err, 0, sizeof(rec->u.ack.err)) || rec->u.ack.status > 0) {
			snprintf(err, errlen,
				 "hand-over: %s record: status %d or message unterminated",
				 ssd_ho_name[rec->kind], rec->u.ack.status);
			return -EINVAL;
		}
		return 0;
	default:
		return 0;
	}
}

int ssd_ho_parse(const void *buf, size_t len, unsigned nfds, int trunc, struct ssd_ho_rec *rec,
		 char *err, unsigned errlen)
{
	struct ssd_ho_hdr h;
	unsigned want;
	int r;

	if (len < sizeof(h)) {
		snprintf(err, errlen, "hand-over: message of %zu bytes: shorter than its header",
			 len);
		return -EPROTO;
	}
	memcpy(&h, buf, sizeof(h));
	if (h.magic != SSD_HO_MAGIC) {
		snprintf(err, errlen, "hand-over: magic 0x%x, expected 0x%x", h.magic,
			 SSD_HO_MAGIC);
		return -EPROTO;
	}
	if (h.version != SSD_HO_VERSION) {
		snprintf(err, errlen, "hand-over: version %u, this daemon speaks %u", h.version,
			 SSD_HO_VERSION);
		return -EPROTO;
	}
	if (trunc) {
		snprintf(err, errlen, "hand-over: message larger than %u bytes or %u fds",
			 SSD_HO_MAX_BYTES, SSD_HO_MAX_FDS);
		return -EPROTO;
	}
	if (!h.kind || h.kind >= SSD_HO_KIND_MAX) {
		snprintf(err, errlen, "hand-over: record kind %u unknown", h.kind);
		return -EPROTO;
	}
	if (h.len != len - sizeof(h) || h.len != ssd_ho_size[h.kind] || h.nfds != nfds) {
		snprintf(err, errlen,
			 "hand-over: %s record: %zu payload bytes (header %u, expected %u), %u fds "
			 "(header %u)",
			 ssd_ho_name[h.kind], len - sizeof(h), h.len, ssd_ho_size[h.kind], nfds,
			 h.nfds);
		return -EPROTO;
	}
	memset(&rec->u, 0, sizeof(rec->u));
	rec->kind = h.kind;
	memcpy(&rec->u, (const uint8_t *)buf + sizeof(h), h.len);
	r = ssd_ho_check_fields(rec, err, errlen);
	if (r)
		return r;
	want = ssd_ho_fds_for(rec);
	if (nfds != want) {
		snprintf(err, errlen, "hand-over: %s record: %u fds, its fields ask for %u",
			 ssd_ho_name[h.kind], nfds, want);
		return -EPROTO;
	}
	return 0;
}

/* Sleeps until fd is ready for events or the deadline passes (the caller retries either way). */
static void ssd_ho_wait(int fd, short events, uint64_t deadline_ns)
{
	struct pollfd pf = {.fd = fd, .events = events};
	uint64_t now = ssd_now_ns();

	uint64_t ms = now < deadline_ns ? (deadline_ns - now) / 1000000u + 1 : 0;

	if (ms)
		poll(&pf, 1, ms < 1000 ? (int)ms : 1000);
}

int ssd_ho_send(int fd, uint16_t kind, const void *p, uint32_t len, const int *fds, unsigned nfds,
		uint64_t deadline_ns)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * SSD_HO_MAX_FDS)];
		struct cmsghdr align;
	} ctl;
	struct ssd_ho_hdr h = {SSD_HO_MAGIC, SSD_HO_VERSION, kind, len, nfds};
	struct iovec iov[2] = {{&h, sizeof(h)}, {(void *)p, len}};
	struct msghdr m = {.msg_iov = iov, .msg_iovlen = len ? 2 : 1};
	ssize_t r;

	if (nfds > SSD_HO_MAX_FDS)
		return -EINVAL;
	if (nfds) {
		struct cmsghdr *cm;

		memset(&ctl, 0, sizeof(ctl));
		m.msg_control = ctl.buf;
		m.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		cm = CMSG_FIRSTHDR(&m);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * nfds);
	}
	for (;;) {
		r = sendmsg(fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (r == (ssize_t)(sizeof(h) + len))
			return 0;
		if (r >= 0)
			return -EMSGSIZE;
		if (errno != EAGAIN && errno != EINTR)
			return -errno;
		if (ssd_now_ns() >= deadline_ns)
			return -ETIMEDOUT;
		ssd_ho_wait(fd, POLLOUT, deadline_ns);
	}
}

void ssd_ho_close_fds(struct ssd_ho_rec *rec)
{
	unsigned i;

	for (i = 0; i < rec->nfds; i++)
		if (rec->fds[i] >= 0)
			close(rec->fds[i]);
	rec->nfds = 0;
}

int ssd_ho_recv(int fd, struct ssd_ho_rec *rec, uint64_t deadline_ns, char *err, unsigned errlen)
{
	static _Alignas(8) uint8_t buf[SSD_HO_MAX_BYTES];
	union {
		char buf[CMSG_SPACE(sizeof(int) * SSD_HO_MAX_FDS)];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = {buf, sizeof(buf)};
	struct msghdr m;
	struct cmsghdr *cm;
	ssize_t n;
	int r;

	for (;;) {
		memset(&m, 0, sizeof(m));
		m.msg_iov = &iov;
		m.msg_iovlen = 1;
		m.msg_control = ctl.buf;
		m.msg_controllen = sizeof(ctl.buf);
		n = recvmsg(fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n >= 0 || (errno != EAGAIN && errno != EINTR))
			break;
		if (ssd_now_ns() >= deadline_ns) {
			snprintf(err, errlen, "hand-over: no record within %u ms",
				 SSD_HO_TIMEOUT_MS);
			return -ETIMEDOUT;
		}
		ssd_ho_wait(fd, POLLIN, deadline_ns);
	}
	rec->nfds = 0;
	for (cm = n >= 0 ? CMSG_FIRSTHDR(&m) : NULL; cm; cm = CMSG_NXTHDR(&m, cm)) {
		unsigned k, i;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		k = (unsigned)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		for (i = 0; i < k; i++) {
			int x;

			memcpy(&x, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			if (rec->nfds < SSD_HO_MAX_FDS)
				rec->fds[rec->nfds++] = x;
			else
				close(x);
		}
	}
	if (n <= 0) {
		snprintf(err, errlen, "hand-over: the other daemon went (%s)",
			 n ? strerror(errno) : "end of stream");
		ssd_ho_close_fds(rec);
		return -ECONNRESET;
	}
	r = ssd_ho_parse(buf, (size_t)n, rec->nfds, !!(m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)), rec,
			 err, errlen);
	if (r)
		ssd_ho_close_fds(rec);
	return r;
}
