/* LightIOV vendor-specific PCI capability (capability ID 0x09) of the vNVMe function: the LBA
 * window and DMA window a passthrough frontend must respect, and the data-path mode. */
#ifndef LIGHTIOV_VCAP_H
#define LIGHTIOV_VCAP_H

#include <stdint.h>

#define LIGHTIOV_VCAP_ID      0x09	  /* PCI_CAP_ID_VNDR */
#define LIGHTIOV_VCAP_MAGIC   0x4c494f56u /* "LIOV" */
#define LIGHTIOV_VCAP_VERSION 1

enum lightiov_vcap_mode {
	LIGHTIOV_MODE_EMULATE = 0,     /* stock driver, lvmm emulates everything: window fields 0 */
	LIGHTIOV_MODE_PASSTHROUGH = 1, /* frontend adds lba_start, queues live in the CMB */
	LIGHTIOV_MODE_ISOLATED = 2,    /* host checks every SQE */
};

struct lightiov_vcap {
	uint8_t cap_id;	  /* LIGHTIOV_VCAP_ID */
	uint8_t cap_next; /* next capability pointer */
	uint8_t cap_len;  /* sizeof(struct lightiov_vcap) */
	uint8_t version;  /* LIGHTIOV_VCAP_VERSION */
	uint32_t magic;	  /* LIGHTIOV_VCAP_MAGIC */
	uint32_t mode;	  /* enum lightiov_vcap_mode */
	uint32_t rsvd;
	uint64_t lba_start; /* first LBA of this VM's window on the backing device */
	uint64_t lba_size;  /* LBAs in the window */
	uint64_t dma_base;  /* guest-physical DMA window the backend accepts */
	uint64_t dma_size;
} __attribute__((packed));
_Static_assert(sizeof(struct lightiov_vcap) == 48, "LightIOV vendor capability is 48 bytes");
_Static_assert(__builtin_offsetof(struct lightiov_vcap, lba_start) == 16, "lba_start offset");

#endif
