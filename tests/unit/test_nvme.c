/* Device-model tests of the vNVMe controller: register writes drive it, a plain buffer is guest
 * memory, a buffer (or a parked fake) is the backend. No KVM. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvme-lightiov/nvme_ctrl.h"
#include "testutil.h"

#define RAM_SIZE  (8u << 20)
#define DISK_SIZE (4u << 20)
#define ASQ_GPA	  0x10000
#define ACQ_GPA	  0x20000
#define IOCQ_GPA  0x30000
#define IOSQ_GPA  0x40000
#define DATA_GPA  0x100000
#define DATA2_GPA 0x200000
#define LIST_GPA  0x300000
#define DBS_GPA	  0x50000
#define EIS_GPA	  0x51000
#define AQ_SIZE	  16
#define IOQ_SIZE  32
#define STRIDE	  (4u << 2) /* dstrd 2 in these tests */
#define CMB_GPA	  0x8000000000ULL

static uint8_t *ram;
static struct guest_mem gm;
static struct nvme_mem_backend disk;
static struct nvme_ctrl *ctrl;
static unsigned irqs[8], last_vector;
static uint32_t asq_tail, acq_head, iosq_tail, iocq_head;
static uint8_t acq_phase, iocq_phase;

/* A backend that parks requests until the test releases them (reset mid-I/O). */
static struct nvme_io_req *parked[64];
static unsigned nparked;
static bool park;
static uint16_t aer_cid;
static uint32_t *shadow_dbs; /* set once Doorbell Buffer Config is done: the driver keeps it */

static int test_submit(void *be, struct nvme_io_req *req)
{
	if (park) {
		parked[nparked++] = req;
		return 0;
	}
	return nvme_mem_backend_ops.submit(be, req);
}

static const struct nvme_backend_ops test_ops = {.submit = test_submit};

static void on_irq(void *opaque, unsigned vector)
{
	(void)opaque;
	last_vector = vector;
	if (vector < 8)
		irqs[vector]++;
}

static bool intx_level;
static unsigned intx_changes;

static void on_intx(void *opaque, bool level)
{
	(void)opaque;
	ck_assert_msg(level != intx_level, "the pin told its own level");
	intx_level = level;
	intx_changes++;
}

static void w32(uint64_t off, uint32_t v)
{
	nvme_ctrl_bar0_write(ctrl, off, &v, 4);
}

static void w64(uint64_t off, uint64_t v)
{
	nvme_ctrl_bar0_write(ctrl, off, &v, 8);
}

static uint32_t r32(uint64_t off)
{
	uint32_t v;

	nvme_ctrl_bar0_read(ctrl, off, &v, 4);
	return v;
}

static uint64_t r64(uint64_t off)
{
	uint64_t v;

	nvme_ctrl_bar0_read(ctrl, off, &v, 8);
	return v;
}

static void sq_db(unsigned qid, uint32_t v)
{
	w32(0x1000 + (2 * qid) * STRIDE, v);
}

static void cq_db(unsigned qid, uint32_t v)
{
	w32(0x1000 + (2 * qid + 1) * STRIDE, v);
}

static void make_ctrl(uint64_t cmb, bool ro)
{
	struct nvme_ctrl_params p = {
	    .mqes = 63,
	    .dstrd = 2,
	    .max_ioqs = 4,
	    .nvectors = 4,
	    .cmb_size = cmb,
	    .cmb_bir = 2,
	    .size = DISK_SIZE,
	    .readonly = ro,
	    .serial = "TEST0001",
	};
	struct nvme_ctrl_hooks h = {.irq = on_irq, .intx = on_intx};
	char err[128];

	intx_level = false;
	intx_changes = 0;
	ck_assert_int_eq(nvme_ctrl_create(&p, &gm, &test_ops, &disk, &h, &ctrl, err, sizeof(err)),
			 0);
}

static void setup(void)
{
	ram = calloc(1, RAM_SIZE);
	disk.data = calloc(1, DISK_SIZE);
	disk.size = DISK_SIZE;
	disk.flushes = 0;
	gmem_init_buffer(&gm, ram, RAM_SIZE);
	memset(irqs, 0, sizeof(irqs));
	asq_tail = acq_head = iosq_tail = iocq_head = 0;
	acq_phase = iocq_phase = 1;
	park = false;
	nparked = 0;
	aer_cid = 200;
	shadow_dbs = NULL;
	make_ctrl(0, false);
}

static void teardown(void)
{
	nvme_ctrl_destroy(ctrl);
	free(ram);
	free(disk.data);
}

static void enable(void)
{
	w32(NVME_REG_AQA, (AQ_SIZE - 1) << 16 | (AQ_SIZE - 1));
	w64(NVME_REG_ASQ, ASQ_GPA);
	w64(NVME_REG_ACQ, ACQ_GPA);
	w32(NVME_REG_CC, NVME_CC_EN | 6 << 16 | 4 << 20);
	ck_assert_uint_eq(r32(NVME_REG_CSTS) & (NVME_CSTS_RDY | NVME_CSTS_CFS), NVME_CSTS_RDY);
}

/* Submits one admin command and returns its completion (status without phase). */
static bool admin_try(struct nvme_sqe *cmd, struct nvme_cqe *out)
{
	struct nvme_cqe *e = (struct nvme_cqe *)(ram + ACQ_GPA) + acq_head;

	memcpy(ram + ASQ_GPA + asq_tail * 64, cmd, 64);
	asq_tail = (asq_tail + 1) % AQ_SIZE;
	sq_db(0, asq_tail);
	if ((e->status & 1) != acq_phase)
		return false;
	*out = *e;
	out->status >>= 1;
	if (++acq_head == AQ_SIZE) {
		acq_head = 0;
		acq_phase ^= 1;
	}
	cq_db(0, acq_head);
	return true;
}

static uint16_t admin(struct nvme_sqe *cmd, uint32_t *dw0)
{
	struct nvme_cqe e;

	ck_assert(admin_try(cmd, &e));
	ck_assert_uint_eq(e.cid, cmd->cid);
	ck_assert_uint_eq(e.sq_id, 0);
	if (dw0)
		*dw0 = e.dw0;
	return e.status & 0x7ff;
}

static uint16_t io_submit_only(struct nvme_sqe *cmd)
{
	memcpy(ram + IOSQ_GPA + iosq_tail * 64, cmd, 64);
	iosq_tail = (iosq_tail + 1) % IOQ_SIZE;
	sq_db(1, iosq_tail);
	return 0;
}

static bool io_reap(struct nvme_cqe *out)
{
	struct nvme_cqe *e = (struct nvme_cqe *)(ram + IOCQ_GPA) + iocq_head;

	if ((e->status & 1) != iocq_phase)
		return false;
	*out = *e;
	out->status >>= 1;
	if (++iocq_head == IOQ_SIZE) {
		iocq_head = 0;
		iocq_phase ^= 1;
	}
	if (shadow_dbs)
		shadow_dbs[(2 * 1 + 1) * (STRIDE / 4)] = iocq_head;
	cq_db(1, iocq_head);
	return true;
}

