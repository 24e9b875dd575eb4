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

/* #GP, ahead of bench.c's handler: a ring-3 hlt is stepped over and halted on in a dozen
 * instructions, without saving every register and calling C (kvm_pvm emulates each ring-0
 * instruction: this path is most of a halting guest's cost per I/O). Anything else goes on to
 * the general handler unchanged. Stack: rax (pushed here), error code, rip, cs, ... */
void work_gp_entry(void);
__asm__(".text\n"
	".globl work_gp_entry\n"
	"work_gp_entry:\n\t"
	"pushq %rax\n\t"
	"testb $3, 24(%rsp)\n\t"
	"jz 1f\n\t"
	"movq 16(%rsp), %rax\n\t"
	"cmpb $0xf4, (%rax)\n\t"
	"jne 1f\n\t"
	"incq 16(%rsp)\n\t"
	"popq %rax\n\t"
	"addq $8, %rsp\n\t"
	"sti\n\t"
	"hlt\n\t"
	"cli\n\t"
	"lock incq bench_halts(%rip)\n\t"
	"iretq\n"
	"1:\n\t"
	"popq %rax\n\t"
	"jmp *bench_vectors+13*8(%rip)\n");

void work_halt_setup(void)
{
	bench_set_gate(13, work_gp_entry);
	bench_set_gate(WORK_IRQ_VECTOR, work_irq_entry);
	lapic_write(LAPIC_TPR, 0);
	lapic_write(LAPIC_SVR, 0x100 | 0xff); /* enabled, spurious vector 0xff */
}

void work_halt(void)
{
	__asm__ volatile("hlt" ::: "memory");
	lapic_write(LAPIC_EOI, 0);
}
