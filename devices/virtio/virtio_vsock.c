/* virtio-vsock over the PCI transport, stream sockets only, with the hybrid Unix-socket host
 * side (virtio_vsock.h). One thread per device runs everything: the listener at PATH, every
 * connection's Unix socket, the tx queue (packets from the guest) and the rx queue (packets to
 * it). Flow control is the spec's credit scheme both ways: the guest never has more bytes in
 * flight to a host socket than the buffer lvmm keeps for it, and lvmm never sends the guest
 * more than the buffer space the guest advertised. Every packet header the guest writes is
 * untrusted: its addresses, ports, lengths and credit figures are checked before use; a packet
 * that breaks the protocol resets its connection, never the device. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "virtio_pci.h"
#include "virtio_vsock.h"

#define VIRTIO_ID_VSOCK 19

#define VQ_RX	 0
#define VQ_TX	 1
#define VQ_EVENT 2
#define VQ_SIZE	 256

#define VSOCK_TYPE_STREAM 1
enum vsock_op {
	OP_INVALID,
	OP_REQUEST,
	OP_RESPONSE,
	OP_RST,
	OP_SHUTDOWN,
	OP_RW,
	OP_CREDIT_UPDATE,
	OP_CREDIT_REQUEST,
};
#define SHUT_RCV  1u
#define SHUT_SEND 2u

#define HDR_LEN		 44
#define CONN_MAX	 256	     /* connections per device */
#define CONN_BUF	 (256 << 10) /* bytes of guest data lvmm holds per connection */
#define PKT_MAX		 (64 << 10)  /* payload of one packet to the guest */
#define LINE_MAX_LEN	 32	     /* "CONNECT <port>\n" */
#define CTRL_MAX	 64	     /* resets to unknown peers waiting for rx buffers */
#define HOST_PORT_FIRST	 (1u << 30)  /* ports lvmm gives host-initiated connections */
#define CREDIT_THRESHOLD (CONN_BUF / 4)

struct vsock_hdr {
	uint64_t src_cid, dst_cid;
	uint32_t src_port, dst_port, len;
	uint16_t type, op;
	uint32_t flags, buf_alloc, fwd_cnt;
};

enum conn_state {
	C_FREE,
	C_HOST_LINE,	   /* a host program connected; its CONNECT line is being read */
	C_HOST_CONNECTING, /* REQUEST sent to the guest, its RESPONSE awaited */
	C_ESTABLISHED,
	C_CLOSING, /* both sides shut: the guest's RST awaited (or sent) */
};

struct vsock_conn {
	enum conn_state state;
	int fd;
	uint32_t host_port, guest_port;
	/* host -> guest: the guest's receive buffer as it advertised it */
	uint32_t peer_buf_alloc, peer_fwd_cnt, tx_cnt;
	/* guest -> host: bytes held for the socket */
	uint8_t *buf;
	uint32_t buf_head, buf_len;
	uint32_t fwd_cnt, fwd_sent; /* forwarded, and as last told to the guest */
	bool guest_shut_send, guest_shut_rcv, host_eof;
	/* control packets owed to the guest */
	bool want_request, want_response, want_credit, want_shutdown;
	char line[LINE_MAX_LEN];
	unsigned line_len;
};

struct vsock_ctrl {
	uint32_t src_port, dst_port;
};

struct virtio_vsock {
	struct virtio_pci vp;
	struct dev_host host;
	char name[64];
	uint64_t cid;
	char path[VIRTIO_VSOCK_PATH_MAX];
	int listen_fd, stop_fd;
	bool owns_path;	    /* PATH is the device's socket: removed with it */
	bool released_path; /* owns_path before a migration's release */
	pthread_t thread;
	bool thread_up;
	uint32_t next_host_port;
	struct vsock_conn conn[CONN_MAX];
	struct vsock_ctrl rst[CTRL_MAX];
	unsigned nrst;
	struct virtq_chain chain;
	uint8_t pkt[HDR_LEN + PKT_MAX];
	uint64_t gen, seen_gen; /* device resets (vp.lock), as the thread last saw them */
	bool paused;		/* vm.pause: the thread stays out of the rings and sockets */
	bool want_reset_event;	/* restored: TRANSPORT_RESET owed on the event queue */
	/* counters */
	uint64_t rx_pkts, tx_pkts, rx_bytes, tx_bytes, conns, resets, errors, wakeups;
};

/* ---- configuration space (5.10.4) and reset ---- */

static void vsock_cfg_read(struct virtio_pci *vp, uint64_t off, void *data, unsigned len)
{
	struct virtio_vsock *v = vp->opaque;
	uint8_t img[8];

	for (unsigned i = 0; i < 8; i++)
		img[i] = (uint8_t)(v->cid >> (8 * i));
	memset(data, 0, len);
	if (off < sizeof(img))
		memcpy(data, img + off, len < sizeof(img) - off ? len : sizeof(img) - off);
}

/* The driver reset the device (vp.lock held): the thread drops every connection. */
static void vsock_reset(struct virtio_pci *vp)
{
	struct virtio_vsock *v = vp->opaque;

	v->gen++;
}

static const struct virtio_dev_ops vsock_ops = {
    .reset = vsock_reset,
    .cfg_read = vsock_cfg_read,
};

/* ---- packets ---- */

