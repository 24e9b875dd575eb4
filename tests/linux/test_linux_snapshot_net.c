/* Snapshot and restore of a Linux guest with virtio-net on a tap and virtio-vsock, in a network
 * namespace of this test's own (unshare(CLONE_NEWNET): the tap and every server live and die
 * there; no host interface is touched). /init (lvmm.test=snapnet, added to the test initramfs as
 * a second cpio archive with the guest's vsock-test) echoes on vsock port 1234 and counts: each
 * count connects to the host's port 5000 (PATH_5000, an echo server of this test) and pings the
 * tap's host address. A host program holds a connection to the guest's echo through PATH when
 * the VM is paused, saved and its lvmm SIGKILLed; a fresh lvmm restores it (the tap opened again
 * by name and addressed here again, PATH listened on again) and resumes: the guest's counts go on
 * with vsock and ping working, and a new host connection is echoed, which needs the guest's echo
 * server to have seen its old connection reset (the transport reset event), and the guest
 * acknowledged the request to announce itself. Prints the figures docs/snapshot.md quotes. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "apitest.h"
#include "linuxboot.h"
#include "testutil.h"

#define BOOT_LIMIT_S	200 /* to the first count with vsock and ping, on a loaded kvm_pvm host */
#define RESUME_LIMIT_S	90
#define TCASE_TIMEOUT_S 400
#define TAP		"lvsnap0"
#define HOST_IP		"192.168.78.1"
#define GUEST_IP	"192.168.78.2"
#define GUEST_PORT	1234
#define HOST_PORT	5000
#define XCHG		4096

static struct apitest T, M; /* M: the destination of the live migration */
static char kernel[4096], initrd[4096], snap[256], vsock[108];

/* Builtins but for the two programs each count runs (a fork costs seconds on kvm_pvm); a FIFO
 * opened read-write never has data, so read -t is the sleep. */
static const char script[] = "busybox mkfifo /snap-tick\n"
			     "exec 3<>/snap-tick\n"
			     "busybox ip link set lo up\n"
			     "busybox ip link set eth0 up\n"
			     "busybox ip addr add " GUEST_IP "/24 dev eth0\n"
			     "/bin/vsock-test echo 1234 1000 >/dev/null &\n"
			     "i=0\n"
			     "while [ $i -lt 1000000 ]; do\n"
			     "\ti=$((i + 1))\n"
			     "\tv=fail\n"
			     "\tif /bin/vsock-test send 5000 4096 >/dev/null; then v=ok; fi\n"
			     "\tp=fail\n"
			     "\tif busybox ping -c 1 -W 3 " HOST_IP " >/dev/null; then p=ok; fi\n"
			     "\techo \"LVMM-SNAPNET-COUNT $i vsock=$v net=$p\"\n"
			     "\tread -r -t 0.2 x <&3\n"
			     "done\n"
			     "return 0\n";

static void cpio_entry(FILE *f, const char *name, unsigned mode, const void *data, size_t len)
{
	static unsigned ino = 0x7100;
	static const char zero[4];
	size_t nlen = strlen(name) + 1;

	fprintf(f, "070701%08X%08X%08X%08X%08X%08X%08zX%08X%08X%08X%08X%08zX%08X", ino++, mode, 0,
		0, 1, 0, len, 0, 0, 0, 0, nlen, 0);
	fwrite(name, 1, nlen, f);
	fwrite(zero, 1, (4 - (110 + nlen) % 4) % 4, f);
	if (len)
		fwrite(data, 1, len, f);
	fwrite(zero, 1, (4 - len % 4) % 4, f);
}

