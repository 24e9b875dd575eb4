/* Bench guest entry (64-bit, as Linux's startup_64 is entered) and exception stubs. */
	.section .text.entry, "ax"
	.code64
	.globl _start
_start:
	cli
	leaq	bench_stack0_top(%rip), %rsp
	movq	%rsi, %rdi		/* struct boot_params * */
	call	bench_main
1:	hlt
	jmp	1b

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
