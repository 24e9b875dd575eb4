/* lvmm against a hostile LightIOV backend: a fake softssd (a thread of this test speaking the
 * socket ABI of include/lightiov/uapi.h) whose replies wrap offsets, hand over short or unsealed
 * queue memory, claim impossible sizes, answer late or twice, or complete a command after lvmm
 * gave up on it. lio_client, nvme_lio and nvme_lio_emu must refuse each, never map memory the
 * reply does not cover, and never take one request's reply for another's (issue 23, findings 3
 * and 5, and the eventfd doorbell pairing). No KVM: guest memory is a memfd. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "client/lio_client.h"
#include "nvme-lightiov/nvme_int.h"
#include "nvme-lightiov/nvme_lio.h"
#include "nvme-lightiov/nvme_lio_emu.h"
#include "nvmerig.h"
#include "testutil.h"

#define DISK_LBAS  2048u /* 1 MiB of 512-byte LBAs */
#define HUGE_LBAS  (UINT64_MAX / 2)
#define MAX_QP	   4
#define STALE_BYTE 0x5a

/* ---- the fake daemon ---- */

struct fake_qp {
	struct lio_qp_create c;
	uint32_t sq_head, cq_tail;
	uint16_t phase;
	bool live;
};

static struct fake {
	char dir[256];
	int lfd;
	pthread_t th, io;
	bool stop;
	pthread_mutex_t lock;
	/* what the replies do wrong */
	uint64_t qmem_truncate; /* the memfd's size instead of the one asked for (0: as asked) */
	bool qmem_unsealed;
	uint64_t qmem_reply_size; /* size in the reply (0: as asked) */
	bool db_off_set, offs_set;
	uint64_t db_off, sq_off, cq_off;
	uint64_t lba_count, lba_start;
	uint32_t late_op; /* reply to this op late_ms late */
	unsigned late_ms;
	uint32_t twice_op; /* reply to this op twice */
	uint32_t long_op;  /* reply to this op with 8 bytes more than its struct */
	int32_t bad_status;
	uint8_t bad_identify; /* 1: LBA shift 40, 2: another ABI version */
	uint32_t empty_fd_op; /* reply to this op with an empty message carrying an fd */
	bool list_set;	      /* VOL_LIST, SESSION_LIST: these count and total */
	uint32_t list_count, list_total;
	bool stray;	     /* I/O: complete nothing, post completions of no command instead */
	uint8_t hold_opcode; /* I/O: leave commands of this opcode (+1) pending */
	bool gate;	     /* I/O: take no command while set (they wait in the SQ) */
	/* state */
	int dma_fd, qmem_fd;
	uint8_t *dma, *qmem;
	uint64_t dma_gpa, dma_size, qmem_size, carve;
	struct fake_qp qp[MAX_QP];
	unsigned nqp, destroys, replies;
	uint8_t disk[DISK_LBAS * 512];
	/* a held command, completed late */
	bool held;
	struct nvme_sqe held_sqe;
	unsigned held_qp;
	unsigned writes_seen, flushes, writes_at_flush;
	uint8_t last_write[512];
} F;

static uint64_t pages(uint64_t b)
{
	return (b + LIO_PAGE_SIZE - 1) & ~(uint64_t)(LIO_PAGE_SIZE - 1);
}

static void *dma_ptr(uint64_t gpa, uint64_t len)
{
	if (!F.dma || gpa < F.dma_gpa || gpa - F.dma_gpa > F.dma_size ||
	    len > F.dma_size - (gpa - F.dma_gpa))
		return NULL;
	return F.dma + (gpa - F.dma_gpa);
}

static void fake_reply(int fd, int32_t status, const void *out, uint32_t outlen, int sendfd)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct lio_msg_reply rep = {.magic = LIO_MAGIC, .status = status, .len = outlen};
	struct iovec iov[2] = {{&rep, sizeof(rep)}, {(void *)out, outlen}};
	struct msghdr m = {.msg_iov = iov, .msg_iovlen = out && outlen ? 2 : 1};

	if (sendfd >= 0) {
		struct cmsghdr *cm;

		memset(&ctl, 0, sizeof(ctl));
		m.msg_control = ctl.buf;
		m.msg_controllen = sizeof(ctl.buf);
		cm = CMSG_FIRSTHDR(&m);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &sendfd, sizeof(int));
		rep.nfds = 1;
	}
	if (sendmsg(fd, &m, MSG_NOSIGNAL) < 0)
		return;
	__atomic_add_fetch(&F.replies, 1, __ATOMIC_RELEASE);
}

/* Waits up to a second until the fake has sent n replies in all. */
static void replies_reach(unsigned n)
{
	for (unsigned i = 0; i < 1000 && __atomic_load_n(&F.replies, __ATOMIC_ACQUIRE) < n; i++)
		usleep(1000);
}

