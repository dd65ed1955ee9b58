package targets

import (
	"debug/elf"
	"fmt"
)

// NumRegs is the number of DWARF-numbered registers a Regs can hold: the
// largest architecture (arm64: x0..x30, sp, pc) needs 33.
const NumRegs = 33

// DWARF register numbers of the registers an unwinder needs most.
const (
	// AMD64RBP is the DWARF number of rbp, the frame pointer on x86-64.
	AMD64RBP = 6
	// AMD64RSP is the DWARF number of rsp on x86-64.
	AMD64RSP = 7
	// AMD64RIP is the DWARF number of the return-address column on x86-64,
	// which Regs maps to rip.
	AMD64RIP = 16

	// ARM64FP is the DWARF number of x29, the frame pointer on AArch64.
	ARM64FP = 29
	// ARM64LR is the DWARF number of x30, the link register on AArch64.
	ARM64LR = 30
	// ARM64SP is the DWARF number of sp on AArch64.
	ARM64SP = 31
	// ARM64PC is the number under which Regs keeps the program counter on
	// AArch64 (the AArch64 DWARF ABI reserves 32 for the PC).
	ARM64PC = 32

	// S390XFP is the DWARF number of r11, the preferred frame pointer on
	// s390x.
	S390XFP = 11
	// S390XRA is the DWARF number of r14, which holds the return address
	// at function entry on s390x.
	S390XRA = 14
	// S390XSP is the DWARF number of r15, the stack pointer on s390x.
	S390XSP = 15
	// S390XPC is the number under which Regs keeps the program counter on
	// s390x (after r0-r15 and the FPRs at 16-31; the PSW has no DWARF
	// number in this range).
	S390XPC = 32
)

// Regs is the register set of one thread (or of one frame, while
// unwinding), indexed by DWARF register number.
//
// x86-64 (Arch == elf.EM_X86_64): 0 rax, 1 rdx, 2 rcx, 3 rbx, 4 rsi,
// 5 rdi, 6 rbp, 7 rsp, 8-15 r8-r15, 16 rip (the return-address column).
//
// AArch64 (Arch == elf.EM_AARCH64): 0-30 x0-x30, 31 sp, 32 pc.
//
// s390x (Arch == elf.EM_S390): 0-15 r0-r15, 16-31 the FPRs in DWARF order,
// 32 pc (the PSW address). Cores of s390x programs have them (the FPRs
// only when the core has NT_PRFPREG, which qemu-user does not write).
//
// Valid has bit n set when register n is known. Targets return threads
// with every register valid; an unwinder computing a caller's registers can
// clear the bits of registers it cannot recover (Invalidate).
//
// The zero Regs has no architecture and no valid register.
type Regs struct {
	// Arch is elf.EM_X86_64, elf.EM_AARCH64 or elf.EM_S390.
	Arch elf.Machine
	// R holds the registers by DWARF number; see Valid.
	R [NumRegs]uint64
	// Valid is a bit set: bit n is 1 when R[n] is known.
	Valid uint64
	// Flags is eflags (x86-64), pstate (AArch64) or the PSW mask
	// (s390x), when read from a thread; unwinders need not maintain it.
	Flags uint64
	// FSBase and GSBase are the x86-64 segment bases (FSBase is the TLS
	// pointer); zero elsewhere.
	FSBase, GSBase uint64
	// OrigRAX is orig_rax on x86-64 (the system call number when the
	// thread is stopped in or after a system call, else -1); zero elsewhere.
	OrigRAX uint64
}

// archRegs are the register numbers of one architecture, in one place so
// that each function below is a lookup, not a switch of its own.
type archRegs struct{ n, pc, sp, fp, ra int }

func archRegsOf(arch elf.Machine) archRegs {
	switch arch {
	case elf.EM_X86_64:
		return archRegs{n: 17, pc: AMD64RIP, sp: AMD64RSP, fp: AMD64RBP, ra: -1}
	case elf.EM_AARCH64:
		return archRegs{n: 33, pc: ARM64PC, sp: ARM64SP, fp: ARM64FP, ra: ARM64LR}
	case elf.EM_S390:
		return archRegs{n: 33, pc: S390XPC, sp: S390XSP, fp: S390XFP, ra: S390XRA}
	}
	return archRegs{n: 0, pc: -1, sp: -1, fp: -1, ra: -1}
}

// NumDWARFRegs returns how many DWARF registers, numbered from 0, Regs
// keeps for arch (17 for x86-64, 33 for AArch64 and s390x), or 0 if arch
// is not supported.
func NumDWARFRegs(arch elf.Machine) int { return archRegsOf(arch).n }

// Get returns DWARF register n and whether it is known.
func (r *Regs) Get(n int) (uint64, bool) {
	if n < 0 || n >= NumDWARFRegs(r.Arch) || r.Valid&(1<<uint(n)) == 0 {
		return 0, false
	}
	return r.R[n], true
}

