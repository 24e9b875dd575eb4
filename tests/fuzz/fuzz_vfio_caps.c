/* libFuzzer target for the VFIO region-info parser (host-kmod/vfio/vfio_region.c): the input's
 * first byte is the region index asked for, the rest the info buffer the kernel would return
 * (struct vfio_region_info and its capability chain). Whatever parses must be self-consistent:
 * the region inside an off_t, at most VFIO_MAX_SPARSE areas, each non-empty and inside the region,
 * and none at all without the MMAP flag. */
#include <linux/vfio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vfio/vfio.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vfio_region r;
	char err[256];
	uint8_t *buf;

	if (!size)
		return 0;
	/* a buffer of exactly the input's length, so reading past it is caught */
	buf = malloc(size - 1 ? size - 1 : 1);
	if (!buf)
		return 0;
	memcpy(buf, data + 1, size - 1);
	if (vfio_region_parse(&r, data[0] % VFIO_NREGIONS, buf, size - 1, err, sizeof(err)) == 0) {
		if (r.size > (uint64_t)INT64_MAX || r.offset > (uint64_t)INT64_MAX - r.size ||
		    r.nsparse > VFIO_MAX_SPARSE ||
		    (r.nsparse && !(r.flags & VFIO_REGION_INFO_FLAG_MMAP)))
			abort();
		for (unsigned i = 0; i < r.nsparse; i++)
			if (!r.sparse[i].size || r.sparse[i].offset > r.size ||
			    r.sparse[i].size > r.size - r.sparse[i].offset)
				abort();
	} else if (!err[0] || !strchr(err, ':')) {
		abort(); /* a failure always says what */
	}
	free(buf);
	return 0;
}
