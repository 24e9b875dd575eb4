// GPU tests of libgemini: thousands of threads reading and writing through the page cache against
// a reference copy (byte-exact), eviction under pressure, gemini_dev_sync durability seen from a
// fresh process (whole and partial grids, two files), cross-process sharing through CUDA IPC, one
// process at a time and both at once, failed write-backs, whole-page writes racing readers, a
// controller that stops mid-run, bounds and hostile NVMe commands, the mapped path's coherence
// with the page cache.
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gemini.h"
#include "gvdk.h"

extern char **environ;

#define CK_CUDA(x)                                                                                 \
	ck_assert_msg((x) == cudaSuccess, "%s: %s", #x, cudaGetErrorString(cudaGetLastError()))

static char tdir[512], tfile[600], self_exe[4096];

static void setup(void)
{
	const char *base = getenv("GPUFS_TEST_DIR");

	snprintf(tdir, sizeof(tdir), "%s/gemini-gpu-XXXXXX", base ? base : ".");
	ck_assert_ptr_nonnull(mkdtemp(tdir));
	snprintf(tfile, sizeof(tfile), "%s/f.gvdk", tdir);
}

static void teardown(void)
{
	char cmd[700];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tdir);
	ck_assert_int_eq(system(cmd), 0);
}

__host__ __device__ static inline uint8_t pat(uint64_t o, uint32_t seed)
{
	uint64_t x = (o >> 2) * 0x9e3779b97f4a7c15ull + seed;

	x ^= x >> 29;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 32;
	return (uint8_t)(x >> ((o & 3) * 8));
}