static void get_le(const uint8_t *p, void *out, unsigned n)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	if (n == 8)
		*(uint64_t *)out = v;
	else if (n == 4)
		*(uint32_t *)out = (uint32_t)v;
	else
		*(uint16_t *)out = (uint16_t)v;
}

static void put_le(uint8_t *p, uint64_t v, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void hdr_decode(const uint8_t *p, struct vsock_hdr *h)
{
	get_le(p, &h->src_cid, 8);
	get_le(p + 8, &h->dst_cid, 8);
	get_le(p + 16, &h->src_port, 4);
	get_le(p + 20, &h->dst_port, 4);
	get_le(p + 24, &h->len, 4);
	get_le(p + 28, &h->type, 2);
	get_le(p + 30, &h->op, 2);
	get_le(p + 32, &h->flags, 4);
	get_le(p + 36, &h->buf_alloc, 4);
	get_le(p + 40, &h->fwd_cnt, 4);
}

static void hdr_encode(uint8_t *p, const struct vsock_hdr *h)
{
	put_le(p, h->src_cid, 8);
	put_le(p + 8, h->dst_cid, 8);
	put_le(p + 16, h->src_port, 4);
	put_le(p + 20, h->dst_port, 4);
	put_le(p + 24, h->len, 4);
	put_le(p + 28, h->type, 2);
	put_le(p + 30, h->op, 2);
	put_le(p + 32, h->flags, 4);
	put_le(p + 36, h->buf_alloc, 4);
	put_le(p + 40, h->fwd_cnt, 4);
}

/* A header from the host's end of c (or of a port pair with no connection). */
static struct vsock_hdr hdr_for(const struct virtio_vsock *v, struct vsock_conn *c,
				uint32_t host_port, uint32_t guest_port, uint16_t op)
{
	struct vsock_hdr h = {.src_cid = VIRTIO_VSOCK_HOST_CID,
			      .dst_cid = v->cid,
			      .src_port = c ? c->host_port : host_port,
			      .dst_port = c ? c->guest_port : guest_port,
			      .type = VSOCK_TYPE_STREAM,
			      .op = op,
			      .buf_alloc = CONN_BUF};

	if (c) {
		h.fwd_cnt = c->fwd_cnt;
		c->fwd_sent = c->fwd_cnt;
	}
	return h;
}

/* ---- connections ---- */

static struct vsock_conn *conn_find(struct virtio_vsock *v, uint32_t host_port, uint32_t guest_port)
{
	for (unsigned i = 0; i < CONN_MAX; i++) {
		struct vsock_conn *c = &v->conn[i];

		if (c->state >= C_HOST_CONNECTING && c->host_port == host_port &&
		    c->guest_port == guest_port)
			return c;
	}
	return NULL;
}

static struct vsock_conn *conn_new(struct virtio_vsock *v, int fd, enum conn_state st)
{
	for (unsigned i = 0; i < CONN_MAX; i++) {
		struct vsock_conn *c = &v->conn[i];

		if (c->state != C_FREE)
			continue;
		c->buf = malloc(CONN_BUF);
		if (!c->buf)
			return NULL;
		c->state = st;
		c->fd = fd;
		v->conns++;
		return c;
	}
	return NULL;
}

static void conn_free(struct vsock_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	free(c->buf);
	memset(c, 0, sizeof(*c));
	c->fd = -1;
}

/* A reset owed to a peer lvmm keeps no connection for (dropped when too many wait). */
static void rst_owed(struct virtio_vsock *v, uint32_t host_port, uint32_t guest_port)
{
	if (v->nrst < CTRL_MAX)
		v->rst[v->nrst++] = (struct vsock_ctrl){host_port, guest_port};
}

/* The connection ends: the guest is told unless it ended it. */
static void conn_abort(struct virtio_vsock *v, struct vsock_conn *c, bool tell_guest)
{
	if (tell_guest && c->state >= C_HOST_CONNECTING)
		rst_owed(v, c->host_port, c->guest_port);
	v->resets++;
	conn_free(c);
}

static uint32_t guest_credit(const struct vsock_conn *c)
{
	uint32_t in_flight = c->tx_cnt - c->peer_fwd_cnt;

	return in_flight < c->peer_buf_alloc ? c->peer_buf_alloc - in_flight : 0;
}

/* Guest data held for c to its socket, as far as the socket takes it. */
static void conn_flush(struct virtio_vsock *v, struct vsock_conn *c)
{
	while (c->buf_len) {
		uint32_t run =
		    CONN_BUF - c->buf_head < c->buf_len ? CONN_BUF - c->buf_head : c->buf_len;
		ssize_t n = send(c->fd, c->buf + c->buf_head, run, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			break;
		if (n <= 0) {
			conn_abort(v, c, true);
			return;
		}
		c->buf_head = (c->buf_head + (uint32_t)n) % CONN_BUF;
		c->buf_len -= (uint32_t)n;
		c->fwd_cnt += (uint32_t)n;
	}
	if (c->state == C_CLOSING) {
		if (!c->buf_len)
			conn_abort(v, c, true); /* all delivered: the reset ends it */
		return;
	}
	if (c->fwd_cnt - c->fwd_sent >= CREDIT_THRESHOLD ||
	    (!c->buf_len && c->fwd_cnt != c->fwd_sent))
		c->want_credit = true;
	if (!c->buf_len && c->guest_shut_send)
		shutdown(c->fd, SHUT_WR);
}

/* ---- from the guest: the tx queue ---- */

static void tx_packet(struct virtio_vsock *v, const struct vsock_hdr *h, const uint8_t *payload)
{
	struct vsock_conn *c;

	if (h->src_cid != v->cid || h->dst_cid != VIRTIO_VSOCK_HOST_CID ||
	    h->type != VSOCK_TYPE_STREAM) {
		v->errors++;
		if (h->op != OP_RST && h->src_cid == v->cid)
			rst_owed(v, h->dst_port, h->src_port);
		return;
	}
	c = conn_find(v, h->dst_port, h->src_port);
	if (c) {
		c->peer_buf_alloc = h->buf_alloc;
		c->peer_fwd_cnt = h->fwd_cnt;
	}
	switch (h->op) {
	case OP_REQUEST: {
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		int fd;

		if (c) {
			conn_abort(v, c, true);
			return;
		}
		/* the program listening at PATH_P, connected without blocking */
		if (snprintf(sa.sun_path, sizeof(sa.sun_path), "%s_%u", v->path, h->dst_port) >=
		    (int)sizeof(sa.sun_path)) {
			rst_owed(v, h->dst_port, h->src_port);
			return;
		}
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) ||
		    !(c = conn_new(v, fd, C_ESTABLISHED))) {
			if (fd >= 0)
				close(fd);
			rst_owed(v, h->dst_port, h->src_port);
			return;
		}
		c->host_port = h->dst_port;
		c->guest_port = h->src_port;
		c->peer_buf_alloc = h->buf_alloc;
		c->peer_fwd_cnt = h->fwd_cnt;
		c->want_response = true;
		return;
	}
	case OP_RESPONSE: {
		char ok[32];
		int n;

		if (!c || c->state != C_HOST_CONNECTING) {
			if (c)
				conn_abort(v, c, true);
			else
				rst_owed(v, h->dst_port, h->src_port);
			return;
		}
		c->state = C_ESTABLISHED;
		n = snprintf(ok, sizeof(ok), "OK %u\n", c->host_port);
		if (send(c->fd, ok, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) != n)
			conn_abort(v, c, true);
		return;
	}
	case OP_RW:
		if (!c || c->state != C_ESTABLISHED || c->guest_shut_send ||
		    h->len > CONN_BUF - c->buf_len) {
			/* data beyond the credit lvmm gave, or for no connection */
			v->errors++;
			if (c)
				conn_abort(v, c, true);
			else
				rst_owed(v, h->dst_port, h->src_port);
			return;
		}
		for (uint32_t i = 0; i < h->len; i++)
			c->buf[(c->buf_head + c->buf_len + i) % CONN_BUF] = payload[i];
		c->buf_len += h->len;
		v->tx_bytes += h->len;
		conn_flush(v, c);
		return;
	case OP_CREDIT_UPDATE:
		return; /* the figures were taken above */
	case OP_CREDIT_REQUEST:
		if (c)
			c->want_credit = true;
		return;
	case OP_SHUTDOWN:
		if (!c)
			return;
		c->guest_shut_send |= !!(h->flags & SHUT_SEND);
		c->guest_shut_rcv |= !!(h->flags & SHUT_RCV);
		if (c->guest_shut_send && c->guest_shut_rcv)
			c->state = C_CLOSING; /* ends with our reset once its data is out */
		conn_flush(v, c);
		return;
	case OP_RST:
		if (c)
			conn_abort(v, c, false);
		return;
	default:
		v->errors++;
		if (c)
			conn_abort(v, c, true);
		return;
	}
}

