/* SPDX-License-Identifier: GPL-2.0 */
/* lightiov.ko's shared types: one NVMe controller (lio_ssd), the sessions opened on its misc
 * device, their DMA windows and queue pairs. Each .c file owns one of these objects.
 */
#ifndef LIO_KMOD_H
#define LIO_KMOD_H

#include <linux/eventfd.h>
#if IS_ENABLED(CONFIG_IRQ_BYPASS_MANAGER)
#include <linux/irqbypass.h>
#endif
#include <linux/kref.h>
#include <linux/miscdevice.h>
#include <linux/mutex.h>
#include <linux/pci.h>
#include <linux/poll.h>
#include <linux/sizes.h>
#include <linux/uidgid.h>
#include <linux/wait.h>
#include <linux/workqueue.h>

#include "lightiov/abi.h"
#include "lightiov/check.h"
#include "lightiov/nvme.h"
#include "lightiov/nvmeq.h"
#include "lightiov/uapi.h"
#include "lightiov/voltable.h"

#define LIO_ADMIN_DEPTH 32
#define LIO_IOQ_DEPTH	64 /* entries of each controller queue the module creates */
#define LIO_INTERNAL_QID 1  /* polled queue for the volume table */
#define LIO_CMD_TIMEOUT_MS 5000
#define LIO_QMEM_CHUNK	SZ_1M	    /* one coherent allocation; nothing carved straddles two */

/* Module parameters (lio_main.c). */
extern unsigned int lio_max_qpairs;
extern unsigned int lio_max_window_mb;
extern bool lio_format_blank;
extern bool lio_direct_noiommu;
extern bool lio_allow_db_direct;
extern unsigned int lio_max_sessions;
extern unsigned int lio_max_session_qpairs;
extern struct workqueue_struct *lio_wq;

/* A queue pair's counters (lightiov/counters.h); syncs: writes sent with FUA for
 * LIO_SESSION_WRITE_THROUGH, completed.
 */
struct lio_ctr {
	LIO_COUNTERS_KEPT(LIO_COUNTER_FIELD)
};

/* One queue pair on the controller: rings in coherent memory, doorbells in BAR0. */
struct lio_hwq {
	u16 qid;
	u16 depth;
	u32 sq_tail; /* indices and phase as nvmeq.h keeps them */
	u32 cq_head;
	u32 cq_phase;
	struct nvme_sqe *sq;
	struct nvme_cqe *cq;
	dma_addr_t sq_dma, cq_dma;
	u32 __iomem *sq_db;
	u32 __iomem *cq_db;
};

/* One region of a session's DMA window: memfd pages pinned and mapped for the device. */
struct lio_region {
	u64 gpa, size;
	unsigned long npages;
	struct page **pages;
	dma_addr_t *dma;
};

struct lio_window {
	unsigned int n;
	u64 bytes;
	struct mm_struct *mm; /* charged for the pinned pages (pinned_vm), held by mmgrab() */
	unsigned long pinned; /* pages charged to mm */
	struct lio_region r[LIO_MAX_REGIONS];
	struct lio_check_region cr[LIO_MAX_REGIONS];
};

/* A command of the guest in flight on the controller, by the controller's command id. */
struct lio_slot {
	bool busy;
	u16 guest_cid;
	u8 kind;
	bool sync; /* FUA added for the session's write-through */
	u32 bytes;
	__le64 *buf; /* PRP list or DSM range list: one page */
	dma_addr_t buf_dma;
};

/* A session's queue memory: coherent chunks the client maps (the VM's CMB) and the module carves
 * rings and doorbell pages from. The session and the client's file each hold a reference: a
 * mapping may outlive the session.
 */
struct lio_qmem_area {
	struct kref ref;
	struct lio_ssd *ssd; /* holds ssd->ref */
	u64 size;
	unsigned int nchunks;
	void **cpu;
	dma_addr_t *dma;
	unsigned long *used; /* one bit per page */
};

struct lio_session;

