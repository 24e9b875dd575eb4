/* The VM side of the lightiov.ko test, run inside the Linux test guest (static, no libc beyond
 * syscalls): one session on /dev/lightiov/NAME, a memfd as its DMA window, a queue pair in each
 * mode driven through shadow doorbells and eventfds, hostile commands and bad ioctl arguments;
 * queue memory with polled doorbells, the controller's own doorbells mapped (DB_DIRECT), and a
 * volume grown past its neighbour (moved).
 *
 * usage: lio-kmod-test /dev/lightiov/NAME
 * Prints LIO-OK/LIO-FAIL per check and LIO-VOL, LIO-DONE lines the host test parses.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lightiov/nvme.h"
#include "lightiov/nvmeq.h"
#include "lightiov/uapi.h"
#include "client/lio_client.h"

#define WIN_GPA	  0x40000000ull /* where the "guest" places its window */
#define WIN_BYTES (2u << 20)
#define DEPTH	  64
#define XFER	  (128u << 10)
/* window layout */
#define OFF_SQ	  0x0000u
#define OFF_CQ	  0x1000u
#define OFF_DB	  0x2000u /* shadow doorbells: SQ tail, CQ head */
#define OFF_EIDX  0x2040u
#define OFF_LIST  0x3000u /* PRP list of the write buffer */
#define OFF_LIST2 0x4000u /* PRP list of the read buffer */
#define OFF_WBUF  0x10000u
#define OFF_RBUF  0x40000u

static int failures;
static uint8_t *win;
static uint32_t lba_shift;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (cond) {                                                                        \
			printf("LIO-OK ");                                                         \
		} else {                                                                           \
			printf("LIO-FAIL ");                                                       \
			failures++;                                                                \
		}                                                                                  \
		printf(__VA_ARGS__);                                                               \
		printf("\n");                                                                      \
		fflush(stdout);                                                                    \
	} while (0)

/* An ioctl expected to fail with want. */
static void expect_errno(int fd, unsigned long cmd, void *arg, int want, const char *what)
{
	int r = ioctl(fd, cmd, arg);
	int e = r < 0 ? errno : 0;

	CHECK(r < 0 && e == want, "%s: errno %d (%s), want %d", what, e, strerror(e), want);
}

struct qp {
	int db_fd, irq_fd;
	uint32_t id;
	struct nvme_sqe *sq;
	volatile struct nvme_cqe *cq;
	volatile uint32_t *sq_db, *cq_db; /* shadow slots, polled doorbell page or the real ones */
	uint32_t sq_tail, cq_head, phase; /* as nvmeq.h keeps them */
	uint16_t cid;
	uint16_t sqid; /* what CQEs must carry (0: any, DB_DIRECT carries the controller's) */
	unsigned irqs, cmds;
};

static int qp_create(int fd, struct qp *q, uint32_t vol_id, uint32_t mode)
{
	struct lio_qp_create c;

	memset(win, 0, 0x3000);
	memset(q, 0, sizeof(*q));
	q->db_fd = eventfd(0, EFD_CLOEXEC);
	q->irq_fd = eventfd(0, EFD_CLOEXEC);
	q->sq = (struct nvme_sqe *)(win + OFF_SQ);
	q->cq = (volatile struct nvme_cqe *)(win + OFF_CQ);
	q->sq_db = (volatile uint32_t *)(win + OFF_DB);
	q->cq_db = q->sq_db + 1;
	q->sqid = 1;
	q->phase = 1;
	memset(&c, 0, sizeof(c));
	c.vol_id = vol_id;
	c.mode = mode;
	c.flags = LIO_QP_DB_EVENTFD | LIO_QP_IRQ_ENABLED;
	c.sqid = 1;
	c.cqid = 1;
	c.sq_depth = DEPTH;
	c.cq_depth = DEPTH;
	c.sq_gpa = WIN_GPA + OFF_SQ;
	c.cq_gpa = WIN_GPA + OFF_CQ;
	c.shadow_db_gpa = WIN_GPA + OFF_DB;
	c.eventidx_gpa = WIN_GPA + OFF_EIDX;
	c.db_fd = q->db_fd;
	c.irq_fd = q->irq_fd;
	if (ioctl(fd, LIO_IOC_QP_CREATE, &c) < 0)
		return -errno;
	q->id = c.qp_id;
	return 0;
}

/* Submits one command and waits for its CQE: the irq eventfd first (the completion path under
 * test), then the CQ. Returns the status (without the phase tag), -1 when no signal came within
 * 20 s, -2 for a CQE naming another SQ. */
static int qp_run(struct qp *q, struct nvme_sqe *sqe, uint16_t *cid_out)
{
	uint64_t one = 1, v;

	sqe->cid = ++q->cid;
	memcpy(&q->sq[q->sq_tail], sqe, sizeof(*sqe));
	nvmeq_step(&q->sq_tail, DEPTH);
	__atomic_store_n(q->sq_db, q->sq_tail, __ATOMIC_RELEASE);
	if (q->db_fd >= 0 && write(q->db_fd, &one, sizeof(one)) != sizeof(one))
		return -1;
	for (;;) {
		struct pollfd p = {.fd = q->irq_fd, .events = POLLIN};
		struct nvme_cqe c;

		if (poll(&p, 1, 20000) <= 0)
			return -1;
		if (read(q->irq_fd, &v, sizeof(v)) == sizeof(v))
			q->irqs++;
		if (!nvmeq_cqe_take(&q->cq[q->cq_head], q->phase, &c))
			continue;
		if (cid_out)
			*cid_out = c.cid;
		if (q->sqid && c.sq_id != q->sqid)
			return -2;
		if (nvmeq_step(&q->cq_head, DEPTH))
			q->phase ^= 1;
		__atomic_store_n(q->cq_db, q->cq_head, __ATOMIC_RELEASE);
		q->cmds++;
		return c.status >> 1;
	}
}

/* A read or write of bytes at slba with the buffer at window offset off (PRP list at list). */
static void rw_sqe(struct nvme_sqe *s, uint8_t op, uint64_t slba, uint32_t bytes, uint32_t off,
		   uint32_t list)
{
	uint32_t pages = bytes / 4096, i;
	uint64_t *l = (uint64_t *)(win + list);

	memset(s, 0, sizeof(*s));
	s->opcode = op;
	s->nsid = 1;
	s->prp1 = WIN_GPA + off;
	if (pages == 2)
		s->prp2 = WIN_GPA + off + 4096;
	else if (pages > 2) {
		for (i = 1; i < pages; i++)
			l[i - 1] = WIN_GPA + off + i * 4096ull;
		s->prp2 = WIN_GPA + list;
	}
	s->cdw10 = (uint32_t)slba;
	s->cdw11 = (uint32_t)(slba >> 32);
	s->cdw12 = (bytes >> lba_shift) - 1;
}

static void fill(uint8_t *p, uint32_t len, uint32_t seed)
{
	uint32_t i, x = seed;

	for (i = 0; i < len; i += 4) {
		x = x * 1103515245u + 12345u;
		memcpy(p + i, &x, 4);
	}
}

