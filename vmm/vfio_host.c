/* The VMM's VFIO side (vfio_host.h): the container opened lazily, so that a VM without
 * passed-through devices never touches /dev/vfio; guest RAM mapped once for every device in it;
 * what `lvmm run --jail` opened before the jail, kept for the process's life. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vfio_host.h"

/* Opened before the jail: one VM per `lvmm run` process. */
static struct {
	pthread_mutex_t lock;
	bool open;
	struct vfio_container c;
	struct vfio_host_dev devs[CONFIG_MAX_DEVICES];
} vfio_pre = {.lock = PTHREAD_MUTEX_INITIALIZER};

void vfio_host_init(struct vfio_host *vh, const struct guest_mem *gm)
{
	memset(vh, 0, sizeof(*vh));
	pthread_mutex_init(&vh->lock, NULL);
	vh->gm = gm;
	vh->own.fd = -1;
}

static bool vfio_host_noiommu_allowed(void)
{
	const char *e = getenv("LVMM_VFIO_NOIOMMU");

	return e && !strcmp(e, "1");
}

/* Guest RAM at IOVA = GPA in the container, once (a no-IOMMU container has no mappings).
 * vh->lock held. */
static int vfio_host_map_ram(struct vfio_host *vh, char *err, unsigned errlen)
{
	int r = 0;

	if (vh->c->backend == VFIO_BACKEND_NOIOMMU)
		return 0; /* the device sees host-physical addresses */
	while (!r && vh->nmapped < vh->gm->nslots) {
		const struct gmem_slot *s = &vh->gm->slots[vh->nmapped];

		r = vfio_dma_map(vh->c, s->gpa, s->size, s->host, true, err, errlen);
		if (!r)
			vh->nmapped++;
	}
	return r;
}

/* A device opened before the jail, bdf and free: taken. *busy: it is the guest's already. */
static struct vfio_device *vfio_host_take_pre(const char *bdf, bool *busy)
{
	struct vfio_device *d = NULL;

	*busy = false;
	pthread_mutex_lock(&vfio_pre.lock);
	for (unsigned i = 0; vfio_pre.open && !d && i < CONFIG_MAX_DEVICES; i++)
		if (vfio_pre.devs[i].open && !strcmp(vfio_pre.devs[i].bdf, bdf)) {
			*busy = vfio_pre.devs[i].in_use;
			if (*busy)
				break;
			vfio_pre.devs[i].in_use = true;
			d = &vfio_pre.devs[i].dev;
		}
	pthread_mutex_unlock(&vfio_pre.lock);
	return d;
}

struct vfio_device *vfio_host_open(struct vfio_host *vh, const char *bdf, char *err,
				   unsigned errlen)
{
	struct vfio_host_dev *slot = NULL;
	struct vfio_device *d;
	bool busy;
	int r = 0;

	d = vfio_host_take_pre(bdf, &busy);
	pthread_mutex_lock(&vh->lock);
	/* A second user of one function would reset it under the first. */
	for (unsigned i = 0; i < CONFIG_MAX_DEVICES && !d && !busy; i++)
		busy = vh->devs[i].open && !strcmp(vh->devs[i].bdf, bdf);
	if (d) {
		vh->c = &vfio_pre.c;
	} else if (busy) {
		snprintf(err, errlen, "%s is passed through to this VM already", bdf);
		r = -EBUSY;
	} else if (vfio_pre.open) {
		/* inside the jail nothing else can be opened */
		snprintf(err, errlen, "%s was not opened before the jail", bdf);
		r = -ENODEV;
	} else {
		for (unsigned i = 0; i < CONFIG_MAX_DEVICES && !slot; i++)
			if (!vh->devs[i].open)
				slot = &vh->devs[i];
		if (!slot) {
			snprintf(err, errlen, "%s: the VM has %u passed-through devices already",
				 bdf, CONFIG_MAX_DEVICES);
			r = -ENOSPC;
		}
		if (!r && !vh->c) {
			r = vfio_container_open(&vh->own, vfio_host_noiommu_allowed(), err, errlen);
			if (!r)
				vh->c = &vh->own;
		}
		if (!r)
			r = vfio_device_open(vh->c, bdf, &slot->dev, err, errlen);
		if (!r) {
			slot->open = true;
			snprintf(slot->bdf, sizeof(slot->bdf), "%s", bdf);
			d = &slot->dev;
		}
	}
	/* after the first group joined: a type-1 container takes mappings only then */
	if (!r)
		r = vfio_host_map_ram(vh, err, errlen);
	pthread_mutex_unlock(&vh->lock);
	if (r && d) {
		vfio_host_release(vh, d);
		d = NULL;
	}
	return d;
}

