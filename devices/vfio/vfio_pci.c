/* A passed-through PCI function (vfio_pci.h): its BARs (mmap-able pieces as guest memory that
 * follows the BAR; the rest, the MSI-X table and the ROM trapped), MSI-X vectors handed to VFIO
 * as the platform's irqfds, and the dev_model that opens the device in the VM's container. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "vfio/vfio_pci.h"

#define PAGE		    4096ULL
#define VFIO_MSI_IRQ_INDEX  1 /* VFIO_PCI_MSI_IRQ_INDEX */
#define VFIO_MSIX_IRQ_INDEX 2 /* VFIO_PCI_MSIX_IRQ_INDEX */

static bool bar_in_region(const struct vfio_pci_bar *b, uint64_t off, unsigned len)
{
	return len <= 8 && off < b->region_size && len <= b->region_size - off;
}

static void bar_read(void *opaque, uint64_t off, void *data, unsigned len)
{
	struct vfio_pci_bar *b = opaque;
	struct vfio_pci *v = b->owner;

	if (b->idx != PCI_ROM_BAR && pci_msix_access(&v->pci, b->idx, off, data, len, false))
		return;
	/* the ROM's slot is its VFIO region index, as a BAR's is */
	if (!bar_in_region(b, off, len) || v->ops->region_read(v->o, b->idx, off, data, len))
		memset(data, 0xff, len > 8 ? 8 : len);
}

static void bar_write(void *opaque, uint64_t off, const void *data, unsigned len)
{
	struct vfio_pci_bar *b = opaque;
	struct vfio_pci *v = b->owner;

	if (b->idx == PCI_ROM_BAR)
		return; /* read-only memory */
	if (pci_msix_access(&v->pci, b->idx, off, (void *)data, len, true))
		return;
	if (bar_in_region(b, off, len))
		v->ops->region_write(v->o, b->idx, off, data, len);
}

static const struct bus_ops vfio_bar_ops = {.read = bar_read, .write = bar_write};

/* The pages of BAR bar the MSI-X table or PBA touch: [*lo, *hi), empty when none. */
static void msix_pages(const struct pci_msix *m, unsigned bar, bool pba, uint64_t *lo, uint64_t *hi)
{
	uint64_t off = pba ? m->pba_off : m->table_off;
	uint64_t len = pba ? (m->nvec + 63) / 64 * 8ULL : m->nvec * 16ULL;

	*lo = *hi = 0;
	if (!m->nvec || (pba ? m->pba_bar : m->bar) != bar)
		return;
	*lo = off & ~(PAGE - 1);
	*hi = (off + len + PAGE - 1) & ~(PAGE - 1);
}

static void piece_add(struct vfio_pci_bar *b, uint64_t off, uint64_t end)
{
	if (end > off && b->npieces < VFIO_PCI_MAX_PIECES)
		b->piece[b->npieces++] = (struct vfio_pci_piece){.off = off, .size = end - off};
}

/* Cuts the region's mmap-able areas around the MSI-X pages (those stay trapped) and maps each
 * piece into this process. A piece that cannot be mapped stays trapped too. */
static void bar_pieces(struct vfio_pci *v, unsigned i)
{
	const struct vfio_region *rg = &v->info->regions[i];
	struct vfio_pci_bar *b = &v->bar[i];
	uint64_t tlo, thi, plo, phi;

	msix_pages(&v->pci.msix, i, false, &tlo, &thi);
	msix_pages(&v->pci.msix, i, true, &plo, &phi);
	if (plo < tlo) { /* table below PBA, so each area is cut left to right */
		uint64_t l = tlo, h = thi;

		tlo = plo, thi = phi, plo = l, phi = h;
	}
	for (unsigned s = 0; s < rg->nsparse && s < VFIO_MAX_SPARSE; s++) {
		uint64_t off = rg->sparse[s].offset, end = off + rg->sparse[s].size;

		if ((off | end) & (PAGE - 1) || end < off || end > b->region_size)
			continue;
		if (thi > tlo && tlo < end && thi > off) {
			piece_add(b, off, tlo > off ? tlo : off);
			off = thi < end ? thi : end;
		}
		if (phi > plo && plo < end && phi > off) {
			piece_add(b, off, plo > off ? plo : off);
			off = phi < end ? phi : end;
		}
		piece_add(b, off, end);
	}
	for (unsigned p = 0; p < b->npieces; p++) {
		struct vfio_pci_piece *pc = &b->piece[p];

		pc->host = v->ops->region_mmap(v->o, i, pc->off, pc->size);
		if (!pc->host)
			fprintf(stderr,
				"lvmm: device %s: BAR%u+0x%llx (%llu bytes) not mapped: %s; "
				"trapped\n",
				v->id, i, (unsigned long long)pc->off, (unsigned long long)pc->size,
				strerror(errno));
	}
}

/* The platform moved BAR bar to gpa (~0: it stopped decoding): the pieces follow as guest
 * memory; where they are not, accesses exit to bar_read/bar_write. */
static void bar_moved(struct pci_dev *d, unsigned bar, uint64_t gpa)
{
	struct vfio_pci *v = (struct vfio_pci *)d;
	struct vfio_pci_bar *b = &v->bar[bar];

	for (unsigned p = 0; p < b->npieces; p++) {
		struct vfio_pci_piece *pc = &b->piece[p];

		if (pc->mapped && v->unmap_host)
			v->unmap_host(v->host_opaque, b->gpa + pc->off);
		pc->mapped = false;
		if (gpa == ~0ULL || !pc->host || !v->map_host)
			continue;
		int r = v->map_host(v->host_opaque, gpa + pc->off, pc->size, pc->host);

		if (r && pci_log_due(&v->map_errors))
			fprintf(stderr,
				"lvmm: device %s: BAR%u+0x%llx at 0x%llx: %s; trapped (failure "
				"%llu)\n",
				v->id, bar, (unsigned long long)pc->off,
				(unsigned long long)(gpa + pc->off), strerror(-r),
				(unsigned long long)v->map_errors);
		else if (!r)
			pc->mapped = true;
	}
	b->gpa = gpa;
}

