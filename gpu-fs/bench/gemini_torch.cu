// ctypes entry points for the PyTorch offload workload (bench/gpt2_offload.py): one libgemini
// context per process, tensors moved to and from gpu-fs files by gemini_dev_write/gemini_dev_read
// kernels on the caller's CUDA stream, so they order with the framework's own kernels.
#include <fcntl.h>
#include <stdio.h>
#include <string.h>

#include "gemini.h"

static struct gemini_ctx *gt_ctx;
static size_t gt_page;

/*
 * Each warp moves whole chunks of [off, off + len). Through the page cache (MAPPED false) a chunk
 * is a page (a full-page write skips the read of the old page); MAPPED: the mapped path's SM
 * loads and stores (no controller; each call makes its chunk coherent with the page cache
 * first), and err is 95 when the file has no image. Built for the in-process controller's queue
 * driver alone: the contexts here are of its backends.
 */
template <bool MAPPED>
__global__ static void gt_xfer(struct gemini_dev *d, int fd, uint64_t off, uint64_t len,
			       uint8_t *buf, uint32_t chunk, int write, int *err)
{
	uint64_t warp = (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) / 32;
	uint64_t nw = (gridDim.x * (uint64_t)blockDim.x) / 32;
	uint64_t nchunks = (len + chunk - 1) / chunk;

	for (uint64_t k = warp; k < nchunks; k += nw) {
		uint64_t n = len - k * chunk < chunk ? len - k * chunk : chunk;
		uint64_t o = off + k * chunk;
		uint8_t *p = buf + k * chunk;
		int64_t r;

		if (MAPPED)
			r = write ? gemini_dev_write_mapped<GEMINI_BK_HOST>(d, fd, o, n, p)
				  : gemini_dev_read_mapped<GEMINI_BK_HOST>(d, fd, o, n, p);
		else
			r = write ? gemini_dev_write<GEMINI_BK_HOST>(d, fd, o, n, p)
				  : gemini_dev_read<GEMINI_BK_HOST>(d, fd, o, n, p);
		if (r != (int64_t)n && (threadIdx.x & 31) == 0)
			atomicExch(err, MAPPED && r == -95 ? 95 : 1);
	}
}

/* Launches gt_xfer<MAPPED> on stream with at most `warps` warps (whole blocks of 8); 0 or -5. */
template <bool MAPPED>
static int gt_launch(int fd, uint64_t off, uint64_t len, void *buf, uint32_t chunk, int write,
		     void *stream, void *err, int warps)
{
	uint64_t nchunks = (len + chunk - 1) / chunk;
	int w = (int)(nchunks < (uint64_t)warps ? nchunks : (uint64_t)warps);

	w = (w + 7) / 8 * 8;
	gt_xfer<MAPPED><<<w / 8, 256, 0, (cudaStream_t)stream>>>(
	    gemini_device(gt_ctx), fd, off, len, (uint8_t *)buf, chunk, write, (int *)err);
	return cudaGetLastError() == cudaSuccess ? 0 : -5;
}

__global__ static void gt_sync_kernel(struct gemini_dev *d, int fd, int *err)
{
	if (gemini_dev_sync<GEMINI_BK_HOST>(d, fd))
		atomicExch(err, 1);
}

extern "C" {

/* backend: 0 nvme over a memory namespace, 1 nvme over the file's extents, 2 posix proxy. */
int gt_init(int backend, size_t page, size_t cache, unsigned host_threads)
{
	struct gemini_config k;

	memset(&k, 0, sizeof(k));
	k.backend = backend == 2 ? GEMINI_BACKEND_POSIX : GEMINI_BACKEND_NVME;
	k.memory_namespace = backend == 0;
	k.page_size = page;
	k.cache_size = cache;
	k.nqueues = 128;
	k.qdepth = 64;
	k.host_threads = host_threads;
	gt_page = page;
	return gemini_init(&gt_ctx, &k);
}

int gt_open(const char *path, int writable)
{
	int fd = gemini_open(gt_ctx, path, writable ? O_RDWR : O_RDONLY);

	if (fd < 0)
		fprintf(stderr, "gemini_torch: %s\n", gemini_last_error(gt_ctx));
	return fd;
}

long long gt_size(int fd)
{
	return (long long)gemini_file_size(gt_ctx, fd);
}

/* Runs the transfer on stream (a cudaStream_t) and waits for it; err (device int) is set on
 * failure. */
int gt_xfer_async(int fd, unsigned long long off, unsigned long long len, void *buf, int write,
		  void *stream, void *err, int warps)
{
	if (!len)
		return 0;
	if (gt_launch<false>(fd, off, len, buf, (uint32_t)gt_page, write, stream, err, warps))
		return -5;
	/*
	 * Wait here: while this kernel waits for the controller's copies, the framework would
	 * go on queueing kernels behind it, and once the launch queue is full its launch blocks
	 * inside the driver in a way that also blocks the controller's cudaMemcpy calls from
	 * another thread (measured on the H200: every CUDA call of a third thread hung too).
	 */
	return cudaStreamSynchronize((cudaStream_t)stream) == cudaSuccess ? 0 : -5;
}

/* The mapped path on the copy engines (gemini_mapped_copy_async); returns without waiting:
 * nothing here waits for the controller unless the range has dirty cached pages. 0, or -errno:
 * -EOPNOTSUPP (95) when the file has no image (the caller falls back to gt_xfer_async). */
int gt_mapped_async(int fd, unsigned long long off, unsigned long long len, void *buf, int write,
		    void *stream)
{
	return gemini_mapped_copy_async(gt_ctx, fd, off, buf, len, write, stream);
}

/* The mapped path with SM loads and stores (gemini_dev_read_mapped/gemini_dev_write_mapped in a
 * kernel of `warps` warps, 256 KiB a warp at a time); err (device int) is set on failure, to 95
 * when the file has no image. Checked on the host first so the caller can fall back at once. */
int gt_mapped_sm_async(int fd, unsigned long long off, unsigned long long len, void *buf, int write,
		       void *stream, void *err, int warps)
{
	/* a zero-length host copy only checks the descriptor, the image and the mode */
	int rc = gemini_mapped_copy_async(gt_ctx, fd, off, buf, 0, write, stream);

	if (rc || !len)
		return rc;
	return gt_launch<true>(fd, off, len, buf, 256 << 10, write, stream, err, warps);
}

int gt_sync(int fd, void *stream, void *err)
{
	/* every warp of a gemini_dev_sync scans the whole cache and sends a flush: one block is
	 * enough */
	gt_sync_kernel<<<1, 256, 0, (cudaStream_t)stream>>>(gemini_device(gt_ctx), fd, (int *)err);
	if (cudaGetLastError() != cudaSuccess)
		return -5;
	return cudaStreamSynchronize((cudaStream_t)stream) == cudaSuccess ? 0 : -5; /* as above */
}

/* Writes back and forgets fd's cached pages (between modes: the mapped path's coherence kernel
 * then finds none, and never waits for the controller with the framework's work queued behind
 * it). 0 or -errno. */
int gt_drop(int fd)
{
	int rc = gemini_sync(gt_ctx, fd);

	return rc ? rc : gemini_cache_drop(gt_ctx);
}

void gt_stats(unsigned long long *out)
{
	struct gemini_stats st;

	gemini_stats(gt_ctx, &st);
	out[0] = st.hits;
	out[1] = st.misses;
	out[2] = st.evictions;
	out[3] = st.writebacks;
	out[4] = st.io_errors;
	out[5] = st.commands;
}

void gt_exit(void)
{
	gemini_exit(gt_ctx);
	gt_ctx = NULL;
}
}