/* One packet the guest sent, its first got bytes copied to v->pkt (vp.lock held). */
static void tx_bytes(struct virtio_vsock *v, uint32_t got)
{
	struct vsock_hdr h;

	v->tx_pkts++;
	if (got < HDR_LEN) {
		v->errors++;
		return;
	}
	hdr_decode(v->pkt, &h);
	if (h.len > got - HDR_LEN || (h.op != OP_RW && h.len)) {
		/* a length the buffer does not hold: the connection it names ends */
		struct vsock_conn *c = h.src_cid == v->cid && h.dst_cid == VIRTIO_VSOCK_HOST_CID
					   ? conn_find(v, h.dst_port, h.src_port)
					   : NULL;

		v->errors++;
		if (c)
			conn_abort(v, c, true);
		else if (h.src_cid == v->cid && h.op != OP_RST)
			rst_owed(v, h.dst_port, h.src_port);
		return;
	}
	tx_packet(v, &h, v->pkt + HDR_LEN);
}

/* Takes every packet the guest queued (vp.lock held); true when chains were returned. */
static bool tx_run(struct virtio_vsock *v)
{
	struct virtq *q = &v->vp.q[VQ_TX].vq;
	char err[160];
	bool pushed = false;

	while (v->vp.q[VQ_TX].enabled) {
		uint32_t got = 0;
		int r = virtq_pop(q, &v->chain, err, sizeof(err));

		if (r < 0) {
			virtio_pci_ring_error(&v->vp, VQ_TX, err);
			break;
		}
		if (!r) {
			if (!virtq_has_avail(q))
				break;
			continue;
		}
		/* the whole readable part, header and payload, copied out of the guest's reach */
		for (unsigned i = 0; i < v->chain.nseg && !v->chain.seg[i].writable; i++) {
			uint32_t n = v->chain.seg[i].len;

			if (n > sizeof(v->pkt) - got)
				n = (uint32_t)sizeof(v->pkt) - got;
			memcpy(v->pkt + got, v->chain.seg[i].host, n);
			got += n;
		}
		virtq_push(q, v->chain.head, 0);
		pushed = true;
		tx_bytes(v, got);
	}
	return pushed;
}

