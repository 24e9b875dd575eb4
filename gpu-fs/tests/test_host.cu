// libgemini host API without a GPU: configuration checks and G_open refusing corrupt, truncated
// and stale GVDK files before any device work. Runs in CI (no GPU there).
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime.h>

#include "gemini.h"
#include "gvdk.h"
#include "fixture.h"

static void setup(void)
{
	fixture_setup("gemini-host");
}

static void make_file(void)
{
	char err[GVDK_ERRLEN];

	ck_assert_msg(gvdk_create(tfile, 1 << 20, NULL, err) == 0, "%s", err);
}

static int has_gpu(void)
{
	int n = 0;

	return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

START_TEST(config_checks)
{
	struct gemini_ctx *c = NULL;
	struct gemini_config k;

	memset(&k, 0, sizeof(k));
	k.page_size = 3000;
	ck_assert_int_eq(Geminifs_init(&c, &k), -EINVAL);
	ck_assert_ptr_null(c);
	k.page_size = 2 << 20;
	ck_assert_int_eq(Geminifs_init(&c, &k), -EINVAL);
	k.page_size = 4096;
	k.cache_size = 8192; /* two pages */
	ck_assert_int_eq(Geminifs_init(&c, &k), -EINVAL);
	k.cache_size = 1 << 20;
	k.qdepth = 48;
	ck_assert_int_eq(Geminifs_init(&c, &k), -EINVAL);
	k.qdepth = 64;
	k.prefetch = 100;
	ck_assert_int_eq(Geminifs_init(&c, &k), -EINVAL);
	k.prefetch = 2;
	k.backend = (enum gemini_backend)7;
	ck_assert_int_eq(Geminifs_init(&c, &k), -EINVAL);
	k.backend = GEMINI_BACKEND_NVME;
	ck_assert_int_eq(Geminifs_init(&c, &k), 0);
	ck_assert_ptr_nonnull(c);
	Geminifs_exit(c);
	ck_assert_int_eq(Geminifs_init(&c, NULL), 0); /* defaults */
	Geminifs_exit(c);
}
END_TEST

/* The lio backend's configuration: SSD and volume named, queue pairs and depth in range. */
START_TEST(lio_config_checks)
{
	struct gemini_ctx *c = NULL;
	struct gemini_config k;

	memset(&k, 0, sizeof(k));
	k.backend = GEMINI_BACKEND_LIO;
	ck_assert_int_eq(Geminifs_init(&c, &k), -EINVAL); /* no SSD, no volume */
	k.lio_ssd = "/nonexistent/ssd.sock";
	ck_assert_int_eq(Geminifs_init(&c, &k), -EINVAL);
	k.lio_volume = "a-volume-name-of-thirty-two-bytes";
	ck_assert_int_eq(Geminifs_init(&c, &k), -EINVAL);
	k.lio_volume = "gv";
	k.nqueues = GEMINI_LIO_MAX_QP + 1;
	ck_assert_int_eq(Geminifs_init(&c, &k), -EINVAL);
	k.nqueues = 4;
	k.qdepth = 2; /* rounds of depth - 2 commands: none */
	ck_assert_int_eq(Geminifs_init(&c, &k), -EINVAL);
	ck_assert_ptr_null(c);
	k.qdepth = 4;
	ck_assert_int_eq(Geminifs_init(&c, &k), 0);
	Geminifs_exit(c);
	k.nqueues = 0; /* default: 8 queue pairs */
	ck_assert_int_eq(Geminifs_init(&c, &k), 0);
	Geminifs_exit(c);
}
END_TEST

/* No daemon at the socket: G_open fails with the socket named (no GPU: -ENODEV first). */
START_TEST(lio_open_without_daemon)
{
	struct gemini_ctx *c;
	struct gemini_config k;
	int fd;

	make_file();
	memset(&k, 0, sizeof(k));
	k.backend = GEMINI_BACKEND_LIO;
	k.lio_ssd = "/nonexistent/ssd.sock";
	k.lio_volume = "gv";
	ck_assert_int_eq(Geminifs_init(&c, &k), 0);
	fd = G_open(c, tfile, O_RDONLY);
	if (has_gpu()) {
		ck_assert_int_lt(fd, 0);
		ck_assert_ptr_nonnull(strstr(gemini_last_error(c), "/nonexistent/ssd.sock"));
	} else {
		ck_assert_int_eq(fd, -ENODEV);
	}
	Geminifs_exit(c);
}
END_TEST

static int try_open(int flags)
{
	struct gemini_ctx *c;
	int fd;

	ck_assert_int_eq(Geminifs_init(&c, NULL), 0);
	fd = G_open(c, tfile, flags);
	if (fd < 0)
		ck_assert_ptr_nonnull(strstr(gemini_last_error(c), tfile));
	else
		ck_assert_int_eq(G_close(c, fd), 0);
	Geminifs_exit(c);
	return fd;
}

START_TEST(open_refuses_corruption)
{
	struct gvdk_header h;
	int fd;

	make_file();
	fd = open(tfile, O_RDWR);
	ck_assert_int_eq(pread(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	h.magic ^= 1;
	ck_assert_int_eq(pwrite(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	ck_assert_int_eq(try_open(O_RDONLY), -EMEDIUMTYPE);
	h.magic ^= 1;
	h.file_size += 4096; /* crc no longer matches */
	ck_assert_int_eq(pwrite(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	ck_assert_int_eq(try_open(O_RDWR), -EBADMSG);
	h.file_size -= 4096;
	ck_assert_int_eq(pwrite(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	ck_assert_int_eq(ftruncate(fd, (off_t)h.file_size - 1), 0);
	ck_assert_int_eq(try_open(O_RDONLY), -ENODATA);
	close(fd);
	ck_assert_int_eq(try_open(O_WRONLY), -EINVAL);
}
END_TEST

START_TEST(open_refuses_stale_copy)
{
	char cmd[1300], copy[620];
	struct gemini_ctx *c;

	make_file();
	snprintf(copy, sizeof(copy), "%s/copy", tdir);
	snprintf(cmd, sizeof(cmd), "cp --reflink=never '%s' '%s'", tfile, copy);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_eq(Geminifs_init(&c, NULL), 0);
	ck_assert_int_eq(G_open(c, copy, O_RDONLY), -ESTALE);
	ck_assert_ptr_nonnull(strstr(gemini_last_error(c), "inode"));
	ck_assert_int_eq(G_open(c, "/nonexistent/x", O_RDONLY), -ENOENT);
	ck_assert_int_eq(G_close(c, 3), -EBADF);
	ck_assert_int_eq(gemini_sync(c, 0), -EBADF);
	Geminifs_exit(c);
}
END_TEST

/* A valid file opens where a GPU is, and is refused with -ENODEV where none is. */
START_TEST(open_valid_file)
{
	int fd;

	make_file();
	fd = try_open(O_RDWR);
	if (has_gpu())
		ck_assert_int_ge(fd, 0);
	else
		ck_assert_int_eq(fd, -ENODEV);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("gemini-host");
	TCase *tc = tcase_create("api");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, config_checks);
	tcase_add_test(tc, open_refuses_corruption);
	tcase_add_test(tc, open_refuses_stale_copy);
	tcase_add_test(tc, open_valid_file);
	tcase_add_test(tc, lio_config_checks);
	tcase_add_test(tc, lio_open_without_daemon);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