/* Write, flush, read back and compare at slba (as the queue pair's mode expects it). */
static void io_roundtrip(struct qp *q, const char *mode, uint64_t slba, uint32_t bytes,
			 uint32_t seed)
{
	struct nvme_sqe s;
	int st;

	fill(win + OFF_WBUF, bytes, seed);
	memset(win + OFF_RBUF, 0xee, bytes);
	rw_sqe(&s, NVME_CMD_WRITE, slba, bytes, OFF_WBUF, OFF_LIST);
	st = qp_run(q, &s, NULL);
	CHECK(st == 0, "%s: write %u bytes at LBA %llu: status 0x%x", mode, bytes,
	      (unsigned long long)slba, st);
	memset(&s, 0, sizeof(s));
	s.opcode = NVME_CMD_FLUSH;
	s.nsid = 1;
	st = qp_run(q, &s, NULL);
	CHECK(st == 0, "%s: flush: status 0x%x", mode, st);
	rw_sqe(&s, NVME_CMD_READ, slba, bytes, OFF_RBUF, OFF_LIST2);
	st = qp_run(q, &s, NULL);
	CHECK(st == 0, "%s: read %u bytes at LBA %llu: status 0x%x", mode, bytes,
	      (unsigned long long)slba, st);
	CHECK(!memcmp(win + OFF_WBUF, win + OFF_RBUF, bytes), "%s: data read back matches", mode);
}

/* Hostile commands in isolated mode: each refused with the status the checker names. */
static void hostile(struct qp *q, uint64_t lba_count)
{
	struct nvme_sqe s;
	uint16_t cid = 0;
	int st;

	rw_sqe(&s, NVME_CMD_WRITE, lba_count, 4096, OFF_WBUF, OFF_LIST);
	st = qp_run(q, &s, &cid);
	CHECK(st > 0 && (st & 0xff) == NVME_SC_LBA_RANGE && cid == s.cid,
	      "hostile: write past the LBA window: status 0x%x cid %u", st, cid);
	rw_sqe(&s, NVME_CMD_WRITE, lba_count - 1, 8192, OFF_WBUF, OFF_LIST);
	s.cdw12 = (8192 >> lba_shift) - 1;
	st = qp_run(q, &s, NULL);
	CHECK(st > 0 && (st & 0xff) == NVME_SC_LBA_RANGE,
	      "hostile: write straddling the window's end: status 0x%x", st);
	rw_sqe(&s, NVME_CMD_READ, 0, 4096, OFF_RBUF, OFF_LIST2);
	s.prp1 = 0x1000; /* below the DMA window: host memory of someone else */
	st = qp_run(q, &s, NULL);
	CHECK(st > 0 && (st & 0xff) == NVME_SC_DATA_XFER_ERROR,
	      "hostile: read into memory outside the DMA window: status 0x%x", st);
	rw_sqe(&s, NVME_CMD_READ, 0, XFER, OFF_RBUF, OFF_LIST2);
	((uint64_t *)(win + OFF_LIST2))[5] = WIN_GPA + WIN_BYTES; /* one list entry past the end */
	st = qp_run(q, &s, NULL);
	CHECK(st > 0 && (st & 0xff) == NVME_SC_DATA_XFER_ERROR,
	      "hostile: PRP list entry outside the DMA window: status 0x%x", st);
	memset(&s, 0, sizeof(s));
	s.opcode = 0x7f;
	s.nsid = 1;
	st = qp_run(q, &s, NULL);
	CHECK(st > 0 && (st & 0xff) == NVME_SC_INVALID_OPCODE, "hostile: opcode 0x7f: status 0x%x",
	      st);
	rw_sqe(&s, NVME_CMD_READ, 0, 4096, OFF_RBUF, OFF_LIST2);
	s.nsid = 2;
	st = qp_run(q, &s, NULL);
	CHECK(st > 0 && (st & 0xff) == NVME_SC_INVALID_NS, "hostile: namespace 2: status 0x%x", st);
	rw_sqe(&s, NVME_CMD_READ, 0, 4096, OFF_RBUF, OFF_LIST2);
	s.flags = NVME_SQE_FLAGS_PSDT(NVME_PSDT_SGL_MPTR_CONTIG);
	st = qp_run(q, &s, NULL);
	CHECK(st > 0, "hostile: SGL data pointer: status 0x%x", st);
	rw_sqe(&s, NVME_CMD_READ, 0, 4096, OFF_RBUF, OFF_LIST2);
	s.cdw10 = 0xffffffffu; /* an SLBA near 2^64: must not wrap into the window */
	s.cdw11 = 0xffffffffu;
	st = qp_run(q, &s, NULL);
	CHECK(st > 0 && (st & 0xff) == NVME_SC_LBA_RANGE, "hostile: SLBA 2^64-1: status 0x%x", st);
}

