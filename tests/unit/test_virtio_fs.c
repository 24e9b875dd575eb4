/* virtio-fs through BAR 0 against a fake vhost-user back end in this test (a listening socket
 * and a thread answering messages): the negotiation at connect, what DRIVER_OK hands over (the
 * memory table with the RAM memfd, each queue's ring addresses and its kick, call and error
 * eventfds), the stop at a driver reset, and hostile back ends: a short reply, one of the wrong
 * type, of the wrong size, without the REPLY flag, no reply at all, a hangup. Each leaves the
 * device needing a reset and lvmm answering queued requests with ENOTCONN itself. Also --fs
 * and FsConfig parsing. */
#include <check.h>
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "api/api_internal.h"
#include "config.h"
#include "devices.h"
#include "guest_mem.h"
#include "testutil.h"
#include "vdrv.h"
#include "virtio/vhost_user.h"
#include "virtio/virtio_fs.h"
#include "virtio/virtio_pci.h"

#define RAM_SIZE (4u << 20)
#define QSIZE	 VDRV_QSIZE
#define NQ	 2 /* hiprio and one request queue */
#define DESC(q)	 VDRV_DESC(q)
#define AVAIL(q) VDRV_AVAIL(q)
#define USED(q)	 VDRV_USED(q)
#define REQBUF	 0x20000
#define FEATURES                                                                                   \
	((1ULL << 32) | (1ULL << VHOST_USER_F_PROTOCOL) | (1ULL << VIRTIO_RING_F_EVENT_IDX) |      \
	 (1ULL << VIRTIO_RING_F_INDIRECT_DESC))
#define PROTOCOL ((1ULL << 0) | (1ULL << 3) | (1ULL << 13) | (1ULL << 15))

enum hostile { H_NONE, H_SHORT, H_TYPE, H_SIZE, H_FLAGS, H_SILENT, H_HANGUP, H_SLOW };

/* What the fake back end saw, and how it misbehaves at SET_MEM_TABLE. */
struct fake {
	int listen_fd, fd;
	pthread_t thread;
	enum hostile hostile;
	pthread_mutex_t lock;
	unsigned nreq;
	uint32_t reqs[128];
	uint64_t set_features, set_protocol;
	uint32_t regions;
	uint64_t region[4]; /* the first region: gpa, size, uaddr, offset */
	int mem_fd, kick_fd[NQ], call_fd[NQ], err_fd[NQ];
	uint64_t addr[NQ][3]; /* desc, used, avail */
	uint32_t num[NQ], enabled[NQ], base_asked;
	uint64_t queue_num; /* GET_QUEUE_NUM's answer (0: NQ) */
	bool slow;
	bool gone;
};

static uint8_t *ram;
static struct guest_mem gm;
static char dir[64], path[96], err[512];
static void *dev;
static struct virtio_pci *vp;
static struct fake fk;
static uint16_t avail[NQ];

static bool read_full(int fd, void *buf, size_t len, int *fds, unsigned *nfds)
{
	size_t off = 0;

	while (off < len) {
		union {
			struct cmsghdr h;
			char b[CMSG_SPACE(sizeof(int) * 8)];
		} cm;
		struct iovec iov = {(uint8_t *)buf + off, len - off};
		struct msghdr m = {.msg_iov = &iov,
				   .msg_iovlen = 1,
				   .msg_control = cm.b,
				   .msg_controllen = sizeof(cm.b)};
		ssize_t n = recvmsg(fd, &m, 0);

		if (n <= 0)
			return false;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
			unsigned k = (unsigned)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));

			for (unsigned i = 0; i < k; i++) {
				int f;

				memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(f));
				if (fds && *nfds < 8)
					fds[(*nfds)++] = f;
				else
					close(f);
			}
		}
		off += (size_t)n;
	}
	return true;
}

static void reply(int fd, uint32_t req, uint32_t flags, uint32_t size, uint64_t v, size_t sendlen)
{
	uint8_t b[20];
	uint32_t h[3] = {req, flags, size};

	memcpy(b, h, 12);
	memcpy(b + 12, &v, 8);
	/* a front end that hung up (it gave up on this back end) is no failure of the fake's */
	if (send(fd, b, sendlen, MSG_NOSIGNAL) < 0)
		ck_assert_int_eq(errno, EPIPE);
}