void vfio_host_release(struct vfio_host *vh, struct vfio_device *d)
{
	pthread_mutex_lock(&vfio_pre.lock);
	for (unsigned i = 0; i < CONFIG_MAX_DEVICES; i++)
		if (&vfio_pre.devs[i].dev == d) {
			vfio_pre.devs[i].in_use = false;
			d = NULL;
		}
	pthread_mutex_unlock(&vfio_pre.lock);
	pthread_mutex_lock(&vh->lock);
	for (unsigned i = 0; d && i < CONFIG_MAX_DEVICES; i++)
		if (&vh->devs[i].dev == d && vh->devs[i].open) {
			vfio_device_close(d);
			vh->devs[i].open = false;
		}
	/* the last group gone took the IOMMU type and its mappings: the next device maps again */
	if (vh->c == &vh->own && !vh->own.ngroups)
		vh->nmapped = 0;
	pthread_mutex_unlock(&vh->lock);
}

void vfio_host_close(struct vfio_host *vh)
{
	pthread_mutex_lock(&vh->lock);
	if (vh->c && vh->c->backend != VFIO_BACKEND_NOIOMMU)
		for (unsigned i = 0; i < vh->nmapped; i++)
			vfio_dma_unmap(vh->c, vh->gm->slots[i].gpa, vh->gm->slots[i].size);
	vh->nmapped = 0;
	if (vh->c == &vh->own)
		vfio_container_close(&vh->own);
	vh->c = NULL;
	pthread_mutex_unlock(&vh->lock);
}

int vfio_host_preopen(const struct vm_config *cfg, int *keep, unsigned *n, unsigned max, char *err,
		      unsigned errlen)
{
	char why[256], id[64];
	bool copen = false;
	int r = 0;

	if (!cfg->ndevices)
		return 0;
	pthread_mutex_lock(&vfio_pre.lock);
	if (vfio_pre.open) {
		pthread_mutex_unlock(&vfio_pre.lock);
		return -EALREADY;
	}
	r = vfio_container_open(&vfio_pre.c, vfio_host_noiommu_allowed(), why, sizeof(why));
	vfio_pci_id(&cfg->devices[0], 0, id, sizeof(id));
	if (r)
		snprintf(err, errlen, "device %s: %s", id, why);
	copen = !r;
	for (unsigned i = 0; !r && i < cfg->ndevices && i < CONFIG_MAX_DEVICES; i++) {
		struct vfio_host_dev *hd = &vfio_pre.devs[i];

		vfio_pci_id(&cfg->devices[i], i, id, sizeof(id));
		r = vfio_parse_bdf(cfg->devices[i].path, hd->bdf, sizeof(hd->bdf), why,
				   sizeof(why));
		if (!r)
			r = vfio_device_open(&vfio_pre.c, hd->bdf, &hd->dev, why, sizeof(why));
		if (r)
			snprintf(err, errlen, "device %s: %s", id, why);
		else
			hd->open = true;
	}
	if (!r) {
		/* the container, each group once, each device */
		unsigned need = 1 + VFIO_MAX_GROUPS + cfg->ndevices;

		if (*n + need > max) {
			snprintf(err, errlen,
				 "device: %u VFIO fds to keep in the jail, room for %u", need,
				 max - *n);
			r = -ENOSPC;
		}
	}
	if (!r) {
		keep[(*n)++] = vfio_pre.c.fd;
		for (unsigned g = 0; g < VFIO_MAX_GROUPS; g++) /* a free slot's fd is -1 */
			if (vfio_pre.c.groups[g].fd >= 0)
				keep[(*n)++] = vfio_pre.c.groups[g].fd;
		for (unsigned i = 0; i < CONFIG_MAX_DEVICES; i++)
			if (vfio_pre.devs[i].open)
				keep[(*n)++] = vfio_pre.devs[i].dev.fd;
		vfio_pre.open = true;
	} else {
		for (unsigned i = 0; i < CONFIG_MAX_DEVICES; i++)
			if (vfio_pre.devs[i].open)
				vfio_device_close(&vfio_pre.devs[i].dev);
		memset(vfio_pre.devs, 0, sizeof(vfio_pre.devs));
		if (copen)
			vfio_container_close(&vfio_pre.c);
	}
	pthread_mutex_unlock(&vfio_pre.lock);
	return r;
}
