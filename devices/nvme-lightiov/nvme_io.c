/* vNVMe NVM command set (Read, Write, Flush, Write Zeroes, Dataset Management) and PRP handling:
 * turns a checked command into byte offsets and host iovecs for the backend. */
#include <stdlib.h>
#include <string.h>

#include "nvme_int.h"

#define NVME_NSID_ALL 0xffffffffu

static uint16_t iov_add(struct nvme_ctrl *c, uint64_t gpa, uint64_t len, struct iovec *iov,
			unsigned maxiov, unsigned *n)
{
	uint8_t *p = gmem_ptr(c->gm, gpa, len);

	if (!p)
		return NVME_GENERIC(NVME_SC_DATA_XFER_ERROR);
	if (*n && (uint8_t *)iov[*n - 1].iov_base + iov[*n - 1].iov_len == p) {
		iov[*n - 1].iov_len += len; /* physically contiguous pages: one segment */
		return NVME_OK;
	}
	if (*n >= maxiov)
		return NVME_GENERIC(NVME_SC_INVALID_FIELD);
	iov[*n].iov_base = p;
	iov[*n].iov_len = len;
	(*n)++;
	return NVME_OK;
}

uint16_t nvme_prp_map(struct nvme_ctrl *c, uint64_t prp1, uint64_t prp2, uint64_t len,
		      struct iovec *iov, unsigned maxiov, unsigned *niov)
{
	const uint64_t page = NVME_CTRL_PAGE, mask = NVME_CTRL_PAGE - 1;
	uint64_t seg, rem, list;
	uint16_t st;

	*niov = 0;
	if (!len)
		return NVME_OK;
	if (len > NVME_CTRL_MAX_XFER)
		return NVME_GENERIC(NVME_SC_INVALID_FIELD);
	if (prp1 & 3)
		return NVME_GENERIC(NVME_SC_INVALID_PRP_OFFSET);
	if (!prp1)
		return NVME_GENERIC(NVME_SC_INVALID_FIELD);
	seg = page - (prp1 & mask);
	if (seg > len)
		seg = len;
	st = iov_add(c, prp1, seg, iov, maxiov, niov);
	rem = len - seg;
	if (st || !rem)
		return st;
	if (!prp2)
		return NVME_GENERIC(NVME_SC_INVALID_FIELD);
	if (rem <= page) {
		if (prp2 & mask)
			return NVME_GENERIC(NVME_SC_INVALID_PRP_OFFSET);
		return iov_add(c, prp2, rem, iov, maxiov, niov);
	}
	/* PRP2 points to a list; the last entry of a list page chains to the next page. */
	if (prp2 & 7)
		return NVME_GENERIC(NVME_SC_INVALID_PRP_OFFSET);
	list = prp2;
	while (rem) {
		uint64_t nent = (page - (list & mask)) / 8, i;
		uint64_t ent[NVME_CTRL_PAGE / 8];

		if (gmem_read(c->gm, list, ent, nent * 8))
			return NVME_GENERIC(NVME_SC_DATA_XFER_ERROR);
		for (i = 0; i < nent && rem; i++) {
			uint64_t e = ent[i];

			if (i == nent - 1 && rem > page) {
				if (!e)
					return NVME_GENERIC(NVME_SC_INVALID_FIELD);
				if (e & mask)
					return NVME_GENERIC(NVME_SC_INVALID_PRP_OFFSET);
				list = e;
				break;
			}
			if (!e)
				return NVME_GENERIC(NVME_SC_INVALID_FIELD);
			if (e & mask)
				return NVME_GENERIC(NVME_SC_INVALID_PRP_OFFSET);
			seg = rem < page ? rem : page;
			st = iov_add(c, e, seg, iov, maxiov, niov);
			if (st)
				return st;
			rem -= seg;
		}
	}
	return NVME_OK;
}

