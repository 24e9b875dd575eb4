/* Kata Containers' clh driver replayed on the Linux guest kernel: `lvmm -v --api-socket` as Kata
 * launches its hypervisor, then ping, create with the full default body of Kata's generated
 * client for an initrd sandbox, info, boot, /init running, info, resize, pause, resume,
 * shutdown, vmm.shutdown; vCPU threads named as Kata pins them; the shared file system (fs,
 * served by a running virtiofsd) mounted by the guest; the hybrid vsock in the create body
 * answering on its socket, and a block volume hot-added.
 * The guest (lvmm.test=kata) reads /dev/hwrng from the virtio-rng that rng asks for and lists
 * the PCI root buses of the two segments platform asks for. */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <regex.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "apitest.h"
#include "testutil.h"

/* One boot: the kernel's emulated start takes minutes on a loaded kvm_pvm host. */
#define INIT_LIMIT_S	500
#define TCASE_TIMEOUT_S 600

#define VIRTIOFSD "/usr/lib/qemu/virtiofsd"

static struct apitest T;
static char kernel[4096], initramfs[4096];
static pid_t fsd = -1;

static int curl(const char *method, const char *endpoint, const char *data, json_t **body)
{
	return apitest_curl(&T, method, endpoint, data, body);
}

static void setup(void)
{
	char gdir[3900];

	apitest_init(&T, "/tmp/lvmm-ltest-kata-");
	T.curl_max_s = 60;
	snprintf(gdir, sizeof(gdir), "%s", testutil_env_or("LVMM_GUEST_DIR", ""));
	if (!*gdir)
		snprintf(gdir, sizeof(gdir), "%s/guest", testutil_env_or("BUILD", "build"));
	snprintf(kernel, sizeof(kernel), "%s/vmlinux", gdir);
	snprintf(initramfs, sizeof(initramfs), "%s/initramfs.cpio", gdir);
	ck_assert_msg(access(kernel, R_OK) == 0, "%s missing: run make guest", kernel);
	ck_assert_msg(access(initramfs, R_OK) == 0, "%s missing: run make guest", initramfs);
}

static void teardown(void)
{
	if (fsd > 0) {
		kill(fsd, SIGKILL);
		waitpid(fsd, NULL, 0);
		fsd = -1;
	}
	apitest_fini(&T);
}

/* virtiofsd sharing T.dir/shared (one file) at T.dir/vfs.sock, as Kata starts it before the VM;
 * false when it is not installed. */
static bool start_virtiofsd(void)
{
	char dir[256], file[300], sp[300], src[300];

	if (access(VIRTIOFSD, X_OK))
		return false;
	snprintf(dir, sizeof(dir), "%s/shared", T.dir);
	ck_assert_int_eq(mkdir(dir, 0755), 0);
	snprintf(file, sizeof(file), "%s/kata-hello.txt", dir);
	testutil_write_file(file, "shared-from-host\n", 17, 0644);
	snprintf(sp, sizeof(sp), "--socket-path=%s/vfs.sock", T.dir);
	snprintf(src, sizeof(src), "source=%s", dir);
	fsd = fork();
	ck_assert_int_ge(fsd, 0);
	if (!fsd) {
		if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr))
			_exit(126);
		execl(VIRTIOFSD, VIRTIOFSD, sp, "-o", src, "-o", "cache=none", (char *)NULL);
		_exit(127);
	}
	snprintf(file, sizeof(file), "%s/vfs.sock", T.dir);
	for (int i = 0; i < 100 && access(file, F_OK); i++)
		testutil_sleep_ms(50);
	ck_assert_msg(access(file, F_OK) == 0, "virtiofsd made no socket at %s", file);
	return true;
}

