/* The VM's VFIO container (devices/vfio's dev_host.vfio_container): one per VM, opened at its
 * first passed-through device, guest RAM DMA-mapped at IOVA = GPA once a group joined it,
 * closed with the VM's devices. */
#ifndef LVMM_VFIO_HOST_H
#define LVMM_VFIO_HOST_H

#include <pthread.h>
#include <stdbool.h>

#include "guest_mem.h"
#include "vfio/vfio.h"

struct vfio_host {
	pthread_mutex_t lock;
	const struct guest_mem *gm;
	struct vfio_container c;
	bool open;
	unsigned nmapped; /* RAM slots of gm mapped in c, in order */
};

void vfio_host_init(struct vfio_host *vh, const struct guest_mem *gm);
/* The container, opened at the first call; NULL with err (no /dev/vfio, no IOMMU ...).
 * LVMM_VFIO_NOIOMMU=1 (tests only: no isolation, DMA to host-physical addresses) takes the
 * no-IOMMU type when that is all the kernel has. */
struct vfio_container *vfio_host_container(struct vfio_host *vh, char *err, unsigned errlen);
/* Guest RAM at IOVA = GPA, once (a no-IOMMU container has no mappings). 0 or -errno with err. */
int vfio_host_dma_ready(struct vfio_host *vh, char *err, unsigned errlen);
/* Unmaps and closes (no device may be open in it any more). */
void vfio_host_close(struct vfio_host *vh);

#endif