static void *fake_thread(void *arg)
{
	struct fake *f = arg;

	f->fd = accept(f->listen_fd, NULL, NULL);
	for (;;) {
		uint32_t h[3];
		uint8_t p[VHOST_USER_PAYLOAD_MAX];
		int fds[8];
		unsigned nfds = 0;
		uint64_t v = 0, ans = 0;
		bool has = true;

		if (!read_full(f->fd, h, 12, fds, &nfds) || h[2] > sizeof(p) ||
		    !read_full(f->fd, p, h[2], fds, &nfds))
			break;
		memcpy(&v, p, h[2] >= 8 ? 8 : h[2]);
		/* from DRIVER_OK's first message on, every answer comes 1.5 s late: each within
		 * the reply timeout, all of them far past it */
		if (f->hostile == H_SLOW && h[0] == VHOST_USER_SET_FEATURES)
			f->slow = true;
		if (f->slow)
			testutil_sleep_ms(1500);
		pthread_mutex_lock(&f->lock);
		if (f->nreq < 128)
			f->reqs[f->nreq++] = h[0];
		switch (h[0]) {
		case VHOST_USER_GET_FEATURES:
			ans = FEATURES;
			break;
		case VHOST_USER_GET_PROTOCOL_FEATURES:
			ans = PROTOCOL;
			break;
		case VHOST_USER_GET_QUEUE_NUM:
			ans = f->queue_num ? f->queue_num : NQ;
			break;
		case VHOST_USER_SET_FEATURES:
			f->set_features = v;
			has = false;
			break;
		case VHOST_USER_SET_PROTOCOL_FEATURES:
			f->set_protocol = v;
			has = false;
			break;
		case VHOST_USER_SET_MEM_TABLE:
			memcpy(&f->regions, p, 4);
			memcpy(f->region, p + 8, 32);
			f->mem_fd = nfds ? fds[0] : -1;
			for (unsigned i = 1; i < nfds; i++)
				close(fds[i]);
			nfds = 0;
			has = false;
			break;
		case VHOST_USER_SET_VRING_NUM:
		case VHOST_USER_SET_VRING_ENABLE:
			if ((uint32_t)v < NQ)
				(h[0] == VHOST_USER_SET_VRING_NUM ? f->num
								  : f->enabled)[(uint32_t)v] =
				    (uint32_t)(v >> 32);
			has = false;
			break;
		case VHOST_USER_SET_VRING_ADDR:
			if ((uint32_t)v < NQ)
				memcpy(f->addr[(uint32_t)v], p + 8, 24);
			has = false;
			break;
		case VHOST_USER_SET_VRING_KICK:
		case VHOST_USER_SET_VRING_CALL:
		case VHOST_USER_SET_VRING_ERR:
			if ((v & 0xff) < NQ) {
				int *slot = h[0] == VHOST_USER_SET_VRING_KICK	? f->kick_fd
					    : h[0] == VHOST_USER_SET_VRING_CALL ? f->call_fd
										: f->err_fd;

				slot[v & 0xff] = nfds ? fds[0] : -1;
				nfds = 0;
			}
			has = false;
			break;
		case VHOST_USER_GET_VRING_BASE:
			f->base_asked++;
			ans = (uint32_t)v;
			break;
		default:
			has = false;
		}
		for (unsigned i = 0; i < nfds; i++)
			close(fds[i]);
		if (h[0] == VHOST_USER_SET_MEM_TABLE && f->hostile != H_NONE &&
		    f->hostile != H_SLOW) {
			enum hostile m = f->hostile;

			pthread_mutex_unlock(&f->lock);
			if (m == H_SHORT)
				reply(f->fd, h[0], 5, 8, 0, 16); /* 4 of 8 payload bytes */
			else if (m == H_TYPE)
				reply(f->fd, VHOST_USER_GET_FEATURES, 5, 8, 0, 20);
			else if (m == H_SIZE)
				reply(f->fd, h[0], 5, 4, 0, 16);
			else if (m == H_FLAGS)
				reply(f->fd, h[0], 1, 8, 0, 20);
			if (m == H_HANGUP)
				break;
			/* then silence until the front end goes */
			while (read_full(f->fd, h, 12, NULL, NULL))
				;
			break;
		}
		if (has || (h[1] & VHOST_USER_NEED_REPLY))
			reply(f->fd, h[0], VHOST_USER_VERSION | VHOST_USER_REPLY, 8, ans, 20);
		pthread_mutex_unlock(&f->lock);
	}
	pthread_mutex_lock(&f->lock);
	f->gone = true;
	close(f->fd);
	f->fd = -1;
	pthread_mutex_unlock(&f->lock);
	return NULL;
}

