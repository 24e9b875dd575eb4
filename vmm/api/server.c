/* The API's Unix socket: binding (stale-socket replacement), and one epoll thread serving many
 * non-blocking connections with keep-alive, size limits, idle timeouts and half-closed peers. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "api/api_internal.h"

#define SERVER_INBUF	     16384
#define SERVER_LINGER_MS     1000 /* after an error answer, drain the peer's unread body this long */
#define SERVER_MAX_EVENTS    32
#define SERVER_REQUEST_IDLES 3 /* a whole request within 3 idle timeouts (30 s) */
/* At API_MAX_CONNS a new client takes the place of the one quiet for longest: connections
 * that never send a request (a flood of half-open ones) cannot shut an orchestrator out. */
#define SERVER_SLOTS API_MAX_CONNS

struct conn {
	int fd;
	struct api_http http;
	char in[SERVER_INBUF];
	size_t in_len;
	char *out;
	size_t out_len, out_off;
	bool rd_eof;	  /* peer shut down its sending side */
	bool eof_fed;	  /* the parser was told about it */
	bool close_after; /* no further requests: close once the answer is out */
	bool draining;	  /* answer sent, write side shut, discarding input until EOF */
	uint64_t active;  /* s->seq when it last moved bytes: the eviction order */
	uint64_t deadline;
	int fds[API_MAX_FDS]; /* received with SCM_RIGHTS, for the next request answered */
	unsigned nfds;
	uint64_t req_start; /* first byte of the request being received */
	unsigned events;    /* epoll interest currently registered */
};

struct api_server {
	struct api_vmm *vmm;
	int ep;
	int listen_fd;
	int stop_fd;
	int idle_ms;
	unsigned nconns;
	uint64_t seq, evicted;
	uint64_t shutdown_by;
	struct conn *conns[SERVER_SLOTS];
};

uint64_t (*api_server_clock)(void);
static char listen_tag, stop_tag; /* epoll data of the listening socket and the stop fd */

static uint64_t server_now_ms(void)
{
	struct timespec ts;

	if (api_server_clock)
		return api_server_clock();
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int api_socket_listen(const char *path, char *err, unsigned errlen)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct stat st;
	int fd, r;

	if (!*path || strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "api socket '%s': path empty or longer than %zu bytes", path,
			 sizeof(sa.sun_path) - 1);
		return -ENAMETOOLONG;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);

	if (!lstat(path, &st)) {
		if (!S_ISSOCK(st.st_mode)) {
			snprintf(err, errlen, "api socket %s: exists and is not a socket", path);
			return -EEXIST;
		}
		/* A socket file outlives a crashed lvmm; only a live listener makes it busy. */
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			r = -errno;
			snprintf(err, errlen, "api socket %s: socket: %s", path, strerror(errno));
			return r;
		}
		r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
		r = r ? -errno : 0;
		close(fd);
		if (!r) {
			snprintf(err, errlen, "api socket %s: another server is listening on it",
				 path);
			return -EADDRINUSE;
		}
		if (r != -ECONNREFUSED && r != -ENOENT) {
			snprintf(err, errlen, "api socket %s: probing it: %s", path, strerror(-r));
			return r;
		}
		if (unlink(path) && errno != ENOENT) {
			r = -errno;
			snprintf(err, errlen, "api socket %s: removing the stale socket: %s", path,
				 strerror(errno));
			return r;
		}
	}

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		r = -errno;
		snprintf(err, errlen, "api socket %s: socket: %s", path, strerror(errno));
		return r;
	}
	/* Only the owner may drive the VMM. umask rather than chmod: the latter is not in the
	 * seccomp allow-list, and a chmod after bind leaves a window. */
	mode_t old = umask(0077);

	r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (r || listen(fd, API_MAX_CONNS)) {
		r = -errno;
		snprintf(err, errlen, "api socket %s: %s", path, strerror(errno));
		close(fd);
		return r;
	}
	return fd;
}

static int server_watch(struct api_server *s, struct conn *c, unsigned events)
{
	struct epoll_event ev = {.events = events, .data.ptr = c};

	if (c->events == events)
		return 0;
	c->events = events;
	return epoll_ctl(s->ep, EPOLL_CTL_MOD, c->fd, &ev);
}

static void server_drop_fds(struct conn *c)
{
	while (c->nfds)
		close(c->fds[--c->nfds]);
}