static uint16_t io(struct nvme_sqe *cmd)
{
	struct nvme_cqe e;

	io_submit_only(cmd);
	ck_assert(io_reap(&e));
	ck_assert_uint_eq(e.cid, cmd->cid);
	ck_assert_uint_eq(e.sq_id, 1);
	return e.status & 0x7ff;
}

static struct nvme_sqe mk(uint8_t op, uint16_t cid)
{
	struct nvme_sqe c;

	memset(&c, 0, sizeof(c));
	c.opcode = op;
	c.cid = cid;
	return c;
}

#define SC(sct, sc) NVME_STATUS(sct, sc)

static void set_nq(void)
{
	struct nvme_sqe c = mk(NVME_ADMIN_SET_FEATURES, 90);
	uint32_t dw0;

	c.cdw10 = NVME_FEAT_NUM_QUEUES;
	c.cdw11 = 3 << 16 | 3;
	ck_assert_uint_eq(admin(&c, &dw0), 0);
	ck_assert_uint_eq(dw0, 3 << 16 | 3);
}

static uint16_t create_cq(unsigned qid, uint64_t gpa, unsigned size, unsigned iv)
{
	struct nvme_sqe c = mk(NVME_ADMIN_CREATE_CQ, 91);

	c.prp1 = gpa;
	c.cdw10 = (size - 1) << 16 | qid;
	c.cdw11 = iv << 16 | 3;
	return admin(&c, NULL);
}

static uint16_t create_sq(unsigned qid, uint64_t gpa, unsigned size, unsigned cqid)
{
	struct nvme_sqe c = mk(NVME_ADMIN_CREATE_SQ, 92);

	c.prp1 = gpa;
	c.cdw10 = (size - 1) << 16 | qid;
	c.cdw11 = cqid << 16 | 1;
	return admin(&c, NULL);
}

static uint16_t delete_q(uint8_t op, unsigned qid)
{
	struct nvme_sqe c = mk(op, 93);

	c.cdw10 = qid;
	return admin(&c, NULL);
}

static void io_queues(void)
{
	enable();
	set_nq();
	ck_assert_uint_eq(create_cq(1, IOCQ_GPA, IOQ_SIZE, 1), 0);
	ck_assert_uint_eq(create_sq(1, IOSQ_GPA, IOQ_SIZE, 1), 0);
}

static struct nvme_sqe rw(uint8_t op, uint16_t cid, uint64_t slba, unsigned nlb, uint64_t prp1,
			  uint64_t prp2)
{
	struct nvme_sqe c = mk(op, cid);

	c.nsid = 1;
	c.cdw10 = (uint32_t)slba;
	c.cdw11 = (uint32_t)(slba >> 32);
	c.cdw12 = nlb - 1;
	c.prp1 = prp1;
	c.prp2 = prp2;
	return c;
}

START_TEST(test_registers)
{
	uint64_t cap = r64(NVME_REG_CAP);

	ck_assert_uint_eq(NVME_CAP_MQES(cap), 63);
	ck_assert_uint_eq(NVME_CAP_DSTRD(cap), 2);
	ck_assert(cap & NVME_CAP_CQR);
	ck_assert(cap & NVME_CAP_CSS_NVM);
	ck_assert_uint_eq(r32(NVME_REG_CAP + 4), cap >> 32);
	ck_assert_uint_eq(r32(NVME_REG_VS), 0x10400);
	ck_assert_uint_eq(r32(NVME_REG_CSTS), 0);
	ck_assert_uint_eq(r32(NVME_REG_CMBSZ), 0);
	w32(NVME_REG_INTMS, 0x5);
	ck_assert_uint_eq(r32(NVME_REG_INTMS), 0x5);
	w32(NVME_REG_INTMC, 0x1);
	ck_assert_uint_eq(r32(NVME_REG_INTMC), 0x4);
	enable();
	/* Admin queue registers are frozen while enabled. */
	w64(NVME_REG_ASQ, 0x777000);
	ck_assert_uint_eq(r64(NVME_REG_ASQ), ASQ_GPA);
	/* Shutdown completes, disable clears RDY and SHST. */
	w32(NVME_REG_CC, NVME_CC_EN | 6 << 16 | 4 << 20 | NVME_CC_SHN_NORMAL << 14);
	ck_assert_uint_eq(r32(NVME_REG_CSTS) & NVME_CSTS_SHST_MASK, NVME_CSTS_SHST_CMPLT);
	w32(NVME_REG_CC, 0);
	ck_assert_uint_eq(r32(NVME_REG_CSTS), 0);
	ck_assert(nvme_ctrl_bar0_size(ctrl) >= 0x1000 + 10 * STRIDE);
}
END_TEST

START_TEST(test_enable_bad_config)
{
	w32(NVME_REG_AQA, 0xf000f);
	w64(NVME_REG_ASQ, ASQ_GPA + 0x80); /* not page aligned */
	w64(NVME_REG_ACQ, ACQ_GPA);
	w32(NVME_REG_CC, NVME_CC_EN);
	ck_assert_uint_eq(r32(NVME_REG_CSTS) & (NVME_CSTS_RDY | NVME_CSTS_CFS), NVME_CSTS_CFS);
	w32(NVME_REG_CC, 0);
	ck_assert_uint_eq(r32(NVME_REG_CSTS), 0);
	w64(NVME_REG_ASQ, RAM_SIZE); /* outside RAM */
	w32(NVME_REG_CC, NVME_CC_EN);
	ck_assert_uint_eq(r32(NVME_REG_CSTS) & NVME_CSTS_RDY, 0);
}
END_TEST

START_TEST(test_identify)
{
	struct nvme_sqe c;
	struct nvme_id_ctrl *id = (void *)(ram + DATA_GPA);
	struct nvme_id_ns *ns = (void *)(ram + DATA_GPA);
	uint32_t *list = (void *)(ram + DATA_GPA);

	enable();
	c = mk(NVME_ADMIN_IDENTIFY, 1);
	c.cdw10 = NVME_ID_CNS_CTRL;
	c.prp1 = DATA_GPA;
	ck_assert_uint_eq(admin(&c, NULL), 0);
	ck_assert_uint_eq(id->nn, 1);
	ck_assert_uint_eq(id->sqes, 0x66);
	ck_assert_uint_eq(id->cqes, 0x44);
	ck_assert_uint_eq(id->mdts, NVME_CTRL_MDTS);
	ck_assert(id->oacs & NVME_CTRL_OACS_DBBUF);
	ck_assert_int_eq(memcmp(id->sn, "TEST0001    ", 12), 0);

	c.cdw10 = NVME_ID_CNS_NS;
	c.nsid = 1;
	ck_assert_uint_eq(admin(&c, NULL), 0);
	ck_assert_uint_eq(ns->nsze, DISK_SIZE / 512);
	ck_assert_uint_eq(ns->lbaf[0].ds, 9);

	c.nsid = 2;
	ck_assert_uint_eq(admin(&c, NULL), SC(0, NVME_SC_INVALID_NS));

	c.cdw10 = NVME_ID_CNS_NS_ACTIVE_LIST;
	c.nsid = 0;
	ck_assert_uint_eq(admin(&c, NULL), 0);
	ck_assert_uint_eq(list[0], 1);
	ck_assert_uint_eq(list[1], 0);

	c.cdw10 = NVME_ID_CNS_NS_DESC_LIST;
	c.nsid = 1;
	ck_assert_uint_eq(admin(&c, NULL), 0);
	ck_assert_uint_eq(ram[DATA_GPA], NVME_NIDT_NGUID);
	ck_assert_uint_eq(ram[DATA_GPA + 1], 16);

	c.cdw10 = 0x55; /* unsupported CNS */
	ck_assert_uint_eq(admin(&c, NULL), SC(0, NVME_SC_INVALID_FIELD));
}
END_TEST