// Set stores v in DWARF register n and marks it valid. It reports false
// (and changes nothing) if n is not a register of r.Arch.
func (r *Regs) Set(n int, v uint64) bool {
	if n < 0 || n >= NumDWARFRegs(r.Arch) {
		return false
	}
	r.R[n] = v
	r.Valid |= 1 << uint(n)
	return true
}

// Invalidate marks DWARF register n unknown.
func (r *Regs) Invalidate(n int) {
	if n >= 0 && n < NumRegs {
		r.Valid &^= 1 << uint(n)
	}
}

// PCReg returns the DWARF number under which Regs keeps the program counter
// (16 on x86-64, 32 on AArch64 and s390x), or -1.
func PCReg(arch elf.Machine) int { return archRegsOf(arch).pc }

// SPReg returns the DWARF number of the stack pointer, or -1.
func SPReg(arch elf.Machine) int { return archRegsOf(arch).sp }

// FPReg returns the DWARF number of the frame pointer (rbp, x29, r11), or -1.
func FPReg(arch elf.Machine) int { return archRegsOf(arch).fp }

// RAReg returns the DWARF number of the register holding the return address
// at function entry (x30 on AArch64, r14 on s390x), or -1 where the return
// address lives on the stack (x86-64).
func RAReg(arch elf.Machine) int { return archRegsOf(arch).ra }

// PC returns the program counter (0 if unknown).
func (r *Regs) PC() uint64 { v, _ := r.Get(PCReg(r.Arch)); return v }

// SP returns the stack pointer (0 if unknown).
func (r *Regs) SP() uint64 { v, _ := r.Get(SPReg(r.Arch)); return v }

// FP returns the frame pointer, rbp or x29 (0 if unknown).
func (r *Regs) FP() uint64 { v, _ := r.Get(FPReg(r.Arch)); return v }

// RA returns the link register x30 on AArch64. On x86-64, where the return
// address is not held in a register, it reports false.
func (r *Regs) RA() (uint64, bool) { return r.Get(RAReg(r.Arch)) }

var amd64RegNames = [...]string{"rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp",
	"r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15", "rip"}

// RegName returns the conventional name of DWARF register n on arch, such
// as "rsp" or "x29", or "r<n>" when it has none.
func RegName(arch elf.Machine, n int) string {
	switch arch {
	case elf.EM_X86_64:
		if n >= 0 && n < len(amd64RegNames) {
			return amd64RegNames[n]
		}
	case elf.EM_AARCH64:
		switch {
		case n >= 0 && n <= 30:
			return fmt.Sprintf("x%d", n)
		case n == ARM64SP:
			return "sp"
		case n == ARM64PC:
			return "pc"
		}
	}
	return fmt.Sprintf("r%d", n)
}

// String formats the valid registers, for debugging.
func (r Regs) String() string {
	s := ""
	for n := 0; n < NumDWARFRegs(r.Arch); n++ {
		if v, ok := r.Get(n); ok {
			if s != "" {
				s += " "
			}
			s += fmt.Sprintf("%s=%#x", RegName(r.Arch, n), v)
		}
	}
	return s
}

// amd64FromUser converts the 27 words of an x86-64 user_regs_struct (the
// order of PTRACE_GETREGS and of the pr_reg field of NT_PRSTATUS):
// r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi orig_rax rip cs
// eflags rsp ss fs_base gs_base ds es fs gs.
func amd64FromUser(u *[27]uint64) Regs {
	r := Regs{Arch: elf.EM_X86_64}
	r.R[0] = u[10]  // rax
	r.R[1] = u[12]  // rdx
	r.R[2] = u[11]  // rcx
	r.R[3] = u[5]   // rbx
	r.R[4] = u[13]  // rsi
	r.R[5] = u[14]  // rdi
	r.R[6] = u[4]   // rbp
	r.R[7] = u[19]  // rsp
	r.R[8] = u[9]   // r8
	r.R[9] = u[8]   // r9
	r.R[10] = u[7]  // r10
	r.R[11] = u[6]  // r11
	r.R[12] = u[3]  // r12
	r.R[13] = u[2]  // r13
	r.R[14] = u[1]  // r14
	r.R[15] = u[0]  // r15
	r.R[16] = u[16] // rip
	r.Valid = 1<<17 - 1
	r.OrigRAX = u[15]
	r.Flags = u[18]
	r.FSBase = u[21]
	r.GSBase = u[22]
	return r
}

// arm64FromUser converts the 34 words of an AArch64 user_pt_regs:
// x0..x30, sp, pc, pstate.
func arm64FromUser(u *[34]uint64) Regs {
	r := Regs{Arch: elf.EM_AARCH64}
	copy(r.R[:33], u[:33])
	r.Valid = 1<<33 - 1
	r.Flags = u[33]
	return r
}