/* fds in a message's control data join the connection's (past API_MAX_FDS: closed). */
static void server_take_fds(struct conn *c, struct msghdr *m)
{
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(m); cm; cm = CMSG_NXTHDR(m, cm)) {
		size_t n;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			if (c->nfds < API_MAX_FDS)
				c->fds[c->nfds++] = fd;
			else
				close(fd);
		}
	}
}

static void server_close(struct api_server *s, struct conn *c)
{
	unsigned i;

	for (i = 0; i < SERVER_SLOTS; i++)
		if (s->conns[i] == c)
			s->conns[i] = NULL;
	s->nconns--;
	epoll_ctl(s->ep, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	server_drop_fds(c);
	api_http_free(&c->http);
	free(c->out);
	free(c);
}

static void server_queue(struct conn *c, const struct api_response *r, bool keep_alive)
{
	size_t len;

	c->out = api_http_format(r, keep_alive, &len);
	c->out_len = c->out ? len : 0;
	c->out_off = 0;
	if (!keep_alive || !c->out)
		c->close_after = true;
}

/* Parses and answers buffered requests, one at a time: a pipelined request waits until the
 * answer to the previous one is out, so a client that does not read cannot grow our memory. */
static bool server_progress(struct api_server *s, struct conn *c)
{
	struct api_http *h = &c->http;
	bool answered = false;

	while (!c->out && !c->close_after) {
		if (!h->ready && !h->error_status) {
			if (c->in_len) {
				bool was_started = h->started;
				size_t n = api_http_parse(h, c->in, c->in_len);

				if (!was_started && h->started)
					c->req_start = server_now_ms();

				memmove(c->in, c->in + n, c->in_len - n);
				c->in_len -= n;
				if (!n && !h->ready && !h->error_status)
					break;
			} else if (c->rd_eof && !c->eof_fed) {
				c->eof_fed = true;
				api_http_parse(h, NULL, 0);
			}
		}
		if (h->error_status) {
			struct api_response r = {0};

			api_response_error(&r, h->error_status, "%s", h->error_msg);
			server_queue(c, &r, false);
			api_response_free(&r);
			answered = true;
			break;
		}
		if (!h->ready && h->expect_continue && h->headers_done && !h->continue_sent) {
			static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";

			/* Tiny and first on the wire: if the socket is full the client just
			 * sends its body after its own timeout, as without this answer. */
			h->continue_sent = true;
			if (send(c->fd, cont, sizeof(cont) - 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
				/* best effort */
			}
		}
		if (!h->ready) {
			if (c->rd_eof && !c->in_len) {
				if (!c->eof_fed)
					continue; /* let the parser judge a request cut short */
				c->close_after = true; /* nothing more will come */
			}
			break;
		}
		struct api_response r = {0};

		h->req.fds = c->fds;
		h->req.nfds = c->nfds;
		api_route(s->vmm, &h->req, &r);
		server_drop_fds(c);
		server_queue(c, &r, h->keep_alive && !c->rd_eof && !s->vmm->shutdown);
		api_response_free(&r);
		api_http_next(h);
		answered = true;
	}
	return answered;
}

/* Returns false when the connection is finished and must be closed. */
static bool server_flush(struct api_server *s, struct conn *c)
{
	while (c->out && c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return true;
		if (n <= 0)
			return false; /* peer gone: nothing else to do for it */
		c->out_off += n;
		c->deadline = server_now_ms() + s->idle_ms;
		c->active = ++s->seq;
	}
	free(c->out);
	c->out = NULL;
	if (c->close_after && !c->draining) {
		/* Let the peer read the answer before we close over its unread bytes (a close with
		 * unread data resets the connection and can discard the answer). */
		if (c->rd_eof)
			return false;
		shutdown(c->fd, SHUT_WR);
		c->draining = true;
		c->deadline = server_now_ms() + SERVER_LINGER_MS;
	}
	return true;
}

static bool server_read(struct api_server *s, struct conn *c)
{
	for (;;) {
		char junk[4096];
		char *buf = c->draining ? junk : c->in + c->in_len;
		size_t room = c->draining ? sizeof(junk) : sizeof(c->in) - c->in_len;
		ssize_t n;

		if (!room)
			return true;
		{
			union {
				struct cmsghdr align;
				char b[CMSG_SPACE(API_MAX_FDS * sizeof(int))];
			} ctl;
			struct iovec iov = {buf, room};
			struct msghdr m = {.msg_iov = &iov,
					   .msg_iovlen = 1,
					   .msg_control = ctl.b,
					   .msg_controllen = sizeof(ctl.b)};

			n = recvmsg(c->fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
			if (n >= 0)
				server_take_fds(c, &m);
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return true;
		if (n < 0)
			return false;
		if (n == 0) {
			c->rd_eof = true;
			return !c->draining;
		}
		if (!c->draining) {
			c->in_len += n;
			c->deadline = server_now_ms() + s->idle_ms;
			c->active = ++s->seq;
		}
	}
}

static void server_conn_event(struct api_server *s, struct conn *c, unsigned events)
{
	if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP)) && !c->rd_eof) {
		if (!server_read(s, c))
			goto close;
	}
	if (c->draining) {
		if (c->rd_eof)
			goto close;
		return;
	}
	/* Once an answer is fully out, pipelined requests already buffered go next. */
	for (;;) {
		bool answered = server_progress(s, c);

		if (!server_flush(s, c))
			goto close;
		if (!answered || c->out || c->draining || c->close_after)
			break;
	}
	if (!c->out && c->close_after && !c->draining)
		goto close;
	if (c->out)
		server_watch(s, c, EPOLLOUT);
	else if (c->rd_eof && !c->draining)
		goto close;
	else
		server_watch(s, c, EPOLLIN | EPOLLRDHUP);
	return;
close:
	server_close(s, c);
}

/* Frees a slot for a new client: closes the connection quiet for longest. Requests are answered
 * as soon as they are complete, so it holds no request in progress past a partial one. */
static void server_evict(struct api_server *s)
{
	struct conn *victim = NULL;
	unsigned i;

	for (i = 0; i < SERVER_SLOTS; i++)
		if (s->conns[i] && (!victim || s->conns[i]->active < victim->active))
			victim = s->conns[i];
	if (victim) {
		s->evicted++;
		server_close(s, victim);
	}
}

/* Takes a connected non-blocking socket into a slot (closed on failure). */
static int server_add(struct api_server *s, int fd)
{
	struct epoll_event ev;
	struct conn *c;
	unsigned i;

	if (s->nconns >= API_MAX_CONNS)
		server_evict(s);
	for (i = 0; i < SERVER_SLOTS; i++)
		if (!s->conns[i])
			break;
	c = i < SERVER_SLOTS ? calloc(1, sizeof(*c)) : NULL;
	if (!c) {
		close(fd);
		return -ENOMEM;
	}
	c->fd = fd;
	api_http_init(&c->http);
	c->active = ++s->seq;
	c->deadline = server_now_ms() + s->idle_ms;
	c->events = EPOLLIN | EPOLLRDHUP;
	ev.events = c->events;
	ev.data.ptr = c;
	if (epoll_ctl(s->ep, EPOLL_CTL_ADD, fd, &ev)) {
		int r = -errno;

		close(fd);
		free(c);
		return r;
	}
	s->conns[i] = c;
	s->nconns++;
	return 0;
}

static void server_accept(struct api_server *s)
{
	for (;;) {
		int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0)
			return; /* EAGAIN, or a transient error such as EMFILE: retry next event */
		server_add(s, fd);
	}
}

