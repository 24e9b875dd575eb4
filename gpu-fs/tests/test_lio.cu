/* GPU tests of the lio backend: gemini_dev_read/gemini_dev_write/gemini_dev_sync on a GVDK file
 * held by a softssd volume, the GPU driving NVMe queue pairs of the LightIOV ABI and softssd
 * checking every command. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gemini.h"
#include "gvdk.h"
#include "lio_fixture.h"

extern "C" { /* the client library is C */
#include "lio_client.h"
}

#define CK_CUDA(x)                                                                                 \
	ck_assert_msg((x) == cudaSuccess, "%s: %s", #x, cudaGetErrorString(cudaGetLastError()))

static char tdir[512], tfile[600];
static struct lio_fx fx;

static void setup(void)
{
	const char *base = getenv("GPUFS_TEST_DIR");
	int r;

	snprintf(tdir, sizeof(tdir), "%s/gemini-lio-XXXXXX", base ? base : ".");
	ck_assert_ptr_nonnull(mkdtemp(tdir));
	snprintf(tfile, sizeof(tfile), "%s/f.gvdk", tdir);
	r = lio_fx_start(&fx, tdir, 512);
	if (r == -ENOENT)
		return; /* each case skips */
	ck_assert_msg(r == 0, "softssd did not start (%s): see %s", strerror(-r), fx.log);
}

static void teardown(void)
{
	char cmd[700];

	lio_fx_stop(&fx);
	if (getenv("LIO_KEEP_LOG"))
		lio_fx_sh(&fx, "cat '%s' >&2", fx.log);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tdir);
	ck_assert_int_eq(system(cmd), 0);
}

#define SKIP_WITHOUT_LVMM()                                                                        \
	do {                                                                                       \
		if (!fx.lvmm) {                                                                    \
			printf("SKIP: %s: LVMM (the lvmm binary) not set\n", __func__);            \
			return;                                                                    \
		}                                                                                  \
	} while (0)

__host__ __device__ static inline uint8_t pat(uint64_t o, uint32_t seed)
{
	uint64_t x = (o >> 2) * 0x9e3779b97f4a7c15ull + seed;

	x ^= x >> 29;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 32;
	return (uint8_t)(x >> ((o & 3) * 8));
}

/* A GVDK file of pat(offset, seed) data; returns the data and the header. */
static uint8_t *make_file(const char *path, uint64_t size, uint32_t seed, struct gvdk_header *h)
{
	char err[GVDK_ERRLEN];
	uint8_t *ref = (uint8_t *)malloc(size);
	int fd;

	ck_assert_msg(gvdk_create(path, size, NULL, err) == 0, "%s", err);
	for (uint64_t i = 0; i < size; i++)
		ref[i] = pat(i, seed);
	fd = open(path, O_RDWR);
	ck_assert_int_eq(pread(fd, h, sizeof(*h), 0), (ssize_t)sizeof(*h));
	ck_assert_int_eq(pwrite(fd, ref, size, (off_t)h->data_offset), (ssize_t)size);
	ck_assert_int_eq(fsync(fd), 0);
	close(fd);
	return ref;
}

/* size bytes of path at off. */
static uint8_t *slurp(const char *path, uint64_t off, uint64_t size)
{
	uint8_t *b = (uint8_t *)malloc(size);
	int fd = open(path, O_RDONLY);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, b, size, (off_t)off), (ssize_t)size);
	close(fd);
	return b;
}

