/* softssd's clock calibration. The workers read the clock on every pass of every worker, so it
 * must be cheap: the TSC scaled to nanoseconds when the CPU says it is invariant (constant rate,
 * runs through C-states: CPUID 0x80000007 EDX bit 8), calibrated once against CLOCK_MONOTONIC;
 * clock_gettime otherwise. On hosts whose clocksource is not the TSC, clock_gettime is a system
 * call; even through the vDSO it cost 13-22% of a busy worker's samples
 * (docs/bench/profiles.txt). The read itself is ssd_clock_ns (qpair_int.h). */
#include <stdlib.h>
#include <time.h>

#include "softssd/qpair_int.h"

#define SSD_TSC_CAL_NS 2000000 /* calibration window: 2 ms gives ~1e-5 of rate error */

struct ssd_clock ssd_clk;

uint64_t ssd_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
#if defined(__x86_64__)
#include <cpuid.h>

void ssd_clk_calibrate(void)
{
	unsigned a, b, c, d;
	uint64_t t0, n0, t1, n1;

	if (getenv("SOFTSSD_CLOCK_MONO")) /* for comparing the two, and a way out */
		return;
	if (!__get_cpuid(0x80000000, &a, &b, &c, &d) || a < 0x80000007)
		return;
	__get_cpuid(0x80000007, &a, &b, &c, &d);
	if (!(d & (1u << 8)))
		return;
	n0 = ssd_mono_ns();
	t0 = __rdtsc();
	do
		n1 = ssd_mono_ns();
	while (n1 - n0 < SSD_TSC_CAL_NS);
	t1 = __rdtsc();
	/* a TSC slower than 100 MHz or faster than 20 GHz is not one to trust */
	if (t1 <= t0 || (t1 - t0) < SSD_TSC_CAL_NS / 10 || (t1 - t0) > SSD_TSC_CAL_NS * 20ull)
		return;
	ssd_clk.mult = (uint64_t)(((unsigned __int128)(n1 - n0) << 32) / (t1 - t0));
	ssd_clk.base_tsc = t1;
	ssd_clk.base_ns = n1;
	ssd_clk.tsc = true;
}
#else
void ssd_clk_calibrate(void)
{
}
#endif
