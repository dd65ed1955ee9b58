/* alias.S: a function under two names, for TestInlinesAgainstPerfScript.
 * Assembled with -g, gas writes a DWARF subprogram for each name over
 * the same code, as for glibc's memmove and memcpy variants. */
	.text
	.globl	churn_first
	.globl	churn_second
	.type	churn_first, @function
	.type	churn_second, @function
churn_first:
churn_second:
	.cfi_startproc
	movl	$400, %ecx
1:	imulq	%rdi, %rdi
	addq	$1, %rdi
	decl	%ecx
	jnz	1b
	movq	%rdi, %rax
	ret
	.cfi_endproc
	.size	churn_first, .-churn_first
	.size	churn_second, .-churn_second
	.section .note.GNU-stack,"",@progbits
