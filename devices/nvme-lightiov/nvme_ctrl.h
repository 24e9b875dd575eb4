/* The emulated NVMe controller: BAR0 registers and doorbells, admin and I/O queues, CMB, driven
 * by register accesses; reaches guest memory only through guest_mem and storage through a backend.
 */
#ifndef LVMM_NVME_CTRL_H
#define LVMM_NVME_CTRL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "bus.h"
#include "guest_mem.h"
#include "lightiov/nvme.h"

#define NVME_CTRL_PAGE_SHIFT	 12
#define NVME_CTRL_PAGE		 4096u
#define NVME_LBA_SHIFT		 9
#define NVME_CTRL_MDTS		 5 /* max transfer 2^5 pages = 128 KiB */
#define NVME_CTRL_MAX_XFER	 (NVME_CTRL_PAGE << NVME_CTRL_MDTS)
#define NVME_CTRL_MAX_IOV	 ((NVME_CTRL_MAX_XFER / NVME_CTRL_PAGE) + 1)
#define NVME_CTRL_AERL		 3 /* 0's based: four outstanding Async Event Requests */
#define NVME_CTRL_MAX_DSM_RANGES 256

struct nvme_ctrl;

struct nvme_ctrl_params {
	uint16_t mqes;	   /* max queue entries, 0's based (CAP.MQES); 0 = 1023 */
	uint8_t dstrd;	   /* doorbell stride 4 << dstrd bytes; 10 puts each on its own page */
	unsigned max_ioqs; /* I/O SQ/CQ pairs offered (Number of Queues), 1..65535 */
	unsigned nvectors; /* interrupt vectors (MSI-X table size), >= 1 */
	uint64_t cmb_size; /* bytes of controller memory buffer for SQs, 0 = none */
	void *cmb_host;	   /* the CMB's memory when a backend owns it (NULL: the controller's) */
	uint8_t cmb_bir;   /* BAR holding the CMB (CMBLOC.BIR) */
	uint64_t size;	   /* namespace bytes (a multiple of the LBA size) */
	uint8_t lba_shift; /* log2 of the namespace's LBA size: 9 or 12 (0 = 9) */
	bool readonly;
	/* No Doorbell Buffer Config: a backend polling doorbell pages never reads shadow values,
	 * and a driver using them would ring only when an event index it never sees asks. */
	bool no_dbbuf;
	/* Backend queue pairs read doorbell values from the shadow buffer only (eventfd doorbells):
	 * an I/O SQ created before Doorbell Buffer Config is bound when that command comes. */
	bool bind_needs_dbbuf;
	char serial[21];
	char model[41];
	uint16_t cntlid;
};

/* One I/O command on its way to the backend. Byte offsets and host iovecs are final here:
 * every LBA and PRP was checked by the controller before the backend sees it. */
enum nvme_io_op { NVME_IO_READ, NVME_IO_WRITE, NVME_IO_FLUSH, NVME_IO_ZEROES, NVME_IO_DISCARD };

struct nvme_io_range {
	uint64_t off, len;
};

struct nvme_io_req {
	struct nvme_ctrl *ctrl;
	enum nvme_io_op op;
	bool fua;
	uint16_t sqid, cid;
	uint32_t gen, sqgen; /* drop the completion if the controller or SQ was reset since */
	uint64_t off, len;   /* bytes */
	unsigned niov;
	struct iovec iov[NVME_CTRL_MAX_IOV];
	unsigned nranges; /* NVME_IO_DISCARD */
	struct nvme_io_range *ranges;
	uint16_t status; /* NVMe status (SCT/SC), set by the backend */
};

struct nvme_backend_ops {
	/* Starts req with the controller lock held (never call back into the controller from here).
	 * Returns 1 when req is complete (req->status set), 0 when nvme_ctrl_io_done() follows. */
	int (*submit)(void *be, struct nvme_io_req *req);
};

/* An I/O queue pair the guest created, as a backend queue-pair binding sees it: every field was
 * checked by the controller (ids, depths, page-aligned rings inside guest RAM or the CMB). */
struct nvme_qp_bind {
	uint16_t sqid, cqid;
	uint32_t sq_depth, cq_depth;
	uint64_t sq_gpa, cq_gpa;
	bool sq_in_cmb;
	bool ien; /* the CQ interrupts (on vector) */
	uint16_t vector;
	uint64_t dbbuf_dbs; /* Doorbell Buffer Config addresses, 0 when not configured */
	uint64_t dbbuf_eis;
	uint8_t dstrd; /* CAP.DSTRD: SQ y's shadow slot at dbbuf_dbs + 2y * (4 << dstrd) */
};