static void fake_qmem(int fd, const struct lio_qmem *in)
{
	struct lio_qmem out = *in;
	uint64_t size = F.qmem_truncate ? F.qmem_truncate : in->size;
	int m = memfd_create("fake-qmem", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	ck_assert_int_ge(m, 0);
	ck_assert_int_eq(ftruncate(m, (off_t)size), 0);
	if (!F.qmem_unsealed)
		ck_assert_int_eq(fcntl(m, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
	F.qmem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, m, 0);
	ck_assert_ptr_ne(F.qmem, MAP_FAILED);
	F.qmem_fd = m;
	F.qmem_size = size;
	F.carve = 0;
	if (F.qmem_reply_size)
		out.size = F.qmem_reply_size;
	out.fd = -1;
	fake_reply(fd, 0, &out, sizeof(out), m);
}

static void fake_qp_create(int fd, const struct lio_qp_create *in)
{
	struct lio_qp_create out = *in;
	struct fake_qp *q;

	if (F.nqp == MAX_QP) {
		fake_reply(fd, -ENOSPC, NULL, 0, -1);
		return;
	}
	if (in->flags & LIO_QP_DB_POLL) {
		out.db_off = F.carve;
		F.carve += 2 * LIO_PAGE_SIZE;
	}
	if (in->flags & LIO_QP_SQ_QMEM) {
		out.sq_off = F.carve;
		F.carve += pages((uint64_t)in->sq_depth * 64);
	}
	if (in->flags & LIO_QP_CQ_QMEM) {
		out.cq_off = F.carve;
		F.carve += pages((uint64_t)in->cq_depth * 16);
	}
	if (F.db_off_set)
		out.db_off = F.db_off;
	if (F.offs_set) {
		out.sq_off = F.sq_off;
		out.cq_off = F.cq_off;
	}
	/* a hostile backend also rewrites what it was asked: the client must not care */
	out.sq_gpa = out.cq_gpa = out.shadow_db_gpa = ~0ULL;
	out.qp_id = 7 + F.nqp;
	pthread_mutex_lock(&F.lock);
	q = &F.qp[F.nqp++];
	memset(q, 0, sizeof(*q));
	q->c = out;
	q->phase = 1;
	q->live = true;
	pthread_mutex_unlock(&F.lock);
	fake_reply(fd, 0, &out, sizeof(out), -1);
}

static void fake_serve(int fd)
{
	for (;;) {
		union {
			char buf[CMSG_SPACE(sizeof(int) * 8)];
			struct cmsghdr align;
		} ctl;
		struct {
			struct lio_msg_hdr h;
			union {
				struct lio_qmem qm;
				struct lio_qp_create qp;
				struct lio_qp_ref ref;
				struct lio_vol_attach va;
				struct lio_dma_window w;
				uint8_t raw[4096];
			} u;
		} req;
		struct iovec iov = {&req, sizeof(req)};
		struct msghdr m = {.msg_iov = &iov,
				   .msg_iovlen = 1,
				   .msg_control = ctl.buf,
				   .msg_controllen = sizeof(ctl.buf)};
		int fds[8], nfds = 0;
		struct cmsghdr *cm;
		ssize_t r = recvmsg(fd, &m, MSG_CMSG_CLOEXEC);
		unsigned times = 1;

		if (r < (ssize_t)sizeof(req.h))
			return;
		for (cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm))
			for (unsigned i = 0; i < (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++)
				memcpy(&fds[nfds++], CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
		if (req.h.op == F.late_op)
			usleep(F.late_ms * 1000);
		if (F.empty_fd_op && req.h.op == F.empty_fd_op) {
			union {
				char buf[CMSG_SPACE(sizeof(int))];
				struct cmsghdr align;
			} ectl;
			struct msghdr em = {.msg_control = ectl.buf,
					    .msg_controllen = sizeof(ectl.buf)};
			struct cmsghdr *ecm;
			int efd = eventfd(0, EFD_CLOEXEC);

			memset(&ectl, 0, sizeof(ectl));
			ecm = CMSG_FIRSTHDR(&em);
			ecm->cmsg_level = SOL_SOCKET;
			ecm->cmsg_type = SCM_RIGHTS;
			ecm->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(ecm), &efd, sizeof(int));
			sendmsg(fd, &em, MSG_NOSIGNAL);
			close(efd);
			__atomic_add_fetch(&F.replies, 1, __ATOMIC_RELEASE);
			for (int i = 0; i < nfds; i++)
				close(fds[i]);
			continue;
		}
		if (req.h.op == F.twice_op)
			times = 2;
		while (times--) {
			switch (req.h.op) {
			case LIO_OP_IDENTIFY: {
				struct lio_identify id = {.abi_version = LIO_ABI_VERSION,
							  .lba_shift = 9,
							  .capacity_lbas = DISK_LBAS,
							  .max_qpairs = 64,
							  .max_qdepth = 1024,
							  .flags =
							      LIO_ID_DB_POLL | LIO_ID_DB_EVENTFD};

				memset(id.name, 'N', sizeof(id.name)); /* unterminated */
				if (F.bad_identify == 1)
					id.lba_shift = 40;
				else if (F.bad_identify == 2)
					id.abi_version = LIO_ABI_VERSION + 1;
				if (F.bad_status) {
					fake_reply(fd, F.bad_status, NULL, 0, -1);
					break;
				}
				{
					uint8_t longer[sizeof(id) + 8] = {0};

					memcpy(longer, &id, sizeof(id));
					fake_reply(fd, 0, longer,
						   sizeof(id) + (F.long_op == req.h.op ? 8 : 0),
						   -1);
				}
				break;
			}
			case LIO_OP_VOL_ATTACH: {
				struct lio_vol_attach a = req.u.va;

				if (a.flags & LIO_ATTACH_ANON)
					snprintf(a.name, sizeof(a.name), "anon-1-0");
				a.vol_id = 3;
				a.lba_start = F.lba_start;
				a.lba_count = F.lba_count ? F.lba_count : DISK_LBAS;
				fake_reply(fd, 0, &a, sizeof(a), -1);
				break;
			}
			case LIO_OP_DMA_REGISTER:
				if (nfds >= 1) {
					if (F.dma)
						munmap(F.dma, F.dma_size);
					F.dma_gpa = req.u.w.r[0].gpa;
					F.dma_size = req.u.w.r[0].size;
					F.dma =
					    mmap(NULL, F.dma_size, PROT_READ | PROT_WRITE,
						 MAP_SHARED, fds[0], (off_t)req.u.w.r[0].fd_offset);
					if (F.dma == MAP_FAILED)
						F.dma = NULL;
				}
				fake_reply(fd, 0, NULL, 0, -1);
				break;
			case LIO_OP_QMEM_ALLOC:
				fake_qmem(fd, &req.u.qm);
				break;
			case LIO_OP_QP_CREATE:
				fake_qp_create(fd, &req.u.qp);
				break;
			case LIO_OP_QP_DESTROY:
				pthread_mutex_lock(&F.lock);
				for (unsigned i = 0; i < F.nqp; i++)
					if (F.qp[i].c.qp_id == req.u.ref.qp_id)
						F.qp[i].live = false;
				F.destroys++;
				pthread_mutex_unlock(&F.lock);
				fake_reply(fd, 0, NULL, 0, -1);
				break;
			case LIO_OP_VOL_LIST:
			case LIO_OP_SESSION_LIST: {
				/* both lists start with first, count, total */
				uint8_t out[sizeof(struct lio_vol_list)] = {0};
				uint32_t hdr[3] = {((const uint32_t *)req.u.raw)[0], F.list_count,
						   F.list_total};

				memcpy(out, hdr, sizeof(hdr));
				fake_reply(fd, 0, out,
					   req.h.op == LIO_OP_VOL_LIST
					       ? sizeof(struct lio_vol_list)
					       : sizeof(struct lio_session_list),
					   -1);
				break;
			}
			case LIO_OP_QP_STATS: {
				/* each qp's answer names it: a stale answer shows */
				struct lio_qp_stats st = {.qp_id = req.u.ref.qp_id,
							  .cmds = 100 + req.u.ref.qp_id};

				fake_reply(fd, 0, &st, sizeof(st), -1);
				break;
			}
			default:
				fake_reply(fd, 0, NULL, 0, -1);
			}
		}
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
	}
}

static void *fake_main(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&F.stop, __ATOMIC_ACQUIRE)) {
		int fd = accept4(F.lfd, NULL, NULL, SOCK_CLOEXEC);

		if (fd < 0)
			break;
		fake_serve(fd);
		close(fd);
	}
	return NULL;
}

/* ---- its I/O side: a polled queue pair in queue memory (what lvmm's emulate path uses) ---- */

/* Copies between the disk and the command's PRPs (one list page at most: 128 KiB). */
static bool fake_prp_copy(const struct nvme_sqe *s, uint8_t *disk, uint64_t len, bool to_mem)
{
	uint64_t first = LIO_PAGE_SIZE - (s->prp1 & (LIO_PAGE_SIZE - 1)), done = 0;
	uint64_t *list = NULL;
	unsigned li = 0;

	if (len > first + LIO_PAGE_SIZE)
		list = dma_ptr(s->prp2, LIO_PAGE_SIZE);
	while (done < len) {
		uint64_t gpa = done == 0 ? s->prp1 : list ? list[li++] : s->prp2;
		uint64_t n = done == 0 ? first : LIO_PAGE_SIZE;
		uint8_t *p;

		n = n < len - done ? n : len - done;
		p = dma_ptr(gpa, n);
		if (!p)
			return false;
		if (to_mem)
			memcpy(p, disk + done, n);
		else
			memcpy(disk + done, p, n);
		done += n;
	}
	return true;
}

