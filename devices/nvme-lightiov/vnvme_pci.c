/* The vNVMe's PCI function as a device model (vnvme_pci.h): BARs (registers, CMB, MSI-X), the
 * LightIOV vendor capability, FLR, the mode a --vnvme asks for (file, emulate over an SSD,
 * passthrough, isolated), doorbell ioeventfds and pages of bound queue pairs, and counters.
 * The NVMe controller itself is nvme_ctrl.c; the VMM lends KVM through struct dev_host. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "lightiov/vcap.h"
#include "nvme_ctrl.h"
#include "nvme_file.h"
#include "nvme_lio.h"
#include "nvme_lio_emu.h"
#include "vnvme_pci.h"

#define VNVME_PCI_VENDOR 0x1b36
#define VNVME_PCI_DEVICE 0x0110
#define VNVME_CLASS	 0x010802 /* mass storage, NVM, NVM Express */
/* 4 KiB doorbell stride, one page per doorbell (each can be mapped on its own), while BAR0 stays
 * within 16 MiB; controllers with more queues pack their doorbells 4 bytes apart. */
#define VNVME_DSTRD	 10
#define VNVME_DSTRD_MAXQ 1023
/* Doorbells of the first queues get ioeventfds; KVM allows 1000 per bus for all devices. */
#define VNVME_EVFD_QUEUES 32
#define VNVME_MQES	  1023
/* 2 MiB: Linux registers the CMB as P2P memory, which must span whole 2 MiB subsections */
#define VNVME_CMB_SIZE (2ULL << 20)
#define VNVME_BAR_REGS 0
#define VNVME_BAR_CMB  2
#define VNVME_BAR_MSIX 4

/* A guest I/O queue pair bound to a backend queue pair: its doorbells' KVM side. */
struct vnvme_qp {
	bool bound;
	uint32_t qp_id;
	void *db_host;	/* poll: the doorbell page pair, mapped over BAR0 */
	uint64_t db_at; /* where it is mapped (poll) or the ioeventfds sit (eventfd), ~0 */
	uint16_t cqid;	/* the CQ the guest paired with this SQ */
	uint64_t cq_at; /* poll, CQ id != SQ id: the CQ head page's own mapping, else ~0 */
	int db_fd;	/* eventfd doorbell, -1 */
	bool quiesced;	/* the backend fetches nothing (vm.pause, or restored): st is its state */
	struct lio_qp_state st;
	bool released; /* destroyed in the backend for a migration: b and st bind it again */
	struct nvme_qp_bind b;
};

struct vnvme {
	struct dev_host host;
	struct vnvme_config cfg;
	struct pci_dev pci;
	struct nvme_ctrl *ctrl;
	struct nvme_file *file;
	struct nvme_lio *lio;	  /* passthrough / isolated: the backend session */
	struct nvme_lio_emu *emu; /* emulate over an ssd: lvmm's own queue pair on it */
	struct vnvme_qp *qps;	  /* [nqueues + 1], db_lock */
	struct lio_qp_stats gone; /* summed counters of queue pairs already unbound (db_lock) */
	uint64_t cmb_gpa;
	pthread_mutex_t db_lock; /* doorbell ioeventfd state */
	uint64_t bar0;		 /* where BAR0 decodes, ~0 when nowhere */
	bool dbbuf_on, evfds_on;
	uint64_t evfds_at;
	unsigned nqueues;      /* I/O queue pairs offered */
	unsigned dstrd;	       /* CAP.DSTRD */
	char quiesce_err[200]; /* why the last pause left a queue pair serving, "" */
	uint64_t quiesce_ns;   /* the last pause's quiesce of every queue pair */
	bool released;	       /* the volume detached for a migration (vnvme_release) */
	uint64_t db_switched;  /* queue pairs moved to eventfd doorbells (hook_redoorbell) */
};

/* ---- doorbell ioeventfds: only with shadow doorbells, whose values the I/O thread reads ---- */

static void vnvme_evfds(struct vnvme *v, bool on, uint64_t bar0)
{
	unsigned q, nq = v->nqueues < VNVME_EVFD_QUEUES ? v->nqueues : VNVME_EVFD_QUEUES;
	uint64_t stride = 4ULL << v->dstrd;
	int fd = nvme_file_kick_fd(v->file);

	for (q = 1; q <= nq; q++) {
		uint64_t sq = bar0 + NVME_REG_DBS + 2 * q * stride;
		int r1 = v->host.ioeventfd(v->host.opaque, sq, 4, fd, on);
		int r2 = v->host.ioeventfd(v->host.opaque, sq + stride, 4, fd, on);

		if (on && (r1 || r2))
			fprintf(stderr, "vnvme %s: doorbell ioeventfd for queue %u: %s\n",
				v->cfg.id, q, strerror(-(r1 ? r1 : r2)));
	}
}

/* Brings the ioeventfds in line with (dbbuf_on, bar0); db_lock held. */
static void vnvme_evfds_sync(struct vnvme *v)
{
	bool want = v->dbbuf_on && v->bar0 != ~0ULL;

	if (v->evfds_on && (!want || v->evfds_at != v->bar0)) {
		vnvme_evfds(v, false, v->evfds_at);
		v->evfds_on = false;
	}
	if (want && !v->evfds_on) {
		vnvme_evfds(v, true, v->bar0);
		v->evfds_on = true;
		v->evfds_at = v->bar0;
	}
}

/* The guest's PCI command register, read without the function's lock (the controller lock is
 * held here; an aligned 16-bit load cannot tear). */
static bool hook_bus_master(void *opaque)
{
	struct vnvme *v = opaque;
	uint16_t cmd;

	__atomic_load((uint16_t *)(v->pci.cfg + PCI_COMMAND), &cmd, __ATOMIC_ACQUIRE);
	return cmd & PCI_COMMAND_MASTER;
}

static void hook_irq(void *opaque, unsigned vector)
{
	struct vnvme *v = opaque;

	/* pci_msix_notify pends the vector while bus mastering is off */
	pci_msix_notify(&v->pci, vector);
}

/* The controller's pin (its lock held; the function's lock inside it, never the reverse: the
 * gate below takes no controller lock). */
static void hook_intx(void *opaque, bool level)
{
	struct vnvme *v = opaque;

	pci_intx_set(&v->pci, level);
}

/* MSI-X: whether pin-based interrupts are worked out at all (d->lock held). Not INTx Disable:
 * vfio-pci masks by that bit at each interrupt and, at the unmask, reads Interrupt Status for a
 * completion posted meanwhile; the PCI layer holds the line low while the bit is set. */
static void vnvme_intx_mode(struct pci_dev *d, bool pin_based)
{
	struct vnvme *v = d->priv;

	nvme_ctrl_intx_gate(v->ctrl, pin_based);
}

static void hook_kick(void *opaque)
{
	struct vnvme *v = opaque;

	nvme_file_kick(v->file);
}

