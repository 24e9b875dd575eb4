// gpu-fs benchmarks: 4 KiB random reads (GPU-initiated nvme/posix/gds backends, through the page
// cache or around it; CPU-centric posix, naive and batched, and gds), map lookup against raw
// offsets, page-cache hit bandwidth, page size and prefetch.
// Prints CSV rows on stdout; bench/run.sh collects them and bench/plot.py draws them.
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <vector>

#ifdef GEMINI_HAVE_CUFILE
#include <cufile.h>
#endif

#include "gemini.h"
#include "gvdk.h"

#define CK(x)                                                                                      \
	do {                                                                                       \
		cudaError_t e_ = (x);                                                              \
		if (e_ != cudaSuccess) {                                                           \
			fprintf(stderr, "bench: %s: %s\n", #x, cudaGetErrorString(e_));            \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/*
 * Host CPU seconds of every thread of this process but the calling one (user and system): the
 * cost of the I/O path on the host, i.e. the controller threads of the in-process backends, the
 * proxy threads, the baselines' workers. The calling thread only launches the kernel (or starts
 * the workers) and waits; how it waits (CUDA spins by default) is the application's choice, not
 * the I/O path's, so it is left out of every row alike.
 */
static double others_cpu(void)
{
	struct rusage u;
	struct timespec me;

	getrusage(RUSAGE_SELF, &u);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &me);
	return u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6 + u.ru_stime.tv_sec +
	       u.ru_stime.tv_usec * 1e-6 - (me.tv_sec + me.tv_nsec * 1e-9);
}

/* The CSV's last two columns of a random-read row: busy host cores over the timed run (CPU
 * seconds of others_cpu per wall second) and IOPS per busy core (I/Os per CPU second). */
static void print_cpu(double ios, double wall_s, double cpu_s)
{
	printf(",%.2f,%.0f\n", cpu_s / wall_s, cpu_s > 0 ? ios / cpu_s : 0.0);
}

__device__ static inline uint64_t gtime(void)
{
	uint64_t t;

	asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
	return t;
}

static struct gemini_ctx *open_ctx(const char *backend, size_t page, size_t cache, unsigned pf,
				   unsigned hthreads, const char *file, int *fd)
{
	struct gemini_config k;
	struct gemini_ctx *c;

	memset(&k, 0, sizeof(k));
	k.page_size = page;
	k.cache_size = cache;
	k.prefetch = pf;
	k.nqueues = 128;
	k.qdepth = 64;
	k.host_threads = hthreads;
	if (!strcmp(backend, "nvme-mem")) {
		k.backend = GEMINI_BACKEND_NVME;
		k.memory_namespace = 1;
	} else if (!strcmp(backend, "nvme-disk")) {
		k.backend = GEMINI_BACKEND_NVME;
		k.direct = 1;
	} else if (!strcmp(backend, "posix-proxy")) {
		k.backend = GEMINI_BACKEND_POSIX;
	} else if (!strcmp(backend, "gds-proxy")) {
		k.backend = GEMINI_BACKEND_GDS;
		k.direct = 1;
	} else {
		fprintf(stderr, "bench: backend %s unknown\n", backend);
		exit(2);
	}
	if (gemini_init(&c, &k)) {
		fprintf(stderr, "bench: gemini_init failed\n");
		exit(1);
	}
	*fd = gemini_open(c, file, O_RDONLY);
	if (*fd < 0) {
		fprintf(stderr, "bench: %s\n", gemini_last_error(c));
		gemini_exit(c);
		return NULL;
	}
	fprintf(stderr, "bench: %s: %s\n", backend, gemini_backend_desc(c));
	return c;
}

/*
 * This bench opens only backends of the in-process controller, so its kernels are built with that
 * queue driver alone (GEMINI_BK_HOST): none of the lio driver's registers. k_hit is also built
 * with both drivers, the default of the device calls, for comparison (hit mode, HIT_BK=all).
 */
#define BK GEMINI_BK_HOST

/*
 * Each thread reads reqs random 4 KiB blocks. raw 0: gemini_dev_read_direct (the map, then the
 * device: no page cache); 1: device offsets precomputed (no map lookup either); 2: gemini_dev_read
 * through the page cache (4 KiB pages; a miss loads the page, then the bytes are copied out of it).
 */
__global__ static void k_randread(struct gemini_dev *d, int fd, const uint64_t *offs, int raw,
				  int reqs, uint8_t *buf, unsigned long long *lat_ns,
				  unsigned long long *errs)
{
	uint64_t tid = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
	uint8_t *b = buf + tid * 4096;
	unsigned long long lat = 0;

	for (int r = 0; r < reqs; r++) {
		uint64_t o = offs[tid * reqs + r];
		uint64_t t0 = gtime();
		int rc;

		if (raw == 1) {
			rc = gm_raw_cmd<BK>(d, NVME_CMD_READ, o, 4096, b);
		} else if (raw == 2) {
			rc = gemini_dev_read<BK>(d, fd, o, 4096, b) != 4096;
		} else {
			rc = gemini_dev_read_direct<BK>(d, fd, o, 4096, b);
		}
		lat += gtime() - t0;
		if (rc)
			atomicAdd(errs, 1);
	}
	atomicAdd(lat_ns, lat);
}

static void bench_randread(const char *file, const char *backend, unsigned hthreads, int raw,
			   const std::vector<int> &threads, int reqs)
{
	int fd;
	/* through the cache: 4 KiB pages, 64 MiB of cache for the 1 GiB file (mostly misses) */
	struct gemini_ctx *c =
	    open_ctx(backend, raw == 2 ? 4096 : 65536, 64 << 20, 0, hthreads, file, &fd);
	char err[GVDK_ERRLEN];
	struct gvdk_map m;
	int maxt = 0;

	if (!c)
		return;
	if (gvdk_load(file, &m, GVDK_LOAD_SKIP_FIEMAP, err)) {
		fprintf(stderr, "bench: %s\n", err);
		exit(1);
	}
	for (int t : threads)
		maxt = t > maxt ? t : maxt;
	uint8_t *buf;
	uint64_t *doffs;
	unsigned long long *dl, *de;
	std::vector<uint64_t> offs((size_t)maxt * reqs);

	CK(cudaMalloc((void **)&buf, (size_t)maxt * 4096));
	CK(cudaMalloc((void **)&doffs, offs.size() * 8));
	CK(cudaMalloc((void **)&dl, 8));
	CK(cudaMalloc((void **)&de, 8));
	gemini_register_buffer(c, buf, (size_t)maxt * 4096);
	srand(42);
	for (size_t i = 0; i < offs.size(); i++) {
		uint64_t b = ((uint64_t)rand() * 7919u + (uint64_t)rand()) % m.hdr.nblocks;

		offs[i] = raw == 1 ? gvdk_lookup(&m, b) : b * m.hdr.block_size;
	}
	CK(cudaMemcpy(doffs, offs.data(), offs.size() * 8, cudaMemcpyHostToDevice));
	k_randread<<<1, 32>>>(gemini_device(c), fd, doffs, raw, 4, buf, dl, de); /* warm up */
	CK(cudaDeviceSynchronize());
	for (int t : threads) {
		unsigned long long l = 0, e = 0;
		int bs = t < 128 ? t : 128;
		int r = t >= 512 ? reqs : reqs * 2;
		cudaEvent_t a, b;
		float ms;

		if (r * t > (int)offs.size())
			r = (int)(offs.size() / t);
		cudaMemset(dl, 0, 8);
		cudaMemset(de, 0, 8);
		cudaEventCreate(&a);
		cudaEventCreate(&b);
		double c0 = others_cpu(), w0 = now();

		cudaEventRecord(a);
		k_randread<<<t / bs, bs>>>(gemini_device(c), fd, doffs, raw, r, buf, dl, de);
		cudaEventRecord(b);
		CK(cudaEventSynchronize(b));
		double w1 = now(), c1 = others_cpu();

		cudaEventElapsedTime(&ms, a, b);
		cudaMemcpy(&l, dl, 8, cudaMemcpyDeviceToHost);
		cudaMemcpy(&e, de, 8, cudaMemcpyDeviceToHost);
		double ios = (double)t * r, s = ms / 1e3;
		printf("randread,%s%s,%u,%d,%.0f,%.1f,%.2f,%llu", backend,
		       raw == 1	  ? "-raw"
		       : raw == 2 ? "-cached"
				  : "",
		       hthreads, t, ios / s, ios * 4096 / s / 1e6, l / ios / 1e3, e);
		print_cpu(ios, w1 - w0, c1 - c0);
		fflush(stdout);
	}
	gvdk_map_free(&m);
	cudaFree(buf);
	cudaFree(doffs);
	gemini_close(c, fd);
	gemini_exit(c);
}

struct cpu_arg {
	int fd, reqs, id, gds;
	uint64_t data_off, nblocks;
	uint8_t *gpu;
	double lat;
	void *fh;
};

static void *cpu_worker(void *p)
{
	struct cpu_arg *a = (struct cpu_arg *)p;
	uint8_t *host;
	unsigned s = 1234 + a->id * 7;

	cudaHostAlloc((void **)&host, 4096, cudaHostAllocDefault);
	for (int r = 0; r < a->reqs; r++) {
		uint64_t b = ((uint64_t)rand_r(&s) * 7919u + rand_r(&s)) % a->nblocks;
		double t0 = now();

		if (a->gds) {
#ifdef GEMINI_HAVE_CUFILE
			cuFileRead((CUfileHandle_t)a->fh, a->gpu, 4096,
				   (off_t)(a->data_off + b * 4096), 0);
#endif
		} else {
			if (pread(a->fd, host, 4096, (off_t)(a->data_off + b * 4096)) != 4096)
				abort();
			cudaMemcpy(a->gpu, host, 4096, cudaMemcpyHostToDevice);
		}
		a->lat += now() - t0;
	}
	cudaFreeHost(host);
	return NULL;
}

/* CPU-centric baselines: host threads pread + cudaMemcpy (posix) or cuFileRead (gds). */
static void bench_cpu(const char *file, int direct, int gds, const std::vector<int> &threads,
		      int reqs)
{
	char err[GVDK_ERRLEN];
	struct gvdk_map m;
	int fd;
	uint8_t *gpu;
	void *fh = NULL;

	if (gvdk_load(file, &m, GVDK_LOAD_SKIP_FIEMAP, err)) {
		fprintf(stderr, "bench: %s\n", err);
		exit(1);
	}
	fd = open(file, O_RDONLY | (direct ? O_DIRECT : 0));
	CK(cudaMalloc((void **)&gpu, 4096 * 1024));
	if (gds) {
#ifdef GEMINI_HAVE_CUFILE
		CUfileDescr_t d;
		CUfileHandle_t h;
		CUfileError_t e = cuFileDriverOpen();

		memset(&d, 0, sizeof(d));
		d.handle.fd = fd;
		d.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
		e = cuFileHandleRegister(&h, &d);
		if (e.err != CU_FILE_SUCCESS) {
			printf("gds-error,cuFileHandleRegister,%d,%s\n", (int)e.err,
			       CUFILE_ERRSTR(e.err));
			fflush(stdout);
			close(fd);
			return;
		}
		fh = h;
#else
		printf("gds-error,not-built,0,no cufile.h\n");
		return;
#endif
	}
	if (!direct && !gds) {
		/* warm the OS page cache: the backing is held in host memory */
		std::vector<uint8_t> tmp(1 << 20);

		for (uint64_t o = 0; o < m.hdr.file_size; o += tmp.size())
			if (pread(fd, tmp.data(), tmp.size(), (off_t)o) < 0)
				break;
	}
	for (int t : threads) {
		std::vector<pthread_t> th(t);
		std::vector<cpu_arg> a(t);
		int r = t > 64 ? reqs / 4 : reqs;
		double t0 = now(), lat = 0, c0 = others_cpu();

		for (int i = 0; i < t; i++) {
			a[i] = {fd,
				r,
				i,
				gds,
				m.hdr.data_offset,
				m.hdr.nblocks,
				gpu + (size_t)(i % 1024) * 4096,
				0,
				fh};
			pthread_create(&th[i], NULL, cpu_worker, &a[i]);
		}
		for (int i = 0; i < t; i++) {
			pthread_join(th[i], NULL);
			lat += a[i].lat;
		}
		double s = now() - t0, ios = (double)t * r, c1 = others_cpu();

		printf("randread,%s%s,0,%d,%.0f,%.1f,%.2f,0", gds ? "gds-cpu" : "posix-cpu",
		       direct ? "-direct" : "", t, ios / s, ios * 4096 / s / 1e6, lat / ios * 1e6);
		print_cpu(ios, s, c1 - c0);
		fflush(stdout);
	}
	close(fd);
	cudaFree(gpu);
	gvdk_map_free(&m);
}

/*
 * The strongest CPU-centric baseline we know how to write: threads created and their pinned
 * buffers and streams set up before the clock starts; each thread reads a batch of `batch`
 * random 4 KiB blocks into one half of its pinned buffer, queues their copies to the GPU as one
 * cudaMemcpyBatchAsync on its own stream, and reads the next batch into the other half while
 * those copies run (double buffering).
 */
struct bat_arg {
	int fd, id, batch, reqs;
	uint64_t data_off, nblocks;
	uint8_t *gpu;
	uint8_t *host;
	cudaStream_t st;
	pthread_barrier_t *go;
	double lat;
	int bad;
};

static void *bat_worker(void *p)
{
	struct bat_arg *a = (struct bat_arg *)p;
	unsigned s = 4321 + a->id * 13;
	std::vector<void *> dst(a->batch), src(a->batch);
	std::vector<size_t> sz(a->batch, 4096);
	cudaEvent_t ev[2];
	int half = 0;

	cudaEventCreateWithFlags(&ev[0], cudaEventDisableTiming);
	cudaEventCreateWithFlags(&ev[1], cudaEventDisableTiming);
	cudaEventRecord(ev[0], a->st);
	cudaEventRecord(ev[1], a->st);
	pthread_barrier_wait(a->go);
	for (int done = 0; done < a->reqs; done += a->batch, half ^= 1) {
		uint8_t *h = a->host + (size_t)half * a->batch * 4096;
		struct cudaMemcpyAttributes attr;
		size_t idx = 0;
		double t0 = now();

		cudaEventSynchronize(ev[half]); /* this half's previous copies are done */
		for (int i = 0; i < a->batch; i++) {
			uint64_t b = ((uint64_t)rand_r(&s) * 7919u + rand_r(&s)) % a->nblocks;

			if (pread(a->fd, h + (size_t)i * 4096, 4096,
				  (off_t)(a->data_off + b * 4096)) != 4096)
				a->bad++;
			dst[i] = a->gpu + (size_t)i * 4096;
			src[i] = h + (size_t)i * 4096;
		}
		memset(&attr, 0, sizeof(attr));
		attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
		if (cudaMemcpyBatchAsync(dst.data(), src.data(), sz.data(), a->batch, &attr, &idx,
					 1, a->st) != cudaSuccess) {
			cudaGetLastError();
			for (int i = 0; i < a->batch; i++)
				cudaMemcpyAsync(dst[i], src[i], 4096, cudaMemcpyHostToDevice,
						a->st);
		}
		cudaEventRecord(ev[half], a->st);
		a->lat += now() - t0;
	}
	cudaStreamSynchronize(a->st);
	cudaEventDestroy(ev[0]);
	cudaEventDestroy(ev[1]);
	return NULL;
}

static void bench_cpu_batched(const char *file, int direct, const std::vector<int> &threads,
			      int reqs, int batch)
{
	char err[GVDK_ERRLEN];
	struct gvdk_map m;
	int fd;

	if (gvdk_load(file, &m, GVDK_LOAD_SKIP_FIEMAP, err)) {
		fprintf(stderr, "bench: %s\n", err);
		exit(1);
	}
	fd = open(file, O_RDONLY | (direct ? O_DIRECT : 0));
	if (fd < 0) {
		fprintf(stderr, "bench: %s: %s\n", file, strerror(errno));
		exit(1);
	}
	if (!direct) {
		std::vector<uint8_t> tmp(1 << 20);

		for (uint64_t o = 0; o < m.hdr.file_size; o += tmp.size())
			if (pread(fd, tmp.data(), tmp.size(), (off_t)o) < 0)
				break;
	}
	for (int t : threads) {
		std::vector<pthread_t> th(t);
		std::vector<bat_arg> a(t);
		pthread_barrier_t go;
		int bad = 0;
		double lat = 0;

		pthread_barrier_init(&go, NULL, (unsigned)t + 1);
		for (int i = 0; i < t; i++) {
			a[i] = {};
			a[i].fd = fd;
			a[i].id = i;
			a[i].batch = batch;
			a[i].reqs = (reqs + batch - 1) / batch * batch;
			a[i].data_off = m.hdr.data_offset;
			a[i].nblocks = m.hdr.nblocks;
			a[i].go = &go;
			CK(cudaMalloc((void **)&a[i].gpu, (size_t)batch * 4096));
			CK(cudaHostAlloc((void **)&a[i].host, (size_t)2 * batch * 4096,
					 cudaHostAllocDefault));
			CK(cudaStreamCreateWithFlags(&a[i].st, cudaStreamNonBlocking));
			pthread_create(&th[i], NULL, bat_worker, &a[i]);
		}
		double t0 = now();

		pthread_barrier_wait(&go); /* every thread and buffer ready: the clock starts */
		t0 = now();
		double c0 = others_cpu();

		for (int i = 0; i < t; i++)
			pthread_join(th[i], NULL);
		double s = now() - t0, ios = 0, c1 = others_cpu();

		for (int i = 0; i < t; i++) {
			ios += a[i].reqs;
			lat += a[i].lat;
			bad += a[i].bad;
			cudaFree(a[i].gpu);
			cudaFreeHost(a[i].host);
			cudaStreamDestroy(a[i].st);
		}
		pthread_barrier_destroy(&go);
		/* lat_us: host time per request to read it and queue its copy (batch amortised) */
		printf("randread,posix-cpu-batched%s,0,%d,%.0f,%.1f,%.2f,%d",
		       direct ? "-direct" : "", t, ios / s, ios * 4096 / s / 1e6, lat / ios * 1e6,
		       bad);
		print_cpu(ios, s, c1 - c0);
		fflush(stdout);
	}
	close(fd);
	gvdk_map_free(&m);
}

/* The warp's next random offset, a multiple of len below npos * len (xorshift32 state s). */
__device__ static inline uint64_t bench_next_off(uint32_t *s, uint64_t npos, uint32_t len)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return (*s % npos) * len;
}