START_TEST(test_identify_short_prp)
{
	struct nvme_sqe c;

	enable();
	/* 4 KiB from an offset needs PRP2; without it the buffer is too short. */
	c = mk(NVME_ADMIN_IDENTIFY, 2);
	c.cdw10 = NVME_ID_CNS_CTRL;
	c.prp1 = DATA_GPA + 0x800;
	c.prp2 = 0;
	ck_assert_uint_eq(admin(&c, NULL), SC(0, NVME_SC_INVALID_FIELD));
	/* PRP2 with an offset is invalid too, a PRP1 not dword aligned as well. */
	c.prp2 = DATA2_GPA + 8;
	ck_assert_uint_eq(admin(&c, NULL), SC(0, NVME_SC_INVALID_PRP_OFFSET));
	c.prp1 = DATA_GPA + 2;
	ck_assert_uint_eq(admin(&c, NULL), SC(0, NVME_SC_INVALID_PRP_OFFSET));
	/* Outside guest RAM: data transfer error, nothing written. */
	c.prp1 = RAM_SIZE - 0x800;
	c.prp2 = RAM_SIZE;
	ck_assert_uint_eq(admin(&c, NULL), SC(0, NVME_SC_DATA_XFER_ERROR));
	/* Split across two pages works. */
	c.prp1 = DATA_GPA + 0x800;
	c.prp2 = DATA2_GPA;
	ck_assert_uint_eq(admin(&c, NULL), 0);
	ck_assert_uint_eq(((struct nvme_id_ctrl *)(ram + DATA_GPA + 0x800))->vid, 0x1b36);
}
END_TEST

START_TEST(test_fused_and_bad_opcode)
{
	struct nvme_sqe c;

	enable();
	c = mk(NVME_ADMIN_IDENTIFY, 3);
	c.cdw10 = NVME_ID_CNS_CTRL;
	c.prp1 = DATA_GPA;
	c.flags = 1; /* first command of a fused pair */
	ck_assert_uint_eq(admin(&c, NULL), SC(0, NVME_SC_INVALID_FIELD));
	c.flags = 2;
	ck_assert_uint_eq(admin(&c, NULL), SC(0, NVME_SC_INVALID_FIELD));
	c.flags = 0x40; /* SGL */
	ck_assert_uint_eq(admin(&c, NULL), SC(0, NVME_SC_INVALID_FIELD));
	c = mk(0x7f, 4);
	ck_assert_uint_eq(admin(&c, NULL), SC(0, NVME_SC_INVALID_OPCODE));
}
END_TEST

START_TEST(test_queue_negative)
{
	struct nvme_sqe c;

	enable();
	set_nq();
	ck_assert_uint_eq(delete_q(NVME_ADMIN_DELETE_SQ, 0), SC(1, NVME_SC_QID_INVALID));
	ck_assert_uint_eq(delete_q(NVME_ADMIN_DELETE_CQ, 0), SC(1, NVME_SC_QID_INVALID));
	ck_assert_uint_eq(delete_q(NVME_ADMIN_DELETE_SQ, 1), SC(1, NVME_SC_QID_INVALID));
	/* SQ on a CQ that does not exist */
	ck_assert_uint_eq(create_sq(1, IOSQ_GPA, 8, 1), SC(1, NVME_SC_CQ_INVALID));
	ck_assert_uint_eq(create_cq(1, IOCQ_GPA, 1, 1), SC(1, NVME_SC_QUEUE_SIZE));
	ck_assert_uint_eq(create_cq(1, IOCQ_GPA, 65, 1), SC(1, NVME_SC_QUEUE_SIZE));
	ck_assert_uint_eq(create_cq(1, IOCQ_GPA, 8, 4), SC(1, NVME_SC_INVALID_VECTOR));
	ck_assert_uint_eq(create_cq(5, IOCQ_GPA, 8, 1), SC(1, NVME_SC_QID_INVALID));
	ck_assert_uint_eq(create_cq(1, IOCQ_GPA + 8, 8, 1), SC(0, NVME_SC_INVALID_PRP_OFFSET));
	ck_assert_uint_eq(create_cq(1, RAM_SIZE, 8, 1), SC(0, NVME_SC_INVALID_FIELD));
	ck_assert_uint_eq(create_cq(1, IOCQ_GPA, 8, 1), 0);
	ck_assert_uint_eq(create_cq(1, IOCQ_GPA, 8, 1), SC(1, NVME_SC_QID_INVALID));
	/* Size 0 in the 0's based field is one entry: invalid; MQES + 1 too. */
	c = mk(NVME_ADMIN_CREATE_SQ, 5);
	c.prp1 = IOSQ_GPA;
	c.cdw10 = 0 << 16 | 1;
	c.cdw11 = 1 << 16 | 1;
	ck_assert_uint_eq(admin(&c, NULL), SC(1, NVME_SC_QUEUE_SIZE));
	ck_assert_uint_eq(create_sq(1, IOSQ_GPA, 64 + 1, 1), SC(1, NVME_SC_QUEUE_SIZE));
	ck_assert_uint_eq(create_sq(1, IOSQ_GPA, 64, 1), 0);
	ck_assert_uint_eq(delete_q(NVME_ADMIN_DELETE_CQ, 1), SC(1, NVME_SC_INVALID_QUEUE_DELETION));
	ck_assert_uint_eq(delete_q(NVME_ADMIN_DELETE_SQ, 1), 0);
	ck_assert_uint_eq(delete_q(NVME_ADMIN_DELETE_SQ, 1), SC(1, NVME_SC_QID_INVALID));
	ck_assert_uint_eq(delete_q(NVME_ADMIN_DELETE_CQ, 1), 0);
	ck_assert_uint_eq(delete_q(NVME_ADMIN_DELETE_CQ, 1), SC(1, NVME_SC_QID_INVALID));
}
END_TEST

static void post_aers(unsigned n)
{
	unsigned i;

	for (i = 0; i < n; i++) {
		struct nvme_sqe c = mk(NVME_ADMIN_ASYNC_EVENT, aer_cid++);
		struct nvme_cqe e;

		ck_assert(!admin_try(&c, &e)); /* stays outstanding */
	}
}

static struct nvme_cqe *acq_entry(void)
{
	struct nvme_cqe *e = (struct nvme_cqe *)(ram + ACQ_GPA) + acq_head;

	if ((e->status & 1) != acq_phase)
		return NULL;
	if (++acq_head == AQ_SIZE) {
		acq_head = 0;
		acq_phase ^= 1;
	}
	cq_db(0, acq_head);
	return e;
}

