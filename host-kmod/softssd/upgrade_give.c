/* softssd's upgrade, the old daemon's side: on its owner's request it quiesces every queue pair
 * and hands its sockets, memory, eventfds, volumes and queue states over, then exits. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "softssd/handover.h"
#include "softssd/server_int.h"
#include "softssd/volumes.h"

#define SSD_HO_QUIESCE_MS 5000u /* every queue pair together; past it the upgrade is refused */

/* A refusal or failure told to the successor: best effort, it may be gone. */
static void ssd_give_abort(int fd, int status, const char *why)
{
	struct ssd_ho_ack a = {.status = status, .pid = (uint32_t)getpid()};

	snprintf(a.err, sizeof(a.err), "%s", why);
	/* one try: a requester that does not read must not hold the control thread */
	ssd_ho_send(fd, SSD_HO_ABORT, &a, sizeof(a), NULL, 0, ssd_ho_deadline(0));
}

_Static_assert(sizeof(((struct ssd_ho_request *)0)->token) == SSD_UPGRADE_TOKEN_LEN,
	       "the request carries the whole token");

/* Why the requester may not have the sessions, or NULL. Every VM's memory goes to whoever asks,
 * so: on a connection that asked nothing before (a session's own socket, which lvmm's device
 * threads hold, cannot be turned into a successor), from root or the daemon's owner, naming its
 * own pid (it goes to systemd as MAINPID), with the token only that uid can read. */
static const char *ssd_give_refusal(const struct ssd_server *s, const struct ssd_session *req,
				    const struct ssd_ho_request *rq, int *status)
{
	uint8_t diff = 0;

	*status = -EPERM;
	if (req->nreq || req->nqps || req->win.n || req->nvols)
		return "a hand-over is asked on a fresh connection, as its first message";
	if (!req->admin)
		return "the requester is not root or the daemon's owner";
	if (rq->pid != (uint32_t)req->pid)
		return "the request names another process than the one asking";
	for (unsigned i = 0; i < sizeof(rq->token); i++)
		diff |= rq->token[i] ^ s->ho_token[i];
	return diff ? "wrong upgrade token" : NULL;
}

/* The successor's acknowledgement: 0, or its refusal (err says why). */
static int ssd_give_wait_ack(int fd, char *err, unsigned errlen)
{
	struct ssd_ho_rec rec;
	int r = ssd_ho_recv(fd, &rec, ssd_ho_deadline(SSD_HO_TIMEOUT_MS), err, errlen);

	if (!r && rec.kind != SSD_HO_ACK) {
		ssd_ho_close_fds(&rec);
		snprintf(err, errlen, "record kind %u where the acknowledgement belongs", rec.kind);
		return -EPROTO;
	}
	if (!r && rec.u.ack.status) {
		snprintf(err, errlen, "the new daemon refused: %.120s", rec.u.ack.err);
		return rec.u.ack.status;
	}
	return r;
}

static int ssd_give_session(struct ssd_server *s, int fd, struct ssd_session *ss, uint64_t dl,
			    char *err, unsigned errlen)
{
	struct ssd_ho_session r;
	int fds[SSD_HO_MAX_FDS];
	unsigned n = 0, i;

	memset(&r, 0, sizeof(r));
	r.pid = (uint32_t)ss->pid;
	r.uid = (uint32_t)ss->uid;
	r.owner = ss->owner;
	r.admin = ss->admin;
	r.flags = ss->flags;
	memcpy(r.label, ss->label, sizeof(r.label));
	r.label[sizeof(r.label) - 1] = 0;
	r.qmem_bytes = ss->qmem ? ss->qmem_bytes : 0;
	r.nqps = ss->nqps;
	r.win.nr_regions = ss->win.n;
	fds[n++] = ss->fd;
	for (i = 0; i < ss->win.n; i++) {
		r.win.r[i].gpa = ss->win.cr[i].gpa;
		r.win.r[i].size = ss->win.cr[i].size;
		/* the window was mapped at fd_offset; the mapping's offset is the record's */
		r.win.r[i].fd_offset = ss->win_off[i];
		r.win.r[i].fd = -1;
		fds[n++] = ss->win_fd[i];
	}
	if (ss->qmem)
		fds[n++] = ss->qmem_fd;
	r.nvols = ss->nvols;
	for (i = 0; i < ss->nvols; i++) {
		struct ssd_ho_vol *v = &r.vols[i];

		v->vol_id = ss->vols[i].vol_id;
		v->flags = ss->vols[i].flags;
		v->lba_start = ss->vols[i].lba_start;
		v->lba_count = ss->vols[i].lba_count;
		if (ssd_volumes_hold_name(s->vols, v->vol_id, ss->owner, v->name)) {
			snprintf(err, errlen, "client %" PRIu64 ": volume %u has no hold",
				 ss->owner, v->vol_id);
			return -ENOENT;
		}
	}
	ssd_counters_read(&r.retired, &ss->retired);
	return ssd_ho_send(fd, SSD_HO_SESSION, &r, sizeof(r), fds, n, dl);
}

