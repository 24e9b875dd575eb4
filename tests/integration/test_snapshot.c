/* Snapshot and restore end to end on the bench guest (bench.mode=spin: a heartbeat counter in
 * guest memory printed every 200 ms): pause, vm.snapshot, SIGKILL the lvmm, vm.restore in a
 * fresh one, resume, and the count goes on from where it stopped; `lvmm run --restore`; and
 * every refusal: a running VM, a VMM that has a VM, a device that cannot be saved, a corrupt,
 * truncated or foreign snapshot directory, each answered with a message while lvmm serves on. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <sched.h>
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
#include "snapshot_fmt.h"
#include "ssdutil.h"
#include "testutil.h"

static struct apitest T;
static char guest[512], snap[256];
static unsigned ncpus = 1;

static int curl(const char *method, const char *endpoint, const char *data, json_t **body)
{
	return apitest_curl(&T, method, endpoint, data, body);
}

static int put(const char *endpoint, const char *data)
{
	return curl("PUT", endpoint, data, NULL);
}

static void expect_error(const char *endpoint, const char *data, int want, const char *needle)
{
	apitest_expect_error(&T, endpoint, data, want, needle);
}

static void setup(void)
{
	ncpus = 1;
	apitest_init(&T, "/tmp/lvmm-itest-snap-");
	snprintf(guest, sizeof(guest), "%s", testutil_bench_guest());
	ck_assert_msg(access(guest, R_OK) == 0, "no bench guest at %s", guest);
	snprintf(snap, sizeof(snap), "%s/snap", T.dir);
	ck_assert_int_eq(mkdir(snap, 0700), 0);
}

static void teardown(void)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", snap);
	if (system(cmd)) {
		/* apitest_fini removes the rest */
	}
	apitest_fini(&T);
}

static char *spin_config(const char *extra)
{
	static char cfg[2048];

	snprintf(cfg, sizeof(cfg),
		 "{\"cpus\": {\"boot_vcpus\": %u}, \"memory\": {\"size\": 67108864},"
		 " \"payload\": {\"kernel\": \"%s\", \"cmdline\": \"bench.mode=spin\"},"
		 " \"serial\": {\"mode\": \"File\", \"file\": \"%s\"}%s}",
		 ncpus, guest, T.console, extra ? extra : "");
	return cfg;
}

/* A bench guest of another mode, for the vNVMe run. */
static char *bench_config(const char *cmdline, const char *extra)
{
	static char cfg[2048];

	snprintf(cfg, sizeof(cfg),
		 "{\"cpus\": {\"boot_vcpus\": 1}, \"memory\": {\"size\": 67108864},"
		 " \"payload\": {\"kernel\": \"%s\", \"cmdline\": \"%s\"},"
		 " \"serial\": {\"mode\": \"File\", \"file\": \"%s\"}%s}",
		 guest, cmdline, T.console, extra);
	return cfg;
}

static bool console_has(const char *what, unsigned limit_ms)
{
	for (unsigned t = 0; t < limit_ms; t += 50) {
		char *c = testutil_slurp(T.console);
		bool yes = c && strstr(c, what);

		free(c);
		if (yes)
			return true;
		testutil_sleep_ms(50);
	}
	return false;
}

/* The last heartbeat number on the console, -1 when none. */
static long last_heartbeat(void)
{
	char *c = testutil_slurp(T.console), *p, *last = NULL;
	long n = -1;

	for (p = c; p && (p = strstr(p, "heartbeat ")); p++)
		last = p;
	if (last)
		n = strtol(last + 10, NULL, 10);
	free(c);
	return n;
}

