/* INTx of a passed-through function (vfio_pci.h): VFIO's trigger eventfd onto the slot's IOAPIC
 * pin, as a KVM irqfd whose resample eventfd unmasks VFIO at the guest's EOI, or, with lvmm's
 * own IOAPIC, read by a thread that raises the pin, lowered and unmasked at the EOI. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "vfio_pci.h"

void vfio_pci_intx_offer(struct vfio_pci *v)
{
	uint8_t pin = 0;

	if (v->info->irqs[VFIO_PCI_INTX_INDEX].count != 1 ||
	    v->ops->cfg_read(v->o, PCI_INTERRUPT_PIN, &pin, 1) || pin < 1 || pin > 4)
		pin = 0;
	pci_dev_set_intx_pin(&v->pci, pin);
}

/* VFIO signals the trigger (and, with KVM, unmasks on the resample eventfd), or stops;
 * d->lock held. */
static int intx_vfio(struct vfio_pci *v, bool on)
{
	int r;

	if (on == v->intx_on || v->intx_mode == VFIO_INTX_NONE)
		return 0;
	if (!on) {
		r = v->ops->irq_set(v->o, VFIO_PCI_INTX_INDEX, 0, 0, NULL);
		if (!r) {
			v->intx_on = false;
			v->pci.intx_asserted = false; /* VFIO let go of the line */
		}
		return r;
	}
	r = v->ops->irq_set(v->o, VFIO_PCI_INTX_INDEX, 0, 1, &v->intx_trigger);
	if (!r && v->intx_mode == VFIO_INTX_KVM) {
		r = v->ops->intx_unmask(v->o, v->intx_unmask);
		if (r)
			v->ops->irq_set(v->o, VFIO_PCI_INTX_INDEX, 0, 0, NULL);
	}
	if (!r)
		v->intx_on = true;
	return r;
}

static void intx_log(struct vfio_pci *v, const char *what, int r)
{
	if (r && pci_log_due(&v->irq_errors))
		fprintf(stderr, "lvmm: device %s: INTx %s: %s (failure %llu)\n", v->id, what,
			strerror(-r), (unsigned long long)v->irq_errors);
}

void vfio_pci_intx_off(struct vfio_pci *v)
{
	intx_log(v, "off", intx_vfio(v, false));
}

/* The bus's gate changed (d->lock held): VFIO's INTx is on whenever neither MSI nor MSI-X is
 * (VFIO takes one interrupt type at a time); INTx Disable is the device's own, which vfio-pci
 * honours by masking. */
static void intx_gate(struct pci_dev *d, bool open)
{
	struct vfio_pci *v = (struct vfio_pci *)d;

	(void)open;
	if (!v->msix_on && !v->msi_on)
		intx_log(v, "on", intx_vfio(v, true));
}

/* lvmm's IOAPIC: the guest ended the interrupt; the pin goes low and VFIO, which masked the
 * line when it fired, unmasks it: a device still asserting fires again. */
static void intx_eoi(struct pci_dev *d)
{
	struct vfio_pci *v = (struct vfio_pci *)d;
	int r = 0;

	pthread_mutex_lock(&d->lock);
	pci_intx_set_locked(d, false);
	if (v->intx_on) {
		v->intx_eois++;
		r = v->ops->intx_unmask(v->o, -1);
	}
	pthread_mutex_unlock(&d->lock);
	intx_log(v, "unmask", r);
}

static void *intx_thread(void *opaque)
{
	struct vfio_pci *v = opaque;
	struct pollfd p[2] = {{.fd = v->intx_trigger, .events = POLLIN},
			      {.fd = v->intx_stop, .events = POLLIN}};
	char err[160];
	uint64_t n;

	if (v->io_thread && v->io_thread(err, sizeof(err)))
		fprintf(stderr, "lvmm: device %s: INTx thread: %s\n", v->id, err);
	for (;;) {
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "lvmm: device %s: INTx poll: %s\n", v->id, strerror(errno));
			break;
		}
		if (p[1].revents)
			break;
		if ((p[0].revents & POLLIN) && read(v->intx_trigger, &n, sizeof(n)) == sizeof(n)) {
			pthread_mutex_lock(&v->pci.lock);
			v->intx_fired++;
			/* a trigger that crossed VFIO's INTx going off is stale */
			if (v->intx_on)
				pci_intx_set_locked(&v->pci, true);
			pthread_mutex_unlock(&v->pci.lock);
		}
	}
	return NULL;
}