static void fake_start(enum hostile m)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};

	memset(&fk, 0, sizeof(fk));
	pthread_mutex_init(&fk.lock, NULL);
	fk.hostile = m;
	fk.mem_fd = -1;
	for (unsigned q = 0; q < NQ; q++)
		fk.kick_fd[q] = fk.call_fd[q] = fk.err_fd[q] = -1;
	strcpy(sa.sun_path, path);
	fk.listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fk.listen_fd, 0);
	ck_assert_int_eq(bind(fk.listen_fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(fk.listen_fd, 1), 0);
	ck_assert_int_eq(pthread_create(&fk.thread, NULL, fake_thread, &fk), 0);
}

static void device_create_n(unsigned request_queues)
{
	struct dev_host h = {.cpus = 1};
	struct virtio_fs_config c = {
	    .tag = "share", .num_queues = request_queues, .queue_size = QSIZE};

	h.gm = &gm;
	snprintf(c.socket, sizeof(c.socket), "%s", path);
	ck_assert_msg(virtio_fs_model.create(&h, &c, "fs0", 0, &dev, err, sizeof(err)) == 0, "%s",
		      err);
	vp = virtio_fs_model.pci(dev)->priv;
	vdrv_attach(vp, ram);
	/* the MSI-X vectors' eventfds pci_bus_add() would make */
	for (unsigned v = 0; v < vp->pci.msix.nvec; v++)
		vp->pci.msix.efd[v] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

static void device_create(void)
{
	device_create_n(1);
}

/* The fake back end saw its connection end within ms. */
static bool fake_gone(unsigned ms)
{
	for (unsigned i = 0; i <= ms / 10; i++) {
		bool g;

		pthread_mutex_lock(&fk.lock);
		g = fk.gone;
		pthread_mutex_unlock(&fk.lock);
		if (g)
			return true;
		testutil_sleep_ms(10);
	}
	return false;
}

static void setup(void)
{
	int fd = memfd_create("lvmm-test-ram", MFD_CLOEXEC);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, RAM_SIZE), 0);
	ram = mmap(NULL, RAM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ck_assert_ptr_ne(ram, MAP_FAILED);
	gmem_init_buffer(&gm, ram, RAM_SIZE);
	gm.memfd = fd;
	testutil_mkdtemp(dir, sizeof(dir), "/tmp/lvmm-vfs-");
	snprintf(path, sizeof(path), "%s/fsd.sock", dir);
	memset(avail, 0, sizeof(avail));
}

static void teardown(void)
{
	if (dev)
		virtio_fs_model.destroy(dev);
	dev = NULL;
	pthread_join(fk.thread, NULL);
	close(fk.listen_fd);
	testutil_rmtree(dir);
	munmap(ram, RAM_SIZE);
	close(gm.memfd);
}

static void queue_init(unsigned q, uint16_t vector)
{
	vdrv_bar_w(VIRTIO_PCI_Q_SELECT, q, 2);
	vdrv_bar_w(VIRTIO_PCI_Q_SIZE, QSIZE, 2);
	vdrv_bar_w(VIRTIO_PCI_Q_MSIX, vector, 2);
	vdrv_bar_w(VIRTIO_PCI_Q_DESC, DESC(q), 8);
	vdrv_bar_w(VIRTIO_PCI_Q_DRIVER, AVAIL(q), 8);
	vdrv_bar_w(VIRTIO_PCI_Q_DEVICE, USED(q), 8);
	vdrv_bar_w(VIRTIO_PCI_Q_ENABLE, 1, 2);
}

/* The driver's bring-up to DRIVER_OK. */
static void driver_up(void)
{
	vdrv_bar_w(VIRTIO_PCI_STATUS, 0, 1);
	vdrv_bar_w(VIRTIO_PCI_STATUS, 3, 1);
	vdrv_bar_w(VIRTIO_PCI_GFSELECT, 1, 4);
	vdrv_bar_w(VIRTIO_PCI_GF, 1, 4); /* VERSION_1 */
	vdrv_bar_w(VIRTIO_PCI_STATUS, 3 | VIRTIO_STATUS_FEATURES_OK, 1);
	vdrv_bar_w(VIRTIO_PCI_MSIX_CONFIG, 0, 2);
	for (unsigned q = 0; q < NQ; q++)
		queue_init(q, (uint16_t)(q + 1));
	vdrv_bar_w(VIRTIO_PCI_STATUS, 3 | VIRTIO_STATUS_FEATURES_OK | VIRTIO_STATUS_DRIVER_OK, 1);
}

static bool has_req(uint32_t r)
{
	bool found = false;

	pthread_mutex_lock(&fk.lock);
	for (unsigned i = 0; i < fk.nreq; i++)
		found |= fk.reqs[i] == r;
	pthread_mutex_unlock(&fk.lock);
	return found;
}