/* The test initramfs, then an archive with /lvmm-tests/snapnet.sh and /bin/vsock-test. */
static void make_initrd(const char *base, const char *vtest)
{
	size_t n, vn;
	char *img, *vt;
	FILE *f;

	snprintf(initrd, sizeof(initrd), "%s/initrd.cpio", T.dir);
	f = fopen(initrd, "w");
	ck_assert_ptr_nonnull(f);
	img = malloc(64 << 20);
	vt = malloc(8 << 20);
	ck_assert_ptr_nonnull(img);
	ck_assert_ptr_nonnull(vt);
	n = testutil_read_file(base, img, 64 << 20);
	vn = testutil_read_file(vtest, vt, 8 << 20);
	ck_assert_uint_gt(n, 0);
	ck_assert_uint_gt(vn, 0);
	fwrite(img, 1, n, f);
	while (ftell(f) % 4)
		fputc(0, f);
	cpio_entry(f, "lvmm-tests", 040755, NULL, 0);
	cpio_entry(f, "lvmm-tests/snapnet.sh", 0100644, script, sizeof(script) - 1);
	cpio_entry(f, "bin/vsock-test", 0100755, vt, vn);
	cpio_entry(f, "TRAILER!!!", 0, NULL, 0);
	ck_assert_int_eq(fclose(f), 0);
	free(img);
	free(vt);
}

static void setup(void)
{
	char gdir[3900], base[4096], vtest[4096];

	apitest_init(&T, "/tmp/lvmm-ltest-snapnet-");
	T.curl_max_s = 60;
	apitest_init(&M, "/tmp/lvmm-ltest-snapnet-m-");
	M.curl_max_s = 60;
	snprintf(gdir, sizeof(gdir), "%s", testutil_env_or("LVMM_GUEST_DIR", ""));
	if (!*gdir)
		snprintf(gdir, sizeof(gdir), "%s/guest", testutil_env_or("BUILD", "build"));
	snprintf(kernel, sizeof(kernel), "%s/vmlinux", gdir);
	snprintf(base, sizeof(base), "%s/initramfs.cpio", gdir);
	snprintf(vtest, sizeof(vtest), "%s/vsock-test", gdir);
	ck_assert_msg(access(kernel, R_OK) == 0, "%s missing: run make guest", kernel);
	ck_assert_msg(access(base, R_OK) == 0, "%s missing: run make guest", base);
	ck_assert_msg(access(vtest, R_OK) == 0, "%s missing: run make guest", vtest);
	make_initrd(base, vtest);
	snprintf(snap, sizeof(snap), "%s/snap", T.dir);
	ck_assert_int_eq(mkdir(snap, 0700), 0);
	snprintf(vsock, sizeof(vsock), "%s/v.sock", T.dir);
}

static void teardown(void)
{
	testutil_rmtree(snap);
	apitest_fini(&M);
	apitest_fini(&T);
}

static int put(const char *endpoint, const char *data)
{
	return apitest_curl(&T, "PUT", endpoint, data, NULL);
}

static char *url(const char *key)
{
	static char b[512];

	snprintf(b, sizeof(b), "{\"%s\": \"file://%s\"}", key, snap);
	return b;
}

static void kill_lvmm(void)
{
	int st;

	ck_assert_int_gt(T.pid, 0);
	ck_assert_int_eq(kill(T.pid, SIGKILL), 0);
	ck_assert_int_eq(waitpid(T.pid, &st, 0), T.pid);
	T.pid = 0;
}

/* ---- the guest's counts ---- */

/* The last count on the console and whether its vsock and ping worked; -1 when none. */
static long last_count(bool *ok)
{
	char *c = testutil_slurp(T.console), *p, *last = NULL;
	long n = -1;

	for (p = c; p && (p = strstr(p, "LVMM-SNAPNET-COUNT ")); p++)
		last = p;
	if (last) {
		n = strtol(last + 19, &p, 10);
		*ok = !strncmp(p, " vsock=ok net=ok", 16);
	}
	free(c);
	return n;
}

/* Waits for a count past after that found vsock and ping working: that count, or -1. */
static long good_count_after(long after, unsigned limit_s)
{
	for (unsigned t = 0; t < limit_s * 10; t++) {
		bool ok = false;
		long n = last_count(&ok);

		if (n > after && ok)
			return n;
		testutil_sleep_ms(100);
	}
	return -1;
}

/* ---- the host side ---- */

static uint8_t pattern(uint64_t i)
{
	return (uint8_t)(i * 7 + (i >> 9));
}