__device__ static inline uint32_t rnd(uint32_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

/* Random reads of 1..maxlen bytes; every fourth round the whole warp shares one request. */
__global__ static void k_read_check(struct gemini_dev *d, int fd, const uint8_t *ref, uint64_t size,
				    int iters, uint32_t seed, uint32_t maxlen, uint8_t *scratch,
				    unsigned long long *bad)
{
	uint64_t tid = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
	uint32_t s = seed * 2654435761u + (uint32_t)tid * 97u + 1;
	uint8_t *buf;

	for (int it = 0; it < iters; it++) {
		uint64_t off = ((uint64_t)rnd(&s) * 4099u) % size;
		uint64_t len = 1 + rnd(&s) % maxlen;

		if (it % 4 == 0) {
			off = __shfl_sync(0xffffffff, off, 0);
			len = __shfl_sync(0xffffffff, len, 0);
			buf = scratch + (tid & ~31ull) * maxlen;
		} else {
			buf = scratch + tid * maxlen;
		}
		if (len > size - off)
			len = size - off;
		int64_t r = gemini_dev_read(d, fd, off, len, buf);

		__syncwarp();
		if (r != (int64_t)len) {
			atomicAdd(bad, 1ull << 32);
			continue;
		}
		for (uint64_t i = 0; i < len; i++)
			if (buf[i] != ref[off + i]) {
				atomicAdd(bad, 1);
				break;
			}
		__syncwarp();
	}
}

/* Thread t owns [t*stripe, (t+1)*stripe): random chunks of it get new bytes (ref kept in step). */
__global__ static void k_write(struct gemini_dev *d, int fd, uint8_t *ref, uint64_t size,
			       uint32_t stripe, int iters, uint32_t seed, uint8_t *scratch,
			       unsigned long long *bad)
{
	uint64_t tid = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
	uint32_t s = seed * 2654435761u + (uint32_t)tid * 131u + 7;
	uint64_t base = tid * stripe;
	uint8_t *buf = scratch + tid * stripe;

	if (base >= size)
		return;
	for (int it = 0; it < iters; it++) {
		uint32_t a = rnd(&s) % stripe, len = 1 + rnd(&s) % (stripe - a);

		if (base + a + len > size)
			continue;
		for (uint32_t i = 0; i < len; i++) {
			buf[i] = (uint8_t)rnd(&s);
			ref[base + a + i] = buf[i];
		}
		if (gemini_dev_write(d, fd, base + a, len, buf) != (int64_t)len)
			atomicAdd(bad, 1);
	}
}

static struct gemini_ctx *lio_ctx(const char *vol, size_t page, size_t cache, unsigned prefetch,
				  unsigned nq, unsigned depth)
{
	struct gemini_config k;
	struct gemini_ctx *c;

	memset(&k, 0, sizeof(k));
	k.backend = GEMINI_BACKEND_LIO;
	k.page_size = page;
	k.cache_size = cache;
	k.prefetch = prefetch;
	k.nqueues = nq;
	k.qdepth = depth;
	k.lio_ssd = fx.sock;
	k.lio_volume = vol;
	ck_assert_int_eq(gemini_init(&c, &k), 0);
	return c;
}

/*
 * The file imported into a volume; reads, writes, reads again, syncs, closes; the volume exported
 * must hold the reference byte for byte, and the host file its original data (the GPU wrote the
 * volume, never the file).
 */
static void lio_roundtrip(size_t page, size_t cache, unsigned prefetch, uint64_t size,
			  unsigned threads, int iters, unsigned nq, unsigned depth)
{
	struct gvdk_header h;
	struct gemini_stats st;
	struct gemini_ctx *c;
	unsigned long long *bad, hbad = 0;
	uint8_t *ref = make_file(tfile, size, 1, &h), *orig, *dref, *scratch, *vol, *host;
	const uint32_t maxlen = 6000, stripe = (uint32_t)(size / threads);
	char out[700];
	int fd;

	orig = (uint8_t *)malloc(size);
	memcpy(orig, ref, size);
	ck_assert_int_eq(lio_fx_import(&fx, "gv", ((h.file_size >> 20) + 2) << 20, tfile), 0);
	c = lio_ctx("gv", page, cache, prefetch, nq, depth);
	fd = gemini_open(c, tfile, O_RDWR);
	ck_assert_msg(fd >= 0, "gemini_open: %s", gemini_last_error(c));
	printf("  backend: %s\n", gemini_backend_desc(c));
	CK_CUDA(cudaMalloc((void **)&dref, size));
	CK_CUDA(
	    cudaMalloc((void **)&scratch, (size_t)threads * (maxlen > stripe ? maxlen : stripe)));
	CK_CUDA(cudaMalloc((void **)&bad, 8));
	CK_CUDA(cudaMemcpy(dref, ref, size, cudaMemcpyHostToDevice));
	CK_CUDA(cudaMemset(bad, 0, 8));
	k_read_check<<<threads / 256, 256>>>(gemini_device(c), fd, dref, size, iters, 3, maxlen,
					     scratch, bad);
	CK_CUDA(cudaDeviceSynchronize());
	CK_CUDA(cudaMemcpy(&hbad, bad, 8, cudaMemcpyDeviceToHost));
	ck_assert_msg(hbad == 0, "reads: %llu short, %llu mismatched", hbad >> 32,
		      hbad & 0xffffffff);
	k_write<<<threads / 256, 256>>>(gemini_device(c), fd, dref, size, stripe, 8, 5, scratch,
					bad);
	CK_CUDA(cudaDeviceSynchronize());
	k_read_check<<<threads / 256, 256>>>(gemini_device(c), fd, dref, size, iters, 9, maxlen,
					     scratch, bad);
	CK_CUDA(cudaDeviceSynchronize());
	CK_CUDA(cudaMemcpy(&hbad, bad, 8, cudaMemcpyDeviceToHost));
	ck_assert_msg(hbad == 0, "after writes: %llu failed/short, %llu mismatched", hbad >> 32,
		      hbad & 0xffffffff);
	ck_assert_int_eq(gemini_stats(c, &st), 0);
	printf("  hits %llu misses %llu evictions %llu writebacks %llu commands %llu\n",
	       (unsigned long long)st.hits, (unsigned long long)st.misses,
	       (unsigned long long)st.evictions, (unsigned long long)st.writebacks,
	       (unsigned long long)st.commands);
	ck_assert_uint_eq(st.io_errors, 0);
	ck_assert_uint_gt(st.commands, 0);
	if (cache < size)
		ck_assert_uint_gt(st.evictions, 0);
	ck_assert_int_eq(gemini_sync(c, fd), 0);
	ck_assert_int_eq(gemini_close(c, fd), 0);
	gemini_exit(c);
	CK_CUDA(cudaMemcpy(ref, dref, size, cudaMemcpyDeviceToHost));
	snprintf(out, sizeof(out), "%s/vol.out", tdir);
	ck_assert_int_eq(lio_fx_export(&fx, "gv", out), 0);
	vol = slurp(out, h.data_offset, size);
	for (uint64_t i = 0; i < size; i++)
		if (vol[i] != ref[i])
			ck_abort_msg("volume byte %llu is %#x, reference %#x",
				     (unsigned long long)(h.data_offset + i), vol[i], ref[i]);
	ck_assert_int_ne(memcmp(ref, orig, size), 0);
	host = slurp(tfile, h.data_offset, size);
	ck_assert_msg(!memcmp(host, orig, size), "the host file changed: only the volume may");
	free(vol);
	free(host);
	free(ref);
	free(orig);
	cudaFree(dref);
	cudaFree(scratch);
	cudaFree(bad);
}

/* 4 KiB pages, a cache of an eighth of the file: misses, dirty evictions, one LBA a command. */
START_TEST(lio_rw_4k_pages)
{
	SKIP_WITHOUT_LVMM();
	lio_roundtrip(4096, 2 << 20, 0, 16 << 20, 2048, 16, 8, 64);
}
END_TEST

/* 256 KiB pages plus read-ahead on shallow queues: each page two 128 KiB commands with PRP
 * lists, rounds of several batches, more warps than queue pairs. */
START_TEST(lio_rw_256k_pages_readahead)
{
	SKIP_WITHOUT_LVMM();
	lio_roundtrip(256 << 10, 4 << 20, 2, 16 << 20, 1024, 8, 2, 8);
}
END_TEST

__global__ static void k_hostile(struct gemini_dev *d, uint64_t vol_bytes, uint8_t *buf, int *st)
{
	/* past the volume's end: the daemon's lio_sqe_check refuses (LBA Out of Range) */
	st[0] = gm_raw_cmd<GEMINI_BK_LIO>(d, NVME_CMD_READ, vol_bytes, 4096, buf);
	st[1] = gm_raw_cmd<GEMINI_BK_LIO>(d, NVME_CMD_WRITE, vol_bytes - 4096, 8192, buf);
	/* not a whole LBA: the GPU driver refuses before any command */
	st[2] = gm_raw_cmd<GEMINI_BK_LIO>(d, NVME_CMD_READ, 512, 4096, buf);
	/* the queue pair still serves */
	st[3] = gm_raw_cmd<GEMINI_BK_LIO>(d, NVME_CMD_READ, 0, 4096, buf);
}

/* Commands the GPU sends outside the volume are refused by softssd, counted as rejected, and
 * the queue pair keeps serving; a volume that does not hold the file and a second file are
 * refused at gemini_open. */
START_TEST(lio_daemon_checks_gpu_commands)
{
	const uint64_t size = 4 << 20, vbytes = 8 << 20;
	struct lio_ssd_stats ss;
	struct lio_client *cl;
	struct gvdk_header h, hb;
	struct gemini_ctx *c;
	char other[700], err[256];
	uint8_t *buf, *hdr;
	int *st, hst[4], fd;

	SKIP_WITHOUT_LVMM();
	free(make_file(tfile, size, 1, &h));
	snprintf(other, sizeof(other), "%s/other.gvdk", tdir);
	free(make_file(other, size, 2, &hb));
	ck_assert_int_eq(lio_fx_import(&fx, "gv", vbytes, tfile), 0);
	c = lio_ctx("gv", 65536, 1 << 20, 0, 2, 16);
	ck_assert_int_eq(gemini_open(c, other, O_RDONLY), -ESTALE);
	printf("  other file: %s\n", gemini_last_error(c));
	fd = gemini_open(c, tfile, O_RDWR);
	ck_assert_msg(fd >= 0, "gemini_open: %s", gemini_last_error(c));
	ck_assert_int_eq(gemini_open(c, tfile, O_RDONLY), -EBUSY);
	CK_CUDA(cudaMalloc((void **)&buf, 8192));
	CK_CUDA(cudaMalloc((void **)&st, sizeof(hst)));
	k_hostile<<<1, 1>>>(gemini_device(c), vbytes, buf, st);
	CK_CUDA(cudaDeviceSynchronize());
	CK_CUDA(cudaMemcpy(hst, st, sizeof(hst), cudaMemcpyDeviceToHost));
	printf("  statuses: %#x %#x %#x %#x\n", hst[0], hst[1], hst[2], hst[3]);
	ck_assert_int_eq(NVME_STATUS_SC(hst[0]), NVME_SC_LBA_RANGE);
	ck_assert_int_eq(NVME_STATUS_SC(hst[1]), NVME_SC_LBA_RANGE);
	ck_assert_int_eq(NVME_STATUS_SC(hst[2]), NVME_SC_INVALID_FIELD);
	ck_assert_int_eq(hst[3], 0);
	hdr = (uint8_t *)malloc(4096);
	CK_CUDA(cudaMemcpy(hdr, buf, 4096, cudaMemcpyDeviceToHost));
	ck_assert_msg(!memcmp(hdr, &h, sizeof(h)), "LBA 0 of the volume is not the file's header");
	free(hdr);
	ck_assert_int_eq(lio_client_connect(&cl, fx.sock, "stats", NULL, err, sizeof(err)), 0);
	ck_assert_int_eq(lio_client_ssd_stats(cl, &ss), 0);
	printf("  softssd: %llu commands, %llu rejected\n", (unsigned long long)ss.cmds,
	       (unsigned long long)ss.rejected);
	ck_assert_uint_ge(ss.rejected, 2);
	lio_client_close(cl);
	ck_assert_int_eq(gemini_close(c, fd), 0);
	gemini_exit(c);
	cudaFree(buf);
	cudaFree(st);
}
END_TEST

/* No daemon at the socket: gemini_open fails naming it, it does not hang or abort. */
START_TEST(lio_no_daemon)
{
	struct gvdk_header h;
	struct gemini_config k;
	struct gemini_ctx *c;

	SKIP_WITHOUT_LVMM();
	free(make_file(tfile, 1 << 20, 1, &h));
	lio_fx_stop(&fx);
	memset(&k, 0, sizeof(k));
	k.backend = GEMINI_BACKEND_LIO;
	k.lio_ssd = fx.sock;
	k.lio_volume = "gv";
	ck_assert_int_eq(gemini_init(&c, &k), 0);
	ck_assert_int_lt(gemini_open(c, tfile, O_RDONLY), 0);
	printf("  %s\n", gemini_last_error(c));
	ck_assert_ptr_nonnull(strstr(gemini_last_error(c), fx.sock));
	gemini_exit(c);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("gemini-lio");
	SRunner *sr;
	int nf;

#define CASE(fn, secs)                                                                             \
	do {                                                                                       \
		TCase *tc = tcase_create(#fn);                                                     \
		tcase_add_checked_fixture(tc, setup, teardown);                                    \
		tcase_set_timeout(tc, secs);                                                       \
		tcase_add_test(tc, fn);                                                            \
		suite_add_tcase(s, tc);                                                            \
	} while (0)
	CASE(lio_rw_4k_pages, 240);
	CASE(lio_rw_256k_pages_readahead, 240);
	CASE(lio_daemon_checks_gpu_commands, 120);
	CASE(lio_no_daemon, 60);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf ? 1 : 0;
}