uint16_t nvme_prp_copy(struct nvme_ctrl *c, uint64_t prp1, uint64_t prp2, void *buf, uint64_t len,
		       bool to_guest)
{
	struct iovec iov[NVME_CTRL_MAX_IOV];
	unsigned n, i;
	uint8_t *p = buf;
	uint16_t st = nvme_prp_map(c, prp1, prp2, len, iov, NVME_CTRL_MAX_IOV, &n);

	if (st)
		return st;
	for (i = 0; i < n; i++) {
		if (to_guest)
			memcpy(iov[i].iov_base, p, iov[i].iov_len);
		else
			memcpy(p, iov[i].iov_base, iov[i].iov_len);
		p += iov[i].iov_len;
	}
	return NVME_OK;
}

/* LBA range check that cannot overflow. */
static bool lba_ok(const struct nvme_ctrl *c, uint64_t slba, uint64_t nlb)
{
	uint64_t blocks = c->p.size >> NVME_LBA_SHIFT;

	return slba < blocks && nlb <= blocks - slba;
}

static uint16_t io_dsm_ranges(struct nvme_ctrl *c, const struct nvme_sqe *cmd,
			      struct nvme_io_req *req)
{
	unsigned nr = (cmd->cdw10 & 0xff) + 1, i;
	struct nvme_dsm_range r[NVME_CTRL_MAX_DSM_RANGES];
	uint16_t st = nvme_prp_copy(c, cmd->prp1, cmd->prp2, r, (uint64_t)nr * sizeof(r[0]), false);

	if (st)
		return st;
	req->ranges = calloc(nr, sizeof(*req->ranges));
	if (!req->ranges)
		return NVME_GENERIC(NVME_SC_INTERNAL);
	for (i = 0; i < nr; i++) {
		if (!lba_ok(c, r[i].slba, r[i].nlb))
			return NVME_GENERIC(NVME_SC_LBA_RANGE);
		if (!r[i].nlb)
			continue;
		req->ranges[req->nranges].off = r[i].slba << NVME_LBA_SHIFT;
		req->ranges[req->nranges].len = (uint64_t)r[i].nlb << NVME_LBA_SHIFT;
		req->nranges++;
	}
	return NVME_OK;
}

/* Validates cmd and fills req; returns an NVMe status. */
static uint16_t io_prepare(struct nvme_ctrl *c, const struct nvme_sqe *cmd, struct nvme_io_req *req)
{
	uint64_t slba = (uint64_t)cmd->cdw11 << 32 | cmd->cdw10;
	uint64_t nlb = (cmd->cdw12 & 0xffff) + 1;

	if (NVME_SQE_FUSE(cmd->flags) || NVME_SQE_PSDT(cmd->flags))
		return NVME_GENERIC(NVME_SC_INVALID_FIELD);
	if (cmd->opcode == NVME_CMD_FLUSH) {
		if (cmd->nsid != 1 && cmd->nsid != NVME_NSID_ALL)
			return NVME_GENERIC(NVME_SC_INVALID_NS);
		req->op = NVME_IO_FLUSH;
		return NVME_OK;
	}
	if (cmd->opcode != NVME_CMD_READ && cmd->opcode != NVME_CMD_WRITE &&
	    cmd->opcode != NVME_CMD_WRITE_ZEROES && cmd->opcode != NVME_CMD_DSM)
		return NVME_GENERIC(NVME_SC_INVALID_OPCODE);
	if (cmd->nsid != 1)
		return NVME_GENERIC(NVME_SC_INVALID_NS);
	if (cmd->opcode != NVME_CMD_READ && c->p.readonly)
		return NVME_GENERIC(NVME_SC_NS_WRITE_PROTECTED);
	switch (cmd->opcode) {
	case NVME_CMD_READ:
	case NVME_CMD_WRITE:
		if (!lba_ok(c, slba, nlb))
			return NVME_GENERIC(NVME_SC_LBA_RANGE);
		req->op = cmd->opcode == NVME_CMD_READ ? NVME_IO_READ : NVME_IO_WRITE;
		req->fua = cmd->cdw12 & NVME_RW_FUA;
		req->off = slba << NVME_LBA_SHIFT;
		req->len = nlb << NVME_LBA_SHIFT;
		if (req->len > NVME_CTRL_MAX_XFER)
			return NVME_GENERIC(NVME_SC_INVALID_FIELD);
		return nvme_prp_map(c, cmd->prp1, cmd->prp2, req->len, req->iov, NVME_CTRL_MAX_IOV,
				    &req->niov);
	case NVME_CMD_WRITE_ZEROES:
		if (!lba_ok(c, slba, nlb))
			return NVME_GENERIC(NVME_SC_LBA_RANGE);
		req->op = NVME_IO_ZEROES;
		req->off = slba << NVME_LBA_SHIFT;
		req->len = nlb << NVME_LBA_SHIFT;
		return NVME_OK;
	default: /* NVME_CMD_DSM */
		req->op = NVME_IO_DISCARD;
		if (!(cmd->cdw11 & NVME_DSM_AD))
			return NVME_OK; /* only hints: nothing to do */
		return io_dsm_ranges(c, cmd, req);
	}
}