static void fake_complete(struct fake_qp *q, const struct nvme_sqe *s, uint16_t status)
{
	struct nvme_cqe *e = (struct nvme_cqe *)(F.qmem + q->c.cq_off) + q->cq_tail;

	e->dw0 = 0;
	e->sq_head = (uint16_t)q->sq_head;
	e->sq_id = q->c.sqid;
	e->cid = s->cid;
	__atomic_store_n(&e->status, (uint16_t)(status << 1 | q->phase), __ATOMIC_RELEASE);
	if (++q->cq_tail == q->c.cq_depth) {
		q->cq_tail = 0;
		q->phase ^= 1;
	}
}

static uint16_t fake_exec(const struct nvme_sqe *s)
{
	uint64_t lba = s->cdw10 | (uint64_t)s->cdw11 << 32, nlb = (s->cdw12 & 0xffff) + 1;

	switch (s->opcode) {
	case NVME_CMD_READ:
	case NVME_CMD_WRITE:
	case NVME_CMD_WRITE_ZEROES:
		if (lba > DISK_LBAS || nlb > DISK_LBAS - lba)
			return NVME_SC_LBA_RANGE;
		if (s->opcode == NVME_CMD_WRITE_ZEROES) {
			memset(F.disk + lba * 512, 0, nlb * 512);
			return 0;
		}
		if (s->opcode == NVME_CMD_WRITE) {
			F.writes_seen++;
			if (!fake_prp_copy(s, F.disk + lba * 512, nlb * 512, false))
				return NVME_SC_DATA_XFER_ERROR;
			memcpy(F.last_write, F.disk + lba * 512, 512);
			return 0;
		}
		return fake_prp_copy(s, F.disk + lba * 512, nlb * 512, true)
			   ? 0
			   : NVME_SC_DATA_XFER_ERROR;
	case NVME_CMD_FLUSH:
		F.flushes++;
		F.writes_at_flush = F.writes_seen;
		return 0;
	default:
		return 0;
	}
}

static void *fake_io(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&F.stop, __ATOMIC_ACQUIRE)) {
		bool work = false;

		if (__atomic_load_n(&F.gate, __ATOMIC_ACQUIRE)) {
			usleep(100);
			continue;
		}
		pthread_mutex_lock(&F.lock);
		for (unsigned i = 0; i < F.nqp; i++) {
			struct fake_qp *q = &F.qp[i];
			uint32_t tail;

			/* the hostile offsets this fake hands out are not its own to follow */
			if (!q->live || !(q->c.flags & LIO_QP_DB_POLL) || !F.qmem ||
			    !lio_range_ok(q->c.db_off, LIO_PAGE_SIZE, F.qmem_size) ||
			    !lio_range_ok(q->c.sq_off, (uint64_t)q->c.sq_depth * 64, F.qmem_size) ||
			    !lio_range_ok(q->c.cq_off, (uint64_t)q->c.cq_depth * 16, F.qmem_size))
				continue;
			tail =
			    __atomic_load_n((uint32_t *)(F.qmem + q->c.db_off), __ATOMIC_ACQUIRE);
			while (tail < q->c.sq_depth && q->sq_head != tail) {
				struct nvme_sqe s =
				    ((struct nvme_sqe *)(F.qmem + q->c.sq_off))[q->sq_head];

				q->sq_head = (q->sq_head + 1) % q->c.sq_depth;
				work = true;
				if (F.hold_opcode && s.opcode == F.hold_opcode - 1 && !F.held) {
					F.held = true; /* lvmm gives up on it: it completes later */
					F.held_sqe = s;
					F.held_qp = i;
					continue;
				}
				if (F.stray) {
					/* a completion of no command in flight, again and again,
					 * until the queue pair or the fake goes */
					for (;;) {
						struct nvme_sqe x = s;

						x.cid ^= 0x4000;
						fake_complete(q, &x, 0);
						pthread_mutex_unlock(&F.lock);
						usleep(200);
						pthread_mutex_lock(&F.lock);
						if (!q->live ||
						    __atomic_load_n(&F.stop, __ATOMIC_ACQUIRE))
							break;
					}
					continue;
				}
				if (F.held) {
					/* the held read lands now, in the buffer it was given, just
					 * before the next command reads that buffer */
					uint8_t stale[LIO_MDTS_BYTES];
					uint64_t n = ((F.held_sqe.cdw12 & 0xffff) + 1) * 512ULL;

					memset(stale, STALE_BYTE, sizeof(stale));
					fake_prp_copy(&F.held_sqe, stale, n, true);
					fake_complete(&F.qp[F.held_qp], &F.held_sqe, 0);
					F.held = false;
					F.hold_opcode = 0;
				}
				fake_complete(q, &s, fake_exec(&s));
			}
		}
		pthread_mutex_unlock(&F.lock);
		if (!work)
			usleep(100);
	}
	return NULL;
}

