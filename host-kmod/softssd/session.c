/* softssd's operations of a session: identify and stats, the DMA window, queue memory, queue
 * pairs and volumes, each request's arguments checked with a message naming the bad one. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "lightiov/abi.h"
#include "lightiov/check.h"
#include "lightiov/voltable.h"
#include "softssd/handover.h"
#include "softssd/server_int.h"
#include "softssd/volumes.h"

/* Takes fd i of the request (the caller owns it now). */
static int ssd_take_fd(struct ssd_call *c, unsigned i)
{
	int fd = c->fds[i];

	c->fds[i] = -1;
	return fd;
}

/* The session as the shared request rules see it. */
static struct lio_abi_session ssd_abi_session(const struct ssd_session *ss)
{
	return (struct lio_abi_session){.regions = ss->win.cr,
					.nr_regions = ss->win.n,
					.qmem = ss->qmem != NULL,
					.nqps = ss->nqps};
}

/* A refusal of the shared rules into the reply: its errno. */
static int ssd_abi_err(struct ssd_call *c, const char *op, int r, const struct lio_abi_err *e)
{
	lio_abi_msg(c->err, sizeof(c->err), op, e);
	return r;
}

/* ---- identify, stats ---- */

static int ssd_op_identify(struct ssd_call *c)
{
	struct lio_identify *id = (void *)c->out;

	memset(id, 0, sizeof(*id));
	ssd_volumes_identify(c->s->vols, id);
	id->abi_version = LIO_ABI_VERSION;
	id->lba_shift = c->s->lba_shift;
	id->max_qpairs = c->s->cfg->max_qpairs;
	id->qpairs_in_use = c->s->nqpairs;
	id->max_qdepth = LIO_MAX_QDEPTH;
	id->flags = LIO_ID_DB_POLL | LIO_ID_DB_EVENTFD | LIO_ID_QP_STATE | LIO_ID_DB_STRIDE;
	snprintf(id->name, sizeof(id->name), "%s", c->s->cfg->name);
	snprintf(id->model, sizeof(id->model), "%s", c->s->cfg->model->desc);
	c->outlen = sizeof(*id);
	return 0;
}

void ssd_session_counters(const struct ssd_session *ss, struct ssd_counters *t)
{
	const struct ssd_qp *qp;

	*t = ss->retired;
	for (qp = ss->qps; qp; qp = qp->next_in_owner)
		ssd_counters_add(t, &qp->ctr);
}

static int ssd_op_ssd_stats(struct ssd_call *c)
{
	struct lio_ssd_stats *lio_to = (void *)c->out;
	struct ssd_counters t = c->s->retired;
	const struct ssd_counters *lio_from = &t;
	const struct ssd_session *ss;

	for (ss = c->s->sessions; ss; ss = ss->next) {
		struct ssd_counters x;

		ssd_session_counters(ss, &x);
		ssd_counters_add(&t, &x);
	}
	memset(lio_to, 0, sizeof(*lio_to));
	LIO_COUNTERS(LIO_COUNTER_COPY)
	lio_to->sessions = c->s->nsessions;
	lio_to->qpairs = c->s->nqpairs;
	lio_to->uptime_ns = ssd_now_ns() - c->s->start_ns;
	c->outlen = sizeof(*lio_to);
	return 0;
}

static int ssd_op_session_list(struct ssd_call *c)
{
	const struct lio_session_list *in = c->in;
	struct lio_session_list *l = (void *)c->out;
	const struct ssd_session *ss;
	uint32_t i = 0, first = in->first;

	memset(l, 0, sizeof(*l));
	l->first = first;
	/* another user's sessions (pids, labels, traffic) are not a client's business */
	for (ss = c->s->sessions; ss; ss = ss->next) {
		struct lio_session_info *lio_to;
		struct ssd_counters t;
		const struct ssd_counters *lio_from = &t;

		if (!c->ss->admin && ss->uid != c->ss->uid)
			continue;
		l->total++;
		if (i++ < first || l->count >= LIO_SESSION_LIST_MAX)
			continue;
		lio_to = &l->s[l->count++];
		ssd_session_counters(ss, &t);
		lio_to->pid = ss->pid;
		lio_to->uid = ss->uid;
		lio_to->qpairs = ss->nqps;
		lio_to->volumes = ss->nvols;
		LIO_COUNTERS_SESSION(LIO_COUNTER_COPY)
		memcpy(lio_to->label, ss->label, sizeof(lio_to->label));
	}
	c->outlen = sizeof(*l);
	return 0;
}

/* ---- DMA window ---- */

void ssd_window_drop(struct ssd_session *ss)
{
	unsigned i;

	for (i = 0; i < ss->win.n; i++) {
		if (ss->win.nvme)
			nvme_pci_dma_del(ss->win.nvme, &ss->win.dma[i]);
		munmap(ss->win.host[i], ss->win.map_bytes[i]);
		close(ss->win_fd[i]);
	}
	memset(&ss->win, 0, sizeof(ss->win));
	ss->win_bytes = 0;
}

/*
 * Client memory must never fault the daemon: a SIGBUS in a worker would end every client's
 * storage. Only a shmem memfd (tmpfs) sealed against shrinking is taken: its pages cannot vanish
 * under the mapping (the seal), and a hole the client punches reads back as a fresh zero page.
 * hugetlbfs is refused: a hole punched there gives its huge page back to a pool the client can
 * drain, and the daemon's next access takes SIGBUS. A file of a mounted tmpfs cannot carry the
 * seal (only memfd_create makes sealable files), so its size limit cannot bite either.
 */