int vfio_pci_intx_start(struct vfio_pci *v, char *err, unsigned errlen)
{
	struct pci_dev *d = &v->pci;
	int r;

	if (!d->intx_gsi || v->intx_mode != VFIO_INTX_NONE)
		return 0;
	v->intx_trigger = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	v->intx_unmask = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	v->intx_stop = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (v->intx_trigger < 0 || v->intx_unmask < 0 || v->intx_stop < 0) {
		r = -errno;
		snprintf(err, errlen, "device %s: INTx eventfd: %s", v->id, strerror(-r));
		goto fail;
	}
	r = pci_intx_irqfd(d, v->intx_trigger, v->intx_unmask, true);
	if (!r) {
		v->intx_mode = VFIO_INTX_KVM;
	} else if (r == -EOPNOTSUPP) {
		v->intx_mode = VFIO_INTX_USER;
		r = -pthread_create(&v->intx_thread, NULL, intx_thread, v);
		if (r) {
			snprintf(err, errlen, "device %s: INTx thread: %s", v->id, strerror(-r));
			v->intx_mode = VFIO_INTX_NONE;
			goto fail;
		}
		v->intx_thread_up = true;
	} else {
		snprintf(err, errlen, "device %s: INTx irqfd on GSI %u: %s", v->id, d->intx_gsi,
			 strerror(-r));
		goto fail;
	}
	pthread_mutex_lock(&d->lock);
	if (v->intx_mode == VFIO_INTX_USER)
		d->intx_eoi = intx_eoi;
	d->intx_gate = intx_gate;
	r = v->msix_on || v->msi_on ? 0 : intx_vfio(v, true);
	pthread_mutex_unlock(&d->lock);
	if (r) {
		snprintf(err, errlen, "device %s: INTx trigger: %s", v->id, strerror(-r));
		vfio_pci_intx_stop(v);
		goto withdraw;
	}
	return 0;
fail:
	vfio_pci_intx_stop(v);
withdraw:
	/* the guest sees no pin rather than a dead one */
	pthread_mutex_lock(&d->lock);
	d->cfg[PCI_INTERRUPT_PIN] = 0;
	d->intx_gsi = 0;
	pthread_mutex_unlock(&d->lock);
	return r;
}

void vfio_pci_intx_stop(struct vfio_pci *v)
{
	struct pci_dev *d = &v->pci;
	uint64_t one = 1;

	if (v->intx_thread_up) {
		if (write(v->intx_stop, &one, sizeof(one)) != sizeof(one))
			fprintf(stderr, "lvmm: device %s: INTx thread stop: %s\n", v->id,
				strerror(errno));
		pthread_join(v->intx_thread, NULL);
		v->intx_thread_up = false;
	}
	pthread_mutex_lock(&d->lock);
	intx_log(v, "off", intx_vfio(v, false));
	d->intx_eoi = NULL;
	d->intx_gate = NULL;
	pci_intx_set_locked(d, false);
	pthread_mutex_unlock(&d->lock);
	if (v->intx_mode == VFIO_INTX_KVM)
		pci_intx_irqfd(d, v->intx_trigger, -1, false);
	v->intx_mode = VFIO_INTX_NONE;
	if (v->intx_trigger >= 0)
		close(v->intx_trigger);
	if (v->intx_unmask >= 0)
		close(v->intx_unmask);
	if (v->intx_stop >= 0)
		close(v->intx_stop);
	v->intx_trigger = v->intx_unmask = v->intx_stop = -1;
}
