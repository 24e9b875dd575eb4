/* Device-model tests of the vNVMe's queue-pair binding (passthrough and isolated modes): the
 * bind/unbind hooks on Create/Delete I/O SQ, reset and destroy, doorbells of bound queues left
 * alone, one SQ per CQ, no Doorbell Buffer Config with polled doorbells, CFS once the backend is
 * gone, the external CMB. A plain buffer is guest memory; no KVM. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvme-lightiov/nvme_ctrl.h"
#include "testutil.h"

#define RAM_SIZE (4u << 20)
#define ASQ_GPA	 0x10000
#define ACQ_GPA	 0x20000
#define IOCQ_GPA 0x30000
#define IOSQ_GPA 0x40000
#define ID_GPA	 0x50000
#define AQ_SIZE	 16
#define STRIDE	 4096u /* dstrd 10, as the polled-doorbell mode offers it */
#define CMB_GPA	 0x8000000000ULL
#define CMB_SIZE (64u << 10)

static uint8_t *ram, *cmb;
static struct guest_mem gm;
static struct nvme_ctrl *ctrl;
static uint32_t asq_tail, acq_head;
static uint8_t acq_phase;
static uint32_t admin_nsid;  /* the next admin commands' NSID */
static uint8_t ns_lba_shift; /* the next controller's LBA format (0: the default, 512) */

/* what the hooks saw */
static struct nvme_qp_bind bound[8];
static unsigned nbind, nunbind, bind_fail;
static uint32_t unbound[8];
static bool backend_alive;
static bool bind_needs_dbbuf; /* the next controller's: eventfd doorbells */
static bool with_redoorbell;  /* the next controller's: doorbell=auto (pages, then eventfd) */
static struct nvme_qp_bind moved[8];
static unsigned nmoved, moved_fail;

static uint16_t on_redoorbell(void *opaque, const struct nvme_qp_bind *b, uint32_t *handle)
{
	(void)opaque;
	if (moved_fail)
		return (uint16_t)moved_fail;
	moved[nmoved % 8] = *b;
	*handle = 200 + nmoved++;
	return 0;
}

static uint16_t on_bind(void *opaque, const struct nvme_qp_bind *b, uint32_t *handle)
{
	(void)opaque;
	if (bind_fail)
		return (uint16_t)bind_fail;
	bound[nbind % 8] = *b;
	*handle = 100 + nbind++;
	return 0;
}

static void on_unbind(void *opaque, uint16_t sqid, uint32_t handle)
{
	(void)opaque;
	(void)sqid;
	unbound[nunbind++ % 8] = handle;
}

static bool on_alive(void *opaque)
{
	(void)opaque;
	return backend_alive;
}

static void w32(uint64_t off, uint32_t v)
{
	nvme_ctrl_bar0_write(ctrl, off, &v, 4);
}

static uint32_t r32(uint64_t off)
{
	uint32_t v;

	nvme_ctrl_bar0_read(ctrl, off, &v, 4);
	return v;
}

static void make_ctrl(bool no_dbbuf)
{
	struct nvme_ctrl_params p = {
	    .mqes = 63,
	    .dstrd = 10,
	    .max_ioqs = 4,
	    .nvectors = 4,
	    .cmb_size = CMB_SIZE,
	    .cmb_host = cmb,
	    .cmb_bir = 2,
	    .size = 1 << 20,
	    .lba_shift = ns_lba_shift,
	    .no_dbbuf = no_dbbuf,
	    .bind_needs_dbbuf = bind_needs_dbbuf,
	    .serial = "BIND0001",
	};
	struct nvme_ctrl_hooks h = {.bind = on_bind, .unbind = on_unbind, .alive = on_alive};
	char err[128];

	if (with_redoorbell)
		h.redoorbell = on_redoorbell;
	ck_assert_int_eq(
	    nvme_ctrl_create(&p, &gm, &nvme_mem_backend_ops, NULL, &h, &ctrl, err, sizeof(err)), 0);
	nvme_ctrl_set_cmb_gpa(ctrl, CMB_GPA);
	/* the controller memory space at the BAR, as Linux enables it (NVMe 1.4) */
	w32(NVME_REG_CMBMSC + 4, (uint32_t)(CMB_GPA >> 32));
	w32(NVME_REG_CMBMSC, NVME_CMBMSC_CRE | NVME_CMBMSC_CMSE | (uint32_t)CMB_GPA);
}