/* Warp-uniform reads of len bytes at random page-aligned offsets (through the cache or raw). */
template <unsigned B>
__device__ static inline void hit_body(struct gemini_dev *d, int fd, const uint8_t *raw,
				       uint64_t size, uint32_t len, int iters, uint8_t *out,
				       unsigned long long *errs)
{
	uint64_t warp = (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) / 32;
	uint32_t s = (uint32_t)warp * 2654435761u + 17;
	uint8_t *b = out + warp * len;
	uint64_t npos = size / len;

	for (int i = 0; i < iters; i++) {
		uint64_t o = bench_next_off(&s, npos, len);

		if (raw) {
			const uint4 *src = (const uint4 *)(raw + o);
			uint4 *dst = (uint4 *)b;

			for (uint32_t k = threadIdx.x & 31; k < len / 16; k += 32)
				dst[k] = src[k];
		} else if (gemini_dev_read<B>(d, fd, o, len, b) != len && (threadIdx.x & 31) == 0) {
			atomicAdd(errs, 1);
		}
	}
}

template <unsigned B>
__global__ static void k_hit(struct gemini_dev *d, int fd, const uint8_t *raw, uint64_t size,
			     uint32_t len, int iters, uint8_t *out, unsigned long long *errs)
{
	hit_body<B>(d, fd, raw, size, len, iters, out, errs);
}

