/* Live migration end to end on the bench guest (bench.mode=spin: a heartbeat counter in guest
 * memory printed every 200 ms) between lvmm processes: a running VM moved by copy and by
 * passing its RAM memfd (local), the count going on in the destination and the source gone;
 * hostile input from a fake source refused while the destination serves on; a destination that
 * dies or never confirms leaves the source running; a source that dies leaves the destination
 * without a VM, ready for another receive; a VM with a device that cannot be saved refused; a
 * vNVMe on a softssd volume and a virtio-blk disk image handed over to the destination, and
 * taken back by a source whose destination vanished. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "apitest.h"
#include "migrate_proto.h"
#include "ssdutil.h"
#include "testutil.h"

static struct apitest S, D;
static char guest[512], mig[100], recv_out[256];

static void setup(void)
{
	apitest_init(&S, "/tmp/lvmm-itest-migs-");
	apitest_init(&D, "/tmp/lvmm-itest-migd-");
	snprintf(guest, sizeof(guest), "%s", testutil_bench_guest());
	ck_assert_msg(access(guest, R_OK) == 0, "no bench guest at %s", guest);
	snprintf(mig, sizeof(mig), "%s/mig.sock", D.dir);
	snprintf(recv_out, sizeof(recv_out), "%s/receive.out", D.dir);
	signal(SIGPIPE, SIG_IGN);
}

static void teardown(void)
{
	apitest_fini(&S);
	apitest_fini(&D);
}

static char *spin_config(const char *extra)
{
	static char cfg[2048];

	snprintf(cfg, sizeof(cfg),
		 "{\"cpus\": {\"boot_vcpus\": 1}, \"memory\": {\"size\": 67108864},"
		 " \"payload\": {\"kernel\": \"%s\", \"cmdline\": \"bench.mode=spin\"},"
		 " \"serial\": {\"mode\": \"File\", \"file\": \"%s\"}%s}",
		 guest, S.console, extra ? extra : "");
	return cfg;
}

/* The last heartbeat number on the (shared) console, -1 when none. */
static long last_heartbeat(void)
{
	char *c = testutil_slurp(S.console), *p, *last = NULL;
	long n = -1;

	for (p = c; p && (p = strstr(p, "heartbeat ")); p++)
		last = p;
	if (last)
		n = strtol(last + 10, NULL, 10);
	free(c);
	return n;
}

static bool heartbeat_reaches(long n, unsigned limit_ms)
{
	for (unsigned t = 0; t < limit_ms; t += 50) {
		if (last_heartbeat() >= n)
			return true;
		testutil_sleep_ms(50);
	}
	return false;
}

/* `lvmm api VERB ARG [--local]` against t in a child; its pid. */
static pid_t api_child(struct apitest *t, const char *verb, const char *arg, bool local,
		       const char *out)
{
	pid_t p = fork();

	ck_assert_int_ge(p, 0);
	if (!p) {
		int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		dup2(fd, 1);
		dup2(fd, 2);
		execl(t->lvmm, t->lvmm, "api", "--socket", t->sock, verb, arg,
		      local ? "--local" : (char *)NULL, (char *)NULL);
		_exit(127);
	}
	return p;
}

