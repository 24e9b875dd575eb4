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
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "lightiov/voltable.h"
#include "client/lio_client.h"
#include "softssd/backing_io.h"
#include "softssd/handover.h"
#include "softssd/server_int.h"
#include "softssd/volumes.h"

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
	static _Alignas(8) uint8_t buf[sizeof(struct lio_msg_hdr) + SSD_MAX_PAYLOAD];
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
	if ((size_t)r >= sizeof(uint32_t) && !memcmp(buf, &(uint32_t){SSD_HO_MAGIC}, 4)) {
		/* a successor asking for the sessions (`lvmm ssd upgrade`): returns only if the
		 * hand-over failed or was refused, and the asking connection ends */
		for (i = 0; i < nfds; i++)
			close(fds[i]);
		ssd_upgrade_give(s, ss, buf, (size_t)r, nfds,
				 !!(m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)));
		return -1;
	}
	ss->nreq++;
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

/* Out of fds (or memory) the connection stays queued and the listener readable: watching it
 * would spin. It is left out of the epoll set until a session ends or SSD_LISTEN_RETRY_MS pass;
 * the queued clients wait in the backlog meanwhile. */
static void ssd_listen_pause(struct ssd_server *s, int err)
{
	if (s->listen_paused)
		return;
	epoll_ctl(s->epfd, EPOLL_CTL_DEL, s->lfd, NULL);
	s->listen_paused = true;
	s->listen_paused_ns = ssd_now_ns();
	/* told on the first pause and then on every power of two: a long shortage logs little */
	s->listen_pauses++;
	if (s->listen_pauses & (s->listen_pauses - 1))
		return;
	printf("%s: accept: %s: new clients wait until a session ends (%" PRIu64 " pauses)\n",
	       s->cfg->name, strerror(err), s->listen_pauses);
	fflush(stdout);
}

static void ssd_listen_resume(struct ssd_server *s)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = SSD_EV_LISTEN};

	if (!s->listen_paused)
		return;
	if (!epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->lfd, &ev))
		s->listen_paused = false;
}

static void ssd_status_line(struct ssd_server *s, struct ssd_session *ss, const char *what)
{
	struct ssd_counters t;

	ssd_session_counters(ss, &t);
	printf("%s: client %" PRIu64 " pid %d uid %u '%s' %s: %u qpairs, %u volumes, %" PRIu64
	       " cmds, %" PRIu64 " MiB read, %" PRIu64 " MiB written, %" PRIu64 " errors, %" PRIu64
	       " rejected, %" PRIu64 " write-through syncs; %u clients\n",
	       s->cfg->name, ss->owner, (int)ss->pid, (unsigned)ss->uid, ss->label, what, ss->nqps,
	       ss->nvols, t.cmds, t.read_bytes >> 20, t.write_bytes >> 20, t.errors, t.rejected,
	       t.syncs, s->nsessions);
	fflush(stdout);
}

void ssd_session_end(struct ssd_server *s, struct ssd_session *ss)
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
	ssd_listen_resume(s);
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
	ssd_listen_resume(s);
}

static void ssd_accept(struct ssd_server *s)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	struct ssd_session *ss;
	struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP};
	char why[LIO_ERR_MAX];
	int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	if (fd < 0) {
		if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
			ssd_listen_pause(s, errno);
		return;
	}
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
		/* the operator's knob named, so the refused VM's message says what to raise */
		snprintf(
		    why, sizeof(why),
		    "softssd %s: %u clients connected, the limit (lvmm ssd serve --max-clients %u)",
		    s->cfg->name, s->nsessions, s->cfg->max_clients);
		printf("%s: refused client pid %d: %u clients, the limit (--max-clients %u)\n",
		       s->cfg->name, (int)cr.pid, s->nsessions, s->cfg->max_clients);
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
	ss->admin = cr.uid == 0 || cr.uid == geteuid();
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

