/* virtio-vsock driven through BAR 0 and its rx/tx rings as a guest driver would, against the
 * hybrid Unix-socket host side: a host program's CONNECT and the guest's RESPONSE, data both
 * ways with the credit figures, the guest's connection to PATH_<port>, and every packet a
 * hostile guest can send (short headers, lengths past the buffer, foreign CIDs, data beyond
 * the credit, data for no connection, unknown ops): each ends in a reset of that connection,
 * never of the device. Also --vsock and VsockConfig parsing. */
#include <check.h>
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "api/api_internal.h"
#include "config.h"
#include "guest_mem.h"
#include "testutil.h"
#include "vdrv.h"
#include "virtio/virtio_pci.h"
#include "virtio/virtio_vsock.h"

#define RAM_SIZE (4u << 20)
#define QSIZE	 VDRV_QSIZE
#define RX	 0
#define TX	 1
/* rx buffers; tx buffers (the rings: vdrv.h) */
#define RXBUF 0x20000 /* QSIZE buffers of 0x1000 */
#define TXBUF 0x40000 /* QSIZE buffers of 0x2000 */
#define EVBUF 0x70000 /* event buffers of 8 bytes */
#define GUEST 7
#define HDR   44

enum { OP_REQUEST = 1, OP_RESPONSE, OP_RST, OP_SHUTDOWN, OP_RW, OP_CREDIT_UPDATE };

static uint8_t *ram;
static struct guest_mem gm;
static char dir[64], path[96], err[512];
static void *dev;
static struct virtio_pci *vp;

struct pkt {
	uint64_t src_cid, dst_cid;
	uint32_t src_port, dst_port, len;
	uint16_t type, op;
	uint32_t flags, buf_alloc, fwd_cnt;
	uint8_t data[0x1000];
};

static void setup(void)
{
	struct dev_host h = {.cpus = 1};
	struct virtio_vsock_config c = {.cid = GUEST};

	ram = calloc(1, RAM_SIZE);
	gmem_init_buffer(&gm, ram, RAM_SIZE);
	h.gm = &gm;
	testutil_mkdtemp(dir, sizeof(dir), "/tmp/lvmm-vsk-");
	snprintf(path, sizeof(path), "%s/v.sock", dir);
	snprintf(c.socket, sizeof(c.socket), "%s", path);
	ck_assert_msg(virtio_vsock_model.create(&h, &c, "vsock0", 0, &dev, err, sizeof(err)) == 0,
		      "%s", err);
	vp = virtio_vsock_model.pci(dev)->priv;
	vdrv_attach(vp, ram);
	vdrv_start(0, 2);
	/* rx buffers for everything the device sends */
	for (unsigned i = 0; i < QSIZE; i++) {
		vdrv_set_desc(RX, i, RXBUF + 0x1000 * i, 0x1000, VIRTQ_DESC_F_WRITE, 0);
		vdrv_offer(RX, (uint16_t)i);
	}
}

static void teardown(void)
{
	virtio_vsock_model.destroy(dev);
	testutil_rmtree(dir);
	free(ram);
}

