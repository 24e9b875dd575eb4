// libgemini host API without a GPU: configuration checks, gemini_open refusing corrupt, truncated
// and stale GVDK files before any device work, the mapped copy's argument checks, and the lio
// mapping against a softssd (the CPU in the GPU's place). Runs in CI (no GPU there).
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime.h>

#include "gemini.h"
#include "gemini_backend.h"
#include "gvdk.h"
#include "fixture.h"
#include "lio_fixture.h"

extern "C" { /* the client library is C */
#include "lio_client.h"
}

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
	ck_assert_int_eq(gemini_init(&c, &k), -EINVAL);
	ck_assert_ptr_null(c);
	k.page_size = 2 << 20;
	ck_assert_int_eq(gemini_init(&c, &k), -EINVAL);
	k.page_size = 4096;
	k.cache_size = 8192; /* two pages */
	ck_assert_int_eq(gemini_init(&c, &k), -EINVAL);
	k.cache_size = 1 << 20;
	k.qdepth = 48;
	ck_assert_int_eq(gemini_init(&c, &k), -EINVAL);
	k.qdepth = 64;
	k.prefetch = 100;
	ck_assert_int_eq(gemini_init(&c, &k), -EINVAL);
	k.prefetch = 2;
	k.backend = (enum gemini_backend)7;
	ck_assert_int_eq(gemini_init(&c, &k), -EINVAL);
	k.backend = GEMINI_BACKEND_NVME;
	ck_assert_int_eq(gemini_init(&c, &k), 0);
	ck_assert_ptr_nonnull(c);
	gemini_exit(c);
	ck_assert_int_eq(gemini_init(&c, NULL), 0); /* defaults */
	gemini_exit(c);
}
END_TEST

/* The lio backend's configuration: SSD and volume named, queue pairs and depth in range. */
START_TEST(lio_config_checks)
{
	struct gemini_ctx *c = NULL;
	struct gemini_config k;

	memset(&k, 0, sizeof(k));
	k.backend = GEMINI_BACKEND_LIO;
	ck_assert_int_eq(gemini_init(&c, &k), -EINVAL); /* no SSD, no volume */
	k.lio_ssd = "/nonexistent/ssd.sock";
	ck_assert_int_eq(gemini_init(&c, &k), -EINVAL);
	k.lio_volume = "a-volume-name-of-thirty-two-bytes";
	ck_assert_int_eq(gemini_init(&c, &k), -EINVAL);
	k.lio_volume = "gv";
	k.nqueues = GEMINI_LIO_MAX_QP + 1;
	ck_assert_int_eq(gemini_init(&c, &k), -EINVAL);
	k.nqueues = 4;
	k.qdepth = 2; /* rounds of depth - 2 commands: none */
	ck_assert_int_eq(gemini_init(&c, &k), -EINVAL);
	ck_assert_ptr_null(c);
	k.qdepth = 4;
	ck_assert_int_eq(gemini_init(&c, &k), 0);
	gemini_exit(c);
	k.nqueues = 0; /* default: 8 queue pairs */
	ck_assert_int_eq(gemini_init(&c, &k), 0);
	gemini_exit(c);
}
END_TEST

/* No daemon at the socket: gemini_open fails with the socket named (no GPU: -ENODEV first). */
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
	ck_assert_int_eq(gemini_init(&c, &k), 0);
	fd = gemini_open(c, tfile, O_RDONLY);
	if (has_gpu()) {
		ck_assert_int_lt(fd, 0);
		ck_assert_ptr_nonnull(strstr(gemini_last_error(c), "/nonexistent/ssd.sock"));
	} else {
		ck_assert_int_eq(fd, -ENODEV);
	}
	gemini_exit(c);
}
END_TEST

/*
 * The lio mapping and queue-pair set-up against a real softssd, the CPU in the GPU's place: the
 * GVDK file imported into a volume, its map rewritten by gm_lio_map, and every data block read at
 * the mapped LBA through an isolated queue pair with SQ, CQ and polled doorbells in the backend's
 * queue memory (gm_lio_start's flags) must be the file's block; a read past the volume is refused
 * by the daemon's lio_sqe_check. $LVMM names the lvmm binary (else SKIP).
 */
