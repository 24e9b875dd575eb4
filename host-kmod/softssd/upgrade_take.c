/* softssd's upgrade, the new daemon's side (`lvmm ssd take-over`): it asks the serving daemon
 * for its sessions, rebuilds them from the records as checked input, and serves once it exits. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "client/lio_client.h"
#include "softssd/handover.h"
#include "softssd/server_int.h"
#include "softssd/volumes.h"

struct ssd_taker {
	struct ssd_server s;
	struct ssd_server_cfg cfg;
	struct ssd_model model;
	char name[LIO_NAME_MAX];
	int fd;
	uint8_t *keep_quiesced; /* by queue-pair id: its client had quiesced it */
	uint64_t quiesce_ns;	/* when the old daemon began to quiesce (CLOCK_MONOTONIC) */
	int old_pidfd;		/* the old daemon's process */
	char err[LIO_ERR_MAX];
};

/* The serving daemon's upgrade token: what proves this process may ask for the sessions. */
static int ssd_take_token(struct ssd_taker *t, const char *sock, uint8_t *token, size_t len)
{
	char path[sizeof(t->s.path) + 16];
	ssize_t n = -1;
	int fd = -1;

	if (!ssd_token_path(sock, path, sizeof(path)))
		fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0)
		n = read(fd, token, len);
	if (fd < 0 && errno == ENOENT) {
		/* no token: no daemon serves that name (it writes one as it starts) */
		snprintf(t->err, sizeof(t->err),
			 "ssd %s: not served (no upgrade token beside %.60s)", t->name, sock);
		return -ENOENT;
	}
	if (n != (ssize_t)len) {
		snprintf(t->err, sizeof(t->err),
			 "ssd %s: upgrade token: %.60s (root or the owner only)", t->name,
			 n < 0 ? strerror(errno) : "short");
		if (fd >= 0)
			close(fd);
		return -EPERM;
	}
	close(fd);
	return 0;
}

static int ssd_take_connect(struct ssd_taker *t, const char *name)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct ssd_ho_request rq = {.pid = (uint32_t)getpid()};
	struct ucred cr;
	socklen_t crl = sizeof(cr);
	int r;

	if (lio_sock_path(name, sa.sun_path, sizeof(sa.sun_path))) {
		snprintf(t->err, sizeof(t->err), "ssd '%s': not a valid SSD name", name);
		return -EINVAL;
	}
	r = ssd_take_token(t, sa.sun_path, rq.token, sizeof(rq.token));
	if (r)
		return r;
	memcpy(t->s.ho_token, rq.token, sizeof(t->s.ho_token)); /* kept across the upgrade */
	t->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (t->fd < 0 || connect(t->fd, (struct sockaddr *)&sa, sizeof(sa))) {
		snprintf(t->err, sizeof(t->err), "ssd %s: %s: %s (is it served?)", name,
			 sa.sun_path, strerror(errno));
		return -errno;
	}
	/* what answers must be the daemon: root or this process's own uid */
	if (getsockopt(t->fd, SOL_SOCKET, SO_PEERCRED, &cr, &crl) ||
	    (cr.uid != 0 && cr.uid != geteuid())) {
		snprintf(t->err, sizeof(t->err), "ssd %s: %s is served by uid %u, not root or %u",
			 name, sa.sun_path, (unsigned)cr.uid, (unsigned)geteuid());
		return -EPERM;
	}
	return ssd_ho_send(t->fd, SSD_HO_REQUEST, &rq, sizeof(rq), NULL, 0,
			   ssd_ho_deadline(SSD_HO_TIMEOUT_MS));
}

/* The next record, of kind want (or, for want SERVER, an ABORT telling why not). */
static int ssd_take_recv(struct ssd_taker *t, struct ssd_ho_rec *rec, uint16_t want)
{
	int r = ssd_ho_recv(t->fd, rec, ssd_ho_deadline(SSD_HO_TIMEOUT_MS), t->err, sizeof(t->err));

	if (r)
		return r;
	if (rec->kind == SSD_HO_ABORT) {
		snprintf(t->err, sizeof(t->err), "%s", rec->u.ack.err);
		return rec->u.ack.status ? rec->u.ack.status : -ECANCELED;
	}
	if (rec->kind != want) {
		snprintf(t->err, sizeof(t->err), "hand-over: record kind %u where %u belongs",
			 rec->kind, want);
		ssd_ho_close_fds(rec);
		return -EPROTO;
	}
	return 0;
}

