/* virtio-net driven through BAR 0 and its rings as a guest driver would, with a
 * socketpair(AF_UNIX, SOCK_SEQPACKET) in place of the tap (one message, one frame with its
 * virtio_net_hdr_v1): frames both ways, mergeable receive buffers, offload headers passed
 * through, the control queue, two queue pairs, and every malformed chain a hostile driver can
 * queue, each dropped and counted. Also --net and NetConfig parsing. */
#include <check.h>
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api/api_internal.h"
#include "config.h"
#include "guest_mem.h"
#include "testutil.h"
#include "vdrv.h"
#include "virtio/virtio_net.h"
#include "virtio/virtio_pci.h"

#define RAM_SIZE (4u << 20)
#define QSIZE	 VDRV_QSIZE
#define NQ	 5			 /* two pairs and the control queue at most */
#define RXBUF(q) (0x20000 + (q)*0x10000) /* QSIZE buffers of 0x1000 per rx queue */
#define TXBUF	 0x80000		 /* QSIZE buffers of 0x2000 */
#define CTLBUF	 0xc0000
#define HLEN	 12

/* feature bits */
#define F_CSUM	     0
#define F_GUEST_CSUM 1
#define F_MAC	     5
#define F_GUEST_TSO4 7
#define F_HOST_TSO4  11
#define F_MRG_RXBUF  15
#define F_STATUS     16
#define F_CTRL_VQ    17
#define F_ANNOUNCE   21
#define F_MQ	     22

static uint8_t *ram;
static struct guest_mem gm;
static char err[512];
static void *dev;
static struct virtio_pci *vp;
static int sv[2][2]; /* per pair: [0] the device's, [1] the host side */
static unsigned ctrl_q;

static uint64_t features = (1ull << F_CSUM) | (1ull << F_GUEST_CSUM) | (1ull << F_MAC) |
			   (1ull << F_GUEST_TSO4) | (1ull << F_HOST_TSO4) | (1ull << F_MRG_RXBUF) |
			   (1ull << F_STATUS) | (1ull << F_CTRL_VQ);

/* The driver's start: negotiate, set up every queue; rx buffers are the test's to offer. */
static void driver_start(unsigned pairs)
{
	memset(ram, 0, 0x20000);
	vdrv_attach(vp, ram);
	ctrl_q = 2 * pairs;
	vdrv_start(features, ctrl_q + 1);
}

static void make_dev(unsigned pairs)
{
	struct dev_host h = {.cpus = 1};
	struct virtio_net_config c = {.num_queues = 2 * pairs};

	for (unsigned p = 0; p < pairs; p++) {
		ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv[p]), 0);
		c.fds[c.nfds++] = sv[p][0];
	}
	memcpy(c.mac, "\x52\x54\x00\x01\x02\x03", 6);
	h.gm = &gm;
	ck_assert_msg(virtio_net_model.create(&h, &c, "net0", 0, &dev, err, sizeof(err)) == 0, "%s",
		      err);
	/* the device holds duplicates */
	for (unsigned p = 0; p < pairs; p++)
		close(sv[p][0]);
	vp = virtio_net_model.pci(dev)->priv;
	driver_start(pairs);
}

static void setup(void)
{
	ram = calloc(1, RAM_SIZE);
	gmem_init_buffer(&gm, ram, RAM_SIZE);
	make_dev(1);
}

static void setup2(void)
{
	ram = calloc(1, RAM_SIZE);
	gmem_init_buffer(&gm, ram, RAM_SIZE);
	features |= 1ull << F_MQ;
	make_dev(2);
}

static void teardown(void)
{
	virtio_net_model.destroy(dev);
	for (unsigned p = 0; p < 2; p++)
		if (sv[p][1] > 0) {
			close(sv[p][1]);
			sv[p][1] = -1;
		}
	features &= ~(1ull << F_MQ);
	free(ram);
}

static struct dev_counters counters(void)
{
	struct dev_counters c;

	memset(&c, 0, sizeof(c));
	virtio_net_model.counters(dev, &c);
	return c;
}

/* rx buffers: n chains of one writable buffer of len bytes on queue q. */
static void rx_offer(unsigned q, unsigned first, unsigned n, uint32_t len)
{
	for (unsigned i = first; i < first + n; i++) {
		vdrv_set_desc(q, i % QSIZE, RXBUF(q) + 0x1000 * (i % QSIZE), len,
			      VIRTQ_DESC_F_WRITE, 0);
		vdrv_offer(q, (uint16_t)(i % QSIZE));
	}
}