/* The same with at most 64 registers a thread (4 blocks of 256 threads an SM): HIT_BK=host64 */
__global__ static void __launch_bounds__(256, 4)
    k_hit64(struct gemini_dev *d, int fd, const uint8_t *raw, uint64_t size, uint32_t len,
	    int iters, uint8_t *out, unsigned long long *errs)
{
	hit_body<BK>(d, fd, raw, size, len, iters, out, errs);
}

__global__ static void k_seq(struct gemini_dev *d, int fd, uint64_t size, uint32_t chunk,
			     uint8_t *out, unsigned long long *errs)
{
	uint64_t warp = (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) / 32;
	uint64_t nw = (gridDim.x * (uint64_t)blockDim.x) / 32;
	uint64_t per = size / nw / chunk * chunk;
	uint8_t *b = out + warp * chunk;

	for (uint64_t o = warp * per; o < (warp + 1) * per; o += chunk)
		if (gemini_dev_read<BK>(d, fd, o, chunk, b) != chunk && (threadIdx.x & 31) == 0)
			atomicAdd(errs, 1);
}

/* HIT_BK=all: k_hit built with both queue drivers (what a kernel gets by default); host64: at
 * most 64 registers */
static bool hit_all, hit_64;

static float run_hit(struct gemini_ctx *c, int fd, const uint8_t *raw, uint64_t size, uint32_t len,
		     int warps, int iters, uint8_t *out, unsigned long long *de)
{
	cudaEvent_t a, b;
	float ms;
	int bs = warps * 32 < 256 ? warps * 32 : 256;

	cudaEventCreate(&a);
	cudaEventCreate(&b);
	cudaEventRecord(a);
	if (hit_64)
		k_hit64<<<warps * 32 / bs, bs>>>(gemini_device(c), fd, raw, size, len, iters, out,
						 de);
	else if (hit_all)
		k_hit<GEMINI_BK_ALL>
		    <<<warps * 32 / bs, bs>>>(gemini_device(c), fd, raw, size, len, iters, out, de);
	else
		k_hit<BK>
		    <<<warps * 32 / bs, bs>>>(gemini_device(c), fd, raw, size, len, iters, out, de);
	cudaEventRecord(b);
	CK(cudaEventSynchronize(b));
	cudaEventElapsedTime(&ms, a, b);
	return ms;
}

