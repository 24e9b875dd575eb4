/* GSI allocator for MSI routes: a bitmap over [first, limit), lowest free first, so a GSI
 * freed by a device teardown goes to the next device instead of the pool running dry. */
#include "gsi.h"

#include <errno.h>
#include <string.h>

void gsi_alloc_init(struct gsi_alloc *a, unsigned first, unsigned limit)
{
	memset(a, 0, sizeof(*a));
	a->limit = limit > GSI_ALLOC_MAX ? GSI_ALLOC_MAX : limit;
	a->first = first > a->limit ? a->limit : first;
}

int gsi_alloc_get(struct gsi_alloc *a)
{
	unsigned g;

	for (g = a->first; g < a->limit; g++) {
		uint64_t *w = &a->map[g / 64], bit = 1ull << (g % 64);

		if (*w == ~0ull) {
			g |= 63; /* a full word: skip to the next one */
			continue;
		}
		if (!(*w & bit)) {
			*w |= bit;
			a->used++;
			return (int)g;
		}
	}
	return -ENOSPC;
}

bool gsi_alloc_busy(const struct gsi_alloc *a, unsigned gsi)
{
	return gsi >= a->first && gsi < a->limit && (a->map[gsi / 64] >> (gsi % 64)) & 1;
}

int gsi_alloc_put(struct gsi_alloc *a, unsigned gsi)
{
	if (!gsi_alloc_busy(a, gsi))
		return -EINVAL;
	a->map[gsi / 64] &= ~(1ull << (gsi % 64));
	a->used--;
	return 0;
}

unsigned gsi_alloc_count(const struct gsi_alloc *a)
{
	return a->used;
}
