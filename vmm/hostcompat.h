/* Host-compatibility layer: detects hosts whose KVM emulates guest ring 0 (kvm_pvm) and holds
 * the pure pieces that work around them (command-line additions, emulation-failure decoding). */
#ifndef LVMM_HOSTCOMPAT_H
#define LVMM_HOSTCOMPAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "guest_mem.h"

/* Kernel parameters lvmm appends on kvm_pvm hosts: features the emulator cannot run, plus the
 * test kernel's system-call route, plus HOSTCOMPAT_PVM_USER_ENV for init. erms and fsrm are
 * cleared for speed: the emulator runs a rep-string instruction one iteration at a time, so the
 * kernel's byte-wise rep movsb/stosb copies cost eight times its rep movsq/stosq ones (a 2 MiB
 * write to tmpfs in the test guest: 6.1 s with them, 3.3 s without; LVMM_PROFILE showed
 * copy_user_enhanced_fast_string and read_zero on top). */
#define HOSTCOMPAT_PVM_CMDLINE                                                                     \
	"noxsave clearcpuid=cx16,smap,ssse3,popcnt,erms,fsrm nosmap nofsgsbase "                   \
	"lvmm_pvm_syscall=1 " HOSTCOMPAT_PVM_USER_ENV

/* The guest kernel must run with noxsave here (its XSAVE/XRSTOR cannot be emulated), so it
 * switches only the x87/SSE state between processes. Guest user code runs natively with the
 * host's CR4 and XCR0 (OSXSAVE set, XCR0 0xe7): CPUID and XGETBV tell it AVX and AVX-512 are
 * usable, glibc's string functions use YMM/ZMM and opmask registers, and their upper halves leak
 * from one guest process into the next at every context switch (a pipeline's processes read
 * another's data and crash). No kernel parameter hides AVX from user mode on this host; this
 * variable, which Linux passes to init's environment, keeps glibc (static or dynamic) on its SSE2
 * code. Programs that use AVX by themselves remain exposed (docs/design.md, section 5). */
#define HOSTCOMPAT_PVM_USER_ENV                                                                    \
	"GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX,-AVX2,-AVX512F,-AVX512VL,-AVX512BW,-AVX512DQ,"       \
	"-AVX512CD,-AVX_Fast_Unaligned_Load"

/* Added on kvm_pvm hosts with more than one vCPU: the switch from kvm-clock to the TSC runs
 * stop_machine(), which was seen to livelock two emulated CPUs in their timer ticks. */
#define HOSTCOMPAT_PVM_SMP_CMDLINE "clocksource=kvm-clock"

/* Nice value of vCPU threads on kvm_pvm hosts with more than one vCPU (vcpu.c says why). */
#define HOSTCOMPAT_PVM_VCPU_NICE -10

/* True on kvm_pvm hosts (/sys/module/kvm_pvm), unless LVMM_HOSTCOMPAT=on|off says otherwise;
 * decided at the first call (before a jail hides /sys). */
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