static void hook_dbbuf(void *opaque, bool on)
{
	struct vnvme *v = opaque;

	pthread_mutex_lock(&v->db_lock);
	v->dbbuf_on = on;
	vnvme_evfds_sync(v);
	pthread_mutex_unlock(&v->db_lock);
}

/* ---- passthrough / isolated: guest queue pairs bound to backend queue pairs ---- */

/* Puts one bound queue pair's doorbells at BAR0 (on) or takes them away; db_lock held. Poll: the
 * backend's doorbell page pair becomes guest memory over the SQ tail and CQ head doorbells (DSTRD
 * 10: one page each), so a doorbell write costs no exit. Eventfd: both doorbells signal db_fd in
 * the kernel (DSTRD 0), and the backend reads the values from the shadow buffer. */
static void vnvme_qp_doorbells(struct vnvme *v, unsigned qid, bool on)
{
	struct vnvme_qp *q = &v->qps[qid];
	uint64_t stride = 4ULL << v->dstrd, at;
	int r = 0;

	if (!on) {
		if (q->db_at == ~0ULL)
			return;
		if (q->db_host) {
			v->host.unmap_host(v->host.opaque, q->db_at);
			if (q->cq_at != ~0ULL)
				v->host.unmap_host(v->host.opaque, q->cq_at);
			q->cq_at = ~0ULL;
		} else if (q->db_fd >= 0) {
			v->host.ioeventfd(v->host.opaque, q->db_at, 4, q->db_fd, false);
			v->host.ioeventfd(v->host.opaque, q->db_at + stride, 4, q->db_fd, false);
		}
		q->db_at = ~0ULL;
		return;
	}
	if (!q->bound || q->db_at != ~0ULL || v->bar0 == ~0ULL)
		return;
	at = v->bar0 + NVME_REG_DBS + 2 * qid * stride;
	if (q->db_host && q->cqid != qid) {
		/* SQ y on CQ x: the backend's SQ tail page over SQ y's doorbell, its CQ head page
		 * over CQ x's (each doorbell has a page of its own with polled doorbells) */
		uint64_t cq_at = v->bar0 + NVME_REG_DBS + (2 * (uint64_t)q->cqid + 1) * stride;

		r = v->host.map_host(v->host.opaque, at, stride, q->db_host);
		if (!r && (r = v->host.map_host(v->host.opaque, cq_at, stride,
						(uint8_t *)q->db_host + LIO_PAGE_SIZE)))
			v->host.unmap_host(v->host.opaque, at);
		if (!r)
			q->cq_at = cq_at;
	} else if (q->db_host) {
		r = v->host.map_host(v->host.opaque, at, 2 * stride, q->db_host);
	} else if (q->db_fd >= 0) {
		r = v->host.ioeventfd(v->host.opaque, at, 4, q->db_fd, true);
		if (!r && (r = v->host.ioeventfd(v->host.opaque, at + stride, 4, q->db_fd, true)))
			v->host.ioeventfd(v->host.opaque, at, 4, q->db_fd, false);
	}
	if (r) {
		/* the doorbells then reach lvmm, which ignores them: the queue stalls, visibly */
		fprintf(stderr, "vnvme %s: doorbells of queue %u at 0x%llx: %s\n", v->cfg.id, qid,
			(unsigned long long)at, strerror(-r));
		return;
	}
	q->db_at = at;
}

static void vnvme_qp_doorbells_all(struct vnvme *v, bool on)
{
	unsigned q;

	for (q = 1; q <= v->nqueues; q++)
		if (v->qps[q].bound)
			vnvme_qp_doorbells(v, q, on);
}

/* A guest SQ to a backend queue pair: a new one, or with saved the one a snapshot had. */
static uint16_t vnvme_bind(struct vnvme *v, const struct nvme_qp_bind *b,
			   const struct lio_qp_state *saved, uint32_t *handle)
{
	struct vnvme_qp *q = &v->qps[b->sqid];
	int irq_fd = -1;
	uint16_t st;

	pthread_mutex_lock(&v->db_lock);
	q->db_fd = -1;
	q->db_at = ~0ULL;
	q->cq_at = ~0ULL;
	q->cqid = b->cqid;
	q->db_host = NULL;
	if (nvme_lio_bind_eventfd(v->lio, b, v->host.gm)) {
		q->db_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (q->db_fd < 0) {
			pthread_mutex_unlock(&v->db_lock);
			return NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_INTERNAL) | NVME_STATUS_DNR;
		}
	}
	/* Completions signal the vector's irqfd eventfd straight from the backend. */
	pthread_mutex_lock(&v->pci.lock);
	if (b->ien && b->vector < v->pci.msix.nvec)
		irq_fd = v->pci.msix.efd[b->vector];
	pthread_mutex_unlock(&v->pci.lock);
	if (saved)
		st = nvme_lio_bind_saved(v->lio, b, v->host.gm, v->cmb_gpa, q->db_fd, irq_fd, saved,
					 &q->qp_id, &q->db_host);
	else
		st = nvme_lio_bind(v->lio, b, v->host.gm, v->cmb_gpa, q->db_fd, irq_fd, &q->qp_id,
				   &q->db_host);
	if (st) {
		if (q->db_fd >= 0)
			close(q->db_fd);
		q->db_fd = -1;
		pthread_mutex_unlock(&v->db_lock);
		return st;
	}
	q->bound = true;
	q->b = *b;
	if (saved) {
		q->quiesced = true; /* until the VM resumes */
		q->st = *saved;
	}
	vnvme_qp_doorbells(v, b->sqid, true);
	pthread_mutex_unlock(&v->db_lock);
	*handle = q->qp_id;
	return 0;
}

static uint16_t hook_bind(void *opaque, const struct nvme_qp_bind *b, uint32_t *handle)
{
	return vnvme_bind(opaque, b, NULL, handle);
}

/* nvme_ctrl_rebind's callback: arg is the saved state, checked against the restored queues
 * before the backend (which checks it again) sees it. */
static uint16_t hook_rebind(void *opaque, const struct nvme_qp_bind *b, void *arg, uint32_t *handle)
{
	const struct lio_qp_state *st = arg;

	if (st->sq_depth != b->sq_depth || st->cq_depth != b->cq_depth ||
	    st->sq_head >= b->sq_depth || st->sq_tail_db >= b->sq_depth ||
	    st->cq_tail >= b->cq_depth || st->cq_head >= b->cq_depth ||
	    st->cq_head_db >= b->cq_depth || st->phase > 1)
		return NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD) | NVME_STATUS_DNR;
	return vnvme_bind(opaque, b, st, handle);
}

/* A queue pair's backend counters added to a sum of them (lightiov/counters.h). */
static void vnvme_stats_add(struct lio_qp_stats *lio_to, const struct lio_qp_stats *lio_from)
{
	LIO_COUNTERS(LIO_COUNTER_ADD)
}

