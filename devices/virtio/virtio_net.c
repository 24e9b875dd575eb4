/* virtio-net over the PCI transport with a tap (or any fd of frames with a vnet header) as the
 * host side. One thread per device serves every queue: transmit chains go to the tap with
 * writev straight from guest memory behind a checked copy of their header; received frames are
 * read whole and copied into one receive chain, or several with mergeable buffers. Every chain
 * and control command the guest writes is checked; what breaks the rules is counted and dropped. */
#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

#include "virtio_net.h"
#include "virtio_pci.h"

#define VIRTIO_ID_NET 1

/* feature bits (5.1.3) */
#define F_CSUM		 0
#define F_GUEST_CSUM	 1
#define F_MTU		 3
#define F_MAC		 5
#define F_GUEST_TSO4	 7
#define F_GUEST_TSO6	 8
#define F_GUEST_UFO	 10
#define F_HOST_TSO4	 11
#define F_HOST_TSO6	 12
#define F_HOST_UFO	 14
#define F_MRG_RXBUF	 15
#define F_STATUS	 16
#define F_CTRL_VQ	 17
#define F_GUEST_ANNOUNCE 21
#define F_MQ		 22
#define F_CTRL_MAC_ADDR	 23
#define BIT(f)		 (1ull << (f))

/* virtio_net_hdr_v1 */
#define HDR_F_NEEDS_CSUM 1
#define HDR_F_DATA_VALID 2
#define GSO_NONE	 0
#define GSO_TCPV4	 1
#define GSO_UDP		 3
#define GSO_TCPV6	 4
#define GSO_ECN		 0x80

/* control queue (5.1.6.5) */
#define CTRL_RX		   0
#define CTRL_MAC	   1
#define CTRL_ANNOUNCE	   3
#define CTRL_MQ		   4
#define CTRL_MAC_TABLE_SET 0
#define CTRL_MAC_ADDR_SET  1
#define CTRL_MQ_PAIRS_SET  0
#define CTRL_OK		   0
#define CTRL_ERR	   1
#define CTRL_CMD_MAX	   4096 /* the largest command taken: a MAC table of ~680 entries */
#define ETH_HLEN	   14
#define FRAME_MAX	   (65536 + ETH_HLEN + 4) /* a 64 KiB GSO frame with a VLAN tag */
#define RX_CHAINS_MAX	   64			  /* mergeable buffers one frame may take */
#define DEFAULT_QUEUE_SIZE 256

struct net_pair {
	int fd;
	uint8_t buf[VIRTIO_NET_HDR_LEN + FRAME_MAX]; /* a frame read from the tap, not yet given */
	uint32_t pend;				     /* its length, 0 when none */
	bool rx_wait;				     /* too few rx buffers: wait for a kick */
	bool eof; /* the fd's peer went away (a socket): nothing more to read from it */
};

struct virtio_net {
	struct virtio_pci vp;
	struct dev_host host;
	char name[64];
	uint8_t mac[6];
	uint16_t mtu;
	unsigned pairs, active, ctrl_q;
	bool is_tap, is_sock, ufo;
	int stop_fd;
	pthread_t thread;
	bool thread_up, paused;
	uint64_t gen, seen_gen;
	bool offloads_set;
	/* restored: the guest is asked (status ANNOUNCE and a configuration interrupt at the
	 * resume) to announce itself, as after a move; cleared by its ANNOUNCE_ACK */
	bool announce, announce_due;
	struct net_pair pair[VIRTIO_NET_MAX_PAIRS];
	struct virtq_chain chain, first;
	uint8_t cmd[CTRL_CMD_MAX];
	/* counters: rx is toward the guest, tx from it */
	uint64_t rx_frames, rx_bytes, rx_dropped, tx_frames, tx_bytes, tx_dropped;
	uint64_t ctrl_cmds, ctrl_errors, wakeups;
};

/* ---- configuration space (5.1.4) and reset ---- */

static void net_cfg_read(struct virtio_pci *vp, uint64_t off, void *data, unsigned len)
{
	struct virtio_net *n = vp->opaque;
	uint8_t img[12];

	memcpy(img, n->mac, 6);
	img[6] = 1 | (n->announce ? 2 : 0); /* status: LINK_UP, ANNOUNCE */
	img[7] = 0;
	img[8] = (uint8_t)n->pairs;
	img[9] = 0;
	img[10] = (uint8_t)n->mtu;
	img[11] = (uint8_t)(n->mtu >> 8);
	memset(data, 0, len);
	if (off < sizeof(img))
		memcpy(data, img + off, len < sizeof(img) - off ? len : sizeof(img) - off);
}

/* The driver may write the MAC when VIRTIO_NET_F_CTRL_MAC_ADDR is not negotiated (legacy). */
static void net_cfg_write(struct virtio_pci *vp, uint64_t off, const void *data, unsigned len)
{
	struct virtio_net *n = vp->opaque;

	if (off < 6 && len <= 6 - off)
		memcpy(n->mac + off, data, len);
}

static void net_reset(struct virtio_pci *vp)
{
	struct virtio_net *n = vp->opaque;

	n->gen++;
}

static const struct virtio_dev_ops net_ops = {
    .reset = net_reset,
    .cfg_read = net_cfg_read,
    .cfg_write = net_cfg_write,
};

static bool negotiated(const struct virtio_net *n, unsigned f)
{
	return (n->vp.driver_features >> f) & 1;
}