void virtio_vsock_tx_packet(void *dev, const uint8_t *pkt, size_t len)
{
	struct virtio_vsock *v = dev;

	pthread_mutex_lock(&v->vp.lock);
	if (len > sizeof(v->pkt))
		len = sizeof(v->pkt);
	memcpy(v->pkt, pkt, len);
	tx_bytes(v, (uint32_t)len);
	pthread_mutex_unlock(&v->vp.lock);
	virtio_eventfd_signal(v->vp.kick_fd[VQ_RX]); /* answers go out when rx buffers come */
}

/* ---- to the guest: the rx queue ---- */

/* Puts one packet into the next rx chain (vp.lock held): data read from c's socket when it has
 * credit and fill, else the control packet owed. false when no chain is free. */
static bool rx_one(struct virtio_vsock *v, struct vsock_conn *c, struct vsock_ctrl *rst,
		   bool *pushed)
{
	struct virtq *q = &v->vp.q[VQ_RX].vq;
	struct vsock_hdr h;
	char err[160];
	uint32_t room, len = 0;
	int r;

	if (!v->vp.q[VQ_RX].enabled)
		return false;
	do
		r = virtq_pop(q, &v->chain, err, sizeof(err));
	while (!r && virtq_has_avail(q));
	if (r < 0)
		virtio_pci_ring_error(&v->vp, VQ_RX, err);
	if (r <= 0)
		return false;
	room = v->chain.in_len > HDR_LEN ? (uint32_t)(v->chain.in_len - HDR_LEN) : 0;
	if (v->chain.in_len < HDR_LEN) {
		/* a buffer that cannot hold a header: returned empty */
		virtq_push(q, v->chain.head, 0);
		*pushed = true;
		v->errors++;
		return true;
	}
	if (rst) {
		h = hdr_for(v, NULL, rst->src_port, rst->dst_port, OP_RST);
	} else if (c->want_request) {
		h = hdr_for(v, c, 0, 0, OP_REQUEST);
		c->want_request = false;
	} else if (c->want_response) {
		h = hdr_for(v, c, 0, 0, OP_RESPONSE);
		c->want_response = false;
	} else if (c->want_shutdown) {
		h = hdr_for(v, c, 0, 0, OP_SHUTDOWN);
		h.flags = SHUT_RCV | SHUT_SEND;
		c->want_shutdown = false;
	} else {
		/* data: as much as the guest's credit, this buffer and one packet take */
		uint32_t want = guest_credit(c);
		ssize_t n = 0;

		if (want > room)
			want = room;
		if (want > PKT_MAX)
			want = PKT_MAX;
		if (want && !c->host_eof)
			n = recv(c->fd, v->pkt + HDR_LEN, want, MSG_DONTWAIT);
		if (n > 0) {
			len = (uint32_t)n;
			h = hdr_for(v, c, 0, 0, OP_RW);
			h.len = len;
			c->tx_cnt += len;
			v->rx_bytes += len;
		} else if (n == 0 && want && !c->host_eof) {
			/* the host program closed its end: no more data either way */
			c->host_eof = true;
			h = hdr_for(v, c, 0, 0, OP_SHUTDOWN);
			h.flags = SHUT_RCV | SHUT_SEND;
		} else {
			/* nothing to read after all, or only a credit figure owed */
			h = hdr_for(v, c, 0, 0, OP_CREDIT_UPDATE);
		}
		c->want_credit = false;
	}
	hdr_encode(v->pkt, &h);
	virtq_chain_write(&v->chain, v->pkt, HDR_LEN + len);
	virtq_push(q, v->chain.head, HDR_LEN + len);
	v->rx_pkts++;
	*pushed = true;
	return true;
}

static bool conn_owes(const struct vsock_conn *c)
{
	return c->want_request || c->want_response || c->want_shutdown || c->want_credit;
}

/* Everything owed to the guest that rx buffers take, data last (vp.lock held). */
static bool rx_run(struct virtio_vsock *v, const bool *readable)
{
	bool pushed = false;

	while (v->nrst) {
		struct vsock_ctrl r = v->rst[v->nrst - 1];

		if (!rx_one(v, NULL, &r, &pushed))
			return pushed;
		v->nrst--;
	}
	for (unsigned i = 0; i < CONN_MAX; i++) {
		struct vsock_conn *c = &v->conn[i];

		if (c->state < C_HOST_CONNECTING)
			continue;
		while (conn_owes(c))
			if (!rx_one(v, c, NULL, &pushed))
				return pushed;
		/* data only once established and while the guest has room for it */
		while (readable[i] && c->state == C_ESTABLISHED && !c->host_eof &&
		       guest_credit(c) && !c->guest_shut_rcv) {
			uint64_t before = c->tx_cnt;

			if (!rx_one(v, c, NULL, &pushed))
				return pushed;
			if (c->tx_cnt == before)
				break; /* drained (or closed: the SHUTDOWN went out) */
		}
	}
	return pushed;
}