/* Whether console text c has the line "heartbeat n" (whatever ends the line). */
static bool has_heartbeat(const char *c, long n)
{
	char want[64];
	const char *p;
	size_t len;

	len = (size_t)snprintf(want, sizeof(want), "heartbeat %ld", n);
	for (p = c; p && (p = strstr(p, want)); p++)
		if (p[len] < '0' || p[len] > '9')
			return true;
	return false;
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

static void kill_lvmm(void)
{
	int st;

	ck_assert_int_gt(T.pid, 0);
	ck_assert_int_eq(kill(T.pid, SIGKILL), 0);
	ck_assert_int_eq(waitpid(T.pid, &st, 0), T.pid);
	T.pid = 0;
}

static char *url(const char *key, const char *dir, const char *more)
{
	static char b[512];

	snprintf(b, sizeof(b), "{\"%s\": \"file://%s\"%s}", key, dir, more ? more : "");
	return b;
}

/* Boots the spin guest, lets it count, pauses and saves it; returns the count at the pause. */
static long boot_and_save(void)
{
	long saved;

	apitest_start(&T, NULL);
	ck_assert_int_eq(put("vm.create", spin_config(NULL)), 204);
	ck_assert_int_eq(put("vm.boot", NULL), 204);
	ck_assert_msg(heartbeat_reaches(3, 15000), "the guest does not count");
	expect_error("vm.snapshot", url("destination_url", snap, NULL), 405, "Running");
	ck_assert_int_eq(put("vm.pause", NULL), 204);
	saved = last_heartbeat();
	ck_assert_int_eq(put("vm.snapshot", url("destination_url", snap, NULL)), 204);
	ck_assert_str_eq(apitest_vm_state(&T), "Paused");
	return saved;
}

START_TEST(test_snapshot_restore_continues)
{
	char path[512];
	struct stat st;
	long saved;

	TESTUTIL_NEED_KVM();
	saved = boot_and_save();
	/* the memory file is as big as the RAM, its zero pages holes */
	snprintf(path, sizeof(path), "%s/memory.bin", snap);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(st.st_size, 67108864 + sizeof(struct snap_mem_trailer));
	ck_assert_int_lt((long long)st.st_blocks * 512, 67108864 / 2);
	/* the saved VM goes on too, from the same count */
	ck_assert_int_eq(put("vm.resume", NULL), 204);
	ck_assert(heartbeat_reaches(saved + 2, 10000));
	kill_lvmm();

	apitest_start(&T, NULL);
	ck_assert_int_eq(put("vm.restore", url("source_url", snap, NULL)), 204);
	ck_assert_str_eq(apitest_vm_state(&T), "Paused");
	expect_error("vm.restore", url("source_url", snap, NULL), 409, "already exists");
	/* the console file now ends past the saved count (the first VM ran on after the save):
	 * the restored guest's next line is saved + 1 again, but the pause may have split it and
	 * its start goes with the truncation: saved + 2 is the first line seen whole */
	ck_assert_int_eq(truncate(T.console, 0), 0);
	ck_assert_int_eq(put("vm.resume", NULL), 204);
	ck_assert_msg(heartbeat_reaches(saved + 3, 10000), "no heartbeat past %ld after restore",
		      saved + 3);
	{
		char *c = testutil_slurp(T.console);

		ck_assert_msg(has_heartbeat(c, saved + 2),
			      "restored guest did not go on after %ld: %s", saved, c);
		ck_assert_msg(!has_heartbeat(c, 0) && !has_heartbeat(c, 1),
			      "restored guest counted from 0");
		free(c);
	}
	ck_assert_int_eq(put("vm.pause", NULL), 204);
	ck_assert_int_eq(put("vm.resume", NULL), 204);
	ck_assert_int_eq(put("vm.shutdown", NULL), 204);
}
END_TEST

/* memory.bin is tied to its state.bin: one from another snapshot of the same VM (same size) is
 * refused, as is one without the trailer (a version 1 file) and one with its trailer cut; the
 * right pair still restores. */
START_TEST(test_snapshot_hostile_memory)
{
	char snap2[300], a[400], b[400];
	long saved;

	TESTUTIL_NEED_KVM();
	boot_and_save();
	ck_assert_int_eq(put("vm.resume", NULL), 204);
	ck_assert(heartbeat_reaches(last_heartbeat() + 2, 10000));
	ck_assert_int_eq(put("vm.pause", NULL), 204);
	saved = last_heartbeat();
	snprintf(snap2, sizeof(snap2), "%s/snap2", T.dir);
	ck_assert_int_eq(mkdir(snap2, 0700), 0);
	ck_assert_int_eq(put("vm.snapshot", url("destination_url", snap2, NULL)), 204);
	kill_lvmm();
	apitest_start(&T, NULL);
	snprintf(a, sizeof(a), "%s/memory.bin", snap);
	snprintf(b, sizeof(b), "%s/memory.bin", snap2);
	ck_assert_int_eq(testutil_system("cp --sparse=always %s %s", b, a), 0);
	expect_error("vm.restore", url("source_url", snap, NULL), 400,
		     "memory.bin belongs to another snapshot");
	/* the RAM alone, as version 1 wrote it */
	ck_assert_int_eq(truncate(a, 67108864), 0);
	expect_error("vm.restore", url("source_url", snap, NULL), 400,
		     "memory.bin: 67108864 bytes, the snapshot's RAM is 67108864 (and a 64-byte "
		     "trailer)");
	/* the right size, the trailer zeroed */
	ck_assert_int_eq(truncate(a, 67108864 + sizeof(struct snap_mem_trailer)), 0);
	expect_error("vm.restore", url("source_url", snap, NULL), 400, "no snapshot trailer");
	ck_assert_int_eq(curl("GET", "vm.info", NULL, NULL), 404);
	ck_assert_int_eq(put("vm.restore", url("source_url", snap2, ", \"resume\": true")), 204);
	ck_assert(heartbeat_reaches(saved + 2, 10000));
	ck_assert_int_eq(put("vm.shutdown", NULL), 204);
	testutil_system("rm -rf %s", snap2);
}
END_TEST

/* Sets the tsc section of the snapshot's state file to khz (its checksum made again): what a
 * snapshot saved on a host of another TSC rate looks like here. The rate it had. */
static uint32_t set_saved_tsc(uint32_t khz)
{
	char path[400], err[256];
	struct snap_reader r;
	struct snap_header h;
	struct snap_tsc t;
	const struct snap_ref *s;
	uint8_t *buf;
	size_t len;
	uint32_t was;

	snprintf(path, sizeof(path), "%s/state.bin", snap);
	buf = malloc(1 << 20);
	ck_assert_ptr_nonnull(buf);
	len = testutil_read_file(path, (char *)buf, 1 << 20);
	ck_assert_int_eq(snap_parse(buf, len, &r, err, sizeof(err)), 0);
	s = snap_find(&r, SNAP_VM_TSC, 0);
	ck_assert_ptr_nonnull(s);
	memcpy(&t, s->data, sizeof(t));
	was = t.khz;
	t.khz = khz;
	memcpy((uint8_t *)s->data, &t, sizeof(t));
	snap_reader_free(&r);
	memcpy(&h, buf, sizeof(h));
	h.payload_hash = snap_hash(buf + sizeof(h), len - sizeof(h));
	memcpy(buf, &h, sizeof(h));
	testutil_write_file(path, buf, len, 0600);
	free(buf);
	return was;
}

/* The guest's TSC rate: a snapshot of a faster host's guest is restored at its rate (KVM keeps
 * the guest's TSC up in software where it cannot scale), one of a slower host's is refused
 * naming both rates when KVM cannot set it (no TSC scaling, as on kvm_pvm), else restored. */
START_TEST(test_snapshot_tsc_rate)
{
	char *log;
	uint32_t khz;
	long saved;

	TESTUTIL_NEED_KVM();
	saved = boot_and_save();
	kill_lvmm();
	khz = set_saved_tsc(0);
	ck_assert_uint_gt(khz, 0); /* this host's KVM reports its rate */
	fprintf(stderr, "test_snapshot_tsc_rate: this host's guest TSC: %u kHz\n", khz);
	set_saved_tsc(khz + 100000);
	apitest_start(&T, NULL);
	ck_assert_int_eq(truncate(T.console, 0), 0);
	ck_assert_int_eq(put("vm.restore", url("source_url", snap, ", \"resume\": true")), 204);
	ck_assert(heartbeat_reaches(saved + 2, 10000));
	ck_assert_int_eq(put("vm.shutdown", NULL), 204);
	log = testutil_slurp(T.log);
	ck_assert_msg(log && strstr(log, "guest TSC set to the snapshot's"), "%s", log ? log : "");
	free(log);
	kill_lvmm();
	/* a slower host's snapshot */
	set_saved_tsc(khz - 100000);
	apitest_start(&T, NULL);
	if (put("vm.restore", url("source_url", snap, NULL)) == 204) {
		fprintf(stderr,
			"test_snapshot_tsc_rate: this host's KVM scales the TSC down too\n");
		ck_assert_int_eq(put("vm.shutdown", NULL), 204);
	} else {
		char want[128];

		snprintf(want, sizeof(want),
			 "the snapshot's guest TSC runs at %u kHz, this host's at %u kHz, and KVM "
			 "cannot set it",
			 khz - 100000, khz);
		expect_error("vm.restore", url("source_url", snap, NULL), 400, want);
		ck_assert_int_eq(curl("GET", "vm.info", NULL, NULL), 404);
	}
	/* a crafted rate far above this host's (KVM would catch a 4 THz guest clock up) */
	{
		char want[128];

		set_saved_tsc(0xffffffffu);
		snprintf(want, sizeof(want),
			 "the snapshot's guest TSC runs at %u kHz, this host's at %u kHz: more "
			 "than a factor of two apart",
			 0xffffffffu, khz);
		expect_error("vm.restore", url("source_url", snap, NULL), 400, want);
		ck_assert_int_eq(curl("GET", "vm.info", NULL, NULL), 404);
	}
	/* a snapshot whose host could not say: restored as it is */
	set_saved_tsc(0);
	ck_assert_int_eq(put("vm.restore", url("source_url", snap, ", \"resume\": true")), 204);
	ck_assert_int_eq(put("vm.shutdown", NULL), 204);
}
END_TEST

/* Two vCPUs: each one's state is saved and restored (the bench guest parks its AP). */
START_TEST(test_two_vcpus)
{
	char *c;
	long saved;

	TESTUTIL_NEED_KVM();
	ncpus = 2;
	saved = boot_and_save();
	kill_lvmm();
	apitest_start(&T, NULL);
	ck_assert_int_eq(put("vm.restore", url("source_url", snap, ", \"resume\": true")), 204);
	ck_assert_str_eq(apitest_vm_state(&T), "Running");
	ck_assert(heartbeat_reaches(saved + 3, 10000));
	c = testutil_slurp(T.console);
	ck_assert(has_heartbeat(c, saved + 1));
	free(c);
	ck_assert_int_eq(put("vm.shutdown", NULL), 204);
}
END_TEST

/* The other interrupt controllers lvmm can run with: a PIT beside the in-kernel irqchip
 * (KVM_GET/SET_PIT2) and the split irqchip (lvmm's IOAPIC); a restore in an lvmm set up the
 * other way is refused. */
static void irqchip_variant(const char *var, const char *val, const char *other, const char *needle)
{
	long saved;

	ck_assert_int_eq(setenv(var, val, 1), 0);
	saved = boot_and_save();
	kill_lvmm();
	ck_assert_int_eq(setenv(var, other, 1), 0);
	apitest_start(&T, NULL);
	unsetenv(var);
	expect_error("vm.restore", url("source_url", snap, NULL), 400, needle);
	ck_assert_int_eq(put("vmm.shutdown", NULL), 204);
	ck_assert_int_eq(apitest_wait(&T, 15), 0);
	ck_assert_int_eq(setenv(var, val, 1), 0);
	apitest_start(&T, NULL);
	unsetenv(var);
	ck_assert_int_eq(put("vm.restore", url("source_url", snap, ", \"resume\": true")), 204);
	ck_assert(heartbeat_reaches(saved + 3, 10000));
	ck_assert_int_eq(put("vm.shutdown", NULL), 204);
}

START_TEST(test_pit)
{
	TESTUTIL_NEED_KVM();
	irqchip_variant("LVMM_PIT", "on", "off", "(in-kernel IOAPIC, a PIT) differ");
}
END_TEST

START_TEST(test_split_irqchip)
{
	TESTUTIL_NEED_KVM();
	irqchip_variant("LVMM_IRQCHIP", "split", "kernel", "(user-space IOAPIC, no PIT) differ");
}
END_TEST

/* `lvmm run --restore source_url=...,resume=on` without an API socket runs the saved VM. */
START_TEST(test_run_restore_cli)
{
	char src[600], *out = NULL;
	struct testutil_run r;
	long saved;

	TESTUTIL_NEED_KVM();
	saved = boot_and_save();
	kill_lvmm();
	ck_assert_int_eq(truncate(T.console, 0), 0);
	snprintf(src, sizeof(src), "source_url=file://%s", snap);
	{
		char *const bad[] = {"run", "--restore", src, NULL};

		/* paused with nothing to resume it: refused */
		testutil_run_lvmm(&r, bad, NULL, NULL, 0, 10);
		ck_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 2);
		ck_assert_ptr_nonnull(strstr(r.err, "resume=on"));
	}
	snprintf(src, sizeof(src), "source_url=file://%s,resume=on", snap);
	{
		pid_t pid = fork();

		ck_assert_int_ge(pid, 0);
		if (!pid) {
			execl(testutil_lvmm(), "lvmm", "run", "--restore", src, (char *)NULL);
			_exit(127);
		}
		ck_assert_msg(heartbeat_reaches(saved + 2, 10000), "no heartbeat after --restore");
		kill(pid, SIGTERM);
		ck_assert_int_ge(testutil_wait_limit(pid, "lvmm --restore", 10), 0);
	}
	/* saved + 2, not + 1: a pause may split the next line, whose start went to the console
	 * truncated above */
	out = testutil_slurp(T.console);
	ck_assert_msg(has_heartbeat(out, saved + 2) && !has_heartbeat(out, 0),
		      "--restore did not go on after %ld: %s", saved, out);
	free(out);
}
END_TEST

