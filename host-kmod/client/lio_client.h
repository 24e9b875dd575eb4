/* Client side of the LightIOV backend (softssd's socket, or lightiov.ko's /dev/lightiov/NAME
 * through ioctls): one call per uapi.h operation with its file descriptors, and lio_drv, a small
 * polled NVMe driver over a memfd DMA window. */
#ifndef LVMM_LIO_CLIENT_H
#define LVMM_LIO_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lightiov/nvme.h"
#include "lightiov/uapi.h"

#define LIO_RUN_DIR_DEFAULT "/run/lvmm"
#define LIO_DEV_DIR_DEFAULT "/dev/lightiov" /* lightiov.ko's devices ($LVMM_LIO_DEV_DIR) */

struct lio_client;

/* A plain SSD or volume name: 1..LIO_NAME_MAX - 1 bytes of [A-Za-z0-9._-], not "." or "..".
 * lvmm's devices take nothing else (a path would let whoever names the SSD pick the socket or
 * device lvmm opens); tools and tests may still connect by path. */
bool lio_name_ok(const char *name);

/* The socket of SSD name: $LVMM_RUN_DIR (or /run/lvmm) + "/ssd/NAME.sock"; a name holding a '/'
 * is taken as the path itself. 0, or -ENAMETOOLONG / -EINVAL (bad name). */
int lio_sock_path(const char *name, char *buf, size_t len);

/* lightiov.ko's device of SSD name: $LVMM_LIO_DEV_DIR (or /dev/lightiov) + "/NAME". 0, or
 * -EINVAL for a name that is empty, too long or holds a '/', -ENAMETOOLONG. */
int lio_dev_path(const char *name, char *buf, size_t len);

/* Connects to the SSD and identifies as label (the VM id; NULL: "client"). A character device
 * lio_dev_path names (or a name that is a character device's path) is lightiov.ko's: the
 * session is the open file and every call an ioctl; else the softssd socket. 0 or a negative
 * errno with err set. id (may be NULL) receives the SSD's identify reply. */
int lio_client_connect(struct lio_client **out, const char *name, const char *label,
		       struct lio_identify *id, char *err, unsigned errlen);
void lio_client_close(struct lio_client *c);
/* The message of the last failed call ("" after a success). */
const char *lio_client_error(const struct lio_client *c);
int lio_client_fd(const struct lio_client *c);
/* true when the transport is lightiov.ko's device (ioctls), false for the softssd socket. */
bool lio_client_is_dev(const struct lio_client *c);
/* true once a reply timed out, came unasked, or broke the protocol: the request/reply pairing
 * is lost, and every later call fails with -ENOTCONN without touching the socket. */
bool lio_client_broken(const struct lio_client *c);
/* How long a reply may take (socket; default 30 s). 0 or a negative errno. */
int lio_client_set_timeout_ms(struct lio_client *c, unsigned ms);

/* Replies are untrusted input. [off, off + len) inside [0, size), overflow-safe. */
bool lio_range_ok(uint64_t off, uint64_t len, uint64_t size);
/* The queue-memory fd of a softssd reply: a memfd of at least size bytes, sealed against
 * shrinking, or -EPROTO with err saying why (lightiov.ko's own file: 0). */
int lio_qmem_fd_check(const struct lio_client *c, int fd, uint64_t size, char *err,
		      unsigned errlen);
/* A vol-attach reply: a named window of at least one LBA whose bytes (<< lba_shift) and end
 * fit in 64 bits. 0, or -EPROTO with err. */
int lio_attach_check(const struct lio_vol_attach *a, uint32_t lba_shift, char *err,
		     unsigned errlen);

/*
 * One raw request: payload in (inlen bytes) with nfds fds, reply payload into out (outlen bytes
 * at most; *outgot the bytes received, may be NULL) and up to *nrfds fds into rfds. Returns the
 * reply's status (0 or -errno), or a negative errno for a transport failure.
 */
int lio_client_call(struct lio_client *c, uint32_t op, const void *in, uint32_t inlen,
		    const int *fds, unsigned nfds, void *out, uint32_t outlen, uint32_t *outgot,
		    int *rfds, unsigned *nrfds);

int lio_client_identify(struct lio_client *c, struct lio_identify *id);
/* The fds are w->r[i].fd, sent in region order. */
int lio_client_dma_register(struct lio_client *c, const struct lio_dma_window *w);
/* q->fd receives the queue-memory memfd (the caller closes it). */
int lio_client_qmem_alloc(struct lio_client *c, struct lio_qmem *q);
/* Sends q->db_fd when LIO_QP_DB_EVENTFD, then q->irq_fd when LIO_QP_IRQ_ENABLED. */
int lio_client_qp_create(struct lio_client *c, struct lio_qp_create *q);
int lio_client_qp_destroy(struct lio_client *c, uint32_t qp_id);
/* LIO_OP_QP_QUIESCE (timeout_ms 0: the backend's default), LIO_OP_QP_RESUME and
 * LIO_OP_QP_RESTORE (uapi.h): a queue pair's state out, and a queue pair from a state. */
int lio_client_qp_quiesce(struct lio_client *c, uint32_t qp_id, uint32_t timeout_ms,
			  struct lio_qp_state *st);
