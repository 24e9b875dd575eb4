/* Helpers for tests that drive a real `lvmm run --api-socket` with curl: process start and
 * bounded wait, curl requests, and the temp directory holding socket, console and log. */
#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
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
#include "testutil.h"

int apitest_run_capture(char *const argv[], char *out, size_t outlen, char *err, size_t errlen)
{
	int po[2], pe[2], st;
	size_t n = 0, m = 0;
	pid_t pid;

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
	/* answers are small: read stdout fully (dropping what does not fit), then stderr */
	for (;;) {
		char junk[256];
		ssize_t r = n < outlen - 1 ? read(po[0], out + n, outlen - 1 - n)
					   : read(po[0], junk, sizeof(junk));

		if (r <= 0)
			break;
		if (n < outlen - 1)
			n += (size_t)r;
	}
	out[n] = 0;
	for (;;) {
		char junk[256];
		ssize_t r = err && m < errlen - 1 ? read(pe[0], err + m, errlen - 1 - m)
						  : read(pe[0], junk, sizeof(junk));

		if (r <= 0)
			break;
		if (err && m < errlen - 1)
			m += (size_t)r;
	}
	if (err)
		err[m] = 0;
	close(po[0]);
	close(pe[0]);
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

void apitest_init(struct apitest *t, const char *prefix)
{
	memset(t, 0, sizeof(*t));
	t->early_status = -1;
	t->curl_max_s = 30;
	t->lvmm = testutil_lvmm();
	ck_assert_msg(access(t->lvmm, X_OK) == 0, "no lvmm at %s (set LVMM)", t->lvmm);
	testutil_mkdtemp(t->dir, sizeof(t->dir), prefix);
	snprintf(t->sock, sizeof(t->sock), "%s/api.sock", t->dir);
	snprintf(t->console, sizeof(t->console), "%s/console.log", t->dir);
	snprintf(t->log, sizeof(t->log), "%s/lvmm.log", t->dir);
}

void apitest_fini(struct apitest *t)
{
	if (t->pid > 0) {
		kill(t->pid, SIGKILL);
		waitpid(t->pid, NULL, 0);
		t->pid = 0;
	}
	if (t->dir[0])
		testutil_rmtree(t->dir);
}

void apitest_start(struct apitest *t, char *const extra[])
{
	char *argv[32];
	int a = 0, fd;

	argv[a++] = (char *)t->lvmm;
	argv[a++] = "run";
	argv[a++] = "--api-socket";
	argv[a++] = t->sock;
	for (int i = 0; extra && extra[i] && a < 31; i++)
		argv[a++] = extra[i];
	argv[a] = NULL;
	t->early_status = -1;
	t->pid = fork();
	ck_assert_int_ge(t->pid, 0);
	if (!t->pid) {
		fd = open(t->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		dup2(fd, 1);
		dup2(fd, 2);
		fd = open("/dev/null", O_RDONLY);
		dup2(fd, 0);
		execv(t->lvmm, argv);
		_exit(127);
	}
	for (int i = 0; i < 400; i++) {
		struct stat st;
		int status;

		/* lvmm may be gone already (a guest that triple-faults at once): keep its status */
		if (waitpid(t->pid, &status, WNOHANG) == t->pid) {
			t->early_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
			t->pid = 0;
			return;
		}
		/* the socket file exists between bind() and listen(): probe without asserting */
		if (!stat(t->sock, &st) && apitest_ping(t))
			return;
		testutil_sleep_ms(25);
	}
	ck_abort_msg("lvmm did not open %s", t->sock);
}

int apitest_wait(struct apitest *t, unsigned limit_s)
{
	int st;

	if (!t->pid) {
		st = t->early_status;
		t->early_status = -1;
		return st;
	}
	for (unsigned i = 0; i < limit_s * 40; i++) {
		if (waitpid(t->pid, &st, WNOHANG) == t->pid) {
			t->pid = 0;
			return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
		}
		testutil_sleep_ms(25);
	}
	kill(t->pid, SIGKILL);
	waitpid(t->pid, &st, 0);
	t->pid = 0;
	return -1;
}

int apitest_curl(struct apitest *t, const char *method, const char *endpoint, const char *data,
		 json_t **body)
{
	char url[128], out[65536], datafile[160], max[16];
	char *argv[20];
	int a = 0, status;
	char *nl;

	snprintf(url, sizeof(url), "http://localhost/api/v1/%s", endpoint);
	argv[a++] = "curl";
	argv[a++] = "-s";
	snprintf(max, sizeof(max), "%u", t->curl_max_s);
	argv[a++] = "--max-time";
	argv[a++] = max;
	argv[a++] = "--unix-socket";
	argv[a++] = t->sock;
	argv[a++] = "-X";
	argv[a++] = (char *)method;
	argv[a++] = "-w";
	argv[a++] = "\n%{http_code}";
	if (data) {
		snprintf(datafile, sizeof(datafile), "%s/body.json", t->dir);
		testutil_write_file(datafile, data, strlen(data), 0600);
		argv[a++] = "-H";
		argv[a++] = "Content-Type: application/json";
		argv[a++] = "--data-binary";
		snprintf(datafile, sizeof(datafile), "@%s/body.json", t->dir);
		argv[a++] = datafile;
	}
	argv[a++] = url;
	argv[a] = NULL;
	ck_assert_msg(apitest_run_capture(argv, out, sizeof(out), NULL, 0) == 0,
		      "curl %s %s failed", method, endpoint);
	nl = strrchr(out, '\n');
	ck_assert_ptr_nonnull(nl);
	status = atoi(nl + 1);
	*nl = 0;
	if (body) {
		*body = *out ? json_loads(out, 0, NULL) : NULL;
		ck_assert_msg(!*out || *body, "%s %s: answer is not JSON: %s", method, endpoint,
			      out);
	}
	return status;
}

bool apitest_ping(struct apitest *t)
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
			t->sock,
			"http://localhost/api/v1/vmm.ping",
			NULL};
	char out[64];

	return apitest_run_capture(argv, out, sizeof(out), NULL, 0) == 0 && !strcmp(out, "200");
}