/*
 * doorbell=auto: Doorbell Buffer Config came while b's SQ was bound. Its queue pair moves from
 * doorbell pages (or an earlier buffer) to eventfd doorbells on the shadow buffer b names,
 * without losing or repeating a command: the pages leave BAR0, the backend stops fetching and
 * completes what it holds (QP_QUIESCE, as for vm.pause), the pair is destroyed and created again
 * from that state (QP_RESTORE, as a snapshot restore does) with the guest's slots holding the
 * doorbell values, then fetches on. A buffer outside RAM, or a pair that cannot move, keeps
 * what it had and fails the command (Linux then goes on with plain doorbells).
 */
static uint16_t hook_redoorbell(void *opaque, const struct nvme_qp_bind *b, uint32_t *handle)
{
	const uint16_t invalid = NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD);
	const uint16_t internal = NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_INTERNAL);
	struct vnvme *v = opaque;
	struct vnvme_qp *q;
	struct nvme_qp_bind old;
	struct lio_qp_state st;
	struct lio_qp_stats s;
	uint16_t r;
	int e;

	if (!b->sqid || b->sqid > v->nqueues)
		return invalid;
	q = &v->qps[b->sqid];
	pthread_mutex_lock(&v->db_lock);
	if (!q->bound || q->released || q->quiesced) {
		pthread_mutex_unlock(&v->db_lock); /* a paused VM runs no admin command */
		return internal;
	}
	if (!nvme_lio_bind_eventfd(v->lio, b, v->host.gm)) {
		pthread_mutex_unlock(&v->db_lock);
		fprintf(stderr,
			"vnvme %s: SQ %u: Doorbell Buffer Config at 0x%llx/0x%llx: slots outside "
			"RAM or SQ on CQ %u; its doorbells stay as they were\n",
			v->cfg.id, b->sqid, (unsigned long long)b->dbbuf_dbs,
			(unsigned long long)b->dbbuf_eis, b->cqid);
		return invalid;
	}
	if (q->db_fd >= 0 && q->b.dbbuf_dbs == b->dbbuf_dbs && q->b.dbbuf_eis == b->dbbuf_eis) {
		pthread_mutex_unlock(&v->db_lock);
		return 0; /* the same buffer again */
	}
	vnvme_qp_doorbells(v, b->sqid, false);
	e = nvme_lio_quiesce(v->lio, q->qp_id, &st);
	if (e) {
		vnvme_qp_doorbells(v, b->sqid, true); /* it serves on, as it was */
		pthread_mutex_unlock(&v->db_lock);
		return internal;
	}
	/* out-of-range doorbell values were ignored by the backend: go on from what it acted on */
	if (st.sq_tail_db >= st.sq_depth)
		st.sq_tail_db = st.sq_head;
	if (st.cq_head_db >= st.cq_depth)
		st.cq_head_db = st.cq_head;
	if (!nvme_lio_qp_stats(v->lio, q->qp_id, &s))
		vnvme_stats_add(&v->gone, &s);
	nvme_lio_unbind(v->lio, q->qp_id);
	if (q->db_fd >= 0)
		close(q->db_fd);
	old = q->b;
	q->db_fd = -1;
	q->bound = false;
	pthread_mutex_unlock(&v->db_lock);
	r = vnvme_bind(v, b, &st, handle);
	if (r) {
		fprintf(stderr,
			"vnvme %s: SQ %u: eventfd doorbells refused (status 0x%x): back on what it "
			"had\n",
			v->cfg.id, b->sqid, r);
		if (vnvme_bind(v, &old, &st, handle)) {
			fprintf(stderr, "vnvme %s: SQ %u: its queue pair is lost\n", v->cfg.id,
				b->sqid);
			return internal;
		}
	}
	pthread_mutex_lock(&v->db_lock);
	if (!nvme_lio_resume(v->lio, q->qp_id))
		q->quiesced = false;
	if (!r && !v->db_switched++)
		fprintf(stderr,
			"vnvme %s: Doorbell Buffer Config: queue pairs move to eventfd doorbells\n",
			v->cfg.id);
	pthread_mutex_unlock(&v->db_lock);
	return r ? internal : 0;
}

static void hook_unbind(void *opaque, uint16_t sqid, uint32_t handle)
{
	struct vnvme *v = opaque;
	struct vnvme_qp *q = &v->qps[sqid];

	struct lio_qp_stats st;

	pthread_mutex_lock(&v->db_lock);
	(void)handle; /* q->qp_id: a migration that failed bound it again under another id */
	if (!q->released) {
		vnvme_qp_doorbells(v, sqid, false);
		if (!nvme_lio_qp_stats(v->lio, q->qp_id, &st))
			vnvme_stats_add(&v->gone, &st);
		nvme_lio_unbind(v->lio, q->qp_id);
	}
	if (q->db_fd >= 0)
		close(q->db_fd);
	memset(q, 0, sizeof(*q));
	q->db_fd = -1;
	q->db_at = ~0ULL;
	q->cq_at = ~0ULL;
	pthread_mutex_unlock(&v->db_lock);
}

/* Volatile write cache off: the backend makes every write of this VM durable before its CQE. */
static uint16_t hook_vwc(void *opaque, bool on)
{
	struct vnvme *v = opaque;

	if (nvme_lio_write_through(v->lio, !on, NULL))
		return NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_INTERNAL);
	return 0;
}

static bool hook_alive(void *opaque)
{
	struct vnvme *v = opaque;

	return nvme_lio_alive(v->lio);
}

/* Emulate over an SSD: false once an SSD command timed out (its bounce buffer is given up). */
static bool hook_emu_alive(void *opaque)
{
	struct vnvme *v = opaque;

	return nvme_lio_emu_alive(v->emu);
}

static void bar_moved(struct pci_dev *d, unsigned bar, uint64_t gpa)
{
	struct vnvme *v = d->priv;

	if (bar == VNVME_BAR_CMB) {
		nvme_ctrl_set_cmb_gpa(v->ctrl, gpa);
		pthread_mutex_lock(&v->db_lock);
		v->cmb_gpa = gpa;
		pthread_mutex_unlock(&v->db_lock);
	} else if (bar == VNVME_BAR_REGS) {
		pthread_mutex_lock(&v->db_lock);
		if (v->lio)
			vnvme_qp_doorbells_all(v, false);
		v->bar0 = gpa;
		if (v->lio)
			vnvme_qp_doorbells_all(v, true);
		else
			vnvme_evfds_sync(v);
		pthread_mutex_unlock(&v->db_lock);
	}
}

/* FLR: the controller resets as on CC.EN = 0 (bound queue pairs go back to the backend) and
 * loses its admin queue registers; the PCI layer already reset config space and MSI-X. */