START_TEST(test_bad_doorbell_event)
{
	struct nvme_sqe c;
	struct nvme_cqe *e;

	io_queues();
	post_aers(1);
	ck_assert_ptr_null(acq_entry());
	/* SQ tail beyond the queue size */
	sq_db(1, IOQ_SIZE);
	e = acq_entry();
	ck_assert_ptr_nonnull(e);
	ck_assert_uint_eq(e->cid, 200);
	ck_assert_uint_eq(e->dw0, NVME_AER_TYPE_ERROR | NVME_AER_ERR_INVALID_DB_VALUE << 8 |
				      NVME_LOG_ERROR << 16);
	/* Masked until the error log is read: a second AER stays outstanding. */
	post_aers(1);
	sq_db(3, 1); /* doorbell of a queue that does not exist */
	ck_assert_ptr_null(acq_entry());
	c = mk(NVME_ADMIN_GET_LOG_PAGE, 7);
	c.cdw10 = NVME_LOG_ERROR | (64 / 4 - 1) << 16;
	c.prp1 = DATA_GPA;
	ck_assert_uint_eq(admin(&c, NULL), 0);
	e = acq_entry();
	ck_assert_ptr_nonnull(e);
	ck_assert_uint_eq(e->cid, 201);
	ck_assert_uint_eq(e->dw0, NVME_AER_TYPE_ERROR | NVME_AER_ERR_INVALID_DB_REG << 8 |
				      NVME_LOG_ERROR << 16);
	/* CQ head beyond what was posted is an invalid value too; the queue keeps working. */
	post_aers(1);
	cq_db(1, 5);
	e = acq_entry();
	ck_assert_ptr_null(e); /* masked again until the log is read */
	c = mk(NVME_CMD_FLUSH, 9);
	c.nsid = 1;
	ck_assert_uint_eq(io(&c), 0);
}
END_TEST

START_TEST(test_aer_limit)
{
	struct nvme_sqe c = mk(NVME_ADMIN_ASYNC_EVENT, 77);

	enable();
	post_aers(NVME_CTRL_AERL + 1);
	ck_assert_uint_eq(admin(&c, NULL), SC(1, NVME_SC_ASYNC_LIMIT));
}
END_TEST

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 31 + seed + (i >> 9));
}

START_TEST(test_rw_prp_list)
{
	uint64_t *list = (uint64_t *)(ram + LIST_GPA + 0x100);
	const unsigned len = 64 * 1024, off = 0x200;
	struct nvme_sqe c;
	unsigned i, pages;

	io_queues();
	/* Data: first chunk at DATA_GPA+off, then pages scattered backwards through RAM. */
	pages = (len - (0x1000 - off) + 0xfff) / 0x1000;
	for (i = 0; i < pages; i++)
		list[i] = DATA2_GPA + (uint64_t)(pages - i) * 0x2000;
	fill(ram + DATA_GPA + off, 0x1000 - off, 1);
	for (i = 0; i < pages; i++)
		fill(ram + list[i], 0x1000, 2 + i);
	c = rw(NVME_CMD_WRITE, 10, 100, len / 512, DATA_GPA + off, LIST_GPA + 0x100);
	ck_assert_uint_eq(io(&c), 0);
	ck_assert_int_eq(memcmp(disk.data + 100 * 512, ram + DATA_GPA + off, 0x1000 - off), 0);
	ck_assert_int_eq(memcmp(disk.data + 100 * 512 + 0x1000 - off, ram + list[0], 0x1000), 0);
	/* Read it back contiguously (PRP list of consecutive pages). */
	for (i = 0; i < 16; i++)
		((uint64_t *)(ram + LIST_GPA))[i] = 0x600000 + (i + 1) * 0x1000;
	c = rw(NVME_CMD_READ, 11, 100, len / 512, 0x600000, LIST_GPA);
	ck_assert_uint_eq(io(&c), 0);
	ck_assert_int_eq(memcmp(ram + 0x600000, disk.data + 100 * 512, len), 0);
	/* Two pages: PRP2 is a data pointer. */
	c = rw(NVME_CMD_READ, 12, 0, 16, 0x700000, 0x702000);
	ck_assert_uint_eq(io(&c), 0);
	/* PRP list entry with an offset, entry zero, list outside RAM. */
	((uint64_t *)(ram + LIST_GPA))[1] = 0x600010;
	c = rw(NVME_CMD_READ, 13, 100, len / 512, 0x600000, LIST_GPA);
	ck_assert_uint_eq(io(&c), SC(0, NVME_SC_INVALID_PRP_OFFSET));
	((uint64_t *)(ram + LIST_GPA))[1] = 0;
	ck_assert_uint_eq(io(&c), SC(0, NVME_SC_INVALID_FIELD));
	c = rw(NVME_CMD_READ, 14, 100, len / 512, 0x600000, RAM_SIZE + 0x1000);
	ck_assert_uint_eq(io(&c), SC(0, NVME_SC_DATA_XFER_ERROR));
}
END_TEST

START_TEST(test_prp_list_chain)
{
	/* A list starting 16 bytes before the end of its page chains to a second list page. */
	uint64_t first = LIST_GPA + 0x1000 - 16, second = LIST_GPA + 0x4000;
	const unsigned len = 16 * 1024;
	struct nvme_sqe c;
	unsigned i;

	io_queues();
	fill(disk.data + 4096, len, 9);
	((uint64_t *)(ram + first))[0] = 0x601000;
	((uint64_t *)(ram + first))[1] = second;
	for (i = 0; i < 2; i++)
		((uint64_t *)(ram + second))[i] = 0x602000 + i * 0x1000;
	c = rw(NVME_CMD_READ, 15, 8, len / 512, 0x600000, first);
	ck_assert_uint_eq(io(&c), 0);
	ck_assert_int_eq(memcmp(ram + 0x600000, disk.data + 4096, len), 0);
	/* A chain pointer with an offset is refused. */
	((uint64_t *)(ram + first))[1] = second + 8;
	c = rw(NVME_CMD_READ, 16, 8, len / 512, 0x600000, first);
	ck_assert_uint_eq(io(&c), SC(0, NVME_SC_INVALID_PRP_OFFSET));
}
END_TEST