START_TEST(lio_map_against_softssd)
{
	struct lio_vol_attach a;
	struct lio_identify id;
	struct lio_drv_opts o;
	struct lio_client *cl;
	struct gvdk_map m;
	struct lio_drv *d;
	struct lio_fx x;
	char err[GVDK_ERRLEN > 256 ? GVDK_ERRLEN : 256];
	uint8_t *data;
	uint64_t gpa;
	uint16_t st;
	int fd, r;

	r = lio_fx_start(&x, tdir, 64);
	if (r == -ENOENT) {
		printf("SKIP: lio_map_against_softssd: LVMM (the lvmm binary) not set\n");
		return;
	}
	ck_assert_msg(r == 0, "softssd did not start: %s (log %s)", strerror(-r), x.log);
	make_file();
	ck_assert_int_eq(gvdk_load(tfile, &m, 0, err), 0);
	data = (uint8_t *)malloc(m.hdr.data_size);
	for (uint64_t i = 0; i < m.hdr.data_size; i++)
		data[i] = (uint8_t)(i * 131 + (i >> 12));
	fd = open(tfile, O_RDWR);
	ck_assert_int_eq(pwrite(fd, data, m.hdr.data_size, (off_t)m.hdr.data_offset),
			 (ssize_t)m.hdr.data_size);
	ck_assert_int_eq(fsync(fd), 0);
	close(fd);
	ck_assert_int_eq(lio_fx_import(&x, "gv", 4 << 20, tfile), 0);
	gm_lio_map(&m);
	ck_assert_int_eq(lio_client_connect(&cl, x.sock, "test-host", &id, err, sizeof(err)), 0);
	memset(&a, 0, sizeof(a));
	snprintf(a.name, sizeof(a.name), "gv");
	ck_assert_int_eq(lio_client_vol_attach(cl, &a), 0);
	memset(&o, 0, sizeof(o));
	o.vol_id = a.vol_id;
	o.lba_start = a.lba_start;
	o.lba_count = a.lba_count;
	o.lba_shift = id.lba_shift;
	o.mode = LIGHTIOV_MODE_ISOLATED;
	o.qp_flags = LIO_QP_SQ_QMEM | LIO_QP_CQ_QMEM | LIO_QP_DB_POLL;
	o.nr_qp = 1;
	o.depth = 16;
	o.mem_bytes = 1 << 20;
	ck_assert_msg(lio_drv_open(&d, cl, &o, err, sizeof(err)) == 0, "%s", err);
	gpa = lio_drv_alloc(d, m.hdr.block_size);
	for (uint64_t b = 0; b < m.hdr.nblocks; b++) {
		uint64_t dev = gvdk_lookup(&m, b);

		ck_assert_uint_eq(dev, m.hdr.data_offset + b * m.hdr.block_size);
		st = lio_drv_io(d, 0, NVME_CMD_READ, dev >> id.lba_shift,
				m.hdr.block_size >> id.lba_shift, gpa);
		ck_assert_msg(st == 0, "block %llu: status %#x", (unsigned long long)b, st);
		ck_assert_msg(
		    !memcmp(lio_drv_ptr(d, gpa), data + b * m.hdr.block_size, m.hdr.block_size),
		    "block %llu differs at LBA %llu", (unsigned long long)b,
		    (unsigned long long)(dev >> id.lba_shift));
	}
	st = lio_drv_io(d, 0, NVME_CMD_READ, a.lba_count, 1, gpa);
	ck_assert_int_eq(NVME_STATUS_SC(st), NVME_SC_LBA_RANGE);
	lio_drv_close(d);
	lio_client_close(cl);
	gvdk_map_free(&m);
	free(data);
	lio_fx_stop(&x);
}
END_TEST

static int try_open(int flags)
{
	struct gemini_ctx *c;
	int fd;

	ck_assert_int_eq(gemini_init(&c, NULL), 0);
	fd = gemini_open(c, tfile, flags);
	if (fd < 0)
		ck_assert_ptr_nonnull(strstr(gemini_last_error(c), tfile));
	else
		ck_assert_int_eq(gemini_close(c, fd), 0);
	gemini_exit(c);
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
	ck_assert_int_eq(gemini_init(&c, NULL), 0);
	ck_assert_int_eq(gemini_open(c, copy, O_RDONLY), -ESTALE);
	ck_assert_ptr_nonnull(strstr(gemini_last_error(c), "inode"));
	ck_assert_int_eq(gemini_open(c, "/nonexistent/x", O_RDONLY), -ENOENT);
	ck_assert_int_eq(gemini_close(c, 3), -EBADF);
	ck_assert_int_eq(gemini_sync(c, 0), -EBADF);
	gemini_exit(c);
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

/* gemini_mapped_copy_async's argument checks before any device work: no context, descriptors out
 * of range or not open. Where a GPU is, a file on the disk namespace has no image: -EOPNOTSUPP. */
START_TEST(mapped_copy_checks)
{
	struct gemini_ctx *c;
	char buf[16];
	int fd;

	ck_assert_int_eq(gemini_mapped_copy_async(NULL, 0, 0, buf, 16, 0, NULL), -EINVAL);
	ck_assert_int_eq(gemini_init(&c, NULL), 0);
	ck_assert_int_eq(gemini_mapped_copy_async(c, -1, 0, buf, 16, 0, NULL), -EBADF);
	ck_assert_int_eq(gemini_mapped_copy_async(c, GEMINI_MAX_FILES, 0, buf, 16, 1, NULL),
			 -EBADF);
	ck_assert_int_eq(gemini_mapped_copy_async(c, 0, 0, buf, 16, 0, NULL), -EBADF);
	ck_assert_ptr_nonnull(strstr(gemini_last_error(c), "descriptor 0 not open"));
	if (has_gpu()) {
		make_file();
		fd = gemini_open(c, tfile, O_RDWR);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(gemini_mapped_copy_async(c, fd, 0, buf, 16, 0, NULL), -EOPNOTSUPP);
		ck_assert_int_eq(gemini_close(c, fd), 0);
	}
	gemini_exit(c);
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
	tcase_add_test(tc, mapped_copy_checks);
	tcase_add_test(tc, lio_config_checks);
	tcase_add_test(tc, lio_open_without_daemon);
	tcase_add_test(tc, lio_map_against_softssd);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
