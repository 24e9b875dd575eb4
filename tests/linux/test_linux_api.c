/* The REST API on the Linux guest kernel: an empty `lvmm run --api-socket` driven with real curl
 * through create -> boot -> info -> pause -> resume -> reboot -> counters -> shutdown, early in
 * boot. */
#include <check.h>
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

/* The guest kernel's first console line appears ~15-40 s after boot on a loaded kvm_pvm host
 * and its quiet phases last up to ~100 s; the test never waits for /init. */
#define FIRST_LINE_LIMIT_S 150
#define GROWTH_LIMIT_S	   150
#define PAUSE_WATCH_S	   4
#define TCASE_TIMEOUT_S	   600

static const char *lvmm;
static char kernel[4096], initramfs[4096];
static char dir[64], sock[128], console[128], logpath[128];
static pid_t vmm_pid;

static void ms_sleep(unsigned ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static const char *env_or(const char *name, const char *def)
{
	const char *v = getenv(name);

	return v && *v ? v : def;
}

/* One curl request; returns the HTTP status and leaves the parsed body (or NULL) in *body. */
static int curl(const char *method, const char *endpoint, const char *data, json_t **body)
{
	char url[128], out[65536], datafile[160];
	const char *argv[20];
	int a = 0, po[2], st;
	size_t n = 0;
	char *nl;
	pid_t pid;

	snprintf(url, sizeof(url), "http://localhost/api/v1/%s", endpoint);
	argv[a++] = "curl";
	argv[a++] = "-s";
	argv[a++] = "--max-time";
	argv[a++] = "60";
	argv[a++] = "--unix-socket";
	argv[a++] = sock;
	argv[a++] = "-X";
	argv[a++] = method;
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
	ck_assert_int_eq(pipe(po), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (!pid) {
		dup2(po[1], 1);
		close(po[0]);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(po[1]);
	for (;;) {
		ssize_t r = read(po[0], out + n, sizeof(out) - 1 - n);

		if (r <= 0)
			break;
		n += (size_t)r;
	}
	out[n] = 0;
	close(po[0]);
	waitpid(pid, &st, 0);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "curl %s %s failed", method, endpoint);
	nl = strrchr(out, '\n');
	ck_assert_ptr_nonnull(nl);
	st = atoi(nl + 1);
	*nl = 0;
	if (body) {
		*body = *out ? json_loads(out, 0, NULL) : NULL;
		ck_assert_msg(!*out || *body, "%s %s: answer is not JSON: %s", method, endpoint,
			      out);
	}
	return st;
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

static off_t console_size(void)
{
	struct stat st;

	return stat(console, &st) ? 0 : st.st_size;
}

/* How often the console shows what (bounded read of the first 4 MiB). */
static unsigned console_count(const char *what)
{
	static char buf[4 << 20];
	unsigned n = 0;
	ssize_t r;
	int fd = open(console, O_RDONLY);

	if (fd < 0)
		return 0;
	r = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[r > 0 ? r : 0] = 0;
	for (char *p = buf; (p = strstr(p, what)); p++)
		n++;
	return n;
}

/* Waits (bounded) until the console has more than size bytes. */
static bool console_grows_past(off_t size, unsigned limit_s)
{
	for (unsigned i = 0; i < limit_s * 10; i++) {
		if (console_size() > size)
			return true;
		ms_sleep(100);
	}
	return false;
}

static bool console_shows(const char *what, unsigned times, unsigned limit_s)
{
	for (unsigned i = 0; i < limit_s * 10; i++) {
		if (console_count(what) >= times)
			return true;
		ms_sleep(100);
	}
	return false;
}

static int wait_lvmm(unsigned limit_s)
{
	int st;

	for (unsigned i = 0; i < limit_s * 10; i++) {
		if (waitpid(vmm_pid, &st, WNOHANG) == vmm_pid) {
			vmm_pid = 0;
			return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
		}
		ms_sleep(100);
	}
	kill(vmm_pid, SIGKILL);
	waitpid(vmm_pid, &st, 0);
	vmm_pid = 0;
	return -1;
}

static void start_lvmm(void)
{
	int fd;

	vmm_pid = fork();
	ck_assert_int_ge(vmm_pid, 0);
	if (!vmm_pid) {
		fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		dup2(fd, 1);
		dup2(fd, 2);
		fd = open("/dev/null", O_RDONLY);
		dup2(fd, 0);
		execl(lvmm, lvmm, "run", "--api-socket", sock, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 400; i++) {
		struct stat st;

		if (!stat(sock, &st) && curl("GET", "vmm.ping", NULL, NULL) == 200)
			return;
		ms_sleep(25);
	}
	ck_abort_msg("lvmm did not open %s", sock);
}

static void setup(void)
{
	const char *build = env_or("BUILD", "build");
	char gdir[3900];

	lvmm = env_or("LVMM", "build/lvmm");
	/* LVMM_GUEST_DIR points local runs at an existing kernel build (it takes long to make). */
	snprintf(gdir, sizeof(gdir), "%s", env_or("LVMM_GUEST_DIR", ""));
	if (!*gdir)
		snprintf(gdir, sizeof(gdir), "%s/guest", build);
	snprintf(kernel, sizeof(kernel), "%s/vmlinux", gdir);
	snprintf(initramfs, sizeof(initramfs), "%s/initramfs.cpio", gdir);
	ck_assert_msg(access(lvmm, X_OK) == 0, "LVMM=%s is not executable", lvmm);
	ck_assert_msg(access(kernel, R_OK) == 0, "%s missing: run make guest", kernel);
	ck_assert_msg(access(initramfs, R_OK) == 0, "%s missing: run make guest", initramfs);
	strcpy(dir, "/tmp/lvmm-ltest-api-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(sock, sizeof(sock), "%s/api.sock", dir);
	snprintf(console, sizeof(console), "%s/console.log", dir);
	snprintf(logpath, sizeof(logpath), "%s/lvmm.log", dir);
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

START_TEST(test_linux_api_lifecycle)
{
	char cfg[10000];
	off_t paused, later;
	json_t *j;

	start_lvmm();
	snprintf(cfg, sizeof(cfg),
		 "{\"cpus\": {\"boot_vcpus\": 1}, \"memory\": {\"size\": 134217728},"
		 " \"payload\": {\"kernel\": \"%s\", \"initramfs\": \"%s\","
		 " \"cmdline\": \"console=ttyS0\"},"
		 " \"serial\": {\"mode\": \"File\", \"file\": \"%s\"}}",
		 kernel, initramfs, console);
	ck_assert_int_eq(put("vm.create", cfg), 204);
	ck_assert_str_eq(vm_state(), "Created");
	ck_assert_int_eq(put("vm.boot", NULL), 204);

	ck_assert_int_eq(curl("GET", "vm.info", NULL, &j), 200);
	ck_assert_str_eq(json_string_value(json_object_get(j, "state")), "Running");
	ck_assert_int_eq(json_integer_value(json_object_get(j, "memory_actual_size")), 134217728);
	ck_assert_str_eq(json_string_value(json_object_get(
			     json_object_get(json_object_get(j, "config"), "payload"), "kernel")),
			 kernel);
	json_decref(j);

	ck_assert_msg(console_shows("Linux version", 1, FIRST_LINE_LIMIT_S),
		      "no kernel banner on the console");
	/* Pause right after a burst of output, while the kernel is printing. */
	later = console_size();
	ck_assert_msg(console_grows_past(later, GROWTH_LIMIT_S), "the console stopped growing");

	ck_assert_int_eq(put("vm.pause", NULL), 204);
	ck_assert_str_eq(vm_state(), "Paused");
	paused = console_size();
	ms_sleep(PAUSE_WATCH_S * 1000);
	ck_assert_msg(console_size() == paused, "the console grew while paused (%lld -> %lld)",
		      (long long)paused, (long long)console_size());

	ck_assert_int_eq(put("vm.resume", NULL), 204);
	ck_assert_str_eq(vm_state(), "Running");
	ck_assert_msg(console_grows_past(paused, GROWTH_LIMIT_S), "no console output after resume");

	/* A reset starts the kernel again on the same console. */
	ck_assert_int_eq(put("vm.reboot", NULL), 204);
	ck_assert_str_eq(vm_state(), "Running");
	ck_assert_msg(console_shows("Linux version", 2, FIRST_LINE_LIMIT_S),
		      "no second kernel banner after vm.reboot");

	ck_assert_int_eq(curl("GET", "vm.counters", NULL, &j), 200);
	ck_assert(json_is_object(j));
	json_decref(j);

	ck_assert_int_eq(put("vm.shutdown", NULL), 204);
	ck_assert_str_eq(vm_state(), "Shutdown");
	later = console_size();
	ms_sleep(1000);
	ck_assert_int_eq(console_size(), later);

	ck_assert_int_eq(put("vmm.shutdown", NULL), 204);
	ck_assert_int_eq(wait_lvmm(30), 0);
	ck_assert_int_eq(access(sock, F_OK), -1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("linux_api");
	TCase *tc = tcase_create("curl");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, TCASE_TIMEOUT_S);
	tcase_add_test(tc, test_linux_api_lifecycle);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
