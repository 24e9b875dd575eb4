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

#include "nvme-lightiov/nvme_file.h"
#include "testutil.h"

#define RAM_SIZE (4u << 20)
#define ASQ_GPA	 0x10000
#define ACQ_GPA	 0x20000
#define IOCQ_GPA 0x30000
#define IOSQ_GPA 0x40000
#define DATA_GPA 0x100000
#define QS	 16

static char dir[64], path[128];
static uint8_t *ram;
static struct guest_mem gm;
static struct nvme_file *nf;
static struct nvme_ctrl *ctrl;
static uint32_t tails[2], heads[2];
static uint8_t phases[2];
static const uint64_t sq_gpa[2] = {ASQ_GPA, IOSQ_GPA}, cq_gpa[2] = {ACQ_GPA, IOCQ_GPA};

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/lvmm-nvme-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/disk.img", dir);
	ram = aligned_alloc(4096, RAM_SIZE);
	memset(ram, 0, RAM_SIZE);
	gmem_init_buffer(&gm, ram, RAM_SIZE);
	tails[0] = tails[1] = heads[0] = heads[1] = 0;
	phases[0] = phases[1] = 1;
	nf = NULL;
	ctrl = NULL;
}

static void stop(void)
{
	nvme_file_close(nf); /* joins the I/O thread before the controller goes */
	nvme_ctrl_destroy(ctrl);
	nf = NULL;
	ctrl = NULL;
}

static void teardown(void)
{
	if (nf)
		stop();
	free(ram);
	unlink(path);
	rmdir(dir);
}

static void start(uint64_t size, bool ro)
{
	struct vnvme_config vc;
	struct nvme_ctrl_params p = {.dstrd = 0, .max_ioqs = 2, .nvectors = 2};
	struct nvme_ctrl_hooks h = {.kick = nvme_file_kick};
	char err[256];
	uint64_t sz;

	memset(&vc, 0, sizeof(vc));
	snprintf(vc.id, sizeof(vc.id), "nvme0");
	snprintf(vc.path, sizeof(vc.path), "%s", path);
	vc.size = size;
	vc.readonly = ro;
	ck_assert_int_eq(nvme_file_open(&vc, &nf, &sz, err, sizeof(err)), 0);
	p.size = sz;
	p.readonly = ro;
	h.opaque = nf;
	ck_assert_int_eq(nvme_ctrl_create(&p, &gm, &nvme_file_ops, nf, &h, &ctrl, err, sizeof(err)),
			 0);
	ck_assert_int_eq(nvme_file_start(nf, ctrl, err, sizeof(err)), 0);
}

static void w32(uint64_t off, uint32_t v)
{
	nvme_ctrl_bar0_write(ctrl, off, &v, 4);
}

static void w64(uint64_t off, uint64_t v)
{
	nvme_ctrl_bar0_write(ctrl, off, &v, 8);
}

/* Submits on queue q and waits (bounded) for the completion; returns the status. */
static uint16_t cmd(unsigned q, struct nvme_sqe *c)
{
	struct nvme_cqe *e = (struct nvme_cqe *)(ram + cq_gpa[q]) + heads[q];
	unsigned i;
	uint16_t st;

	memcpy(ram + sq_gpa[q] + tails[q] * 64, c, 64);
	tails[q] = (tails[q] + 1) % QS;
	w32(0x1000 + 8 * q, tails[q]);
	for (i = 0; i < 10000 && (__atomic_load_n(&e->status, __ATOMIC_ACQUIRE) & 1) != phases[q];
	     i++)
		usleep(1000);
	ck_assert_uint_eq(e->status & 1, phases[q]);
	ck_assert_uint_eq(e->cid, c->cid);
	st = e->status >> 1;
	if (++heads[q] == QS) {
		heads[q] = 0;
		phases[q] ^= 1;
	}
	w32(0x1000 + 8 * q + 4, heads[q]);
	return st;
}

static struct nvme_sqe mk(uint8_t op, uint16_t cid, uint32_t nsid)
{
	struct nvme_sqe c;

	memset(&c, 0, sizeof(c));
	c.opcode = op;
	c.cid = cid;
	c.nsid = nsid;
	return c;
}

