/* The backend ABI's request rules: one pure C function per request (include/lightiov/uapi.h)
 * that decides whether its arguments are acceptable, shared by softssd and lightiov.ko (no libc:
 * the kernel compiles host-kmod/common/abi.c too), so that both backends refuse the same
 * requests with the same errno and the same words.
 *
 * Each check takes the request, what the server knows of the session (struct lio_abi_session)
 * and what the server offers, and returns 0 or a negative errno with *e naming the field at
 * fault; lio_abi_msg() words it for the server's log or reply. What only one server can decide
 * stays with it, and both call theirs in this order after the shared check:
 *   qp-create:    the transport's fds (softssd: their count), the server's own rules for the
 *                 flags (lightiov.ko: DB_DIRECT's grants and controller), its limits (queue
 *                 pairs of the session, then of the SSD), the volume (attached to the session),
 *                 then resources: queue memory carved, eventfds taken.
 *   dma-register: the transport's fds (softssd: their count), then each region's memfd.
 */
#ifndef LIGHTIOV_ABI_H
#define LIGHTIOV_ABI_H

#ifdef __KERNEL__
#include <linux/types.h>
#else
#include <stdbool.h>
#include <stdint.h>
#endif

#include "lightiov/check.h"
#include "lightiov/uapi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How lio_abi_msg() shows the value of the field at fault. */
enum lio_abi_fmt {
	LIO_ABI_NONE, /* no value: the session's state is at fault, not a field */
	LIO_ABI_DEC,
	LIO_ABI_HEX,
	LIO_ABI_SIGNED, /* fd fields */
};

/* A refused request: the errno returned, and what to tell the client. */
struct lio_abi_err {
	const char *field; /* the request's field ("sq_depth"), or "session" */
	const char *why;   /* what is wrong with it, a phrase */
	uint64_t value;	   /* the field's value, shown as fmt says */
	int region;	   /* dma-register: the region the field belongs to, else -1 */
	enum lio_abi_fmt fmt;
};

/* The session as the server sees it when a request arrives. */
struct lio_abi_session {
	const struct lio_check_region *regions; /* the registered DMA window */
	unsigned nr_regions;			/* 0: none registered */
	bool qmem;				/* queue memory allocated */
	unsigned nqps;				/* queue pairs it has */
};

/* Every LIO_QP_* flag of the ABI. A server serves these or fewer (softssd: all but DB_DIRECT). */
#define LIO_QP_FLAGS_ALL                                                                           \
	(LIO_QP_SQ_QMEM | LIO_QP_CQ_QMEM | LIO_QP_DB_POLL | LIO_QP_DB_EVENTFD | LIO_QP_READONLY |  \
	 LIO_QP_IRQ_ENABLED | LIO_QP_DB_DIRECT | LIO_QP_DB_STRIDE)

/* LIO_OP_QP_CREATE, in this order: mode; flags (known, served by this server, exactly one
 * doorbell kind, DB_DIRECT's passthrough with both rings in queue memory and never READONLY);
 * sq_depth, cq_depth (2..LIO_MAX_QDEPTH, equal for DB_DIRECT); sqid, cqid (not 0); irq_fd (-1
 * without IRQ_ENABLED, where fd_fields: the ioctl transport, whose fd fields are the fds; the
 * socket ignores them); the session's DMA window (but for DB_DIRECT) and queue memory (for the
 * flags that place anything there); sq_gpa, cq_gpa (rings not in queue memory: page aligned,
 * wholly inside one region of the window); shadow_db_gpa, eventidx_gpa (DB_EVENTFD: 4-byte
 * aligned, both slots inside the window; eventidx_gpa may be 0). -EINVAL, or -ENOENT for what
 * the session lacks. */
int lio_abi_qp_create(const struct lio_qp_create *q, const struct lio_abi_session *s,
		      uint32_t served, bool fd_fields, struct lio_abi_err *e);

/* LIO_OP_QP_QUIESCE: timeout_ms at most LIO_QUIESCE_MAX_MS (-EINVAL). Whose queue pair it is
 * the server decides (-ENOENT). */
int lio_abi_qp_quiesce(const struct lio_qp_state *st, struct lio_abi_err *e);

/* LIO_OP_QP_RESTORE: lio_abi_qp_create on rq->qp, then the state: its sq_depth and cq_depth
 * 0 or the request's; sq_head, sq_tail_db below sq_depth; cq_tail, cq_head, cq_head_db below
 * cq_depth; phase 0 or 1; flags and rsvd 0 (-EINVAL). */
int lio_abi_qp_restore(const struct lio_qp_restore *rq, const struct lio_abi_session *s,
		       uint32_t served, bool fd_fields, struct lio_abi_err *e);

/* LIO_OP_DMA_REGISTER: no queue pair of the session (-EBUSY); nr_regions 1..LIO_MAX_REGIONS;
 * each region: size > 0, size, fd_offset and gpa page multiples, neither gpa + size nor
 * fd_offset + size wrapping (-EINVAL), the regions so far at most max_bytes together (-E2BIG),
 * no overlap with an earlier region (-EINVAL). */
int lio_abi_dma_window(const struct lio_dma_window *w, const struct lio_abi_session *s,
		       uint64_t max_bytes, struct lio_abi_err *e);

/* LIO_OP_QMEM_ALLOC: none allocated yet (-EEXIST); size a page multiple in
 * 4 KiB..LIO_MAX_QMEM. */
int lio_abi_qmem(const struct lio_qmem *q, const struct lio_abi_session *s, struct lio_abi_err *e);

/* LIO_OP_SESSION_SET: no unknown bit in mask. */
int lio_abi_session_set(const struct lio_session_set *set, struct lio_abi_err *e);

/* "OP: [region N: ]FIELD VALUE: WHY" into buf (always terminated, cut to len - 1). */
void lio_abi_msg(char *buf, unsigned len, const char *op, const struct lio_abi_err *e);

#ifdef __cplusplus
}
#endif

#endif