START_TEST(test_io_commands)
{
	struct nvme_dsm_range *r = (void *)(ram + DATA2_GPA);
	struct nvme_sqe c;

	io_queues();
	memset(disk.data, 0xaa, DISK_SIZE);
	c = mk(NVME_CMD_FLUSH, 20);
	c.nsid = 1;
	ck_assert_uint_eq(io(&c), 0);
	ck_assert_uint_eq(disk.flushes, 1);
	c = rw(NVME_CMD_WRITE_ZEROES, 21, 2, 3, 0, 0);
	ck_assert_uint_eq(io(&c), 0);
	ck_assert_uint_eq(disk.data[2 * 512 - 1], 0xaa);
	ck_assert_uint_eq(disk.data[2 * 512], 0);
	ck_assert_uint_eq(disk.data[5 * 512 - 1], 0);
	ck_assert_uint_eq(disk.data[5 * 512], 0xaa);
	c = mk(NVME_CMD_DSM, 22);
	c.nsid = 1;
	c.cdw10 = 1; /* two ranges */
	c.cdw11 = NVME_DSM_AD;
	c.prp1 = DATA2_GPA;
	r[0] = (struct nvme_dsm_range){.slba = 10, .nlb = 1};
	r[1] = (struct nvme_dsm_range){.slba = 20, .nlb = 2};
	ck_assert_uint_eq(io(&c), 0);
	ck_assert_uint_eq(disk.data[10 * 512], 0);
	ck_assert_uint_eq(disk.data[11 * 512], 0xaa);
	ck_assert_uint_eq(disk.data[21 * 512 + 511], 0);
	r[1].slba = DISK_SIZE / 512 - 1;
	ck_assert_uint_eq(io(&c), SC(0, NVME_SC_LBA_RANGE));
	/* LBA range, namespace and opcode checks */
	c = rw(NVME_CMD_READ, 23, DISK_SIZE / 512 - 1, 2, DATA_GPA, 0);
	ck_assert_uint_eq(io(&c), SC(0, NVME_SC_LBA_RANGE));
	c = rw(NVME_CMD_READ, 24, ~0ULL, 2, DATA_GPA, 0);
	ck_assert_uint_eq(io(&c), SC(0, NVME_SC_LBA_RANGE));
	c = rw(NVME_CMD_READ, 25, 0, 1, DATA_GPA, 0);
	c.nsid = 2;
	ck_assert_uint_eq(io(&c), SC(0, NVME_SC_INVALID_NS));
	c = rw(NVME_CMD_READ, 26, 0, 512, DATA_GPA, LIST_GPA); /* 256 KiB > MDTS */
	ck_assert_uint_eq(io(&c), SC(0, NVME_SC_INVALID_FIELD));
	c = mk(NVME_CMD_COMPARE, 27);
	c.nsid = 1;
	ck_assert_uint_eq(io(&c), SC(0, NVME_SC_INVALID_OPCODE));
	c = rw(NVME_CMD_READ, 28, 0, 1, DATA_GPA, 0);
	c.flags = 1;
	ck_assert_uint_eq(io(&c), SC(0, NVME_SC_INVALID_FIELD));
}
END_TEST

START_TEST(test_readonly)
{
	struct nvme_sqe c;

	nvme_ctrl_destroy(ctrl);
	make_ctrl(0, true);
	io_queues();
	c = rw(NVME_CMD_WRITE, 30, 0, 1, DATA_GPA, 0);
	ck_assert_uint_eq(io(&c), SC(0, NVME_SC_NS_WRITE_PROTECTED));
	c = rw(NVME_CMD_READ, 31, 0, 1, DATA_GPA, 0);
	ck_assert_uint_eq(io(&c), 0);
}
END_TEST

START_TEST(test_features_and_logs)
{
	struct nvme_smart_log *smart = (void *)(ram + DATA_GPA);
	struct nvme_sqe c;
	uint32_t dw0;

	io_queues();
	/* Number of Queues cannot change once I/O queues exist. */
	c = mk(NVME_ADMIN_SET_FEATURES, 40);
	c.cdw10 = NVME_FEAT_NUM_QUEUES;
	c.cdw11 = 0;
	ck_assert_uint_eq(admin(&c, NULL), SC(0, NVME_SC_CMD_SEQ_ERROR));
	c.cdw11 = 0xffff;
	ck_assert_uint_eq(admin(&c, NULL), SC(0, NVME_SC_INVALID_FIELD));
	c = mk(NVME_ADMIN_GET_FEATURES, 41);
	c.cdw10 = NVME_FEAT_VOLATILE_WC;
	ck_assert_uint_eq(admin(&c, &dw0), 0);
	ck_assert_uint_eq(dw0, 1);
	c = mk(NVME_ADMIN_SET_FEATURES, 42);
	c.cdw10 = NVME_FEAT_VOLATILE_WC;
	c.cdw11 = 0;
	ck_assert_uint_eq(admin(&c, NULL), 0);
	c.cdw10 |= NVME_FEAT_SAVE;
	ck_assert_uint_eq(admin(&c, NULL), SC(1, NVME_SC_FEATURE_NOT_SAVEABLE));
	c = mk(NVME_ADMIN_GET_FEATURES, 43);
	c.cdw10 = NVME_FEAT_VOLATILE_WC;
	ck_assert_uint_eq(admin(&c, &dw0), 0);
	ck_assert_uint_eq(dw0, 0);
	c.cdw10 = NVME_FEAT_VOLATILE_WC | 1 << 8; /* default */
	ck_assert_uint_eq(admin(&c, &dw0), 0);
	ck_assert_uint_eq(dw0, 1);
	c = mk(NVME_ADMIN_SET_FEATURES, 44);
	c.cdw10 = NVME_FEAT_IRQ_CONFIG;
	c.cdw11 = 9;
	ck_assert_uint_eq(admin(&c, NULL), SC(0, NVME_SC_INVALID_FIELD));
	c.cdw10 = NVME_FEAT_IRQ_COALESCE;
	c.cdw11 = 0x0a05;
	ck_assert_uint_eq(admin(&c, NULL), 0);
	c.cdw10 = NVME_FEAT_ASYNC_EVENT;
	c.cdw11 = 0x1ff;
	ck_assert_uint_eq(admin(&c, NULL), 0);
	c.cdw10 = NVME_FEAT_ARBITRATION;
	ck_assert_uint_eq(admin(&c, NULL), 0);
	c.cdw10 = 0x7e;
	ck_assert_uint_eq(admin(&c, NULL), SC(0, NVME_SC_INVALID_FIELD));

	c = rw(NVME_CMD_WRITE, 45, 0, 8, DATA2_GPA, 0);
	ck_assert_uint_eq(io(&c), 0);
	c = mk(NVME_ADMIN_GET_LOG_PAGE, 46);
	c.nsid = 0xffffffff;
	c.cdw10 = NVME_LOG_SMART | (512 / 4 - 1) << 16;
	c.prp1 = DATA_GPA;
	ck_assert_uint_eq(admin(&c, NULL), 0);
	ck_assert_uint_eq(smart->temperature, 313);
	ck_assert_uint_eq(smart->host_writes[0], 1);
	ck_assert_uint_eq(smart->data_units_written[0], 1);
	c.cdw10 = NVME_LOG_FW_SLOT | (512 / 4 - 1) << 16;
	ck_assert_uint_eq(admin(&c, NULL), 0);
	ck_assert_uint_eq(ram[DATA_GPA], 1);
	c.cdw10 = NVME_LOG_SMART | (512 / 4 - 1) << 16;
	c.cdw12 = 1024; /* offset beyond the log */
	ck_assert_uint_eq(admin(&c, NULL), SC(0, NVME_SC_INVALID_FIELD));
	c.cdw12 = 0;
	c.cdw10 = 0x70;
	ck_assert_uint_eq(admin(&c, NULL), SC(1, NVME_SC_INVALID_LOG_PAGE));
	c = mk(NVME_ADMIN_ABORT, 47);
	ck_assert_uint_eq(admin(&c, &dw0), 0);
	ck_assert_uint_eq(dw0 & 1, 1);
}
END_TEST