/* Drops connections past their deadline; a request cut off mid-way gets a 408 first. */
static int server_sweep(struct api_server *s)
{
	uint64_t now = server_now_ms(), next = now + 1000;
	unsigned i;

	for (i = 0; i < SERVER_SLOTS; i++) {
		struct conn *c = s->conns[i];

		uint64_t limit;

		if (!c)
			continue;
		/* A client trickling a byte now and then refreshes the idle deadline; the whole
		 * request still has to arrive within SERVER_REQUEST_IDLES idle periods. */
		limit = c->deadline;
		if (c->http.started && !c->out && !c->draining &&
		    c->req_start + SERVER_REQUEST_IDLES * (uint64_t)s->idle_ms < limit)
			limit = c->req_start + SERVER_REQUEST_IDLES * (uint64_t)s->idle_ms;
		if (limit <= now) {
			if (c->http.started && !c->out && !c->draining) {
				static const char tmo[] =
				    "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n"
				    "Content-Type: application/json\r\nContent-Length: 32\r\n\r\n"
				    "[\"request not received in time\"]";

				if (send(c->fd, tmo, sizeof(tmo) - 1, MSG_NOSIGNAL | MSG_DONTWAIT) <
				    0) {
					/* best effort only */
				}
			}
			server_close(s, c);
			continue;
		}
		if (limit < next)
			next = limit;
	}
	return (int)(next - now);
}

