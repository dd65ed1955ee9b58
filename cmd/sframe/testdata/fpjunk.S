/* spin(n): n iterations of a loop with a frame-pointer register that
   points nowhere (an aligned address above every stack, unmapped), as
   code built without frame pointers may leave it: where its unwind
   tables cannot be read, the frame-pointer fallback reads memory that is
   not there. With its CFI, the walk goes on to its caller. */
	.text
	.globl	spin
	.type	spin, @function
spin:
	.cfi_startproc
	pushq	%rbp
	.cfi_adjust_cfa_offset 8
	.cfi_rel_offset %rbp, 0
	movabsq	$0x7ffffffff000, %rbp
	movq	%rdi, %rax
1:	subq	$1, %rax
	jnz	1b
	popq	%rbp
	.cfi_adjust_cfa_offset -8
	.cfi_restore %rbp
	ret
	.cfi_endproc
	.size	spin, .-spin
	.section .note.GNU-stack,"",@progbits
