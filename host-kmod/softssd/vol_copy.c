/* `lvmm ssd vol import|export`: the volume attached alone, its data moved in 128 KiB chunks through
 * a queue pair of the CLI's own (online, several in flight) or the backing itself (offline). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lightiov/nvme.h"
#include "client/lio_client.h"
#include "softssd/backing_io.h"
#include "softssd/vol_cli_int.h"
#include "softssd/volumes.h"

#define VOLCLI_ZEROES_MAX 65536u /* LBAs of one Write Zeroes (NLB is 16 bits, 0-based) */

/* Attaches x->vol alone (a VM using it, even read-only, refuses the import or export) and sets
 * up the buffers: VOLCLI_QD in the DMA window of a queue pair of our own online, one offline. */
static int volcli_attach(struct volcli *x)
{
	unsigned i;
	int r;

	memset(&x->a, 0, sizeof(x->a));
	if (ssd_vol_name_check(x->ssd, x->vol, x->a.name, x->err, sizeof(x->err)))
		return volcli_fail("%s", x->err);
	x->a.flags = LIO_ATTACH_EXCL_ALL;
	if (x->c) {
		struct lio_identify id;

		r = lio_client_identify(x->c, &id);
		if (!r)
			x->lba_shift = id.lba_shift;
		if (!r)
			r = lio_client_vol_attach(x->c, &x->a);
		if (r)
			return volcli_fail("%s", lio_client_error(x->c));
	} else {
		r = ssd_volumes_attach(x->v, &x->a, (uint64_t)getpid(), x->err, sizeof(x->err));
		if (r)
			return volcli_fail("%s", x->err);
	}
	x->attached = true;
	if (x->c) {
		struct lio_drv_opts o = {
		    .vol_id = x->a.vol_id,
		    .lba_start = x->a.lba_start,
		    .lba_count = x->a.lba_count,
		    .lba_shift = x->lba_shift,
		    .mode = LIGHTIOV_MODE_ISOLATED,
		    .qp_flags = LIO_QP_SQ_QMEM | LIO_QP_CQ_QMEM | LIO_QP_DB_POLL,
		    .nr_qp = 1,
		    .depth = 16,
		    /* the buffers and a PRP-list page per SQ slot: no more, since a daemon
		     * driving a controller without an IOMMU locks and translates all of it */
		    .mem_bytes = VOLCLI_QD * VOLCLI_CHUNK + 16 * LIO_PAGE_SIZE,
		};

		r = lio_drv_open(&x->drv, x->c, &o, x->err, sizeof(x->err));
		if (r)
			return volcli_fail("%s: volume %s: no queue pair for the copy: %s", x->ssd,
					   x->vol, x->err);
		for (i = 0; i < VOLCLI_QD; i++) {
			x->slot[i].gpa = lio_drv_alloc(x->drv, VOLCLI_CHUNK);
			if (!x->slot[i].gpa)
				return volcli_fail(
				    "%s: volume %s: no room for %u buffers of %u bytes", x->ssd,
				    x->vol, VOLCLI_QD, VOLCLI_CHUNK);
			x->slot[i].buf = lio_drv_ptr(x->drv, x->slot[i].gpa);
		}
		x->nr_slots = VOLCLI_QD;
	} else {
		if (posix_memalign(&x->slot[0].buf, 4096, VOLCLI_CHUNK))
			return volcli_fail("%s: out of memory", x->ssd);
		x->nr_slots = 1;
	}
	return 0;
}

/* A read landed in s->buf: export writes it where it belongs in the file (holes stay holes). */
static int volcli_read_done(struct volcli *x, struct volcli_slot *s)
{
	size_t len = (size_t)s->nlb << x->lba_shift;
	int r;

	if (x->sparse && ssd_all_zero(s->buf, len))
		return 0;
	r = ssd_backing_pwrite(x->out, s->buf, len, s->lba << x->lba_shift);
	return r ? volcli_fail("%s: export file %s: write failed: %s", x->ssd, x->file,
			       strerror(-r))
		 : 0;
}

static int volcli_done(struct volcli *x, struct volcli_slot *s, uint16_t status)
{
	s->busy = false;
	if (status)
		return volcli_fail("%s: volume %s: %s of LBA %" PRIu64 "+%u failed (NVMe status "
				   "0x%x)",
				   x->ssd, x->vol, s->write ? "write" : "read", s->lba, s->nlb,
				   status);
	return s->write ? 0 : volcli_read_done(x, s);
}