static void vnvme_flr(struct pci_dev *d)
{
	struct vnvme *v = d->priv;

	nvme_ctrl_flr(v->ctrl);
}

static void vnvme_print_counters(struct vnvme *v);

static void vnvme_free(struct vnvme *v)
{
	if (!v)
		return;
	if (v->pci.bus) {
		pthread_mutex_lock(&v->db_lock);
		v->dbbuf_on = false;
		vnvme_evfds_sync(v);
		pthread_mutex_unlock(&v->db_lock);
	}
	if (v->ctrl && getenv("LVMM_STATS"))
		vnvme_print_counters(v);
	/* Bound queue pairs first: the backend stops writing guest memory before it goes. */
	if (v->ctrl && v->lio)
		nvme_ctrl_unbind_all(v->ctrl);
	pci_dev_exit(&v->pci);
	nvme_file_close(v->file);  /* joins the I/O thread: no more controller calls after */
	nvme_lio_emu_stop(v->emu); /* the same for emulate over an SSD */
	nvme_ctrl_destroy(v->ctrl);
	nvme_lio_close(v->lio);
	nvme_lio_emu_close(v->emu);
	free(v->qps);
	free(v);
}

/* Passthrough and isolated modes: the backend session, the volume as the namespace, its queue
 * memory as the CMB, doorbells per page (poll) or packed (eventfd), the vendor capability. */
static int vnvme_lio_open(struct vnvme *v, struct nvme_ctrl_params *p, struct nvme_ctrl_hooks *h,
			  struct lightiov_vcap *vcap, char *err, unsigned errlen)
{
	const struct guest_mem *gm = v->host.gm;
	struct nvme_lio_cfg lc = {
	    .id = v->cfg.id,
	    .ssd = v->cfg.ssd,
	    .vol = v->cfg.vol,
	    .size = v->cfg.size,
	    .readonly = v->cfg.readonly,
	    .mode = v->cfg.mode == VNVME_PASSTHROUGH ? LIGHTIOV_MODE_PASSTHROUGH
						     : LIGHTIOV_MODE_ISOLATED,
	    .db = v->cfg.doorbell == VNVME_DB_POLL	? NVME_LIO_DB_POLL
		  : v->cfg.doorbell == VNVME_DB_EVENTFD ? NVME_LIO_DB_EVENTFD
							: NVME_LIO_DB_AUTO,
	    .nqueues = p->max_ioqs,
	    .cmb_size = VNVME_CMB_SIZE,
	    .label = v->cfg.id,
	};
	uint64_t top = 0;
	unsigned i;
	int r;

	if (p->max_ioqs > VNVME_DSTRD_MAXQ && lc.db != NVME_LIO_DB_EVENTFD) {
		if (lc.db == NVME_LIO_DB_POLL) {
			snprintf(err, errlen,
				 "vnvme %s: %u queues: polled doorbells need one page each, at "
				 "most %u queues",
				 v->cfg.id, p->max_ioqs, VNVME_DSTRD_MAXQ);
			return -EINVAL;
		}
		lc.db = NVME_LIO_DB_EVENTFD;
	}
	r = nvme_lio_open(&v->lio, &lc, err, errlen);
	if (r)
		return r;
	v->qps = calloc(p->max_ioqs + 1, sizeof(*v->qps));
	if (!v->qps) {
		snprintf(err, errlen, "vnvme %s: out of memory", v->cfg.id);
		return -ENOMEM;
	}
	for (i = 0; i <= p->max_ioqs; i++) {
		v->qps[i].db_fd = -1;
		v->qps[i].db_at = ~0ULL;
		v->qps[i].cq_at = ~0ULL;
	}
	p->size = nvme_lio_lba_count(v->lio) << nvme_lio_lba_shift(v->lio);
	p->lba_shift = (uint8_t)nvme_lio_lba_shift(v->lio); /* lba_start/size: the SSD's units */
	p->dstrd = nvme_lio_db_poll(v->lio) ? VNVME_DSTRD : 0;
	/* auto offers Doorbell Buffer Config on pages too: the switch (hook_redoorbell) */
	p->no_dbbuf = nvme_lio_db_poll(v->lio) && !nvme_lio_db_switch(v->lio);
	p->bind_needs_dbbuf = !nvme_lio_db_poll(v->lio);
	v->dstrd = p->dstrd;
	p->cmb_host = nvme_lio_cmb(v->lio);
	h->kick = NULL; /* admin commands run on the vCPU that rang: no I/O thread at all */
	h->dbbuf = NULL;
	h->bind = hook_bind;
	h->unbind = hook_unbind;
	h->redoorbell = nvme_lio_db_switch(v->lio) ? hook_redoorbell : NULL;
	h->alive = hook_alive;
	h->vwc = hook_vwc;
	for (i = 0; i < gm->nslots; i++)
		if (gm->slots[i].gpa + gm->slots[i].size > top)
			top = gm->slots[i].gpa + gm->slots[i].size;
	vcap->mode =
	    v->cfg.mode == VNVME_PASSTHROUGH ? LIGHTIOV_MODE_PASSTHROUGH : LIGHTIOV_MODE_ISOLATED;
	vcap->lba_start = nvme_lio_lba_start(v->lio);
	vcap->lba_size = nvme_lio_lba_count(v->lio);
	vcap->dma_base = 0;
	vcap->dma_size = top;
	fprintf(stderr, "vnvme %s: %s volume %s on ssd %s: %llu MiB at LBA %llu, %s doorbells\n",
		v->cfg.id, v->cfg.mode == VNVME_PASSTHROUGH ? "passthrough" : "isolated",
		nvme_lio_vol_name(v->lio), v->cfg.ssd, (unsigned long long)(p->size >> 20),
		(unsigned long long)vcap->lba_start,
		nvme_lio_db_switch(v->lio) ? "polled (eventfd after Doorbell Buffer Config)"
		: nvme_lio_db_poll(v->lio) ? "polled"
					   : "eventfd");
	return 0;
}