/* `lvmm -v --api-socket SOCK`, the command line Kata's launchClh() builds. */
static void launch_like_kata(void)
{
	char *argv[] = {(char *)T.lvmm, "-v", "--api-socket", T.sock, NULL};
	int fd;

	T.pid = fork();
	ck_assert_int_ge(T.pid, 0);
	if (!T.pid) {
		fd = open(T.log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		dup2(fd, 1);
		dup2(fd, 2);
		fd = open("/dev/null", O_RDONLY);
		dup2(fd, 0);
		execv(T.lvmm, argv);
		_exit(127);
	}
	for (int i = 0; i < 400; i++) {
		struct stat st;

		if (!stat(T.sock, &st) && apitest_ping(&T))
			return;
		testutil_sleep_ms(25);
	}
	ck_abort_msg("lvmm -v --api-socket did not open %s", T.sock);
}

/* Kata's body: NewVmConfig() and friends fill every field with cloud-hypervisor's defaults;
 * clh.go sets memory.shared, hotplug_size, the topology, rng, console Off, 2 PCI segments. */
static void kata_body(char *buf, size_t len, const char *extra)
{
	snprintf(
	    buf, len,
	    "{\"cpus\": {\"boot_vcpus\": 1, \"max_vcpus\": 2, \"kvm_hyperv\": false,"
	    "           \"nested\": true, \"topology\": {\"threads_per_core\": 1,"
	    "           \"cores_per_die\": 2, \"dies_per_package\": 1, \"packages\": 1}},"
	    " \"memory\": {\"size\": 134217728, \"hotplug_size\": 2147483648,"
	    "             \"mergeable\": false, \"hotplug_method\": \"Acpi\", \"shared\": true,"
	    "             \"hugepages\": false, \"prefault\": false, \"thp\": true},"
	    " \"payload\": {\"kernel\": \"%s\", \"initramfs\": \"%s\","
	    "              \"cmdline\": \"console=ttyS0 panic=1 no_timer_check noreplace-smp"
	    " lvmm.test=kata\"},"
	    " \"rng\": {\"src\": \"/dev/urandom\", \"iommu\": false},"
	    " \"serial\": {\"mode\": \"File\", \"file\": \"%s\"},"
	    " \"console\": {\"mode\": \"Off\", \"iommu\": false},"
	    " \"platform\": {\"num_pci_segments\": 2},"
	    " \"iommu\": false, \"watchdog\": false, \"pvpanic\": false,"
	    " \"landlock_enable\": false%s}",
	    kernel, initramfs, T.console, extra);
}

/* The names Kata's GetThreadIDs() matches (^vcpu\d+$) among lvmm's threads. */
static unsigned vcpu_threads(void)
{
	char dir[64], path[384], comm[32];
	struct dirent *e;
	regex_t re;
	unsigned n = 0;
	DIR *d;

	ck_assert_int_eq(regcomp(&re, "^vcpu[0-9]+$", REG_EXTENDED | REG_NOSUB), 0);
	snprintf(dir, sizeof(dir), "/proc/%d/task", (int)T.pid);
	d = opendir(dir);
	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d))) {
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s/comm", dir, e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(comm, sizeof(comm), f)) {
			comm[strcspn(comm, "\n")] = 0;
			n += !regexec(&re, comm, 0, NULL, 0);
		}
		fclose(f);
	}
	closedir(d);
	regfree(&re);
	return n;
}

static bool console_shows(const char *what, unsigned limit_s)
{
	for (unsigned i = 0; i < limit_s * 10; i++) {
		if (apitest_console_count(&T, what))
			return true;
		testutil_sleep_ms(100);
	}
	return false;
}

/* The rest of the console line that starts with prefix, into buf ("" when there is none). */
static void console_line(const char *prefix, char *buf, size_t len)
{
	char *all = testutil_slurp(T.console), *p, *end;
	size_t n;

	buf[0] = 0;
	ck_assert_ptr_nonnull(all);
	for (p = all; p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		if (strncmp(p, prefix, strlen(prefix)))
			continue;
		p += strlen(prefix);
		end = p + strcspn(p, "\r\n");
		n = (size_t)(end - p) < len - 1 ? (size_t)(end - p) : len - 1;
		memcpy(buf, p, n);
		buf[n] = 0;
		break;
	}
	free(all);
}

/* lvmm.test=kata's report: the hwrng core reads virtio-rng, 64 bytes of it that are neither
 * zero nor a repeated half, and a root bus for each of the two PCI segments. */
static void check_guest_devices(void)
{
	char line[1024], *p, *end;
	unsigned char b[64];
	unsigned n = 0;
	bool zero = true;

	console_line("LVMM-KATA-HWRNG-DEV ", line, sizeof(line));
	ck_assert_msg(!strncmp(line, "virtio_rng.", 11), "hwrng device '%s', not virtio_rng", line);
	console_line("LVMM-KATA-HWRNG n=", line, sizeof(line));
	ck_assert_msg(!strncmp(line, "64 ", 3), "/dev/hwrng gave 'n=%s'", line);
	for (p = line + 3; n < 64; p = end) {
		unsigned long v = strtoul(p, &end, 16);

		if (end == p || v > 0xff)
			break;
		b[n++] = (unsigned char)v;
		zero &= !v;
	}
	ck_assert_uint_eq(n, 64);
	ck_assert_msg(!zero, "64 zero bytes from /dev/hwrng");
	ck_assert_msg(memcmp(b, b + 32, 32), "/dev/hwrng repeated 32 bytes");
	console_line("LVMM-KATA-PCI ", line, sizeof(line));
	ck_assert_msg(strstr(line, "buses=0000:00 ") && strstr(line, " 0001:00 "),
		      "guest PCI: '%s' (root buses of segments 0 and 1 expected)", line);
	ck_assert_msg(strstr(line, "devices=0000:00:"), "guest PCI: '%s'", line);
}

