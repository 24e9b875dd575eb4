/* The NVMe command and completion layouts gpu-fs queues carry (NVM command set subset).
 * Own minimal copy: include/lightiov/nvme.h did not exist when gpu-fs was written. */
#ifndef GEMINI_NVME_H
#define GEMINI_NVME_H

#include <stdint.h>

#define GM_NVME_OP_FLUSH 0x00
#define GM_NVME_OP_WRITE 0x01
#define GM_NVME_OP_READ	 0x02

#define GM_NVME_PSDT_SGL	  (1u << 6) /* CDW0 bits 15:14 = 01: DPTR is an SGL descriptor */
#define GM_NVME_SGL_DATA_BLOCK	  0x00
#define GM_NVME_SC_SUCCESS	  0x0000
#define GM_NVME_SC_INVALID_OPCODE 0x0001
#define GM_NVME_SC_INVALID_FIELD  0x0002
#define GM_NVME_SC_DATA_XFER	  0x0004
#define GM_NVME_SC_INVALID_NS	  0x000b
#define GM_NVME_SC_LBA_RANGE	  0x0080
#define GM_NVME_SC_WRITE_FAULT	  0x0280
#define GM_NVME_SC_READ_ERROR	  0x0281

/* Submission queue entry (64 bytes). Data pointer: one SGL data block descriptor. */
struct gm_nvme_sqe {
	uint8_t opcode;
	uint8_t flags; /* FUSE 1:0, PSDT 7:6 */
	uint16_t cid;
	uint32_t nsid;
	uint32_t cdw2;
	uint32_t cdw3;
	uint64_t mptr;
	uint64_t sgl_addr; /* DPTR: SGL data block descriptor address */
	uint32_t sgl_len;  /* descriptor length in bytes */
	uint8_t sgl_rsvd[3];
	uint8_t sgl_type; /* descriptor type << 4 */
	uint64_t slba;	  /* CDW10-11 */
	uint16_t nlb;	  /* CDW12 15:0, zero based */
	uint16_t control; /* CDW12 31:16 */
	uint32_t cdw13;
	uint32_t cdw14;
	uint32_t cdw15;
};

/* Completion queue entry (16 bytes); bit 0 of status is the phase tag. */
struct gm_nvme_cqe {
	uint32_t result;
	uint32_t rsvd;
	uint16_t sq_head;
	uint16_t sq_id;
	uint16_t cid;
	uint16_t status;
};

#ifdef __cplusplus
static_assert(sizeof(struct gm_nvme_sqe) == 64, "NVMe SQE is 64 bytes");
static_assert(sizeof(struct gm_nvme_cqe) == 16, "NVMe CQE is 16 bytes");
#else
_Static_assert(sizeof(struct gm_nvme_sqe) == 64, "NVMe SQE is 64 bytes");
_Static_assert(sizeof(struct gm_nvme_cqe) == 16, "NVMe CQE is 16 bytes");
#endif

#endif