/* A GVDK file whose data is pat(offset, seed), written and synced through the file system. */
static uint8_t *make_file(const char *path, uint64_t size, uint32_t seed)
{
	char err[GVDK_ERRLEN];
	struct gvdk_header h;
	uint8_t *ref = (uint8_t *)malloc(size);
	int fd;

	ck_assert_msg(gvdk_create(path, size, NULL, err) == 0, "%s", err);
	for (uint64_t i = 0; i < size; i++)
		ref[i] = pat(i, seed);
	fd = open(path, O_RDWR);
	ck_assert_int_eq(pread(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	ck_assert_int_eq(pwrite(fd, ref, size, (off_t)h.data_offset), (ssize_t)size);
	ck_assert_int_eq(fsync(fd), 0);
	close(fd);
	return ref;
}

/* The file's data as the disk holds it (O_DIRECT: no stale page cache). */
static uint8_t *read_back(const char *path, uint64_t size)
{
	struct gvdk_header h;
	uint8_t *buf;
	int fd = open(path, O_RDONLY | O_DIRECT);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(posix_memalign((void **)&buf, 4096, 4096), 0);
	ck_assert_int_eq(pread(fd, buf, 4096, 0), 4096);
	memcpy(&h, buf, sizeof(h));
	free(buf);
	ck_assert_int_eq(posix_memalign((void **)&buf, 4096, size), 0);
	ck_assert_int_eq(pread(fd, buf, size, (off_t)h.data_offset), (ssize_t)size);
	close(fd);
	return buf;
}

__device__ static inline uint32_t rnd(uint32_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

/* Random reads of 1..maxlen bytes; every fourth round the whole warp shares one request. Built
 * with the in-process controller's queue driver alone (the other kernels here hold both). */
__global__ static void k_read_check(struct gemini_dev *d, int fd, const uint8_t *ref, uint64_t size,
				    int iters, uint32_t seed, uint32_t maxlen, uint8_t *scratch,
				    unsigned long long *bad)
{
	uint64_t tid = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
	uint32_t s = seed * 2654435761u + (uint32_t)tid * 97u + 1;
	uint8_t *buf = scratch + tid * maxlen;

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
		int64_t r = gemini_dev_read<GEMINI_BK_HOST>(d, fd, off, len, buf);

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

__global__ static void k_sync(struct gemini_dev *d, int fd, int *rc)
{
	int r = gemini_dev_sync(d, fd);

	if (r)
		atomicExch(rc, r);
}

/* tune (may be NULL) supplies the queue shape, read-ahead and controller threads. */
static struct gemini_ctx *ctx_open(enum gemini_backend b, int memns, size_t page, size_t cache,
				   int flags, int *fd, const struct gemini_config *tune)
{
	struct gemini_config k;
	struct gemini_ctx *c;

	memset(&k, 0, sizeof(k));
	if (tune)
		k = *tune;
	k.backend = b;
	k.memory_namespace = memns;
	k.page_size = page;
	k.cache_size = cache;
	if (!tune) {
		k.nqueues = 32;
		k.qdepth = 64;
	}
	ck_assert_int_eq(gemini_init(&c, &k), 0);
	*fd = gemini_open(c, tfile, flags);
	ck_assert_msg(*fd >= 0, "gemini_open: %s", gemini_last_error(c));
	printf("  backend: %s\n", gemini_backend_desc(c));
	return c;
}

/* Reads, writes, reads again, syncs, and compares the disk with the reference byte for byte. */
static void rw_roundtrip(enum gemini_backend b, int memns, size_t page, size_t cache, uint64_t size,
			 unsigned threads, int iters, const struct gemini_config *tune)
{
	struct gemini_stats st;
	struct gemini_ctx *c;
	unsigned long long *bad, hbad = 0;
	uint8_t *ref = make_file(tfile, size, 1), *dref, *scratch, *disk;
	const uint32_t maxlen = 6000, stripe = (uint32_t)(size / threads);
	int fd;

	c = ctx_open(b, memns, page, cache, O_RDWR, &fd, tune);
	CK_CUDA(cudaMalloc((void **)&dref, size));
	CK_CUDA(
	    cudaMalloc((void **)&scratch, (size_t)threads * (maxlen > stripe ? maxlen : stripe)));
	CK_CUDA(cudaMalloc((void **)&bad, 8));
	CK_CUDA(cudaMemcpy(dref, ref, size, cudaMemcpyHostToDevice));
	cudaMemset(bad, 0, 8);
	fprintf(stderr, "  phase: random reads\n"); /* where a hang was (GEMINI_WATCHDOG) */
	k_read_check<<<threads / 256, 256>>>(gemini_device(c), fd, dref, size, iters, 3, maxlen,
					     scratch, bad);
	CK_CUDA(cudaDeviceSynchronize());
	CK_CUDA(cudaMemcpy(&hbad, bad, 8, cudaMemcpyDeviceToHost));
	ck_assert_msg(hbad == 0, "reads: %llu short, %llu mismatched", hbad >> 32,
		      hbad & 0xffffffff);
	fprintf(stderr, "  phase: writes\n");
	k_write<<<threads / 256, 256>>>(gemini_device(c), fd, dref, size, stripe, 8, 5, scratch,
					bad);
	CK_CUDA(cudaDeviceSynchronize());
	fprintf(stderr, "  phase: reads after the writes\n");
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
	if (cache < size)
		ck_assert_uint_gt(st.evictions, 0);
	fprintf(stderr, "  phase: sync and close\n");
	ck_assert_int_eq(gemini_sync(c, fd), 0);
	ck_assert_int_eq(gemini_close(c, fd), 0);
	gemini_exit(c);
	CK_CUDA(cudaMemcpy(ref, dref, size, cudaMemcpyDeviceToHost));
	disk = read_back(tfile, size);
	for (uint64_t i = 0; i < size; i++)
		if (disk[i] != ref[i])
			ck_abort_msg("disk byte %llu is %#x, reference %#x", (unsigned long long)i,
				     disk[i], ref[i]);
	free(disk);
	free(ref);
	cudaFree(dref);
	cudaFree(scratch);
	cudaFree(bad);
}

START_TEST(rw_nvme_disk_4k)
{
	rw_roundtrip(GEMINI_BACKEND_NVME, 0, 4096, 4 << 20, 32 << 20, 4096, 24, NULL);
}
END_TEST

START_TEST(rw_nvme_memory_64k)
{
	rw_roundtrip(GEMINI_BACKEND_NVME, 1, 65536, 8 << 20, 32 << 20, 4096, 24, NULL);
}
END_TEST

START_TEST(rw_posix_16k)
{
	rw_roundtrip(GEMINI_BACKEND_POSIX, 0, 16384, 4 << 20, 16 << 20, 2048, 24, NULL);
}
END_TEST

/* 16 pages for 1024 threads: warps wait for releases, dirty pages are written back on eviction. */
START_TEST(eviction_under_pressure)
{
	rw_roundtrip(GEMINI_BACKEND_NVME, 0, 4096, 16 * 4096, 4 << 20, 1024, 6, NULL);
}
END_TEST

/*
 * One shallow queue for 128 warps, 16 pages read ahead on every miss, dirty pages evicted by
 * the read-ahead: each miss needs more commands than the queue has slots, and a warp's
 * commands wait behind other warps' for the same slots. Every warp must still get through
 * (no warp may hold one slot while it waits for another).
 */
START_TEST(readahead_on_a_shallow_queue)
{
	struct gemini_config t;

	memset(&t, 0, sizeof(t));
	t.nqueues = 1;
	t.qdepth = 8;
	t.prefetch = 16;
	t.host_threads = 2;
	rw_roundtrip(GEMINI_BACKEND_NVME, 1, 16384, 1 << 20, 16 << 20, 4096, 8, &t);
}
END_TEST

static int spawn_self(const char *mode, const char *arg)
{
	char *argv[] = {self_exe, (char *)mode, tfile, (char *)arg, NULL};
	pid_t pid;
	int st;

	ck_assert_int_eq(posix_spawn(&pid, self_exe, NULL, NULL, argv, environ), 0);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st));
	return WEXITSTATUS(st);
}

__global__ static void k_bulk(struct gemini_dev *d, int fd, const uint8_t *src, uint64_t len)
{
	uint64_t warp = (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) / 32;
	uint64_t nw = (gridDim.x * (uint64_t)blockDim.x) / 32;

	for (uint64_t o = warp * 8192; o < len; o += nw * 8192)
		gemini_dev_write(d, fd, o, 8192, src + o);
}

/* child: overwrite the first 4 MiB with pat(.., 77), then gemini_dev_sync or not, and die without
 * closing */
static int child_write(const char *path, int sync)
{
	struct gemini_config k;
	struct gemini_ctx *c;
	uint8_t *scratch;
	int fd, *rc, hrc = 0;
	uint8_t *h = (uint8_t *)malloc(4 << 20);

	snprintf(tfile, sizeof(tfile), "%s", path);
	memset(&k, 0, sizeof(k));
	k.page_size = 65536;
	k.cache_size = 64 << 20;
	if (gemini_init(&c, &k) || (fd = gemini_open(c, path, O_RDWR)) < 0)
		return 10;
	for (int i = 0; i < (4 << 20); i++)
		h[i] = pat((uint64_t)i, 77);
	cudaMalloc((void **)&scratch, 4 << 20);
	cudaMalloc((void **)&rc, 4);
	cudaMemset(rc, 0, 4);
	cudaMemcpy(scratch, h, 4 << 20, cudaMemcpyHostToDevice);
	/* the whole grid writes the pattern, one warp-uniform 8 KiB request at a time */
	k_bulk<<<16, 256>>>(gemini_device(c), fd, scratch, 4 << 20);
	if (cudaDeviceSynchronize() != cudaSuccess)
		return 11;
	if (sync) {
		k_sync<<<8, 128>>>(gemini_device(c), fd, rc);
		if (cudaDeviceSynchronize() != cudaSuccess)
			return 12;
		cudaMemcpy(&hrc, rc, 4, cudaMemcpyDeviceToHost);
		if (hrc)
			return 13;
	}
	_exit(0); /* no gemini_close, no exit handlers: only what gemini_dev_sync made durable
		     survives */
}

START_TEST(sync_durability_across_processes)
{
	uint8_t *disk;
	uint64_t i, diff = 0;

	free(make_file(tfile, 8 << 20, 1));
	/* without gemini_dev_sync the process dies with the data only in HBM: the disk keeps the
	 * old bytes
	 */
	ck_assert_int_eq(spawn_self("--child-write", "nosync"), 0);
	disk = read_back(tfile, 8 << 20);
	for (i = 0; i < (4 << 20); i++)
		diff += disk[i] != pat(i, 1);
	ck_assert_uint_eq(diff, 0);
	free(disk);
	/* with gemini_dev_sync (a device call from 1024 threads) the new bytes are on the disk */
	ck_assert_int_eq(spawn_self("--child-write", "sync"), 0);
	disk = read_back(tfile, 8 << 20);
	for (i = 0; i < (4 << 20); i++)
		if (disk[i] != pat(i, 77))
			ck_abort_msg("byte %llu not durable", (unsigned long long)i);
	for (; i < (8 << 20); i++)
		if (disk[i] != pat(i, 1))
			ck_abort_msg("byte %llu past the written range changed",
				     (unsigned long long)i);
	free(disk);
}
END_TEST

__global__ static void k_check_region(struct gemini_dev *d, int fd, uint64_t off, uint64_t len,
				      uint32_t seed, uint8_t *scratch, unsigned long long *bad)
{
	uint64_t warp = (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) / 32;
	uint64_t nw = (gridDim.x * (uint64_t)blockDim.x) / 32;
	uint8_t *buf = scratch + warp * 4096;

	for (uint64_t o = warp * 4096; o < len; o += nw * 4096) {
		if (gemini_dev_read(d, fd, off + o, 4096, buf) != 4096) {
			if ((threadIdx.x & 31) == 0)
				atomicAdd(bad, 1ull << 32);
			continue;
		}
		__syncwarp();
		for (int i = threadIdx.x & 31; i < 4096; i += 32)
			if (buf[i] != pat(off + o + i, seed))
				atomicAdd(bad, 1);
		__syncwarp();
	}
}

__global__ static void k_fill_region(struct gemini_dev *d, int fd, uint64_t off, uint64_t len,
				     uint32_t seed, uint8_t *scratch)
{
	uint64_t warp = (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) / 32;
	uint64_t nw = (gridDim.x * (uint64_t)blockDim.x) / 32;
	uint8_t *buf = scratch + warp * 4096;

	for (uint64_t o = warp * 4096; o < len; o += nw * 4096) {
		for (int i = threadIdx.x & 31; i < 4096; i += 32)
			buf[i] = pat(off + o + i, seed);
		__syncwarp();
		gemini_dev_write(d, fd, off + o, 4096, buf);
		__syncwarp();
	}
}

static int child_ipc(const char *hfile)
{
	struct gemini_ipc_handle h;
	struct gemini_dev *d;
	void *cookie;
	uint8_t *scratch;
	unsigned long long *bad, hbad = 1;
	FILE *f = fopen(hfile, "rb");

	if (!f || fread(&h, sizeof(h), 1, f) != 1)
		return 20;
	fclose(f);
	if (gemini_ipc_import(&h, &d, &cookie))
		return 21;
	cudaMalloc((void **)&scratch, 64 * 4096);
	cudaMalloc((void **)&bad, 8);
	cudaMemset(bad, 0, 8);
	/* region A holds the exporter's unsynced writes: only the shared cache has them */
	k_check_region<<<8, 256>>>(d, 0, 0, 1 << 20, 33, scratch, bad);
	k_fill_region<<<8, 256>>>(d, 0, 2 << 20, 1 << 20, 44, scratch);
	if (cudaDeviceSynchronize() != cudaSuccess)
		return 22;
	cudaMemcpy(&hbad, bad, 8, cudaMemcpyDeviceToHost);
	gemini_ipc_close(cookie);
	return hbad ? 23 : 0;
}

START_TEST(cross_process_sharing)
{
	struct gemini_ipc_handle h;
	struct gemini_stats st0, st1;
	struct gemini_ctx *c;
	uint8_t *scratch;
	unsigned long long *bad, hbad = 0;
	char hfile[700];
	FILE *f;
	int fd;

	free(make_file(tfile, 8 << 20, 1));
	c = ctx_open(GEMINI_BACKEND_NVME, 0, 65536, 32 << 20, O_RDWR, &fd, NULL);
	ck_assert_int_eq(fd, 0);
	CK_CUDA(cudaMalloc((void **)&scratch, 64 * 4096));
	CK_CUDA(cudaMalloc((void **)&bad, 8));
	cudaMemset(bad, 0, 8);
	k_fill_region<<<8, 256>>>(gemini_device(c), fd, 0, 1 << 20, 33, scratch);
	CK_CUDA(cudaDeviceSynchronize());
	ck_assert_int_eq(gemini_ipc_export(c, &h), 0);
	snprintf(hfile, sizeof(hfile), "%s/ipc", tdir);
	f = fopen(hfile, "wb");
	ck_assert_int_eq(fwrite(&h, sizeof(h), 1, f), 1);
	fclose(f);
	gemini_stats(c, &st0);
	ck_assert_int_eq(spawn_self("--child-ipc", hfile), 0);
	gemini_stats(c, &st1);
	ck_assert_uint_gt(st1.hits, st0.hits); /* the child's reads of region A hit our pages */
	/* the child's writes to region B are in the shared cache */
	k_check_region<<<8, 256>>>(gemini_device(c), fd, 2 << 20, 1 << 20, 44, scratch, bad);
	CK_CUDA(cudaDeviceSynchronize());
	CK_CUDA(cudaMemcpy(&hbad, bad, 8, cudaMemcpyDeviceToHost));
	ck_assert_msg(hbad == 0, "region B: %llu bad", hbad);
	ck_assert_int_eq(gemini_close(c, fd), 0);
	gemini_exit(c);
	cudaFree(scratch);
	cudaFree(bad);
}
END_TEST

__global__ static void k_bounds(struct gemini_dev *d, int rw, int ro, uint64_t size, uint8_t *buf,
				uint8_t *foreign, long long *out)
{
	out[0] = gemini_dev_read(d, ro, size - 10, 20, buf);
	out[1] = gemini_dev_write(d, ro, 0, 16, buf);
	out[2] = gemini_dev_read(d, 9, 0, 16, buf);
	out[3] = gemini_dev_read(d, -1, 0, 16, buf);
	out[4] = gemini_dev_read_direct(d, rw, 100, 4096, buf);
	out[5] = gemini_dev_read(d, ro, size - 10, 10, buf);
	out[6] = gemini_dev_read(d, rw, UINT64_MAX - 5, 10, buf);
	/* hostile commands straight into a queue: the controller (lio_sqe_check, then its
	 * namespace) must refuse each */
	out[7] = gm_raw_cmd<GEMINI_BK_ALL>(d, NVME_CMD_READ, 1ull << 50, 4096, d->data);
	out[8] =
	    gm_raw_cmd<GEMINI_BK_ALL>(d, NVME_CMD_READ, gm_map(&d->files[rw], 0), 4096, foreign);
	out[9] =
	    gm_raw_cmd<GEMINI_BK_ALL>(d, NVME_CMD_WRITE, gm_map(&d->files[ro], 0), 4096, d->data);
	out[10] = gm_raw_cmd<GEMINI_BK_ALL>(d, 0x7f, 0, 4096, d->data);
	out[11] = gm_raw_cmd<GEMINI_BK_ALL>(d, NVME_CMD_READ, gm_map(&d->files[rw], 0), 256 << 10,
					    d->data);
	out[12] = gm_raw_cmd<GEMINI_BK_ALL>(d, NVME_CMD_READ, gm_map(&d->files[rw], 0), 4096,
					    d->data + 2);
	out[13] = gm_raw_cmd<GEMINI_BK_ALL>(d, NVME_CMD_READ, gm_map(&d->files[rw], 0) + 4096, 4096,
					    d->data - 4096);
	out[14] =
	    gm_raw_cmd<GEMINI_BK_HOST>(d, NVME_CMD_READ, gm_map(&d->files[rw], 0), 4096, d->data);
	/* calls built without the context's queue driver (the lio driver alone, on the in-process
	 * controller): refused, nothing sent */
	out[15] = gemini_dev_read<GEMINI_BK_LIO>(d, rw, 0, 16, buf);
	out[16] = gemini_dev_write<GEMINI_BK_LIO>(d, rw, 0, 16, buf);
	out[17] = gemini_dev_sync<GEMINI_BK_LIO>(d, rw);
	out[18] = gemini_dev_read_direct<GEMINI_BK_LIO>(d, rw, 0, 4096, buf);
	out[19] =
	    gm_raw_cmd<GEMINI_BK_LIO>(d, NVME_CMD_READ, gm_map(&d->files[rw], 0), 4096, d->data);
}

START_TEST(bounds_and_hostile_commands)
{
	struct gemini_ctx *c;
	uint8_t *buf, *foreign;
	long long *out, h[20];
	char second[620];
	int rw, ro;

	free(make_file(tfile, 1 << 20, 1));
	snprintf(second, sizeof(second), "%s/ro.gvdk", tdir);
	free(make_file(second, 1 << 20, 2));
	c = ctx_open(GEMINI_BACKEND_NVME, 0, 4096, 1 << 20, O_RDWR, &rw, NULL);
	ro = gemini_open(c, second, O_RDONLY);
	ck_assert_int_ge(ro, 0);
	CK_CUDA(cudaMalloc((void **)&buf, 1 << 16));
	CK_CUDA(cudaMalloc((void **)&foreign, 1 << 16));
	CK_CUDA(cudaMalloc((void **)&out, sizeof(h)));
	k_bounds<<<1, 1>>>(gemini_device(c), rw, ro, 1 << 20, buf, foreign, out);
	CK_CUDA(cudaDeviceSynchronize());
	CK_CUDA(cudaMemcpy(h, out, sizeof(h), cudaMemcpyDeviceToHost));
	ck_assert_int_eq(h[0], -22);
	ck_assert_int_eq(h[1], -22);
	ck_assert_int_eq(h[2], -22);
	ck_assert_int_eq(h[3], -22);
	ck_assert_int_eq(h[4], -22);
	ck_assert_int_eq(h[5], 10);
	ck_assert_int_eq(h[6], -22);
	/* statuses as lio_sqe_check gives them (Do Not Retry set), for softssd and lightiov.ko */
	ck_assert_int_eq(h[7], NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_LBA_RANGE) | NVME_STATUS_DNR);
	ck_assert_int_eq(h[8],
			 NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_DATA_XFER_ERROR) | NVME_STATUS_DNR);
	ck_assert_int_eq(h[9], NVME_STATUS(NVME_SCT_CMD_SPECIFIC, NVME_SC_ATTEMPTED_WRITE_RO) |
				   NVME_STATUS_DNR);
	ck_assert_int_eq(h[10],
			 NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_INVALID_OPCODE) | NVME_STATUS_DNR);
	/* longer than MDTS (128 KiB) */
	ck_assert_int_eq(h[11],
			 NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD) | NVME_STATUS_DNR);
	/* PRP1 not dword aligned */
	ck_assert_int_eq(h[12], NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_INVALID_PRP_OFFSET) |
				    NVME_STATUS_DNR);
	/* data just below the cache pages (the arena's own bookkeeping): outside the DMA window */
	ck_assert_int_eq(h[13],
			 NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_DATA_XFER_ERROR) | NVME_STATUS_DNR);
	ck_assert_int_eq(h[14], 0); /* and the controller still serves good commands */
	ck_assert_uint_eq(gemini_dev_driver(c), GEMINI_BK_HOST);
	ck_assert_int_eq(h[15], -EOPNOTSUPP);
	ck_assert_int_eq(h[16], -EOPNOTSUPP);
	ck_assert_int_eq(h[17], -EOPNOTSUPP);
	ck_assert_int_eq(h[18], -EOPNOTSUPP);
	ck_assert_int_eq(h[19],
			 NVME_STATUS(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD) | NVME_STATUS_DNR);
	ck_assert_int_eq(gemini_close(c, ro), 0);
	ck_assert_int_eq(gemini_close(c, rw), 0);
	ck_assert_int_eq(gemini_close(c, rw), -EBADF);
	gemini_exit(c);
}
END_TEST

