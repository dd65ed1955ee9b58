package targets

import "github.com/sframekit/sframekit/arch"

// amd64FromUser converts the 27 words of an x86-64 user_regs_struct (the
// order of PTRACE_GETREGS and of the pr_reg field of NT_PRSTATUS):
// r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi orig_rax rip cs
// eflags rsp ss fs_base gs_base ds es fs gs.
func amd64FromUser(u *[27]uint64) arch.Regs {
	r := arch.Regs{Arch: arch.AMD64}
	r.R[arch.AMD64RAX] = u[10]
	r.R[arch.AMD64RDX] = u[12]
	r.R[arch.AMD64RCX] = u[11]
	r.R[arch.AMD64RBX] = u[5]
	r.R[arch.AMD64RSI] = u[13]
	r.R[arch.AMD64RDI] = u[14]
	r.R[arch.AMD64RBP] = u[4]
	r.R[arch.AMD64RSP] = u[19]
	r.R[arch.AMD64R8] = u[9]
	r.R[arch.AMD64R9] = u[8]
	r.R[arch.AMD64R10] = u[7]
	r.R[arch.AMD64R11] = u[6]
	r.R[arch.AMD64R12] = u[3]
	r.R[arch.AMD64R13] = u[2]
	r.R[arch.AMD64R14] = u[1]
	r.R[arch.AMD64R15] = u[0]
	r.R[arch.AMD64RIP] = u[16]
	r.Valid = 1<<(arch.AMD64RIP+1) - 1
	r.OrigRAX = u[15]
	r.Flags = u[18]
	r.FSBase = u[21]
	r.GSBase = u[22]
	return r
}

// arm64FromUser converts the 34 words of an AArch64 user_pt_regs:
// x0..x30, sp, pc, pstate.
func arm64FromUser(u *[34]uint64) arch.Regs {
	r := arch.Regs{Arch: arch.ARM64}
	copy(r.R[:arch.ARM64PC+1], u[:arch.ARM64PC+1])
	r.Valid = 1<<(arch.ARM64PC+1) - 1
	r.Flags = u[33]
	return r
}