static int vnvme_create(const struct dev_host *h, const void *config, const char *id, unsigned idx,
			void **out, char *err, unsigned errlen)
{
	const struct vnvme_config *vc = config;
	struct nvme_ctrl_params p = {
	    .mqes = VNVME_MQES,
	    .dstrd = VNVME_DSTRD,
	    .max_ioqs = vc->queues ? vc->queues
			: h->cpus  ? h->cpus
				   : 1,
	    .cmb_size = VNVME_CMB_SIZE,
	    .cmb_bir = VNVME_BAR_CMB,
	    .readonly = vc->readonly,
	    .cntlid = (uint16_t)idx,
	};
	struct nvme_ctrl_hooks hooks = {.irq = hook_irq,
					.intx = hook_intx,
					.kick = hook_kick,
					.dbbuf = hook_dbbuf,
					.bus_master = hook_bus_master};
	struct lightiov_vcap vcap = {
	    .cap_id = LIGHTIOV_VCAP_ID,
	    .cap_len = sizeof(vcap),
	    .version = LIGHTIOV_VCAP_VERSION,
	    .magic = LIGHTIOV_VCAP_MAGIC,
	    .mode = LIGHTIOV_MODE_EMULATE,
	};
	struct vnvme *v;
	void *cmb;
	uint64_t cmb_size;
	uint32_t pci_class = VNVME_CLASS;
	uint64_t lbas;
	unsigned vq;
	int r;

	v = calloc(1, sizeof(*v));
	if (!v) {
		snprintf(err, errlen, "vnvme %s: out of memory", id);
		return -ENOMEM;
	}
	v->host = *h;
	v->cfg = *vc;
	snprintf(v->cfg.id, sizeof(v->cfg.id), "%s", id);
	v->bar0 = ~0ULL;
	v->cmb_gpa = ~0ULL;
	pthread_mutex_init(&v->db_lock, NULL);
	/* A vector per queue for as many queues as the guest has vCPUs (Linux uses one each), at
	 * least 31: further queues share them (each CQ names its vector). Every vector holds a
	 * GSI route, of which a VM has 1024. */
	vq = h->cpus > 31 ? h->cpus : 31;
	p.nvectors = (p.max_ioqs < vq ? p.max_ioqs : vq) + 1;
	if (p.max_ioqs > VNVME_DSTRD_MAXQ)
		p.dstrd = 0;
	v->nqueues = p.max_ioqs;
	v->dstrd = p.dstrd;
	snprintf(p.serial, sizeof(p.serial), "%.20s", vc->serial[0] ? vc->serial : v->cfg.id);
	hooks.opaque = v;
	if (vc->ssd[0] && vc->mode == VNVME_EMULATE) {
		struct nvme_lio_cfg lc = {.id = v->cfg.id,
					  .ssd = v->cfg.ssd,
					  .vol = v->cfg.vol,
					  .size = v->cfg.size,
					  .readonly = v->cfg.readonly,
					  .label = v->cfg.id};

		/* lvmm parses every command on the thread that rang (no doorbell ioeventfds) and
		 * hands it to the emulate path's own I/O thread, which completes it */
		hooks.kick = NULL;
		hooks.dbbuf = NULL;
		hooks.alive = hook_emu_alive;
		r = nvme_lio_emu_open(&v->emu, &lc, &p.size, err, errlen);
		if (!r)
			p.lba_shift = (uint8_t)nvme_lio_emu_lba_shift(v->emu);
		if (!r)
			r = nvme_ctrl_create(&p, h->gm, &nvme_lio_emu_ops, v->emu, &hooks, &v->ctrl,
					     err, errlen);
	} else if (vc->ssd[0]) {
		r = vnvme_lio_open(v, &p, &hooks, &vcap, err, errlen);
		if (!r)
			r = nvme_ctrl_create(&p, h->gm, &nvme_mem_backend_ops, NULL, &hooks,
					     &v->ctrl, err, errlen);
	} else {
		r = nvme_file_open(&v->cfg, &v->file, &p.size, err, errlen);
		if (!r)
			r = nvme_ctrl_create(&p, h->gm, &nvme_file_ops, v->file, &hooks, &v->ctrl,
					     err, errlen);
		/* Test only (LVMM_FAULT_NVME, nvme_ctrl.h): a faulty file function is offered to
		 * lightiov_nvme.ko as passthrough, under a class code the nvme driver skips. */
		if (!r && nvme_ctrl_fault_frontend(v->ctrl, &lbas)) {
			const struct guest_mem *gm = h->gm;

			vcap.lba_size = lbas;
			vcap.mode = LIGHTIOV_MODE_PASSTHROUGH;
			for (unsigned i = 0; i < gm->nslots; i++)
				if (gm->slots[i].gpa + gm->slots[i].size > vcap.dma_size)
					vcap.dma_size = gm->slots[i].gpa + gm->slots[i].size;
			pci_class = 0x018000; /* mass storage, other */
		}
	}
	if (r)
		goto fail;
	pci_dev_init(&v->pci, v->cfg.id, VNVME_PCI_VENDOR, VNVME_PCI_DEVICE, pci_class,
		     VNVME_PCI_VENDOR, VNVME_PCI_DEVICE);
	v->pci.priv = v;
	cmb = nvme_ctrl_cmb(v->ctrl, &cmb_size);
	r = pci_dev_add_bar(&v->pci, VNVME_BAR_REGS, nvme_ctrl_bar0_size(v->ctrl), true, false,
			    &nvme_ctrl_bar0_ops, v->ctrl, NULL);
	if (!r && cmb)
		r = pci_dev_add_bar(&v->pci, VNVME_BAR_CMB, cmb_size, true, true,
				    &nvme_ctrl_cmb_ops, v->ctrl, cmb);
	if (r) {
		snprintf(err, errlen, "vnvme %s: BAR set-up failed: %s", v->cfg.id, strerror(-r));
		goto fail;
	}
	v->pci.bar[VNVME_BAR_REGS].moved = bar_moved;
	v->pci.bar[VNVME_BAR_CMB].moved = bar_moved;
	r = pci_dev_add_msix(&v->pci, p.nvectors, VNVME_BAR_MSIX, err, errlen);
	if (r)
		goto fail;
	/* INTA: pin-based interrupts for a host without MSI-X (its CQs, not bound queue pairs') */
	pci_dev_set_intx_pin(&v->pci, 1);
	v->pci.intx_mode = vnvme_intx_mode;
	if (pci_dev_add_cap(&v->pci, &vcap, sizeof(vcap)) < 0 ||
	    pci_dev_add_flr(&v->pci, vnvme_flr) < 0) {
		snprintf(err, errlen, "vnvme %s: no room for the vendor and PCIe capabilities",
			 v->cfg.id);
		r = -ENOSPC;
		goto fail;
	}
	r = v->file ? nvme_file_start(v->file, v->ctrl, v->host.io_thread, err, errlen) : 0;
	if (r)
		goto fail;
	*out = v;
	return 0;
fail:
	vnvme_free(v);
	return r;
}

/* Mode, volume and the backend's per-queue counters; data commands of a bound queue pair are
 * the backend's, so the device's totals are theirs too. */