/* Page-cache hit bandwidth against a raw gather of the same bytes in HBM. */
static void bench_hit(const char *file, size_t page, const std::vector<int> &warps)
{
	int fd;
	int64_t size;
	struct gemini_ctx *c = open_ctx("nvme-mem", page, 0, 0, 4, file, &fd);
	uint8_t *raw, *out;
	unsigned long long *de, e = 0;
	uint32_t len = page < 65536 ? (uint32_t)page : 65536;

	(void)c;
	if (!c)
		return;
	size = gemini_file_size(c, fd);
	gemini_exit(c);
	/* four times the file: the sharded LRU needs headroom so that no shard overflows */
	c = open_ctx("nvme-mem", page, (size_t)size * 4, 0, 4, file, &fd);
	CK(cudaMalloc((void **)&raw, size));
	CK(cudaMalloc((void **)&out, (size_t)8192 * len));
	CK(cudaMalloc((void **)&de, 8));
	cudaMemset(de, 0, 8);
	k_seq<<<64, 256>>>(gemini_device(c), fd, size, (uint32_t)page, out,
			   de); /* fill the cache */
	CK(cudaDeviceSynchronize());
	struct gemini_stats st0, st1;

	gemini_stats(c, &st0);
	for (int w : warps) {
		/* up to 4 GiB moved per point, fewer for a handful of warps */
		int iters = (int)((8ull << 30) / ((uint64_t)w * len));

		if (iters > 4096)
			iters = 4096;
		if (iters < 64)
			iters = 64; /* long enough that one slow warp does not set the time */
		run_hit(c, fd, NULL, size, len, w, 2, out, de);
		float ms = run_hit(c, fd, NULL, size, len, w, iters, out, de);
		float rms = run_hit(c, fd, raw, size, len, w, iters, out, de);
		double bytes = (double)w * iters * len;

		printf("hit,%zu,%u,%d,%.1f,%.1f\n", page, len, w, bytes / (ms / 1e3) / 1e9,
		       bytes / (rms / 1e3) / 1e9);
		fflush(stdout);
	}
	gemini_stats(c, &st1);
	cudaMemcpy(&e, de, 8, cudaMemcpyDeviceToHost);
	fprintf(stderr, "bench: hit page %zu: %llu misses during the timed runs, %llu errors\n",
		page, (unsigned long long)(st1.misses - st0.misses), e);
	cudaFree(raw);
	cudaFree(out);
	cudaFree(de);
	gemini_close(c, fd);
	gemini_exit(c);
}

