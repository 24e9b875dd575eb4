/* virtio-blk (virtio 1.x, 5.2) on the PCI transport. One I/O thread per device serves every
 * request queue: kicks arrive on an eventfd per queue (a KVM ioeventfd at the queue's notify
 * address, or the vCPU's notify op), chains are parsed under the transport lock, reads, writes
 * and flushes go through a restricted io_uring, discard and write zeroes run as fallocate on the
 * thread; completions write the status byte and return the chain. A device reset bumps a
 * generation: completions of requests taken before it are dropped, never returned. */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <linux/fs.h>

#include "dev_ring.h"
#include "fsutil.h"
#include "virtio_blk.h"
#include "virtio_pci.h"

#define VIRTIO_ID_BLOCK 2

/* feature bits (5.2.3) */
#define VIRTIO_BLK_F_SEG_MAX	  2
#define VIRTIO_BLK_F_RO		  5
#define VIRTIO_BLK_F_BLK_SIZE	  6
#define VIRTIO_BLK_F_FLUSH	  9
#define VIRTIO_BLK_F_MQ		  12
#define VIRTIO_BLK_F_DISCARD	  13
#define VIRTIO_BLK_F_WRITE_ZEROES 14

/* request types and status (5.2.6) */
#define VIRTIO_BLK_T_IN		  0
#define VIRTIO_BLK_T_OUT	  1
#define VIRTIO_BLK_T_FLUSH	  4
#define VIRTIO_BLK_T_GET_ID	  8
#define VIRTIO_BLK_T_DISCARD	  11
#define VIRTIO_BLK_T_WRITE_ZEROES 13
#define VIRTIO_BLK_S_OK		  0
#define VIRTIO_BLK_S_IOERR	  1
#define VIRTIO_BLK_S_UNSUPP	  2
#define VIRTIO_BLK_WZ_UNMAP	  1u

#define BLK_SECTOR	 512u
#define BLK_ID_BYTES	 20u
#define BLK_MAX_REQS	 256u	       /* requests in flight per device */
#define BLK_DISCARD_SEGS 32u	       /* segments of one discard/write-zeroes request */
#define BLK_DISCARD_MAX	 (1u << 22)    /* sectors of one segment (2 GiB) */
#define BLK_ZERO_CHUNK	 (256u * 1024) /* written-zeroes fallback, per write */

struct blk_req {
	uint32_t gen;  /* device generation when taken */
	uint16_t head; /* the chain's head descriptor */
	uint8_t q;     /* request queue */
	uint8_t type;
	uint8_t st;	 /* status once done */
	bool direct;	 /* went to the O_DIRECT fd */
	uint8_t *status; /* the chain's last writable byte */
	uint32_t used;	 /* bytes written into the chain on success, status included */
	uint64_t off;	 /* byte offset of IN/OUT */
	uint32_t len;	 /* bytes of IN/OUT */
	unsigned niov;
	struct iovec iov[VIRTQ_MAX_SEGS];
	/* DISCARD / WRITE_ZEROES: the segment table, copied out of the guest */
	unsigned nseg;
	struct {
		uint64_t sector;
		uint32_t num, flags;
	} seg[BLK_DISCARD_SEGS];
};

struct virtio_blk {
	struct virtio_pci vp;
	struct dev_host host;
	char name[64];
	char serial[BLK_ID_BYTES];
	int fd, fd_direct;
	bool readonly, block_dev, direct;
	bool released; /* the image closed for a migration (blk_release) */
	char *path, *root;
	uint64_t sectors, bytes;
	dev_t st_dev; /* the image opened: reclaim takes back this file only */
	ino_t st_ino;
	unsigned nq;
	int stop_fd, ring_fd;
	struct io_uring ring;
	bool ring_up;
	pthread_t thread;
	bool thread_up;
	/* under vp.lock */
	uint32_t gen;
	bool paused;
	unsigned inflight;
	pthread_cond_t idle;
	/* the I/O thread's own */
	struct blk_req *req;
	unsigned *free_req, nfree;
	struct virtq_chain chain;
	/* counters (written by the I/O thread, read racily by vm.counters) */
	uint64_t reads, writes, read_bytes, write_bytes, flushes, discards, errors, wakeups;
};

/* ---- configuration space (5.2.4) ---- */

