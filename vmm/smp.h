/* The pure part of lvmm's AP start-up on kvm_pvm hosts: locating the Linux trampoline's
 * real_mode_header and reading where, with which paging state, an AP must start. */
#ifndef LVMM_SMP_H
#define LVMM_SMP_H

#include <stdint.h>

#include "guest_mem.h"

struct smp_target {
	uint64_t rip, cr3, cr4, efer;
};

/* start_ip is the trampoline entry from the warm-reset vector. 0, or -ENOENT (no header below
 * it), -ENOEXEC (no 64-bit entry or empty fields), -EFAULT (outside RAM). All guest data. */
int smp_find_target(const struct guest_mem *gm, uint64_t start_ip, struct smp_target *t);

#endif
