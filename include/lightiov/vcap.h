/* LightIOV vendor-specific PCI capability (capability ID 0x09) of the vNVMe function: the LBA
 * window and DMA window a passthrough frontend must respect, and the data-path mode. */
#ifndef LIGHTIOV_VCAP_H
#define LIGHTIOV_VCAP_H

#ifdef __KERNEL__
#include <linux/types.h>
#else
#include <stdint.h>
#endif

#define LIGHTIOV_VCAP_ID      0x09	  /* PCI_CAP_ID_VNDR */
#define LIGHTIOV_VCAP_MAGIC   0x4c494f56u /* "LIOV" */
#define LIGHTIOV_VCAP_VERSION 1

/* The data-path mode, one enum for the guest (this capability) and the backend ABI (uapi.h's
 * queue pairs, which take PASSTHROUGH and ISOLATED). */
enum lightiov_vcap_mode {
	LIGHTIOV_MODE_EMULATE = 0, /* stock driver, lvmm emulates everything: window fields 0 */
	/* frontend adds lba_start, queues live in the CMB; a backend takes SQEs as written */
	LIGHTIOV_MODE_PASSTHROUGH = 1,
	/* host checks every SQE: copied out of guest reach, checked, lba_start added */
	LIGHTIOV_MODE_ISOLATED = 2,
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
/* C, the kernel, and C++ (gpu-fs is CUDA C++, and reaches this header through uapi.h) */
#ifdef __cplusplus
#define LIGHTIOV_VCAP_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define LIGHTIOV_VCAP_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif
LIGHTIOV_VCAP_ASSERT(sizeof(struct lightiov_vcap) == 48, "LightIOV vendor capability is 48 bytes");
LIGHTIOV_VCAP_ASSERT(__builtin_offsetof(struct lightiov_vcap, lba_start) == 16, "lba_start offset");

#endif
