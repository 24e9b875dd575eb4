/* virtio-blk (virtio 1.x, 5.2) on the PCI transport: a raw image or block device served by an I/O
 * thread through io_uring, several request queues, flush, discard, write zeroes, read-only, the
 * serial (GET_ID). Its configuration is the device's own type: `lvmm run --disk` and the API's
 * vm.create "disks" / vm.add-disk fill it (vmm/config.c), cloud-hypervisor's DiskConfig names. */
#ifndef LVMM_VIRTIO_BLK_H
#define LVMM_VIRTIO_BLK_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "device.h"

#define VIRTIO_BLK_PATH_MAX	  4096
#define VIRTIO_BLK_QUEUE_SIZE	  128 /* cloud-hypervisor's default queue_size */
#define VIRTIO_BLK_MAX_QUEUES	  8
#define VIRTIO_BLK_MAX_QUEUE_SIZE 1024

struct virtio_blk_config {
	char id[64];			/* device id, default "disk<N>" */
	char path[VIRTIO_BLK_PATH_MAX]; /* raw image or block device */
	bool readonly;
	bool direct;	     /* O_DIRECT (buffers that are not 512-aligned go through the cache) */
	unsigned num_queues; /* 1..VIRTIO_BLK_MAX_QUEUES (0: 1) */
	unsigned queue_size; /* a power of two, 2..VIRTIO_BLK_MAX_QUEUE_SIZE (0: default) */
	char serial[21];     /* VIRTIO_BLK_T_GET_ID, 20 bytes at most; default the id */
	/* Set by the VMM from the VM's allowed_dir, never parsed: path is opened by a walk
	 * beneath it. NULL: no confinement. */
	const char *root;
};

/* The id a disk is known by: its own, or "disk<idx>". */
static inline void virtio_blk_id(const struct virtio_blk_config *c, unsigned idx, char *buf,
				 size_t len)
{
	if (c->id[0])
		snprintf(buf, len, "%s", c->id);
	else
		snprintf(buf, len, "disk%u", idx);
}

/* The model (device.h): created from a struct virtio_blk_config. */
extern const struct dev_model virtio_blk_model;

#endif
