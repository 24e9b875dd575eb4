/* io_uring rings of device I/O threads. A ring's operations bypass seccomp, so each device
 * restricts its ring to the few opcodes it submits, with no SQE flags (no fixed files, no
 * links) and no register opcode once enabled (no new files, buffers or personalities). */
#ifndef LVMM_DEV_RING_H
#define LVMM_DEV_RING_H

#include <liburing.h>
#include <stdint.h>

/* Sets up ring with entries, disabled; registers efd (>= 0) to be signalled on completions;
 * restricts the ring to ops[0..nops) and enables it. 0 or a negative errno (ring torn down). */
int dev_ring_init(struct io_uring *ring, unsigned entries, int efd, const uint8_t *ops,
		  unsigned nops);

#endif
