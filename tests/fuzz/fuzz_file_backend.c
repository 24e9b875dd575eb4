/* libFuzzer target for the io_uring file backend under the vNVMe controller, its I/O thread as in
 * lvmm, with injected EIO, ENOSPC, short reads and writes: every command completes exactly once. */
#include <dirent.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "nvme-lightiov/nvme_file.h"
#include "fuzz_util.h"
#include "seccomp_filter.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define RAM_SIZE  (1u << 20)
#define DISK_SIZE (1u << 20)
#define DSTRD	  10 /* lvmm's stride for the file backend (devices/nvme-lightiov/vnvme_pci.c) */
#define QS	  64
#define ASQ_GPA	  0x1000ULL
#define ACQ_GPA	  0x2000ULL
#define IOSQ_GPA  0x3000ULL
#define IOCQ_GPA  0x4000ULL
#define DATA_GPA  0x10000ULL /* transfers and PRP lists live in [DATA_GPA, RAM_SIZE) */
#define WAIT_S	  30	     /* a command not completed by then is lost: a finding */
static uint8_t *ram;
static struct guest_mem gm;
static int backing = -1;
static char backing_path[64];
static bool opened; /* the backend opened once: a later failure is a finding */
static unsigned inputs, fds_at_start;

/* Open file descriptors now: an input that leaks one (eventfd, ring, backing) shows as growth. */
static unsigned fz_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	unsigned n = 0;

	if (!d)
		return 0;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* Interrupts from the I/O thread: the harness sleeps on them, never on a timer. */
static pthread_mutex_t irq_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t irq_cond = PTHREAD_COND_INITIALIZER;
static unsigned irq_count;

struct fz_q {
	unsigned qid, tail, head, phase;
	uint64_t sq, cq;
	unsigned outstanding;
};

struct fz {
	struct fz_in in; /* the input still to read */
	struct nvme_ctrl *c;
	struct fz_q q[2];
	uint8_t done[65536]; /* completions seen per I/O command id */
	bool sent[65536];
	uint16_t next_cid;
};

static void fz_irq(void *opaque, unsigned vector)
{
	(void)opaque;
	(void)vector;
	pthread_mutex_lock(&irq_lock);
	irq_count++;
	pthread_cond_broadcast(&irq_cond);
	pthread_mutex_unlock(&irq_lock);
}

static void fz_kick(void *opaque)
{
	nvme_file_kick(opaque);
}

static void w32(struct nvme_ctrl *c, uint64_t off, uint32_t v)
{
	nvme_ctrl_bar0_write(c, off, &v, 4);
}

static uint64_t db_off(unsigned qid, bool cq)
{
	return 0x1000 + (uint64_t)(2 * qid + cq) * (4u << DSTRD);
}

static void fz_push(struct fz *f, struct fz_q *q, const struct nvme_sqe *s)
{
	memcpy(ram + q->sq + (uint64_t)q->tail * 64, s, 64);
	q->tail = (q->tail + 1) % QS;
	q->outstanding++;
}

/* Takes the completions posted so far; each I/O command id must come back once. */
static void fz_reap(struct fz *f, struct fz_q *q)
{
	for (;;) {
		uint8_t *slot = ram + q->cq + (uint64_t)q->head * 16;
		struct nvme_cqe e;

		/* as a driver does: the phase tag first (acquire), the rest of the entry after it;
		 * one copy of all 16 bytes may read the cid before the controller wrote it */
		if ((__atomic_load_n((uint16_t *)(slot + 14), __ATOMIC_ACQUIRE) & 1) != q->phase)
			break;
		memcpy(&e, slot, 16);
		if (!q->outstanding) {
			fprintf(stderr,
				"fuzz_file_backend: queue %u: completion of cid %u with "
				"nothing outstanding\n",
				q->qid, e.cid);
			abort();
		}
		if (q->qid && (!f->sent[e.cid] || f->done[e.cid]++)) {
			fprintf(stderr, "fuzz_file_backend: cid %u completed %s\n", e.cid,
				f->sent[e.cid] ? "twice" : "but never sent");
			abort();
		}
		q->outstanding--;
		if (++q->head == QS) {
			q->head = 0;
			q->phase ^= 1;
		}
		w32(f->c, db_off(q->qid, true), q->head);
	}
}