static void put_le(uint8_t *p, uint64_t v, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void blk_cfg_read(struct virtio_pci *vp, uint64_t off, void *data, unsigned len)
{
	struct virtio_blk *b = vp->opaque;
	uint8_t img[60] = {0};

	put_le(img + 0, b->sectors, 8);		 /* capacity */
	put_le(img + 12, VIRTQ_MAX_SEGS - 2, 4); /* seg_max: header and status */
	put_le(img + 20, BLK_SECTOR, 4);	 /* blk_size */
	put_le(img + 34, b->nq, 2);		 /* num_queues */
	put_le(img + 36, BLK_DISCARD_MAX, 4);	 /* max_discard_sectors */
	put_le(img + 40, BLK_DISCARD_SEGS, 4);	 /* max_discard_seg */
	put_le(img + 44, 1, 4);			 /* discard_sector_alignment */
	put_le(img + 48, BLK_DISCARD_MAX, 4);	 /* max_write_zeroes_sectors */
	put_le(img + 52, BLK_DISCARD_SEGS, 4);	 /* max_write_zeroes_seg */
	img[56] = 1;				 /* write_zeroes_may_unmap */
	memset(data, 0, len);
	if (off < sizeof(img))
		memcpy(data, img + off, len < sizeof(img) - off ? len : sizeof(img) - off);
}

/* The driver reset the device (vp.lock held): requests in flight are forgotten. */
static void blk_reset(struct virtio_pci *vp)
{
	struct virtio_blk *b = vp->opaque;

	b->gen++;
}

static const struct virtio_dev_ops blk_ops = {
    .reset = blk_reset,
    .cfg_read = blk_cfg_read,
};

/* ---- requests: parsing (vp.lock held) ---- */

/* Copies len bytes of the chain's readable data from byte skip on; false when it is shorter. */
static bool chain_read(const struct virtq_chain *c, uint64_t skip, void *dst, uint32_t len)
{
	uint8_t *o = dst;

	for (unsigned i = 0; i < c->nseg && len; i++) {
		const struct virtq_seg *s = &c->seg[i];

		if (s->writable)
			break;
		if (skip >= s->len) {
			skip -= s->len;
			continue;
		}
		uint32_t n = s->len - (uint32_t)skip < len ? s->len - (uint32_t)skip : len;

		memcpy(o, (uint8_t *)s->host + skip, n);
		o += n;
		len -= n;
		skip = 0;
	}
	return !len;
}

/* The data iovecs of a chain: readable bytes from skip on (OUT), or writable bytes but the last
 * (IN, GET_ID). Returns the byte count. */
static uint64_t chain_iov(const struct virtq_chain *c, bool writable, uint64_t skip,
			  struct blk_req *r)
{
	uint64_t total = 0;
	uint64_t left = writable ? c->in_len - 1 : c->out_len - skip;

	r->niov = 0;
	for (unsigned i = 0; i < c->nseg && left; i++) {
		const struct virtq_seg *s = &c->seg[i];
		uint64_t n;

		if (s->writable != writable)
			continue;
		if (!writable && skip >= s->len) {
			skip -= s->len;
			continue;
		}
		n = s->len - (writable ? 0 : skip);
		if (n > left)
			n = left;
		if (n) {
			r->iov[r->niov].iov_base = (uint8_t *)s->host + (writable ? 0 : skip);
			r->iov[r->niov++].iov_len = n;
		}
		skip = 0;
		total += n;
		left -= n;
	}
	return total;
}

/* The chain's last writable byte: where the status goes. */
static uint8_t *chain_status(const struct virtq_chain *c)
{
	for (unsigned i = c->nseg; i-- > 0;)
		if (c->seg[i].writable && c->seg[i].len)
			return (uint8_t *)c->seg[i].host + c->seg[i].len - 1;
	return NULL;
}

/* Fills r from the chain; r->st says what to answer when nothing is to be submitted
 * (0xff: submit). false for a chain without a status byte (returned with nothing written). */
static bool blk_parse(struct virtio_blk *b, const struct virtq_chain *c, struct blk_req *r)
{
	uint8_t hdr[16];
	uint64_t sector, bytes;

	r->head = c->head;
	r->status = chain_status(c);
	r->used = 1;
	r->st = 0xff;
	r->niov = 0;
	if (!r->status || !c->in_len)
		return false;
	if (!chain_read(c, 0, hdr, sizeof(hdr))) {
		r->st = VIRTIO_BLK_S_IOERR;
		return true;
	}
	/* a 32-bit type: none above 255 exists, those read as unknown */
	r->type = hdr[1] | hdr[2] | hdr[3] ? 0xff : hdr[0];
	sector = 0;
	for (unsigned i = 0; i < 8; i++)
		sector |= (uint64_t)hdr[8 + i] << (8 * i);
	switch (r->type) {
	case VIRTIO_BLK_T_IN:
	case VIRTIO_BLK_T_OUT:
		bytes = chain_iov(c, r->type == VIRTIO_BLK_T_IN, sizeof(hdr), r);
		if (r->type == VIRTIO_BLK_T_OUT && b->readonly) {
			r->st = VIRTIO_BLK_S_IOERR;
			break;
		}
		if (bytes % BLK_SECTOR || sector > b->sectors ||
		    bytes / BLK_SECTOR > b->sectors - sector || bytes > UINT32_MAX) {
			r->st = VIRTIO_BLK_S_IOERR;
			break;
		}
		r->off = sector * BLK_SECTOR;
		r->len = (uint32_t)bytes;
		if (r->type == VIRTIO_BLK_T_IN)
			r->used = (uint32_t)bytes + 1;
		if (!bytes)
			r->st = VIRTIO_BLK_S_OK;
		break;
	case VIRTIO_BLK_T_FLUSH:
		break;
	case VIRTIO_BLK_T_GET_ID:
		if (c->in_len - 1 < BLK_ID_BYTES) {
			r->st = VIRTIO_BLK_S_IOERR;
			break;
		}
		chain_iov(c, true, 0, r);
		r->used = BLK_ID_BYTES + 1;
		break;
	case VIRTIO_BLK_T_DISCARD:
	case VIRTIO_BLK_T_WRITE_ZEROES: {
		uint64_t n = (c->out_len - sizeof(hdr)) / 16;

		if (b->readonly || (c->out_len - sizeof(hdr)) % 16 || !n || n > BLK_DISCARD_SEGS) {
			r->st = b->readonly ? VIRTIO_BLK_S_IOERR : VIRTIO_BLK_S_UNSUPP;
			break;
		}
		r->nseg = (unsigned)n;
		for (unsigned i = 0; i < r->nseg; i++) {
			uint8_t s[16];

			chain_read(c, sizeof(hdr) + 16 * i, s, sizeof(s));
			r->seg[i].sector = 0;
			for (unsigned k = 0; k < 8; k++)
				r->seg[i].sector |= (uint64_t)s[k] << (8 * k);
			r->seg[i].num = s[8] | s[9] << 8 | s[10] << 16 | (uint32_t)s[11] << 24;
			r->seg[i].flags = s[12] | s[13] << 8 | s[14] << 16 | (uint32_t)s[15] << 24;
			/* unmap is a write-zeroes flag; a discard has none */
			if (r->seg[i].flags &
			    ~(r->type == VIRTIO_BLK_T_WRITE_ZEROES ? VIRTIO_BLK_WZ_UNMAP : 0u)) {
				r->st = VIRTIO_BLK_S_UNSUPP;
				break;
			}
			if (r->seg[i].num > BLK_DISCARD_MAX || r->seg[i].sector > b->sectors ||
			    r->seg[i].num > b->sectors - r->seg[i].sector) {
				r->st = VIRTIO_BLK_S_IOERR;
				break;
			}
		}
		break;
	}
	default:
		r->st = VIRTIO_BLK_S_UNSUPP;
		break;
	}
	return true;
}

/* ---- requests: running (I/O thread, no lock) ---- */

static bool iov_aligned(const struct blk_req *r)
{
	for (unsigned i = 0; i < r->niov; i++)
		if (((uintptr_t)r->iov[i].iov_base | r->iov[i].iov_len) % BLK_SECTOR)
			return false;
	return true;
}

/* Zeroes [off, off + len) of the disk: a range the file system zeroes, a hole, written zeroes. */
static int blk_zero(struct virtio_blk *b, uint64_t off, uint64_t len, bool unmap)
{
	static const uint8_t zeroes[BLK_ZERO_CHUNK];

	if (b->block_dev) {
		/* the device unmaps while zeroing where it can (a discard need not read zero) */
		uint64_t range[2] = {off, len};

		if (!ioctl(b->fd, BLKZEROOUT, range))
			return 0;
	} else {
		/* a hole reads back zero: unmap asks for one, a zeroed range keeps the blocks */
		int mode = unmap ? FALLOC_FL_PUNCH_HOLE : FALLOC_FL_ZERO_RANGE;

		if (!fallocate(b->fd, mode | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) ||
		    !fallocate(b->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off,
			       (off_t)len))
			return 0;
	}
	while (len) {
		size_t n = len < sizeof(zeroes) ? (size_t)len : sizeof(zeroes);
		ssize_t w = pwrite(b->fd, zeroes, n, (off_t)off);

		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		off += (uint64_t)w;
		len -= (uint64_t)w;
	}
	return 0;
}

static uint8_t blk_discard(struct virtio_blk *b, struct blk_req *r)
{
	for (unsigned i = 0; i < r->nseg; i++) {
		uint64_t off = r->seg[i].sector * BLK_SECTOR,
			 len = (uint64_t)r->seg[i].num * BLK_SECTOR;

		if (r->type == VIRTIO_BLK_T_WRITE_ZEROES) {
			if (blk_zero(b, off, len, r->seg[i].flags & VIRTIO_BLK_WZ_UNMAP))
				return VIRTIO_BLK_S_IOERR;
		} else if (b->block_dev) {
			uint64_t range[2] = {off, len};

			(void)!ioctl(b->fd, BLKDISCARD, range); /* a hint: failure is no error */
		} else {
			(void)!fallocate(b->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
					 (off_t)off, (off_t)len);
		}
	}
	b->discards++;
	return VIRTIO_BLK_S_OK;
}

/* Starts r: queued on the ring (true) or done at once with r->st set (false). */
static bool blk_start(struct virtio_blk *b, struct blk_req *r, unsigned idx)
{
	struct io_uring_sqe *sqe;

	if (r->st != 0xff)
		return false;
	switch (r->type) {
	case VIRTIO_BLK_T_GET_ID: {
		uint8_t id[BLK_ID_BYTES] = {0};
		uint32_t done = 0;

		memcpy(id, b->serial, strnlen(b->serial, BLK_ID_BYTES));
		for (unsigned i = 0; i < r->niov && done < BLK_ID_BYTES; i++) {
			uint32_t n = (uint32_t)r->iov[i].iov_len < BLK_ID_BYTES - done
					 ? (uint32_t)r->iov[i].iov_len
					 : BLK_ID_BYTES - done;

			memcpy(r->iov[i].iov_base, id + done, n);
			done += n;
		}
		r->st = VIRTIO_BLK_S_OK;
		return false;
	}
	case VIRTIO_BLK_T_DISCARD:
	case VIRTIO_BLK_T_WRITE_ZEROES:
		r->st = blk_discard(b, r);
		return false;
	default:
		break;
	}
	sqe = io_uring_get_sqe(&b->ring);
	if (!sqe) {
		io_uring_submit(&b->ring);
		sqe = io_uring_get_sqe(&b->ring);
	}
	if (!sqe) {
		r->st = VIRTIO_BLK_S_IOERR;
		return false;
	}
	r->direct = b->fd_direct >= 0 && iov_aligned(r);
	if (r->type == VIRTIO_BLK_T_FLUSH)
		io_uring_prep_fsync(sqe, b->fd, IORING_FSYNC_DATASYNC);
	else if (r->type == VIRTIO_BLK_T_IN)
		io_uring_prep_readv(sqe, r->direct ? b->fd_direct : b->fd, r->iov, r->niov, r->off);
	else
		io_uring_prep_writev(sqe, r->direct ? b->fd_direct : b->fd, r->iov, r->niov,
				     r->off);
	io_uring_sqe_set_data64(sqe, idx);
	return true;
}

/* ---- the I/O thread ---- */

/* Returns finished requests to the driver (takes vp.lock). */
static void blk_finish(struct virtio_blk *b, const unsigned *done, unsigned n)
{
	bool notify[VIRTIO_BLK_MAX_QUEUES] = {false};

	pthread_mutex_lock(&b->vp.lock);
	for (unsigned i = 0; i < n; i++) {
		struct blk_req *r = &b->req[done[i]];

		if (r->st != VIRTIO_BLK_S_OK)
			b->errors++;
		if (r->gen == b->gen && b->vp.q[r->q].enabled) {
			*r->status = r->st;
			virtq_push(&b->vp.q[r->q].vq, r->head,
				   r->st == VIRTIO_BLK_S_OK ? r->used : 1);
			notify[r->q] = true;
		}
		b->free_req[b->nfree++] = done[i];
		b->inflight--;
	}
	for (unsigned q = 0; q < b->nq; q++)
		if (notify[q])
			virtio_pci_queue_interrupt(&b->vp, q);
	if (!b->inflight)
		pthread_cond_broadcast(&b->idle);
	pthread_mutex_unlock(&b->vp.lock);
}

/* Completions from the ring. */
static void blk_reap(struct virtio_blk *b)
{
	unsigned done[BLK_MAX_REQS], n = 0;
	struct io_uring_cqe *cqe;

	while (n < BLK_MAX_REQS && !io_uring_peek_cqe(&b->ring, &cqe)) {
		unsigned idx = (unsigned)io_uring_cqe_get_data64(cqe);
		struct blk_req *r = &b->req[idx];
		bool ok = r->type == VIRTIO_BLK_T_FLUSH ? cqe->res == 0 : cqe->res == (int)r->len;

		io_uring_cqe_seen(&b->ring, cqe);
		r->st = ok ? VIRTIO_BLK_S_OK : VIRTIO_BLK_S_IOERR;
		if (ok && r->type == VIRTIO_BLK_T_IN) {
			b->reads++;
			b->read_bytes += r->len;
		} else if (ok && r->type == VIRTIO_BLK_T_OUT) {
			b->writes++;
			b->write_bytes += r->len;
		} else if (ok) {
			b->flushes++;
		}
		done[n++] = idx;
	}
	if (n)
		blk_finish(b, done, n);
}

/* Takes what the queues hold (as many as free request slots) and starts it. */
static void blk_fetch(struct virtio_blk *b)
{
	unsigned taken[BLK_MAX_REQS], ntaken = 0, done[BLK_MAX_REQS], ndone = 0;
	bool queued = false;

	pthread_mutex_lock(&b->vp.lock);
	if ((b->vp.status & VIRTIO_STATUS_DRIVER_OK) &&
	    !(b->vp.status & VIRTIO_STATUS_NEEDS_RESET) && !b->paused) {
		for (unsigned q = 0; q < b->nq; q++) {
			struct virtq *vq = &b->vp.q[q].vq;
			char err[160];

			while (b->vp.q[q].enabled && b->nfree) {
				int got = virtq_pop(vq, &b->chain, err, sizeof(err));

				if (got < 0) {
					virtio_pci_ring_error(&b->vp, q, err);
					break;
				}
				if (!got) {
					if (!virtq_has_avail(vq))
						break;
					continue;
				}
				unsigned idx = b->free_req[--b->nfree];
				struct blk_req *r = &b->req[idx];

				r->q = (uint8_t)q;
				r->gen = b->gen;
				b->inflight++;
				if (!blk_parse(b, &b->chain, r)) {
					/* no status byte to write: returned as it came */
					virtq_push(vq, b->chain.head, 0);
					b->errors++;
					b->free_req[b->nfree++] = idx;
					b->inflight--;
					continue;
				}
				taken[ntaken++] = idx;
			}
		}
	}
	pthread_mutex_unlock(&b->vp.lock);
	for (unsigned i = 0; i < ntaken; i++) {
		if (blk_start(b, &b->req[taken[i]], taken[i]))
			queued = true;
		else
			done[ndone++] = taken[i];
	}
	if (queued)
		io_uring_submit(&b->ring);
	if (ndone)
		blk_finish(b, done, ndone);
}

static void *blk_thread(void *arg)
{
	struct virtio_blk *b = arg;
	char err[256];

	if (b->host.io_thread && b->host.io_thread(err, sizeof(err)))
		fprintf(stderr, "virtio-blk %s: %s\n", b->name, err);
	for (;;) {
		struct pollfd p[VIRTIO_BLK_MAX_QUEUES + 2];
		unsigned n = 0;

		for (unsigned q = 0; q < b->nq; q++)
			p[n++] = (struct pollfd){.fd = b->vp.kick_fd[q], .events = POLLIN};
		p[n++] = (struct pollfd){.fd = b->ring_fd, .events = POLLIN};
		p[n++] = (struct pollfd){.fd = b->stop_fd, .events = POLLIN};
		if (poll(p, n, -1) < 0 && errno != EINTR)
			break;
		b->wakeups++;
		if (p[n - 1].revents)
			break;
		for (unsigned i = 0; i + 1 < n; i++)
			if (p[i].revents)
				virtio_eventfd_take(p[i].fd);
		blk_reap(b);
		blk_fetch(b);
	}
	/* requests still on the ring finish before the device goes: their buffers are guest
	 * memory, their slots ours */
	pthread_mutex_lock(&b->vp.lock);
	while (b->inflight) {
		pthread_mutex_unlock(&b->vp.lock);
		struct io_uring_cqe *cqe;

		if (io_uring_wait_cqe(&b->ring, &cqe))
			break;
		blk_reap(b);
		pthread_mutex_lock(&b->vp.lock);
	}
	pthread_mutex_unlock(&b->vp.lock);
	return NULL;
}

/* ---- the device ---- */

static void blk_free(struct virtio_blk *b)
{
	if (b->thread_up) {
		virtio_eventfd_signal(b->stop_fd);
		pthread_join(b->thread, NULL);
	}
	if (b->ring_up)
		io_uring_queue_exit(&b->ring);
	if (b->stop_fd >= 0)
		close(b->stop_fd);
	if (b->ring_fd >= 0)
		close(b->ring_fd);
	if (b->fd_direct >= 0)
		close(b->fd_direct);
	if (b->fd >= 0)
		close(b->fd);
	pthread_cond_destroy(&b->idle);
	free(b->path);
	free(b->root);
	free(b->req);
	free(b->free_req);
	free(b);
}

static void blk_close(struct virtio_blk *b)
{
	if (b->fd_direct >= 0)
		close(b->fd_direct);
	if (b->fd >= 0)
		close(b->fd); /* the OFD lock goes with its one fd */
	b->fd = b->fd_direct = -1;
}

/* Opens and locks the image at b->path; sets fd, fd_direct, sectors, bytes and its identity. */
static int blk_open(struct virtio_blk *b, char *err, unsigned errlen)
{
	char what[96], self[64];
	struct stat st;
	int flags = b->readonly ? O_RDONLY : O_RDWR, r;

	snprintf(what, sizeof(what), "disk %s", b->name);
	b->fd = fsutil_open(b->root, what, b->path, flags, 0, FSUTIL_REGULAR_OR_BLOCK, err, errlen);
	if (b->fd < 0)
		return b->fd;
	r = fsutil_lock_image(b->fd, !b->readonly, what, b->path, err, errlen);
	if (r)
		return r;
	if (fstat(b->fd, &st) < 0) {
		snprintf(err, errlen, "%s: %s: %s", what, b->path, strerror(errno));
		return -errno;
	}
	b->block_dev = S_ISBLK(st.st_mode);
	b->st_dev = st.st_dev;
	b->st_ino = st.st_ino;
	if (b->block_dev) {
		uint64_t bytes = 0;

		if (ioctl(b->fd, BLKGETSIZE64, &bytes) < 0) {
			snprintf(err, errlen, "%s: size of %s: %s", what, b->path, strerror(errno));
			return -errno;
		}
		b->bytes = bytes;
	} else {
		b->bytes = (uint64_t)st.st_size;
	}
	b->sectors = b->bytes / BLK_SECTOR;
	if (!b->sectors) {
		snprintf(err, errlen, "%s: %s is smaller than one 512-byte sector", what, b->path);
		return -EINVAL;
	}
	if (b->direct) {
		/* the same file through its fd, not its name (which may have changed since) */
		snprintf(self, sizeof(self), "/proc/self/fd/%d", b->fd);
		b->fd_direct = open(self, flags | O_DIRECT | O_CLOEXEC);
		if (b->fd_direct < 0)
			fprintf(stderr, "%s: %s does not take O_DIRECT (%s): cached I/O\n", what,
				b->path, strerror(errno));
	}
	return 0;
}

static int blk_create(const struct dev_host *h, const void *cfg, const char *id, unsigned idx,
		      void **dev, char *err, unsigned errlen)
{
	static const uint8_t ring_ops[] = {IORING_OP_READV, IORING_OP_WRITEV, IORING_OP_FSYNC};
	const struct virtio_blk_config *c = cfg;
	unsigned qsize = c->queue_size ? c->queue_size : VIRTIO_BLK_QUEUE_SIZE;
	unsigned nreq;
	uint64_t features;
	struct virtio_blk *b;
	int r;

	(void)idx;
	*dev = NULL;
	b = calloc(1, sizeof(*b));
	if (!b) {
		snprintf(err, errlen, "disk %s: out of memory", id);
		return -ENOMEM;
	}
	b->host = *h;
	snprintf(b->name, sizeof(b->name), "%s", id);
	memcpy(b->serial, c->serial[0] ? c->serial : id,
	       strnlen(c->serial[0] ? c->serial : id, BLK_ID_BYTES));
	b->fd = b->fd_direct = b->stop_fd = b->ring_fd = -1;
	b->readonly = c->readonly;
	b->direct = c->direct;
	b->path = strdup(c->path);
	b->root = c->root && c->root[0] ? strdup(c->root) : NULL;
	b->nq = c->num_queues ? c->num_queues : 1;
	pthread_cond_init(&b->idle, NULL);
	if (b->nq > VIRTIO_BLK_MAX_QUEUES || qsize < 2 || qsize > VIRTIO_BLK_MAX_QUEUE_SIZE ||
	    (qsize & (qsize - 1))) {
		snprintf(err, errlen,
			 "disk %s: %u queues of %u entries (1..%u queues, a power of two of "
			 "2..%u entries)",
			 id, b->nq, qsize, VIRTIO_BLK_MAX_QUEUES, VIRTIO_BLK_MAX_QUEUE_SIZE);
		r = -EINVAL;
		goto fail;
	}
	if (!b->path || (c->root && c->root[0] && !b->root)) {
		snprintf(err, errlen, "disk %s: out of memory", id);
		r = -ENOMEM;
		goto fail;
	}
	r = blk_open(b, err, errlen);
	if (r)
		goto fail;
	nreq = b->nq * qsize < BLK_MAX_REQS ? b->nq * qsize : BLK_MAX_REQS;
	b->req = calloc(nreq, sizeof(*b->req));
	b->free_req = calloc(nreq, sizeof(*b->free_req));
	if (!b->req || !b->free_req) {
		snprintf(err, errlen, "disk %s: out of memory", id);
		r = -ENOMEM;
		goto fail;
	}
	for (unsigned i = 0; i < nreq; i++)
		b->free_req[b->nfree++] = nreq - 1 - i;
	b->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	b->ring_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (b->stop_fd < 0 || b->ring_fd < 0) {
		snprintf(err, errlen, "disk %s: eventfds: %s", id, strerror(errno));
		r = -errno;
		goto fail;
	}
	r = dev_ring_init(&b->ring, nreq, b->ring_fd, ring_ops, sizeof(ring_ops));
	if (r) {
		snprintf(err, errlen, "disk %s: io_uring set-up failed: %s", id, strerror(-r));
		goto fail;
	}
	b->ring_up = true;
	features = 1ULL << VIRTIO_BLK_F_SEG_MAX | 1ULL << VIRTIO_BLK_F_BLK_SIZE |
		   1ULL << VIRTIO_BLK_F_FLUSH;
	if (b->nq > 1)
		features |= 1ULL << VIRTIO_BLK_F_MQ;
	if (b->readonly)
		features |= 1ULL << VIRTIO_BLK_F_RO;
	else
		features |= 1ULL << VIRTIO_BLK_F_DISCARD | 1ULL << VIRTIO_BLK_F_WRITE_ZEROES;
	/* class 0x018000: mass storage, other (as other VMMs' virtio-blk) */
	r = virtio_pci_init(&b->vp, id, VIRTIO_ID_BLOCK, 0x018000, features, b->nq, (uint16_t)qsize,
			    &blk_ops, b, h->gm, err, errlen);
	if (r)
		goto fail;
	r = virtio_pci_kick_eventfds(&b->vp, h->ioeventfd, h->opaque, err, errlen);
	if (r) {
		virtio_pci_exit(&b->vp);
		goto fail;
	}
	r = pthread_create(&b->thread, NULL, blk_thread, b);
	if (r) {
		snprintf(err, errlen, "disk %s: I/O thread: %s", id, strerror(r));
		virtio_pci_exit(&b->vp);
		r = -r;
		goto fail;
	}
	b->thread_up = true;
	*dev = b;
	return 0;
fail:
	blk_free(b);
	return r;
}

static struct pci_dev *blk_pci(void *dev)
{
	return &((struct virtio_blk *)dev)->vp.pci;
}

/* vm.pause: nothing new is taken, and what is in flight finishes before the vCPUs' pause
 * returns to its caller; vm.resume looks at the queues again. */
static void blk_pause(void *dev)
{
	struct virtio_blk *b = dev;

	pthread_mutex_lock(&b->vp.lock);
	b->paused = true;
	while (b->inflight)
		pthread_cond_wait(&b->idle, &b->vp.lock);
	pthread_mutex_unlock(&b->vp.lock);
}

static void blk_resume(void *dev)
{
	struct virtio_blk *b = dev;

	pthread_mutex_lock(&b->vp.lock);
	b->paused = false;
	pthread_mutex_unlock(&b->vp.lock);
	virtio_eventfd_signal(b->vp.kick_fd[0]);
}

/* Snapshots: paused, the device holds no request (blk_pause waited for them), so its state is
 * the transport's; the disk's size, queue count and mode are checked against the image the
 * restored config opened (the image's contents are the user's to keep as they were). */
#define BLK_STATE_VERSION 1u

struct blk_state {
	uint32_t version, nq;
	uint64_t sectors;
	uint8_t readonly, pad[7];
};

static int blk_save(void *dev, void *buf, uint64_t *len, char *err, unsigned errlen)
{
	struct virtio_blk *b = dev;
	size_t need = sizeof(struct blk_state) + virtio_pci_state_size(&b->vp);
	struct blk_state st = {.version = BLK_STATE_VERSION,
			       .nq = b->nq,
			       .sectors = b->sectors,
			       .readonly = b->readonly};
	bool busy;

	if (!buf) {
		*len = need;
		return 0;
	}
	if (*len < need) {
		snprintf(err, errlen, "virtio-blk %s: state needs %zu bytes", b->name, need);
		return -ENOSPC;
	}
	pthread_mutex_lock(&b->vp.lock);
	busy = !b->paused || b->inflight;
	pthread_mutex_unlock(&b->vp.lock);
	if (busy) {
		snprintf(err, errlen, "virtio-blk %s: requests in flight (the VM is not paused)",
			 b->name);
		return -EBUSY;
	}
	memcpy(buf, &st, sizeof(st));
	virtio_pci_save(&b->vp, (uint8_t *)buf + sizeof(st));
	*len = need;
	return 0;
}

static int blk_restore(void *dev, const void *buf, uint64_t len, char *err, unsigned errlen)
{
	struct virtio_blk *b = dev;
	struct blk_state st;

	if (len < sizeof(st)) {
		snprintf(err, errlen, "virtio-blk %s: state of %llu bytes is too short", b->name,
			 (unsigned long long)len);
		return -EINVAL;
	}
	memcpy(&st, buf, sizeof(st));
	if (st.version != BLK_STATE_VERSION || st.nq != b->nq || st.readonly != b->readonly) {
		snprintf(err, errlen,
			 "virtio-blk %s: saved with %u queues%s (state version %u), the config "
			 "makes %u queues%s",
			 b->name, st.nq, st.readonly ? ", read-only" : "", st.version, b->nq,
			 b->readonly ? ", read-only" : "");
		return -EINVAL;
	}
	if (st.sectors != b->sectors) {
		snprintf(err, errlen,
			 "virtio-blk %s: the image has %llu sectors, the saved disk had %llu",
			 b->name, (unsigned long long)b->sectors, (unsigned long long)st.sectors);
		return -EINVAL;
	}
	return virtio_pci_restore(&b->vp, (const uint8_t *)buf + sizeof(st),
				  (size_t)(len - sizeof(st)), err, errlen);
}

/* Live migration, the VM paused and saved: what was written reaches the image, and the image is
 * closed, its lock with it, so that the destination on this host can open and lock it.
 * blk_reclaim opens the same file again when the migration fails; a file that is no longer
 * the one released (another inode, another size) is refused, the VM left paused. */
static int blk_release(void *dev, char *err, unsigned errlen)
{
	struct virtio_blk *b = dev;
	bool running;

	pthread_mutex_lock(&b->vp.lock);
	while (b->inflight && b->paused)
		pthread_cond_wait(&b->idle, &b->vp.lock);
	running = !b->paused;
	pthread_mutex_unlock(&b->vp.lock);
	if (running) {
		snprintf(err, errlen, "virtio-blk %s: the VM is not paused", b->name);
		return -EBUSY;
	}
	if (b->released)
		return 0;
	if (!b->readonly && fsync(b->fd) < 0) {
		snprintf(err, errlen, "virtio-blk %s: fsync of %s: %s", b->name, b->path,
			 strerror(errno));
		return -EIO;
	}
	blk_close(b);
	b->released = true;
	return 0;
}

static int blk_reclaim(void *dev, char *err, unsigned errlen)
{
	struct virtio_blk *b = dev;
	dev_t sd = b->st_dev;
	ino_t si = b->st_ino;
	uint64_t bytes = b->bytes;
	bool bdev = b->block_dev;
	int r;

	if (!b->released)
		return 0;
	r = blk_open(b, err, errlen);
	if (!r && (b->st_dev != sd || b->st_ino != si || b->block_dev != bdev)) {
		snprintf(err, errlen, "virtio-blk %s: %s is no longer the file the VM had open",
			 b->name, b->path);
		r = -ESTALE;
	} else if (!r && b->bytes != bytes) {
		snprintf(err, errlen, "virtio-blk %s: %s is %llu bytes, the VM had %llu", b->name,
			 b->path, (unsigned long long)b->bytes, (unsigned long long)bytes);
		r = -ESTALE;
	}
	if (r) {
		blk_close(b);
		/* what the guest was told stays: a later reclaim compares with the same file */
		b->st_dev = sd;
		b->st_ino = si;
		b->bytes = bytes;
		b->block_dev = bdev;
		b->sectors = bytes / BLK_SECTOR;
		return r;
	}
	b->released = false;
	return 0;
}

static void blk_counters(void *dev, struct dev_counters *out)
{
	struct virtio_blk *b = dev;

	out->reads = b->reads;
	out->writes = b->writes;
	out->read_bytes = b->read_bytes;
	out->write_bytes = b->write_bytes;
	out->flushes = b->flushes;
	out->doorbells = b->vp.kicks;
	out->irqs = b->vp.interrupts;
	out->wakeups = b->wakeups;
	out->backend_errors = b->errors;
	snprintf(out->mode, sizeof(out->mode), "%s", b->readonly ? "readonly" : "readwrite");
}

static void blk_destroy(void *dev)
{
	struct virtio_blk *b = dev;

	if (!b)
		return;
	/* the thread first: it finishes what is in flight, then the function goes */
	if (b->thread_up) {
		virtio_eventfd_signal(b->stop_fd);
		pthread_join(b->thread, NULL);
		b->thread_up = false;
	}
	virtio_pci_exit(&b->vp);
	blk_free(b);
}

const struct dev_model virtio_blk_model = {
    .name = "virtio-blk",
    .create = blk_create,
    .pci = blk_pci,
    .pause = blk_pause,
    .resume = blk_resume,
    .save = blk_save,
    .restore = blk_restore,
    .release = blk_release,
    .reclaim = blk_reclaim,
    .counters = blk_counters,
    .destroy = blk_destroy,
};
