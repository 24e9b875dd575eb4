/* The bench guest's NVMe driver core (nvme_drv.h). */
#include "nvme_drv.h"
#include "lightiov/nvmeq.h"
#include "lightiov/vcap.h"

uint32_t ndrv_cfg_read(struct nvme_drv *d, unsigned devfn, unsigned reg)
{
	if (d->ecam)
		return d->ecam[(devfn << 12 | (reg & 0xffc)) / 4];
	outl(0xcf8, 0x80000000u | devfn << 8 | (reg & 0xfc));
	return inl(0xcfc);
}

void ndrv_cfg_write(struct nvme_drv *d, unsigned devfn, unsigned reg, uint32_t v)
{
	if (d->ecam) {
		d->ecam[(devfn << 12 | (reg & 0xffc)) / 4] = v;
		return;
	}
	outl(0xcf8, 0x80000000u | devfn << 8 | (reg & 0xfc));
	outl(0xcfc, v);
}

bool ndrv_find(struct nvme_drv *d, unsigned *devfn, uint64_t ecam_gpa)
{
	unsigned slot, pass;

	d->ecam = NULL;
	for (pass = 0; pass < (ecam_gpa ? 2u : 1u); pass++) {
		if (pass)
			d->ecam = (volatile uint32_t *)ecam_gpa;
		for (slot = 0; slot < 32; slot++) {
			uint32_t id = ndrv_cfg_read(d, slot << 3, 0);

			if (id != 0xffffffff && ndrv_cfg_read(d, slot << 3, 8) >> 8 == 0x010802) {
				*devfn = slot << 3;
				return true;
			}
		}
	}
	d->ecam = NULL;
	return false;
}

unsigned ndrv_find_cap(struct nvme_drv *d, unsigned devfn, unsigned id)
{
	unsigned ptr = ndrv_cfg_read(d, devfn, 0x34) & 0xfc, n = 0;

	while (ptr && n++ < 16) {
		uint32_t hdr = ndrv_cfg_read(d, devfn, ptr);

		if ((hdr & 0xff) == id && (id != LIGHTIOV_VCAP_ID ||
					   ndrv_cfg_read(d, devfn, ptr + 4) == LIGHTIOV_VCAP_MAGIC))
			return ptr;
		ptr = (hdr >> 8) & 0xfc;
	}
	return 0;
}

static uint64_t cfg_read64(struct nvme_drv *d, unsigned devfn, unsigned reg)
{
	return ndrv_cfg_read(d, devfn, reg) | (uint64_t)ndrv_cfg_read(d, devfn, reg + 4) << 32;
}

bool ndrv_read_vcap(struct nvme_drv *d, unsigned devfn, struct ndrv_vcap *v)
{
	unsigned ptr = ndrv_find_cap(d, devfn, LIGHTIOV_VCAP_ID);

	if (!ptr)
		return false;
	v->mode = ndrv_cfg_read(d, devfn, ptr + 8);
	v->lba_start = cfg_read64(d, devfn, ptr + 16);
	v->lba_size = cfg_read64(d, devfn, ptr + 24);
	v->dma_size = cfg_read64(d, devfn, ptr + 40);
	return true;
}

void ndrv_place_bar0(struct nvme_drv *d, unsigned devfn, uint64_t gpa)
{
	ndrv_cfg_write(d, devfn, 4, 0);
	ndrv_cfg_write(d, devfn, 0x10, (uint32_t)gpa);
	ndrv_cfg_write(d, devfn, 0x14, (uint32_t)(gpa >> 32));
	ndrv_cfg_write(d, devfn, 4, 0x6);
	d->regs = (volatile uint8_t *)gpa;
}

uint32_t ndrv_rd32(struct nvme_drv *d, unsigned off)
{
	return *(volatile uint32_t *)(d->regs + off);
}

void ndrv_wr32(struct nvme_drv *d, unsigned off, uint32_t v)
{
	*(volatile uint32_t *)(d->regs + off) = v;
}

uint64_t ndrv_cap(struct nvme_drv *d)
{
	return ndrv_rd32(d, NVME_REG_CAP) | (uint64_t)ndrv_rd32(d, NVME_REG_CAP + 4) << 32;
}

void ndrv_zero(void *p, size_t n)
{
	volatile uint8_t *b = p;

	while (n--)
		*b++ = 0;
}

void ndrv_queue(struct nvme_drv *d, unsigned q, volatile void *sq, void *cq, uint32_t entries)
{
	struct ndrv_q *r = &d->q[q];

	ndrv_zero(cq, (size_t)entries * sizeof(struct nvme_cqe));
	r->sq = sq;
	r->cq = cq;
	r->entries = entries;
	r->sq_tail = r->cq_head = 0;
	r->phase = 1;
}