static int memfd_window(uint64_t size, int seal)
{
	int m = memfd_create("lio-win", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (m < 0 || ftruncate(m, (off_t)size))
		return -1;
	if (seal && fcntl(m, F_ADD_SEALS, F_SEAL_SHRINK))
		return -1;
	return m;
}

static void bad_args(int fd, int memfd)
{
	struct lio_dma_window w;
	struct lio_vol_attach a;
	struct lio_qp_ref ref;
	struct lio_qp_stats qs;
	struct lio_qp_create c;
	int unsealed = memfd_window(WIN_BYTES, 0), shortfd = memfd_window(4096, 1);

	expect_errno(fd, _IOWR('L', 0x7e, struct lio_identify), &w, ENOTTY, "unknown ioctl");
	expect_errno(fd, _IOWR('L', LIO_OP_IDENTIFY, struct lio_qp_ref), &ref, ENOTTY,
		     "identify with a wrong argument size");
	expect_errno(fd, LIO_IOC_DMA_REGISTER, (void *)8, EFAULT,
		     "dma-register from a bad pointer");
	memset(&w, 0, sizeof(w));
	expect_errno(fd, LIO_IOC_DMA_REGISTER, &w, EINVAL, "dma-register with 0 regions");
	w.nr_regions = LIO_MAX_REGIONS + 1;
	expect_errno(fd, LIO_IOC_DMA_REGISTER, &w, EINVAL, "dma-register with 9 regions");
	w.nr_regions = 1;
	w.r[0] = (struct lio_dma_region){.gpa = WIN_GPA, .size = 4095, .fd = memfd};
	expect_errno(fd, LIO_IOC_DMA_REGISTER, &w, EINVAL, "dma-register size 4095");
	w.r[0].size = 0;
	expect_errno(fd, LIO_IOC_DMA_REGISTER, &w, EINVAL, "dma-register size 0");
	w.r[0] = (struct lio_dma_region){.gpa = ~0ull & ~4095ull, .size = 8192, .fd = memfd};
	expect_errno(fd, LIO_IOC_DMA_REGISTER, &w, EINVAL, "dma-register wrapping past 2^64");
	w.nr_regions = 2;
	w.r[0] = (struct lio_dma_region){.gpa = WIN_GPA, .size = 1 << 20, .fd = memfd};
	w.r[1] = (struct lio_dma_region){
	    .gpa = WIN_GPA + 4096, .size = 4096, .fd_offset = 1 << 20, .fd = memfd};
	expect_errno(fd, LIO_IOC_DMA_REGISTER, &w, EINVAL, "dma-register overlapping regions");
	w.nr_regions = 1;
	w.r[0] = (struct lio_dma_region){.gpa = WIN_GPA, .size = WIN_BYTES, .fd = fd};
	expect_errno(fd, LIO_IOC_DMA_REGISTER, &w, EBADF, "dma-register of a non-memfd fd");
	w.r[0].fd = 12345;
	expect_errno(fd, LIO_IOC_DMA_REGISTER, &w, EBADF, "dma-register of a closed fd");
	w.r[0].fd = unsealed;
	expect_errno(fd, LIO_IOC_DMA_REGISTER, &w, EPERM, "dma-register of an unsealed memfd");
	w.r[0].fd = shortfd;
	expect_errno(fd, LIO_IOC_DMA_REGISTER, &w, EINVAL, "dma-register past the memfd's end");
	w.r[0] = (struct lio_dma_region){.gpa = WIN_GPA, .size = 1ull << 40, .fd = memfd};
	expect_errno(fd, LIO_IOC_DMA_REGISTER, &w, E2BIG, "dma-register of 1 TiB");

	memset(&a, 0, sizeof(a));
	strcpy(a.name, "no-such-volume");
	expect_errno(fd, LIO_IOC_VOL_ATTACH, &a, ENOENT, "vol-attach of an unknown volume");
	strcpy(a.name, "bad/name");
	a.flags = LIO_ATTACH_CREATE;
	a.size_bytes = 1 << 20;
	expect_errno(fd, LIO_IOC_VOL_ATTACH, &a, EINVAL, "vol-attach with a bad name");
	memset(a.name, 'x', sizeof(a.name)); /* no NUL */
	expect_errno(fd, LIO_IOC_VOL_ATTACH, &a, EINVAL, "vol-attach with an unterminated name");
	strcpy(a.name, "v0");
	a.flags = 0x100;
	expect_errno(fd, LIO_IOC_VOL_ATTACH, &a, EINVAL, "vol-attach with unknown flags");
	a.flags = LIO_ATTACH_CREATE;
	a.size_bytes = 1000;
	expect_errno(fd, LIO_IOC_VOL_ATTACH, &a, EINVAL, "vol-attach CREATE of 1000 bytes");
	a.size_bytes = 1ull << 50;
	expect_errno(fd, LIO_IOC_VOL_ATTACH, &a, ENOSPC, "vol-attach CREATE of 1 PiB");
	memset(&a, 0, sizeof(a));
	a.flags = LIO_ATTACH_ANON;
	expect_errno(fd, LIO_IOC_VOL_ATTACH, &a, EINVAL, "vol-attach ANON of 0 bytes");
	a.vol_id = 999;
	expect_errno(fd, LIO_IOC_VOL_DETACH, &a, ENOENT, "vol-detach of an unknown id");

	memset(&c, 0, sizeof(c));
	c.mode = LIGHTIOV_MODE_ISOLATED;
	c.flags = LIO_QP_DB_EVENTFD;
	c.sqid = c.cqid = 1;
	c.sq_depth = c.cq_depth = DEPTH;
	c.irq_fd = -1;
	expect_errno(fd, LIO_IOC_QP_CREATE, &c, ENOENT, "qp-create before a DMA window");
	ref.qp_id = 4242;
	expect_errno(fd, LIO_IOC_QP_DESTROY, &ref, ENOENT, "qp-destroy of an unknown queue pair");
	memset(&qs, 0, sizeof(qs));
	qs.qp_id = 4242;
	expect_errno(fd, LIO_IOC_QP_STATS, &qs, ENOENT, "qp-stats of an unknown queue pair");
	close(unsealed);
	close(shortfd);
}

static void bad_qp_args(int fd, uint32_t vol_id)
{
	struct lio_qp_create c, b;
	int efd = eventfd(0, EFD_CLOEXEC);

	memset(&c, 0, sizeof(c));
	c.vol_id = vol_id;
	c.mode = LIGHTIOV_MODE_ISOLATED;
	c.flags = LIO_QP_DB_EVENTFD;
	c.sqid = c.cqid = 1;
	c.sq_depth = c.cq_depth = DEPTH;
	c.sq_gpa = WIN_GPA + OFF_SQ;
	c.cq_gpa = WIN_GPA + OFF_CQ;
	c.shadow_db_gpa = WIN_GPA + OFF_DB;
	c.db_fd = efd;
	c.irq_fd = -1;
	b = c;
	b.mode = 3;
	expect_errno(fd, LIO_IOC_QP_CREATE, &b, EINVAL, "qp-create mode 3");
	b = c;
	b.sq_depth = 1;
	expect_errno(fd, LIO_IOC_QP_CREATE, &b, EINVAL, "qp-create sq_depth 1");
	b = c;
	b.cq_depth = LIO_MAX_QDEPTH + 1;
	expect_errno(fd, LIO_IOC_QP_CREATE, &b, EINVAL, "qp-create cq_depth 4097");
	b = c;
	b.flags |= 1u << 20;
	expect_errno(fd, LIO_IOC_QP_CREATE, &b, EINVAL, "qp-create unknown flag");
	b = c;
	b.flags = LIO_QP_DB_POLL;
	expect_errno(fd, LIO_IOC_QP_CREATE, &b, ENOENT, "qp-create DB_POLL before qmem-alloc");
	b = c;
	b.flags = LIO_QP_DB_EVENTFD | LIO_QP_SQ_QMEM;
	expect_errno(fd, LIO_IOC_QP_CREATE, &b, ENOENT, "qp-create SQ_QMEM before qmem-alloc");
	b = c;
	b.flags = LIO_QP_DB_POLL | LIO_QP_DB_EVENTFD;
	expect_errno(fd, LIO_IOC_QP_CREATE, &b, EINVAL, "qp-create DB_POLL and DB_EVENTFD");
	b = c;
	b.sqid = 0;
	expect_errno(fd, LIO_IOC_QP_CREATE, &b, EINVAL, "qp-create sqid 0");
	b = c;
	b.vol_id = 777;
	expect_errno(fd, LIO_IOC_QP_CREATE, &b, ENOENT, "qp-create on an unattached volume");
	b = c;
	b.sq_gpa = WIN_GPA + WIN_BYTES - 4096; /* 64 entries need 4 KiB: fits */
	b.sq_depth = 128;		       /* 8 KiB: runs off the window */
	expect_errno(fd, LIO_IOC_QP_CREATE, &b, EINVAL, "qp-create SQ running off the window");
	b = c;
	b.cq_gpa = WIN_GPA + OFF_CQ + 16;
	expect_errno(fd, LIO_IOC_QP_CREATE, &b, EINVAL, "qp-create CQ not page aligned");
	b = c;
	b.shadow_db_gpa = 0x1000;
	expect_errno(fd, LIO_IOC_QP_CREATE, &b, EINVAL, "qp-create shadow doorbell outside");
	b = c;
	b.db_fd = fd;
	expect_errno(fd, LIO_IOC_QP_CREATE, &b, EBADF, "qp-create db_fd not an eventfd");
	b = c;
	b.irq_fd = efd;
	expect_errno(fd, LIO_IOC_QP_CREATE, &b, EINVAL, "qp-create irq_fd without IRQ_ENABLED");
	b = c;
	b.flags |= LIO_QP_IRQ_ENABLED;
	b.irq_fd = 0; /* the console */
	expect_errno(fd, LIO_IOC_QP_CREATE, &b, EBADF, "qp-create irq_fd not an eventfd");
	close(efd);
}

/* ---- queue memory, polled doorbells, the controller's own doorbells, a moved volume ---- */

#define QMEM_BYTES (2u << 20)
static uint8_t *qmem;

/* Queue memory from the module: bad sizes, one allocation per session, its mapping's bounds. */
static int qmem_setup(int fd)
{
	struct lio_qmem m;
	void *p;

	memset(&m, 0, sizeof(m));
	expect_errno(fd, LIO_IOC_QMEM_ALLOC, &m, EINVAL, "qmem-alloc of 0 bytes");
	m.size = 4097;
	expect_errno(fd, LIO_IOC_QMEM_ALLOC, &m, EINVAL, "qmem-alloc of 4097 bytes");
	m.size = (64u << 20) + 4096;
	expect_errno(fd, LIO_IOC_QMEM_ALLOC, &m, EINVAL, "qmem-alloc past 64 MiB");
	m.size = QMEM_BYTES;
	m.fd = -1;
	if (ioctl(fd, LIO_IOC_QMEM_ALLOC, &m) < 0 || m.fd < 0) {
		CHECK(0, "qmem-alloc of %u KiB: errno %d", QMEM_BYTES >> 10, errno);
		return -1;
	}
	expect_errno(fd, LIO_IOC_QMEM_ALLOC, &m, EEXIST, "second qmem-alloc of the session");
	p = mmap(NULL, QMEM_BYTES + 4096, PROT_READ | PROT_WRITE, MAP_SHARED, m.fd, 0);
	CHECK(p == MAP_FAILED && errno == EINVAL, "qmem mmap past its end: errno %d", errno);
	qmem = mmap(NULL, QMEM_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, m.fd, 0);
	close(m.fd); /* the mapping holds the memory */
	CHECK(qmem != MAP_FAILED, "qmem-alloc of %u KiB: mapped", QMEM_BYTES >> 10);
	return qmem == MAP_FAILED ? -1 : 0;
}

/* Isolated queue pair with SQ, CQ and doorbell pages in queue memory: the module polls the
 * doorbell page (no eventfd at all on the submission side). */
static void qmem_polled(int fd, uint32_t vol_id)
{
	struct lio_session_set ws;
	unsigned long long syncs;
	struct lio_qp_create c;
	int r;
	struct lio_qp_stats qs;
	struct lio_qp_ref ref;
	struct qp q;

	memset(&q, 0, sizeof(q));
	memset(&c, 0, sizeof(c));
	c.vol_id = vol_id;
	c.mode = LIGHTIOV_MODE_ISOLATED;
	c.flags = LIO_QP_SQ_QMEM | LIO_QP_CQ_QMEM | LIO_QP_DB_POLL | LIO_QP_IRQ_ENABLED;
	c.sqid = c.cqid = 1;
	c.sq_depth = c.cq_depth = DEPTH;
	c.db_fd = -1;
	q.irq_fd = c.irq_fd = eventfd(0, EFD_CLOEXEC);
	if (ioctl(fd, LIO_IOC_QP_CREATE, &c) < 0) {
		CHECK(0, "qp-create in queue memory, polled: errno %d", errno);
		return;
	}
	CHECK(c.sq_off % 4096 == 0 && c.cq_off % 4096 == 0 && c.db_off % 4096 == 0 &&
		  c.sq_off != c.cq_off && c.db_off + 8192 <= QMEM_BYTES,
	      "qp-create in queue memory, polled: sq_off 0x%llx cq_off 0x%llx db_off 0x%llx",
	      (unsigned long long)c.sq_off, (unsigned long long)c.cq_off,
	      (unsigned long long)c.db_off);
	q.id = c.qp_id;
	q.db_fd = -1;
	q.sq = (struct nvme_sqe *)(qmem + c.sq_off);
	q.cq = (volatile struct nvme_cqe *)(qmem + c.cq_off);
	q.sq_db = (volatile uint32_t *)(qmem + c.db_off);
	q.cq_db = (volatile uint32_t *)(qmem + c.db_off + 4096);
	q.sqid = 1;
	q.phase = 1;
	/* the VM's write cache off: the module adds FUA to each write and counts it */
	memset(&ws, 0, sizeof(ws));
	ws.mask = 0x80;
	expect_errno(fd, LIO_IOC_SESSION_SET, &ws, EINVAL, "session-set of an unknown flag");
	ws.mask = ws.flags = LIO_SESSION_WRITE_THROUGH;
	r = ioctl(fd, LIO_IOC_SESSION_SET, &ws);
	syncs = ws.syncs;
	CHECK(r == 0 && ws.flags == LIO_SESSION_WRITE_THROUGH,
	      "session-set write-through: rc %d flags 0x%x", r, ws.flags);
	io_roundtrip(&q, "qmem-polled", (2 * XFER) >> lba_shift, XFER, 4);
	ws.flags = 0;
	r = ioctl(fd, LIO_IOC_SESSION_SET, &ws);
	CHECK(r == 0 && ws.flags == 0 && ws.syncs == syncs + 1,
	      "write-through: %llu write sent with FUA, then off",
	      (unsigned long long)(ws.syncs - syncs));
	memset(&qs, 0, sizeof(qs));
	qs.qp_id = q.id;
	CHECK(ioctl(fd, LIO_IOC_QP_STATS, &qs) == 0 && qs.cmds == 3 && qs.polls >= 1 &&
		  qs.irqs >= 1,
	      "qmem-polled: qp-stats cmds %llu polls %llu irqs %llu", (unsigned long long)qs.cmds,
	      (unsigned long long)qs.polls, (unsigned long long)qs.irqs);
	CHECK(q.cmds == 3 && q.irqs >= 1, "qmem-polled: %u commands completed, %u irq signals",
	      q.cmds, q.irqs);
	ref.qp_id = q.id;
	CHECK(ioctl(fd, LIO_IOC_QP_DESTROY, &ref) == 0, "qp-destroy qmem-polled");
	close(q.irq_fd);
}

/* The physical address of a page of ours (root reads PFNs): without an IOMMU it is what the
 * controller must be given, as a DB_DIRECT client writes device addresses itself. */
static uint64_t phys_of(const void *va)
{
	uint64_t e = 0, vpn = (uintptr_t)va / 4096;
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);

	if (fd < 0 || pread(fd, &e, 8, (off_t)(vpn * 8)) != 8)
		e = 0;
	if (fd >= 0)
		close(fd);
	if (!(e >> 63) || !(e & ((1ull << 55) - 1)))
		return 0;
	return (e & ((1ull << 55) - 1)) * 4096 + (uintptr_t)va % 4096;
}