uint16_t nvme_io_exec(struct nvme_ctrl *c, struct nvme_sq *sq, const struct nvme_sqe *cmd)
{
	struct nvme_io_req *req = calloc(1, sizeof(*req));
	uint16_t st;

	if (!req)
		return NVME_GENERIC(NVME_SC_INTERNAL);
	st = io_prepare(c, cmd, req);
	if (st != NVME_OK || (req->op == NVME_IO_DISCARD && !req->nranges)) {
		free(req->ranges);
		free(req);
		return st;
	}
	req->ctrl = c;
	req->sqid = sq->qid;
	req->cid = cmd->cid;
	req->gen = c->gen;
	req->sqgen = sq->gen;
	switch (req->op) {
	case NVME_IO_READ:
		c->st.reads++;
		c->st.read_bytes += req->len;
		c->units_read += req->len >> NVME_LBA_SHIFT;
		break;
	case NVME_IO_WRITE:
		c->st.writes++;
		c->st.write_bytes += req->len;
		c->units_written += req->len >> NVME_LBA_SHIFT;
		break;
	case NVME_IO_FLUSH:
		c->st.flushes++;
		break;
	default:
		break;
	}
	sq->inflight++;
	c->inflight++;
	if (c->bops->submit(c->be, req) == 0)
		return NVME_NO_COMPLETE;
	sq->inflight--;
	c->inflight--;
	st = req->status;
	free(req->ranges);
	free(req);
	return st;
}

/* The memory backend: a plain buffer, synchronous. */
static int mem_submit(void *opaque, struct nvme_io_req *req)
{
	struct nvme_mem_backend *m = opaque;
	uint64_t off = req->off;
	unsigned i;

	req->status = NVME_OK;
	switch (req->op) {
	case NVME_IO_READ:
	case NVME_IO_WRITE:
		if (off > m->size || req->len > m->size - off) {
			req->status = NVME_GENERIC(NVME_SC_LBA_RANGE);
			break;
		}
		for (i = 0; i < req->niov; i++) {
			if (req->op == NVME_IO_READ)
				memcpy(req->iov[i].iov_base, m->data + off, req->iov[i].iov_len);
			else
				memcpy(m->data + off, req->iov[i].iov_base, req->iov[i].iov_len);
			off += req->iov[i].iov_len;
		}
		break;
	case NVME_IO_FLUSH:
		m->flushes++;
		break;
	case NVME_IO_ZEROES:
		if (off <= m->size && req->len <= m->size - off)
			memset(m->data + off, 0, req->len);
		break;
	case NVME_IO_DISCARD:
		for (i = 0; i < req->nranges; i++)
			if (req->ranges[i].off <= m->size &&
			    req->ranges[i].len <= m->size - req->ranges[i].off)
				memset(m->data + req->ranges[i].off, 0, req->ranges[i].len);
		break;
	}
	return 1;
}

const struct nvme_backend_ops nvme_mem_backend_ops = {
    .submit = mem_submit,
};