/* A frame of len bytes after a header, in one tx chain of the given descriptors. */
static void tx_frame(unsigned q, const uint8_t *hdr, uint32_t len, uint8_t fill)
{
	static unsigned slot;
	unsigned s = slot++ % QSIZE;
	uint8_t *b = ram + TXBUF + 0x2000 * s;

	memcpy(b, hdr, HLEN);
	memset(b + HLEN, fill, len);
	/* the header in a buffer of its own, as Linux sends it */
	vdrv_set_desc(q, s, TXBUF + 0x2000 * s, HLEN, VIRTQ_DESC_F_NEXT,
		      (uint16_t)((s + 1) % QSIZE));
	vdrv_set_desc(q, (s + 1) % QSIZE, TXBUF + 0x2000 * s + HLEN, len, 0, 0);
	slot++;
	vdrv_offer(q, (uint16_t)s);
	ck_assert(vdrv_wait_used(q, vdrv_avail_idx(q)));
}

static ssize_t host_recv(unsigned p, uint8_t *buf, size_t len, int timeout_ms)
{
	struct pollfd pf = {.fd = sv[p][1], .events = POLLIN};

	if (poll(&pf, 1, timeout_ms) != 1)
		return -1;
	return recv(sv[p][1], buf, len, MSG_DONTWAIT);
}

START_TEST(test_config)
{
	uint8_t mac[6];

	for (unsigned i = 0; i < 6; i++)
		mac[i] = (uint8_t)vdrv_bar_r(VIRTIO_PCI_DEVCFG_OFF + i, 1);
	ck_assert_mem_eq(mac, "\x52\x54\x00\x01\x02\x03", 6);
	ck_assert_uint_eq(vdrv_bar_r(VIRTIO_PCI_DEVCFG_OFF + 6, 2), 1); /* link up */
	ck_assert_uint_eq(vdrv_bar_r(VIRTIO_PCI_NUM_QUEUES, 2), 3);
	vdrv_bar_w(VIRTIO_PCI_DFSELECT, 0, 4);
	ck_assert(vdrv_bar_r(VIRTIO_PCI_DF, 4) & (1u << F_MRG_RXBUF));
	ck_assert(vdrv_bar_r(VIRTIO_PCI_DF, 4) & (1u << F_CTRL_VQ));
	ck_assert(!(vdrv_bar_r(VIRTIO_PCI_DF, 4) & (1u << F_MQ))); /* one pair: no MQ */
}
END_TEST

START_TEST(test_tx)
{
	uint8_t hdr[HLEN] = {0}, buf[4096];
	struct dev_counters c;

	hdr[10] = 7; /* num_buffers means nothing on transmit: zeroed */
	tx_frame(1, hdr, 60, 0xab);
	ck_assert_int_eq(host_recv(0, buf, sizeof(buf), 2000), HLEN + 60);
	ck_assert_uint_eq(buf[10], 0);
	for (unsigned i = 0; i < 60; i++)
		ck_assert_uint_eq(buf[HLEN + i], 0xab);
	c = counters();
	ck_assert(c.net);
	ck_assert_uint_eq(c.tx_frames, 1);
	ck_assert_uint_eq(c.tx_bytes, 60);
	ck_assert_uint_eq(c.tx_dropped, 0);
}
END_TEST

/* A TSO frame with a partial checksum: the header reaches the tap as the guest wrote it. */
START_TEST(test_tx_offload_header)
{
	uint8_t hdr[HLEN] = {1, 1, 54, 0, 0xa8, 0x05, 34, 0, 16, 0, 0, 0}, buf[8192];

	tx_frame(1, hdr, 4000, 0x11);
	ck_assert_int_eq(host_recv(0, buf, sizeof(buf), 2000), HLEN + 4000);
	ck_assert_mem_eq(buf, hdr, 10);
	ck_assert_uint_eq(counters().tx_frames, 1);
}
END_TEST