static int ssd_check_memfd(struct ssd_call *c, unsigned i, int fd, uint64_t end)
{
	struct statfs sfs;
	struct stat st;
	int seals;

	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || fstatfs(fd, &sfs)) {
		ssd_err(c, "dma-register: region %u: fd is not a memfd", i);
		return -EBADF;
	}
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
		ssd_err(c, "dma-register: region %u: memfd not sealed with F_SEAL_SHRINK", i);
		return -EPERM;
	}
	if (sfs.f_type == HUGETLBFS_MAGIC) {
		ssd_err(
		    c,
		    "dma-register: region %u: a hugetlb memfd (MFD_HUGETLB) is refused: its pages "
		    "can be taken away under the daemon",
		    i);
		return -EINVAL;
	}
	if (sfs.f_type != TMPFS_MAGIC) {
		ssd_err(c, "dma-register: region %u: fd is not a shmem memfd (file system 0x%lx)",
			i, (unsigned long)sfs.f_type);
		return -EINVAL;
	}
	if ((uint64_t)st.st_size < end) {
		ssd_err(c,
			"dma-register: region %u: memfd of %" PRIu64
			" bytes, region ends at %" PRIu64,
			i, (uint64_t)st.st_size, end);
		return -EINVAL;
	}
	return 0;
}

/* Pages of the mapping [p, p + len) that are in no memory yet, or -1 when unknown. The daemon's
 * first access to such a page allocates it, charged to the daemon's memory cgroup instead of the
 * VM's: a window its client populated (MADV_POPULATE_WRITE) costs the daemon nothing. */
static int64_t ssd_nonresident_pages(uint8_t *p, uint64_t len)
{
	static unsigned char vec[16384]; /* 64 MiB of pages per call; control thread only */
	uint64_t off, i, n = 0;

	for (off = 0; off < len;) {
		uint64_t chunk = len - off < sizeof(vec) * LIO_PAGE_SIZE
				     ? len - off
				     : sizeof(vec) * LIO_PAGE_SIZE;

		if (mincore(p + off, chunk, vec))
			return -1;
		for (i = 0; i < chunk / LIO_PAGE_SIZE; i++)
			n += !(vec[i] & 1);
		off += chunk;
	}
	return (int64_t)n;
}

static int ssd_op_dma_register(struct ssd_call *c)
{
	const struct lio_dma_window *w = c->in;
	struct ssd_session *ss = c->ss;
	struct lio_abi_session as = ssd_abi_session(ss);
	struct ssd_window nw = {0};
	struct lio_abi_err e;
	int nfd[LIO_MAX_REGIONS];
	uint64_t total = 0, nonres = 0, t0;
	unsigned i, j;
	int r;

	r = lio_abi_dma_window(w, &as, c->s->cfg->max_mem_client, &e);
	if (r)
		return ssd_abi_err(c, "dma-register", r, &e);
	if (c->nfds != w->nr_regions) {
		ssd_err(c, "dma-register: %u fds for %u regions", c->nfds, w->nr_regions);
		return -EINVAL;
	}
	for (i = 0; i < w->nr_regions; i++) {
		total += w->r[i].size;
		r = ssd_check_memfd(c, i, c->fds[i], w->r[i].fd_offset + w->r[i].size);
		if (r)
			return r;
	}
	for (i = 0; i < w->nr_regions; i++) {
		void *p = mmap(NULL, w->r[i].size, PROT_READ | PROT_WRITE, MAP_SHARED, c->fds[i],
			       (off_t)w->r[i].fd_offset);

		if (p == MAP_FAILED) {
			r = -errno;
			ssd_err(c, "dma-register: region %u: mmap: %s", i, strerror(errno));
			while (i--)
				munmap(nw.host[i], nw.map_bytes[i]);
			return r;
		}
		nw.host[i] = p;
		nw.map_bytes[i] = w->r[i].size;
		nw.cr[i].gpa = w->r[i].gpa;
		nw.cr[i].size = w->r[i].size;
	}
	nw.n = w->nr_regions;
	for (i = 0; i < nw.n; i++) {
		int64_t np = ssd_nonresident_pages(nw.host[i], nw.map_bytes[i]);

		if (np && c->s->cfg->require_resident) {
			ssd_err(c,
				"dma-register: region %u: %" PRId64 " of %" PRIu64
				" pages not populated (--require-resident: populate it first)",
				i, np, nw.map_bytes[i] / LIO_PAGE_SIZE);
			for (j = 0; j < nw.n; j++)
				munmap(nw.host[j], nw.map_bytes[j]);
			return -EFAULT;
		}
		if (np > 0)
			nonres += (uint64_t)np * LIO_PAGE_SIZE;
	}
	nw.nvme = c->s->cfg->nvme;
	t0 = ssd_now_ns();
	for (i = 0; nw.nvme && i < nw.n; i++) {
		/* the controller reaches the window: mapped at IOVAs, or locked and translated */
		r = nvme_pci_dma_add(nw.nvme, &nw.dma[i], nw.host[i], nw.map_bytes[i], c->err,
				     sizeof(c->err));
		if (r) {
			while (i--)
				nvme_pci_dma_del(nw.nvme, &nw.dma[i]);
			for (j = 0; j < nw.n; j++)
				munmap(nw.host[j], nw.map_bytes[j]);
			return r;
		}
	}
	if (nw.nvme)
		printf("%s: client %" PRIu64 ": DMA window of %" PRIu64 " KiB reachable by nvme %s "
		       "in %" PRIu64 " ms\n",
		       c->s->cfg->name, ss->owner, total >> 10, nw.nvme->name,
		       (ssd_now_ns() - t0) / 1000000);
	if (nonres)
		printf("%s: client %" PRIu64 " pid %d: DMA window of %" PRIu64 " MiB, %" PRIu64
		       " MiB not populated: what the daemon touches there is charged to it\n",
		       c->s->cfg->name, ss->owner, (int)ss->pid, total >> 20, nonres >> 20);
	for (i = 0; i < nw.n; i++)
		nfd[i] = ssd_take_fd(c, i);
	ssd_window_drop(ss);
	ss->win = nw;
	memcpy(ss->win_fd, nfd, sizeof(int) * nw.n);
	for (i = 0; i < nw.n; i++)
		ss->win_off[i] = w->r[i].fd_offset;
	ss->win_bytes = total;
	return 0;
}