static void direct_rw(struct nvme_sqe *s, uint8_t op, uint64_t slba, uint32_t off)
{
	rw_sqe(s, op, slba, 8192, off, OFF_LIST);
	s->prp1 = phys_of(win + off);
	s->prp2 = phys_of(win + off + 4096);
}

static int sysfs_write(const char *path, const char *v)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), ok;

	if (fd < 0)
		return -1;
	ok = write(fd, v, strlen(v)) == (ssize_t)strlen(v);
	close(fd);
	return ok ? 0 : -1;
}

/* Passthrough in the paper's form: the controller's SQ and CQ are the rings in queue memory,
 * its doorbells are mapped here and rung directly, its vector signals the irq eventfd. */
static void direct(int fd, uint32_t vol_id, uint64_t lba_start)
{
	const char *param = "/sys/module/lightiov/parameters/direct_noiommu";
	struct lio_qp_create c, b;
	struct lio_qp_stats qs;
	struct lio_qp_ref ref;
	struct nvme_sqe s;
	uint64_t slba = lba_start + ((3 * XFER) >> lba_shift);
	volatile uint32_t *db;
	struct qp q;
	int st;
	void *p;

	memset(&q, 0, sizeof(q));
	memset(&c, 0, sizeof(c));
	c.vol_id = vol_id;
	c.mode = LIGHTIOV_MODE_PASSTHROUGH;
	c.flags = LIO_QP_SQ_QMEM | LIO_QP_CQ_QMEM | LIO_QP_DB_DIRECT | LIO_QP_IRQ_ENABLED;
	c.sqid = c.cqid = 1;
	c.sq_depth = c.cq_depth = DEPTH;
	c.db_fd = -1;
	q.irq_fd = c.irq_fd = eventfd(0, EFD_CLOEXEC);
	b = c;
	b.mode = LIGHTIOV_MODE_ISOLATED;
	expect_errno(fd, LIO_IOC_QP_CREATE, &b, EINVAL, "qp-create DB_DIRECT isolated");
	b = c;
	b.flags &= ~LIO_QP_CQ_QMEM;
	b.cq_gpa = WIN_GPA + OFF_CQ;
	expect_errno(fd, LIO_IOC_QP_CREATE, &b, EINVAL, "qp-create DB_DIRECT with the CQ outside");
	b = c;
	b.cq_depth = DEPTH * 2;
	expect_errno(fd, LIO_IOC_QP_CREATE, &b, EINVAL, "qp-create DB_DIRECT sq_depth != cq_depth");
	b = c;
	b.flags |= LIO_QP_DB_POLL;
	expect_errno(fd, LIO_IOC_QP_CREATE, &b, EINVAL, "qp-create DB_DIRECT and DB_POLL");
	b = c;
	b.flags |= LIO_QP_READONLY;
	expect_errno(fd, LIO_IOC_QP_CREATE, &b, EINVAL, "qp-create DB_DIRECT read-only");
	/* nothing checks a DB_DIRECT queue pair's LBAs: the operator grants it (loaded without) */
	b = c;
	expect_errno(fd, LIO_IOC_QP_CREATE, &b, EPERM,
		     "qp-create DB_DIRECT without allow_db_direct");
	CHECK(!sysfs_write("/sys/module/lightiov/parameters/allow_db_direct", "1"),
	      "allow_db_direct=1 granted");
	if (!sysfs_write(param, "0")) {
		b = c;
		expect_errno(fd, LIO_IOC_QP_CREATE, &b, EPERM,
			     "qp-create DB_DIRECT without IOMMU and without direct_noiommu");
		sysfs_write(param, "1");
	}
	p = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 2ull << 20);
	CHECK(p == MAP_FAILED && errno == EINVAL, "mmap of no queue pair's doorbells: errno %d",
	      errno);
	if (ioctl(fd, LIO_IOC_QP_CREATE, &c) < 0) {
		CHECK(0, "qp-create DB_DIRECT: errno %d (%s)", errno, strerror(errno));
		close(q.irq_fd);
		return;
	}
	CHECK(c.sq_off % 4096 == 0 && c.cq_off % 4096 == 0 && c.db_off % 8192 == 0 && c.db_off,
	      "qp-create DB_DIRECT: sq_off 0x%llx cq_off 0x%llx db_off 0x%llx",
	      (unsigned long long)c.sq_off, (unsigned long long)c.cq_off,
	      (unsigned long long)c.db_off);
	p = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)c.db_off);
	CHECK(p == MAP_FAILED && errno == EINVAL, "mmap of 3 doorbell pages: errno %d", errno);
	db = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)c.db_off);
	CHECK(db != MAP_FAILED, "mmap of the controller's doorbell pages at 0x%llx",
	      (unsigned long long)c.db_off);
	if (db == MAP_FAILED)
		goto out;
	q.id = c.qp_id;
	q.db_fd = -1;
	q.sq = (struct nvme_sqe *)(qmem + c.sq_off);
	q.cq = (volatile struct nvme_cqe *)(qmem + c.cq_off);
	q.sq_db = db;
	q.cq_db = db + 1024;
	q.sqid = 0;
	q.phase = 1;
	fill(win + OFF_WBUF, 8192, 5);
	memset(win + OFF_RBUF, 0xee, 8192);
	direct_rw(&s, NVME_CMD_WRITE, slba, OFF_WBUF);
	CHECK(s.prp1 && s.prp2, "direct: device addresses 0x%llx 0x%llx",
	      (unsigned long long)s.prp1, (unsigned long long)s.prp2);
	st = qp_run(&q, &s, NULL);
	CHECK(st == 0, "direct: write 8192 bytes at LBA %llu: status 0x%x",
	      (unsigned long long)slba, st);
	memset(&s, 0, sizeof(s));
	s.opcode = NVME_CMD_FLUSH;
	s.nsid = 1;
	st = qp_run(&q, &s, NULL);
	CHECK(st == 0, "direct: flush: status 0x%x", st);
	direct_rw(&s, NVME_CMD_READ, slba, OFF_RBUF);
	st = qp_run(&q, &s, NULL);
	CHECK(st == 0, "direct: read 8192 bytes: status 0x%x", st);
	CHECK(!memcmp(win + OFF_WBUF, win + OFF_RBUF, 8192), "direct: data read back matches");
	memset(&qs, 0, sizeof(qs));
	qs.qp_id = q.id;
	CHECK(ioctl(fd, LIO_IOC_QP_STATS, &qs) == 0 && qs.cmds == 0 && qs.irqs >= 1,
	      "direct: qp-stats cmds %llu (none through the module) irqs %llu",
	      (unsigned long long)qs.cmds, (unsigned long long)qs.irqs);
	CHECK(q.cmds == 3 && q.irqs >= 1, "direct: %u commands completed, %u irq signals", q.cmds,
	      q.irqs);
	munmap((void *)db, 8192);
