/* Bench guest mode "memtouch" (snapshot and migration benchmarks): fills bench.touch_mb MiB of RAM
 * from 16 MiB up with non-zero data, then prints a heartbeat every 20 ms, rewriting
 * bench.dirty_mb MiB a second of that area meanwhile (0, the default: idle). */
#include "bench.h"

#define TOUCH_BASE (16ULL << 20) /* above the image, its stacks and page tables */
#define PAGE	   4096ULL
#define TICK_NS	   20000000ULL

static unsigned long param_ul(const char *name)
{
	char b[24];
	unsigned long v = 0;

	if (!bench_param(name, b, sizeof(b)))
		return 0;
	for (const char *p = b; *p >= '0' && *p <= '9'; p++)
		v = v * 10 + (unsigned long)(*p - '0');
	return v;
}

static void memtouch_ring3(void)
{
	uint64_t pages = (param_ul("bench.touch_mb") << 20) / PAGE;
	uint64_t per_tick = (param_ul("bench.dirty_mb") << 20) / PAGE * (TICK_NS / 1000000) / 1000;
	uint64_t next, n = 0, cursor = 0;

	for (uint64_t p = 0; p < pages; p++) {
		volatile uint64_t *q = (volatile uint64_t *)(TOUCH_BASE + p * PAGE);

		for (unsigned i = 0; i < PAGE / 8; i++)
			q[i] = (p << 12 | i) + 1;
	}
	bench_printf("bench: touched %lu MiB, dirtying %lu pages every 20 ms\n", pages >> 8,
		     pages ? per_tick : 0);
	next = bench_ns();
	for (;;) {
		/* one word a page marks it dirty for KVM's log and changes its content */
		for (uint64_t k = 0; pages && k < per_tick; k++) {
			*(volatile uint64_t *)(TOUCH_BASE + cursor * PAGE) += 1;
			cursor = cursor + 1 < pages ? cursor + 1 : 0;
		}
		while (bench_ns() < next)
			__asm__ volatile("pause");
		bench_printf("hb %lu\n", n++);
		next += TICK_NS;
	}
}

BENCH_MODE(memtouch, NULL, memtouch_ring3);