/* ---- queue memory ---- */

static int ssd_op_qmem_alloc(struct ssd_call *c)
{
	struct lio_qmem *q = (void *)c->out;
	const struct lio_qmem *in = c->in;
	struct ssd_session *ss = c->ss;
	struct lio_abi_session as = ssd_abi_session(ss);
	struct lio_abi_err e;
	int fd, r;

	r = lio_abi_qmem(in, &as, &e);
	if (r)
		return ssd_abi_err(c, "qmem-alloc", r, &e);
	fd = memfd_create("lio-qmem", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	/* sealed: the client maps it but can never resize it under the daemon */
	if (fd < 0 || ftruncate(fd, (off_t)in->size) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) {
		r = -errno;
		ssd_err(c, "qmem-alloc: memfd of %" PRIu64 " bytes: %s", in->size, strerror(errno));
		if (fd >= 0)
			close(fd);
		return r;
	}
	ss->qmem = mmap(NULL, in->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ss->qmem_used = calloc(in->size / LIO_PAGE_SIZE, 1);
	if (ss->qmem == MAP_FAILED || !ss->qmem_used) {
		if (ss->qmem != MAP_FAILED)
			munmap(ss->qmem, in->size);
		ss->qmem = NULL;
		free(ss->qmem_used);
		ss->qmem_used = NULL;
		close(fd);
		ssd_err(c, "qmem-alloc: out of memory for %" PRIu64 " bytes", in->size);
		return -ENOMEM;
	}
	ss->qmem_fd = fd;
	ss->qmem_bytes = in->size;
	*q = *in;
	q->fd = -1;
	c->outlen = sizeof(*q);
	c->outfd = fd;
	return 0;
}

/* First fit of n pages in queue memory: the offset, or -1. */
static int64_t ssd_qmem_carve(struct ssd_session *ss, uint64_t bytes)
{
	uint64_t pages = ss->qmem_bytes / LIO_PAGE_SIZE,
		 n = (bytes + LIO_PAGE_SIZE - 1) / LIO_PAGE_SIZE;
	uint64_t i, run = 0;

	for (i = 0; ss->qmem && i < pages; i++) {
		run = ss->qmem_used[i] ? 0 : run + 1;
		if (run == n) {
			uint64_t first = i + 1 - n;

			memset(ss->qmem_used + first, 1, n);
			memset(ss->qmem + first * LIO_PAGE_SIZE, 0, n * LIO_PAGE_SIZE);
			return (int64_t)(first * LIO_PAGE_SIZE);
		}
	}
	return -1;
}

/* A hand-over's carving at off, as its predecessor made it: contents kept. 0, or -1 when it is
 * not inside queue memory, not page aligned or not free. */
static int64_t ssd_qmem_claim(struct ssd_session *ss, uint64_t off, uint64_t bytes)
{
	uint64_t n = (bytes + LIO_PAGE_SIZE - 1) / LIO_PAGE_SIZE, i;

	if (!ss->qmem || off % LIO_PAGE_SIZE || off > ss->qmem_bytes ||
	    n > (ss->qmem_bytes - off) / LIO_PAGE_SIZE)
		return -1;
	for (i = 0; i < n; i++)
		if (ss->qmem_used[off / LIO_PAGE_SIZE + i])
			return -1;
	memset(ss->qmem_used + off / LIO_PAGE_SIZE, 1, n);
	return (int64_t)off;
}

static void ssd_qmem_release(struct ssd_session *ss, uint64_t off, uint64_t bytes)
{
	memset(ss->qmem_used + off / LIO_PAGE_SIZE, 0, (bytes + LIO_PAGE_SIZE - 1) / LIO_PAGE_SIZE);
}

/* ---- queue pairs ---- */

/* Queue-memory carvings of a qp, kept for its destroy, and its request, for a hand-over. */
struct ssd_qp_ext {
	struct ssd_qp qp;
	int64_t sq_off, cq_off, db_off;
	uint32_t vol_id;
	struct lio_qp_create req;
};

static struct ssd_attached *ssd_find_vol(struct ssd_session *ss, uint32_t vol_id)
{
	unsigned i;

	for (i = 0; i < ss->nvols; i++)
		if (ss->vols[i].vol_id == vol_id)
			return &ss->vols[i];
	return NULL;
}

static bool ssd_is_eventfd(int fd)
{
	char p[64], l[64];
	ssize_t n;

	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	n = readlink(p, l, sizeof(l) - 1);
	if (n <= 0)
		return false;
	l[n] = 0;
	return !strcmp(l, "anon_inode:[eventfd]");
}

/* The host address of a guest-memory ring or slot lio_abi_qp_create found in the window. */
static void *ssd_gpa(struct ssd_call *c, const char *what, uint64_t gpa, uint64_t len)
{
	void *p = ssd_window_ptr(&c->ss->win, gpa, len);

	if (!p)
		ssd_err(c,
			"qp-create: %s 0x%" PRIx64 " (%" PRIu64 " bytes) is outside the DMA window",
			what, gpa, len);
	return p;
}

static uint32_t ssd_alloc_qp_id(struct ssd_server *s)
{
	uint32_t i, id;

	for (i = 0; i < LIO_MAX_QPAIRS; i++) {
		id = (s->next_qp_id + i) % LIO_MAX_QPAIRS + 1;
		if (!s->qp_by_id[id]) {
			s->next_qp_id = id;
			return id;
		}
	}
	return 0;
}

static void ssd_qp_release(struct ssd_server *s, struct ssd_session *ss, struct ssd_qp_ext *x)
{
	if (x->sq_off >= 0)
		ssd_qmem_release(ss, (uint64_t)x->sq_off,
				 (uint64_t)x->qp.sq_depth * sizeof(struct nvme_sqe));
	if (x->cq_off >= 0)
		ssd_qmem_release(ss, (uint64_t)x->cq_off,
				 (uint64_t)x->qp.cq_depth * sizeof(struct nvme_cqe));
	if (x->db_off >= 0)
		ssd_qmem_release(ss, (uint64_t)x->db_off, 2 * LIO_PAGE_SIZE);
	if (x->qp.id && s->qp_by_id[x->qp.id] == &x->qp)
		s->qp_by_id[x->qp.id] = NULL;
	ssd_qp_free(&x->qp); /* x->qp is the first member: frees x */
}

/* The shared rules, then softssd's own in the order abi.h gives: the fds' count, the limits
 * (this client's queue pairs, then the SSD's). The volume and the resources follow in
 * ssd_op_qp_create. */
static int ssd_qp_validate(struct ssd_call *c, const struct lio_qp_create *q,
			   const struct lio_qp_restore *rq, const char *op)
{
	const uint32_t served = LIO_QP_FLAGS_ALL & ~LIO_QP_DB_DIRECT;
	struct lio_abi_session as = ssd_abi_session(c->ss);
	struct lio_abi_err e;
	unsigned want;
	int r;

	/* the fds travel beside the struct (SCM_RIGHTS): its fd fields are not looked at */
	r = rq ? lio_abi_qp_restore(rq, &as, served, false, &e)
	       : lio_abi_qp_create(q, &as, served, false, &e);
	if (r)
		return ssd_abi_err(c, op, r, &e);
	want = !!(q->flags & LIO_QP_DB_EVENTFD) + !!(q->flags & LIO_QP_IRQ_ENABLED);
	if (c->nfds != want) {
		ssd_err(c,
			"%s: %u fds, expected %u (db eventfd if DB_EVENTFD, then irq "
			"eventfd if IRQ_ENABLED)",
			op, c->nfds, want);
		return -EINVAL;
	}
	if (c->ss->nqps >= c->s->cfg->max_qp_client) {
		ssd_err(c, "%s: this client has %u queue pairs, the limit", op, c->ss->nqps);
		return -EMFILE;
	}
	if (c->s->nqpairs >= c->s->cfg->max_qpairs) {
		ssd_err(c, "%s: the SSD serves %u queue pairs, its limit", op, c->s->nqpairs);
		return -ENOSPC;
	}
	return 0;
}

/* Queue memory of a queue pair: carved anew, or with ad (a hand-over) where its predecessor
 * had it, ad_flag saying whether it did. */
static int64_t ssd_qp_qmem(struct ssd_session *ss, uint64_t bytes, const struct ssd_ho_qp *ad,
			   uint32_t ad_flag, uint64_t ad_off)
{
	if (!ad)
		return ssd_qmem_carve(ss, bytes);
	return ad->flags & ad_flag ? ssd_qmem_claim(ss, ad_off, bytes) : -1;
}

/* QP_CREATE, or with rq QP_RESTORE: the same queue pair, starting quiesced at rq->st; with ad
 * too, a hand-over's: its id and queue memory as its predecessor had them, the doorbells as they
 * are. */
static int ssd_qp_make(struct ssd_call *c, const struct lio_qp_create *q,
		       const struct lio_qp_restore *rq, const struct ssd_ho_qp *ad)
{
	const char *op = rq ? "qp-restore" : "qp-create";
	struct lio_qp_create *out = (void *)c->out;
	struct ssd_session *ss = c->ss;
	struct ssd_server *s = c->s;
	struct ssd_attached *vol;
	struct ssd_qp_ext *x;
	struct ssd_qp *qp;
	uint64_t sqb = (uint64_t)q->sq_depth * sizeof(struct nvme_sqe);
	uint64_t cqb = (uint64_t)q->cq_depth * sizeof(struct nvme_cqe);
	unsigned fi = 0;
	int r;

	r = ssd_qp_validate(c, q, rq, op);
	if (r)
		return r;
	vol = ssd_find_vol(ss, q->vol_id);
	if (!vol) {
		ssd_err(c, "%s: volume %u is not attached to this session", op, q->vol_id);
		return -ENOENT;
	}
	x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	qp = &x->qp;
	x->sq_off = x->cq_off = x->db_off = -1;
	x->vol_id = q->vol_id;
	x->req = *q;
	x->req.db_fd = x->req.irq_fd = -1;
	qp->db_fd = qp->irq_fd = -1;
	qp->mode = q->mode;
	qp->flags = q->flags;
	qp->sqid = q->sqid;
	qp->cqid = q->cqid;
	qp->sq_depth = q->sq_depth;
	qp->cq_depth = q->cq_depth;
	qp->irq_coalesce = q->irq_coalesce;
	qp->win = &ss->win;
	qp->owner = ss;
	qp->write_through = !!(ss->flags & LIO_SESSION_WRITE_THROUGH);
	r = -EINVAL;
	if (q->flags & LIO_QP_SQ_QMEM) {
		x->sq_off = ssd_qp_qmem(ss, sqb, ad, SSD_HO_QP_SQ_OFF, ad ? ad->sq_off : 0);
		qp->sq = x->sq_off < 0 ? NULL : (void *)(ss->qmem + x->sq_off);
	} else {
		qp->sq = ssd_gpa(c, "sq_gpa", q->sq_gpa, sqb);
	}
	if (q->flags & LIO_QP_CQ_QMEM) {
		x->cq_off = ssd_qp_qmem(ss, cqb, ad, SSD_HO_QP_CQ_OFF, ad ? ad->cq_off : 0);
		qp->cq = x->cq_off < 0 ? NULL : (void *)(ss->qmem + x->cq_off);
	} else if (qp->sq) {
		qp->cq = ssd_gpa(c, "cq_gpa", q->cq_gpa, cqb);
	}
	if (!qp->sq || !qp->cq)
		goto fail_space;
	if (q->flags & LIO_QP_DB_POLL) {
		x->db_off =
		    ssd_qp_qmem(ss, 2 * LIO_PAGE_SIZE, ad, SSD_HO_QP_DB_OFF, ad ? ad->db_off : 0);
		if (x->db_off < 0)
			goto fail_space;
		qp->sq_tail_db = (uint32_t *)(ss->qmem + x->db_off);
		qp->cq_head_db = (uint32_t *)(ss->qmem + x->db_off + LIO_PAGE_SIZE);
	} else {
		/* the CQ head slot follows the SQ tail's at the controller's doorbell stride */
		unsigned words = q->flags & LIO_QP_DB_STRIDE ? 1u << q->db_stride : 1;

		qp->sq_tail_db =
		    ssd_gpa(c, "shadow_db_gpa", q->shadow_db_gpa, 4 * (uint64_t)words + 4);
		if (!qp->sq_tail_db)
			goto fail;
		qp->cq_head_db = qp->sq_tail_db + words;
		if (q->eventidx_gpa) {
			qp->eventidx =
			    ssd_gpa(c, "eventidx_gpa", q->eventidx_gpa, 4 * (uint64_t)words + 4);
			if (!qp->eventidx)
				goto fail;
		}
	}
	for (fi = 0; fi < c->nfds; fi++) {
		if (!ssd_is_eventfd(c->fds[fi])) {
			ssd_err(c, "%s: fd %u is not an eventfd", op, fi);
			r = -EBADF;
			goto fail;
		}
	}
	fi = 0;
	/* the daemon's own file status flags: a client that stops draining its irq eventfd, or
	 * empties the doorbell one first, never blocks a worker */
	if (q->flags & LIO_QP_DB_EVENTFD)
		qp->db_fd = ssd_take_fd(c, fi++);
	if (q->flags & LIO_QP_IRQ_ENABLED)
		qp->irq_fd = ssd_take_fd(c, fi++);
	if ((qp->db_fd >= 0 && fcntl(qp->db_fd, F_SETFL, O_NONBLOCK)) ||
	    (qp->irq_fd >= 0 && fcntl(qp->irq_fd, F_SETFL, O_NONBLOCK))) {
		ssd_err(c, "%s: eventfd: %s", op, strerror(errno));
		goto fail;
	}
	qp->chk.regions = ss->win.cr;
	qp->chk.nr_regions = ss->win.n;
	qp->chk.lba_shift = s->lba_shift;
	qp->chk.nsid = 1;
	qp->chk.mdts_bytes = LIO_MDTS_BYTES;
	/* both modes stay inside the attached volume: isolated SQEs carry window-relative LBAs
	 * (translated), passthrough ones absolute LBAs, checked against the same window without
	 * the translation; a software SSD can afford the check hardware could not make */
	qp->chk.lba_start = vol->lba_start;
	qp->chk.lba_count = vol->lba_count;
	if (q->mode == LIGHTIOV_MODE_ISOLATED)
		qp->chk.flags = LIO_CHECK_TRANSLATE;
	if ((q->flags & LIO_QP_READONLY) || (vol->flags & LIO_ATTACH_READONLY))
		qp->chk.flags |= LIO_CHECK_READONLY;
	if (rq) {
		qp->restored = true;
		qp->sq_head = rq->st.sq_head;
		qp->cq_tail = rq->st.cq_tail;
		qp->cq_head = rq->st.cq_head;
		qp->phase = (uint16_t)rq->st.phase;
		qp->last_tail = rq->st.sq_tail_db;
		if ((q->flags & LIO_QP_DB_POLL) && !ad) {
			/* fresh doorbell pages: the values the queue pair had */
			__atomic_store_n(qp->sq_tail_db, rq->st.sq_tail_db, __ATOMIC_RELEASE);
			__atomic_store_n(qp->cq_head_db, rq->st.cq_head_db, __ATOMIC_RELEASE);
		}
	}
	qp->lba_lo = qp->chk.lba_start;
	qp->lba_hi = qp->chk.lba_start + qp->chk.lba_count;
	if (ad) {
		qp->ctr = ad->ctr;
		if (s->qp_by_id[ad->qp_id]) {
			ssd_err(c, "%s: queue pair id %u given twice", op, ad->qp_id);
			r = -EEXIST;
			goto fail;
		}
	}
	qp->id = ad ? ad->qp_id : ssd_alloc_qp_id(s);
	if (!qp->id) {
		ssd_err(c, "%s: no free queue-pair id", op);
		r = -ENOSPC;
		goto fail;
	}
	r = ssd_qp_start(s->eng, qp);
	if (r) {
		ssd_err(c, "%s: out of memory", op);
		qp->id = 0;
		goto fail;
	}
	s->qp_by_id[qp->id] = qp;
	s->nqpairs++;
	qp->next_in_owner = ss->qps;
	ss->qps = qp;
	ss->nqps++;
	*out = *q;
	out->db_fd = out->irq_fd = -1;
	out->qp_id = qp->id;
	out->sq_off = x->sq_off >= 0 ? (uint64_t)x->sq_off : 0;
	out->cq_off = x->cq_off >= 0 ? (uint64_t)x->cq_off : 0;
	out->db_off = x->db_off >= 0 ? (uint64_t)x->db_off : 0;
	if (rq) {
		struct lio_qp_restore *ro = (void *)c->out;

		ro->st = rq->st;
		ro->st.qp_id = qp->id;
		c->outlen = sizeof(*ro);
	} else {
		c->outlen = sizeof(*out);
	}
	return 0;
fail_space:
	if (!c->err[0]) {
		ssd_err(c,
			"%s: queue memory of %" PRIu64 " bytes has no room for SQ %" PRIu64
			" + CQ %" PRIu64 " + doorbells",
			op, ss->qmem_bytes, sqb, cqb);
		r = -ENOSPC;
	}
fail:
	ssd_qp_release(s, ss, x);
	return r;
}

static int ssd_op_qp_create(struct ssd_call *c)
{
	return ssd_qp_make(c, c->in, NULL, NULL);
}

static int ssd_op_qp_restore(struct ssd_call *c)
{
	const struct lio_qp_restore *rq = c->in;

	return ssd_qp_make(c, &rq->qp, rq, NULL);
}

/* ---- hand-over (upgrade_give.c, upgrade_take.c) ---- */

void ssd_qp_handover(const struct ssd_qp *qp, struct ssd_ho_qp *rec)
{
	const struct ssd_qp_ext *x = (const struct ssd_qp_ext *)qp;

	rec->qp_id = qp->id;
	rec->rq.qp = x->req;
	rec->rq.st.qp_id = 0;
	rec->rq.st.timeout_ms = 0;
	rec->rq.st.flags = 0; /* the restore takes none */
	rec->rq.st.quiesce_ns = 0;
	/* a doorbell value out of range was ignored: saved as the queue pair acted on it, so that
	 * one guest's bad write cannot make its restore, and so the whole upgrade, fail */
	if (rec->rq.st.sq_tail_db >= qp->sq_depth)
		rec->rq.st.sq_tail_db = rec->rq.st.sq_head;
	if (rec->rq.st.cq_head_db >= qp->cq_depth)
		rec->rq.st.cq_head_db = rec->rq.st.cq_head;
	rec->sq_off = x->sq_off >= 0 ? (uint64_t)x->sq_off : 0;
	rec->cq_off = x->cq_off >= 0 ? (uint64_t)x->cq_off : 0;
	rec->db_off = x->db_off >= 0 ? (uint64_t)x->db_off : 0;
	rec->flags |= (x->sq_off >= 0 ? SSD_HO_QP_SQ_OFF : 0) |
		      (x->cq_off >= 0 ? SSD_HO_QP_CQ_OFF : 0) |
		      (x->db_off >= 0 ? SSD_HO_QP_DB_OFF : 0);
	ssd_counters_read(&rec->ctr, &qp->ctr);
}

int ssd_qp_adopt(struct ssd_call *c, const struct ssd_ho_qp *rec)
{
	return ssd_qp_make(c, &rec->rq.qp, &rec->rq, rec);
}

int ssd_qmem_adopt(struct ssd_call *c, int fd, uint64_t bytes)
{
	struct ssd_session *ss = c->ss;
	struct stat st;
	int seals = fcntl(fd, F_GET_SEALS);
	void *p;
	struct lio_qmem q = {.size = bytes};
	struct lio_abi_session none = {0};
	struct lio_abi_err e;

	if (lio_abi_qmem(&q, &none, &e) || fstat(fd, &st) || (uint64_t)st.st_size != bytes ||
	    seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW)) {
		ssd_err(c,
			"hand-over: queue memory of %" PRIu64
			" bytes: not a sealed memfd of that size",
			bytes);
		return -EINVAL;
	}
	p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		ssd_err(c, "hand-over: queue memory: mmap: %s", strerror(errno));
		return -ENOMEM;
	}
	ss->qmem_used = calloc(bytes / LIO_PAGE_SIZE, 1);
	if (!ss->qmem_used) {
		munmap(p, bytes);
		ssd_err(c, "hand-over: queue memory: out of memory");
		return -ENOMEM;
	}
	ss->qmem = p;
	ss->qmem_fd = fd;
	ss->qmem_bytes = bytes;
	return 0;
}