out:
	ref.qp_id = c.qp_id;
	CHECK(ioctl(fd, LIO_IOC_QP_DESTROY, &ref) == 0, "qp-destroy direct");
	close(q.irq_fd);
}

/* Grow kmodvol past a neighbour: the module moves it and its data; the added LBAs read zero. */
static void resize_moved(int fd, struct lio_vol_attach *a, uint64_t old_start)
{
	struct lio_vol v;
	struct lio_vol_attach b;
	struct qp q;
	uint8_t *want = win + OFF_WBUF;
	int r, st;

	memset(&v, 0, sizeof(v));
	strcpy(v.name, "nosuchvol");
	v.size_bytes = 8u << 20;
	expect_errno(fd, LIO_IOC_VOL_RESIZE, &v, ENOENT, "vol-resize of an unknown volume");
	strcpy(v.name, "kmodvol");
	v.size_bytes = (8u << 20) + 1;
	expect_errno(fd, LIO_IOC_VOL_RESIZE, &v, EINVAL, "vol-resize to no LBA multiple");
	v.size_bytes = 8u << 20;
	expect_errno(fd, LIO_IOC_VOL_RESIZE, &v, EBUSY, "vol-resize of an attached volume");
	CHECK(ioctl(fd, LIO_IOC_VOL_DETACH, a) == 0, "vol-detach kmodvol");
	v.size_bytes = 2u << 20;
	expect_errno(fd, LIO_IOC_VOL_RESIZE, &v, EINVAL, "vol-resize shrinking");
	memset(&v, 0, sizeof(v));
	strcpy(v.name, "blocker");
	v.size_bytes = 1u << 20;
	r = ioctl(fd, LIO_IOC_VOL_CREATE, &v);
	CHECK(r == 0, "vol-create blocker (right after kmodvol): rc %d", r);
	strcpy(v.name, "kmodvol");
	v.size_bytes = 1ull << 50;
	expect_errno(fd, LIO_IOC_VOL_RESIZE, &v, ENOSPC, "vol-resize to 1 PiB");
	v.size_bytes = 8u << 20;
	r = ioctl(fd, LIO_IOC_VOL_RESIZE, &v);
	CHECK(r == 0, "vol-resize kmodvol to 8 MiB: rc %d errno %d", r, r ? errno : 0);
	memset(&b, 0, sizeof(b));
	strcpy(b.name, "kmodvol");
	r = ioctl(fd, LIO_IOC_VOL_ATTACH, &b);
	CHECK(r == 0 && b.lba_start != old_start && b.lba_count == (8u << 20) >> lba_shift,
	      "vol-resize moved kmodvol from LBA %llu to %llu (%llu LBAs)",
	      (unsigned long long)old_start, (unsigned long long)b.lba_start,
	      (unsigned long long)b.lba_count);
	printf("LIO-VOL-MOVED kmodvol lba_start=%llu lba_count=%llu\n",
	       (unsigned long long)b.lba_start, (unsigned long long)b.lba_count);
	if (r)
		return;
	r = qp_create(fd, &q, b.vol_id, LIGHTIOV_MODE_ISOLATED);
	CHECK(r == 0, "qp-create on the moved volume: %d", r);
	if (!r) {
		struct nvme_sqe s;
		struct lio_qp_ref ref;

		fill(want, XFER, 1);
		memset(win + OFF_RBUF, 0xee, XFER);
		rw_sqe(&s, NVME_CMD_READ, 0, XFER, OFF_RBUF, OFF_LIST2);
		st = qp_run(&q, &s, NULL);
		CHECK(st == 0 && !memcmp(win + OFF_RBUF, want, XFER),
		      "moved: data at window LBA 0 came along: status 0x%x", st);
		memset(want, 0, XFER);
		memset(win + OFF_RBUF, 0xee, XFER);
		rw_sqe(&s, NVME_CMD_READ, (4u << 20) >> lba_shift, XFER, OFF_RBUF, OFF_LIST2);
		st = qp_run(&q, &s, NULL);
		CHECK(st == 0 && !memcmp(win + OFF_RBUF, want, XFER),
		      "moved: the added LBAs read zeros: status 0x%x", st);
		ref.qp_id = q.id;
		CHECK(ioctl(fd, LIO_IOC_QP_DESTROY, &ref) == 0, "qp-destroy on the moved volume");
		close(q.db_fd);
		close(q.irq_fd);
	}
	*a = b;
}

