/* API server tests over a real Unix socket with a fake VM: HTTP framing, keep-alive and
 * pipelining, size limits (413/431/414), bad syntax, half-closed and slow clients, the
 * connection cap, vmm.shutdown, and the socket file's stale/busy handling. */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "test_api_fake.h"
#include "testutil.h"

#define IDLE_MS 1000

static char sock_path[108];
static struct api_vmm vmm;
static pthread_t server_thread;
static int listen_fd, stop_fd, serve_rc;

static void *server_main(void *arg)
{
	serve_rc = api_serve(&vmm, listen_fd, stop_fd, IDLE_MS);
	return NULL;
}

static void setup(void)
{
	char err[API_ERR_LEN];

	snprintf(sock_path, sizeof(sock_path), "/tmp/lvmm-test-api-%d.sock", getpid());
	unlink(sock_path);
	api_vmm_init(&vmm, &fake_ops, NULL);
	listen_fd = api_socket_listen(sock_path, err, sizeof(err));
	ck_assert_msg(listen_fd >= 0, "listen: %s", err);
	stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	ck_assert_int_ge(stop_fd, 0);
	ck_assert_int_eq(pthread_create(&server_thread, NULL, server_main, NULL), 0);
}

static void teardown(void)
{
	uint64_t one = 1;

	ck_assert_int_eq(write(stop_fd, &one, sizeof(one)), sizeof(one));
	pthread_join(server_thread, NULL);
	ck_assert_int_eq(serve_rc, 0);
	close(stop_fd);
	close(listen_fd);
	unlink(sock_path);
	api_vmm_release(&vmm);
}