int lio_client_qp_resume(struct lio_client *c, uint32_t qp_id);
int lio_client_qp_restore(struct lio_client *c, struct lio_qp_restore *q);
int lio_client_qp_stats(struct lio_client *c, uint32_t qp_id, struct lio_qp_stats *s);
/* LIO_OP_SESSION_SET: s->mask and s->flags in; s->flags and s->syncs back. */
int lio_client_session_set(struct lio_client *c, struct lio_session_set *s);
int lio_client_vol_create(struct lio_client *c, const struct lio_vol *v);
int lio_client_vol_delete(struct lio_client *c, const struct lio_vol *v);
int lio_client_vol_resize(struct lio_client *c, const struct lio_vol *v);
int lio_client_vol_list(struct lio_client *c, struct lio_vol_list *l);
int lio_client_vol_attach(struct lio_client *c, struct lio_vol_attach *a);
int lio_client_vol_detach(struct lio_client *c, uint32_t vol_id);
int lio_client_ssd_stats(struct lio_client *c, struct lio_ssd_stats *s);
int lio_client_session_list(struct lio_client *c, struct lio_session_list *l);

/* ---- lio_drv: a polled host-side NVMe driver on one session ---- */

#define LIO_DRV_MAX_QP	 16
#define LIO_DRV_GPA_BASE 0x40000000ull /* where the DMA window sits in "guest-physical" space */
/* lio_drv_io's wait: a backing disk shared with busy neighbours stalls seconds at times */
#define LIO_DRV_IO_TIMEOUT_MS 30000

struct lio_drv_opts {
	uint32_t vol_id;    /* attached volume */
	uint64_t lba_start; /* its window (passthrough SQEs carry absolute LBAs) */
	uint64_t lba_count;
	uint32_t lba_shift;
	uint32_t mode;	    /* enum lightiov_vcap_mode */
	uint32_t qp_flags;  /* LIO_QP_SQ_QMEM | LIO_QP_CQ_QMEM | LIO_QP_DB_POLL or DB_EVENTFD |
			     * LIO_QP_IRQ_ENABLED | LIO_QP_READONLY */
	unsigned nr_qp;	    /* 1..LIO_DRV_MAX_QP */
	uint32_t depth;	    /* SQ and CQ entries */
	uint64_t mem_bytes; /* DMA window size (0: 16 MiB) */
};

struct lio_drv_qp {
	uint32_t qp_id;
	uint32_t depth;
	struct nvme_sqe *sq;
	volatile struct nvme_cqe *cq;
	volatile uint32_t *sq_db, *cq_db; /* doorbell page words or shadow buffer slots */
	int db_fd, irq_fd;
	uint32_t sq_tail, cq_head;
	uint16_t phase;
	uint16_t next_cid;
	unsigned outstanding;
	uint64_t prp_gpa; /* one PRP-list page per SQ slot */
};

struct lio_drv {
	struct lio_client *c;
	struct lio_drv_opts o;
	int memfd, qmem_fd;
	uint8_t *mem, *qmem;
	uint64_t mem_bytes, qmem_bytes;
	uint64_t brk; /* bump allocator in mem (bytes used) */
	unsigned nr_qp;
	struct lio_drv_qp qp[LIO_DRV_MAX_QP];
	int io_timeout_ms; /* lio_drv_io's wait; 0: LIO_DRV_IO_TIMEOUT_MS */
};

/* Creates the memfd window (sealed against shrinking), registers it, allocates queue memory when
 * a flag asks for it, and creates o->nr_qp queue pairs. 0 or a negative errno with err set. */
int lio_drv_open(struct lio_drv **out, struct lio_client *c, const struct lio_drv_opts *o,
		 char *err, unsigned errlen);
/* Destroys the queue pairs (best effort) and unmaps; leaves the client open. */
void lio_drv_close(struct lio_drv *d);

/* bytes (rounded up to pages) of the DMA window: its GPA, or 0 when the window is full. */
uint64_t lio_drv_alloc(struct lio_drv *d, uint64_t bytes);
/* Host pointer of a GPA inside the window (NULL outside). */
void *lio_drv_ptr(struct lio_drv *d, uint64_t gpa);

/* Places sqe (its cid replaced) on queue qi and rings the doorbell. Returns the cid used, or
 * -EBUSY when the SQ is full. */
int lio_drv_submit(struct lio_drv *d, unsigned qi, struct nvme_sqe *sqe);
/* Places sqe on queue qi as it is (the caller's cid) without ringing: 0, or -EBUSY when the SQ
 * is full. lio_drv_ring then rings once for every command placed since the last ring. */
int lio_drv_queue(struct lio_drv *d, unsigned qi, const struct nvme_sqe *sqe);
void lio_drv_ring(struct lio_drv *d, unsigned qi);
/* Reaps up to max completions of queue qi into out; waits up to timeout_ms for the first one
 * (spinning, or asleep on the irq eventfd until the interrupt when the queue has one). Returns
 * how many. */
int lio_drv_reap(struct lio_drv *d, unsigned qi, struct nvme_cqe *out, unsigned max,
		 int timeout_ms);

/* Fills prp1/prp2 of sqe for len bytes at gpa (a PRP list in the slot's page when needed). */
void lio_drv_prp(struct lio_drv *d, unsigned qi, struct nvme_sqe *sqe, uint64_t gpa, uint32_t len);
/* A read, write (opcode) of nlb LBAs at window-relative lba to/from gpa; flush with nlb 0.
 * Submits, waits (LIO_DRV_IO_TIMEOUT_MS at most) and returns the NVMe status (0: success), or
 * 0xffff on a timeout. Adds lba_start in passthrough mode. */
uint16_t lio_drv_io(struct lio_drv *d, unsigned qi, uint8_t opcode, uint64_t lba, uint32_t nlb,
		    uint64_t gpa);

#endif