static int child_status(pid_t p, unsigned limit_s)
{
	int st = testutil_wait_limit(p, "lvmm api", limit_s);

	return st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* D starts receiving at mig; returns the client's pid once the socket is there. */
static pid_t start_receive(void)
{
	char u[300];
	pid_t p;
	struct stat st;

	snprintf(u, sizeof(u), "unix:%s", mig);
	p = api_child(&D, "receive-migration", u, false, recv_out);
	for (int i = 0; i < 200 && stat(mig, &st); i++)
		testutil_sleep_ms(25);
	ck_assert_msg(!stat(mig, &st) && S_ISSOCK(st.st_mode), "the destination does not listen");
	return p;
}

static bool file_has(const char *path, const char *what)
{
	char *c = testutil_slurp(path);
	bool yes = c && strstr(c, what);

	free(c);
	return yes;
}

static void boot_source(const char *extra)
{
	apitest_start(&S, NULL);
	ck_assert_int_eq(apitest_curl(&S, "PUT", "vm.create", spin_config(extra), NULL), 204);
	ck_assert_int_eq(apitest_curl(&S, "PUT", "vm.boot", NULL, NULL), 204);
	ck_assert_msg(heartbeat_reaches(3, 15000), "the guest does not count");
}

/* S's running VM moved to D (started) by copy or local: the source logs it and exits, the
 * destination runs the guest on from its count. */
static void migrate_to_d(bool local)
{
	char body[400];
	pid_t rp = start_receive();
	long before = last_heartbeat();

	snprintf(body, sizeof(body), "{\"destination_url\": \"unix:%s\", \"local\": %s}", mig,
		 local ? "true" : "false");
	S.curl_max_s = 120;
	ck_assert_int_eq(apitest_curl(&S, "PUT", "vm.send-migration", body, NULL), 204);
	ck_assert_int_eq(child_status(rp, 30), 0);
	ck_assert_int_eq(apitest_wait(&S, 15), 0);
	ck_assert_msg(file_has(S.log, "migrated to"), "no migration line in the source's log");
	ck_assert_str_eq(apitest_vm_state(&D), "Running");
	ck_assert_msg(heartbeat_reaches(before + 5, 10000), "no heartbeat past %ld after migration",
		      before + 5);
}

static void migrate_ok(bool local)
{
	boot_source(NULL);
	apitest_start(&D, NULL);
	migrate_to_d(local);
	ck_assert_int_eq(apitest_curl(&D, "PUT", "vm.pause", NULL, NULL), 204);
	ck_assert_int_eq(apitest_curl(&D, "PUT", "vm.resume", NULL, NULL), 204);
	ck_assert_int_eq(apitest_curl(&D, "PUT", "vm.shutdown", NULL, NULL), 204);
}

START_TEST(test_migrate_copy)
{
	TESTUTIL_NEED_KVM();
	migrate_ok(false);
	ck_assert_msg(file_has(D.log, "received a VM"), "no line in the destination's log");
}
END_TEST

START_TEST(test_migrate_local)
{
	TESTUTIL_NEED_KVM();
	migrate_ok(true);
	ck_assert_msg(file_has(D.log, "local, RAM memfd"), "not a local migration");
}
END_TEST

/* A VM restored with its RAM mapped from memory.bin (copy-on-write) moves local: its RAM is
 * copied into the memfd while paused (the memfd is what goes across), and the guest counts on in
 * the destination, which maps no memory.bin. */
START_TEST(test_migrate_restored_local)
{
	char dir[300], body[400], maps[64], *m;
	int st;

	TESTUTIL_NEED_KVM();
	boot_source(NULL);
	snprintf(dir, sizeof(dir), "%s/snap", S.dir);
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	snprintf(body, sizeof(body), "{\"destination_url\": \"file://%s\"}", dir);
	ck_assert_int_eq(apitest_curl(&S, "PUT", "vm.pause", NULL, NULL), 204);
	ck_assert_int_eq(apitest_curl(&S, "PUT", "vm.snapshot", body, NULL), 204);
	ck_assert_int_eq(kill(S.pid, SIGKILL), 0);
	ck_assert_int_eq(waitpid(S.pid, &st, 0), S.pid);
	S.pid = 0;
	apitest_start(&S, NULL);
	snprintf(body, sizeof(body), "{\"source_url\": \"file://%s\", \"resume\": true}", dir);
	ck_assert_int_eq(apitest_curl(&S, "PUT", "vm.restore", body, NULL), 204);
	snprintf(maps, sizeof(maps), "/proc/%d/maps", (int)S.pid);
	m = testutil_slurp(maps);
	ck_assert_msg(m && strstr(m, "/snap/memory.bin"), "the restored RAM is not mapped");
	free(m);
	ck_assert_msg(heartbeat_reaches(last_heartbeat() + 2, 10000),
		      "the restored guest does not count");
	apitest_start(&D, NULL);
	migrate_to_d(true);
	ck_assert_msg(file_has(D.log, "local, RAM memfd"), "not a local migration");
	snprintf(maps, sizeof(maps), "/proc/%d/maps", (int)D.pid);
	m = testutil_slurp(maps);
	ck_assert_msg(m && !strstr(m, "memory.bin"), "the destination maps memory.bin");
	free(m);
	ck_assert_int_eq(apitest_curl(&D, "PUT", "vm.shutdown", NULL, NULL), 204);
}
END_TEST

/* A paused VM arrives paused and runs once resumed, through the lvmm api verbs. */
START_TEST(test_migrate_paused_cli)
{
	char u[300], out[300];
	pid_t rp, sp;
	long before;

	TESTUTIL_NEED_KVM();
	boot_source(NULL);
	ck_assert_int_eq(apitest_curl(&S, "PUT", "vm.pause", NULL, NULL), 204);
	before = last_heartbeat();
	apitest_start(&D, NULL);
	rp = start_receive();
	snprintf(u, sizeof(u), "unix:%s", mig);
	snprintf(out, sizeof(out), "%s/send.out", S.dir);
	sp = api_child(&S, "send-migration", u, false, out);
	ck_assert_int_eq(child_status(sp, 60), 0);
	ck_assert_int_eq(child_status(rp, 30), 0);
	ck_assert_int_eq(apitest_wait(&S, 15), 0);
	ck_assert_str_eq(apitest_vm_state(&D), "Paused");
	testutil_sleep_ms(500);
	ck_assert_int_eq(last_heartbeat(), before);
	ck_assert_int_eq(apitest_curl(&D, "PUT", "vm.resume", NULL, NULL), 204);
	ck_assert(heartbeat_reaches(before + 3, 10000));
	ck_assert_int_eq(apitest_curl(&D, "PUT", "vm.shutdown", NULL, NULL), 204);
}
END_TEST

static int fake_connect(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	ck_assert_int_ge(fd, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", mig);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

static void put_frame(int fd, uint32_t type, const void *p, uint64_t len, uint64_t claim)
{
	struct mig_hdr h;

	mig_make_hdr(&h, type, claim);
	if (write(fd, &h, sizeof(h)) != sizeof(h) || (len && write(fd, p, len) != (ssize_t)len)) {
		/* the destination may have hung up already: that is what is tested */
	}
}

/* A whole frame with fd in SCM_RIGHTS beside its first byte. */
static void put_frame_fd(int sock, uint32_t type, const void *p, uint64_t len, int fd)
{
	uint8_t buf[sizeof(struct mig_hdr) + 256];
	union {
		struct cmsghdr h;
		char room[CMSG_SPACE(sizeof(int))];
	} c;
	struct iovec iov = {buf, sizeof(struct mig_hdr) + len};
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = c.room,
			   .msg_controllen = sizeof(c.room)};

	ck_assert_uint_le(len, 256);
	mig_make_hdr((struct mig_hdr *)buf, type, len);
	memcpy(buf + sizeof(struct mig_hdr), p, len);
	memset(&c, 0, sizeof(c));
	c.h.cmsg_level = SOL_SOCKET;
	c.h.cmsg_type = SCM_RIGHTS;
	c.h.cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(&c.h), &fd, sizeof(int));
	ck_assert_int_eq(sendmsg(sock, &m, MSG_NOSIGNAL), (ssize_t)iov.iov_len);
}

/* One hostile stream: the receive fails with needle in its answer, the destination serves on
 * without a VM. */
static void hostile(const void *bytes, size_t len, const char *needle)
{
	pid_t rp = start_receive();
	int fd = fake_connect();

	if (len && write(fd, bytes, len) != (ssize_t)len) {
		/* as above */
	}
	shutdown(fd, SHUT_WR);
	ck_assert_int_eq(child_status(rp, 60), 1);
	close(fd);
	ck_assert_msg(file_has(recv_out, needle), "'%s' not in the answer: %s", needle,
		      testutil_slurp(recv_out));
	ck_assert(apitest_ping(&D));
	ck_assert_int_eq(apitest_curl(&D, "GET", "vm.info", NULL, NULL), 404);
}

/* One FDS frame after a config with a vsock device (a VM built late, taking fds): refused with
 * needle, the fd closed, no VM. */
static void hostile_fd(const struct mig_hello *hello, const char *cfg, const char *id,
		       uint32_t index, uint32_t count, int fd, const char *needle)
{
	struct mig_fd f = {.index = index, .count = count};
	pid_t rp = start_receive();
	int sock = fake_connect();

	snprintf(f.id, sizeof(f.id), "%s", id);
	put_frame(sock, MIG_HELLO, hello, sizeof(*hello), sizeof(*hello));
	put_frame(sock, MIG_CONFIG, cfg, strlen(cfg), strlen(cfg));
	if (fd >= 0)
		put_frame_fd(sock, MIG_FDS, &f, sizeof(f), fd);
	else
		put_frame(sock, MIG_FDS, &f, sizeof(f), sizeof(f));
	ck_assert_int_eq(child_status(rp, 60), 1);
	close(sock);
	ck_assert_msg(file_has(recv_out, needle), "'%s' not in the answer: %s", needle,
		      testutil_slurp(recv_out));
	ck_assert_int_eq(apitest_curl(&D, "GET", "vm.info", NULL, NULL), 404);
}

/* Whether process pid has a socket of inode ino open (/proc/PID/fd: "socket:[INO]"). */
static bool pid_holds_inode(pid_t pid, ino_t ino)
{
	char dir[64], want[64], path[400], link[128];
	struct dirent *e;
	bool yes = false;
	DIR *d;

	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	snprintf(want, sizeof(want), "socket:[%llu]", (unsigned long long)ino);
	d = opendir(dir);
	ck_assert_ptr_nonnull(d);
	while (!yes && (e = readdir(d))) {
		ssize_t n;

		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		n = readlink(path, link, sizeof(link) - 1);
		if (n > 0) {
			link[n] = 0;
			yes = !strcmp(link, want);
		}
	}
	closedir(d);
	return yes;
}

/* A Unix stream socket listening at path (unlinked first). */
static int listen_unix(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int l = socket(AF_UNIX, SOCK_STREAM, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	unlink(path);
	ck_assert_int_eq(bind(l, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(l, 4), 0);
	return l;
}

/* Host fds a hostile source hands over: none with the frame, one for a device the config does
 * not have, one that is no listening socket, one listening elsewhere, a record that makes no
 * sense; the destination holds no fd of them afterwards (the socket's path is free again). */
static void hostile_fds(const struct mig_hello *hello)
{
	char extra[400], vs[200], other[200], cfg[2048];
	int ev = eventfd(0, EFD_CLOEXEC), l, l2;
	struct stat st;

	snprintf(vs, sizeof(vs), "%s/hv.sock", D.dir);
	snprintf(other, sizeof(other), "%s/other.sock", D.dir);
	snprintf(extra, sizeof(extra), ", \"vsock\": {\"cid\": 3, \"socket\": \"%s\"}", vs);
	snprintf(cfg, sizeof(cfg), "%s", spin_config(extra));
	l = listen_unix(vs);
	l2 = listen_unix(other);
	hostile_fd(hello, cfg, "vsock0", 0, 1, -1, "came without a file descriptor");
	hostile_fd(hello, cfg, "net7", 0, 1, l, "does not have");
	hostile_fd(hello, cfg, "vsock0", 0, 1, ev, "not a Unix stream socket listening at");
	hostile_fd(hello, cfg, "vsock0", 0, 1, l2, "not a Unix stream socket listening at");
	hostile_fd(hello, cfg, "vsock0", 1, 1, l, "not one lvmm takes");
	hostile_fd(hello, cfg, "vsock0", 0, 2, l, "socket 0 of 2");
	hostile_fd(hello, spin_config(NULL), "vsock0", 0, 1, l, "for a VM that takes none");
	/* a tap queue that is no tap (the destination opens nothing itself: no tap is made) */
	snprintf(cfg, sizeof(cfg), "%s", spin_config(", \"net\": [{\"tap\": \"lvhostile0\"}]"));
	hostile_fd(hello, cfg, "net0", 0, 1, ev, "is not tap lvhostile0");
	hostile_fd(hello, cfg, "net0", 0, 2, ev, "queue 0 of 2");
	/* every duplicate the destination got is closed: its fdinfo names none of these inodes */
	ck_assert_int_eq(fstat(l, &st), 0);
	ck_assert_msg(!pid_holds_inode(D.pid, st.st_ino), "the destination kept a handed fd");
	close(l);
	close(l2);
	close(ev);
}

START_TEST(test_hostile_source)
{
	struct mig_hdr h;
	struct mig_hello hello = {.memory = 67108864, .ncpus = 1};
	uint8_t buf[256];
	size_t n;
	pid_t rp;
	int fd;

	apitest_start(&D, NULL);
	/* garbage, a short header, a wrong magic, version, type, reserved field */
	hostile("GET / HTTP/1.1\r\n\r\nxxxxxxxx", 26, "not an lvmm migration stream");
	hostile("LVMG", 4, "the peer is gone");
	mig_make_hdr(&h, MIG_HELLO, sizeof(hello));
	h.version = 7;
	hostile(&h, sizeof(h), "version 7");
	mig_make_hdr(&h, 99, 0);
	hostile(&h, sizeof(h), "unknown frame type 99");
	mig_make_hdr(&h, MIG_HELLO, sizeof(hello));
	h.flags = 1;
	hostile(&h, sizeof(h), "reserved");
	/* huge lengths */
	mig_make_hdr(&h, MIG_STATE, 1ull << 40);
	hostile(&h, sizeof(h), "outside");
	mig_make_hdr(&h, MIG_CONFIG, UINT64_MAX);
	hostile(&h, sizeof(h), "outside");
	/* out of order: memory before HELLO */
	mig_make_hdr(&h, MIG_MEMORY, 8 + 4096);
	hostile(&h, sizeof(h), "out of order");
	/* a HELLO of an impossible VM, a short payload */
	hello.ncpus = 1000;
	mig_make_hdr(&h, MIG_HELLO, sizeof(hello));
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), &hello, sizeof(hello));
	hostile(buf, sizeof(h) + sizeof(hello), "HELLO");
	hostile(buf, sizeof(h) + 5, "the peer is gone");
	/* a config that is no config, one whose kernel does not exist */
	hello.ncpus = 1;
	rp = start_receive();
	fd = fake_connect();
	put_frame(fd, MIG_HELLO, &hello, sizeof(hello), sizeof(hello));
	put_frame(fd, MIG_CONFIG, "{nope", 5, 5);
	ck_assert_int_eq(child_status(rp, 60), 1);
	close(fd);
	ck_assert(file_has(recv_out, "malformed JSON"));
	rp = start_receive();
	fd = fake_connect();
	put_frame(fd, MIG_HELLO, &hello, sizeof(hello), sizeof(hello));
	n = (size_t)snprintf((char *)buf, sizeof(buf),
			     "{\"memory\": {\"size\": 67108864}, \"payload\": {\"kernel\": "
			     "\"/nonexistent/k\"}}");
	put_frame(fd, MIG_CONFIG, buf, n, n);
	ck_assert_int_eq(child_status(rp, 60), 1);
	close(fd);
	ck_assert(file_has(recv_out, "/nonexistent/k"));
	/* a valid start, then a page outside the RAM; then one that ends at EOF */
	if (testutil_kvm_usable()) {
		uint8_t *page = calloc(1, 8 + 4096);
		uint64_t off = 67108864;
		const char *cfg = spin_config(NULL);

		rp = start_receive();
		fd = fake_connect();
		put_frame(fd, MIG_HELLO, &hello, sizeof(hello), sizeof(hello));
		put_frame(fd, MIG_CONFIG, cfg, strlen(cfg), strlen(cfg));
		memcpy(page, &off, 8);
		put_frame(fd, MIG_MEMORY, page, 8 + 4096, 8 + 4096);
		ck_assert_int_eq(child_status(rp, 60), 1);
		close(fd);
		ck_assert(file_has(recv_out, "not whole pages inside"));
		/* the source dies mid-way: nothing left, and a new receive works */
		rp = start_receive();
		fd = fake_connect();
		put_frame(fd, MIG_HELLO, &hello, sizeof(hello), sizeof(hello));
		put_frame(fd, MIG_CONFIG, cfg, strlen(cfg), strlen(cfg));
		off = 0;
		memcpy(page, &off, 8);
		put_frame(fd, MIG_MEMORY, page, 8 + 4096, 8 + 4096);
		put_frame(fd, MIG_STATE, "x", 1, 1000);
		close(fd);
		ck_assert_int_eq(child_status(rp, 60), 1);
		ck_assert(file_has(recv_out, "the peer is gone"));
		ck_assert_int_eq(apitest_curl(&D, "GET", "vm.info", NULL, NULL), 404);
		/* a state that is no state */
		rp = start_receive();
		fd = fake_connect();
		put_frame(fd, MIG_HELLO, &hello, sizeof(hello), sizeof(hello));
		put_frame(fd, MIG_CONFIG, cfg, strlen(cfg), strlen(cfg));
		put_frame(fd, MIG_STATE, "garbage!", 8, 8);
		ck_assert_int_eq(child_status(rp, 60), 1);
		close(fd);
		ck_assert_int_eq(apitest_curl(&D, "GET", "vm.info", NULL, NULL), 404);
		free(page);
		hostile_fds(&hello);
	}
	/* wrong URLs */
	apitest_expect_error(&D, "vm.receive-migration", "{\"receiver_url\": \"tcp:1.2.3.4:5\"}",
			     400, "unix:PATH");
	apitest_expect_error(&D, "vm.send-migration", "{\"destination_url\": \"unix:/x\"}", 404,
			     "no VM");
}
END_TEST

/* A destination that dies while receiving (SIGKILL): the source answers the error and the
 * guest runs on there. */
START_TEST(test_destination_killed)
{
	char u[300], out[300];
	pid_t rp, sp;
	long at;

	TESTUTIL_NEED_KVM();
	boot_source(NULL);
	apitest_start(&D, NULL);
	rp = start_receive();
	ck_assert_int_eq(kill(D.pid, SIGSTOP), 0);
	snprintf(u, sizeof(u), "unix:%s", mig);
	snprintf(out, sizeof(out), "%s/send.out", S.dir);
	sp = api_child(&S, "send-migration", u, false, out);
	testutil_sleep_ms(1000);
	ck_assert_int_eq(kill(D.pid, SIGKILL), 0);
	apitest_wait(&D, 10);
	ck_assert_int_eq(child_status(sp, 60), 1);
	child_status(rp, 10);
	ck_assert_msg(file_has(out, "the peer is gone"), "%s", testutil_slurp(out));
	ck_assert_str_eq(apitest_vm_state(&S), "Running");
	at = last_heartbeat();
	ck_assert_msg(heartbeat_reaches(at + 3, 10000), "the source does not run on");
	ck_assert_int_eq(apitest_curl(&S, "PUT", "vm.shutdown", NULL, NULL), 204);
}
END_TEST

/* A fake destination that takes everything and closes without READY, or answers READY and
 * closes without DONE: the source resumes both times. */
static void fake_destination(bool ready, bool local)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int l = socket(AF_UNIX, SOCK_STREAM, 0), c, st;
	pid_t sp;
	char out[300], u[300];

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", mig);
	ck_assert_int_eq(bind(l, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(l, 1), 0);
	snprintf(u, sizeof(u), "unix:%s", mig);
	snprintf(out, sizeof(out), "%s/send.out", S.dir);
	sp = api_child(&S, "send-migration", u, local, out);
	c = accept(l, NULL, NULL);
	ck_assert_int_ge(c, 0);
	for (;;) {
		struct mig_hdr h;
		static uint8_t skip[1 << 20];
		uint64_t left;

		ck_assert_int_eq(recv(c, &h, sizeof(h), MSG_WAITALL), sizeof(h));
		ck_assert_int_eq(h.magic, MIG_MAGIC);
		for (left = h.len; left;) {
			ssize_t k = recv(c, skip, left < sizeof(skip) ? left : sizeof(skip), 0);

			ck_assert_int_gt(k, 0);
			left -= (uint64_t)k;
		}
		if (h.type == MIG_STATE)
			break;
	}
	if (ready) {
		struct mig_hdr h;

		put_frame(c, MIG_READY, NULL, 0, 0);
		ck_assert_int_eq(recv(c, &h, sizeof(h), MSG_WAITALL), sizeof(h));
		ck_assert_int_eq(h.type, MIG_COMMIT);
	}
	close(c);
	close(l);
	unlink(mig);
	st = child_status(sp, 60);
	ck_assert_int_eq(st, 1);
	ck_assert_str_eq(apitest_vm_state(&S), "Running");
}

START_TEST(test_destination_vanishes)
{
	long at;

	TESTUTIL_NEED_KVM();
	boot_source(NULL);
	for (int ready = 0; ready < 2; ready++) {
		fake_destination(ready, false);
		at = last_heartbeat();
		ck_assert_msg(heartbeat_reaches(at + 3, 10000), "the source does not run on");
	}
	ck_assert_int_eq(apitest_curl(&S, "PUT", "vm.shutdown", NULL, NULL), 204);
}
END_TEST

/* Whether some process holds a lock on the image (an OFD write lock is refused). */
static bool image_locked(const char *path)
{
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
	int fd = open(path, O_RDWR | O_CLOEXEC), r;

	ck_assert_int_ge(fd, 0);
	r = fcntl(fd, F_OFD_SETLK, &fl);
	ck_assert_msg(!r || errno == EAGAIN || errno == EACCES, "F_OFD_SETLK: %s", strerror(errno));
	close(fd);
	return r != 0;
}

/* A VM with a virtio-blk disk, whose image the VMM holds locked, to a second lvmm on this host:
 * two destinations that vanish after the source let the image go (before READY, after COMMIT)
 * leave the source holding it again and running; then the real destination opens the image at
 * STATE and runs the guest on, the source gone. */
static void migrate_disk(bool local)
{
	char img[300], extra[400];
	long before;

	snprintf(img, sizeof(img), "%s/disk.img", S.dir);
	testutil_write_file(img, "LVMM-DISK\n", 10, 0600);
	ck_assert_int_eq(truncate(img, 4 << 20), 0);
	snprintf(extra, sizeof(extra), ", \"disks\": [{\"path\": \"%s\"}]", img);
	boot_source(extra);
	ck_assert(image_locked(img));
	for (int ready = 0; ready < 2; ready++) {
		fake_destination(ready, local);
		ck_assert_msg(image_locked(img), "the source did not take its image back");
		before = last_heartbeat();
		ck_assert_msg(heartbeat_reaches(before + 3, 10000), "the source does not run on");
	}
	apitest_start(&D, NULL);
	migrate_to_d(local);
	ck_assert_msg(image_locked(img), "the destination does not hold the image");
	ck_assert_int_eq(apitest_curl(&D, "PUT", "vm.shutdown", NULL, NULL), 204);
	ck_assert_int_eq(apitest_curl(&D, "PUT", "vm.delete", NULL, NULL), 204);
	ck_assert_msg(!image_locked(img), "the image stays locked with no VM left");
}

START_TEST(test_migrate_disk_copy)
{
	TESTUTIL_NEED_KVM();
	migrate_disk(false);
}
END_TEST

START_TEST(test_migrate_disk_local)
{
	TESTUTIL_NEED_KVM();
	migrate_disk(true);
	ck_assert_msg(file_has(D.log, "local, RAM memfd"), "not a local migration");
}
END_TEST

/* A device counter of t's VM (vm.counters), -1 without the device. */
static long long dev_counter(struct apitest *t, const char *dev, const char *key)
{
	json_t *j = NULL, *d;
	long long n = -1;

	ck_assert_int_eq(apitest_curl(t, "GET", "vm.counters", NULL, &j), 200);
	d = json_object_get(j, dev);
	if (d)
		n = json_integer_value(json_object_get(d, key));
	json_decref(j);
	return n;
}

/* A host program at the vsock device's PATH asks for guest port 1234 (the bench guest has no
 * vsock driver: the device takes the connection, which is what is counted). */
static void vsock_knock(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	ck_assert_msg(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect %s: %s", path,
		      strerror(errno));
	ck_assert_int_eq(write(fd, "CONNECT 1234\n", 13), 13);
	close(fd);
}

static bool knocks_counted(struct apitest *t, long long n)
{
	for (int i = 0; i < 100; i++) {
		if (dev_counter(t, "vsock0", "backend_cmds") >= n)
			return true;
		testutil_sleep_ms(50);
	}
	return false;
}

/* Whether a connect to path is taken (a stale socket file refuses it). */
static bool socket_listens(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool yes;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	yes = !connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	close(fd);
	return yes;
}

/* In this case's network namespace (sysfs shows the one it was mounted in). */
static bool link_exists(const char *name)
{
	return if_nametoindex(name) != 0;
}

/* Whether a single-queue tap that exists has a holder: attaching to it is then refused. */
static bool tap_held(const char *name)
{
	struct ifreq ifr = {.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR};
	int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC), r;

	ck_assert_int_ge(fd, 0);
	ck_assert(link_exists(name));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	r = ioctl(fd, TUNSETIFF, &ifr);
	ck_assert_msg(!r || errno == EBUSY, "TUNSETIFF %s: %s", name, strerror(errno));
	close(fd);
	return r != 0;
}