static struct ssd_qp *ssd_session_qp(struct ssd_session *ss, uint32_t id, struct ssd_qp ***prev)
{
	struct ssd_qp **pp;

	for (pp = &ss->qps; *pp; pp = &(*pp)->next_in_owner) {
		if ((*pp)->id == id) {
			if (prev)
				*prev = pp;
			return *pp;
		}
	}
	return NULL;
}

void ssd_qp_destroy(struct ssd_server *s, struct ssd_session *ss, struct ssd_qp **pp)
{
	struct ssd_qp *qp = *pp;

	*pp = qp->next_in_owner;
	ssd_qp_stop(qp);
	ssd_counters_add(&ss->retired, &qp->ctr);
	ss->nqps--;
	s->nqpairs--;
	ssd_qp_release(s, ss, (struct ssd_qp_ext *)qp);
}

static int ssd_op_qp_destroy(struct ssd_call *c)
{
	const struct lio_qp_ref *ref = c->in;
	struct ssd_qp **pp;

	if (!ssd_session_qp(c->ss, ref->qp_id, &pp)) {
		ssd_err(c, "qp-destroy: queue pair %u is not one of this session's", ref->qp_id);
		return -ENOENT;
	}
	ssd_qp_destroy(c->s, c->ss, pp);
	return 0;
}