START_TEST(test_tx_malformed)
{
	/* flags, gso type, hdr_len, gso_size, csum_start, csum_offset */
	static const uint8_t bad[][HLEN] = {
	    {4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},	 /* unknown flag */
	    {1, 4, 54, 0, 0xa8, 5, 34, 0, 16, 0, 0, 0},	 /* TSO6, not negotiated */
	    {1, 2, 54, 0, 0xa8, 5, 34, 0, 16, 0, 0, 0},	 /* no such gso type */
	    {1, 0, 0, 0, 0, 0, 0xff, 0xff, 16, 0, 0, 0}, /* checksum beyond the frame */
	    {0, 1, 54, 0, 0xa8, 5, 0, 0, 0, 0, 0, 0},	 /* TSO without NEEDS_CSUM */
	    {1, 1, 54, 0, 0, 0, 34, 0, 16, 0, 0, 0},	 /* TSO without a segment size */
	    {0, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},	 /* ECN without segmentation */
	};
	uint8_t ok[HLEN] = {0}, buf[4096];
	unsigned n = sizeof(bad) / sizeof(bad[0]);
	struct dev_counters c;

	for (unsigned i = 0; i < n; i++)
		tx_frame(1, bad[i], 100, (uint8_t)i);
	/* a header alone, shorter than one */
	vdrv_set_desc(1, 14, TXBUF + 0x1c000, 8, 0, 0);
	vdrv_offer(1, 14);
	/* a writable buffer in a frame to send */
	vdrv_set_desc(1, 15, TXBUF + 0x1d000, 100, VIRTQ_DESC_F_WRITE, 0);
	vdrv_offer(1, 15);
	/* a frame shorter than an Ethernet header */
	vdrv_set_desc(1, 13, TXBUF + 0x1e000, HLEN + 6, 0, 0);
	vdrv_offer(1, 13);
	ck_assert(vdrv_wait_used(1, vdrv_avail_idx(1)));
	/* a good one after them is all the tap sees */
	tx_frame(1, ok, 64, 0x77);
	ck_assert_int_eq(host_recv(0, buf, sizeof(buf), 2000), HLEN + 64);
	ck_assert_uint_eq(buf[HLEN], 0x77);
	ck_assert_int_eq(host_recv(0, buf, sizeof(buf), 100), -1);
	c = counters();
	ck_assert_uint_eq(c.tx_dropped, n + 3);
	ck_assert_uint_eq(c.tx_frames, 1);
	/* the device is still fine */
	ck_assert(!(vdrv_bar_r(VIRTIO_PCI_STATUS, 1) & VIRTIO_STATUS_NEEDS_RESET));
}
END_TEST

static void host_send(unsigned p, uint32_t len, uint8_t fill, uint8_t flags)
{
	uint8_t *f = calloc(1, HLEN + len);

	f[0] = flags;
	memset(f + HLEN, fill, len);
	ck_assert_int_eq(send(sv[p][1], f, HLEN + len, 0), (ssize_t)(HLEN + len));
	free(f);
}

START_TEST(test_rx)
{
	uint32_t id, len;
	const uint8_t *b;

	rx_offer(0, 0, 4, 0x1000);
	host_send(0, 100, 0x5a, 2 /* DATA_VALID: passed as the tap gave it */);
	ck_assert(vdrv_used_next(0, &id, &len));
	ck_assert_uint_eq(len, HLEN + 100);
	b = ram + RXBUF(0) + 0x1000 * id;
	ck_assert_uint_eq(b[0], 2);
	ck_assert_uint_eq(b[10] | b[11] << 8, 1); /* num_buffers */
	for (unsigned i = 0; i < 100; i++)
		ck_assert_uint_eq(b[HLEN + i], 0x5a);
	ck_assert_uint_eq(counters().rx_frames, 1);
	ck_assert_uint_eq(counters().rx_bytes, 100);
}
END_TEST

/* A frame larger than one buffer spans several; too few buffers hold it until more come. */
START_TEST(test_rx_mergeable)
{
	uint32_t id[3], len[3];
	unsigned total = 0;

	rx_offer(0, 0, 1, 0x800);
	host_send(0, 5000, 0x33, 0);
	usleep(100 * 1000);
	ck_assert_uint_eq(vdrv_used_idx(0), 0); /* one buffer of 2 KiB: not yet */
	rx_offer(0, 1, 2, 0x800);
	for (unsigned i = 0; i < 3; i++) {
		ck_assert(vdrv_used_next(0, &id[i], &len[i]));
		total += len[i];
	}
	ck_assert_uint_eq(total, HLEN + 5000);
	ck_assert_uint_eq(len[0], 0x800);
	ck_assert_uint_eq(ram[RXBUF(0) + 0x1000 * id[0] + 10], 3); /* num_buffers */
	for (unsigned i = 0, off = 0; i < 3; i++)
		for (uint32_t k = 0; k < len[i]; k++, off++)
			if (off >= HLEN)
				ck_assert_uint_eq(ram[RXBUF(0) + 0x1000 * id[i] + k], 0x33);
	ck_assert_uint_eq(counters().rx_frames, 1);
}
END_TEST

/* Without mergeable buffers a frame must fit one chain: a larger one is dropped. */
START_TEST(test_rx_no_mergeable)
{
	uint32_t id, len;

	features &= ~(1ull << F_MRG_RXBUF);
	driver_start(1);
	features |= 1ull << F_MRG_RXBUF;
	rx_offer(0, 0, 2, 0x400);
	host_send(0, 2000, 1, 0);
	host_send(0, 200, 2, 0);
	ck_assert(vdrv_used_next(0, &id, &len));
	ck_assert_uint_eq(len, HLEN + 200);
	ck_assert_uint_eq(ram[RXBUF(0) + 0x1000 * id + HLEN], 2);
	ck_assert_uint_eq(counters().rx_dropped, 1);
}
END_TEST