static uint64_t le(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static void put(uint8_t *p, uint64_t v, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* The next packet the device put in the rx ring (within 5 s); the buffer goes back. */
static bool rx_next(struct pkt *p)
{
	uint32_t id, len;
	const uint8_t *b;

	if (!vdrv_used_next(RX, &id, &len))
		return false;
	b = ram + RXBUF + 0x1000 * id;
	p->src_cid = le(b, 8);
	p->dst_cid = le(b + 8, 8);
	p->src_port = (uint32_t)le(b + 16, 4);
	p->dst_port = (uint32_t)le(b + 20, 4);
	p->len = (uint32_t)le(b + 24, 4);
	p->type = (uint16_t)le(b + 28, 2);
	p->op = (uint16_t)le(b + 30, 2);
	p->flags = (uint32_t)le(b + 32, 4);
	p->buf_alloc = (uint32_t)le(b + 36, 4);
	p->fwd_cnt = (uint32_t)le(b + 40, 4);
	ck_assert_uint_eq(len, HDR + p->len);
	memcpy(p->data, b + HDR, p->len < sizeof(p->data) ? p->len : sizeof(p->data));
	vdrv_offer(RX, (uint16_t)id);
	return true;
}

/* The next packet that is not a credit update (those come whenever lvmm forwarded data). */
static bool rx_ctl(struct pkt *p)
{
	do
		if (!rx_next(p))
			return false;
	while (p->op == OP_CREDIT_UPDATE);
	return true;
}

/* The guest sends a packet of hdr_len header bytes (HDR normally) and len payload bytes. */
static void tx_raw(uint64_t src_cid, uint32_t src_port, uint32_t dst_port, uint16_t op,
		   uint32_t hdr_len_field, const void *data, uint32_t len, uint32_t buf_len,
		   uint32_t flags)
{
	static unsigned slot;
	uint8_t *b = ram + TXBUF + 0x2000 * (slot % QSIZE);

	memset(b, 0, HDR);
	put(b, src_cid, 8);
	put(b + 8, 2, 8);
	put(b + 16, src_port, 4);
	put(b + 20, dst_port, 4);
	put(b + 24, hdr_len_field, 4);
	put(b + 28, 1, 2);
	put(b + 30, op, 2);
	put(b + 32, flags, 4);
	put(b + 36, 65536, 4); /* buf_alloc */
	put(b + 40, 0, 4);
	if (len)
		memcpy(b + HDR, data, len);
	vdrv_set_desc(TX, slot % QSIZE, TXBUF + 0x2000 * (slot % QSIZE), buf_len, 0, 0);
	vdrv_offer(TX, (uint16_t)(slot % QSIZE));
	slot++;
	/* as a driver does: a slot is used again only once the device returned it */
	ck_assert(vdrv_wait_used(TX, vdrv_avail_idx(TX)));
}

static void tx(uint32_t src_port, uint32_t dst_port, uint16_t op, const void *data, uint32_t len)
{
	tx_raw(GUEST, src_port, dst_port, op, len, data, len, HDR + len, 0);
}

static int host_connect(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct timeval tv = {.tv_sec = 5};
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	memcpy(sa.sun_path, path, strlen(path) + 1);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

/* A host program connected to guest port 80 and the guest accepted: the fd; *hport its port. */
static int established(uint32_t *hport)
{
	struct pkt p;
	char ok[32] = "";
	int fd = host_connect();

	ck_assert_int_eq(write(fd, "CONNECT 80\n", 11), 11);
	/* resets still owed for earlier packets of a test may come first */
	do
		ck_assert(rx_ctl(&p));
	while (p.op == OP_RST);
	ck_assert_msg(p.op == OP_REQUEST, "op %u ports %u -> %u", p.op, p.src_port, p.dst_port);
	ck_assert_uint_eq(p.src_cid, 2);
	ck_assert_uint_eq(p.dst_cid, GUEST);
	ck_assert_uint_eq(p.dst_port, 80);
	ck_assert_uint_ge(p.src_port, 1u << 30);
	*hport = p.src_port;
	tx(80, p.src_port, OP_RESPONSE, NULL, 0);
	ck_assert_int_gt(read(fd, ok, sizeof(ok) - 1), 0);
	ck_assert_msg(!strncmp(ok, "OK ", 3), "answer '%s'", ok);
	ck_assert_uint_eq(strtoul(ok + 3, NULL, 10), p.src_port);
	return fd;
}

START_TEST(test_config_cid)
{
	ck_assert_uint_eq(vdrv_bar_r(VIRTIO_PCI_DEVCFG_OFF, 8), GUEST);
	ck_assert_uint_eq(vdrv_bar_r(VIRTIO_PCI_NUM_QUEUES, 2), 3);
}
END_TEST

START_TEST(test_host_connect_and_data)
{
	uint32_t hport;
	struct pkt p;
	char buf[64] = "";
	int fd = established(&hport);

	/* guest -> host */
	tx(80, hport, OP_RW, "hello host", 10);
	ck_assert_int_eq(read(fd, buf, sizeof(buf)), 10);
	ck_assert_mem_eq(buf, "hello host", 10);
	/* host -> guest, within the 64 KiB the guest advertised */
	ck_assert_int_eq(write(fd, "hi guest", 8), 8);
	ck_assert(rx_ctl(&p));
	ck_assert_uint_eq(p.op, OP_RW);
	ck_assert_uint_eq(p.len, 8);
	ck_assert_mem_eq(p.data, "hi guest", 8);
	ck_assert_uint_eq(p.buf_alloc, 256 << 10);
	/* the host program goes: the guest is told both directions are shut */
	close(fd);
	ck_assert(rx_ctl(&p));
	ck_assert_uint_eq(p.op, OP_SHUTDOWN);
	ck_assert_uint_eq(p.flags, 3);
}
END_TEST

/* Every connection slot in use (255 host programs that never send their CONNECT line and one
 * connected to the guest): the device keeps serving the one, and its thread still stops at
 * teardown (its poll set has room for every slot besides its fixed entries). */
START_TEST(test_all_slots_used)
{
	enum { SLOTS = 256 };
	int idle[SLOTS - 1], fd;
	char buf[16] = "";
	uint32_t hport;

	for (unsigned i = 0; i < SLOTS - 1; i++)
		idle[i] = host_connect();
	fd = established(&hport);
	tx(80, hport, OP_RW, "still here", 10);
	ck_assert_int_eq(read(fd, buf, sizeof(buf)), 10);
	ck_assert_mem_eq(buf, "still here", 10);
	close(fd);
	for (unsigned i = 0; i < SLOTS - 1; i++)
		close(idle[i]);
}
END_TEST

/* The guest connects to the host's port 5000: PATH_5000 takes it; a port nobody serves is reset. */
START_TEST(test_guest_connect)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char p5000[120], buf[16] = "";
	int lfd = socket(AF_UNIX, SOCK_STREAM, 0), fd;
	struct pkt p;

	snprintf(p5000, sizeof(p5000), "%s_5000", path);
	memcpy(sa.sun_path, p5000, strlen(p5000) + 1);
	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(lfd, 1), 0);
	tx(999, 5000, OP_REQUEST, NULL, 0);
	ck_assert(rx_ctl(&p));
	ck_assert_uint_eq(p.op, OP_RESPONSE);
	ck_assert_uint_eq(p.src_port, 5000);
	ck_assert_uint_eq(p.dst_port, 999);
	fd = accept(lfd, NULL, NULL);
	ck_assert_int_ge(fd, 0);
	tx(999, 5000, OP_RW, "ping", 4);
	ck_assert_int_eq(read(fd, buf, sizeof(buf)), 4);
	ck_assert_mem_eq(buf, "ping", 4);
	/* the guest resets it: the host program sees the end */
	tx(999, 5000, OP_RST, NULL, 0);
	ck_assert_int_eq(read(fd, buf, sizeof(buf)), 0);
	close(fd);
	close(lfd);
	/* nobody at PATH_5001 */
	tx(998, 5001, OP_REQUEST, NULL, 0);
	ck_assert(rx_ctl(&p));
	ck_assert_uint_eq(p.op, OP_RST);
	ck_assert_uint_eq(p.dst_port, 998);
}
END_TEST

START_TEST(test_host_refusals)
{
	char buf[64] = "";
	struct pkt p;
	int fd = host_connect();

	ck_assert_int_eq(write(fd, "GET / HTTP/1.0\n", 15), 15);
	ck_assert_int_gt(read(fd, buf, sizeof(buf) - 1), 0);
	ck_assert_msg(!strncmp(buf, "ERROR", 5), "'%s'", buf);
	close(fd);
	/* the guest resets the request: the host program is closed without an answer */
	fd = host_connect();
	ck_assert_int_eq(write(fd, "CONNECT 81\n", 11), 11);
	ck_assert(rx_ctl(&p));
	ck_assert_uint_eq(p.op, OP_REQUEST);
	tx(81, p.src_port, OP_RST, NULL, 0);
	ck_assert_int_eq(read(fd, buf, sizeof(buf)), 0);
	close(fd);
}
END_TEST

/* Every malformed packet resets (or is dropped); the device keeps serving. */
START_TEST(test_hostile_packets)
{
	static uint8_t big[0x1800];
	uint32_t hport;
	struct pkt p;
	char buf[16];
	int fd = established(&hport);

	/* a header shorter than 44 bytes: dropped */
	tx_raw(GUEST, 80, hport, OP_RW, 0, NULL, 0, 20, 0);
	/* a length past the buffer: dropped, the sender reset */
	tx_raw(GUEST, 80, hport, OP_RW, 5000, "x", 1, HDR + 1, 0);
	ck_assert(rx_ctl(&p));
	ck_assert_uint_eq(p.op, OP_RST);
	/* that reset the connection: its host program sees the end */
	ck_assert_int_eq(read(fd, buf, sizeof(buf)), 0);
	close(fd);
	fd = established(&hport);
	/* another guest's CID as the source, and a destination other than the host */
	tx_raw(GUEST + 1, 80, hport, OP_RW, 1, "y", 1, HDR + 1, 0);
	tx_raw(GUEST, 80, hport, OP_REQUEST, 0, NULL, 0, HDR, 0);
	ck_assert(rx_ctl(&p)); /* the duplicate REQUEST resets that connection */
	ck_assert_uint_eq(p.op, OP_RST);
	ck_assert_int_eq(read(fd, buf, sizeof(buf)), 0);
	close(fd);
	/* data for no connection, an unknown op, a control packet with a payload */
	tx(77, 7777, OP_RW, "z", 1);
	ck_assert(rx_ctl(&p));
	ck_assert_uint_eq(p.op, OP_RST);
	ck_assert_uint_eq(p.dst_port, 77);
	fd = established(&hport);
	tx(80, hport, 99, NULL, 0);
	ck_assert(rx_ctl(&p));
	ck_assert_uint_eq(p.op, OP_RST);
	close(fd);
	tx(80, 7000, OP_CREDIT_UPDATE, "abc", 3);
	ck_assert(rx_ctl(&p));
	ck_assert_uint_eq(p.op, OP_RST);
	/* more data than the 256 KiB credit lvmm gave (and the socket's own buffer): reset */
	fd = established(&hport);
	for (unsigned i = 0; i < 100; i++)
		tx(80, hport, OP_RW, big, 0x1800 - HDR);
	/* the host program reads nothing: lvmm's buffer fills, then the overflow resets */
	for (;;) {
		ck_assert(rx_next(&p));
		if (p.op == OP_RST)
			break;
		ck_assert_uint_eq(p.op, OP_CREDIT_UPDATE);
	}
	close(fd);
	/* after all that the device still serves */
	fd = established(&hport);
	tx(80, hport, OP_RW, "ok", 2);
	ck_assert_int_eq(read(fd, buf, sizeof(buf)), 2);
	close(fd);
	ck_assert_uint_eq(vdrv_bar_r(VIRTIO_PCI_STATUS, 1) & VIRTIO_STATUS_NEEDS_RESET, 0);
}
END_TEST

/* A second device on the socket of a live one is refused (never steals it); a stale socket is
 * replaced. */
START_TEST(test_socket_in_use)
{
	struct dev_host h = {.gm = &gm, .cpus = 1};
	struct virtio_vsock_config c = {.cid = GUEST + 1};
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char stale[128];
	void *other;
	int fd;

	snprintf(c.socket, sizeof(c.socket), "%s", path);
	ck_assert_int_eq(virtio_vsock_model.create(&h, &c, "vsock1", 0, &other, err, sizeof(err)),
			 -EEXIST);
	ck_assert_msg(strstr(err, "in use"), "%s", err);
	/* a socket nobody listens on any more */
	snprintf(stale, sizeof(stale), "%s/stale.sock", dir);
	memcpy(sa.sun_path, stale, strlen(stale) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
	snprintf(c.socket, sizeof(c.socket), "%s", stale);
	ck_assert_msg(virtio_vsock_model.create(&h, &c, "vsock1", 0, &other, err, sizeof(err)) == 0,
		      "%s", err);
	virtio_vsock_model.destroy(other);
	ck_assert_int_ne(access(stale, F_OK), 0);
}
END_TEST

/* Snapshot: with a host connection established, the device is paused, saved and restored into
 * a second one listening at the same PATH (the first gone, its connection with it). The second
 * sends the guest a transport reset on the event queue once resumed, answers a packet of the
 * old connection with a reset, and takes a new host connection on the rings where the first
 * stopped; state of another CID or version is refused. */
START_TEST(test_snapshot)
{
	struct dev_host h = {.cpus = 1, .gm = &gm};
	struct virtio_vsock_config c = {.cid = GUEST};
	uint64_t len = 0, room;
	uint8_t *st, *bad;
	uint32_t hport, old_port, id, ulen;
	char buf[16];
	struct pkt p;
	void *b;
	int fd, fd2;

	/* the driver again with the event queue, and two event buffers */
	vdrv_attach(vp, ram);
	vdrv_start(0, 3);
	for (unsigned i = 0; i < QSIZE; i++) {
		vdrv_set_desc(RX, i, RXBUF + 0x1000 * i, 0x1000, VIRTQ_DESC_F_WRITE, 0);
		vdrv_offer(RX, (uint16_t)i);
	}
	for (unsigned i = 0; i < 2; i++) {
		memset(ram + EVBUF + 8 * i, 0xee, 8);
		vdrv_set_desc(2, i, EVBUF + 8 * i, 8, VIRTQ_DESC_F_WRITE, 0);
		vdrv_offer(2, (uint16_t)i);
	}
	fd = established(&hport);
	tx(80, hport, OP_RW, "before", 6);
	ck_assert_int_eq(read(fd, buf, sizeof(buf)), 6);
	ck_assert_int_eq(virtio_vsock_model.save(dev, NULL, &len, err, sizeof(err)), 0);
	st = malloc(len);
	bad = malloc(len);
	room = len;
	ck_assert_int_eq(virtio_vsock_model.save(dev, st, &room, err, sizeof(err)), -EBUSY);
	ck_assert_ptr_nonnull(strstr(err, "not paused"));
	virtio_vsock_model.pause(dev);
	/* paused: a host program's data waits, nothing reaches the rings */
	ck_assert_int_eq(write(fd, "late", 4), 4);
	usleep(100 * 1000);
	ck_assert_uint_eq(vdrv_used_idx(2), 0);
	ck_assert_int_eq(virtio_vsock_model.save(dev, st, &len, err, sizeof(err)), 0);
	/* the saving process goes: its host connections with it */
	virtio_vsock_model.destroy(dev);
	dev = NULL;
	ck_assert_int_le(read(fd, buf, sizeof(buf)), 0); /* the end, or a reset ("late" unread) */
	close(fd);

	snprintf(c.socket, sizeof(c.socket), "%s", path);
	ck_assert_msg(virtio_vsock_model.create(&h, &c, "vsock0", 0, &b, err, sizeof(err)) == 0,
		      "%s", err);
	dev = b;
	ck_assert_int_eq(virtio_vsock_model.restore(b, st, 4, err, sizeof(err)), -EINVAL);
	memcpy(bad, st, len);
	bad[8] = GUEST + 1;
	ck_assert_int_eq(virtio_vsock_model.restore(b, bad, len, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "CID"));
	memcpy(bad, st, len);
	bad[0] = 9;
	ck_assert_int_eq(virtio_vsock_model.restore(b, bad, len, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(virtio_vsock_model.restore(b, st, len + 8, err, sizeof(err)), -EINVAL);
	vdrv_bus_add(virtio_vsock_model.pci(b));
	ck_assert_int_eq(virtio_vsock_model.restore(b, st, len, err, sizeof(err)), 0);
	vp = virtio_vsock_model.pci(b)->priv;
	vdrv_switch(vp);
	ck_assert_uint_eq(vdrv_bar_r(VIRTIO_PCI_DEVCFG_OFF, 8), GUEST);
	ck_assert(virtio_vsock_reset_owed(b));
	usleep(100 * 1000);
	ck_assert_uint_eq(vdrv_used_idx(2), 0); /* not before the VM resumes */
	virtio_vsock_model.resume(b);
	ck_assert(vdrv_used_next(2, &id, &ulen));
	ck_assert_uint_eq(id, 0);
	ck_assert_uint_eq(ulen, 4);
	ck_assert_uint_eq(le(ram + EVBUF, 4), VIRTIO_VSOCK_EVENT_TRANSPORT_RESET);
	ck_assert_uint_eq(ram[EVBUF + 4], 0xee); /* nothing past the event */
	ck_assert(!virtio_vsock_reset_owed(b));
	/* the old connection's packets: reset, the device serves on */
	tx(80, hport, OP_RW, "stale", 5);
	ck_assert(rx_ctl(&p));
	ck_assert_uint_eq(p.op, OP_RST);
	ck_assert_uint_eq(p.dst_port, 80);
	/* a new host connection through the restored device's PATH, on a host port from
	 * elsewhere in the range (the saved lvmm gave out the first one) */
	old_port = hport;
	fd2 = established(&hport);
	ck_assert_uint_ne(hport, old_port);
	ck_assert_uint_lt(hport, (1u << 30) + (1u << 29));
	tx(80, hport, OP_RW, "after", 5);
	ck_assert_int_eq(read(fd2, buf, sizeof(buf)), 5);
	ck_assert_mem_eq(buf, "after", 5);
	close(fd2);
	free(st);
	free(bad);
}
END_TEST

START_TEST(test_vsock_flag)
{
	struct virtio_vsock_config c;

	ck_assert_int_eq(config_parse_vsock("cid=3,socket=/run/v.sock", &c, err, sizeof(err)), 0);
	ck_assert_uint_eq(c.cid, 3);
	ck_assert_str_eq(c.socket, "/run/v.sock");
	ck_assert_int_eq(config_parse_vsock("cid=2,socket=/v", &c, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "cid 2"));
	ck_assert_int_eq(config_parse_vsock("cid=4294967295,socket=/v", &c, err, sizeof(err)),
			 -EINVAL);
	ck_assert_int_eq(config_parse_vsock("socket=/v", &c, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(config_parse_vsock("cid=3", &c, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(config_parse_vsock("cid=3,socket=rel.sock", &c, err, sizeof(err)),
			 -EINVAL);
	ck_assert_int_eq(config_parse_vsock("cid=-3,socket=/v", &c, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(config_parse_vsock("cid=3,socket=/v,mtu=9", &c, err, sizeof(err)),
			 -EINVAL);
	{
		char longp[200] = "cid=3,socket=/";

		memset(longp + 14, 'a', 100);
		ck_assert_int_eq(config_parse_vsock(longp, &c, err, sizeof(err)), -EINVAL);
	}
}
END_TEST

START_TEST(test_vsock_json)
{
	struct virtio_vsock_config c;
	json_t *j =
	    json_loads("{\"cid\": 5, \"socket\": \"/tmp/k.sock\", \"iommu\": false}", 0, NULL);

	ck_assert_int_eq(api_json_to_vsock(j, "vsock", &c, err, sizeof(err)), 0);
	ck_assert_uint_eq(c.cid, 5);
	json_decref(j);
	j = json_loads("{\"cid\": 5, \"socket\": \"/tmp/k.sock\", \"iommu\": true}", 0, NULL);
	ck_assert_int_ne(api_json_to_vsock(j, "vsock", &c, err, sizeof(err)), 0);
	ck_assert_ptr_nonnull(strstr(err, "vsock.iommu"));
	json_decref(j);
	j = json_loads("{\"socket\": \"/tmp/k.sock\"}", 0, NULL);
	ck_assert_int_ne(api_json_to_vsock(j, "vsock", &c, err, sizeof(err)), 0);
	ck_assert_ptr_nonnull(strstr(err, "vsock.cid"));
	json_decref(j);
	j = json_loads("{\"cid\": 1, \"socket\": \"/tmp/k.sock\"}", 0, NULL);
	ck_assert_int_ne(api_json_to_vsock(j, "vsock", &c, err, sizeof(err)), 0);
	json_decref(j);
}
END_TEST

static Suite *virtio_vsock_suite(void)
{
	Suite *s = suite_create("virtio_vsock");
	TCase *tc = tcase_create("device");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_config_cid);
	tcase_add_test(tc, test_host_connect_and_data);
	tcase_add_test(tc, test_all_slots_used);
	tcase_add_test(tc, test_guest_connect);
	tcase_add_test(tc, test_host_refusals);
	tcase_add_test(tc, test_hostile_packets);
	tcase_add_test(tc, test_socket_in_use);
	tcase_add_test(tc, test_snapshot);
	suite_add_tcase(s, tc);
	tc = tcase_create("config");
	tcase_add_test(tc, test_vsock_flag);
	tcase_add_test(tc, test_vsock_json);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return testutil_run_suite(virtio_vsock_suite());
}
