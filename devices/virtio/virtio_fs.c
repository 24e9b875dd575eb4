/* virtio-fs over vhost-user (virtio_fs.h): the PCI function and its configuration, the queue
 * hand-over to the back end at DRIVER_OK and back at a reset, and what happens when the back
 * end dies: the device needs a reset and lvmm answers every request left with ENOTCONN. */
#include "virtio_fs.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "vhost_user.h"
#include "virtio_pci.h"

#define FUSE_OUT_HDR 16 /* len, error, unique */
#define FUSE_IN_HDR  40

struct virtio_fs {
	struct virtio_pci vp;
	struct dev_host host;
	struct vhost_user vu;
	char name[64];
	char tag[VIRTIO_FS_TAG_MAX];
	unsigned nreq;
	bool started;			   /* the back end holds the queues */
	bool dead;			   /* the back end failed: lvmm answers the queues itself */
	bool hung_up;			   /* the watcher shut the back end's socket down */
	bool taken[VIRTIO_PCI_MAX_QUEUES]; /* queue q taken back after the back end died */
	int err_fd[VIRTIO_PCI_MAX_QUEUES];
	int stop_fd, wake_fd;
	pthread_t thread;
	bool thread_up;
	uint64_t starts, stops, failed_reqs, wakeups;
};

static void fs_cfg_read(struct virtio_pci *vp, uint64_t off, void *data, unsigned len)
{
	struct virtio_fs *f = vp->opaque;
	uint8_t img[VIRTIO_FS_TAG_MAX + 4];

	memcpy(img, f->tag, VIRTIO_FS_TAG_MAX);
	for (unsigned i = 0; i < 4; i++)
		img[VIRTIO_FS_TAG_MAX + i] = (uint8_t)(f->nreq >> (8 * i));
	memset(data, 0, len);
	if (off < sizeof(img))
		memcpy(data, img + off, len < sizeof(img) - off ? len : sizeof(img) - off);
}

/* The back end failed (vp->lock held): the driver is told to reset, the watcher takes the
 * queues over. */
static void fs_break(struct virtio_fs *f, const char *why)
{
	if (!f->dead) {
		f->dead = true;
		f->vu.broken = true;
		fprintf(stderr, "virtio-fs %s: back end lost (%s)\n", f->name, why);
		virtio_eventfd_signal(f->wake_fd); /* the watcher hangs up and takes over */
	}
	if (f->vp.status)
		virtio_pci_ring_error(&f->vp, 0, "the vhost-user back end is gone");
}

static int fs_call_fd(struct virtio_fs *f, unsigned q)
{
	uint16_t v = f->vp.q[q].msix_vector;

	if (v == VIRTIO_NO_VECTOR || v >= f->vp.pci.msix.nvec || !f->vp.pci.msix.efd)
		return -1;
	return f->vp.pci.msix.efd[v];
}

/* Hands one queue to the back end: size, ring addresses (in lvmm's address space, which the
 * memory table maps), base, the interrupt, error and kick eventfds, enable. */