/* The transport reset event owed after a restore (vp.lock held): the guest's driver drops every
 * connection it had (their host ends were in the old process) and reads the CID again. Waits
 * for an event buffer when the guest has none queued; true when one was used. */
static bool event_run(struct virtio_vsock *v)
{
	struct virtq *q = &v->vp.q[VQ_EVENT].vq;
	uint8_t ev[4] = {VIRTIO_VSOCK_EVENT_TRANSPORT_RESET, 0, 0, 0};
	bool pushed = false;
	char err[160];
	int r;

	while (v->want_reset_event && v->vp.q[VQ_EVENT].enabled) {
		do
			r = virtq_pop(q, &v->chain, err, sizeof(err));
		while (!r && virtq_has_avail(q));
		if (r < 0)
			virtio_pci_ring_error(&v->vp, VQ_EVENT, err);
		if (r <= 0)
			break;
		pushed = true;
		if (v->chain.in_len < sizeof(ev) || v->chain.out_len) {
			/* not a buffer an event fits: returned empty, the next one is tried */
			virtq_push(q, v->chain.head, 0);
			v->errors++;
			continue;
		}
		virtq_chain_write(&v->chain, ev, sizeof(ev));
		virtq_push(q, v->chain.head, sizeof(ev));
		v->want_reset_event = false;
		v->resets++;
	}
	return pushed;
}

/* ---- the host side ---- */