static int ssd_give_server(struct ssd_server *s, int fd, uint64_t dl)
{
	const struct ssd_server_cfg *cfg = s->cfg;
	struct ssd_ho_server r;
	int fds[5] = {s->lfd, cfg->backing_fd, 1, 2, cfg->direct_fd};

	memset(&r, 0, sizeof(r));
	snprintf(r.name, sizeof(r.name), "%s", cfg->name);
	snprintf(r.model, sizeof(r.model), "%s", cfg->model->desc);
	r.capacity = cfg->capacity;
	r.max_mem_client = cfg->max_mem_client;
	r.next_owner = s->next_owner;
	r.start_ns = s->start_ns;
	r.lba_shift = s->lba_shift;
	r.workers = cfg->workers;
	r.max_clients = cfg->max_clients;
	r.max_qp_client = cfg->max_qp_client;
	r.max_qpairs = cfg->max_qpairs;
	r.allow_uid = (uint32_t)cfg->allow_uid;
	r.allow_gid = (uint32_t)cfg->allow_gid;
	r.seccomp = cfg->seccomp;
	r.flags = (cfg->direct_fd >= 0 ? SSD_HO_SRV_DIRECT : 0) |
		  (cfg->require_resident ? SSD_HO_SRV_RESIDENT : 0) |
		  (cfg->notify ? SSD_HO_SRV_NOTIFY : 0);
	r.next_qp_id = s->next_qp_id;
	r.pid = (uint32_t)getpid();
	ssd_counters_read(&r.retired, &s->retired);
	return ssd_ho_send(fd, SSD_HO_SERVER, &r, sizeof(r), fds, cfg->direct_fd >= 0 ? 5 : 4, dl);
}

/* Every queue pair but those its client had quiesced already: stopped, drained, each state in
 * st[] (in session order). 0, or -ETIMEDOUT naming the queue pair (*nq: how many were done). */
static int ssd_give_quiesce(struct ssd_server *s, struct ssd_session *req, struct ssd_ho_qp *st,
			    unsigned *nq, char *err, unsigned errlen)
{
	uint64_t dl = ssd_ho_deadline(SSD_HO_QUIESCE_MS);
	struct ssd_session *ss;
	struct ssd_qp *qp;

	*nq = 0;
	for (ss = s->sessions; ss; ss = ss->next) {
		if (ss == req)
			continue;
		for (qp = ss->qps; qp; qp = qp->next_in_owner) {
			struct ssd_ho_qp *r = &st[*nq];
			uint64_t now = ssd_now_ns();
			uint32_t left = now < dl ? (uint32_t)((dl - now) / 1000000u) + 1 : 1, infl;

			memset(r, 0, sizeof(*r));
			if (ssd_qp_is_quiesced(qp))
				r->flags = SSD_HO_QP_QUIESCED;
			if (ssd_qp_quiesce(qp, left, &r->rq.st, &infl)) {
				snprintf(err, errlen,
					 "queue pair %u: %u commands still in flight after %u ms",
					 qp->id, infl, SSD_HO_QUIESCE_MS);
				return -ETIMEDOUT;
			}
			ssd_qp_handover(qp, r);
			(*nq)++;
		}
	}
	return 0;
}

static void ssd_give_resume(struct ssd_server *s, struct ssd_session *req,
			    const struct ssd_ho_qp *st, unsigned nq)
{
	struct ssd_session *ss;
	struct ssd_qp *qp;
	unsigned i = 0;

	for (ss = s->sessions; ss && i < nq; ss = ss->next) {
		if (ss == req)
			continue;
		for (qp = ss->qps; qp && i < nq; qp = qp->next_in_owner, i++)
			if (!(st[i].flags & SSD_HO_QP_QUIESCED))
				ssd_qp_resume(qp);
	}
}