/* PATH_5000: echoes each connection from the guest to its end, one after another. */
static void *echo_server(void *arg)
{
	int lfd = (int)(intptr_t)arg, fd;
	char buf[8192];

	while ((fd = accept(lfd, NULL, NULL)) >= 0) {
		ssize_t n;

		while ((n = read(fd, buf, sizeof(buf))) > 0)
			if (write(fd, buf, (size_t)n) != n)
				break;
		close(fd);
	}
	return NULL;
}

static int listen_at(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	ck_assert_uint_lt(strlen(path), sizeof(sa.sun_path));
	memcpy(sa.sun_path, path, strlen(path) + 1);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(fd, 8), 0);
	return fd;
}

/* CONNECT GUEST_PORT through PATH: the fd once the guest accepted, or -1. */
static int vsock_connect(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct timeval tv = {.tv_sec = 30};
	char line[64];
	size_t n = 0;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	memcpy(sa.sun_path, vsock, strlen(vsock) + 1);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
		goto fail;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (write(fd, "CONNECT 1234\n", 13) != 13)
		goto fail;
	while (n + 1 < sizeof(line)) {
		if (read(fd, line + n, 1) != 1)
			goto fail;
		if (line[n++] == '\n')
			break;
	}
	line[n] = 0;
	if (strncmp(line, "OK ", 3))
		goto fail;
	return fd;
fail:
	if (fd >= 0)
		close(fd);
	return -1;
}

/* XCHG bytes of the pattern through the guest's echo: true when all came back as sent. */
static bool echoed(int fd, uint64_t base)
{
	uint8_t out[XCHG], in[XCHG];
	size_t got = 0;

	for (size_t i = 0; i < XCHG; i++)
		out[i] = pattern(base + i);
	if (write(fd, out, XCHG) != XCHG)
		return false;
	while (got < XCHG) {
		ssize_t n = read(fd, in + got, XCHG - got);

		if (n <= 0)
			return false;
		got += (size_t)n;
	}
	return !memcmp(in, out, XCHG);
}

static void netns_up(void)
{
	char *out = NULL;

	ck_assert_msg(unshare(CLONE_NEWNET) == 0, "unshare(CLONE_NEWNET): %s (needs root)",
		      strerror(errno));
	ck_assert_msg(testutil_sh("ip link set lo up 2>&1", &out) == 0, "namespace set-up: %s",
		      out ? out : "");
	free(out);
}

/* The tap's host side, in this namespace: lvmm opens the tap by name, the test addresses it and
 * gives it the same MAC each time (a new tap's is random: the restored guest's ARP entry for the
 * host would name the old one until it ages out, some 30-60 s). */
static void tap_up(void)
{
	char *out = NULL;

	ck_assert_msg(testutil_sh("ip link set " TAP
				  " address 02:00:00:78:00:01 2>&1 && ip addr add "
				  "" HOST_IP "/24 dev " TAP " 2>&1 && ip link set " TAP " up 2>&1",
				  &out) == 0,
		      "tap set-up: %s", out ? out : "");
	free(out);
}

static uint64_t counter(json_t *j, const char *dev, const char *key)
{
	return (uint64_t)json_integer_value(json_object_get(json_object_get(j, dev), key));
}

/* `lvmm api --socket SOCK receive-migration unix:PATH` in a child: its pid. */
static pid_t receive_child(const char *sock, const char *path, const char *out)
{
	char u[300];
	pid_t p;

	snprintf(u, sizeof(u), "unix:%s", path);
	p = fork();
	ck_assert_int_ge(p, 0);
	if (!p) {
		int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

		dup2(fd, 1);
		dup2(fd, 2);
		execl(M.lvmm, M.lvmm, "api", "--socket", sock, "receive-migration", u,
		      (char *)NULL);
		_exit(127);
	}
	return p;
}

/* The restored VM moved live to a third lvmm, its tap and vsock socket handed over as they are:
 * the tap keeps the address this test gave it (nothing set up again), the guest's counts go on
 * with vsock and ping working, the connection held across the move is reset and a new one
 * through the same PATH is echoed by the guest; nobody listens at PATH once it is deleted. */
