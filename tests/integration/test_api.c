/* The REST API end to end: a real `lvmm run --api-socket`, driven with curl --unix-socket and
 * `lvmm api` through create -> boot -> info -> pause -> resume -> counters -> shutdown on the
 * bench guest, every error class, and the command-line VM's socket lifetime. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "apitest.h"
#include "testutil.h"

static struct apitest T;
static char guest[512];

static int curl(const char *method, const char *endpoint, const char *data, json_t **body)
{
	return apitest_curl(&T, method, endpoint, data, body);
}

static int put(const char *endpoint, const char *data)
{
	return curl("PUT", endpoint, data, NULL);
}

static const char *vm_state(void)
{
	return apitest_vm_state(&T);
}

static void expect_error(const char *method, const char *endpoint, const char *data, int want)
{
	json_t *j = NULL;
	int st = curl(method, endpoint, data, &j);

	ck_assert_msg(st == want, "%s %s: status %d, expected %d", method, endpoint, st, want);
	/* cloud-hypervisor's error body: a list of messages */
	ck_assert_msg(json_is_string(json_array_get(j, 0)), "%s %s: no error message", method,
		      endpoint);
	json_decref(j);
	/* the server keeps serving after every error */
	ck_assert_int_eq(curl("GET", "vmm.ping", NULL, NULL), 200);
}

static unsigned heartbeats(void)
{
	return apitest_console_count(&T, "heartbeat");
}

/* Waits (bounded) until the console shows more than n heartbeats. */
static bool heartbeats_pass(unsigned n)
{
	for (int i = 0; i < 300; i++) {
		if (heartbeats() > n)
			return true;
		testutil_sleep_ms(50);
	}
	return false;
}

static void start_lvmm(char *const extra[])
{
	apitest_start(&T, extra);
}

static int wait_lvmm(void)
{
	return apitest_wait(&T, 15);
}

static void setup(void)
{
	apitest_init(&T, "/tmp/lvmm-itest-api-");
	snprintf(guest, sizeof(guest), "%s", testutil_bench_guest());
	ck_assert_msg(access(guest, R_OK) == 0, "no bench guest at %s", guest);
}

static void teardown(void)
{
	apitest_fini(&T);
}

static char *vm_config(const char *mode)
{
	static char cfg[2048];

	snprintf(cfg, sizeof(cfg),
		 "{\"cpus\": {\"boot_vcpus\": 1}, \"memory\": {\"size\": 67108864},"
		 " \"payload\": {\"kernel\": \"%s\", \"cmdline\": \"bench.mode=%s\"},"
		 " \"serial\": {\"mode\": \"File\", \"file\": \"%s\"}}",
		 guest, mode, T.console);
	return cfg;
}

/* Waits (bounded) until the console wrote or dropped every byte the guest sent (vm.counters);
 * *tx gets the guest's byte count. */
static bool console_settled(uint64_t *tx)
{
	unsigned i;

	for (i = 0; i < 100; i++) {
		json_t *j, *c;
		uint64_t w, d;

		ck_assert_int_eq(curl("GET", "vm.counters", NULL, &j), 200);
		c = json_object_get(j, "console");
		ck_assert_ptr_nonnull(c);
		*tx = (uint64_t)json_integer_value(json_object_get(c, "tx_bytes"));
		w = (uint64_t)json_integer_value(json_object_get(c, "written_bytes"));
		d = (uint64_t)json_integer_value(json_object_get(c, "dropped_bytes"));
		json_decref(j);
		if (w + d >= *tx)
			return true;
		testutil_sleep_ms(20);
	}
	return false;
}

START_TEST(test_lifecycle_curl)
{
	uint64_t tx, tx2;
	unsigned before, after;
	json_t *j;

	TESTUTIL_NEED_KVM();
	start_lvmm(NULL);
	ck_assert_int_eq(curl("GET", "vmm.ping", NULL, &j), 200);
	ck_assert(json_is_string(json_object_get(j, "version")));
	json_decref(j);

	ck_assert_int_eq(put("vm.create", vm_config("spin")), 204);
	ck_assert_str_eq(vm_state(), "Created");
	ck_assert_int_eq(put("vm.boot", NULL), 204);
	ck_assert_str_eq(vm_state(), "Running");
	ck_assert_msg(heartbeats_pass(1), "no heartbeat from the running guest");

	ck_assert_int_eq(curl("GET", "vm.info", NULL, &j), 200);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "memory_actual_size")), 67108864);
	ck_assert_str_eq(json_string_value(json_object_get(
			     json_object_get(json_object_get(j, "config"), "payload"), "cmdline")),
			 "bench.mode=spin");
	json_decref(j);

	/* paused: the guest sends nothing (5 heartbeat periods), judged by its console counter
	 * once the console writer caught up, not by the file alone */
	ck_assert_int_eq(put("vm.pause", NULL), 204);
	ck_assert_str_eq(vm_state(), "Paused");
	ck_assert_msg(console_settled(&tx), "console writer did not catch up");
	before = heartbeats();
	testutil_sleep_ms(1000);
	ck_assert_msg(console_settled(&tx2), "console writer did not catch up");
	ck_assert_uint_eq(tx2, tx);
	after = heartbeats();
	ck_assert_uint_eq(before, after);

	/* resumed: it starts again */
	ck_assert_int_eq(put("vm.resume", NULL), 204);
	ck_assert_str_eq(vm_state(), "Running");
	ck_assert_msg(heartbeats_pass(after + 1), "no heartbeat after resume");

	ck_assert_int_eq(curl("GET", "vm.counters", NULL, &j), 200);
	ck_assert(json_is_object(j));
	json_decref(j);

	ck_assert_int_eq(put("vm.shutdown", NULL), 204);
	ck_assert_str_eq(vm_state(), "Shutdown");
	ck_assert_msg(console_settled(&tx), "console writer did not catch up");
	before = heartbeats();
	testutil_sleep_ms(500);
	ck_assert_msg(console_settled(&tx2), "console writer did not catch up");
	ck_assert_uint_eq(tx2, tx);
	ck_assert_uint_eq(heartbeats(), before);

	/* boot again from Shutdown rebuilds the VM; delete forgets it */
	ck_assert_int_eq(put("vm.boot", NULL), 204);
	ck_assert_str_eq(vm_state(), "Running");
	ck_assert_int_eq(put("vm.delete", NULL), 204);
	expect_error("GET", "vm.info", NULL, 404);

	ck_assert_int_eq(put("vmm.shutdown", NULL), 204);
	ck_assert_int_eq(wait_lvmm(), 0);
	ck_assert_int_eq(access(T.sock, F_OK), -1);
}
END_TEST

