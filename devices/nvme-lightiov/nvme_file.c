/* File backend: raw image through io_uring (O_DIRECT where the file system and the buffer allow),
 * Flush as fdatasync, deallocation as hole punching; one I/O thread owns the ring. Write Zeroes
 * and Deallocate are queued and run by that thread outside the controller lock, a bounded step
 * at a time between its other work, so a 256-range DSM neither holds the lock nor a stop. */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <linux/falloc.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fsutil.h"
#include "dev_ring.h"
#include "nvme_file.h"
#include "nvme_int.h"

static const uint8_t ring_ops[] = {IORING_OP_READV, IORING_OP_WRITEV, IORING_OP_FSYNC};

#define NVME_FILE_RING	    256
#define NVME_FILE_ALIGN	    512
#define NVME_FILE_ZERO_STEP (1u << 20) /* bytes one step of a zeroing covers at most */

/* A Write Zeroes or Deallocate waiting for the I/O thread, with its progress. */
struct zero_job {
	struct nvme_io_req *req;
	bool sync;	/* the volatile write cache was off at submission: fdatasync at the end */
	unsigned range; /* next range (Deallocate), 0 for Write Zeroes */
	uint64_t done;	/* bytes of that range already zeroed */
	struct zero_job *next;
};

struct nvme_file {
	char name[64];
	int fd;	       /* buffered */
	int fd_direct; /* O_DIRECT, or -1 */
	bool readonly;
	uint64_t size;
	struct io_uring ring;
	bool ring_ok;
	int kick_fd, ring_fd;
	int (*confine)(char *err, unsigned errlen); /* first call of the I/O thread, or NULL */
	pthread_t thread;
	bool running, stop;
	struct nvme_ctrl *ctrl;
	unsigned pending; /* requests in the ring (I/O thread only) */
	/* queued zeroings: submit appends (controller lock held), the I/O thread takes */
	pthread_mutex_t zlock;
	struct zero_job *zhead, *ztail;
	void (*zero_hook)(struct nvme_file *f, void *opaque); /* tests, before each step */
	void *zero_hook_opaque;
	/* written through (FUA or cache off) under the controller lock; synced zeroings (atomic) */
	uint64_t durable_writes, syncs;
	/* LVMM_FAULT_FILE (tests): which completions turn into errors (I/O thread only) */
	enum nvme_file_fault fault;
	uint64_t fault_after, fault_seen;
};

/* LVMM_FAULT_FILE=KIND[@N]: every matching request after the first N completes as the backing
 * file failing in that way (eio-read, eio-write, eio-flush, enospc, short-write, short-read).
 * For tests of the guest-visible error path; a value not understood is reported and ignored. */
static void nvme_file_faults_init(struct nvme_file *f)
{
	static const char *const kinds[] = {
	    [NVME_FILE_FAULT_EIO_READ] = "eio-read",
	    [NVME_FILE_FAULT_EIO_WRITE] = "eio-write",
	    [NVME_FILE_FAULT_EIO_FLUSH] = "eio-flush",
	    [NVME_FILE_FAULT_ENOSPC] = "enospc",
	    [NVME_FILE_FAULT_SHORT_WRITE] = "short-write",
	    [NVME_FILE_FAULT_SHORT_READ] = "short-read",
	};
	const char *e = getenv("LVMM_FAULT_FILE");
	unsigned i;

	if (!e || !*e)
		return;
	for (i = 1; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		size_t n = strlen(kinds[i]);
		char *end;

		if (strncmp(e, kinds[i], n) || (e[n] && e[n] != '@'))
			continue;
		f->fault = (enum nvme_file_fault)i;
		if (e[n] == '@') {
			errno = 0;
			f->fault_after = strtoull(e + n + 1, &end, 10);
			if (errno || *end || end == e + n + 1)
				break;
		}
		fprintf(stderr, "lvmm: vnvme %s: LVMM_FAULT_FILE=%s: injecting faults\n", f->name,
			e);
		return;
	}
	f->fault = NVME_FILE_FAULT_NONE;
	fprintf(stderr, "lvmm: vnvme %s: LVMM_FAULT_FILE=%s not understood (ignored)\n", f->name,
		e);
}

