/* Bench guest waits that give the host core back (bench.wait=halt): the local APIC on, a gate for
 * the completion vector, and the wait itself, a bounded poll and then hlt (completed in ring 0
 * by bench.c's #GP handler) until the device's MSI-X arrives. */
#include "bench.h"
#include "workload.h"

#define LAPIC_BASE 0xfee00000ULL
#define LAPIC_TPR  0x80
#define LAPIC_EOI  0xb0
#define LAPIC_SVR  0xf0

volatile uint64_t work_irqs;

/* Ring 0, interrupts off until iretq: count and return; ring 3 acknowledges at the APIC. */
void work_irq_entry(void);
__asm__(".text\n"
	".globl work_irq_entry\n"
	"work_irq_entry:\n\t"
	"lock incq work_irqs(%rip)\n\t"
	"iretq\n");

static void lapic_write(unsigned reg, uint32_t v)
{
	*(volatile uint32_t *)(LAPIC_BASE + reg) = v;
}

void work_halt_setup(void)
{
	bench_set_gate(WORK_IRQ_VECTOR, work_irq_entry);
	lapic_write(LAPIC_TPR, 0);
	lapic_write(LAPIC_SVR, 0x100 | 0xff); /* enabled, spurious vector 0xff */
}

void work_halt(void)
{
	__asm__ volatile("hlt" ::: "memory");
	lapic_write(LAPIC_EOI, 0);
}