static void vnvme_lio_counters(struct vnvme *v, struct dev_counters *o)
{
	static const char *const modes[] = {"emulate", "passthrough", "isolated"};
	uint16_t qid[DEV_MAX_QUEUES];
	uint32_t h[DEV_MAX_QUEUES];
	struct lio_qp_stats sum;
	unsigned i, n;

	snprintf(o->mode, sizeof(o->mode), "%s", modes[v->cfg.mode <= 2 ? v->cfg.mode : 0]);
	snprintf(o->ssd, sizeof(o->ssd), "%s", v->cfg.ssd);
	if (!v->lio) {
		snprintf(o->volume, sizeof(o->volume), "%s",
			 v->emu ? nvme_lio_emu_vol_name(v->emu) : "file");
		return;
	}
	snprintf(o->volume, sizeof(o->volume), "%s", nvme_lio_vol_name(v->lio));
	pthread_mutex_lock(&v->db_lock);
	sum = v->gone;
	o->db_switched = v->db_switched;
	pthread_mutex_unlock(&v->db_lock);
	n = nvme_ctrl_bound(v->ctrl, qid, h, DEV_MAX_QUEUES);
	for (i = 0; i < n; i++) {
		struct lio_qp_stats s;
		const struct lio_qp_stats *lio_from = &s;
		struct dev_queue_counters *lio_to = &o->q[o->nqueues];

		uint32_t id;
		bool gone;

		(void)h;
		pthread_mutex_lock(&v->db_lock);
		id = v->qps[qid[i]].qp_id;
		gone = v->qps[qid[i]].released;
		pthread_mutex_unlock(&v->db_lock);
		if (gone || nvme_lio_qp_stats(v->lio, id, &s))
			continue;
		lio_to->qid = qid[i];
		LIO_COUNTERS_SESSION(LIO_COUNTER_COPY)
		lio_to->irqs = s.irqs;
		vnvme_stats_add(&sum, &s);
		o->nqueues++;
	}
	o->backend_cmds = sum.cmds;
	o->backend_errors = sum.errors;
	o->backend_rejected = sum.rejected;
	o->read_bytes = sum.read_bytes;
	o->write_bytes = sum.write_bytes;
	o->irqs = sum.irqs;
}

static void vnvme_print_counters(struct vnvme *v)
{
	struct dev_counters c;
	struct nvme_ctrl_stats st;
	unsigned i;

	memset(&c, 0, sizeof(c));
	nvme_ctrl_get_stats(v->ctrl, &st);
	vnvme_lio_counters(v, &c);
	fprintf(stderr,
		"lvmm: vnvme %s: mode %s, mmio exits %llu, doorbells %llu, wake-ups %llu, "
		"reads %llu, writes %llu, backend cmds %llu, errors %llu, rejected %llu, irqs "
		"%llu, flrs %llu, db-switched %llu\n",
		v->cfg.id, c.mode, (unsigned long long)st.mmio_exits,
		(unsigned long long)st.doorbells, (unsigned long long)st.wakeups,
		(unsigned long long)st.reads, (unsigned long long)st.writes,
		(unsigned long long)c.backend_cmds, (unsigned long long)c.backend_errors,
		(unsigned long long)c.backend_rejected, (unsigned long long)c.irqs,
		(unsigned long long)st.flrs, (unsigned long long)c.db_switched);
	for (i = 0; i < c.nqueues; i++)
		fprintf(stderr,
			"lvmm: vnvme %s: queue %u: backend cmds %llu, read %llu B, written %llu "
			"B, errors %llu, rejected %llu, irqs %llu\n",
			v->cfg.id, c.q[i].qid, (unsigned long long)c.q[i].cmds,
			(unsigned long long)c.q[i].read_bytes,
			(unsigned long long)c.q[i].write_bytes, (unsigned long long)c.q[i].errors,
			(unsigned long long)c.q[i].rejected, (unsigned long long)c.q[i].irqs);
}

static struct pci_dev *vnvme_pci(void *dev)
{
	return &((struct vnvme *)dev)->pci;
}

/* vm.counters: the controller's own counters, then mode, volume and the backend's. */
static void vnvme_counters(void *dev, struct dev_counters *o)
{
	struct vnvme *v = dev;
	struct nvme_ctrl_stats st;

	nvme_ctrl_get_stats(v->ctrl, &st);
	o->reads = st.reads;
	o->writes = st.writes;
	o->read_bytes = st.read_bytes;
	o->write_bytes = st.write_bytes;
	o->flushes = st.flushes;
	o->doorbells = st.doorbells;
	o->mmio_exits = st.mmio_exits;
	o->irqs = st.irqs;
	o->wakeups = st.wakeups;
	vnvme_lio_counters(v, o);
}

/* vm.pause: nothing more is fetched, and whatever the backend holds completes first: the
 * controller's own queues here, each bound queue pair in the backend (QP_QUIESCE, whose state
 * a snapshot saves). A queue pair that would not quiesce keeps serving; the save is refused. */
static void vnvme_quiesce(struct vnvme *v)
{
	uint64_t t0 = nvme_now_ns();
	unsigned q;
	int r;

	v->quiesce_err[0] = 0;
	if (!nvme_lio_has_qp_state(v->lio)) {
		snprintf(v->quiesce_err, sizeof(v->quiesce_err),
			 "ssd %s does not serve the queue-pair state calls (an older softssd or "
			 "lightiov.ko)",
			 v->cfg.ssd);
		return;
	}
	pthread_mutex_lock(&v->db_lock);
	for (q = 1; q <= v->nqueues; q++) {
		struct vnvme_qp *p = &v->qps[q];

		if (!p->bound || p->quiesced)
			continue;
		r = nvme_lio_quiesce(v->lio, p->qp_id, &p->st);
		if (r) {
			/* the first reason is the one reported; the queue pairs already quiesced
			 * go on at vm.resume */
			snprintf(v->quiesce_err, sizeof(v->quiesce_err),
				 "SQ %u: the backend did not quiesce queue pair %u: %s", q,
				 p->qp_id, strerror(-r));
			break;
		}
		/* Doorbell values are the guest's to write: one out of range was ignored by the
		 * backend, as a controller ignores it. Saved as what the backend acted on (all it
		 * fetched, all it saw consumed), so the snapshot stays restorable. */
		if (p->st.sq_tail_db >= p->st.sq_depth)
			p->st.sq_tail_db = p->st.sq_head;
		if (p->st.cq_head_db >= p->st.cq_depth)
			p->st.cq_head_db = p->st.cq_head;
		p->quiesced = true;
	}
	pthread_mutex_unlock(&v->db_lock);
	v->quiesce_ns = nvme_now_ns() - t0;
}

static void vnvme_pause(void *dev)
{
	struct vnvme *v = dev;

	nvme_ctrl_pause(v->ctrl);
	if (v->lio)
		vnvme_quiesce(v);
}

static void vnvme_resume(void *dev)
{
	struct vnvme *v = dev;
	unsigned q;

	if (v->lio) {
		pthread_mutex_lock(&v->db_lock);
		for (q = 1; q <= v->nqueues; q++) {
			if (!v->qps[q].bound || !v->qps[q].quiesced)
				continue;
			/* a refusal is printed; the queue then stalls, visibly, as the guest
			 * driver's timeout will tell */
			nvme_lio_resume(v->lio, v->qps[q].qp_id);
			v->qps[q].quiesced = false;
		}
		pthread_mutex_unlock(&v->db_lock);
	}
	nvme_ctrl_resume(v->ctrl);
}

