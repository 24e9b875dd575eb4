/* softssd's control thread: accepts clients on the SSD's socket (peer credentials checked), runs
 * each session's requests with their fds, enforces per-client limits and tears sessions down. */
#include "softssd/server.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "lightiov/check.h"
#include "lightiov/uapi.h"
#include "lightiov/voltable.h"
#include "nvme-lightiov/lio_client.h"
#include "softssd/qpair.h"
#include "softssd/volumes.h"

#define SSD_MAX_PAYLOAD 4096
#define SSD_MAX_RX_FDS	16
#define SSD_EV_LISTEN	((void *)1)
#define SSD_EV_SIGNAL	((void *)2)
#define SSD_MAX_REFUSED 64 /* refusals waiting to be told; past that, a plain close */

struct ssd_attached {
	uint32_t vol_id;
	uint32_t flags;
	uint64_t lba_start, lba_count;
};

struct ssd_session {
	int fd;
	pid_t pid;
	uid_t uid;
	uint64_t owner; /* the volume manager's tag for this session, never 0 */
	char label[LIO_NAME_MAX];
	struct ssd_window win;
	int win_fd[LIO_MAX_REGIONS];
	uint64_t win_bytes;
	int qmem_fd;
	uint8_t *qmem;
	uint64_t qmem_bytes;
	uint8_t *qmem_used; /* one byte per queue-memory page */
	struct ssd_attached vols[LIO_MAX_ATTACHED];
	unsigned nvols;
	struct ssd_qp *qps;
	unsigned nqps;
	struct ssd_counters retired; /* of its destroyed queue pairs */
	int refused;		     /* -errno: answers its first request with it, then ends */
	char why[LIO_ERR_MAX];
	struct ssd_session *next;
};

struct ssd_server {
	const struct ssd_server_cfg *cfg;
	struct ssd_volumes *vols;
	struct ssd_engine *eng;
	int lfd, sigfd, epfd;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	struct ssd_session *sessions;
	unsigned nsessions;
	struct ssd_session *refused; /* connections told why they are refused, then closed */
	unsigned nrefused;
	struct ssd_qp **qp_by_id; /* LIO_MAX_QPAIRS + 1 slots; 0 is never used */
	unsigned nqpairs;
	uint32_t next_qp_id;
	struct ssd_counters retired; /* of ended sessions */
	uint64_t start_ns, next_owner;
	uint64_t data_lba, data_lbas; /* the data area: the passthrough window */
	uint32_t lba_shift;	      /* the volume table's */
};

/* One request being served. */
struct ssd_call {
	struct ssd_server *s;
	struct ssd_session *ss;
	const void *in;
	uint32_t inlen;
	int *fds;
	unsigned nfds;
	uint8_t out[SSD_MAX_PAYLOAD];
	uint32_t outlen;
	int outfd; /* -1: none */
	char err[LIO_ERR_MAX];
};

static uint64_t ssd_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#define ssd_err(c, ...) snprintf((c)->err, sizeof((c)->err), __VA_ARGS__)

/* Takes fd i of the request (the caller owns it now). */
static int ssd_take_fd(struct ssd_call *c, unsigned i)
{
	int fd = c->fds[i];

	c->fds[i] = -1;
	return fd;
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
	id->flags = LIO_ID_DB_POLL | LIO_ID_DB_EVENTFD;
	snprintf(id->name, sizeof(id->name), "%s", c->s->cfg->name);
	snprintf(id->model, sizeof(id->model), "%s", c->s->cfg->model->desc);
	c->outlen = sizeof(*id);
	return 0;
}

static void ssd_session_counters(const struct ssd_session *ss, struct ssd_counters *t)
{
	const struct ssd_qp *qp;

	*t = ss->retired;
	for (qp = ss->qps; qp; qp = qp->next_in_owner)
		ssd_counters_add(t, &qp->ctr);
}

static int ssd_op_ssd_stats(struct ssd_call *c)
{
	struct lio_ssd_stats *st = (void *)c->out;
	struct ssd_counters t = c->s->retired;
	const struct ssd_session *ss;

	for (ss = c->s->sessions; ss; ss = ss->next) {
		struct ssd_counters x;

		ssd_session_counters(ss, &x);
		t.cmds += x.cmds;
		t.read_bytes += x.read_bytes;
		t.write_bytes += x.write_bytes;
		t.errors += x.errors;
		t.rejected += x.rejected;
		t.polls += x.polls;
		t.sleeps += x.sleeps;
		t.irqs += x.irqs;
	}
	memset(st, 0, sizeof(*st));
	st->cmds = t.cmds;
	st->read_bytes = t.read_bytes;
	st->write_bytes = t.write_bytes;
	st->errors = t.errors;
	st->rejected = t.rejected;
	st->polls = t.polls;
	st->sleeps = t.sleeps;
	st->irqs = t.irqs;
	st->sessions = c->s->nsessions;
	st->qpairs = c->s->nqpairs;
	st->uptime_ns = ssd_now_ns() - c->s->start_ns;
	c->outlen = sizeof(*st);
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
	l->total = c->s->nsessions;
	for (ss = c->s->sessions; ss; ss = ss->next, i++) {
		struct lio_session_info *si;
		struct ssd_counters t;

		if (i < first || l->count >= LIO_SESSION_LIST_MAX)
			continue;
		si = &l->s[l->count++];
		ssd_session_counters(ss, &t);
		si->pid = ss->pid;
		si->uid = ss->uid;
		si->qpairs = ss->nqps;
		si->volumes = ss->nvols;
		si->cmds = t.cmds;
		si->read_bytes = t.read_bytes;
		si->write_bytes = t.write_bytes;
		si->errors = t.errors;
		si->rejected = t.rejected;
		memcpy(si->label, ss->label, sizeof(si->label));
	}
	c->outlen = sizeof(*l);
	return 0;
}