static int fs_start_queue(struct virtio_fs *f, unsigned q)
{
	struct virtio_pci_queue *pq = &f->vp.q[q];
	struct vhost_user *u = &f->vu;
	uint64_t sz = pq->size;
	struct {
		uint32_t index, flags;
		uint64_t desc, used, avail, log;
	} a = {q, 0, 0, 0, 0, 0};
	void *d = gmem_ptr(f->vp.gm, pq->desc, 16 * sz);
	void *av = gmem_ptr(f->vp.gm, pq->driver, 6 + 2 * sz);
	void *us = gmem_ptr(f->vp.gm, pq->device, 6 + 8 * sz);
	int r;

	if (!d || !av || !us)
		return -EFAULT;
	a.desc = (uint64_t)(uintptr_t)d;
	a.used = (uint64_t)(uintptr_t)us;
	a.avail = (uint64_t)(uintptr_t)av;
	r = vhost_user_set_state(u, VHOST_USER_SET_VRING_NUM, q, pq->size);
	if (!r)
		r = vhost_user_call(u, VHOST_USER_SET_VRING_ADDR, &a, sizeof(a), NULL, 0, NULL);
	if (!r)
		r = vhost_user_set_state(u, VHOST_USER_SET_VRING_BASE, q, 0);
	if (!r)
		r = vhost_user_set_vring_fd(u, VHOST_USER_SET_VRING_CALL, q, fs_call_fd(f, q));
	if (!r)
		r = vhost_user_set_vring_fd(u, VHOST_USER_SET_VRING_ERR, q, f->err_fd[q]);
	if (!r)
		r = vhost_user_set_vring_fd(u, VHOST_USER_SET_VRING_KICK, q, f->vp.kick_fd[q]);
	if (!r && (u->features & (1ULL << VHOST_USER_F_PROTOCOL)))
		r = vhost_user_set_state(u, VHOST_USER_SET_VRING_ENABLE, q, 1);
	return r;
}

/* DRIVER_OK: the negotiated features, the memory table, every enabled queue. */
static int fs_start(struct virtio_fs *f)
{
	uint64_t feat = f->vp.driver_features | (f->vu.features & (1ULL << VHOST_USER_F_PROTOCOL));
	int r;

	/* the vCPU that wrote DRIVER_OK waits, under the device's lock, for all of it */
	vhost_user_op_begin(&f->vu, VHOST_USER_OP_TIMEOUT_MS);
	r = vhost_user_set_u64(&f->vu, VHOST_USER_SET_FEATURES, feat);
	if (!r)
		r = vhost_user_set_mem_table(&f->vu, f->vp.gm);
	for (unsigned q = 0; !r && q < f->vp.nqueues; q++)
		if (f->vp.q[q].enabled)
			r = fs_start_queue(f, q);
	vhost_user_op_end(&f->vu);
	if (!r) {
		f->started = true;
		f->starts++;
	}
	return r;
}

/* A driver reset: the back end stops every queue (GET_VRING_BASE) and resets. */
static void fs_stop(struct virtio_fs *f)
{
	uint64_t st;

	vhost_user_op_begin(&f->vu, VHOST_USER_OP_TIMEOUT_MS);
	for (unsigned q = 0; q < f->vp.nqueues && !f->vu.broken; q++) {
		if (vhost_user_call(&f->vu, VHOST_USER_GET_VRING_BASE, (uint32_t[2]){q, 0}, 8, NULL,
				    0, &st))
			break;
		if ((uint32_t)st != q) {
			f->vu.broken = true;
			fprintf(stderr,
				"virtio-fs %s: GET_VRING_BASE of queue %u answered for %u\n",
				f->name, q, (uint32_t)st);
		}
	}
	if (!f->vu.broken && (f->vu.protocol & (1ULL << VHOST_USER_PROTO_RESET)))
		vhost_user_call(&f->vu, VHOST_USER_RESET_DEVICE, NULL, 0, NULL, 0, NULL);
	vhost_user_op_end(&f->vu);
	f->started = false;
	f->stops++;
}

static void fs_status(struct virtio_pci *vp, uint8_t old)
{
	struct virtio_fs *f = vp->opaque;

	if (!(vp->status & VIRTIO_STATUS_DRIVER_OK) || (old & VIRTIO_STATUS_DRIVER_OK))
		return;
	if (f->dead || fs_start(f))
		fs_break(f, f->vu.why[0] ? f->vu.why : "the queues could not be handed over");
}

static void fs_reset(struct virtio_pci *vp)
{
	struct virtio_fs *f = vp->opaque;

	if (f->started && !f->dead) {
		fs_stop(f);
		if (f->vu.broken)
			fs_break(f, f->vu.why[0] ? f->vu.why : "stopping the queues failed");
	}
	f->started = false;
	memset(f->taken, 0, sizeof(f->taken));
}