START_TEST(test_interrupts)
{
	struct nvme_sqe c;

	io_queues();
	ck_assert_uint_gt(irqs[0], 0); /* admin completions on vector 0 */
	c = mk(NVME_CMD_FLUSH, 50);
	c.nsid = 1;
	ck_assert_uint_eq(io(&c), 0);
	ck_assert_uint_eq(irqs[1], 1);
}
END_TEST

static uint16_t set_feature(uint32_t fid, uint32_t v)
{
	struct nvme_sqe c = mk(NVME_ADMIN_SET_FEATURES, 94);

	c.cdw10 = fid;
	c.cdw11 = v;
	return admin(&c, NULL);
}

static void flushes(unsigned n, uint16_t cid)
{
	struct nvme_sqe c;

	while (n--) {
		c = mk(NVME_CMD_FLUSH, cid++);
		c.nsid = 1;
		ck_assert_uint_eq(io(&c), 0);
	}
}

/* Interrupt Coalescing: THR + 1 entries per interrupt, the rest when the aggregation time runs
 * out; the admin queue and vectors with Coalescing Disable set are never delayed. */
START_TEST(test_interrupt_coalescing)
{
	unsigned admin_irqs;

	io_queues();
	ck_assert_int_eq(nvme_ctrl_irq_tick(ctrl, UINT64_MAX), -1); /* nothing pending */
	ck_assert_uint_eq(set_feature(NVME_FEAT_IRQ_COALESCE, 255 << 8 | 3), 0); /* 25.5 ms, 4 */
	admin_irqs = irqs[0];
	flushes(3, 60);
	ck_assert_uint_eq(irqs[1], 0);
	/* before the deadline the timer only says how long to wait */
	int64_t wait = nvme_ctrl_irq_tick(ctrl, 0);
	ck_assert(wait > 0);
	ck_assert_uint_eq(irqs[1], 0);
	flushes(1, 63);
	ck_assert_uint_eq(irqs[1], 1); /* the fourth entry */
	ck_assert_int_eq(nvme_ctrl_irq_tick(ctrl, 0), -1);
	flushes(2, 64);
	ck_assert_uint_eq(irqs[1], 1);
	ck_assert(nvme_ctrl_irq_tick(ctrl, nvme_now_ns()) > 0);
	ck_assert_int_eq(nvme_ctrl_irq_tick(ctrl, nvme_now_ns() + 26000000), -1); /* timed out */
	ck_assert_uint_eq(irqs[1], 2);
	ck_assert_uint_eq(irqs[0], admin_irqs);

	/* coalescing disabled for vector 1 */
	ck_assert_uint_eq(set_feature(NVME_FEAT_IRQ_CONFIG, NVME_FEAT_IVC_CD | 1), 0);
	ck_assert_uint_eq(irqs[0], admin_irqs + 1);
	flushes(2, 66);
	ck_assert_uint_eq(irqs[1], 4);

	/* turning coalescing off while entries wait: the next tick signals them */
	ck_assert_uint_eq(set_feature(NVME_FEAT_IRQ_CONFIG, 1), 0);
	flushes(1, 68);
	ck_assert_uint_eq(irqs[1], 4);
	ck_assert_uint_eq(set_feature(NVME_FEAT_IRQ_COALESCE, 0), 0);
	ck_assert_int_eq(nvme_ctrl_irq_tick(ctrl, 0), -1);
	ck_assert_uint_eq(irqs[1], 5);
	flushes(1, 69);
	ck_assert_uint_eq(irqs[1], 6);
}
END_TEST

START_TEST(test_shadow_doorbells)
{
	uint32_t *dbs = (uint32_t *)(ram + DBS_GPA), *eis = (uint32_t *)(ram + EIS_GPA);
	struct nvme_sqe c;
	struct nvme_cqe e;
	struct nvme_ctrl_stats st0, st1;

	io_queues();
	c = mk(NVME_ADMIN_DBBUF, 60);
	c.prp1 = DBS_GPA + 8;
	c.prp2 = EIS_GPA;
	ck_assert_uint_eq(admin(&c, NULL), SC(0, NVME_SC_INVALID_FIELD));
	c.prp1 = DBS_GPA;
	ck_assert_uint_eq(admin(&c, NULL), 0);
	shadow_dbs = dbs;
	nvme_ctrl_get_stats(ctrl, &st0);
	/* Queue 1 SQ tail in the shadow buffer; no MMIO write, just a wake-up. */
	c = mk(NVME_CMD_FLUSH, 61);
	c.nsid = 1;
	memcpy(ram + IOSQ_GPA + iosq_tail * 64, &c, 64);
	iosq_tail++;
	dbs[2 * 1 * (STRIDE / 4)] = iosq_tail;
	nvme_ctrl_process(ctrl);
	ck_assert(io_reap(&e));
	ck_assert_uint_eq(e.cid, 61);
	ck_assert_uint_eq(eis[2 * 1 * (STRIDE / 4)], iosq_tail);
	nvme_ctrl_get_stats(ctrl, &st1);
	ck_assert_uint_eq(st1.doorbells - st0.doorbells, 1); /* only the CQ head write of io_reap */
	/* A full CQ publishes its head as the CQ event index so the driver rings on freeing. */
	{
		unsigned k;

		for (k = 0; k < IOQ_SIZE; k++) {
			c.cid = (uint16_t)(300 + k);
			memcpy(ram + IOSQ_GPA + iosq_tail * 64, &c, 64);
			iosq_tail = (iosq_tail + 1) % IOQ_SIZE;
			dbs[2 * 1 * (STRIDE / 4)] = iosq_tail;
			if (k == IOQ_SIZE - 2) {
				eis[(2 * 1 + 1) * (STRIDE / 4)] = 0xdead;
				nvme_ctrl_process(ctrl); /* 31 completions fill the CQ */
				ck_assert_uint_eq(eis[(2 * 1 + 1) * (STRIDE / 4)], 0xdead);
			}
		}
		nvme_ctrl_process(ctrl); /* the 32nd waits for CQ space */
		ck_assert_uint_eq(eis[(2 * 1 + 1) * (STRIDE / 4)], iocq_head);
		for (k = 0; k < IOQ_SIZE; k++) {
			ck_assert(io_reap(&e));
			ck_assert_uint_eq(e.cid, 300 + k);
		}
		ck_assert(!io_reap(&e));
	}
	/* A garbage shadow value is ignored (and reported), the queue survives. */
	dbs[2 * 1 * (STRIDE / 4)] = 1000;
	nvme_ctrl_process(ctrl);
	ck_assert(!io_reap(&e));
	c.cid = 62;
	memcpy(ram + IOSQ_GPA + iosq_tail * 64, &c, 64);
	iosq_tail++;
	dbs[2 * 1 * (STRIDE / 4)] = iosq_tail;
	sq_db(1, iosq_tail); /* the driver rings when the event index says so */
	ck_assert(io_reap(&e));
	ck_assert_uint_eq(e.cid, 62);
}
END_TEST

