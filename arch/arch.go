// Package arch is the one vocabulary of sframekit for which machine and
// which register: an Arch (x86-64, AArch64, s390x; i386 for printing
// CFI only), DWARF register numbers (Reg) with the constants of each
// architecture, the registers an unwinder tracks (SP, FP, RA, PC) and
// the register names printers use.
//
// The other packages speak it: CFI rules and SFrame rules name registers
// by Reg, register sets (package targets) are indexed by it, the SFrame
// ABI byte maps to an Arch (sframe.ABI.Arch), and ELF machines map to one
// (FromELF). It also holds what a stopped program is made of, the
// types the targets (package targets) produce and the unwinders take:
// the register file (Regs), memory (Memory), threads, modules and
// mappings (Target, Thread, Module, Mapping). It imports nothing of
// sframekit, so every package may import it.
package arch

import (
	"debug/elf"
	"runtime"
)

// Reg is a DWARF register number. Its meaning depends on the
// architecture's DWARF ABI (x86-64: 7 is rsp, 16 the return address).
//
// It holds 32 bits although real ABIs stay below 200: CFI register
// operands are ULEB128 numbers, and readelf (whose output package cfi
// reproduces) keeps 32 bits of them.
type Reg uint32

// Arch identifies a machine: it fixes register numbers and names.
type Arch uint8

// The architectures. Unknown is the zero value: registers print as rN
// and SP, FP, RA and PC are 0. I386 exists for CFI printers (register
// names); sframekit does not unwind it.
const (
	Unknown Arch = iota
	AMD64
	ARM64
	S390X
	I386
)

// FromELF maps an ELF machine to an Arch (EM_S390 to S390X, whatever the
// class), or Unknown.
func FromELF(m elf.Machine) Arch {
	switch m {
	case elf.EM_X86_64:
		return AMD64
	case elf.EM_AARCH64:
		return ARM64
	case elf.EM_S390:
		return S390X
	case elf.EM_386:
		return I386
	}
	return Unknown
}

// Host returns the architecture this program runs on (that of any
// 64-bit process it traces or profiles), or Unknown.
func Host() Arch {
	switch runtime.GOARCH {
	case "amd64":
		return AMD64
	case "arm64":
		return ARM64
	case "s390x":
		return S390X
	case "386":
		return I386
	}
	return Unknown
}

// String returns the conventional name: "x86-64", "aarch64", "s390x",
// "i386" or "unknown".
func (a Arch) String() string {
	switch a {
	case AMD64:
		return "x86-64"
	case ARM64:
		return "aarch64"
	case S390X:
		return "s390x"
	case I386:
		return "i386"
	}
	return "unknown"
}

// x86-64 DWARF register numbers (System V psABI).
const (
	AMD64RAX Reg = iota
	AMD64RDX
	AMD64RCX
	AMD64RBX
	AMD64RSI
	AMD64RDI
	AMD64RBP
	AMD64RSP
	AMD64R8
	AMD64R9
	AMD64R10
	AMD64R11
	AMD64R12
	AMD64R13
	AMD64R14
	AMD64R15
	// AMD64RIP is the return-address column, where register sets keep
	// rip.
	AMD64RIP

	// The flags and segment registers (perf samples carry them).
	AMD64RFLAGS Reg = 49
	AMD64ES     Reg = 50
	AMD64CS     Reg = 51
	AMD64SS     Reg = 52
	AMD64DS     Reg = 53
	AMD64FS     Reg = 54
	AMD64GS     Reg = 55
)