/* The guest turned MSI-X on or off (d->lock held): on, VFIO signals the platform's vector
 * eventfds, which are KVM irqfds while unmasked and pending bits while masked. */
static void vfio_msix_enable(struct pci_dev *d, bool on)
{
	struct vfio_pci *v = (struct vfio_pci *)d;
	const struct pci_msix *m = &d->msix;
	unsigned n = m->nvec;
	int r;

	if (n > v->info->irqs[VFIO_MSIX_IRQ_INDEX].count)
		n = v->info->irqs[VFIO_MSIX_IRQ_INDEX].count;
	if (on == v->msix_on || !n)
		return;
	if (on)
		vfio_pci_intx_off(v); /* one interrupt type at a time; back when MSI-X is off */
	r = v->ops->irq_set(v->o, VFIO_MSIX_IRQ_INDEX, 0, on ? n : 0, on ? m->efd : NULL);
	if (r) {
		if (pci_log_due(&v->irq_errors))
			fprintf(stderr,
				"lvmm: device %s: MSI-X %s (%u vectors): %s (failure %llu)\n",
				v->id, on ? "enable" : "disable", n, strerror(-r),
				(unsigned long long)v->irq_errors);
		return;
	}
	v->msix_on = on;
}

/* The guest enabled nvec MSI vectors, or none (d->lock held): VFIO signals the platform's
 * vector eventfds as for MSI-X. */
static void vfio_msi_enable(struct pci_dev *d, unsigned nvec)
{
	struct vfio_pci *v = (struct vfio_pci *)d;
	int r;

	if (nvec > v->info->irqs[VFIO_MSI_IRQ_INDEX].count)
		nvec = v->info->irqs[VFIO_MSI_IRQ_INDEX].count;
	if (nvec == v->msi_on)
		return;
	if (nvec)
		vfio_pci_intx_off(v); /* one interrupt type at a time; back when MSI is off */
	/* VFIO takes a new vector count only from off */
	if (v->msi_on && nvec)
		v->ops->irq_set(v->o, VFIO_MSI_IRQ_INDEX, 0, 0, NULL);
	r = v->ops->irq_set(v->o, VFIO_MSI_IRQ_INDEX, 0, nvec, nvec ? d->msi.efd : NULL);
	if (r) {
		if (pci_log_due(&v->irq_errors))
			fprintf(stderr, "lvmm: device %s: MSI %u vectors: %s (failure %llu)\n",
				v->id, nvec, strerror(-r), (unsigned long long)v->irq_errors);
		v->msi_on = 0;
		return;
	}
	v->msi_on = nvec;
}

int vfio_pci_init(struct vfio_pci *v, const char *id, const struct vfio_device *info,
		  const struct vfio_pci_ops *ops, void *o, const struct dev_host *h, char *err,
		  unsigned errlen)
{
	int r;

	memset(v, 0, sizeof(*v));
	v->intx_trigger = v->intx_unmask = v->intx_stop = -1;
	snprintf(v->id, sizeof(v->id), "%s", id);
	v->ops = ops;
	v->o = o;
	v->info = info;
	if (h) {
		v->map_host = h->map_host;
		v->unmap_host = h->unmap_host;
		v->host_opaque = h->opaque;
		v->io_thread = h->io_thread;
	}
	for (unsigned i = 0; i < PCI_BAR_SLOTS; i++)
		v->bar[i] = (struct vfio_pci_bar){.owner = v, .idx = i, .gpa = ~0ULL};
	/* What the host or a previous VM left in the device goes first. */
	r = ops->reset(o);
	if (r && r != -ENOTTY)
		fprintf(stderr, "lvmm: device %s: reset: %s\n", id, strerror(-r));
	r = vfio_pci_cfg_build(v, &vfio_bar_ops, err, errlen);
	if (r) {
		pci_dev_exit(&v->pci);
		return r;
	}
	v->pci.msix_enable = vfio_msix_enable;
	v->pci.msi_enable = vfio_msi_enable;
	vfio_pci_intx_offer(v);
	for (unsigned i = 0; i < PCI_NUM_BARS; i++)
		if (v->pci.bar[i].size) {
			v->pci.bar[i].moved = bar_moved;
			bar_pieces(v, i);
		}
	return 0;
}

void vfio_pci_exit(struct vfio_pci *v)
{
	vfio_pci_intx_stop(v);
	pthread_mutex_lock(&v->pci.lock);
	if (v->msix_on && v->ops->irq_set(v->o, VFIO_MSIX_IRQ_INDEX, 0, 0, NULL) == 0)
		v->msix_on = false;
	if (v->msi_on && v->ops->irq_set(v->o, VFIO_MSI_IRQ_INDEX, 0, 0, NULL) == 0)
		v->msi_on = 0;
	pthread_mutex_unlock(&v->pci.lock);
	pci_dev_exit(&v->pci); /* BARs stop decoding: bar_moved(~0) took the pieces out */
	for (unsigned i = 0; i < PCI_NUM_BARS; i++)
		for (unsigned p = 0; p < v->bar[i].npieces; p++)
			if (v->bar[i].piece[p].host)
				v->ops->region_munmap(v->o, v->bar[i].piece[p].host,
						      v->bar[i].piece[p].size);
}
