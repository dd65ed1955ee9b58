# epilogue.s: two functions stopped on their return instruction, after
# the pops of their epilogue, whose unwind rules (as compilers and glibc
# write them) still say where the popped registers were saved: below the
# stack pointer, which a sample's stack copy does not hold. The unwinder
# must not need them to find the caller.
	.text
	.globl	cfi_epilogue
	.type	cfi_epilogue, @function
cfi_epilogue:
	.cfi_startproc
	pushq	%rbx
	.cfi_def_cfa_offset 16
	.cfi_offset 3, -16
	popq	%rbx
	.cfi_def_cfa_offset 8
	.globl	cfi_epilogue_ret
cfi_epilogue_ret:
	ret
	.cfi_endproc
	.size	cfi_epilogue, .-cfi_epilogue

	.globl	fp_epilogue
	.type	fp_epilogue, @function
fp_epilogue:
	.cfi_startproc
	pushq	%rbp
	.cfi_def_cfa_offset 16
	.cfi_offset 6, -16
	popq	%rbp
	.cfi_def_cfa_offset 8
	.globl	fp_epilogue_ret
fp_epilogue_ret:
	ret
	.cfi_endproc
	.size	fp_epilogue, .-fp_epilogue
	.section	.note.GNU-stack,"",@progbits
