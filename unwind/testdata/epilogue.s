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

# fp_caller keeps its CFA in the frame pointer (CFA = rbp + 16), as code
# built -fno-omit-frame-pointer does: a walk from fp_epilogue_ret needs
# the rbp that fp_epilogue has just popped.
	.globl	fp_caller
	.type	fp_caller, @function
fp_caller:
	.cfi_startproc
	pushq	%rbp
	.cfi_def_cfa_offset 16
	.cfi_offset 6, -16
	movq	%rsp, %rbp
	.cfi_def_cfa_register 6
	call	fp_epilogue
	.globl	fp_caller_ret
fp_caller_ret:
	popq	%rbp
	.cfi_def_cfa 7, 8
	ret
	.cfi_endproc
	.size	fp_caller, .-fp_caller
	.section	.note.GNU-stack,"",@progbits
