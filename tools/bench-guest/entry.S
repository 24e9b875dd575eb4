/* Bench guest entry (64-bit, as Linux's startup_64 is entered) and exception stubs. */
#define BENCH_MAX_CPUS 4 /* bench.h */
	.section .text.entry, "ax"
	.code64
	.globl _start
_start:
	cli
	testq	%rbx, %rbx		/* lvmm: RBX = vCPU index, 0 on the boot CPU */
	jnz	2f
	leaq	bench_stack0_top(%rip), %rsp
	movq	%rsi, %rdi		/* struct boot_params * */
	call	bench_main
1:	hlt
	jmp	1b
/* An AP (lvmm starts each one here, see the LVMM note below): its own boot stack, then
 * bench_ap_main(index). An index past the stacks parks the CPU. */
2:	cmpq	$BENCH_MAX_CPUS, %rbx
	jae	1b
	movq	%rbx, %rax
	shlq	$14, %rax		/* BENCH_AP_STACK bytes each */
	leaq	bench_ap_stacks(%rip), %rsp
	addq	%rax, %rsp
	movq	%rbx, %rdi
	call	bench_ap_main
	jmp	1b

/* Asks lvmm to start every AP at _start with its index in RBX (vmm/loader.h). */
	.section .note.lvmm, "a"
	.align	4
	.long	5			/* "LVMM" and its NUL */
	.long	0
	.long	1			/* LVMM_ELFNOTE_AP_ENTRY */
	.asciz	"LVMM"
	.align	4
	.text

/* Exception vectors 0..31: push a dummy error code where the CPU pushes none, then the vector. */
	.macro	VEC n
	.align	16
vec\n:
	.if (\n == 8 || (\n >= 10 && \n <= 14) || \n == 17 || \n == 21 || \n == 29 || \n == 30)
	.else
	pushq	$0
	.endif
	pushq	$\n
	jmp	vec_common
	.endm

	.text
/* Saves every general register (struct bench_frame in bench.c) so a handler can complete an
 * instruction for ring 3 (port I/O where the host ignores IOPL) and return with iretq. */
vec_common:
	pushq	%rax
	pushq	%rbx
	pushq	%rcx
	pushq	%rdx
	pushq	%rsi
	pushq	%rdi
	pushq	%rbp
	pushq	%r8
	pushq	%r9
	pushq	%r10
	pushq	%r11
	pushq	%r12
	pushq	%r13
	pushq	%r14
	pushq	%r15
	movq	%rsp, %rdi
	call	bench_exception
	popq	%r15
	popq	%r14
	popq	%r13
	popq	%r12
	popq	%r11
	popq	%r10
	popq	%r9
	popq	%r8
	popq	%rbp
	popq	%rdi
	popq	%rsi
	popq	%rdx
	popq	%rcx
	popq	%rbx
	popq	%rax
	addq	$16, %rsp		/* vector and error code */
	iretq

	.irp n, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
	VEC \n
	.endr

	.section .rodata
	.globl bench_vectors
	.align 8
bench_vectors:
	.irp n, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
	.quad vec\n
	.endr

	.section .bss
	.align 4096
	.globl bench_stack0_top
	.space 16384
bench_stack0_top:
	.globl bench_stack3_top
	.space 16384
bench_stack3_top:
/* Per-AP stacks, 16 KiB each: ring 0 (boot and TSS.RSP0), then ring 3; AP i's tops are
 * bench_ap_stacks + i * 16384 and bench_ap_stacks3 + i * 16384. */
	.globl bench_ap_stacks
bench_ap_stacks:
	.space 16384 * (BENCH_MAX_CPUS - 1)
	.globl bench_ap_stacks3
bench_ap_stacks3:
	.space 16384 * (BENCH_MAX_CPUS - 1)
