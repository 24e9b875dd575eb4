/* libgemini's in-process controller, shared by gemini_ctrl.cu (the controller threads),
 * gemini_watchdog.cu and gemini_backend.cu (which starts both): a controller thread's state (one
 * batch of ops, the checker's view of the context, what the watchdog reads). Not installed. */
#ifndef GEMINI_CTRL_H
#define GEMINI_CTRL_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <cuda_runtime.h>
#ifdef GEMINI_HAVE_URING
#include <liburing.h>
#endif

#include "gemini_backend.h"
#include "lightiov/check.h"

#define GM_BOUNCE (32u << 20)
#define GM_BATCH  4096
#define GM_SEGS	  (2 * GM_BATCH) /* data segments of one batch (a contiguous buffer is one) */

struct gm_op {
	uint32_t pos;
	uint16_t cid;
	uint16_t status;
	uint8_t opcode;
	int io_fd; /* >= 0: file I/O at io_off (pread before the copy, pwrite after) */
	uint64_t io_off;
	uint8_t *bounce;
	uint8_t *host; /* the namespace's bytes: the memory image or the bounce buffer */
	size_t len;
	uint32_t seg0; /* the checker's data segments: worker segs[seg0, seg0 + nsegs) */
	uint32_t nsegs;
};

struct gm_worker {
	struct gemini_ctx *c;
	int id;
	cudaStream_t stream;
	uint8_t *bounce;
	size_t used;
	struct gm_op ops[GM_BATCH];
	struct lio_seg segs[GM_SEGS];
	uint32_t nsegs;
	void *dsts[GM_SEGS];
	const void *srcs[GM_SEGS];
	size_t sizes[GM_SEGS];
	/* the checker's view of this context: DMA window (arena pages, registered buffers, PRP
	 * lists), LBA window (up to the end of the last open file's blocks) */
	struct lio_check_region regions[2 + 16];
	struct lio_check_ctx chk;
	int flush;
	/* read by the watchdog: what this thread does since when, and how much it has served */
	volatile int phase;
	volatile uint64_t phase_ns;
	volatile unsigned long long served;
#ifdef GEMINI_HAVE_URING
	struct io_uring ring;
	int ring_ok;
#endif
};

/* what a controller thread does (the watchdog's gm_phase_name) */
enum { GM_PH_POLL, GM_PH_DISK_READ, GM_PH_COPY, GM_PH_DISK_WRITE, GM_PH_FLUSH };

static inline uint64_t gm_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void gm_phase(struct gm_worker *w, int ph)
{
	w->phase_ns = gm_now_ns();
	w->phase = ph;
}

/* gemini_ctrl.cu */
int gm_rw_all(int fd, void *buf, size_t len, uint64_t off, bool write);
void *gm_ctrl_thread(void *arg);
/* gemini_watchdog.cu: GEMINI_WATCHDOG=S */
void *gm_watchdog(void *arg);

#endif