static void migrate_on(long after)
{
	char mig[200], out[300];
	struct stat st;
	double t0, t_mig, t_good;
	long moved, good;
	pid_t rp;
	int held, fresh, status;
	json_t *j = NULL;

	held = vsock_connect();
	ck_assert_msg(held >= 0, "CONNECT 1234 through PATH failed before the move");
	ck_assert_msg(echoed(held, 2 << 20), "the guest's echo before the move");
	apitest_start(&M, NULL);
	snprintf(mig, sizeof(mig), "%s/mig.sock", M.dir);
	snprintf(out, sizeof(out), "%s/receive.out", M.dir);
	rp = receive_child(M.sock, mig, out);
	for (int i = 0; i < 200 && stat(mig, &st); i++)
		testutil_sleep_ms(25);
	ck_assert_msg(!stat(mig, &st), "the destination does not listen at %s", mig);
	snprintf(out, sizeof(out), "{\"destination_url\": \"unix:%s\"}", mig);
	t0 = testutil_now_s();
	ck_assert_int_eq(put("vm.send-migration", out), 204);
	t_mig = testutil_now_s() - t0;
	ck_assert_int_eq(testutil_wait_limit(rp, "receive-migration", 60) >= 0, 1);
	ck_assert_int_eq(apitest_wait(&T, 30), 0);
	ck_assert_str_eq(apitest_vm_state(&M), "Running");
	moved = last_count(&(bool){false});
	ck_assert_int_ge(moved, after);
	good = good_count_after(moved, RESUME_LIMIT_S);
	t_good = testutil_now_s() - t0;
	ck_assert_msg(good > moved,
		      "no count with vsock and ping working after the move (%ld):\n%s", moved,
		      testutil_slurp(T.console));
	ck_assert_msg(read(held, &status, 1) <= 0, "the held connection lived through the move");
	close(held);
	fresh = vsock_connect();
	ck_assert_msg(fresh >= 0, "CONNECT 1234 through PATH after the move failed");
	ck_assert_msg(echoed(fresh, 3 << 20), "the guest's echo after the move");
	close(fresh);
	ck_assert_int_eq(apitest_curl(&M, "GET", "vm.counters", NULL, &j), 200);
	ck_assert_uint_gt(counter(j, "net0", "rx_frames"), 0);
	ck_assert_uint_gt(counter(j, "vsock0", "read_ops"), 0);
	json_decref(j);
	fprintf(stderr,
		"test_linux_snapshot_net: migrated live at count %ld (vm.send-migration %.2f s); "
		"to count %ld with vsock and ping working %.1f s\n",
		moved, t_mig, good, t_good);
	ck_assert_int_eq(apitest_curl(&M, "PUT", "vm.shutdown", NULL, NULL), 204);
	ck_assert_int_eq(apitest_curl(&M, "PUT", "vm.delete", NULL, NULL), 204);
	/* closed with the VM (the file stays: a migration's destination never removes PATH) */
	ck_assert_msg(vsock_connect() < 0, "PATH still takes connections with no VM");
	ck_assert_int_eq(apitest_curl(&M, "PUT", "vmm.shutdown", NULL, NULL), 204);
	ck_assert_int_eq(apitest_wait(&M, 30), 0);
}

