/* PIO and MMIO buses: devices register address ranges with one small callback struct; the vCPU
 * exit handler dispatches by address and never knows device internals. */
#ifndef LVMM_BUS_H
#define LVMM_BUS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct bus_ops {
	/* len is 1, 2, 4 or 8; off is relative to the registered base. Reads fill data[0..len). */
	void (*read)(void *opaque, uint64_t off, void *data, unsigned len);
	void (*write)(void *opaque, uint64_t off, const void *data, unsigned len);
};

struct bus_range {
	uint64_t base, len;
	const struct bus_ops *ops;
	void *opaque;
	const char *name;
};

#define BUS_MAX_RANGES 64

struct bus {
	pthread_rwlock_t lock; /* ranges may change at run time (BAR moves) */
	unsigned n;
	struct bus_range r[BUS_MAX_RANGES];
};

void bus_init(struct bus *b);
/* -EEXIST on overlap, -ENOSPC when full. */
int bus_register(struct bus *b, uint64_t base, uint64_t len, const struct bus_ops *ops,
		 void *opaque, const char *name);
int bus_unregister(struct bus *b, uint64_t base, void *opaque);
/* Returns false when nothing is mapped at addr (reads then return all ones). */
bool bus_access(struct bus *b, uint64_t addr, void *data, unsigned len, bool is_write);

#endif