/* The result the backing file would have given under the injected fault. */
static int nvme_file_fault_res(struct nvme_file *f, const struct nvme_io_req *req, int res)
{
	bool hit;

	switch (f->fault) {
	case NVME_FILE_FAULT_EIO_READ:
	case NVME_FILE_FAULT_SHORT_READ:
		hit = req->op == NVME_IO_READ;
		break;
	case NVME_FILE_FAULT_EIO_FLUSH:
		hit = req->op == NVME_IO_FLUSH;
		break;
	case NVME_FILE_FAULT_EIO_WRITE:
	case NVME_FILE_FAULT_ENOSPC:
	case NVME_FILE_FAULT_SHORT_WRITE:
		hit = req->op == NVME_IO_WRITE;
		break;
	default:
		return res;
	}
	if (!hit || f->fault_seen++ < f->fault_after)
		return res;
	if (f->fault == NVME_FILE_FAULT_ENOSPC)
		return -ENOSPC;
	if (f->fault == NVME_FILE_FAULT_SHORT_WRITE || f->fault == NVME_FILE_FAULT_SHORT_READ)
		return res > 0 ? res / 2 : res;
	return -EIO;
}

void nvme_file_set_fault(struct nvme_file *f, enum nvme_file_fault kind, uint64_t after)
{
	f->fault = kind < NVME_FILE_FAULT_KINDS ? kind : NVME_FILE_FAULT_NONE;
	f->fault_after = after;
	f->fault_seen = 0;
}

static int file_prepare(struct nvme_file *f, const struct vnvme_config *cfg, char *err,
			unsigned errlen)
{
	int flags = cfg->readonly ? O_RDONLY : O_RDWR | O_CREAT;
	char self[64];
	struct stat st;

	/* Only a sized device may create its image: never leave an empty file behind. */
	if (!cfg->size && stat(cfg->path, &st) < 0 && errno == ENOENT) {
		snprintf(err, errlen, "vnvme %s: %s does not exist and no size= was given", f->name,
			 cfg->path);
		return -ENOENT;
	}
	if (cfg->root) {
		/* confined: walked beneath the root, the name never looked up again */
		f->fd = fsutil_open(cfg->root, "vnvme backing", cfg->path,
				    cfg->size ? flags : flags & ~O_CREAT, 0644,
				    FSUTIL_REGULAR_OR_BLOCK, err, errlen);
		if (f->fd < 0)
			return f->fd;
	} else {
		f->fd = open(cfg->path, flags | O_CLOEXEC, 0644);
	}
	if (f->fd < 0) {
		snprintf(err, errlen, "vnvme %s: cannot open %s: %s", f->name, cfg->path,
			 strerror(errno));
		return -errno;
	}
	if (fstat(f->fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "vnvme %s: %s is not a regular file", f->name, cfg->path);
		return -EINVAL;
	}
	f->size = cfg->size ? cfg->size : (uint64_t)st.st_size;
	if (!f->size || f->size % NVME_FILE_ALIGN) {
		snprintf(err, errlen, "vnvme %s: size %llu of %s is not a non-zero multiple of 512",
			 f->name, (unsigned long long)f->size, cfg->path);
		return -EINVAL;
	}
	if ((uint64_t)st.st_size < f->size) {
		if (cfg->readonly) {
			snprintf(err, errlen,
				 "vnvme %s: read-only %s is %llu bytes, smaller than %llu", f->name,
				 cfg->path, (unsigned long long)st.st_size,
				 (unsigned long long)f->size);
			return -EINVAL;
		}
		if (ftruncate(f->fd, (off_t)f->size) < 0) {
			snprintf(err, errlen, "vnvme %s: cannot size %s to %llu: %s", f->name,
				 cfg->path, (unsigned long long)f->size, strerror(errno));
			return -errno;
		}
	}
	/* Not every file system takes O_DIRECT (tmpfs on older kernels): fall back quietly. The
	 * same file reopened through its fd, not its name (which may have changed since). */
	snprintf(self, sizeof(self), "/proc/self/fd/%d", f->fd);
	f->fd_direct = open(self, (cfg->readonly ? O_RDONLY : O_RDWR) | O_DIRECT | O_CLOEXEC);
	return 0;
}