/* A FUSE request on queue 1 (a 40-byte header with unique u, room for a reply). */
static void fuse_request(uint64_t unique)
{
	unsigned i = avail[1] % QSIZE, d = 2 * i;
	uint8_t *in = ram + REQBUF + 0x200 * i;
	struct virtq_desc rd = {REQBUF + 0x200 * i, 40, VIRTQ_DESC_F_NEXT, (uint16_t)(d + 1)};
	struct virtq_desc wd = {REQBUF + 0x200 * i + 0x100, 0x100, VIRTQ_DESC_F_WRITE, 0};
	uint16_t head = (uint16_t)d;

	memset(in, 0, 0x200);
	memcpy(in, (uint32_t[]){40, 1}, 8);
	memcpy(in + 8, &unique, 8);
	memcpy(ram + DESC(1) + 16 * d, &rd, 16);
	memcpy(ram + DESC(1) + 16 * (d + 1), &wd, 16);
	memcpy(ram + AVAIL(1) + 4 + 2 * i, &head, 2);
	avail[1]++;
	__atomic_store_n((uint16_t *)(ram + AVAIL(1) + 2), avail[1], __ATOMIC_RELEASE);
	/* a 4-byte kick exits to the transport; Linux's 2-byte one is KVM's ioeventfd, which
	 * signals the kick eventfd straight (as here) */
	vdrv_bar_w(VIRTIO_PCI_NOTIFY_OFF + 4, 1, 4);
	virtio_eventfd_signal(vp->kick_fd[1]);
}

/* Waits for the used ring of queue 1 to reach n entries. */
static bool used_reaches(uint16_t n, unsigned ms)
{
	for (unsigned t = 0; t < ms; t += 10) {
		if (__atomic_load_n((uint16_t *)(ram + USED(1) + 2), __ATOMIC_ACQUIRE) >= n)
			return true;
		testutil_sleep_ms(10);
	}
	return false;
}

/* The reply lvmm wrote for the request of ring slot i: error and unique. */
static void check_enotconn(unsigned i, uint64_t unique)
{
	uint8_t *out = ram + REQBUF + 0x200 * i + 0x100;
	uint32_t len, used_len;
	int32_t e;
	uint64_t u;

	memcpy(&len, out, 4);
	memcpy(&e, out + 4, 4);
	memcpy(&u, out + 8, 8);
	memcpy(&used_len, ram + USED(1) + 4 + 8 * i + 4, 4);
	ck_assert_uint_eq(len, 16);
	ck_assert_int_eq(e, -ENOTCONN);
	ck_assert_uint_eq(u, unique);
	ck_assert_uint_eq(used_len, 16);
}

static bool needs_reset(unsigned ms)
{
	for (unsigned t = 0; t <= ms; t += 10) {
		if (vdrv_bar_r(VIRTIO_PCI_STATUS, 1) & VIRTIO_STATUS_NEEDS_RESET)
			return true;
		testutil_sleep_ms(10);
	}
	return false;
}

