/* Bench guest core: ring-0 set-up (GDT, a TSS per vCPU, IDT, user-accessible page tables,
 * kvmclock), the drop to ring 3 with IOPL 3 on every vCPU in use, work handed to the APs, console
 * output, command-line parameters and poweroff. */
#include <stdarg.h>

#include "bench.h"

#define COM1			0x3f8
#define PM1A_CNT		0x604
#define SLP_TYP_S5		(5u << 10)
#define SLP_EN			(1u << 13)
#define QEMU_DEBUG_EXIT		0xf4
#define MSR_KVM_SYSTEM_TIME_NEW 0x4b564d01

#define SEL_KCODE 0x08
#define SEL_KDATA 0x10
#define SEL_UDATA (0x18 | 3)
#define SEL_UCODE (0x20 | 3)
#define SEL_TSS	  0x28	/* vCPU i's TSS at SEL_TSS + 16 * i */
#define AP_STACK  16384 /* entry.S */
#define AP_WAIT	  0
#define AP_PARK	  1
#define AP_GO	  2

struct pvclock {
	uint32_t version, pad0;
	uint64_t tsc_timestamp, system_time;
	uint32_t tsc_to_system_mul;
	int8_t tsc_shift;
	uint8_t flags, pad[2];
} __attribute__((packed));

struct tss64 {
	uint32_t rsvd0;
	uint64_t rsp0, rsp1, rsp2, rsvd1, ist[7], rsvd2;
	uint16_t rsvd3, iomap_base;
} __attribute__((packed));

struct idt_gate {
	uint16_t off_lo, sel;
	uint8_t ist, type;
	uint16_t off_mid;
	uint32_t off_hi, rsvd;
} __attribute__((packed));

extern const uint64_t bench_vectors[32];
extern char bench_stack0_top[], bench_stack3_top[], bench_ap_stacks[], bench_ap_stacks3[];
extern const struct bench_mode __start_bench_modes[], __stop_bench_modes[];

static uint64_t gdt[5 + 2 * BENCH_MAX_CPUS];
static struct tss64 tss[BENCH_MAX_CPUS] __attribute__((aligned(16)));
static struct idt_gate idt[256] __attribute__((aligned(16))); /* 32..255: bench_set_gate */
static uint64_t pml4[512] __attribute__((aligned(4096)));
static uint64_t pdpt[512] __attribute__((aligned(4096)));
static uint64_t pd[4][512] __attribute__((aligned(4096)));
static struct pvclock clock __attribute__((aligned(64)));
static bool have_kvmclock;
static const char *cmdline;
static const struct bench_mode *mode;

/* APs: lvmm starts them at _start (RBX = index); they wait in bench_ap_main for the boot CPU's
 * AP_GO or AP_PARK, then in ring 3 for work from bench_smp_run. */
static volatile unsigned ap_state, ap_ready, ncpus = 1;
static void (*volatile smp_fn)(unsigned cpu, void *arg);
static void *volatile smp_arg;
static volatile unsigned smp_gen, smp_done, smp_ncpu;

/* Every vCPU prints: one line at a time. Bounded, so that an exception taken while printing
 * still reports (a line may then interleave). */
static volatile unsigned con_lock;

static void con_lock_take(void)
{
	unsigned spins = 0;

	while (__atomic_exchange_n(&con_lock, 1, __ATOMIC_ACQUIRE) && ++spins < 100000000)
		__asm__ volatile("pause");
}

static void con_lock_drop(void)
{
	__atomic_store_n(&con_lock, 0, __ATOMIC_RELEASE);
}

static void con_putc(char c)
{
	/* The lvmm UART transmits at once; no LSR polling keeps this one exit per byte. */
	if (c == '\n')
		outb(COM1, '\r');
	outb(COM1, (uint8_t)c);
}

static void con_puts(const char *s)
{
	while (*s)
		con_putc(*s++);
}

void bench_putc(char c)
{
	con_lock_take();
	con_putc(c);
	con_lock_drop();
}