bool ndrv_enable(struct nvme_drv *d, void *asq, void *acq, uint32_t depth)
{
	uint64_t deadline = bench_ns() + 5000000000ULL;

	d->dstrd = NVME_CAP_DSTRD(ndrv_cap(d));
	d->shadow = false;
	ndrv_wr32(d, NVME_REG_CC, 0);
	while (ndrv_rd32(d, NVME_REG_CSTS) & NVME_CSTS_RDY)
		if (bench_ns() > deadline)
			return false;
	ndrv_queue(d, 0, asq, acq, depth);
	ndrv_wr32(d, NVME_REG_AQA, (depth - 1) << 16 | (depth - 1));
	ndrv_wr32(d, NVME_REG_ASQ, (uint32_t)(uint64_t)asq);
	ndrv_wr32(d, NVME_REG_ASQ + 4, (uint32_t)((uint64_t)asq >> 32));
	ndrv_wr32(d, NVME_REG_ACQ, (uint32_t)(uint64_t)acq);
	ndrv_wr32(d, NVME_REG_ACQ + 4, (uint32_t)((uint64_t)acq >> 32));
	ndrv_wr32(d, NVME_REG_CC, NVME_CC_EN | NVME_SQES_LOG2 << 16 | NVME_CQES_LOG2 << 20);
	while (!(ndrv_rd32(d, NVME_REG_CSTS) & NVME_CSTS_RDY))
		if (bench_ns() > deadline || (ndrv_rd32(d, NVME_REG_CSTS) & NVME_CSTS_CFS))
			return false;
	return true;
}

void ndrv_ring(struct nvme_drv *d, unsigned q, bool cq, uint32_t v)
{
	unsigned off = (2 * q + cq) * (4u << d->dstrd);

	if (d->shadow && q) {
		volatile uint32_t *db = (volatile uint32_t *)(d->dbs + off);
		volatile uint32_t *ei = (volatile uint32_t *)(d->eis + off);
		uint32_t old = *db;

		*db = v;
		/* the shadow store before the EventIdx load: the controller does the reverse */
		__asm__ volatile("mfence" ::: "memory");
		if (!nvmeq_need_event(*ei, v, old))
			return;
	}
	d->db_mmio_writes++;
	ndrv_wr32(d, NVME_REG_DBS + off, v);
}

void ndrv_place(struct nvme_drv *d, unsigned q, const struct nvme_sqe *c)
{
	struct ndrv_q *r = &d->q[q];
	volatile uint64_t *dst = (volatile uint64_t *)(volatile void *)&r->sq[r->sq_tail];
	uint64_t src[sizeof(*c) / 8];
	unsigned i;

	__builtin_memcpy(src, c, sizeof(src));
	for (i = 0; i < sizeof(*c) / 8; i++)
		dst[i] = src[i];
	nvmeq_step(&r->sq_tail, r->entries);
}

void ndrv_kick(struct nvme_drv *d, unsigned q)
{
	/* the entries before the tail that publishes them (an SQ may be in the CMB) */
	__asm__ volatile("mfence" ::: "memory");
	ndrv_ring(d, q, false, d->q[q].sq_tail);
}

uint16_t ndrv_submit(struct nvme_drv *d, unsigned q, struct nvme_sqe *c)
{
	c->cid = d->next_cid++;
	ndrv_place(d, q, c);
	ndrv_kick(d, q);
	return c->cid;
}

/* Takes the CQE at q's head if it is new, advancing the head (no doorbell). */
static bool take(struct nvme_drv *d, unsigned q, struct nvme_cqe *out)
{
	struct ndrv_q *r = &d->q[q];

	if (!nvmeq_cqe_take(&r->cq[r->cq_head], r->phase, out))
		return false;
	if (nvmeq_step(&r->cq_head, r->entries))
		r->phase ^= 1;
	return true;
}

uint16_t ndrv_reap(struct nvme_drv *d, unsigned q, uint32_t *dw0, uint64_t timeout_ms)
{
	uint64_t deadline = bench_ns() + timeout_ms * 1000000ULL;
	struct nvme_cqe e;

	while (!take(d, q, &e))
		if (bench_ns() > deadline)
			return 0xffff;
	if (dw0)
		*dw0 = e.dw0;
	ndrv_ring(d, q, true, d->q[q].cq_head);
	return e.status >> 1;
}

unsigned ndrv_reap_batch(struct nvme_drv *d, unsigned q, uint16_t *cids, unsigned max,
			 unsigned *errors)
{
	struct nvme_cqe e;
	unsigned n = 0;

	while (n < max && take(d, q, &e)) {
		if (e.status >> 1)
			(*errors)++;
		cids[n++] = e.cid;
	}
	if (n)
		ndrv_ring(d, q, true, d->q[q].cq_head);
	return n;
}

uint16_t ndrv_run(struct nvme_drv *d, unsigned q, struct nvme_sqe *c, uint32_t *dw0)
{
	ndrv_submit(d, q, c);
	return ndrv_reap(d, q, dw0, 5000) & 0x7ff;
}

struct nvme_sqe ndrv_cmd(uint8_t opcode)
{
	struct nvme_sqe c;

	ndrv_zero(&c, sizeof(c));
	c.opcode = opcode;
	return c;
}

void ndrv_prps(struct nvme_sqe *c, uint64_t buf, unsigned len, uint64_t *list)
{
	unsigned i;

	c->prp1 = buf;
	c->prp2 = 0;
	if (len > 2 * NDRV_PAGE) {
		for (i = 1; i * NDRV_PAGE < len; i++)
			list[i - 1] = buf + (uint64_t)i * NDRV_PAGE;
		c->prp2 = (uint64_t)list;
	} else if (len > NDRV_PAGE) {
		c->prp2 = buf + NDRV_PAGE;
	}
}
