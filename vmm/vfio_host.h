/* Passed-through functions' VFIO side in the VMM (devices/vfio's dev_host.vfio_open): one
 * container per VM, opened at its first device, guest RAM DMA-mapped in it at IOVA = GPA, and
 * the devices opened in it. `lvmm run --jail` opens the container and the --device functions
 * before the jail (their nodes are root's and outside it): the VM then takes those, and keeps
 * them across resets. */
#ifndef LVMM_VFIO_HOST_H
#define LVMM_VFIO_HOST_H

#include <pthread.h>
#include <stdbool.h>

#include "config.h"
#include "guest_mem.h"
#include "vfio/vfio.h"

struct vfio_host_dev {
	char bdf[32];
	struct vfio_device dev;
	bool open, in_use;
};

struct vfio_host {
	pthread_mutex_t lock;
	const struct guest_mem *gm;
	struct vfio_container own; /* when nothing was opened before a jail */
	struct vfio_container *c;  /* own, or the one opened before the jail */
	unsigned nmapped;	   /* RAM slots of gm mapped in c, in order */
	struct vfio_host_dev devs[CONFIG_MAX_DEVICES];
};

void vfio_host_init(struct vfio_host *vh, const struct guest_mem *gm);
/* Device bdf in the VM's container, guest RAM mapped there first: one opened before the jail
 * if there is one, else opened now. NULL with err (no /dev/vfio, no IOMMU, a group that is not
 * viable ...). LVMM_VFIO_NOIOMMU=1 (tests only: no isolation, DMA to host-physical addresses)
 * takes the no-IOMMU type when that is all the kernel has. */
struct vfio_device *vfio_host_open(struct vfio_host *vh, const char *bdf, char *err,
				   unsigned errlen);
/* Gives a device back: closed, or kept for the next VM build if opened before the jail. */
void vfio_host_release(struct vfio_host *vh, struct vfio_device *d);
/* Guest RAM unmapped and the container closed (unless opened before the jail); no device of
 * the VM may be open any more. */
void vfio_host_close(struct vfio_host *vh);

/* lvmm run --jail: the container and cfg's devices opened now, their fds appended to keep (at
 * most max of them): the jail keeps those. 0, or -errno with err naming the device. */
int vfio_host_preopen(const struct vm_config *cfg, int *keep, unsigned *n, unsigned max, char *err,
		      unsigned errlen);

#endif
