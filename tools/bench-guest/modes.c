/* Bench guest modes that need no device: hello (default), spin (heartbeat, never ends), fault
 * (deliberate triple fault), reboot and kbdreset (guest-initiated resets), echo (console input),
 * compat (instructions kvm_pvm cannot emulate in ring 0) and exits (cost of PIO and MMIO exits from
 * ring 0 and ring 3).
 */
#include "bench.h"

#define POST_PORT     0x80
#define UNMAPPED_MMIO 0xd0000000ULL /* inside the 32-bit PCI hole, nothing mapped there */

BENCH_MODE(hello, NULL, NULL);

static void spin_ring3(void)
{
	uint64_t next = bench_ns(), n = 0;

	for (;;) {
		while (bench_ns() < next)
			__asm__ volatile("pause");
		bench_printf("bench: heartbeat %lu\n", n++);
		next += 200000000ULL;
	}
}

BENCH_MODE(spin, NULL, spin_ring3);

static void fault_ring0(void)
{
	struct {
		uint16_t limit;
		uint64_t base;
	} __attribute__((packed)) none = {0, 0};

	bench_puts("bench: triple fault on purpose\n");
	/* No IDT: the #GP from a non-canonical load escalates to a double, then triple fault. */
	__asm__ volatile("lidt %0\n\t"
			 "movq $0x8000000000000000, %%rax\n\t"
			 "movq (%%rax), %%rax"
			 :
			 : "m"(none)
			 : "rax", "memory");
	bench_puts("bench: still alive after the fault\n");
}

BENCH_MODE(fault, fault_ring0, NULL);

/* int3, fwait and (where the CPU has SMAP) stac/clac in ring 0: natively fine on hardware
 * virtualization, completed by lvmm on kvm_pvm hosts. */
static void compat_ring0(void)
{
	uint32_t a, b, c, d;
	uint64_t fl;

	__asm__ volatile("int3");
	bench_puts("bench: int3 returned\n");
	__asm__ volatile("fwait");
	bench_puts("bench: fwait passed\n");
	__asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(0));
	if (!(b & (1u << 20))) {
		bench_puts("bench: no SMAP, stac/clac skipped\n");
		return;
	}
	__asm__ volatile("stac\n\tpushfq\n\tpopq %0" : "=r"(fl));
	bench_printf("bench: stac AC=%lu\n", (fl >> 18) & 1);
	__asm__ volatile("clac\n\tpushfq\n\tpopq %0" : "=r"(fl));
	bench_printf("bench: clac AC=%lu\n", (fl >> 18) & 1);
}

BENCH_MODE(compat, compat_ring0, NULL);

/* The reset paths a Linux guest uses: PIIX reset control (also the FADT reset register) and
 * the keyboard controller's pulse-reset command. */
static void reboot_ring3(void)
{
	bench_puts("bench: reset through port 0xcf9\n");
	outb(0xcf9, 0x02);
	outb(0xcf9, 0x06);
	bench_puts("bench: still alive after the reset\n");
}

BENCH_MODE(reboot, NULL, reboot_ring3);

static void kbdreset_ring3(void)
{
	bench_puts("bench: reset through the i8042\n");
	outb(0x64, 0xfe);
	bench_puts("bench: still alive after the reset\n");
}

BENCH_MODE(kbdreset, NULL, kbdreset_ring3);

/* Console input: reads one line from COM1 (polling LSR.DR) and prints it back. */
static void echo_ring3(void)
{
	char line[64];
	unsigned n = 0;

	bench_puts("bench: type a line\n");
	while (n + 1 < sizeof(line)) {
		char c;

		while (!(inb(0x3fd) & 1))
			__asm__ volatile("pause");
		c = (char)inb(0x3f8);
		if (c == '\r' || c == '\n')
			break;
		line[n++] = c;
	}
	line[n] = 0;
	bench_printf("bench: got '%s'\n", line);
}

BENCH_MODE(echo, NULL, echo_ring3);

static uint64_t time_pio(unsigned n)
{
	uint64_t t0 = bench_ns();
	unsigned i;

	for (i = 0; i < n; i++)
		outb(POST_PORT, 0);
	return (bench_ns() - t0) / n;
}

static uint64_t time_mmio(unsigned n)
{
	volatile uint32_t *p = (volatile uint32_t *)UNMAPPED_MMIO;
	uint64_t t0 = bench_ns();
	unsigned i;

	for (i = 0; i < n; i++)
		(void)*p;
	return (bench_ns() - t0) / n;
}

static void exits_ring0(void)
{
	bench_printf("bench: ring0 pio exit %lu ns\n", time_pio(200));
	bench_printf("bench: ring0 mmio exit %lu ns\n", time_mmio(200));
}

static void exits_ring3(void)
{
	bench_printf("bench: ring3 pio exit %lu ns\n", time_pio(5000));
	bench_printf("bench: ring3 mmio exit %lu ns\n", time_mmio(5000));
	bench_printf("bench: ring3 port I/O trapped to ring 0: %lu times\n", bench_pio_traps);
}

BENCH_MODE(exits, exits_ring0, exits_ring3);
