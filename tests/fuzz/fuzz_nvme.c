/* libFuzzer target for the vNVMe controller model: arbitrary register and doorbell writes, admin
 * and I/O commands, PRP lists and queue memory, against a plain buffer as guest RAM. */
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
#define QS	  16

static uint8_t *ram, *disk_data;
static struct guest_mem gm;
static struct nvme_mem_backend disk;
static struct nvme_io_req *parked[64];
static unsigned nparked;
static bool park;

static int fz_submit(void *be, struct nvme_io_req *req)
{
	if (park && nparked < 64) {
		parked[nparked++] = req;
		return 0;
	}
	return nvme_mem_backend_ops.submit(be, req);
}

static const struct nvme_backend_ops fz_ops = {.submit = fz_submit};

static void fz_irq(void *opaque, unsigned vector)
{
	(void)opaque;
	(void)vector;
}

static void w32(struct nvme_ctrl *c, uint64_t off, uint32_t v)
{
	nvme_ctrl_bar0_write(c, off, &v, 4);
}

static void sqe_at(uint64_t gpa, unsigned idx, uint8_t op, uint32_t cdw10, uint32_t cdw11,
		   uint64_t prp1)
{
	struct nvme_sqe s;

	memset(&s, 0, sizeof(s));
	s.opcode = op;
	s.cid = (uint16_t)idx;
	s.cdw10 = cdw10;
	s.cdw11 = cdw11;
	s.prp1 = prp1;
	memcpy(ram + gpa + idx * 64, &s, 64);
}

/* Brings the controller to a state with one I/O queue pair so inputs start deep. */
static void bring_up(struct nvme_ctrl *c)
{
	uint64_t a = ASQ_GPA;

	w32(c, NVME_REG_AQA, (QS - 1) << 16 | (QS - 1));
	nvme_ctrl_bar0_write(c, NVME_REG_ASQ, &a, 8);
	a = ACQ_GPA;
	nvme_ctrl_bar0_write(c, NVME_REG_ACQ, &a, 8);
	w32(c, NVME_REG_CC, NVME_CC_EN | 6 << 16 | 4 << 20);
	sqe_at(ASQ_GPA, 0, NVME_ADMIN_CREATE_CQ, (QS - 1) << 16 | 1, 1 << 16 | 3, IOCQ_GPA);
	sqe_at(ASQ_GPA, 1, NVME_ADMIN_CREATE_SQ, (QS - 1) << 16 | 1, 1 << 16 | 1, IOSQ_GPA);
	w32(c, 0x1000, 2);
	w32(c, 0x1004, 2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct nvme_ctrl_params p = {.mqes = 63,
				     .max_ioqs = 3,
				     .nvectors = 4,
				     .size = DISK_SIZE,
				     .cmb_size = 8192,
				     .serial = "FUZZ"};
	struct nvme_ctrl_hooks h = {.irq = fz_irq};
	struct nvme_ctrl *c;
	char err[128];
	size_t i = 0;
	unsigned sqt[2] = {2, 0};

	if (!ram) {
		ram = calloc(1, RAM_SIZE);
		disk_data = calloc(1, DISK_SIZE);
		gmem_init_buffer(&gm, ram, RAM_SIZE);
	}
	memset(ram, 0, 0x10000);
	disk.data = disk_data;
	disk.size = DISK_SIZE;
	park = false;
	nparked = 0;
	if (nvme_ctrl_create(&p, &gm, &fz_ops, &disk, &h, &c, err, sizeof(err)))
		abort();
	nvme_ctrl_set_cmb_gpa(c, 0x80000);
	{
		/* SQs may go in the CMB (NVMe 1.4: its memory space enabled at the BAR) */
		uint64_t msc = NVME_CMBMSC_CRE | NVME_CMBMSC_CMSE | 0x80000;

		nvme_ctrl_bar0_write(c, NVME_REG_CMBMSC, &msc, 8);
	}
	bring_up(c);
	while (i + 2 <= size) {
		uint8_t op = data[i++] % 8;
		size_t left = size - i;

		switch (op) {
		case 0: /* register or doorbell write: u16 offset, u32 value */
			if (left >= 6) {
				uint16_t off;
				uint32_t v;

				memcpy(&off, data + i, 2);
				memcpy(&v, data + i + 2, 4);
				w32(c, off & 0x3ffc, v);
				i += 6;
			}
			break;
		case 1:	  /* admin command: 64 bytes into the next ASQ slot and ring */
		case 2: { /* I/O command on queue 1 */
			unsigned q = op - 1;
			uint64_t base = q ? IOSQ_GPA : ASQ_GPA;
			size_t n = left < 64 ? left : 64;

			memset(ram + base + sqt[q] * 64, 0, 64);
			memcpy(ram + base + sqt[q] * 64, data + i, n);
			i += n;
			sqt[q] = (sqt[q] + 1) % QS;
			w32(c, 0x1000 + 8 * q, sqt[q]);
			break;
		}
		case 3: /* guest memory contents (PRP lists, DSM ranges): u16 page-ish offset */
			if (left >= 10) {
				uint16_t off;

				memcpy(&off, data + i, 2);
				memcpy(ram + 0x8000 + (off & 0x7ff8), data + i + 2, 8);
				i += 10;
			}
			break;
		case 4: /* CQ head doorbell, then the coalescing timer (now, or long after) */
			w32(c, 0x1004, data[i] % QS);
			nvme_ctrl_irq_tick(c, data[i] & 0x80 ? UINT64_MAX : 0);
			i++;
			break;
		case 5: /* toggle asynchronous completion */
			park = data[i++] & 1;
			break;
		case 6: /* complete a parked request */
			if (nparked) {
				nvme_ctrl_io_done(parked[--nparked]);
			}
			i++;
			break;
		case 7: /* 64-bit and odd-sized register accesses */
			if (left >= 9) {
				uint64_t v;
				uint8_t buf[8];

				memcpy(&v, data + i + 1, 8);
				nvme_ctrl_bar0_write(c, data[i] & 0x3f, &v,
						     (data[i] >> 6) == 3 ? 8 : 4);
				nvme_ctrl_bar0_read(c, data[i] & 0x3f, buf, 8);
				i += 9;
			}
			break;
		}
		nvme_ctrl_process(c);
	}
	while (nparked)
		nvme_ctrl_io_done(parked[--nparked]);
	nvme_ctrl_destroy(c);
	return 0;
}