void bench_puts(const char *s)
{
	con_lock_take();
	con_puts(s);
	con_lock_drop();
}

static void put_num(unsigned long long v, unsigned base, bool neg)
{
	char buf[24];
	int i = 0;

	if (neg)
		con_putc('-');
	do {
		buf[i++] = "0123456789abcdef"[v % base];
		v /= base;
	} while (v);
	while (i)
		con_putc(buf[--i]);
}

void bench_printf(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	con_lock_take();
	for (; *fmt; fmt++) {
		int longs = 0;

		if (*fmt != '%') {
			con_putc(*fmt);
			continue;
		}
		fmt++;
		while (*fmt == 'l') {
			longs++;
			fmt++;
		}
		switch (*fmt) {
		case 's':
			con_puts(va_arg(ap, const char *));
			break;
		case 'c':
			con_putc((char)va_arg(ap, int));
			break;
		case 'd': {
			long long v = longs ? va_arg(ap, long long) : va_arg(ap, int);

			put_num(v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v, 10,
				v < 0);
			break;
		}
		case 'u':
		case 'x':
			put_num(longs ? va_arg(ap, unsigned long long) : va_arg(ap, unsigned),
				*fmt == 'u' ? 10 : 16, false);
			break;
		case '%':
			con_putc('%');
			break;
		case 0:
			fmt--;
			break;
		default:
			con_putc('?');
		}
	}
	con_lock_drop();
	va_end(ap);
}

uint64_t bench_ns(void)
{
	uint64_t delta, ns;
	uint32_t v;

	if (!have_kvmclock)
		return rdtsc() / 2; /* assume 2 GHz: only for hosts without kvmclock */
	do {
		v = clock.version;
		__asm__ volatile("" ::: "memory");
		delta = rdtsc() - clock.tsc_timestamp;
		if (clock.tsc_shift >= 0)
			delta <<= clock.tsc_shift;
		else
			delta >>= -clock.tsc_shift;
		ns = clock.system_time +
		     (uint64_t)(((unsigned __int128)delta * clock.tsc_to_system_mul) >> 32);
		__asm__ volatile("" ::: "memory");
	} while ((v & 1) || v != clock.version);
	return ns;
}

int bench_strcmp(const char *a, const char *b)
{
	while (*a && *a == *b) {
		a++;
		b++;
	}
	return (unsigned char)*a - (unsigned char)*b;
}

bool bench_param(const char *name, char *buf, size_t len)
{
	const char *p = cmdline;

	while (p && *p) {
		const char *n = name;

		while (*p == ' ')
			p++;
		while (*n && *p == *n) {
			n++;
			p++;
		}
		if (!*n && *p == '=') {
			size_t i = 0;

			for (p++; *p && *p != ' ' && i + 1 < len; p++)
				buf[i++] = *p;
			buf[i] = 0;
			return true;
		}
		while (*p && *p != ' ')
			p++;
	}
	return false;
}

void bench_poweroff(void)
{
	outw(PM1A_CNT, SLP_TYP_S5 | SLP_EN);
	/* QEMU machines without ACPI at 0x600 (microvm): -device isa-debug-exit,iobase=0xf4 */
	outb(QEMU_DEBUG_EXIT, 0);
	for (;;)
		__asm__ volatile("pause");
}

struct bench_frame {
	uint64_t r15, r14, r13, r12, r11, r10, r9, r8, rbp, rdi, rsi, rdx, rcx, rbx, rax;
	uint64_t vector, error, rip, cs, rflags, rsp, ss;
};

uint64_t bench_pio_traps;

/* Some hosts (kvm_pvm) run guest ring 3 natively but ignore IOPL: in/out there raise #GP.
 * Complete the access from ring 0, which does reach the monitor, and step over it. */