int nvme_file_open(const struct vnvme_config *cfg, struct nvme_file **out, uint64_t *size,
		   char *err, unsigned errlen)
{
	struct nvme_file *f = calloc(1, sizeof(*f));
	int r;

	if (!f) {
		snprintf(err, errlen, "vnvme %s: out of memory", cfg->id);
		return -ENOMEM;
	}
	snprintf(f->name, sizeof(f->name), "%s", cfg->id[0] ? cfg->id : "nvme");
	f->fd = f->fd_direct = f->kick_fd = f->ring_fd = -1;
	f->readonly = cfg->readonly;
	pthread_mutex_init(&f->zlock, NULL);
	if (!cfg->path[0]) {
		snprintf(err, errlen, "vnvme %s: no backing file (file=PATH)", f->name);
		nvme_file_close(f);
		return -EINVAL;
	}
	r = file_prepare(f, cfg, err, errlen);
	if (r) {
		nvme_file_close(f);
		return r;
	}
	f->kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	f->ring_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (f->kick_fd < 0 || f->ring_fd < 0) {
		snprintf(err, errlen, "vnvme %s: eventfd set-up failed: %s", f->name,
			 strerror(errno));
		nvme_file_close(f);
		return -EIO;
	}
	/* read, write and flush the fds lvmm hands the ring, nothing else */
	r = dev_ring_init(&f->ring, NVME_FILE_RING, f->ring_fd, ring_ops, sizeof(ring_ops));
	if (r < 0) {
		snprintf(err, errlen, "vnvme %s: io_uring set-up failed: %s", f->name,
			 strerror(-r));
		nvme_file_close(f);
		return r;
	}
	f->ring_ok = true;
	nvme_file_faults_init(f);
	*size = f->size;
	*out = f;
	return 0;
}

static bool req_aligned(const struct nvme_io_req *req)
{
	unsigned i;

	for (i = 0; i < req->niov; i++)
		if ((uintptr_t)req->iov[i].iov_base % NVME_FILE_ALIGN ||
		    req->iov[i].iov_len % NVME_FILE_ALIGN)
			return false;
	return true;
}

static struct io_uring_sqe *ring_sqe(struct nvme_file *f)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&f->ring);

	if (!sqe) {
		io_uring_submit(&f->ring);
		sqe = io_uring_get_sqe(&f->ring);
	}
	return sqe;
}

/* Zeroes [off, off+len): a hole where the file system can punch one, written zeroes otherwise. */
static int file_zero(struct nvme_file *f, uint64_t off, uint64_t len)
{
	static const uint8_t zeroes[65536];

	if (!fallocate(f->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len))
		return 0;
	if (!fallocate(f->fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len))
		return 0;
	while (len) {
		size_t n = len < sizeof(zeroes) ? len : sizeof(zeroes);
		ssize_t w = pwrite(f->fd, zeroes, n, (off_t)off);

		if (w <= 0)
			return -EIO;
		off += (uint64_t)w;
		len -= (uint64_t)w;
	}
	return 0;
}

/* Whether req must be durable before it completes: a FUA write, or any change while the guest
 * has the volatile write cache switched off (Set Features 06h = 0): a completion then promises
 * the data is on stable media, whichever fd (O_DIRECT or page cache) carries it. Called with
 * the controller lock held (submit), which guards feat_vwc. */
static bool file_write_through(const struct nvme_io_req *req)
{
	return req->fua || !req->ctrl->feat_vwc;
}

/* Queues a zeroing for the I/O thread (controller lock held: nothing long here). */
static int zero_queue(struct nvme_file *f, struct nvme_io_req *req)
{
	struct zero_job *j = calloc(1, sizeof(*j));

	if (!j) {
		req->status = NVME_GENERIC(NVME_SC_INTERNAL);
		return 1;
	}
	j->req = req;
	j->sync = file_write_through(req);
	pthread_mutex_lock(&f->zlock);
	if (f->ztail)
		f->ztail->next = j;
	else
		f->zhead = j;
	f->ztail = j;
	pthread_mutex_unlock(&f->zlock);
	/* submit runs on the I/O thread (kick) or a vCPU (no kick hook): wake it either way */
	nvme_file_kick(f);
	return 0;
}

/* The first queued zeroing, or NULL; with pop, taken off the queue. */
static struct zero_job *zero_head(struct nvme_file *f, bool pop)
{
	struct zero_job *j;

	pthread_mutex_lock(&f->zlock);
	j = f->zhead;
	if (j && pop) {
		f->zhead = j->next;
		if (!f->zhead)
			f->ztail = NULL;
	}
	pthread_mutex_unlock(&f->zlock);
	return j;
}