static void fake_start(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char path[300];

	memset(&F, 0, sizeof(F));
	pthread_mutex_init(&F.lock, NULL);
	F.dma_fd = F.qmem_fd = -1;
	testutil_mkdtemp(F.dir, sizeof(F.dir), "/tmp/lvmm-hostile-");
	snprintf(path, sizeof(path), "%s/ssd", F.dir);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	setenv("LVMM_RUN_DIR", F.dir, 1);
	setenv("LVMM_LIO_DEV_DIR", F.dir, 1); /* no lightiov.ko device by that name */
	ck_assert_uint_lt(strlen(F.dir), sizeof(sa.sun_path) - 16);
	memcpy(sa.sun_path, F.dir, strlen(F.dir));
	strcat(sa.sun_path, "/ssd/evil.sock");
	F.lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(F.lfd, 0);
	ck_assert_int_eq(bind(F.lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(F.lfd, 4), 0);
	ck_assert_int_eq(pthread_create(&F.th, NULL, fake_main, NULL), 0);
	ck_assert_int_eq(pthread_create(&F.io, NULL, fake_io, NULL), 0);
}

static void fake_stop(void)
{
	__atomic_store_n(&F.stop, true, __ATOMIC_RELEASE);
	shutdown(F.lfd, SHUT_RDWR);
	pthread_join(F.th, NULL);
	pthread_join(F.io, NULL);
	close(F.lfd);
	testutil_rmtree(F.dir);
}

/* ---- lvmm's side ---- */

static struct guest_mem gm;
static int ram_fd = -1;

static void ram_init(void)
{
	ram_fd = memfd_create("guest", MFD_CLOEXEC);
	ck_assert_int_eq(ftruncate(ram_fd, 4 << 20), 0);
	memset(&gm, 0, sizeof(gm));
	gm.memfd = ram_fd;
	gm.size = 4 << 20;
	gm.nslots = 1;
	gm.slots[0] = (struct gmem_slot){.gpa = 0, .size = 4 << 20, .fd_off = 0};
}

static int lio_open(struct nvme_lio **l, enum nvme_lio_db db, char *err, unsigned errlen)
{
	struct nvme_lio_cfg cfg = {.id = "nvme0",
				   .ssd = "evil",
				   .size = 1 << 20,
				   .mode = LIGHTIOV_MODE_ISOLATED,
				   .db = db,
				   .nqueues = 4,
				   .cmb_size = 64 << 10,
				   .label = "vm"};

	return nvme_lio_open(l, &cfg, err, errlen);
}

static uint16_t bind_one(struct nvme_lio *l, uint16_t sqid, uint16_t cqid, void **db_host)
{
	struct nvme_qp_bind b = {.sqid = sqid,
				 .cqid = cqid,
				 .sq_depth = 16,
				 .cq_depth = 16,
				 .sq_gpa = 0x10000,
				 .cq_gpa = 0x20000,
				 .dbbuf_dbs = 0x30000,
				 .dbbuf_eis = 0x31000};
	uint32_t qp_id = 0;

	*db_host = NULL;
	return nvme_lio_bind(l, &b, &gm, ~0ULL, 5, -1, &qp_id, db_host);
}

/* A db_off near 2^64 wrapped the bound check and put lvmm's own memory under the guest's
 * doorbells; unaligned or half-outside page pairs too. Each is refused and its queue pair
 * handed back. */
static const uint64_t bad_db_offs[] = {
    UINT64_MAX - LIO_PAGE_SIZE + 1, /* + 2 pages wraps to 4096 */
    UINT64_MAX & ~(uint64_t)(LIO_PAGE_SIZE - 1),
    4 * 2 * LIO_PAGE_SIZE - LIO_PAGE_SIZE, /* the CQ page on the CMB */
    100,				   /* not a page */
    1ULL << 40,
};

START_TEST(test_db_off_refused)
{
	struct nvme_lio *l;
	char err[512];
	void *db;
	uint16_t st;

	fake_start();
	ram_init();
	ck_assert_msg(lio_open(&l, NVME_LIO_DB_POLL, err, sizeof(err)) == 0, "%s", err);
	F.db_off_set = true;
	F.db_off = bad_db_offs[_i];
	st = bind_one(l, 1, 1, &db);
	ck_assert_uint_ne(st, 0);
	ck_assert_ptr_null(db);
	ck_assert_uint_eq(F.destroys, 1); /* the backend's queue pair went back */
	/* a sane one binds, at the offset it names */
	F.db_off = 2 * LIO_PAGE_SIZE;
	ck_assert_uint_eq(bind_one(l, 2, 2, &db), 0);
	ck_assert_ptr_eq(db, (uint8_t *)nvme_lio_cmb(l) - 4 * 2 * LIO_PAGE_SIZE + F.db_off);
	nvme_lio_close(l);
	fake_stop();
}
END_TEST

/* The queue-memory fd is mapped as the guest's CMB: one shorter than asked, unsealed (it
 * could shrink under the guest later), or a reply claiming another size, is refused. */
START_TEST(test_qmem_refused)
{
	struct nvme_lio *l = NULL;
	char err[512];

	fake_start();
	ram_init();
	switch (_i) {
	case 0:
		F.qmem_truncate = LIO_PAGE_SIZE;
		break;
	case 1:
		F.qmem_unsealed = true;
		break;
	case 2:
		F.qmem_reply_size = 64ULL << 20;
		break;
	}
	ck_assert_int_ne(lio_open(&l, NVME_LIO_DB_POLL, err, sizeof(err)), 0);
	ck_assert_ptr_null(l);
	ck_assert_msg(strstr(err, "queue") != NULL, "%s", err);
	fake_stop();
}
END_TEST

/* A volume whose bytes overflow 64 bits, or whose window wraps, is not one. */
START_TEST(test_volume_refused)
{
	struct nvme_lio *l = NULL;
	char err[512];

	fake_start();
	ram_init();
	F.lba_count = _i == 0 ? HUGE_LBAS : 8;
	F.lba_start = _i == 0 ? 0 : UINT64_MAX - 4;
	ck_assert_int_ne(lio_open(&l, NVME_LIO_DB_POLL, err, sizeof(err)), 0);
	ck_assert_msg(strstr(err, "volume") != NULL, "%s", err);
	fake_stop();
}
END_TEST

/* lio_drv's queue pair of the cases below: rings and doorbells in queue memory, one queue of 16. */
static const struct lio_drv_opts drv_opts = {
    .vol_id = 3,
    .lba_count = DISK_LBAS,
    .lba_shift = 9,
    .mode = LIGHTIOV_MODE_ISOLATED,
    .qp_flags = LIO_QP_SQ_QMEM | LIO_QP_CQ_QMEM | LIO_QP_DB_POLL,
    .nr_qp = 1,
    .depth = 16,
    .mem_bytes = 1 << 20,
};

/* lio_drv (the emulate path's own queue pair): ring and doorbell offsets outside the queue
 * memory it got are refused before anything is mapped or written there. */
START_TEST(test_drv_offsets_refused)
{
	struct lio_client *c;
	struct lio_drv *d = NULL;
	struct lio_drv_opts o = drv_opts;
	char err[512];

	fake_start();
	ck_assert_int_eq(lio_client_connect(&c, "evil", "t", NULL, err, sizeof(err)), 0);
	F.offs_set = _i != 2;
	F.db_off_set = _i == 2;
	F.sq_off = _i == 0 ? UINT64_MAX - 1023 : 0;
	F.cq_off = _i == 1 ? (1ULL << 30) : 4096;
	F.db_off = UINT64_MAX - 4095;
	ck_assert_int_ne(lio_drv_open(&d, c, &o, err, sizeof(err)), 0);
	ck_assert_msg(strstr(err, "outside") != NULL, "%s", err);
	ck_assert_uint_eq(F.destroys, 1);
	lio_client_close(c);
	fake_stop();
}
END_TEST

/* Replies that break the protocol: a status that is no errno (INT_MIN once made strerror read
 * out of bounds), a payload longer than the struct, an unterminated name. */
START_TEST(test_bad_replies)
{
	struct lio_client *c = NULL;
	struct lio_identify id;
	char err[512];

	fake_start();
	if (_i == 0)
		F.bad_status = INT32_MIN;
	else if (_i == 1)
		F.bad_status = 5;
	else
		F.long_op = LIO_OP_IDENTIFY;
	ck_assert_int_eq(lio_client_connect(&c, "evil", "t", &id, err, sizeof(err)), -EPROTO);
	ck_assert_ptr_null(c);
	fake_stop();
}
END_TEST

START_TEST(test_unterminated_name)
{
	struct lio_client *c;
	struct lio_identify id;
	char err[512];

	fake_start();
	ck_assert_int_eq(lio_client_connect(&c, "evil", "t", &id, err, sizeof(err)), 0);
	ck_assert_uint_lt(strlen(id.name), sizeof(id.name));
	lio_client_close(c);
	fake_stop();
}
END_TEST

/* An IDENTIFY whose LBA shift no size computed from it survives (a shift of 40), or of another
 * ABI, ends the connection attempt. */
START_TEST(test_bad_identify)
{
	struct lio_client *c = NULL;
	char err[512];

	fake_start();
	F.bad_identify = (uint8_t)(_i + 1);
	ck_assert_int_eq(lio_client_connect(&c, "evil", "t", NULL, err, sizeof(err)), -EPROTO);
	ck_assert_ptr_null(c);
	ck_assert_msg(strstr(err, "refused") != NULL, "%s", err);
	fake_stop();
}
END_TEST

static unsigned open_fds(void)
{
	unsigned n = 0;
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* An empty message is no reply, even with an fd attached: the fd is closed, not leaked, and the
 * connection is done. */
START_TEST(test_empty_reply_with_fd)
{
	struct lio_client *c;
	struct lio_qp_stats st;
	char err[512];
	unsigned before;

	fake_start();
	ck_assert_int_eq(lio_client_connect(&c, "evil", "t", NULL, err, sizeof(err)), 0);
	F.empty_fd_op = LIO_OP_QP_STATS;
	before = open_fds();
	ck_assert_int_eq(lio_client_qp_stats(c, 1, &st), -ECONNRESET);
	ck_assert(lio_client_broken(c));
	replies_reach(2); /* the fake closed its own copy of the fd (identify + this reply) */
	ck_assert_uint_eq(open_fds(), before);
	ck_assert_int_ne(lio_client_qp_stats(c, 1, &st), 0); /* nothing more is sent */
	lio_client_close(c);
	fake_stop();
}
END_TEST

/* Lists page on while first < total: a total no SSD can have, or more entries than are left
 * after first, is refused instead of paging for hours. */
START_TEST(test_list_totals)
{
	static const uint32_t cases[][3] = {
	    /* count, total, first */
	    {32, 0xffffffffu, 0},
	    {32, 40, 20},
	    {1, 5, 7},
	};
	struct lio_client *c;
	struct lio_vol_list vl;
	struct lio_session_list sl;
	char err[512];

	fake_start();
	ck_assert_int_eq(lio_client_connect(&c, "evil", "t", NULL, err, sizeof(err)), 0);
	F.list_set = true;
	F.list_count = cases[_i][0];
	F.list_total = cases[_i][1];
	memset(&vl, 0, sizeof(vl));
	vl.first = cases[_i][2];
	ck_assert_int_eq(lio_client_vol_list(c, &vl), -EPROTO);
	memset(&sl, 0, sizeof(sl));
	sl.first = cases[_i][2];
	F.list_count = cases[_i][0] > LIO_SESSION_LIST_MAX ? LIO_SESSION_LIST_MAX : cases[_i][0];
	if (_i == 1)
		F.list_count = 16, F.list_total = 20; /* 16 entries from 20 of 20 */
	ck_assert_int_eq(lio_client_session_list(c, &sl), -EPROTO);
	/* a sane page is taken */
	F.list_count = 2;
	F.list_total = 3;
	memset(&vl, 0, sizeof(vl));
	vl.first = 1;
	ck_assert_int_eq(lio_client_vol_list(c, &vl), 0);
	ck_assert_uint_eq(vl.first, 1);
	ck_assert_uint_eq(vl.count, 2);
	lio_client_close(c);
	fake_stop();
}
END_TEST

/* A backend that posts completions of commands nobody sent, without end, cannot keep
 * lio_drv_io waiting: it gives up after a queue's worth of them. */
START_TEST(test_drv_io_stray_completions)
{
	struct lio_client *c;
	struct lio_drv *d = NULL;
	struct lio_drv_opts o = drv_opts;
	char err[512];
	uint64_t buf;

	fake_start();
	ck_assert_int_eq(lio_client_connect(&c, "evil", "t", NULL, err, sizeof(err)), 0);
	ck_assert_msg(lio_drv_open(&d, c, &o, err, sizeof(err)) == 0, "%s", err);
	buf = lio_drv_alloc(d, 4096);
	ck_assert_uint_eq(lio_drv_io(d, 0, NVME_CMD_READ, 0, 8, buf), 0); /* an honest one */
	F.stray = true;
	d->io_timeout_ms = 20000; /* the case's limit is 30 s: ending needs the cap, not this */
	ck_assert_uint_eq(lio_drv_io(d, 0, NVME_CMD_READ, 0, 8, buf), 0xffff);
	lio_drv_close(d);
	lio_client_close(c);
	fake_stop();
}
END_TEST

/* A reply that comes after the client gave up on it is never the next request's answer. */
START_TEST(test_late_reply)
{
	struct lio_client *c;
	struct lio_qp_stats st;
	char err[512];
	int r;

	fake_start();
	ck_assert_int_eq(lio_client_connect(&c, "evil", "t", NULL, err, sizeof(err)), 0);
	ck_assert_int_eq(lio_client_set_timeout_ms(c, 100), 0);
	F.late_op = LIO_OP_QP_STATS;
	F.late_ms = 400;
	ck_assert_int_eq(lio_client_qp_stats(c, 1, &st), -ETIMEDOUT);
	F.late_op = 0;
	usleep(600 * 1000); /* the late answer (qp 1's) is queued now */
	memset(&st, 0, sizeof(st));
	r = lio_client_qp_stats(c, 2, &st);
	ck_assert_msg(r != 0 || st.qp_id == 2, "qp 2's stats answered with qp %u's", st.qp_id);
	ck_assert_int_ne(r, 0);
	ck_assert(lio_client_broken(c));
	lio_client_close(c);
	fake_stop();
}
END_TEST

static volatile bool kicking;

static void kick_handler(int sig)
{
	(void)sig;
}

static void *kicker(void *arg)
{
	pthread_t target = *(pthread_t *)arg;

	while (__atomic_load_n(&kicking, __ATOMIC_ACQUIRE)) {
		pthread_kill(target, SIGUSR1);
		usleep(10 * 1000);
	}
	return NULL;
}

/* Signals every 10 ms (a VMM kicks its threads) interrupt the wait for a reply: each receive
 * would start the 200 ms timeout anew, so a daemon that answers 3 s late must still time out. */
START_TEST(test_timeout_under_signals)
{
	struct sigaction sa = {.sa_handler = kick_handler};
	struct lio_client *c;
	struct lio_qp_stats st;
	pthread_t self = pthread_self(), k;
	char err[512];

	ck_assert_int_eq(sigaction(SIGUSR1, &sa, NULL), 0);
	fake_start();
	ck_assert_int_eq(lio_client_connect(&c, "evil", "t", NULL, err, sizeof(err)), 0);
	ck_assert_int_eq(lio_client_set_timeout_ms(c, 200), 0);
	F.late_op = LIO_OP_QP_STATS;
	F.late_ms = 3000;
	__atomic_store_n(&kicking, true, __ATOMIC_RELEASE);
	ck_assert_int_eq(pthread_create(&k, NULL, kicker, &self), 0);
	ck_assert_int_eq(lio_client_qp_stats(c, 1, &st), -ETIMEDOUT);
	__atomic_store_n(&kicking, false, __ATOMIC_RELEASE);
	pthread_join(k, NULL);
	ck_assert(lio_client_broken(c));
	lio_client_close(c);
	fake_stop();
}
END_TEST

/* Answered twice: the second answer is not taken for the next request's. */
START_TEST(test_double_reply)
{
	struct lio_client *c;
	struct lio_qp_stats st;
	char err[512];
	int r;

	fake_start();
	ck_assert_int_eq(lio_client_connect(&c, "evil", "t", NULL, err, sizeof(err)), 0);
	F.twice_op = LIO_OP_QP_STATS;
	r = lio_client_qp_stats(c, 1, &st);
	replies_reach(3); /* identify + both answers sent */
	F.twice_op = 0;
	memset(&st, 0, sizeof(st));
	if (r == 0)
		r = lio_client_qp_stats(c, 2, &st);
	ck_assert_msg(r != 0 || st.qp_id == 2, "qp 2's stats answered with qp %u's", st.qp_id);
	ck_assert_int_ne(r, 0);
	ck_assert(lio_client_broken(c));
	lio_client_close(c);
	fake_stop();
}
END_TEST

/* Shadow doorbells with eventfds: uapi.h has the backend read the CQ head 4 bytes after the SQ
 * tail, which is CQ y's slot for SQ y. SQ 2 on CQ 1 is refused as NVMe allows (Completion Queue
 * Invalid) instead of binding a queue pair that reads another queue's head and stalls; SQ 1 on
 * CQ 1 gets its own slots. Polled doorbells have a page each, so any pairing binds. */
START_TEST(test_pairing)
{
	struct nvme_lio *l;
	char err[512];
	void *db;

	fake_start();
	ram_init();
	ck_assert_msg(lio_open(&l, NVME_LIO_DB_EVENTFD, err, sizeof(err)) == 0, "%s", err);
	ck_assert_uint_eq(bind_one(l, 2, 1, &db),
			  NVME_STATUS(NVME_SCT_CMD_SPECIFIC, NVME_SC_CQ_INVALID) | NVME_STATUS_DNR);
	ck_assert_uint_eq(F.nqp, 0); /* refused before the backend saw it */
	ck_assert_uint_eq(bind_one(l, 3, 3, &db), 0);
	ck_assert_uint_eq(F.qp[0].c.sqid, 3);
	nvme_lio_close(l);
	fake_stop();

	fake_start();
	ram_init();
	ck_assert_msg(lio_open(&l, NVME_LIO_DB_POLL, err, sizeof(err)) == 0, "%s", err);
	ck_assert_uint_eq(bind_one(l, 2, 1, &db), 0);
	ck_assert_ptr_nonnull(db);
	ck_assert_uint_eq(F.qp[0].c.sqid, 2);
	ck_assert_uint_eq(F.qp[0].c.cqid, 1);
	nvme_lio_close(l);
	fake_stop();
}
END_TEST

/* ---- emulate mode over the fake SSD ---- */

static struct nvme_ctrl *ectrl;
static uint8_t *eram;
static struct guest_mem egm;

static struct nvme_lio_emu *emu_open(void)
{
	struct nvme_lio_cfg cfg = {.id = "nvme0", .ssd = "evil", .size = 1 << 20, .label = "vm"};
	struct nvme_ctrl_params p = {.max_ioqs = 1, .nvectors = 1, .lba_shift = 9};
	struct nvme_lio_emu *e;
	char err[512];

	ck_assert_msg(nvme_lio_emu_open(&e, &cfg, &p.size, err, sizeof(err)) == 0, "%s", err);
	ck_assert_uint_eq(p.size, DISK_LBAS * 512);
	eram = testutil_guest_ram(&egm, 1 << 20);
	ck_assert_int_eq(
	    nvme_ctrl_create(&p, &egm, &nvme_lio_emu_ops, e, NULL, &ectrl, err, sizeof(err)), 0);
	return e;
}

static void emu_close(struct nvme_lio_emu *e)
{
	nvme_lio_emu_stop(e);
	nvme_ctrl_destroy(ectrl);
	nvme_lio_emu_close(e);
	free(eram);
}

/* Hands req to the backend as the controller does (its lock held); 1: completed in submit. */
static int emu_submit(struct nvme_lio_emu *e, struct nvme_io_req *req)
{
	int r;

	req->ctrl = ectrl;
	req->gen = ectrl->gen + 1; /* its completion finds no queue: dropped, req freed */
	pthread_mutex_lock(&ectrl->lock);
	r = nvme_lio_emu_ops.submit(e, req);
	pthread_mutex_unlock(&ectrl->lock);
	if (r)
		free(req);
	return r;
}

static struct nvme_io_req *rw_req(enum nvme_io_op op, uint64_t off, void *buf, size_t len)
{
	struct nvme_io_req *req = calloc(1, sizeof(*req));

	req->op = op;
	req->off = off;
	req->len = len;
	req->niov = 1;
	req->iov[0] = (struct iovec){buf, len};
	return req;
}

/* Waits up to 10 s for cond (a hang guard only: the passing run never waits that long). */
#define WAIT_FOR(cond)                                                                             \
	do {                                                                                       \
		for (unsigned w_ = 0; w_ < 10000 && !(cond); w_++)                                 \
			usleep(1000);                                                              \
	} while (0)

/* A 256-range Deallocate ran as 128 KiB Write Zeroes round trips on the vCPU that rang, under
 * the controller lock, for minutes (finding 8): submit now queues it for the device's own I/O
 * thread and returns; the ranges are zeroed there. */
START_TEST(test_emu_discard_async)
{
	struct nvme_lio_emu *e;
	struct nvme_io_req *req;
	unsigned i;
	bool zero;

	fake_start();
	e = emu_open();
	memset(F.disk, 0xab, sizeof(F.disk));
	req = calloc(1, sizeof(*req));
	req->op = NVME_IO_DISCARD;
	req->nranges = NVME_CTRL_MAX_DSM_RANGES;
	req->ranges = calloc(req->nranges, sizeof(*req->ranges));
	for (i = 0; i < req->nranges; i++)
		req->ranges[i] = (struct nvme_io_range){.off = i * 4096ULL, .len = 2048};
	ck_assert_int_eq(emu_submit(e, req), 0); /* queued, not run in the caller */
	WAIT_FOR(F.disk[255 * 4096] == 0);
	for (zero = true, i = 0; i < NVME_CTRL_MAX_DSM_RANGES; i++)
		zero = zero && F.disk[i * 4096] == 0 && F.disk[i * 4096 + 2047] == 0 &&
		       F.disk[i * 4096 + 2048] == 0xab;
	ck_assert(zero);
	emu_close(e);
	fake_stop();
}
END_TEST

/* After a timeout the command is still in flight against the bounce buffer; when it lands late
 * it must not become the data of a later write (finding 5). The fake SSD holds a read past
 * lvmm's timeout and completes it into its buffer just before it takes the next command's data
 * from there: with the bounce buffer reused, that write would store the stale read. */
START_TEST(test_emu_late_completion)
{
	static uint8_t a[512], b[512], rd[512];
	struct nvme_lio_emu *e;

	fake_start();
	e = emu_open();
	nvme_lio_emu_set_timeout_ms(e, 300);
	memset(a, 'A', sizeof(a));
	memset(b, 'B', sizeof(b));
	ck_assert_int_eq(emu_submit(e, rw_req(NVME_IO_WRITE, 0, a, sizeof(a))), 0);
	WAIT_FOR(F.disk[0] == 'A');
	ck_assert_uint_eq(F.disk[0], 'A');
	F.hold_opcode = NVME_CMD_READ + 1;
	ck_assert_int_eq(emu_submit(e, rw_req(NVME_IO_READ, 0, rd, sizeof(rd))), 0);
	WAIT_FOR(!nvme_lio_emu_alive(e));
	ck_assert(F.held); /* still in flight at the SSD */
	if (emu_submit(e, rw_req(NVME_IO_WRITE, 8 * 512, b, sizeof(b))) == 0) {
		WAIT_FOR(F.disk[8 * 512] != 0 || F.writes_seen > 1);
		usleep(50 * 1000);
	}
	ck_assert_msg(F.disk[8 * 512] != STALE_BYTE, "a late read's data was written as LBA 8");
	ck_assert_uint_eq(F.writes_seen, 1); /* nothing went through the bounce buffer again */
	ck_assert(!nvme_lio_emu_alive(e));   /* the controller reports itself failed */
	emu_close(e);
	fake_stop();
}
END_TEST

/* Reads and writes go to the SSD side by side, each through a bounce buffer of its own: a read
 * the SSD holds does not hold back the write queued after it, and the read's late data (the
 * fake lands it just before it takes the write's) is the read's, not the write's. */
START_TEST(test_emu_pipelined)
{
	static uint8_t b[512], rd[512];
	struct nvme_lio_emu *e;

	fake_start();
	e = emu_open();
	memset(b, 'B', sizeof(b));
	memset(rd, 0, sizeof(rd));
	F.hold_opcode = NVME_CMD_READ + 1;
	ck_assert_int_eq(emu_submit(e, rw_req(NVME_IO_READ, 0, rd, sizeof(rd))), 0);
	WAIT_FOR(F.held);
	ck_assert(F.held); /* the read is in flight at the SSD */
	ck_assert_int_eq(emu_submit(e, rw_req(NVME_IO_WRITE, 8 * 512, b, sizeof(b))), 0);
	WAIT_FOR(F.disk[8 * 512] != 0);
	ck_assert_uint_eq(F.disk[8 * 512], 'B');
	ck_assert_uint_eq(F.disk[8 * 512 + 511], 'B');
	ck_assert_uint_eq(F.writes_seen, 1);
	WAIT_FOR(rd[511] == STALE_BYTE);
	ck_assert_uint_eq(rd[0], STALE_BYTE); /* what the SSD answered the read */
	ck_assert_uint_eq(rd[511], STALE_BYTE);
	ck_assert(nvme_lio_emu_alive(e));
	emu_close(e);
	fake_stop();
}
END_TEST

/* Transfers that need a PRP list, several in flight at once: every byte lands where it should
 * and reads back (each in-flight command has its own list page). */
START_TEST(test_emu_pipelined_lists)
{
	enum { N = 4, LEN = 16384 };
	static uint8_t wr[N][LEN], rd[N][LEN];
	struct nvme_lio_emu *e;
	unsigned i;

	fake_start();
	e = emu_open();
	for (i = 0; i < N; i++) {
		memset(wr[i], 'a' + (int)i, LEN);
		memset(rd[i], 0, LEN);
	}
	for (i = 0; i < N; i++)
		ck_assert_int_eq(emu_submit(e, rw_req(NVME_IO_WRITE, i * 2ULL * LEN, wr[i], LEN)),
				 0);
	WAIT_FOR(F.writes_seen == N);
	ck_assert_uint_eq(F.writes_seen, N);
	for (i = 0; i < N; i++)
		ck_assert_int_eq(emu_submit(e, rw_req(NVME_IO_READ, i * 2ULL * LEN, rd[i], LEN)),
				 0);
	for (i = 0; i < N; i++) {
		WAIT_FOR(rd[i][LEN - 1] != 0);
		ck_assert_msg(!memcmp(rd[i], wr[i], LEN), "transfer %u read back wrong", i);
		ck_assert_msg(!memcmp(F.disk + i * 2ULL * LEN, wr[i], LEN), "transfer %u on disk",
			      i);
	}
	ck_assert(nvme_lio_emu_alive(e));
	emu_close(e);
	fake_stop();
}
END_TEST

/* Commands the emulate path has placed on the fake's one queue pair that the fake has not taken
 * yet: while the gate is shut, the commands in flight. */
static unsigned fake_pending(void)
{
	struct fake_qp *q = &F.qp[0];
	unsigned n = 0;

	pthread_mutex_lock(&F.lock);
	if (F.nqp == 1 && q->live && F.qmem) {
		uint32_t tail =
		    __atomic_load_n((uint32_t *)(F.qmem + q->c.db_off), __ATOMIC_ACQUIRE);

		n = (tail + q->c.sq_depth - q->sq_head) % q->c.sq_depth;
	}
	pthread_mutex_unlock(&F.lock);
	return n;
}

/* Far more commands in flight than the 15 an SQ of 16 held: while the SSD takes nothing, the 100
 * writes before a flush sit in its SQ at once, the flush waits until they are done (it runs
 * alone) and the 100 writes after it wait for the flush; then 200 reads at once, each read back
 * byte for byte. */
START_TEST(test_emu_deep)
{
	enum { N = 200, LEN = 4096 };
	static uint8_t wr[N][LEN], rd[N][LEN];
	struct nvme_lio_emu *e;
	struct nvme_io_req *fl;
	unsigned i, j;

	fake_start();
	e = emu_open();
	for (i = 0; i < N; i++) {
		for (j = 0; j < LEN; j++)
			wr[i][j] = (uint8_t)(i * 131 + j * 7 + 1);
		memset(rd[i], 0, LEN);
	}
	__atomic_store_n(&F.gate, true, __ATOMIC_RELEASE);
	for (i = 0; i < N; i++) {
		if (i == N / 2) {
			fl = calloc(1, sizeof(*fl));
			fl->op = NVME_IO_FLUSH;
			ck_assert_int_eq(emu_submit(e, fl), 0);
		}
		ck_assert_int_eq(
		    emu_submit(e, rw_req(NVME_IO_WRITE, i * (uint64_t)LEN, wr[i], LEN)), 0);
	}
	WAIT_FOR(fake_pending() == N / 2);
	usleep(20 * 1000); /* room for a wrong extra placement to show; none may come */
	ck_assert_uint_eq(fake_pending(), N / 2);
	__atomic_store_n(&F.gate, false, __ATOMIC_RELEASE);
	WAIT_FOR(F.writes_seen == N);
	ck_assert_uint_eq(F.writes_seen, N);
	ck_assert_uint_eq(F.flushes, 1);
	ck_assert_uint_eq(F.writes_at_flush, N / 2); /* between the two halves, alone */
	for (i = 0; i < N; i++)
		ck_assert_msg(!memcmp(F.disk + i * LEN, wr[i], LEN), "write %u on disk", i);
	__atomic_store_n(&F.gate, true, __ATOMIC_RELEASE);
	for (i = 0; i < N; i++)
		ck_assert_int_eq(emu_submit(e, rw_req(NVME_IO_READ, i * (uint64_t)LEN, rd[i], LEN)),
				 0);
	WAIT_FOR(fake_pending() == N);
	ck_assert_uint_eq(fake_pending(), N);
	__atomic_store_n(&F.gate, false, __ATOMIC_RELEASE);
	for (i = 0; i < N; i++) {
		WAIT_FOR(!memcmp(rd[i], wr[i], LEN));
		ck_assert_msg(!memcmp(rd[i], wr[i], LEN), "read %u", i);
	}
	ck_assert(nvme_lio_emu_alive(e));
	emu_close(e);
	fake_stop();
}
END_TEST

/* A controller reset (CC.EN = 0) while the SSD holds reads: CSTS.RDY stays set until each is
 * back from the SSD, their completions are dropped, and the controller set up again writes and
 * reads through the same queue pair. */
START_TEST(test_emu_reset_in_flight)
{
	struct nvme_lio_cfg cfg = {.id = "nvme0", .ssd = "evil", .size = 1 << 20, .label = "vm"};
	struct nvme_ctrl_params p = {.max_ioqs = 2, .nvectors = 2, .lba_shift = 9};
	struct nvme_lio_emu *e;
	struct nvme_sqe c;
	uint32_t csts = 0;
	char err[512];
	unsigned i;

	fake_start();
	rig_setup();
	ck_assert_msg(nvme_lio_emu_open(&e, &cfg, &p.size, err, sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(
	    nvme_ctrl_create(&p, &rig.gm, &nvme_lio_emu_ops, e, NULL, &rig.ctrl, err, sizeof(err)),
	    0);
	rig_bring_up();
	memset(rig.ram + DATA_GPA, 'P', 4096);
	c = rig_mk(NVME_CMD_WRITE, 1, 1);
	c.prp1 = DATA_GPA;
	c.cdw12 = 7;
	ck_assert_uint_eq(rig_cmd(1, &c), 0);
	__atomic_store_n(&F.gate, true, __ATOMIC_RELEASE);
	for (i = 0; i < QS - 1; i++) {
		c = rig_mk(NVME_CMD_READ, (uint16_t)(10 + i), 1);
		c.prp1 = DATA_GPA + 0x1000 * (i + 1);
		c.cdw12 = 7;
		memcpy(rig.ram + IOSQ_GPA + rig.tails[1] * 64, &c, 64);
		rig.tails[1] = (rig.tails[1] + 1) % QS;
	}
	rig_w32(0x1000 + 8, rig.tails[1]);
	WAIT_FOR(fake_pending() == QS - 1);
	ck_assert_uint_eq(fake_pending(), QS - 1);
	rig_w32(NVME_REG_CC, 0);
	nvme_ctrl_bar0_read(rig.ctrl, NVME_REG_CSTS, &csts, 4);
	ck_assert_uint_eq(csts & NVME_CSTS_RDY, NVME_CSTS_RDY); /* the SSD still holds them */
	__atomic_store_n(&F.gate, false, __ATOMIC_RELEASE);
	for (i = 0; i < 10000 && (csts & NVME_CSTS_RDY); i++) {
		usleep(1000);
		nvme_ctrl_bar0_read(rig.ctrl, NVME_REG_CSTS, &csts, 4);
	}
	ck_assert_uint_eq(csts & NVME_CSTS_RDY, 0);
	for (i = 1; i < QS; i++) /* no completion of the old queue was posted */
		ck_assert_uint_eq(((struct nvme_cqe *)(rig.ram + IOCQ_GPA))[i].status, 0);
	memset(rig.ram + ACQ_GPA, 0, 4096);
	memset(rig.ram + IOCQ_GPA, 0, 4096);
	rig.tails[0] = rig.tails[1] = rig.heads[0] = rig.heads[1] = 0;
	rig.phases[0] = rig.phases[1] = 1;
	rig_bring_up();
	memset(rig.ram + DATA_GPA + 0x1000, 'Q', 4096);
	c = rig_mk(NVME_CMD_WRITE, 2, 1);
	c.prp1 = DATA_GPA + 0x1000;
	c.cdw10 = 8;
	c.cdw12 = 7;
	ck_assert_uint_eq(rig_cmd(1, &c), 0);
	memset(rig.ram + DATA_GPA + 0x10000, 0, 8192);
	c = rig_mk(NVME_CMD_READ, 3, 1);
	c.prp1 = DATA_GPA + 0x10000;
	c.prp2 = DATA_GPA + 0x11000;
	c.cdw12 = 15;
	ck_assert_uint_eq(rig_cmd(1, &c), 0);
	for (i = 0; i < 8192; i++)
		ck_assert_uint_eq(rig.ram[DATA_GPA + 0x10000 + i], i < 4096 ? 'P' : 'Q');
	ck_assert(nvme_lio_emu_alive(e));
	nvme_lio_emu_stop(e);
	nvme_ctrl_destroy(rig.ctrl);
	rig.ctrl = NULL;
	nvme_lio_emu_close(e);
	rig_teardown();
	fake_stop();
}
END_TEST

static Suite *hostile_suite(void)
{
	Suite *s = suite_create("hostile_backend");
	TCase *tc = tcase_create("replies");

	tcase_set_timeout(tc, 30);
	tcase_add_loop_test(tc, test_db_off_refused, 0,
			    (int)(sizeof(bad_db_offs) / sizeof(bad_db_offs[0])));
	tcase_add_loop_test(tc, test_qmem_refused, 0, 3);
	tcase_add_loop_test(tc, test_volume_refused, 0, 2);
	tcase_add_loop_test(tc, test_drv_offsets_refused, 0, 3);
	tcase_add_loop_test(tc, test_bad_replies, 0, 3);
	tcase_add_test(tc, test_unterminated_name);
	tcase_add_loop_test(tc, test_bad_identify, 0, 2);
	tcase_add_test(tc, test_empty_reply_with_fd);
	tcase_add_loop_test(tc, test_list_totals, 0, 3);
	tcase_add_test(tc, test_drv_io_stray_completions);
	tcase_add_test(tc, test_late_reply);
	tcase_add_test(tc, test_double_reply);
	tcase_add_test(tc, test_timeout_under_signals);
	tcase_add_test(tc, test_pairing);
	tcase_add_test(tc, test_emu_discard_async);
	tcase_add_test(tc, test_emu_late_completion);
	tcase_add_test(tc, test_emu_pipelined);
	tcase_add_test(tc, test_emu_pipelined_lists);
	tcase_add_test(tc, test_emu_deep);
	tcase_add_test(tc, test_emu_reset_in_flight);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return testutil_run_suite(hostile_suite());
}