/* What the tap may hand the guest: only the offloads the guest accepted. */
static void net_set_offloads(struct virtio_net *n)
{
	unsigned off = 0;

	if (negotiated(n, F_GUEST_CSUM)) {
		off |= TUN_F_CSUM;
		if (negotiated(n, F_GUEST_TSO4))
			off |= TUN_F_TSO4;
		if (negotiated(n, F_GUEST_TSO6))
			off |= TUN_F_TSO6;
		if (n->ufo && negotiated(n, F_GUEST_UFO))
			off |= TUN_F_UFO;
	}
	for (unsigned p = 0; n->is_tap && p < n->pairs; p++)
		if (ioctl(n->pair[p].fd, TUNSETOFFLOAD, off) < 0)
			fprintf(stderr, "net %s: TUNSETOFFLOAD 0x%x: %s\n", n->name, off,
				strerror(errno));
	n->offloads_set = true;
}

/* The next chain of queue qi (vp.lock held): 1, 0 when none waits (or the queue is off), -1
 * when the driver broke the ring. */
static int net_pop(struct virtio_net *n, unsigned qi, struct virtq_chain *c)
{
	struct virtq *q = &n->vp.q[qi].vq;
	char err[160];

	while (n->vp.q[qi].enabled) {
		int r = virtq_pop(q, c, err, sizeof(err));

		if (r < 0) {
			virtio_pci_ring_error(&n->vp, qi, err);
			return -1;
		}
		if (r)
			return 1;
		if (!virtq_has_avail(q))
			return 0;
	}
	return 0;
}

/* ---- from the guest: transmit ---- */

static uint16_t le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

/* The header of a frame of len bytes (header included) the guest sends: true when it asks for
 * nothing the device did not offer and its checksum and segmentation fields fit the frame. */
static bool tx_hdr_ok(const struct virtio_net *n, const uint8_t *h, uint64_t len)
{
	uint8_t flags = h[0], gso = h[1] & (uint8_t)~GSO_ECN;
	uint16_t hdr_len = le16(h + 2), gso_size = le16(h + 4);
	uint16_t csum_start = le16(h + 6), csum_off = le16(h + 8);
	uint64_t frame = len - VIRTIO_NET_HDR_LEN;

	if (len < VIRTIO_NET_HDR_LEN + ETH_HLEN || frame > FRAME_MAX)
		return false;
	if (flags & ~(HDR_F_NEEDS_CSUM | HDR_F_DATA_VALID))
		return false;
	if (flags & HDR_F_NEEDS_CSUM) {
		if (!negotiated(n, F_CSUM) || (uint32_t)csum_start + csum_off + 2 > frame)
			return false;
	}
	switch (gso) {
	case GSO_NONE:
		return !(h[1] & GSO_ECN);
	case GSO_TCPV4:
		if (!negotiated(n, F_HOST_TSO4))
			return false;
		break;
	case GSO_TCPV6:
		if (!negotiated(n, F_HOST_TSO6))
			return false;
		break;
	case GSO_UDP:
		if (!negotiated(n, F_HOST_UFO))
			return false;
		break;
	default:
		return false;
	}
	/* segmentation needs the checksum to be left to the host, and a segment size */
	return (flags & HDR_F_NEEDS_CSUM) && gso_size && hdr_len <= frame;
}