static void zero_finish(struct nvme_file *f, struct zero_job *j)
{
	struct nvme_io_req *req = j->req;

	zero_head(f, true);
	if (req->status == NVME_OK && j->sync) {
		__atomic_fetch_add(&f->syncs, 1, __ATOMIC_RELAXED);
		if (fdatasync(f->fd))
			req->status = nvme_sc(NVME_SCT_MEDIA, NVME_SC_WRITE_FAULT, false);
	}
	free(j);
	nvme_ctrl_io_done(req);
}

/* I/O thread, no controller lock: one bounded step of the first queued zeroing; true while
 * zeroings remain. A failed range fails the command, the others are still zeroed. */
static bool zero_step(struct nvme_file *f)
{
	struct zero_job *j = zero_head(f, false);
	struct nvme_io_req *req;
	uint64_t off, len, n;

	if (!j)
		return false;
	req = j->req;
	if (req->op == NVME_IO_DISCARD && j->range >= req->nranges) {
		zero_finish(f, j);
		return zero_head(f, false) != NULL;
	}
	off = req->op == NVME_IO_DISCARD ? req->ranges[j->range].off : req->off;
	len = req->op == NVME_IO_DISCARD ? req->ranges[j->range].len : req->len;
	n = len - j->done < NVME_FILE_ZERO_STEP ? len - j->done : NVME_FILE_ZERO_STEP;
	if (f->zero_hook)
		f->zero_hook(f, f->zero_hook_opaque);
	if (n && file_zero(f, off + j->done, n))
		req->status = nvme_sc(NVME_SCT_MEDIA, NVME_SC_WRITE_FAULT, false);
	j->done += n;
	if (j->done >= len) {
		j->done = 0;
		j->range++;
		if (req->op != NVME_IO_DISCARD)
			zero_finish(f, j);
	}
	return zero_head(f, false) != NULL;
}

/* A stop fails the zeroings not yet done (their steps so far stay zeroed). */
static void zero_fail_all(struct nvme_file *f)
{
	struct zero_job *j;

	while ((j = zero_head(f, true))) {
		j->req->status = NVME_GENERIC(NVME_SC_INTERNAL);
		nvme_ctrl_io_done(j->req);
		free(j);
	}
}

void nvme_file_set_zero_hook(struct nvme_file *f, void (*hook)(struct nvme_file *f, void *opaque),
			     void *opaque)
{
	f->zero_hook = hook;
	f->zero_hook_opaque = opaque;
}

static int file_submit(void *opaque, struct nvme_io_req *req)
{
	struct nvme_file *f = opaque;
	struct io_uring_sqe *sqe;
	int fd;

	req->status = NVME_OK;
	switch (req->op) {
	case NVME_IO_READ:
	case NVME_IO_WRITE:
		fd = f->fd_direct >= 0 && req_aligned(req) ? f->fd_direct : f->fd;
		sqe = ring_sqe(f);
		if (!sqe)
			break;
		if (req->op == NVME_IO_READ)
			io_uring_prep_readv(sqe, fd, req->iov, req->niov, req->off);
		else
			io_uring_prep_writev(sqe, fd, req->iov, req->niov, req->off);
		if (req->op == NVME_IO_WRITE && file_write_through(req)) {
			sqe->rw_flags = RWF_DSYNC;
			f->durable_writes++;
		}
		io_uring_sqe_set_data(sqe, req);
		f->pending++;
		return 0;
	case NVME_IO_FLUSH:
		sqe = ring_sqe(f);
		if (!sqe)
			break;
		io_uring_prep_fsync(sqe, f->fd, IORING_FSYNC_DATASYNC);
		io_uring_sqe_set_data(sqe, req);
		f->pending++;
		return 0;
	case NVME_IO_ZEROES:
	case NVME_IO_DISCARD:
		return zero_queue(f, req);
	}
	req->status = NVME_GENERIC(NVME_SC_INTERNAL);
	return 1;
}

const struct nvme_backend_ops nvme_file_ops = {
    .submit = file_submit,
};

static void ring_reap(struct nvme_file *f)
{
	struct io_uring_cqe *cqe;

	while (io_uring_peek_cqe(&f->ring, &cqe) == 0) {
		struct nvme_io_req *req = io_uring_cqe_get_data(cqe);
		int res = nvme_file_fault_res(f, req, cqe->res);

		io_uring_cqe_seen(&f->ring, cqe);
		f->pending--;
		if (req->op == NVME_IO_FLUSH)
			req->status =
			    res < 0 ? nvme_sc(NVME_SCT_MEDIA, NVME_SC_WRITE_FAULT, false) : NVME_OK;
		else if (res < 0 || (uint64_t)res != req->len)
			req->status = nvme_sc(NVME_SCT_MEDIA,
					      req->op == NVME_IO_READ ? NVME_SC_READ_ERROR
								      : NVME_SC_WRITE_FAULT,
					      false);
		nvme_ctrl_io_done(req);
	}
}