static void corrupt_byte(const char *name, long off)
{
	char path[512];
	int fd;
	uint8_t b;

	snprintf(path, sizeof(path), "%s/%s", snap, name);
	fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, &b, 1, off), 1);
	b ^= 0x5a;
	ck_assert_int_eq(pwrite(fd, &b, 1, off), 1);
	close(fd);
}

START_TEST(test_restore_refusals)
{
	char path[512], other[300];

	TESTUTIL_NEED_KVM();
	boot_and_save();
	kill_lvmm();
	apitest_start(&T, NULL);
	expect_error("vm.restore", "{\"source_url\": \"http://x/y\"}", 400, "file:///DIR");
	expect_error("vm.restore", url("source_url", "/nonexistent/snap", NULL), 400,
		     "nonexistent");
	expect_error("vm.restore",
		     url("source_url", snap, ", \"memory_restore_mode\": \"UserFault\""), 400,
		     "Copy or OnDemand");
	/* a flipped byte in the state file */
	corrupt_byte("state.bin", 200);
	expect_error("vm.restore", url("source_url", snap, NULL), 400, "checksum");
	corrupt_byte("state.bin", 200);
	/* another format version */
	corrupt_byte("state.bin", 8);
	expect_error("vm.restore", url("source_url", snap, NULL), 400, "format version");
	corrupt_byte("state.bin", 8);
	/* a config that is not the one saved with the state */
	snprintf(path, sizeof(path), "%s/config.json", snap);
	{
		char *c = testutil_slurp(path);
		char *m = strstr(c, "67108864");

		ck_assert_ptr_nonnull(m);
		memcpy(m, "33554432", 8);
		testutil_write_file(path, c, strlen(c), 0600);
		expect_error("vm.restore", url("source_url", snap, NULL), 400,
			     "does not belong to this state file");
		memcpy(m, "67108864", 8);
		testutil_write_file(path, c, strlen(c), 0600);
		free(c);
	}
	/* a memory file of another size */
	snprintf(path, sizeof(path), "%s/memory.bin", snap);
	ck_assert_int_eq(truncate(path, 4096), 0);
	expect_error("vm.restore", url("source_url", snap, NULL), 400, "memory.bin");
	/* nothing was made of all that */
	ck_assert_int_eq(curl("GET", "vm.info", NULL, NULL), 404);
	/* an empty directory */
	snprintf(other, sizeof(other), "%s/empty", T.dir);
	ck_assert_int_eq(mkdir(other, 0700), 0);
	expect_error("vm.restore", url("source_url", other, NULL), 400, "config.json");
	rmdir(other);
}
END_TEST

