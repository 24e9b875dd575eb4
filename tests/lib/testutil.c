/* Helpers shared by lvmm's test programs: process spawning with output capture and time limits,
 * temp files, file and shell helpers, byte readers (see testutil.h). */
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "guest_mem.h"

const char *testutil_env_or(const char *name, const char *def)
{
	const char *v = getenv(name);

	return v && *v ? v : def;
}

const char *testutil_lvmm(void)
{
	return testutil_env_or("LVMM", "build/lvmm");
}

const char *testutil_bench_guest(void)
{
	static char path[512];

	snprintf(path, sizeof(path), "%s/bench-guest/bench-guest.elf",
		 testutil_env_or("BUILD", "build"));
	return path;
}

double testutil_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void testutil_sleep_ms(unsigned int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/* Past the buffer, output is read and dropped so that lvmm never blocks on a full pipe. */
static void testutil_drain(int fd, char *buf, size_t *n, int *open_)
{
	ssize_t r;

	if (*n >= TESTUTIL_OUT_MAX - 1) {
		char junk[4096];

		r = read(fd, junk, sizeof(junk));
	} else {
		r = read(fd, buf + *n, TESTUTIL_OUT_MAX - 1 - *n);
		if (r > 0)
			*n += (size_t)r;
	}
	if (r <= 0 && !(r < 0 && errno == EINTR))
		*open_ = 0;
	buf[*n] = 0;
}

void testutil_run_lvmm(struct testutil_run *r, char *const args[], const char *input,
		       const char *wait_for, int sig, unsigned int limit_s)
{
	int po[2], pe[2], pi[2], oo = 1, eo = 1, sent = 0;
	double start = testutil_now_s();
	char *argv[32];
	pid_t pid;
	int i;

	memset(r, 0, sizeof(*r));
	argv[0] = (char *)testutil_lvmm();
	for (i = 0; args[i] && i < 30; i++)
		argv[i + 1] = args[i];
	argv[i + 1] = NULL;
	ck_assert_int_eq(pipe(po), 0);
	ck_assert_int_eq(pipe(pe), 0);
	ck_assert_int_eq(pipe(pi), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (!pid) {
		int devnull = open("/dev/null", O_RDONLY);

		dup2(input ? pi[0] : devnull, 0);
		close(pi[1]);
		dup2(po[1], 1);
		dup2(pe[1], 2);
		close(po[0]);
		close(pe[0]);
		execv(argv[0], argv);
		_exit(127);
	}
	close(po[1]);
	close(pe[1]);
	close(pi[0]);
	if (input)
		ck_assert_int_eq(write(pi[1], input, strlen(input)), (ssize_t)strlen(input));
	close(pi[1]);
	while (oo || eo) {
		struct pollfd p[2] = {{.fd = oo ? po[0] : -1, .events = POLLIN},
				      {.fd = eo ? pe[0] : -1, .events = POLLIN}};

		if (poll(p, 2, 200) > 0) {
			if (p[0].revents)
				testutil_drain(po[0], r->out, &r->nout, &oo);
			if (p[1].revents)
				testutil_drain(pe[0], r->err, &r->nerr, &eo);
		}
		if (wait_for && !sent && strstr(r->out, wait_for)) {
			kill(pid, sig);
			sent = 1;
		}
		if (testutil_now_s() - start > limit_s) {
			kill(pid, SIGKILL);
			break;
		}
	}
	close(po[0]);
	close(pe[0]);
	ck_assert_int_eq(waitpid(pid, &r->status, 0), pid);
	if (wait_for)
		ck_assert_msg(sent, "never saw '%s' on the console: %s", wait_for, r->out);
}

int testutil_wait_limit(pid_t pid, const char *what, unsigned int limit_s)
{
	time_t t0 = time(NULL);
	int st = 0;

	while (waitpid(pid, &st, WNOHANG) == 0) {
		if (time(NULL) - t0 > (time_t)limit_s) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			ck_abort_msg("%s did not stop within %u s", what, limit_s);
		}
		usleep(20000);
	}
	return st;
}

int testutil_lines(const char *s)
{
	int n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

char *testutil_slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t len = 0;

	if (!f)
		return strdup("");
	if (getdelim(&buf, &len, '\0', f) < 0) {
		free(buf);
		buf = strdup("");
	}
	fclose(f);
	return buf;
}

size_t testutil_read_file(const char *path, char *buf, size_t max)
{
	int fd = open(path, O_RDONLY);
	ssize_t n;

	buf[0] = 0;
	if (fd < 0)
		return 0;
	n = read(fd, buf, max - 1);
	close(fd);
	buf[n > 0 ? n : 0] = 0;
	return n > 0 ? (size_t)n : 0;
}

void testutil_write_file(const char *path, const void *data, size_t len, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);

	ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
	ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
	close(fd);
}

void testutil_tmpfile(char *path)
{
	int fd = mkstemp(path);

	ck_assert_msg(fd >= 0, "mkstemp %s: %s", path, strerror(errno));
	close(fd);
}

void testutil_mkdtemp(char *dir, size_t len, const char *prefix)
{
	snprintf(dir, len, "%sXXXXXX", prefix);
	ck_assert_msg(mkdtemp(dir) != NULL, "mkdtemp %s: %s", dir, strerror(errno));
}

void testutil_rmtree(const char *dir)
{
	testutil_system("rm -rf '%s'", dir);
}

int testutil_system(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	return system(cmd);
}

int testutil_sh(const char *cmd, char **out)
{
	FILE *p = popen(cmd, "r");
	char *buf = NULL;
	size_t len = 0;
	int st;

	ck_assert_msg(p, "popen %s", cmd);
	if (getdelim(&buf, &len, '\0', p) < 0) {
		free(buf);
		buf = strdup("");
	}
	st = pclose(p);
	if (out)
		*out = buf;
	else
		free(buf);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

uint16_t testutil_le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

uint32_t testutil_le32(const uint8_t *p)
{
	return (uint32_t)testutil_le16(p) | (uint32_t)testutil_le16(p + 2) << 16;
}

uint64_t testutil_le64(const uint8_t *p)
{
	return (uint64_t)testutil_le32(p) | (uint64_t)testutil_le32(p + 4) << 32;
}

uint8_t testutil_sum8(const uint8_t *p, size_t len)
{
	uint8_t s = 0;

	while (len--)
		s = (uint8_t)(s + *p++);
	return s;
}

uint8_t *testutil_guest_ram(struct guest_mem *gm, uint64_t size)
{
	uint8_t *ram = calloc(1, size);

	ck_assert_msg(ram, "calloc %llu bytes of guest RAM", (unsigned long long)size);
	gmem_init_buffer(gm, ram, size);
	return ram;
}

void testutil_skip(const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	/* Flushed at once: a forked Check case must not leave it in a buffer a fork copies. */
	printf("SKIP: %s\n", buf);
	fflush(stdout);
}

bool testutil_kvm_usable(void)
{
	return access("/dev/kvm", R_OK | W_OK) == 0;
}

int testutil_run_suite(Suite *s)
{
	SRunner *sr = srunner_create(s);
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
