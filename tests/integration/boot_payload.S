/* A few instructions entered at the 64-bit boot entry (RSI = zero page) by test_boot_protocol:
 * checks what the boot protocol promises, prints the result and the command line, powers off. */
	.code64
	.text
	.globl _start

#define COM1		0x3f8
#define PM1A_CNT	0x604
#define S5_SLP		0x3400		/* SLP_TYP 5 << 10 | SLP_EN */

/* No stack is promised at entry: these are macros, not calls. */
.macro PUTC ch
	mov $COM1, %dx
	mov \ch, %al
	out %al, %dx
.endm

.macro PUTS ptr
	mov \ptr, %rdi
1:	movb (%rdi), %al
	test %al, %al
	jz 2f
	mov $COM1, %dx
	out %al, %dx
	inc %rdi
	jmp 1b
2:
.endm

.macro CHECK cond, code
	mov \code, %cl
	j\cond fail
.endm

_start:
	mov %rsi, %rbx
	cmpl $0x53726448, 0x202(%rbx)		/* "HdrS" */
	CHECK ne, $'h'
	cmpb $0xff, 0x210(%rbx)			/* type_of_loader */
	CHECK ne, $'l'
	cmpb $0, 0x1e8(%rbx)			/* e820_entries */
	CHECK e, $'e'
	mov 0x70(%rbx), %rdi			/* acpi_rsdp_addr */
	movabs $0x2052545020445352, %rax	/* "RSD PTR " */
	cmp %rax, (%rdi)
	CHECK ne, $'a'
	movl 0x218(%rbx), %edi			/* ramdisk_image: a cpio starts "0707" */
	cmpl $0x37303730, (%rdi)
	CHECK ne, $'r'
	lea ok(%rip), %rsi
	PUTS %rsi
	movl 0x228(%rbx), %esi			/* cmd_line_ptr */
	PUTS %rsi
	PUTC $'\n'
	jmp off
fail:
	lea bad(%rip), %rsi
	PUTS %rsi
	mov $COM1, %dx
	mov %cl, %al
	out %al, %dx
	PUTC $'\n'
off:
	mov $PM1A_CNT, %dx
	mov $S5_SLP, %ax
	out %ax, %dx
3:	hlt
	jmp 3b

ok:	.asciz "boot-protocol-ok cmdline="
bad:	.asciz "boot-protocol-FAIL "