static void efd_drain(int fd)
{
	uint64_t v;

	if (read(fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		perror("nvme: eventfd read");
}

static void *file_thread(void *opaque)
{
	struct nvme_file *f = opaque;
	struct pollfd p[2] = {{.fd = f->kick_fd, .events = POLLIN},
			      {.fd = f->ring_fd, .events = POLLIN}};
	char err[160];

	/* Guest commands reach this thread: it keeps only the calls of device I/O (or, should
	 * that fail, the process filter: the I/O must go on). */
	if (f->confine && f->confine(err, sizeof(err)))
		fprintf(stderr, "lvmm: vnvme %s: I/O thread: %s\n", f->name, err);
	for (;;) {
		bool stop = __atomic_load_n(&f->stop, __ATOMIC_ACQUIRE), zeroing;

		if (stop)
			zero_fail_all(f);
		if (stop && !f->pending)
			break;
		/* a step of a queued zeroing per turn, between the ring's and the queues' work */
		zeroing = !stop && zero_step(f);
		int64_t wait = zeroing ? 0 : nvme_ctrl_irq_tick(f->ctrl, nvme_now_ns());
		struct timespec ts = {.tv_sec = wait / 1000000000, .tv_nsec = wait % 1000000000};

		if (ppoll(p, 2, wait < 0 ? NULL : &ts, NULL) < 0 && errno != EINTR)
			break;
		if (p[0].revents & POLLIN) {
			efd_drain(f->kick_fd);
			if (!stop)
				nvme_ctrl_process(f->ctrl);
		}
		if (p[1].revents & POLLIN)
			efd_drain(f->ring_fd);
		io_uring_submit(&f->ring);
		ring_reap(f);
	}
	return NULL;
}

int nvme_file_start(struct nvme_file *f, struct nvme_ctrl *ctrl,
		    int (*confine)(char *err, unsigned errlen), char *err, unsigned errlen)
{
	int r;

	f->ctrl = ctrl;
	f->confine = confine;
	r = pthread_create(&f->thread, NULL, file_thread, f);
	if (r) {
		snprintf(err, errlen, "vnvme %s: cannot start the I/O thread: %s", f->name,
			 strerror(r));
		return -r;
	}
	pthread_setname_np(f->thread, "lvmm-nvme-io");
	f->running = true;
	return 0;
}

void nvme_file_kick(void *opaque)
{
	struct nvme_file *f = opaque;
	uint64_t one = 1;

	if (write(f->kick_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		perror("nvme: kick");
}

int nvme_file_kick_fd(const struct nvme_file *f)
{
	return f->kick_fd;
}

void nvme_file_durability(struct nvme_file *f, uint64_t *durable_writes, uint64_t *syncs)
{
	/* Written under the controller lock (submit runs with it held). */
	pthread_mutex_lock(&f->ctrl->lock);
	*durable_writes = f->durable_writes;
	pthread_mutex_unlock(&f->ctrl->lock);
	*syncs = __atomic_load_n(&f->syncs, __ATOMIC_RELAXED);
}

bool nvme_file_direct(const struct nvme_file *f)
{
	return f->fd_direct >= 0;
}

void nvme_file_request_stop(struct nvme_file *f)
{
	__atomic_store_n(&f->stop, true, __ATOMIC_RELEASE);
	nvme_file_kick(f);
}

void nvme_file_close(struct nvme_file *f)
{
	if (!f)
		return;
	if (f->running) {
		nvme_file_request_stop(f);
		pthread_join(f->thread, NULL);
	}
	zero_fail_all(f); /* none unless the thread never ran */
	if (f->ring_ok)
		io_uring_queue_exit(&f->ring);
	if (f->kick_fd >= 0)
		close(f->kick_fd);
	if (f->ring_fd >= 0)
		close(f->ring_fd);
	if (f->fd_direct >= 0)
		close(f->fd_direct);
	if (f->fd >= 0)
		close(f->fd);
	pthread_mutex_destroy(&f->zlock);
	free(f);
}