static bool server_output_pending(struct api_server *s)
{
	for (unsigned i = 0; i < SERVER_SLOTS; i++)
		if (s->conns[i] && s->conns[i]->out)
			return true;
	return false;
}

struct api_server *api_server_new(struct api_vmm *vmm, int listen_fd, int stop_fd,
				  int idle_timeout_ms, int *err)
{
	struct api_server *s = calloc(1, sizeof(*s));
	struct epoll_event ev;

	*err = -ENOMEM;
	if (!s)
		return NULL;
	*s = (struct api_server){.vmm = vmm, .listen_fd = listen_fd, .stop_fd = stop_fd};
	s->idle_ms = idle_timeout_ms > 0 ? idle_timeout_ms : API_IDLE_TIMEOUT_MS;
	s->ep = epoll_create1(EPOLL_CLOEXEC);
	if (s->ep < 0)
		goto fail;
	ev.events = EPOLLIN;
	ev.data.ptr = &listen_tag;
	if (listen_fd >= 0 && epoll_ctl(s->ep, EPOLL_CTL_ADD, listen_fd, &ev))
		goto fail;
	if (stop_fd >= 0) {
		ev.data.ptr = &stop_tag;
		if (epoll_ctl(s->ep, EPOLL_CTL_ADD, stop_fd, &ev))
			goto fail;
	}
	return s;
fail:
	*err = -errno;
	if (s->ep >= 0)
		close(s->ep);
	free(s);
	return NULL;
}

int api_server_adopt(struct api_server *s, int fd)
{
	return server_add(s, fd);
}

int api_server_turn(struct api_server *s, int max_wait_ms)
{
	struct epoll_event evs[SERVER_MAX_EVENTS];
	struct api_vmm *vmm = s->vmm;
	int timeout = server_sweep(s), n, i;

	if (max_wait_ms >= 0 && timeout > max_wait_ms)
		timeout = max_wait_ms;
	if (vmm->shutdown) {
		/* Give the vmm.shutdown answer (and others in flight) a moment to leave. */
		if (!s->shutdown_by)
			s->shutdown_by = server_now_ms() + SERVER_LINGER_MS;
		if (!server_output_pending(s) || server_now_ms() >= s->shutdown_by)
			return -ESHUTDOWN;
		if (timeout > 10)
			timeout = 10;
	}
	n = epoll_wait(s->ep, evs, SERVER_MAX_EVENTS, timeout);
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	for (i = 0; i < n; i++) {
		struct conn *c = evs[i].data.ptr;
		bool live = false;

		if (s->listen_fd >= 0 && evs[i].data.ptr == &listen_tag) {
			server_accept(s);
			continue;
		}
		if (s->stop_fd >= 0 && evs[i].data.ptr == &stop_tag) {
			/* The VM stopped or a signal came: finish sending answers in flight (a
			 * vm.shutdown's 204) as vmm.shutdown does, then leave. */
			epoll_ctl(s->ep, EPOLL_CTL_DEL, s->stop_fd, NULL);
			vmm->shutdown = true;
			continue;
		}
		/* An earlier event of this batch may have closed it. */
		for (unsigned k = 0; k < SERVER_SLOTS; k++)
			live |= s->conns[k] == c;
		if (live)
			server_conn_event(s, c, evs[i].events);
	}
	return n;
}

void api_server_free(struct api_server *s)
{
	for (unsigned i = 0; i < SERVER_SLOTS; i++)
		if (s->conns[i])
			server_close(s, s->conns[i]);
	close(s->ep);
	free(s);
}

int api_serve(struct api_vmm *vmm, int listen_fd, int stop_fd, int idle_timeout_ms)
{
	struct api_server *s;
	int r;

	s = api_server_new(vmm, listen_fd, stop_fd, idle_timeout_ms, &r);
	if (!s)
		return r;
	do
		r = api_server_turn(s, -1);
	while (r >= 0);
	api_server_free(s);
	return r == -ESHUTDOWN ? 0 : r;
}