START_TEST(test_reset_mid_io)
{
	struct nvme_sqe c;
	struct nvme_cqe e;

	io_queues();
	fill(disk.data, 4096, 3);
	park = true;
	c = rw(NVME_CMD_READ, 70, 0, 8, DATA_GPA, 0);
	io_submit_only(&c);
	c.cid = 71;
	io_submit_only(&c);
	ck_assert_uint_eq(nparked, 2);
	ck_assert(!io_reap(&e));
	/* Disable while two reads are at the backend: RDY stays until both return. */
	w32(NVME_REG_CC, 0);
	ck_assert_uint_eq(r32(NVME_REG_CSTS) & NVME_CSTS_RDY, NVME_CSTS_RDY);
	parked[0]->status = 0;
	nvme_ctrl_io_done(parked[0]);
	ck_assert_uint_eq(r32(NVME_REG_CSTS) & NVME_CSTS_RDY, NVME_CSTS_RDY);
	parked[1]->status = 0;
	nvme_ctrl_io_done(parked[1]);
	ck_assert_uint_eq(r32(NVME_REG_CSTS) & NVME_CSTS_RDY, 0);
	/* Nothing was posted to the deleted queue. */
	ck_assert_uint_eq(((struct nvme_cqe *)(ram + IOCQ_GPA))[0].status & 1, 0);
	/* The controller comes back cleanly. */
	park = false;
	memset(ram + ACQ_GPA, 0, 4096);
	memset(ram + IOCQ_GPA, 0, 4096);
	asq_tail = acq_head = iosq_tail = iocq_head = 0;
	acq_phase = iocq_phase = 1;
	io_queues();
	c = rw(NVME_CMD_READ, 72, 0, 8, DATA_GPA, 0);
	ck_assert_uint_eq(io(&c), 0);
	ck_assert_int_eq(memcmp(ram + DATA_GPA, disk.data, 4096), 0);
}
END_TEST

START_TEST(test_cq_full_backpressure)
{
	struct nvme_sqe c;
	struct nvme_cqe *cqes = (struct nvme_cqe *)(ram + IOCQ_GPA);
	unsigned i;

	enable();
	set_nq();
	ck_assert_uint_eq(create_cq(1, IOCQ_GPA, 4, 1), 0);
	ck_assert_uint_eq(create_sq(1, IOSQ_GPA, 16, 1), 0);
	c = mk(NVME_CMD_FLUSH, 0);
	c.nsid = 1;
	for (i = 0; i < 6; i++) {
		c.cid = (uint16_t)(80 + i);
		memcpy(ram + IOSQ_GPA + i * 64, &c, 64);
	}
	sq_db(1, 6);
	/* A 4-entry CQ holds 3 completions; the rest wait for the head doorbell. */
	ck_assert_uint_eq(cqes[0].cid, 80);
	ck_assert_uint_eq(cqes[2].cid, 82);
	ck_assert_uint_eq(cqes[3].status & 1, 0);
	cq_db(1, 3);
	ck_assert_uint_eq(cqes[3].cid, 83);
	ck_assert_uint_eq(cqes[3].status & 1, 1);
	ck_assert_uint_eq(cqes[0].cid, 84);
	ck_assert_uint_eq(cqes[0].status & 1, 0); /* phase flipped after wrap */
	ck_assert_uint_eq(cqes[0].sq_head, 5);
}
END_TEST

/* The largest controller: 65535 I/O queue pairs, 2048 vectors, doorbells 4 bytes apart; the
 * last queue pair works and one more is refused. */
START_TEST(test_max_queues)
{
	struct nvme_ctrl_params p = {.mqes = 63,
				     .max_ioqs = 65535,
				     .nvectors = 2048,
				     .size = DISK_SIZE,
				     .serial = "TESTMAXQ"};
	struct nvme_ctrl_hooks h = {.irq = on_irq};
	struct nvme_cqe *e = (struct nvme_cqe *)(ram + IOCQ_GPA);
	struct nvme_sqe c = mk(NVME_ADMIN_SET_FEATURES, 95);
	uint32_t dw0;
	char err[128];

	nvme_ctrl_destroy(ctrl);
	ck_assert_int_eq(nvme_ctrl_create(&p, &gm, &test_ops, &disk, &h, &ctrl, err, sizeof(err)),
			 0);
	ck_assert_uint_ge(nvme_ctrl_bar0_size(ctrl), 0x1000 + 2 * 65536 * 4);
	enable();
	c.cdw10 = NVME_FEAT_NUM_QUEUES;
	c.cdw11 = 0xffffu << 16 | 0xffff; /* 65536 requested: 0xffff is reserved */
	ck_assert_uint_eq(admin(&c, &dw0), SC(0, NVME_SC_INVALID_FIELD));
	c.cdw11 = 0xfffeu << 16 | 0xfffe;
	ck_assert_uint_eq(admin(&c, &dw0), 0);
	ck_assert_uint_eq(dw0, 0xfffeu << 16 | 0xfffe);
	ck_assert_uint_eq(create_cq(65535, IOCQ_GPA, IOQ_SIZE, 2047), 0);
	ck_assert_uint_eq(create_cq(65534, IOCQ_GPA + 0x1000, IOQ_SIZE, 2048),
			  SC(1, NVME_SC_INVALID_VECTOR));
	c = mk(NVME_ADMIN_CREATE_SQ, 96);
	c.prp1 = IOSQ_GPA;
	c.cdw10 = (IOQ_SIZE - 1) << 16 | 65535;
	c.cdw11 = 65535u << 16 | 1;
	ck_assert_uint_eq(admin(&c, NULL), 0);
	c = mk(NVME_CMD_FLUSH, 97);
	c.nsid = 1;
	memcpy(ram + IOSQ_GPA, &c, 64);
	w32(0x1000 + 2 * 65535 * 4, 1); /* SQ 65535 tail doorbell */
	ck_assert_uint_eq(e[0].status & 1, 1);
	ck_assert_uint_eq(e[0].cid, 97);
	ck_assert_uint_eq(e[0].sq_id, 65535);
	ck_assert_uint_eq(e[0].status >> 1, 0);
	ck_assert_uint_eq(last_vector, 2047);
}
END_TEST

START_TEST(test_cmb_sq)
{
	uint64_t size;
	uint8_t *cmb;
	struct nvme_sqe c;
	struct nvme_cqe e;

	nvme_ctrl_destroy(ctrl);
	make_ctrl(64 * 1024, false);
	/* NVMe 1.4: the CMB registers show once CMBMSC.CRE is set */
	ck_assert_uint_eq(r32(NVME_REG_CMBSZ), 0);
	w32(NVME_REG_CMBMSC, NVME_CMBMSC_CRE);
	ck_assert_uint_eq(r32(NVME_REG_CMBLOC), 2);
	ck_assert_uint_eq(r32(NVME_REG_CMBSZ), NVME_CMBSZ_SQS | 16 << 12);
	cmb = nvme_ctrl_cmb(ctrl, &size);
	ck_assert_uint_eq(size, 64 * 1024);
	enable();
	set_nq();
	ck_assert_uint_eq(create_cq(1, IOCQ_GPA, IOQ_SIZE, 1), 0);
	/* Not yet mapped by the PCI layer: the CMB address is not RAM. */
	ck_assert_uint_eq(create_sq(1, CMB_GPA + 0x1000, IOQ_SIZE, 1),
			  SC(0, NVME_SC_INVALID_FIELD));
	nvme_ctrl_set_cmb_gpa(ctrl, CMB_GPA);
	w64(NVME_REG_CMBMSC, NVME_CMBMSC_CRE | NVME_CMBMSC_CMSE | CMB_GPA);
	ck_assert_uint_eq(create_sq(1, CMB_GPA + 0x1000, IOQ_SIZE, 1), 0);
	c = mk(NVME_CMD_FLUSH, 90);
	c.nsid = 1;
	nvme_ctrl_cmb_ops.write(ctrl, 0x1000, &c, 8);
	memcpy(cmb + 0x1000 + 8, (uint8_t *)&c + 8, 56);
	sq_db(1, 1);
	ck_assert(io_reap(&e));
	ck_assert_uint_eq(e.cid, 90);
	ck_assert_uint_eq(e.status, 0);
}
END_TEST