// AArch64 DWARF register numbers (aadwarf64).
const (
	ARM64X0 Reg = iota
	ARM64X1
	ARM64X2
	ARM64X3
	ARM64X4
	ARM64X5
	ARM64X6
	ARM64X7
	ARM64X8
	ARM64X9
	ARM64X10
	ARM64X11
	ARM64X12
	ARM64X13
	ARM64X14
	ARM64X15
	ARM64X16
	ARM64X17
	ARM64X18
	ARM64X19
	ARM64X20
	ARM64X21
	ARM64X22
	ARM64X23
	ARM64X24
	ARM64X25
	ARM64X26
	ARM64X27
	ARM64X28
	ARM64X29
	ARM64X30
	ARM64SP
	// ARM64PC is where register sets keep the program counter: the
	// AArch64 DWARF ABI reserves 32 for it.
	ARM64PC

	// ARM64FP is x29, the frame pointer.
	ARM64FP = ARM64X29
	// ARM64LR is x30, the link register: the return address at entry.
	ARM64LR = ARM64X30
	// ARM64VG is the SVE vector granule (perf samples carry it).
	ARM64VG Reg = 46
)

// s390x DWARF register numbers (ELF ABI for s390x: 0-15 r0-r15, 16-31
// the floating-point registers).
const (
	S390XR0 Reg = iota
	S390XR1
	S390XR2
	S390XR3
	S390XR4
	S390XR5
	S390XR6
	S390XR7
	S390XR8
	S390XR9
	S390XR10
	S390XR11
	S390XR12
	S390XR13
	S390XR14
	S390XR15

	// S390XFP is r11, the preferred frame pointer.
	S390XFP = S390XR11
	// S390XRA is r14, which holds the return address at entry.
	S390XRA = S390XR14
	// S390XSP is r15, the stack pointer.
	S390XSP = S390XR15
	// S390XPC is where register sets keep the program counter (the PSW
	// address). It is not a DWARF number of the ABI (32 is cr0, the PSW
	// address 65): register sets keep r0-r15 and the FPRs (16-31), not
	// the control registers, and place the PC after them.
	S390XPC Reg = 32
)

// S390XFPR returns the DWARF number of floating-point register f<i>, i
// from 0 to 15 (else 0). The ABI numbers them 16-31 in the order f0, f2,
// f4, f6, f1, f3, f5, f7, f8, f10, f12, f14, f9, f11, f13, f15.
func S390XFPR(i int) Reg {
	if i < 0 || i > 15 {
		return 0
	}
	j := i % 8
	return Reg(16 + i/8*8 + j%2*4 + j/2)
}

// i386 registers that the unwinder vocabulary below needs.
const (
	i386ESP Reg = 4
	i386EBP Reg = 5
	i386EIP Reg = 8
)

// regs are the tracked registers of one architecture, in one place so
// that each method is a lookup rather than a switch of its own.
type regs struct{ sp, fp, ra, pc Reg }

var tracked = [...]regs{
	AMD64: {AMD64RSP, AMD64RBP, AMD64RIP, AMD64RIP},
	ARM64: {ARM64SP, ARM64FP, ARM64LR, ARM64PC},
	S390X: {S390XSP, S390XFP, S390XRA, S390XPC},
	I386:  {i386ESP, i386EBP, i386EIP, i386EIP},
}

func (a Arch) regs() regs {
	if int(a) < len(tracked) {
		return tracked[a]
	}
	return regs{}
}

// SP returns the stack pointer: rsp (7), sp (31), r15.
func (a Arch) SP() Reg { return a.regs().sp }

// FP returns the frame pointer: rbp (6), x29, r11.
func (a Arch) FP() Reg { return a.regs().fp }

// RA returns the return-address column of the ABI's CFI: 16 on x86-64
// (where the return address is on the stack at entry, and RA equals PC),
// the link register x30 on AArch64 and r14 on s390x.
func (a Arch) RA() Reg { return a.regs().ra }

// PC returns where register sets keep the program counter: 16 on x86-64
// (rip, the return-address column), ARM64PC and S390XPC (both 32).
func (a Arch) PC() Reg { return a.regs().pc }

// HasLinkReg reports whether the return address is in a register (RA)
// at function entry, rather than on the stack: true on AArch64 and s390x.
func (a Arch) HasLinkReg() bool { return a.RA() != a.PC() }

// SPOffset returns the caller's SP relative to the CFA: -160 on s390x,
// whose CFA is the SP at the call plus the register save area the
// caller provides, and 0 elsewhere.
func (a Arch) SPOffset() int64 {
	if a == S390X {
		return -160
	}
	return 0
}