static void host_accept(struct virtio_vsock *v)
{
	for (;;) {
		int fd = accept4(v->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

		if (fd < 0)
			return;
		if (!conn_new(v, fd, C_HOST_LINE)) {
			close(fd);
			v->errors++;
		}
	}
}

/* Reads a host program's "CONNECT <port>\n"; then the guest is asked (REQUEST). */
static void host_line(struct virtio_vsock *v, struct vsock_conn *c)
{
	ssize_t n = recv(c->fd, c->line + c->line_len, 1, MSG_DONTWAIT);
	char *end;
	unsigned long port;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		conn_free(c);
		return;
	}
	if (c->line[c->line_len++] != '\n') {
		if (c->line_len == LINE_MAX_LEN)
			conn_free(c); /* no line this long is a CONNECT */
		return;
	}
	c->line[c->line_len - 1] = 0;
	errno = 0;
	port = strncmp(c->line, "CONNECT ", 8) ? 0 : strtoul(c->line + 8, &end, 10);
	if (!port || errno || *end || port > UINT32_MAX) {
		static const char no[] = "ERROR expected CONNECT <port>\n";

		(void)!send(c->fd, no, sizeof(no) - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
		conn_free(c);
		return;
	}
	/* a host port no other connection of this guest port uses (at most CONN_MAX tries) */
	do {
		if (v->next_host_port < HOST_PORT_FIRST)
			v->next_host_port = HOST_PORT_FIRST; /* wrapped */
		c->host_port = v->next_host_port++;
	} while (conn_find(v, c->host_port, (uint32_t)port));
	c->guest_port = (uint32_t)port;
	c->state = C_HOST_CONNECTING;
	c->want_request = true;
}

static void conns_drop_all(struct virtio_vsock *v)
{
	for (unsigned i = 0; i < CONN_MAX; i++)
		if (v->conn[i].state != C_FREE)
			conn_free(&v->conn[i]);
	v->nrst = 0;
}

/* The thread's poll set: stop, the tx, rx and event kicks and the listening socket, then one entry
 * per connection. */
#define POLL_FIXED 5

static void *vsock_thread(void *arg)
{
	struct virtio_vsock *v = arg;
	struct pollfd p[POLL_FIXED + CONN_MAX];
	int slot[POLL_FIXED + CONN_MAX];
	bool readable[CONN_MAX];
	char err[256];

	if (v->host.sock_thread && v->host.sock_thread(err, sizeof(err)))
		fprintf(stderr, "vsock %s: %s\n", v->name, err);
	for (;;) {
		unsigned n = 0;
		bool tx = false, rx = false, evq = false, live, paused;

		pthread_mutex_lock(&v->vp.lock);
		paused = v->paused;
		pthread_mutex_unlock(&v->vp.lock);
		p[n] = (struct pollfd){.fd = v->stop_fd, .events = POLLIN};
		slot[n++] = -1;
		p[n] = (struct pollfd){.fd = v->vp.kick_fd[VQ_TX], .events = POLLIN};
		slot[n++] = -1;
		p[n] = (struct pollfd){.fd = v->vp.kick_fd[VQ_RX], .events = POLLIN};
		slot[n++] = -1;
		/* paused: no socket is watched (the resume kicks the thread), so none spins */
		p[n] = (struct pollfd){.fd = paused ? -1 : v->listen_fd, .events = POLLIN};
		slot[n++] = -1;
		p[n] = (struct pollfd){.fd = v->vp.kick_fd[VQ_EVENT], .events = POLLIN};
		slot[n++] = -1;
		assert(n == POLL_FIXED);
		for (unsigned i = 0; i < CONN_MAX; i++) {
			struct vsock_conn *c = &v->conn[i];
			short ev = 0;

			readable[i] = false;
			if (c->state == C_FREE || paused)
				continue;
			if (c->state == C_HOST_LINE ||
			    (c->state == C_ESTABLISHED && !c->host_eof && guest_credit(c)))
				ev |= POLLIN;
			if (c->buf_len)
				ev |= POLLOUT;
			/* nothing wanted from this socket now (its hang-up would be reported at
			 * once, again and again): the guest's packets move the connection on */
			p[n] = (struct pollfd){.fd = ev ? c->fd : -1, .events = ev};
			slot[n++] = (int)i;
		}
		if (poll(p, n, -1) < 0 && errno != EINTR)
			break;
		v->wakeups++;
		if (p[0].revents)
			break;
		virtio_eventfd_take(v->vp.kick_fd[VQ_TX]);
		virtio_eventfd_take(v->vp.kick_fd[VQ_RX]);
		virtio_eventfd_take(v->vp.kick_fd[VQ_EVENT]);
		pthread_mutex_lock(&v->vp.lock);
		if (v->paused) {
			/* a kick taken here is answered at the resume, which kicks again */
			pthread_mutex_unlock(&v->vp.lock);
			continue;
		}
		/* a driver reset since the last look ends every connection made before it */
		if (v->gen != v->seen_gen) {
			v->seen_gen = v->gen;
			conns_drop_all(v);
		}
		if (p[3].revents)
			host_accept(v);
		live = (v->vp.status & VIRTIO_STATUS_DRIVER_OK) &&
		       !(v->vp.status & VIRTIO_STATUS_NEEDS_RESET);
		for (unsigned k = POLL_FIXED; k < n; k++) {
			struct vsock_conn *c = &v->conn[slot[k]];

			if (c->state == C_FREE)
				continue;
			if (c->state == C_HOST_LINE && p[k].revents) {
				host_line(v, c);
				continue;
			}
			if (p[k].revents & POLLOUT)
				conn_flush(v, c);
			if (p[k].revents & (POLLIN | POLLHUP | POLLERR))
				readable[slot[k]] = true;
		}
		if (live) {
			evq = event_run(v);
			tx = tx_run(v);
			rx = rx_run(v, readable);
		} else {
			/* no driver: host programs that connect meanwhile are turned away */
			for (unsigned i = 0; i < CONN_MAX; i++)
				if (v->conn[i].state == C_HOST_CONNECTING)
					conn_free(&v->conn[i]);
		}
		if (tx)
			virtio_pci_queue_interrupt(&v->vp, VQ_TX);
		if (rx)
			virtio_pci_queue_interrupt(&v->vp, VQ_RX);
		if (evq)
			virtio_pci_queue_interrupt(&v->vp, VQ_EVENT);
		pthread_mutex_unlock(&v->vp.lock);
	}
	return NULL;
}

/* ---- the device ---- */

static void vsock_free(struct virtio_vsock *v)
{
	if (v->thread_up) {
		virtio_eventfd_signal(v->stop_fd);
		pthread_join(v->thread, NULL);
	}
	conns_drop_all(v);
	if (v->listen_fd >= 0)
		close(v->listen_fd);
	if (v->owns_path)
		unlink(v->path);
	if (v->stop_fd >= 0)
		close(v->stop_fd);
	free(v);
}

int virtio_vsock_listen(const char *path, const char *name, char *err, unsigned errlen)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct stat st;
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "vsock %s: socket path %s too long", name, path);
		return -ENAMETOOLONG;
	}
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (!lstat(path, &st)) {
		int probe =
		    S_ISSOCK(st.st_mode) ? socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0) : -1;
		bool live = probe >= 0 && !connect(probe, (struct sockaddr *)&sa, sizeof(sa));

		if (probe >= 0)
			close(probe);
		if (!S_ISSOCK(st.st_mode) || live) {
			snprintf(err, errlen, "vsock %s: %s %s", name, path,
				 live ? "is in use by another process (a live socket)"
				      : "exists and is not a socket");
			return -EEXIST;
		}
		unlink(path);
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 64)) {
		int e = errno;

		snprintf(err, errlen, "vsock %s: cannot listen at %s: %s", name, path, strerror(e));
		if (fd >= 0)
			close(fd);
		return -e;
	}
	return fd;
}

/* The listening socket: the one made before a jail (a duplicate; PATH stays its maker's to
 * remove), else one of the device's own at PATH. */
static int vsock_listen(struct virtio_vsock *v, const struct virtio_vsock_config *c, char *err,
			unsigned errlen)
{
	if (c->has_listen_fd) {
		v->listen_fd = fcntl(c->listen_fd, F_DUPFD_CLOEXEC, 3);
		if (v->listen_fd < 0) {
			snprintf(err, errlen, "vsock %s: the socket made before the jail: %s",
				 v->name, strerror(errno));
			return -errno;
		}
		return 0;
	}
	v->listen_fd = virtio_vsock_listen(v->path, v->name, err, errlen);
	if (v->listen_fd < 0) {
		int r = v->listen_fd;

		v->listen_fd = -1;
		return r;
	}
	v->owns_path = true;
	return 0;
}

