/* The file-backed vNVMe test rig (nvmerig.h). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nvmerig.h"
#include "seccomp_filter.h"
#include "testutil.h"

struct nvme_rig rig;

static const uint64_t sq_gpa[2] = {ASQ_GPA, IOSQ_GPA}, cq_gpa[2] = {ACQ_GPA, IOCQ_GPA};

void rig_setup(void)
{
	memset(&rig, 0, sizeof(rig));
	testutil_mkdtemp(rig.dir, sizeof(rig.dir), "/tmp/lvmm-nvme-");
	snprintf(rig.path, sizeof(rig.path), "%s/disk.img", rig.dir);
	rig.ram = aligned_alloc(4096, RIG_RAM_SIZE);
	ck_assert_ptr_nonnull(rig.ram);
	memset(rig.ram, 0, RIG_RAM_SIZE);
	gmem_init_buffer(&rig.gm, rig.ram, RIG_RAM_SIZE);
	rig.phases[0] = rig.phases[1] = 1;
}

void rig_stop(void)
{
	nvme_file_close(rig.nf); /* joins the I/O thread before the controller goes */
	nvme_ctrl_destroy(rig.ctrl);
	rig.nf = NULL;
	rig.ctrl = NULL;
}

void rig_teardown(void)
{
	if (rig.nf)
		rig_stop();
	free(rig.ram);
	testutil_rmtree(rig.dir);
}

void rig_start(uint64_t size, bool ro)
{
	struct vnvme_config vc;
	struct nvme_ctrl_params p = {.dstrd = 0, .max_ioqs = 2, .nvectors = 2};
	struct nvme_ctrl_hooks h = {.kick = nvme_file_kick};
	char err[256];
	uint64_t sz;

	memset(&vc, 0, sizeof(vc));
	snprintf(vc.id, sizeof(vc.id), "nvme0");
	snprintf(vc.path, sizeof(vc.path), "%s", rig.path);
	vc.size = size;
	vc.readonly = ro;
	ck_assert_msg(nvme_file_open(&vc, &rig.nf, &sz, err, sizeof(err)) == 0, "%s", err);
	p.size = sz;
	p.readonly = ro;
	/* padded as the Identify SN field is: the NQN must not carry the spaces */
	snprintf(p.serial, sizeof(p.serial), "%-20s", "SN42");
	h.opaque = rig.nf;
	ck_assert_msg(nvme_ctrl_create(&p, &rig.gm, &nvme_file_ops, rig.nf, &h, &rig.ctrl, err,
				       sizeof(err)) == 0,
		      "%s", err);
	ck_assert_msg(
	    nvme_file_start(rig.nf, rig.ctrl, seccomp_io_thread_install, err, sizeof(err)) == 0,
	    "%s", err);
}

void rig_w32(uint64_t off, uint32_t v)
{
	nvme_ctrl_bar0_write(rig.ctrl, off, &v, 4);
}

void rig_w64(uint64_t off, uint64_t v)
{
	nvme_ctrl_bar0_write(rig.ctrl, off, &v, 8);
}

uint16_t rig_cmd(unsigned q, struct nvme_sqe *c)
{
	struct nvme_cqe *e = (struct nvme_cqe *)(rig.ram + cq_gpa[q]) + rig.heads[q];
	unsigned i;
	uint16_t st;

	memcpy(rig.ram + sq_gpa[q] + rig.tails[q] * 64, c, 64);
	rig.tails[q] = (rig.tails[q] + 1) % QS;
	rig_w32(0x1000 + 8 * q, rig.tails[q]);
	for (i = 0;
	     i < 10000 && (__atomic_load_n(&e->status, __ATOMIC_ACQUIRE) & 1) != rig.phases[q]; i++)
		usleep(1000);
	ck_assert_uint_eq(e->status & 1, rig.phases[q]);
	ck_assert_uint_eq(e->cid, c->cid);
	st = e->status >> 1;
	if (++rig.heads[q] == QS) {
		rig.heads[q] = 0;
		rig.phases[q] ^= 1;
	}
	rig_w32(0x1000 + 8 * q + 4, rig.heads[q]);
	return st;
}

struct nvme_sqe rig_mk(uint8_t op, uint16_t cid, uint32_t nsid)
{
	struct nvme_sqe c;

	memset(&c, 0, sizeof(c));
	c.opcode = op;
	c.cid = cid;
	c.nsid = nsid;
	return c;
}

void rig_bring_up(void)
{
	struct nvme_sqe c;

	rig_w32(NVME_REG_AQA, (QS - 1) << 16 | (QS - 1));
	rig_w64(NVME_REG_ASQ, ASQ_GPA);
	rig_w64(NVME_REG_ACQ, ACQ_GPA);
	rig_w32(NVME_REG_CC, NVME_CC_EN | 6 << 16 | 4 << 20);
	c = rig_mk(NVME_ADMIN_CREATE_CQ, 1, 0);
	c.prp1 = IOCQ_GPA;
	c.cdw10 = (QS - 1) << 16 | 1;
	c.cdw11 = 1 << 16 | 3;
	ck_assert_uint_eq(rig_cmd(0, &c), 0);
	c = rig_mk(NVME_ADMIN_CREATE_SQ, 2, 0);
	c.prp1 = IOSQ_GPA;
	c.cdw10 = (QS - 1) << 16 | 1;
	c.cdw11 = 1 << 16 | 1;
	ck_assert_uint_eq(rig_cmd(0, &c), 0);
}
