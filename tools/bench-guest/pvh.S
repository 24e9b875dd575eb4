/* PVH entry of the bench guest: the Xen ELF note QEMU's -kernel looks for, and the 32-bit entry it
 * calls (flat protected mode, paging off, EBX = hvm_start_info), which enters long mode itself. */
#define XEN_ELFNOTE_PHYS32_ENTRY 18
#define HVM_START_MAGIC		 0x336ec578
#define MSR_EFER		 0xc0000080

	.section .note.pvh, "a"
	.align	4
	.long	4			/* name size: "Xen" and its NUL */
	.long	4			/* descriptor size: a 32-bit entry address */
	.long	XEN_ELFNOTE_PHYS32_ENTRY
	.asciz	"Xen"
	.long	pvh_start32

	.text
	.code32
	.globl	pvh_start32
pvh_start32:
	cli
	cld
	movl	%ebx, %edi		/* kept for long mode: hvm_start_info */
	/* Boot page tables: the low 1 GiB identity-mapped with 2 MiB pages; bench_main builds
	 * its own 4 GiB map (user-accessible) right after. */
	xorl	%ecx, %ecx
1:	movl	%ecx, %eax
	shll	$21, %eax
	orl	$0x83, %eax		/* present, writable, 2 MiB */
	movl	%eax, pvh_pd(, %ecx, 8)
	movl	$0, pvh_pd + 4(, %ecx, 8)
	incl	%ecx
	cmpl	$512, %ecx
	jb	1b
	movl	$pvh_pd + 3, pvh_pdpt
	movl	$pvh_pdpt + 3, pvh_pml4
	movl	%cr4, %eax
	orl	$0x20, %eax		/* PAE */
	movl	%eax, %cr4
	movl	$pvh_pml4, %eax
	movl	%eax, %cr3
	movl	$MSR_EFER, %ecx
	rdmsr
	orl	$0x100, %eax		/* LME */
	wrmsr
	lgdt	pvh_gdt_desc
	movl	%cr0, %eax
	orl	$0x80000001, %eax	/* PG, PE */
	movl	%eax, %cr0
	ljmp	$0x08, $pvh_start64

	.code64
pvh_start64:
	movl	$0x10, %eax
	movl	%eax, %ds
	movl	%eax, %es
	movl	%eax, %ss
	leaq	bench_stack0_top(%rip), %rsp
	/* bench_main reads a Linux zero page: give it one with the command line pointer (0x228) */
	leaq	pvh_zero_page(%rip), %rsi
	movl	%edi, %edi
	cmpl	$HVM_START_MAGIC, (%rdi)
	jne	2f
	movq	24(%rdi), %rax		/* cmdline_paddr */
	movl	%eax, 0x228(%rsi)
2:	movq	%rsi, %rdi
	call	bench_main
3:	hlt
	jmp	3b

	.section .rodata
	.align	8
pvh_gdt:
	.quad	0
	.quad	0x00af9a000000ffff	/* 64-bit code */
	.quad	0x00cf92000000ffff	/* data */
pvh_gdt_desc:
	.word	pvh_gdt_desc - pvh_gdt - 1
	.long	pvh_gdt

	/* in .data, not .bss: written before anything could clear a .bss */
	.data
	.align	4096
pvh_pml4:
	.fill	512, 8, 0
pvh_pdpt:
	.fill	512, 8, 0
pvh_pd:
	.fill	512, 8, 0
pvh_zero_page:
	.fill	4096, 1, 0