START_TEST(test_two_sqs_one_cq)
{
	struct nvme_cqe *cqes = (struct nvme_cqe *)(ram + IOCQ_GPA);
	struct nvme_sqe c;
	unsigned i, seen[3] = {0, 0, 0};

	io_queues();
	ck_assert_uint_eq(create_sq(2, IOSQ_GPA + 0x1000, 8, 1), 0);
	c = mk(NVME_CMD_FLUSH, 0);
	c.nsid = 1;
	for (i = 0; i < 3; i++) {
		c.cid = (uint16_t)(100 + i);
		memcpy(ram + IOSQ_GPA + 0x1000 + i * 64, &c, 64);
	}
	sq_db(2, 3);
	c.cid = 110;
	io_submit_only(&c);
	for (i = 0; i < 4; i++) {
		ck_assert_uint_eq(cqes[i].status & 1, 1);
		ck_assert_uint_le(cqes[i].sq_id, 2);
		seen[cqes[i].sq_id]++;
		if (cqes[i].sq_id == 2)
			ck_assert_uint_ge(cqes[i].cid, 100);
	}
	ck_assert_uint_eq(seen[1], 1);
	ck_assert_uint_eq(seen[2], 3);
	/* Deleting the CQ needs both SQs gone first. */
	ck_assert_uint_eq(delete_q(NVME_ADMIN_DELETE_SQ, 1), 0);
	ck_assert_uint_eq(delete_q(NVME_ADMIN_DELETE_CQ, 1), SC(1, NVME_SC_INVALID_QUEUE_DELETION));
	ck_assert_uint_eq(delete_q(NVME_ADMIN_DELETE_SQ, 2), 0);
	ck_assert_uint_eq(delete_q(NVME_ADMIN_DELETE_CQ, 1), 0);
}
END_TEST

/* Pin-based interrupts: asserted while an interrupt-enabled CQ holds entries the host has not
 * consumed and INTMS bit 0 is clear, only while pin-based interrupts are on (MSI and MSI-X off;
 * INTx Disable is the PCI layer's); a CQ without IEN never asserts it; a reset drops it. */
START_TEST(test_intx_pin)
{
	struct nvme_sqe c = mk(NVME_ADMIN_GET_FEATURES, 7), q = mk(NVME_ADMIN_CREATE_CQ, 93);

	enable();
	c.cdw10 = NVME_FEAT_NUM_QUEUES;
	ck_assert_uint_eq(admin(&c, NULL), 0); /* gate closed: MSI-X only */
	ck_assert_uint_eq(intx_changes, 0);
	nvme_ctrl_intx_gate(ctrl, true);
	/* a completion the host has not consumed asserts the pin, its head doorbell deasserts */
	memcpy(ram + ASQ_GPA + asq_tail * 64, &c, 64);
	asq_tail = (asq_tail + 1) % AQ_SIZE;
	sq_db(0, asq_tail);
	ck_assert(intx_level);
	ck_assert_uint_eq(intx_changes, 1);
	w32(NVME_REG_INTMS, 0x2); /* another vector's mask: the pin is vector 0's */
	ck_assert(intx_level);
	w32(NVME_REG_INTMS, 0x1);
	ck_assert(!intx_level);
	w32(NVME_REG_INTMC, 0x1);
	ck_assert(intx_level);
	acq_head = (acq_head + 1) % AQ_SIZE;
	if (!acq_head)
		acq_phase ^= 1;
	cq_db(0, acq_head);
	ck_assert(!intx_level);
	ck_assert_uint_eq(intx_changes, 4);
	/* admin() consumes at once: up, then down */
	ck_assert_uint_eq(admin(&c, NULL), 0);
	ck_assert(!intx_level);
	ck_assert_uint_eq(intx_changes, 6);
	/* an I/O CQ without interrupts enabled never asserts it */
	set_nq();
	q.prp1 = IOCQ_GPA;
	q.cdw10 = (IOQ_SIZE - 1) << 16 | 1;
	q.cdw11 = 1; /* physically contiguous, IEN clear */
	ck_assert_uint_eq(admin(&q, NULL), 0);
	ck_assert_uint_eq(create_sq(1, IOSQ_GPA, IOQ_SIZE, 1), 0);
	intx_changes = 0;
	io_submit_only(&(struct nvme_sqe){.opcode = NVME_CMD_FLUSH, .cid = 5, .nsid = 1});
	ck_assert_uint_eq(intx_changes, 0);
	ck_assert(!intx_level);
	/* the gate closing (MSI-X on) takes the pin down at the next event */
	memcpy(ram + ASQ_GPA + asq_tail * 64, &c, 64);
	asq_tail = (asq_tail + 1) % AQ_SIZE;
	sq_db(0, asq_tail);
	ck_assert(intx_level);
	nvme_ctrl_intx_gate(ctrl, false);
	w32(NVME_REG_INTMC, 0);
	ck_assert(!intx_level);
	/* a controller reset with the entry still there: down (and stays down) */
	nvme_ctrl_intx_gate(ctrl, true);
	w32(NVME_REG_INTMC, 0);
	ck_assert(intx_level);
	w32(NVME_REG_CC, 0);
	ck_assert(!intx_level);
}
END_TEST

static Suite *nvme_suite(void)
{
	Suite *s = suite_create("nvme");
	TCase *t = tcase_create("model");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, test_registers);
	tcase_add_test(t, test_enable_bad_config);
	tcase_add_test(t, test_identify);
	tcase_add_test(t, test_identify_short_prp);
	tcase_add_test(t, test_fused_and_bad_opcode);
	tcase_add_test(t, test_queue_negative);
	tcase_add_test(t, test_bad_doorbell_event);
	tcase_add_test(t, test_aer_limit);
	tcase_add_test(t, test_rw_prp_list);
	tcase_add_test(t, test_prp_list_chain);
	tcase_add_test(t, test_io_commands);
	tcase_add_test(t, test_readonly);
	tcase_add_test(t, test_features_and_logs);
	tcase_add_test(t, test_interrupts);
	tcase_add_test(t, test_interrupt_coalescing);
	tcase_add_test(t, test_shadow_doorbells);
	tcase_add_test(t, test_reset_mid_io);
	tcase_add_test(t, test_cq_full_backpressure);
	tcase_add_test(t, test_cmb_sq);
	tcase_add_test(t, test_max_queues);
	tcase_add_test(t, test_two_sqs_one_cq);
	tcase_add_test(t, test_intx_pin);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return testutil_run_suite(nvme_suite());
}