static int vsock_create(const struct dev_host *h, const void *cfg, const char *id, unsigned idx,
			void **dev, char *err, unsigned errlen)
{
	const struct virtio_vsock_config *c = cfg;
	struct virtio_vsock *v;
	int r;

	(void)idx;
	*dev = NULL;
	if (c->cid < VIRTIO_VSOCK_MIN_CID || c->cid >= UINT32_MAX || !c->socket[0] ||
	    strlen(c->socket) + 12 > VIRTIO_VSOCK_PATH_MAX) {
		snprintf(err, errlen,
			 "vsock %s: cid %llu, socket '%s' (cid 3..2^32-2, a socket "
			 "path of 1..%d characters)",
			 id, (unsigned long long)c->cid, c->socket, VIRTIO_VSOCK_PATH_MAX - 12);
		return -EINVAL;
	}
	v = calloc(1, sizeof(*v));
	if (!v) {
		snprintf(err, errlen, "vsock %s: out of memory", id);
		return -ENOMEM;
	}
	v->host = *h;
	v->cid = c->cid;
	v->next_host_port = HOST_PORT_FIRST;
	snprintf(v->name, sizeof(v->name), "%s", id);
	snprintf(v->path, sizeof(v->path), "%s", c->socket);
	v->listen_fd = v->stop_fd = -1;
	for (unsigned i = 0; i < CONN_MAX; i++)
		v->conn[i].fd = -1;
	r = vsock_listen(v, c, err, errlen);
	if (r)
		goto fail;
	v->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (v->stop_fd < 0) {
		snprintf(err, errlen, "vsock %s: eventfd: %s", id, strerror(errno));
		r = -errno;
		goto fail;
	}
	/* class 0x028000: network controller, other (as other VMMs' vsock) */
	r = virtio_pci_init(&v->vp, id, VIRTIO_ID_VSOCK, 0x028000, 0, 3, VQ_SIZE, &vsock_ops, v,
			    h->gm, err, errlen);
	if (r)
		goto fail;
	r = virtio_pci_kick_eventfds(&v->vp, h->ioeventfd, h->opaque, err, errlen);
	if (!r) {
		r = pthread_create(&v->thread, NULL, vsock_thread, v);
		if (r) {
			snprintf(err, errlen, "vsock %s: thread: %s", id, strerror(r));
			r = -r;
		}
	}
	if (r) {
		virtio_pci_exit(&v->vp);
		goto fail;
	}
	v->thread_up = true;
	*dev = v;
	return 0;
fail:
	vsock_free(v);
	return r;
}

static struct pci_dev *vsock_pci(void *dev)
{
	return &((struct virtio_vsock *)dev)->vp.pci;
}

/* vm.pause: once the lock is ours the thread is out of the rings, and stays out; host programs
 * that connect meanwhile wait in the listen backlog. */
static void vsock_pause(void *dev)
{
	struct virtio_vsock *v = dev;

	pthread_mutex_lock(&v->vp.lock);
	v->paused = true;
	pthread_mutex_unlock(&v->vp.lock);
	virtio_eventfd_signal(v->vp.kick_fd[VQ_TX]); /* out of a poll on the sockets */
}

static void vsock_resume(void *dev)
{
	struct virtio_vsock *v = dev;

	pthread_mutex_lock(&v->vp.lock);
	v->paused = false;
	pthread_mutex_unlock(&v->vp.lock);
	virtio_eventfd_signal(v->vp.kick_fd[VQ_TX]);
}

/* Snapshots. The host ends of the guest's connections are Unix sockets of the process that
 * saved, which cannot come across: only the transport and the CID are saved. Packets the guest
 * queued and the device had not taken stay in the rings (guest RAM) and are answered after the
 * restore as packets of no connection (a reset). The restored device sends
 * VIRTIO_VSOCK_EVENT_TRANSPORT_RESET on the event queue once it runs: the guest's driver resets
 * every connection it had and its programs connect again, through the PATH the restored lvmm
 * listens at. */
#define VSOCK_STATE_VERSION 1u

struct vsock_state {
	uint32_t version, pad;
	uint64_t cid;
};

static int vsock_save(void *dev, void *buf, uint64_t *len, char *err, unsigned errlen)
{
	struct virtio_vsock *v = dev;
	size_t need = sizeof(struct vsock_state) + virtio_pci_state_size(&v->vp);
	struct vsock_state st = {.version = VSOCK_STATE_VERSION, .cid = v->cid};
	bool paused;

	if (!buf) {
		*len = need;
		return 0;
	}
	if (*len < need) {
		snprintf(err, errlen, "virtio-vsock %s: state needs %zu bytes", v->name, need);
		return -ENOSPC;
	}
	pthread_mutex_lock(&v->vp.lock);
	paused = v->paused;
	pthread_mutex_unlock(&v->vp.lock);
	if (!paused) {
		snprintf(err, errlen, "virtio-vsock %s: not paused", v->name);
		return -EBUSY;
	}
	memcpy(buf, &st, sizeof(st));
	virtio_pci_save(&v->vp, (uint8_t *)buf + sizeof(st));
	*len = need;
	return 0;
}