int ssd_token_path(const char *sock, char *path, size_t len)
{
	int n = snprintf(path, len, "%s.upgrade", sock);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* A fresh upgrade token, in a file only the daemon's uid reads: whoever asks for the sessions
 * must have read it (docs/backend.md, "Upgrade"; docs/security.md). */
static int ssd_token_create(struct ssd_server *s, char *err, unsigned errlen)
{
	char path[sizeof(s->path) + 16];
	int fd;

	if (getrandom(s->ho_token, sizeof(s->ho_token), 0) != (ssize_t)sizeof(s->ho_token) ||
	    ssd_token_path(s->path, path, sizeof(path))) {
		snprintf(err, errlen, "softssd %s: upgrade token: %s", s->cfg->name,
			 strerror(errno ? errno : ENAMETOOLONG));
		return -EIO;
	}
	unlink(path);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, s->ho_token, sizeof(s->ho_token)) != (ssize_t)sizeof(s->ho_token)) {
		snprintf(err, errlen, "softssd %s: upgrade token %s: %s", s->cfg->name, path,
			 strerror(errno));
		if (fd >= 0)
			close(fd);
		return -EIO;
	}
	close(fd);
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
	return ssd_token_create(s, err, errlen);
}

/* sd_notify by hand: datagrams to $NOTIFY_SOCKET, through a socket opened before the seccomp
 * filter (which allows sendto, not socket): READY=1 once serving, and MAINPID= when an upgrade
 * hands the service to its successor. */
static int ssd_notify_fd = -1;
static struct sockaddr_un ssd_notify_sa = {.sun_family = AF_UNIX};
static socklen_t ssd_notify_len;

void ssd_notify_open(void)
{
	const char *path = getenv("NOTIFY_SOCKET");

	if (ssd_notify_fd >= 0 || !path || !*path || strlen(path) >= sizeof(ssd_notify_sa.sun_path))
		return;
	memcpy(ssd_notify_sa.sun_path, path, strlen(path));
	if (ssd_notify_sa.sun_path[0] == '@')
		ssd_notify_sa.sun_path[0] = 0;
	ssd_notify_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(path));
	ssd_notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
}

void ssd_notify(const char *msg)
{
	if (ssd_notify_fd >= 0)
		sendto(ssd_notify_fd, msg, strlen(msg), MSG_NOSIGNAL,
		       (struct sockaddr *)&ssd_notify_sa, ssd_notify_len);
}

void ssd_notify_ready(void)
{
	char msg[64];

	ssd_notify_open();
	snprintf(msg, sizeof(msg), "READY=1\nMAINPID=%d", (int)getpid());
	ssd_notify(msg);
}

/* Every client holds a socket, its window's memfds and two eventfds per queue pair: the soft
 * fd limit (1024 by default, and lvmm's when lvmm started the daemon) is raised to the hard one. */
static void ssd_raise_nofile(void)
{
	struct rlimit rl;

	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

void ssd_process_setup(void)
{
	sigset_t set;

	/* blocked before the workers start, so that they inherit the mask: only signalfd sees
	 * SIGTERM and friends */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	ssd_raise_nofile();
}

int ssd_start_engine(struct ssd_server *s, char *err, unsigned errlen)
{
	s->lba_shift = ssd_volumes_lba_shift(s->vols);
	s->qp_by_id = calloc(LIO_MAX_QPAIRS + 1, sizeof(*s->qp_by_id));
	if (!s->qp_by_id)
		return -ENOMEM;
	return ssd_engine_start(&s->eng, s->cfg->backing_fd, s->cfg->direct_fd, s->cfg->nvme,
				s->lba_shift, s->cfg->workers, s->cfg->model, err, errlen);
}

int ssd_start_events(struct ssd_server *s, char *err, unsigned errlen)
{
	struct epoll_event ev = {.events = EPOLLIN};
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	s->sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (s->sigfd < 0 || s->epfd < 0) {
		snprintf(err, errlen, "softssd %s: signalfd/epoll: %s", s->cfg->name,
			 strerror(errno));
		return -errno;
	}
	ev.data.ptr = SSD_EV_LISTEN;
	epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->lfd, &ev);
	ev.data.ptr = SSD_EV_SIGNAL;
	epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->sigfd, &ev);
	return 0;
}

int ssd_start_confine(struct ssd_server *s, char *err, unsigned errlen)
{
	int r;

	if (s->cfg->nvme) {
		/* DMA-window registration pins or locks client memory for the controller, which
		 * RLIMIT_MEMLOCK bounds once CAP_IPC_LOCK is gone: lifted first, while it may be
		 * (an unprivileged daemon keeps its own limit); the pagemap fd no-IOMMU needs was
		 * opened at the controller's open (vfio_pagemap_keep) */
		struct rlimit rl = {RLIM_INFINITY, RLIM_INFINITY};

		if (setrlimit(RLIMIT_MEMLOCK, &rl))
			fprintf(stderr, "%s: --vfio: RLIMIT_MEMLOCK stays: %s\n", s->cfg->name,
				strerror(errno));
	}
	r = ssd_drop_caps(err, errlen);
	return r ? r : ssd_seccomp_install(s->cfg->seccomp, s->cfg->nvme != NULL, err, errlen);
}