/* How many times the console shows the guest starting ("hello from ring 0"). */
static unsigned guest_starts(void)
{
	return apitest_console_count(&T, "hello from ring 0");
}

static bool guest_starts_reach(unsigned n)
{
	for (int i = 0; i < 300; i++) {
		if (guest_starts() >= n)
			return true;
		testutil_sleep_ms(50);
	}
	return false;
}

START_TEST(test_reboot)
{
	TESTUTIL_NEED_KVM();
	start_lvmm(NULL);
	ck_assert_int_eq(put("vm.create", vm_config("spin")), 204);
	expect_error("PUT", "vm.reboot", NULL, 405); /* Created: nothing to reset */
	ck_assert_int_eq(put("vm.boot", NULL), 204);
	ck_assert_msg(guest_starts_reach(1) && heartbeats_pass(0), "the guest did not start");

	/* a running VM: the console shows the guest starting again, and it keeps running */
	ck_assert_int_eq(put("vm.reboot", NULL), 204);
	ck_assert_str_eq(vm_state(), "Running");
	ck_assert_msg(guest_starts_reach(2), "no second start after vm.reboot");

	/* a paused VM reboots too and comes back Running */
	ck_assert_int_eq(put("vm.pause", NULL), 204);
	ck_assert_int_eq(put("vm.reboot", NULL), 204);
	ck_assert_str_eq(vm_state(), "Running");
	ck_assert_msg(guest_starts_reach(3), "no third start after vm.reboot while paused");
	ck_assert_uint_eq(guest_starts(), 3);

	/* the rebooted VM pauses, resumes and shuts down as before */
	ck_assert_int_eq(put("vm.pause", NULL), 204);
	ck_assert_int_eq(put("vm.resume", NULL), 204);
	ck_assert_int_eq(put("vm.shutdown", NULL), 204);
	ck_assert_str_eq(vm_state(), "Shutdown");
	expect_error("PUT", "vm.reboot", NULL, 405);
	ck_assert_int_eq(put("vmm.shutdown", NULL), 204);
	ck_assert_int_eq(wait_lvmm(), 0);
}
END_TEST

/* A command-line VM behind the API ends lvmm as plain `lvmm run` does: a guest triple fault
 * is the guest's doing, status 0, the reason on stderr. */
START_TEST(test_command_line_triple_fault)
{
	char serial[160], log[160], text[4096];
	char *extra[] = {"--kernel", guest,  "--cmdline", "bench.mode=fault", "--memory", "64M",
			 "--serial", serial, NULL};
	ssize_t n;
	int fd;

	TESTUTIL_NEED_KVM();
	snprintf(serial, sizeof(serial), "file=%s", T.console);
	start_lvmm(extra);
	ck_assert_int_eq(wait_lvmm(), 0);
	snprintf(log, sizeof(log), "%s/lvmm.log", T.dir);
	fd = open(log, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	text[n > 0 ? n : 0] = 0;
	ck_assert_msg(strstr(text, "triple fault"), "lvmm output: %s", text);
	ck_assert_int_eq(access(T.sock, F_OK), -1);
}
END_TEST

START_TEST(test_guest_poweroff)
{
	TESTUTIL_NEED_KVM();
	start_lvmm(NULL);
	ck_assert_int_eq(put("vm.create", vm_config("hello")), 204);
	ck_assert_int_eq(put("vm.boot", NULL), 204);
	/* the guest powers off by itself: the state follows, and lvmm keeps serving */
	for (int i = 0; i < 400 && strcmp(vm_state(), "Shutdown"); i++)
		testutil_sleep_ms(25);
	ck_assert_str_eq(vm_state(), "Shutdown");
	expect_error("PUT", "vm.pause", NULL, 405);
	ck_assert_int_eq(put("vm.delete", NULL), 204);
	/* SIGTERM ends an empty VMM cleanly */
	kill(T.pid, SIGTERM);
	ck_assert_int_eq(wait_lvmm(), 0);
	ck_assert_int_eq(access(T.sock, F_OK), -1);
}
END_TEST

START_TEST(test_counters_nvme)
{
	char cfg[2048], disk[160];
	json_t *j, *d;
	int fd;

	TESTUTIL_NEED_KVM();
	/* the bench guest's NVMe mode does I/O on a file-backed vNVMe, then powers off */
	snprintf(disk, sizeof(disk), "%s/disk.img", T.dir);
	fd = open(disk, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, 16 << 20), 0);
	close(fd);
	snprintf(cfg, sizeof(cfg),
		 "{\"memory\": {\"size\": 67108864},"
		 " \"payload\": {\"kernel\": \"%s\", \"cmdline\": \"bench.mode=nvme\"},"
		 " \"serial\": {\"mode\": \"File\", \"file\": \"%s\"},"
		 " \"vnvme\": [{\"path\": \"%s\"}]}",
		 guest, T.console, disk);
	start_lvmm(NULL);
	ck_assert_int_eq(put("vm.create", cfg), 204);
	ck_assert_int_eq(curl("GET", "vm.counters", NULL, &j), 200);
	ck_assert_int_eq(
	    json_integer_value(json_object_get(json_object_get(j, "nvme0"), "read_ops")), 0);
	json_decref(j);
	ck_assert_int_eq(put("vm.boot", NULL), 204);
	for (int i = 0; i < 2400 && strcmp(vm_state(), "Shutdown"); i++)
		testutil_sleep_ms(25);
	ck_assert_str_eq(vm_state(), "Shutdown");
	/* the counters of a stopped VM stay readable until vm.delete */
	ck_assert_int_eq(curl("GET", "vm.counters", NULL, &j), 200);
	d = json_object_get(j, "nvme0");
	ck_assert_msg(json_is_object(d), "no nvme0 in vm.counters");
	ck_assert_int_gt(json_integer_value(json_object_get(d, "read_ops")), 0);
	ck_assert_int_gt(json_integer_value(json_object_get(d, "write_bytes")), 0);
	ck_assert_int_gt(json_integer_value(json_object_get(d, "doorbells")), 0);
	json_decref(j);
	ck_assert_int_eq(put("vm.delete", NULL), 204);
	ck_assert_int_eq(put("vmm.shutdown", NULL), 204);
	ck_assert_int_eq(wait_lvmm(), 0);
}
END_TEST