static void enable(void)
{
	asq_tail = acq_head = 0;
	acq_phase = 1;
	memset(ram + ACQ_GPA, 0, 4096);
	w32(NVME_REG_AQA, (AQ_SIZE - 1) << 16 | (AQ_SIZE - 1));
	w32(NVME_REG_ASQ, ASQ_GPA);
	w32(NVME_REG_ACQ, ACQ_GPA);
	w32(NVME_REG_CC, NVME_CC_EN | NVME_SQES_LOG2 << 16 | NVME_CQES_LOG2 << 20);
	ck_assert_uint_eq(r32(NVME_REG_CSTS) & (NVME_CSTS_RDY | NVME_CSTS_CFS), NVME_CSTS_RDY);
}

static void setup(void)
{
	ram = calloc(1, RAM_SIZE);
	cmb = aligned_alloc(4096, CMB_SIZE);
	ck_assert_ptr_nonnull(ram);
	ck_assert_ptr_nonnull(cmb);
	memset(cmb, 0, CMB_SIZE);
	gmem_init_buffer(&gm, ram, RAM_SIZE);
	nbind = nunbind = bind_fail = 0;
	admin_nsid = 0;
	ns_lba_shift = 0;
	backend_alive = true;
	bind_needs_dbbuf = false;
	with_redoorbell = false;
	nmoved = moved_fail = 0;
	make_ctrl(true);
	enable();
}

static void teardown(void)
{
	nvme_ctrl_destroy(ctrl);
	free(ram);
	free(cmb);
}

/* One admin command; returns its status (no phase bit). */
static uint16_t admin(uint8_t op, uint32_t cdw10, uint32_t cdw11, uint64_t prp1, uint64_t prp2)
{
	struct nvme_sqe *e = (struct nvme_sqe *)(ram + ASQ_GPA) + asq_tail;
	struct nvme_cqe *c = (struct nvme_cqe *)(ram + ACQ_GPA) + acq_head;
	uint16_t st;

	memset(e, 0, sizeof(*e));
	e->opcode = op;
	e->cid = (uint16_t)(asq_tail + 1);
	e->nsid = admin_nsid;
	e->cdw10 = cdw10;
	e->cdw11 = cdw11;
	e->prp1 = prp1;
	e->prp2 = prp2;
	asq_tail = (asq_tail + 1) % AQ_SIZE;
	w32(NVME_REG_DBS, asq_tail);
	ck_assert_uint_eq(c->status & 1, acq_phase);
	st = c->status >> 1;
	if (++acq_head == AQ_SIZE) {
		acq_head = 0;
		acq_phase ^= 1;
	}
	w32(NVME_REG_DBS + STRIDE, acq_head);
	return st & 0x7ff;
}

static uint16_t create_cq(unsigned qid, uint64_t gpa, bool ien, unsigned vec)
{
	return admin(NVME_ADMIN_CREATE_CQ, 31u << 16 | qid, vec << 16 | (ien ? 2 : 0) | 1, gpa, 0);
}

static uint16_t create_sq(unsigned qid, unsigned cqid, uint64_t gpa)
{
	return admin(NVME_ADMIN_CREATE_SQ, 15u << 16 | qid, cqid << 16 | 1, gpa, 0);
}

/* Create I/O SQ hands the pair to the backend with every field the binding needs. */
START_TEST(test_bind_on_create)
{
	struct nvme_ctrl_stats st;
	uint16_t qid[4];
	uint32_t h[4];

	ck_assert_uint_eq(create_cq(1, IOCQ_GPA, true, 2), 0);
	ck_assert_uint_eq(nbind, 0);
	ck_assert_uint_eq(create_sq(1, 1, IOSQ_GPA), 0);
	ck_assert_uint_eq(nbind, 1);
	ck_assert_uint_eq(bound[0].sqid, 1);
	ck_assert_uint_eq(bound[0].cqid, 1);
	ck_assert_uint_eq(bound[0].sq_depth, 16);
	ck_assert_uint_eq(bound[0].cq_depth, 32);
	ck_assert_uint_eq(bound[0].sq_gpa, IOSQ_GPA);
	ck_assert_uint_eq(bound[0].cq_gpa, IOCQ_GPA);
	ck_assert(!bound[0].sq_in_cmb);
	ck_assert(bound[0].ien);
	ck_assert_uint_eq(bound[0].vector, 2);
	ck_assert_uint_eq(nvme_ctrl_bound(ctrl, qid, h, 4), 1);
	ck_assert_uint_eq(qid[0], 1);
	ck_assert_uint_eq(h[0], 100);
	nvme_ctrl_get_stats(ctrl, &st);
	ck_assert_uint_eq(st.bound, 1);
	/* an SQ in the CMB, which is the backend's memory here */
	ck_assert_uint_eq(create_cq(2, IOCQ_GPA + 0x1000, false, 0), 0);
	ck_assert_uint_eq(create_sq(2, 2, CMB_GPA + 0x2000), 0);
	ck_assert(bound[1].sq_in_cmb);
	ck_assert_uint_eq(bound[1].sq_gpa, CMB_GPA + 0x2000);
	ck_assert(!bound[1].ien);
}
END_TEST