static void fs_vector(struct virtio_pci *vp, unsigned q)
{
	struct virtio_fs *f = vp->opaque;

	if (f->started && !f->dead && q < vp->nqueues &&
	    vhost_user_set_vring_fd(&f->vu, VHOST_USER_SET_VRING_CALL, q, fs_call_fd(f, q)))
		fs_break(f, f->vu.why);
}

static const struct virtio_dev_ops fs_ops = {
    .reset = fs_reset,
    .cfg_read = fs_cfg_read,
    .status = fs_status,
    .vector = fs_vector,
};

/* After the back end died (vp->lock held): every request queued on q is answered ENOTCONN.
 * The back end's position is lost with it; requests it had not completed are taken to be
 * those after the used index (a back end completing in order, as virtiofsd per queue). */
static void fs_fail_queue(struct virtio_fs *f, unsigned q)
{
	struct virtio_pci_queue *pq = &f->vp.q[q];
	struct virtq_chain *c;
	char err[160];
	bool any = false;

	if (!pq->enabled || !(f->vp.status & VIRTIO_STATUS_DRIVER_OK) || pq->vq.broken)
		return;
	if (!f->taken[q]) {
		uint16_t used;

		memcpy(&used, (const uint8_t *)pq->vq.used + 2, 2);
		pq->vq.last_avail = pq->vq.used_idx = pq->vq.signalled_used = used;
		pq->vq.signalled_valid = false;
		f->taken[q] = true;
	}
	c = malloc(sizeof(*c));
	if (!c)
		return;
	do {
		int r;

		while ((r = virtq_pop(&pq->vq, c, err, sizeof(err))) == 1) {
			uint8_t out[FUSE_OUT_HDR] = {FUSE_OUT_HDR};
			int32_t e = -ENOTCONN;
			uint32_t len = 0;

			if (c->nseg && !c->seg[0].writable && c->seg[0].len >= FUSE_IN_HDR &&
			    c->in_len >= FUSE_OUT_HDR) {
				memcpy(out + 4, &e, 4);
				memcpy(out + 8, (const uint8_t *)c->seg[0].host + 8, 8);
				len = virtq_chain_write(c, out, FUSE_OUT_HDR);
			}
			virtq_push(&pq->vq, c->head, len);
			f->failed_reqs++;
			any = true;
		}
		if (r < 0) {
			virtio_pci_ring_error(&f->vp, q, err);
			break;
		}
	} while (virtq_has_avail(&pq->vq));
	free(c);
	if (any)
		virtio_pci_queue_interrupt(&f->vp, q);
}

static void *fs_thread(void *arg)
{
	struct virtio_fs *f = arg;
	char err[160];

	if (f->host.io_thread && f->host.io_thread(err, sizeof(err)))
		fprintf(stderr, "virtio-fs %s: %s\n", f->name, err);
	for (;;) {
		/* stop, the socket, an error and a kick fd per queue, the wake-up */
		struct pollfd p[3 + 2 * VIRTIO_PCI_MAX_QUEUES];
		unsigned n = 0, nq = f->vp.nqueues;
		bool dead;

		pthread_mutex_lock(&f->vp.lock);
		dead = f->dead;
		pthread_mutex_unlock(&f->vp.lock);
		p[n++] = (struct pollfd){.fd = f->stop_fd, .events = POLLIN};
		p[n++] = (struct pollfd){.fd = dead ? -1 : f->vu.fd, .events = POLLRDHUP};
		for (unsigned q = 0; q < nq; q++) {
			p[n++] = (struct pollfd){.fd = dead ? -1 : f->err_fd[q], .events = POLLIN};
			p[n++] =
			    (struct pollfd){.fd = dead ? f->vp.kick_fd[q] : -1, .events = POLLIN};
		}
		p[n] = (struct pollfd){.fd = f->wake_fd, .events = POLLIN};
		if (ppoll(p, n + 1, NULL, NULL) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[0].revents)
			break;
		f->wakeups++;
		virtio_eventfd_take(f->wake_fd);
		pthread_mutex_lock(&f->vp.lock);
		if (!f->dead && p[1].revents)
			fs_break(f, "the back end hung up");
		if (f->dead && !f->hung_up && f->vu.fd >= 0) {
			/* the back end must stop too: it still holds guest memory and the queues
			 * this thread now answers, and one that was only slow would complete them
			 * a second time. A hang-up ends a vhost-user session (virtiofsd exits);
			 * shutdown here, as the thread that polls the fd, and in an I/O thread,
			 * whose system-call filter allows it (a vCPU's does not) */
			shutdown(f->vu.fd, SHUT_RDWR);
			f->hung_up = true;
		}
		for (unsigned q = 0; q < nq; q++) {
			if (!f->dead && (p[2 + 2 * q].revents & POLLIN) &&
			    virtio_eventfd_take(f->err_fd[q]))
				fs_break(f, "the back end signalled a queue error");
			if (f->dead) {
				virtio_eventfd_take(f->vp.kick_fd[q]);
				fs_fail_queue(f, q);
			}
		}
		pthread_mutex_unlock(&f->vp.lock);
	}
	return NULL;
}