/* Snapshots: emulate mode on a file, passthrough and isolated modes on a named volume. The
 * controller's state (nvme_snap.c) and the PCI function's; in the SSD modes then each bound
 * queue pair's backend state (QP_QUIESCE's reply at vm.pause). The image or the volume is the
 * user's to keep as it was, as for virtio-blk. Emulate over an SSD (lvmm's own queue pair and
 * bounce buffers) is not saved yet. */
#define VNVME_STATE_VERSION	1u /* emulate on a file */
#define VNVME_STATE_VERSION_SSD 2u /* passthrough, isolated: queue-pair records follow */

struct vnvme_state {
	uint32_t version, nqueues;
	uint64_t pci_len, ctrl_len;
};

/* Version 2: after the controller, u32 count, u32 0, then count of these. */
struct vnvme_qp_rec {
	uint16_t sqid;
	uint16_t pad;
	uint32_t pad2;
	struct lio_qp_state st;
};
_Static_assert(sizeof(struct vnvme_qp_rec) == 64, "vNVMe queue-pair record layout");

static int vnvme_unsaveable(const struct vnvme *v, char *err, unsigned errlen)
{
	static const char *const modes[] = {"emulate", "passthrough", "isolated"};

	if (v->file)
		return 0;
	if (v->emu) {
		snprintf(err, errlen,
			 "device %s (vnvme) cannot be saved yet: %s mode over ssd %s (lvmm's own "
			 "queue pair lives in the SSD backend)",
			 v->cfg.id, modes[v->cfg.mode <= 2 ? v->cfg.mode : 0], v->cfg.ssd);
		return -EOPNOTSUPP;
	}
	if (nvme_lio_anon(v->lio)) {
		snprintf(err, errlen,
			 "device %s (vnvme) cannot be saved: its volume on ssd %s is anonymous and "
			 "is freed when this VM's session ends; give it a name (vol=NAME)",
			 v->cfg.id, v->cfg.ssd);
		return -EOPNOTSUPP;
	}
	if (v->quiesce_err[0]) {
		snprintf(err, errlen, "device %s (vnvme) cannot be saved: %s", v->cfg.id,
			 v->quiesce_err);
		return -EBUSY;
	}
	return 0;
}

/* The records of the bound queue pairs, or how many (buf NULL). -EBUSY when one is not
 * quiesced (the VM was not paused through vnvme_pause). */
static int vnvme_qp_recs(struct vnvme *v, uint8_t *buf, char *err, unsigned errlen)
{
	uint32_t n = 0, zero = 0;
	unsigned q;

	pthread_mutex_lock(&v->db_lock);
	for (q = 1; q <= v->nqueues; q++) {
		const struct vnvme_qp *p = &v->qps[q];
		struct vnvme_qp_rec r = {.sqid = (uint16_t)q};

		if (!p->bound)
			continue;
		if (!p->quiesced) {
			snprintf(err, errlen, "vnvme %s: SQ %u is still served by the backend",
				 v->cfg.id, q);
			pthread_mutex_unlock(&v->db_lock);
			return -EBUSY;
		}
		if (buf) {
			r.st = p->st;
			memcpy(buf + 8 + (size_t)n * sizeof(r), &r, sizeof(r));
		}
		n++;
	}
	pthread_mutex_unlock(&v->db_lock);
	if (buf) {
		memcpy(buf, &n, sizeof(n));
		memcpy(buf + 4, &zero, sizeof(zero));
	}
	return (int)n;
}

static int vnvme_save(void *dev, void *buf, uint64_t *len, char *err, unsigned errlen)
{
	struct vnvme *v = dev;
	struct vnvme_state st = {.version = VNVME_STATE_VERSION, .nqueues = v->nqueues};
	uint8_t *p = buf;
	size_t need, recs = 0;
	int r;

	r = vnvme_unsaveable(v, err, errlen);
	if (r)
		return r;
	if (v->lio) {
		st.version = VNVME_STATE_VERSION_SSD;
		r = vnvme_qp_recs(v, NULL, err, errlen);
		if (r < 0)
			return r;
		recs = 8 + (size_t)r * sizeof(struct vnvme_qp_rec);
		nvme_ctrl_set_save_bound(v->ctrl, true);
	}
	st.pci_len = pci_dev_state_size(&v->pci);
	st.ctrl_len = nvme_ctrl_state_size(v->ctrl, err, errlen);
	if (!st.ctrl_len)
		return -EBUSY;
	need = sizeof(st) + st.pci_len + st.ctrl_len + recs;
	if (!buf) {
		*len = need;
		return 0;
	}
	if (*len < need) {
		snprintf(err, errlen, "vnvme %s: state needs %zu bytes", v->cfg.id, need);
		return -ENOSPC;
	}
	memcpy(p, &st, sizeof(st));
	pci_dev_save(&v->pci, p + sizeof(st));
	r = nvme_ctrl_save(v->ctrl, p + sizeof(st) + st.pci_len, st.ctrl_len, err, errlen);
	if (r)
		return r;
	if (v->lio) {
		r = vnvme_qp_recs(v, p + sizeof(st) + st.pci_len + st.ctrl_len, err, errlen);
		if (r < 0)
			return r;
		if (8 + (size_t)r * sizeof(struct vnvme_qp_rec) != recs) {
			snprintf(err, errlen, "vnvme %s: queue pairs changed during the save",
				 v->cfg.id);
			return -EBUSY;
		}
		fprintf(stderr,
			"vnvme %s: %d queue pairs of volume %s saved (quiesced in %.3f ms at the "
			"pause)\n",
			v->cfg.id, r, nvme_lio_vol_name(v->lio), (double)v->quiesce_ns / 1e6);
	}
	*len = need;
	return 0;
}

/* Version 2's records: each bound again as it was, quiesced until the VM resumes. Every I/O SQ
 * of the restored controller must have one (in these modes the backend serves them all). */