/* Delete SQ, CC.EN = 0 and destroy each give every bound pair back exactly once. */
START_TEST(test_unbind_paths)
{
	ck_assert_uint_eq(create_cq(1, IOCQ_GPA, false, 0), 0);
	ck_assert_uint_eq(create_sq(1, 1, IOSQ_GPA), 0);
	ck_assert_uint_eq(admin(NVME_ADMIN_DELETE_SQ, 1, 0, 0, 0), 0);
	ck_assert_uint_eq(nunbind, 1);
	ck_assert_uint_eq(unbound[0], 100);
	ck_assert_uint_eq(admin(NVME_ADMIN_DELETE_CQ, 1, 0, 0, 0), 0);
	/* recreated: a new backend queue pair */
	ck_assert_uint_eq(create_cq(1, IOCQ_GPA, false, 0), 0);
	ck_assert_uint_eq(create_sq(1, 1, IOSQ_GPA), 0);
	ck_assert_uint_eq(nbind, 2);
	w32(NVME_REG_CC, 0);
	ck_assert_uint_eq(nunbind, 2);
	ck_assert_uint_eq(unbound[1], 101);
	ck_assert_uint_eq(r32(NVME_REG_CSTS) & NVME_CSTS_RDY, 0);
	enable();
	ck_assert_uint_eq(create_cq(3, IOCQ_GPA, false, 0), 0);
	ck_assert_uint_eq(create_sq(3, 3, IOSQ_GPA), 0);
	nvme_ctrl_unbind_all(ctrl);
	ck_assert_uint_eq(nunbind, 3);
	nvme_ctrl_unbind_all(ctrl); /* idempotent */
	ck_assert_uint_eq(nunbind, 3);
	ck_assert_uint_eq(create_cq(4, IOCQ_GPA + 0x1000, false, 0), 0);
	ck_assert_uint_eq(create_sq(4, 4, IOSQ_GPA + 0x1000), 0);
	nvme_ctrl_destroy(ctrl);
	ctrl = NULL;
	ck_assert_uint_eq(nunbind, 4);
	make_ctrl(true); /* for teardown */
}
END_TEST

/* Function Level Reset with two bound pairs: both go back to the backend, the controller is
 * disabled with its admin queue registers cleared, and it comes back with fresh bindings. */
