/* The virtio 1.x PCI transport (virtio_pci.h): the capabilities, the common configuration the
 * driver programs through BAR 0, queue notifications and interrupts. Every register write is
 * the guest's to choose: values are checked, never trusted, and never abort the VMM. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "virtio_pci.h"

struct virtio_pci_cap {
	uint8_t cap_vndr, cap_next, cap_len, cfg_type, bar, id, pad[2];
	uint32_t offset, length;
} __attribute__((packed));

struct virtio_pci_notify_cap {
	struct virtio_pci_cap cap;
	uint32_t notify_off_multiplier;
} __attribute__((packed));

static const struct bus_ops virtio_pci_bar_ops = {
    .read = virtio_pci_bar_read,
    .write = virtio_pci_bar_write,
};

static int virtio_pci_add_cap(struct virtio_pci *vp, uint8_t type, uint32_t off, uint32_t len)
{
	struct virtio_pci_cap c = {
	    PCI_CAP_ID_VNDR, 0, sizeof(c), type, VIRTIO_PCI_BAR, 0, {0}, off, len};

	return pci_dev_add_cap(&vp->pci, &c, sizeof(c)) < 0 ? -ENOSPC : 0;
}

static void virtio_pci_queues_reset(struct virtio_pci *vp)
{
	unsigned i;

	for (i = 0; i < vp->nqueues; i++) {
		struct virtio_pci_queue *q = &vp->q[i];

		q->size = q->max_size;
		q->msix_vector = VIRTIO_NO_VECTOR;
		q->enabled = false;
		q->desc = q->driver = q->device = 0;
		virtq_reset(&q->vq);
	}
}

int virtio_pci_init(struct virtio_pci *vp, const char *name, uint16_t device_id,
		    uint32_t class_code, uint64_t features, unsigned nqueues, uint16_t queue_max,
		    const struct virtio_dev_ops *ops, void *opaque, const struct guest_mem *gm,
		    char *err, unsigned errlen)
{
	struct virtio_pci_notify_cap nc = {{PCI_CAP_ID_VNDR,
					    0,
					    sizeof(nc),
					    VIRTIO_PCI_CAP_NOTIFY_CFG,
					    VIRTIO_PCI_BAR,
					    0,
					    {0},
					    VIRTIO_PCI_NOTIFY_OFF,
					    VIRTIO_PCI_MAX_QUEUES * VIRTIO_PCI_NOTIFY_MULT},
					   VIRTIO_PCI_NOTIFY_MULT};
	int r;

	memset(vp, 0, sizeof(*vp));
	for (unsigned i = 0; i < VIRTIO_PCI_MAX_QUEUES; i++)
		vp->kick_fd[i] = -1;
	vp->notify_at = ~(uint64_t)0;
	if (!nqueues || nqueues > VIRTIO_PCI_MAX_QUEUES || !queue_max ||
	    (queue_max & (queue_max - 1)) || queue_max > VIRTQ_MAX_SIZE) {
		snprintf(err, errlen,
			 "virtio %s: %u queues of %u entries (1..%u queues, a power of "
			 "two up to %u entries)",
			 name, nqueues, queue_max, VIRTIO_PCI_MAX_QUEUES, VIRTQ_MAX_SIZE);
		return -EINVAL;
	}
	pthread_mutex_init(&vp->lock, NULL);
	pthread_mutex_init(&vp->bar_lock, NULL);
	vp->gm = gm;
	vp->ops = ops;
	vp->opaque = opaque;
	vp->device_id = device_id;
	vp->features = features | (1ULL << VIRTIO_F_VERSION_1) | (1ULL << VIRTIO_RING_F_EVENT_IDX) |
		       (1ULL << VIRTIO_RING_F_INDIRECT_DESC);
	vp->nqueues = nqueues;
	vp->msix_config = VIRTIO_NO_VECTOR;
	for (unsigned i = 0; i < nqueues; i++)
		vp->q[i].max_size = queue_max;
	virtio_pci_queues_reset(vp);
	pci_dev_init(&vp->pci, name, VIRTIO_PCI_VENDOR, VIRTIO_PCI_DEVICE_BASE + device_id,
		     class_code, VIRTIO_PCI_VENDOR, 0x40);
	vp->pci.priv = vp;
	r = pci_dev_add_bar(&vp->pci, VIRTIO_PCI_BAR, VIRTIO_PCI_BAR_SIZE, true, false,
			    &virtio_pci_bar_ops, vp, NULL);
	if (!r)
		r = pci_dev_add_msix(&vp->pci, nqueues + 1, VIRTIO_PCI_MSIX_BAR, err, errlen);
	else
		snprintf(err, errlen, "virtio %s: BAR %u: %s", name, VIRTIO_PCI_BAR, strerror(-r));
	if (!r)
		r = virtio_pci_add_cap(vp, VIRTIO_PCI_CAP_COMMON_CFG, VIRTIO_PCI_COMMON_OFF,
				       VIRTIO_PCI_COMMON_LEN);
	if (!r)
		r = virtio_pci_add_cap(vp, VIRTIO_PCI_CAP_ISR_CFG, VIRTIO_PCI_ISR_OFF, 1);
	if (!r)
		r = virtio_pci_add_cap(vp, VIRTIO_PCI_CAP_DEVICE_CFG, VIRTIO_PCI_DEVCFG_OFF,
				       VIRTIO_PCI_DEVCFG_LEN);
	if (!r && pci_dev_add_cap(&vp->pci, &nc, sizeof(nc)) < 0)
		r = -ENOSPC;
	if (r == -ENOSPC)
		snprintf(err, errlen, "virtio %s: no room for the virtio capabilities", name);
	if (r) {
		pci_dev_exit(&vp->pci);
		pthread_mutex_destroy(&vp->lock);
		pthread_mutex_destroy(&vp->bar_lock);
	}
	return r;
}

static void virtio_pci_notify_fds(struct virtio_pci *vp, uint64_t at, bool on)
{
	for (unsigned q = 0; q < vp->nqueues; q++) {
		uint64_t gpa = at + VIRTIO_PCI_NOTIFY_OFF + (uint64_t)q * VIRTIO_PCI_NOTIFY_MULT;
		int r = vp->ioeventfd(vp->ioeventfd_opaque, gpa, 2, vp->kick_fd[q], on);

		if (r && on)
			fprintf(stderr,
				"virtio %s: notify ioeventfd of queue %u: %s (its kicks exit to "
				"lvmm)\n",
				vp->pci.name, q, strerror(-r));
	}
}

/* BAR 0 moved (the PCI remap worker): the notify ioeventfds follow it. */
static void virtio_pci_bar_moved(struct pci_dev *d, unsigned bar, uint64_t gpa)
{
	struct virtio_pci *vp = d->priv;

	if (bar != VIRTIO_PCI_BAR)
		return;
	pthread_mutex_lock(&vp->bar_lock);
	if (vp->notify_at != ~(uint64_t)0)
		virtio_pci_notify_fds(vp, vp->notify_at, false);
	vp->notify_at = gpa;
	if (gpa != ~(uint64_t)0)
		virtio_pci_notify_fds(vp, gpa, true);
	pthread_mutex_unlock(&vp->bar_lock);
}