/* The guest has the vsock device; the host side answers (a port no agent listens on is
 * refused by the guest's stack); a container's block volume is hot-added as Kata does. */
static void kata_vsock_and_disk(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char line[256], img[256], body[512], buf[64];
	struct timeval tv = {.tv_sec = 60};
	int fd;
	json_t *j;

	console_line("LVMM-KATA-VSOCK ", line, sizeof(line));
	ck_assert_msg(strstr(line, "misc=yes"), "guest vsock: '%s'", line);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/kata.sock", T.dir);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	ck_assert_int_eq(write(fd, "CONNECT 1024\n", 13), 13);
	ck_assert_int_eq(read(fd, buf, sizeof(buf)), 0); /* reset by the guest: nobody listens */
	close(fd);
	snprintf(img, sizeof(img), "%s/volume.img", T.dir);
	testutil_write_file(img, "", 0, 0600);
	ck_assert_int_eq(truncate(img, 8 << 20), 0);
	snprintf(body, sizeof(body),
		 "{\"path\": \"%s\", \"readonly\": false, \"direct\": false,"
		 " \"iommu\": false, \"num_queues\": 1, \"queue_size\": 128, \"id\": \"_disk0\"}",
		 img);
	ck_assert_int_eq(curl("PUT", "vm.add-disk", body, &j), 200);
	ck_assert_str_eq(json_string_value(json_object_get(j, "id")), "_disk0");
	ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(j, "bdf")), "0000:00:"));
	json_decref(j);
}

/* Kata's clh driver hands each tap over with vm.add-net between vm.create and vm.boot, its fd
 * by SCM_RIGHTS; here one end of a socket pair stands in for the tap (no host interface is
 * made), sent by `lvmm api --fd`. The answer is 204, the guest finds the device at boot. */
static void kata_add_net(void)
{
	char cmd[1024], *out = NULL;
	int sv[2];
	json_t *j;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	snprintf(cmd, sizeof(cmd),
		 "%s api --socket %s --fd %d add-net '{\"mac\": \"52:54:00:aa:bb:cc\","
		 " \"ip\": \"192.168.249.1\", \"mask\": \"255.255.255.0\", \"num_queues\": 2,"
		 " \"queue_size\": 256, \"vhost_user\": false, \"vhost_mode\": \"Client\","
		 " \"id\": \"eth0\", \"fds\": [%d], \"offload_tso\": true, \"offload_ufo\":"
		 " true, \"offload_csum\": true}' 2>&1",
		 T.lvmm, T.sock, sv[0], sv[0]);
	ck_assert_msg(testutil_sh(cmd, &out) == 0, "vm.add-net: %s", out ? out : "");
	free(out);
	close(sv[0]);
	close(sv[1]); /* the guest's frames have nowhere to go: the device counts, never stalls */
	ck_assert_int_eq(curl("GET", "vm.info", NULL, &j), 200);
	ck_assert_str_eq(
	    json_string_value(json_object_get(
		json_array_get(json_object_get(json_object_get(j, "config"), "net"), 0), "id")),
	    "eth0");
	json_decref(j);
}