/*
 * Hit-path ablation: each warp's leader does only part of an acquisition on random resident
 * pages (stage 0: shard lock + unlock; 1: + hash walk; 2: gm_acquire + gm_release, i.e. + ref
 * and LRU updates; 3: the whole gemini_dev_read, copy included), so differences between stages
 * place the time. div counts gemini_dev_read calls that began with a partial warp.
 */
__global__ static void k_ablate(struct gemini_dev *d, int fd, uint64_t size, uint32_t len,
				int iters, int stage, uint8_t *out, unsigned long long *div)
{
	uint64_t warp = (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) / 32;
	uint32_t s = (uint32_t)warp * 2654435761u + 17;
	const int lane = threadIdx.x & 31;
	uint8_t *b = out + warp * len;
	uint64_t npos = size / len;

	for (int i = 0; i < iters; i++) {
		uint64_t o = bench_next_off(&s, npos, len);
		unsigned long long key = ((unsigned long long)fd << 48) | (o >> d->page_shift);
		uint64_t h = gm_mix(key);
		struct gm_shard *sh = gm_shard_of(d, h);

		if (stage == 3) {
			if (__activemask() != 0xffffffffu && lane == __ffs(__activemask()) - 1)
				atomicAdd(div, 1);
			gemini_dev_read<BK>(d, fd, o, len, b);
			continue;
		}
		if (lane == 0) {
			if (stage == 2) {
				bool missed;
				int slot =
				    gm_acquire<BK>(d, fd, o >> d->page_shift, 1, false, &missed);

				if (slot >= 0)
					gm_release(d, slot, 1, false);
			} else {
				int *head = gm_bucket(d, h);
				int j = -1;

				if (gm_lock(d, &sh->lock))
					continue;
				if (stage == 1)
					for (j = *head; j >= 0; j = d->hnext[j])
						if (d->key[j] == key)
							break;
				gm_unlock(&sh->lock);
				if (j == -2)
					atomicAdd(div, 1); /* keeps the walk */
			}
		}
		__syncwarp();
	}
}

