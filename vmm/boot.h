/* x86-64 Linux boot: kernel loaders (vmlinux ELF, bzImage), boot_params with E820, command line,
 * initramfs placement, identity page tables, ACPI and MP tables. Pure functions over guest_mem. */
#ifndef LVMM_BOOT_H
#define LVMM_BOOT_H

#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "guest_mem.h"

struct boot_info {
	uint64_t entry;	    /* RIP at the kernel's 64-bit entry */
	uint64_t zero_page; /* RSI at entry: GPA of struct boot_params */
	uint64_t cr3;	    /* identity page tables covering at least the low 4 GiB */
	uint64_t kernel_start, kernel_end;
	uint64_t initrd_start, initrd_size;
	bool ap_entry; /* an ELF guest with lvmm's AP-entry note: APs start at entry (vcpu.c) */
};

/* Loads cfg->kernel (+ cfg->initramfs) into gm and writes everything the 64-bit boot protocol
 * needs for cfg->cpus CPUs; cmdline is the final command line (host-compat parameters added).
 * Errors name the file and the problem ("kernel x: not an ELF64 or bzImage"). */
int boot_load_linux(struct guest_mem *gm, const struct vm_config *cfg, const char *cmdline,
		    struct boot_info *bi, char *err, unsigned errlen);

#endif