/* Entries of vm.info's config.vnvme. */
static unsigned info_vnvme(void)
{
	json_t *j;
	unsigned n;

	ck_assert_int_eq(curl("GET", "vm.info", NULL, &j), 200);
	n = (unsigned)json_array_size(json_object_get(json_object_get(j, "config"), "vnvme"));
	json_decref(j);
	return n;
}

/* PCI hotplug with a guest that never ejects (the bench guest has no ACPI): the function joins
 * bus 0 and the config at once; its removal, asked while paused, stays pending and answers an
 * error at once; the reset completes it. A function on an SSD nobody serves gets a softssd
 * started first, as vm.create's would, and a reset keeps it. */
static void hotplug_without_eject(void)
{
	char body[512];
	json_t *j;

	snprintf(body, sizeof(body), "{\"path\": \"%s/absent.img\"}", T.dir);
	expect_error("PUT", "vm.add-vnvme", body, 400);
	ck_assert_uint_eq(info_vnvme(), 0);
	snprintf(body, sizeof(body), "{\"path\": \"%s/hp.img\", \"size\": 1048576}", T.dir);
	ck_assert_int_eq(curl("PUT", "vm.add-vnvme", body, &j), 200);
	ck_assert_str_eq(json_string_value(json_object_get(j, "id")), "nvme0");
	ck_assert_str_eq(json_string_value(json_object_get(j, "bdf")), "0000:00:01.0");
	json_decref(j);
	ck_assert_uint_eq(info_vnvme(), 1);
	snprintf(body, sizeof(body),
		 "{\"id\": \"nvme0\", \"path\": \"%s/hp2.img\", \"size\": 4096}", T.dir);
	expect_error("PUT", "vm.add-vnvme", body, 400); /* the id is taken */
	expect_error("PUT", "vm.remove-device", "{\"id\": \"nvme9\"}", 404);
	ck_assert_int_eq(put("vm.pause", NULL), 204);
	expect_error("PUT", "vm.remove-device", "{\"id\": \"nvme0\"}", 500);
	ck_assert_uint_eq(info_vnvme(), 1);
	ck_assert_int_eq(put("vm.resume", NULL), 204);
	ck_assert_int_eq(curl("PUT", "vm.add-vnvme",
			      "{\"id\": \"auto\", \"ssd\": \"hpauto\", \"size\": 4194304}", &j),
			 200);
	json_decref(j);
	ck_assert_uint_eq(info_vnvme(), 2);
	ck_assert_int_eq(put("vm.reboot", NULL), 204);
	ck_assert_uint_eq(info_vnvme(), 1);
	expect_error("PUT", "vm.remove-device", "{\"id\": \"nvme0\"}", 404);
	{
		char *log = testutil_slurp(T.log);

		ck_assert_msg(log && strstr(log, "started softssd hpauto"), "%s", log ? log : "");
		free(log);
	}
}

/* Entries of vm.info's config.disks. */
static unsigned info_disks(void)
{
	json_t *j;
	unsigned n;

	ck_assert_int_eq(curl("GET", "vm.info", NULL, &j), 200);
	n = (unsigned)json_array_size(json_object_get(json_object_get(j, "config"), "disks"));
	json_decref(j);
	return n;
}

/* vm.add-disk as vm.add-vnvme: the function joins at once, its id must be free across models,
 * the image must exist; its removal asked while paused stays pending, the reset completes it,
 * and its counters appear in vm.counters meanwhile. */
static void hotplug_disk(void)
{
	char body[512], img[256];
	json_t *j;

	snprintf(img, sizeof(img), "%s/vblk.img", T.dir);
	testutil_write_file(img, "", 0, 0600);
	ck_assert_int_eq(truncate(img, 1 << 20), 0);
	snprintf(body, sizeof(body), "{\"path\": \"%s/absent.img\"}", T.dir);
	expect_error("PUT", "vm.add-disk", body, 400);
	expect_error("PUT", "vm.add-disk", "{\"path\": \"/x\", \"vhost_user\": true}", 400);
	snprintf(body, sizeof(body), "{\"path\": \"%s\", \"id\": \"auto\"}", img);
	expect_error("PUT", "vm.add-disk", body, 400); /* the vNVMe's id */
	snprintf(body, sizeof(body), "{\"path\": \"%s\", \"readonly\": true}", img);
	ck_assert_int_eq(curl("PUT", "vm.add-disk", body, &j), 200);
	ck_assert_str_eq(json_string_value(json_object_get(j, "id")), "disk0");
	ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(j, "bdf")), "0000:00:"));
	json_decref(j);
	ck_assert_uint_eq(info_disks(), 1);
	ck_assert_int_eq(curl("GET", "vm.counters", NULL, &j), 200);
	ck_assert_msg(json_is_object(json_object_get(j, "disk0")), "no disk0 in vm.counters");
	json_decref(j);
	ck_assert_int_eq(put("vm.pause", NULL), 204);
	expect_error("PUT", "vm.remove-device", "{\"id\": \"disk0\"}", 500);
	ck_assert_int_eq(put("vm.resume", NULL), 204);
	ck_assert_int_eq(put("vm.reboot", NULL), 204);
	ck_assert_uint_eq(info_disks(), 0);
	expect_error("PUT", "vm.remove-device", "{\"id\": \"disk0\"}", 404);
}

/* vm.add-vsock: the VM's one vsock device, its socket listening at once; removed on reset. */
static void hotplug_vsock(void)
{
	char body[512], sock[256];
	json_t *j;

	snprintf(sock, sizeof(sock), "%s/v.sock", T.dir);
	expect_error("PUT", "vm.add-vsock", "{\"cid\": 2, \"socket\": \"/tmp/x.sock\"}", 400);
	expect_error("PUT", "vm.add-vsock", "{\"cid\": 3, \"socket\": \"rel.sock\"}", 400);
	snprintf(body, sizeof(body), "{\"cid\": 3, \"socket\": \"%s\"}", sock);
	ck_assert_int_eq(curl("PUT", "vm.add-vsock", body, &j), 200);
	ck_assert_str_eq(json_string_value(json_object_get(j, "id")), "vsock0");
	json_decref(j);
	ck_assert_int_eq(access(sock, F_OK), 0);
	expect_error("PUT", "vm.add-vsock", body, 400); /* one per VM */
	ck_assert_int_eq(curl("GET", "vm.info", NULL, &j), 200);
	ck_assert_int_eq(json_integer_value(json_object_get(
			     json_object_get(json_object_get(j, "config"), "vsock"), "cid")),
			 3);
	json_decref(j);
	ck_assert_int_eq(put("vm.pause", NULL), 204);
	expect_error("PUT", "vm.remove-device", "{\"id\": \"vsock0\"}", 500);
	ck_assert_int_eq(put("vm.resume", NULL), 204);
	ck_assert_int_eq(put("vm.reboot", NULL), 204);
	ck_assert_int_ne(access(sock, F_OK), 0); /* the socket went with the device */
	ck_assert_int_eq(curl("GET", "vm.info", NULL, &j), 200);
	ck_assert_ptr_null(json_object_get(json_object_get(j, "config"), "vsock"));
	json_decref(j);
}

