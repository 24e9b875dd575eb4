/* Device set-up for a VM: the PCI host bridge and one vNVMe controller per --vnvme, wired to
 * KVM (MSI-X routes, irqfds, doorbell ioeventfds, CMB memory slot) through vm.h services, and
 * vNVMe functions added and removed at run time through the ACPI PCI hotplug controller. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devices.h"
#include "hotplug.h"
#include "layout.h"
#include "lightiov/vcap.h"
#include "nvme-lightiov/nvme_ctrl.h"
#include "nvme-lightiov/nvme_file.h"
#include "nvme-lightiov/nvme_lio.h"
#include "nvme-lightiov/nvme_lio_emu.h"
#include "pci.h"
#include "virtio_pci.h"
#include <sys/eventfd.h>
#include <unistd.h>

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
};

struct vnvme {
	struct vm *vm;
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
	unsigned nqueues; /* I/O queue pairs offered */
	unsigned dstrd;	  /* CAP.DSTRD */
};

struct devices {
	struct vm *vm;
	struct pci_bus bus;
	bool bus_up;
	unsigned n;
	struct vnvme *nvme[CONFIG_MAX_VNVME];
	struct virtio_rng *rng; /* cfg->rng_src set: virtio-rng after the vNVMe slots */
	struct hotplug hp;	/* bus 0's slots as the guest's ACPI sees them */
	bool hp_up;
};

/* One VM per lvmm process in practice; a small table keeps devices.h free of state. */
static pthread_mutex_t devices_lock = PTHREAD_MUTEX_INITIALIZER;
static struct devices *devices_tab[4];

static struct devices *devices_of(struct vm *vm)
{
	unsigned i;

	for (i = 0; i < 4; i++)
		if (devices_tab[i] && devices_tab[i]->vm == vm)
			return devices_tab[i];
	return NULL;
}

/* ---- platform ops for the PCI layer ---- */

static int plat_alloc_gsi(void *vm)
{
	return vm_alloc_gsi(vm);
}

static int plat_free_gsi(void *vm, unsigned gsi)
{
	return vm_free_gsi(vm, gsi);
}

static int plat_route(void *vm, unsigned gsi, uint64_t addr, uint32_t data, bool masked)
{
	return vm_set_msi_route(vm, gsi, addr, data, masked);
}

static int plat_irqfd(void *vm, unsigned gsi, int efd, bool assign)
{
	return vm_irqfd(vm, gsi, efd, assign);
}

static int plat_map_host(void *vm, uint64_t gpa, uint64_t size, void *host)
{
	return vm_map_host_mem(vm, gpa, size, host, false);
}

static int plat_unmap_host(void *vm, uint64_t gpa)
{
	return vm_unmap_host_mem(vm, gpa);
}

/* ---- doorbell ioeventfds: only with shadow doorbells, whose values the I/O thread reads ---- */