/* A device whose model cannot be saved refuses the snapshot by name and reason, and nothing is
 * written: a virtio-fs share (its FUSE state is virtiofsd's). */
START_TEST(test_snapshot_refuses_device)
{
	char extra[700], path[512], sock[400];
	int lfd;

	TESTUTIL_NEED_KVM();
	snprintf(sock, sizeof(sock), "%s/fsd.sock", T.dir);
	lfd = apitest_fake_vhost_fs(sock);
	snprintf(extra, sizeof(extra), ", \"fs\": [{\"tag\": \"share\", \"socket\": \"%s\"}]",
		 sock);
	apitest_start(&T, NULL);
	ck_assert_int_eq(put("vm.create", spin_config(extra)), 204);
	ck_assert_int_eq(put("vm.boot", NULL), 204);
	ck_assert_int_eq(put("vm.pause", NULL), 204);
	expect_error("vm.snapshot", url("destination_url", snap, NULL), 400,
		     "device fs0 (virtio-fs) cannot be saved: the guest's FUSE state");
	snprintf(path, sizeof(path), "%s/state.bin", snap);
	ck_assert_int_ne(access(path, F_OK), 0);
	snprintf(path, sizeof(path), "%s/memory.bin", snap);
	ck_assert_int_ne(access(path, F_OK), 0);
	expect_error("vm.snapshot", url("destination_url", "/nonexistent/dir", NULL), 400,
		     "nonexistent");
	ck_assert_int_eq(put("vm.resume", NULL), 204);
	ck_assert_int_eq(put("vm.shutdown", NULL), 204);
	close(lfd);
}
END_TEST

/* virtio-vsock and a guest without a vsock driver: saved, SIGKILL, restored; the restored lvmm
 * listens at PATH again (the dead one's stale socket replaced) and the guest goes on. */
START_TEST(test_snapshot_vsock)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char extra[700], line[64] = "";
	struct timeval tv = {.tv_sec = 5};
	long saved;
	int fd;

	TESTUTIL_NEED_KVM();
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/v.sock", T.dir);
	snprintf(extra, sizeof(extra), ", \"vsock\": {\"cid\": 3, \"socket\": \"%s\"}",
		 sa.sun_path);
	apitest_start(&T, NULL);
	ck_assert_int_eq(put("vm.create", spin_config(extra)), 204);
	ck_assert_int_eq(put("vm.boot", NULL), 204);
	ck_assert(heartbeat_reaches(2, 15000));
	ck_assert_int_eq(put("vm.pause", NULL), 204);
	saved = last_heartbeat();
	ck_assert_int_eq(put("vm.snapshot", url("destination_url", snap, NULL)), 204);
	kill_lvmm();
	apitest_start(&T, NULL);
	ck_assert_int_eq(truncate(T.console, 0), 0);
	ck_assert_int_eq(put("vm.restore", url("source_url", snap, ", \"resume\": true")), 204);
	ck_assert(heartbeat_reaches(saved + 2, 10000));
	/* PATH is the restored device's: a CONNECT is taken and, with no driver, refused */
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(write(fd, "CONNECT 80\n", 11), 11);
	ck_assert_int_le(read(fd, line, sizeof(line) - 1), 0);
	close(fd);
	ck_assert_int_eq(put("vm.shutdown", NULL), 204);
}
END_TEST

/* Whether process pid maps a file whose path ends in name (/proc/PID/maps). */
static bool maps_file(pid_t pid, const char *name)
{
	char path[64], *m, *p;
	bool yes = false;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	m = testutil_slurp(path);
	for (p = m; p && !yes && (p = strstr(p, name)); p++)
		yes = p[strlen(name)] == '\n';
	free(m);
	return yes;
}

/* The RAM comes back mapped from memory.bin (copy-on-write) by default: the restored guest counts
 * on; saving it again into the same directory replaces memory.bin under its own mapping (a new
 * file renamed over) and it counts on; a reboot gives it the zeroed memfd again. Copy and
 * OnDemand asked for explicitly; an unknown mode refused. */