START_TEST(test_negotiation)
{
	char tag[VIRTIO_FS_TAG_MAX + 1] = "";
	uint64_t one = 1, n = 0;
	uint8_t *map;

	fake_start(H_NONE);
	device_create();
	/* at connect: owner, features, protocol features (ours of those offered), queues */
	ck_assert(has_req(VHOST_USER_SET_OWNER));
	ck_assert(has_req(VHOST_USER_GET_QUEUE_NUM));
	ck_assert_uint_eq(fk.set_protocol, PROTOCOL & VHOST_USER_PROTO_OURS);
	ck_assert_uint_eq(fk.set_protocol & (1ULL << 15), 0);
	/* the configuration: tag and one request queue */
	for (unsigned i = 0; i < VIRTIO_FS_TAG_MAX; i++)
		tag[i] = (char)vdrv_bar_r(VIRTIO_PCI_DEVCFG_OFF + i, 1);
	ck_assert_str_eq(tag, "share");
	ck_assert_uint_eq(vdrv_bar_r(VIRTIO_PCI_DEVCFG_OFF + 36, 4), 1);
	ck_assert_uint_eq(vdrv_bar_r(VIRTIO_PCI_NUM_QUEUES, 2), NQ);
	/* what the guest is offered: VERSION_1 and the ring features, never the protocol bit */
	vdrv_bar_w(VIRTIO_PCI_DFSELECT, 0, 4);
	ck_assert_uint_eq(vdrv_bar_r(VIRTIO_PCI_DF, 4) & (1u << VHOST_USER_F_PROTOCOL), 0);
	ck_assert(vdrv_bar_r(VIRTIO_PCI_DF, 4) & (1u << VIRTIO_RING_F_EVENT_IDX));
	ck_assert(!has_req(VHOST_USER_SET_MEM_TABLE));

	driver_up();
	ck_assert_uint_eq(vdrv_bar_r(VIRTIO_PCI_STATUS, 1) & VIRTIO_STATUS_NEEDS_RESET, 0);
	ck_assert_uint_eq(fk.set_features, (1ULL << 32) | (1ULL << VHOST_USER_F_PROTOCOL));
	/* the memory table: all RAM, and the fd maps the same pages */
	ck_assert_uint_eq(fk.regions, 1);
	ck_assert_uint_eq(fk.region[0], 0);
	ck_assert_uint_eq(fk.region[1], RAM_SIZE);
	ck_assert_uint_eq(fk.region[2], (uint64_t)(uintptr_t)ram);
	ck_assert_int_ge(fk.mem_fd, 0);
	map = mmap(NULL, RAM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fk.mem_fd, 0);
	ck_assert_ptr_ne(map, MAP_FAILED);
	ram[0x12345] = 0x5a;
	ck_assert_uint_eq(map[0x12345], 0x5a);
	munmap(map, RAM_SIZE);
	for (unsigned q = 0; q < NQ; q++) {
		ck_assert_uint_eq(fk.num[q], QSIZE);
		ck_assert_uint_eq(fk.enabled[q], 1);
		ck_assert_uint_eq(fk.addr[q][0], (uint64_t)(uintptr_t)(ram + DESC(q)));
		ck_assert_uint_eq(fk.addr[q][1], (uint64_t)(uintptr_t)(ram + USED(q)));
		ck_assert_uint_eq(fk.addr[q][2], (uint64_t)(uintptr_t)(ram + AVAIL(q)));
		ck_assert_int_ge(fk.kick_fd[q], 0);
		ck_assert_int_ge(fk.call_fd[q], 0);
		ck_assert_int_ge(fk.err_fd[q], 0);
		/* the call fd is the vector's irqfd eventfd */
		ck_assert_int_eq(write(fk.call_fd[q], &one, 8), 8);
		ck_assert_int_eq(read(vp->pci.msix.efd[q + 1], &n, 8), 8);
		ck_assert_uint_eq(n, 1);
	}
	/* a kick that exits reaches the back end's kick fd */
	fuse_request(7);
	ck_assert_int_eq(read(fk.kick_fd[1], &n, 8), 8);
	/* a vector change is passed on: the back end's call fd for queue 1 is vector 2's */
	vdrv_bar_w(VIRTIO_PCI_Q_SELECT, 1, 2);
	vdrv_bar_w(VIRTIO_PCI_Q_MSIX, 0, 2);
	ck_assert_int_eq(write(fk.call_fd[1], &one, 8), 8);
	ck_assert_int_eq(read(vp->pci.msix.efd[0], &n, 8), 8);
	/* a driver reset stops both rings and resets the back end */
	vdrv_bar_w(VIRTIO_PCI_STATUS, 0, 1);
	ck_assert_uint_eq(fk.base_asked, NQ);
	ck_assert(has_req(VHOST_USER_RESET_DEVICE));
	ck_assert_uint_eq(vdrv_bar_r(VIRTIO_PCI_STATUS, 1), 0);
	for (unsigned q = 0; q < NQ; q++) {
		close(fk.kick_fd[q]);
		close(fk.call_fd[q]);
		close(fk.err_fd[q]);
	}
	close(fk.mem_fd);
}
END_TEST

/* A hostile reply at DRIVER_OK: the device needs a reset, the guest's requests are answered
 * ENOTCONN, and a later bring-up fails the same way without another message. */
static void hostile(enum hostile m)
{
	unsigned before;

	fake_start(m);
	device_create();
	driver_up();
	ck_assert_msg(needs_reset(100), "hostile mode %d: no NEEDS_RESET", m);
	ck_assert_uint_eq(vdrv_bar_r(VIRTIO_PCI_ISR_OFF, 1) & 2, 2); /* a configuration change */
	fuse_request(0x1234);
	ck_assert(used_reaches(1, 2000));
	check_enotconn(0, 0x1234);
	fuse_request(0x5678);
	ck_assert(used_reaches(2, 2000));
	check_enotconn(1, 0x5678);
	pthread_mutex_lock(&fk.lock);
	before = fk.nreq;
	pthread_mutex_unlock(&fk.lock);
	memset(avail, 0, sizeof(avail));
	memset(ram + USED(1), 0, 0x1000);
	driver_up();
	ck_assert(needs_reset(100));
	pthread_mutex_lock(&fk.lock);
	ck_assert_uint_eq(fk.nreq, before);
	pthread_mutex_unlock(&fk.lock);
	/* lvmm hung up on it: a back end that was only slow must not go on with the queues */
	ck_assert_msg(fake_gone(2000), "hostile mode %d: the back end's connection stayed open", m);
}