struct nvme_ctrl_hooks {
	void *opaque;
	/* Raise interrupt vector (MSI-X entry); called with the controller lock held. */
	void (*irq)(void *opaque, unsigned vector);
	/* Pin-based interrupt (may be NULL): the INTx condition, told on each change while
	 * pin-based interrupts are on (nvme_ctrl_intx_gate); controller lock held. */
	void (*intx)(void *opaque, bool level);
	/* A doorbell changed: wake whoever runs nvme_ctrl_process(). NULL: process inline. */
	void (*kick)(void *opaque);
	/* Shadow doorbells switched on/off: map I/O doorbells to ioeventfds (may be NULL). */
	void (*dbbuf)(void *opaque, bool on);
	/* Queue-pair binding (passthrough and isolated modes): when set, every I/O SQ the guest
	 * creates is handed to a backend queue pair and the controller never touches its commands,
	 * doorbells or completions. bind returns an NVMe status and a handle for unbind; both are
	 * called with the controller lock held (Create/Delete SQ, reset, destroy). */
	uint16_t (*bind)(void *opaque, const struct nvme_qp_bind *b, uint32_t *handle);
	void (*unbind)(void *opaque, uint16_t sqid, uint32_t handle);
	/* Doorbell Buffer Config came while b's SQ was bound: the backend queue pair may move to
	 * the shadow buffer (b carries its addresses). NVMe status; *handle is the pair's now. */
	uint16_t (*redoorbell)(void *opaque, const struct nvme_qp_bind *b, uint32_t *handle);
	/* Whether the backend still serves (asked when the host reads CSTS); false sets CSTS.CFS,
	 * which is how a driver whose commands time out learns that the device is gone. */
	bool (*alive)(void *opaque);
	/* Whether the function may master the bus (PCI command bit 2). Without it the controller
	 * fetches no command and moves no data, as hardware would not; doorbells already rung are
	 * served on the next one after it is set. NULL: always. Called with the controller lock. */
	bool (*bus_master)(void *opaque);
	/* The guest turned the volatile write cache on or off (Set Features 06h, a reset turns it
	 * back on): a backend serving the queues itself must make each write durable before its
	 * completion while it is off. Returns an NVMe status (the feature keeps its old value on
	 * failure). NULL: the controller's own backend reads feat_vwc. Controller lock held. */
	uint16_t (*vwc)(void *opaque, bool on);
};

struct nvme_ctrl_stats {
	uint64_t reads, writes, read_bytes, write_bytes, flushes;
	uint64_t doorbells, mmio_exits, irqs;
	uint64_t wakeups; /* queue-processing runs (I/O-thread wake-ups, or inline on a vCPU) */
	uint64_t bound;	  /* I/O queue pairs bound to a backend now */
	uint64_t flrs;	  /* Function Level Resets */
};

/* Pin-based interrupts on (MSI and MSI-X off) or not: the INTx condition is worked out only
 * while they are. INTx Disable is the PCI layer's (it gates the line; the condition, and
 * Interrupt Status, stay current under it). Any thread, any lock: it takes none; the level
 * follows at the controller's next register write or completion. */
void nvme_ctrl_intx_gate(struct nvme_ctrl *c, bool open);
/* Function Level Reset of the PCI function behind the controller: a controller reset (bound
 * queue pairs handed back, requests in flight dropped) and every register to its reset value. */
void nvme_ctrl_flr(struct nvme_ctrl *c);
/* Hands every bound queue pair back (unbind hook); reset and destroy do this too. */
void nvme_ctrl_unbind_all(struct nvme_ctrl *c);
/* Handles of the I/O queue pairs bound now (qid[i], handle[i]); returns how many (<= max). */
unsigned nvme_ctrl_bound(struct nvme_ctrl *c, uint16_t *qid, uint32_t *handle, unsigned max);

int nvme_ctrl_create(const struct nvme_ctrl_params *p, struct guest_mem *gm,
		     const struct nvme_backend_ops *bops, void *be,
		     const struct nvme_ctrl_hooks *hooks, struct nvme_ctrl **out, char *err,
		     unsigned errlen);
void nvme_ctrl_destroy(struct nvme_ctrl *c);

/* Test only (issue 29, item 7): LVMM_FAULT_NVME=SERIAL:KIND[@N][+KIND[@N]] makes the controller
 * whose serial is SERIAL misbehave, to drive the guest driver against a bad device. Kinds:
 * dup-cqe@N (every Nth I/O completion is posted twice, when the CQ has a free slot to spare;
 * N defaults to 1), cmb-oversize (CMBSZ claims twice the CMB BAR). Unset: no fault, no cost. */
struct nvme_fault {
	bool on;
	bool cmb_oversize;
	uint32_t dup_every; /* 0: never */
	uint64_t completions;
};
/* 0 with *f filled (f->on false when SPEC names another serial), -EINVAL when malformed. */
int nvme_fault_parse(const char *spec, const char *serial, struct nvme_fault *f);
/* A file function with a fault set is described to the guest as passthrough (LBA window
 * 0+lbas, *lbas filled) so that lightiov_nvme.ko drives it; false when no fault is set. */