/* Online: waits for completions (at least one) and finishes their commands. */
static int volcli_reap(struct volcli *x)
{
	struct nvme_cqe cqe[VOLCLI_QD];
	unsigned j;
	int n, i;

	n = lio_drv_reap(x->drv, 0, cqe, VOLCLI_QD, 5000);
	if (n <= 0)
		return volcli_fail("%s: volume %s: no completion from the daemon in 5 s", x->ssd,
				   x->vol);
	for (i = 0; i < n; i++) {
		for (j = 0; j < x->nr_slots; j++)
			if (x->slot[j].busy && x->slot[j].cid == cqe[i].cid)
				break;
		if (j == x->nr_slots)
			return volcli_fail("%s: volume %s: completion for unknown command %u",
					   x->ssd, x->vol, cqe[i].cid);
		if (volcli_done(x, &x->slot[j], (uint16_t)(cqe[i].status >> 1)))
			return 1;
	}
	return 0;
}

/* A free buffer: waits for a completion while every one is in flight. */
static int volcli_slot(struct volcli *x, struct volcli_slot **out)
{
	unsigned i;

	for (;;) {
		for (i = 0; i < x->nr_slots; i++) {
			if (!x->slot[i].busy) {
				*out = &x->slot[i];
				return 0;
			}
		}
		if (volcli_reap(x))
			return 1;
	}
}

static int volcli_drain(struct volcli *x)
{
	unsigned i, busy;

	do {
		for (busy = 0, i = 0; i < x->nr_slots; i++)
			busy += x->slot[i].busy;
		if (busy && volcli_reap(x))
			return 1;
	} while (busy);
	return 0;
}

/* nlb LBAs at window-relative lba between the volume and s->buf: queued online, done at once
 * offline. */
static int volcli_submit(struct volcli *x, struct volcli_slot *s, bool write, uint64_t lba,
			 uint32_t nlb)
{
	struct nvme_sqe sqe = {.opcode = write ? NVME_CMD_WRITE : NVME_CMD_READ, .nsid = 1};
	uint64_t off = (x->a.lba_start + lba) << x->lba_shift;
	size_t len = (size_t)nlb << x->lba_shift;
	int r;

	s->lba = lba;
	s->nlb = nlb;
	s->write = write;
	if (!x->c) {
		r = write ? ssd_backing_pwrite(x->fd, s->buf, len, off)
			  : ssd_backing_pread(x->fd, s->buf, len, off);
		if (r)
			return volcli_fail(
			    "%s: volume %s: %s at byte %" PRIu64 " of the backing failed: %s",
			    x->ssd, x->vol, write ? "write" : "read", off, strerror(-r));
		return volcli_done(x, s, 0);
	}
	sqe.cdw10 = (uint32_t)lba;
	sqe.cdw11 = (uint32_t)(lba >> 32);
	sqe.cdw12 = nlb - 1;
	lio_drv_prp(x->drv, 0, &sqe, s->gpa, (uint32_t)len);
	s->cid = lio_drv_submit(x->drv, 0, &sqe);
	if (s->cid < 0)
		return volcli_fail("%s: volume %s: the queue pair is full", x->ssd, x->vol);
	s->busy = true;
	return 0;
}

/* Makes the whole volume read as zeros (then only the file's non-zero chunks are written). */
static int volcli_zero_all(struct volcli *x)
{
	uint64_t lba, n;
	uint16_t st;
	int r;

	if (!x->c) {
		r = ssd_backing_zero(x->fd, x->a.lba_start << x->lba_shift,
				     x->a.lba_count << x->lba_shift);
		return r ? volcli_fail("%s: volume %s: zeroing it failed: %s", x->ssd, x->vol,
				       strerror(-r))
			 : 0;
	}
	for (lba = 0; lba < x->a.lba_count; lba += n) {
		n = x->a.lba_count - lba;
		if (n > VOLCLI_ZEROES_MAX)
			n = VOLCLI_ZEROES_MAX;
		st = lio_drv_io(x->drv, 0, NVME_CMD_WRITE_ZEROES, lba, (uint32_t)n, 0);
		if (st)
			return volcli_fail("%s: volume %s: write zeroes at LBA %" PRIu64 " failed "
					   "(NVMe status 0x%x)",
					   x->ssd, x->vol, lba, st);
	}
	return 0;
}