/* A VM with virtio-net on a tap lvmm made itself (in a network namespace of this case's own)
 * and a virtio-vsock: a destination that vanishes leaves the source serving both; then a real
 * destination takes both over as they are (FDS frames): the tap lives on after the source
 * exits (a tap lvmm made goes with its last fd) and the destination holds it; PATH, which the
 * source leaves in place, reaches the destination's device; once the destination's VM is
 * deleted the tap is gone and nobody listens at PATH. */
static void migrate_host_ends(bool local)
{
	char vs[100], extra[600];

	ck_assert_msg(unshare(CLONE_NEWNET) == 0, "unshare(CLONE_NEWNET): %s (needs root)",
		      strerror(errno));
	snprintf(vs, sizeof(vs), "%s/v.sock", S.dir);
	snprintf(extra, sizeof(extra),
		 ", \"net\": [{\"tap\": \"lvmig0\", \"mac\": \"52:54:00:12:34:59\"}],"
		 " \"vsock\": {\"cid\": 3, \"socket\": \"%s\"}",
		 vs);
	boot_source(extra);
	ck_assert(tap_held("lvmig0"));
	vsock_knock(vs);
	ck_assert(knocks_counted(&S, 1));
	fake_destination(true, local);
	ck_assert(tap_held("lvmig0"));
	vsock_knock(vs);
	ck_assert_msg(knocks_counted(&S, 2), "the source's vsock no longer takes connections");
	apitest_start(&D, NULL);
	migrate_to_d(local);
	ck_assert_msg(file_has(S.log, "2 host fds handed over"), "the source's log: %s",
		      testutil_slurp(S.log));
	ck_assert_msg(tap_held("lvmig0"), "the tap lvmm made is gone or unheld after the move");
	vsock_knock(vs);
	ck_assert_msg(knocks_counted(&D, 1), "PATH does not reach the destination's device");
	ck_assert_int_eq(apitest_curl(&D, "PUT", "vm.shutdown", NULL, NULL), 204);
	ck_assert_int_eq(apitest_curl(&D, "PUT", "vm.delete", NULL, NULL), 204);
	ck_assert_msg(!link_exists("lvmig0"), "the tap outlived the VM that held it last");
	ck_assert_msg(!socket_listens(vs), "PATH still takes connections with no VM");
}

