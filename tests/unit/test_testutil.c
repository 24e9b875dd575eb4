/* Unit tests for the shared test helpers in tests/lib: byte readers and checksums, file and shell
 * helpers, process capture with stdin, signals and limits (through /bin/sh), printk timestamps. */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "linuxboot.h"
#include "testutil.h"

START_TEST(test_bytes)
{
	static const uint8_t b[8] = {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x88};
	static const uint8_t table[4] = {0x10, 0x20, 0x30, 0xa0};

	ck_assert_uint_eq(testutil_le16(b), 0x0201);
	ck_assert_uint_eq(testutil_le32(b), 0x04030201);
	ck_assert_uint_eq(testutil_le64(b), 0x8807060504030201ULL);
	ck_assert_uint_eq(testutil_sum8(table, 4), 0);
	ck_assert_uint_eq(testutil_sum8(table, 3), 0x60);
	ck_assert_uint_eq(testutil_sum8(table, 0), 0);
	ck_assert_int_eq(testutil_lines("a\nb\n"), 2);
	ck_assert_int_eq(testutil_lines("no newline"), 0);
}
END_TEST

START_TEST(test_files)
{
	char dir[64], path[128], buf[4], *s;

	testutil_mkdtemp(dir, sizeof(dir), "/tmp/lvmm-testutil-");
	snprintf(path, sizeof(path), "%s/f", dir);
	testutil_write_file(path, "hello", 5, 0644);
	/* Cut at max - 1 bytes and terminated. */
	ck_assert_uint_eq(testutil_read_file(path, buf, sizeof(buf)), 3);
	ck_assert_str_eq(buf, "hel");
	s = testutil_slurp(path);
	ck_assert_str_eq(s, "hello");
	free(s);
	testutil_rmtree(dir);
	ck_assert_int_ne(access(dir, F_OK), 0);
	ck_assert_uint_eq(testutil_read_file(path, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "");
	s = testutil_slurp(path);
	ck_assert_str_eq(s, "");
	free(s);
}
END_TEST

START_TEST(test_shell)
{
	char *out;

	ck_assert_int_eq(testutil_sh("echo x; exit 2", &out), 2);
	ck_assert_str_eq(out, "x\n");
	free(out);
	ck_assert_int_eq(WEXITSTATUS(testutil_system("exit %d", 3)), 3);
}
END_TEST

START_TEST(test_run_capture)
{
	char *both[] = {"-c", "cat; echo err >&2; exit 3", NULL};
	char *ready[] = {"-c", "echo ready; exec sleep 30", NULL};
	struct testutil_run r;

	setenv("LVMM", "/bin/sh", 1);
	testutil_run_lvmm(&r, both, "from stdin\n", NULL, 0, 60);
	ck_assert_str_eq(r.out, "from stdin\n");
	ck_assert_str_eq(r.err, "err\n");
	ck_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 3);
	testutil_run_lvmm(&r, ready, NULL, "ready", SIGTERM, 60);
	ck_assert(WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGTERM);
}
END_TEST

/* The limit is a safety net: a process that outlives it is killed, not waited for. */
START_TEST(test_run_limit)
{
	char *hang[] = {"-c", "exec sleep 30", NULL};
	struct testutil_run r;
	pid_t pid;

	setenv("LVMM", "/bin/sh", 1);
	testutil_run_lvmm(&r, hang, NULL, NULL, 0, 1);
	ck_assert(WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGKILL);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (!pid)
		_exit(5);
	ck_assert_int_eq(WEXITSTATUS(testutil_wait_limit(pid, "child", 10)), 5);
}
END_TEST

START_TEST(test_printk_time)
{
	const char *con = "early line\n[    1.500000] Run /init as init process\n";

	ck_assert_double_eq_tol(linuxboot_printk_time(con, "Run /init"), 1.5, 1e-9);
	ck_assert_double_eq(linuxboot_printk_time(con, "early"), -1);
	ck_assert_double_eq(linuxboot_printk_time(con, "absent"), -1);
}
END_TEST

static Suite *testutil_suite(void)
{
	Suite *s = suite_create("testutil");
	TCase *tc = tcase_create("helpers");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_bytes);
	tcase_add_test(tc, test_files);
	tcase_add_test(tc, test_shell);
	tcase_add_test(tc, test_run_capture);
	tcase_add_test(tc, test_run_limit);
	tcase_add_test(tc, test_printk_time);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return testutil_run_suite(testutil_suite());
}
