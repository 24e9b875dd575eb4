/* A guest's virtio driver for the unit tests of devices/virtio: BAR 0 accesses and split rings in
 * a buffer that stands for guest RAM, one device at a time (vdrv_attach). Queue q's descriptor
 * table, avail ring and used ring sit at VDRV_DESC(q), VDRV_AVAIL(q) and VDRV_USED(q), each with
 * VDRV_QSIZE entries; a test's buffers go at 0x20000 and above. */
#ifndef LVMM_TEST_VDRV_H
#define LVMM_TEST_VDRV_H

#include <stdbool.h>
#include <stdint.h>

#include "virtio/virtio_pci.h"

#define VDRV_QSIZE    16
#define VDRV_QMAX     8
#define VDRV_DESC(q)  (0x1000 + (q)*0x3000)
#define VDRV_AVAIL(q) (0x2000 + (q)*0x3000)
#define VDRV_USED(q)  (0x3000 + (q)*0x3000)

/* The device the next calls drive and the guest RAM its rings live in; clears the ring indexes. */
void vdrv_attach(struct virtio_pci *vp, uint8_t *ram);
/* Puts d on a PCI bus of the library's own (platform ops that route nothing): a restore
 * programs MSI-X routes and BARs through the bus. 0, or aborts the test. */
void vdrv_bus_add(struct pci_dev *d);
/* Another device takes over the same rings (a restored one): ring indexes kept. */
void vdrv_switch(struct virtio_pci *vp);
void vdrv_bar_w(uint64_t off, uint64_t v, unsigned len);
uint64_t vdrv_bar_r(uint64_t off, unsigned len);
/* Descriptor i of queue q. */
void vdrv_set_desc(unsigned q, unsigned i, uint64_t addr, uint32_t len, uint16_t flags,
		   uint16_t next);
/* Puts head on q's avail ring and rings q's doorbell. */
void vdrv_offer(unsigned q, uint16_t head);
/* Queue q: size VDRV_QSIZE, the rings above, enabled. */
void vdrv_queue_init(unsigned q);
/* Reset, ACKNOWLEDGE and DRIVER, the features (VERSION_1 added), FEATURES_OK, queues 0 to
 * nqueues - 1 set up, DRIVER_OK. */
void vdrv_start(uint64_t features, unsigned nqueues);
/* The device's used index of q. */
uint16_t vdrv_used_idx(unsigned q);
/* Waits up to 5 s for q's used index to reach want. */
bool vdrv_wait_used(unsigned q, uint16_t want);
/* The next used element of q not seen yet (waiting up to 5 s): its id and length. */
bool vdrv_used_next(unsigned q, uint32_t *id, uint32_t *len);
/* How many avail entries the driver has offered on q. */
uint16_t vdrv_avail_idx(unsigned q);

#endif