static int ssd_op_qp_quiesce(struct ssd_call *c)
{
	const struct lio_qp_state *in = c->in;
	struct lio_qp_state *out = (void *)c->out;
	uint32_t ms = in->timeout_ms ? in->timeout_ms : LIO_QUIESCE_TIMEOUT_MS, inflight;
	struct lio_abi_err e;
	struct ssd_qp *qp;
	uint64_t t0;
	int r;

	r = lio_abi_qp_quiesce(in, &e);
	if (r)
		return ssd_abi_err(c, "qp-quiesce", r, &e);
	qp = ssd_session_qp(c->ss, in->qp_id, NULL);
	if (!qp) {
		ssd_err(c, "qp-quiesce: queue pair %u is not one of this session's", in->qp_id);
		return -ENOENT;
	}
	memset(out, 0, sizeof(*out));
	t0 = ssd_now_ns();
	r = ssd_qp_quiesce(qp, ms, out, &inflight);
	if (r) {
		ssd_err(c, "qp-quiesce: queue pair %u: %u commands still in flight after %u ms",
			qp->id, inflight, ms);
		return r;
	}
	out->qp_id = qp->id;
	out->timeout_ms = ms;
	out->quiesce_ns = ssd_now_ns() - t0;
	c->outlen = sizeof(*out);
	return 0;
}

