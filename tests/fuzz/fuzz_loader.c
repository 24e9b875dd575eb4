/* libFuzzer target for the kernel image loaders (vmm/loader.c): arbitrary bytes as a kernel
 * file, loaded into a small guest RAM buffer; then the initrd placement arithmetic. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bootparam.h"
#include "layout.h"
#include "loader.h"

/* Small enough to keep iterations fast, large enough for segments above 1 MiB. */
#define FUZZ_RAM (8ULL << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t *ram;
	struct guest_mem gm;
	struct loader_result res;
	struct loader_src src;
	struct loader_buf b;
	char err[256];
	uint64_t start;

	if (!ram) {
		ram = calloc(1, FUZZ_RAM);
		if (!ram)
			abort();
	}
	gmem_init_buffer(&gm, ram, FUZZ_RAM);
	loader_src_buffer(&src, &b, data, size);
	if (loader_load(&gm, &src, &res, err, sizeof(err)) == 0) {
		/* A successful load must describe memory that is really guest RAM above 1 MiB. */
		if (res.start < LAYOUT_HIGH_RAM || res.end <= res.start || res.end > FUZZ_RAM ||
		    res.entry < LAYOUT_HIGH_RAM || res.entry >= FUZZ_RAM)
			abort();
		if (boot_place_initrd(res.end, FUZZ_RAM, size, &start) == 0 &&
		    (start < res.end || start + size > FUZZ_RAM || start % 4096))
			abort();
	} else if (!err[0] || !memchr(err, 0, sizeof(err))) {
		abort(); /* every failure explains itself */
	}
	return 0;
}