static int volcli_flush(struct volcli *x)
{
	uint16_t st;

	if (!x->c)
		return fdatasync(x->fd) ? volcli_fail("%s: flushing the backing failed: %s", x->ssd,
						      strerror(errno))
					: 0;
	st = lio_drv_io(x->drv, 0, NVME_CMD_FLUSH, 0, 0, 0);
	return st ? volcli_fail("%s: volume %s: flush failed (NVMe status 0x%x)", x->ssd, x->vol,
				st)
		  : 0;
}

int volcli_import(struct volcli *x, const char *file)
{
	uint64_t size, vsize, done, lba_bytes;
	struct volcli_slot *sl;
	char fs[24], vs[24];
	struct stat st;
	int in, e, r = 1;

	in = open(file, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return volcli_fail("%s: import file %s: %s", x->ssd, file, strerror(errno));
	if (fstat(in, &st) || !S_ISREG(st.st_mode)) {
		volcli_fail("%s: import file %s is not a regular file", x->ssd, file);
		goto out;
	}
	if (volcli_attach(x))
		goto out;
	size = (uint64_t)st.st_size;
	vsize = x->a.lba_count << x->lba_shift;
	lba_bytes = 1ULL << x->lba_shift;
	if (size > vsize) {
		ssd_size_str(size, fs, sizeof(fs));
		ssd_size_str(vsize, vs, sizeof(vs));
		volcli_fail("%s: import file %s size %s exceeds volume %s size %s", x->ssd, file,
			    fs, x->vol, vs);
		goto out;
	}
	if (volcli_zero_all(x))
		goto out;
	for (done = 0; done < size; done += VOLCLI_CHUNK) {
		size_t want = size - done < VOLCLI_CHUNK ? (size_t)(size - done) : VOLCLI_CHUNK;
		/* A last partial LBA is padded with zeros. */
		size_t len = (want + lba_bytes - 1) & ~(size_t)(lba_bytes - 1);

		if (volcli_slot(x, &sl))
			goto out;
		memset((uint8_t *)sl->buf + want, 0, len - want);
		e = ssd_backing_pread(in, sl->buf, want, done);
		if (e) {
			volcli_fail("%s: import file %s: read at byte %" PRIu64 " failed: %s",
				    x->ssd, file, done, strerror(-e));
			goto out;
		}
		/* The volume reads as zeros already: zero chunks need no write. */
		if (!ssd_all_zero(sl->buf, len) && volcli_submit(x, sl, true, done >> x->lba_shift,
								 (uint32_t)(len >> x->lba_shift)))
			goto out;
	}
	if (volcli_drain(x) || volcli_flush(x))
		goto out;
	ssd_size_str(size, fs, sizeof(fs));
	printf("%s: volume %s imported from %s (%s)\n", x->ssd, x->vol, file, fs);
	r = 0;
out:
	close(in);
	return r;
}

int volcli_export(struct volcli *x, const char *file)
{
	struct volcli_slot *sl;
	uint64_t vsize, lba, n;
	char vs[24];
	struct stat st;

	if (volcli_attach(x))
		return 1;
	x->file = file;
	x->out = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (x->out < 0)
		return volcli_fail("%s: export file %s: %s", x->ssd, file, strerror(errno));
	if (fstat(x->out, &st) || !(S_ISREG(st.st_mode) || S_ISBLK(st.st_mode)))
		return volcli_fail(
		    "%s: export file %s is neither a regular file nor a block device", x->ssd,
		    file);
	/* A regular file keeps the volume's zero chunks as holes; a device gets every byte. */
	x->sparse = S_ISREG(st.st_mode);
	vsize = x->a.lba_count << x->lba_shift;
	for (lba = 0; lba < x->a.lba_count; lba += n) {
		n = x->a.lba_count - lba;
		if (n > VOLCLI_CHUNK >> x->lba_shift)
			n = VOLCLI_CHUNK >> x->lba_shift;
		if (volcli_slot(x, &sl) || volcli_submit(x, sl, false, lba, (uint32_t)n))
			return 1;
	}
	if (volcli_drain(x))
		return 1;
	if ((x->sparse && ftruncate(x->out, (off_t)vsize)) || fsync(x->out))
		return volcli_fail("%s: export file %s: %s", x->ssd, file, strerror(errno));
	ssd_size_str(vsize, vs, sizeof(vs));
	printf("%s: volume %s exported to %s (%s)\n", x->ssd, x->vol, file, vs);
	return 0;
}