START_TEST(test_rx_malformed)
{
	uint32_t id, len;

	/* a readable buffer, and one too small for a header: returned empty, counted */
	vdrv_set_desc(0, 0, RXBUF(0), 0x1000, 0, 0);
	vdrv_offer(0, 0);
	vdrv_set_desc(0, 1, RXBUF(0) + 0x1000, 4, VIRTQ_DESC_F_WRITE, 0);
	vdrv_offer(0, 1);
	rx_offer(0, 2, 1, 0x1000);
	host_send(0, 64, 9, 0);
	/* a frame shorter than header and Ethernet header from the host side is dropped */
	ck_assert_int_eq(send(sv[0][1], "short", 5, 0), 5);
	ck_assert(vdrv_used_next(0, &id, &len));
	ck_assert_uint_eq(len, 0);
	ck_assert(vdrv_used_next(0, &id, &len));
	ck_assert_uint_eq(len, 0);
	ck_assert(vdrv_used_next(0, &id, &len));
	ck_assert_uint_eq(id, 2);
	ck_assert_uint_eq(len, HLEN + 64);
	usleep(50 * 1000);
	ck_assert_uint_eq(counters().rx_dropped, 3);
	ck_assert_uint_eq(counters().rx_frames, 1);
}
END_TEST

/* A bad chain after a frame's first buffer (mergeable): each chain comes back once, empty, the
 * frame is dropped, and the next frame is delivered whole into fresh buffers. */
START_TEST(test_rx_malformed_mid_frame)
{
	uint32_t id, len;
	unsigned seen[QSIZE] = {0};

	rx_offer(0, 0, 1, 0x800);
	vdrv_set_desc(0, 1, RXBUF(0) + 0x1000, 0x800, 0, 0); /* readable: not for rx */
	vdrv_offer(0, 1);
	host_send(0, 3000, 0x44, 0);
	for (unsigned i = 0; i < 2; i++) {
		ck_assert(vdrv_used_next(0, &id, &len));
		ck_assert_uint_lt(id, QSIZE);
		ck_assert_uint_eq(len, 0);
		seen[id]++;
	}
	ck_assert_uint_eq(seen[0], 1);
	ck_assert_uint_eq(seen[1], 1);
	rx_offer(0, 2, 2, 0x800);
	host_send(0, 3000, 0x45, 0);
	ck_assert(vdrv_used_next(0, &id, &len));
	ck_assert_uint_eq(id, 2);
	ck_assert_uint_eq(len, 0x800);
	ck_assert_uint_eq(ram[RXBUF(0) + 0x1000 * 2 + 10], 2); /* num_buffers */
	ck_assert(vdrv_used_next(0, &id, &len));
	ck_assert_uint_eq(id, 3);
	ck_assert_uint_eq(len, HLEN + 3000 - 0x800);
	usleep(50 * 1000);
	ck_assert_uint_eq(vdrv_used_idx(0), 4); /* nothing pushed twice */
	ck_assert_uint_eq(counters().rx_dropped, 1);
	ck_assert_uint_eq(counters().rx_frames, 1);
}
END_TEST

/* One control command (class, cmd, data) in a readable buffer, the ack in a writable one. */
static uint8_t ctrl(const uint8_t *cmd, uint32_t len, uint32_t *used_len)
{
	static unsigned s;
	uint32_t id;
	unsigned d = (s * 2) % QSIZE;

	memcpy(ram + CTLBUF, cmd, len);
	ram[CTLBUF + 0x2000] = 0xee;
	vdrv_set_desc(ctrl_q, d, CTLBUF, len, VIRTQ_DESC_F_NEXT, (uint16_t)(d + 1));
	vdrv_set_desc(ctrl_q, d + 1, CTLBUF + 0x2000, 1, VIRTQ_DESC_F_WRITE, 0);
	s++;
	vdrv_offer(ctrl_q, (uint16_t)d);
	ck_assert(vdrv_used_next(ctrl_q, &id, used_len));
	ck_assert_uint_eq(id, d);
	return ram[CTLBUF + 0x2000];
}