static int ssd_op_qp_resume(struct ssd_call *c)
{
	const struct lio_qp_ref *ref = c->in;
	struct ssd_qp *qp = ssd_session_qp(c->ss, ref->qp_id, NULL);

	if (!qp) {
		ssd_err(c, "qp-resume: queue pair %u is not one of this session's", ref->qp_id);
		return -ENOENT;
	}
	if (ssd_qp_resume(qp)) {
		ssd_err(c, "qp-resume: queue pair %u is not quiesced", ref->qp_id);
		return -EINVAL;
	}
	return 0;
}

static int ssd_op_qp_stats(struct ssd_call *c)
{
	const struct lio_qp_ref *ref = c->in;
	struct lio_qp_stats *lio_to = (void *)c->out;
	/* counters of any queue pair for root (`lvmm ssd stats`), of a session of its own uid for
	 * another client: numbers, never data or addresses */
	struct ssd_qp *qp =
	    ref->qp_id && ref->qp_id <= LIO_MAX_QPAIRS ? c->s->qp_by_id[ref->qp_id] : NULL;
	const struct ssd_counters *lio_from;

	if (qp && !c->ss->admin && ((const struct ssd_session *)qp->owner)->uid != c->ss->uid)
		qp = NULL;
	if (!qp) {
		ssd_err(c, "qp-stats: no queue pair %u on this SSD", ref->qp_id);
		return -ENOENT;
	}
	lio_from = &qp->ctr;
	memset(lio_to, 0, sizeof(*lio_to));
	lio_to->qp_id = qp->id;
	lio_to->mode = qp->mode;
	LIO_COUNTERS(LIO_COUNTER_COPY_ONCE)
	c->outlen = sizeof(*lio_to);
	return 0;
}

