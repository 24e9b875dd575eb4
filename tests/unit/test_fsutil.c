/* Opening client-named files (vmm/fsutil.c): symlinks, FIFOs and devices refused without
 * blocking, append unless truncation is asked for, hard links left alone, allowed-directory walk.
 */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsutil.h"
#include "testutil.h"

/* The file holds exactly want. */
static void slurp_eq(const char *path, const char *want)
{
	char *got = testutil_slurp(path);

	ck_assert_ptr_nonnull(got);
	ck_assert_str_eq(got, want);
	free(got);
}

static char dir[64];
static char err[512];

static void setup(void)
{
	char p[256];

	testutil_mkdtemp(dir, sizeof(dir), "/tmp/lvmm-fsutil-");
	snprintf(p, sizeof(p), "%s/victim", dir);
	testutil_write_file(p, "precious", 8, 0644);
	ck_assert_int_eq(testutil_system("cd %s && ln -s victim link && mkfifo fifo && "
					 "ln victim hard && mkdir d && echo old > d/log",
					 dir),
			 0);
}

static void teardown(void)
{
	testutil_rmtree(dir);
}

static int open_in(const char *root, const char *name, int flags)
{
	char p[256];

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return fsutil_open(root, "serial file", p, flags | O_WRONLY | O_CREAT | O_APPEND, 0644,
			   FSUTIL_REGULAR, err, sizeof(err));
}

START_TEST(test_symlink_never_followed)
{
	char p[256];

	ck_assert_int_lt(open_in(NULL, "link", O_TRUNC), 0);
	ck_assert_ptr_nonnull(strstr(err, "symbolic link"));
	snprintf(p, sizeof(p), "%s/victim", dir);
	slurp_eq(p, "precious");
}
END_TEST

START_TEST(test_fifo_and_device_refused_at_once)
{
	double t0 = testutil_now_s();
	int rd, fd;
	char p[256];

	/* no reader: a blocking open would hang here for ever */
	ck_assert_int_lt(open_in(NULL, "fifo", 0), 0);
	ck_assert_ptr_nonnull(strstr(err, "FIFO"));
	/* with a reader the open succeeds, the type check refuses it */
	snprintf(p, sizeof(p), "%s/fifo", dir);
	rd = open(p, O_RDONLY | O_NONBLOCK);
	ck_assert_int_ge(rd, 0);
	ck_assert_int_lt(open_in(NULL, "fifo", 0), 0);
	ck_assert_ptr_nonnull(strstr(err, "a FIFO"));
	close(rd);
	fd =
	    fsutil_open(NULL, "kernel", "/dev/null", O_RDONLY, 0, FSUTIL_REGULAR, err, sizeof(err));
	ck_assert_int_lt(fd, 0);
	ck_assert_ptr_nonnull(strstr(err, "character device"));
	ck_assert_double_lt(testutil_now_s() - t0, 2.0);
}
END_TEST

START_TEST(test_append_unless_truncate)
{
	char p[256];
	int fd;

	fd = open_in(NULL, "d/log", 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "new\n", 4), 4);
	close(fd);
	snprintf(p, sizeof(p), "%s/d/log", dir);
	slurp_eq(p, "old\nnew\n");
	fd = open_in(NULL, "d/log", O_TRUNC);
	ck_assert_int_ge(fd, 0);
	close(fd);
	slurp_eq(p, "");
	/* a second name: someone else's file too, not emptied */
	ck_assert_int_lt(open_in(NULL, "hard", O_TRUNC), 0);
	ck_assert_ptr_nonnull(strstr(err, "hard links"));
	snprintf(p, sizeof(p), "%s/victim", dir);
	slurp_eq(p, "precious");
}
END_TEST

START_TEST(test_allowed_dir_walk)
{
	char p[256];
	int fd;

	fd = open_in(dir, "d/new.log", 0);
	ck_assert_int_ge(fd, 0);
	close(fd);
	/* relative: it would mean lvmm's working directory to whoever opens it later */
	fd = fsutil_open(dir, "serial file", "d/rel.log", O_WRONLY | O_CREAT, 0644, FSUTIL_REGULAR,
			 err, sizeof(err));
	ck_assert_int_lt(fd, 0);
	ck_assert_ptr_nonnull(strstr(err, "absolute"));
	snprintf(p, sizeof(p), "%s/d/rel.log", dir);
	ck_assert_int_eq(access(p, F_OK), -1);
	ck_assert_int_lt(fsutil_open(dir, "kernel", "/etc/passwd", O_RDONLY, 0, FSUTIL_REGULAR, err,
				     sizeof(err)),
			 0);
	ck_assert_ptr_nonnull(strstr(err, "beneath the allowed directory"));
	ck_assert_int_lt(fsutil_open(dir, "kernel", "d/../../etc/passwd", O_RDONLY, 0,
				     FSUTIL_REGULAR, err, sizeof(err)),
			 0);
	/* a prefix that is not the directory itself */
	snprintf(p, sizeof(p), "%sx/file", dir);
	ck_assert_int_lt(
	    fsutil_open(dir, "kernel", p, O_RDONLY, 0, FSUTIL_REGULAR, err, sizeof(err)), 0);
	snprintf(p, sizeof(p), "%s/d/missing.img", dir);
	ck_assert_int_eq(
	    fsutil_check(dir, "vnvme file", p, true, FSUTIL_REGULAR_OR_BLOCK, err, sizeof(err)), 0);
	snprintf(p, sizeof(p), "%s/d/missing", dir);
	ck_assert_int_lt(fsutil_check(dir, "kernel", p, false, FSUTIL_REGULAR, err, sizeof(err)),
			 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("fsutil");
	TCase *tc = tcase_create("open");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_symlink_never_followed);
	tcase_add_test(tc, test_fifo_and_device_refused_at_once);
	tcase_add_test(tc, test_append_unless_truncate);
	tcase_add_test(tc, test_allowed_dir_walk);
	suite_add_tcase(s, tc);
	return testutil_run_suite(s);
}