static int client(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	struct timeval tv = {.tv_sec = 5};

	strcpy(sa.sun_path, sock_path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	/* a hung server must fail the test, not hang it */
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

static void send_str(int fd, const char *s)
{
	size_t len = strlen(s);

	while (len) {
		ssize_t n = send(fd, s, len, MSG_NOSIGNAL);

		ck_assert_int_gt(n, 0);
		s += n;
		len -= n;
	}
}

/* Reads one whole answer (headers + Content-Length body) into buf; returns the status. */
static char pending[65536];
static size_t pending_len;

static int read_answer(int fd, char *buf, size_t size)
{
	char *end;
	size_t clen = 0, total;
	const char *cl;

	for (;;) {
		end = memmem(pending, pending_len, "\r\n\r\n", 4);
		if (end) {
			*end = 0;
			cl = strcasestr(pending, "Content-Length: ");
			clen = cl ? strtoul(cl + 16, NULL, 10) : 0;
			*end = '\r';
			total = end + 4 - pending + clen;
			if (pending_len >= total)
				break;
		}
		ssize_t n = recv(fd, pending + pending_len, sizeof(pending) - pending_len, 0);

		if (n <= 0)
			return -1;
		pending_len += n;
	}
	ck_assert_uint_lt(total, size);
	memcpy(buf, pending, total);
	buf[total] = 0;
	memmove(pending, pending + total, pending_len - total);
	pending_len -= total;
	return atoi(buf + 9);
}

/* True when the server closed the connection (EOF, or reset after its answer). */
static bool peer_closed(int fd)
{
	char c;
	ssize_t n = recv(fd, &c, 1, 0);

	return n == 0 || (n < 0 && errno == ECONNRESET);
}

static int request(const char *req, char *buf, size_t size)
{
	int fd = client(), st;

	pending_len = 0;
	send_str(fd, req);
	st = read_answer(fd, buf, size);
	close(fd);
	return st;
}

static int ping(void)
{
	char buf[4096];

	return request("GET /api/v1/vmm.ping HTTP/1.1\r\nHost: x\r\n\r\n", buf, sizeof(buf));
}

START_TEST(test_ping_http)
{
	char buf[4096];

	ck_assert_int_eq(
	    request("GET /api/v1/vmm.ping HTTP/1.1\r\nHost: localhost\r\n\r\n", buf, sizeof(buf)),
	    200);
	ck_assert_ptr_nonnull(strstr(buf, "Content-Type: application/json"));
	ck_assert_ptr_nonnull(strstr(buf, "\"version\""));
	/* a query string does not change routing */
	ck_assert_int_eq(request("GET /api/v1/vmm.ping?x=1 HTTP/1.1\r\n\r\n", buf, sizeof(buf)),
			 200);
	/* HTTP/1.0 without keep-alive: answer, then close */
	int fd = client();

	pending_len = 0;
	send_str(fd, "GET /api/v1/vmm.ping HTTP/1.0\r\n\r\n");
	ck_assert_int_eq(read_answer(fd, buf, sizeof(buf)), 200);
	ck_assert_ptr_nonnull(strstr(buf, "Connection: close"));
	ck_assert(peer_closed(fd));
	close(fd);
}
END_TEST

START_TEST(test_keepalive_and_pipelining)
{
	char buf[8192];
	int fd = client();

	pending_len = 0;
	send_str(fd, "GET /api/v1/vmm.ping HTTP/1.1\r\n\r\n");
	ck_assert_int_eq(read_answer(fd, buf, sizeof(buf)), 200);
	ck_assert_ptr_nonnull(strstr(buf, "Connection: keep-alive"));
	/* three requests in one write, answered in order */
	send_str(fd, "PUT /api/v1/vm.create HTTP/1.1\r\nContent-Length: 35\r\n\r\n"
		     "{\"payload\": {\"kernel\": \"/vmlinux\"}}"
		     "PUT /api/v1/vm.boot HTTP/1.1\r\n\r\n"
		     "GET /api/v1/vm.info HTTP/1.1\r\n\r\n");
	ck_assert_int_eq(read_answer(fd, buf, sizeof(buf)), 204);
	ck_assert_ptr_null(strstr(buf, "Content-Length"));
	ck_assert_int_eq(read_answer(fd, buf, sizeof(buf)), 204);
	ck_assert_int_eq(read_answer(fd, buf, sizeof(buf)), 200);
	ck_assert_ptr_nonnull(strstr(buf, "\"state\":\"Running\""));
	/* a chunked body works too */
	send_str(fd,
		 "PUT /api/v1/vm.pause HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n");
	ck_assert_int_eq(read_answer(fd, buf, sizeof(buf)), 204);
	close(fd);
}
END_TEST

START_TEST(test_expect_continue)
{
	char buf[4096];
	int fd = client();

	/* curl sends this for bodies over 1 KiB and waits for the interim answer */
	pending_len = 0;
	send_str(fd, "PUT /api/v1/vm.create HTTP/1.1\r\nExpect: 100-continue\r\n"
		     "Content-Length: 35\r\n\r\n");
	ck_assert_int_eq(read_answer(fd, buf, sizeof(buf)), 100);
	send_str(fd, "{\"payload\": {\"kernel\": \"/vmlinux\"}}");
	ck_assert_int_eq(read_answer(fd, buf, sizeof(buf)), 204);
	/* no interim answer without the header, nor for a body refused up front */
	send_str(fd, "PUT /api/v1/vm.boot HTTP/1.1\r\nX-Expect: 100-continue\r\n\r\n");
	ck_assert_int_eq(read_answer(fd, buf, sizeof(buf)), 204);
	send_str(fd, "PUT /api/v1/vm.create HTTP/1.1\r\nExpect: 100-continue\r\n"
		     "Content-Length: 100000\r\n\r\n");
	ck_assert_int_eq(read_answer(fd, buf, sizeof(buf)), 413);
	close(fd);
}
END_TEST

START_TEST(test_body_too_large)
{
	char buf[4096];
	int fd;

	/* announced by Content-Length: refused before the body is read */
	ck_assert_int_eq(request("PUT /api/v1/vm.create HTTP/1.1\r\nContent-Length: 65537\r\n\r\n{",
				 buf, sizeof(buf)),
			 413);
	ck_assert_ptr_nonnull(strstr(buf, "[\""));
	ck_assert_ptr_nonnull(strstr(buf, "Connection: close"));

	/* chunked: refused once the chunks pass the limit */
	fd = client();
	pending_len = 0;
	send_str(fd, "PUT /api/v1/vm.create HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n");
	char chunk[8192 + 16];

	memset(chunk, 'x', sizeof(chunk));
	memcpy(chunk, "2000\r\n", 6);
	memcpy(chunk + 6 + 8192, "\r\n", 3);
	for (int i = 0; i < 9; i++)
		send_str(fd, chunk);
	ck_assert_int_eq(read_answer(fd, buf, sizeof(buf)), 413);
	close(fd);
	ck_assert_ptr_null(vmm.vm);
	ck_assert_int_eq(ping(), 200);
}
END_TEST

START_TEST(test_headers_too_large)
{
	static char req[12000];
	char buf[4096];

	char big[9001];

	/* padding made of spaces would be skipped as whitespace: use letters */
	memset(big, 'y', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	snprintf(req, sizeof(req), "GET /api/v1/vmm.ping HTTP/1.1\r\nX-Big: %s\r\n\r\n", big);
	ck_assert_int_eq(request(req, buf, sizeof(buf)), 431);
	big[2000] = 0;
	snprintf(req, sizeof(req), "GET /api/v1/%s HTTP/1.1\r\n\r\n", big);
	ck_assert_int_eq(request(req, buf, sizeof(buf)), 414);
	ck_assert_int_eq(ping(), 200);
}
END_TEST

START_TEST(test_bad_syntax)
{
	char buf[4096];

	ck_assert_int_eq(request("GARBAGE\r\n\r\n", buf, sizeof(buf)), 501);
	ck_assert_int_eq(request("GET /api/v1/vmm.ping HTTP/9.9.9\r\n\r\n", buf, sizeof(buf)), 400);
	ck_assert_int_eq(
	    request("GET /api/v1/vmm.ping HTTP/1.1\r\nContent-Length: x\r\n\r\n", buf, sizeof(buf)),
	    400);
	ck_assert_int_eq(request("\x01\x02\x03\r\n\r\n", buf, sizeof(buf)), 501);
	ck_assert_int_eq(request("GET /api/v1/vm.pause HTTP/1.1\r\n\r\n", buf, sizeof(buf)), 400);
	ck_assert_ptr_nonnull(strstr(buf, "Allow: PUT"));
	ck_assert_int_eq(request("GET /nope HTTP/1.1\r\n\r\n", buf, sizeof(buf)), 404);
	ck_assert_int_eq(request("PUT /api/v1/vm.create HTTP/1.1\r\nContent-Length: 3\r\n\r\n{x}",
				 buf, sizeof(buf)),
			 400);
	ck_assert_int_eq(ping(), 200);
}
END_TEST

START_TEST(test_half_closed)
{
	char buf[4096];
	int fd = client();

	/* the client stops sending after its request: it still gets the answer */
	pending_len = 0;
	send_str(fd, "GET /api/v1/vmm.ping HTTP/1.1\r\n\r\n");
	shutdown(fd, SHUT_WR);
	ck_assert_int_eq(read_answer(fd, buf, sizeof(buf)), 200);
	ck_assert(peer_closed(fd));
	close(fd);

	/* half a request, then EOF: 400, and the server goes on */
	fd = client();
	pending_len = 0;
	send_str(fd, "PUT /api/v1/vm.create HTTP/1.1\r\nContent-Length: 100\r\n\r\n{\"cpus\"");
	shutdown(fd, SHUT_WR);
	ck_assert_int_eq(read_answer(fd, buf, sizeof(buf)), 400);
	close(fd);

	/* gone without a word */
	fd = client();
	send_str(fd, "GET /api/v1/vm");
	close(fd);
	ck_assert_int_eq(ping(), 200);
	ck_assert_ptr_null(vmm.vm);
}
END_TEST

START_TEST(test_slow_client)
{
	char buf[4096];
	int fd = client();

	/* a request that never completes is cut off with 408 after the idle timeout */
	pending_len = 0;
	send_str(fd, "GET /api/v1/vmm.ping HTTP/1.1\r\nHost: sl");
	/* meanwhile other clients are served: one slow client blocks nobody */
	ck_assert_int_eq(request("GET /api/v1/vmm.ping HTTP/1.1\r\n\r\n", buf, sizeof(buf)), 200);
	pending_len = 0;
	ck_assert_int_eq(read_answer(fd, buf, sizeof(buf)), 408);
	ck_assert(peer_closed(fd));
	close(fd);

	/* an idle keep-alive connection is closed without an answer */
	fd = client();
	ck_assert(peer_closed(fd));
	close(fd);
	ck_assert_int_eq(ping(), 200);
}
END_TEST

START_TEST(test_trickling_client)
{
	static const char req[] = "GET /api/v1/vmm.ping HTTP/1.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaa"
				  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
	char buf[4096];
	int fd = client(), st = -1;

	/* one byte per half idle period never trips the idle timeout, but the request as a
	 * whole has a bound: 408 before the request could complete */
	pending_len = 0;
	for (size_t i = 0; i < sizeof(req) - 1; i++) {
		struct pollfd p = {.fd = fd, .events = POLLIN};

		if (send(fd, req + i, 1, MSG_NOSIGNAL) != 1 || poll(&p, 1, IDLE_MS / 2) > 0)
			break;
	}
	st = read_answer(fd, buf, sizeof(buf));
	ck_assert_int_eq(st, 408);
	close(fd);
	ck_assert_int_eq(ping(), 200);
}
END_TEST

START_TEST(test_many_clients)
{
	int fds[API_MAX_CONNS + 4], i;
	char buf[4096];

	for (i = 0; i < API_MAX_CONNS + 4; i++)
		fds[i] = client();
	/* Past the cap the connections quiet for longest, the first four, made room. */
	for (i = 0; i < API_MAX_CONNS + 4; i++) {
		int st;

		pending_len = 0;
		send(fds[i], "GET /api/v1/vmm.ping HTTP/1.1\r\n\r\n", 33, MSG_NOSIGNAL);
		st = read_answer(fds[i], buf, sizeof(buf));
		if (i < 4)
			ck_assert_msg(st == -1, "connection %d: status %d, not closed", i, st);
		else
			ck_assert_msg(st == 200, "connection %d: status %d", i, st);
	}
	for (i = 0; i < API_MAX_CONNS + 4; i++)
		close(fds[i]);
	ck_assert_int_eq(ping(), 200);
}
END_TEST

/* 200 half-open connections (connected, silent, or a request cut short) do not shut a new
 * client out: it is answered at once, long before any idle timeout, and the server never holds
 * more than API_MAX_CONNS of them. */
START_TEST(test_half_open_flood)
{
	enum { FLOOD = 200 };
	int fds[FLOOD], i, closed = 0;
	double t0;

	for (i = 0; i < FLOOD; i++) {
		fds[i] = client();
		if (i % 2)
			send_str(fds[i], "GET /api/v1/vmm.ping HTTP/1.1\r\nHost:");
	}
	t0 = testutil_now_s();
	ck_assert_int_eq(ping(), 200);
	ck_assert_double_lt(testutil_now_s() - t0, IDLE_MS / 2000.0);
	/* The server closed every connection it let go: at most API_MAX_CONNS stay open. */
	for (i = 0; i < FLOOD; i++) {
		struct pollfd p = {.fd = fds[i], .events = POLLIN};
		char c;

		/* EOF, or a reset where the server dropped our unread partial request */
		if (poll(&p, 1, 0) == 1 && recv(fds[i], &c, 1, MSG_DONTWAIT) <= 0)
			closed++;
	}
	ck_assert_int_ge(closed, FLOOD - API_MAX_CONNS + 1);
	for (i = 0; i < FLOOD; i++)
		close(fds[i]);
}
END_TEST

START_TEST(test_vmm_shutdown_http)
{
	char buf[4096];

	ck_assert_int_eq(request("PUT /api/v1/vm.create HTTP/1.1\r\nContent-Length: 35\r\n\r\n"
				 "{\"payload\": {\"kernel\": \"/vmlinux\"}}",
				 buf, sizeof(buf)),
			 204);
	ck_assert_int_eq(request("PUT /api/v1/vmm.shutdown HTTP/1.1\r\n\r\n", buf, sizeof(buf)),
			 204);
	ck_assert_ptr_nonnull(strstr(buf, "Connection: close"));
	/* the server returns by itself; teardown's stop write then finds it gone */
	pthread_join(server_thread, NULL);
	ck_assert_int_eq(serve_rc, 0);
	ck_assert(vmm.shutdown);
	ck_assert_int_eq(pthread_create(&server_thread, NULL, server_main, NULL), 0);
}
END_TEST

static void listen_setup(void)
{
	snprintf(sock_path, sizeof(sock_path), "/tmp/lvmm-test-api-l%d.sock", getpid());
	unlink(sock_path);
}

START_TEST(test_socket_stale_and_busy)
{
	char err[API_ERR_LEN];
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int a, b, stale;
	FILE *f;

	/* a stale socket file (no listener) is replaced */
	strcpy(sa.sun_path, sock_path);
	stale = socket(AF_UNIX, SOCK_STREAM, 0);
	ck_assert_int_eq(bind(stale, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(stale);
	a = api_socket_listen(sock_path, err, sizeof(err));
	ck_assert_msg(a >= 0, "stale socket not replaced: %s", err);

	/* a live one is not taken over */
	b = api_socket_listen(sock_path, err, sizeof(err));
	ck_assert_int_eq(b, -EADDRINUSE);
	ck_assert_ptr_nonnull(strstr(err, sock_path));
	close(a);
	unlink(sock_path);

	/* a regular file is never deleted */
	f = fopen(sock_path, "w");
	ck_assert_ptr_nonnull(f);
	fclose(f);
	ck_assert_int_eq(api_socket_listen(sock_path, err, sizeof(err)), -EEXIST);
	ck_assert_int_eq(access(sock_path, F_OK), 0);
	unlink(sock_path);

	ck_assert_int_lt(api_socket_listen("/tmp/"
					   "0123456789012345678901234567890123456789"
					   "0123456789012345678901234567890123456789"
					   "0123456789012345678901234567890123456789",
					   err, sizeof(err)),
			 0);
	ck_assert_int_lt(api_socket_listen("/nonexistent-dir/x.sock", err, sizeof(err)), 0);
}
END_TEST

static Suite *api_server_suite(void)
{
	Suite *s = suite_create("api_server");
	TCase *tc = tcase_create("http");
	TCase *tl = tcase_create("listen");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_ping_http);
	tcase_add_test(tc, test_keepalive_and_pipelining);
	tcase_add_test(tc, test_expect_continue);
	tcase_add_test(tc, test_body_too_large);
	tcase_add_test(tc, test_headers_too_large);
	tcase_add_test(tc, test_bad_syntax);
	tcase_add_test(tc, test_half_closed);
	tcase_add_test(tc, test_slow_client);
	tcase_add_test(tc, test_trickling_client);
	tcase_add_test(tc, test_many_clients);
	tcase_add_test(tc, test_half_open_flood);
	tcase_add_test(tc, test_vmm_shutdown_http);
	suite_add_tcase(s, tc);
	tcase_add_checked_fixture(tl, listen_setup, NULL);
	tcase_add_test(tl, test_socket_stale_and_busy);
	suite_add_tcase(s, tl);
	return s;
}

int main(void)
{
	return testutil_run_suite(api_server_suite());
}
