/* libFuzzer target for the API server's connection loop, driven in one thread over socketpairs:
 * four clients send the input in pieces, interleaved, half-close, vanish, read or leave unread;
 * time moves only when the input says so (idle and request deadlines, 408s, eviction, the linger
 * after vmm.shutdown); after every input a fresh client's ping must be answered 200. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../unit/test_api_fake.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_CLIENTS 4
#define FZ_IDLE_MS 200
/* Turns a quiet server may take to settle: a level-triggered loop that keeps getting events
 * with no client doing anything is busy-looping, which is a finding. */
#define FZ_SETTLE_TURNS 256

static uint64_t fz_now;

static uint64_t fz_clock(void)
{
	return fz_now;
}

/* Lets the server handle everything pending; false when it has ended (vmm.shutdown). */
static bool fz_settle(struct api_server *s)
{
	int r = 0;

	for (unsigned i = 0; i < FZ_SETTLE_TURNS; i++) {
		r = api_server_turn(s, 0);
		if (r <= 0)
			break;
	}
	if (r > 0) {
		fprintf(stderr, "fuzz_api_conn: the server never went quiet (%d events)\n", r);
		abort();
	}
	if (r < 0 && r != -ESHUTDOWN) {
		fprintf(stderr, "fuzz_api_conn: server turn: %s\n", strerror(-r));
		abort();
	}
	return r == 0;
}

/* A new client: one end for the server (as accepted), the other returned. */
static int fz_connect(struct api_server *s, bool small_buf)
{
	int sv[2], sz = 4096;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv))
		abort();
	/* a small send buffer makes the server's answers leave in pieces (EAGAIN, EPOLLOUT) */
	if (small_buf)
		setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	if (api_server_adopt(s, sv[0])) {
		close(sv[1]);
		return -1;
	}
	return sv[1];
}

static void fz_drain(int fd)
{
	char buf[4096];

	while (read(fd, buf, sizeof(buf)) > 0)
		;
}

/* The server still answers a fresh client: a lost loop or a stuck slot shows here. */
static bool fz_ping(struct api_server *s)
{
	static const char req[] = "GET /api/v1/vmm.ping HTTP/1.1\r\nHost: x\r\n\r\n";
	char buf[512];
	ssize_t n = 0;
	int fd = fz_connect(s, false);

	if (fd < 0)
		return false;
	if (send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL) == (ssize_t)sizeof(req) - 1) {
		fz_settle(s);
		n = read(fd, buf, sizeof(buf) - 1);
	}
	close(fd);
	return n >= 12 && !memcmp(buf, "HTTP/1.1 200", 12);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct api_vmm vmm;
	struct api_server *s;
	int fds[FZ_CLIENTS], err;
	bool live = true;
	size_t i = 0;
	unsigned c;

	api_server_clock = fz_clock;
	fz_now = 1000000;
	api_vmm_init(&vmm, &fake_ops, NULL);
	s = api_server_new(&vmm, -1, -1, FZ_IDLE_MS, &err);
	if (!s)
		abort();
	for (c = 0; c < FZ_CLIENTS; c++)
		fds[c] = -1;
	/* control byte: client (2 bits), action (2 bits), piece length (4 bits, x8 bytes) */
	while (i < size && live) {
		uint8_t ctl = data[i++];
		size_t len = (size_t)(ctl >> 4) * 8 + 1;

		c = ctl & 3;
		if (fds[c] < 0)
			fds[c] = fz_connect(s, ctl & 0x40);
		if (fds[c] < 0)
			continue;
		if (len > size - i)
			len = size - i;
		switch (ctl >> 2 & 3) {
		case 0:
		case 1:
			/* MSG_NOSIGNAL: the server may have closed it already */
			if (len && send(fds[c], data + i, len, MSG_NOSIGNAL) < 0 &&
			    errno != EAGAIN) {
				close(fds[c]);
				fds[c] = -1;
			}
			i += len;
			break;
		case 2:
			if (ctl & 0x80) /* time passes: up to ~1.5 idle timeouts */
				fz_now += (uint64_t)(ctl >> 4 & 7) * FZ_IDLE_MS / 4;
			else
				fz_drain(fds[c]);
			break;
		default:
			if (ctl & 0x80)
				shutdown(fds[c], SHUT_WR);
			else {
				close(fds[c]);
				fds[c] = -1;
			}
			break;
		}
		live = fz_settle(s);
	}
	for (c = 0; c < FZ_CLIENTS; c++)
		if (fds[c] >= 0) {
			fz_drain(fds[c]);
			close(fds[c]);
		}
	/* an input may end the server on purpose (vmm.shutdown): it must end, once its answers
	 * are out or the linger is over, and never before the others are answered */
	if (live && !vmm.shutdown && !fz_ping(s)) {
		fprintf(stderr, "fuzz_api_conn: the server did not answer a ping\n");
		abort();
	}
	if (vmm.shutdown) {
		fz_now += 2000; /* past SERVER_LINGER_MS */
		if (fz_settle(s)) {
			fprintf(stderr, "fuzz_api_conn: still serving after vmm.shutdown\n");
			abort();
		}
	}
	api_server_free(s);
	api_vmm_release(&vmm);
	return 0;
}