const char *apitest_vm_state(struct apitest *t)
{
	static char s[32];
	json_t *j;

	ck_assert_int_eq(apitest_curl(t, "GET", "vm.info", NULL, &j), 200);
	snprintf(s, sizeof(s), "%s", json_string_value(json_object_get(j, "state")));
	json_decref(j);
	return s;
}

off_t apitest_console_size(struct apitest *t)
{
	struct stat st;

	return stat(t->console, &st) ? 0 : st.st_size;
}

unsigned apitest_console_count(struct apitest *t, const char *what)
{
	enum { MAX = 4 << 20 };
	char *buf = malloc(MAX);
	unsigned n = 0;

	ck_assert_ptr_nonnull(buf);
	testutil_read_file(t->console, buf, MAX);
	for (char *p = buf; (p = strstr(p, what)); p++)
		n++;
	free(buf);
	return n;
}

void apitest_expect_error(struct apitest *t, const char *endpoint, const char *data, int want,
			  const char *needle)
{
	json_t *j = NULL;
	int st = apitest_curl(t, "PUT", endpoint, data, &j);
	const char *msg = json_string_value(json_array_get(j, 0));

	ck_assert_msg(st == want, "%s: status %d, expected %d (%s)", endpoint, st, want,
		      msg ? msg : "no message");
	ck_assert_msg(msg && strstr(msg, needle), "%s: message '%s' lacks '%s'", endpoint,
		      msg ? msg : "", needle);
	json_decref(j);
	ck_assert_int_eq(apitest_curl(t, "GET", "vmm.ping", NULL, NULL), 200);
}

static void *fake_vhost_fs(void *arg)
{
	int lfd = (int)(intptr_t)arg, fd = accept(lfd, NULL, NULL);
	uint32_t h[3];
	uint8_t p[512];

	while (fd >= 0 && read(fd, h, 12) == 12 && h[2] <= sizeof(p) &&
	       (h[2] == 0 || read(fd, p, h[2]) == (ssize_t)h[2])) {
		uint64_t v = h[0] == 1	  ? (1ULL << 32) | (1ULL << 30)
			     : h[0] == 15 ? 9
			     : h[0] == 17 ? 8
					  : 0;
		uint8_t b[20];

		if (!(h[0] == 1 || h[0] == 15 || h[0] == 17 || h[0] == 11 || (h[1] & 8)))
			continue;
		memcpy(b, (uint32_t[]){h[0], 5, 8}, 12);
		memcpy(b + 12, &v, 8);
		if (write(fd, b, 20) != 20)
			break;
	}
	if (fd >= 0)
		close(fd);
	return NULL;
}

int apitest_fake_vhost_fs(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	pthread_t t;
	int lfd;

	ck_assert_uint_lt(strlen(path), sizeof(sa.sun_path));
	memcpy(sa.sun_path, path, strlen(path) + 1);
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(lfd, 0);
	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(lfd, 4), 0);
	ck_assert_int_eq(pthread_create(&t, NULL, fake_vhost_fs, (void *)(intptr_t)lfd), 0);
	pthread_detach(t);
	return lfd;
}