START_TEST(test_migrate_net_vsock_copy)
{
	TESTUTIL_NEED_KVM();
	migrate_host_ends(false);
}
END_TEST

START_TEST(test_migrate_net_vsock_local)
{
	TESTUTIL_NEED_KVM();
	migrate_host_ends(true);
}
END_TEST

/* Commands the SSD served on the VM's vNVMe nvme0 so far (every queue pair's). */
static long long ssd_cmds(struct apitest *t)
{
	json_t *j = NULL, *q;
	long long n = 0;

	ck_assert_int_eq(apitest_curl(t, "GET", "vm.counters", NULL, &j), 200);
	q = json_object_get(json_object_get(j, "nvme0"), "queues");
	for (size_t i = 0; i < json_array_size(q); i++)
		n += json_integer_value(json_object_get(json_array_get(q, i), "cmds"));
	json_decref(j);
	return n;
}

/* Queue pairs doorbell=auto moved to eventfd doorbells (vm.counters). */
static long long ssd_db_switched(struct apitest *t)
{
	json_t *j = NULL;
	long long n;

	ck_assert_int_eq(apitest_curl(t, "GET", "vm.counters", NULL, &j), 200);
	n = json_integer_value(json_object_get(json_object_get(j, "nvme0"), "db_switched"));
	json_decref(j);
	return n;
}