int virtio_pci_kick_eventfds(struct virtio_pci *vp, virtio_ioeventfd_fn ioeventfd, void *opaque,
			     char *err, unsigned errlen)
{
	for (unsigned q = 0; q < vp->nqueues; q++) {
		vp->kick_fd[q] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (vp->kick_fd[q] < 0) {
			snprintf(err, errlen, "virtio %s: eventfd: %s", vp->pci.name,
				 strerror(errno));
			return -errno;
		}
	}
	if (ioeventfd) {
		vp->ioeventfd = ioeventfd;
		vp->ioeventfd_opaque = opaque;
		vp->pci.bar[VIRTIO_PCI_BAR].moved = virtio_pci_bar_moved;
	}
	return 0;
}

bool virtio_eventfd_take(int fd)
{
	uint64_t v;

	return read(fd, &v, sizeof(v)) == sizeof(v);
}

void virtio_eventfd_signal(int fd)
{
	uint64_t one = 1;

	if (write(fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		fprintf(stderr, "virtio: eventfd write: %s\n", strerror(errno));
}

void virtio_pci_exit(struct virtio_pci *vp)
{
	pthread_mutex_lock(&vp->bar_lock);
	if (vp->ioeventfd && vp->notify_at != ~(uint64_t)0)
		virtio_pci_notify_fds(vp, vp->notify_at, false);
	vp->notify_at = ~(uint64_t)0;
	pthread_mutex_unlock(&vp->bar_lock);
	pci_dev_exit(&vp->pci);
	for (unsigned q = 0; q < VIRTIO_PCI_MAX_QUEUES; q++)
		if (vp->kick_fd[q] >= 0)
			close(vp->kick_fd[q]);
	pthread_mutex_destroy(&vp->lock);
	pthread_mutex_destroy(&vp->bar_lock);
}

static void virtio_pci_msix(struct virtio_pci *vp, uint16_t vector)
{
	if (vector != VIRTIO_NO_VECTOR && vector < vp->nqueues + 1) {
		vp->interrupts++;
		pci_msix_notify(&vp->pci, vector);
	}
}

void virtio_pci_queue_interrupt(struct virtio_pci *vp, unsigned q)
{
	if (q >= vp->nqueues || !virtq_should_notify(&vp->q[q].vq))
		return;
	vp->isr |= 1;
	virtio_pci_msix(vp, vp->q[q].msix_vector);
}

void virtio_pci_config_interrupt(struct virtio_pci *vp)
{
	vp->generation++;
	vp->isr |= 2;
	virtio_pci_msix(vp, vp->msix_config);
}

void virtio_pci_ring_error(struct virtio_pci *vp, unsigned q, const char *msg)
{
	vp->ring_errors++;
	if (!(vp->status & VIRTIO_STATUS_NEEDS_RESET))
		fprintf(stderr, "virtio %s: queue %u: %s; the device needs a reset\n", vp->pci.name,
			q, msg);
	vp->status |= VIRTIO_STATUS_NEEDS_RESET;
	vp->isr |= 2;
	virtio_pci_msix(vp, vp->msix_config);
}

static void virtio_pci_reset(struct virtio_pci *vp)
{
	vp->driver_features = 0;
	vp->dfselect = vp->gfselect = 0;
	vp->msix_config = VIRTIO_NO_VECTOR;
	vp->queue_select = 0;
	vp->status = 0;
	vp->isr = 0;
	virtio_pci_queues_reset(vp);
	if (vp->ops->reset)
		vp->ops->reset(vp);
}

/* The common configuration as the driver reads it, for the selected queue. */
static void virtio_pci_common_image(struct virtio_pci *vp, uint8_t img[VIRTIO_PCI_COMMON_LEN])
{
	struct virtio_pci_queue *q =
	    vp->queue_select < vp->nqueues ? &vp->q[vp->queue_select] : NULL;
	uint32_t df = vp->dfselect < 2 ? (uint32_t)(vp->features >> (32 * vp->dfselect)) : 0;
	uint32_t gf = vp->gfselect < 2 ? (uint32_t)(vp->driver_features >> (32 * vp->gfselect)) : 0;
	uint16_t nq = (uint16_t)vp->nqueues, zero16 = 0;
	uint16_t noff = q ? vp->queue_select : 0, en = q && q->enabled;

	memset(img, 0, VIRTIO_PCI_COMMON_LEN);
	memcpy(img + VIRTIO_PCI_DFSELECT, &vp->dfselect, 4);
	memcpy(img + VIRTIO_PCI_DF, &df, 4);
	memcpy(img + VIRTIO_PCI_GFSELECT, &vp->gfselect, 4);
	memcpy(img + VIRTIO_PCI_GF, &gf, 4);
	memcpy(img + VIRTIO_PCI_MSIX_CONFIG, &vp->msix_config, 2);
	memcpy(img + VIRTIO_PCI_NUM_QUEUES, &nq, 2);
	img[VIRTIO_PCI_STATUS] = vp->status;
	img[VIRTIO_PCI_CFG_GEN] = vp->generation;
	memcpy(img + VIRTIO_PCI_Q_SELECT, &vp->queue_select, 2);
	/* a queue that does not exist reads size 0: the driver stops there */
	memcpy(img + VIRTIO_PCI_Q_SIZE, q ? &q->size : &zero16, 2);
	memcpy(img + VIRTIO_PCI_Q_MSIX, q ? &q->msix_vector : &zero16, 2);
	memcpy(img + VIRTIO_PCI_Q_ENABLE, &en, 2);
	memcpy(img + VIRTIO_PCI_Q_NOFF, &noff, 2);
	if (q) {
		memcpy(img + VIRTIO_PCI_Q_DESC, &q->desc, 8);
		memcpy(img + VIRTIO_PCI_Q_DRIVER, &q->driver, 8);
		memcpy(img + VIRTIO_PCI_Q_DEVICE, &q->device, 8);
	}
}

static void virtio_pci_set_status(struct virtio_pci *vp, uint8_t v)
{
	uint64_t need = 1ULL << VIRTIO_F_VERSION_1;
	uint8_t old;

	if (!v) {
		virtio_pci_reset(vp);
		return;
	}
	/* FEATURES_OK sticks only for a subset of ours that includes VERSION_1 */
	if ((v & VIRTIO_STATUS_FEATURES_OK) && !(vp->status & VIRTIO_STATUS_FEATURES_OK) &&
	    ((vp->driver_features & ~vp->features) || !(vp->driver_features & need)))
		v &= (uint8_t)~VIRTIO_STATUS_FEATURES_OK;
	old = vp->status;
	vp->status = (uint8_t)(v | (vp->status & VIRTIO_STATUS_NEEDS_RESET));
	if (vp->ops->status)
		vp->ops->status(vp, old);
}

static void virtio_pci_enable_queue(struct virtio_pci *vp, struct virtio_pci_queue *q)
{
	char err[160];
	bool evi = vp->driver_features & (1ULL << VIRTIO_RING_F_EVENT_IDX);
	bool ind = vp->driver_features & (1ULL << VIRTIO_RING_F_INDIRECT_DESC);

	if (q->enabled)
		return;
	if (virtq_start(&q->vq, vp->gm, q->size, q->desc, q->driver, q->device, evi, ind, err,
			sizeof(err))) {
		virtio_pci_ring_error(vp, (unsigned)(q - vp->q), err);
		return;
	}
	q->enabled = true;
}

static void virtio_pci_common_write(struct virtio_pci *vp, uint64_t off, const void *data,
				    unsigned len)
{
	struct virtio_pci_queue *q =
	    vp->queue_select < vp->nqueues ? &vp->q[vp->queue_select] : NULL;
	uint64_t v = 0;

	memcpy(&v, data, len > 8 ? 8 : len);
	switch (off) {
	case VIRTIO_PCI_DFSELECT:
		if (len == 4)
			vp->dfselect = (uint32_t)v;
		return;
	case VIRTIO_PCI_GFSELECT:
		if (len == 4)
			vp->gfselect = (uint32_t)v;
		return;
	case VIRTIO_PCI_GF:
		/* features are fixed once FEATURES_OK was accepted */
		if (len == 4 && vp->gfselect < 2 && !(vp->status & VIRTIO_STATUS_FEATURES_OK)) {
			unsigned sh = 32 * vp->gfselect;

			vp->driver_features &= ~(0xffffffffULL << sh);
			vp->driver_features |= (v & 0xffffffffULL) << sh;
		}
		return;
	case VIRTIO_PCI_MSIX_CONFIG:
		if (len == 2)
			vp->msix_config = v < vp->nqueues + 1 ? (uint16_t)v : VIRTIO_NO_VECTOR;
		return;
	case VIRTIO_PCI_STATUS:
		if (len == 1)
			virtio_pci_set_status(vp, (uint8_t)v);
		return;
	case VIRTIO_PCI_Q_SELECT:
		if (len == 2)
			vp->queue_select = (uint16_t)v;
		return;
	case VIRTIO_PCI_Q_SIZE:
		/* checked when the queue is enabled: a power of two up to the maximum */
		if (len == 2 && q && !q->enabled)
			q->size = v <= q->max_size ? (uint16_t)v : q->max_size;
		return;
	case VIRTIO_PCI_Q_MSIX:
		if (len == 2 && q) {
			uint16_t was = q->msix_vector;

			q->msix_vector = v < vp->nqueues + 1 ? (uint16_t)v : VIRTIO_NO_VECTOR;
			if (q->msix_vector != was && vp->ops->vector)
				vp->ops->vector(vp, vp->queue_select);
		}
		return;
	case VIRTIO_PCI_Q_ENABLE:
		if (len == 2 && q && v == 1)
			virtio_pci_enable_queue(vp, q);
		return;
	default:
		break;
	}
	if (q && !q->enabled && off >= VIRTIO_PCI_Q_DESC && off + len <= VIRTIO_PCI_COMMON_LEN &&
	    (len == 4 || len == 8) && !(off & (len - 1))) {
		uint64_t *reg = off < VIRTIO_PCI_Q_DRIVER   ? &q->desc
				: off < VIRTIO_PCI_Q_DEVICE ? &q->driver
							    : &q->device;
		unsigned sh = (off & 4) * 8;

		if (len == 8)
			*reg = v;
		else
			*reg = (*reg & ~(0xffffffffULL << sh)) | ((v & 0xffffffffULL) << sh);
	}
}

void virtio_pci_bar_read(void *opaque, uint64_t off, void *data, unsigned len)
{
	struct virtio_pci *vp = opaque;
	uint8_t img[VIRTIO_PCI_COMMON_LEN];

	memset(data, 0, len);
	if (len > 8)
		return;
	pthread_mutex_lock(&vp->lock);
	if (off + len <= VIRTIO_PCI_COMMON_LEN) {
		virtio_pci_common_image(vp, img);
		memcpy(data, img + off, len);
	} else if (off == VIRTIO_PCI_ISR_OFF && len == 1) {
		/* reading the ISR acknowledges it */
		*(uint8_t *)data = vp->isr;
		vp->isr = 0;
	} else if (off >= VIRTIO_PCI_DEVCFG_OFF &&
		   off + len <= VIRTIO_PCI_DEVCFG_OFF + VIRTIO_PCI_DEVCFG_LEN) {
		if (vp->ops->cfg_read)
			vp->ops->cfg_read(vp, off - VIRTIO_PCI_DEVCFG_OFF, data, len);
	}
	pthread_mutex_unlock(&vp->lock);
}

void virtio_pci_bar_write(void *opaque, uint64_t off, const void *data, unsigned len)
{
	struct virtio_pci *vp = opaque;

	if (len > 8)
		return;
	pthread_mutex_lock(&vp->lock);
	if (off + len <= VIRTIO_PCI_COMMON_LEN) {
		virtio_pci_common_write(vp, off, data, len);
	} else if (off >= VIRTIO_PCI_NOTIFY_OFF &&
		   off < VIRTIO_PCI_NOTIFY_OFF + VIRTIO_PCI_MAX_QUEUES * VIRTIO_PCI_NOTIFY_MULT) {
		unsigned q = (unsigned)(off - VIRTIO_PCI_NOTIFY_OFF) / VIRTIO_PCI_NOTIFY_MULT;

		vp->kicks++;
		/* kicks before DRIVER_OK, or of a queue not enabled, are dropped */
		if (q < vp->nqueues && vp->q[q].enabled && (vp->status & VIRTIO_STATUS_DRIVER_OK) &&
		    !(vp->status & VIRTIO_STATUS_NEEDS_RESET)) {
			if (vp->kick_fd[q] >= 0)
				virtio_eventfd_signal(vp->kick_fd[q]);
			else if (vp->ops->notify)
				vp->ops->notify(vp, q);
		}
	} else if (off >= VIRTIO_PCI_DEVCFG_OFF &&
		   off + len <= VIRTIO_PCI_DEVCFG_OFF + VIRTIO_PCI_DEVCFG_LEN) {
		if (vp->ops->cfg_write)
			vp->ops->cfg_write(vp, off - VIRTIO_PCI_DEVCFG_OFF, data, len);
	}
	pthread_mutex_unlock(&vp->lock);
}

/* ---- snapshots ---- */

#define VIRTIO_PCI_STATE_VERSION 1u

struct virtio_pci_qstate {
	uint16_t size, msix_vector;
	uint8_t enabled, signalled_valid, broken, pad;
	uint16_t last_avail, used_idx, signalled_used, pad2;
	uint64_t desc, driver, device;
};

struct virtio_pci_state {
	uint32_t version, nqueues;
	uint64_t features, driver_features;
	uint32_t dfselect, gfselect;
	uint16_t msix_config, queue_select;
	uint8_t status, isr, generation, pad;
	struct virtio_pci_qstate q[VIRTIO_PCI_MAX_QUEUES];
};

size_t virtio_pci_state_size(const struct virtio_pci *vp)
{
	return sizeof(struct virtio_pci_state) + pci_dev_state_size(&vp->pci);
}

void virtio_pci_save(struct virtio_pci *vp, void *buf)
{
	struct virtio_pci_state st;

	memset(&st, 0, sizeof(st));
	pthread_mutex_lock(&vp->lock);
	st.version = VIRTIO_PCI_STATE_VERSION;
	st.nqueues = vp->nqueues;
	st.features = vp->features;
	st.driver_features = vp->driver_features;
	st.dfselect = vp->dfselect;
	st.gfselect = vp->gfselect;
	st.msix_config = vp->msix_config;
	st.queue_select = vp->queue_select;
	st.status = vp->status;
	st.isr = vp->isr;
	st.generation = vp->generation;
	for (unsigned i = 0; i < vp->nqueues; i++) {
		const struct virtio_pci_queue *q = &vp->q[i];

		st.q[i] = (struct virtio_pci_qstate){
		    .size = q->size,
		    .msix_vector = q->msix_vector,
		    .enabled = q->enabled,
		    .signalled_valid = q->vq.signalled_valid,
		    .broken = q->vq.broken,
		    .last_avail = q->vq.last_avail,
		    .used_idx = q->vq.used_idx,
		    .signalled_used = q->vq.signalled_used,
		    .desc = q->desc,
		    .driver = q->driver,
		    .device = q->device,
		};
	}
	pthread_mutex_unlock(&vp->lock);
	memcpy(buf, &st, sizeof(st));
	pci_dev_save(&vp->pci, (uint8_t *)buf + sizeof(st));
}

static bool virtio_pci_vector_ok(const struct virtio_pci *vp, uint16_t v)
{
	return v == VIRTIO_NO_VECTOR || v < vp->nqueues + 1;
}

int virtio_pci_restore(struct virtio_pci *vp, const void *buf, size_t len, char *err,
		       unsigned errlen)
{
	struct virtio_pci_state st;
	const char *name = vp->pci.name;
	int r = 0;

	if (len != virtio_pci_state_size(vp)) {
		snprintf(err, errlen, "virtio %s: state of %zu bytes, expected %zu", name, len,
			 virtio_pci_state_size(vp));
		return -EINVAL;
	}
	memcpy(&st, buf, sizeof(st));
	if (st.version != VIRTIO_PCI_STATE_VERSION || st.nqueues != vp->nqueues ||
	    st.features != vp->features || (st.driver_features & ~vp->features) ||
	    !virtio_pci_vector_ok(vp, st.msix_config) ||
	    /* a status no live driver reaches (virtio_pci_set_status refuses the same) */
	    ((st.status & VIRTIO_STATUS_FEATURES_OK) &&
	     !(st.driver_features & (1ULL << VIRTIO_F_VERSION_1))) ||
	    ((st.status & VIRTIO_STATUS_DRIVER_OK) && !(st.status & VIRTIO_STATUS_FEATURES_OK))) {
		snprintf(err, errlen,
			 "virtio %s: saved transport (version %u, %u queues, features 0x%llx) does "
			 "not fit this device (%u queues, features 0x%llx)",
			 name, st.version, st.nqueues, (unsigned long long)st.features, vp->nqueues,
			 (unsigned long long)vp->features);
		return -EINVAL;
	}
	for (unsigned i = 0; i < vp->nqueues; i++) {
		const struct virtio_pci_qstate *s = &st.q[i];

		if (s->size > vp->q[i].max_size || !virtio_pci_vector_ok(vp, s->msix_vector)) {
			snprintf(err, errlen, "virtio %s: queue %u: size %u or vector %u invalid",
				 name, i, s->size, s->msix_vector);
			return -EINVAL;
		}
	}
	r = pci_dev_restore(&vp->pci, (const uint8_t *)buf + sizeof(st), len - sizeof(st), err,
			    errlen);
	if (r)
		return r;
	pthread_mutex_lock(&vp->lock);
	virtio_pci_queues_reset(vp);
	vp->driver_features = st.driver_features;
	vp->dfselect = st.dfselect;
	vp->gfselect = st.gfselect;
	vp->msix_config = st.msix_config;
	vp->queue_select = st.queue_select;
	vp->status = st.status;
	vp->isr = st.isr;
	vp->generation = st.generation;
	for (unsigned i = 0; i < vp->nqueues && !r; i++) {
		const struct virtio_pci_qstate *s = &st.q[i];
		struct virtio_pci_queue *q = &vp->q[i];
		bool evi = vp->driver_features & (1ULL << VIRTIO_RING_F_EVENT_IDX);
		bool ind = vp->driver_features & (1ULL << VIRTIO_RING_F_INDIRECT_DESC);
		char why[160];

		q->size = s->size;
		q->msix_vector = s->msix_vector;
		q->desc = s->desc;
		q->driver = s->driver;
		q->device = s->device;
		if (!s->enabled)
			continue;
		if (virtq_start(&q->vq, vp->gm, q->size, q->desc, q->driver, q->device, evi, ind,
				why, sizeof(why))) {
			snprintf(err, errlen, "virtio %s: queue %u: %s", name, i, why);
			r = -EINVAL;
			break;
		}
		q->enabled = true;
		q->vq.last_avail = s->last_avail;
		q->vq.used_idx = s->used_idx;
		q->vq.signalled_used = s->signalled_used;
		q->vq.signalled_valid = s->signalled_valid;
		q->vq.broken = s->broken;
	}
	pthread_mutex_unlock(&vp->lock);
	return r;
}
