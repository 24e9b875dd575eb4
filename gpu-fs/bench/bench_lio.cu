/* The lio backend against the in-process controller on one GVDK file: cold 4 KiB random reads,
 * cold 128 KiB sequential reads and whole-page writes with gemini_dev_sync, GPU warps from 1 up.
 * Built with -DGM_LIO_PROFILE (bench_lio_prof) it also prints, per lio point, where a batch's time
 * went (device/gm_lioq.cuh's GM_PROF_*) as "prof," CSV lines on stderr. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gemini.h"
#include "gvdk.h"
#include "../tests/lio_fixture.h"

#define CK(x)                                                                                      \
	do {                                                                                       \
		cudaError_t e_ = (x);                                                              \
		if (e_ != cudaSuccess) {                                                           \
			fprintf(stderr, "bench_lio: %s: %s\n", #x, cudaGetErrorString(e_));        \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Warp w reads n pages of len bytes: random pages (rand) or its own contiguous part. */
__global__ static void k_read(struct gemini_dev *d, int fd, uint64_t size, uint32_t len, int n,
			      int rand, uint8_t *scratch, unsigned long long *bad)
{
	uint64_t tid = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x, w = tid / 32;
	uint64_t nw = (gridDim.x * (uint64_t)blockDim.x) / 32, pages = size / len;
	uint32_t s = (uint32_t)w * 2654435761u + 12345;
	uint8_t *buf = scratch + w * len;

	for (int i = 0; i < n; i++) {
		uint64_t p;

		if (rand) {
			s ^= s << 13;
			s ^= s >> 17;
			s ^= s << 5;
			p = s % pages;
		} else {
			p = (w * (pages / nw) + i) % pages;
		}
		if (gemini_dev_read(d, fd, p * len, len, buf) != (int64_t)len &&
		    (threadIdx.x & 31) == 0)
			atomicAdd(bad, 1);
	}
}

__global__ static void k_write(struct gemini_dev *d, int fd, uint64_t size, uint32_t len, int n,
			       uint8_t *scratch, unsigned long long *bad)
{
	uint64_t tid = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x, w = tid / 32;
	uint64_t nw = (gridDim.x * (uint64_t)blockDim.x) / 32, pages = size / len;
	uint8_t *buf = scratch + w * len;

	for (int i = 0; i < n; i++) {
		uint64_t p = (w * (pages / nw) + i) % pages;

		if (gemini_dev_write(d, fd, p * len, len, buf) != (int64_t)len &&
		    (threadIdx.x & 31) == 0)
			atomicAdd(bad, 1);
	}
}

#ifdef GM_LIO_PROFILE
/* One line per point: batches, submissions, commands per submission, then microseconds per
 * batch (waiting for the pair, staging per submission, first completion, whole batch, copy out)
 * and the copy-out rate in bytes per nanosecond (GB/s). */
static void prof_print(const char *name, const char *wname, unsigned W)
{
	unsigned long long p[GM_PROF_N];
	double rounds, batches;

	CK(cudaMemcpyFromSymbol(p, gm_lio_prof, sizeof(p)));
	rounds = p[GM_PROF_ROUNDS] ? (double)p[GM_PROF_ROUNDS] : 1;
	batches = p[GM_PROF_BATCHES] ? (double)p[GM_PROF_BATCHES] : 1;
	fprintf(stderr, "prof,%s,%s,%u,%llu,%llu,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.3f\n", name, wname,
		W, p[GM_PROF_BATCHES], p[GM_PROF_ROUNDS], p[GM_PROF_CMDS] / rounds,
		p[GM_PROF_LOCK_NS] / 1e3 / batches, p[GM_PROF_STAGE_NS] / 1e3 / rounds,
		p[GM_PROF_FIRST_NS] / 1e3 / batches, p[GM_PROF_ROUND_NS] / 1e3 / batches,
		p[GM_PROF_OUT_NS] / 1e3 / batches,
		p[GM_PROF_OUT_NS] ? (double)p[GM_PROF_OUT_BYTES] / p[GM_PROF_OUT_NS] : 0);
}

static void prof_reset(void)
{
	static const unsigned long long z[GM_PROF_N] = {0};

	CK(cudaMemcpyToSymbol(gm_lio_prof, z, sizeof(z)));
}
#endif