static bool ssd_cmds_pass(struct apitest *t, long long n, unsigned limit_ms)
{
	for (unsigned ms = 0; ms < limit_ms; ms += 50) {
		if (ssd_cmds(t) > n)
			return true;
		testutil_sleep_ms(50);
	}
	return false;
}

/* The bench guest writing at random on 4 queue pairs of a softssd volume (isolated, polled
 * doorbells), which one writer may attach: `local` is refused; two fake destinations that
 * vanish (before READY, after COMMIT) after the source let the volume go leave the source
 * taking it back, its queue pairs going on where they were; then a real destination attaches
 * the volume at STATE and the run ends there with every I/O done and none failed. */
static void migrate_ssd(const char *doorbell, const char *dbbuf)
{
	const char *opts[] = {"--backing", NULL, "--size", "64M", NULL};
	char backing[600], logp[600], cfg[2048], body[400], *c;
	const char *res;
	long long n;
	pid_t ssd, rp;

	TESTUTIL_NEED_KVM();
	setenv("LVMM_RUN_DIR", S.dir, 1);
	snprintf(backing, sizeof(backing), "%s/ssd.img", S.dir);
	snprintf(logp, sizeof(logp), "%s/ssd.log", S.dir);
	opts[1] = backing;
	ssd = testutil_ssd_start("migssd", logp, opts);
	ck_assert_int_eq(
	    testutil_system("%s ssd vol create migssd vm1 16M >/dev/null", testutil_lvmm()), 0);
	snprintf(cfg, sizeof(cfg),
		 "{\"cpus\": {\"boot_vcpus\": 1}, \"memory\": {\"size\": 67108864},"
		 " \"payload\": {\"kernel\": \"%s\", \"cmdline\": \"bench.mode=work bench.qp=4 "
		 "bench.qd=4 bench.span_mb=1 bench.rw=randwrite bench.ios=150000%s\"},"
		 " \"vnvme\": [{\"ssd\": \"migssd\", \"vol\": \"vm1\", \"mode\": \"isolated\","
		 " \"doorbell\": \"%s\", \"num_queues\": 4}],"
		 " \"serial\": {\"mode\": \"File\", \"file\": \"%s\"}}",
		 guest, dbbuf, doorbell, S.console);
	apitest_start(&S, NULL);
	ck_assert_int_eq(apitest_curl(&S, "PUT", "vm.create", cfg, NULL), 204);
	ck_assert_int_eq(apitest_curl(&S, "PUT", "vm.boot", NULL, NULL), 204);
	ck_assert_msg(ssd_cmds_pass(&S, 100, 20000), "the run does not start");
	ck_assert_int_eq(ssd_db_switched(&S), !strcmp(doorbell, "auto") ? 4 : 0);
	snprintf(body, sizeof(body), "{\"destination_url\": \"unix:%s\", \"local\": true}", mig);
	apitest_expect_error(&S, "vm.send-migration", body, 400, "hands guest RAM");
	for (int ready = 0; ready < 2; ready++) {
		fake_destination(ready, false);
		n = ssd_cmds(&S);
		ck_assert_msg(ssd_cmds_pass(&S, n + 100, 20000), "the source's I/O stalls");
	}
	c = testutil_slurp(S.console);
	ck_assert_msg(!strstr(c, "work result"), "the run ended before the migration: raise ios");
	free(c);

	apitest_start(&D, NULL);
	rp = start_receive();
	snprintf(body, sizeof(body), "{\"destination_url\": \"unix:%s\"}", mig);
	S.curl_max_s = 120;
	ck_assert_int_eq(apitest_curl(&S, "PUT", "vm.send-migration", body, NULL), 204);
	ck_assert_int_eq(child_status(rp, 30), 0);
	ck_assert_int_eq(apitest_wait(&S, 15), 0);
	c = testutil_slurp(S.log);
	res = c ? strstr(c, "lvmm: migrated to") : NULL;
	ck_assert_msg(res, "no migration line in the source's log");
	fprintf(stderr, "test_migrate_ssd: %.*s\n", (int)strcspn(res, "\n"), res);
	free(c);
	n = ssd_cmds(&D);
	ck_assert_msg(ssd_cmds_pass(&D, n + 100, 20000), "the destination's I/O stalls at %lld", n);
	for (unsigned ms = 0; ms < 300000 && !file_has(S.console, "bench: done"); ms += 100)
		testutil_sleep_ms(100);
	c = testutil_slurp(S.console);
	ck_assert_msg(strstr(c, "bench: done"),
		      "the migrated run does not end (%lld commands):\n%s", ssd_cmds(&D), c);
	free(c);
	c = testutil_slurp(S.console);
	res = strstr(c, "bench: work result");
	ck_assert_msg(res && strstr(res, " ios=") &&
			  strtoull(strstr(res, " ios=") + 5, NULL, 10) >= 150000 &&
			  strstr(res, " errors=0 "),
		      "%s", c);
	free(c);
	ck_assert_int_eq(testutil_ssd_stop(&ssd, SIGTERM), 0);
}