START_TEST(test_ctrl)
{
	static const uint8_t mac_set[] = {1, 1, 0x52, 0x54, 0, 9, 9, 9};
	static const uint8_t promisc[] = {0, 0, 1};
	static const uint8_t table[] = {1, 0, 1, 0, 0, 0, 1, 2, 3, 4, 5, 6, 0, 0, 0, 0};
	static const uint8_t table_lie[] = {1, 0, 200, 0, 0, 0, 1, 2, 3, 4, 5, 6};
	static const uint8_t mq[] = {4, 0, 2, 0};
	static const uint8_t unknown[] = {9, 9};
	static uint8_t huge[8192];
	uint32_t ul;
	uint8_t mac[6];
	unsigned errs;

	ck_assert_uint_eq(ctrl(mac_set, sizeof(mac_set), &ul), 0);
	ck_assert_uint_eq(ul, 1);
	for (unsigned i = 0; i < 6; i++)
		mac[i] = (uint8_t)vdrv_bar_r(VIRTIO_PCI_DEVCFG_OFF + i, 1);
	ck_assert_mem_eq(mac, mac_set + 2, 6);
	ck_assert_uint_eq(ctrl(promisc, sizeof(promisc), &ul), 0);
	ck_assert_uint_eq(ctrl(table, sizeof(table), &ul), 0);
	ck_assert_uint_eq(ctrl(table_lie, sizeof(table_lie), &ul), 1);
	ck_assert_uint_eq(ctrl(mq, sizeof(mq), &ul), 1); /* MQ was not offered */
	ck_assert_uint_eq(ctrl(unknown, sizeof(unknown), &ul), 1);
	ck_assert_uint_eq(ctrl(unknown, 1, &ul), 1); /* shorter than class and command */
	ck_assert_uint_eq(ctrl(huge, sizeof(huge), &ul), 1);
	/* no writable byte for the ack: returned with nothing written */
	vdrv_set_desc(ctrl_q, 12, CTLBUF, 3, 0, 0);
	vdrv_offer(ctrl_q, 12);
	{
		uint32_t id;

		ck_assert(vdrv_used_next(ctrl_q, &id, &ul));
		ck_assert_uint_eq(ul, 0);
	}
	errs = (unsigned)counters().backend_errors;
	ck_assert_uint_eq(errs, 6);
	/* the parser's entry (the fuzz target's) agrees */
	ck_assert_uint_eq(virtio_net_ctrl_cmd(dev, promisc, sizeof(promisc)), 0);
	ck_assert_uint_eq(virtio_net_ctrl_cmd(dev, table_lie, sizeof(table_lie)), 1);
	ck_assert_uint_eq(virtio_net_ctrl_cmd(dev, huge, 0), 1);
}
END_TEST

/* Two pairs: the second is used once the driver asks for it; each has its own tap fd. */
START_TEST(test_mq)
{
	static const uint8_t mq2[] = {4, 0, 2, 0}, mq9[] = {4, 0, 9, 0};
	uint8_t hdr[HLEN] = {0}, buf[2048];
	uint32_t ul, id, len;

	ck_assert_uint_eq(vdrv_bar_r(VIRTIO_PCI_NUM_QUEUES, 2), 5);
	ck_assert_uint_eq(vdrv_bar_r(VIRTIO_PCI_DEVCFG_OFF + 8, 2), 2); /* max_virtqueue_pairs */
	ck_assert_uint_eq(ctrl(mq9, sizeof(mq9), &ul), 1);
	ck_assert_uint_eq(ctrl(mq2, sizeof(mq2), &ul), 0);
	rx_offer(2, 0, 2, 0x1000);
	host_send(1, 300, 0x42, 0);
	ck_assert(vdrv_used_next(2, &id, &len));
	ck_assert_uint_eq(len, HLEN + 300);
	ck_assert_uint_eq(ram[RXBUF(2) + 0x1000 * id + HLEN], 0x42);
	tx_frame(3, hdr, 80, 0x24);
	ck_assert_int_eq(host_recv(1, buf, sizeof(buf), 2000), HLEN + 80);
	ck_assert_uint_eq(buf[HLEN], 0x24);
	ck_assert_int_eq(host_recv(0, buf, sizeof(buf), 50), -1);
}
END_TEST

/* A driver reset drops a frame held for the old rings; the device works after it. */
START_TEST(test_reset)
{
	uint32_t id, len;

	rx_offer(0, 0, 1, 0x100);
	host_send(0, 3000, 1, 0); /* held: too few buffers */
	usleep(50 * 1000);
	driver_start(1);
	rx_offer(0, 0, 4, 0x1000);
	host_send(0, 50, 2, 0);
	ck_assert(vdrv_used_next(0, &id, &len));
	ck_assert_uint_eq(len, HLEN + 50);
	ck_assert_uint_eq(ram[RXBUF(0) + 0x1000 * id + HLEN], 2);
}
END_TEST

/* The fd's peer goes away (a socket; a tap never does): the device stops reading it instead of
 * spinning, drops what the guest sends, and still stops cleanly. */
