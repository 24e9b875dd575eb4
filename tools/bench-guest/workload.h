/* Bench guest workload engine: queue depth, block size, offsets, read/write mixes, a number of
 * I/Os or a time, per-I/O latency histograms; a polled driver plugs in through struct work_dev. */
#ifndef BENCH_WORKLOAD_H
#define BENCH_WORKLOAD_H

#include <stdbool.h>
#include <stdint.h>

#define WORK_MAX_QUEUES 8
#define WORK_MAX_DEPTH	1024
#define WORK_MAX_BS	(128 * 1024)

/* One polled block device. Slots are the engine's tags: 0..depth-1 per queue. */
struct work_dev {
	const char *name;
	unsigned nqueues;   /* queue pairs the driver set up */
	unsigned depth;	    /* outstanding I/Os per queue it can hold */
	uint64_t capacity;  /* bytes */
	unsigned blk_shift; /* its logical block size, log2 */
	/* Places one I/O of len bytes at byte offset off from/into buf; false: refused at once. */
	bool (*submit)(unsigned q, unsigned slot, bool write, uint64_t off, unsigned len,
		       uint64_t buf);
	/* Makes what submit placed visible to the device (a doorbell or a notify). */
	void (*kick)(unsigned q);
	/* Up to max completions of queue q: their slots, and how many failed through *errors. */
	unsigned (*reap)(unsigned q, uint16_t *slots, unsigned max, unsigned *errors);
};

/* Parameters of a run, from bench.* on the command line (see workload.c). */
struct work_params {
	unsigned qd, nq, bs, read_pct;
	bool random;
	uint64_t ios, ms, ramp_ms, span, seed;
	bool halt;	  /* bench.wait=halt: wait for completion interrupts in hlt */
	unsigned poll_us; /* bench.poll_us: how long to poll before halting (20) */
	bool verify;	  /* bench.verify=on: patterned writes, checked reads */
	unsigned gap_us;  /* bench.gap_us: a slot waits this long after a completion */
};

void work_params_get(struct work_params *p);
uint64_t work_param_u64(const char *name, uint64_t def);
bool work_param_is(const char *name, const char *want);
/* A buffer of WORK_MAX_BS in guest memory shared by every I/O (contents do not matter). */
uint64_t work_buffer(void);
/* Runs the workload on dev and prints one "bench: work ..." result line; false on errors. With
 * bench.cpus=N the queue pairs are split across the vCPUs (pair i on vCPU i % N), vCPU 0 sums
 * the histograms and the line ends in vcpus=N vcpu_ios=A,B,... */
bool work_run(const struct work_dev *dev, const struct work_params *p);

/* Waiting in hlt (halt.c): devices raise WORK_IRQ_VECTOR through MSI-X to APIC 0. */
#define WORK_IRQ_VECTOR 0x40
void work_halt_setup(void);
void work_halt(void);
extern volatile uint64_t work_irqs;

#endif