START_TEST(test_hostile_short)
{
	hostile(H_SHORT);
}
END_TEST

START_TEST(test_hostile_type)
{
	hostile(H_TYPE);
}
END_TEST

START_TEST(test_hostile_size)
{
	hostile(H_SIZE);
}
END_TEST

START_TEST(test_hostile_flags)
{
	hostile(H_FLAGS);
}
END_TEST

START_TEST(test_hostile_silent)
{
	double t0 = testutil_now_s();

	hostile(H_SILENT);
	/* the vCPU waited for the reply no longer than the timeout */
	ck_assert(testutil_now_s() - t0 < 2 * VHOST_USER_TIMEOUT_MS / 1000.0 + 1);
}
END_TEST

/* Every answer just within the reply timeout: the hand-over of the queues (16 messages, 24 s at
 * that pace) ends within one operation's time, and the back end is hung up on. */
START_TEST(test_hostile_slow)
{
	double t0;

	fake_start(H_SLOW);
	device_create();
	t0 = testutil_now_s();
	driver_up();
	ck_assert(testutil_now_s() - t0 < 12);
	ck_assert(needs_reset(100));
	fuse_request(0x1234);
	ck_assert(used_reaches(1, 2000));
	check_enotconn(0, 0x1234);
	ck_assert_msg(fake_gone(4000), "the slow back end's connection stayed open");
}
END_TEST

START_TEST(test_hostile_hangup)
{
	hostile(H_HANGUP);
}
END_TEST

/* The back end dies while it holds the queues: the watcher notices, lvmm takes the queues */
START_TEST(test_hangup_running)
{
	fake_start(H_NONE);
	device_create();
	driver_up();
	ck_assert_uint_eq(vdrv_bar_r(VIRTIO_PCI_STATUS, 1) & VIRTIO_STATUS_NEEDS_RESET, 0);
	pthread_mutex_lock(&fk.lock);
	shutdown(fk.fd, SHUT_RDWR);
	pthread_mutex_unlock(&fk.lock);
	ck_assert(needs_reset(2000));
	fuse_request(99);
	ck_assert(used_reaches(1, 2000));
	check_enotconn(0, 99);
	/* a reset then is quick: nothing more is sent */
	vdrv_bar_w(VIRTIO_PCI_STATUS, 0, 1);
	ck_assert_uint_eq(vdrv_bar_r(VIRTIO_PCI_STATUS, 1), 0);
}
END_TEST

/* The most request queues a share may have (7, and the high-priority queue): the watcher
 * polls every queue's error and kick fds (the poll set once had no room for the last one). */
START_TEST(test_most_queues)
{
	fake_start(H_NONE);
	fk.queue_num = VIRTIO_PCI_MAX_QUEUES;
	device_create_n(VIRTIO_PCI_MAX_QUEUES - 1);
	ck_assert_uint_eq(vdrv_bar_r(VIRTIO_PCI_NUM_QUEUES, 2), VIRTIO_PCI_MAX_QUEUES);
	ck_assert_uint_eq(vdrv_bar_r(VIRTIO_PCI_DEVCFG_OFF + 36, 4), VIRTIO_PCI_MAX_QUEUES - 1);
	testutil_sleep_ms(50); /* the watcher's loop has run */
	virtio_fs_model.destroy(dev);
	dev = NULL;
}
END_TEST

/* A back end whose listener never accepts (its queue full): create fails after the timeout
 * instead of blocking in connect for ever. */
START_TEST(test_backend_never_accepts)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct dev_host h = {.cpus = 1, .gm = &gm};
	struct virtio_fs_config c = {.tag = "share"};
	int lfd, q[4], nq = 0, r;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/deaf.sock", dir);
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(lfd, 0);
	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(lfd, 0), 0);
	/* fill its queue: connects that do not block are the ones it holds */
	for (; nq < 4; nq++) {
		q[nq] = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (connect(q[nq], (struct sockaddr *)&sa, sizeof(sa))) {
			close(q[nq]);
			break;
		}
	}
	ck_assert_int_lt(nq, 4);
	snprintf(c.socket, sizeof(c.socket), "%s", sa.sun_path);
	r = virtio_fs_model.create(&h, &c, "fs0", 0, &dev, err, sizeof(err));
	ck_assert_int_ne(r, 0);
	ck_assert_msg(strstr(err, "accepts no connection") != NULL, "%s", err);
	dev = NULL;
	for (int i = 0; i < nq; i++)
		close(q[i]);
	close(lfd);
	/* the fake thread of teardown: one that is gone already */
	fake_start(H_HANGUP);
	shutdown(fk.listen_fd, SHUT_RDWR);
}
END_TEST