/* The uid the non-root checks run as. */
#define OTHER_UID 1000

static int param_write(const char *name, unsigned int v)
{
	char path[96], val[16];

	snprintf(path, sizeof(path), "/sys/module/lightiov/parameters/%s", name);
	snprintf(val, sizeof(val), "%u", v);
	return sysfs_write(path, val);
}

/* In a child as uid OTHER_UID (no capabilities): its DMA window is charged to RLIMIT_MEMLOCK,
 * root's volume "blocker" is out of its reach, the volume it creates is its own; root's session
 * and its queue pair root_qp are not in what it may list or count. Returns the child's
 * failures. */
static int nonroot_child(const char *path, uint32_t root_qp)
{
	static struct lio_session_list sl;
	struct rlimit rl, low;
	struct lio_dma_window w;
	struct lio_vol_attach a;
	struct lio_qp_stats qs;
	struct lio_vol_list vl;
	struct lio_vol v;
	unsigned int i;
	int fd, m, r;

	failures = 0;
	if (setgroups(0, NULL) || setgid(OTHER_UID) || setuid(OTHER_UID)) {
		CHECK(0, "nonroot: setuid %d: %s", OTHER_UID, strerror(errno));
		return failures;
	}
	fd = open(path, O_RDWR | O_CLOEXEC);
	m = memfd_window(WIN_BYTES, 1);
	if (fd < 0 || m < 0) {
		CHECK(0, "nonroot: open %s as uid %d: %s", path, OTHER_UID, strerror(errno));
		return failures;
	}
	getrlimit(RLIMIT_MEMLOCK, &rl);
	low = rl;
	low.rlim_cur = WIN_BYTES / 2;
	memset(&w, 0, sizeof(w));
	w.nr_regions = 1;
	w.r[0] = (struct lio_dma_region){.gpa = WIN_GPA, .size = WIN_BYTES, .fd = m};
	if (!setrlimit(RLIMIT_MEMLOCK, &low))
		expect_errno(fd, LIO_IOC_DMA_REGISTER, &w, ENOMEM,
			     "nonroot: dma-register of 2 MiB over RLIMIT_MEMLOCK of 1 MiB");
	else
		CHECK(0, "nonroot: setrlimit: %s", strerror(errno));
	low.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= 2 * WIN_BYTES ? 2 * WIN_BYTES
										    : rl.rlim_max;
	r = setrlimit(RLIMIT_MEMLOCK, &low) ? -1 : ioctl(fd, LIO_IOC_DMA_REGISTER, &w);
	CHECK(r == 0, "nonroot: dma-register of 2 MiB under RLIMIT_MEMLOCK of %llu KiB: errno %d",
	      (unsigned long long)low.rlim_cur >> 10, r ? errno : 0);

	memset(&qs, 0, sizeof(qs));
	qs.qp_id = root_qp;
	expect_errno(fd, LIO_IOC_QP_STATS, &qs, ENOENT, "nonroot: qp-stats of root's queue pair");
	memset(&sl, 0, sizeof(sl));
	r = ioctl(fd, LIO_IOC_SESSION_LIST, &sl);
	CHECK(r == 0 && sl.total == 1 && sl.count == 1 && sl.s[0].uid == OTHER_UID,
	      "nonroot: session-list shows its own session only: rc %d total %u count %u", r,
	      sl.total, sl.count);
	for (i = 0; i < sl.count && i < LIO_SESSION_LIST_MAX; i++)
		CHECK(sl.s[i].uid == OTHER_UID, "nonroot: session-list entry %u of uid %u", i,
		      sl.s[i].uid);

	memset(&a, 0, sizeof(a));
	strcpy(a.name, "blocker");
	expect_errno(fd, LIO_IOC_VOL_ATTACH, &a, EACCES, "nonroot: vol-attach of root's volume");
	a.flags = LIO_ATTACH_READONLY;
	expect_errno(fd, LIO_IOC_VOL_ATTACH, &a, EACCES,
		     "nonroot: read-only vol-attach of root's volume");
	memset(&v, 0, sizeof(v));
	strcpy(v.name, "blocker");
	expect_errno(fd, LIO_IOC_VOL_DELETE, &v, EACCES, "nonroot: vol-delete of root's volume");
	memset(&a, 0, sizeof(a));
	strcpy(a.name, "uservol");
	a.flags = LIO_ATTACH_CREATE;
	a.size_bytes = 1u << 20;
	r = ioctl(fd, LIO_IOC_VOL_ATTACH, &a);
	CHECK(r == 0, "nonroot: vol-attach CREATE of its own volume: errno %d", r ? errno : 0);
	memset(&vl, 0, sizeof(vl));
	r = ioctl(fd, LIO_IOC_VOL_LIST, &vl);
	CHECK(r == 0 && vl.total == 1 && vl.count == 1 && !strcmp(vl.v[0].name, "uservol"),
	      "nonroot: vol-list shows its own volume only: rc %d total %u", r, vl.total);
	CHECK(ioctl(fd, LIO_IOC_VOL_DETACH, &a) == 0, "nonroot: vol-detach uservol");
	close(fd);
	fd = open(path, O_RDWR | O_CLOEXEC);
	memset(&a, 0, sizeof(a));
	strcpy(a.name, "uservol");
	r = ioctl(fd, LIO_IOC_VOL_ATTACH, &a);
	CHECK(r == 0, "nonroot: vol-attach of its own volume from a new session: errno %d",
	      r ? errno : 0);
	CHECK(ioctl(fd, LIO_IOC_VOL_DETACH, &a) == 0, "nonroot: vol-detach uservol again");
	strcpy(v.name, "uservol");
	CHECK(ioctl(fd, LIO_IOC_VOL_DELETE, &v) == 0, "nonroot: vol-delete of its own volume");
	close(fd);
	close(m);
	return failures;
}

