/* Linux's virtio-vsock driver on lvmm's vsock with the hybrid Unix-socket host side: the guest
 * (root on a virtio-blk disk, tools/guest/vsock-test.c) echoes on port 1234 and connects to the
 * host's port 5000 (PATH_5000, an echo server of this test). The host side, while the guest
 * runs: 6 connections through PATH with "CONNECT 1234", 1 MiB each way in one of them, checked
 * byte for byte; a malformed CONNECT line refused; a connection to a port nobody listens on
 * refused; a host program that vanishes mid-stream (the guest sees its connection end, lvmm
 * and the guest go on); and the guest's own 1 MiB to the host and back. All of it twice: as
 * is, and with `--jail` (PATH listened on before the jail, its directory bound in read-only,
 * the guest's connections to PATH_5000 made from inside as the jail's user). */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ext4check.h"
#include "linuxboot.h"
#include "testutil.h"

#define BOOT_LIMIT_S	1100
#define TCASE_TIMEOUT_S 1500
#define IMG_MB		32
#define GUEST_PORT	1234
#define HOST_PORT	5000
#define CONNS		6 /* through PATH: 4 echoed, 1 that vanishes, 1 of 1 MiB */
#define BIG		(1 << 20)

static char dir[64], img[128], sock[104];

static const char init_script[] = "#!/bin/busybox sh\n"
				  "b=/bin/busybox\n"
				  "$b mount -t proc proc /proc\n"
				  "echo LVMM-VSOCK-UP\n"
				  "/bin/vsock-test echo 1234 6 &\n"
				  "/bin/vsock-test send 5000 1048576\n"
				  "wait\n"
				  "echo LVMM-VSOCK-GUEST-DONE\n"
				  "exec $b reboot -f\n"; /* acpi=off: a reset ends lvmm run */

static uint8_t pattern(uint64_t i)
{
	return (uint8_t)(i * 131 + (i >> 11));
}

/* ---- the host side ---- */

struct host {
	pthread_t thread, server;
	bool started;
	int listen_fd;
	char failures[2048];
	unsigned ok_conns, refused, host_echo_bytes;
};

static void fail_note(struct host *h, const char *what, long v)
{
	size_t n = strlen(h->failures);

	snprintf(h->failures + n, sizeof(h->failures) - n, "%s %ld; ", what, v);
}

static int connect_path(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct timeval tv = {.tv_sec = 60};

	if (strlen(path) >= sizeof(sa.sun_path))
		return -1;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	return fd;
}

/* Reads one line (the answer to CONNECT) into buf. */
static int read_line(int fd, char *buf, size_t len)
{
	size_t n = 0;

	while (n + 1 < len) {
		ssize_t r = read(fd, buf + n, 1);

		if (r <= 0)
			return -1;
		if (buf[n++] == '\n')
			break;
	}
	buf[n] = 0;
	return (int)n;
}