START_TEST(test_migrate_ssd)
{
	migrate_ssd("poll", "");
}
END_TEST

/* doorbell=auto with Doorbell Buffer Config after the queues: the pairs moved to eventfd
 * doorbells are let go, taken back and bound at the destination on eventfd doorbells. */
START_TEST(test_migrate_ssd_auto)
{
	migrate_ssd("auto", " bench.dbbuf=late");
}
END_TEST

/* A source killed while sending: the destination drops what it got and can receive again. */
START_TEST(test_source_killed)
{
	char u[300], out[300];
	pid_t rp, sp;

	TESTUTIL_NEED_KVM();
	boot_source(NULL);
	apitest_start(&D, NULL);
	rp = start_receive();
	ck_assert_int_eq(kill(D.pid, SIGSTOP), 0);
	snprintf(u, sizeof(u), "unix:%s", mig);
	snprintf(out, sizeof(out), "%s/send.out", S.dir);
	sp = api_child(&S, "send-migration", u, false, out);
	testutil_sleep_ms(1000);
	ck_assert_int_eq(kill(S.pid, SIGKILL), 0);
	apitest_wait(&S, 10);
	ck_assert_int_eq(kill(D.pid, SIGCONT), 0);
	ck_assert_int_eq(child_status(rp, 60), 1);
	child_status(sp, 10);
	ck_assert(apitest_ping(&D));
	ck_assert_int_eq(apitest_curl(&D, "GET", "vm.info", NULL, NULL), 404);
	/* another receive starts and ends cleanly */
	hostile("", 0, "the peer is gone");
}
END_TEST