static bool complete_port_io(struct bench_frame *f)
{
	const uint8_t *ip = (const uint8_t *)f->rip;
	unsigned size = 4, len = 1;
	uint16_t port;
	uint8_t op;

	if ((f->cs & 3) != 3)
		return false;
	if (ip[0] == 0x66) {
		size = 2;
		ip++;
		len++;
	}
	op = ip[0];
	if (op == 0xe4 || op == 0xe5 || op == 0xe6 || op == 0xe7) {
		port = ip[1];
		len++;
	} else if (op >= 0xec && op <= 0xef) {
		port = (uint16_t)f->rdx;
	} else {
		return false;
	}
	if (!(op & 1))
		size = 1;
	if (op & 2) { /* out */
		if (size == 1)
			outb(port, (uint8_t)f->rax);
		else if (size == 2)
			outw(port, (uint16_t)f->rax);
		else
			outl(port, (uint32_t)f->rax);
	} else if (size == 1) {
		f->rax = (f->rax & ~0xffULL) | inb(port);
	} else if (size == 2) {
		uint16_t v;

		__asm__ volatile("inw %1, %0" : "=a"(v) : "Nd"(port));
		f->rax = (f->rax & ~0xffffULL) | v;
	} else {
		f->rax = inl(port); /* 32-bit results zero-extend */
	}
	f->rip += len;
	bench_pio_traps++;
	return true;
}

uint64_t bench_halts;

/* hlt in ring 3 raises #GP: halt here with interrupts open until one arrives (the device's
 * completion interrupt), so that a waiting guest gives its host core back. */
static bool complete_hlt(struct bench_frame *f)
{
	if ((f->cs & 3) != 3 || *(const uint8_t *)f->rip != 0xf4)
		return false;
	__asm__ volatile("sti\n\thlt\n\tcli" ::: "memory");
	f->rip++;
	bench_halts++;
	return true;
}

void bench_set_gate(unsigned vector, void (*handler)(void))
{
	uint64_t h = (uint64_t)handler;

	if (vector > 255)
		return;
	idt[vector] = (struct idt_gate){.off_lo = (uint16_t)h,
					.sel = SEL_KCODE,
					.type = 0x8e,
					.off_mid = (uint16_t)(h >> 16),
					.off_hi = (uint32_t)(h >> 32)};
}

/* Other exceptions print and end the VM: a bench run must never hang silently. */
void bench_exception(struct bench_frame *f);
void bench_exception(struct bench_frame *f)
{
	if (f->vector == 13 && (complete_port_io(f) || complete_hlt(f)))
		return;
	if (f->vector == 3) { /* a trap: rip is already past the int3 */
		bench_printf("bench: breakpoint before rip 0x%lx\n", f->rip);
		return;
	}
	bench_printf("bench: exception %lu error 0x%lx at rip 0x%lx cs 0x%lx\n", f->vector,
		     f->error, f->rip, f->cs);
	bench_poweroff();
}

/* Loads the shared GDT, IDT and page tables and vCPU cpu's TSS. */
static void load_cpu(unsigned cpu)
{
	struct {
		uint16_t limit;
		uint64_t base;
	} __attribute__((packed)) gdtr, idtr;

	gdtr.limit = sizeof(gdt) - 1;
	gdtr.base = (uint64_t)gdt;
	idtr.limit = sizeof(idt) - 1;
	idtr.base = (uint64_t)idt;
	__asm__ volatile("lgdt %0\n\t"
			 "lidt %1\n\t"
			 "mov %2, %%cr3\n\t"
			 "pushq %3\n\t"
			 "leaq 1f(%%rip), %%rax\n\t"
			 "pushq %%rax\n\t"
			 "lretq\n"
			 "1:\n\t"
			 "mov %4, %%eax\n\t"
			 "mov %%eax, %%ds\n\t"
			 "mov %%eax, %%es\n\t"
			 "mov %%eax, %%ss\n\t"
			 "mov %5, %%eax\n\t"
			 "ltr %%ax\n\t"
			 :
			 : "m"(gdtr), "m"(idtr), "r"(pml4), "i"(SEL_KCODE), "i"(SEL_KDATA),
			   "r"(SEL_TSS + 16 * cpu)
			 : "rax", "memory");
}

