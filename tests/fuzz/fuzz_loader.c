/* libFuzzer target for the kernel image loaders (vmm/loader.c): arbitrary bytes as a kernel
 * image from a buffer, then as a kernel file (memfd) through boot_load_linux's whole set-up. */
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "boot.h"

#include "bootparam.h"
#include "layout.h"
#include "loader.h"

/* Small enough to keep iterations fast, large enough for segments above 1 MiB. */
#define FUZZ_RAM (8ULL << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The same bytes as a file: the zero page, command line and tables are built around them. */
static void fuzz_boot(struct guest_mem *gm, const uint8_t *data, size_t size)
{
	static struct vm_config cfg;
	static int fd = -1;
	struct boot_info bi;
	char err[256];

	if (fd < 0) {
		fd = memfd_create("fuzz-kernel", MFD_CLOEXEC);
		if (fd < 0)
			abort();
		config_defaults(&cfg);
		snprintf(cfg.kernel, sizeof(cfg.kernel), "/proc/self/fd/%d", fd);
	}
	if (ftruncate(fd, 0) || pwrite(fd, data, size, 0) != (ssize_t)size)
		abort();
	err[0] = 0;
	if (boot_load_linux(gm, &cfg, "console=ttyS0", &bi, err, sizeof(err)) == 0) {
		if (bi.entry < LAYOUT_HIGH_RAM || bi.entry >= FUZZ_RAM ||
		    bi.zero_page != LAYOUT_ZERO_PAGE || bi.cr3 != LAYOUT_PML4)
			abort();
	} else if (!err[0]) {
		abort();
	}
}

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
	fuzz_boot(&gm, data, size);
	return 0;
}
