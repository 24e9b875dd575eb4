/* virtio-net (virtio 1.x, 5.1) on a tap: the guest's frames with their virtio_net_hdr_v1 go to
 * and come from the tap as they are (IFF_VNET_HDR), so checksum and segmentation offloads pass
 * through both ways; mergeable receive buffers, multi-queue (a tap fd per queue pair) and the
 * control queue. Configuration: `lvmm run --net tap=NAME,...`, the API's vm.create "net" and
 * vm.add-net (cloud-hypervisor's NetConfig; tap fds may come over the API socket). */
#ifndef LVMM_VIRTIO_NET_H
#define LVMM_VIRTIO_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "device.h"
#include "virtqueue.h"

#define VIRTIO_NET_MAX_PAIRS  3	 /* 2 * pairs + the control queue within the transport's 8 */
#define VIRTIO_NET_TAP_NAMESZ 16 /* IFNAMSIZ */
#define VIRTIO_NET_HDR_LEN    12 /* virtio_net_hdr_v1 (with num_buffers) */

struct virtio_net_config {
	char id[64];			 /* device id, default "net<N>" */
	char tap[VIRTIO_NET_TAP_NAMESZ]; /* tap to open (or create) when no fds are given */
	uint8_t mac[6];			 /* the guest's address; all zero: one is made up */
	unsigned num_queues;		 /* rx + tx queues (cloud-hypervisor's count), 2..6 */
	unsigned queue_size;		 /* a power of two, 2..1024 */
	unsigned mtu;			 /* 0: none offered (1500 in the guest) */
	bool no_csum, no_tso, no_ufo;	 /* offloads the guest is not offered (all on: 0) */
	uint32_t host_ip, host_mask;	 /* --net ip=,mask=: the tap's address (network order) */
	unsigned nfds;			 /* taps handed over, one per queue pair (or 0) */
	int fds[VIRTIO_NET_MAX_PAIRS];	 /* the device uses duplicates; the owner closes these */
	/* fds are tap's, handed over by a migration's source: the config that holds them owns
	 * them (config_fds_close; a VM keeps duplicates of its own) */
	bool fds_owned;
};

static inline void virtio_net_id(const struct virtio_net_config *c, unsigned idx, char *buf,
				 size_t len)
{
	if (c->id[0])
		snprintf(buf, len, "%s", c->id);
	else
		snprintf(buf, len, "net%u", idx);
}

/* Opens (creating it when absent) tap name with a vnet header, one fd per queue pair
 * (IFF_MULTI_QUEUE above one): fds[0..pairs). 0, or a negative errno with err set. For the
 * command line, before the jail and the seccomp filter. */
int virtio_net_tap_open(const char *name, unsigned pairs, int *fds, char *err, unsigned errlen);

/* Gives tap name the IPv4 address ip/mask (network order) and sets it up: what --net's ip= and
 * mask= do, from a process that may still make AF_INET sockets. 0 or a negative errno. */
int virtio_net_tap_addr(const char *name, uint32_t ip, uint32_t mask, char *err, unsigned errlen);

/* The model (device.h): created from a struct virtio_net_config. Its hand_fds gives a tap's
 * queues to a migration's destination, whose take_fd checks each is the tap the config names. */
extern const struct dev_model virtio_net_model;

/* A frame from the guest (header included) through the transmit checks as if queued on pair 0:
 * true when it would reach the tap. The fuzz target's entry. */
bool virtio_net_tx_check(void *dev, const uint8_t *frame, size_t len);
/* A chain as virtq_pop() hands it (readable segments first) through the transmit path of pair
 * 0, header copy, checks and the write to the fd included: the fuzz target's entry. */
void virtio_net_tx_chain(void *dev, const struct virtq_chain *c);
/* A control-queue command (class, command, data) as the guest would send it: the ack byte. */
uint8_t virtio_net_ctrl_cmd(void *dev, const uint8_t *cmd, size_t len);

#endif