/* ---- DMA window ---- */

static void ssd_window_drop(struct ssd_session *ss)
{
	unsigned i;

	for (i = 0; i < ss->win.n; i++) {
		munmap(ss->win.host[i], ss->win.map_bytes[i]);
		close(ss->win_fd[i]);
	}
	memset(&ss->win, 0, sizeof(ss->win));
	ss->win_bytes = 0;
}

/* A memfd the client cannot shrink under the daemon's mapping (a shrink would SIGBUS it). */
static int ssd_check_memfd(struct ssd_call *c, unsigned i, int fd, uint64_t end)
{
	struct stat st;
	int seals;

	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		ssd_err(c, "dma-register: region %u: fd is not a memfd", i);
		return -EBADF;
	}
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
		ssd_err(c, "dma-register: region %u: memfd not sealed with F_SEAL_SHRINK", i);
		return -EPERM;
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

static int ssd_op_dma_register(struct ssd_call *c)
{
	const struct lio_dma_window *w = c->in;
	struct ssd_session *ss = c->ss;
	struct ssd_window nw = {0};
	int nfd[LIO_MAX_REGIONS];
	uint64_t total = 0;
	unsigned i, j;
	int r;

	if (ss->nqps) {
		ssd_err(c, "dma-register: %u queue pairs exist; destroy them first", ss->nqps);
		return -EBUSY;
	}
	if (w->nr_regions < 1 || w->nr_regions > LIO_MAX_REGIONS) {
		ssd_err(c, "dma-register: nr_regions %u outside 1..%u", w->nr_regions,
			LIO_MAX_REGIONS);
		return -EINVAL;
	}
	if (c->nfds != w->nr_regions) {
		ssd_err(c, "dma-register: %u fds for %u regions", c->nfds, w->nr_regions);
		return -EINVAL;
	}
	for (i = 0; i < w->nr_regions; i++) {
		const struct lio_dma_region *r0 = &w->r[i];

		if (!r0->size || r0->size % LIO_PAGE_SIZE || r0->fd_offset % LIO_PAGE_SIZE ||
		    r0->gpa + r0->size < r0->gpa || r0->fd_offset + r0->size < r0->fd_offset) {
			ssd_err(c,
				"dma-register: region %u: gpa 0x%" PRIx64 " size 0x%" PRIx64
				" offset 0x%" PRIx64 " (page multiples, no wrap)",
				i, r0->gpa, r0->size, r0->fd_offset);
			return -EINVAL;
		}
		total += r0->size;
		if (total > c->s->cfg->max_mem_client || total < r0->size) {
			ssd_err(c,
				"dma-register: %" PRIu64 " MiB exceeds the %" PRIu64
				" MiB limit per client",
				total >> 20, c->s->cfg->max_mem_client >> 20);
			return -E2BIG;
		}
		for (j = 0; j < i; j++) {
			const struct lio_dma_region *o = &w->r[j];

			if (r0->gpa < o->gpa + o->size && o->gpa < r0->gpa + r0->size) {
				ssd_err(c, "dma-register: regions %u and %u overlap", j, i);
				return -EINVAL;
			}
		}
		r = ssd_check_memfd(c, i, c->fds[i], r0->fd_offset + r0->size);
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
	for (i = 0; i < nw.n; i++)
		nfd[i] = ssd_take_fd(c, i);
	ssd_window_drop(ss);
	ss->win = nw;
	memcpy(ss->win_fd, nfd, sizeof(int) * nw.n);
	ss->win_bytes = total;
	return 0;
}

/* ---- queue memory ---- */

static int ssd_op_qmem_alloc(struct ssd_call *c)
{
	struct lio_qmem *q = (void *)c->out;
	const struct lio_qmem *in = c->in;
	struct ssd_session *ss = c->ss;
	int fd, r;

	if (ss->qmem) {
		ssd_err(c, "qmem-alloc: this session has its queue memory already");
		return -EEXIST;
	}
	if (!in->size || in->size % LIO_PAGE_SIZE || in->size > SSD_MAX_QMEM) {
		ssd_err(c, "qmem-alloc: size %" PRIu64 " not a page multiple in 4K..64M", in->size);
		return -EINVAL;
	}
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

static void ssd_qmem_release(struct ssd_session *ss, uint64_t off, uint64_t bytes)
{
	memset(ss->qmem_used + off / LIO_PAGE_SIZE, 0, (bytes + LIO_PAGE_SIZE - 1) / LIO_PAGE_SIZE);
}

/* ---- queue pairs ---- */

/* Queue-memory carvings of a qp, kept for its destroy. */
struct ssd_qp_ext {
	struct ssd_qp qp;
	int64_t sq_off, cq_off, db_off;
	uint32_t vol_id;
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

/* Guest-memory ring or slot: [gpa, gpa + len) in the window, aligned to align. */
static void *ssd_gpa(struct ssd_call *c, const char *what, uint64_t gpa, uint64_t len,
		     uint64_t align)
{
	void *p = gpa % align ? NULL : ssd_window_ptr(&c->ss->win, gpa, len);

	if (!p)
		ssd_err(c,
			"qp-create: %s 0x%" PRIx64 " (%" PRIu64 " bytes) is not %" PRIu64
			"-aligned inside the DMA window",
			what, gpa, len, align);
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

static int ssd_qp_validate(struct ssd_call *c, const struct lio_qp_create *q)
{
	const uint32_t known = LIO_QP_SQ_QMEM | LIO_QP_CQ_QMEM | LIO_QP_DB_POLL |
			       LIO_QP_DB_EVENTFD | LIO_QP_READONLY | LIO_QP_IRQ_ENABLED;
	unsigned want = 0;

	if (q->mode != LIO_MODE_PASSTHROUGH && q->mode != LIO_MODE_ISOLATED) {
		ssd_err(c, "qp-create: mode %u is neither passthrough (1) nor isolated (2)",
			q->mode);
		return -EINVAL;
	}
	if (q->flags & ~known) {
		ssd_err(c, "qp-create: unknown flags 0x%x", q->flags & ~known);
		return -EINVAL;
	}
	if (!(q->flags & LIO_QP_DB_POLL) == !(q->flags & LIO_QP_DB_EVENTFD)) {
		ssd_err(c, "qp-create: flags 0x%x: exactly one of DB_POLL and DB_EVENTFD",
			q->flags);
		return -EINVAL;
	}
	if (q->sq_depth < 2 || q->sq_depth > LIO_MAX_QDEPTH || q->cq_depth < 2 ||
	    q->cq_depth > LIO_MAX_QDEPTH) {
		ssd_err(c, "qp-create: sq_depth %u / cq_depth %u outside 2..%u", q->sq_depth,
			q->cq_depth, LIO_MAX_QDEPTH);
		return -EINVAL;
	}
	if (!q->sqid || !q->cqid) {
		ssd_err(c, "qp-create: sqid %u / cqid %u: 0 is the admin queue", q->sqid, q->cqid);
		return -EINVAL;
	}
	if (!c->ss->win.n) {
		ssd_err(c, "qp-create: no DMA window registered");
		return -ENOENT;
	}
	if ((q->flags & (LIO_QP_SQ_QMEM | LIO_QP_CQ_QMEM | LIO_QP_DB_POLL)) && !c->ss->qmem) {
		ssd_err(c, "qp-create: flags 0x%x need queue memory (qmem-alloc first)", q->flags);
		return -ENOENT;
	}
	want = !!(q->flags & LIO_QP_DB_EVENTFD) + !!(q->flags & LIO_QP_IRQ_ENABLED);
	if (c->nfds != want) {
		ssd_err(c,
			"qp-create: %u fds, expected %u (db eventfd if DB_EVENTFD, then irq "
			"eventfd if IRQ_ENABLED)",
			c->nfds, want);
		return -EINVAL;
	}
	for (unsigned i = 0; i < c->nfds; i++) {
		if (!ssd_is_eventfd(c->fds[i])) {
			ssd_err(c, "qp-create: fd %u is not an eventfd", i);
			return -EBADF;
		}
	}
	if (c->ss->nqps >= c->s->cfg->max_qp_client) {
		ssd_err(c, "qp-create: this client has %u queue pairs, the limit", c->ss->nqps);
		return -EMFILE;
	}
	if (c->s->nqpairs >= c->s->cfg->max_qpairs) {
		ssd_err(c, "qp-create: the SSD serves %u queue pairs, its limit", c->s->nqpairs);
		return -ENOSPC;
	}
	return 0;
}

static int ssd_op_qp_create(struct ssd_call *c)
{
	const struct lio_qp_create *q = c->in;
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

	r = ssd_qp_validate(c, q);
	if (r)
		return r;
	vol = ssd_find_vol(ss, q->vol_id);
	if (!vol) {
		ssd_err(c, "qp-create: volume %u is not attached to this session", q->vol_id);
		return -ENOENT;
	}
	x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	qp = &x->qp;
	x->sq_off = x->cq_off = x->db_off = -1;
	x->vol_id = q->vol_id;
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
	r = -EINVAL;
	if (q->flags & LIO_QP_SQ_QMEM) {
		x->sq_off = ssd_qmem_carve(ss, sqb);
		qp->sq = x->sq_off < 0 ? NULL : (void *)(ss->qmem + x->sq_off);
	} else {
		qp->sq = ssd_gpa(c, "sq_gpa", q->sq_gpa, sqb, LIO_PAGE_SIZE);
	}
	if (q->flags & LIO_QP_CQ_QMEM) {
		x->cq_off = ssd_qmem_carve(ss, cqb);
		qp->cq = x->cq_off < 0 ? NULL : (void *)(ss->qmem + x->cq_off);
	} else if (qp->sq) {
		qp->cq = ssd_gpa(c, "cq_gpa", q->cq_gpa, cqb, LIO_PAGE_SIZE);
	}
	if (!qp->sq || !qp->cq)
		goto fail_space;
	if (q->flags & LIO_QP_DB_POLL) {
		x->db_off = ssd_qmem_carve(ss, 2 * LIO_PAGE_SIZE);
		if (x->db_off < 0)
			goto fail_space;
		qp->sq_tail_db = (uint32_t *)(ss->qmem + x->db_off);
		qp->cq_head_db = (uint32_t *)(ss->qmem + x->db_off + LIO_PAGE_SIZE);
	} else {
		qp->sq_tail_db = ssd_gpa(c, "shadow_db_gpa", q->shadow_db_gpa, 8, 4);
		if (!qp->sq_tail_db)
			goto fail;
		qp->cq_head_db = qp->sq_tail_db + 1;
		if (q->eventidx_gpa) {
			qp->eventidx = ssd_gpa(c, "eventidx_gpa", q->eventidx_gpa, 8, 4);
			if (!qp->eventidx)
				goto fail;
		}
	}
	/* the daemon's own file status flags: a client that stops draining its irq eventfd, or
	 * empties the doorbell one first, never blocks a worker */
	if (q->flags & LIO_QP_DB_EVENTFD)
		qp->db_fd = ssd_take_fd(c, fi++);
	if (q->flags & LIO_QP_IRQ_ENABLED)
		qp->irq_fd = ssd_take_fd(c, fi++);
	if ((qp->db_fd >= 0 && fcntl(qp->db_fd, F_SETFL, O_NONBLOCK)) ||
	    (qp->irq_fd >= 0 && fcntl(qp->irq_fd, F_SETFL, O_NONBLOCK))) {
		ssd_err(c, "qp-create: eventfd: %s", strerror(errno));
		goto fail;
	}
	qp->chk.regions = ss->win.cr;
	qp->chk.nr_regions = ss->win.n;
	qp->chk.lba_shift = s->lba_shift;
	qp->chk.nsid = 1;
	qp->chk.mdts_bytes = LIO_MDTS_BYTES;
	if (q->mode == LIO_MODE_ISOLATED) {
		qp->chk.lba_start = vol->lba_start;
		qp->chk.lba_count = vol->lba_count;
		qp->chk.flags = LIO_CHECK_TRANSLATE;
	} else {
		/* the guest is trusted with its LBA window, never with the volume table */
		qp->chk.lba_start = s->data_lba;
		qp->chk.lba_count = s->data_lbas;
	}
	if ((q->flags & LIO_QP_READONLY) || (vol->flags & LIO_ATTACH_READONLY))
		qp->chk.flags |= LIO_CHECK_READONLY;
	qp->lba_lo = qp->chk.lba_start;
	qp->lba_hi = qp->chk.lba_start + qp->chk.lba_count;
	qp->id = ssd_alloc_qp_id(s);
	if (!qp->id) {
		ssd_err(c, "qp-create: no free queue-pair id");
		r = -ENOSPC;
		goto fail;
	}
	r = ssd_qp_start(s->eng, qp);
	if (r) {
		ssd_err(c, "qp-create: out of memory");
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
	c->outlen = sizeof(*out);
	return 0;
fail_space:
	if (!c->err[0]) {
		ssd_err(c,
			"qp-create: queue memory of %" PRIu64 " bytes has no room for SQ %" PRIu64
			" + CQ %" PRIu64 " + doorbells",
			ss->qmem_bytes, sqb, cqb);
		r = -ENOSPC;
	}
fail:
	ssd_qp_release(s, ss, x);
	return r;
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

static void ssd_qp_destroy(struct ssd_server *s, struct ssd_session *ss, struct ssd_qp **pp)
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

static int ssd_op_qp_stats(struct ssd_call *c)
{
	const struct lio_qp_ref *ref = c->in;
	struct lio_qp_stats *st = (void *)c->out;
	/* counters of any queue pair (`lvmm ssd stats`): numbers, never data or addresses */
	struct ssd_qp *qp =
	    ref->qp_id && ref->qp_id <= LIO_MAX_QPAIRS ? c->s->qp_by_id[ref->qp_id] : NULL;
	struct ssd_counters t;

	if (!qp) {
		ssd_err(c, "qp-stats: no queue pair %u on this SSD", ref->qp_id);
		return -ENOENT;
	}
	ssd_counters_read(&t, &qp->ctr);
	memset(st, 0, sizeof(*st));
	st->qp_id = qp->id;
	st->mode = qp->mode;
	st->cmds = t.cmds;
	st->read_bytes = t.read_bytes;
	st->write_bytes = t.write_bytes;
	st->errors = t.errors;
	st->rejected = t.rejected;
	st->polls = t.polls;
	st->sleeps = t.sleeps;
	st->irqs = t.irqs;
	c->outlen = sizeof(*st);
	return 0;
}

/* ---- volumes ---- */

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
	static const char *const names[] = {[LIO_OP_VOL_CREATE] = "vol-create",
					    [LIO_OP_VOL_DELETE] = "vol-delete",
					    [LIO_OP_VOL_RESIZE] = "vol-resize"};

	if (!ssd_name_ok(c, names[op], v->name))
		return -EINVAL;
	if (op == LIO_OP_VOL_CREATE)
		return ssd_volumes_create(c->s->vols, v, c->err, sizeof(c->err));
	if (op == LIO_OP_VOL_DELETE)
		return ssd_volumes_delete(c->s->vols, v, c->err, sizeof(c->err));
	return ssd_volumes_resize(c->s->vols, v, c->err, sizeof(c->err));
}

static int ssd_op_vol_list(struct ssd_call *c)
{
	struct lio_vol_list *l = (void *)c->out;
	int r;

	memcpy(l, c->in, sizeof(*l));
	r = ssd_volumes_list(c->s->vols, l);
	if (r < 0)
		ssd_err(c, "vol-list: %s", strerror(-r));
	c->outlen = sizeof(*l);
	return r < 0 ? r : 0;
}

static int ssd_op_vol_attach(struct ssd_call *c)
{
	struct lio_vol_attach *a = (void *)c->out;
	struct ssd_session *ss = c->ss;
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
	r = ssd_volumes_attach(c->s->vols, a, ss->owner, c->err, sizeof(c->err));
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

static const uint32_t ssd_in_size[LIO_OP_MAX] = {
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
};

static int ssd_dispatch(struct ssd_call *c, uint32_t op)
{
	if (op != LIO_OP_DMA_REGISTER && op != LIO_OP_QP_CREATE && c->nfds) {
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
	default:
		return -EINVAL;
	}
}

static int ssd_reply(int fd, int status, const char *err, const void *out, uint32_t outlen,
		     int outfd)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct lio_msg_reply rep = {.magic = LIO_MAGIC, .status = status, .len = outlen};
	struct iovec iov[2] = {{&rep, sizeof(rep)}, {(void *)out, outlen}};
	struct msghdr m = {.msg_iov = iov, .msg_iovlen = outlen ? 2 : 1};
	ssize_t r;

	if (status < 0 && err)
		snprintf(rep.err, sizeof(rep.err), "%s", err);
	if (outfd >= 0) {
		struct cmsghdr *cm;

		memset(&ctl, 0, sizeof(ctl));
		m.msg_control = ctl.buf;
		m.msg_controllen = sizeof(ctl.buf);
		cm = CMSG_FIRSTHDR(&m);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &outfd, sizeof(int));
		rep.nfds = 1;
	}
	/* never waits: a client that does not read its replies is dropped */
	r = sendmsg(fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
	return r == (ssize_t)(sizeof(rep) + outlen) ? 0 : -1;
}

static void ssd_set_label(struct ssd_session *ss, const char *label)
{
	unsigned i;

	for (i = 0; i < LIO_NAME_MAX - 1 && label[i]; i++) {
		char ch = label[i];

		/* printed on the daemon's status lines: printable characters only */
		ss->label[i] = ch > ' ' && ch < 127 ? ch : '_';
	}
	ss->label[i] = 0;
}

/* One request of ss. Returns 0 to keep serving it, -1 when the session ends. */
static int ssd_session_request(struct ssd_server *s, struct ssd_session *ss)
{
	static struct ssd_call c; /* one request at a time, on this thread only */
	static uint8_t buf[sizeof(struct lio_msg_hdr) + SSD_MAX_PAYLOAD];
	union {
		char buf[CMSG_SPACE(sizeof(int) * SSD_MAX_RX_FDS)];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = {buf, sizeof(buf)};
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = ctl.buf,
			   .msg_controllen = sizeof(ctl.buf)};
	int fds[SSD_MAX_RX_FDS];
	struct lio_msg_hdr h;
	struct cmsghdr *cm;
	unsigned nfds = 0, i;
	int status, keep = 0;
	ssize_t r;

	r = recvmsg(ss->fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (r <= 0)
		return -1;
	for (cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm)) {
		unsigned n;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		n = (unsigned)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		for (i = 0; i < n; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			if (nfds < SSD_MAX_RX_FDS)
				fds[nfds++] = fd;
			else
				close(fd);
		}
	}
	memset(&c, 0, sizeof(c));
	c.s = s;
	c.ss = ss;
	c.fds = fds;
	c.nfds = nfds;
	c.outfd = -1;
	if ((size_t)r < sizeof(h)) {
		ssd_err(&c, "request of %zd bytes: shorter than its header", r);
		status = -EPROTO;
		goto reply;
	}
	memcpy(&h, buf, sizeof(h));
	if (h.magic != LIO_MAGIC) {
		ssd_err(&c, "request magic 0x%x, expected 0x%x", h.magic, LIO_MAGIC);
		status = -EPROTO;
		goto reply;
	}
	if (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
		ssd_err(&c, "request larger than %u bytes or %u fds", SSD_MAX_PAYLOAD,
			SSD_MAX_RX_FDS);
		status = -EMSGSIZE;
		goto reply;
	}
	if (h.op == 0 || h.op >= LIO_OP_MAX) {
		ssd_err(&c, "unknown op %u", h.op);
		status = -EOPNOTSUPP;
		goto reply;
	}
	if (h.len != (size_t)r - sizeof(h) || h.len != ssd_in_size[h.op] || h.nfds != nfds) {
		ssd_err(&c,
			"op %u: payload %u bytes (%zd received, %u expected), %u fds (%u received)",
			h.op, h.len, r - (ssize_t)sizeof(h), ssd_in_size[h.op], h.nfds, nfds);
		status = -EINVAL;
		goto reply;
	}
	if (h.op == LIO_OP_IDENTIFY && h.label[0]) {
		h.label[LIO_NAME_MAX - 1] = 0;
		ssd_set_label(ss, h.label);
	}
	c.in = buf + sizeof(h);
	c.inlen = h.len;
	status = ssd_dispatch(&c, h.op);
reply:
	for (i = 0; i < nfds; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	if (status < 0)
		c.outlen = 0;
	keep = ssd_reply(ss->fd, status, c.err, c.out, c.outlen, status < 0 ? -1 : c.outfd);
	return keep;
}

/* ---- sessions ---- */

static void ssd_status_line(struct ssd_server *s, struct ssd_session *ss, const char *what)
{
	struct ssd_counters t;

	ssd_session_counters(ss, &t);
	printf("%s: client %" PRIu64 " pid %d uid %u '%s' %s: %u qpairs, %u volumes, %" PRIu64
	       " cmds, %" PRIu64 " MiB read, %" PRIu64 " MiB written, %" PRIu64 " errors, %" PRIu64
	       " rejected; %u clients\n",
	       s->cfg->name, ss->owner, (int)ss->pid, (unsigned)ss->uid, ss->label, what, ss->nqps,
	       ss->nvols, t.cmds, t.read_bytes >> 20, t.write_bytes >> 20, t.errors, t.rejected,
	       s->nsessions);
	fflush(stdout);
}

static void ssd_session_end(struct ssd_server *s, struct ssd_session *ss)
{
	struct ssd_session **pp;
	unsigned i;

	for (pp = &s->sessions; *pp; pp = &(*pp)->next) {
		if (*pp == ss) {
			*pp = ss->next;
			break;
		}
	}
	s->nsessions--;
	epoll_ctl(s->epfd, EPOLL_CTL_DEL, ss->fd, NULL);
	/* queue pairs first: their workers stop touching the window before it is unmapped */
	while (ss->qps)
		ssd_qp_destroy(s, ss, &ss->qps);
	ssd_status_line(s, ss, "gone");
	ssd_counters_add(&s->retired, &ss->retired);
	for (i = 0; i < ss->nvols; i++)
		ssd_volumes_detach(s->vols, ss->vols[i].vol_id, ss->owner);
	ssd_window_drop(ss);
	if (ss->qmem) {
		munmap(ss->qmem, ss->qmem_bytes);
		close(ss->qmem_fd);
		free(ss->qmem_used);
	}
	close(ss->fd);
	free(ss);
}

static bool ssd_peer_allowed(const struct ssd_server *s, const struct ucred *cr)
{
	return cr->uid == 0 || cr->uid == geteuid() ||
	       (s->cfg->allow_uid != (uid_t)-1 && cr->uid == s->cfg->allow_uid) ||
	       (s->cfg->allow_gid != (gid_t)-1 && cr->gid == s->cfg->allow_gid);
}

/* A refused connection is told why in the reply to its first request: closing at once would
 * reset it before the client reads the reason. */
static void ssd_refuse(struct ssd_server *s, int fd, int status, const char *why)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP};
	struct ssd_session *ss;

	if (s->nrefused >= SSD_MAX_REFUSED || !(ss = calloc(1, sizeof(*ss)))) {
		close(fd);
		return;
	}
	ss->fd = fd;
	ss->refused = status;
	ss->qmem_fd = -1;
	snprintf(ss->why, sizeof(ss->why), "%s", why);
	ev.data.ptr = ss;
	if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev)) {
		close(fd);
		free(ss);
		return;
	}
	ss->next = s->refused;
	s->refused = ss;
	s->nrefused++;
}

static void ssd_refused_end(struct ssd_server *s, struct ssd_session *ss)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * SSD_MAX_RX_FDS)];
		struct cmsghdr align;
	} ctl;
	char junk[64];
	struct iovec iov = {junk, sizeof(junk)};
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = ctl.buf,
			   .msg_controllen = sizeof(ctl.buf)};
	struct ssd_session **pp;
	struct cmsghdr *cm;

	if (recvmsg(ss->fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC) > 0) {
		for (cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm)) {
			unsigned n = (unsigned)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int)), i;

			for (i = 0; cm->cmsg_type == SCM_RIGHTS && i < n; i++) {
				int fd;

				memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
				close(fd);
			}
		}
		ssd_reply(ss->fd, ss->refused, ss->why, NULL, 0, -1);
	}
	for (pp = &s->refused; *pp; pp = &(*pp)->next) {
		if (*pp == ss) {
			*pp = ss->next;
			break;
		}
	}
	s->nrefused--;
	epoll_ctl(s->epfd, EPOLL_CTL_DEL, ss->fd, NULL);
	close(ss->fd);
	free(ss);
}

