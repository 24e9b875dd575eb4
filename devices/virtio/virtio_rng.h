/* virtio-rng: one request queue filled from a host entropy source (cloud-hypervisor's rng.src),
 * on the virtio PCI transport (virtio_pci.h). */
#ifndef LVMM_VIRTIO_RNG_H
#define LVMM_VIRTIO_RNG_H

#include <stdint.h>

#include "device.h"

struct virtio_rng;

/* The model (device.h): created from the source's path (a const char *). */
extern const struct dev_model virtio_rng_model;

/* src: the kernel's random, urandom or hwrng character device only (fsutil's FSUTIL_ENTROPY). */
int virtio_rng_create(struct virtio_rng **out, const char *id, const char *src,
		      const struct guest_mem *gm, char *err, unsigned errlen);
struct pci_dev *virtio_rng_pci(struct virtio_rng *r);
uint64_t virtio_rng_bytes(const struct virtio_rng *r);
void virtio_rng_destroy(struct virtio_rng *r);

#endif