static void reboot_ok(void);

static unsigned info_nets(void)
{
	json_t *j;
	unsigned n;

	ck_assert_int_eq(curl("GET", "vm.info", NULL, &j), 200);
	n = (unsigned)json_array_size(json_object_get(json_object_get(j, "config"), "net"));
	json_decref(j);
	return n;
}

/* `lvmm api --fd N add-net BODY` with fd N one end of a socket pair standing in for a tap (the
 * device takes any fd of frames with a vnet header): the client's exit status; the answer in
 * out when not NULL. The test's end of the fd is closed: the VM keeps duplicates. */
static int add_net_fd(const char *body, char **out)
{
	char cmd[1024];
	int sv[2], r;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	snprintf(cmd, sizeof(cmd), "%s api --socket %s --fd %d add-net '%s' 2>&1", T.lvmm, T.sock,
		 sv[0], body);
	r = testutil_sh(cmd, out);
	close(sv[0]);
	close(sv[1]);
	return r;
}

/* vm.add-net with a tap fd over SCM_RIGHTS (as Kata's clh driver sends it): the device joins at
 * once and shows in vm.info and vm.counters; what lvmm lacks is refused by name; removal
 * completes with the reset. */
static void hotplug_net(void)
{
	char *out = NULL;
	json_t *j;

	/* no fd came with the request although the body lists one */
	expect_error("PUT", "vm.add-net", "{\"fds\": [3]}", 400);
	expect_error("PUT", "vm.add-net", "{\"tap\": \"t0\", \"vhost_user\": true}", 400);
	expect_error("PUT", "vm.add-net", "{\"tap\": \"t0\", \"ip\": \"10.9.9.9\"}", 400);
	ck_assert_int_ne(add_net_fd("{\"fds\": [0], \"num_queues\": 4}", &out), 0);
	ck_assert_msg(strstr(out, "num_queues"), "%s", out);
	free(out);
	ck_assert_int_eq(add_net_fd("{\"id\": \"hnet\", \"mac\": \"52:54:00:00:00:42\", "
				    "\"fds\": [0], \"num_queues\": 2, \"queue_size\": 256}",
				    &out),
			 0);
	ck_assert_msg(strstr(out, "\"hnet\"") && strstr(out, "bdf"), "%s", out);
	free(out);
	ck_assert_uint_eq(info_nets(), 1);
	ck_assert_int_eq(curl("GET", "vm.counters", NULL, &j), 200);
	ck_assert_ptr_nonnull(json_object_get(json_object_get(j, "hnet"), "rx_dropped"));
	json_decref(j);
	ck_assert_int_eq(curl("GET", "vm.info", NULL, &j), 200);
	ck_assert_str_eq(
	    json_string_value(json_object_get(
		json_array_get(json_object_get(json_object_get(j, "config"), "net"), 0), "mac")),
	    "52:54:00:00:00:42");
	json_decref(j);
	ck_assert_int_eq(put("vm.pause", NULL), 204);
	expect_error("PUT", "vm.remove-device", "{\"id\": \"hnet\"}", 500);
	ck_assert_int_eq(put("vm.resume", NULL), 204);
	reboot_ok();
	ck_assert_uint_eq(info_nets(), 0);
}

/* vm.reboot answers 204; otherwise the failure names the API's reason and shows the log of
 * the softssd the VMM started (its vNVMe reconnects to it across the reset). */
static void reboot_ok(void)
{
	json_t *e = NULL;
	int st = curl("PUT", "vm.reboot", NULL, &e);
	char path[256], *log;

	if (st != 204) {
		snprintf(path, sizeof(path), "%s/ssd/hpauto.log", T.dir);
		log = testutil_slurp(path);
		fprintf(stderr, "softssd hpauto's log:\n%s\n", log ? log : "(none)");
		free(log);
	}
	ck_assert_msg(st == 204, "vm.reboot: %d: %s", st,
		      json_string_value(json_array_get(e, 0)) ?: "(no message)");
	json_decref(e);
}

/* ---- a fake vhost-user back end for vm.add-fs: answers the negotiation of every connection
 * (VERSION_1, REPLY_ACK, 8 queues) until the connection closes; silent when told ---- */

static struct {
	int listen_fd;
	bool silent;
	pthread_t thread;
	unsigned conns;
} fsd = {.listen_fd = -1};

static void *fsd_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	uint32_t h[3];
	uint8_t p[512];

	while (read(fd, h, 12) == 12 && h[2] <= sizeof(p) &&
	       (h[2] == 0 || read(fd, p, h[2]) == (ssize_t)h[2])) {
		uint64_t v = h[0] == 1	  ? (1ULL << 32) | (1ULL << 30)
			     : h[0] == 15 ? 9
			     : h[0] == 17 ? 8
					  : 0;
		bool reply = h[0] == 1 || h[0] == 15 || h[0] == 17 || h[0] == 11 || (h[1] & 8);
		uint8_t b[20];

		if (!reply || fsd.silent)
			continue;
		memcpy(b, (uint32_t[]){h[0], 5, 8}, 12);
		memcpy(b + 12, &v, 8);
		if (write(fd, b, 20) != 20)
			break;
	}
	close(fd);
	return NULL;
}

static void *fsd_accept(void *arg)
{
	int fd;

	(void)arg;
	while ((fd = accept(fsd.listen_fd, NULL, NULL)) >= 0) {
		pthread_t t;

		fsd.conns++;
		if (pthread_create(&t, NULL, fsd_conn, (void *)(intptr_t)fd) == 0)
			pthread_detach(t);
		else
			close(fd);
	}
	return NULL;
}