static int ssd_take_server(struct ssd_taker *t, struct ssd_ho_rec *rec)
{
	const struct ssd_ho_server *r = &rec->u.srv;
	struct ssd_server *s = &t->s;
	struct ssd_server_cfg *cfg = &t->cfg;
	int rc;

	if (strcmp(r->name, t->name)) {
		snprintf(t->err, sizeof(t->err), "hand-over: the daemon serves '%s', not '%s'",
			 r->name, t->name);
		return -EINVAL;
	}
	rc = ssd_model_parse(&t->model, r->model, t->err, sizeof(t->err));
	if (rc)
		return rc;
	cfg->name = t->name;
	cfg->model = &t->model;
	cfg->capacity = r->capacity;
	cfg->lba_shift = r->lba_shift;
	cfg->workers = r->workers;
	cfg->max_clients = r->max_clients;
	cfg->max_qp_client = r->max_qp_client;
	cfg->max_qpairs = r->max_qpairs;
	cfg->max_mem_client = r->max_mem_client;
	cfg->allow_uid = (uid_t)r->allow_uid;
	cfg->allow_gid = (gid_t)r->allow_gid;
	cfg->require_resident = !!(r->flags & SSD_HO_SRV_RESIDENT);
	cfg->notify = !!(r->flags & SSD_HO_SRV_NOTIFY);
	cfg->seccomp = (enum ssd_seccomp_mode)r->seccomp;
	{
		int acc = 0, type = 0;
		socklen_t l1 = sizeof(acc), l2 = sizeof(type);

		if (getsockopt(rec->fds[0], SOL_SOCKET, SO_ACCEPTCONN, &acc, &l1) ||
		    getsockopt(rec->fds[0], SOL_SOCKET, SO_TYPE, &type, &l2) || !acc ||
		    type != SOCK_SEQPACKET) {
			snprintf(t->err, sizeof(t->err),
				 "hand-over: the listener fd is not a listening seqpacket socket");
			return -EINVAL;
		}
	}
	s->lfd = rec->fds[0];
	cfg->backing_fd = rec->fds[1];
	cfg->direct_fd = r->flags & SSD_HO_SRV_DIRECT ? rec->fds[4] : -1;
	if (cfg->direct_fd >= 0) {
		/* O_DIRECT writes go there: it must be the backing itself */
		struct stat a, b;

		if (fstat(cfg->backing_fd, &a) || fstat(cfg->direct_fd, &b) ||
		    a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
			snprintf(t->err, sizeof(t->err),
				 "hand-over: the O_DIRECT fd is not the backing's file");
			return -EPROTO;
		}
	}
	/* the log goes on where the old daemon's went (the journal, a test's file) */
	dup2(rec->fds[2], 1);
	dup2(rec->fds[3], 2);
	close(rec->fds[2]);
	close(rec->fds[3]);
	s->cfg = cfg;
	s->next_owner = r->next_owner;
	s->start_ns = r->start_ns;
	s->next_qp_id = r->next_qp_id;
	s->retired = r->retired;
	/* the connection's end alone does not prove the old daemon gone (an abort closes it too).
	 * The record's pid, not the connection's: a listener keeps the credentials of the daemon
	 * that first listened on it, which after an upgrade is gone */
	t->old_pidfd = (int)syscall(SYS_pidfd_open, (pid_t)r->pid, 0);
	if (t->old_pidfd < 0) {
		snprintf(t->err, sizeof(t->err), "hand-over: old daemon pid %u: pidfd_open: %s",
			 r->pid, strerror(errno));
		return -ESRCH;
	}
	if (lio_sock_path(t->name, s->path, sizeof(s->path))) {
		snprintf(t->err, sizeof(t->err), "ssd %s: socket path too long", t->name);
		return -EINVAL;
	}
	rc = ssd_volumes_open(&s->vols, cfg->backing_fd, t->name, cfg->capacity, cfg->lba_shift,
			      false, t->err, sizeof(t->err));
	if (!rc && ssd_volumes_lba_shift(s->vols) != r->lba_shift) {
		snprintf(t->err, sizeof(t->err), "hand-over: LBA shift %u, the table's is %u",
			 r->lba_shift, ssd_volumes_lba_shift(s->vols));
		rc = -EINVAL;
	}
	if (!rc)
		rc = ssd_start_engine(s, t->err, sizeof(t->err));
	if (!rc)
		rc = ssd_start_events(s, t->err, sizeof(t->err));
	return rc;
}