/* Session-wide settings: write-through (the VM's volatile write cache off) reaches every queue
 * pair's worker at once; a write it already started keeps the mode it started with. */
static int ssd_op_session_set(struct ssd_call *c)
{
	const struct lio_session_set *in = c->in;
	struct lio_session_set *out = (void *)c->out;
	struct ssd_session *ss = c->ss;
	struct ssd_counters t;
	struct lio_abi_err e;
	struct ssd_qp *qp;
	int r;

	r = lio_abi_session_set(in, &e);
	if (r)
		return ssd_abi_err(c, "session-set", r, &e);
	ss->flags = (ss->flags & ~in->mask) | (in->flags & in->mask);
	for (qp = ss->qps; qp; qp = qp->next_in_owner)
		__atomic_store_n(&qp->write_through, !!(ss->flags & LIO_SESSION_WRITE_THROUGH),
				 __ATOMIC_RELAXED);
	ssd_session_counters(ss, &t);
	memset(out, 0, sizeof(*out));
	out->flags = ss->flags;
	out->syncs = t.syncs;
	c->outlen = sizeof(*out);
	return 0;
}

/* ---- volumes ---- */

/* The session as the volume manager sees it: its peer's uid, and whether that is root or the
 * daemon's own uid (who may reach every volume). */
static struct ssd_vol_who ssd_who(const struct ssd_session *ss)
{
	return (struct ssd_vol_who){.uid = ss->uid, .admin = ss->admin, .session = ss->owner};
}

static bool ssd_name_ok(struct ssd_call *c, const char *op, const char *name)
{
	if (memchr(name, 0, LIO_NAME_MAX) && lio_name_valid(name))
		return true;
	ssd_err(c, "%s: volume name '%.*s' is not 1..31 of [A-Za-z0-9._-]", op, LIO_NAME_MAX - 1,
		name);
	return false;
}

static int ssd_op_vol(struct ssd_call *c, uint32_t op)
{
	const struct lio_vol *v = c->in;
	const struct ssd_vol_who who = ssd_who(c->ss);
	static const char *const names[] = {[LIO_OP_VOL_CREATE] = "vol-create",
					    [LIO_OP_VOL_DELETE] = "vol-delete",
					    [LIO_OP_VOL_RESIZE] = "vol-resize"};

	if (!ssd_name_ok(c, names[op], v->name))
		return -EINVAL;
	if (op == LIO_OP_VOL_CREATE)
		return ssd_volumes_create_by(c->s->vols, v, &who, c->err, sizeof(c->err));
	if (op == LIO_OP_VOL_DELETE)
		return ssd_volumes_delete_by(c->s->vols, v, &who, c->err, sizeof(c->err));
	return ssd_volumes_resize_by(c->s->vols, v, &who, c->err, sizeof(c->err));
}

static int ssd_op_vol_list(struct ssd_call *c)
{
	struct lio_vol_list *l = (void *)c->out;
	const struct ssd_vol_who who = ssd_who(c->ss);
	int r;

	memcpy(l, c->in, sizeof(*l));
	r = ssd_volumes_list_by(c->s->vols, l, &who);
	if (r < 0)
		ssd_err(c, "vol-list: %s", strerror(-r));
	c->outlen = sizeof(*l);
	return r < 0 ? r : 0;
}

