/* Linux's virtio_net on lvmm's virtio-net with a tap, in a network namespace of this test's own
 * (unshare(CLONE_NEWNET): the tap lvmm creates with its address (--net ip=,mask=) and every
 * server live and die there; no host interface is touched). The guest (root on a virtio-blk disk)
 * pings the host side, fetches 4 MiB over HTTP from busybox httpd in the namespace and prints its
 * md5; then serves a file the host fetches and checks. The negotiated features (checksum and TSO
 * both ways, mergeable buffers) are read from the guest's sysfs, and vm.counters shows the frames
 * each way. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ext4check.h"
#include "linuxboot.h"
#include "testutil.h"

#define BOOT_LIMIT_S	300
#define TCASE_TIMEOUT_S 400
#define IMG_MB		48
#define TAP		"lvnet0"
#define HOST_IP		"192.168.77.1"
#define GUEST_IP	"192.168.77.2"
#define BLOB_MB		1

static char dir[64], img[128], api[128];

/* /init: shell builtins for small reads, one io-check (tools/guest/io-check.c) for both checksums
 * with 1 MiB reads, the fetched and the served file in a tmpfs: on kvm_pvm hosts a fork/exec
 * costs about a second and the emulated ext4 write path of the root disk seconds a MiB. */
static const char init_script[] =
    "#!/bin/busybox sh\n"
    "b=/bin/busybox\n"
    "$b mount -t proc proc /proc\n"
    "$b mount -t sysfs sys /sys\n"
    "$b ip link set lo up\n"
    "$b ip link set eth0 up\n"
    "$b ip addr add " GUEST_IP "/24 dev eth0\n"
    "for d in /sys/bus/virtio/devices/*; do\n"
    "  read -r id <$d/device\n"
    "  [ \"$id\" = 0x0001 ] && read -r f <$d/features && echo \"LVMM-NET-FEATURES $f\"\n"
    "done\n"
    "$b ping -c 5 -i 0.2 -W 5 " HOST_IP " >/ping && echo LVMM-NET-PING-OK\n"
    "rtt=; while read -r l; do rtt=$l; done </ping; echo \"LVMM-NET-RTT $rtt\"\n"
    "$b mkdir -p /www\n"
    "$b mount -t tmpfs tmpfs /www\n"
    "read -r t0 _ </proc/uptime\n"
    "$b wget -q -O /www/blob http://" HOST_IP ":8080/blob && echo LVMM-NET-WGET-OK\n"
    "read -r t1 _ </proc/uptime\n"
    "$b seq 1 180000 > /www/gblob\n"
    "/bin/io-check md5 LVMM-NET-MD5 /www/blob echo \"t0=$t0 t1=$t1\" md5 LVMM-NET-GMD5 "
    "/www/gblob\n"
    "$b httpd -p 8081 -h /www\n"
    "echo LVMM-NET-SERVING\n"
    "$b nc -l -p 9000 >/dev/null\n"
    "echo LVMM-NET-GUEST-DONE\n"
    "exec $b poweroff -f\n";

struct host {
	pthread_t thread;
	bool started;
	char failures[2048];
	char gmd5[64], counters[8192];
	double fetch_s, cpu_us_per_frame;
	unsigned long long frames;
};

static void fail_note(struct host *h, const char *what)
{
	size_t n = strlen(h->failures);

	snprintf(h->failures + n, sizeof(h->failures) - n, "%s; ", what);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU seconds of lvmm's thread named comm (the one whose command line names our API socket). */
static double thread_cpu_s(const char *comm)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	double cpu = -1;

	while (d && (e = readdir(d)) && cpu < 0) {
		char path[300], buf[4096] = "", tdir[300];
		size_t n;
		DIR *t;
		struct dirent *te;

		snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
		n = testutil_read_file(path, buf, sizeof(buf) - 1);
		for (size_t i = 0; i < n; i++)
			if (!buf[i])
				buf[i] = ' ';
		if (!strstr(buf, api))
			continue;
		snprintf(tdir, sizeof(tdir), "/proc/%s/task", e->d_name);
		t = opendir(tdir);
		while (t && (te = readdir(t))) {
			char c[64] = "", st[1024] = "", sub[600];
			unsigned long ut, stime;
			const char *p;

			snprintf(sub, sizeof(sub), "%s/%s/comm", tdir, te->d_name);
			testutil_read_file(sub, c, sizeof(c) - 1);
			if (strncmp(c, comm, strlen(comm)))
				continue;
			snprintf(sub, sizeof(sub), "%s/%s/stat", tdir, te->d_name);
			testutil_read_file(sub, st, sizeof(st) - 1);
			p = strrchr(st, ')');
			if (p &&
			    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
				   &ut, &stime) == 2)
				cpu = (double)(ut + stime) / (double)sysconf(_SC_CLK_TCK);
		}
		if (t)
			closedir(t);
	}
	if (d)
		closedir(d);
	return cpu;
}