static int ssd_take_session(struct ssd_taker *t, struct ssd_ho_rec *rec, struct ssd_session **out)
{
	const struct ssd_ho_session *r = &rec->u.sess;
	struct ssd_server *s = &t->s;
	struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP};
	static struct ssd_call c;
	struct ssd_session *ss = calloc(1, sizeof(*ss));
	unsigned fi = 1, i;
	int rc = 0;

	if (!ss) {
		snprintf(t->err, sizeof(t->err), "hand-over: out of memory");
		return -ENOMEM;
	}
	ss->fd = rec->fds[0];
	rec->fds[0] = -1;
	ss->pid = (pid_t)r->pid;
	ss->uid = (uid_t)r->uid;
	ss->admin = r->admin;
	{
		/* the client's socket says who it is: its credentials, not the record's */
		struct ucred cr;
		socklen_t crl = sizeof(cr), tl = sizeof(int);
		int type = 0;

		if (getsockopt(ss->fd, SOL_SOCKET, SO_TYPE, &type, &tl) || type != SOCK_SEQPACKET ||
		    getsockopt(ss->fd, SOL_SOCKET, SO_PEERCRED, &cr, &crl)) {
			snprintf(t->err, sizeof(t->err),
				 "hand-over: session %" PRIu64 ": its fd is not a client's socket",
				 r->owner);
			rc = -EPROTO;
		} else {
			ss->pid = cr.pid;
			ss->uid = cr.uid;
			ss->admin = cr.uid == 0 || cr.uid == geteuid();
		}
	}
	if (rc) {
		close(ss->fd);
		free(ss);
		return rc;
	}
	ss->owner = r->owner;
	ss->flags = r->flags;
	ss->qmem_fd = -1;
	ss->retired = r->retired;
	memcpy(ss->label, r->label, sizeof(ss->label));
	ss->next = s->sessions;
	s->sessions = ss;
	s->nsessions++;
	*out = ss;
	memset(&c, 0, sizeof(c));
	c.s = s;
	c.ss = ss;
	c.outfd = -1;
	/* the window goes through DMA_REGISTER's own checks and mapping */
	if (r->win.nr_regions) {
		c.in = &r->win;
		c.inlen = sizeof(r->win);
		c.fds = &rec->fds[fi];
		c.nfds = r->win.nr_regions;
		rc = ssd_dispatch(&c, LIO_OP_DMA_REGISTER);
		fi += r->win.nr_regions;
	}
	if (!rc && r->qmem_bytes) {
		rc = ssd_qmem_adopt(&c, rec->fds[fi], r->qmem_bytes);
		if (!rc)
			rec->fds[fi] = -1;
	}
	for (i = 0; !rc && i < r->nvols; i++) {
		struct lio_vol_attach a = {.flags = r->vols[i].flags,
					   .vol_id = r->vols[i].vol_id,
					   .lba_start = r->vols[i].lba_start,
					   .lba_count = r->vols[i].lba_count};

		memcpy(a.name, r->vols[i].name, sizeof(a.name));
		rc = ssd_volumes_adopt(s->vols, &a, ss->owner, c.err, sizeof(c.err));
		if (!rc)
			ss->vols[ss->nvols++] = (struct ssd_attached){.vol_id = a.vol_id,
								      .flags = a.flags,
								      .lba_start = a.lba_start,
								      .lba_count = a.lba_count};
	}
	if (rc) {
		snprintf(t->err, sizeof(t->err), "client %" PRIu64 ": %.120s", r->owner, c.err);
		return rc;
	}
	ev.data.ptr = ss;
	if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, ss->fd, &ev)) {
		snprintf(t->err, sizeof(t->err), "client %" PRIu64 ": epoll: %s", r->owner,
			 strerror(errno));
		return -errno;
	}
	return 0;
}

static int ssd_take_qp(struct ssd_taker *t, struct ssd_session *ss, struct ssd_ho_rec *rec)
{
	static struct ssd_call c;
	int rc;

	memset(&c, 0, sizeof(c));
	c.s = &t->s;
	c.ss = ss;
	c.fds = rec->fds;
	c.nfds = rec->nfds;
	c.outfd = -1;
	rc = ssd_qp_adopt(&c, &rec->u.qp);
	if (rc) {
		snprintf(t->err, sizeof(t->err), "client %" PRIu64 ": %.120s", ss->owner, c.err);
		return rc;
	}
	if (rec->u.qp.flags & SSD_HO_QP_QUIESCED)
		t->keep_quiesced[rec->u.qp.qp_id] = 1;
	return 0;
}