struct lio_qp {
	struct lio_ssd *ssd;
	struct lio_session *ss;
	struct list_head node;
	u32 id, mode, flags, vol_id;
	u16 sqid, cqid;
	u32 sq_depth, cq_depth, irq_coalesce;
	u64 sq_gpa, cq_gpa, shadow_gpa, eventidx_gpa;
	/* rings and doorbell pages carved from queue memory (NULL: in the DMA window) */
	void *sq_k, *cq_k;
	__le32 *db_k;
	s64 sq_off, cq_off, db_off;
	bool direct; /* DB_DIRECT: the controller's rings and doorbells are the client's */
	u64 mmap_off; /* DB_DIRECT: where the doorbell pages map on the device file */
#if IS_ENABLED(CONFIG_IRQ_BYPASS_MANAGER)
	struct irq_bypass_producer bypass;
	bool bypass_on;
#endif
	struct lio_check_ctx chk;
	struct lio_hwq hw;
	int irq;
	struct lio_slot slots[LIO_IOQ_DEPTH];
	unsigned int inflight;
	/* the guest's view, owned by the work item */
	u32 g_sq_head, g_cq_tail;
	u8 g_phase;
	u32 irq_pending;
	bool broken;
	bool stopping;
	bool quiesced; /* QP_QUIESCE, QP_RESTORE: nothing fetched until QP_RESUME */
	struct eventfd_ctx *db_ctx, *irq_ctx;
	wait_queue_entry_t db_wait;
	poll_table db_pt;
	wait_queue_head_t *db_wqh;
	struct delayed_work work;
	struct lio_ctr ctr;
	struct lio_io io; /* the checker's output, too big for the stack */
};

struct lio_attached {
	u32 vol_id;
	u32 flags; /* LIO_ATTACH_* */
	u64 lba_start, lba_count;
	char name[LIO_NAME_MAX];
};

struct lio_session {
	struct lio_ssd *ssd;
	struct list_head node;
	struct lio_window win;
	struct lio_qmem_area *qm;
	u32 flags; /* LIO_SESSION_*, read by the queue pairs' work items */
	struct address_space *mapping; /* of the device file: direct doorbell mappings live there */
	struct list_head qps;
	unsigned int nqps;
	struct lio_attached vols[LIO_MAX_ATTACHED];
	unsigned int nvols;
	u64 owner;
	pid_t pid;
	uid_t uid;
	kuid_t kuid; /* the opener's: it owns the named volumes the session creates */
	bool admin; /* the opener was root or had CAP_SYS_ADMIN: every volume is its */
	char label[LIO_NAME_MAX];
	struct lio_ctr retired;
};

struct lio_ssd {
	struct kref ref;
	struct pci_dev *pdev;
	void __iomem *bar;
	u64 cap;
	u32 db_stride;
	struct mutex lock; /* everything below, the admin queue, the internal queue */
	bool dead;
	bool misc_up;
	char name[LIO_NAME_MAX];
	char model[40];
	u32 lba_shift;
	u64 nsze;
	u32 mdts_bytes;
	u16 nr_ioq; /* I/O queue ids the controller granted: 1..nr_ioq */
	int nvec;
	unsigned long *qid_used;
	struct lio_hwq admin;
	struct lio_hwq ioq;
	u16 next_cid;
	void *vt_buf;
	dma_addr_t vt_dma;
	__le64 *vt_prp;
	dma_addr_t vt_prp_dma;
	struct lio_vt *vt;
	struct lio_vt *vt_next; /* the staged change, swapped in once it is on disk */
	u32 next_vol_id;
	u32 next_qp_id;
	u64 next_owner;
	struct list_head sessions;
	unsigned int nsessions, nqpairs;
	struct lio_ctr retired;
	u64 start_ns;
	struct miscdevice misc;
	char misc_name[LIO_NAME_MAX + 16];
	char node_name[LIO_NAME_MAX + 16];
	struct list_head gnode;
};