static void ssd_accept(struct ssd_server *s)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	struct ssd_session *ss;
	struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP};
	char why[LIO_ERR_MAX];
	int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	if (fd < 0)
		return;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) || !ssd_peer_allowed(s, &cr)) {
		printf("%s: refused client pid %d uid %u gid %u (not root, uid %u, or allowed)\n",
		       s->cfg->name, (int)cr.pid, (unsigned)cr.uid, (unsigned)cr.gid,
		       (unsigned)geteuid());
		fflush(stdout);
		snprintf(why, sizeof(why), "softssd %s: uid %u may not use this SSD", s->cfg->name,
			 (unsigned)cr.uid);
		ssd_refuse(s, fd, -EACCES, why);
		return;
	}
	if (s->nsessions >= s->cfg->max_clients) {
		snprintf(why, sizeof(why), "softssd %s: %u clients connected, the limit",
			 s->cfg->name, s->nsessions);
		printf("%s: refused client pid %d: %u clients, the limit\n", s->cfg->name,
		       (int)cr.pid, s->nsessions);
		fflush(stdout);
		ssd_refuse(s, fd, -EUSERS, why);
		return;
	}
	ss = calloc(1, sizeof(*ss));
	if (!ss) {
		close(fd);
		return;
	}
	ss->fd = fd;
	ss->pid = cr.pid;
	ss->uid = cr.uid;
	ss->owner = ++s->next_owner;
	ss->qmem_fd = -1;
	snprintf(ss->label, sizeof(ss->label), "pid%d", (int)cr.pid);
	ev.data.ptr = ss;
	if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev)) {
		close(fd);
		free(ss);
		return;
	}
	ss->next = s->sessions;
	s->sessions = ss;
	s->nsessions++;
	printf("%s: client %" PRIu64 " pid %d uid %u connected; %u clients\n", s->cfg->name,
	       ss->owner, (int)cr.pid, (unsigned)cr.uid, s->nsessions);
	fflush(stdout);
}

