/* virtio-vsock (virtio 1.x, 5.10) with the hybrid host side cloud-hypervisor and Firecracker
 * implement over a Unix socket: a host program connects to PATH and writes "CONNECT <port>\n"
 * to reach the guest's port, and is answered "OK <host port>\n"; a guest connection to the
 * host (CID 2) port P reaches the program listening at "PATH_P". Kata's agent protocol runs on
 * it. Configuration: `lvmm run --vsock cid=N,socket=PATH`, the API's vm.create "vsock" and
 * vm.add-vsock (cloud-hypervisor's VsockConfig). */
#ifndef LVMM_VIRTIO_VSOCK_H
#define LVMM_VIRTIO_VSOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "device.h"

#define VIRTIO_VSOCK_PATH_MAX		   108 /* sun_path, with "_<port>" appended for guest connections */
#define VIRTIO_VSOCK_HOST_CID		   2
#define VIRTIO_VSOCK_MIN_CID		   3 /* 0-2 are reserved, -1 is "any" */
#define VIRTIO_VSOCK_EVENT_TRANSPORT_RESET 0 /* struct virtio_vsock_event's id (5.10.6.7) */

struct virtio_vsock_config {
	char id[64];			    /* device id, default "vsock0" */
	uint64_t cid;			    /* the guest's context id, 3..2^32-2 */
	char socket[VIRTIO_VSOCK_PATH_MAX]; /* the host side's Unix socket */
	/* Set by `lvmm run --jail` only (never from a client): listen_fd was listened on at socket
	 * before the jail and stays open for the VM's life; each device (a reboot makes a new
	 * one) uses a duplicate and leaves the path to the jail's outer process to remove. */
	bool has_listen_fd;
	int listen_fd;
	/* listen_fd was handed over by a migration's source (a socket bound at socket): the config
	 * owns it (config_fds_close). PATH is never removed for it: that the socket at PATH is
	 * the one handed over cannot be proven (the source bound the name in its own view of
	 * the file system), and a stale socket there is replaced by the next VM listening */
	bool listen_owned;
};

static inline void virtio_vsock_id(const struct virtio_vsock_config *c, char *buf, size_t len)
{
	snprintf(buf, len, "%s", c->id[0] ? c->id : "vsock0");
}

/* The model (device.h): created from a struct virtio_vsock_config. Its thread runs under
 * dev_host.sock_thread (it accepts, connects and shuts down Unix sockets). A migration hands
 * its listening socket over (hand_fds, take_fd: the destination checks it is a listening
 * socket bound at the config's path); release leaves PATH to the destination. */
extern const struct dev_model virtio_vsock_model;

/* A listening socket at path (SOCK_NONBLOCK, close-on-exec): a stale socket there (nobody
 * accepts on it) is replaced; a live one (another VM's) or any other file is refused. The fd,
 * or -errno with a message naming the device (name) in err. */
int virtio_vsock_listen(const char *path, const char *name, char *err, unsigned errlen);

/* One packet from the guest (header and payload, as the tx queue carries them) through the
 * device's parser as if the guest had queued it: the packet fuzz target's entry. */
void virtio_vsock_tx_packet(void *dev, const uint8_t *pkt, size_t len);

/* Whether a restored device still owes the guest its transport reset event (no event buffer
 * taken yet): for tests. */
bool virtio_vsock_reset_owed(void *dev);

#endif
