/* virtio over PCI, the modern (1.x) transport only: vendor capabilities pointing into one
 * memory BAR (common config, notify, ISR, device config), MSI-X in a second BAR, split
 * virtqueues (virtqueue.h). Every virtio device (rng now; blk, net, vsock, fs later) embeds
 * a struct virtio_pci and supplies struct virtio_dev_ops. */
#ifndef LVMM_VIRTIO_PCI_H
#define LVMM_VIRTIO_PCI_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "guest_mem.h"
#include "pci.h"
#include "virtqueue.h"

#define VIRTIO_PCI_VENDOR      0x1af4
#define VIRTIO_PCI_DEVICE_BASE 0x1040 /* + virtio device id: a modern-only device */
#define VIRTIO_PCI_MAX_QUEUES  8u
#define VIRTIO_NO_VECTOR       0xffff

#define VIRTIO_ID_RNG 4
#define VIRTIO_ID_FS  26

#define VIRTIO_F_VERSION_1 32

#define VIRTIO_STATUS_ACKNOWLEDGE 1
#define VIRTIO_STATUS_DRIVER	  2
#define VIRTIO_STATUS_DRIVER_OK	  4
#define VIRTIO_STATUS_FEATURES_OK 8
#define VIRTIO_STATUS_NEEDS_RESET 0x40
#define VIRTIO_STATUS_FAILED	  0x80

/* BAR 0 (64-bit memory, 16 KiB): the four regions the capabilities name */
#define VIRTIO_PCI_BAR	       0u
#define VIRTIO_PCI_BAR_SIZE    0x4000
#define VIRTIO_PCI_COMMON_OFF  0x0000
#define VIRTIO_PCI_COMMON_LEN  0x38
#define VIRTIO_PCI_ISR_OFF     0x1000
#define VIRTIO_PCI_DEVCFG_OFF  0x2000
#define VIRTIO_PCI_DEVCFG_LEN  0x1000
#define VIRTIO_PCI_NOTIFY_OFF  0x3000
#define VIRTIO_PCI_NOTIFY_MULT 4 /* queue q is kicked at NOTIFY_OFF + 4 * q */
#define VIRTIO_PCI_MSIX_BAR    2

/* virtio_pci_cap.cfg_type */
#define VIRTIO_PCI_CAP_COMMON_CFG 1
#define VIRTIO_PCI_CAP_NOTIFY_CFG 2
#define VIRTIO_PCI_CAP_ISR_CFG	  3
#define VIRTIO_PCI_CAP_DEVICE_CFG 4

/* common configuration structure offsets (virtio 1.x, 4.1.4.3) */
#define VIRTIO_PCI_DFSELECT    0x00
#define VIRTIO_PCI_DF	       0x04
#define VIRTIO_PCI_GFSELECT    0x08
#define VIRTIO_PCI_GF	       0x0c
#define VIRTIO_PCI_MSIX_CONFIG 0x10
#define VIRTIO_PCI_NUM_QUEUES  0x12
#define VIRTIO_PCI_STATUS      0x14
#define VIRTIO_PCI_CFG_GEN     0x15
#define VIRTIO_PCI_Q_SELECT    0x16
#define VIRTIO_PCI_Q_SIZE      0x18
#define VIRTIO_PCI_Q_MSIX      0x1a
#define VIRTIO_PCI_Q_ENABLE    0x1c
#define VIRTIO_PCI_Q_NOFF      0x1e
#define VIRTIO_PCI_Q_DESC      0x20
#define VIRTIO_PCI_Q_DRIVER    0x28
#define VIRTIO_PCI_Q_DEVICE    0x30

struct virtio_pci;

struct virtio_dev_ops {
	/* Queue q was kicked (vCPU thread, vp->lock held). */
	void (*notify)(struct virtio_pci *vp, unsigned q);
	/* The driver reset the device (vp->lock held); queues are already reset. */
	void (*reset)(struct virtio_pci *vp);
	/* Device-specific configuration space; NULL reads as zeros, ignores writes. */
	void (*cfg_read)(struct virtio_pci *vp, uint64_t off, void *data, unsigned len);
	void (*cfg_write)(struct virtio_pci *vp, uint64_t off, const void *data, unsigned len);
	/* Optional: the driver wrote a non-zero status (vp->lock held); old is what it was. A
	 * device whose queues another process serves (vhost-user) starts them at DRIVER_OK. */
	void (*status)(struct virtio_pci *vp, uint8_t old);
	/* Optional: queue q's MSI-X vector changed (vp->lock held). */
	void (*vector)(struct virtio_pci *vp, unsigned q);
};

