/* Helpers shared by lvmm's test programs: spawning lvmm with captured output and a time limit,
 * temp files, whole-file reads and writes, shell commands, little-endian reads and checksums. */
#ifndef LVMM_TESTUTIL_H
#define LVMM_TESTUTIL_H

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define TESTUTIL_OUT_MAX 65536

/* ck_assert_msg() for loops of many thousand checks. Every passing ck_assert records a mark point,
 * an allocation and a write to Check's result file, which under ASan on a loaded 2-core runner
 * takes seconds per hundred thousand checks; this form reaches Check only when the check fails.
 * expr is evaluated twice on failure, so it must have no side effects. */
#define TESTUTIL_CHECK(expr, ...)                                                                  \
	do {                                                                                       \
		if (!(expr))                                                                       \
			ck_assert_msg((expr), __VA_ARGS__);                                        \
	} while (0)

/* One finished lvmm process: what it printed (NUL-terminated, cut at TESTUTIL_OUT_MAX - 1) and
 * its waitpid status. */
struct testutil_run {
	char out[TESTUTIL_OUT_MAX], err[TESTUTIL_OUT_MAX];
	size_t nout, nerr;
	int status;
};

const char *testutil_env_or(const char *name, const char *def);
/* $LVMM, default build/lvmm. */
const char *testutil_lvmm(void);
/* $BUILD/bench-guest/bench-guest.elf, $BUILD defaulting to build. */
const char *testutil_bench_guest(void);
double testutil_now_s(void);
void testutil_sleep_ms(unsigned int ms);

/*
 * Runs lvmm with args (NULL-terminated, without argv[0]) and stdin from input (NULL: /dev/null);
 * kills it after limit_s seconds (a safety net, not a speed assertion). When wait_for is set,
 * sends sig once stdout contains it and fails the test if it never appears.
 */
void testutil_run_lvmm(struct testutil_run *r, char *const args[], const char *input,
		       const char *wait_for, int sig, unsigned int limit_s);
/* Waits for pid (named what in the failure), killing it and failing the test after limit_s;
 * returns the waitpid status. */
int testutil_wait_limit(pid_t pid, const char *what, unsigned int limit_s);
int testutil_lines(const char *s);

/* The whole file as a malloc'd string ("" when missing or unreadable). */
char *testutil_slurp(const char *path);
/* Up to max - 1 bytes into buf, NUL-terminated; returns the length (0 on error). */
size_t testutil_read_file(const char *path, char *buf, size_t max);
void testutil_write_file(const char *path, const void *data, size_t len, mode_t mode);
/* A mkstemp file, closed; path is the template and receives the name. */
void testutil_tmpfile(char *path);
/* mkdtemp of "<prefix>XXXXXX" into dir (len bytes); fails the test when it cannot. */
void testutil_mkdtemp(char *dir, size_t len, const char *prefix);
/* rm -rf dir: teardown of a testutil_mkdtemp directory. */
void testutil_rmtree(const char *dir);
/* system() on a formatted command; returns system()'s status. */
int testutil_system(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Runs cmd through popen; returns its exit status (-1 on a signal) and, when out, its output. */
int testutil_sh(const char *cmd, char **out);

uint16_t testutil_le16(const uint8_t *p);
uint32_t testutil_le32(const uint8_t *p);
uint64_t testutil_le64(const uint8_t *p);
/* 8-bit sum of len bytes: ACPI and MP tables sum to zero. */
uint8_t testutil_sum8(const uint8_t *p, size_t len);

struct guest_mem;
/* size bytes of zeroed RAM behind gm (gmem_init_buffer) for table builders; free() it. */
uint8_t *testutil_guest_ram(struct guest_mem *gm, uint64_t size);

/* A case (or a whole program) that cannot run on this host: prints "SKIP: <reason>" on a line
 * of its own, which tests/run.sh counts as one skipped case; the caller returns at once. Name
 * the case and the reason ("test_boot: linux_real_guest: build/guest/vmlinux not built"). */
void testutil_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Whether this host can run VMs (/dev/kvm readable and writable, as tools/kvm-usable.sh tests);
 * a program or case that boots one skips without it: testutil_skip("NAME: /dev/kvm not usable
 * here"). */
bool testutil_kvm_usable(void);
/* The first statement of a Check case that boots a VM: skips the case on a host without KVM. */
#define TESTUTIL_NEED_KVM()                                                                        \
	do {                                                                                       \
		if (!testutil_kvm_usable()) {                                                      \
			testutil_skip("%s: /dev/kvm not usable here", __func__);                   \
			return;                                                                    \
		}                                                                                  \
	} while (0)

/* Runs every test of s; returns EXIT_SUCCESS or EXIT_FAILURE for main. */
int testutil_run_suite(Suite *s);

#endif