static int fs_check(const struct virtio_fs_config *c, const char *id, char *err, unsigned errlen)
{
	unsigned nq = c->num_queues ? c->num_queues : 1;
	unsigned qs = c->queue_size ? c->queue_size : VIRTIO_FS_QUEUE_SIZE;

	if (!c->tag[0] || !memchr(c->tag, 0, sizeof(c->tag)) || c->socket[0] != '/' ||
	    !memchr(c->socket, 0, sizeof(c->socket)) || nq > VIRTIO_FS_MAX_QUEUES || qs < 2 ||
	    qs > VIRTIO_FS_QUEUE_MAX || (qs & (qs - 1))) {
		snprintf(err, errlen,
			 "fs %s: tag of 1..%d characters, an absolute socket path, num_queues "
			 "1..%d and queue_size a power of two 2..%u wanted",
			 id, VIRTIO_FS_TAG_MAX, VIRTIO_FS_MAX_QUEUES, VIRTIO_FS_QUEUE_MAX);
		return -EINVAL;
	}
	return 0;
}

static void fs_free(struct virtio_fs *f)
{
	vhost_user_close(&f->vu);
	for (unsigned q = 0; q < VIRTIO_PCI_MAX_QUEUES; q++)
		if (f->err_fd[q] >= 0)
			close(f->err_fd[q]);
	if (f->stop_fd >= 0)
		close(f->stop_fd);
	if (f->wake_fd >= 0)
		close(f->wake_fd);
	free(f);
}