/* One chain from tx queue of pair p (vp.lock held). */
static void tx_chain(struct virtio_net *n, unsigned p, const struct virtq_chain *c)
{
	struct iovec iov[VIRTQ_MAX_SEGS + 1];
	uint8_t hdr[VIRTIO_NET_HDR_LEN];
	unsigned k = 0, i, niov = 1;
	uint32_t got = 0;
	ssize_t w;

	if (c->in_len || c->out_len < VIRTIO_NET_HDR_LEN) {
		n->tx_dropped++; /* a writable buffer in a frame to send, or no header */
		return;
	}
	/* the header copied out of the guest's reach, checked, and sent from the copy */
	for (i = 0; i < c->nseg && got < VIRTIO_NET_HDR_LEN; i++) {
		uint32_t t = c->seg[i].len < VIRTIO_NET_HDR_LEN - got ? c->seg[i].len
								      : VIRTIO_NET_HDR_LEN - got;

		memcpy(hdr + got, c->seg[i].host, t);
		got += t;
		if (t < c->seg[i].len) {
			iov[niov++] =
			    (struct iovec){(uint8_t *)c->seg[i].host + t, c->seg[i].len - t};
		}
		k = i + 1;
	}
	for (i = k; i < c->nseg; i++)
		if (c->seg[i].len)
			iov[niov++] = (struct iovec){c->seg[i].host, c->seg[i].len};
	if (!tx_hdr_ok(n, hdr, c->out_len)) {
		n->tx_dropped++;
		return;
	}
	hdr[10] = hdr[11] = 0; /* num_buffers means nothing on transmit */
	iov[0] = (struct iovec){hdr, sizeof(hdr)};
	if (n->pair[p].fd < 0) {
		n->tx_frames++; /* the fuzz entry: checked, nowhere to go */
		return;
	}
	if (n->is_sock) {
		/* a socket whose peer went away fails the send, never raises SIGPIPE */
		struct msghdr m = {.msg_iov = iov, .msg_iovlen = niov};

		w = sendmsg(n->pair[p].fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
	} else {
		w = writev(n->pair[p].fd, iov, (int)niov);
	}
	if (w != (ssize_t)c->out_len) {
		n->tx_dropped++; /* the tap refused it (down, full, a header it rejects) */
		return;
	}
	n->tx_frames++;
	n->tx_bytes += c->out_len - VIRTIO_NET_HDR_LEN;
}

static bool tx_run(struct virtio_net *n, unsigned p)
{
	unsigned qi = 2 * p + 1;
	bool pushed = false;

	while (net_pop(n, qi, &n->chain) > 0) {
		tx_chain(n, p, &n->chain);
		virtq_push(&n->vp.q[qi].vq, n->chain.head, 0);
		pushed = true;
	}
	return pushed;
}

/* ---- to the guest: receive ---- */

/* An rx chain the device may fill: device-writable only, with room for the header. */
static bool rx_chain_ok(const struct virtq_chain *c)
{
	return !c->out_len && c->in_len >= VIRTIO_NET_HDR_LEN;
}

/* Pops the next rx chain of queue qi; chains with a readable buffer or no room for a header
 * are returned empty and counted. 1, 0 when none is left, -1 when the ring broke. */
static int rx_pop(struct virtio_net *n, unsigned qi, struct virtq_chain *c, bool *pushed)
{
	int r;

	while ((r = net_pop(n, qi, c)) > 0) {
		if (rx_chain_ok(c))
			return 1;
		virtq_push(&n->vp.q[qi].vq, c->head, 0);
		*pushed = true;
		n->rx_dropped++;
	}
	return r;
}

/* Gives pair p's pending frame to the guest: true when it left (delivered or dropped), false
 * when the guest has too few buffers for it yet. */
static bool rx_deliver(struct virtio_net *n, unsigned p, bool *pushed)
{
	struct net_pair *np = &n->pair[p];
	unsigned qi = 2 * p;
	struct virtq *q = &n->vp.q[qi].vq;
	bool mrg = negotiated(n, F_MRG_RXBUF);
	uint16_t heads[RX_CHAINS_MAX];
	uint32_t lens[RX_CHAINS_MAX] = {0}, off = 0;
	unsigned k = 0;

	while (off < np->pend) {
		struct virtq_chain *c = k ? &n->chain : &n->first;
		uint32_t room, t;
		int r;

		if (k == RX_CHAINS_MAX || (k && !mrg)) {
			/* more buffers than one frame may take, or one buffer too small */
			virtq_unpop(q, (uint16_t)k);
			n->rx_dropped++;
			return true;
		}
		/* Bad chains are consumed (pushed empty) only before the frame's first buffer: once
		 * chains are held, popping past one leaves nothing an unpop could rewind to. A bad
		 * chain there ends the frame: each held chain goes back empty, the frame drops. */
		r = k ? net_pop(n, qi, c) : rx_pop(n, qi, c, pushed);
		if (r < 0)
			return true;
		if (!r) {
			virtq_unpop(q, (uint16_t)k);
			return false;
		}
		if (!rx_chain_ok(c)) {
			for (unsigned i = 0; i < k; i++)
				virtq_push(q, heads[i], 0);
			virtq_push(q, c->head, 0);
			*pushed = true;
			n->rx_dropped++;
			return true;
		}
		room = c->in_len > UINT32_MAX ? UINT32_MAX : (uint32_t)c->in_len;
		t = np->pend - off < room ? np->pend - off : room;
		if (k)
			virtq_chain_write(c, np->buf + off, t);
		heads[k] = c->head;
		lens[k++] = t;
		off += t;
	}
	/* num_buffers, then the first chain (header first) once the count is known */
	np->buf[10] = (uint8_t)k;
	np->buf[11] = (uint8_t)(k >> 8);
	virtq_chain_write(&n->first, np->buf, lens[0]);
	for (unsigned i = 0; i < k; i++)
		virtq_push(q, heads[i], lens[i]);
	*pushed = true;
	n->rx_frames++;
	n->rx_bytes += np->pend - VIRTIO_NET_HDR_LEN;
	return true;
}

/* Frames from pair p's tap into its rx queue until either runs dry (vp.lock held). */
static bool rx_run(struct virtio_net *n, unsigned p)
{
	struct net_pair *np = &n->pair[p];
	bool pushed = false;

	if (!n->vp.q[2 * p].enabled || np->eof)
		return false;
	np->rx_wait = false;
	for (;;) {
		if (!np->pend) {
			ssize_t r = read(np->fd, np->buf, sizeof(np->buf));

			if (r < 0)
				break; /* EAGAIN: drained */
			if (!r) {
				np->eof = true; /* a tap never ends; a socket's peer did */
				break;
			}
			if (r < VIRTIO_NET_HDR_LEN + ETH_HLEN) {
				n->rx_dropped++;
				continue;
			}
			np->pend = (uint32_t)r;
		}
		if (!rx_deliver(n, p, &pushed)) {
			np->rx_wait = true;
			break;
		}
		np->pend = 0;
	}
	return pushed;
}

/* ---- the control queue ---- */

/* Executes one command (class, command, data); the ack byte. */
static uint8_t ctrl_exec(struct virtio_net *n, const uint8_t *cmd, size_t len)
{
	const uint8_t *d = cmd + 2;
	size_t dl = len - 2;

	n->ctrl_cmds++;
	if (len < 2)
		goto bad;
	switch (cmd[0]) {
	case CTRL_RX:
		/* promiscuous, all-multicast and the rest: a tap delivers everything anyway */
		if (cmd[1] <= 5 && dl == 1 && d[0] <= 1)
			return CTRL_OK;
		break;
	case CTRL_MAC:
		if (cmd[1] == CTRL_MAC_ADDR_SET && dl == 6) {
			memcpy(n->mac, d, 6);
			return CTRL_OK;
		}
		if (cmd[1] == CTRL_MAC_TABLE_SET) {
			/* two tables (unicast, multicast), each a le32 count then 6-byte entries;
			 * lvmm filters nothing, but a table that does not add up is refused */
			size_t o = 0;

			for (int t = 0; t < 2; t++) {
				uint32_t cnt;

				if (dl - o < 4)
					goto bad;
				cnt = (uint32_t)(d[o] | d[o + 1] << 8 | d[o + 2] << 16 |
						 (uint32_t)d[o + 3] << 24);
				o += 4;
				if (cnt > (dl - o) / 6)
					goto bad;
				o += (size_t)cnt * 6;
			}
			if (o == dl)
				return CTRL_OK;
		}
		break;
	case CTRL_ANNOUNCE:
		/* VIRTIO_NET_CTRL_ANNOUNCE_ACK: the guest has announced itself */
		if (cmd[1] == 0 && dl == 0 && negotiated(n, F_GUEST_ANNOUNCE) && n->announce) {
			n->announce = false;
			return CTRL_OK;
		}
		break;
	case CTRL_MQ:
		if (cmd[1] == CTRL_MQ_PAIRS_SET && dl == 2 && negotiated(n, F_MQ)) {
			uint16_t want = le16(d);

			if (want >= 1 && want <= n->pairs) {
				n->active = want;
				return CTRL_OK;
			}
		}
		break;
	}
bad:
	n->ctrl_errors++;
	return CTRL_ERR;
}

uint8_t virtio_net_ctrl_cmd(void *dev, const uint8_t *cmd, size_t len)
{
	struct virtio_net *n = dev;
	uint8_t ack;

	pthread_mutex_lock(&n->vp.lock);
	ack = ctrl_exec(n, cmd, len > CTRL_CMD_MAX ? CTRL_CMD_MAX : len);
	pthread_mutex_unlock(&n->vp.lock);
	return ack;
}

static bool ctrl_run(struct virtio_net *n)
{
	unsigned qi = n->ctrl_q;
	struct virtq *q = &n->vp.q[qi].vq;
	struct virtq_chain *c = &n->chain;
	bool pushed = false;

	while (net_pop(n, qi, c) > 0) {
		uint32_t got = 0;
		uint8_t ack;

		pushed = true;
		if (!c->in_len || c->out_len > CTRL_CMD_MAX) {
			/* nowhere to put the ack, or a command larger than any there is */
			n->ctrl_cmds++;
			n->ctrl_errors++;
			ack = CTRL_ERR;
			virtq_chain_write(c, &ack, 1);
			virtq_push(q, c->head, c->in_len ? 1 : 0);
			continue;
		}
		for (unsigned i = 0; i < c->nseg && !c->seg[i].writable; i++) {
			memcpy(n->cmd + got, c->seg[i].host, c->seg[i].len);
			got += c->seg[i].len;
		}
		ack = ctrl_exec(n, n->cmd, got);
		virtq_chain_write(c, &ack, 1);
		virtq_push(q, c->head, 1);
	}
	return pushed;
}

void virtio_net_tx_chain(void *dev, const struct virtq_chain *c)
{
	struct virtio_net *n = dev;

	pthread_mutex_lock(&n->vp.lock);
	tx_chain(n, 0, c);
	pthread_mutex_unlock(&n->vp.lock);
}

bool virtio_net_tx_check(void *dev, const uint8_t *frame, size_t len)
{
	struct virtio_net *n = dev;
	bool ok;

	pthread_mutex_lock(&n->vp.lock);
	ok = len >= VIRTIO_NET_HDR_LEN && tx_hdr_ok(n, frame, len);
	pthread_mutex_unlock(&n->vp.lock);
	return ok;
}

/* ---- the thread ---- */

static void net_new_gen(struct virtio_net *n)
{
	n->seen_gen = n->gen;
	n->active = 1;
	n->offloads_set = false;
	n->announce = n->announce_due = false;
	for (unsigned p = 0; p < n->pairs; p++) {
		n->pair[p].pend = 0;
		n->pair[p].rx_wait = false;
	}
}

static void *net_thread(void *arg)
{
	struct virtio_net *n = arg;
	struct pollfd pf[1 + VIRTIO_PCI_MAX_QUEUES + VIRTIO_NET_MAX_PAIRS];
	unsigned nq = n->vp.nqueues;
	char err[256], tname[16];

	/* lvmm-<id>: what a profile of the data path looks for */
	memcpy(tname, "lvmm-", 5);
	snprintf(tname + 5, sizeof(tname) - 5, "%.10s", n->name);
	pthread_setname_np(pthread_self(), tname);
	if (n->host.io_thread && n->host.io_thread(err, sizeof(err)))
		fprintf(stderr, "net %s: %s\n", n->name, err);
	for (;;) {
		unsigned k = 0;
		bool live;

		pthread_mutex_lock(&n->vp.lock);
		live = (n->vp.status & VIRTIO_STATUS_DRIVER_OK) &&
		       !(n->vp.status & VIRTIO_STATUS_NEEDS_RESET) && !n->paused &&
		       n->gen == n->seen_gen;
		pf[k++] = (struct pollfd){.fd = n->stop_fd, .events = POLLIN};
		for (unsigned q = 0; q < nq; q++)
			pf[k++] = (struct pollfd){.fd = n->vp.kick_fd[q], .events = POLLIN};
		/* a tap is read while its pair is active and the guest has buffers */
		for (unsigned p = 0; p < n->pairs; p++)
			pf[k++] = (struct pollfd){
			    .fd = live && p < n->active && !n->pair[p].rx_wait && !n->pair[p].eof
				      ? n->pair[p].fd
				      : -1,
			    .events = POLLIN};
		pthread_mutex_unlock(&n->vp.lock);
		if (poll(pf, k, -1) < 0 && errno != EINTR)
			break;
		n->wakeups++;
		if (pf[0].revents)
			break;
		for (unsigned q = 0; q < nq; q++)
			virtio_eventfd_take(n->vp.kick_fd[q]);
		pthread_mutex_lock(&n->vp.lock);
		if (n->gen != n->seen_gen)
			net_new_gen(n); /* a driver reset drops what was held for the old rings */
		live = (n->vp.status & VIRTIO_STATUS_DRIVER_OK) &&
		       !(n->vp.status & VIRTIO_STATUS_NEEDS_RESET) && !n->paused;
		if (live) {
			if (!n->offloads_set)
				net_set_offloads(n);
			if (ctrl_run(n))
				virtio_pci_queue_interrupt(&n->vp, n->ctrl_q);
			for (unsigned p = 0; p < n->pairs; p++) {
				/* a pair the driver switched off still returns what it sends */
				if (tx_run(n, p))
					virtio_pci_queue_interrupt(&n->vp, 2 * p + 1);
				if (p < n->active && rx_run(n, p))
					virtio_pci_queue_interrupt(&n->vp, 2 * p);
			}
		}
		pthread_mutex_unlock(&n->vp.lock);
	}
	return NULL;
}

/* ---- taps ---- */

static int tap_fail(char *err, unsigned errlen, const char *name, const char *what)
{
	int e = errno;

	snprintf(err, errlen, "net: tap %s: %s: %s", name, what, strerror(e));
	return -e;
}

int virtio_net_tap_open(const char *name, unsigned pairs, int *fds, char *err, unsigned errlen)
{
	unsigned p;

	if (!name[0] || strlen(name) >= IFNAMSIZ || pairs < 1 || pairs > VIRTIO_NET_MAX_PAIRS) {
		snprintf(err, errlen, "net: tap '%s': a name of 1-15 characters", name);
		return -EINVAL;
	}
	for (p = 0; p < pairs; p++) {
		struct ifreq ifr;
		int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);

		memset(&ifr, 0, sizeof(ifr));
		snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
		ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
		if (pairs > 1)
			ifr.ifr_flags |= IFF_MULTI_QUEUE;
		if (fd < 0 || ioctl(fd, TUNSETIFF, &ifr) < 0) {
			int r = tap_fail(err, errlen, name, fd < 0 ? "/dev/net/tun" : "TUNSETIFF");

			if (fd >= 0)
				close(fd);
			while (p--)
				close(fds[p]);
			return r;
		}
		fds[p] = fd;
	}
	return 0;
}