static void fsd_start(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};

	ck_assert_uint_lt(strlen(path), sizeof(sa.sun_path));
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fsd.listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fsd.listen_fd, 0);
	ck_assert_int_eq(bind(fsd.listen_fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(fsd.listen_fd, 8), 0);
	ck_assert_int_eq(pthread_create(&fsd.thread, NULL, fsd_accept, NULL), 0);
}

/* vm.add-fs: refusals, a share added and listed, a silent back end answered 500 in time,
 * removal on reset. */
static void hotplug_fs(void)
{
	char body[512], sock[256];
	double t0;
	json_t *j, *fs;

	snprintf(sock, sizeof(sock), "%s/fsd.sock", T.dir);
	snprintf(body, sizeof(body), "{\"tag\": \"share\", \"socket\": \"%s\"}", sock);
	expect_error("PUT", "vm.add-fs", body, 400); /* no socket there yet */
	expect_error("PUT", "vm.add-fs", "{\"tag\": \"t\", \"socket\": \"rel.sock\"}", 400);
	expect_error("PUT", "vm.add-fs", "{\"socket\": \"/tmp/x.sock\"}", 400);
	fsd_start(sock);
	ck_assert_int_eq(curl("PUT", "vm.add-fs", body, &j), 200);
	ck_assert_str_eq(json_string_value(json_object_get(j, "id")), "fs0");
	json_decref(j);
	ck_assert_int_eq(curl("GET", "vm.info", NULL, &j), 200);
	fs = json_object_get(json_object_get(j, "config"), "fs");
	ck_assert_uint_eq(json_array_size(fs), 1);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(fs, 0), "tag")), "share");
	ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(fs, 0), "queue_size")),
			 1024);
	json_decref(j);
	ck_assert_int_eq(curl("GET", "vm.counters", NULL, &j), 200);
	ck_assert_ptr_nonnull(json_object_get(j, "fs0"));
	json_decref(j);
	/* a back end that never answers: 500 within the reply deadline, nothing added */
	fsd.silent = true;
	t0 = testutil_now_s();
	expect_error("PUT", "vm.add-fs", body, 500);
	ck_assert(testutil_now_s() - t0 < 10);
	fsd.silent = false;
	ck_assert_int_eq(curl("GET", "vm.info", NULL, &j), 200);
	ck_assert_uint_eq(json_array_size(json_object_get(json_object_get(j, "config"), "fs")), 1);
	json_decref(j);
	ck_assert_int_eq(put("vm.pause", NULL), 204);
	expect_error("PUT", "vm.remove-device", "{\"id\": \"fs0\"}", 500);
	ck_assert_int_eq(put("vm.resume", NULL), 204);
	reboot_ok();
	ck_assert_int_eq(curl("GET", "vm.info", NULL, &j), 200);
	ck_assert_ptr_null(json_object_get(json_object_get(j, "config"), "fs"));
	json_decref(j);
}

static long proc_fds(void)
{
	char cmd[96], *out = NULL;
	long n;

	snprintf(cmd, sizeof(cmd), "ls /proc/%d/fd | wc -l", (int)T.pid);
	ck_assert_int_eq(testutil_sh(cmd, &out), 0);
	n = strtol(out, NULL, 10);
	free(out);
	return n;
}

static long proc_rss_kb(void)
{
	char cmd[96], *out = NULL;
	long n;

	snprintf(cmd, sizeof(cmd), "awk '/^VmRSS/ {print $2}' /proc/%d/status", (int)T.pid);
	ck_assert_int_eq(testutil_sh(cmd, &out), 0);
	n = strtol(out, NULL, 10);
	free(out);
	return n;
}

/* 100 hot adds and removals (completed by the reset, the bench guest never ejects): GSIs and
 * BAR space come back each time, lvmm's descriptors and memory stay flat. */
static void hotplug_cycles(void)
{
	char body[512];
	long fds = 0, rss = 0;
	unsigned i, base = info_vnvme();
	json_t *j;

	snprintf(body, sizeof(body),
		 "{\"id\": \"hpc\", \"path\": \"%s/hpc.img\", \"size\": 1048576}", T.dir);
	for (i = 0; i < 100; i++) {
		ck_assert_int_eq(curl("PUT", "vm.add-vnvme", body, &j), 200);
		json_decref(j);
		ck_assert_uint_eq(info_vnvme(), base + 1);
		if (i == 4) { /* with the function in place, as at the end */
			fds = proc_fds();
			rss = proc_rss_kb();
		}
		ck_assert_int_eq(put("vm.pause", NULL), 204);
		expect_error("PUT", "vm.remove-device", "{\"id\": \"hpc\"}", 500);
		ck_assert_int_eq(put("vm.resume", NULL), 204);
		reboot_ok();
		ck_assert_uint_eq(info_vnvme(), base);
	}
	ck_assert_int_eq(curl("PUT", "vm.add-vnvme", body, &j), 200);
	json_decref(j);
	ck_assert_uint_eq(info_vnvme(), base + 1);
	ck_assert_str_eq(vm_state(), "Running");
	ck_assert_int_le(proc_fds(), fds + 2);
	ck_assert_int_le(proc_rss_kb(), rss + 16384);
}

/* 20 hot-add/remove cycles of a disk, the vsock device, a net device and a virtio-fs share: no
 * fd or memory growth (each has an I/O thread, eventfds, an io_uring, sockets or tap fds that
 * must all go with it). */