/* Rings the queue's doorbell and waits until everything sent on it has completed. */
static void fz_ring_wait(struct fz *f, struct fz_q *q)
{
	struct timespec until;

	w32(f->c, db_off(q->qid, false), q->tail);
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += WAIT_S;
	for (;;) {
		unsigned seen;

		pthread_mutex_lock(&irq_lock);
		seen = irq_count;
		pthread_mutex_unlock(&irq_lock);
		fz_reap(f, q);
		if (!q->outstanding)
			return;
		pthread_mutex_lock(&irq_lock);
		while (irq_count == seen)
			if (pthread_cond_timedwait(&irq_cond, &irq_lock, &until)) {
				fprintf(stderr,
					"fuzz_file_backend: queue %u: %u commands not "
					"completed in %d s\n",
					q->qid, q->outstanding, WAIT_S);
				abort();
			}
		pthread_mutex_unlock(&irq_lock);
	}
}

static void fz_admin(struct fz *f, uint8_t op, uint32_t cdw10, uint32_t cdw11, uint64_t prp1)
{
	struct nvme_sqe s = {
	    .opcode = op, .cid = f->q[0].tail, .cdw10 = cdw10, .cdw11 = cdw11, .prp1 = prp1};

	fz_push(f, &f->q[0], &s);
	fz_ring_wait(f, &f->q[0]);
}

static void fz_bring_up(struct fz *f)
{
	uint64_t a = ASQ_GPA;

	f->q[0] = (struct fz_q){.qid = 0, .sq = ASQ_GPA, .cq = ACQ_GPA, .phase = 1};
	f->q[1] = (struct fz_q){.qid = 1, .sq = IOSQ_GPA, .cq = IOCQ_GPA, .phase = 1};
	w32(f->c, NVME_REG_AQA, (QS - 1) << 16 | (QS - 1));
	nvme_ctrl_bar0_write(f->c, NVME_REG_ASQ, &a, 8);
	a = ACQ_GPA;
	nvme_ctrl_bar0_write(f->c, NVME_REG_ACQ, &a, 8);
	w32(f->c, NVME_REG_CC, NVME_CC_EN | 6 << 16 | 4 << 20);
	fz_admin(f, NVME_ADMIN_CREATE_CQ, (QS - 1) << 16 | 1, 1 << 16 | 3, IOCQ_GPA);
	fz_admin(f, NVME_ADMIN_CREATE_SQ, (QS - 1) << 16 | 1, 1 << 16 | 1, IOSQ_GPA);
}

/* Data pointers inside RAM: page-aligned (O_DIRECT), or at any 4-byte offset (page cache). */
static uint64_t fz_data(struct fz *f, uint8_t sel)
{
	uint64_t page =
	    DATA_GPA + (fz_take(&f->in, 1) % ((RAM_SIZE - DATA_GPA) / 4096 - 40)) * 4096;

	return sel & 1 ? page + (fz_take(&f->in, 1) & 0xff) * 4 : page;
}