START_TEST(test_kata_sequence)
{
	char body[12000], extra[1024], line[512];
	json_t *j, *cfg, *plat;
	bool fs = start_virtiofsd();

	launch_like_kata();
	ck_assert_int_eq(curl("GET", "vmm.ping", NULL, &j), 200);
	ck_assert(json_is_string(json_object_get(j, "version")));
	json_decref(j);

	/* a shared file system whose virtiofsd is not there: refused, named */
	kata_body(body, sizeof(body),
		  ", \"fs\": [{\"tag\": \"kataShared\", \"socket\": \"/run/none/v.sock\","
		  " \"num_queues\": 1, \"queue_size\": 1024}]");
	ck_assert_int_eq(curl("PUT", "vm.create", body, &j), 400);
	ck_assert_ptr_nonnull(strstr(json_string_value(json_array_get(j, 0)), "fs socket"));
	json_decref(j);

	/* the agent's channel: the hybrid vsock Kata's clh driver configures; the shared file
	 * system as clh.go adds it (tag, socket, num_queues, queue_size) */
	snprintf(extra, sizeof(extra),
		 ", \"vsock\": {\"cid\": 3, \"socket\": \"%s/kata.sock\","
		 " \"iommu\": false, \"id\": \"_vsock0\"}",
		 T.dir);
	if (fs)
		snprintf(extra + strlen(extra), sizeof(extra) - strlen(extra),
			 ", \"fs\": [{\"tag\": \"kataShared\", \"socket\": \"%s/vfs.sock\","
			 " \"num_queues\": 1, \"queue_size\": 1024}]",
			 T.dir);
	else
		printf("linux kata: %s is absent: no shared file system\n", VIRTIOFSD);
	kata_body(body, sizeof(body), extra);
	ck_assert_int_eq(curl("PUT", "vm.create", body, NULL), 204);
	ck_assert_int_eq(curl("GET", "vm.info", NULL, &j), 200);
	ck_assert_str_eq(json_string_value(json_object_get(j, "state")), "Created");
	cfg = json_object_get(j, "config");
	/* Kata's ResizeMemory() reads these two */
	ck_assert_int_eq(
	    json_integer_value(json_object_get(json_object_get(cfg, "memory"), "size")), 134217728);
	ck_assert_ptr_null(json_object_get(json_object_get(cfg, "memory"), "hotplug_size"));
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(cfg, "rng"), "src")),
			 "/dev/urandom");
	plat = json_object_get(cfg, "platform");
	ck_assert_int_eq(json_integer_value(json_object_get(plat, "num_pci_segments")), 2);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(cfg, "vsock"), "cid")),
			 3);
	if (fs)
		ck_assert_str_eq(json_string_value(json_object_get(
				     json_array_get(json_object_get(cfg, "fs"), 0), "tag")),
				 "kataShared");
	json_decref(j);
	kata_add_net();

	ck_assert_int_eq(curl("PUT", "vm.boot", NULL, NULL), 204);
	ck_assert_int_eq(curl("GET", "vm.info", NULL, &j), 200);
	ck_assert_str_eq(json_string_value(json_object_get(j, "state")), "Running");
	json_decref(j);
	ck_assert_uint_eq(vcpu_threads(), 1);

	/* the kernel boots and runs /init */
	ck_assert_msg(console_shows("LVMM-GUEST-UP", INIT_LIMIT_S), "/init did not run");
	/* the guest's report, then it waits for the host as a sandbox does */
	ck_assert_msg(console_shows("LVMM-KATA-WAIT", 120), "lvmm.test=kata did not report");
	check_guest_devices();
	console_line("LVMM-KATA-NET", line, sizeof(line));
	ck_assert_msg(strstr(line, " eth0"), "guest network interfaces: '%s'", line);
	if (fs) {
		console_line("LVMM-KATA-FS ", line, sizeof(line));
		ck_assert_msg(!strcmp(line, "shared-from-host"), "guest's shared file system: '%s'",
			      line);
	}
	kata_vsock_and_disk();

	/* Kata resizes on every container: the size the VM has is a no-op */
	ck_assert_int_eq(curl("PUT", "vm.resize", "{\"desired_vcpus\": 1}", NULL), 204);
	ck_assert_int_eq(curl("PUT", "vm.resize", "{\"desired_vcpus\": 2}", &j), 501);
	json_decref(j);
	ck_assert_int_eq(curl("PUT", "vm.pause", NULL, NULL), 204);
	ck_assert_str_eq(apitest_vm_state(&T), "Paused");
	ck_assert_int_eq(curl("PUT", "vm.resume", NULL, NULL), 204);
	ck_assert_str_eq(apitest_vm_state(&T), "Running");
	ck_assert_int_eq(curl("PUT", "vm.shutdown", NULL, NULL), 204);
	ck_assert_str_eq(apitest_vm_state(&T), "Shutdown");
	ck_assert_int_eq(curl("PUT", "vmm.shutdown", NULL, NULL), 204);
	ck_assert_int_eq(apitest_wait(&T, 30), 0);
	ck_assert_int_eq(access(T.sock, F_OK), -1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("linux_kata");
	TCase *tc = tcase_create("kata");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, TCASE_TIMEOUT_S);
	tcase_add_test(tc, test_kata_sequence);
	suite_add_tcase(s, tc);
	return testutil_run_suite(s);
}