static void bench_ablate(const char *file, size_t page, const std::vector<int> &warps)
{
	int fd;
	struct gemini_ctx *c = open_ctx("nvme-mem", page, 0, 0, 4, file, &fd);
	uint8_t *out;
	unsigned long long *dv, dvh = 0;
	uint32_t len = page < 65536 ? (uint32_t)page : 65536;
	int64_t size;

	if (!c)
		return;
	size = gemini_file_size(c, fd);
	gemini_exit(c);
	c = open_ctx("nvme-mem", page, (size_t)size * 4, 0, 4, file, &fd);
	CK(cudaMalloc((void **)&out, (size_t)8192 * len));
	CK(cudaMalloc((void **)&dv, 8));
	cudaMemset(dv, 0, 8);
	k_seq<<<64, 256>>>(gemini_device(c), fd, size, (uint32_t)page, out, dv);
	CK(cudaDeviceSynchronize());
	struct gemini_dev hd;

	CK(cudaMemcpy(&hd, gemini_device(c), sizeof(hd), cudaMemcpyDeviceToHost));
	fprintf(stderr, "bench: ablate page %zu: %u pages in %u shards, %u buckets each\n", page,
		hd.npages, hd.nshards, hd.nbuckets);
	for (int w : warps)
		for (int stage = 0; stage < 4; stage++) {
			int iters = stage == 3 ? 64 : 512;
			int bs = w * 32 < 256 ? w * 32 : 256;
			cudaEvent_t a, b;
			float ms;

			cudaMemset(dv, 0, 8);
			cudaEventCreate(&a);
			cudaEventCreate(&b);
			k_ablate<<<w * 32 / bs, bs>>>(gemini_device(c), fd, size, len, 2, stage,
						      out, dv);
			cudaEventRecord(a);
			k_ablate<<<w * 32 / bs, bs>>>(gemini_device(c), fd, size, len, iters, stage,
						      out, dv);
			cudaEventRecord(b);
			CK(cudaEventSynchronize(b));
			CK(cudaGetLastError());
			cudaEventElapsedTime(&ms, a, b);
			cudaMemcpy(&dvh, dv, 8, cudaMemcpyDeviceToHost);
			/* time per operation of one warp, and operations per second over all warps
			 */
			printf("ablate,%zu,%u,%d,%d,%.2f,%.1f,%llu\n", page, len, w, stage,
			       ms * 1e3 / iters, (double)w * iters / (ms / 1e3) / 1e6, dvh);
			fflush(stdout);
		}
	cudaFree(out);
	cudaFree(dv);
	gemini_close(c, fd);
	gemini_exit(c);
}

