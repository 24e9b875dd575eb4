/* The LightIOV backend ABI: the one contract between its clients (lvmm, gpu-fs, test clients)
 * and its two implementations (softssd over a Unix socket, lightiov.ko as ioctls on a misc device).
 *
 * Model. A client opens an SSD (connects to /run/lvmm/ssd/NAME.sock, or opens /dev/lightiov/NAME)
 * and so gets a session: the session is one VM. In it the client attaches volumes (named LBA
 * windows), registers its DMA window (guest memory as memfds at guest-physical addresses), asks
 * for queue memory (a memfd the backend owns, mapped into the guest as the vNVMe CMB) and creates
 * queue pairs. Closing the session (or the client dying) destroys its queue pairs, frees its
 * anonymous volumes and detaches the rest: nothing outlives a session but the volume table.
 *
 * Every operation is one request struct in, one reply struct out, and a status: 0 or a negative
 * errno. The same structs travel as ioctl arguments (lightiov.ko) and as the payload of a socket
 * message (softssd), where file descriptors go alongside as SCM_RIGHTS in the order their fields
 * appear; over the socket the fd fields are ignored on input and -1 on output.
 *
 * No silent clamping: a value outside its range fails with -EINVAL (or the errno named below) and,
 * over the socket, a message naming the field and the value.
 */
#ifndef LIGHTIOV_UAPI_H
#define LIGHTIOV_UAPI_H

#ifdef __KERNEL__
#include <linux/ioctl.h>
#include <linux/types.h>
#else
#include <stdint.h>
#include <sys/ioctl.h>
#endif

#include "counters.h"
#include "vcap.h"