static void setup_cpu(void)
{
	unsigned i, j;

	gdt[1] = 0x00af9a000000ffffULL; /* kernel code 64 */
	gdt[2] = 0x00cf92000000ffffULL; /* kernel data */
	gdt[3] = 0x00cff2000000ffffULL; /* user data, DPL 3 */
	gdt[4] = 0x00affa000000ffffULL; /* user code 64, DPL 3 */
	for (i = 0; i < BENCH_MAX_CPUS; i++) {
		uint64_t t = (uint64_t)&tss[i];

		gdt[5 + 2 * i] = (sizeof(tss[i]) - 1) | ((t & 0xffffff) << 16) | (0x89ULL << 40) |
				 ((t >> 24 & 0xff) << 56);
		gdt[6 + 2 * i] = t >> 32;
		tss[i].rsp0 =
		    i ? (uint64_t)bench_ap_stacks + i * AP_STACK : (uint64_t)bench_stack0_top;
		tss[i].iomap_base = sizeof(tss[i]); /* no I/O bitmap: IOPL 3 decides */
	}

	for (i = 0; i < 32; i++) {
		uint64_t h = bench_vectors[i];

		idt[i] = (struct idt_gate){.off_lo = (uint16_t)h,
					   .sel = SEL_KCODE,
					   .type = 0x8e,
					   .off_mid = (uint16_t)(h >> 16),
					   .off_hi = (uint32_t)(h >> 32)};
	}

	/* Identity map of the low 4 GiB with 2 MiB pages, user-accessible: RAM and device BARs. */
	for (i = 0; i < 4; i++) {
		for (j = 0; j < 512; j++)
			pd[i][j] = ((uint64_t)(i * 512 + j) << 21) | 0x87; /* P RW US PS */
		pdpt[i] = (uint64_t)pd[i] | 0x7;
	}
	pml4[0] = (uint64_t)pdpt | 0x7;
	load_cpu(0);
}

static void setup_clock(void)
{
	uint32_t a, b, c, d;
	uint64_t pa = (uint64_t)&clock | 1;

	__asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(0x40000000), "c"(0));
	/* "KVMKVMKVM\0\0\0" and KVM_FEATURE_CLOCKSOURCE2 */
	if (b != 0x4b4d564b || c != 0x564b4d56)
		return;
	__asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(0x40000001), "c"(0));
	if (!(a & (1u << 3)))
		return;
	__asm__ volatile("wrmsr"
			 :
			 : "c"(MSR_KVM_SYSTEM_TIME_NEW), "a"((uint32_t)pa),
			   "d"((uint32_t)(pa >> 32)));
	have_kvmclock = true;
}

unsigned bench_ncpus(void)
{
	return ncpus;
}

void bench_smp_run(void (*fn)(unsigned cpu, void *arg), void *arg, unsigned n)
{
	smp_fn = fn;
	smp_arg = arg;
	smp_ncpu = n;
	__atomic_store_n(&smp_done, 0, __ATOMIC_RELEASE);
	__atomic_add_fetch(&smp_gen, 1, __ATOMIC_RELEASE);
}

void bench_smp_wait(void)
{
	unsigned want = smp_ncpu > 1 ? smp_ncpu - 1 : 0;

	while (__atomic_load_n(&smp_done, __ATOMIC_ACQUIRE) < want)
		__asm__ volatile("pause");
}

/* An AP in ring 3: runs each bench_smp_run call meant for it; the rest of the time it spins
 * (pause), which is host CPU: only modes that use the APs start them (bench.cpus). */
static void ap_ring3(unsigned cpu) __attribute__((noreturn, used));
static void ap_ring3(unsigned cpu)
{
	unsigned seen = 0;

	__atomic_add_fetch(&ap_ready, 1, __ATOMIC_ACQ_REL);
	for (;;) {
		unsigned gen = __atomic_load_n(&smp_gen, __ATOMIC_ACQUIRE);

		if (gen == seen) {
			__asm__ volatile("pause");
			continue;
		}
		seen = gen;
		if (cpu < smp_ncpu) {
			smp_fn(cpu, smp_arg);
			__atomic_add_fetch(&smp_done, 1, __ATOMIC_ACQ_REL);
		}
	}
}