/* ---- start-up ---- */

static int ssd_mkdirs(const char *sock_path, char *err, unsigned errlen)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)], *p;
	struct stat st;

	snprintf(dir, sizeof(dir), "%s", sock_path);
	p = strrchr(dir, '/');
	if (!p)
		return 0;
	*p = 0;
	for (p = dir + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(dir, 0755) && errno != EEXIST) {
			snprintf(err, errlen, "softssd: mkdir %s: %s", dir, strerror(errno));
			return -errno;
		}
		*p = '/';
	}
	/* the SSD directory: group members may reach the sockets, others may not list them */
	if (mkdir(dir, 0750) && errno != EEXIST) {
		snprintf(err, errlen, "softssd: mkdir %s: %s", dir, strerror(errno));
		return -errno;
	}
	if (stat(dir, &st) || !S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "softssd: %s is not a directory", dir);
		return -ENOTDIR;
	}
	return 0;
}

static int ssd_listen(struct ssd_server *s, char *err, unsigned errlen)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int r, probe;

	r = lio_sock_path(s->cfg->name, s->path, sizeof(s->path));
	if (r) {
		snprintf(err, errlen, "softssd %s: socket path too long", s->cfg->name);
		return r;
	}
	r = ssd_mkdirs(s->path, err, errlen);
	if (r)
		return r;
	memcpy(sa.sun_path, s->path, sizeof(s->path));
	probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		close(probe);
		snprintf(err, errlen, "softssd %s: %s is served by another daemon", s->cfg->name,
			 s->path);
		return -EADDRINUSE;
	}
	if (probe >= 0)
		close(probe);
	unlink(s->path); /* a stale socket of a daemon that died */
	s->lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s->lfd < 0 || bind(s->lfd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    chmod(s->path, 0660) || listen(s->lfd, 64)) {
		snprintf(err, errlen, "softssd %s: socket %s: %s", s->cfg->name, s->path,
			 strerror(errno));
		return -errno;
	}
	return 0;
}