static void fz_io(struct fz *f, uint8_t op)
{
	static const uint8_t opcodes[] = {NVME_CMD_READ,	 NVME_CMD_WRITE, NVME_CMD_FLUSH,
					  NVME_CMD_WRITE_ZEROES, NVME_CMD_DSM,	 NVME_CMD_READ,
					  NVME_CMD_WRITE};
	struct nvme_sqe s = {.nsid = 1};
	unsigned kind = (op >> 2) & 7;
	uint64_t prp1 = fz_data(f, op >> 5), prp2;
	uint32_t nlb = (uint32_t)fz_take(&f->in, 1) & 0x7f; /* up to 64 KiB of 512-byte blocks */

	s.opcode = kind < sizeof(opcodes) ? opcodes[kind] : (uint8_t)fz_take(&f->in, 1);
	s.cid = f->next_cid++;
	s.prp1 = prp1;
	/* a second page, or a PRP list of the following pages for longer transfers */
	prp2 = (prp1 & ~0xfffULL) + 0x1000;
	if (nlb * 512 + (prp1 & 0xfff) >= 2 * 4096) {
		uint64_t list = RAM_SIZE - 4096, *l = (uint64_t *)(ram + list);

		for (unsigned i = 0; i < 512; i++)
			l[i] = prp2 + (uint64_t)i * 4096;
		prp2 = list;
	}
	s.prp2 = prp2;
	s.cdw10 = (uint32_t)fz_take(&f->in, 2) % (DISK_SIZE / 512 + 8); /* a few past the end */
	s.cdw12 = nlb | (op & 0x80 ? 1u << 30 : 0);			/* FUA */
	if (s.opcode == NVME_CMD_DSM) {
		uint32_t *r = (uint32_t *)(ram + (prp1 & ~0xfffULL));

		s.cdw10 = nlb & 7; /* ranges - 1 */
		s.cdw11 = 1u << 2; /* deallocate */
		for (unsigned i = 0; i <= (nlb & 7); i++) {
			r[4 * i + 1] = (uint32_t)fz_take(&f->in, 1) * 8; /* blocks */
			r[4 * i + 2] = (uint32_t)fz_take(&f->in, 2) % (DISK_SIZE / 512); /* slba */
			r[4 * i + 3] = 0;
		}
		s.prp1 = prp1 & ~0xfffULL;
	}
	f->sent[s.cid] = true;
	fz_push(f, &f->q[1], &s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct nvme_ctrl_params p = {
	    .mqes = QS - 1, .dstrd = DSTRD, .max_ioqs = 1, .nvectors = 2, .serial = "FUZZFILE"};
	struct vnvme_config cfg;
	struct nvme_ctrl_hooks h = {.irq = fz_irq, .kick = fz_kick};
	static struct fz f;
	struct nvme_file *file;
	uint64_t disk_size;
	unsigned steps = 0;
	char err[160];

	if (!ram) {
		ram = aligned_alloc(4096, RAM_SIZE);
		backing = memfd_create("fuzz-file-backend", MFD_CLOEXEC);
		if (!ram || backing < 0)
			abort();
		snprintf(backing_path, sizeof(backing_path), "/proc/self/fd/%d", backing);
		gmem_init_buffer(&gm, ram, RAM_SIZE);
	}
	memset(ram, 0, 0x10000);
	memset(&f, 0, sizeof(f));
	f.in.p = data;
	f.in.n = size;
	memset(&cfg, 0, sizeof(cfg));
	snprintf(cfg.id, sizeof(cfg.id), "fuzz");
	snprintf(cfg.path, sizeof(cfg.path), "%s", backing_path);
	cfg.size = DISK_SIZE;
	if (nvme_file_open(&cfg, &file, &disk_size, err, sizeof(err))) {
		/* a host without io_uring (a container's seccomp profile) cannot run this target:
		 * say so and leave with 77, which the runners count as skipped, not clean */
		if (!opened) {
			fprintf(stderr, "fuzz_file_backend: SKIP: %s\n", err);
			_exit(77);
		}
		fprintf(stderr, "fuzz_file_backend: %s\n", err);
		abort();
	}
	opened = true;
	/* first byte: the fault (kind, and after how many matching requests) */
	nvme_file_set_fault(file, (enum nvme_file_fault)(fz_take(&f.in, 1) % NVME_FILE_FAULT_KINDS),
			    fz_take(&f.in, 1) & 7);
	p.size = disk_size;
	h.opaque = file;
	if (nvme_ctrl_create(&p, &gm, &nvme_file_ops, file, &h, &f.c, err, sizeof(err)) ||
	    nvme_file_start(file, f.c, seccomp_io_thread_install, err, sizeof(err))) {
		fprintf(stderr, "fuzz_file_backend: %s\n", err);
		abort();
	}
	fz_bring_up(&f);
	while (f.in.n && steps++ < 128) {
		uint8_t op = (uint8_t)fz_take(&f.in, 1);

		switch (op & 3) {
		case 0:
		case 1:
			fz_io(&f, op);
			/* a full batch goes out at once; otherwise the input says when */
			if (f.q[1].outstanding < QS / 2)
				break;
			/* fall through */
		case 2:
			fz_ring_wait(&f, &f.q[1]);
			break;
		default: /* the volatile write cache off or on (Set Features 06h) */
			fz_admin(&f, NVME_ADMIN_SET_FEATURES, 0x06, (op >> 2) & 1, 0);
			break;
		}
	}
	fz_ring_wait(&f, &f.q[1]);
	nvme_file_close(file); /* joins the I/O thread: nothing may complete after this */
	for (unsigned cid = 0; cid < f.next_cid; cid++)
		if (f.done[cid] != 1) {
			fprintf(stderr, "fuzz_file_backend: cid %u completed %u times\n", cid,
				f.done[cid]);
			abort();
		}
	nvme_ctrl_destroy(f.c);
	/* the first input's count is the baseline (libFuzzer's own fds included) */
	if (!inputs++)
		fds_at_start = fz_fds();
	else if (!(inputs & 255) && fz_fds() > fds_at_start + 4) {
		fprintf(stderr,
			"fuzz_file_backend: %u fds open after %u inputs, %u after the first\n",
			fz_fds(), inputs, fds_at_start);
		abort();
	}
	return 0;
}