struct virtio_pci_queue {
	uint16_t max_size, size, msix_vector;
	bool enabled;
	uint64_t desc, driver, device;
	struct virtq vq;
};

/* KVM ioeventfd registration (dev_host's): a guest write of len bytes at gpa signals fd. */
typedef int (*virtio_ioeventfd_fn)(void *opaque, uint64_t gpa, unsigned len, int fd, bool assign);

struct virtio_pci {
	struct pci_dev pci;
	const struct guest_mem *gm;
	const struct virtio_dev_ops *ops;
	void *opaque;
	pthread_mutex_t lock;
	uint16_t device_id;
	uint64_t features, driver_features;
	uint32_t dfselect, gfselect;
	uint16_t msix_config, queue_select;
	uint8_t status, isr, generation;
	unsigned nqueues;
	struct virtio_pci_queue q[VIRTIO_PCI_MAX_QUEUES];
	uint64_t kicks, interrupts, ring_errors; /* counters */
	/* kicks by eventfd (virtio_pci_kick_eventfds), -1 while the ops->notify path is used */
	int kick_fd[VIRTIO_PCI_MAX_QUEUES];
	virtio_ioeventfd_fn ioeventfd;
	void *ioeventfd_opaque;
	uint64_t notify_at; /* BAR 0 while its notify ioeventfds are registered, else ~0 */
	pthread_mutex_t bar_lock;
};

/* Sets up the PCI function (IDs, capabilities, BAR 0, MSI-X with nqueues + 1 vectors in BAR 2);
 * the caller then places it with pci_bus_add(). features: the device's own bits;
 * VERSION_1, EVENT_IDX and INDIRECT_DESC are added. 0 or a negative errno with err set. */
int virtio_pci_init(struct virtio_pci *vp, const char *name, uint16_t device_id,
		    uint32_t class_code, uint64_t features, unsigned nqueues, uint16_t queue_max,
		    const struct virtio_dev_ops *ops, void *opaque, const struct guest_mem *gm,
		    char *err, unsigned errlen);
void virtio_pci_exit(struct virtio_pci *vp);

/* For a device with an I/O thread: queue q's kicks signal kick_fd[q] (non-blocking eventfds the
 * transport makes) instead of calling ops->notify on the vCPU. With ioeventfd (may be NULL) they
 * are KVM ioeventfds at the notify addresses (2-byte writes, Linux's), following BAR 0, so a
 * kick costs no exit; a kick of another size exits and the vCPU signals the same eventfd. The
 * thread checks DRIVER_OK and NEEDS_RESET itself. 0 or a negative errno with err set; the fds
 * close in virtio_pci_exit(). */
int virtio_pci_kick_eventfds(struct virtio_pci *vp, virtio_ioeventfd_fn ioeventfd, void *opaque,
			     char *err, unsigned errlen);
/* Reads and clears an eventfd (a kick or a stop); true when it had been signalled. */
bool virtio_eventfd_take(int fd);
void virtio_eventfd_signal(int fd);

/* After pushes to queue q (vp->lock held): interrupts the driver if it asked for one. */
void virtio_pci_queue_interrupt(struct virtio_pci *vp, unsigned q);
/* The device's configuration changed (vp->lock held): a new generation, ISR bit 1, the
 * configuration vector. */
void virtio_pci_config_interrupt(struct virtio_pci *vp);

/* The driver broke a ring (vp->lock held): DEVICE_NEEDS_RESET and a configuration interrupt;
 * the message is logged once per device reset. */
void virtio_pci_ring_error(struct virtio_pci *vp, unsigned q, const char *msg);

/* Snapshots of the transport with its PCI function (pci.h): device status, features, MSI-X
 * vectors, each queue's addresses, size, enable and ring indices. Save with the vCPUs stopped
 * and the device idle (vm.pause); restore into the same device freshly created, before the
 * guest runs. The bytes are untrusted: every field is checked as a guest write would be, an
 * enabled queue's rings against guest memory. 0, or -EINVAL with a message. */
size_t virtio_pci_state_size(const struct virtio_pci *vp);
void virtio_pci_save(struct virtio_pci *vp, void *buf);
int virtio_pci_restore(struct virtio_pci *vp, const void *buf, size_t len, char *err,
		       unsigned errlen);

/* BAR 0 accesses, exported for tests (what the MMIO bus calls). */
void virtio_pci_bar_read(void *opaque, uint64_t off, void *data, unsigned len);
void virtio_pci_bar_write(void *opaque, uint64_t off, const void *data, unsigned len);

#endif
