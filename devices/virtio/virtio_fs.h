/* virtio-fs (virtio 1.x, 5.11) whose queues an external vhost-user back end serves (virtiofsd):
 * lvmm owns the PCI function, the configuration (tag, request queues) and the connection;
 * the back end reads and writes guest RAM and is kicked and interrupts through KVM eventfds.
 * Configuration: `lvmm run --fs tag=T,socket=PATH`, the API's vm.create "fs" and vm.add-fs
 * (cloud-hypervisor's FsConfig). */
#ifndef LVMM_VIRTIO_FS_H
#define LVMM_VIRTIO_FS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "device.h"

#define VIRTIO_FS_TAG_MAX    36	 /* the configuration's tag field, not NUL-terminated */
#define VIRTIO_FS_PATH_MAX   108 /* sun_path */
#define VIRTIO_FS_MAX_QUEUES 7	 /* request queues; with hiprio the transport's 8 */
#define VIRTIO_FS_QUEUE_SIZE 1024u
#define VIRTIO_FS_QUEUE_MAX  32768u

struct virtio_fs_config {
	char id[64];			 /* device id, default "fs<N>" */
	char tag[VIRTIO_FS_TAG_MAX + 1]; /* what the guest mounts */
	char socket[VIRTIO_FS_PATH_MAX]; /* the back end's Unix socket */
	unsigned num_queues;		 /* request queues, 1..7 (0 reads as 1) */
	unsigned queue_size;		 /* a power of two, 2..32768 (0 reads as 1024) */
	/* Set by the VMM when it rebuilds the device at a reboot: a back end that cannot be
	 * reached then leaves the device failed (the guest's requests answered ENOTCONN) rather
	 * than failing the reboot. */
	bool rebuilt;
	/* Set by `lvmm run --jail` only (never from a client): the back end, connected before the
	 * jail (its socket is not reachable inside). The device's first creation takes fd over;
	 * a rebuilt one connects to socket, which inside a jail leaves the share unavailable. */
	bool has_fd;
	int fd;
};

static inline void virtio_fs_id(const struct virtio_fs_config *c, unsigned idx, char *buf,
				size_t len)
{
	if (c->id[0])
		snprintf(buf, len, "%s", c->id);
	else
		snprintf(buf, len, "fs%u", idx);
}

/* The model (device.h): created from a struct virtio_fs_config; connects to the back end at
 * once. Its watcher thread (back-end hangup, error eventfds, and the queues after a hangup)
 * runs under dev_host.io_thread. */
extern const struct dev_model virtio_fs_model;

#endif
