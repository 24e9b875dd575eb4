/* libFuzzer target for the vNVMe controller's snapshot state parser (nvme_snap.c): state bytes
 * from a file are restored into a fresh controller, which then runs. The input is either raw
 * state (first byte even) or edits to a valid state saved at start-up (first byte odd: pairs of
 * a 16-bit offset and a byte XORed there), so that inputs reach past the first checks. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nvme-lightiov/nvme_ctrl.h"

#define RAM_SIZE  (1u << 20)
#define DISK_SIZE (256u << 10)
#define ASQ_GPA	  0x1000
#define ACQ_GPA	  0x2000
#define IOSQ_GPA  0x3000
#define IOCQ_GPA  0x4000
#define DBS_GPA	  0x5000
#define EIS_GPA	  0x6000
#define QS	  16

static uint8_t *ram;
static struct guest_mem gm;
static struct nvme_mem_backend disk;
static uint8_t *good;
static size_t good_len;

static void fz_irq(void *opaque, unsigned vector)
{
	(void)opaque;
	(void)vector;
}

static struct nvme_ctrl *fz_ctrl(void)
{
	struct nvme_ctrl_params p = {.mqes = 63,
				     .dstrd = 0,
				     .max_ioqs = 4,
				     .nvectors = 4,
				     .cmb_size = 8192,
				     .size = DISK_SIZE,
				     .serial = "FUZZSNAP"};
	struct nvme_ctrl_hooks h = {.irq = fz_irq};
	struct nvme_ctrl *c = NULL;
	char err[256];

	if (nvme_ctrl_create(&p, &gm, &nvme_mem_backend_ops, &disk, &h, &c, err, sizeof(err)))
		abort();
	return c;
}

static void w32(struct nvme_ctrl *c, uint64_t off, uint32_t v)
{
	nvme_ctrl_bar0_write(c, off, &v, 4);
}

static void admin_cmd(struct nvme_ctrl *c, unsigned *tail, uint8_t op, uint32_t cdw10,
		      uint32_t cdw11, uint64_t prp1, uint64_t prp2)
{
	struct nvme_sqe s;

	memset(&s, 0, sizeof(s));
	s.opcode = op;
	s.cid = (uint16_t)(100 + *tail);
	s.cdw10 = cdw10;
	s.cdw11 = cdw11;
	s.prp1 = prp1;
	s.prp2 = prp2;
	memcpy(ram + ASQ_GPA + *tail * 64, &s, 64);
	*tail = (*tail + 1) % QS;
	w32(c, 0x1000, *tail);
}

/* A controller with an I/O queue pair, shadow doorbells and a waiting Async Event Request. */
static void make_good(void)
{
	struct nvme_ctrl *c = fz_ctrl();
	unsigned tail = 0;
	char err[256];
	uint64_t v;

	w32(c, NVME_REG_AQA, (QS - 1) << 16 | (QS - 1));
	v = ASQ_GPA;
	nvme_ctrl_bar0_write(c, NVME_REG_ASQ, &v, 8);
	v = ACQ_GPA;
	nvme_ctrl_bar0_write(c, NVME_REG_ACQ, &v, 8);
	w32(c, NVME_REG_CC, NVME_CC_EN | 6 << 16 | 4 << 20);
	admin_cmd(c, &tail, NVME_ADMIN_CREATE_CQ, (QS - 1) << 16 | 1, 1 << 16 | 3, IOCQ_GPA, 0);
	admin_cmd(c, &tail, NVME_ADMIN_CREATE_SQ, (QS - 1) << 16 | 1, 1 << 16 | 1, IOSQ_GPA, 0);
	admin_cmd(c, &tail, NVME_ADMIN_DBBUF, 0, 0, DBS_GPA, EIS_GPA);
	admin_cmd(c, &tail, NVME_ADMIN_ASYNC_EVENT, 0, 0, 0, 0);
	nvme_ctrl_pause(c);
	good_len = nvme_ctrl_state_size(c, err, sizeof(err));
	good = malloc(good_len ? good_len : 1);
	if (!good_len || nvme_ctrl_save(c, good, good_len, err, sizeof(err)))
		abort();
	nvme_ctrl_destroy(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct nvme_ctrl *c;
	uint8_t *st;
	size_t len;
	char err[256];

	if (!ram) {
		ram = calloc(1, RAM_SIZE);
		disk.data = calloc(1, DISK_SIZE);
		disk.size = DISK_SIZE;
		gmem_init_buffer(&gm, ram, RAM_SIZE);
		make_good();
	}
	if (!size)
		return 0;
	if (data[0] & 1) {
		len = good_len;
		st = malloc(len);
		memcpy(st, good, len);
		for (size_t i = 1; i + 2 < size; i += 3)
			st[((size_t)data[i] | (size_t)data[i + 1] << 8) % len] ^= data[i + 2];
	} else {
		len = size - 1;
		st = malloc(len ? len : 1);
		memcpy(st, data + 1, len);
	}
	c = fz_ctrl();
	if (!nvme_ctrl_restore(c, st, len, err, sizeof(err))) {
		/* what was accepted must run: doorbells, commands from whatever RAM holds */
		nvme_ctrl_resume(c);
		w32(c, 0x1000, 1);
		w32(c, 0x1000 + 8, 2);
		w32(c, 0x1000 + 12, 1);
		w32(c, 0x1000 + 4, 1);
		nvme_ctrl_process(c);
		nvme_ctrl_pause(c);
		len = nvme_ctrl_state_size(c, err, sizeof(err));
		if (len) {
			uint8_t *again = malloc(len);

			if (nvme_ctrl_save(c, again, len, err, sizeof(err)))
				abort();
			free(again);
		}
	}
	nvme_ctrl_destroy(c);
	free(st);
	return 0;
}