START_TEST(test_snapshot_mapped)
{
	char mem[400];
	long saved, at;

	TESTUTIL_NEED_KVM();
	saved = boot_and_save();
	kill_lvmm();
	apitest_start(&T, NULL);
	expect_error("vm.restore", url("source_url", snap, ", \"memory_restore_mode\": \"Lazy\""),
		     400, "Copy or OnDemand");
	ck_assert_int_eq(put("vm.restore", url("source_url", snap, ", \"resume\": true")), 204);
	ck_assert(heartbeat_reaches(saved + 2, 10000));
	ck_assert_msg(maps_file(T.pid, "/memory.bin"), "the RAM is not mapped from memory.bin");
	/* saved again over the file it runs from, twice */
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(put("vm.pause", NULL), 204);
		at = last_heartbeat();
		ck_assert_int_eq(put("vm.snapshot", url("destination_url", snap, NULL)), 204);
		ck_assert_int_eq(put("vm.resume", NULL), 204);
		ck_assert_msg(heartbeat_reaches(at + 2, 10000), "no count after saving in place");
	}
	ck_assert_int_eq(put("vm.reboot", NULL), 204);
	ck_assert_msg(!maps_file(T.pid, "/memory.bin"), "the rebooted VM still maps memory.bin");
	ck_assert_int_eq(put("vm.shutdown", NULL), 204);
	kill_lvmm();
	/* the last save restores, copied and mapped on request */
	apitest_start(&T, NULL);
	ck_assert_int_eq(
	    put("vm.restore",
		url("source_url", snap, ", \"resume\": true, \"memory_restore_mode\": \"Copy\"")),
	    204);
	ck_assert(heartbeat_reaches(at + 2, 10000));
	ck_assert(!maps_file(T.pid, "/memory.bin"));
	kill_lvmm();
	apitest_start(&T, NULL);
	ck_assert_int_eq(put("vm.restore", url("source_url", snap,
					       ", \"resume\": true, \"prefault\": true, "
					       "\"memory_restore_mode\": \"OnDemand\"")),
			 204);
	ck_assert(heartbeat_reaches(at + 2, 10000));
	ck_assert(maps_file(T.pid, "/memory.bin"));
	kill_lvmm();
	/* a file others may write is copied, never mapped; OnDemand refuses it */
	snprintf(mem, sizeof(mem), "%s/memory.bin", snap);
	ck_assert_int_eq(chmod(mem, 0660), 0);
	apitest_start(&T, NULL);
	expect_error("vm.restore",
		     url("source_url", snap, ", \"memory_restore_mode\": \"OnDemand\""), 400,
		     "writable by it alone");
	ck_assert_int_eq(put("vm.restore", url("source_url", snap, ", \"resume\": true")), 204);
	ck_assert(heartbeat_reaches(at + 2, 10000));
	ck_assert_msg(!maps_file(T.pid, "/memory.bin"), "a group-writable memory.bin was mapped");
	ck_assert_int_eq(put("vm.shutdown", NULL), 204);
}
END_TEST

/* `lvmm run --net tap=NAME` opens its tap before the jail and keeps the fds: the VM is saved
 * (the config names the tap, which a restore opens again by name) and restored, counting on; a
 * tap handed over by a client without a name stays refused. In a network namespace of the
 * case's own. */
START_TEST(test_snapshot_cli_tap)
{
	char serial[600],
	    *cmd[] = {"--kernel", guest,  "--cmdline", "bench.mode=spin", "--memory", "64M",
		      "--serial", serial, "--net",     "tap=lvsnr0",	  NULL};
	long saved;

	TESTUTIL_NEED_KVM();
	ck_assert_msg(unshare(CLONE_NEWNET) == 0, "unshare(CLONE_NEWNET): %s (needs root)",
		      strerror(errno));
	snprintf(serial, sizeof(serial), "file=%s", T.console);
	apitest_start(&T, cmd);
	ck_assert_msg(heartbeat_reaches(3, 15000), "the guest does not count: %s",
		      testutil_slurp(T.log));
	ck_assert_int_eq(put("vm.pause", NULL), 204);
	saved = last_heartbeat();
	ck_assert_int_eq(put("vm.snapshot", url("destination_url", snap, NULL)), 204);
	kill_lvmm();
	apitest_start(&T, NULL);
	ck_assert_int_eq(put("vm.restore", url("source_url", snap, ", \"resume\": true")), 204);
	ck_assert(heartbeat_reaches(saved + 2, 10000));
	ck_assert_int_eq(put("vm.shutdown", NULL), 204);
}
END_TEST

/* With --allowed-dir, a client's tricks on the snapshot directory: memory.bin a hard link to
 * another file (refused, that file untouched), a FIFO (refused at once, the API thread never
 * blocked), the directory a symlink (refused); and a save that fails over an older snapshot
 * leaves no state.bin beside a half-written memory.bin. */
START_TEST(test_snapshot_hostile_files)
{
	char *extra[] = {"--allowed-dir", T.dir, NULL};
	char path[400], victim[400], real[400], lnk[400], state[400];
	char *data;

	TESTUTIL_NEED_KVM();
	snprintf(path, sizeof(path), "%s/guest.elf", T.dir);
	ck_assert_int_eq(testutil_system("cp %s %s", guest, path), 0);
	snprintf(guest, sizeof(guest), "%s", path);
	apitest_start(&T, extra);
	ck_assert_int_eq(put("vm.create", spin_config(NULL)), 204);
	ck_assert_int_eq(put("vm.boot", NULL), 204);
	ck_assert_int_eq(put("vm.pause", NULL), 204);
	snprintf(victim, sizeof(victim), "%s/victim", T.dir);
	testutil_write_file(victim, "precious", 8, 0600);
	snprintf(path, sizeof(path), "%s/memory.bin", snap);
	ck_assert_int_eq(link(victim, path), 0);
	expect_error("vm.snapshot", url("destination_url", snap, NULL), 400, "one link");
	data = testutil_slurp(victim);
	ck_assert_str_eq(data, "precious");
	free(data);
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(mkfifo(path, 0600), 0);
	expect_error("vm.snapshot", url("destination_url", snap, NULL), 400, "memory.bin");
	ck_assert_int_eq(unlink(path), 0);
	snprintf(real, sizeof(real), "%s/real", T.dir);
	snprintf(lnk, sizeof(lnk), "%s/lnk", T.dir);
	ck_assert_int_eq(mkdir(real, 0700), 0);
	ck_assert_int_eq(symlink(real, lnk), 0);
	expect_error("vm.snapshot", url("destination_url", lnk, NULL), 400, "symbolic link");
	/* a good snapshot, then one that fails on memory.bin: the old state.bin is gone */
	ck_assert_int_eq(put("vm.snapshot", url("destination_url", snap, NULL)), 204);
	snprintf(state, sizeof(state), "%s/state.bin", snap);
	ck_assert_int_eq(access(state, F_OK), 0);
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(link(victim, path), 0);
	expect_error("vm.snapshot", url("destination_url", snap, NULL), 400, "one link");
	ck_assert_int_ne(access(state, F_OK), 0);
	ck_assert_int_eq(put("vm.resume", NULL), 204);
	ck_assert_int_eq(put("vm.shutdown", NULL), 204);
}
END_TEST