static void hotplug_virtio_cycles(void)
{
	char disk[512], vsock[512], fs[512], img[256];
	const char *net = "{\"id\": \"cnet\", \"fds\": [0]}";
	long fds = 0, rss = 0;
	json_t *j;

	snprintf(img, sizeof(img), "%s/cyc.img", T.dir);
	testutil_write_file(img, "", 0, 0600);
	ck_assert_int_eq(truncate(img, 1 << 20), 0);
	snprintf(disk, sizeof(disk), "{\"id\": \"cdisk\", \"path\": \"%s\", \"num_queues\": 2}",
		 img);
	snprintf(vsock, sizeof(vsock), "{\"cid\": 9, \"socket\": \"%s/cyc.sock\"}", T.dir);
	snprintf(fs, sizeof(fs), "{\"tag\": \"cyc\", \"socket\": \"%s/fsd.sock\", \"id\": \"cfs\"}",
		 T.dir);
	for (unsigned i = 0; i < 20; i++) {
		ck_assert_int_eq(curl("PUT", "vm.add-disk", disk, &j), 200);
		json_decref(j);
		ck_assert_int_eq(curl("PUT", "vm.add-vsock", vsock, &j), 200);
		json_decref(j);
		ck_assert_int_eq(add_net_fd(net, NULL), 0);
		ck_assert_int_eq(curl("PUT", "vm.add-fs", fs, &j), 200);
		json_decref(j);
		if (i == 4) {
			fds = proc_fds();
			rss = proc_rss_kb();
		}
		ck_assert_int_eq(put("vm.pause", NULL), 204);
		expect_error("PUT", "vm.remove-device", "{\"id\": \"cdisk\"}", 500);
		expect_error("PUT", "vm.remove-device", "{\"id\": \"vsock0\"}", 500);
		expect_error("PUT", "vm.remove-device", "{\"id\": \"cnet\"}", 500);
		expect_error("PUT", "vm.remove-device", "{\"id\": \"cfs\"}", 500);
		ck_assert_int_eq(put("vm.resume", NULL), 204);
		reboot_ok();
		ck_assert_uint_eq(info_disks(), 0);
		ck_assert_uint_eq(info_nets(), 0);
	}
	ck_assert_int_eq(curl("PUT", "vm.add-disk", disk, &j), 200);
	json_decref(j);
	ck_assert_int_eq(curl("PUT", "vm.add-vsock", vsock, &j), 200);
	json_decref(j);
	ck_assert_int_eq(add_net_fd(net, NULL), 0);
	ck_assert_int_eq(curl("PUT", "vm.add-fs", fs, &j), 200);
	json_decref(j);
	ck_assert_int_le(proc_fds(), fds + 2);
	ck_assert_int_le(proc_rss_kb(), rss + 16384);
	/* an id-less disk takes the first "disk<N>" no device has, whatever model holds disk0 */
	snprintf(disk, sizeof(disk),
		 "{\"id\": \"disk0\", \"path\": \"%s/d0.img\", \"size\": 1048576}", T.dir);
	ck_assert_int_eq(curl("PUT", "vm.add-vnvme", disk, &j), 200);
	json_decref(j);
	snprintf(img, sizeof(img), "%s/cyc2.img", T.dir);
	testutil_write_file(img, "", 0, 0600);
	ck_assert_int_eq(truncate(img, 1 << 20), 0);
	snprintf(disk, sizeof(disk), "{\"path\": \"%s\"}", img);
	ck_assert_int_eq(curl("PUT", "vm.add-disk", disk, &j), 200);
	ck_assert_str_eq(json_string_value(json_object_get(j, "id")), "disk1");
	json_decref(j);
	ck_assert_int_eq(put("vm.pause", NULL), 204);
	expect_error("PUT", "vm.remove-device", "{\"id\": \"disk0\"}", 500);
	expect_error("PUT", "vm.remove-device", "{\"id\": \"disk1\"}", 500);
	expect_error("PUT", "vm.remove-device", "{\"id\": \"cdisk\"}", 500);
	expect_error("PUT", "vm.remove-device", "{\"id\": \"vsock0\"}", 500);
	expect_error("PUT", "vm.remove-device", "{\"id\": \"cnet\"}", 500);
	expect_error("PUT", "vm.remove-device", "{\"id\": \"cfs\"}", 500);
	ck_assert_int_eq(put("vm.resume", NULL), 204);
	reboot_ok();
	ck_assert_uint_eq(info_nets(), 0);
}

START_TEST(test_errors)
{
	static char big[70 * 1024 + 64];
	char cfg[2048], *extra[] = {"--ssd-autostart", NULL};

	TESTUTIL_NEED_KVM();
	/* a softssd the VMM starts for a hot-added function lives in the test's directory */
	setenv("LVMM_RUN_DIR", T.dir, 1);
	setenv("LVMM_STATE_DIR", T.dir, 1);
	start_lvmm(extra);
	/* nothing created yet */
	expect_error("PUT", "vm.boot", NULL, 404);
	expect_error("PUT", "vm.pause", NULL, 404);
	expect_error("GET", "vm.info", NULL, 404);
	/* malformed and invalid configs */
	expect_error("PUT", "vm.create", "{\"payload\": ", 400);
	expect_error("PUT", "vm.create",
		     "{\"payload\": {\"kernel\": \"/k\"}, \"disks\": [{\"path\": \"/d\"}]}", 400);
	expect_error("PUT", "vm.create",
		     "{\"payload\": {\"kernel\": \"/k\"}, \"vsock\": {\"cid\": 3}}", 400);
	expect_error("PUT", "vm.create", "{\"cpus\": {\"boot_vcpus\": \"one\"}}", 400);
	expect_error("PUT", "vm.create", "{\"payload\": {\"kernel\": \"/nonexistent/vmlinux\"}}",
		     400);
	/* device ids are unique across models: a vNVMe may not take the virtio-rng's rng0 */
	{
		char body[1024];
		json_t *j = NULL;

		snprintf(
		    body, sizeof(body),
		    "{\"payload\": {\"kernel\": \"%s\"}, \"rng\": {\"src\": \"/dev/urandom\"},"
		    " \"vnvme\": [{\"id\": \"rng0\", \"path\": \"%s/rng0.img\", \"size\": 4096}]}",
		    guest, T.dir);
		ck_assert_int_eq(curl("PUT", "vm.create", body, &j), 400);
		ck_assert_msg(strstr(json_string_value(json_array_get(j, 0)) ?: "", "virtio-rng"),
			      "%s", json_string_value(json_array_get(j, 0)));
		json_decref(j);
	}
	/* wrong verb, unknown endpoint, oversized body */
	expect_error("GET", "vm.create", NULL, 400);
	expect_error("POST", "vm.pause", NULL, 400);
	expect_error("GET", "vm.teleport", NULL, 404);
	memset(big, ' ', sizeof(big) - 1);
	big[0] = '{';
	big[sizeof(big) - 2] = '}';
	expect_error("PUT", "vm.create", big, 413);

	/* state transitions on a real VM */
	snprintf(cfg, sizeof(cfg), "%s", vm_config("spin"));
	ck_assert_int_eq(put("vm.create", cfg), 204);
	expect_error("PUT", "vm.create", cfg, 409);
	expect_error("PUT", "vm.pause", NULL, 405);
	expect_error("PUT", "vm.resume", NULL, 405);
	ck_assert_int_eq(put("vm.boot", NULL), 204);
	expect_error("PUT", "vm.boot", NULL, 405);
	expect_error("PUT", "vm.resume", NULL, 405);
	ck_assert_int_eq(put("vm.pause", NULL), 204);
	expect_error("PUT", "vm.pause", NULL, 405);
	ck_assert_str_eq(vm_state(), "Paused");
	ck_assert_int_eq(put("vm.resume", NULL), 204);
	hotplug_without_eject();
	hotplug_disk();
	hotplug_vsock();
	hotplug_net();
	hotplug_fs();
	hotplug_virtio_cycles();
	hotplug_cycles();
	ck_assert_str_eq(vm_state(), "Running");
	/* a paused VM is shut down and destroyed with the VMM */
	ck_assert_int_eq(put("vm.pause", NULL), 204);
	ck_assert_int_eq(put("vmm.shutdown", NULL), 204);
	ck_assert_int_eq(wait_lvmm(), 0);
}
END_TEST