/* Records until END, each rebuilt as it comes. */
static int ssd_take_all(struct ssd_taker *t)
{
	static struct ssd_ho_rec rec;
	unsigned nsess = 0, nqps = 0;
	int rc;

	rc = ssd_take_recv(t, &rec, SSD_HO_SERVER);
	if (rc)
		return rc;
	rc = ssd_take_server(t, &rec);
	if (rc)
		return rc;
	/* ready for the sessions: the old daemon quiesces its queue pairs only now */
	rc = ssd_ho_send(t->fd, SSD_HO_ACK, &(struct ssd_ho_ack){.pid = (uint32_t)getpid()},
			 sizeof(struct ssd_ho_ack), NULL, 0, ssd_ho_deadline(SSD_HO_TIMEOUT_MS));
	if (rc) {
		snprintf(t->err, sizeof(t->err), "hand-over: acknowledging: %s", strerror(-rc));
		return rc;
	}
	for (;;) {
		struct ssd_session *ss;
		unsigned want, i;

		rc = ssd_ho_recv(t->fd, &rec, ssd_ho_deadline(SSD_HO_TIMEOUT_MS), t->err,
				 sizeof(t->err));
		if (rc)
			return rc;
		if (rec.kind == SSD_HO_END)
			break;
		if (rec.kind == SSD_HO_ABORT) {
			snprintf(t->err, sizeof(t->err), "%s", rec.u.ack.err);
			return rec.u.ack.status ? rec.u.ack.status : -ECANCELED;
		}
		if (rec.kind != SSD_HO_SESSION) {
			snprintf(t->err, sizeof(t->err),
				 "hand-over: record kind %u where a session belongs", rec.kind);
			return -EPROTO;
		}
		want = rec.u.sess.nqps;
		rc = ssd_take_session(t, &rec, &ss);
		ssd_ho_close_fds(&rec);
		nsess++;
		for (i = 0; !rc && i < want; i++) {
			rc = ssd_take_recv(t, &rec, SSD_HO_QP);
			if (!rc)
				rc = ssd_take_qp(t, ss, &rec);
			ssd_ho_close_fds(&rec);
			nqps++;
		}
		if (rc)
			return rc;
	}
	t->quiesce_ns = rec.u.end.quiesce_ns;
	if (rec.u.end.nsessions != nsess || rec.u.end.nqps != nqps) {
		snprintf(t->err, sizeof(t->err),
			 "hand-over: end record counts %u sessions, %u queue pairs; %u and %u came",
			 rec.u.end.nsessions, rec.u.end.nqps, nsess, nqps);
		return -EPROTO;
	}
	if (getenv("LVMM_SSD_UPGRADE_REFUSE")) { /* tests: a successor that fails at the end */
		snprintf(t->err, sizeof(t->err), "LVMM_SSD_UPGRADE_REFUSE is set");
		return -ECANCELED;
	}
	return 0;
}

/* After a refusal: the records still coming are read and dropped until the old daemon's ABORT
 * or its end, so that closing with them unread does not reset the connection before the old
 * one has read why. */
static void ssd_take_drain(struct ssd_taker *t)
{
	static struct ssd_ho_rec rec;
	uint64_t dl = ssd_ho_deadline(SSD_HO_TIMEOUT_MS);
	char ignored[LIO_ERR_MAX];

	while (t->fd >= 0) {
		int rc = ssd_ho_recv(t->fd, &rec, dl, ignored, sizeof(ignored));

		if (!rc)
			ssd_ho_close_fds(&rec);
		if (rc == -ECONNRESET || rc == -ETIMEDOUT || (!rc && rec.kind == SSD_HO_ABORT))
			return;
	}
}

/* After the last acknowledgement: the old daemon either exits (its process ends; then its end
 * of the connection closes) or gives up (ABORT, and it serves on). Only the first lets this one
 * serve. 0, or -ECANCELED with t->err set. */
static int ssd_take_wait_exit(struct ssd_taker *t)
{
	static struct ssd_ho_rec rec;
	struct pollfd pf[2] = {{.fd = t->old_pidfd, .events = POLLIN},
			       {.fd = t->fd, .events = POLLIN}};
	bool ended = false;

	for (;;) {
		/* once the connection ended the process must follow promptly; before, the old
		 * daemon has its whole exit to send an abort in, but not forever */
		int n = poll(pf, ended ? 1 : 2, (int)SSD_HO_TIMEOUT_MS * (ended ? 1 : 3)), rc;

		if (n < 0 && errno == EINTR)
			continue;
		if (n > 0 && (pf[0].revents & POLLIN))
			return 0;
		if (n <= 0) {
			snprintf(t->err, sizeof(t->err),
				 "the old daemon closed the hand-over but did not exit");
			return -ECANCELED;
		}
		rc = ssd_ho_recv(t->fd, &rec, ssd_ho_deadline(SSD_HO_TIMEOUT_MS), t->err,
				 sizeof(t->err));
		if (rc == -ECONNRESET) {
			ended = true;
			continue;
		}
		if (!rc)
			ssd_ho_close_fds(&rec);
		snprintf(t->err, sizeof(t->err), "the old daemon %s",
			 !rc && rec.kind == SSD_HO_ABORT ? "gave up: it serves on"
							 : "sent something after the end");
		return -ECANCELED;
	}
}