START_TEST(test_peer_gone)
{
	uint8_t hdr[HLEN] = {0};

	rx_offer(0, 0, 2, 0x1000);
	close(sv[0][1]);
	sv[0][1] = -1;
	usleep(50 * 1000);
	tx_frame(1, hdr, 60, 1);
	ck_assert_uint_eq(counters().tx_dropped, 1);
	ck_assert_uint_eq(vdrv_used_idx(0), 0);
	ck_assert_uint_lt(counters().wakeups, 20);
}
END_TEST

START_TEST(test_pause)
{
	uint32_t id, len;

	rx_offer(0, 0, 2, 0x1000);
	virtio_net_model.pause(dev);
	host_send(0, 40, 3, 0);
	usleep(100 * 1000);
	ck_assert_uint_eq(vdrv_used_idx(0), 0);
	virtio_net_model.resume(dev);
	ck_assert(vdrv_used_next(0, &id, &len));
	ck_assert_uint_eq(len, HLEN + 40);
}
END_TEST

/* Snapshot: a device that served frames both ways and took a new MAC is paused, saved and
 * restored into a second one on a new frame carrier (the tap the restored config opens): the
 * second reads back the MAC, takes up the rings where the first stopped (the next frame lands
 * in the rx buffer the first left, at the next used index) and sends through the new carrier;
 * state that does not fit is refused. */
START_TEST(test_snapshot)
{
	static const uint8_t mac_set[] = {1, 1, 0x52, 0x54, 0, 7, 7, 7};
	static const uint8_t ack[] = {3, 0}; /* VIRTIO_NET_CTRL_ANNOUNCE_ACK */
	struct dev_host h = {.cpus = 1, .gm = &gm};
	struct virtio_net_config c = {.num_queues = 2};
	uint8_t hdr[HLEN] = {0}, buf[4096], mac[6], *st, *bad;
	uint64_t len = 0, big = 0;
	uint32_t id, ulen, first;
	void *b;
	int nsv[2];

	/* the guest takes the announce feature too */
	features |= 1ull << F_ANNOUNCE;
	driver_start(1);
	ck_assert_uint_eq(vdrv_bar_r(VIRTIO_PCI_DEVCFG_OFF + 6, 1), 1); /* link up, no announce */
	ck_assert_uint_eq(ctrl(ack, sizeof(ack), &ulen), 1); /* nothing to acknowledge yet */
	ck_assert_uint_eq(ctrl(ack, sizeof(ack), &ulen), 1);
	rx_offer(0, 0, 2, 0x1000);
	host_send(0, 80, 0x31, 0);
	ck_assert(vdrv_used_next(0, &first, &ulen));
	tx_frame(1, hdr, 60, 0x42);
	ck_assert_int_eq(host_recv(0, buf, sizeof(buf), 2000), HLEN + 60);
	ck_assert_uint_eq(ctrl(mac_set, sizeof(mac_set), &ulen), 0);
	/* running: refused */
	ck_assert_int_eq(virtio_net_model.save(dev, NULL, &len, err, sizeof(err)), 0);
	st = malloc(len);
	bad = malloc(len);
	big = len;
	ck_assert_int_eq(virtio_net_model.save(dev, st, &big, err, sizeof(err)), -EBUSY);
	ck_assert_ptr_nonnull(strstr(err, "not paused"));
	virtio_net_model.pause(dev);
	ck_assert_int_eq(virtio_net_model.save(dev, st, &len, err, sizeof(err)), 0);

	/* the restored device: a new carrier, the config's MAC (the saved one wins) */
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, nsv), 0);
	c.fds[c.nfds++] = nsv[0];
	memcpy(c.mac, "\x52\x54\x00\x01\x02\x03", 6);
	ck_assert_msg(virtio_net_model.create(&h, &c, "net0", 0, &b, err, sizeof(err)) == 0, "%s",
		      err);
	close(nsv[0]);
	/* refusals first: each leaves the device as it was */
	ck_assert_int_eq(virtio_net_model.restore(b, st, 8, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "too short"));
	memcpy(bad, st, len);
	bad[4] = 2; /* two queue pairs */
	ck_assert_int_eq(virtio_net_model.restore(b, bad, len, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "queue pairs"));
	memcpy(bad, st, len);
	bad[8] = 0; /* no active pair */
	ck_assert_int_eq(virtio_net_model.restore(b, bad, len, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "active"));
	ck_assert_int_eq(virtio_net_model.restore(b, st, len - 1, err, sizeof(err)), -EINVAL);
	vdrv_bus_add(virtio_net_model.pci(b));
	ck_assert_int_eq(virtio_net_model.restore(b, st, len, err, sizeof(err)), 0);
	/* the first goes (its carrier with it), the second takes over the same rings */
	virtio_net_model.destroy(dev);
	close(sv[0][1]);
	dev = b;
	sv[0][1] = nsv[1];
	vp = virtio_net_model.pci(dev)->priv;
	vdrv_switch(vp);
	for (unsigned i = 0; i < 6; i++)
		mac[i] = (uint8_t)vdrv_bar_r(VIRTIO_PCI_DEVCFG_OFF + i, 1);
	ck_assert_mem_eq(mac, "\x52\x54\x00\x07\x07\x07", 6);
	ck_assert_uint_eq(vdrv_bar_r(VIRTIO_PCI_STATUS, 1), 15);
	/* paused until the VM resumes: a frame waits */
	host_send(0, 90, 0x77, 0);
	usleep(100 * 1000);
	ck_assert_uint_eq(vdrv_used_idx(0), 1);
	(void)vdrv_bar_r(VIRTIO_PCI_ISR_OFF, 1); /* read-to-clear */
	virtio_net_model.resume(dev);
	/* the restored guest is asked to announce itself: status ANNOUNCE, a configuration
	 * interrupt, until its ACK */
	ck_assert_uint_eq(vdrv_bar_r(VIRTIO_PCI_ISR_OFF, 1) & 2, 2);
	ck_assert_uint_eq(vdrv_bar_r(VIRTIO_PCI_DEVCFG_OFF + 6, 1), 3);
	ck_assert(vdrv_used_next(0, &id, &ulen));
	ck_assert_uint_eq(ulen, HLEN + 90);
	ck_assert_uint_eq(id, (first + 1) % QSIZE); /* the buffer the first device left */
	ck_assert_uint_eq(ram[RXBUF(0) + 0x1000 * id + HLEN], 0x77);
	ck_assert_uint_eq(vdrv_used_idx(0), 2);
	tx_frame(1, hdr, 70, 0x43);
	ck_assert_int_eq(host_recv(0, buf, sizeof(buf), 2000), HLEN + 70);
	ck_assert_uint_eq(buf[HLEN], 0x43);
	ck_assert_uint_eq(counters().tx_dropped, 0);
	ck_assert_uint_eq(ctrl(ack, sizeof(ack), &ulen), 0);
	ck_assert_uint_eq(vdrv_bar_r(VIRTIO_PCI_DEVCFG_OFF + 6, 1), 1);
	free(st);
	free(bad);
}
END_TEST