/* Issue 23 finding 9 and finding 1's owners: limits per SSD and session, a non-root opener. */
static void limits(const char *path, int fd, uint32_t vol_id)
{
	struct lio_qp_ref ref;
	struct qp q1, q2;
	int st = -1, r, fd2;
	pid_t pid;

	CHECK(!param_write("max_sessions", 1), "max_sessions=1");
	fd2 = open(path, O_RDWR | O_CLOEXEC);
	CHECK(fd2 < 0 && errno == EMFILE, "open of a second session over max_sessions: errno %d",
	      fd2 < 0 ? errno : 0);
	if (fd2 >= 0)
		close(fd2);
	param_write("max_sessions", 64);

	CHECK(!param_write("max_session_qpairs", 1), "max_session_qpairs=1");
	r = qp_create(fd, &q1, vol_id, LIGHTIOV_MODE_ISOLATED);
	CHECK(r == 0, "qp-create under max_session_qpairs: %d", r);
	if (!r) {
		r = qp_create(fd, &q2, vol_id, LIGHTIOV_MODE_ISOLATED);
		CHECK(r == -ENOSPC, "qp-create over max_session_qpairs: %d", r);
		if (!r) {
			ref.qp_id = q2.id;
			ioctl(fd, LIO_IOC_QP_DESTROY, &ref);
		}
		close(q2.db_fd);
		close(q2.irq_fd);
		ref.qp_id = q1.id;
		CHECK(ioctl(fd, LIO_IOC_QP_DESTROY, &ref) == 0, "qp-destroy under the limit");
	}
	close(q1.db_fd);
	close(q1.irq_fd);
	param_write("max_session_qpairs", 32);

	/* the node is root's 0600: a deployment gives it to its VMs' users, as here */
	if (chmod(path, 0666)) {
		CHECK(0, "chmod %s: %s", path, strerror(errno));
		return;
	}
	/* a queue pair of root's session for the child to be refused the counters of */
	r = qp_create(fd, &q1, vol_id, LIGHTIOV_MODE_ISOLATED);
	CHECK(r == 0, "qp-create of root's queue pair for the non-root child: %d", r);
	fflush(stdout);
	pid = fork();
	if (pid == 0)
		_exit(nonroot_child(path, r ? 0 : q1.id) ? 1 : 0);
	if (pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && !WEXITSTATUS(st))
		CHECK(1, "nonroot: child as uid %d passed", OTHER_UID);
	else
		CHECK(0, "nonroot: child as uid %d: status 0x%x", OTHER_UID, st);
	if (!r) {
		ref.qp_id = q1.id;
		CHECK(ioctl(fd, LIO_IOC_QP_DESTROY, &ref) == 0, "qp-destroy of root's queue pair");
		close(q1.db_fd);
		close(q1.irq_fd);
	}
	chmod(path, 0600);
}

/* lvmm's own client code (host-kmod/client/lio_client.c) on the module: the SSD's plain name
 * resolves to its device, the ioctl transport carries every call lio_drv makes (window, queue
 * memory, two polled queue pairs), and data goes round trip. Its anonymous volume ends zeroed. */