static int ssd_op_vol_attach(struct ssd_call *c)
{
	struct lio_vol_attach *a = (void *)c->out;
	struct ssd_session *ss = c->ss;
	const struct ssd_vol_who who = ssd_who(ss);
	int r;

	memcpy(a, c->in, sizeof(*a));
	if (ss->nvols >= LIO_MAX_ATTACHED) {
		ssd_err(c, "vol-attach: %u volumes attached, the limit per session", ss->nvols);
		return -EMFILE;
	}
	if (!(a->flags & LIO_ATTACH_ANON) && !ssd_name_ok(c, "vol-attach", a->name))
		return -EINVAL;
	if (a->flags & LIO_ATTACH_ANON)
		memset(a->name, 0, sizeof(a->name));
	r = ssd_volumes_attach_by(c->s->vols, a, ss->owner, &who, c->err, sizeof(c->err));
	if (r)
		return r;
	ss->vols[ss->nvols++] = (struct ssd_attached){
	    .vol_id = a->vol_id,
	    .flags = a->flags,
	    .lba_start = a->lba_start,
	    .lba_count = a->lba_count,
	};
	c->outlen = sizeof(*a);
	return 0;
}

static int ssd_op_vol_detach(struct ssd_call *c)
{
	const struct lio_vol_attach *a = c->in;
	struct ssd_session *ss = c->ss;
	struct ssd_attached *v = ssd_find_vol(ss, a->vol_id);
	const struct ssd_qp *qp;
	int r;

	if (!v) {
		ssd_err(c, "vol-detach: volume %u is not attached to this session", a->vol_id);
		return -ENOENT;
	}
	for (qp = ss->qps; qp; qp = qp->next_in_owner) {
		if (((const struct ssd_qp_ext *)qp)->vol_id == a->vol_id) {
			ssd_err(c, "vol-detach: volume %u serves queue pair %u", a->vol_id, qp->id);
			return -EBUSY;
		}
	}
	r = ssd_volumes_detach(c->s->vols, a->vol_id, ss->owner);
	if (r) {
		ssd_err(c, "vol-detach: volume %u: %s", a->vol_id, strerror(-r));
		return r;
	}
	*v = ss->vols[--ss->nvols];
	return 0;
}

/* ---- requests ---- */

const uint32_t ssd_in_size[LIO_OP_MAX] = {
    [LIO_OP_IDENTIFY] = 0,
    [LIO_OP_DMA_REGISTER] = sizeof(struct lio_dma_window),
    [LIO_OP_QMEM_ALLOC] = sizeof(struct lio_qmem),
    [LIO_OP_QP_CREATE] = sizeof(struct lio_qp_create),
    [LIO_OP_QP_DESTROY] = sizeof(struct lio_qp_ref),
    [LIO_OP_QP_STATS] = sizeof(struct lio_qp_ref),
    [LIO_OP_VOL_CREATE] = sizeof(struct lio_vol),
    [LIO_OP_VOL_DELETE] = sizeof(struct lio_vol),
    [LIO_OP_VOL_RESIZE] = sizeof(struct lio_vol),
    [LIO_OP_VOL_LIST] = sizeof(struct lio_vol_list),
    [LIO_OP_VOL_ATTACH] = sizeof(struct lio_vol_attach),
    [LIO_OP_VOL_DETACH] = sizeof(struct lio_vol_attach),
    [LIO_OP_SSD_STATS] = 0,
    [LIO_OP_SESSION_LIST] = sizeof(struct lio_session_list),
    [LIO_OP_SESSION_SET] = sizeof(struct lio_session_set),
    [LIO_OP_QP_QUIESCE] = sizeof(struct lio_qp_state),
    [LIO_OP_QP_RESUME] = sizeof(struct lio_qp_ref),
    [LIO_OP_QP_RESTORE] = sizeof(struct lio_qp_restore),
};

int ssd_dispatch(struct ssd_call *c, uint32_t op)
{
	if (op != LIO_OP_DMA_REGISTER && op != LIO_OP_QP_CREATE && op != LIO_OP_QP_RESTORE &&
	    c->nfds) {
		ssd_err(c, "op %u takes no fds (%u sent)", op, c->nfds);
		return -EINVAL;
	}
	switch (op) {
	case LIO_OP_IDENTIFY:
		return ssd_op_identify(c);
	case LIO_OP_DMA_REGISTER:
		return ssd_op_dma_register(c);
	case LIO_OP_QMEM_ALLOC:
		return ssd_op_qmem_alloc(c);
	case LIO_OP_QP_CREATE:
		return ssd_op_qp_create(c);
	case LIO_OP_QP_DESTROY:
		return ssd_op_qp_destroy(c);
	case LIO_OP_QP_STATS:
		return ssd_op_qp_stats(c);
	case LIO_OP_VOL_CREATE:
	case LIO_OP_VOL_DELETE:
	case LIO_OP_VOL_RESIZE:
		return ssd_op_vol(c, op);
	case LIO_OP_VOL_LIST:
		return ssd_op_vol_list(c);
	case LIO_OP_VOL_ATTACH:
		return ssd_op_vol_attach(c);
	case LIO_OP_VOL_DETACH:
		return ssd_op_vol_detach(c);
	case LIO_OP_SSD_STATS:
		return ssd_op_ssd_stats(c);
	case LIO_OP_SESSION_LIST:
		return ssd_op_session_list(c);
	case LIO_OP_SESSION_SET:
		return ssd_op_session_set(c);
	case LIO_OP_QP_QUIESCE:
		return ssd_op_qp_quiesce(c);
	case LIO_OP_QP_RESUME:
		return ssd_op_qp_resume(c);
	case LIO_OP_QP_RESTORE:
		return ssd_op_qp_restore(c);
	default:
		return -EINVAL;
	}
}