/* Cold sequential scan through the cache: page size and prefetch. */
static void bench_seq(const char *file, const char *backend, size_t page, unsigned pf, int warps)
{
	int fd;
	struct gemini_ctx *c = open_ctx(backend, page, 256 << 20, pf, 4, file, &fd);
	uint8_t *out;
	unsigned long long *de, e = 0;
	cudaEvent_t a, b;
	float ms;
	int64_t size;

	if (!c)
		return;
	size = gemini_file_size(c, fd);
	CK(cudaMalloc((void **)&out, (size_t)warps * page));
	CK(cudaMalloc((void **)&de, 8));
	cudaMemset(de, 0, 8);
	cudaEventCreate(&a);
	cudaEventCreate(&b);
	cudaEventRecord(a);
	k_seq<<<warps * 32 / 256, 256>>>(gemini_device(c), fd, size, (uint32_t)page, out, de);
	cudaEventRecord(b);
	CK(cudaEventSynchronize(b));
	cudaEventElapsedTime(&ms, a, b);
	cudaMemcpy(&e, de, 8, cudaMemcpyDeviceToHost);
	printf("seq,%s,%zu,%u,%d,%.1f,%llu\n", backend, page, pf, warps,
	       (double)size / (ms / 1e3) / 1e6, e);
	fflush(stdout);
	cudaFree(out);
	cudaFree(de);
	gemini_close(c, fd);
	gemini_exit(c);
}

/*
 * What one controller thread pays per command: the host time of one cudaMemcpyBatchAsync call
 * with k random 4 KiB host-to-device copies, and the time until the batch has landed.
 */
static void bench_copycost(void)
{
	const size_t region = 256u << 20;
	uint8_t *host, *dev;
	cudaStream_t st;
	cudaEvent_t ev;

	CK(cudaHostAlloc((void **)&host, region, cudaHostAllocDefault));
	CK(cudaMalloc((void **)&dev, region));
	CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
	CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
	memset(host, 7, region);
	for (int k : {1, 16, 64, 256, 1024, 4096}) {
		std::vector<void *> dst(k);
		std::vector<const void *> src(k);
		std::vector<size_t> sz(k, 4096);
		struct cudaMemcpyAttributes attr;
		size_t idx = 0;
		double call = 0, total = 0;
		const int reps = 20;

		memset(&attr, 0, sizeof(attr));
		attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
		for (int r = 0; r < reps + 2; r++) {
			for (int i = 0; i < k; i++) {
				src[i] = host + (size_t)(rand() % (region / 4096)) * 4096;
				dst[i] = dev + (size_t)(rand() % (region / 4096)) * 4096;
			}
			double t0 = now();

			CK(cudaMemcpyBatchAsync(dst.data(), src.data(), sz.data(), k, &attr, &idx,
						1, st));
			double t1 = now();

			CK(cudaEventRecord(ev, st));
			CK(cudaEventSynchronize(ev));
			if (r >= 2) {
				call += t1 - t0;
				total += now() - t0;
			}
		}
		printf("copycost,%d,%.3f,%.3f\n", k, call / reps / k * 1e6, total / reps / k * 1e6);
		fflush(stdout);
	}
	cudaEventDestroy(ev);
	cudaStreamDestroy(st);
	cudaFree(dev);
	cudaFreeHost(host);
}