/* CONNECT port through PATH: the fd once the guest accepted, or -1 (answer in ans). */
static int vsock_connect(unsigned port, char *ans, size_t len)
{
	char line[32];
	int fd = connect_path(sock), n;

	ans[0] = 0;
	if (fd < 0)
		return -1;
	n = snprintf(line, sizeof(line), "CONNECT %u\n", port);
	if (write(fd, line, (size_t)n) != n || read_line(fd, ans, len) < 0 ||
	    strncmp(ans, "OK ", 3)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Sends bytes of the pattern and reads the echo, interleaved; the number of bad bytes, or -1. */
static long exchange(int fd, size_t bytes)
{
	static uint8_t out[8192], in[65536];
	size_t sent = 0, got = 0;
	long bad = 0;

	while (got < bytes) {
		struct pollfd p = {.fd = fd, .events = POLLIN | (sent < bytes ? POLLOUT : 0)};

		if (poll(&p, 1, 60000) <= 0)
			return -1;
		if ((p.revents & POLLOUT) && sent < bytes) {
			size_t n = bytes - sent < sizeof(out) ? bytes - sent : sizeof(out);
			ssize_t w;

			for (size_t i = 0; i < n; i++)
				out[i] = pattern(sent + i);
			w = send(fd, out, n, MSG_DONTWAIT | MSG_NOSIGNAL);
			if (w > 0)
				sent += (size_t)w;
			else if (w < 0 && errno != EAGAIN)
				return -1;
		}
		if (p.revents & (POLLIN | POLLHUP)) {
			ssize_t r = recv(fd, in, sizeof(in), MSG_DONTWAIT);

			if (r == 0 || (r < 0 && errno != EAGAIN))
				return -1;
			for (ssize_t i = 0; i < r; i++)
				bad += in[i] != pattern(got + (size_t)i);
			if (r > 0)
				got += (size_t)r;
		}
	}
	return bad;
}

/* PATH_5000: echoes one connection from the guest. */
static void *host_server(void *arg)
{
	struct host *h = arg;
	static char buf[65536];
	int fd = accept(h->listen_fd, NULL, NULL);
	ssize_t r;

	if (fd < 0)
		return NULL;
	while ((r = read(fd, buf, sizeof(buf))) > 0) {
		if (write(fd, buf, (size_t)r) != r)
			break;
		h->host_echo_bytes += (unsigned)r;
	}
	close(fd);
	return NULL;
}

static void *host_client(void *arg)
{
	struct host *h = arg;
	char ans[64];
	long bad;
	int fd;

	/* refused: a line that is not CONNECT, and a port nobody listens on */
	fd = connect_path(sock);
	if (fd >= 0) {
		if (write(fd, "HELLO 1\n", 8) == 8 && read_line(fd, ans, sizeof(ans)) > 0 &&
		    !strncmp(ans, "ERROR", 5))
			h->refused++;
		close(fd);
	}
	if (vsock_connect(4321, ans, sizeof(ans)) < 0)
		h->refused++;
	/* four small echoes, each on a connection of its own */
	for (int i = 0; i < 4; i++) {
		fd = vsock_connect(GUEST_PORT, ans, sizeof(ans));
		if (fd < 0) {
			fail_note(h, "connect failed, attempt", i);
			continue;
		}
		bad = exchange(fd, 4096 + (size_t)i * 1000);
		if (bad)
			fail_note(h, "small echo: bad bytes or error", bad);
		else
			h->ok_conns++;
		close(fd);
	}
	/* a host program that vanishes mid-stream: some data out, then gone */
	fd = vsock_connect(GUEST_PORT, ans, sizeof(ans));
	if (fd >= 0) {
		static uint8_t junk[100000];

		(void)!send(fd, junk, sizeof(junk), MSG_NOSIGNAL);
		close(fd);
	} else {
		fail_note(h, "connect for the vanishing peer failed", 0);
	}
	/* then 1 MiB each way */
	fd = vsock_connect(GUEST_PORT, ans, sizeof(ans));
	if (fd < 0) {
		fail_note(h, "connect for 1 MiB failed", 0);
		return NULL;
	}
	bad = exchange(fd, BIG);
	if (bad)
		fail_note(h, "1 MiB echo: bad bytes or error", bad);
	else
		h->ok_conns++;
	close(fd);
	return NULL;
}

/* Starts the host client once the guest listens. */
static void hook(const char *console, void *arg)
{
	struct host *h = arg;

	if (!h->started && strstr(console, "LVMM-VSOCK-LISTENING port=1234")) {
		h->started = true;
		ck_assert_int_eq(pthread_create(&h->thread, NULL, host_client, h), 0);
	}
}

static void make_image(void)
{
	char prog[256];
	const char *const extra[] = {prog, "bin/vsock-test", NULL};

	linuxboot_guest_file(prog, sizeof(prog), "vsock-test");
	ext4check_make_root(dir, img, IMG_MB, init_script, extra);
}

static void setup(void)
{
	testutil_mkdtemp(dir, sizeof(dir), "/tmp/lvmm-vsock-");
	snprintf(img, sizeof(img), "%s/root.img", dir);
	snprintf(sock, sizeof(sock), "%s/v.sock", dir);
	setenv("LVMM_STATS", "1", 1);
}

static void teardown(void)
{
	testutil_rmtree(dir);
}

/* The whole exchange above; jailed: `--jail` with the socket in a directory of its own (bound
 * into the jail read-only), the kernel and disk outside it, owned by the jail's user. */
static void run_vsock(bool jailed)
{
	char kernel[4096], disk[256], vsock_arg[256], path[120], jroot[128], juid[32];
	char *args[] = {
	    "--kernel",
	    kernel,
	    "--cmdline",
	    "console=ttyS0 acpi=off root=/dev/vda rw rootfstype=ext4 rootwait init=/init",
	    "--cpus",
	    "1",
	    "--memory",
	    "128M",
	    "--disk",
	    disk,
	    "--vsock",
	    vsock_arg,
	    jailed ? "--jail" : NULL,
	    jroot,
	    "--jail-uid",
	    juid,
	    NULL};
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct host h = {0};
	struct linuxboot b;

	linuxboot_guest_file(kernel, sizeof(kernel), "vmlinux");
	make_image();
	if (jailed) {
		/* what the jail's user reads: copies in a tree it may walk */
		char cmd[4500], vdir[96];
		uid_t u = 1400000000u + (uid_t)getpid();

		ck_assert_int_eq(chmod(dir, 0755), 0);
		snprintf(jroot, sizeof(jroot), "%s/jail", dir);
		snprintf(vdir, sizeof(vdir), "%s/vs", dir);
		ck_assert_int_eq(mkdir(jroot, 0755), 0);
		ck_assert_int_eq(mkdir(vdir, 0755), 0);
		snprintf(cmd, sizeof(cmd), "cp %s %s/vmlinux && chmod 0644 %s/vmlinux", kernel, dir,
			 dir);
		ck_assert_int_eq(system(cmd), 0);
		snprintf(kernel, sizeof(kernel), "%s/vmlinux", dir);
		ck_assert_int_eq(chown(img, u, u), 0);
		snprintf(juid, sizeof(juid), "%u", (unsigned)u);
		snprintf(sock, sizeof(sock), "%s/v.sock", vdir);
	}
	snprintf(disk, sizeof(disk), "path=%s", img);
	snprintf(vsock_arg, sizeof(vsock_arg), "cid=3,socket=%s", sock);
	/* the guest's connections to host port 5000 land here */
	snprintf(path, sizeof(path), "%s_%d", sock, HOST_PORT);
	ck_assert_uint_lt(strlen(path), sizeof(sa.sun_path));
	memcpy(sa.sun_path, path, strlen(path) + 1);
	h.listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(h.listen_fd, 0);
	ck_assert_int_eq(bind(h.listen_fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(h.listen_fd, 4), 0);
	/* connecting takes write permission on the socket: the jail's user has it here */
	ck_assert_int_eq(chmod(path, jailed ? 0666 : 0600), 0);
	ck_assert_int_eq(pthread_create(&h.server, NULL, host_server, &h), 0);

	linuxboot_run_hook(&b, args, NULL, BOOT_LIMIT_S, 0, hook, &h);
	printf("linux vsock%s: %.1f s to exit\n", jailed ? " (jailed)" : "", b.t_exit);
	linuxboot_report(&b, 4000);
	if (h.started)
		pthread_join(h.thread, NULL);
	shutdown(h.listen_fd, SHUT_RDWR);
	close(h.listen_fd);
	pthread_join(h.server, NULL);
	ck_assert_msg(!b.killed, "lvmm still running after %d s", BOOT_LIMIT_S);
	ck_assert_msg(WIFEXITED(b.status) && WEXITSTATUS(b.status) == 0,
		      "lvmm did not exit 0 (wait status %#x)", b.status);
	ck_assert_msg(h.started, "the guest never listened on port 1234");
	ck_assert_msg(!h.failures[0], "host side: %s", h.failures);
	ck_assert_uint_eq(h.ok_conns, 5);
	ck_assert_uint_eq(h.refused, 2);
	/* the guest's side: its send to the host, the echo server's six connections */
	ck_assert_msg(strstr(b.console, "LVMM-VSOCK-SEND-OK bytes=1048576 bad=0"),
		      "the guest's 1 MiB to the host and back failed");
	ck_assert_uint_eq(h.host_echo_bytes, BIG);
	ck_assert_msg(strstr(b.console, "LVMM-VSOCK-ECHO-DONE conns=6"),
		      "the guest's echo server did not see its 6 connections");
	ck_assert_msg(strstr(b.console, "bytes=1048576"), "no 1 MiB connection in the guest");
	ck_assert_msg(strstr(b.console, "LVMM-VSOCK-GUEST-DONE"), "the guest did not finish");
	/* the listening socket goes with lvmm (in a jail, its outer process removes it) */
	ck_assert_int_ne(access(sock, F_OK), 0);
	linuxboot_free(&b);
}

START_TEST(test_vsock)
{
	run_vsock(false);
}
END_TEST

START_TEST(test_vsock_jailed)
{
	if (geteuid()) {
		testutil_skip("test_vsock_jailed: --jail needs root");
		return;
	}
	run_vsock(true);
}
END_TEST

static Suite *linux_vsock_suite(void)
{
	Suite *s = suite_create("linux_vsock");
	TCase *tc = tcase_create("hybrid");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, TCASE_TIMEOUT_S);
	tcase_add_test(tc, test_vsock);
	tcase_add_test(tc, test_vsock_jailed);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return testutil_run_suite(linux_vsock_suite());
}