bool nvme_ctrl_fault_frontend(const struct nvme_ctrl *c, uint64_t *lbas);

/* BAR0: registers at 0, doorbells from 0x1000; size is a power of two. */
uint64_t nvme_ctrl_bar0_size(const struct nvme_ctrl *c);
void nvme_ctrl_bar0_read(void *ctrl, uint64_t off, void *data, unsigned len);
void nvme_ctrl_bar0_write(void *ctrl, uint64_t off, const void *data, unsigned len);
extern const struct bus_ops nvme_ctrl_bar0_ops;

/* CMB: host memory the PCI layer maps at the CMB BAR; the controller fetches SQEs from it when an
 * SQ's base lies in [gpa, gpa + size). */
void *nvme_ctrl_cmb(const struct nvme_ctrl *c, uint64_t *size);
void nvme_ctrl_set_cmb_gpa(struct nvme_ctrl *c, uint64_t gpa); /* ~0 = not mapped */
extern const struct bus_ops nvme_ctrl_cmb_ops;

/* Fetches and executes commands from every SQ with work; from the I/O thread (or inline). */
void nvme_ctrl_process(struct nvme_ctrl *c);
/* Backend completion of a request that submit() left pending; any thread. Frees req. */
void nvme_ctrl_io_done(struct nvme_io_req *req);
/* The same for n requests of one controller under one taking of its lock (a backend that reaps
 * completions in batches). Frees every one. */
void nvme_ctrl_io_done_many(struct nvme_io_req **reqs, unsigned n);

void nvme_ctrl_get_stats(struct nvme_ctrl *c, struct nvme_ctrl_stats *st);

/* The VM pauses: nothing more is fetched, and this returns once every request the backend holds
 * has completed (its CQE posted); interrupts held back by coalescing are raised. Resume fetches
 * again, starting with what the doorbells asked for meanwhile. */
void nvme_ctrl_pause(struct nvme_ctrl *c);
void nvme_ctrl_resume(struct nvme_ctrl *c);

/* Snapshots (docs/snapshot.md): the controller's state (registers, features, queues, async
 * events, error log, shadow doorbell addresses, CMB contents) as bytes. Saving needs a paused
 * controller with nothing in flight and no queue bound to a backend (unless
 * nvme_ctrl_set_save_bound: then the device saves the backend's part). state_size is the bytes
 * save writes now (0 with err set when it cannot be saved). restore applies saved bytes to a
 * freshly created controller with the same parameters; they are untrusted and checked whole
 * (sizes against CAP.MQES, rings and buffers against guest memory, indices against sizes)
 * before any is used: 0, or -EINVAL with a one-line message. The restored controller stays
 * paused until nvme_ctrl_resume. */
size_t nvme_ctrl_state_size(struct nvme_ctrl *c, char *err, unsigned errlen);
int nvme_ctrl_save(struct nvme_ctrl *c, void *buf, size_t len, char *err, unsigned errlen);
int nvme_ctrl_restore(struct nvme_ctrl *c, const void *buf, size_t len, char *err, unsigned errlen);
/* Passthrough and isolated modes: the state of queues bound to a backend is the backend's, which
 * the device saves beside the controller's (nvme_ctrl_set_save_bound allows the save). After
 * nvme_ctrl_restore, nvme_ctrl_rebind binds restored SQ sqid again: fn gets the nvme_qp_bind
 * Create I/O SQ would have made, and arg, and returns an NVMe status and the handle. 0 or a
 * negative errno with err naming the queue. */
typedef uint16_t (*nvme_rebind_fn)(void *opaque, const struct nvme_qp_bind *b, void *arg,
				   uint32_t *handle);
void nvme_ctrl_set_save_bound(struct nvme_ctrl *c, bool on);
unsigned nvme_ctrl_io_sqs(struct nvme_ctrl *c); /* I/O SQs that exist */
int nvme_ctrl_rebind(struct nvme_ctrl *c, uint16_t sqid, nvme_rebind_fn fn, void *arg, char *err,
		     unsigned errlen);

/* Interrupt coalescing timer: signals the I/O CQs whose aggregation time ran out by now
 * (CLOCK_MONOTONIC ns, nvme_now_ns()); returns ns until the next deadline, or -1 for none. The
 * I/O thread calls it before it sleeps. */
int64_t nvme_ctrl_irq_tick(struct nvme_ctrl *c, uint64_t now);
uint64_t nvme_now_ns(void);

/* Simple backends. mem: a plain buffer (tests, fuzzing), completes synchronously. */
struct nvme_mem_backend {
	uint8_t *data;
	uint64_t size;
	unsigned flushes;
};
extern const struct nvme_backend_ops nvme_mem_backend_ops;

#endif
