/* Bench/test guest for lvmm: freestanding 64-bit program entered like Linux (RSI = zero page).
 * Shared helpers (port I/O, console, clock, command line) and the mode table. */
#ifndef BENCH_H
#define BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A mode: ring0 runs first (emulated and slow on kvm_pvm hosts: keep it short), then the guest
 * drops to ring 3 (IOPL 3, user-accessible identity map of the low 4 GiB) and runs ring3.
 * Either may be NULL. Returning from ring3 powers the VM off. Add modes from any .c file. */
struct bench_mode {
	const char *name;
	void (*ring0)(void);
	void (*ring3)(void);
};

#define BENCH_MODE(id, r0, r3)                                                                     \
	static const struct bench_mode bench_mode_##id                                             \
	    __attribute__((used, section(".bench_modes"), aligned(8))) = {#id, r0, r3}

static inline void outb(uint16_t port, uint8_t v)
{
	__asm__ volatile("outb %0, %1" : : "a"(v), "Nd"(port));
}

static inline void outw(uint16_t port, uint16_t v)
{
	__asm__ volatile("outw %0, %1" : : "a"(v), "Nd"(port));
}

static inline void outl(uint16_t port, uint32_t v)
{
	__asm__ volatile("outl %0, %1" : : "a"(v), "Nd"(port));
}

static inline uint8_t inb(uint16_t port)
{
	uint8_t v;

	__asm__ volatile("inb %1, %0" : "=a"(v) : "Nd"(port));
	return v;
}

static inline uint32_t inl(uint16_t port)
{
	uint32_t v;

	__asm__ volatile("inl %1, %0" : "=a"(v) : "Nd"(port));
	return v;
}

static inline uint64_t rdtsc(void)
{
	uint32_t lo, hi;

	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return ((uint64_t)hi << 32) | lo;
}

/* vCPUs the guest can drive: lvmm starts APs at the entry with RBX = index (entry.S). */
#define BENCH_MAX_CPUS 4

/* bench.cpus=N (2..BENCH_MAX_CPUS, lvmm --cpus N): vCPUs in use, 1 without it. */
unsigned bench_ncpus(void);
/* Runs fn(cpu, arg) in ring 3 on APs 1..n-1 and returns at once; bench_smp_wait() returns when
 * they all have returned. The caller runs cpu 0's share itself in between. */
void bench_smp_run(void (*fn)(unsigned cpu, void *arg), void *arg, unsigned n);
void bench_smp_wait(void);

/* Console on COM1 (usable from ring 0 and, with IOPL 3, from ring 3), a line at a time across
 * vCPUs. */
void bench_putc(char c);
void bench_puts(const char *s);
/* printf subset: %s %c %d %u %x %lx %lu %ld %llu %llx and %%. */
void bench_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Nanoseconds since boot from kvmclock when available, else from the TSC at an assumed rate. */
uint64_t bench_ns(void);

/* Value of NAME=VALUE on the kernel command line, copied into buf; false when absent. */
bool bench_param(const char *name, char *buf, size_t len);

/* ACPI S5 through PM1a_CNT: the VM ends here. */
void bench_poweroff(void) __attribute__((noreturn));

int bench_strcmp(const char *a, const char *b);

/* Ring-3 port accesses completed by the #GP handler (hosts that ignore IOPL). */
extern uint64_t bench_pio_traps;

/* Points gate vector (0..255) at handler, a ring-0 interrupt gate; exception stubs are in
 * bench_vectors. A hlt in ring 3 halts in the #GP handler with interrupts enabled until the next
 * interrupt (bench_halts counts them). */
void bench_set_gate(unsigned vector, void (*handler)(void));
extern uint64_t bench_halts;
extern const uint64_t bench_vectors[32];

#endif