/* Cost of the two-level map lookup against raw offset arithmetic, per translation. */
__global__ static void k_map(struct gemini_dev *d, int fd, uint64_t size, int iters, int raw,
			     unsigned long long *sink)
{
	uint64_t tid = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
	uint32_t s = (uint32_t)tid * 2654435761u + 1;
	uint64_t acc = 0, base = d->files[fd].l2[0];

	for (int i = 0; i < iters; i++) {
		s ^= s << 13;
		s ^= s >> 17;
		s ^= s << 5;
		uint64_t o = ((uint64_t)s * 4096) % size;

		acc += raw ? base + o : gm_map(&d->files[fd], o);
	}
	if (acc == 42)
		atomicAdd(sink, acc);
}

static void bench_map(const char *file)
{
	int fd;
	struct gemini_ctx *c = open_ctx("nvme-mem", 65536, 64 << 20, 0, 1, file, &fd);
	unsigned long long *sink;
	float ms[2];

	if (!c)
		return;
	CK(cudaMalloc((void **)&sink, 8));
	for (int pass = 0; pass < 3; pass++)
		for (int raw = 0; raw < 2; raw++) {
			cudaEvent_t a, b;

			cudaEventCreate(&a);
			cudaEventCreate(&b);
			cudaEventRecord(a);
			k_map<<<1, 32>>>(gemini_device(c), fd, gemini_file_size(c, fd), 100000, raw,
					 sink);
			cudaEventRecord(b);
			CK(cudaEventSynchronize(b));
			cudaEventElapsedTime(&ms[raw], a, b);
		}
	/* one warp, dependent chain of translations: the latency a single request pays */
	printf("map,%.1f,%.1f\n", ms[0] * 1e6 / 100000, ms[1] * 1e6 / 100000);
	cudaFree(sink);
	gemini_close(c, fd);
	gemini_exit(c);
}

static std::vector<int> parse_list(const char *s)
{
	std::vector<int> v;
	char *end;

	while (*s) {
		v.push_back((int)strtol(s, &end, 10));
		s = *end ? end + 1 : end;
	}
	return v;
}

int main(int argc, char **argv)
{
	const char *bk = getenv("HIT_BK");

	hit_all = bk && !strcmp(bk, "all");
	hit_64 = bk && !strcmp(bk, "host64");
	if (argc >= 7 && !strcmp(argv[1], "randread"))
		bench_randread(argv[2], argv[3], (unsigned)atoi(argv[4]), atoi(argv[5]),
			       parse_list(argv[6]), argc > 7 ? atoi(argv[7]) : 64);
	else if (argc >= 5 && !strcmp(argv[1], "cpu-batched"))
		bench_cpu_batched(argv[2], !strcmp(argv[3], "direct"), parse_list(argv[4]),
				  argc > 5 ? atoi(argv[5]) : 4096, argc > 6 ? atoi(argv[6]) : 64);
	else if (argc >= 5 && !strcmp(argv[1], "cpu"))
		bench_cpu(argv[2], !strcmp(argv[3], "direct"), !strcmp(argv[3], "gds"),
			  parse_list(argv[4]), argc > 5 ? atoi(argv[5]) : 2000);
	else if (argc >= 3 && !strcmp(argv[1], "map"))
		bench_map(argv[2]);
	else if (argc >= 5 && !strcmp(argv[1], "hit"))
		bench_hit(argv[2], (size_t)atol(argv[3]), parse_list(argv[4]));
	else if (argc >= 2 && !strcmp(argv[1], "copycost"))
		bench_copycost();
	else if (argc >= 5 && !strcmp(argv[1], "ablate"))
		bench_ablate(argv[2], (size_t)atol(argv[3]), parse_list(argv[4]));
	else if (argc >= 7 && !strcmp(argv[1], "seq"))
		bench_seq(argv[2], argv[3], (size_t)atol(argv[4]), (unsigned)atoi(argv[5]),
			  atoi(argv[6]));
	else {
		fprintf(
		    stderr,
		    "usage: bench_gemini randread FILE BACKEND HOSTTHREADS RAW T1,T2.. [REQS]\n"
		    "         RAW 0: gemini_dev_read_direct, 1: raw device offsets, 2: "
		    "gemini_dev_read (cache)\n"
		    "       bench_gemini cpu FILE buffered|direct|gds T1,T2.. [REQS]\n"
		    "       bench_gemini cpu-batched FILE buffered|direct T1,T2.. [REQS [BATCH]]\n"
		    "       [HIT_BK=all|host64] bench_gemini hit FILE PAGESIZE W1,W2..\n"
		    "       bench_gemini ablate FILE PAGESIZE W1,W2..\n"
		    "       bench_gemini copycost\n"
		    "       bench_gemini seq FILE BACKEND PAGESIZE PREFETCH WARPS\n");
		return 2;
	}
	return 0;
}
