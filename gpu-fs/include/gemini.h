/* libgemini public API: host calls (gemini_init, gemini_open, gemini_close, ...) and, when compiled
 * by nvcc, the device calls gemini_dev_read/gemini_dev_write/gemini_dev_sync over the GPU page
 * cache. */
#ifndef GEMINI_H
#define GEMINI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum gemini_backend {
	GEMINI_BACKEND_NVME,  /* GPU threads build NVMe commands; a controller serves them */
	GEMINI_BACKEND_POSIX, /* GPU requests proxied by host threads: pread/pwrite + cudaMemcpy */
	GEMINI_BACKEND_GDS,   /* GPU requests proxied by host threads through cuFile */
	GEMINI_BACKEND_LIO,   /* GPU threads drive NVMe queue pairs of a LightIOV backend (softssd):
			       * no host thread of this process on the I/O path */
};

#define GEMINI_MAX_FILES 16

struct gemini_config {
	enum gemini_backend backend;
	size_t page_size;      /* power of two, 4 KiB..1 MiB (default 64 KiB) */
	size_t cache_size;     /* bytes of HBM for the page cache (default 256 MiB) */
	unsigned prefetch;     /* pages read ahead on a miss (default 0) */
	unsigned nqueues;      /* I/O queue pairs (default 64) */
	unsigned qdepth;       /* entries per queue, power of two (default 64) */
	unsigned host_threads; /* controller / proxy threads on the host (default 1) */
	int memory_namespace;  /* nvme: serve a copy of each open file held in host memory */
	int direct;	       /* O_DIRECT on backing files */
	int device;	       /* CUDA device ordinal */
	unsigned timeout_ms;   /* bound on every GPU-side wait for the controller, another warp or
				* another process (default 10000): past it the call fails with
				* -ETIMEDOUT instead of hanging the kernel */
	/* lio backend: the SSD (softssd socket name or path, as lio_sock_path takes it) and the
	 * volume that holds the GVDK file byte for byte (`lvmm ssd vol import SSD VOL FILE`):
	 * volume byte x is file byte x. nqueues (at most GEMINI_LIO_MAX_QP) queue pairs of qdepth
	 * entries are created on it; one file is open at a time. */
	const char *lio_ssd;
	const char *lio_volume;
};

#define GEMINI_LIO_MAX_QP 15 /* GPU queue pairs on one session (one more is the host's) */

struct gemini_stats {
	uint64_t hits, misses, evictions, writebacks, io_errors, commands;
};

/* Opaque to users; cross-process sharing hands the page cache over with CUDA IPC. */
struct gemini_ctx;
struct gemini_dev;

struct gemini_ipc_handle {
	unsigned char bytes[512];
};

int gemini_init(struct gemini_ctx **ctx, const struct gemini_config *cfg);
void gemini_exit(struct gemini_ctx *ctx);
/* Returns a descriptor >= 0 or a negative errno; flags: O_RDONLY or O_RDWR. */
int gemini_open(struct gemini_ctx *ctx, const char *path, int flags);
int gemini_close(struct gemini_ctx *ctx, int fd);
const char *gemini_last_error(const struct gemini_ctx *ctx);
/* Device pointer passed to kernels that call gemini_dev_read/gemini_dev_write/gemini_dev_sync. */
struct gemini_dev *gemini_device(struct gemini_ctx *ctx);
int64_t gemini_file_size(struct gemini_ctx *ctx, int fd);
/* Lets gemini_dev_read_direct move data into this GPU buffer (the controller's DMA window
 * check). */
int gemini_register_buffer(struct gemini_ctx *ctx, void *gpu_ptr, size_t len);
/* One line on where the backend's data comes from (namespace, raw disk or file, gds state). */
const char *gemini_backend_desc(const struct gemini_ctx *ctx);

/*
 * GPU queue drivers a kernel that calls the device functions is built with: their template
 * argument, gemini_dev_read<GEMINI_BK_HOST>(...). GEMINI_BK_HOST drives the in-process
 * controller's queues (every backend but lio), GEMINI_BK_LIO the queue pairs of a LightIOV
 * backend; the default, GEMINI_BK_ALL, holds both and picks at run time. A kernel's registers
 * are those of its most demanding driver: the lio driver's copy keeps 32 loads in flight per
 * thread, so a kernel built with it holds about 2.5 times the registers of one built for the
 * in-process queues alone (docs/gpu-fs.md, section 4). A call on a context whose driver the
 * kernel lacks returns -EOPNOTSUPP. gemini_dev_driver says which one ctx needs, for launchers
 * that keep one kernel instance per driver.
 */
#define GEMINI_BK_HOST 1u
#define GEMINI_BK_LIO  2u
#define GEMINI_BK_ALL  (GEMINI_BK_HOST | GEMINI_BK_LIO)
unsigned gemini_dev_driver(const struct gemini_ctx *ctx);
/* Host-side gemini_dev_sync: writes back every dirty page of fd and flushes the backing. */
int gemini_sync(struct gemini_ctx *ctx, int fd);
/*
 * The mapped path, host side: moves len bytes between the GPU buffer gpu_buf and file fd's image
 * at data offset off (write: buffer to file) with one cudaMemcpyAsync on stream (a cudaStream_t;
 * NULL: the default stream), on the copy engines, no controller thread. Only files of the memory
 * namespace have an image; any other returns -EOPNOTSUPP and the caller uses the page cache
 * (gemini_dev_read/gemini_dev_write). Before the copy, in stream order, a small kernel makes the
 * range coherent with the page cache (docs/gpu-fs.md, "The mapped path"): dirty cached pages of
 * it are written back, and for a write dropped. Asynchronous: the bytes move when the stream
 * gets there; a coherence step that fails there (-EIO, -ETIMEDOUT: a dead controller) is
 * reported as -EIO by the next call on fd or by gemini_sync(fd). Returns 0, -EBADF (descriptor
 * not open, or a write to a read-only file), -EOPNOTSUPP, -EINVAL (off/len beyond the file, no
 * buffer), -ENOMEM or -EIO (a CUDA call failed).
 */
int gemini_mapped_copy_async(struct gemini_ctx *ctx, int fd, uint64_t off, void *gpu_buf,
			     size_t len, int write, void *stream);
/* Drops every clean, unreferenced page (tests and cold-cache benchmarks). */
int gemini_cache_drop(struct gemini_ctx *ctx);
int gemini_stats(struct gemini_ctx *ctx, struct gemini_stats *st);
/* Cross-process sharing: the exporter's cache and open files become visible to an importer
 * that runs the same files; the exporter keeps serving I/O for both. */
int gemini_ipc_export(struct gemini_ctx *ctx, struct gemini_ipc_handle *h);
int gemini_ipc_import(const struct gemini_ipc_handle *h, struct gemini_dev **dev, void **cookie);
void gemini_ipc_close(void *cookie);

/* Fault injection for tests and drills: the controller refuses every write (media write fault)
 * or stops serving its queues, as a dead controller would. 0 clears. */
#define GEMINI_FAULT_WRITES 1u
#define GEMINI_FAULT_STALL  2u
int gemini_fault_inject(struct gemini_ctx *ctx, unsigned faults);

#ifdef __cplusplus
}
#endif

#ifdef __CUDACC__
#include "gemini_device.cuh"
#endif

#endif