/* A device that cannot be saved refuses the migration before anything is sent. */
START_TEST(test_refuses_device)
{
	char extra[700], sock[400], body[400];
	pid_t rp;
	int lfd;

	TESTUTIL_NEED_KVM();
	snprintf(sock, sizeof(sock), "%s/fsd.sock", S.dir);
	lfd = apitest_fake_vhost_fs(sock);
	snprintf(extra, sizeof(extra), ", \"fs\": [{\"tag\": \"share\", \"socket\": \"%s\"}]",
		 sock);
	boot_source(extra);
	apitest_start(&D, NULL);
	rp = start_receive();
	snprintf(body, sizeof(body), "{\"destination_url\": \"unix:%s\"}", mig);
	apitest_expect_error(&S, "vm.send-migration", body, 400,
			     "device fs0 (virtio-fs) cannot be saved");
	ck_assert_str_eq(apitest_vm_state(&S), "Running");
	/* nothing reached the destination, which still waits */
	ck_assert_int_eq(waitpid(rp, NULL, WNOHANG), 0);
	kill(rp, SIGKILL);
	waitpid(rp, NULL, 0);
	ck_assert_int_eq(apitest_curl(&S, "PUT", "vm.shutdown", NULL, NULL), 204);
	close(lfd);
}
END_TEST