/* sd_notify(READY=1) by hand: one datagram to $NOTIFY_SOCKET. */
static void ssd_notify_ready(void)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char msg[64];
	socklen_t len;
	int fd;

	if (!path || !*path || strlen(path) >= sizeof(sa.sun_path))
		return;
	memcpy(sa.sun_path, path, strlen(path));
	if (sa.sun_path[0] == '@')
		sa.sun_path[0] = 0;
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(path));
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	snprintf(msg, sizeof(msg), "READY=1\nMAINPID=%d", (int)getpid());
	sendto(fd, msg, strlen(msg), MSG_NOSIGNAL, (struct sockaddr *)&sa, len);
	close(fd);
}

static int ssd_start(struct ssd_server *s, char *err, unsigned errlen)
{
	const struct ssd_server_cfg *cfg = s->cfg;
	struct lio_identify id = {0};
	struct epoll_event ev = {.events = EPOLLIN};
	sigset_t set;
	int r;

	/* blocked before the workers start, so that they inherit the mask: only signalfd sees
	 * SIGTERM and friends */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	r = ssd_volumes_open(&s->vols, cfg->backing_fd, cfg->name, cfg->capacity, cfg->lba_shift,
			     true, err, errlen);
	if (r)
		return r;
	r = ssd_volumes_reclaim(s->vols);
	if (r < 0) {
		snprintf(err, errlen, "softssd %s: freeing anonymous volumes: %s", cfg->name,
			 strerror(-r));
		return r;
	}
	if (r > 0)
		printf("%s: freed %d anonymous volumes of clients of the previous daemon\n",
		       cfg->name, r);
	ssd_volumes_identify(s->vols, &id);
	s->lba_shift = ssd_volumes_lba_shift(s->vols);
	s->data_lba = LIO_VT_RESERVED_BYTES >> s->lba_shift;
	s->data_lbas = id.capacity_lbas;
	s->qp_by_id = calloc(LIO_MAX_QPAIRS + 1, sizeof(*s->qp_by_id));
	if (!s->qp_by_id)
		return -ENOMEM;
	r = ssd_engine_start(&s->eng, cfg->backing_fd, cfg->direct_fd, s->lba_shift, cfg->workers,
			     cfg->model, err, errlen);
	if (r)
		return r;
	r = ssd_listen(s, err, errlen);
	if (r)
		return r;
	s->sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (s->sigfd < 0 || s->epfd < 0) {
		snprintf(err, errlen, "softssd %s: signalfd/epoll: %s", cfg->name, strerror(errno));
		return -errno;
	}
	ev.data.ptr = SSD_EV_LISTEN;
	epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->lfd, &ev);
	ev.data.ptr = SSD_EV_SIGNAL;
	epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->sigfd, &ev);
	printf("%s: serving %s on %s: %" PRIu64 " LBAs of %u bytes, %u volumes, model %s, "
	       "%u workers\n",
	       cfg->name, "softssd", s->path, id.capacity_lbas, 1u << s->lba_shift, id.nr_volumes,
	       cfg->model->desc, cfg->workers);
	fflush(stdout);
	if (cfg->notify)
		ssd_notify_ready();
	return ssd_seccomp_install(cfg->seccomp, err, errlen);
}

