/* vNVMe controller over the file backend: image creation and sizing, the io_uring I/O thread,
 * write/flush/read round trips that land in the file, hole punching, read-only images. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nvmerig.h"
#include "testutil.h"

static struct nvme_sqe rw(uint8_t op, uint16_t cid, uint64_t slba, unsigned nlb, uint64_t prp1,
			  uint64_t prp2)
{
	struct nvme_sqe c = rig_mk(op, cid, 1);

	c.cdw10 = (uint32_t)slba;
	c.cdw11 = (uint32_t)(slba >> 32);
	c.cdw12 = nlb - 1;
	c.prp1 = prp1;
	c.prp2 = prp2;
	return c;
}

START_TEST(test_create_and_size)
{
	struct stat st;
	struct vnvme_config vc;
	char err[256];
	uint64_t sz;
	struct nvme_file *f;

	rig_start(1 << 20, false);
	ck_assert_int_eq(stat(rig.path, &st), 0);
	ck_assert_int_eq(st.st_size, 1 << 20);
	rig_stop();
	/* An existing image without size=: its own size. */
	memset(&vc, 0, sizeof(vc));
	snprintf(vc.id, sizeof(vc.id), "nvme1");
	snprintf(vc.path, sizeof(vc.path), "%s", rig.path);
	ck_assert_int_eq(nvme_file_open(&vc, &f, &sz, err, sizeof(err)), 0);
	ck_assert_uint_eq(sz, 1 << 20);
	nvme_file_close(f);
	/* Bad sizes and missing read-only images are refused with a message naming them. */
	vc.size = 1000;
	ck_assert_int_eq(nvme_file_open(&vc, &f, &sz, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "nvme1"));
	vc.size = 0;
	vc.readonly = true;
	snprintf(vc.path, sizeof(vc.path), "%s/missing.img", rig.dir);
	ck_assert_int_lt(nvme_file_open(&vc, &f, &sz, err, sizeof(err)), 0);
	ck_assert_ptr_nonnull(strstr(err, "missing.img"));
	/* A new image needs a size, and none is created without one. */
	vc.readonly = false;
	ck_assert_int_eq(nvme_file_open(&vc, &f, &sz, err, sizeof(err)), -ENOENT);
	ck_assert_int_ne(access(vc.path, F_OK), 0);
}
END_TEST

START_TEST(test_write_flush_read)
{
	uint8_t buf[8192];
	struct nvme_sqe c;
	unsigned i;
	int fd;

	rig_start(1 << 20, false);
	rig_bring_up();
	for (i = 0; i < 8192; i++)
		rig.ram[DATA_GPA + 0x1000 + i] = (uint8_t)(i * 7 + 1);
	/* Aligned (O_DIRECT when available) and unaligned (buffered) writes. */
	c = rw(NVME_CMD_WRITE, 10, 8, 16, DATA_GPA + 0x1000, DATA_GPA + 0x2000);
	ck_assert_uint_eq(rig_cmd(1, &c), 0);
	c = rw(NVME_CMD_WRITE, 11, 100, 2, DATA_GPA + 0x1004, 0);
	c.cdw12 |= NVME_RW_FUA;
	ck_assert_uint_eq(rig_cmd(1, &c), 0);
	c = rig_mk(NVME_CMD_FLUSH, 12, 1);
	ck_assert_uint_eq(rig_cmd(1, &c), 0);
	fd = open(rig.path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, buf, 8192, 8 * 512), 8192);
	ck_assert_int_eq(memcmp(buf, rig.ram + DATA_GPA + 0x1000, 8192), 0);
	ck_assert_int_eq(pread(fd, buf, 1024, 100 * 512), 1024);
	ck_assert_int_eq(memcmp(buf, rig.ram + DATA_GPA + 0x1004, 1024), 0);
	close(fd);
	c = rw(NVME_CMD_READ, 13, 8, 16, DATA_GPA + 0x10000, DATA_GPA + 0x11000);
	ck_assert_uint_eq(rig_cmd(1, &c), 0);
	ck_assert_int_eq(memcmp(rig.ram + DATA_GPA + 0x10000, rig.ram + DATA_GPA + 0x1000, 8192),
			 0);
	/* Write Zeroes: the range reads back as zeroes. */
	c = rw(NVME_CMD_WRITE_ZEROES, 14, 8, 8, 0, 0);
	ck_assert_uint_eq(rig_cmd(1, &c), 0);
	c = rw(NVME_CMD_READ, 15, 8, 16, DATA_GPA + 0x10000, DATA_GPA + 0x11000);
	ck_assert_uint_eq(rig_cmd(1, &c), 0);
	for (i = 0; i < 4096; i++)
		ck_assert_uint_eq(rig.ram[DATA_GPA + 0x10000 + i], 0);
	ck_assert_int_eq(memcmp(rig.ram + DATA_GPA + 0x11000, rig.ram + DATA_GPA + 0x2000, 4096),
			 0);
	/* Out of range is refused before the backend. */
	c = rw(NVME_CMD_READ, 16, 2048, 1, DATA_GPA, 0);
	ck_assert_uint_eq(rig_cmd(1, &c), NVME_SC_LBA_RANGE | NVME_STATUS_DNR);
}
END_TEST