START_TEST(test_flr_unbinds_and_resets)
{
	struct nvme_ctrl_stats st;
	uint16_t qid[4];
	uint32_t h[4];

	ck_assert_uint_eq(create_cq(1, IOCQ_GPA, true, 1), 0);
	ck_assert_uint_eq(create_sq(1, 1, IOSQ_GPA), 0);
	ck_assert_uint_eq(create_cq(2, IOCQ_GPA + 0x1000, false, 0), 0);
	ck_assert_uint_eq(create_sq(2, 2, CMB_GPA), 0);
	ck_assert_uint_eq(nbind, 2);
	w32(NVME_REG_INTMS, 1);
	nvme_ctrl_flr(ctrl);
	ck_assert_uint_eq(nunbind, 2);
	ck_assert(unbound[0] + unbound[1] == 100 + 101);
	ck_assert_uint_eq(nvme_ctrl_bound(ctrl, qid, h, 4), 0);
	ck_assert_uint_eq(r32(NVME_REG_CC), 0);
	ck_assert_uint_eq(r32(NVME_REG_CSTS) & NVME_CSTS_RDY, 0);
	ck_assert_uint_eq(r32(NVME_REG_AQA), 0);
	ck_assert_uint_eq(r32(NVME_REG_ASQ), 0);
	ck_assert_uint_eq(r32(NVME_REG_ACQ), 0);
	ck_assert_uint_eq(r32(NVME_REG_INTMS), 0);
	/* kept: Linux does not write it again after an FLR */
	ck_assert_uint_eq(r32(NVME_REG_CMBMSC),
			  NVME_CMBMSC_CRE | NVME_CMBMSC_CMSE | (uint32_t)CMB_GPA);
	nvme_ctrl_get_stats(ctrl, &st);
	ck_assert_uint_eq(st.flrs, 1);
	ck_assert_uint_eq(st.bound, 0);
	/* the doorbells of the old queues reach nothing: the controller is off */
	w32(NVME_REG_DBS + 2 * STRIDE, 3);
	ck_assert_uint_eq(nbind, 2);
	/* a second FLR of an idle function hands nothing back twice */
	nvme_ctrl_flr(ctrl);
	ck_assert_uint_eq(nunbind, 2);
	enable();
	ck_assert_uint_eq(create_cq(1, IOCQ_GPA, true, 1), 0);
	ck_assert_uint_eq(create_sq(1, 1, IOSQ_GPA), 0);
	ck_assert_uint_eq(nbind, 3);
	ck_assert_uint_eq(nvme_ctrl_bound(ctrl, qid, h, 4), 1);
	ck_assert_uint_eq(h[0], 102);
}
END_TEST

/* An SSD with 4 KiB LBAs: the namespace shows that one format and its size in 4 KiB blocks
 * (the backend checks commands in the same units); other sizes and odd namespaces refused. */
START_TEST(test_lba_4k)
{
	struct nvme_id_ns *ns = (struct nvme_id_ns *)(ram + ID_GPA);
	struct nvme_ctrl_params p = {.max_ioqs = 1, .nvectors = 1, .size = 1 << 20};
	struct nvme_ctrl *bad;
	char err[128];

	admin_nsid = 1;
	ck_assert_uint_eq(admin(NVME_ADMIN_IDENTIFY, 0, 0, ID_GPA, 0), 0);
	ck_assert_uint_eq(ns->nsze, (1 << 20) / 512);
	ck_assert_uint_eq(ns->lbaf[0].ds, 9);
	nvme_ctrl_destroy(ctrl);
	ns_lba_shift = 12;
	make_ctrl(true);
	enable();
	memset(ns, 0xa5, sizeof(*ns));
	ck_assert_uint_eq(admin(NVME_ADMIN_IDENTIFY, 0, 0, ID_GPA, 0), 0);
	ck_assert_uint_eq(ns->nsze, (1 << 20) / 4096);
	ck_assert_uint_eq(ns->ncap, (1 << 20) / 4096);
	ck_assert_uint_eq(ns->nlbaf, 0);
	ck_assert_uint_eq(ns->flbas & 0xf, 0);
	ck_assert_uint_eq(ns->lbaf[0].ds, 12);
	ck_assert_uint_eq(ns->lbaf[0].ms, 0);
	p.lba_shift = 10;
	ck_assert_int_lt(
	    nvme_ctrl_create(&p, &gm, &nvme_mem_backend_ops, NULL, NULL, &bad, err, sizeof(err)),
	    0);
	ck_assert_msg(strstr(err, "1024-byte LBAs"), "%s", err);
	p.lba_shift = 12;
	p.size = (1 << 20) + 512;
	ck_assert_int_lt(
	    nvme_ctrl_create(&p, &gm, &nvme_mem_backend_ops, NULL, NULL, &bad, err, sizeof(err)),
	    0);
	ck_assert_msg(strstr(err, "multiple of 4096"), "%s", err);
}
END_TEST