/* The guest's bench.verify pattern (tools/bench-guest/workload.c). */
static uint64_t pattern(uint64_t seed, uint64_t off)
{
	uint64_t x = (seed + 1) * 0x9e3779b97f4a7c15ULL ^ off;

	x ^= x >> 31;
	x *= 0xbf58476d1ce4e5b9ULL;
	return x ^ (x >> 29);
}

#define NVME_SPAN (1u << 20)
#define NVME_SEED 31
#define NVME_IOS  60000

/* The bench guest drives a vNVMe on a file (4 queue pairs, 4 deep, random reads and writes of
 * a pattern, every read checked); it is paused mid-run, saved, killed, restored in a fresh lvmm
 * and finishes its run: every I/O done once, no error, every read verified, and the image
 * holds the pattern. */
START_TEST(test_snapshot_vnvme)
{
	static uint64_t buf[NVME_SPAN / 8];
	char disk[512], extra[900], cmdline[300], *c;
	const char *res;
	long long before;
	unsigned i;
	int fd;

	TESTUTIL_NEED_KVM();
	snprintf(disk, sizeof(disk), "%s/nvme.img", T.dir);
	for (i = 0; i < NVME_SPAN / 8; i++)
		buf[i] = pattern(NVME_SEED, i * 8ULL);
	fd = open(disk, O_CREAT | O_WRONLY | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, buf, NVME_SPAN, 0), NVME_SPAN);
	ck_assert_int_eq(ftruncate(fd, 16 << 20), 0);
	close(fd);
	snprintf(cmdline, sizeof(cmdline),
		 "bench.mode=work bench.qp=4 bench.qd=4 bench.verify=on bench.span_mb=1 "
		 "bench.seed=%u bench.rw=randrw bench.ios=%u",
		 NVME_SEED, NVME_IOS);
	snprintf(extra, sizeof(extra), ", \"vnvme\": [{\"path\": \"%s\", \"num_queues\": 4}]",
		 disk);
	apitest_start(&T, NULL);
	ck_assert_int_eq(put("vm.create", bench_config(cmdline, extra)), 204);
	ck_assert_int_eq(put("vm.boot", NULL), 204);
	ck_assert_msg(console_has("bench: work start", 20000), "the run does not start");
	testutil_sleep_ms(300);
	ck_assert_int_eq(put("vm.pause", NULL), 204);
	c = testutil_slurp(T.console);
	ck_assert_msg(!strstr(c, "work result"), "the run ended before the pause: raise ios");
	free(c);
	{
		json_t *j = NULL, *n;
		char path[600];
		struct stat sb;
		double t0;

		ck_assert_int_eq(curl("GET", "vm.counters", NULL, &j), 200);
		n = json_object_get(j, "nvme0");
		before = json_integer_value(json_object_get(n, "read_ops")) +
			 json_integer_value(json_object_get(n, "write_ops"));
		json_decref(j);
		t0 = testutil_now_s();
		ck_assert_int_eq(put("vm.snapshot", url("destination_url", snap, NULL)), 204);
		t0 = testutil_now_s() - t0;
		snprintf(path, sizeof(path), "%s/state.bin", snap);
		ck_assert_int_eq(stat(path, &sb), 0);
		fprintf(
		    stderr,
		    "test_snapshot_vnvme: paused after %lld I/Os; vm.snapshot %.3f s, state.bin "
		    "%lld bytes\n",
		    before, t0, (long long)sb.st_size);
	}
	kill_lvmm();
	/* the image is as the pause left it: the restored guest goes on with it */
	ck_assert_int_eq(truncate(T.console, 0), 0);
	apitest_start(&T, NULL);
	ck_assert_int_eq(put("vm.restore", url("source_url", snap, ", \"resume\": true")), 204);
	ck_assert_msg(console_has("bench: done", 120000), "the restored run does not end");
	ck_assert_msg(before > 0 && before < NVME_IOS, "%lld I/Os before the pause", before);
	c = testutil_slurp(T.console);
	res = strstr(c, "bench: work result");
	/* 4 queues run up to 3 I/Os past the count between them */
	ck_assert_msg(res && strstr(res, " ios=") &&
			  strtoull(strstr(res, " ios=") + 5, NULL, 10) >= NVME_IOS &&
			  strstr(res, " errors=0 ") && !strstr(res, " verified=0") &&
			  !strstr(c, "verify FAIL") && !strstr(c, "bench: work start"),
		      "%s", c);
	free(c);
	/* the guest powers off once done: every write it made is in the image */
	fd = open(disk, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, buf, NVME_SPAN, 0), NVME_SPAN);
	close(fd);
	for (i = 0; i < NVME_SPAN / 8; i++)
		ck_assert_msg(buf[i] == pattern(NVME_SEED, i * 8ULL), "offset %u: %llx", i * 8,
			      (unsigned long long)buf[i]);
}
END_TEST

/* state.bin with one field of a vNVMe queue-pair record (record rec of nrec at the end of
 * device dev's section, field at off inside it) set to v, the checksum made right again: what a
 * crafted file, not a corrupt one, looks like. The old bytes go to *saved_file. */