static void client_transport(const char *name)
{
	struct lio_drv_opts o = {.mode = LIGHTIOV_MODE_ISOLATED,
				 .nr_qp = 2,
				 .depth = 32,
				 .qp_flags = LIO_QP_SQ_QMEM | LIO_QP_CQ_QMEM | LIO_QP_DB_POLL,
				 .mem_bytes = 1u << 20};
	struct lio_vol_attach a = {.flags = LIO_ATTACH_ANON, .size_bytes = 1u << 20};
	struct lio_client *c = NULL;
	struct lio_identify id;
	struct lio_drv *d = NULL;
	struct lio_qmem m = {.size = 4096};
	uint64_t wgpa, rgpa;
	uint8_t *w, *rd;
	char err[256] = "";
	uint16_t st;
	int r;

	r = lio_client_connect(&c, name, "kmod-test", &id, err, sizeof(err));
	CHECK(r == 0 && lio_client_is_dev(c) && (id.flags & LIO_ID_KERNEL),
	      "lio_client: ssd %s resolved to lightiov.ko's device: %s", name, r ? err : id.name);
	if (r)
		return;
	r = lio_client_vol_attach(c, &a);
	CHECK(r == 0 && a.lba_count == (1u << 20) >> lba_shift,
	      "lio_client: anonymous volume %s at LBA %llu: %d %s", a.name,
	      (unsigned long long)a.lba_start, r, lio_client_error(c));
	if (r)
		goto out;
	o.vol_id = a.vol_id;
	o.lba_start = a.lba_start;
	o.lba_count = a.lba_count;
	o.lba_shift = lba_shift;
	r = lio_drv_open(&d, c, &o, err, sizeof(err));
	CHECK(r == 0, "lio_client: lio_drv_open with 2 polled queue pairs in queue memory: %d %s",
	      r, err);
	if (r)
		goto out;
	r = lio_client_qmem_alloc(c, &m);
	CHECK(r == -EEXIST && strstr(lio_client_error(c), "qmem-alloc"),
	      "lio_client: second qmem-alloc: %d \"%s\"", r, lio_client_error(c));
	wgpa = lio_drv_alloc(d, 65536);
	rgpa = lio_drv_alloc(d, 65536);
	w = lio_drv_ptr(d, wgpa);
	rd = lio_drv_ptr(d, rgpa);
	if (!w || !rd)
		goto out;
	fill(w, 65536, 6);
	st = lio_drv_io(d, 0, NVME_CMD_WRITE, 8, 65536 >> lba_shift, wgpa);
	CHECK(st == 0, "lio_client: write through queue 0: status 0x%x", st);
	memset(rd, 0xee, 65536);
	st = lio_drv_io(d, 1, NVME_CMD_READ, 8, 65536 >> lba_shift, rgpa);
	CHECK(st == 0 && !memcmp(w, rd, 65536),
	      "lio_client: read back through queue 1 matches: status 0x%x", st);
	memset(w, 0, 65536);
	st = lio_drv_io(d, 0, NVME_CMD_WRITE, 8, 65536 >> lba_shift, wgpa);
	CHECK(st == 0, "lio_client: zeros written back: status 0x%x", st);
out:
	if (d)
		lio_drv_close(d);
	lio_client_close(c);
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "/dev/lightiov/lio0";
	struct lio_identify id;
	struct lio_dma_window w;
	struct lio_vol_attach a, a2;
	struct lio_qp_stats qs;
	struct lio_ssd_stats ss;
	struct lio_vol_list vl;
	struct lio_qp_ref ref;
	struct nvme_sqe s;
	struct qp q;
	int fd, fd2, memfd, r, st;
	uint64_t lba_start, lba_count;

	setvbuf(stdout, NULL, _IOLBF, 0);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		printf("LIO-FAIL open %s: %s\nLIO-DONE failures=1\n", path, strerror(errno));
		return 1;
	}
	r = ioctl(fd, LIO_IOC_IDENTIFY, &id);
	CHECK(r == 0 && id.abi_version == LIO_ABI_VERSION && (id.flags & LIO_ID_KERNEL) &&
		  (id.flags & LIO_ID_DB_EVENTFD),
	      "identify: rc %d abi %u flags 0x%x name %s model '%s' lba_shift %u capacity %llu", r,
	      id.abi_version, id.flags, id.name, id.model, id.lba_shift,
	      (unsigned long long)id.capacity_lbas);
	lba_shift = id.lba_shift;

	memfd = memfd_window(WIN_BYTES, 1);
	win = memfd < 0 ? MAP_FAILED
			: mmap(NULL, WIN_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	if (win == MAP_FAILED) {
		printf("LIO-FAIL memfd window: %s\nLIO-DONE failures=1\n", strerror(errno));
		return 1;
	}
	bad_args(fd, memfd);

	memset(&w, 0, sizeof(w));
	w.nr_regions = 1;
	w.r[0] = (struct lio_dma_region){.gpa = WIN_GPA, .size = WIN_BYTES, .fd = memfd};
	r = ioctl(fd, LIO_IOC_DMA_REGISTER, &w);
	CHECK(r == 0, "dma-register of %u KiB at 0x%llx: rc %d errno %d", WIN_BYTES >> 10, WIN_GPA,
	      r, r ? errno : 0);

	memset(&a, 0, sizeof(a));
	strcpy(a.name, "kmodvol");
	a.flags = LIO_ATTACH_CREATE;
	a.size_bytes = 4u << 20;
	r = ioctl(fd, LIO_IOC_VOL_ATTACH, &a);
	CHECK(r == 0 && a.lba_count == (4u << 20) >> lba_shift, "vol-attach kmodvol: rc %d", r);
	lba_start = a.lba_start;
	lba_count = a.lba_count;
	printf("LIO-VOL kmodvol lba_start=%llu lba_count=%llu lba_shift=%u\n",
	       (unsigned long long)lba_start, (unsigned long long)lba_count, lba_shift);
	a2 = a;
	a2.flags = 0;
	expect_errno(fd, LIO_IOC_VOL_ATTACH, &a2, EBUSY, "second read-write attach of kmodvol");
	fd2 = open(path, O_RDWR | O_CLOEXEC);
	a2 = a;
	a2.flags = LIO_ATTACH_READONLY;
	expect_errno(fd2, LIO_IOC_VOL_ATTACH, &a2, EBUSY, "read-only attach from another session");
	memset(&vl, 0, sizeof(vl));
	r = ioctl(fd2, LIO_IOC_VOL_LIST, &vl);
	CHECK(r == 0 && vl.total >= 1 && !strcmp(vl.v[0].name, "kmodvol") && vl.v[0].users == 1,
	      "vol-list from another session: rc %d total %u users %u", r, vl.total, vl.v[0].users);
	close(fd2);
	bad_qp_args(fd, a.vol_id);

	/* isolated: window-relative LBAs, every SQE checked */
	r = qp_create(fd, &q, a.vol_id, LIGHTIOV_MODE_ISOLATED);
	CHECK(r == 0, "qp-create isolated: %d", r);
	if (!r) {
		io_roundtrip(&q, "isolated", 0, XFER, 1);
		io_roundtrip(&q, "isolated", lba_count - (8192 >> lba_shift), 8192, 2);
		hostile(&q, lba_count);
		w.r[0].size = WIN_BYTES;
		expect_errno(fd, LIO_IOC_DMA_REGISTER, &w, EBUSY, "dma-register with a queue pair");
		expect_errno(fd, LIO_IOC_VOL_DETACH, &a, EBUSY, "vol-detach of a serving volume");
		memset(&qs, 0, sizeof(qs));
		qs.qp_id = q.id;
		r = ioctl(fd, LIO_IOC_QP_STATS, &qs);
		CHECK(r == 0 && qs.rejected >= 7 && qs.cmds >= 14 && qs.write_bytes >= XFER &&
			  qs.irqs > 0,
		      "qp-stats isolated: cmds %llu rejected %llu written %llu irqs %llu",
		      (unsigned long long)qs.cmds, (unsigned long long)qs.rejected,
		      (unsigned long long)qs.write_bytes, (unsigned long long)qs.irqs);
		CHECK(q.irqs >= q.cmds && q.cmds == 14,
		      "isolated: %u commands completed, %u irq eventfd signals", q.cmds, q.irqs);
		ref.qp_id = q.id;
		CHECK(ioctl(fd, LIO_IOC_QP_DESTROY, &ref) == 0, "qp-destroy isolated");
		close(q.db_fd);
		close(q.irq_fd);
	}

	/* passthrough: the guest adds lba_start itself */
	r = qp_create(fd, &q, a.vol_id, LIGHTIOV_MODE_PASSTHROUGH);
	CHECK(r == 0, "qp-create passthrough: %d", r);
	if (!r) {
		io_roundtrip(&q, "passthrough", lba_start + (XFER >> lba_shift), XFER, 3);
		CHECK(q.irqs >= q.cmds && q.cmds == 3,
		      "passthrough: %u commands completed, %u irq eventfd signals", q.cmds, q.irqs);
		/* absolute LBAs, but only those of the attached volume (issue 23, finding 1) */
		rw_sqe(&s, NVME_CMD_READ, lba_start + lba_count, 4096, OFF_RBUF, OFF_LIST2);
		st = qp_run(&q, &s, NULL);
		CHECK(st > 0 && (st & 0xff) == NVME_SC_LBA_RANGE,
		      "passthrough: read past the attached volume: status 0x%x", st);
		rw_sqe(&s, NVME_CMD_WRITE, lba_start + lba_count, 4096, OFF_WBUF, OFF_LIST);
		st = qp_run(&q, &s, NULL);
		CHECK(st > 0 && (st & 0xff) == NVME_SC_LBA_RANGE,
		      "passthrough: write past the attached volume: status 0x%x", st);
		/* a hostile tail: the queue stops, nothing else */
		__atomic_store_n(q.sq_db, DEPTH + 5, __ATOMIC_RELEASE);
		{
			uint64_t one = 1;

			CHECK(write(q.db_fd, &one, 8) == 8, "passthrough: doorbell with tail %u",
			      DEPTH + 5);
		}
		usleep(200000);
		ref.qp_id = q.id;
		CHECK(ioctl(fd, LIO_IOC_QP_DESTROY, &ref) == 0, "qp-destroy passthrough");
		close(q.db_fd);
		close(q.irq_fd);
	}
	client_transport(id.name);
	if (!qmem_setup(fd)) {
		qmem_polled(fd, a.vol_id);
		direct(fd, a.vol_id, lba_start);
	}
	r = ioctl(fd, LIO_IOC_SSD_STATS, &ss);
	CHECK(r == 0 && ss.sessions == 1 && ss.qpairs == 0 && ss.rejected >= 7 &&
		  ss.write_bytes >= 2 * XFER,
	      "ssd-stats: sessions %u qpairs %u cmds %llu rejected %llu", ss.sessions, ss.qpairs,
	      (unsigned long long)ss.cmds, (unsigned long long)ss.rejected);
	resize_moved(fd, &a, lba_start);
	limits(path, fd, a.vol_id);
	CHECK(ioctl(fd, LIO_IOC_VOL_DETACH, &a) == 0, "vol-detach kmodvol");
	close(fd);
	printf("LIO-DONE failures=%d\n", failures);
	return failures ? 1 : 0;
}