void bench_ap_main(unsigned cpu) __attribute__((noreturn));
void bench_ap_main(unsigned cpu)
{
	while (!__atomic_load_n(&ap_state, __ATOMIC_ACQUIRE))
		__asm__ volatile("pause");
	if (ap_state != AP_GO || cpu >= ncpus)
		for (;;)
			__asm__ volatile("cli; hlt");
	load_cpu(cpu);
	/* iretq into ring 3 with IOPL 3 and interrupts off, as the boot CPU does. */
	__asm__ volatile("pushq %0\n\t"
			 "pushq %1\n\t"
			 "pushq $0x3002\n\t"
			 "pushq %2\n\t"
			 "pushq %3\n\t"
			 "iretq"
			 :
			 : "i"(SEL_UDATA), "r"(bench_ap_stacks3 + cpu * AP_STACK), "i"(SEL_UCODE),
			   "r"(ap_ring3), "D"((uint64_t)cpu)
			 : "memory");
	__builtin_unreachable();
}

/* bench.cpus=N: the boot CPU and N-1 APs (lvmm --cpus N) run the mode's workload; waits up to a
 * second for the APs to reach ring 3. */
static void ring3_smp(void)
{
	uint64_t t_end = bench_ns() + 1000000000ULL;

	while (ap_ready < ncpus - 1 && bench_ns() < t_end)
		__asm__ volatile("pause");
	if (ap_ready < ncpus - 1) {
		bench_printf("bench: FAIL %u of %u vCPUs came up\n", ap_ready + 1, ncpus);
		bench_poweroff();
	}
	bench_printf("bench: %u vCPUs\n", ncpus);
}

static void ring3_main(void)
{
	bench_puts("bench: hello from ring 3\n");
	if (ncpus > 1)
		ring3_smp();
	if (mode->ring3)
		mode->ring3();
	bench_puts("bench: done, powering off\n");
	bench_poweroff();
}

void bench_main(const uint8_t *zero_page);
void bench_main(const uint8_t *zero_page)
{
	const struct bench_mode *m;
	char name[32] = "hello";
	uint32_t cl = *(const uint32_t *)(zero_page + 0x228);

	cmdline = cl ? (const char *)(uint64_t)cl : "";
	bench_puts("bench: hello from ring 0\n");
	bench_param("bench.mode", name, sizeof(name));
	for (m = __start_bench_modes; m < __stop_bench_modes; m++)
		if (!bench_strcmp(m->name, name))
			mode = m;
	if (!mode) {
		bench_printf("bench: unknown mode '%s'\n", name);
		bench_poweroff();
	}
	bench_printf("bench: mode %s\n", mode->name);
	setup_cpu();
	setup_clock();
	{
		char n[8] = "1";

		bench_param("bench.cpus", n, sizeof(n));
		if (n[0] >= '2' && n[0] < '0' + BENCH_MAX_CPUS + 1 && !n[1])
			ncpus = (unsigned)(n[0] - '0');
	}
	/* APs share the boot CPU's kvmclock page: with a stable TSC its reading holds on any vCPU.
	 */
	__atomic_store_n(&ap_state, ncpus > 1 ? AP_GO : AP_PARK, __ATOMIC_RELEASE);
	if (mode->ring0)
		mode->ring0();
	/* iretq into ring 3 with IOPL 3 (in/out allowed) and interrupts off. */
	__asm__ volatile("pushq %0\n\t"
			 "pushq %1\n\t"
			 "pushq $0x3002\n\t"
			 "pushq %2\n\t"
			 "pushq %3\n\t"
			 "iretq"
			 :
			 : "i"(SEL_UDATA), "r"(bench_stack3_top), "i"(SEL_UCODE), "r"(ring3_main)
			 : "memory");
	__builtin_unreachable();
}
