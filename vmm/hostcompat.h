/* Host-compatibility layer: detects hosts whose KVM emulates guest ring 0 (kvm_pvm) and holds
 * the pure pieces that work around them (command-line additions, emulation-failure decoding). */
#ifndef LVMM_HOSTCOMPAT_H
#define LVMM_HOSTCOMPAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "guest_mem.h"

/* Kernel parameters lvmm appends on kvm_pvm hosts: features the emulator cannot run, plus the
 * test kernel's system-call route. */
#define HOSTCOMPAT_PVM_CMDLINE                                                                     \
	"noxsave clearcpuid=cx16,smap,ssse3,popcnt nosmap nofsgsbase lvmm_pvm_syscall=1"

/* Added on kvm_pvm hosts with more than one vCPU: the switch from kvm-clock to the TSC runs
 * stop_machine(), which was seen to livelock two emulated CPUs in their timer ticks. */
#define HOSTCOMPAT_PVM_SMP_CMDLINE "clocksource=kvm-clock"

/* Nice value of vCPU threads on kvm_pvm hosts with more than one vCPU (vcpu.c says why). */
#define HOSTCOMPAT_PVM_VCPU_NICE -10

/* True on kvm_pvm hosts (/sys/module/kvm_pvm), unless LVMM_HOSTCOMPAT=on|off says otherwise. */
bool hostcompat_active(void);
/* Same decision with the inputs made explicit (tests): env may be NULL. */
bool hostcompat_decide(const char *env, bool pvm_module_present);

/* Appends HOSTCOMPAT_PVM_CMDLINE to base when active; -ENAMETOOLONG if out is too small. */
int hostcompat_cmdline(const char *base, bool active, char *out, size_t outlen);

enum hostcompat_insn {
	HC_INSN_UNKNOWN,
	HC_INSN_INT3,  /* 0xcc: advance RIP, inject #BP */
	HC_INSN_FWAIT, /* 0x9b: skip */
	HC_INSN_CLAC,  /* 0f 01 ca: clear RFLAGS.AC, skip */
	HC_INSN_STAC,  /* 0f 01 cb: set RFLAGS.AC, skip */
};

/* Decodes the instruction at bytes[0..n); sets *len to its length for known ones. */
enum hostcompat_insn hostcompat_decode(const uint8_t *bytes, unsigned n, unsigned *len);
const char *hostcompat_insn_name(enum hostcompat_insn i);

/* Guest paging state needed to find the bytes at a linear address. */
struct hostcompat_paging {
	uint64_t cr0, cr3, cr4, efer;
};

/* Walks the guest page tables (none, 32-bit legacy, PAE, 4- or 5-level) in gm: 0 and *gpa, or
 * -EFAULT when a table is outside RAM or an entry is not present. */
int hostcompat_translate(const struct guest_mem *gm, const struct hostcompat_paging *pg,
			 uint64_t linear, uint64_t *gpa);

/* Copies up to max instruction bytes at linear address rip (stops at an unmapped page);
 * returns how many were read. */
unsigned hostcompat_fetch(const struct guest_mem *gm, const struct hostcompat_paging *pg,
			  uint64_t rip, uint8_t *buf, unsigned max);

/* "0f 0b 90" style hex dump, "(unreadable)" when n is 0. */
void hostcompat_format_bytes(const uint8_t *b, unsigned n, char *out, size_t outlen);

#endif