/* Refusals: a second SQ on a bound CQ, and a backend that says no (the SQ stays absent). */
START_TEST(test_bind_refusals)
{
	ck_assert_uint_eq(create_cq(1, IOCQ_GPA, false, 0), 0);
	ck_assert_uint_eq(create_sq(1, 1, IOSQ_GPA), 0);
	ck_assert_uint_eq(create_sq(2, 1, IOSQ_GPA + 0x1000),
			  NVME_STATUS(NVME_SCT_CMD_SPECIFIC, NVME_SC_CQ_INVALID));
	ck_assert_uint_eq(nbind, 1);
	ck_assert_uint_eq(create_cq(2, IOCQ_GPA + 0x1000, false, 0), 0);
	bind_fail = NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_INTERNAL);
	ck_assert_uint_eq(create_sq(2, 2, IOSQ_GPA + 0x1000), NVME_SC_INTERNAL);
	bind_fail = 0;
	/* not created: deleting it is an invalid queue id, and it can be created now */
	ck_assert_uint_eq(admin(NVME_ADMIN_DELETE_SQ, 2, 0, 0, 0),
			  NVME_STATUS(NVME_SCT_CMD_SPECIFIC, NVME_SC_QID_INVALID));
	ck_assert_uint_eq(create_sq(2, 2, IOSQ_GPA + 0x1000), 0);
	ck_assert_uint_eq(nbind, 2);
}
END_TEST

/* Doorbells of a bound pair that reach the controller are the backend's business: no fetch, no
 * error event; the admin queue keeps working. */
START_TEST(test_bound_doorbells_ignored)
{
	struct nvme_sqe *e = (struct nvme_sqe *)(ram + IOSQ_GPA);
	struct nvme_cqe *cq = (struct nvme_cqe *)(ram + IOCQ_GPA);
	struct nvme_ctrl_stats st;

	ck_assert_uint_eq(create_cq(1, IOCQ_GPA, false, 0), 0);
	ck_assert_uint_eq(create_sq(1, 1, IOSQ_GPA), 0);
	e->opcode = NVME_CMD_READ;
	e->nsid = 1;
	e->prp1 = 0x100000;
	w32(NVME_REG_DBS + 2 * STRIDE, 1);
	w32(NVME_REG_DBS + 2 * STRIDE, 9999); /* out of range: not lvmm's to judge */
	w32(NVME_REG_DBS + 3 * STRIDE, 5);
	ck_assert_uint_eq(cq[0].status, 0); /* nothing posted by lvmm */
	nvme_ctrl_get_stats(ctrl, &st);
	ck_assert_uint_eq(st.reads, 0);
	ck_assert_uint_eq(st.doorbells >= 3, 1);
	/* no asynchronous error event was queued: an Async Event Request stays outstanding (an
	 * unbound queue's bad doorbell would complete it at once), the next command completes */
	{
		struct nvme_sqe *a = (struct nvme_sqe *)(ram + ASQ_GPA) + asq_tail;
		struct nvme_cqe *c = (struct nvme_cqe *)(ram + ACQ_GPA) + acq_head;

		memset(a, 0, sizeof(*a));
		a->opcode = NVME_ADMIN_ASYNC_EVENT;
		a->cid = 0x7777;
		asq_tail = (asq_tail + 1) % AQ_SIZE;
		w32(NVME_REG_DBS, asq_tail);
		ck_assert_uint_ne(c->status & 1, acq_phase);
		ck_assert_uint_eq(admin(NVME_ADMIN_IDENTIFY, 1, 0, ID_GPA, 0), 0);
		ck_assert_uint_ne(c->cid, 0x7777);
	}
	/* the same doorbell on a queue that does not exist does raise it */
	w32(NVME_REG_DBS + 2 * 3 * STRIDE, 1);
	{
		struct nvme_cqe *c = (struct nvme_cqe *)(ram + ACQ_GPA) + acq_head;

		ck_assert_uint_eq(c->status & 1, acq_phase);
		ck_assert_uint_eq(c->cid, 0x7777);
	}
}
END_TEST

/* Polled doorbells: no Doorbell Buffer Config offered or accepted; without the flag it is. */
START_TEST(test_no_dbbuf)
{
	struct nvme_id_ctrl *id = (struct nvme_id_ctrl *)(ram + ID_GPA);

	ck_assert_uint_eq(admin(NVME_ADMIN_IDENTIFY, 1, 0, ID_GPA, 0), 0);
	ck_assert_uint_eq(id->oacs & NVME_CTRL_OACS_DBBUF, 0);
	ck_assert_uint_eq(admin(NVME_ADMIN_DBBUF, 0, 0, 0x60000, 0x61000), NVME_SC_INVALID_OPCODE);
	nvme_ctrl_destroy(ctrl);
	make_ctrl(false);
	enable();
	ck_assert_uint_eq(admin(NVME_ADMIN_IDENTIFY, 1, 0, ID_GPA, 0), 0);
	ck_assert(id->oacs & NVME_CTRL_OACS_DBBUF);
	ck_assert_uint_eq(admin(NVME_ADMIN_DBBUF, 0, 0, 0x60000, 0x61000), 0);
	ck_assert_uint_eq(create_cq(1, IOCQ_GPA, false, 0), 0);
	ck_assert_uint_eq(create_sq(1, 1, IOSQ_GPA), 0);
	ck_assert_uint_eq(bound[0].dbbuf_dbs, 0x60000);
	ck_assert_uint_eq(bound[0].dbbuf_eis, 0x61000);
}
END_TEST

