/* The REST API end to end: a real `lvmm run --api-socket`, driven with curl --unix-socket and
 * `lvmm api` through create -> boot -> info -> pause -> resume -> counters -> shutdown on the
 * bench guest, every error class, and the command-line VM's socket lifetime. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *lvmm;
static char guest[512];
static char dir[64];
static char sock[128];
static char console[128];
static pid_t vmm_pid;
static int early_status = -1; /* exit status of an lvmm that ended inside start_lvmm() */

static void ms_sleep(unsigned ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/* Runs argv with stdout (and stderr, if err) captured; returns the exit status or -1. */
static int run_capture(char *const argv[], char *out, size_t outlen, char *err, size_t errlen)
{
	int po[2], pe[2], st;
	pid_t pid;
	size_t n = 0, m = 0;

	ck_assert_int_eq(pipe(po), 0);
	ck_assert_int_eq(pipe(pe), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (!pid) {
		dup2(po[1], 1);
		dup2(pe[1], 2);
		close(po[0]);
		close(pe[0]);
		execvp(argv[0], argv);
		_exit(127);
	}
	close(po[1]);
	close(pe[1]);
	/* answers are small: read stdout fully, then stderr */
	for (;;) {
		ssize_t r = read(po[0], out + n, outlen - 1 - n);

		if (r <= 0)
			break;
		n += r;
	}
	out[n] = 0;
	for (;;) {
		char junk[256];
		ssize_t r = err ? read(pe[0], err + m, errlen - 1 - m) : read(pe[0], junk, 256);

		if (r <= 0)
			break;
		if (err)
			m += r;
	}
	if (err)
		err[m] = 0;
	close(po[0]);
	close(pe[0]);
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* One curl request; returns the HTTP status and leaves the parsed body (or NULL) in *body. */
static int curl(const char *method, const char *endpoint, const char *data, json_t **body)
{
	char url[128], out[65536], datafile[160];
	char *argv[16];
	int a = 0, status;
	char *nl;

	snprintf(url, sizeof(url), "http://localhost/api/v1/%s", endpoint);
	argv[a++] = "curl";
	argv[a++] = "-s";
	argv[a++] = "--max-time";
	argv[a++] = "30";
	argv[a++] = "--unix-socket";
	argv[a++] = sock;
	argv[a++] = "-X";
	argv[a++] = (char *)method;
	argv[a++] = "-w";
	argv[a++] = "\n%{http_code}";
	if (data) {
		FILE *f;

		snprintf(datafile, sizeof(datafile), "%s/body.json", dir);
		f = fopen(datafile, "w");
		ck_assert_ptr_nonnull(f);
		fputs(data, f);
		fclose(f);
		argv[a++] = "-H";
		argv[a++] = "Content-Type: application/json";
		argv[a++] = "--data-binary";
		snprintf(datafile, sizeof(datafile), "@%s/body.json", dir);
		argv[a++] = datafile;
	}
	argv[a++] = url;
	argv[a] = NULL;
	ck_assert_int_eq(run_capture(argv, out, sizeof(out), NULL, 0), 0);
	nl = strrchr(out, '\n');
	ck_assert_ptr_nonnull(nl);
	status = atoi(nl + 1);
	*nl = 0;
	if (body)
		*body = *out ? json_loads(out, 0, NULL) : NULL;
	if (*out && body)
		ck_assert_msg(*body != NULL, "%s %s: answer is not JSON: %s", method, endpoint,
			      out);
	return status;
}

/* True when vmm.ping answers 200; a refused connection is not a failure here. */
static bool ping_probe(void)
{
	char *argv[] = {"curl",
			"-s",
			"-o",
			"/dev/null",
			"-w",
			"%{http_code}",
			"--max-time",
			"5",
			"--unix-socket",
			sock,
			"http://localhost/api/v1/vmm.ping",
			NULL};
	char out[64];

	return run_capture(argv, out, sizeof(out), NULL, 0) == 0 && !strcmp(out, "200");
}

static int put(const char *endpoint, const char *data)
{
	return curl("PUT", endpoint, data, NULL);
}

static const char *vm_state(void)
{
	static char s[32];
	json_t *j;

	ck_assert_int_eq(curl("GET", "vm.info", NULL, &j), 200);
	snprintf(s, sizeof(s), "%s", json_string_value(json_object_get(j, "state")));
	json_decref(j);
	return s;
}

static void expect_error(const char *method, const char *endpoint, const char *data, int want)
{
	json_t *j = NULL;
	int st = curl(method, endpoint, data, &j);

	ck_assert_msg(st == want, "%s %s: status %d, expected %d", method, endpoint, st, want);
	ck_assert_msg(json_is_string(json_object_get(j, "error")), "%s %s: no error message",
		      method, endpoint);
	json_decref(j);
	/* the server keeps serving after every error */
	ck_assert_int_eq(curl("GET", "vmm.ping", NULL, NULL), 200);
}

static unsigned heartbeats(void)
{
	char buf[65536];
	unsigned n = 0;
	int fd = open(console, O_RDONLY);
	ssize_t r;

	if (fd < 0)
		return 0;
	r = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[r > 0 ? r : 0] = 0;
	for (char *p = buf; (p = strstr(p, "heartbeat")); p++)
		n++;
	return n;
}

/* Waits (bounded) until the console shows more than n heartbeats. */
static bool heartbeats_pass(unsigned n)
{
	for (int i = 0; i < 300; i++) {
		if (heartbeats() > n)
			return true;
		ms_sleep(50);
	}
	return false;
}

static void start_lvmm(char *const extra[])
{
	char *argv[24];
	char log[160];
	int a = 0, fd;

	argv[a++] = (char *)lvmm;
	argv[a++] = "run";
	argv[a++] = "--api-socket";
	argv[a++] = sock;
	for (int i = 0; extra && extra[i]; i++)
		argv[a++] = extra[i];
	argv[a] = NULL;
	snprintf(log, sizeof(log), "%s/lvmm.log", dir);
	vmm_pid = fork();
	ck_assert_int_ge(vmm_pid, 0);
	if (!vmm_pid) {
		fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		dup2(fd, 1);
		dup2(fd, 2);
		fd = open("/dev/null", O_RDONLY);
		dup2(fd, 0);
		execv(lvmm, argv);
		_exit(127);
	}
	for (int i = 0; i < 400; i++) {
		struct stat st;
		int status;

		/* lvmm may be gone already (a guest that triple-faults at once): keep its status */
		if (waitpid(vmm_pid, &status, WNOHANG) == vmm_pid) {
			early_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
			vmm_pid = 0;
			return;
		}
		/* the socket file exists between bind() and listen(): probe without asserting */
		if (!stat(sock, &st) && ping_probe())
			return;
		ms_sleep(25);
	}
	ck_abort_msg("lvmm did not open %s", sock);
}

/* Waits (bounded) for lvmm to exit; returns its exit status, or -1 if it had to be killed. */
static int wait_lvmm(void)
{
	int st;

	if (!vmm_pid) {
		st = early_status;
		early_status = -1;
		return st;
	}
	for (int i = 0; i < 600; i++) {
		if (waitpid(vmm_pid, &st, WNOHANG) == vmm_pid) {
			vmm_pid = 0;
			return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
		}
		ms_sleep(25);
	}
	kill(vmm_pid, SIGKILL);
	waitpid(vmm_pid, &st, 0);
	vmm_pid = 0;
	return -1;
}

static void setup(void)
{
	const char *build = getenv("BUILD") ? getenv("BUILD") : "build";

	lvmm = getenv("LVMM") ? getenv("LVMM") : "build/lvmm";
	snprintf(guest, sizeof(guest), "%s/bench-guest/bench-guest.elf", build);
	ck_assert_msg(access(lvmm, X_OK) == 0, "no lvmm at %s (set LVMM)", lvmm);
	ck_assert_msg(access(guest, R_OK) == 0, "no bench guest at %s", guest);
	strcpy(dir, "/tmp/lvmm-itest-api-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(sock, sizeof(sock), "%s/api.sock", dir);
	snprintf(console, sizeof(console), "%s/console.log", dir);
	vmm_pid = 0;
}

static void teardown(void)
{
	char cmd[128];

	if (vmm_pid > 0) {
		kill(vmm_pid, SIGKILL);
		waitpid(vmm_pid, NULL, 0);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd)) {
		/* a leftover temp dir is harmless */
	}
}

static char *vm_config(const char *mode)
{
	static char cfg[2048];

	snprintf(cfg, sizeof(cfg),
		 "{\"cpus\": {\"boot_vcpus\": 1}, \"memory\": {\"size\": 67108864},"
		 " \"payload\": {\"kernel\": \"%s\", \"cmdline\": \"bench.mode=%s\"},"
		 " \"serial\": {\"mode\": \"File\", \"file\": \"%s\"}}",
		 guest, mode, console);
	return cfg;
}

START_TEST(test_lifecycle_curl)
{
	unsigned before, after;
	json_t *j;

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

	/* paused: the heartbeat stops (5 periods of silence) */
	ck_assert_int_eq(put("vm.pause", NULL), 204);
	ck_assert_str_eq(vm_state(), "Paused");
	before = heartbeats();
	ms_sleep(1000);
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
	before = heartbeats();
	ms_sleep(500);
	ck_assert_uint_eq(heartbeats(), before);

	/* boot again from Shutdown rebuilds the VM; delete forgets it */
	ck_assert_int_eq(put("vm.boot", NULL), 204);
	ck_assert_str_eq(vm_state(), "Running");
	ck_assert_int_eq(put("vm.delete", NULL), 204);
	expect_error("GET", "vm.info", NULL, 409);

	ck_assert_int_eq(put("vmm.shutdown", NULL), 204);
	ck_assert_int_eq(wait_lvmm(), 0);
	ck_assert_int_eq(access(sock, F_OK), -1);
}
END_TEST

/* How many times the console shows the guest starting ("hello from ring 0"). */
static unsigned guest_starts(void)
{
	char buf[65536];
	unsigned n = 0;
	int fd = open(console, O_RDONLY);
	ssize_t r;

	if (fd < 0)
		return 0;
	r = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[r > 0 ? r : 0] = 0;
	for (char *p = buf; (p = strstr(p, "hello from ring 0")); p++)
		n++;
	return n;
}

static bool guest_starts_reach(unsigned n)
{
	for (int i = 0; i < 300; i++) {
		if (guest_starts() >= n)
			return true;
		ms_sleep(50);
	}
	return false;
}

START_TEST(test_reboot)
{
	start_lvmm(NULL);
	ck_assert_int_eq(put("vm.create", vm_config("spin")), 204);
	expect_error("PUT", "vm.reboot", NULL, 409); /* Created: nothing to reset */
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
	expect_error("PUT", "vm.reboot", NULL, 409);
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

	snprintf(serial, sizeof(serial), "file=%s", console);
	start_lvmm(extra);
	ck_assert_int_eq(wait_lvmm(), 0);
	snprintf(log, sizeof(log), "%s/lvmm.log", dir);
	fd = open(log, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	text[n > 0 ? n : 0] = 0;
	ck_assert_msg(strstr(text, "triple fault"), "lvmm output: %s", text);
	ck_assert_int_eq(access(sock, F_OK), -1);
}
END_TEST

START_TEST(test_guest_poweroff)
{
	start_lvmm(NULL);
	ck_assert_int_eq(put("vm.create", vm_config("hello")), 204);
	ck_assert_int_eq(put("vm.boot", NULL), 204);
	/* the guest powers off by itself: the state follows, and lvmm keeps serving */
	for (int i = 0; i < 400 && strcmp(vm_state(), "Shutdown"); i++)
		ms_sleep(25);
	ck_assert_str_eq(vm_state(), "Shutdown");
	expect_error("PUT", "vm.pause", NULL, 409);
	ck_assert_int_eq(put("vm.delete", NULL), 204);
	/* SIGTERM ends an empty VMM cleanly */
	kill(vmm_pid, SIGTERM);
	ck_assert_int_eq(wait_lvmm(), 0);
	ck_assert_int_eq(access(sock, F_OK), -1);
}
END_TEST

START_TEST(test_counters_nvme)
{
	char cfg[2048], disk[160];
	json_t *j, *d;
	int fd;

	/* the bench guest's NVMe mode does I/O on a file-backed vNVMe, then powers off */
	snprintf(disk, sizeof(disk), "%s/disk.img", dir);
	fd = open(disk, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, 16 << 20), 0);
	close(fd);
	snprintf(cfg, sizeof(cfg),
		 "{\"memory\": {\"size\": 67108864},"
		 " \"payload\": {\"kernel\": \"%s\", \"cmdline\": \"bench.mode=nvme\"},"
		 " \"serial\": {\"mode\": \"File\", \"file\": \"%s\"},"
		 " \"vnvme\": [{\"path\": \"%s\"}]}",
		 guest, console, disk);
	start_lvmm(NULL);
	ck_assert_int_eq(put("vm.create", cfg), 204);
	ck_assert_int_eq(curl("GET", "vm.counters", NULL, &j), 200);
	ck_assert_int_eq(
	    json_integer_value(json_object_get(json_object_get(j, "nvme0"), "read_ops")), 0);
	json_decref(j);
	ck_assert_int_eq(put("vm.boot", NULL), 204);
	for (int i = 0; i < 2400 && strcmp(vm_state(), "Shutdown"); i++)
		ms_sleep(25);
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

START_TEST(test_errors)
{
	static char big[70 * 1024 + 64];
	char cfg[2048];

	start_lvmm(NULL);
	/* nothing created yet */
	expect_error("PUT", "vm.boot", NULL, 409);
	expect_error("PUT", "vm.pause", NULL, 409);
	expect_error("GET", "vm.info", NULL, 409);
	/* malformed and invalid configs */
	expect_error("PUT", "vm.create", "{\"payload\": ", 400);
	expect_error("PUT", "vm.create", "{\"payload\": {\"kernel\": \"/k\"}, \"disks\": []}", 400);
	expect_error("PUT", "vm.create", "{\"cpus\": {\"boot_vcpus\": \"one\"}}", 400);
	expect_error("PUT", "vm.create", "{\"payload\": {\"kernel\": \"/nonexistent/vmlinux\"}}",
		     400);
	/* wrong verb, unknown endpoint, oversized body */
	expect_error("GET", "vm.create", NULL, 405);
	expect_error("POST", "vm.pause", NULL, 405);
	expect_error("GET", "vm.teleport", NULL, 404);
	memset(big, ' ', sizeof(big) - 1);
	big[0] = '{';
	big[sizeof(big) - 2] = '}';
	expect_error("PUT", "vm.create", big, 413);

	/* state transitions on a real VM */
	snprintf(cfg, sizeof(cfg), "%s", vm_config("spin"));
	ck_assert_int_eq(put("vm.create", cfg), 204);
	expect_error("PUT", "vm.create", cfg, 409);
	expect_error("PUT", "vm.pause", NULL, 409);
	expect_error("PUT", "vm.resume", NULL, 409);
	ck_assert_int_eq(put("vm.boot", NULL), 204);
	expect_error("PUT", "vm.boot", NULL, 409);
	expect_error("PUT", "vm.resume", NULL, 409);
	ck_assert_int_eq(put("vm.pause", NULL), 204);
	expect_error("PUT", "vm.pause", NULL, 409);
	ck_assert_str_eq(vm_state(), "Paused");
	/* hotplug is not there yet: a clear error, nothing changes */
	ck_assert_int_eq(put("vm.resume", NULL), 204);
	expect_error("PUT", "vm.add-vnvme", "{\"path\": \"/tmp/none.img\"}", 501);
	expect_error("PUT", "vm.remove-device", "{\"id\": \"nvme0\"}", 501);
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
	char *ping[] = {(char *)lvmm, "api", "--socket", sock, "ping", NULL};
	char *info[] = {(char *)lvmm, "api", "--socket", sock, "info", NULL};
	char *pause[] = {(char *)lvmm, "api", "--socket", sock, "pause", NULL};
	char *create[] = {(char *)lvmm, "api", "--socket", sock, "create", cfgfile, NULL};
	char *boot[] = {(char *)lvmm, "api", "--socket", sock, "boot", NULL};
	char *addnv[] = {(char *)lvmm,	    "api", "--socket", sock, "add-vnvme",
			 "file=/tmp/x.img", NULL};
	char *rmdev[] = {(char *)lvmm, "api", "--socket", sock, "remove-device", "nvme0", NULL};
	char *stop[] = {(char *)lvmm, "api", "--socket", sock, "shutdown-vmm", NULL};
	char *absent[] = {(char *)lvmm, "api", "--socket", bad, "ping", NULL};
	char *help[] = {(char *)lvmm, "api", "--help", NULL};
	char *verb[] = {(char *)lvmm, "api", "--socket", sock, "teleport", NULL};
	FILE *f;

	snprintf(bad, sizeof(bad), "%s/absent.sock", dir);
	ck_assert_int_eq(run_capture(absent, out, sizeof(out), err, sizeof(err)), 1);
	ck_assert_ptr_nonnull(strstr(err, "cannot connect"));
	ck_assert_int_eq(run_capture(help, out, sizeof(out), NULL, 0), 0);
	ck_assert_ptr_nonnull(strstr(out, "remove-device"));

	start_lvmm(NULL);
	ck_assert_int_eq(run_capture(verb, out, sizeof(out), err, sizeof(err)), 2);
	ck_assert_int_eq(run_capture(ping, out, sizeof(out), NULL, 0), 0);
	ck_assert_ptr_nonnull(strstr(out, "\"version\""));
	ck_assert_int_eq(run_capture(pause, out, sizeof(out), err, sizeof(err)), 1);
	ck_assert_ptr_nonnull(strstr(err, "409"));

	snprintf(cfgfile, sizeof(cfgfile), "%s/vm.json", dir);
	f = fopen(cfgfile, "w");
	ck_assert_ptr_nonnull(f);
	fputs(vm_config("spin"), f);
	fclose(f);
	snprintf(cfgfile, sizeof(cfgfile), "@%s/vm.json", dir);
	ck_assert_int_eq(run_capture(create, out, sizeof(out), err, sizeof(err)), 0);
	ck_assert_int_eq(run_capture(boot, out, sizeof(out), err, sizeof(err)), 0);
	ck_assert_int_eq(run_capture(info, out, sizeof(out), NULL, 0), 0);
	ck_assert_ptr_nonnull(strstr(out, "\"Running\""));
	ck_assert_int_eq(run_capture(addnv, out, sizeof(out), err, sizeof(err)), 1);
	ck_assert_ptr_nonnull(strstr(err, "501"));
	ck_assert_int_eq(run_capture(rmdev, out, sizeof(out), err, sizeof(err)), 1);
	ck_assert_ptr_nonnull(strstr(err, "nvme0"));
	ck_assert_int_eq(run_capture(stop, out, sizeof(out), err, sizeof(err)), 0);
	ck_assert_int_eq(wait_lvmm(), 0);
}
END_TEST

START_TEST(test_command_line_vm)
{
	char serial[160];
	char *extra[] = {"--kernel", guest,  "--cmdline", "bench.mode=spin", "--memory", "64M",
			 "--serial", serial, NULL};
	char *second[] = {(char *)lvmm, "run", "--api-socket", sock, NULL};
	char out[4096], err[4096];

	snprintf(serial, sizeof(serial), "file=%s", console);
	start_lvmm(extra);
	ck_assert_str_eq(vm_state(), "Running");
	ck_assert_msg(heartbeats_pass(0), "no heartbeat from the command-line VM");
	/* a second lvmm does not take over a live socket */
	ck_assert_int_eq(run_capture(second, out, sizeof(out), err, sizeof(err)), 1);
	ck_assert_ptr_nonnull(strstr(err, "another server"));
	ck_assert_int_eq(curl("GET", "vmm.ping", NULL, NULL), 200);
	/* nor does one with its own VM: it stops that VM and exits instead of hanging */
	char *third[] = {(char *)lvmm, "run", "--kernel",     guest, "--cmdline", "bench.mode=spin",
			 "--serial",   "off", "--api-socket", sock,  NULL};
	ck_assert_int_eq(run_capture(third, out, sizeof(out), err, sizeof(err)), 1);
	ck_assert_ptr_nonnull(strstr(err, "another server"));
	expect_error("PUT", "vm.create", vm_config("spin"), 409);
	/* it ends with its VM */
	ck_assert_int_eq(put("vm.shutdown", NULL), 204);
	ck_assert_int_eq(wait_lvmm(), 0);
	ck_assert_int_eq(access(sock, F_OK), -1);
}
END_TEST

START_TEST(test_stale_socket)
{
	char *extra[] = {NULL};

	/* a socket file left by a killed lvmm is replaced */
	start_lvmm(extra);
	kill(vmm_pid, SIGKILL);
	waitpid(vmm_pid, NULL, 0);
	vmm_pid = 0;
	ck_assert_int_eq(access(sock, F_OK), 0);
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
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(api_integ_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
