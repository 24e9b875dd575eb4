/* What several fuzz targets share: typed values read off the input, and PCI platform operations
 * that accept every MSI route and irqfd (the harness has no KVM to tell). */
#ifndef LVMM_FUZZ_UTIL_H
#define LVMM_FUZZ_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fz_in {
	const uint8_t *p;
	size_t n;
};

/* The next `bytes` bytes, little endian; zeros once the input is used up. */
static inline uint64_t fz_take(struct fz_in *f, unsigned bytes)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < bytes && f->n; i++, f->n--)
		v |= (uint64_t)*f->p++ << (8 * i);
	return v;
}

static inline int fz_route_ok(void *o, unsigned gsi, uint64_t addr, uint32_t val, bool masked)
{
	(void)o;
	(void)gsi;
	(void)addr;
	(void)val;
	(void)masked;
	return 0;
}

static inline int fz_irqfd_ok(void *o, unsigned gsi, int efd, bool assign)
{
	(void)o;
	(void)gsi;
	(void)efd;
	(void)assign;
	return 0;
}

#endif
