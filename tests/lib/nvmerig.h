/* A vNVMe controller over the file backend for unit tests: guest RAM is a plain buffer, the test
 * plays the guest driver with register writes (admin queue, one I/O queue pair, polled
 * completions). Used by test_nvme_file and test_nvme_conform; one rig per test process. */
#ifndef LVMM_NVMERIG_H
#define LVMM_NVMERIG_H

#include <stdbool.h>
#include <stdint.h>

#include "nvme-lightiov/nvme_file.h"

#define RIG_RAM_SIZE (4u << 20)
#define ASQ_GPA	     0x10000
#define ACQ_GPA	     0x20000
#define IOCQ_GPA     0x30000
#define IOSQ_GPA     0x40000
#define DATA_GPA     0x100000 /* free guest RAM for data buffers and PRP lists */
#define QS	     16	      /* entries of every queue */

struct nvme_rig {
	char dir[64], path[128]; /* a temporary directory and the image in it */
	uint8_t *ram;
	struct guest_mem gm;
	struct nvme_file *nf; /* NULL when the controller is not over the file backend */
	struct nvme_ctrl *ctrl;
	uint32_t tails[2], heads[2]; /* admin queue, I/O queue 1 */
	uint8_t phases[2];
};

extern struct nvme_rig rig;

/* Check fixture: a fresh directory and zeroed RAM; teardown stops a controller over the file
 * backend (one over another backend is the test's to destroy). */
void rig_setup(void);
void rig_teardown(void);
/* The controller over rig.path (created at size bytes when missing), serial "SN42" padded as
 * Identify pads it, 2 I/O queues and 2 vectors at most. */
void rig_start(uint64_t size, bool ro);
/* Joins the file backend's I/O thread, then frees the controller. */
void rig_stop(void);
void rig_w32(uint64_t off, uint32_t v);
void rig_w64(uint64_t off, uint64_t v);
/* Submits c on queue q (0 admin, 1 I/O) and waits, bounded, for its completion: the status. */
uint16_t rig_cmd(unsigned q, struct nvme_sqe *c);
/* A zeroed command with opcode, command id and namespace set. */
struct nvme_sqe rig_mk(uint8_t op, uint16_t cid, uint32_t nsid);
/* CC.EN with the admin queue, then I/O CQ 1 (vector 1) and SQ 1. */
void rig_bring_up(void);

#endif
