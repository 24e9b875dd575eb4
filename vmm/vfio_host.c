/* The VM's VFIO container (vfio_host.h): opened lazily so that a VM without passed-through
 * devices never touches /dev/vfio, guest RAM mapped once for every device in it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vfio_host.h"

void vfio_host_init(struct vfio_host *vh, const struct guest_mem *gm)
{
	memset(vh, 0, sizeof(*vh));
	pthread_mutex_init(&vh->lock, NULL);
	vh->gm = gm;
	vh->c.fd = -1;
}

static bool vfio_host_noiommu_allowed(void)
{
	const char *e = getenv("LVMM_VFIO_NOIOMMU");

	return e && !strcmp(e, "1");
}

struct vfio_container *vfio_host_container(struct vfio_host *vh, char *err, unsigned errlen)
{
	struct vfio_container *c = NULL;

	pthread_mutex_lock(&vh->lock);
	if (!vh->open && !vfio_container_open(&vh->c, vfio_host_noiommu_allowed(), err, errlen))
		vh->open = true;
	if (vh->open)
		c = &vh->c;
	pthread_mutex_unlock(&vh->lock);
	return c;
}

int vfio_host_dma_ready(struct vfio_host *vh, char *err, unsigned errlen)
{
	int r = 0;

	pthread_mutex_lock(&vh->lock);
	if (!vh->open) {
		snprintf(err, errlen, "vfio: no container");
		r = -ENODEV;
	} else if (vh->c.backend == VFIO_BACKEND_NOIOMMU) {
		vh->nmapped = vh->gm->nslots; /* nothing to map: the device sees host addresses */
	}
	while (!r && vh->nmapped < vh->gm->nslots) {
		const struct gmem_slot *s = &vh->gm->slots[vh->nmapped];

		r = vfio_dma_map(&vh->c, s->gpa, s->size, s->host, true, err, errlen);
		if (!r)
			vh->nmapped++;
	}
	pthread_mutex_unlock(&vh->lock);
	return r;
}

void vfio_host_close(struct vfio_host *vh)
{
	pthread_mutex_lock(&vh->lock);
	if (vh->open) {
		if (vh->c.backend != VFIO_BACKEND_NOIOMMU)
			for (unsigned i = 0; i < vh->nmapped; i++)
				vfio_dma_unmap(&vh->c, vh->gm->slots[i].gpa, vh->gm->slots[i].size);
		vfio_container_close(&vh->c);
	}
	vh->open = false;
	vh->nmapped = 0;
	pthread_mutex_unlock(&vh->lock);
}