START_TEST(test_client)
{
	char out[65536], err[4096], cfgfile[160], bad[160];
	char *ping[] = {(char *)T.lvmm, "api", "--socket", T.sock, "ping", NULL};
	char *info[] = {(char *)T.lvmm, "api", "--socket", T.sock, "info", NULL};
	char *pause[] = {(char *)T.lvmm, "api", "--socket", T.sock, "pause", NULL};
	char *create[] = {(char *)T.lvmm, "api", "--socket", T.sock, "create", cfgfile, NULL};
	char *boot[] = {(char *)T.lvmm, "api", "--socket", T.sock, "boot", NULL};
	char *resize[] = {(char *)T.lvmm,	    "api", "--socket", T.sock, "resize",
			  "{\"desired_vcpus\": 1}", NULL};
	char *grow[] = {(char *)T.lvmm,
			"api",
			"--socket",
			T.sock,
			"resize",
			"{\"desired_ram\": 1073741824}",
			NULL};
	char noimg[200];
	char *addnv[] = {(char *)T.lvmm, "api", "--socket", T.sock, "add-vnvme", noimg, NULL};
	char *rmdev[] = {(char *)T.lvmm, "api", "--socket", T.sock, "remove-device", "nvme0", NULL};
	char *stop[] = {(char *)T.lvmm, "api", "--socket", T.sock, "shutdown-vmm", NULL};
	char *absent[] = {(char *)T.lvmm, "api", "--socket", bad, "ping", NULL};
	char *help[] = {(char *)T.lvmm, "api", "--help", NULL};
	char *verb[] = {(char *)T.lvmm, "api", "--socket", T.sock, "teleport", NULL};
	FILE *f;

	TESTUTIL_NEED_KVM();
	snprintf(bad, sizeof(bad), "%s/absent.sock", T.dir);
	snprintf(noimg, sizeof(noimg), "file=%s/absent.img", T.dir);
	ck_assert_int_eq(apitest_run_capture(absent, out, sizeof(out), err, sizeof(err)), 1);
	ck_assert_ptr_nonnull(strstr(err, "cannot connect"));
	ck_assert_int_eq(apitest_run_capture(help, out, sizeof(out), NULL, 0), 0);
	ck_assert_ptr_nonnull(strstr(out, "remove-device"));

	start_lvmm(NULL);
	ck_assert_int_eq(apitest_run_capture(verb, out, sizeof(out), err, sizeof(err)), 2);
	ck_assert_int_eq(apitest_run_capture(ping, out, sizeof(out), NULL, 0), 0);
	ck_assert_ptr_nonnull(strstr(out, "\"version\""));
	ck_assert_int_eq(apitest_run_capture(pause, out, sizeof(out), err, sizeof(err)), 1);
	ck_assert_ptr_nonnull(strstr(err, "HTTP 404"));

	snprintf(cfgfile, sizeof(cfgfile), "%s/vm.json", T.dir);
	f = fopen(cfgfile, "w");
	ck_assert_ptr_nonnull(f);
	fputs(vm_config("spin"), f);
	fclose(f);
	snprintf(cfgfile, sizeof(cfgfile), "@%s/vm.json", T.dir);
	ck_assert_int_eq(apitest_run_capture(create, out, sizeof(out), err, sizeof(err)), 0);
	ck_assert_int_eq(apitest_run_capture(boot, out, sizeof(out), err, sizeof(err)), 0);
	ck_assert_int_eq(apitest_run_capture(info, out, sizeof(out), NULL, 0), 0);
	ck_assert_ptr_nonnull(strstr(out, "\"Running\""));
	ck_assert_int_eq(apitest_run_capture(resize, out, sizeof(out), err, sizeof(err)), 0);
	ck_assert_int_eq(apitest_run_capture(grow, out, sizeof(out), err, sizeof(err)), 1);
	ck_assert_ptr_nonnull(strstr(err, "HTTP 501: vm.resize"));
	ck_assert_int_eq(apitest_run_capture(addnv, out, sizeof(out), err, sizeof(err)), 1);
	ck_assert_ptr_nonnull(strstr(err, "absent.img"));
	ck_assert_int_eq(apitest_run_capture(rmdev, out, sizeof(out), err, sizeof(err)), 1);
	ck_assert_ptr_nonnull(strstr(err, "HTTP 404"));
	ck_assert_ptr_nonnull(strstr(err, "nvme0"));
	ck_assert_int_eq(apitest_run_capture(stop, out, sizeof(out), err, sizeof(err)), 0);
	ck_assert_int_eq(wait_lvmm(), 0);
}
END_TEST

START_TEST(test_command_line_vm)
{
	char serial[160];
	char *extra[] = {"--kernel", guest,  "--cmdline", "bench.mode=spin", "--memory", "64M",
			 "--serial", serial, NULL};
	char *second[] = {(char *)T.lvmm, "run", "--api-socket", T.sock, NULL};
	char out[4096], err[4096];

	TESTUTIL_NEED_KVM();
	snprintf(serial, sizeof(serial), "file=%s", T.console);
	start_lvmm(extra);
	ck_assert_str_eq(vm_state(), "Running");
	ck_assert_msg(heartbeats_pass(0), "no heartbeat from the command-line VM");
	/* a second lvmm does not take over a live socket */
	ck_assert_int_eq(apitest_run_capture(second, out, sizeof(out), err, sizeof(err)), 1);
	ck_assert_ptr_nonnull(strstr(err, "another server"));
	ck_assert_int_eq(curl("GET", "vmm.ping", NULL, NULL), 200);
	/* nor does one with its own VM: it stops that VM and exits instead of hanging */
	char *third[] = {
	    (char *)T.lvmm, "run", "--kernel",	   guest,  "--cmdline", "bench.mode=spin",
	    "--serial",	    "off", "--api-socket", T.sock, NULL};
	ck_assert_int_eq(apitest_run_capture(third, out, sizeof(out), err, sizeof(err)), 1);
	ck_assert_ptr_nonnull(strstr(err, "another server"));
	expect_error("PUT", "vm.create", vm_config("spin"), 409);
	/* it ends with its VM */
	ck_assert_int_eq(put("vm.shutdown", NULL), 204);
	ck_assert_int_eq(wait_lvmm(), 0);
	ck_assert_int_eq(access(T.sock, F_OK), -1);
}
END_TEST