int ssd_serve(const struct ssd_server_cfg *cfg)
{
	struct ssd_server s = {.cfg = cfg, .lfd = -1, .sigfd = -1, .epfd = -1};
	char err[256] = "";
	int r, status = 0;
	bool stop = false;

	s.start_ns = ssd_now_ns();
	r = ssd_start(&s, err, sizeof(err));
	if (r) {
		fprintf(stderr, "%s\n", err[0] ? err : strerror(-r));
		status = 1;
		stop = true;
	}
	while (!stop) {
		struct epoll_event ev[16];
		int n = epoll_wait(s.epfd, ev, 16, -1), i;

		for (i = 0; i < n && !stop; i++) {
			void *p = ev[i].data.ptr;

			if (p == SSD_EV_LISTEN) {
				ssd_accept(&s);
			} else if (p == SSD_EV_SIGNAL) {
				struct signalfd_siginfo si;

				if (read(s.sigfd, &si, sizeof(si)) == sizeof(si) &&
				    si.ssi_signo != SIGHUP)
					stop = true;
			} else {
				struct ssd_session *ss = p;
				int gone = 0;

				if (ss->refused) {
					ssd_refused_end(&s, ss);
					continue;
				}
				if (ev[i].events & EPOLLIN)
					gone = ssd_session_request(&s, ss);
				else if (ev[i].events & (EPOLLHUP | EPOLLERR | EPOLLRDHUP))
					gone = -1;
				if (gone)
					ssd_session_end(&s, ss);
			}
		}
	}
	while (s.sessions)
		ssd_session_end(&s, s.sessions);
	while (s.refused)
		ssd_refused_end(&s, s.refused);
	ssd_engine_stop(s.eng);
	if (s.lfd >= 0) {
		close(s.lfd);
		unlink(s.path);
	}
	if (s.vols)
		ssd_volumes_close(s.vols);
	if (s.sigfd >= 0)
		close(s.sigfd);
	if (s.epfd >= 0)
		close(s.epfd);
	free(s.qp_by_id);
	if (!status)
		printf("%s: stopped\n", cfg->name);
	return status;
}
