/* softssd --vfio: a checked, LBA-translated command of a client's queue pair run on the worker's
 * own I/O queue of the NVMe controller, its data pointers rebuilt as PRPs into the client's DMA
 * window (as the controller addresses it), and the client's CQE completed from the controller's. */
#include <errno.h>
#include <string.h>

#include "softssd/qpair_int.h"

/* Controller addresses of [gpa, gpa + len), one per NVMe page touched, appended to ent. false
 * when the range leaves the window or the entries would not fit. */
static bool ssd_nvme_seg(const struct ssd_window *win, uint64_t gpa, uint64_t len, uint64_t *ent,
			 unsigned *n)
{
	unsigned i;

	for (i = 0; i < win->n; i++) {
		const struct lio_check_region *r = &win->cr[i];
		uint64_t off;

		if (gpa < r->gpa || gpa - r->gpa > r->size || len > r->size - (gpa - r->gpa))
			continue;
		off = gpa - r->gpa;
		while (len) {
			uint64_t piece = NVME_PCI_PAGE - off % NVME_PCI_PAGE;

			if (piece > len)
				piece = len;
			if (*n >= NVME_PCI_PRP_MAX)
				return false;
			ent[(*n)++] = nvme_dma_addr(&win->dma[i], off);
			off += piece;
			len -= piece;
		}
		return true;
	}
	return false;
}

#define SSD_NVME_XFER NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_DATA_XFER_ERROR)

/* The data pointer of a read or write: 0 or the status to complete it with. */
static uint16_t ssd_nvme_prps(struct nvme_pci_queue *q, struct ssd_req *req, struct nvme_sqe *s)
{
	const struct lio_io *io = &req->io;
	uint64_t ent[NVME_PCI_PRP_MAX], list_addr, prp1, prp2;
	unsigned i, n = 0;
	uint64_t *list = nvme_pci_list(q, s->cid, &list_addr);

	for (i = 0; i < io->nsegs; i++)
		if (!ssd_nvme_seg(req->qp->win, io->segs[i].gpa, io->segs[i].len, ent, &n))
			return SSD_NVME_XFER;
	if (nvme_prp_build(ent, n, list, list_addr, &prp1, &prp2))
		return SSD_NVME_XFER;
	s->prp1 = prp1;
	s->prp2 = prp2;
	return 0;
}

/* The SQE for the controller: the client's command rebuilt from the checked lio_io (never from
 * the client's bytes), on namespace 1 at the device LBA. 0, 1 (nothing to send: done) or a
 * status. */
static int ssd_nvme_build(struct nvme_pci_queue *q, struct ssd_req *req, struct nvme_sqe *s)
{
	const struct lio_io *io = &req->io;
	struct nvme_dsm_range r[SSD_DSM_MAX_RANGES];
	uint64_t addr;
	unsigned nr = 0;
	uint16_t st;

	s->nsid = q->c->nsid;
	s->cdw10 = (uint32_t)io->dev_lba;
	s->cdw11 = (uint32_t)(io->dev_lba >> 32);
	switch (io->kind) {
	case LIO_IO_READ:
	case LIO_IO_WRITE:
		s->opcode = io->kind == LIO_IO_READ ? NVME_CMD_READ : NVME_CMD_WRITE;
		s->cdw12 = (io->nlb - 1) | (io->fua ? NVME_RW_FUA : 0);
		return ssd_nvme_prps(q, req, s);
	case LIO_IO_FLUSH:
		s->opcode = NVME_CMD_FLUSH;
		s->cdw10 = s->cdw11 = 0;
		return 0;
	case LIO_IO_ZEROES:
		if (!q->c->zeroes)
			return NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_INVALID_OPCODE) |
			       NVME_STATUS_DNR;
		s->opcode = NVME_CMD_WRITE_ZEROES;
		s->cdw12 = (io->nlb - 1) | (req->sync_after ? NVME_RW_FUA : 0);
		return 0;
	case LIO_IO_DSM:
		st = ssd_dsm_ranges(req, r, &nr);
		if (st)
			return st;
		/* deallocation is advisory: a controller without it keeps the data */
		if (!(io->dsm_attr & NVME_DSM_AD) || !q->c->dsm)
			return 1;
		/* the checked, translated ranges in the cid's own page of driver memory */
		memcpy(nvme_pci_list(q, s->cid, &addr), r, nr * sizeof(r[0]));
		s->opcode = NVME_CMD_DSM;
		s->prp1 = addr;
		s->cdw10 = nr - 1;
		s->cdw11 = NVME_DSM_AD;
		return 0;
	default:
		return NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_INVALID_OPCODE) | NVME_STATUS_DNR;
	}
}

void ssd_nvme_start(struct ssd_worker *w, struct ssd_req *req, uint64_t now)
{
	struct nvme_pci_queue *q = w->nq;
	struct nvme_sqe s = {0};
	int cid = nvme_pci_reserve(q), r;

	if (cid < 0) { /* the fetch keeps to the queue's room: not reached */
		req->status = NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_INTERNAL);
		ssd_req_done(w, req, now);
		return;
	}
	s.cid = (uint16_t)cid;
	r = ssd_nvme_build(q, req, &s);
	if (r) {
		nvme_pci_unreserve(q, s.cid);
		req->status = r == 1 ? 0 : (uint16_t)r;
		ssd_req_done(w, req, now);
		return;
	}
	nvme_pci_submit(q, &s, req);
	w->ring_inflight++;
}

struct ssd_nvme_reap {
	struct ssd_worker *w;
	uint64_t now;
};

static void ssd_nvme_done(void *ctx, const struct nvme_cqe *e, void *arg)
{
	struct ssd_nvme_reap *a = arg;
	struct ssd_req *req = ctx;

	/* the controller's status as the client's: type, code and DNR (More and the retry delay
	 * refer to the controller's logs, which the client cannot read) */
	req->status = e->status & (0x7ff | NVME_STATUS_DNR);
	a->w->ring_inflight--;
	ssd_req_done(a->w, req, a->now);
}

void ssd_nvme_reap(struct ssd_worker *w, uint64_t now, unsigned *work)
{
	struct ssd_nvme_reap a = {w, now};

	*work += nvme_pci_reap(w->nq, ssd_nvme_done, &a);
}