/* lio_ctrl.c: the controller */
int lio_ctrl_enable(struct lio_ssd *ssd);
void lio_ctrl_disable(struct lio_ssd *ssd);
int lio_ctrl_admin(struct lio_ssd *ssd, struct nvme_sqe *sqe, u32 *result);
int lio_ctrl_io(struct lio_ssd *ssd, u8 opcode, u64 lba, u32 buf_off, u32 bytes);
int lio_hwq_alloc(struct lio_ssd *ssd, struct lio_hwq *q, u16 qid, u16 depth);
void lio_hwq_init(struct lio_ssd *ssd, struct lio_hwq *q, u16 qid, u16 depth);
phys_addr_t lio_ctrl_db_phys(struct lio_ssd *ssd, u16 qid);
void lio_hwq_free(struct lio_ssd *ssd, struct lio_hwq *q);
int lio_ctrl_create_ioq(struct lio_ssd *ssd, struct lio_hwq *q, int vector);
void lio_ctrl_delete_ioq(struct lio_ssd *ssd, struct lio_hwq *q);

/* lio_vol.c: the volume table and the sessions' holds on volumes */
int lio_vol_load(struct lio_ssd *ssd);
void lio_vol_unload(struct lio_ssd *ssd);
int lio_vol_op(struct lio_session *ss, unsigned int op, struct lio_vol *v);
int lio_vol_list(struct lio_session *ss, struct lio_vol_list *l);
int lio_vol_attach(struct lio_session *ss, struct lio_vol_attach *a);
int lio_vol_detach(struct lio_session *ss, u32 vol_id);
void lio_vol_release(struct lio_session *ss);

/* lio_dma.c: DMA windows */
int lio_win_register(struct lio_session *ss, const struct lio_dma_window *w);
void lio_win_drop(struct lio_ssd *ssd, struct lio_window *win);
int lio_win_copy(const struct lio_window *win, u64 gpa, void *buf, u32 len, bool to_guest);
int lio_win_read32(const struct lio_window *win, u64 gpa, u32 *val);
int lio_win_write32(const struct lio_window *win, u64 gpa, u32 val);
int lio_win_dma(const struct lio_window *win, u64 gpa, dma_addr_t *dma);

/* lio_qmem.c: queue memory */
int lio_qmem_alloc(struct lio_session *ss, struct lio_qmem *q);
void lio_qmem_put(struct lio_qmem_area *qm);
s64 lio_qmem_carve(struct lio_qmem_area *qm, u64 bytes);
void lio_qmem_release(struct lio_qmem_area *qm, s64 off, u64 bytes);
void *lio_qmem_ptr(const struct lio_qmem_area *qm, u64 off);
dma_addr_t lio_qmem_dma(const struct lio_qmem_area *qm, u64 off);

/* lio_qp.c: queue pairs */
int lio_qp_create(struct lio_session *ss, struct lio_qp_create *q);
int lio_qp_restore(struct lio_session *ss, struct lio_qp_restore *rq);
int lio_qp_quiesce(struct lio_session *ss, struct lio_qp_state *st);
int lio_qp_resume(struct lio_session *ss, u32 qp_id);
void lio_qp_destroy(struct lio_qp *qp);
struct lio_qp *lio_qp_find(struct lio_ssd *ssd, u32 id);
void lio_ctr_add(struct lio_ctr *to, const struct lio_ctr *from);
int lio_qp_mmap(struct lio_session *ss, struct vm_area_struct *vma);

/* lio_session.c: the misc device */
extern const struct file_operations lio_fops;
void lio_ssd_put(struct lio_ssd *ssd);
struct lio_abi_session lio_abi_session(const struct lio_session *ss);

/* lio_main.c: a refused request, logged (rate-limited) with the SSD's name */
__printf(2, 3) void lio_err(struct lio_ssd *ssd, const char *fmt, ...);
int lio_abi_refuse(struct lio_ssd *ssd, const char *op, int r, const struct lio_abi_err *e);
void lio_ssd_kill_sessions(struct lio_ssd *ssd);
void lio_ssd_ctr(struct lio_ssd *ssd, struct lio_ctr *t);

#endif
