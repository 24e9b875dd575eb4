/* libgemini internals shared by the host API and the backends: the context, open files, the
 * device-offset run table and the backend entry points. Not installed. */
#ifndef GEMINI_BACKEND_H
#define GEMINI_BACKEND_H

#include <pthread.h>
#include <stdint.h>

#include "gemini.h"
#include "gemini_device.cuh"
#include "gvdk_format.h"

/* Queue memory (shared host memory; the GPU sees it mapped): per queue pair the SQ (depth x 64
 * bytes), the CQ (depth x 16) and the doorbell, padded to 64 bytes, pairs one after another. */
struct gm_qpair {
	struct nvme_sqe *sq;
	struct nvme_cqe *cq;
	uint32_t *db;
};

static inline size_t gm_qpair_bytes(uint32_t depth)
{
	return (size_t)depth * (64 + 16) + 64;
}

/* Queue pair qi inside mem, the host's or the device's address of the queue memory. */
static inline struct gm_qpair gm_qpair_at(uint8_t *mem, uint32_t depth, uint32_t qi)
{
	uint8_t *base = mem + qi * gm_qpair_bytes(depth);
	struct gm_qpair p = {(struct nvme_sqe *)base, (struct nvme_cqe *)(base + depth * 64),
			     (uint32_t *)(base + depth * 80)};

	return p;
}

/* After the queue pairs, page aligned: each SQ slot's PRP list (GM_PRP_LIST bytes), queue after
 * queue; a list at a 256-byte boundary never crosses its 4 KiB page (lio_sqe_check's rule). */
static inline size_t gm_prp_off(uint32_t nqueues, uint32_t depth)
{
	return ((size_t)nqueues * gm_qpair_bytes(depth) + 4095) & ~(size_t)4095;
}

static inline size_t gm_qmem_bytes(uint32_t nqueues, uint32_t depth)
{
	return gm_prp_off(nqueues, depth) + (size_t)nqueues * depth * GM_PRP_LIST;
}

/* A physically contiguous run of one file's data blocks. */
struct gm_run {
	uint64_t dev;
	uint64_t len;
	uint64_t file_off;
	int fd;
	int writable;
};

struct gm_hfile {
	int open;
	size_t map_off; /* this file's L1/L2 maps in the map region */
	size_t map_len;
	int sysfd;
	int writable;
	struct gvdk_header hdr;
	uint8_t *mem;	  /* memory namespace: pinned copy of the whole file */
	uint8_t *mem_dev; /* the GPU's alias of mem (mapped), or NULL */
	void *cufile;	  /* gds: CUfileHandle_t */
	char path[4096];
};

struct gm_window {
	uint64_t base;
	uint64_t len;
};

struct gemini_ctx {
	struct gemini_config cfg;
	char err[512];
	int ready;
	uint8_t *arena;
	size_t arena_size;
	struct gemini_dev hdev;	 /* host copy of the device struct */
	struct gemini_dev *ddev; /* inside the arena */
	uint8_t *map_base;
	size_t map_high; /* end of the highest map ever placed (importers may still use below) */
	int exported;
	uint32_t npages;
	uint8_t *qmem;
	uint8_t *qmem_dev;
	size_t qbytes;
	char shm_name[64];
	struct gm_hfile files[GEMINI_MAX_FILES];
	pthread_rwlock_t runs_lock;
	struct gm_run *runs;
	size_t nruns;
	struct gm_window win[16];
	int nwin;
	pthread_t threads[64];
	void *workers[64];
	int nthreads;
	volatile int stop;
	volatile unsigned faults; /* GEMINI_FAULT_* injected (gemini_fault_inject) */
	uint32_t *qhead;
	uint32_t *turn_dev; /* the queues' turn and ctl words in the arena (watchdog) */
	pthread_t watchdog;
	unsigned watchdog_s;
	int watchdog_on;
	int rawfd; /* nvme disk namespace: the raw disk, when it can be opened */
	char ns_desc[256];
	int gds_open;
	/* lio backend (gemini_lio.c): the softssd session, its driver state and the queue pairs */
	struct lio_client *lio;
	struct lio_drv *liodrv;
	uint8_t *lio_mem_dev;  /* the DMA window as the GPU sees it */
	uint8_t *lio_qmem_dev; /* the queue memory as the GPU sees it */
	struct gm_lioq *lioq_dev;
	uint64_t lio_bounce; /* GPA of the host's bounce page in the window */
	uint64_t lio_vol_bytes;
	uint32_t lio_lba_shift;
	uint32_t lio_vol_id;
	int lio_fd;   /* the one open file, or -1 */
	int lio_regs; /* host registrations made (cudaHostRegister): 1 window, 2 both */
	/* per descriptor: a mapped copy's coherence step failed (-errno set by the kernel, pinned
	 * and mapped); reported once by the next gemini_mapped_copy_async or gemini_sync */
	int *mapped_err;
	int *mapped_err_dev;
};

__attribute__((format(printf, 3, 4))) int gm_err(struct gemini_ctx *c, int rc, const char *fmt,
						 ...);
int gm_backend_start(struct gemini_ctx *c);

/* lio backend (gemini_lio.c, plain C: the client library's headers are C) */
struct gvdk_map;
int gm_lio_config_check(const struct gemini_config *k);
void gm_lio_map(struct gvdk_map *m);
int gm_lio_start(struct gemini_ctx *c);
void gm_lio_stop(struct gemini_ctx *c);
int gm_lio_open(struct gemini_ctx *c, int fd);
void gm_lio_close(struct gemini_ctx *c, int fd);
void gm_backend_stop(struct gemini_ctx *c);
int gm_backend_open(struct gemini_ctx *c, int fd);
void gm_backend_close(struct gemini_ctx *c, int fd);

#endif