void ssd_upgrade_give(struct ssd_server *s, struct ssd_session *req, const void *buf, size_t len,
		      unsigned nfds, int trunc)
{
	const char *name = s->cfg->name;
	struct ssd_ho_rec rec;
	struct ssd_ho_qp *st = NULL;
	struct ssd_ho_end end = {0};
	struct ssd_session *ss;
	char err[LIO_ERR_MAX] = "", why[2 * LIO_ERR_MAX];
	uint64_t t0 = ssd_now_ns(), dl, quiesced;
	unsigned nq = 0, i;
	int r;

	r = ssd_ho_parse(buf, len, nfds, trunc, &rec, err, sizeof(err));
	if (!r && rec.kind != SSD_HO_REQUEST) {
		snprintf(err, sizeof(err), "hand-over: record kind %u where a request belongs",
			 rec.kind);
		r = -EPROTO;
	}
	if (r) {
		ssd_give_abort(req->fd, r, err);
		printf("%s: upgrade request of pid %d refused: %s\n", name, (int)req->pid, err);
		fflush(stdout);
		return;
	}
	{
		const char *no = ssd_give_refusal(s, req, &rec.u.req, &r);

		if (no) {
			snprintf(err, sizeof(err), "softssd %s: upgrade refused: %s", name, no);
			ssd_give_abort(req->fd, r, err);
			/* one line a second at most: refusals cost a client nothing to cause */
			if (!s->ho_last_ns || t0 - s->ho_last_ns >= 1000000000ull) {
				s->ho_last_ns = t0;
				printf("%s: upgrade request of pid %d uid %u refused: %s\n", name,
				       (int)req->pid, (unsigned)req->uid, no);
				fflush(stdout);
			}
			return;
		}
	}
	/* a --vfio daemon's controller state (its queues, DMA mappings) lives in this process */
	if (s->cfg->nvme) {
		snprintf(
		    err, sizeof(err),
		    "softssd %s: upgrade refused: a --vfio daemon cannot hand its controller over",
		    name);
		ssd_give_abort(req->fd, -EOPNOTSUPP, err);
		printf("%s: upgrade request of pid %d refused: --vfio\n", name, (int)req->pid);
		fflush(stdout);
		return;
	}
	printf("%s: upgrade: handing %u clients, %u queue pairs over to pid %u\n", name,
	       s->nsessions - 1, s->nqpairs, rec.u.req.pid);
	fflush(stdout);
	st = calloc(s->nqpairs + 1, sizeof(*st));
	if (!st) {
		snprintf(err, sizeof(err), "out of memory");
		r = -ENOMEM;
		goto fail;
	}
	/* the successor opens the volume table and starts its workers first: no queue pair
	 * waits for that */
	r = ssd_give_server(s, req->fd, ssd_ho_deadline(SSD_HO_TIMEOUT_MS));
	if (!r)
		r = ssd_give_wait_ack(req->fd, err, sizeof(err));
	if (r && !err[0])
		snprintf(err, sizeof(err), "sending: %s", strerror(-r));
	if (r)
		goto fail;
	end.quiesce_ns = ssd_now_ns();
	r = ssd_give_quiesce(s, req, st, &nq, err, sizeof(err));
	quiesced = ssd_now_ns();
	if (r)
		goto fail;
	dl = ssd_ho_deadline(SSD_HO_TIMEOUT_MS);
	for (ss = s->sessions, i = 0; ss && !r; ss = ss->next) {
		struct ssd_qp *qp;

		if (ss == req)
			continue;
		r = ssd_give_session(s, req->fd, ss, dl, err, sizeof(err));
		for (qp = ss->qps; qp && !r; qp = qp->next_in_owner, i++) {
			int fds[2];
			unsigned n = 0;

			if (qp->db_fd >= 0)
				fds[n++] = qp->db_fd;
			if (qp->irq_fd >= 0)
				fds[n++] = qp->irq_fd;
			r = ssd_ho_send(req->fd, SSD_HO_QP, &st[i], sizeof(st[i]), fds, n, dl);
		}
		end.nsessions++;
	}
	end.nqps = nq;
	if (!r)
		r = ssd_ho_send(req->fd, SSD_HO_END, &end, sizeof(end), NULL, 0, dl);
	if (r && !err[0])
		snprintf(err, sizeof(err), "sending: %s", strerror(-r));
	if (!r)
		r = ssd_give_wait_ack(req->fd, err, sizeof(err));
	if (r)
		goto fail;
	/* committed: the successor resumes once this process is gone (the connection's end);
	 * nothing here is torn down, the clients' sessions are its now */
	if (s->cfg->notify) {
		/* the service's main process changes here, before this one exits */
		snprintf(why, sizeof(why), "MAINPID=%u", rec.u.req.pid);
		ssd_notify(why);
	}
	printf("%s: upgrade: handed over to pid %u in %" PRIu64
	       " us (%u queue pairs quiesced in %" PRIu64 " us); exiting\n",
	       name, rec.u.req.pid, (ssd_now_ns() - t0) / 1000u, nq,
	       (quiesced - end.quiesce_ns) / 1000u);
	fflush(stdout);
	fflush(stderr);
	_exit(0);
fail:
	snprintf(why, sizeof(why), "softssd %s: upgrade failed, the old daemon serves on: %s", name,
		 err);
	why[LIO_ERR_MAX - 1] = 0;
	ssd_give_abort(req->fd, r < 0 ? r : -EPROTO, why);
	if (st)
		ssd_give_resume(s, req, st, nq);
	free(st);
	printf("%s: upgrade failed, serving on: %s\n", name, err);
	fflush(stdout);
}