static void bring_up(void)
{
	struct nvme_sqe c;

	w32(NVME_REG_AQA, (QS - 1) << 16 | (QS - 1));
	w64(NVME_REG_ASQ, ASQ_GPA);
	w64(NVME_REG_ACQ, ACQ_GPA);
	w32(NVME_REG_CC, NVME_CC_EN | 6 << 16 | 4 << 20);
	c = mk(NVME_ADMIN_CREATE_CQ, 1, 0);
	c.prp1 = IOCQ_GPA;
	c.cdw10 = (QS - 1) << 16 | 1;
	c.cdw11 = 1 << 16 | 3;
	ck_assert_uint_eq(cmd(0, &c), 0);
	c = mk(NVME_ADMIN_CREATE_SQ, 2, 0);
	c.prp1 = IOSQ_GPA;
	c.cdw10 = (QS - 1) << 16 | 1;
	c.cdw11 = 1 << 16 | 1;
	ck_assert_uint_eq(cmd(0, &c), 0);
}

static struct nvme_sqe rw(uint8_t op, uint16_t cid, uint64_t slba, unsigned nlb, uint64_t prp1,
			  uint64_t prp2)
{
	struct nvme_sqe c = mk(op, cid, 1);

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

	start(1 << 20, false);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(st.st_size, 1 << 20);
	stop();
	/* An existing image without size=: its own size. */
	memset(&vc, 0, sizeof(vc));
	snprintf(vc.id, sizeof(vc.id), "nvme1");
	snprintf(vc.path, sizeof(vc.path), "%s", path);
	ck_assert_int_eq(nvme_file_open(&vc, &f, &sz, err, sizeof(err)), 0);
	ck_assert_uint_eq(sz, 1 << 20);
	nvme_file_close(f);
	/* Bad sizes and missing read-only images are refused with a message naming them. */
	vc.size = 1000;
	ck_assert_int_eq(nvme_file_open(&vc, &f, &sz, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "nvme1"));
	vc.size = 0;
	vc.readonly = true;
	snprintf(vc.path, sizeof(vc.path), "%s/missing.img", dir);
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

	start(1 << 20, false);
	bring_up();
	for (i = 0; i < 8192; i++)
		ram[DATA_GPA + 0x1000 + i] = (uint8_t)(i * 7 + 1);
	/* Aligned (O_DIRECT when available) and unaligned (buffered) writes. */
	c = rw(NVME_CMD_WRITE, 10, 8, 16, DATA_GPA + 0x1000, DATA_GPA + 0x2000);
	ck_assert_uint_eq(cmd(1, &c), 0);
	c = rw(NVME_CMD_WRITE, 11, 100, 2, DATA_GPA + 0x1004, 0);
	c.cdw12 |= NVME_RW_FUA;
	ck_assert_uint_eq(cmd(1, &c), 0);
	c = mk(NVME_CMD_FLUSH, 12, 1);
	ck_assert_uint_eq(cmd(1, &c), 0);
	fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, buf, 8192, 8 * 512), 8192);
	ck_assert_int_eq(memcmp(buf, ram + DATA_GPA + 0x1000, 8192), 0);
	ck_assert_int_eq(pread(fd, buf, 1024, 100 * 512), 1024);
	ck_assert_int_eq(memcmp(buf, ram + DATA_GPA + 0x1004, 1024), 0);
	close(fd);
	c = rw(NVME_CMD_READ, 13, 8, 16, DATA_GPA + 0x10000, DATA_GPA + 0x11000);
	ck_assert_uint_eq(cmd(1, &c), 0);
	ck_assert_int_eq(memcmp(ram + DATA_GPA + 0x10000, ram + DATA_GPA + 0x1000, 8192), 0);
	/* Write Zeroes: the range reads back as zeroes. */
	c = rw(NVME_CMD_WRITE_ZEROES, 14, 8, 8, 0, 0);
	ck_assert_uint_eq(cmd(1, &c), 0);
	c = rw(NVME_CMD_READ, 15, 8, 16, DATA_GPA + 0x10000, DATA_GPA + 0x11000);
	ck_assert_uint_eq(cmd(1, &c), 0);
	for (i = 0; i < 4096; i++)
		ck_assert_uint_eq(ram[DATA_GPA + 0x10000 + i], 0);
	ck_assert_int_eq(memcmp(ram + DATA_GPA + 0x11000, ram + DATA_GPA + 0x2000, 4096), 0);
	/* Out of range is refused before the backend. */
	c = rw(NVME_CMD_READ, 16, 2048, 1, DATA_GPA, 0);
	ck_assert_uint_eq(cmd(1, &c), NVME_SC_LBA_RANGE | NVME_STATUS_DNR);
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
		start(1 << 20, false);
		bring_up();
		for (i = 0; i < sizeof(buf); i++)
			ram[DATA_GPA + 0x1000 + i] = (uint8_t)(i * 13 + 5);
		/* one aligned (O_DIRECT where possible) and one unaligned (buffered) write */
		c = rw(NVME_CMD_WRITE, 20, 16, 8, DATA_GPA + 0x1000, 0);
		if (cmd(1, &c) != 0)
			_exit(1);
		c = rw(NVME_CMD_WRITE, 21, 200, 1, DATA_GPA + 0x2000 + 4, 0);
		if (cmd(1, &c) != 0)
			_exit(1);
		c = mk(NVME_CMD_FLUSH, 22, 1);
		if (cmd(1, &c) != 0)
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
	fd = open(path, O_RDONLY);
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
	struct nvme_dsm_range *r = (void *)(ram + DATA_GPA + 0x8000);
	uint8_t buf[4096];
	struct nvme_sqe c;
	int fd;

	start(1 << 20, false);
	bring_up();
	memset(ram + DATA_GPA, 0x5a, 65536);
	c = rw(NVME_CMD_WRITE, 20, 0, 8, DATA_GPA, 0);
	ck_assert_uint_eq(cmd(1, &c), 0);
	c = mk(NVME_CMD_DSM, 21, 1);
	c.cdw11 = NVME_DSM_AD;
	c.prp1 = DATA_GPA + 0x8000;
	r[0] = (struct nvme_dsm_range){.slba = 0, .nlb = 8};
	ck_assert_uint_eq(cmd(1, &c), 0);
	fd = open(path, O_RDONLY);
	ck_assert_int_eq(pread(fd, buf, 4096, 0), 4096);
	close(fd);
	ck_assert_uint_eq(buf[0], 0);
	ck_assert_uint_eq(buf[4095], 0);
}
END_TEST