static void edit_qp_record(const char *dev, unsigned nrec, unsigned rec, unsigned off, uint32_t v,
			   char **saved_file, size_t *saved_len)
{
	char path[512];
	const size_t hlen = sizeof(struct snap_header);
	size_t len = 0, pos = hlen;
	struct snap_header h;
	uint8_t *b;
	bool done = false;

	snprintf(path, sizeof(path), "%s/state.bin", snap);
	{
		struct stat sb;
		int fd = open(path, O_RDONLY);

		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(fstat(fd, &sb), 0);
		len = (size_t)sb.st_size;
		b = malloc(len);
		ck_assert_msg(b && len > hlen && read(fd, b, len) == (ssize_t)len, "state.bin");
		close(fd);
	}
	*saved_file = malloc(len);
	memcpy(*saved_file, b, len);
	*saved_len = len;
	while (pos + 16 <= len && !done) {
		uint32_t type;
		uint64_t slen;

		memcpy(&type, b + pos, 4);
		memcpy(&slen, b + pos + 8, 8);
		ck_assert(slen <= len - pos - 16);
		if (type == 0x40 && !strcmp((char *)b + pos + 16, dev)) {
			size_t at = pos + 16 + slen - (size_t)(nrec - rec) * 64 + off;

			memcpy(b + at, &v, 4);
			done = true;
		}
		pos += 16 + ((slen + 7) & ~7ULL);
	}
	ck_assert_msg(done, "no section of device %s", dev);
	memcpy(&h, b, hlen);
	h.payload_hash = snap_hash(b + hlen, len - hlen);
	memcpy(b, &h, hlen);
	testutil_write_file(path, b, len, 0600);
	free(b);
}

static void put_back_state(char *saved, size_t len)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/state.bin", snap);
	testutil_write_file(path, saved, len, 0600);
	free(saved);
}

/* The same bench run on a softssd volume, its queue pairs served by the SSD (mode isolated
 * or passthrough): the pause quiesces them, the snapshot saves their state, the lvmm is
 * killed, a fresh one restores the VM on the same named volume and the run finishes with every
 * I/O done once and every read verified. A second lvmm restoring the same snapshot meanwhile is
 * refused: the first restore holds the volume. */
static void snapshot_vnvme_ssd(const char *mode, const char *doorbell, const char *dbbuf)
{
	static uint64_t buf[NVME_SPAN / 8];
	char file[512], extra[900], cmdline[300], logp[512], *c;
	const char *res;
	const char *opts[] = {"--backing", NULL, "--size", "64M", NULL};
	char backing[512];
	struct apitest T2;
	long long before;
	pid_t ssd = 0;
	unsigned i;
	int fd;

	TESTUTIL_NEED_KVM();
	setenv("LVMM_RUN_DIR", T.dir, 1);
	snprintf(backing, sizeof(backing), "%s/ssd.img", T.dir);
	snprintf(logp, sizeof(logp), "%s/ssd.log", T.dir);
	opts[1] = backing;
	ssd = testutil_ssd_start("snapssd", logp, opts);
	/* the volume starts with the pattern the guest verifies */
	snprintf(file, sizeof(file), "%s/pattern.img", T.dir);
	for (i = 0; i < NVME_SPAN / 8; i++)
		buf[i] = pattern(NVME_SEED, i * 8ULL);
	fd = open(file, O_CREAT | O_WRONLY | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, buf, NVME_SPAN, 0), NVME_SPAN);
	close(fd);
	ck_assert_int_eq(testutil_system("%s ssd vol create snapssd vm1 16M >/dev/null && "
					 "%s ssd vol import snapssd vm1 %s >/dev/null",
					 testutil_lvmm(), testutil_lvmm(), file),
			 0);
	snprintf(cmdline, sizeof(cmdline),
		 "bench.mode=work bench.qp=4 bench.qd=4 bench.verify=on bench.span_mb=1 "
		 "bench.seed=%u bench.rw=randrw bench.ios=%u%s",
		 NVME_SEED, NVME_IOS, dbbuf);
	snprintf(extra, sizeof(extra),
		 ", \"vnvme\": [{\"ssd\": \"snapssd\", \"vol\": \"vm1\", \"mode\": \"%s\", "
		 "\"doorbell\": \"%s\", \"num_queues\": 4}]",
		 mode, doorbell);
	apitest_start(&T, NULL);
	ck_assert_int_eq(put("vm.create", bench_config(cmdline, extra)), 204);
	ck_assert_int_eq(put("vm.boot", NULL), 204);
	ck_assert_msg(console_has("bench: work start", 20000), "the run does not start");
	testutil_sleep_ms(300);
	ck_assert_int_eq(put("vm.pause", NULL), 204);
	c = testutil_slurp(T.console);
	ck_assert_msg(!strstr(c, "work result"), "the run ended before the pause: raise ios");
	free(c);
	{
		json_t *j = NULL, *n;
		char path[600];
		struct stat sb;
		double t0;

		ck_assert_int_eq(curl("GET", "vm.counters", NULL, &j), 200);
		n = json_object_get(json_object_get(j, "nvme0"), "queues");
		before = 0;
		for (i = 0; i < json_array_size(n); i++) /* the backend's count per queue pair */
			before += json_integer_value(json_object_get(json_array_get(n, i), "cmds"));
		/* auto with the buffer configured late: every pair moved to eventfd doorbells */
		if (!strcmp(doorbell, "auto"))
			ck_assert_int_eq(json_integer_value(json_object_get(
					     json_object_get(j, "nvme0"), "db_switched")),
					 4);
		json_decref(j);
		t0 = testutil_now_s();
		ck_assert_int_eq(put("vm.snapshot", url("destination_url", snap, NULL)), 204);
		t0 = testutil_now_s() - t0;
		snprintf(path, sizeof(path), "%s/state.bin", snap);
		ck_assert_int_eq(stat(path, &sb), 0);
		c = testutil_slurp(T.log);
		res = c ? strstr(c, "queue pairs of volume vm1 saved") : NULL;
		fprintf(stderr,
			"snapshot_vnvme_ssd %s/%s: paused after %lld I/Os; vm.snapshot %.3f s, "
			"state.bin %lld bytes\n",
			mode, doorbell, before, t0, (long long)sb.st_size);
		if (res) {
			const char *e = strchr(res, '\n');

			fprintf(stderr, "  lvmm: %.*s\n", e ? (int)(e - res) : 80, res);
		}
		ck_assert_msg(res, "%s", c);
		free(c);
	}
	kill_lvmm();
	ck_assert_int_eq(truncate(T.console, 0), 0);
	apitest_start(&T, NULL);
	/* crafted records (right checksum): a phase of 2, an SQ head past the queue, a record
	 * for an SQ the controller does not have; each refused, nothing left behind */
	{
		static const struct {
			unsigned rec, off;
			uint32_t v;
			const char *want;
		} bad[] = {
		    {0, 28, 2, "bound queue pair 1: its saved state was refused"},
		    {1, 16, 70000, "bound queue pair 2: its saved state was refused"},
		    {2, 0, 9, "queue-pair record 2: SQ 9"},
		};
		for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			char *keep = NULL;
			size_t klen = 0;

			edit_qp_record("nvme0", 4, bad[i].rec, bad[i].off, bad[i].v, &keep, &klen);
			expect_error("vm.restore", url("source_url", snap, NULL), 400, bad[i].want);
			put_back_state(keep, klen);
		}
	}
	/* the SSD backend maps the RAM memfd: no mapped restore */
	expect_error("vm.restore",
		     url("source_url", snap, ", \"memory_restore_mode\": \"OnDemand\""), 400,
		     "needs it Copy");
	ck_assert_int_eq(put("vm.restore", url("source_url", snap, NULL)), 204);
	/* a second restore of the same snapshot: the first holds the volume */
	apitest_init(&T2, "/tmp/lvmm-itest-snap2-");
	apitest_start(&T2, NULL);
	apitest_expect_error(&T2, "vm.restore", url("source_url", snap, NULL), 409,
			     "volume vm1 is in use by 1 session");
	apitest_fini(&T2);
	ck_assert_int_eq(put("vm.resume", NULL), 204);
	ck_assert_msg(console_has("bench: done", 120000), "the restored run does not end");
	ck_assert_msg(before > 0 && before < NVME_IOS, "%lld I/Os before the pause", before);
	c = testutil_slurp(T.console);
	res = strstr(c, "bench: work result");
	ck_assert_msg(res && strstr(res, " ios=") &&
			  strtoull(strstr(res, " ios=") + 5, NULL, 10) >= NVME_IOS &&
			  strstr(res, " errors=0 ") && !strstr(res, " verified=0") &&
			  !strstr(c, "verify FAIL") && !strstr(c, "bench: work start"),
		      "%s", c);
	free(c);
	kill_lvmm();
	/* every write the guest made is on the volume (once the daemon saw the session go) */
	for (i = 0; i < 100 && testutil_system("%s ssd vol export snapssd vm1 %s >/dev/null 2>&1",
					       testutil_lvmm(), file);
	     i++)
		testutil_sleep_ms(50);
	ck_assert_uint_lt(i, 100);
	fd = open(file, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, buf, NVME_SPAN, 0), NVME_SPAN);
	close(fd);
	for (i = 0; i < NVME_SPAN / 8; i++)
		ck_assert_msg(buf[i] == pattern(NVME_SEED, i * 8ULL), "offset %u: %llx", i * 8,
			      (unsigned long long)buf[i]);
	ck_assert_int_eq(testutil_ssd_stop(&ssd, SIGTERM), 0);
}