START_TEST(test_net_flag)
{
	struct virtio_net_config c;

	ck_assert_int_eq(config_parse_net("tap=tap0,mac=52:54:00:aa:bb:cc,num_queues=4,"
					  "queue_size=512,mtu=9000,id=eth0",
					  &c, err, sizeof(err)),
			 0);
	ck_assert_str_eq(c.tap, "tap0");
	ck_assert_mem_eq(c.mac, "\x52\x54\x00\xaa\xbb\xcc", 6);
	ck_assert_uint_eq(c.num_queues, 4);
	ck_assert_uint_eq(c.queue_size, 512);
	ck_assert_uint_eq(c.mtu, 9000);
	ck_assert_str_eq(c.id, "eth0");
	ck_assert_int_eq(config_parse_net("fd=3:4,num_queues=4", &c, err, sizeof(err)), 0);
	ck_assert_uint_eq(c.nfds, 2);
	ck_assert_int_eq(c.fds[1], 4);
	ck_assert_int_eq(config_parse_net("fd=3,num_queues=4", &c, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(config_parse_net("tap=t,num_queues=3", &c, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(config_parse_net("tap=t,num_queues=8", &c, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(config_parse_net("tap=t,queue_size=100", &c, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(config_parse_net("tap=t,mac=01:00:00:00:00:01", &c, err, sizeof(err)),
			 -EINVAL);
	ck_assert_int_eq(config_parse_net("tap=t,mac=zz", &c, err, sizeof(err)), -EINVAL);
	/* the host side's address, for a tap lvmm opens by name */
	ck_assert_int_eq(config_parse_net("tap=t,ip=10.0.0.1", &c, err, sizeof(err)), 0);
	ck_assert_uint_eq(c.host_ip, htonl(0x0a000001));
	ck_assert_uint_eq(c.host_mask, htonl(0xffffff00));
	ck_assert_int_eq(config_parse_net("tap=t,ip=10.0.0.1,mask=255.0.0.0", &c, err, sizeof(err)),
			 0);
	ck_assert_uint_eq(c.host_mask, htonl(0xff000000));
	ck_assert_int_eq(config_parse_net("fd=3,ip=10.0.0.1", &c, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(config_parse_net("tap=t,mask=255.0.0.0", &c, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(config_parse_net("tap=t,ip=10.0.0.300", &c, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(config_parse_net("tap=t,host_mac=52:54:00:00:00:01", &c, err, sizeof(err)),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "'host_mac' is not supported"));
	ck_assert_int_eq(config_parse_net("tap=0123456789abcdefg", &c, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(config_parse_net("mac=52:54:00:00:00:01", &c, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(config_parse_net("tap=t,bogus=1", &c, err, sizeof(err)), -EINVAL);
}
END_TEST

static int net_json(const char *text, struct virtio_net_config *c)
{
	json_t *j = json_loads(text, 0, NULL);
	int r;

	ck_assert_ptr_nonnull(j);
	r = api_json_to_net(j, "net", c, err, sizeof(err));
	json_decref(j);
	return r;
}

START_TEST(test_net_json)
{
	struct virtio_net_config c;
	json_t *o;

	/* what Kata's clh driver sends with a tap fd: the schema's defaults for the rest */
	ck_assert_int_eq(net_json("{\"mac\": \"52:54:00:11:22:33\", \"ip\": \"192.168.249.1\","
				  " \"mask\": \"255.255.255.0\", \"num_queues\": 2,"
				  " \"queue_size\": 256, \"vhost_user\": false,"
				  " \"vhost_mode\": \"Client\", \"fds\": [3], \"id\": \"eth0\","
				  " \"offload_tso\": true, \"offload_ufo\": true,"
				  " \"offload_csum\": true, \"pci_segment\": 0}",
				  &c),
			 0);
	ck_assert_uint_eq(c.nfds, 1);
	ck_assert_str_eq(c.id, "eth0");
	ck_assert(!c.no_tso && !c.no_csum);
	ck_assert_int_eq(net_json("{\"tap\": \"t0\", \"offload_tso\": false, \"mtu\": 1400}", &c),
			 0);
	ck_assert(c.no_tso);
	ck_assert_uint_eq(c.mtu, 1400);
	o = api_net_to_json(&c, 3);
	ck_assert_str_eq(json_string_value(json_object_get(o, "id")), "net3");
	ck_assert(json_is_false(json_object_get(o, "offload_tso")));
	json_decref(o);
	ck_assert_int_ne(net_json("{\"tap\": \"t0\", \"host_mac\": \"52:54:00:11:22:33\"}", &c), 0);
	ck_assert_ptr_nonnull(strstr(err, "'net.host_mac' is unsupported"));
	ck_assert_int_ne(net_json("{\"tap\": \"t0\", \"vhost_user\": true}", &c), 0);
	ck_assert_ptr_nonnull(strstr(err, "net.vhost_user"));
	ck_assert_int_ne(net_json("{\"tap\": \"t0\", \"ip\": \"10.1.1.1\"}", &c), 0);
	ck_assert_ptr_nonnull(strstr(err, "net.ip"));
	ck_assert_int_ne(net_json("{\"tap\": \"t0\", \"pci_segment\": 1}", &c), 0);
	ck_assert_int_ne(net_json("{\"fds\": [3], \"num_queues\": 4}", &c), 0);
	ck_assert_int_ne(net_json("{\"fds\": [-1]}", &c), 0);
	ck_assert_int_ne(net_json("{\"tap\": \"t0\", \"mac\": \"nope\"}", &c), 0);
	ck_assert_int_ne(net_json("{\"tap\": \"t0\", \"num_queues\": 7}", &c), 0);
	ck_assert_int_ne(net_json("[]", &c), 0);
}
END_TEST

static Suite *virtio_net_suite(void)
{
	Suite *s = suite_create("virtio_net");
	TCase *tc = tcase_create("device");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_config);
	tcase_add_test(tc, test_tx);
	tcase_add_test(tc, test_tx_offload_header);
	tcase_add_test(tc, test_tx_malformed);
	tcase_add_test(tc, test_rx);
	tcase_add_test(tc, test_rx_mergeable);
	tcase_add_test(tc, test_rx_no_mergeable);
	tcase_add_test(tc, test_rx_malformed);
	tcase_add_test(tc, test_rx_malformed_mid_frame);
	tcase_add_test(tc, test_ctrl);
	tcase_add_test(tc, test_reset);
	tcase_add_test(tc, test_pause);
	tcase_add_test(tc, test_peer_gone);
	tcase_add_test(tc, test_snapshot);
	suite_add_tcase(s, tc);
	tc = tcase_create("mq");
	tcase_add_checked_fixture(tc, setup2, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_mq);
	suite_add_tcase(s, tc);
	tc = tcase_create("config");
	tcase_add_test(tc, test_net_flag);
	tcase_add_test(tc, test_net_json);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return testutil_run_suite(virtio_net_suite());
}