static unsigned long long json_num(const char *text, const char *key)
{
	const char *p = strstr(text, key);

	return p ? strtoull(p + strlen(key) + 2, NULL, 10) : 0;
}

/* While the guest serves: fetch its file, read the counters, then let it power off. */
static void *host_client(void *arg)
{
	struct host *h = arg;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(9000)};
	char cmd[1024], *out = NULL;
	double t0;
	int fd;

	t0 = now_s();
	snprintf(cmd, sizeof(cmd),
		 "timeout 60 busybox wget -q -O %s/gblob http://" GUEST_IP ":8081/gblob", dir);
	if (testutil_sh(cmd, NULL))
		fail_note(h, "the host's fetch from the guest failed");
	h->fetch_s = now_s() - t0;
	snprintf(cmd, sizeof(cmd), "busybox md5sum %s/gblob", dir);
	if (!testutil_sh(cmd, &out) && out)
		snprintf(h->gmd5, sizeof(h->gmd5), "%.32s", out);
	free(out);
	out = NULL;
	snprintf(cmd, sizeof(cmd), "%s api --socket %s counters", testutil_lvmm(), api);
	if (testutil_sh(cmd, &out) || !out)
		fail_note(h, "vm.counters failed");
	else
		snprintf(h->counters, sizeof(h->counters), "%s", out);
	free(out);
	h->frames = json_num(h->counters, "\"rx_frames\"") + json_num(h->counters, "\"tx_frames\"");
	{
		double cpu = thread_cpu_s("lvmm-net0");

		if (cpu >= 0 && h->frames)
			h->cpu_us_per_frame = cpu * 1e6 / (double)h->frames;
	}
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	inet_pton(AF_INET, GUEST_IP, &sa.sin_addr);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
		fail_note(h, "could not reach the guest's port 9000");
	if (fd >= 0)
		close(fd);
	return NULL;
}

static void hook(const char *console, void *arg)
{
	struct host *h = arg;

	if (!h->started && strstr(console, "LVMM-NET-SERVING")) {
		h->started = true;
		ck_assert_int_eq(pthread_create(&h->thread, NULL, host_client, h), 0);
	}
}

static void setup(void)
{
	testutil_mkdtemp(dir, sizeof(dir), "/tmp/lvmm-net-");
	snprintf(img, sizeof(img), "%s/root.img", dir);
	snprintf(api, sizeof(api), "%s/api.sock", dir);
}

static void teardown(void)
{
	testutil_rmtree(dir);
}

/* The namespace: loopback up. lvmm creates the tap there and gives it its host address
 * (--net ip=,mask=); the namespace and all in it go with this process. */
static void netns_up(void)
{
	char *out = NULL;

	ck_assert_msg(unshare(CLONE_NEWNET) == 0, "unshare(CLONE_NEWNET): %s (needs root)",
		      strerror(errno));
	ck_assert_msg(testutil_sh("ip link set lo up 2>&1", &out) == 0, "namespace set-up: %s",
		      out ? out : "");
	free(out);
}

static pid_t httpd_start(const char *www)
{
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (!pid) {
		/* every address of the namespace: the tap's comes with lvmm */
		execlp("busybox", "busybox", "httpd", "-f", "-p", "8080", "-h", www, (char *)NULL);
		_exit(127);
	}
	return pid;
}