START_TEST(test_snapshot_vnvme_isolated)
{
	snapshot_vnvme_ssd("isolated", "poll", "");
}
END_TEST

START_TEST(test_snapshot_vnvme_passthrough)
{
	snapshot_vnvme_ssd("passthrough", "eventfd", " bench.dbbuf=on");
}
END_TEST

/* doorbell=auto, Doorbell Buffer Config after the queues (Linux's order): the pairs moved from
 * pages to eventfd doorbells are saved and come back on eventfd doorbells. */
START_TEST(test_snapshot_vnvme_auto)
{
	snapshot_vnvme_ssd("isolated", "auto", " bench.dbbuf=late");
}
END_TEST

/* A VM with a virtio-blk disk (and the rng) is saved; the restore checks the image it opens
 * against the saved disk: another size is refused by name. */
START_TEST(test_snapshot_blk)
{
	char disk[512], extra[700];
	long saved;

	TESTUTIL_NEED_KVM();
	snprintf(disk, sizeof(disk), "%s/disk.img", T.dir);
	ck_assert_int_eq(testutil_system("truncate -s 1M %s", disk), 0);
	snprintf(extra, sizeof(extra),
		 ", \"disks\": [{\"path\": \"%s\"}], \"rng\": {\"src\": \"/dev/urandom\"}", disk);
	apitest_start(&T, NULL);
	ck_assert_int_eq(put("vm.create", spin_config(extra)), 204);
	ck_assert_int_eq(put("vm.boot", NULL), 204);
	ck_assert(heartbeat_reaches(2, 15000));
	ck_assert_int_eq(put("vm.pause", NULL), 204);
	saved = last_heartbeat();
	ck_assert_int_eq(put("vm.snapshot", url("destination_url", snap, NULL)), 204);
	kill_lvmm();
	apitest_start(&T, NULL);
	ck_assert_int_eq(testutil_system("truncate -s 2M %s", disk), 0);
	expect_error("vm.restore", url("source_url", snap, NULL), 400,
		     "disk0: the image has 4096 sectors, the saved disk had 2048");
	ck_assert_int_eq(testutil_system("truncate -s 1M %s", disk), 0);
	ck_assert_int_eq(put("vm.restore", url("source_url", snap, ", \"resume\": true")), 204);
	ck_assert(heartbeat_reaches(saved + 2, 10000));
	ck_assert_int_eq(put("vm.shutdown", NULL), 204);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("snapshot");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_snapshot_restore_continues);
	tcase_add_test(tc, test_two_vcpus);
	tcase_add_test(tc, test_pit);
	tcase_add_test(tc, test_split_irqchip);
	tcase_add_test(tc, test_run_restore_cli);
	tcase_add_test(tc, test_restore_refusals);
	tcase_add_test(tc, test_snapshot_refuses_device);
	tcase_add_test(tc, test_snapshot_vsock);
	tcase_add_test(tc, test_snapshot_cli_tap);
	tcase_add_test(tc, test_snapshot_mapped);
	tcase_add_test(tc, test_snapshot_hostile_files);
	tcase_add_test(tc, test_snapshot_hostile_memory);
	tcase_add_test(tc, test_snapshot_tsc_rate);
	tcase_add_test(tc, test_snapshot_blk);
	tcase_add_test(tc, test_snapshot_vnvme);
	suite_add_tcase(s, tc);
	/* CK_RUN_CASE=ssd: a vNVMe whose queue pairs a softssd serves */
	tc = tcase_create("ssd");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 180);
	tcase_add_test(tc, test_snapshot_vnvme_isolated);
	tcase_add_test(tc, test_snapshot_vnvme_passthrough);
	tcase_add_test(tc, test_snapshot_vnvme_auto);
	suite_add_tcase(s, tc);
	return testutil_run_suite(s);
}