static void run(const char *name, struct gemini_config *k, const char *file, uint64_t size)
{
	static const unsigned warps[] = {1, 8, 64, 256};
	struct gemini_ctx *c;
	unsigned long long *bad, hbad;
	uint8_t *scratch;
	int fd;

	if (gemini_init(&c, k)) {
		fprintf(stderr, "bench_lio: %s: bad configuration\n", name);
		exit(1);
	}
	fd = gemini_open(c, file, O_RDWR);
	if (fd < 0) {
		fprintf(stderr, "bench_lio: %s: %s\n", name, gemini_last_error(c));
		exit(1);
	}
	fprintf(stderr, "bench_lio: %s: %s\n", name, gemini_backend_desc(c));
	CK(cudaMalloc((void **)&scratch, 256ull * (128 << 10)));
	CK(cudaMalloc((void **)&bad, 8));
	for (int wl = 0; wl < 3; wl++) {
		const char *wname = wl == 0   ? "randread-4k"
				    : wl == 1 ? "seqread-128k"
					      : "write-128k";
		uint32_t len = wl == 0 ? 4096 : 128 << 10;

		for (unsigned wi = 0; wi < sizeof(warps) / sizeof(warps[0]); wi++) {
			unsigned W = warps[wi], thr = W * 32, blk = thr < 256 ? thr : 256;
			int n = wl == 0 ? (int)(8192 / W > 16 ? 8192 / W : 16)
					: (int)((size / len) / W > 64 ? 64 : (size / len) / W);
			double t0, t1;

			if (k->page_size != len)
				continue;
			gemini_cache_drop(c);
#ifdef GM_LIO_PROFILE
			prof_reset();
#endif
			CK(cudaMemset(bad, 0, 8));
			CK(cudaDeviceSynchronize());
			t0 = now_s();
			if (wl < 2)
				k_read<<<thr / blk, blk>>>(gemini_device(c), fd, size, len, n,
							   wl == 0, scratch, bad);
			else
				k_write<<<thr / blk, blk>>>(gemini_device(c), fd, size, len, n,
							    scratch, bad);
			CK(cudaDeviceSynchronize());
			if (wl == 2 && gemini_sync(c, fd))
				fprintf(stderr, "bench_lio: %s: gemini_sync failed\n", name);
			t1 = now_s();
			CK(cudaMemcpy(&hbad, bad, 8, cudaMemcpyDeviceToHost));
			printf("%s,%s,%u,%llu,%.4f,%.0f,%.3f,%llu\n", name, wname, W,
			       (unsigned long long)W * n, t1 - t0, W * n / (t1 - t0),
			       (double)W * n * len / (t1 - t0) / 1e9, hbad);
			fflush(stdout);
#ifdef GM_LIO_PROFILE
			if (k->backend == GEMINI_BACKEND_LIO)
				prof_print(name, wname, W);
#endif
		}
	}
	gemini_close(c, fd);
	gemini_exit(c);
	cudaFree(scratch);
	cudaFree(bad);
}

int main(int argc, char **argv)
{
	const uint64_t size = 128ull << 20;
	struct gemini_config k;
	struct gvdk_header h;
	char file[600], err[GVDK_ERRLEN];
	struct lio_fx fx;
	uint8_t *b;
	int fd, r;

	const char *only = getenv("BENCH_LIO_ONLY"); /* "1": the lio rows alone */

	if (argc != 2 && argc != 3) {
		fprintf(stderr,
			"usage: LVMM=lvmm bench_lio WORK_DIR [SSD_DIR]   (CSV on stdout)\n"
			"  SSD_DIR: where softssd keeps its backing (default WORK_DIR; a tmpfs\n"
			"  there takes the disk out of the lio path); BENCH_LIO_ONLY=1: lio rows\n"
			"  alone\n");
		return 2;
	}
	snprintf(file, sizeof(file), "%s/bench-lio.gvdk", argv[1]);
	unlink(file);
	if (gvdk_create(file, size, NULL, err)) {
		fprintf(stderr, "bench_lio: %s\n", err);
		return 1;
	}
	b = (uint8_t *)malloc(size);
	for (uint64_t i = 0; i < size; i++)
		b[i] = (uint8_t)(i * 2654435761u >> 13);
	fd = open(file, O_RDWR);
	if (fd < 0 || pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
	    pwrite(fd, b, size, (off_t)h.data_offset) != (ssize_t)size || fsync(fd)) {
		perror(file);
		return 1;
	}
	close(fd);
	free(b);
	r = lio_fx_start(&fx, argc == 3 ? argv[2] : argv[1], 1024);
	if (r || lio_fx_import(&fx, "bench", ((h.file_size >> 20) + 2) << 20, file)) {
		fprintf(stderr, "bench_lio: softssd: %s (log %s)\n", strerror(-r), fx.log);
		lio_fx_stop(&fx);
		return 1;
	}
	printf("backend,workload,warps,ops,seconds,ops_per_s,gb_per_s,failed\n");
#ifdef GM_LIO_PROFILE
	fprintf(stderr, "prof,backend,workload,warps,batches,submissions,cmds_per_submission,"
			"wait_pair_us,stage_us,first_completion_us,batch_us,copy_out_us,"
			"copy_out_gb_per_s\n");
#endif
	for (int page = 0; page < 2; page++) {
		size_t ps = page ? 128 << 10 : 4096;

		memset(&k, 0, sizeof(k));
		k.page_size = ps;
		k.cache_size = 64 << 20;
		k.backend = GEMINI_BACKEND_LIO;
		k.lio_ssd = fx.sock;
		k.lio_volume = "bench";
		k.nqueues = 15;
		k.qdepth = 64;
		run("lio-softssd", &k, file, size);
		if (only && !strcmp(only, "1"))
			continue;
		memset(&k, 0, sizeof(k));
		k.page_size = ps;
		k.cache_size = 64 << 20;
		k.backend = GEMINI_BACKEND_NVME;
		k.memory_namespace = 1;
		k.nqueues = 64;
		k.qdepth = 64;
		k.host_threads = 1;
		run("nvme-inproc-memns-1thr", &k, file, size);
		k.host_threads = 4;
		run("nvme-inproc-memns-4thr", &k, file, size);
		k.memory_namespace = 0;
		k.host_threads = 1;
		run("nvme-inproc-disk-1thr", &k, file, size);
	}
	lio_fx_stop(&fx);
	return 0;
}