/* How many of lvmm's threads are named vcpuN (what Kata's GetThreadIDs() pins). */
static unsigned vcpu_threads(pid_t pid)
{
	char dir[64], path[384], comm[32];
	struct dirent *e;
	unsigned n = 0;
	DIR *d;

	snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
	d = opendir(dir);
	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d))) {
		FILE *f;

		snprintf(path, sizeof(path), "%s/%s/comm", dir, e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(comm, sizeof(comm), f) && !strncmp(comm, "vcpu", 4) && comm[4] >= '0' &&
		    comm[4] <= '9')
			n++;
		fclose(f);
	}
	closedir(d);
	return n;
}

/* The Seccomp: field of /proc/PID/status (0 none, 2 filter), -1 when unreadable. */
static int seccomp_status(pid_t pid)
{
	char path[64], line[128];
	int v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Seccomp: %d", &v) == 1)
			break;
	fclose(f);
	return v;
}

/* cloud-hypervisor's command line as Kata builds it: lvmm -vv --api-socket S --seccomp false
 * --log-file LOG; vCPU threads named vcpuN. */
START_TEST(test_toplevel_cli)
{
	char logf[160], out[4096], err[4096], cfg[2048];
	char *argv[] = {(char *)T.lvmm, "-vv",	      "--api-socket", T.sock, "--seccomp",
			"false",	"--log-file", logf,	      NULL};
	char *bad[] = {(char *)T.lvmm, "--seccomp", "maybe", "--api-socket", T.sock, NULL};
	char *badv[] = {(char *)T.lvmm, "-vx", "--api-socket", T.sock, NULL};
	char *text;

	TESTUTIL_NEED_KVM();
	snprintf(logf, sizeof(logf), "%s/ch.log", T.dir);
	ck_assert_int_eq(apitest_run_capture(bad, out, sizeof(out), err, sizeof(err)), 2);
	ck_assert_ptr_nonnull(strstr(err, "--seccomp"));
	ck_assert_int_eq(apitest_run_capture(badv, out, sizeof(out), err, sizeof(err)), 2);
	ck_assert_ptr_nonnull(strstr(err, "-vx"));
	T.pid = fork();
	ck_assert_int_ge(T.pid, 0);
	if (!T.pid) {
		execv(T.lvmm, argv);
		_exit(127);
	}
	for (int i = 0; i < 200 && !apitest_ping(&T); i++)
		testutil_sleep_ms(25);
	ck_assert(apitest_ping(&T));
	/* cloud-hypervisor's --seccomp false is lvmm run's --seccomp off: no filter */
	ck_assert_int_eq(seccomp_status(T.pid), 0);
	/* a key outside the schema: ignored, logged to the --log-file */
	snprintf(cfg, sizeof(cfg), "%s", vm_config("spin"));
	ck_assert_ptr_nonnull(strstr(cfg, "\"boot_vcpus\": 1"));
	strstr(cfg, "\"boot_vcpus\": 1")[14] = '2';
	cfg[strlen(cfg) - 1] = 0;
	strcat(cfg, ", \"sgx_epc\": []}");
	ck_assert_int_eq(put("vm.create", cfg), 204);
	ck_assert_int_eq(put("vm.boot", NULL), 204);
	ck_assert_msg(heartbeats_pass(0), "the guest did not start");
	ck_assert_uint_eq(vcpu_threads(T.pid), 2);
	ck_assert_int_eq(put("vmm.shutdown", NULL), 204);
	ck_assert_int_eq(wait_lvmm(), 0);
	text = testutil_slurp(logf);
	ck_assert_ptr_nonnull(text);
	ck_assert_ptr_nonnull(strstr(text, "ignoring field 'sgx_epc'"));
	free(text);
}
END_TEST

/* Every endpoint's answers in every VM state against cloud-hypervisor's OpenAPI file, by the
 * Python validator (jsonschema, Debian's python3-jsonschema): `lvmm -v --api-socket`, Kata's
 * body, a virtio-fs share and a vsock refused with 400 naming them. */
START_TEST(test_openapi_schema)
{
	char out[16384], err[16384];
	char *argv[] = {"python3",  "tests/api/validate_api.py",
			"--lvmm",   (char *)T.lvmm,
			"--kernel", guest,
			"--dir",    T.dir,
			NULL};
	int st;

	TESTUTIL_NEED_KVM();
	st = apitest_run_capture(argv, out, sizeof(out), err, sizeof(err));
	ck_assert_msg(st == 0, "validate_api.py: status %d\n%s%s", st, out, err);
	ck_assert_ptr_nonnull(strstr(out, " 0 violations"));
}
END_TEST

START_TEST(test_stale_socket)
{
	char *extra[] = {NULL};

	/* a socket file left by a killed lvmm is replaced */
	start_lvmm(extra);
	kill(T.pid, SIGKILL);
	waitpid(T.pid, NULL, 0);
	T.pid = 0;
	ck_assert_int_eq(access(T.sock, F_OK), 0);
	start_lvmm(extra);
	ck_assert_int_eq(put("vmm.shutdown", NULL), 204);
	ck_assert_int_eq(wait_lvmm(), 0);
}
END_TEST

static Suite *api_integ_suite(void)
{
	Suite *s = suite_create("api_integration");
	TCase *tc = tcase_create("api");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_lifecycle_curl);
	tcase_add_test(tc, test_guest_poweroff);
	tcase_add_test(tc, test_reboot);
	tcase_add_test(tc, test_command_line_triple_fault);
	tcase_add_test(tc, test_counters_nvme);
	tcase_add_test(tc, test_errors);
	tcase_add_test(tc, test_client);
	tcase_add_test(tc, test_command_line_vm);
	tcase_add_test(tc, test_stale_socket);
	tcase_add_test(tc, test_openapi_schema);
	tcase_add_test(tc, test_toplevel_cli);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return testutil_run_suite(api_integ_suite());
}