static void ssd_take_status(int fd, const char *line)
{
	if (fd < 0)
		return;
	if (write(fd, line, strlen(line)) < 0)
		return;
	close(fd);
}

int ssd_take_over(const char *name, int status_fd)
{
	static struct ssd_taker t;
	struct ssd_ho_ack ack = {.pid = (uint32_t)getpid()};
	struct ssd_session *ss;
	struct ssd_qp *qp;
	char line[2 * LIO_ERR_MAX];
	uint64_t t0, acked, resumed;
	int rc;

	t.s.lfd = t.s.sigfd = t.s.epfd = t.fd = t.old_pidfd = -1;
	snprintf(t.name, sizeof(t.name), "%s", name);
	ssd_process_setup();
	t.keep_quiesced = calloc(LIO_MAX_QPAIRS + 1, 1);
	rc = t.keep_quiesced ? ssd_take_connect(&t, name) : -ENOMEM;
	t0 = ssd_now_ns();
	if (!rc)
		rc = ssd_take_all(&t);
	if (rc) {
		/* nothing of the sessions is touched: the old daemon still owns them all */
		if (!t.err[0])
			snprintf(t.err, sizeof(t.err), "%s", strerror(-rc));
		ack.status = rc;
		snprintf(ack.err, sizeof(ack.err), "%s", t.err);
		if (t.fd >= 0)
			ssd_ho_send(t.fd, SSD_HO_ACK, &ack, sizeof(ack), NULL, 0,
				    ssd_ho_deadline(100));
		snprintf(line, sizeof(line), "error: %s\n", t.err);
		ssd_take_status(status_fd, line);
		ssd_take_drain(&t);
		fflush(stdout);
		_exit(1);
	}
	acked = ssd_now_ns();
	if (t.quiesce_ns > acked) /* the old daemon's clock value: kept within reason */
		t.quiesce_ns = acked;
	rc = ssd_ho_send(t.fd, SSD_HO_ACK, &ack, sizeof(ack), NULL, 0,
			 ssd_ho_deadline(SSD_HO_TIMEOUT_MS));
	if (!rc)
		rc = ssd_take_wait_exit(&t);
	if (rc) {
		snprintf(line, sizeof(line), "error: %s\n", t.err);
		ssd_take_status(status_fd, line);
		printf("%s: take-over by pid %d abandoned: %s\n", name, (int)getpid(), t.err);
		fflush(stdout);
		_exit(1);
	}
	close(t.fd);
	close(t.old_pidfd);
	for (ss = t.s.sessions; ss; ss = ss->next)
		for (qp = ss->qps; qp; qp = qp->next_in_owner)
			if (!t.keep_quiesced[qp->id])
				ssd_qp_resume(qp);
	resumed = ssd_now_ns();
	free(t.keep_quiesced);
	/* where the pause went: the records and their rebuild, then the old process's exit */
	printf("%s: pid %d took over %u clients, %u queue pairs; serving in %" PRIu64
	       " us, I/O paused %" PRIu64 " us (records and rebuild %" PRIu64
	       " us, the old daemon's exit %" PRIu64 " us)\n",
	       name, (int)getpid(), t.s.nsessions, t.s.nqpairs, (resumed - t0) / 1000u,
	       (resumed - t.quiesce_ns) / 1000u, (acked - t.quiesce_ns) / 1000u,
	       (resumed - acked) / 1000u);
	fflush(stdout);
	if (t.cfg.notify)
		ssd_notify_ready();
	snprintf(line, sizeof(line), "ok %d\n", (int)getpid());
	ssd_take_status(status_fd, line);
	rc = ssd_start_confine(&t.s, t.err, sizeof(t.err));
	if (rc)
		fprintf(stderr, "%s\n", t.err);
	rc = ssd_serve_loop(&t.s, rc ? 1 : 0);
	close(t.cfg.backing_fd);
	if (t.cfg.direct_fd >= 0)
		close(t.cfg.direct_fd);
	ssd_model_destroy(&t.model);
	return rc;
}