static int vnvme_restore_qps(struct vnvme *v, const uint8_t *p, uint64_t len, char *err,
			     unsigned errlen)
{
	uint32_t n, zero;
	bool *seen;
	int r = 0;

	if (len < 8) {
		snprintf(err, errlen, "vnvme %s: queue-pair records missing", v->cfg.id);
		return -EINVAL;
	}
	memcpy(&n, p, sizeof(n));
	memcpy(&zero, p + 4, sizeof(zero));
	if (zero || n > v->nqueues || len != 8 + (uint64_t)n * sizeof(struct vnvme_qp_rec)) {
		snprintf(err, errlen,
			 "vnvme %s: %u queue-pair records in %llu bytes (at most %u records)",
			 v->cfg.id, n, (unsigned long long)len, v->nqueues);
		return -EINVAL;
	}
	seen = calloc(v->nqueues + 1, sizeof(*seen));
	if (!seen)
		return -ENOMEM;
	for (uint32_t i = 0; i < n && !r; i++) {
		struct vnvme_qp_rec rec;

		memcpy(&rec, p + 8 + (size_t)i * sizeof(rec), sizeof(rec));
		if (!rec.sqid || rec.sqid > v->nqueues || seen[rec.sqid] || rec.pad || rec.pad2) {
			snprintf(err, errlen, "vnvme %s: queue-pair record %u: SQ %u", v->cfg.id, i,
				 rec.sqid);
			r = -EINVAL;
			break;
		}
		seen[rec.sqid] = true;
		r = nvme_ctrl_rebind(v->ctrl, rec.sqid, hook_rebind, &rec.st, err, errlen);
	}
	free(seen);
	if (r)
		return r;
	/* an I/O SQ left unbound would be one nobody serves */
	if (nvme_ctrl_io_sqs(v->ctrl) != n) {
		snprintf(err, errlen, "vnvme %s: %u I/O SQs in the state, %u queue-pair records",
			 v->cfg.id, nvme_ctrl_io_sqs(v->ctrl), n);
		return -EINVAL;
	}
	return 0;
}

static int vnvme_restore(void *dev, const void *buf, uint64_t len, char *err, unsigned errlen)
{
	struct vnvme *v = dev;
	const uint8_t *p = buf;
	struct vnvme_state st;
	int r;

	r = vnvme_unsaveable(v, err, errlen);
	if (r)
		return r;
	if (len < sizeof(st)) {
		snprintf(err, errlen, "vnvme %s: state of %llu bytes is too short", v->cfg.id,
			 (unsigned long long)len);
		return -EINVAL;
	}
	memcpy(&st, p, sizeof(st));
	if (st.version != (v->lio ? VNVME_STATE_VERSION_SSD : VNVME_STATE_VERSION) ||
	    st.nqueues != v->nqueues) {
		snprintf(err, errlen,
			 "vnvme %s: saved with %u I/O queues (state version %u), the config makes "
			 "%u",
			 v->cfg.id, st.nqueues, st.version, v->nqueues);
		return -EINVAL;
	}
	if (st.pci_len != pci_dev_state_size(&v->pci) || st.ctrl_len > len - sizeof(st) ||
	    st.pci_len > len - sizeof(st) - st.ctrl_len ||
	    (!v->lio && st.pci_len != len - sizeof(st) - st.ctrl_len)) {
		snprintf(err, errlen,
			 "vnvme %s: state of %llu bytes holds %llu of PCI and %llu of controller",
			 v->cfg.id, (unsigned long long)len, (unsigned long long)st.pci_len,
			 (unsigned long long)st.ctrl_len);
		return -EINVAL;
	}
	/* the function first: where BAR 0 and the CMB decode is the controller's to use */
	r = pci_dev_restore(&v->pci, p + sizeof(st), (size_t)st.pci_len, err, errlen);
	if (!r)
		r = nvme_ctrl_restore(v->ctrl, p + sizeof(st) + st.pci_len, (size_t)st.ctrl_len,
				      err, errlen);
	if (!r && v->lio)
		r = vnvme_restore_qps(v, p + sizeof(st) + st.pci_len + st.ctrl_len,
				      len - sizeof(st) - st.pci_len - st.ctrl_len, err, errlen);
	return r;
}

/* Live migration, the VM paused and saved: each bound queue pair (quiesced, its state saved)
 * destroyed in the backend, then the volume detached, so that the destination's session can
 * attach it (one writer per volume). vnvme_reclaim binds them again from the same states when
 * the migration fails; they stay quiesced until the VM resumes. */
static int vnvme_reclaim(void *dev, char *err, unsigned errlen);

static int vnvme_release(void *dev, char *err, unsigned errlen)
{
	struct vnvme *v = dev;
	int r = 0;

	if (!v->lio)
		return 0;
	pthread_mutex_lock(&v->db_lock);
	for (unsigned q = 1; q <= v->nqueues; q++) {
		struct vnvme_qp *p = &v->qps[q];
		struct lio_qp_stats st;

		if (!p->bound || p->released)
			continue;
		if (!p->quiesced) {
			snprintf(err, errlen, "vnvme %s: SQ %u: queue pair %u is not quiesced",
				 v->cfg.id, q, p->qp_id);
			r = -EBUSY;
			break;
		}
		vnvme_qp_doorbells(v, q, false);
		if (!nvme_lio_qp_stats(v->lio, p->qp_id, &st))
			vnvme_stats_add(&v->gone, &st);
		nvme_lio_unbind(v->lio, p->qp_id);
		if (p->db_fd >= 0)
			close(p->db_fd);
		p->db_fd = -1;
		p->released = true;
	}
	pthread_mutex_unlock(&v->db_lock);
	if (!r) {
		r = nvme_lio_release(v->lio, err, errlen);
		v->released = !r;
	}
	if (r) {
		char e[8];

		vnvme_reclaim(v, e, sizeof(e));
	}
	return r;
}

static int vnvme_reclaim(void *dev, char *err, unsigned errlen)
{
	struct vnvme *v = dev;
	int r = 0;

	if (!v->lio)
		return 0;
	if (v->released) {
		r = nvme_lio_reclaim(v->lio, err, errlen);
		if (r)
			return r;
		v->released = false;
	}
	for (unsigned q = 1; q <= v->nqueues; q++) {
		struct vnvme_qp *p = &v->qps[q];
		struct nvme_qp_bind b;
		struct lio_qp_state st;
		uint32_t handle;
		bool gone;
		uint16_t s;

		pthread_mutex_lock(&v->db_lock);
		b = p->b;
		st = p->st;
		gone = p->released;
		p->released = false;
		pthread_mutex_unlock(&v->db_lock);
		if (!gone)
			continue;
		s = vnvme_bind(v, &b, &st, &handle);
		if (s) {
			pthread_mutex_lock(&v->db_lock);
			p->released = true; /* no backend queue pair to destroy */
			pthread_mutex_unlock(&v->db_lock);
		}
		if (s && !r) {
			snprintf(err, errlen,
				 "vnvme %s: SQ %u: its queue pair was not created again (status "
				 "0x%x)",
				 v->cfg.id, q, s);
			r = -EIO;
		}
	}
	return r;
}

static void vnvme_destroy(void *dev)
{
	vnvme_free(dev);
}

const struct dev_model vnvme_model = {
    .name = "vnvme",
    .create = vnvme_create,
    .pci = vnvme_pci,
    .pause = vnvme_pause,
    .resume = vnvme_resume,
    .save = vnvme_save,
    .restore = vnvme_restore,
    .release = vnvme_release,
    .reclaim = vnvme_reclaim,
    .counters = vnvme_counters,
    .destroy = vnvme_destroy,
};