/* ---- section: failure and concurrency cases (write-back errors, publish order, gemini_dev_sync,
 * bounded waits, two processes at once) ---- */

/* One 8-byte word of a tagged file: who wrote it, which generation, and where it lives. Torn or
 * foreign words (another file, another offset) fail the check; old or new generations pass. */
__host__ __device__ static inline uint64_t tag_word(uint32_t who, uint32_t gen, uint64_t off)
{
	return ((uint64_t)who << 56) | ((uint64_t)(gen & 0xffffff) << 32) | (uint32_t)(off / 8);
}

/* A GVDK file whose every word is tag_word(who, 0, offset). */
static void make_tag_file(const char *path, uint64_t size, uint32_t who)
{
	char err[GVDK_ERRLEN];
	struct gvdk_header h;
	uint64_t *w = (uint64_t *)malloc(size);
	int fd;

	ck_assert_msg(gvdk_create(path, size, NULL, err) == 0, "%s", err);
	for (uint64_t i = 0; i < size / 8; i++)
		w[i] = tag_word(who, 0, i * 8);
	fd = open(path, O_RDWR);
	ck_assert_int_eq(pread(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	ck_assert_int_eq(pwrite(fd, w, size, (off_t)h.data_offset), (ssize_t)size);
	ck_assert_int_eq(fsync(fd), 0);
	close(fd);
	free(w);
}

/* One warp writes pages [0, npages) of fd in order, whole pages; ack[p] = 1 where gemini_dev_write
 * said so.
 */
__global__ static void k_write_pages(struct gemini_dev *d, int fd, uint32_t page, uint32_t npages,
				     uint32_t seed, uint8_t *buf, int *ack, long long *last)
{
	for (uint32_t p = 0; p < npages; p++) {
		for (uint32_t i = threadIdx.x; i < page; i += 32)
			buf[i] = pat((uint64_t)p * page + i, seed);
		__syncwarp();
		int64_t r = gemini_dev_write(d, fd, (uint64_t)p * page, page, buf);

		__syncwarp();
		if (threadIdx.x == 0) {
			ack[p] = r == (int64_t)page;
			if (r < 0)
				*last = r;
		}
	}
}

/*
 * The controller refuses every write while the cache is full of dirty pages: an eviction's
 * write-back fails. The page must stay in the cache, dirty (the writer that needed the slot gets
 * the error), gemini_dev_sync must report -EIO, and once the device takes writes again a
 * gemini_dev_sync must put every acknowledged page on the disk. (Before: the failed write-back was
 * ignored, the page evicted and its acknowledged bytes lost.)
 */
START_TEST(writeback_failure_keeps_data)
{
	const uint32_t page = 4096, npages = 64;
	struct gemini_config t;
	struct gemini_ctx *c;
	uint8_t *buf, *disk;
	int *ack, hack[64], *rc, hrc = 0, fd, acked = 0;
	long long *last, hlast = 0;

	free(make_file(tfile, 1 << 20, 1));
	memset(&t, 0, sizeof(t));
	t.nqueues = 4;
	t.qdepth = 64;
	t.timeout_ms = 5000;
	c = ctx_open(GEMINI_BACKEND_NVME, 0, page, 16 * page, O_RDWR, &fd, &t);
	CK_CUDA(cudaMalloc((void **)&buf, page));
	CK_CUDA(cudaMalloc((void **)&ack, sizeof(hack)));
	CK_CUDA(cudaMalloc((void **)&rc, 4));
	CK_CUDA(cudaMalloc((void **)&last, 8));
	CK_CUDA(cudaMemset(rc, 0, 4));
	CK_CUDA(cudaMemset(last, 0, 8));
	ck_assert_int_eq(gemini_fault_inject(c, GEMINI_FAULT_WRITES), 0);
	k_write_pages<<<1, 32>>>(gemini_device(c), fd, page, npages, 55, buf, ack, last);
	CK_CUDA(cudaDeviceSynchronize());
	CK_CUDA(cudaMemcpy(hack, ack, sizeof(hack), cudaMemcpyDeviceToHost));
	CK_CUDA(cudaMemcpy(&hlast, last, 8, cudaMemcpyDeviceToHost));
	for (uint32_t p = 0; p < npages; p++)
		acked += hack[p];
	printf("  %d of %u page writes acknowledged with writes refused, last error %lld\n", acked,
	       npages, hlast);
	/* 16 pages of cache cannot take 64 dirty pages whose write-back fails */
	ck_assert_int_gt(acked, 0);
	ck_assert_int_le(acked, 16);
	ck_assert_int_eq(hlast, -EIO);
	k_sync<<<1, 64>>>(gemini_device(c), fd, rc);
	CK_CUDA(cudaDeviceSynchronize());
	CK_CUDA(cudaMemcpy(&hrc, rc, 4, cudaMemcpyDeviceToHost));
	ck_assert_int_eq(hrc, -EIO);
	ck_assert_int_eq(gemini_fault_inject(c, 0), 0);
	CK_CUDA(cudaMemset(rc, 0, 4));
	k_sync<<<1, 64>>>(gemini_device(c), fd, rc);
	CK_CUDA(cudaDeviceSynchronize());
	CK_CUDA(cudaMemcpy(&hrc, rc, 4, cudaMemcpyDeviceToHost));
	ck_assert_int_eq(hrc, 0);
	ck_assert_int_eq(gemini_close(c, fd), 0);
	gemini_exit(c);
	disk = read_back(tfile, 1 << 20);
	for (uint32_t p = 0; p < npages; p++) {
		uint32_t seed = hack[p] ? 55 : 1; /* refused writes leave the old bytes */

		for (uint32_t i = 0; i < page; i++)
			if (disk[(size_t)p * page + i] != pat((uint64_t)p * page + i, seed))
				ck_abort_msg("page %u (%s) byte %u lost", p,
					     hack[p] ? "acknowledged" : "refused", i);
	}
	free(disk);
	cudaFree(buf);
	cudaFree(ack);
	cudaFree(rc);
	cudaFree(last);
}
END_TEST

/*
 * Writer warps overwrite whole pages of two files (no read on a miss) while reader warps read
 * whole pages of both, on a cache of 8 pages for 64: every miss evicts a page of either file.
 * A reader must see old or new bytes of the page it asked for, never the evicted page's.
 * (Before: the page was published VALID before the writer's copy.)
 */
__global__ static void k_race(struct gemini_dev *d, int fa, int fb, uint32_t page, uint32_t npages,
			      int iters, uint8_t *scratch, unsigned long long *bad)
{
	const uint32_t warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x & 31;
	uint64_t *buf = (uint64_t *)(scratch + (size_t)warp * page);
	uint32_t s = warp * 2654435761u + 17;
	const bool writer = warp & 1;

	for (int it = 0; it < iters; it++) {
		uint32_t r = rnd(&s), p = (r >> 1) % npages, f = r & 1;
		int fd = f ? fb : fa;
		uint64_t off = (uint64_t)p * page;

		if (writer) {
			for (uint32_t i = lane; i < page / 8; i += 32)
				buf[i] = tag_word(f + 1, it + 1, off + i * 8);
			__syncwarp();
			if (gemini_dev_write(d, fd, off, page, buf) != (int64_t)page && lane == 0)
				atomicAdd(bad, 1ull << 32);
		} else {
			int64_t n = gemini_dev_read(d, fd, off, page, buf);

			__syncwarp();
			if (n != (int64_t)page) {
				if (lane == 0)
					atomicAdd(bad, 1ull << 32);
				continue;
			}
			for (uint32_t i = lane; i < page / 8; i += 32) {
				uint64_t w = buf[i];

				if ((w >> 56) != f + 1 ||
				    (uint32_t)w != (uint32_t)((off + i * 8) / 8)) {
					atomicAdd(bad, 1);
					break;
				}
			}
		}
		__syncwarp();
	}
}

START_TEST(full_page_writes_race_readers)
{
	const uint32_t page = 16384, npages = 32;
	struct gemini_ctx *c;
	struct gemini_stats st;
	char second[620];
	uint8_t *scratch;
	unsigned long long *bad, hbad = 0;
	int fa, fb;

	make_tag_file(tfile, (uint64_t)page * npages, 1);
	snprintf(second, sizeof(second), "%s/b.gvdk", tdir);
	make_tag_file(second, (uint64_t)page * npages, 2);
	c = ctx_open(GEMINI_BACKEND_NVME, 1, page, 8 * page, O_RDWR, &fa, NULL);
	fb = gemini_open(c, second, O_RDWR);
	ck_assert_int_ge(fb, 0);
	CK_CUDA(cudaMalloc((void **)&scratch, (size_t)256 * page));
	CK_CUDA(cudaMalloc((void **)&bad, 8));
	CK_CUDA(cudaMemset(bad, 0, 8));
	k_race<<<32, 256>>>(gemini_device(c), fa, fb, page, npages, 300, scratch, bad);
	CK_CUDA(cudaDeviceSynchronize());
	CK_CUDA(cudaMemcpy(&hbad, bad, 8, cudaMemcpyDeviceToHost));
	ck_assert_int_eq(gemini_stats(c, &st), 0);
	printf("  hits %llu misses %llu evictions %llu\n", (unsigned long long)st.hits,
	       (unsigned long long)st.misses, (unsigned long long)st.evictions);
	ck_assert_msg(hbad == 0, "%llu calls failed, %llu reads saw foreign bytes", hbad >> 32,
		      hbad & 0xffffffff);
	ck_assert_uint_gt(st.evictions, 1000);
	ck_assert_int_eq(gemini_close(c, fb), 0);
	ck_assert_int_eq(gemini_close(c, fa), 0);
	gemini_exit(c);
	cudaFree(scratch);
	cudaFree(bad);
}
END_TEST

/* Only some threads of each block call gemini_dev_sync, block 0 for fa and block 1 for fb. */
__global__ static void k_sync_partial(struct gemini_dev *d, int fa, int fb, int *rc, int *calls)
{
	int r;

	if (threadIdx.x % 96 >= 50)
		return; /* partial warps, partial blocks */
	r = gemini_dev_sync(d, blockIdx.x ? fb : fa);
	atomicAdd(calls, 1);
	if (r)
		atomicExch(rc, r);
}

/* child: two files written through the cache, synced by a partial grid, death without close */
static int child_sync2(const char *path, const char *second)
{
	struct gemini_config k;
	struct gemini_ctx *c;
	uint8_t *scratch, *h = (uint8_t *)malloc(4 << 20);
	int fa, fb, *rc, hrc = 0, *calls, hcalls = 0;

	memset(&k, 0, sizeof(k));
	k.page_size = 16384;
	k.cache_size = 32 << 20;
	if (gemini_init(&c, &k) || (fa = gemini_open(c, path, O_RDWR)) < 0 ||
	    (fb = gemini_open(c, second, O_RDWR)) < 0)
		return 10;
	cudaMalloc((void **)&scratch, 4 << 20);
	cudaMalloc((void **)&rc, 4);
	cudaMalloc((void **)&calls, 4);
	cudaMemset(rc, 0, 4);
	cudaMemset(calls, 0, 4);
	for (int f = 0; f < 2; f++) {
		for (int i = 0; i < (4 << 20); i++)
			h[i] = pat((uint64_t)i, f ? 88 : 77);
		cudaMemcpy(scratch, h, 4 << 20, cudaMemcpyHostToDevice);
		k_bulk<<<16, 256>>>(gemini_device(c), f ? fb : fa, scratch, 4 << 20);
		if (cudaDeviceSynchronize() != cudaSuccess)
			return 11;
	}
	k_sync_partial<<<2, 256>>>(gemini_device(c), fa, fb, rc, calls);
	if (cudaDeviceSynchronize() != cudaSuccess)
		return 12;
	cudaMemcpy(&hrc, rc, 4, cudaMemcpyDeviceToHost);
	cudaMemcpy(&hcalls, calls, 4, cudaMemcpyDeviceToHost);
	if (hrc || hcalls != 2 * 150) /* threads 0-49, 96-145 and 192-241 of each block */
		return 13;
	/* a second sync of the same file finds nothing left over from the partial one */
	k_sync<<<1, 32>>>(gemini_device(c), fa, rc);
	if (cudaDeviceSynchronize() != cudaSuccess)
		return 14;
	cudaMemcpy(&hrc, rc, 4, cudaMemcpyDeviceToHost);
	if (hrc)
		return 15;
	_exit(0); /* no gemini_close: only what gemini_dev_sync made durable survives */
}

START_TEST(sync_partial_grid_two_files)
{
	char second[620];
	uint8_t *disk;
	int rc;

	snprintf(second, sizeof(second), "%s/b.gvdk", tdir);
	free(make_file(tfile, 8 << 20, 1));
	free(make_file(second, 8 << 20, 2));
	{
		char *argv[] = {self_exe, (char *)"--child-sync2", tfile, second, NULL};
		pid_t pid;
		int st;

		ck_assert_int_eq(posix_spawn(&pid, self_exe, NULL, NULL, argv, environ), 0);
		ck_assert_int_eq(waitpid(pid, &st, 0), pid);
		ck_assert(WIFEXITED(st));
		rc = WEXITSTATUS(st);
	}
	ck_assert_int_eq(rc, 0);
	for (int f = 0; f < 2; f++) {
		disk = read_back(f ? second : tfile, 8 << 20);
		for (uint64_t i = 0; i < (8 << 20); i++) {
			uint8_t want = pat(i, i < (4 << 20) ? (f ? 88 : 77) : (f ? 2 : 1));

			if (disk[i] != want)
				ck_abort_msg("file %d byte %llu is %#x, want %#x", f,
					     (unsigned long long)i, disk[i], want);
		}
		free(disk);
	}
}
END_TEST

/* Reads that count successes and failures: run until told to stop, or n rounds. */
__global__ static void k_read_until(struct gemini_dev *d, int fd, uint64_t size, int rounds,
				    uint8_t *scratch, unsigned long long *ok,
				    unsigned long long *err, long long *last)
{
	uint64_t warp = (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) / 32;
	uint32_t s = (uint32_t)warp * 2654435761u + 3;
	uint8_t *buf = scratch + warp * 4096;

	for (int it = 0; it < rounds; it++) {
		uint64_t off = (uint64_t)(rnd(&s) % (uint32_t)(size / 4096)) * 4096;

		off = __shfl_sync(0xffffffff, off, 0);
		int64_t r = gemini_dev_read(d, fd, off, 4096, buf);

		if ((threadIdx.x & 31) == 0) {
			if (r == 4096) {
				atomicAdd(ok, 1ull);
			} else {
				atomicAdd(err, 1ull);
				*last = r;
			}
		}
		__syncwarp();
	}
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * The controller stops serving in the middle of a read-heavy kernel (a dead controller). Every
 * GPU-side wait is bounded (1 s here), so the kernel must end by itself with its calls failing
 * (-ETIMEDOUT or -EIO), and a gemini_dev_sync must fail too instead of hanging. (Before: the kernel
 * spun for ever on completions, queue slots and page states.)
 */
START_TEST(controller_stopped_mid_run)
{
	struct gemini_config t;
	struct gemini_ctx *c;
	uint8_t *scratch;
	unsigned long long *ok, *err, hok = 0, herr = 0;
	long long *last, hlast = 0;
	int fd, *rc, hrc = 0;
	double t0, t1;

	free(make_file(tfile, 32 << 20, 1));
	memset(&t, 0, sizeof(t));
	t.nqueues = 32;
	t.qdepth = 64;
	t.timeout_ms = 1000;
	c = ctx_open(GEMINI_BACKEND_NVME, 0, 4096, 4 << 20, O_RDWR, &fd, &t);
	CK_CUDA(cudaMalloc((void **)&scratch, 256 * 4096));
	CK_CUDA(cudaMalloc((void **)&ok, 8));
	CK_CUDA(cudaMalloc((void **)&err, 8));
	CK_CUDA(cudaMalloc((void **)&last, 8));
	CK_CUDA(cudaMalloc((void **)&rc, 4));
	CK_CUDA(cudaMemset(ok, 0, 8));
	CK_CUDA(cudaMemset(err, 0, 8));
	CK_CUDA(cudaMemset(rc, 0, 4));
	t0 = now_s();
	k_read_until<<<32, 256>>>(gemini_device(c), fd, 32 << 20, 200000, scratch, ok, err, last);
	CK_CUDA(cudaGetLastError());
	usleep(300000);
	ck_assert_int_eq(gemini_fault_inject(c, GEMINI_FAULT_STALL), 0);
	CK_CUDA(cudaDeviceSynchronize());
	t1 = now_s();
	CK_CUDA(cudaMemcpy(&hok, ok, 8, cudaMemcpyDeviceToHost));
	CK_CUDA(cudaMemcpy(&herr, err, 8, cudaMemcpyDeviceToHost));
	CK_CUDA(cudaMemcpy(&hlast, last, 8, cudaMemcpyDeviceToHost));
	printf("  kernel ended %.1f s after launch: %llu reads served, %llu failed (last %lld)\n",
	       t1 - t0, hok, herr, hlast);
	ck_assert_uint_gt(hok, 0);
	ck_assert_uint_gt(herr, 0);
	ck_assert(hlast == -ETIMEDOUT || hlast == -EIO);
	ck_assert_double_lt(t1 - t0, 60);
	/* a dirty page and a gemini_dev_sync against the dead controller: an error, not a hang */
	k_bulk<<<1, 32>>>(gemini_device(c), fd, scratch, 8192);
	CK_CUDA(cudaDeviceSynchronize());
	t0 = now_s();
	k_sync<<<1, 32>>>(gemini_device(c), fd, rc);
	CK_CUDA(cudaDeviceSynchronize());
	CK_CUDA(cudaMemcpy(&hrc, rc, 4, cudaMemcpyDeviceToHost));
	printf("  gemini_dev_sync with the controller stopped: %d after %.1f s\n", hrc,
	       now_s() - t0);
	ck_assert(hrc == -ETIMEDOUT || hrc == -EIO);
	ck_assert(gemini_close(c, fd) < 0); /* its sync fails the same way */
	gemini_exit(c);
	cudaFree(scratch);
	cudaFree(ok);
	cudaFree(err);
	cudaFree(last);
	cudaFree(rc);
}
END_TEST

/*
 * Both processes at once: region `mine` gets generations 1..gens of tag_word(who, gen, off),
 * whole warps writing 4 KiB chunks, while the other warps read the peer's region and check every
 * word (the peer's or the original tag of its own offset, never anything else; per word, never
 * an older generation than one this warp saw before).
 */
__global__ static void k_share(struct gemini_dev *d, int fd, uint64_t mine, uint64_t peer,
			       uint64_t len, uint32_t who, uint32_t peer_who, int gens,
			       uint8_t *scratch, unsigned long long *bad)
{
	const uint64_t warp = (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) / 32;
	const uint64_t nw = (gridDim.x * (uint64_t)blockDim.x) / 32;
	const uint32_t lane = threadIdx.x & 31;
	uint64_t *buf = (uint64_t *)(scratch + warp * 4096);

	if (warp < nw / 2) {
		for (int g = 1; g <= gens; g++)
			for (uint64_t o = warp * 4096; o < len; o += (nw / 2) * 4096) {
				for (uint32_t i = lane; i < 512; i += 32)
					buf[i] = tag_word(who, g, mine + o + i * 8);
				__syncwarp();
				if (gemini_dev_write(d, fd, mine + o, 4096, buf) != 4096 &&
				    lane == 0)
					atomicAdd(bad, 1ull << 32);
				__syncwarp();
			}
		return;
	}
	uint32_t seen[16] = {0}; /* generation last seen at word `lane + 32 k` of chunk 0 */

	for (int round = 0; round < gens; round++)
		for (uint64_t o = (warp - nw / 2) * 4096; o < len; o += (nw / 2) * 4096) {
			if (gemini_dev_read(d, fd, peer + o, 4096, buf) != 4096) {
				if (lane == 0)
					atomicAdd(bad, 1ull << 32);
				continue;
			}
			__syncwarp();
			for (uint32_t i = lane, k = 0; i < 512; i += 32, k++) {
				uint64_t w = buf[i];
				uint32_t g = (uint32_t)(w >> 32) & 0xffffff;

				if ((uint32_t)w != (uint32_t)((peer + o + i * 8) / 8) ||
				    !((w >> 56) == peer_who ||
				      w == tag_word(0, 0, peer + o + i * 8))) {
					atomicAdd(bad, 1);
					break;
				}
				if (o == (warp - nw / 2) * 4096) {
					if (g < seen[k])
						atomicAdd(bad, 1); /* went back in time */
					seen[k] = g;
				}
			}
			__syncwarp();
		}
}

/* Exact final contents: every word of [off, off+len) is tag_word(who, gen, offset). */
__global__ static void k_expect(struct gemini_dev *d, int fd, uint64_t off, uint64_t len,
				uint32_t who, uint32_t gen, uint8_t *scratch,
				unsigned long long *bad)
{
	const uint64_t warp = (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) / 32;
	const uint64_t nw = (gridDim.x * (uint64_t)blockDim.x) / 32;
	uint64_t *buf = (uint64_t *)(scratch + warp * 4096);

	for (uint64_t o = warp * 4096; o < len; o += nw * 4096) {
		if (gemini_dev_read(d, fd, off + o, 4096, buf) != 4096) {
			if ((threadIdx.x & 31) == 0)
				atomicAdd(bad, 1ull << 32);
			continue;
		}
		__syncwarp();
		for (uint32_t i = threadIdx.x & 31; i < 512; i += 32)
			if (buf[i] != tag_word(who, gen, off + o + i * 8)) {
				atomicAdd(bad, 1);
				break;
			}
		__syncwarp();
	}
}

#define SHARE_LEN  (3ull << 20)
#define SHARE_A	   0ull
#define SHARE_B	   (4ull << 20)
#define SHARE_GENS 60

/* child of concurrent_two_processes: writes region B, reads region A while the parent writes it */
static int child_share(const char *hfile)
{
	struct gemini_ipc_handle h;
	struct gemini_dev *d;
	void *cookie;
	uint8_t *scratch;
	unsigned long long *bad, hbad = 1;
	char done[700], times[700];
	double t0, t1;
	FILE *f = fopen(hfile, "rb");

	if (!f || fread(&h, sizeof(h), 1, f) != 1)
		return 20;
	fclose(f);
	if (gemini_ipc_import(&h, &d, &cookie))
		return 21;
	cudaMalloc((void **)&scratch, 512 * 4096);
	cudaMalloc((void **)&bad, 8);
	cudaMemset(bad, 0, 8);
	if (cudaDeviceSynchronize() != cudaSuccess)
		return 28;
	/* ready: the parent starts its kernel now */
	snprintf(times, sizeof(times), "%s.ready", hfile);
	f = fopen(times, "w");
	if (!f)
		return 29;
	fclose(f);
	t0 = now_s();
	k_share<<<16, 256>>>(d, 0, SHARE_B, SHARE_A, SHARE_LEN, 2, 1, SHARE_GENS, scratch, bad);
	if (cudaDeviceSynchronize() != cudaSuccess)
		return 22;
	t1 = now_s();
	cudaMemcpy(&hbad, bad, 8, cudaMemcpyDeviceToHost);
	if (hbad) {
		fprintf(stderr, "child: %llu failed calls, %llu bad words\n", hbad >> 32,
			hbad & 0xffffffff);
		return 23;
	}
	snprintf(times, sizeof(times), "%s.times", hfile);
	f = fopen(times, "w");
	if (!f)
		return 24;
	fprintf(f, "%.6f %.6f\n", t0, t1);
	fclose(f);
	/* once the parent's writes are done, region A holds its last generation exactly */
	snprintf(done, sizeof(done), "%s.done", hfile);
	for (int i = 0; i < 6000 && access(done, F_OK); i++)
		usleep(10000);
	if (access(done, F_OK))
		return 25;
	k_expect<<<8, 256>>>(d, 0, SHARE_A, SHARE_LEN, 1, SHARE_GENS, scratch, bad);
	if (cudaDeviceSynchronize() != cudaSuccess)
		return 26;
	cudaMemcpy(&hbad, bad, 8, cudaMemcpyDeviceToHost);
	gemini_ipc_close(cookie);
	return hbad ? 27 : 0;
}

START_TEST(concurrent_two_processes)
{
	struct gemini_ipc_handle h;
	struct gemini_ctx *c;
	uint8_t *scratch;
	unsigned long long *bad, hbad = 0;
	char hfile[700], done[720], times[720];
	double t0, t1, c0 = 0, c1 = 0;
	pid_t pid;
	int fd, st;
	FILE *f;

	make_tag_file(tfile, 8 << 20, 0);
	/* 4 MiB of cache for 6 MiB of traffic: pages of both regions are evicted and written back
	 * by either process while the other uses them */
	c = ctx_open(GEMINI_BACKEND_NVME, 0, 65536, 4 << 20, O_RDWR, &fd, NULL);
	ck_assert_int_eq(fd, 0);
	CK_CUDA(cudaMalloc((void **)&scratch, 512 * 4096));
	CK_CUDA(cudaMalloc((void **)&bad, 8));
	CK_CUDA(cudaMemset(bad, 0, 8));
	ck_assert_int_eq(gemini_ipc_export(c, &h), 0);
	snprintf(hfile, sizeof(hfile), "%s/ipc", tdir);
	snprintf(done, sizeof(done), "%s.done", hfile);
	snprintf(times, sizeof(times), "%s.times", hfile);
	f = fopen(hfile, "wb");
	ck_assert_int_eq(fwrite(&h, sizeof(h), 1, f), 1);
	fclose(f);
	{
		char *argv[] = {self_exe, (char *)"--child-share", tfile, hfile, NULL};

		ck_assert_int_eq(posix_spawn(&pid, self_exe, NULL, NULL, argv, environ), 0);
	}
	{
		/* both kernels start together once the child has imported the cache */
		char ready[720];

		snprintf(ready, sizeof(ready), "%s.ready", hfile);
		for (int i = 0; i < 6000 && access(ready, F_OK); i++)
			usleep(1000);
		ck_assert_msg(!access(ready, F_OK), "the child did not import the cache");
	}
	t0 = now_s();
	k_share<<<16, 256>>>(gemini_device(c), fd, SHARE_A, SHARE_B, SHARE_LEN, 1, 2, SHARE_GENS,
			     scratch, bad);
	CK_CUDA(cudaDeviceSynchronize());
	t1 = now_s();
	f = fopen(done, "w");
	ck_assert_ptr_nonnull(f);
	fclose(f);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st));
	ck_assert_int_eq(WEXITSTATUS(st), 0);
	CK_CUDA(cudaMemcpy(&hbad, bad, 8, cudaMemcpyDeviceToHost));
	ck_assert_msg(hbad == 0, "parent: %llu failed calls, %llu bad words", hbad >> 32,
		      hbad & 0xffffffff);
	f = fopen(times, "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fscanf(f, "%lf %lf", &c0, &c1), 2);
	fclose(f);
	printf("  parent kernel %.3f-%.3f s, child kernel %.3f-%.3f s (overlap %.3f s)\n", 0.0,
	       t1 - t0, c0 - t0, c1 - t0, (t1 < c1 ? t1 : c1) - (t0 > c0 ? t0 : c0));
	ck_assert_msg(c0 < t1 && t0 < c1, "the two kernels did not run at the same time");
	/* the child's last generation of region B, exactly, through the shared cache */
	k_expect<<<8, 256>>>(gemini_device(c), fd, SHARE_B, SHARE_LEN, 2, SHARE_GENS, scratch, bad);
	CK_CUDA(cudaDeviceSynchronize());
	CK_CUDA(cudaMemcpy(&hbad, bad, 8, cudaMemcpyDeviceToHost));
	ck_assert_msg(hbad == 0, "region B after both: %llu failed, %llu bad", hbad >> 32,
		      hbad & 0xffffffff);
	ck_assert_int_eq(gemini_close(c, fd), 0);
	gemini_exit(c);
	cudaFree(scratch);
	cudaFree(bad);
}
END_TEST

/* ---- section: the mapped path (gemini_dev_read_mapped/gemini_dev_write_mapped,
 * gemini_mapped_copy_async) against the page cache ---- */

#define OP_READ	       0
#define OP_WRITE       1
#define OP_MAPPED_READ 2
#define OP_MAPPED_WR   3

/* One warp: the whole warp passes one request, or (divergent) lane l moves its 1/32 share of the
 * range alone. *res: 0, or the first failure (-errno, or -1000 for a short count). */
__global__ static void k_op(struct gemini_dev *d, int fd, int op, uint64_t off, uint64_t len,
			    uint8_t *buf, int divergent, long long *res)
{
	const int lane = threadIdx.x & 31;
	uint64_t o = off, n = len;
	uint8_t *b = buf;
	int64_t r;

	if (divergent) {
		uint64_t share = len / 32, a = lane * share;

		n = lane == 31 ? len - a : share;
		o = off + a;
		b = buf + a;
	}
	switch (op) {
	case OP_READ:
		r = gemini_dev_read(d, fd, o, n, b);
		break;
	case OP_WRITE:
		r = gemini_dev_write(d, fd, o, n, b);
		break;
	case OP_MAPPED_READ:
		r = gemini_dev_read_mapped(d, fd, o, n, b);
		break;
	default:
		r = gemini_dev_write_mapped(d, fd, o, n, b);
		break;
	}
	if (r != (int64_t)n)
		atomicExch((unsigned long long *)res, (unsigned long long)(r < 0 ? r : -1000));
}

/* Runs k_op on host bytes (moved in for writes, out for reads); 0 or the kernel's failure. */
static long long t_op(struct gemini_ctx *c, int fd, int op, uint64_t off, uint64_t len,
		      uint8_t *host, int divergent)
{
	const int sane = len <= (64u << 20);
	uint8_t *buf;
	long long *res, r = 0;

	CK_CUDA(cudaMalloc((void **)&buf, sane && len ? len : 4096));
	CK_CUDA(cudaMalloc((void **)&res, 8));
	CK_CUDA(cudaMemset(res, 0, 8));
	if ((op & 1) && sane)
		CK_CUDA(cudaMemcpy(buf, host, len, cudaMemcpyHostToDevice));
	k_op<<<1, 32>>>(gemini_device(c), fd, op, off, len, buf, divergent, res);
	CK_CUDA(cudaDeviceSynchronize());
	CK_CUDA(cudaMemcpy(&r, res, 8, cudaMemcpyDeviceToHost));
	if (!(op & 1) && !r && sane)
		CK_CUDA(cudaMemcpy(host, buf, len, cudaMemcpyDeviceToHost));
	cudaFree(buf);
	cudaFree(res);
	return r;
}

/* gemini_mapped_copy_async on a stream of its own, waited for. */
static int t_copy(struct gemini_ctx *c, int fd, uint64_t off, uint64_t len, uint8_t *host,
		  int write)
{
	cudaStream_t st;
	uint8_t *buf;
	int rc;

	CK_CUDA(cudaStreamCreate(&st));
	CK_CUDA(cudaMalloc((void **)&buf, len ? len : 4096));
	if (write && len)
		CK_CUDA(cudaMemcpy(buf, host, len, cudaMemcpyHostToDevice));
	rc = gemini_mapped_copy_async(c, fd, off, buf, len, write, st);
	CK_CUDA(cudaStreamSynchronize(st));
	if (!rc && !write && len)
		CK_CUDA(cudaMemcpy(host, buf, len, cudaMemcpyDeviceToHost));
	cudaFree(buf);
	cudaStreamDestroy(st);
	return rc;
}

static void expect_bytes(const uint8_t *got, const uint8_t *want, uint64_t len, uint64_t off,
			 const char *what)
{
	for (uint64_t i = 0; i < len; i++)
		if (got[i] != want[i])
			ck_abort_msg("%s: byte %llu is %#x, expected %#x", what,
				     (unsigned long long)(off + i), got[i], want[i]);
}

/* New bytes for [off, off + len): into src, and into the reference. */
static void fresh(uint8_t *ref, uint8_t *src, uint64_t off, uint64_t len, uint32_t seed)
{
	for (uint64_t i = 0; i < len; i++)
		ref[off + i] = src[i] = pat(off + i, seed);
}

/* Reads [off, off + len) by op (a read) and compares with the reference. */
static void check_range(struct gemini_ctx *c, int fd, int op, uint64_t off, uint64_t len,
			const uint8_t *ref, int divergent, const char *what)
{
	uint8_t *got = (uint8_t *)malloc(len);
	long long r;

	memset(got, 0xee, len);
	r = op < 0 ? t_copy(c, fd, off, len, got, 0) : t_op(c, fd, op, off, len, got, divergent);
	ck_assert_msg(r == 0, "%s: %lld", what, r);
	expect_bytes(got, ref + off, len, off, what);
	free(got);
}

START_TEST(mapped_path_coherence)
{
	const uint64_t size = 1 << 20, P = 4096;
	uint8_t *ref = make_file(tfile, size, 1), *src = (uint8_t *)malloc(size), *disk;
	struct gemini_ctx *c;
	char second[620];
	int fd, ro;
	uint64_t o, n;

	snprintf(second, sizeof(second), "%s/ro.gvdk", tdir);
	free(make_file(second, 1 << 20, 2));
	c = ctx_open(GEMINI_BACKEND_NVME, 1, P, 4 << 20, O_RDWR, &fd, NULL);
	ro = gemini_open(c, second, O_RDONLY);
	ck_assert_int_ge(ro, 0);

	/* 1. written through the cache (dirty, partial pages, unaligned), read mapped: SM loads
	 * and the copy engine see the cached bytes */
	o = 3 * P + 123, n = 5 * P + 77;
	fresh(ref, src, o, n, 2);
	ck_assert_int_eq(t_op(c, fd, OP_WRITE, o, n, src, 0), 0);
	check_range(c, fd, OP_MAPPED_READ, o - 1000, n + 2000, ref, 0, "cached write, mapped read");
	o = 20 * P + 4001, n = 2 * P + 3;
	fresh(ref, src, o, n, 3);
	ck_assert_int_eq(t_op(c, fd, OP_WRITE, o, n, src, 1), 0);
	check_range(c, fd, -1, o - 5, n + 10, ref, 0, "cached write, host mapped read");
	o = 40 * P + 7, n = 9 * P + 1001;
	fresh(ref, src, o, n, 4);
	ck_assert_int_eq(t_op(c, fd, OP_WRITE, o, n, src, 1), 0);
	check_range(c, fd, OP_MAPPED_READ, o, n, ref, 1, "cached write, divergent mapped reads");

	/* 2. cached (clean and dirty) pages, then a mapped write over part of them: reads through
	 * the cache see the new bytes, and the dirty bytes outside the write survive */
	check_range(c, fd, OP_READ, 60 * P, 8 * P, ref, 0, "warm the cache");
	o = 61 * P + 2000, n = 100;
	fresh(ref, src, o, n, 5);
	ck_assert_int_eq(t_op(c, fd, OP_WRITE, o, n, src, 0), 0);
	o = 61 * P + 2050, n = 4 * P + 333; /* overlaps the dirty bytes' tail */
	fresh(ref, src, o, n, 6);
	ck_assert_int_eq(t_op(c, fd, OP_MAPPED_WR, o, n, src, 0), 0);
	check_range(c, fd, OP_READ, 60 * P, 8 * P, ref, 0, "mapped write, cached read");
	check_range(c, fd, OP_READ, 60 * P + 1, 8 * P - 2, ref, 1,
		    "mapped write, divergent cached reads");
	/* the same with the copy engine's write, and divergent SM writes */
	check_range(c, fd, OP_READ, 80 * P, 6 * P, ref, 0, "warm the cache");
	o = 80 * P + 10, n = 20;
	fresh(ref, src, o, n, 7);
	ck_assert_int_eq(t_op(c, fd, OP_WRITE, o, n, src, 0), 0);
	o = 80 * P + 17, n = 5 * P + 1;
	fresh(ref, src, o, n, 8);
	ck_assert_int_eq(t_copy(c, fd, o, n, src, 1), 0);
	check_range(c, fd, OP_READ, 80 * P, 6 * P, ref, 0, "host mapped write, cached read");
	o = 100 * P + 3, n = 17 * P + 5;
	check_range(c, fd, OP_READ, o, n, ref, 0, "warm the cache");
	fresh(ref, src, o, n, 9);
	ck_assert_int_eq(t_op(c, fd, OP_MAPPED_WR, o, n, src, 1), 0);
	check_range(c, fd, OP_READ, o - 3, n + 100, ref, 1, "divergent mapped writes, cached read");
	check_range(c, fd, OP_MAPPED_READ, 0, size, ref, 0, "whole file, mapped");

	/* 3. out of range, bad descriptors, read-only: refused, nothing moved */
	ck_assert_int_eq(t_op(c, fd, OP_MAPPED_READ, size - 10, 11, src, 0), -EINVAL);
	ck_assert_int_eq(t_op(c, fd, OP_MAPPED_WR, size + 1, 0, src, 0), -EINVAL);
	ck_assert_int_eq(t_op(c, fd, OP_MAPPED_READ, UINT64_MAX - 5, 10, src, 0), -EINVAL);
	ck_assert_int_eq(t_op(c, fd, OP_MAPPED_WR, 16, UINT64_MAX - 8, src, 0), -EINVAL);
	ck_assert_int_eq(t_op(c, 9, OP_MAPPED_READ, 0, 16, src, 0), -EINVAL);
	ck_assert_int_eq(t_op(c, -1, OP_MAPPED_READ, 0, 16, src, 0), -EINVAL);
	ck_assert_int_eq(t_op(c, ro, OP_MAPPED_WR, 0, 16, src, 0), -EINVAL);
	ck_assert_int_eq(t_op(c, fd, OP_MAPPED_READ, size - 10, 10, src, 0), 0);
	ck_assert_int_eq(t_copy(c, fd, size - 10, 11, src, 0), -EINVAL);
	ck_assert_int_eq(t_copy(c, fd, size + 1, 0, src, 1), -EINVAL);
	ck_assert_int_eq(gemini_mapped_copy_async(c, fd, 16, src, (size_t)UINT64_MAX - 8, 0, NULL),
			 -EINVAL);
	ck_assert_int_eq(gemini_mapped_copy_async(c, fd, 0, NULL, 16, 0, NULL), -EINVAL);
	ck_assert_int_eq(t_copy(c, 9, 0, 16, src, 0), -EBADF);
	ck_assert_int_eq(t_copy(c, -1, 0, 16, src, 0), -EBADF);
	ck_assert_int_eq(t_copy(c, ro, 0, 16, src, 1), -EBADF);
	ck_assert_int_eq(t_copy(c, ro, 0, 16, src, 0), 0); /* reading a read-only file is fine */
	check_range(c, fd, OP_READ, 0, size, ref, 0, "after the refusals");

	/* 4. the memory namespace is stored back on close: the file holds every byte */
	ck_assert_int_eq(gemini_sync(c, fd), 0);
	ck_assert_int_eq(gemini_close(c, ro), 0);
	ck_assert_int_eq(gemini_close(c, fd), 0);
	gemini_exit(c);
	disk = read_back(tfile, size);
	expect_bytes(disk, ref, size, 0, "file after close");
	free(disk);
	free(ref);
	free(src);
}
END_TEST

/* Without an image (disk namespace, posix proxy) the mapped calls refuse; the cached path and
 * gemini_sync keep their durability: the bytes are in the file before it is closed. */
START_TEST(mapped_path_disk_sync)
{
	const uint64_t size = 1 << 20, P = 4096;
	uint8_t *ref = make_file(tfile, size, 1), *src = (uint8_t *)malloc(size), *disk;
	struct gemini_ctx *c;
	uint64_t o = 5 * P + 99, n = 37 * P + 1234;
	int fd;

	c = ctx_open(GEMINI_BACKEND_NVME, 0, P, 1 << 20, O_RDWR, &fd, NULL);
	ck_assert_int_eq(t_copy(c, fd, 0, 16, src, 0), -EOPNOTSUPP);
	ck_assert_int_eq(t_copy(c, fd, 0, 16, src, 1), -EOPNOTSUPP);
	ck_assert_int_eq(t_op(c, fd, OP_MAPPED_READ, 0, 16, src, 0), -EOPNOTSUPP);
	ck_assert_int_eq(t_op(c, fd, OP_MAPPED_WR, 0, 16, src, 1), -EOPNOTSUPP);
	fresh(ref, src, o, n, 11);
	ck_assert_int_eq(t_op(c, fd, OP_WRITE, o, n, src, 0), 0);
	ck_assert_int_eq(gemini_sync(c, fd), 0);
	disk = read_back(tfile, size); /* O_DIRECT pread, the context still open */
	expect_bytes(disk, ref, size, 0, "file after gemini_sync");
	free(disk);
	ck_assert_int_eq(gemini_close(c, fd), 0);
	gemini_exit(c);

	c = ctx_open(GEMINI_BACKEND_POSIX, 0, P, 1 << 20, O_RDWR, &fd, NULL);
	ck_assert_int_eq(t_copy(c, fd, 0, 16, src, 0), -EOPNOTSUPP);
	ck_assert_int_eq(t_op(c, fd, OP_MAPPED_READ, 0, 16, src, 0), -EOPNOTSUPP);
	ck_assert_int_eq(gemini_close(c, fd), 0);
	gemini_exit(c);
	free(ref);
	free(src);
}
END_TEST

int main(int argc, char **argv)
{
	Suite *s;
	TCase *tc;
	SRunner *sr;
	int failed;
	ssize_t n = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);

	if (n > 0)
		self_exe[n] = 0;
	if (argc == 4 && !strcmp(argv[1], "--child-write"))
		return child_write(argv[2], !strcmp(argv[3], "sync"));
	if (argc == 4 && !strcmp(argv[1], "--child-ipc"))
		return child_ipc(argv[3]);
	if (argc == 4 && !strcmp(argv[1], "--child-sync2"))
		return child_sync2(argv[2], argv[3]);
	if (argc == 4 && !strcmp(argv[1], "--child-share"))
		return child_share(argv[3]);
	setvbuf(stdout, NULL, _IOLBF, 0);
	s = suite_create("gemini-gpu");
	/* one case per test so CK_RUN_CASE can run each under its own time limit */
#define GPU_CASE(fn)                                                                               \
	do {                                                                                       \
		tc = tcase_create(#fn);                                                            \
		tcase_add_checked_fixture(tc, setup, teardown);                                    \
		tcase_set_timeout(tc, 240);                                                        \
		tcase_add_test(tc, fn);                                                            \
		suite_add_tcase(s, tc);                                                            \
	} while (0)
	GPU_CASE(bounds_and_hostile_commands);
	GPU_CASE(rw_nvme_disk_4k);
	GPU_CASE(rw_nvme_memory_64k);
	GPU_CASE(rw_posix_16k);
	GPU_CASE(eviction_under_pressure);
	GPU_CASE(readahead_on_a_shallow_queue);
	GPU_CASE(sync_durability_across_processes);
	GPU_CASE(cross_process_sharing);
	GPU_CASE(writeback_failure_keeps_data);
	GPU_CASE(full_page_writes_race_readers);
	GPU_CASE(sync_partial_grid_two_files);
	GPU_CASE(controller_stopped_mid_run);
	GPU_CASE(concurrent_two_processes);
	GPU_CASE(mapped_path_coherence);
	GPU_CASE(mapped_path_disk_sync);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_VERBOSE);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