START_TEST(test_net)
{
	char kernel[4096], disk[256], www[128], cmd[512], md5[64] = "", *out = NULL;
	char *args[] = {"--kernel",
			kernel,
			"--cmdline",
			"console=ttyS0 root=/dev/vda rw rootfstype=ext4 rootwait init=/init",
			"--cpus",
			"1",
			"--memory",
			"256M",
			"--disk",
			disk,
			"--net",
			"tap=" TAP ",mac=52:54:00:12:34:56,ip=" HOST_IP ",mask=255.255.255.0",
			"--api-socket",
			api,
			NULL};
	const char *f;
	struct host h = {0};
	struct linuxboot b;
	unsigned long long feat = 0;
	double t0 = 0, t1 = 0;
	pid_t httpd;
	char io_check[4096];
	const char *const extra[] = {io_check, "bin/io-check", NULL};

	linuxboot_guest_file(kernel, sizeof(kernel), "vmlinux");
	linuxboot_guest_file(io_check, sizeof(io_check), "io-check");
	ext4check_make_root(dir, img, IMG_MB, init_script, extra);
	snprintf(disk, sizeof(disk), "path=%s", img);
	snprintf(www, sizeof(www), "%s/www", dir);
	snprintf(cmd, sizeof(cmd),
		 "mkdir %s && head -c %d /dev/urandom > %s/blob && busybox md5sum %s/blob", www,
		 BLOB_MB << 20, www, www);
	ck_assert_int_eq(testutil_sh(cmd, &out), 0);
	snprintf(md5, sizeof(md5), "%.32s", out);
	free(out);
	netns_up();
	httpd = httpd_start(www);

	linuxboot_run_hook(&b, args, NULL, BOOT_LIMIT_S, 0, hook, &h);
	printf("linux net: %.1f s to exit\n", b.t_exit);
	linuxboot_report(&b, 3000);
	if (h.started)
		pthread_join(h.thread, NULL);
	kill(httpd, SIGTERM);
	waitpid(httpd, NULL, 0);
	ck_assert_msg(!b.killed, "lvmm still running after %d s", BOOT_LIMIT_S);
	ck_assert_msg(WIFEXITED(b.status) && WEXITSTATUS(b.status) == 0,
		      "lvmm did not exit 0 (wait status %#x)", b.status);
	/* negotiated: CSUM 0, GUEST_CSUM 1, GUEST_TSO4 7, GUEST_TSO6 8, HOST_TSO4 11,
	 * HOST_TSO6 12, MRG_RXBUF 15, STATUS 16, CTRL_VQ 17 (sysfs prints bit 0 first) */
	f = strstr(b.console, "LVMM-NET-FEATURES ");
	ck_assert_msg(f, "the guest found no virtio-net device");
	f += strlen("LVMM-NET-FEATURES ");
	for (unsigned i = 0; i < 64 && (f[i] == '0' || f[i] == '1'); i++)
		feat |= (unsigned long long)(f[i] == '1') << i;
	printf("linux net: negotiated features %#llx\n", feat);
	for (unsigned bit = 0; bit <= 17; bit++)
		if ((0x39983ull >> bit) & 1)
			ck_assert_msg((feat >> bit) & 1, "feature bit %u not negotiated (%#llx)",
				      bit, feat);
	ck_assert_msg(strstr(b.console, "LVMM-NET-PING-OK"), "the guest's ping failed");
	f = strstr(b.console, "LVMM-NET-RTT ");
	if (f)
		printf("linux net: guest ping %.*s\n", (int)strcspn(f + 13, "\r\n"), f + 13);
	ck_assert_msg(strstr(b.console, "LVMM-NET-WGET-OK"), "the guest's fetch failed");
	f = strstr(b.console, "LVMM-NET-MD5 ");
	ck_assert_msg(f && !strncmp(f + 13, md5, 32), "the guest's copy differs (host %s)", md5);
	if (sscanf(strstr(f, "t0="), "t0=%lf t1=%lf", &t0, &t1) == 2 && t1 > t0)
		printf("linux net: host -> guest %d MiB in %.2f s (%.1f MiB/s)\n", BLOB_MB, t1 - t0,
		       BLOB_MB / (t1 - t0));
	ck_assert_msg(h.started, "the guest never served");
	ck_assert_msg(!h.failures[0], "host side: %s", h.failures);
	f = strstr(b.console, "LVMM-NET-GMD5 ");
	ck_assert_msg(f && !strncmp(f + 14, h.gmd5, 32), "the host's copy differs (%s)", h.gmd5);
	printf("linux net: guest -> host fetch %.2f s; net0 thread %.1f us CPU per frame over "
	       "%llu frames\n",
	       h.fetch_s, h.cpu_us_per_frame, h.frames);
	/* both ways in vm.counters: several MiB each */
	ck_assert_msg(strstr(h.counters, "\"net0\""), "no net0 in vm.counters: %s", h.counters);
	ck_assert_uint_ge(json_num(h.counters, "\"rx_bytes\""), (unsigned long long)BLOB_MB << 20);
	ck_assert_uint_ge(json_num(h.counters, "\"tx_bytes\""), 1000000);
	ck_assert_uint_eq(json_num(h.counters, "\"tx_dropped\""), 0);
	ck_assert_msg(strstr(b.console, "LVMM-NET-GUEST-DONE"), "the guest did not finish");
	linuxboot_free(&b);
}
END_TEST

static Suite *linux_net_suite(void)
{
	Suite *s = suite_create("linux_net");
	TCase *tc = tcase_create("tap");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, TCASE_TIMEOUT_S);
	tcase_add_test(tc, test_net);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return testutil_run_suite(linux_net_suite());
}