/* A write acknowledged after a Flush is in the image even when the process serving the
 * controller is killed at once: the child acknowledges, the parent SIGKILLs it and reads. */
START_TEST(test_flushed_write_survives_kill)
{
	uint8_t buf[8192];
	struct nvme_sqe c;
	int pfd[2], fd;
	char ack = 0;
	pid_t pid;
	unsigned i;

	ck_assert_int_eq(pipe(pfd), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (!pid) {
		close(pfd[0]);
		rig_start(1 << 20, false);
		rig_bring_up();
		for (i = 0; i < sizeof(buf); i++)
			rig.ram[DATA_GPA + 0x1000 + i] = (uint8_t)(i * 13 + 5);
		/* one aligned (O_DIRECT where possible) and one unaligned (buffered) write */
		c = rw(NVME_CMD_WRITE, 20, 16, 8, DATA_GPA + 0x1000, 0);
		if (rig_cmd(1, &c) != 0)
			_exit(1);
		c = rw(NVME_CMD_WRITE, 21, 200, 1, DATA_GPA + 0x2000 + 4, 0);
		if (rig_cmd(1, &c) != 0)
			_exit(1);
		c = rig_mk(NVME_CMD_FLUSH, 22, 1);
		if (rig_cmd(1, &c) != 0)
			_exit(1);
		ack = 1;
		if (write(pfd[1], &ack, 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	close(pfd[1]);
	ck_assert_msg(read(pfd[0], &ack, 1) == 1 && ack == 1, "the child saw no completed flush");
	close(pfd[0]);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 13 + 5);
	fd = open(rig.path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	{
		uint8_t got[4096];

		ck_assert_int_eq(pread(fd, got, 4096, 16 * 512), 4096);
		ck_assert_int_eq(memcmp(got, buf, 4096), 0);
		ck_assert_int_eq(pread(fd, got, 512, 200 * 512), 512);
		ck_assert_int_eq(memcmp(got, buf + 0x1000 + 4, 512), 0);
	}
	close(fd);
}
END_TEST

START_TEST(test_dsm_punches_hole)
{
	struct nvme_dsm_range *r = (void *)(rig.ram + DATA_GPA + 0x8000);
	uint8_t buf[4096];
	struct nvme_sqe c;
	int fd;

	rig_start(1 << 20, false);
	rig_bring_up();
	memset(rig.ram + DATA_GPA, 0x5a, 65536);
	c = rw(NVME_CMD_WRITE, 20, 0, 8, DATA_GPA, 0);
	ck_assert_uint_eq(rig_cmd(1, &c), 0);
	c = rig_mk(NVME_CMD_DSM, 21, 1);
	c.cdw11 = NVME_DSM_AD;
	c.prp1 = DATA_GPA + 0x8000;
	r[0] = (struct nvme_dsm_range){.slba = 0, .nlb = 8};
	ck_assert_uint_eq(rig_cmd(1, &c), 0);
	fd = open(rig.path, O_RDONLY);
	ck_assert_int_eq(pread(fd, buf, 4096, 0), 4096);
	close(fd);
	ck_assert_uint_eq(buf[0], 0);
	ck_assert_uint_eq(buf[4095], 0);
}
END_TEST

START_TEST(test_readonly_image)
{
	struct nvme_sqe c;
	int fd = open(rig.path, O_CREAT | O_WRONLY, 0644);

	ck_assert_int_eq(ftruncate(fd, 65536), 0);
	ck_assert_int_eq(pwrite(fd, "lvmm", 4, 512), 4);
	close(fd);
	rig_start(0, true);
	rig_bring_up();
	c = rw(NVME_CMD_WRITE, 30, 0, 1, DATA_GPA, 0);
	ck_assert_uint_eq(rig_cmd(1, &c), NVME_SC_NS_WRITE_PROTECTED | NVME_STATUS_DNR);
	c = rw(NVME_CMD_READ, 31, 1, 1, DATA_GPA, 0);
	ck_assert_uint_eq(rig_cmd(1, &c), 0);
	ck_assert_int_eq(memcmp(rig.ram + DATA_GPA, "lvmm", 4), 0);
}
END_TEST

START_TEST(test_reset_with_io_in_flight)
{
	struct nvme_sqe c;
	unsigned i, j;
	uint32_t csts = 1;

	rig_start(4 << 20, false);
	rig_bring_up();
	/* Queue many writes, then disable at once: RDY must drop and no thread may crash. */
	for (i = 0; i < QS - 1; i++) {
		c = rw(NVME_CMD_WRITE, (uint16_t)(40 + i), i * 256, 256, DATA_GPA,
		       DATA_GPA + 0x40000);
		for (j = 0; j < 64; j++)
			((uint64_t *)(rig.ram + DATA_GPA + 0x40000))[j] =
			    DATA_GPA + (j + 1) * 0x1000;
		memcpy(rig.ram + IOSQ_GPA + rig.tails[1] * 64, &c, 64);
		rig.tails[1] = (rig.tails[1] + 1) % QS;
	}
	rig_w32(0x1000 + 8, rig.tails[1]);
	rig_w32(NVME_REG_CC, 0);
	for (i = 0; i < 10000 && (csts & NVME_CSTS_RDY); i++) {
		nvme_ctrl_bar0_read(rig.ctrl, NVME_REG_CSTS, &csts, 4);
		usleep(1000);
	}
	ck_assert_uint_eq(csts & NVME_CSTS_RDY, 0);
	/* And it comes back. */
	memset(rig.ram + ACQ_GPA, 0, 4096);
	memset(rig.ram + IOCQ_GPA, 0, 4096);
	rig.tails[0] = rig.tails[1] = rig.heads[0] = rig.heads[1] = 0;
	rig.phases[0] = rig.phases[1] = 1;
	rig_bring_up();
	c = rig_mk(NVME_CMD_FLUSH, 99, 1);
	ck_assert_uint_eq(rig_cmd(1, &c), 0);
}
END_TEST

static Suite *file_suite(void)
{
	Suite *s = suite_create("nvme_file");
	TCase *t = tcase_create("file");

	tcase_add_checked_fixture(t, rig_setup, rig_teardown);
	tcase_set_timeout(t, 30);
	tcase_add_test(t, test_create_and_size);
	tcase_add_test(t, test_write_flush_read);
	tcase_add_test(t, test_flushed_write_survives_kill);
	tcase_add_test(t, test_dsm_punches_hole);
	tcase_add_test(t, test_readonly_image);
	tcase_add_test(t, test_reset_with_io_in_flight);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return testutil_run_suite(file_suite());
}