/* Eventfd doorbells: an SQ created before Doorbell Buffer Config (the Linux driver's order) is
 * accepted and bound by that command, from the tail lvmm saw, copied to its shadow slot; a bind
 * that then fails fails the command. */
START_TEST(test_bind_after_dbbuf)
{
	nvme_ctrl_destroy(ctrl);
	bind_needs_dbbuf = true;
	make_ctrl(false);
	enable();
	ck_assert_uint_eq(create_cq(1, IOCQ_GPA, false, 0), 0);
	ck_assert_uint_eq(create_sq(1, 1, IOSQ_GPA), 0);
	ck_assert_uint_eq(nbind, 0);
	w32(NVME_REG_DBS + 2 * STRIDE, 1); /* SQ 1's tail: nothing fetched by lvmm */
	ck_assert_uint_eq(admin(NVME_ADMIN_DBBUF, 0, 0, 0x60000, 0x61000), 0);
	ck_assert_uint_eq(nbind, 1);
	ck_assert_uint_eq(bound[0].sqid, 1);
	ck_assert_uint_eq(bound[0].cqid, 1);
	ck_assert_uint_eq(bound[0].dbbuf_dbs, 0x60000);
	ck_assert_uint_eq(bound[0].dbbuf_eis, 0x61000);
	ck_assert_uint_eq(*(uint32_t *)(ram + 0x60000 + 2 * STRIDE), 1);
	/* created after the buffer: bound at once */
	ck_assert_uint_eq(create_cq(2, IOCQ_GPA + 0x1000, false, 0), 0);
	ck_assert_uint_eq(create_sq(2, 2, IOSQ_GPA + 0x1000), 0);
	ck_assert_uint_eq(nbind, 2);
	/* after a reset the buffer is gone; a bind refused at Doorbell Buffer Config fails it */
	w32(NVME_REG_CC, 0);
	enable();
	ck_assert_uint_eq(create_cq(1, IOCQ_GPA, false, 0), 0);
	ck_assert_uint_eq(create_sq(1, 1, IOSQ_GPA), 0);
	ck_assert_uint_eq(nbind, 2);
	bind_fail = NVME_SC_INTERNAL;
	ck_assert_uint_eq(admin(NVME_ADMIN_DBBUF, 0, 0, 0x60000, 0x61000), NVME_SC_INTERNAL);
	ck_assert_uint_eq(nbind, 2);
}
END_TEST

/* doorbell=auto: a pair bound on pages is handed to redoorbell at each Doorbell Buffer Config
 * (with the buffer, the stride and its handle, which is the pair's from then on); hostile
 * buffers are refused before any pair moves; a pair that cannot move fails the command. */