static void vnvme_evfds(struct vnvme *v, bool on, uint64_t bar0)
{
	unsigned q, nq = v->nqueues < VNVME_EVFD_QUEUES ? v->nqueues : VNVME_EVFD_QUEUES;
	uint64_t stride = 4ULL << v->dstrd;
	int fd = nvme_file_kick_fd(v->file);

	for (q = 1; q <= nq; q++) {
		uint64_t sq = bar0 + NVME_REG_DBS + 2 * q * stride;
		int r1 = vm_ioeventfd(v->vm, sq, 4, fd, on);
		int r2 = vm_ioeventfd(v->vm, sq + stride, 4, fd, on);

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
			vm_unmap_host_mem(v->vm, q->db_at);
			if (q->cq_at != ~0ULL)
				vm_unmap_host_mem(v->vm, q->cq_at);
			q->cq_at = ~0ULL;
		} else if (q->db_fd >= 0) {
			vm_ioeventfd(v->vm, q->db_at, 4, q->db_fd, false);
			vm_ioeventfd(v->vm, q->db_at + stride, 4, q->db_fd, false);
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

		r = vm_map_host_mem(v->vm, at, stride, q->db_host, false);
		if (!r && (r = vm_map_host_mem(v->vm, cq_at, stride,
					       (uint8_t *)q->db_host + LIO_PAGE_SIZE, false)))
			vm_unmap_host_mem(v->vm, at);
		if (!r)
			q->cq_at = cq_at;
	} else if (q->db_host) {
		r = vm_map_host_mem(v->vm, at, 2 * stride, q->db_host, false);
	} else if (q->db_fd >= 0) {
		r = vm_ioeventfd(v->vm, at, 4, q->db_fd, true);
		if (!r && (r = vm_ioeventfd(v->vm, at + stride, 4, q->db_fd, true)))
			vm_ioeventfd(v->vm, at, 4, q->db_fd, false);
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

static uint16_t hook_bind(void *opaque, const struct nvme_qp_bind *b, uint32_t *handle)
{
	struct vnvme *v = opaque;
	struct vnvme_qp *q = &v->qps[b->sqid];
	int irq_fd = -1;
	uint16_t st;

	pthread_mutex_lock(&v->db_lock);
	q->db_fd = -1;
	q->db_at = ~0ULL;
	q->cq_at = ~0ULL;
	q->cqid = b->cqid;
	q->db_host = NULL;
	if (!nvme_lio_db_poll(v->lio)) {
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
	st = nvme_lio_bind(v->lio, b, vm_guest_mem(v->vm), v->cmb_gpa, q->db_fd, irq_fd, &q->qp_id,
			   &q->db_host);
	if (st) {
		if (q->db_fd >= 0)
			close(q->db_fd);
		q->db_fd = -1;
		pthread_mutex_unlock(&v->db_lock);
		return st;
	}
	q->bound = true;
	vnvme_qp_doorbells(v, b->sqid, true);
	pthread_mutex_unlock(&v->db_lock);
	*handle = q->qp_id;
	return 0;
}

static void hook_unbind(void *opaque, uint16_t sqid, uint32_t handle)
{
	struct vnvme *v = opaque;
	struct vnvme_qp *q = &v->qps[sqid];

	struct lio_qp_stats st;

	pthread_mutex_lock(&v->db_lock);
	vnvme_qp_doorbells(v, sqid, false);
	if (!nvme_lio_qp_stats(v->lio, handle, &st)) {
		v->gone.cmds += st.cmds;
		v->gone.read_bytes += st.read_bytes;
		v->gone.write_bytes += st.write_bytes;
		v->gone.errors += st.errors;
		v->gone.rejected += st.rejected;
		v->gone.irqs += st.irqs;
	}
	nvme_lio_unbind(v->lio, handle);
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
	const struct guest_mem *gm = vm_guest_mem(v->vm);
	struct nvme_lio_cfg lc = {
	    .id = v->cfg.id,
	    .ssd = v->cfg.ssd,
	    .vol = v->cfg.vol,
	    .size = v->cfg.size,
	    .readonly = v->cfg.readonly,
	    .mode = v->cfg.mode == VNVME_PASSTHROUGH ? LIO_MODE_PASSTHROUGH : LIO_MODE_ISOLATED,
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
	p->no_dbbuf = nvme_lio_db_poll(v->lio);
	v->dstrd = p->dstrd;
	p->cmb_host = nvme_lio_cmb(v->lio);
	h->kick = NULL; /* admin commands run on the vCPU that rang: no I/O thread at all */
	h->dbbuf = NULL;
	h->bind = hook_bind;
	h->unbind = hook_unbind;
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
		nvme_lio_db_poll(v->lio) ? "polled" : "eventfd");
	return 0;
}

static int vnvme_create(struct devices *ds, struct vm *vm, const struct vnvme_config *vc,
			unsigned idx, char *err, unsigned errlen)
{
	const struct vm_config *cfg = vm_get_config(vm);
	struct nvme_ctrl_params p = {
	    .mqes = VNVME_MQES,
	    .dstrd = VNVME_DSTRD,
	    .max_ioqs = vc->queues  ? vc->queues
			: cfg->cpus ? cfg->cpus
				    : 1,
	    .cmb_size = VNVME_CMB_SIZE,
	    .cmb_bir = VNVME_BAR_CMB,
	    .readonly = vc->readonly,
	    .cntlid = (uint16_t)idx,
	};
	struct nvme_ctrl_hooks hooks = {
	    .irq = hook_irq, .kick = hook_kick, .dbbuf = hook_dbbuf, .bus_master = hook_bus_master};
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
	char id[sizeof(vc->id)];
	unsigned vq;
	int r;

	config_vnvme_id(vc, idx, id, sizeof(id));
	v = calloc(1, sizeof(*v));
	if (!v) {
		snprintf(err, errlen, "vnvme %s: out of memory", id);
		return -ENOMEM;
	}
	v->vm = vm;
	v->cfg = *vc;
	snprintf(v->cfg.id, sizeof(v->cfg.id), "%s", id);
	v->bar0 = ~0ULL;
	v->cmb_gpa = ~0ULL;
	pthread_mutex_init(&v->db_lock, NULL);
	/* A vector per queue for as many queues as the guest has vCPUs (Linux uses one each), at
	 * least 31: further queues share them (each CQ names its vector). Every vector holds a
	 * GSI route, of which a VM has 1024. */
	vq = cfg->cpus > 31 ? cfg->cpus : 31;
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
			r = nvme_ctrl_create(&p, vm_guest_mem(vm), &nvme_lio_emu_ops, v->emu,
					     &hooks, &v->ctrl, err, errlen);
	} else if (vc->ssd[0]) {
		r = vnvme_lio_open(v, &p, &hooks, &vcap, err, errlen);
		if (!r)
			r = nvme_ctrl_create(&p, vm_guest_mem(vm), &nvme_mem_backend_ops, NULL,
					     &hooks, &v->ctrl, err, errlen);
	} else {
		r = nvme_file_open(&v->cfg, &v->file, &p.size, err, errlen);
		if (!r)
			r = nvme_ctrl_create(&p, vm_guest_mem(vm), &nvme_file_ops, v->file, &hooks,
					     &v->ctrl, err, errlen);
		/* Test only (LVMM_FAULT_NVME, nvme_ctrl.h): a faulty file function is offered to
		 * lightiov_nvme.ko as passthrough, under a class code the nvme driver skips. */
		if (!r && nvme_ctrl_fault_frontend(v->ctrl, &lbas)) {
			const struct guest_mem *gm = vm_guest_mem(vm);

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
	if (pci_dev_add_cap(&v->pci, &vcap, sizeof(vcap)) < 0 ||
	    pci_dev_add_flr(&v->pci, vnvme_flr) < 0) {
		snprintf(err, errlen, "vnvme %s: no room for the vendor and PCIe capabilities",
			 v->cfg.id);
		r = -ENOSPC;
		goto fail;
	}
	r = v->file ? nvme_file_start(v->file, v->ctrl, err, errlen) : 0;
	if (!r)
		r = pci_bus_add(&ds->bus, &v->pci, err, errlen);
	if (r)
		goto fail;
	ds->nvme[ds->n++] = v;
	return 0;
fail:
	vnvme_free(v);
	return r;
}

/* An edge on the Generic Event Device's pin: the guest's _EVT runs the hotplug scan. */
static void devices_ged_notify(void *opaque)
{
	struct vm *vm = opaque;
	int r = vm_set_irq_line(vm, LAYOUT_ACPI_GED_IRQ, true);

	if (!r)
		r = vm_set_irq_line(vm, LAYOUT_ACPI_GED_IRQ, false);
	if (r)
		fprintf(stderr, "lvmm: pci hotplug: GED interrupt %u: %s\n", LAYOUT_ACPI_GED_IRQ,
			strerror(-r));
}

static unsigned vnvme_slot(const struct vnvme *v)
{
	return v->pci.devfn >> 3;
}

static struct vnvme *devices_find(struct devices *ds, const char *id, unsigned *idx)
{
	unsigned i;

	for (i = 0; i < ds->n; i++)
		if (!strcmp(ds->nvme[i]->cfg.id, id)) {
			if (idx)
				*idx = i;
			return ds->nvme[i];
		}
	return NULL;
}

int devices_add_vnvme(struct vm *vm, const struct vnvme_config *c, unsigned idx, unsigned *slot,
		      char *err, unsigned errlen)
{
	struct devices *ds;
	struct vnvme *v;
	int r;

	pthread_mutex_lock(&devices_lock);
	ds = devices_of(vm);
	pthread_mutex_unlock(&devices_lock);
	if (!ds || !ds->hp_up) {
		snprintf(err, errlen, "vnvme %s: the VM has no PCI hotplug controller", c->id);
		return -ENODEV;
	}
	if (ds->n >= CONFIG_MAX_VNVME) {
		snprintf(err, errlen,
			 "vnvme %s: the VM already has %u vNVMe functions, the most it takes",
			 c->id, ds->n);
		return -ENOSPC;
	}
	r = vnvme_create(ds, vm, c, idx, err, errlen);
	if (r)
		return r;
	v = ds->nvme[ds->n - 1];
	*slot = vnvme_slot(v);
	r = hotplug_plug(&ds->hp, *slot);
	if (r) {
		snprintf(err, errlen, "vnvme %s: PCI slot %u: %s", c->id, *slot, strerror(-r));
		pthread_mutex_lock(&devices_lock);
		ds->nvme[--ds->n] = NULL;
		pthread_mutex_unlock(&devices_lock);
		vnvme_free(v);
		return r;
	}
	fprintf(stderr, "lvmm: vnvme %s: hot-added at PCI 0000:00:%02x.0\n", v->cfg.id, *slot);
	return 0;
}

/* The guest ejected v (or the VM is being reset): backend queue pairs, anonymous volume,
 * memory slots, ioeventfds and irqfds go with vnvme_free; the slot is free again. */
static void devices_teardown(struct devices *ds, unsigned i)
{
	struct vnvme *v = ds->nvme[i];
	unsigned slot = vnvme_slot(v);

	pthread_mutex_lock(&devices_lock);
	memmove(&ds->nvme[i], &ds->nvme[i + 1], (ds->n - i - 1) * sizeof(ds->nvme[0]));
	ds->nvme[--ds->n] = NULL;
	pthread_mutex_unlock(&devices_lock);
	fprintf(stderr, "lvmm: vnvme %s: removed from PCI 0000:00:%02x.0\n", v->cfg.id, slot);
	vnvme_free(v);
	hotplug_release(&ds->hp, slot);
}

int devices_remove(struct vm *vm, const char *id, unsigned timeout_ms, char *err, unsigned errlen)
{
	struct devices *ds;
	struct vnvme *v;
	unsigned i, slot;
	int r;

	pthread_mutex_lock(&devices_lock);
	ds = devices_of(vm);
	pthread_mutex_unlock(&devices_lock);
	v = ds ? devices_find(ds, id, &i) : NULL;
	if (!v) {
		snprintf(err, errlen, "device %s: no such device", id);
		return -ENOENT;
	}
	if (!ds->hp_up) {
		snprintf(err, errlen, "device %s: the VM has no PCI hotplug controller", id);
		return -ENODEV;
	}
	slot = vnvme_slot(v);
	r = hotplug_unplug(&ds->hp, slot);
	if (!r)
		r = hotplug_wait_eject(&ds->hp, slot, timeout_ms);
	if (r == -ETIMEDOUT) {
		snprintf(err, errlen,
			 "device %s: the guest did not eject PCI slot %u within %u ms; the removal "
			 "stays pending (a later eject completes on the next vm.remove-device, a "
			 "vm.reboot completes it at once)",
			 id, slot, timeout_ms);
		return r;
	}
	if (r) {
		snprintf(err, errlen, "device %s: PCI slot %u: %s", id, slot, strerror(-r));
		return r;
	}
	devices_teardown(ds, i);
	return 0;
}

bool devices_removing(struct vm *vm, const char *id)
{
	struct devices *ds;
	struct vnvme *v;
	enum hotplug_slot_state s = HOTPLUG_PRESENT;

	pthread_mutex_lock(&devices_lock);
	ds = devices_of(vm);
	pthread_mutex_unlock(&devices_lock);
	v = ds && ds->hp_up ? devices_find(ds, id, NULL) : NULL;
	if (v)
		s = hotplug_state(&ds->hp, vnvme_slot(v));
	return s == HOTPLUG_REMOVING || s == HOTPLUG_EJECTED;
}

int devices_slot(struct vm *vm, const char *id, unsigned *slot)
{
	struct devices *ds;
	struct vnvme *v = NULL;

	pthread_mutex_lock(&devices_lock);
	ds = devices_of(vm);
	if (ds)
		v = devices_find(ds, id, NULL);
	if (v)
		*slot = vnvme_slot(v);
	pthread_mutex_unlock(&devices_lock);
	return v ? 0 : -ENOENT;
}

int devices_init(struct vm *vm, const struct vm_config *cfg, char *err, unsigned errlen)
{
	struct pci_platform_ops ops = {
	    .opaque = vm,
	    .alloc_gsi = plat_alloc_gsi,
	    .free_gsi = plat_free_gsi,
	    .set_msi_route = plat_route,
	    .irqfd = plat_irqfd,
	    .map_host = plat_map_host,
	    .unmap_host = plat_unmap_host,
	};
	struct devices *ds;
	unsigned i, slot;
	int r;

	pthread_mutex_lock(&devices_lock);
	for (slot = 0; slot < 4 && devices_tab[slot]; slot++)
		;
	pthread_mutex_unlock(&devices_lock);
	if (slot == 4) {
		snprintf(err, errlen, "devices: too many VMs in one process");
		return -ENOSPC;
	}
	ds = calloc(1, sizeof(*ds));
	if (!ds) {
		snprintf(err, errlen, "devices: out of memory");
		return -ENOMEM;
	}
	ds->vm = vm;
	r = pci_bus_init(&ds->bus, &ops, vm_pio_bus(vm), vm_mmio_bus(vm), err, errlen);
	if (r) {
		free(ds);
		return r;
	}
	ds->bus_up = true;
	hotplug_init(&ds->hp, devices_ged_notify, vm);
	r = bus_register(vm_pio_bus(vm), LAYOUT_HOTPLUG_PORT, LAYOUT_HOTPLUG_LEN, &hotplug_bus_ops,
			 &ds->hp, "pci-hotplug");
	if (r) {
		snprintf(err, errlen, "devices: PCI hotplug ports 0x%x: %s", LAYOUT_HOTPLUG_PORT,
			 strerror(-r));
		hotplug_destroy(&ds->hp);
		pci_bus_exit(&ds->bus);
		free(ds);
		return r;
	}
	ds->hp_up = true;
	pthread_mutex_lock(&devices_lock);
	devices_tab[slot] = ds;
	pthread_mutex_unlock(&devices_lock);
	for (i = 0; i < cfg->nvnvme && i < CONFIG_MAX_VNVME; i++) {
		r = vnvme_create(ds, vm, &cfg->vnvme[i], i, err, errlen);
		if (!r)
			r = hotplug_boot_present(&ds->hp, vnvme_slot(ds->nvme[ds->n - 1]));
		if (r) {
			devices_exit(vm);
			return r;
		}
	}
	/* Last, so that the vNVMe functions keep the slots they have without it. */
	if (cfg->rng_src[0]) {
		r = virtio_rng_create(&ds->rng, "rng0", cfg->rng_src, vm_guest_mem(vm), err,
				      errlen);
		if (!r)
			r = pci_bus_add(&ds->bus, virtio_rng_pci(ds->rng), err, errlen);
		if (!r)
			r = hotplug_boot_present(&ds->hp, virtio_rng_pci(ds->rng)->devfn >> 3);
		if (r) {
			devices_exit(vm);
			return r;
		}
	}
	return 0;
}

void devices_exit(struct vm *vm)
{
	struct devices *ds;
	unsigned i;

	pthread_mutex_lock(&devices_lock);
	ds = devices_of(vm);
	for (i = 0; ds && i < 4; i++)
		if (devices_tab[i] == ds)
			devices_tab[i] = NULL;
	pthread_mutex_unlock(&devices_lock);
	if (!ds)
		return;
	for (i = 0; i < ds->n; i++)
		vnvme_free(ds->nvme[i]);
	virtio_rng_destroy(ds->rng);
	if (ds->hp_up) {
		bus_unregister(vm_pio_bus(vm), LAYOUT_HOTPLUG_PORT, &ds->hp);
		hotplug_destroy(&ds->hp);
	}
	if (ds->bus_up)
		pci_bus_exit(&ds->bus);
	free(ds);
}

/* Mode, volume and the backend's per-queue counters; data commands of a bound queue pair are
 * the backend's, so the device's totals are theirs too. */
static void vnvme_lio_counters(struct vnvme *v, struct vm_dev_counters *o)
{
	static const char *const modes[] = {"emulate", "passthrough", "isolated"};
	uint16_t qid[VM_DEV_MAX_QUEUES];
	uint32_t h[VM_DEV_MAX_QUEUES];
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
	o->backend_cmds = v->gone.cmds;
	o->backend_errors = v->gone.errors;
	o->backend_rejected = v->gone.rejected;
	o->read_bytes = v->gone.read_bytes;
	o->write_bytes = v->gone.write_bytes;
	o->irqs = v->gone.irqs;
	pthread_mutex_unlock(&v->db_lock);
	n = nvme_ctrl_bound(v->ctrl, qid, h, VM_DEV_MAX_QUEUES);
	for (i = 0; i < n; i++) {
		struct lio_qp_stats s;
		struct vm_queue_counters *q = &o->q[o->nqueues];

		if (nvme_lio_qp_stats(v->lio, h[i], &s))
			continue;
		q->qid = qid[i];
		q->cmds = s.cmds;
		q->read_bytes = s.read_bytes;
		q->write_bytes = s.write_bytes;
		q->errors = s.errors;
		q->rejected = s.rejected;
		q->irqs = s.irqs;
		o->read_bytes += s.read_bytes;
		o->write_bytes += s.write_bytes;
		o->irqs += s.irqs;
		o->backend_cmds += s.cmds;
		o->backend_errors += s.errors;
		o->backend_rejected += s.rejected;
		o->nqueues++;
	}
}

static void vnvme_print_counters(struct vnvme *v)
{
	struct vm_dev_counters c;
	struct nvme_ctrl_stats st;
	unsigned i;

	memset(&c, 0, sizeof(c));
	nvme_ctrl_get_stats(v->ctrl, &st);
	vnvme_lio_counters(v, &c);
	fprintf(stderr,
		"lvmm: vnvme %s: mode %s, mmio exits %llu, doorbells %llu, wake-ups %llu, "
		"reads %llu, writes %llu, backend cmds %llu, errors %llu, rejected %llu, irqs "
		"%llu, flrs %llu\n",
		v->cfg.id, c.mode, (unsigned long long)st.mmio_exits,
		(unsigned long long)st.doorbells, (unsigned long long)st.wakeups,
		(unsigned long long)st.reads, (unsigned long long)st.writes,
		(unsigned long long)c.backend_cmds, (unsigned long long)c.backend_errors,
		(unsigned long long)c.backend_rejected, (unsigned long long)c.irqs,
		(unsigned long long)st.flrs);
	for (i = 0; i < c.nqueues; i++)
		fprintf(stderr,
			"lvmm: vnvme %s: queue %u: backend cmds %llu, read %llu B, written %llu "
			"B, errors %llu, rejected %llu, irqs %llu\n",
			v->cfg.id, c.q[i].qid, (unsigned long long)c.q[i].cmds,
			(unsigned long long)c.q[i].read_bytes,
			(unsigned long long)c.q[i].write_bytes, (unsigned long long)c.q[i].errors,
			(unsigned long long)c.q[i].rejected, (unsigned long long)c.q[i].irqs);
}

unsigned devices_counters(struct vm *vm, struct vm_dev_counters *out, unsigned max)
{
	struct devices *ds;
	unsigned i, n = 0;

	pthread_mutex_lock(&devices_lock);
	ds = devices_of(vm);
	for (i = 0; ds && i < ds->n && n < max; i++) {
		struct vnvme *v = ds->nvme[i];
		struct nvme_ctrl_stats st;

		nvme_ctrl_get_stats(v->ctrl, &st);
		memset(&out[n], 0, sizeof(out[n]));
		snprintf(out[n].id, sizeof(out[n].id), "%s", v->cfg.id);
		out[n].reads = st.reads;
		out[n].writes = st.writes;
		out[n].read_bytes = st.read_bytes;
		out[n].write_bytes = st.write_bytes;
		out[n].flushes = st.flushes;
		out[n].doorbells = st.doorbells;
		out[n].mmio_exits = st.mmio_exits;
		out[n].irqs = st.irqs;
		out[n].wakeups = st.wakeups;
		vnvme_lio_counters(v, &out[n]);
		n++;
	}
	pthread_mutex_unlock(&devices_lock);
	return n;
}