/* With --allowed-dir the socket path is checked like any path a client names. */
START_TEST(test_allowed_dir)
{
	char *extra[] = {"--allowed-dir", D.dir, NULL};

	apitest_start(&D, extra);
	apitest_expect_error(&D, "vm.receive-migration",
			     "{\"receiver_url\": \"unix:/tmp/lvmm-outside.sock\"}", 400,
			     "beneath the allowed directory");
	apitest_expect_error(&D, "vm.receive-migration", "{\"receiver_url\": 3}", 400,
			     "receiver_url (a string) is required");
	ck_assert_int_eq(apitest_curl(&D, "GET", "vm.info", NULL, NULL), 404);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("migration");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 180);
	tcase_add_test(tc, test_migrate_copy);
	tcase_add_test(tc, test_migrate_local);
	tcase_add_test(tc, test_migrate_restored_local);
	tcase_add_test(tc, test_migrate_paused_cli);
	tcase_add_test(tc, test_migrate_disk_copy);
	tcase_add_test(tc, test_migrate_disk_local);
	tcase_add_test(tc, test_migrate_net_vsock_copy);
	tcase_add_test(tc, test_migrate_net_vsock_local);
	tcase_add_test(tc, test_hostile_source);
	tcase_add_test(tc, test_destination_killed);
	tcase_add_test(tc, test_destination_vanishes);
	tcase_add_test(tc, test_source_killed);
	tcase_add_test(tc, test_refuses_device);
	tcase_add_test(tc, test_allowed_dir);
	suite_add_tcase(s, tc);
	/* CK_RUN_CASE=ssd: a vNVMe on a softssd volume; its bench run is long on a loaded host */
	tc = tcase_create("ssd");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 400);
	tcase_add_test(tc, test_migrate_ssd);
	tcase_add_test(tc, test_migrate_ssd_auto);
	suite_add_tcase(s, tc);
	return testutil_run_suite(s);
}
