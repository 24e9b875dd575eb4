// GPU tests of libgemini: thousands of threads reading and writing through the page cache against
// a reference copy (byte-exact), eviction under pressure, G_sync durability seen from a fresh
// process, cross-process sharing through CUDA IPC, bounds and hostile NVMe commands.
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
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

/* Random reads of 1..maxlen bytes; every fourth round the whole warp shares one request. */
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
		int64_t r = G_read(d, fd, off, len, buf);

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
		if (G_write(d, fd, base + a, len, buf) != (int64_t)len)
			atomicAdd(bad, 1);
	}
}

__global__ static void k_sync(struct gemini_dev *d, int fd, int *rc)
{
	int r = G_sync(d, fd);

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
	ck_assert_int_eq(Geminifs_init(&c, &k), 0);
	*fd = G_open(c, tfile, flags);
	ck_assert_msg(*fd >= 0, "G_open: %s", gemini_last_error(c));
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
	ck_assert_int_eq(G_close(c, fd), 0);
	Geminifs_exit(c);
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
		G_write(d, fd, o, 8192, src + o);
}

/* child: overwrite the first 4 MiB with pat(.., 77), then G_sync or not, and die without closing */
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
	if (Geminifs_init(&c, &k) || (fd = G_open(c, path, O_RDWR)) < 0)
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
	_exit(0); /* no G_close, no exit handlers: only what G_sync made durable survives */
}

START_TEST(sync_durability_across_processes)
{
	uint8_t *disk;
	uint64_t i, diff = 0;

	free(make_file(tfile, 8 << 20, 1));
	/* without G_sync the process dies with the data only in HBM: the disk keeps the old bytes
	 */
	ck_assert_int_eq(spawn_self("--child-write", "nosync"), 0);
	disk = read_back(tfile, 8 << 20);
	for (i = 0; i < (4 << 20); i++)
		diff += disk[i] != pat(i, 1);
	ck_assert_uint_eq(diff, 0);
	free(disk);
	/* with G_sync (a device call from 1024 threads) the new bytes are on the disk */
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
		if (G_read(d, fd, off + o, 4096, buf) != 4096) {
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
		G_write(d, fd, off + o, 4096, buf);
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
	ck_assert_int_eq(G_close(c, fd), 0);
	Geminifs_exit(c);
	cudaFree(scratch);
	cudaFree(bad);
}
END_TEST

__global__ static void k_bounds(struct gemini_dev *d, int rw, int ro, uint64_t size, uint8_t *buf,
				uint8_t *foreign, long long *out)
{
	out[0] = G_read(d, ro, size - 10, 20, buf);
	out[1] = G_write(d, ro, 0, 16, buf);
	out[2] = G_read(d, 9, 0, 16, buf);
	out[3] = G_read(d, -1, 0, 16, buf);
	out[4] = G_read_direct(d, rw, 100, 4096, buf);
	out[5] = G_read(d, ro, size - 10, 10, buf);
	out[6] = G_read(d, rw, UINT64_MAX - 5, 10, buf);
	/* hostile commands straight into a queue: the controller must refuse each */
	out[7] = gm_raw_cmd(d, GM_NVME_OP_READ, 1ull << 50, 4096, d->data);
	out[8] = gm_raw_cmd(d, GM_NVME_OP_READ, gm_map(&d->files[rw], 0), 4096, foreign);
	out[9] = gm_raw_cmd(d, GM_NVME_OP_WRITE, gm_map(&d->files[ro], 0), 4096, d->data);
	out[10] = gm_raw_cmd(d, 0x7f, 0, 4096, d->data);
	out[11] = gm_raw_cmd(d, GM_NVME_OP_READ, gm_map(&d->files[rw], 0), 4096, d->data);
}

START_TEST(bounds_and_hostile_commands)
{
	struct gemini_ctx *c;
	uint8_t *buf, *foreign;
	long long *out, h[12];
	char second[620];
	int rw, ro;

	free(make_file(tfile, 1 << 20, 1));
	snprintf(second, sizeof(second), "%s/ro.gvdk", tdir);
	free(make_file(second, 1 << 20, 2));
	c = ctx_open(GEMINI_BACKEND_NVME, 0, 4096, 1 << 20, O_RDWR, &rw, NULL);
	ro = G_open(c, second, O_RDONLY);
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
	ck_assert_int_eq(h[7], GM_NVME_SC_LBA_RANGE);
	ck_assert_int_eq(h[8], GM_NVME_SC_DATA_XFER);
	ck_assert_int_eq(h[9], GM_NVME_SC_LBA_RANGE);
	ck_assert_int_eq(h[10], GM_NVME_SC_INVALID_OPCODE);
	ck_assert_int_eq(h[11], 0);
	ck_assert_int_eq(G_close(c, ro), 0);
	ck_assert_int_eq(G_close(c, rw), 0);
	ck_assert_int_eq(G_close(c, rw), -EBADF);
	Geminifs_exit(c);
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
	sr = srunner_create(s);
	srunner_run_all(sr, CK_VERBOSE);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