/* No back end: create fails with a message. */
START_TEST(test_no_backend)
{
	struct dev_host h = {.cpus = 1, .gm = &gm};
	struct virtio_fs_config c = {.tag = "share"};

	snprintf(c.socket, sizeof(c.socket), "%s/none.sock", dir);
	ck_assert_int_ne(virtio_fs_model.create(&h, &c, "fs0", 0, &dev, err, sizeof(err)), 0);
	ck_assert_ptr_null(dev);
	ck_assert_msg(strstr(err, "connect"), "%s", err);
	c.tag[0] = 0;
	ck_assert_int_eq(virtio_fs_model.create(&h, &c, "fs0", 0, &dev, err, sizeof(err)), -EINVAL);
	/* the fake thread of teardown: one that is gone already */
	fake_start(H_HANGUP);
	shutdown(fk.listen_fd, SHUT_RDWR);
}
END_TEST

/* A reboot rebuilds the device; a back end gone meanwhile leaves the share failed, not the
 * reboot. */
START_TEST(test_rebuilt_without_backend)
{
	struct dev_host h = {.cpus = 1, .gm = &gm};
	struct virtio_fs_config c = {.tag = "share", .queue_size = QSIZE, .rebuilt = true};

	snprintf(c.socket, sizeof(c.socket), "%s/none.sock", dir);
	ck_assert_msg(virtio_fs_model.create(&h, &c, "fs0", 0, &dev, err, sizeof(err)) == 0, "%s",
		      err);
	vp = virtio_fs_model.pci(dev)->priv;
	vdrv_attach(vp, ram);
	driver_up();
	ck_assert(needs_reset(100));
	fuse_request(42);
	ck_assert(used_reaches(1, 2000));
	check_enotconn(0, 42);
	fake_start(H_HANGUP); /* for teardown's join */
	shutdown(fk.listen_fd, SHUT_RDWR);
}
END_TEST

START_TEST(test_reply_parser)
{
	uint8_t b[24] = {0};
	uint32_t h[3] = {VHOST_USER_GET_FEATURES, 5, 8};
	uint64_t v = 0, x = 0xabcdef;

	memcpy(b, h, 12);
	memcpy(b + 12, &x, 8);
	ck_assert_int_eq(vhost_user_parse_reply(b, 20, 1, &v, err, sizeof(err)), 0);
	ck_assert_uint_eq(v, x);
	ck_assert_int_eq(vhost_user_parse_reply(b, 11, 1, &v, err, sizeof(err)), -EPROTO);
	ck_assert_int_eq(vhost_user_parse_reply(b, 20, 2, &v, err, sizeof(err)), -EPROTO);
	ck_assert_int_eq(vhost_user_parse_reply(b, 24, 1, &v, err, sizeof(err)), -EPROTO);
	b[4] = 1; /* no REPLY */
	ck_assert_int_eq(vhost_user_parse_reply(b, 20, 1, &v, err, sizeof(err)), -EPROTO);
	b[4] = 6; /* version 2 */
	ck_assert_int_eq(vhost_user_parse_reply(b, 20, 1, &v, err, sizeof(err)), -EPROTO);
}
END_TEST