START_TEST(test_redoorbell)
{
	uint16_t qid[4];
	uint32_t h[4];

	nvme_ctrl_destroy(ctrl);
	with_redoorbell = true;
	make_ctrl(false);
	enable();
	ck_assert_uint_eq(create_cq(1, IOCQ_GPA, false, 0), 0);
	ck_assert_uint_eq(create_sq(1, 1, IOSQ_GPA), 0);
	ck_assert_uint_eq(nbind, 1); /* bound at once, on pages */
	ck_assert_uint_eq(bound[0].dbbuf_dbs, 0);
	ck_assert_uint_eq(bound[0].dstrd, 10);
	/* hostile buffers: none, unaligned, outside RAM, wrapping */
	ck_assert_uint_eq(admin(NVME_ADMIN_DBBUF, 0, 0, 0, 0x61000), NVME_SC_INVALID_FIELD);
	ck_assert_uint_eq(admin(NVME_ADMIN_DBBUF, 0, 0, 0x60004, 0x61000), NVME_SC_INVALID_FIELD);
	ck_assert_uint_eq(admin(NVME_ADMIN_DBBUF, 0, 0, 0x60000, RAM_SIZE), NVME_SC_INVALID_FIELD);
	ck_assert_uint_eq(admin(NVME_ADMIN_DBBUF, 0, 0, ~0xfffULL, 0x61000), NVME_SC_INVALID_FIELD);
	ck_assert_uint_eq(nmoved, 0);
	ck_assert_uint_eq(admin(NVME_ADMIN_DBBUF, 0, 0, 0x60000, 0x70000), 0);
	ck_assert_uint_eq(nmoved, 1);
	ck_assert_uint_eq(moved[0].sqid, 1);
	ck_assert_uint_eq(moved[0].dbbuf_dbs, 0x60000);
	ck_assert_uint_eq(moved[0].dbbuf_eis, 0x70000);
	ck_assert_uint_eq(moved[0].dstrd, 10);
	ck_assert_uint_eq(moved[0].sq_depth, 16);
	ck_assert_uint_eq(nvme_ctrl_bound(ctrl, qid, h, 4), 1);
	ck_assert_uint_eq(h[0], 200);
	/* created after the buffer: bound with it, not moved */
	ck_assert_uint_eq(create_cq(2, IOCQ_GPA + 0x1000, false, 0), 0);
	ck_assert_uint_eq(create_sq(2, 2, IOSQ_GPA + 0x1000), 0);
	ck_assert_uint_eq(nbind, 2);
	ck_assert_uint_eq(bound[1].dbbuf_dbs, 0x60000);
	ck_assert_uint_eq(nmoved, 1);
	/* a second buffer: both pairs are offered it; a refusal fails the command */
	ck_assert_uint_eq(admin(NVME_ADMIN_DBBUF, 0, 0, 0x80000, 0x90000), 0);
	ck_assert_uint_eq(nmoved, 3);
	ck_assert_uint_eq(moved[2].dbbuf_dbs, 0x80000);
	moved_fail = NVME_SC_INVALID_FIELD;
	ck_assert_uint_eq(admin(NVME_ADMIN_DBBUF, 0, 0, 0x60000, 0x70000), NVME_SC_INVALID_FIELD);
	moved_fail = NVME_SC_INTERNAL;
	ck_assert_uint_eq(admin(NVME_ADMIN_DBBUF, 0, 0, 0x60000, 0x70000), NVME_SC_INTERNAL);
	/* a reset gives back each pair once, under the handle it has now */
	w32(NVME_REG_CC, 0);
	ck_assert_uint_eq(nunbind, 2);
	ck_assert(unbound[0] == 201 || unbound[0] == 202);
	ck_assert(unbound[1] == 201 || unbound[1] == 202);
	ck_assert_uint_ne(unbound[0], unbound[1]);
}
END_TEST

/* A backend that went away shows as Controller Fatal Status on the next CSTS read. */
START_TEST(test_cfs_when_gone)
{
	ck_assert_uint_eq(r32(NVME_REG_CSTS) & NVME_CSTS_CFS, 0);
	backend_alive = false;
	ck_assert_uint_eq(r32(NVME_REG_CSTS) & NVME_CSTS_CFS, NVME_CSTS_CFS);
}
END_TEST

/* The CMB is the backend's buffer: SQEs written at the CMB's GPA land there. */
START_TEST(test_external_cmb)
{
	uint64_t size;

	ck_assert_ptr_eq(nvme_ctrl_cmb(ctrl, &size), cmb);
	ck_assert_uint_eq(size, CMB_SIZE);
	ck_assert_uint_eq(r32(NVME_REG_CMBSZ) & NVME_CMBSZ_SQS, NVME_CMBSZ_SQS);
}
END_TEST

static Suite *nvme_bind_suite(void)
{
	Suite *s = suite_create("nvme_bind");
	TCase *t = tcase_create("bind");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, test_bind_on_create);
	tcase_add_test(t, test_unbind_paths);
	tcase_add_test(t, test_flr_unbinds_and_resets);
	tcase_add_test(t, test_lba_4k);
	tcase_add_test(t, test_bind_refusals);
	tcase_add_test(t, test_bound_doorbells_ignored);
	tcase_add_test(t, test_no_dbbuf);
	tcase_add_test(t, test_bind_after_dbbuf);
	tcase_add_test(t, test_redoorbell);
	tcase_add_test(t, test_cfs_when_gone);
	tcase_add_test(t, test_external_cmb);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return testutil_run_suite(nvme_bind_suite());
}