static int fs_create(const struct dev_host *h, const void *cfg, const char *id, unsigned idx,
		     void **dev, char *err, unsigned errlen)
{
	const struct virtio_fs_config *c = cfg;
	const uint64_t need = 1ULL << VIRTIO_F_VERSION_1;
	struct virtio_fs *f;
	int r;

	(void)idx;
	*dev = NULL;
	r = fs_check(c, id, err, errlen);
	if (r)
		return r;
	f = calloc(1, sizeof(*f));
	if (!f) {
		snprintf(err, errlen, "fs %s: out of memory", id);
		return -ENOMEM;
	}
	f->host = *h;
	f->vu.fd = f->stop_fd = f->wake_fd = -1;
	for (unsigned q = 0; q < VIRTIO_PCI_MAX_QUEUES; q++)
		f->err_fd[q] = -1;
	snprintf(f->name, sizeof(f->name), "%s", id);
	memcpy(f->tag, c->tag, strnlen(c->tag, VIRTIO_FS_TAG_MAX));
	f->nreq = c->num_queues ? c->num_queues : 1;
	/* a back end connected before the jail is taken over once; a rebuild connects anew */
	if (c->has_fd && !c->rebuilt)
		r = vhost_user_open_fd(&f->vu, id, c->fd, 1 + f->nreq, err, errlen);
	else
		r = vhost_user_connect(&f->vu, id, c->socket, 1 + f->nreq, err, errlen);
	if (r && c->rebuilt) {
		/* a reboot goes on without the share: DRIVER_OK will fail, requests get ENOTCONN */
		fprintf(stderr, "virtio-fs %s: %s; the share stays unavailable\n", id, err);
		f->vu.fd = -1;
		f->vu.features = need;
		f->dead = true;
		r = 0;
	}
	if (r)
		goto fail;
	if ((f->vu.features & need) != need) {
		snprintf(err, errlen,
			 "fs %s: the back end lacks VIRTIO_F_VERSION_1 (features 0x%llx)", id,
			 (unsigned long long)f->vu.features);
		r = -EINVAL;
		goto fail;
	}
	for (unsigned q = 0; q < 1 + f->nreq; q++) {
		f->err_fd[q] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (f->err_fd[q] < 0)
			break;
	}
	f->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	f->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (f->stop_fd < 0 || f->wake_fd < 0 || f->err_fd[f->nreq] < 0) {
		snprintf(err, errlen, "fs %s: eventfd: %s", id, strerror(errno));
		r = -errno;
		goto fail;
	}
	/* class 0x018000: mass storage, other */
	r = virtio_pci_init(&f->vp, id, VIRTIO_ID_FS, 0x018000, 0, 1 + f->nreq,
			    (uint16_t)(c->queue_size ? c->queue_size : VIRTIO_FS_QUEUE_SIZE),
			    &fs_ops, f, h->gm, err, errlen);
	if (r)
		goto fail;
	/* the guest sees only what the back end serves (the ring features lvmm knows) */
	f->vp.features &= f->vu.features & ~(1ULL << VHOST_USER_F_PROTOCOL);
	r = virtio_pci_kick_eventfds(&f->vp, h->ioeventfd, h->opaque, err, errlen);
	if (!r) {
		r = pthread_create(&f->thread, NULL, fs_thread, f);
		if (r) {
			snprintf(err, errlen, "fs %s: thread: %s", id, strerror(r));
			r = -r;
		}
	}
	if (r) {
		virtio_pci_exit(&f->vp);
		goto fail;
	}
	f->thread_up = true;
	*dev = f;
	return 0;
fail:
	fs_free(f);
	return r;
}

static struct pci_dev *fs_pci(void *dev)
{
	return &((struct virtio_fs *)dev)->vp.pci;
}

static void fs_counters(void *dev, struct dev_counters *out)
{
	struct virtio_fs *f = dev;

	pthread_mutex_lock(&f->vp.lock);
	out->doorbells = f->vp.kicks; /* kicks that exited (the back end takes the others) */
	out->irqs = f->vp.interrupts;
	out->wakeups = f->wakeups;
	out->backend_cmds = f->vu.msgs;
	out->backend_errors = f->dead ? 1 : 0;
	out->backend_rejected = f->failed_reqs;
	snprintf(out->mode, sizeof(out->mode), "%s", f->dead ? "failed" : "vhost-user");
	pthread_mutex_unlock(&f->vp.lock);
}

static void fs_destroy(void *dev)
{
	struct virtio_fs *f = dev;

	if (!f)
		return;
	if (f->thread_up) {
		virtio_eventfd_signal(f->stop_fd);
		pthread_join(f->thread, NULL);
		f->thread_up = false;
	}
	virtio_pci_exit(&f->vp);
	fs_free(f);
}

const struct dev_model virtio_fs_model = {
    .name = "virtio-fs",
    .create = fs_create,
    .pci = fs_pci,
    .counters = fs_counters,
    .destroy = fs_destroy,
    /* what a restore would need back is not lvmm's: the guest's FUSE session (node ids, file
     * handles, lookup counts) is state of the virtiofsd process that served it */
    .nosave = "the guest's FUSE state (inode ids, open file handles) lives in virtiofsd, which "
	      "cannot hand it to the virtiofsd of a restored VM",
};