START_TEST(test_linux_snapshot_net_vsock)
{
	char cfg[16384], p5000[160], *c;
	double t0, t_save, t_restore, t_good;
	long saved, before, after;
	int lfd, held, fresh;
	pthread_t srv;
	json_t *j = NULL;

	TESTUTIL_NEED_KVM();
	netns_up();
	snprintf(p5000, sizeof(p5000), "%s_%d", vsock, HOST_PORT);
	lfd = listen_at(p5000);
	ck_assert_int_eq(pthread_create(&srv, NULL, echo_server, (void *)(intptr_t)lfd), 0);
	pthread_detach(srv);
	apitest_start(&T, NULL);
	snprintf(cfg, sizeof(cfg),
		 "{\"cpus\": {\"boot_vcpus\": 1}, \"memory\": {\"size\": 134217728},"
		 " \"payload\": {\"kernel\": \"%s\", \"initramfs\": \"%s\","
		 " \"cmdline\": \"console=ttyS0 lvmm.test=snapnet\"},"
		 " \"net\": [{\"tap\": \"" TAP "\", \"mac\": \"52:54:00:12:34:58\"}],"
		 " \"vsock\": {\"cid\": 3, \"socket\": \"%s\"},"
		 " \"serial\": {\"mode\": \"File\", \"file\": \"%s\"}}",
		 kernel, initrd, vsock, T.console);
	ck_assert_int_eq(put("vm.create", cfg), 204);
	tap_up();
	ck_assert_int_eq(put("vm.boot", NULL), 204);
	before = good_count_after(0, BOOT_LIMIT_S);
	c = testutil_slurp(T.console);
	ck_assert_msg(before > 0, "the guest never reached the host by vsock and ping:\n%s", c);
	free(c);
	/* a host program's connection to the guest's echo, open across the save */
	held = vsock_connect();
	ck_assert_msg(held >= 0, "CONNECT 1234 through PATH failed");
	ck_assert_msg(echoed(held, 0), "the guest's echo before the save");

	ck_assert_int_eq(put("vm.pause", NULL), 204);
	saved = last_count(&(bool){false});
	t0 = testutil_now_s();
	ck_assert_int_eq(put("vm.snapshot", url("destination_url")), 204);
	t_save = testutil_now_s() - t0;
	kill_lvmm();
	/* the saving lvmm is gone and its end of the connection with it */
	{
		char b[8];

		ck_assert_int_le(read(held, b, sizeof(b)), 0);
		close(held);
	}

	apitest_start(&T, NULL);
	ck_assert_int_eq(truncate(T.console, 0), 0);
	t0 = testutil_now_s();
	ck_assert_int_eq(put("vm.restore", url("source_url")), 204);
	t_restore = testutil_now_s() - t0;
	ck_assert_str_eq(apitest_vm_state(&T), "Paused");
	tap_up(); /* a new tap of the same name: its address is not part of the VM's config */
	ck_assert_int_eq(put("vm.resume", NULL), 204);
	after = good_count_after(saved + 1, RESUME_LIMIT_S);
	t_good = testutil_now_s() - t0;
	c = testutil_slurp(T.console);
	ck_assert_msg(after > saved + 1,
		      "no count with vsock and ping working after the restore (saved at %ld):\n%s",
		      saved, c);
	ck_assert_msg(!strstr(c, "LVMM-SNAPNET-COUNT 1 "), "the restored guest counted from 1");
	ck_assert_msg(!strstr(c, LINUXBOOT_BANNER), "the restored guest booted again");
	free(c);
	/* the guest's echo took a new connection: the held one was reset in the guest */
	fresh = vsock_connect();
	ck_assert_msg(fresh >= 0, "CONNECT 1234 through the restored PATH failed");
	ck_assert_msg(echoed(fresh, 1 << 20), "the guest's echo after the restore");
	close(fresh);
	ck_assert_int_eq(apitest_curl(&T, "GET", "vm.counters", NULL, &j), 200);
	ck_assert_uint_gt(counter(j, "net0", "rx_frames"), 0);
	ck_assert_uint_gt(counter(j, "net0", "tx_frames"), 0);
	ck_assert_uint_gt(counter(j, "vsock0", "read_ops"), 0);
	/* the restored guest announced itself (GUEST_ANNOUNCE) and acknowledged it: the only
	 * control command it sends after the restore, and none was refused */
	ck_assert_uint_ge(counter(j, "net0", "backend_cmds"), 1);
	ck_assert_uint_eq(counter(j, "net0", "backend_errors"), 0);
	json_decref(j);
	fprintf(stderr,
		"test_linux_snapshot_net: saved at count %ld in %.3f s; vm.restore %.3f s; "
		"restore to count %ld with vsock and ping working %.1f s\n",
		saved, t_save, t_restore, after, t_good);
	migrate_on(after);
	close(lfd);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("linux_snapshot_net");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, TCASE_TIMEOUT_S);
	tcase_add_test(tc, test_linux_snapshot_net_vsock);
	suite_add_tcase(s, tc);
	return testutil_run_suite(s);
}