int virtio_net_tap_addr(const char *name, uint32_t ip, uint32_t mask, char *err, unsigned errlen)
{
	struct ifreq ifr;
	struct sockaddr_in *sin = (struct sockaddr_in *)&ifr.ifr_addr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), r = 0;

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = ip;
	if (fd < 0 || ioctl(fd, SIOCSIFADDR, &ifr) < 0)
		r = tap_fail(err, errlen, name, "SIOCSIFADDR");
	sin->sin_addr.s_addr = mask;
	if (!r && ioctl(fd, SIOCSIFNETMASK, &ifr) < 0)
		r = tap_fail(err, errlen, name, "SIOCSIFNETMASK");
	if (!r && ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
		r = tap_fail(err, errlen, name, "SIOCGIFFLAGS");
	ifr.ifr_flags |= IFF_UP;
	if (!r && ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
		r = tap_fail(err, errlen, name, "SIOCSIFFLAGS");
	if (fd >= 0)
		close(fd);
	return r;
}

/* Takes a duplicate of fd for pair p: a tap gets the 12-byte vnet header; any other fd (a
 * socket pair in tests) is taken as a carrier of frames with that header. */
static int net_take_fd(struct virtio_net *n, unsigned p, int fd, char *err, unsigned errlen)
{
	struct ifreq ifr;
	struct stat st;
	int hs = VIRTIO_NET_HDR_LEN, d = fcntl(fd, F_DUPFD_CLOEXEC, 3);

	if (d < 0)
		return tap_fail(err, errlen, n->name, "fd");
	n->pair[p].fd = d;
	if (fcntl(d, F_SETFL, fcntl(d, F_GETFL) | O_NONBLOCK) < 0)
		return tap_fail(err, errlen, n->name, "O_NONBLOCK");
	if (!fstat(d, &st) && S_ISSOCK(st.st_mode))
		n->is_sock = true;
	memset(&ifr, 0, sizeof(ifr));
	if (ioctl(d, TUNGETIFF, &ifr) < 0) {
		if (p && n->is_tap) {
			snprintf(err, errlen, "net %s: fd %d is not a tap like the first", n->name,
				 fd);
			return -EINVAL;
		}
		return 0;
	}
	if (p && !n->is_tap) {
		snprintf(err, errlen, "net %s: fd %d is a tap, the first is not", n->name, fd);
		return -EINVAL;
	}
	n->is_tap = true;
	if (!(ifr.ifr_flags & IFF_TAP) || !(ifr.ifr_flags & IFF_NO_PI) ||
	    !(ifr.ifr_flags & IFF_VNET_HDR)) {
		snprintf(err, errlen,
			 "net %s: tap %s was opened without IFF_TAP, IFF_NO_PI or IFF_VNET_HDR",
			 n->name, ifr.ifr_name);
		return -EINVAL;
	}
	if (ioctl(d, TUNSETVNETHDRSZ, &hs) < 0)
		return tap_fail(err, errlen, ifr.ifr_name, "TUNSETVNETHDRSZ");
	return 0;
}

/* ---- the device ---- */

static void net_free(struct virtio_net *n)
{
	for (unsigned p = 0; p < VIRTIO_NET_MAX_PAIRS; p++)
		if (n->pair[p].fd >= 0)
			close(n->pair[p].fd);
	if (n->stop_fd >= 0)
		close(n->stop_fd);
	free(n);
}

static uint64_t net_features(struct virtio_net *n, const struct virtio_net_config *c)
{
	uint64_t tso = BIT(F_GUEST_TSO4) | BIT(F_GUEST_TSO6) | BIT(F_HOST_TSO4) | BIT(F_HOST_TSO6);
	uint64_t ufo = BIT(F_GUEST_UFO) | BIT(F_HOST_UFO);
	uint64_t f = BIT(F_MAC) | BIT(F_STATUS) | BIT(F_MRG_RXBUF) | BIT(F_CTRL_VQ) |
		     BIT(F_CTRL_MAC_ADDR) | BIT(F_GUEST_ANNOUNCE);

	if (n->pairs > 1)
		f |= BIT(F_MQ);
	if (n->mtu)
		f |= BIT(F_MTU);
	/* offloads only where a tap segments and checksums for both sides */
	if (n->is_tap) {
		f |= BIT(F_CSUM) | BIT(F_GUEST_CSUM) | BIT(F_GUEST_TSO4) | BIT(F_GUEST_TSO6) |
		     BIT(F_HOST_TSO4) | BIT(F_HOST_TSO6);
		n->ufo = ioctl(n->pair[0].fd, TUNSETOFFLOAD,
			       TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_UFO) == 0;
		if (n->ufo)
			f |= BIT(F_GUEST_UFO) | BIT(F_HOST_UFO);
		(void)!ioctl(n->pair[0].fd, TUNSETOFFLOAD, 0);
	} else {
		/* a frame carrier: checksums and segments pass through as the header says */
		f |= BIT(F_CSUM) | BIT(F_GUEST_CSUM) | tso;
	}
	/* segmentation needs checksum offload: without it neither is offered */
	if (c->no_csum)
		f &= ~(BIT(F_CSUM) | BIT(F_GUEST_CSUM) | tso | ufo);
	if (c->no_tso)
		f &= ~tso;
	if (c->no_ufo)
		f &= ~ufo;
	return f;
}

static void net_mac_default(struct virtio_net *n, const char *id)
{
	uint32_t h = 2166136261u ^ (uint32_t)getpid();

	for (const char *s = id; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	n->mac[0] = 0x52; /* locally administered, unicast */
	n->mac[1] = 0x54;
	n->mac[2] = 0x00;
	n->mac[3] = (uint8_t)(h >> 16);
	n->mac[4] = (uint8_t)(h >> 8);
	n->mac[5] = (uint8_t)h;
}

static int net_create(const struct dev_host *h, const void *cfg, const char *id, unsigned idx,
		      void **dev, char *err, unsigned errlen)
{
	const struct virtio_net_config *c = cfg;
	unsigned pairs = c->num_queues ? c->num_queues / 2 : 1;
	unsigned qs = c->queue_size ? c->queue_size : DEFAULT_QUEUE_SIZE;
	int fds[VIRTIO_NET_MAX_PAIRS];
	bool opened = false;
	struct virtio_net *n;
	int r = 0;

	(void)idx;
	*dev = NULL;
	if (pairs < 1 || pairs > VIRTIO_NET_MAX_PAIRS || (c->num_queues & 1) || qs < 2 ||
	    qs > 1024 || (qs & (qs - 1)) || (c->nfds && c->nfds != pairs) ||
	    (!c->nfds && !c->tap[0]) || c->mtu > 65535 || (c->mtu && c->mtu < 68)) {
		snprintf(err, errlen,
			 "net %s: num_queues %u, queue_size %u, %u fds, mtu %u (an even "
			 "num_queues of 2..%u, a power-of-two queue_size of 2..1024, a tap or one "
			 "fd per queue pair, mtu 68..65535)",
			 id, c->num_queues, qs, c->nfds, c->mtu, 2 * VIRTIO_NET_MAX_PAIRS);
		return -EINVAL;
	}
	n = calloc(1, sizeof(*n));
	if (!n) {
		snprintf(err, errlen, "net %s: out of memory", id);
		return -ENOMEM;
	}
	n->host = *h;
	n->pairs = pairs;
	n->active = 1;
	n->ctrl_q = 2 * pairs;
	n->mtu = (uint16_t)c->mtu;
	n->stop_fd = -1;
	snprintf(n->name, sizeof(n->name), "%s", id);
	for (unsigned p = 0; p < VIRTIO_NET_MAX_PAIRS; p++)
		n->pair[p].fd = -1;
	if (memcmp(c->mac, "\0\0\0\0\0\0", 6))
		memcpy(n->mac, c->mac, 6);
	else
		net_mac_default(n, id);
	if (c->nfds) {
		memcpy(fds, c->fds, sizeof(int) * pairs);
	} else {
		r = virtio_net_tap_open(c->tap, pairs, fds, err, errlen);
		opened = !r;
	}
	for (unsigned p = 0; !r && p < pairs; p++)
		r = net_take_fd(n, p, fds[p], err, errlen);
	for (unsigned p = 0; opened && p < pairs; p++)
		close(fds[p]);
	if (r)
		goto fail;
	n->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (n->stop_fd < 0) {
		snprintf(err, errlen, "net %s: eventfd: %s", id, strerror(errno));
		r = -errno;
		goto fail;
	}
	/* class 0x020000: Ethernet controller */
	r = virtio_pci_init(&n->vp, id, VIRTIO_ID_NET, 0x020000, net_features(n, c), 2 * pairs + 1,
			    (uint16_t)qs, &net_ops, n, h->gm, err, errlen);
	if (r)
		goto fail;
	r = virtio_pci_kick_eventfds(&n->vp, h->ioeventfd, h->opaque, err, errlen);
	if (!r) {
		r = pthread_create(&n->thread, NULL, net_thread, n);
		if (r) {
			snprintf(err, errlen, "net %s: thread: %s", id, strerror(r));
			r = -r;
		}
	}
	if (r) {
		virtio_pci_exit(&n->vp);
		goto fail;
	}
	n->thread_up = true;
	*dev = n;
	return 0;
fail:
	net_free(n);
	return r;
}

static struct pci_dev *net_pci(void *dev)
{
	return &((struct virtio_net *)dev)->vp.pci;
}

/* vm.pause: the thread is out of the rings once the lock is ours, and stays out. */
static void net_pause(void *dev)
{
	struct virtio_net *n = dev;

	pthread_mutex_lock(&n->vp.lock);
	n->paused = true;
	pthread_mutex_unlock(&n->vp.lock);
}

static void net_resume(void *dev)
{
	struct virtio_net *n = dev;

	pthread_mutex_lock(&n->vp.lock);
	n->paused = false;
	if (n->announce_due) {
		n->announce_due = false;
		virtio_pci_config_interrupt(&n->vp);
	}
	pthread_mutex_unlock(&n->vp.lock);
	virtio_eventfd_signal(n->vp.kick_fd[0]);
}

/* Snapshots. Paused, the thread is out of the rings (net_pause) and every transmit chain it took
 * is already back in the used ring: a chain is sent and returned in one go under the lock. What
 * the device may hold between kicks is one received frame per pair that the guest had no buffer
 * for yet (pair[p].pend): it is not saved, so a restored guest never sees it (a frame lost on the
 * wire, which its protocols recover from), and the rings stay as the guest left them. Saved: the
 * transport, the MAC (set by the guest, or made from the process id when none was configured),
 * the queue pairs offered and in use, the MTU. The tap is the restored config's, opened again as
 * at vm.create; its offloads are set again from the accepted features before the first frame. */
#define NET_STATE_VERSION 1u

struct net_state {
	uint32_t version, pairs, active;
	uint16_t mtu;
	uint8_t mac[6];
	uint64_t dropped; /* frames held when saved, lost (reported only) */
};

static int net_save(void *dev, void *buf, uint64_t *len, char *err, unsigned errlen)
{
	struct virtio_net *n = dev;
	size_t need = sizeof(struct net_state) + virtio_pci_state_size(&n->vp);
	struct net_state st = {.version = NET_STATE_VERSION};

	if (!buf) {
		*len = need;
		return 0;
	}
	if (*len < need) {
		snprintf(err, errlen, "virtio-net %s: state needs %zu bytes", n->name, need);
		return -ENOSPC;
	}
	pthread_mutex_lock(&n->vp.lock);
	if (!n->paused) {
		pthread_mutex_unlock(&n->vp.lock);
		snprintf(err, errlen, "virtio-net %s: not paused", n->name);
		return -EBUSY;
	}
	st.pairs = n->pairs;
	st.active = n->active;
	st.mtu = n->mtu;
	memcpy(st.mac, n->mac, 6);
	for (unsigned p = 0; p < n->pairs; p++)
		st.dropped += n->pair[p].pend ? 1 : 0;
	pthread_mutex_unlock(&n->vp.lock);
	if (st.dropped)
		fprintf(
		    stderr,
		    "net %s: %llu frame(s) read from the tap and not yet given to the guest are "
		    "not saved (lost to a restored guest)\n",
		    n->name, (unsigned long long)st.dropped);
	memcpy(buf, &st, sizeof(st));
	virtio_pci_save(&n->vp, (uint8_t *)buf + sizeof(st));
	*len = need;
	return 0;
}

static int net_restore(void *dev, const void *buf, uint64_t len, char *err, unsigned errlen)
{
	struct virtio_net *n = dev;
	struct net_state st;
	int r;

	if (len < sizeof(st)) {
		snprintf(err, errlen, "virtio-net %s: state of %llu bytes is too short", n->name,
			 (unsigned long long)len);
		return -EINVAL;
	}
	memcpy(&st, buf, sizeof(st));
	if (st.version != NET_STATE_VERSION || st.pairs != n->pairs || st.mtu != n->mtu) {
		snprintf(err, errlen,
			 "virtio-net %s: saved with %u queue pairs and mtu %u (state version %u), "
			 "the config makes %u and %u",
			 n->name, st.pairs, st.mtu, st.version, n->pairs, n->mtu);
		return -EINVAL;
	}
	if (st.active < 1 || st.active > n->pairs) {
		snprintf(err, errlen,
			 "virtio-net %s: saved state has %u active queue pairs (1..%u)", n->name,
			 st.active, n->pairs);
		return -EINVAL;
	}
	/* the VM comes back paused: nothing moves until vm.resume, not while the rings are
	 * restored either */
	pthread_mutex_lock(&n->vp.lock);
	n->paused = true;
	pthread_mutex_unlock(&n->vp.lock);
	r = virtio_pci_restore(&n->vp, (const uint8_t *)buf + sizeof(st),
			       (size_t)(len - sizeof(st)), err, errlen);
	if (r)
		return r;
	pthread_mutex_lock(&n->vp.lock);
	/* the thread has seen every reset there was (none: a fresh device) */
	n->seen_gen = n->gen;
	n->active = st.active;
	if (st.active > 1 && !negotiated(n, F_MQ))
		n->active = 1;
	memcpy(n->mac, st.mac, 6);
	for (unsigned p = 0; p < n->pairs; p++) {
		n->pair[p].pend = 0;
		n->pair[p].rx_wait = false;
	}
	n->offloads_set = false; /* the new tap learns the accepted offloads */
	/* a restored guest tells the network where it is now (gratuitous ARP, IPv6 NA) */
	n->announce = n->announce_due =
	    negotiated(n, F_GUEST_ANNOUNCE) && (n->vp.status & VIRTIO_STATUS_DRIVER_OK);
	pthread_mutex_unlock(&n->vp.lock);
	return 0;
}

static void net_counters(void *dev, struct dev_counters *out)
{
	struct virtio_net *n = dev;

	pthread_mutex_lock(&n->vp.lock);
	out->net = true;
	out->rx_frames = n->rx_frames;
	out->rx_bytes = n->rx_bytes;
	out->rx_dropped = n->rx_dropped;
	out->tx_frames = n->tx_frames;
	out->tx_bytes = n->tx_bytes;
	out->tx_dropped = n->tx_dropped;
	/* reads: frames to the guest, writes: from it */
	out->reads = n->rx_frames;
	out->writes = n->tx_frames;
	out->read_bytes = n->rx_bytes;
	out->write_bytes = n->tx_bytes;
	out->doorbells = n->vp.kicks;
	out->irqs = n->vp.interrupts;
	out->wakeups = n->wakeups;
	out->backend_cmds = n->ctrl_cmds;
	out->backend_errors = n->ctrl_errors;
	out->backend_rejected = n->rx_dropped + n->tx_dropped;
	pthread_mutex_unlock(&n->vp.lock);
}

static void net_destroy(void *dev)
{
	struct virtio_net *n = dev;

	if (!n)
		return;
	if (n->thread_up) {
		virtio_eventfd_signal(n->stop_fd);
		pthread_join(n->thread, NULL);
	}
	virtio_pci_exit(&n->vp);
	net_free(n);
}

/* Live migration: a tap's queues go to the destination as they are (a tap this VMM made has no
 * other holder and would vanish with its last fd; a single-queue tap takes one holder at a
 * time). The paused device reads nothing more from them; the source closes its own when it
 * exits. A socket carrier (tests) is not handed over. */
static unsigned net_hand_fds(void *dev, int *fds, unsigned max)
{
	struct virtio_net *n = dev;
	unsigned k = 0;

	for (unsigned p = 0; n->is_tap && p < n->pairs && k < max; p++)
		fds[k++] = n->pair[p].fd;
	return k;
}

static int net_take_handed(void *cfg, unsigned index, unsigned count, int fd, char *err,
			   unsigned errlen)
{
	struct virtio_net_config *c = cfg;
	unsigned pairs = c->num_queues ? c->num_queues / 2 : 1;
	struct ifreq ifr;
	struct stat st;

	if (!c->tap[0] || count != pairs || index >= count || (c->nfds && !c->fds_owned)) {
		snprintf(err, errlen,
			 "the source handed over tap queue %u of %u; the config names tap '%s' "
			 "with %u queue pairs",
			 index, count, c->tap, pairs);
		return -EINVAL;
	}
	/* /dev/net/tun's before any tun request is made of it */
	memset(&ifr, 0, sizeof(ifr));
	if (fstat(fd, &st) || !S_ISCHR(st.st_mode) || st.st_rdev != makedev(10, 200) ||
	    ioctl(fd, TUNGETIFF, &ifr) < 0 || strncmp(ifr.ifr_name, c->tap, IFNAMSIZ)) {
		snprintf(err, errlen, "what the source handed over is not tap %s", c->tap);
		return -EINVAL;
	}
	if (!c->fds_owned) {
		for (unsigned p = 0; p < VIRTIO_NET_MAX_PAIRS; p++)
			c->fds[p] = -1;
		c->nfds = count;
		c->fds_owned = true;
	}
	if (c->fds[index] >= 0) {
		snprintf(err, errlen, "tap queue %u was handed over twice", index);
		return -EINVAL;
	}
	c->fds[index] = fd;
	return 0;
}

const struct dev_model virtio_net_model = {
    .name = "virtio-net",
    .create = net_create,
    .pci = net_pci,
    .pause = net_pause,
    .resume = net_resume,
    .save = net_save,
    .restore = net_restore,
    .hand_fds = net_hand_fds,
    .take_fd = net_take_handed,
    .counters = net_counters,
    .destroy = net_destroy,
};