START_TEST(test_readonly_image)
{
	struct nvme_sqe c;
	int fd = open(path, O_CREAT | O_WRONLY, 0644);

	ck_assert_int_eq(ftruncate(fd, 65536), 0);
	ck_assert_int_eq(pwrite(fd, "lvmm", 4, 512), 4);
	close(fd);
	start(0, true);
	bring_up();
	c = rw(NVME_CMD_WRITE, 30, 0, 1, DATA_GPA, 0);
	ck_assert_uint_eq(cmd(1, &c), NVME_SC_NS_WRITE_PROTECTED | NVME_STATUS_DNR);
	c = rw(NVME_CMD_READ, 31, 1, 1, DATA_GPA, 0);
	ck_assert_uint_eq(cmd(1, &c), 0);
	ck_assert_int_eq(memcmp(ram + DATA_GPA, "lvmm", 4), 0);
}
END_TEST

START_TEST(test_reset_with_io_in_flight)
{
	struct nvme_sqe c;
	unsigned i, j;
	uint32_t csts = 1;

	start(4 << 20, false);
	bring_up();
	/* Queue many writes, then disable at once: RDY must drop and no thread may crash. */
	for (i = 0; i < QS - 1; i++) {
		c = rw(NVME_CMD_WRITE, (uint16_t)(40 + i), i * 256, 256, DATA_GPA,
		       DATA_GPA + 0x40000);
		for (j = 0; j < 64; j++)
			((uint64_t *)(ram + DATA_GPA + 0x40000))[j] = DATA_GPA + (j + 1) * 0x1000;
		memcpy(ram + IOSQ_GPA + tails[1] * 64, &c, 64);
		tails[1] = (tails[1] + 1) % QS;
	}
	w32(0x1000 + 8, tails[1]);
	w32(NVME_REG_CC, 0);
	for (i = 0; i < 10000 && (csts & NVME_CSTS_RDY); i++) {
		nvme_ctrl_bar0_read(ctrl, NVME_REG_CSTS, &csts, 4);
		usleep(1000);
	}
	ck_assert_uint_eq(csts & NVME_CSTS_RDY, 0);
	/* And it comes back. */
	memset(ram + ACQ_GPA, 0, 4096);
	memset(ram + IOCQ_GPA, 0, 4096);
	tails[0] = tails[1] = heads[0] = heads[1] = 0;
	phases[0] = phases[1] = 1;
	bring_up();
	c = mk(NVME_CMD_FLUSH, 99, 1);
	ck_assert_uint_eq(cmd(1, &c), 0);
}
END_TEST

static Suite *file_suite(void)
{
	Suite *s = suite_create("nvme_file");
	TCase *t = tcase_create("file");

	tcase_add_checked_fixture(t, setup, teardown);
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
