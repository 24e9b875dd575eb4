/* Kernel image loaders: ELF64 vmlinux (PT_LOAD at physical addresses) and bzImage (protected-mode
 * code with the 64-bit entry at +0x200). The image comes from a reader, so files and buffers work.
 */
#ifndef LVMM_LOADER_H
#define LVMM_LOADER_H

#include <stdbool.h>
#include <stdint.h>

#include "bootparam.h"
#include "guest_mem.h"

/* A random-access source: read returns 0 when all len bytes at off were read, else -errno. */
struct loader_src {
	int (*read)(void *opaque, uint64_t off, void *dst, uint64_t len);
	void *opaque;
	uint64_t size;
};

enum loader_kind { LOADER_ELF, LOADER_BZIMAGE };

/* An ELF note named "LVMM" of this type (no descriptor needed) asks lvmm to start every AP of
 * the guest at the ELF entry in the boot CPU's state, with its vCPU index in RBX. Linux never
 * carries it: its APs come up through INIT/SIPI or smp.c. */
#define LVMM_ELFNOTE_NAME     "LVMM"
#define LVMM_ELFNOTE_AP_ENTRY 1

struct loader_result {
	enum loader_kind kind;
	uint64_t entry;	     /* guest-physical 64-bit entry point */
	uint64_t start, end; /* lowest and highest (exclusive) guest-physical bytes it occupies */
	/* ELF only: the image carries the LVMM_ELFNOTE_AP_ENTRY note (every AP starts at entry). */
	bool ap_entry;
	/* bzImage only: the file's setup header, to be copied into boot_params.hdr. */
	struct setup_header hdr;
};

/* A buffer as a source (tests, fuzzing). The buffer must outlive the source. */
struct loader_buf {
	const uint8_t *data;
};
void loader_src_buffer(struct loader_src *src, struct loader_buf *b, const void *data,
		       uint64_t len);
/* An open file as a source; the size is taken from fstat. 0 or -errno. */
struct loader_fd {
	int fd;
};
int loader_src_fd(struct loader_src *src, struct loader_fd *f, int fd);

/* Detects the image type and loads it. Segments must lie in RAM at or above LAYOUT_HIGH_RAM,
 * which keeps them clear of the zero page, page tables, command line and firmware tables.
 * Errors name the problem but not the file (the caller prefixes "kernel PATH: "). */
int loader_load(struct guest_mem *gm, const struct loader_src *src, struct loader_result *res,
		char *err, unsigned errlen);

#endif