static int vsock_restore(void *dev, const void *buf, uint64_t len, char *err, unsigned errlen)
{
	struct virtio_vsock *v = dev;
	struct vsock_state st;
	int r;

	if (len < sizeof(st)) {
		snprintf(err, errlen, "virtio-vsock %s: state of %llu bytes is too short", v->name,
			 (unsigned long long)len);
		return -EINVAL;
	}
	memcpy(&st, buf, sizeof(st));
	if (st.version != VSOCK_STATE_VERSION || st.cid != v->cid) {
		snprintf(
		    err, errlen,
		    "virtio-vsock %s: saved with guest CID %llu (state version %u), the config "
		    "makes CID %llu",
		    v->name, (unsigned long long)st.cid, st.version, (unsigned long long)v->cid);
		return -EINVAL;
	}
	/* the VM comes back paused: nothing moves until vm.resume, not even while the rings are
	 * being restored (a host program connecting meanwhile would wake the thread) */
	pthread_mutex_lock(&v->vp.lock);
	v->paused = true;
	pthread_mutex_unlock(&v->vp.lock);
	r = virtio_pci_restore(&v->vp, (const uint8_t *)buf + sizeof(st),
			       (size_t)(len - sizeof(st)), err, errlen);
	if (r)
		return r;
	pthread_mutex_lock(&v->vp.lock);
	v->seen_gen = v->gen;
	/* a driver that was running had connections, or may think so */
	v->want_reset_event = (v->vp.status & VIRTIO_STATUS_DRIVER_OK) != 0;
	/* host ports from elsewhere in their range than the saved lvmm's: a guest that has not
	 * taken the reset event yet cannot mistake a new connection for one it still holds */
	{
		uint32_t rnd = 0;

		if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd))
			rnd = (uint32_t)v->gen * 2654435761u; /* no entropy yet: any other start */
		v->next_host_port = HOST_PORT_FIRST + rnd % (1u << 29);
	}
	pthread_mutex_unlock(&v->vp.lock);
	return 0;
}

bool virtio_vsock_reset_owed(void *dev)
{
	struct virtio_vsock *v = dev;
	bool owed;

	pthread_mutex_lock(&v->vp.lock);
	owed = v->want_reset_event;
	pthread_mutex_unlock(&v->vp.lock);
	return owed;
}

static void vsock_counters(void *dev, struct dev_counters *out)
{
	struct virtio_vsock *v = dev;

	/* reads: packets to the guest, writes: from it; bytes likewise */
	out->reads = v->rx_pkts;
	out->writes = v->tx_pkts;
	out->read_bytes = v->rx_bytes;
	out->write_bytes = v->tx_bytes;
	out->doorbells = v->vp.kicks;
	out->irqs = v->vp.interrupts;
	out->wakeups = v->wakeups;
	out->backend_cmds = v->conns;
	out->backend_rejected = v->resets;
	out->backend_errors = v->errors;
}

static void vsock_destroy(void *dev)
{
	struct virtio_vsock *v = dev;

	if (!v)
		return;
	if (v->thread_up) {
		virtio_eventfd_signal(v->stop_fd);
		pthread_join(v->thread, NULL);
		v->thread_up = false;
	}
	virtio_pci_exit(&v->vp);
	vsock_free(v);
}

/* Live migration: the listening socket goes to the destination as it is, so host programs
 * that connect to PATH meanwhile wait in its backlog for the destination, and PATH is left to
 * it (release: this device no longer removes PATH when it goes; reclaim undoes that). The
 * guest's connections are reset as in a restore (vsock_restore). */
static unsigned vsock_hand_fds(void *dev, int *fds, unsigned max)
{
	struct virtio_vsock *v = dev;

	if (!max || v->listen_fd < 0)
		return 0;
	fds[0] = v->listen_fd;
	return 1;
}

static int vsock_release(void *dev, char *err, unsigned errlen)
{
	struct virtio_vsock *v = dev;

	(void)err;
	(void)errlen;
	v->released_path = v->owns_path;
	v->owns_path = false;
	return 0;
}

static int vsock_reclaim(void *dev, char *err, unsigned errlen)
{
	struct virtio_vsock *v = dev;

	(void)err;
	(void)errlen;
	v->owns_path = v->released_path;
	v->released_path = false;
	return 0;
}

static int vsock_take_handed(void *cfg, unsigned index, unsigned count, int fd, char *err,
			     unsigned errlen)
{
	struct virtio_vsock_config *c = cfg;
	struct sockaddr_un sa;
	socklen_t sl = sizeof(sa);
	int type = 0, listening = 0;
	socklen_t il = sizeof(int), ll = sizeof(int);

	if (index || count != 1 || c->has_listen_fd) {
		snprintf(err, errlen, "the source handed over socket %u of %u", index, count);
		return -EINVAL;
	}
	memset(&sa, 0, sizeof(sa));
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &il) || type != SOCK_STREAM ||
	    getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &ll) || !listening ||
	    getsockname(fd, (struct sockaddr *)&sa, &sl) || sa.sun_family != AF_UNIX ||
	    sl <= offsetof(struct sockaddr_un, sun_path) ||
	    strncmp(sa.sun_path, c->socket, sizeof(sa.sun_path)) ||
	    strlen(c->socket) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen,
			 "what the source handed over is not a Unix stream socket listening at %s",
			 c->socket);
		return -EINVAL;
	}
	c->listen_fd = fd;
	c->has_listen_fd = c->listen_owned = true;
	return 0;
}

const struct dev_model virtio_vsock_model = {
    .name = "virtio-vsock",
    .create = vsock_create,
    .pci = vsock_pci,
    .pause = vsock_pause,
    .resume = vsock_resume,
    .save = vsock_save,
    .restore = vsock_restore,
    .release = vsock_release,
    .reclaim = vsock_reclaim,
    .hand_fds = vsock_hand_fds,
    .take_fd = vsock_take_handed,
    .counters = vsock_counters,
    .destroy = vsock_destroy,
};