static int ssd_start(struct ssd_server *s, char *err, unsigned errlen)
{
	const struct ssd_server_cfg *cfg = s->cfg;
	struct lio_identify id = {0};
	struct ssd_dev dev = {.fd = cfg->backing_fd, .nvme = cfg->nvme};
	int r;

	ssd_process_setup();
	r = ssd_volumes_open_dev(&s->vols, &dev, cfg->name, cfg->capacity, cfg->lba_shift, true,
				 err, errlen);
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
	r = ssd_start_engine(s, err, errlen);
	if (r)
		return r;
	r = ssd_listen(s, err, errlen);
	if (r)
		return r;
	r = ssd_start_events(s, err, errlen);
	if (r)
		return r;
	printf("%s: serving %s on %s: %" PRIu64 " LBAs of %u bytes, %u volumes, model %s, "
	       "%u workers\n",
	       cfg->name, cfg->nvme ? cfg->nvme->name : "softssd", s->path, id.capacity_lbas,
	       1u << s->lba_shift, id.nr_volumes, cfg->model->desc, cfg->workers);
	fflush(stdout);
	if (cfg->notify)
		ssd_notify_ready();
	return ssd_start_confine(s, err, errlen);
}

int ssd_serve_loop(struct ssd_server *s, int status)
{
	bool stop = status != 0;

	while (!stop) {
		struct epoll_event ev[16];
		int n = epoll_wait(s->epfd, ev, 16, s->listen_paused ? SSD_LISTEN_RETRY_MS : -1), i;

		if (s->listen_paused &&
		    ssd_now_ns() - s->listen_paused_ns >= SSD_LISTEN_RETRY_MS * 1000000ull)
			ssd_listen_resume(s);
		for (i = 0; i < n && !stop; i++) {
			void *p = ev[i].data.ptr;

			if (p == SSD_EV_LISTEN) {
				ssd_accept(s);
			} else if (p == SSD_EV_SIGNAL) {
				struct signalfd_siginfo si;

				if (read(s->sigfd, &si, sizeof(si)) == sizeof(si) &&
				    si.ssi_signo != SIGHUP)
					stop = true;
			} else {
				struct ssd_session *ss = p;
				int gone = 0;

				if (ss->refused) {
					ssd_refused_end(s, ss);
					continue;
				}
				if (ev[i].events & EPOLLIN)
					gone = ssd_session_request(s, ss);
				else if (ev[i].events & (EPOLLHUP | EPOLLERR | EPOLLRDHUP))
					gone = -1;
				if (gone)
					ssd_session_end(s, ss);
			}
		}
	}
	while (s->sessions)
		ssd_session_end(s, s->sessions);
	while (s->refused)
		ssd_refused_end(s, s->refused);
	ssd_engine_stop(s->eng);
	if (s->lfd >= 0) {
		char tok[sizeof(s->path) + 16];

		close(s->lfd);
		unlink(s->path);
		if (!ssd_token_path(s->path, tok, sizeof(tok)))
			unlink(tok);
	}
	if (s->vols)
		ssd_volumes_close(s->vols);
	if (s->sigfd >= 0)
		close(s->sigfd);
	if (s->epfd >= 0)
		close(s->epfd);
	free(s->qp_by_id);
	if (!status)
		printf("%s: stopped\n", s->cfg->name);
	return status;
}

int ssd_serve(const struct ssd_server_cfg *cfg)
{
	struct ssd_server s = {.cfg = cfg, .lfd = -1, .sigfd = -1, .epfd = -1};
	char err[256] = "";
	int r, status = 0;

	s.start_ns = ssd_now_ns();
	r = ssd_start(&s, err, sizeof(err));
	if (r) {
		fprintf(stderr, "%s\n", err[0] ? err : strerror(-r));
		status = 1;
	}
	return ssd_serve_loop(&s, status);
}