/* Usable from C and C++ (gpu-fs is CUDA C++): C++ spells C11's _Static_assert static_assert. */
#ifdef __cplusplus
#define LIO_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
extern "C" {
#else
#define LIO_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

#define LIO_ABI_VERSION 1
#define LIO_MAGIC	0x4c494f31u /* "LIO1": every socket message starts with it */

/* Limits shared by every backend. */
#define LIO_NAME_MAX	 32	/* SSD and volume names: [A-Za-z0-9._-], 1..31 bytes + NUL */
#define LIO_MAX_QPAIRS	 65535u /* queue pairs per SSD, all sessions together */
#define LIO_MAX_QDEPTH	 4096u	/* entries per SQ or CQ (CAP.MQES + 1 of the vNVMe) */
#define LIO_MAX_REGIONS	 8	/* DMA-window regions per session (RAM split around the hole) */
#define LIO_MAX_VOLUMES	 1024	/* volumes per SSD (the volume table's size) */
#define LIO_MAX_ATTACHED 16	/* volumes attached to one session */
#define LIO_ERR_MAX	 160	/* error message in a socket reply */
#define LIO_PAGE_SIZE	 4096u	/* NVMe memory page size of every queue pair (CC.MPS = 0) */
#define LIO_MDTS_BYTES	 (128u << 10) /* largest transfer of one command */
#define LIO_MAX_QMEM	 (64u << 20)  /* queue memory of one session */

/* A queue pair's data-path mode is vcap.h's enum lightiov_vcap_mode: PASSTHROUGH (SQEs taken as
 * written, the guest adds lba_start: trusted) or ISOLATED (each SQE copied out of guest reach,
 * checked, lba_start added). EMULATE never reaches a backend queue pair: lvmm parses those
 * commands itself and submits them through a queue pair of its own. */

/* ---- operations ---- */
enum lio_op {
	LIO_OP_IDENTIFY = 1, /* -> lio_identify */
	LIO_OP_DMA_REGISTER, /* lio_dma_window (+ one memfd per region) */
	LIO_OP_QMEM_ALLOC,   /* lio_qmem -> lio_qmem (+ the queue-memory memfd) */
	LIO_OP_QP_CREATE,    /* lio_qp_create (+ db_fd if LIO_QP_DB_EVENTFD, then irq_fd if
			      * LIO_QP_IRQ_ENABLED) -> lio_qp_create */
	LIO_OP_QP_DESTROY,   /* lio_qp_ref */
	LIO_OP_QP_STATS,     /* lio_qp_ref -> lio_qp_stats */
	LIO_OP_VOL_CREATE,   /* lio_vol */
	LIO_OP_VOL_DELETE,   /* lio_vol (name) */
	LIO_OP_VOL_RESIZE,   /* lio_vol (name, new size; grow only) */
	LIO_OP_VOL_LIST,     /* lio_vol_list (index range) -> lio_vol_list */
	LIO_OP_VOL_ATTACH,   /* lio_vol_attach -> lio_vol_attach */
	LIO_OP_VOL_DETACH,   /* lio_vol_attach (vol_id) */
	LIO_OP_SSD_STATS,    /* -> lio_ssd_stats (whole SSD and this session) */
	LIO_OP_SESSION_LIST, /* lio_session_list (index range) -> lio_session_list */
	LIO_OP_SESSION_SET,  /* lio_session_set -> lio_session_set */
	LIO_OP_QP_QUIESCE, /* lio_qp_state (qp_id, timeout_ms) -> lio_qp_state (LIO_ID_QP_STATE) */
	LIO_OP_QP_RESUME,  /* lio_qp_ref (LIO_ID_QP_STATE) */
	LIO_OP_QP_RESTORE, /* lio_qp_restore (+ fds as QP_CREATE) -> lio_qp_restore
			    * (LIO_ID_QP_STATE) */
	LIO_OP_MAX
};

/* LIO_OP_IDENTIFY */
struct lio_identify {
	uint32_t abi_version;	/* LIO_ABI_VERSION */
	uint32_t lba_shift;	/* LBA size = 1 << lba_shift (9 or 12) */
	uint64_t capacity_lbas; /* usable LBAs for volumes (after the volume table) */
	uint64_t free_lbas;	/* largest allocation a new volume can get */
	uint32_t max_qpairs;	/* queue pairs this SSD serves in all (<= LIO_MAX_QPAIRS) */
	uint32_t qpairs_in_use;
	uint32_t max_qdepth;
	uint32_t nr_volumes;
	uint32_t flags; /* LIO_ID_* */
	uint32_t rsvd;
	char name[LIO_NAME_MAX];
	char model[40];	   /* device model: "none", "p4510", "latency=80us,iops=640k" */
	uint32_t rsvd2[2]; /* pads to the pinned 128 bytes */
};
#define LIO_ID_DB_POLL	  (1u << 0) /* serves doorbell pages it polls (LIO_QP_DB_POLL) */
#define LIO_ID_DB_EVENTFD (1u << 1) /* serves doorbell eventfds (LIO_QP_DB_EVENTFD) */
#define LIO_ID_KERNEL	  (1u << 2) /* lightiov.ko on a real controller */
#define LIO_ID_QP_STATE	  (1u << 3) /* serves QP_QUIESCE, QP_RESUME and QP_RESTORE */
#define LIO_ID_DB_STRIDE  (1u << 4) /* serves LIO_QP_DB_STRIDE */

/* LIO_OP_DMA_REGISTER: the session's DMA window, replacing any earlier one (refused with -EBUSY
 * while queue pairs exist). Regions must not overlap in GPA space; each is [gpa, gpa + size) of
 * guest-physical space backed by its memfd at fd_offset. Every data pointer, PRP list, CQ and
 * shadow-doorbell address a queue pair uses must fall inside one region. */
struct lio_dma_region {
	uint64_t gpa;
	uint64_t size;	    /* multiple of LIO_PAGE_SIZE, > 0 */
	uint64_t fd_offset; /* multiple of LIO_PAGE_SIZE */
	int32_t fd;	    /* memfd (ioctl); over the socket, the region's SCM_RIGHTS fd, which
			     * softssd requires sealed with F_SEAL_SHRINK (it maps the file) */
	uint32_t rsvd;
};

struct lio_dma_window {
	uint32_t nr_regions; /* 1..LIO_MAX_REGIONS */
	uint32_t rsvd;
	struct lio_dma_region r[LIO_MAX_REGIONS];
};

/* LIO_OP_QMEM_ALLOC: backend-owned queue memory for this session (one allocation per session;
 * a second call fails with -EEXIST). The client maps the returned memfd; rings placed in it
 * (LIO_QP_SQ_QMEM, LIO_QP_CQ_QMEM) and doorbell pages (LIO_QP_DB_POLL) are carved from it by the
 * backend at qp-create time and reported as offsets. lvmm maps it as the vNVMe CMB. */
struct lio_qmem {
	uint64_t size; /* in: bytes, multiple of LIO_PAGE_SIZE, <= 64 MiB */
	int32_t fd;    /* out (ioctl): memfd of the queue memory */
	uint32_t rsvd;
};

/* LIO_OP_QP_CREATE */
struct lio_qp_create {
	/* in */
	uint32_t vol_id; /* an attached volume (lio_vol_attach.vol_id): the LBA window */
	uint32_t mode;	 /* enum lightiov_vcap_mode */
	uint32_t flags;	 /* LIO_QP_* */
	uint16_t sqid;	 /* the guest's queue id (reported in each CQE's SQ identifier) */
	uint16_t cqid;
	uint32_t sq_depth; /* 2..LIO_MAX_QDEPTH */
	uint32_t cq_depth; /* 2..LIO_MAX_QDEPTH */
	uint64_t sq_gpa; /* ring in guest memory (no LIO_QP_SQ_QMEM): page aligned, in the window */
	uint64_t cq_gpa; /* same for the CQ */
	uint64_t shadow_db_gpa; /* LIO_QP_DB_EVENTFD: the guest's shadow doorbell buffer (NVMe
				 * Doorbell Buffer Config) slots of this queue pair: the SQ tail
				 * at shadow_db_gpa, the CQ head at shadow_db_gpa + 4 */
	uint64_t eventidx_gpa;	/* same for the EventIdx buffer (may be 0: no event index) */
	int32_t db_fd;		/* LIO_QP_DB_EVENTFD: eventfd signalled on each SQ doorbell */
	int32_t irq_fd;		/* eventfd signalled when CQEs were posted (irqfd); -1: none */
	uint32_t irq_coalesce;	/* post an interrupt every N CQEs (0 = every batch) */
	uint32_t db_stride;	/* LIO_QP_DB_STRIDE: the shadow slots are 4 << db_stride bytes
				 * apart (the controller's CAP.DSTRD, 1..10): the CQ head (and its
				 * EventIdx) at shadow_db_gpa + (4 << db_stride); else ignored */
	/* out */
	uint32_t qp_id; /* backend handle, unique per SSD */
	uint32_t rsvd2;
	uint64_t sq_off; /* LIO_QP_SQ_QMEM: offset of the SQ in queue memory */
	uint64_t cq_off; /* LIO_QP_CQ_QMEM: offset of the CQ in queue memory */
	uint64_t db_off; /* LIO_QP_DB_POLL: offset of the doorbell page pair in queue memory:
			  * SQ tail (u32) at db_off, CQ head (u32) at db_off + LIO_PAGE_SIZE */
	uint64_t rsvd3;	 /* pads to the pinned 112 bytes */
};
#define LIO_QP_SQ_QMEM	   (1u << 0) /* SQ ring in queue memory (the CMB) */
#define LIO_QP_CQ_QMEM	   (1u << 1) /* CQ ring in queue memory */
#define LIO_QP_DB_POLL	   (1u << 2) /* doorbells in queue memory, polled by the backend */
#define LIO_QP_DB_EVENTFD  (1u << 3) /* doorbell = db_fd; values read from the shadow buffer */
#define LIO_QP_READONLY	   (1u << 4) /* writes fail with Attempted Write to Read Only Range */
#define LIO_QP_IRQ_ENABLED (1u << 5) /* signal irq_fd (the CQ was created with IEN) */
#define LIO_QP_DB_STRIDE   (1u << 7) /* DB_EVENTFD with strided shadow slots (db_stride) */
#define LIO_QP_DB_DIRECT                                                                           \
	(1u << 6) /* lightiov.ko, passthrough with SQ_QMEM | CQ_QMEM: the rings                    \
		   * in queue memory are the controller's own, the client rings                    \
		   * its doorbells through mmap() of the device at db_off (SQ tail                 \
		   * at db_off, CQ head at db_off + LIO_PAGE_SIZE) and writes                      \
		   * device addresses; CQEs carry the controller's queue id */

/* LIO_OP_QP_DESTROY, LIO_OP_QP_STATS */
struct lio_qp_ref {
	uint32_t qp_id;
	uint32_t rsvd;
};

/* The counters (cmds, read_bytes, write_bytes, errors, rejected, polls, sleeps, irqs: each a
 * uint64_t) are listed with their meaning in counters.h. */
struct lio_qp_stats {
	uint32_t qp_id;
	uint32_t mode;
	LIO_COUNTERS(LIO_COUNTER_FIELD)
};

/* LIO_OP_VOL_CREATE / DELETE / RESIZE */
struct lio_vol {
	char name[LIO_NAME_MAX];
	uint64_t size_bytes; /* CREATE, RESIZE: multiple of the LBA size, > 0 */
};

/* One volume as listed. */
struct lio_vol_info {
	char name[LIO_NAME_MAX];
	uint64_t lba_start;
	uint64_t lba_count;
	uint32_t flags; /* LIO_VOL_* */
	uint32_t users; /* sessions attached now */
};
#define LIO_VOL_ANON (1u << 0) /* anonymous: freed when its session ends */

/* LIO_OP_VOL_LIST: in: first index; out: up to LIO_VOL_LIST_MAX entries from there. */
#define LIO_VOL_LIST_MAX 32
struct lio_vol_list {
	uint32_t first; /* in */
	uint32_t count; /* out: entries filled */
	uint32_t total; /* out: volumes on the SSD */
	uint32_t rsvd;
	struct lio_vol_info v[LIO_VOL_LIST_MAX];
};

/* LIO_OP_VOL_ATTACH: attach a named volume to the session (LIO_ATTACH_CREATE: create it with
 * size_bytes if absent), or with LIO_ATTACH_ANON a fresh anonymous volume of size_bytes whose
 * name the backend picks and returns. LIO_OP_VOL_DETACH takes vol_id. */
struct lio_vol_attach {
	char name[LIO_NAME_MAX]; /* in (named); out (anonymous) */
	uint64_t size_bytes;	 /* in: CREATE / ANON size; out: the volume's size */
	uint32_t flags;		 /* LIO_ATTACH_* */
	uint32_t vol_id;	 /* out */
	uint64_t lba_start;	 /* out: first LBA of the window */
	uint64_t lba_count;	 /* out */
};
#define LIO_ATTACH_CREATE   (1u << 0)
#define LIO_ATTACH_ANON	    (1u << 1)
#define LIO_ATTACH_READONLY (1u << 2) /* shared read-only attach; else exclusive */
#define LIO_ATTACH_EXCL_ALL                                                                        \
	(1u << 3) /* exclusive even against read-only users (import, resize)                       \
		   */

/* LIO_OP_SSD_STATS */
struct lio_ssd_stats {
	LIO_COUNTERS(LIO_COUNTER_FIELD) /* of every queue pair the SSD served */
	uint32_t sessions, qpairs;
	uint64_t uptime_ns;
};

/* LIO_OP_SESSION_LIST: one line per client for `lvmm ssd stats`. */
#define LIO_SESSION_LIST_MAX 16
struct lio_session_info {
	int32_t pid; /* peer credentials of the client */
	uint32_t uid;
	uint32_t qpairs;
	uint32_t volumes;
	LIO_COUNTERS_SESSION(LIO_COUNTER_FIELD)
	char label[LIO_NAME_MAX]; /* what the client called itself (the VM id) */
};
struct lio_session_list {
	uint32_t first, count, total, rsvd;
	struct lio_session_info s[LIO_SESSION_LIST_MAX];
};

/* LIO_OP_SESSION_SET: settings of the whole session, applied to every queue pair it has and to
 * those it creates later. Only the bits in mask change (mask 0 just reads them back). A backend
 * that predates it answers -EOPNOTSUPP (socket) or -ENOTTY (ioctl). */
struct lio_session_set {
	uint32_t mask;	/* in: LIO_SESSION_* bits to change */
	uint32_t flags; /* in: their new values; out: the session's flags now */
	uint64_t syncs; /* out: writes made durable for LIO_SESSION_WRITE_THROUGH so far */
};
/* The VM turned its volatile write cache off (Set Features 06h): every write is durable before
 * its completion is posted, as if it had FUA set. */
#define LIO_SESSION_WRITE_THROUGH (1u << 0)

/* LIO_OP_QP_QUIESCE, LIO_OP_QP_RESUME, LIO_OP_QP_RESTORE: a queue pair's state handed out and
 * taken back (a snapshot of the VM; the same state could seed a queue pair of another daemon).
 * An older backend answers -EOPNOTSUPP (socket) or -ENOTTY (ioctl); IDENTIFY's LIO_ID_QP_STATE
 * says a backend serves them.
 *
 * QP_QUIESCE (lio_qp_state: qp_id and timeout_ms in): the backend stops fetching from the SQ,
 * waits until every command it fetched has completed and its CQE is posted (interrupts raised),
 * and returns the state below; the queue pair then stays quiesced (no fetch, doorbells ignored
 * but kept) until QP_RESUME or QP_DESTROY. A second QP_QUIESCE of a quiesced queue pair returns
 * its state again. After timeout_ms (0: LIO_QUIESCE_TIMEOUT_MS; at most LIO_QUIESCE_MAX_MS)
 * with commands still in flight it fails with -ETIMEDOUT and the queue pair serves on as
 * before. Only the session's own queue pairs (-ENOENT).
 *
 * QP_RESUME (lio_qp_ref): a quiesced queue pair fetches again (-EINVAL if not quiesced).
 *
 * QP_RESTORE (lio_qp_restore): QP_CREATE's request and checks, plus a state from QP_QUIESCE
 * (of this backend or another): the queue pair starts quiesced at that state: the next SQE
 * fetched is sq_head's, the next CQE goes to cq_tail with phase tag phase. With LIO_QP_DB_POLL
 * the backend writes sq_tail_db and cq_head_db into the new doorbell pages (the client may
 * write them again while it is quiesced); with LIO_QP_DB_EVENTFD the shadow slots in guest
 * memory are the doorbells and the two values are only checked. QP_RESUME starts it. Every
 * state value is checked against the depths: sq_head, sq_tail_db < sq_depth; cq_tail,
 * cq_head, cq_head_db < cq_depth; phase 0 or 1; sq_depth and cq_depth equal to the request's
 * (or 0); flags and rsvd 0. */
#define LIO_QUIESCE_TIMEOUT_MS 5000u
/* Well below a client's 30 s reply timeout: softssd answers its sessions one request at a time,
 * so a longer quiesce would make other clients' ordinary requests time out. */
#define LIO_QUIESCE_MAX_MS 10000u
struct lio_qp_state {
	uint32_t qp_id;	     /* in (QUIESCE); out: the queue pair (RESTORE: the new one) */
	uint32_t timeout_ms; /* in (QUIESCE) */
	uint32_t sq_head;    /* next SQ entry to fetch */
	uint32_t cq_tail;    /* next CQ entry to post */
	uint32_t cq_head;    /* CQ head as last read from the doorbell */
	uint32_t phase;	     /* phase tag of the next CQE posted at cq_tail: 0 or 1 */
	uint32_t sq_tail_db; /* the SQ tail doorbell's value when quiesced */
	uint32_t cq_head_db; /* the CQ head doorbell's value when quiesced */
	uint32_t sq_depth;   /* out (QUIESCE): the queue pair's depths, checked on RESTORE */
	uint32_t cq_depth;
	uint32_t flags; /* LIO_QPS_*: 0 on RESTORE */
	uint32_t rsvd;
	uint64_t quiesce_ns; /* out (QUIESCE): time spent draining */
};
#define LIO_QPS_BAD_DB (1u << 0) /* out: a doorbell value out of range was seen (ignored) */

struct lio_qp_restore {
	struct lio_qp_create qp; /* in/out as for QP_CREATE */
	struct lio_qp_state st;	 /* in: where the queue pair goes on from */
};

/* ---- the socket transport (softssd) ----
 * Request: lio_msg_hdr + payload of hdr.len bytes (+ SCM_RIGHTS fds); reply: lio_msg_reply +
 * payload. One request at a time per connection; replies come in order. The first request of a
 * connection may be LIO_OP_IDENTIFY with hdr.label naming the client. */
struct lio_msg_hdr {
	uint32_t magic; /* LIO_MAGIC */
	uint32_t op;	/* enum lio_op */
	uint32_t len;	/* payload bytes that follow */
	uint32_t nfds;	/* file descriptors attached */
	char label[LIO_NAME_MAX];
};

struct lio_msg_reply {
	uint32_t magic;
	int32_t status; /* 0 or -errno */
	uint32_t len;	/* payload bytes that follow */
	uint32_t nfds;
	char err[LIO_ERR_MAX]; /* when status < 0: what was refused and why */
};

/* ---- the ioctl transport (lightiov.ko, /dev/lightiov/NAME) ---- */
#define LIO_IOC_MAGIC	     'L'
#define LIO_IOC_IDENTIFY     _IOR(LIO_IOC_MAGIC, LIO_OP_IDENTIFY, struct lio_identify)
#define LIO_IOC_DMA_REGISTER _IOW(LIO_IOC_MAGIC, LIO_OP_DMA_REGISTER, struct lio_dma_window)
#define LIO_IOC_QMEM_ALLOC   _IOWR(LIO_IOC_MAGIC, LIO_OP_QMEM_ALLOC, struct lio_qmem)
#define LIO_IOC_QP_CREATE    _IOWR(LIO_IOC_MAGIC, LIO_OP_QP_CREATE, struct lio_qp_create)
#define LIO_IOC_QP_DESTROY   _IOW(LIO_IOC_MAGIC, LIO_OP_QP_DESTROY, struct lio_qp_ref)
#define LIO_IOC_QP_STATS     _IOWR(LIO_IOC_MAGIC, LIO_OP_QP_STATS, struct lio_qp_stats)
#define LIO_IOC_VOL_CREATE   _IOW(LIO_IOC_MAGIC, LIO_OP_VOL_CREATE, struct lio_vol)
#define LIO_IOC_VOL_DELETE   _IOW(LIO_IOC_MAGIC, LIO_OP_VOL_DELETE, struct lio_vol)
#define LIO_IOC_VOL_RESIZE   _IOW(LIO_IOC_MAGIC, LIO_OP_VOL_RESIZE, struct lio_vol)
#define LIO_IOC_VOL_LIST     _IOWR(LIO_IOC_MAGIC, LIO_OP_VOL_LIST, struct lio_vol_list)
#define LIO_IOC_VOL_ATTACH   _IOWR(LIO_IOC_MAGIC, LIO_OP_VOL_ATTACH, struct lio_vol_attach)
#define LIO_IOC_VOL_DETACH   _IOW(LIO_IOC_MAGIC, LIO_OP_VOL_DETACH, struct lio_vol_attach)
#define LIO_IOC_SSD_STATS    _IOR(LIO_IOC_MAGIC, LIO_OP_SSD_STATS, struct lio_ssd_stats)
#define LIO_IOC_SESSION_LIST _IOWR(LIO_IOC_MAGIC, LIO_OP_SESSION_LIST, struct lio_session_list)
#define LIO_IOC_SESSION_SET  _IOWR(LIO_IOC_MAGIC, LIO_OP_SESSION_SET, struct lio_session_set)
#define LIO_IOC_QP_QUIESCE   _IOWR(LIO_IOC_MAGIC, LIO_OP_QP_QUIESCE, struct lio_qp_state)
#define LIO_IOC_QP_RESUME    _IOW(LIO_IOC_MAGIC, LIO_OP_QP_RESUME, struct lio_qp_ref)
#define LIO_IOC_QP_RESTORE   _IOWR(LIO_IOC_MAGIC, LIO_OP_QP_RESTORE, struct lio_qp_restore)

/* Fixed sizes: the same bytes from a 64-bit client to either backend. */
LIO_STATIC_ASSERT(sizeof(struct lio_identify) == 128, "lio_identify");
LIO_STATIC_ASSERT(sizeof(struct lio_dma_region) == 32, "lio_dma_region");
LIO_STATIC_ASSERT(sizeof(struct lio_qp_create) == 112, "lio_qp_create");
LIO_STATIC_ASSERT(sizeof(struct lio_qp_stats) == 72, "lio_qp_stats");
LIO_STATIC_ASSERT(__builtin_offsetof(struct lio_qp_stats, cmds) == 8, "lio_qp_stats.cmds");
LIO_STATIC_ASSERT(__builtin_offsetof(struct lio_qp_stats, irqs) == 64, "lio_qp_stats.irqs");
LIO_STATIC_ASSERT(sizeof(struct lio_ssd_stats) == 80, "lio_ssd_stats");
LIO_STATIC_ASSERT(__builtin_offsetof(struct lio_ssd_stats, sessions) == 64, "ssd_stats.sessions");
LIO_STATIC_ASSERT(sizeof(struct lio_session_info) == 88, "lio_session_info");
LIO_STATIC_ASSERT(__builtin_offsetof(struct lio_session_info, label) == 56, "session_info.label");
LIO_STATIC_ASSERT(sizeof(struct lio_vol_info) == 56, "lio_vol_info");
LIO_STATIC_ASSERT(sizeof(struct lio_vol_attach) == 64, "lio_vol_attach");
LIO_STATIC_ASSERT(sizeof(struct lio_qp_state) == 56, "lio_qp_state");
LIO_STATIC_ASSERT(sizeof(struct lio_qp_restore) == 168, "lio_qp_restore");
LIO_STATIC_ASSERT(__builtin_offsetof(struct lio_qp_restore, st) == 112, "lio_qp_restore.st");
LIO_STATIC_ASSERT(sizeof(struct lio_msg_hdr) == 48, "lio_msg_hdr");
LIO_STATIC_ASSERT(sizeof(struct lio_msg_reply) == 176, "lio_msg_reply");

#ifdef __cplusplus
}
#endif

#endif
