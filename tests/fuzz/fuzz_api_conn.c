/* libFuzzer target for the API server's connection loop: up to four clients on the real Unix
 * socket send the input in pieces, interleaved, half-close or vanish, read or leave unread what
 * the server answers; the server (epoll, framing, keep-alive, eviction) runs in its own thread
 * against a fake VM and must keep answering a ping after every input. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "../unit/test_api_fake.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_CLIENTS 4

static struct api_vmm vmm;
static char sock_path[108];
static int listen_fd = -1, stop_fd = -1;
static pthread_t server;

static void *server_main(void *arg)
{
	(void)arg;
	api_serve(&vmm, listen_fd, stop_fd, 200);
	return NULL;
}

static void fz_setup(void)
{
	char err[256];

	snprintf(sock_path, sizeof(sock_path), "/tmp/lvmm-fuzz-api-%d.sock", (int)getpid());
	api_vmm_init(&vmm, &fake_ops, NULL);
	listen_fd = api_socket_listen(sock_path, err, sizeof(err));
	stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (listen_fd < 0 || stop_fd < 0 || pthread_create(&server, NULL, server_main, NULL)) {
		fprintf(stderr, "fuzz_api_conn: set-up: %s\n", err);
		abort();
	}
}

static int fz_connect(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	memcpy(sa.sun_path, sock_path, strlen(sock_path) + 1);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		close(fd);
		return -1;
	}
	return fd;
}

static void fz_drain(int fd, int wait_ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	char buf[4096];

	while (poll(&p, 1, wait_ms) > 0 && read(fd, buf, sizeof(buf)) > 0)
		wait_ms = 0;
}

/* The server still answers a fresh client: a lost loop or a stuck slot shows here. */
static bool fz_ping(void)
{
	static const char req[] = "GET /api/v1/vmm.ping HTTP/1.1\r\nHost: x\r\n\r\n";
	struct pollfd p;
	char buf[512];
	int fd, i;
	ssize_t n = 0;

	for (i = 0; i < 50; i++) {
		fd = fz_connect();
		if (fd >= 0)
			break;
		usleep(1000);
	}
	if (fd < 0 || send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL) != (ssize_t)sizeof(req) - 1) {
		if (fd >= 0)
			close(fd);
		return false;
	}
	p = (struct pollfd){.fd = fd, .events = POLLIN};
	if (poll(&p, 1, 5000) > 0)
		n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n >= 12 && !memcmp(buf, "HTTP/1.1 200", 12);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int fds[FZ_CLIENTS];
	size_t i = 0;
	unsigned c;

	if (listen_fd < 0)
		fz_setup();
	for (c = 0; c < FZ_CLIENTS; c++)
		fds[c] = -1;
	/* control byte: client (2 bits), action (2 bits), piece length (4 bits, x8 bytes) */
	while (i < size) {
		uint8_t ctl = data[i++];
		size_t len = (size_t)(ctl >> 4) * 8 + 1;

		c = ctl & 3;
		if (fds[c] < 0)
			fds[c] = fz_connect();
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
			fz_drain(fds[c], 2);
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
	}
	for (c = 0; c < FZ_CLIENTS; c++)
		if (fds[c] >= 0) {
			fz_drain(fds[c], 1);
			close(fds[c]);
		}
	if (!fz_ping()) {
		/* an input may end the server on purpose (vmm.shutdown): start a new one */
		if (pthread_tryjoin_np(server, NULL)) {
			fprintf(stderr, "fuzz_api_conn: the server stopped answering a ping\n");
			abort();
		}
		api_vmm_release(&vmm);
		close(listen_fd);
		close(stop_fd);
		listen_fd = -1;
		fz_setup();
		if (!fz_ping())
			abort();
	}
	return 0;
}