START_TEST(test_parse)
{
	struct virtio_fs_config c;
	json_t *j;

	ck_assert_int_eq(config_parse_fs("tag=myfs,socket=/run/v.sock,num_queues=2,queue_size=512,"
					 "id=share0",
					 &c, err, sizeof(err)),
			 0);
	ck_assert_str_eq(c.tag, "myfs");
	ck_assert_str_eq(c.socket, "/run/v.sock");
	ck_assert_uint_eq(c.num_queues, 2);
	ck_assert_uint_eq(c.queue_size, 512);
	ck_assert_str_eq(c.id, "share0");
	ck_assert_int_ne(config_parse_fs("socket=/run/v.sock", &c, err, sizeof(err)), 0);
	ck_assert_int_ne(config_parse_fs("tag=a,socket=rel.sock", &c, err, sizeof(err)), 0);
	ck_assert_int_ne(config_parse_fs("tag=a,socket=/s,queue_size=1000", &c, err, sizeof(err)),
			 0);
	ck_assert_int_ne(config_parse_fs("tag=a,socket=/s,num_queues=8", &c, err, sizeof(err)), 0);
	ck_assert_int_ne(config_parse_fs("tag=0123456789012345678901234567890123456,socket=/s", &c,
					 err, sizeof(err)),
			 0);
	ck_assert_int_ne(config_parse_fs("tag=a,socket=/s,dax=on", &c, err, sizeof(err)), 0);
	ck_assert_msg(strstr(err, "dax"), "%s", err);
	/* Kata's FsConfig */
	j = json_loads("{\"tag\": \"kataShared\", \"socket\": \"/run/vfs.sock\", \"num_queues\": 1,"
		       " \"queue_size\": 1024, \"pci_segment\": 0}",
		       0, NULL);
	ck_assert_int_eq(api_json_to_fs(j, "fs[0]", &c, err, sizeof(err)), 0);
	ck_assert_str_eq(c.tag, "kataShared");
	ck_assert_uint_eq(c.queue_size, 1024);
	json_decref(j);
	j = json_loads("{\"tag\": \"t\", \"socket\": \"/s\", \"pci_segment\": 1}", 0, NULL);
	ck_assert_int_ne(api_json_to_fs(j, "fs[0]", &c, err, sizeof(err)), 0);
	ck_assert_msg(strstr(err, "pci_segment"), "%s", err);
	json_decref(j);
	j = json_loads("{\"socket\": \"/s\"}", 0, NULL);
	ck_assert_int_ne(api_json_to_fs(j, "fs[0]", &c, err, sizeof(err)), 0);
	ck_assert_msg(strstr(err, "fs[0].tag"), "%s", err);
	json_decref(j);
}
END_TEST

/* vm.create's fs list beside its net list (one reader for both): each gets its default id, and
 * an id is unique across the two models. */
START_TEST(test_with_net)
{
	struct vm_config *cfg = calloc(1, sizeof(*cfg));
	json_t *j;

	ck_assert_ptr_nonnull(cfg);
	j = json_loads("{\"payload\": {\"kernel\": \"/k\"}, \"net\": [{\"tap\": \"tap0\"}],"
		       " \"fs\": [{\"tag\": \"a\", \"socket\": \"/s\"}, {\"tag\": \"b\","
		       " \"socket\": \"/s\", \"id\": \"net0\"}]}",
		       0, NULL);
	ck_assert_int_eq(api_json_to_config_ch(j, NULL, cfg, NULL, err, sizeof(err)), 0);
	json_decref(j);
	ck_assert_uint_eq(cfg->nnets, 1);
	ck_assert_uint_eq(cfg->nfs, 2);
	ck_assert_str_eq(cfg->nets[0].id, "net0");
	ck_assert_str_eq(cfg->fs[0].id, "fs0");
	ck_assert_int_eq(devices_config_check_ids(cfg, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "device id 'net0' is used twice (virtio-net and virtio-fs)"),
		      "%s", err);
	snprintf(cfg->fs[1].id, sizeof(cfg->fs[1].id), "fs1");
	ck_assert_msg(devices_config_check_ids(cfg, err, sizeof(err)) == 0, "%s", err);
	j = json_loads("{\"payload\": {\"kernel\": \"/k\"}, \"fs\": {\"tag\": \"a\"}}", 0, NULL);
	ck_assert_int_ne(api_json_to_config_ch(j, NULL, cfg, NULL, err, sizeof(err)), 0);
	ck_assert_msg(strstr(err, "field 'fs' must be an array"), "%s", err);
	json_decref(j);
	free(cfg);
}
END_TEST

static Suite *virtio_fs_suite(void)
{
	Suite *s = suite_create("virtio_fs");
	TCase *tc = tcase_create("device");
	TCase *tp = tcase_create("parse");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_negotiation);
	tcase_add_test(tc, test_hostile_short);
	tcase_add_test(tc, test_hostile_type);
	tcase_add_test(tc, test_hostile_size);
	tcase_add_test(tc, test_hostile_flags);
	tcase_add_test(tc, test_hostile_silent);
	tcase_add_test(tc, test_hostile_hangup);
	tcase_add_test(tc, test_hostile_slow);
	tcase_add_test(tc, test_hangup_running);
	tcase_add_test(tc, test_most_queues);
	tcase_add_test(tc, test_backend_never_accepts);
	tcase_add_test(tc, test_no_backend);
	tcase_add_test(tc, test_rebuilt_without_backend);
	suite_add_tcase(s, tc);
	tcase_add_test(tp, test_reply_parser);
	tcase_add_test(tp, test_parse);
	tcase_add_test(tp, test_with_net);
	suite_add_tcase(s, tp);
	return s;
}

int main(void)
{
	return testutil_run_suite(virtio_fs_suite());
}
