package perfdata

import "github.com/sframekit/sframekit/arch"

// perf numbers the registers of a sample's register dumps (REGS_USER,
// REGS_INTR) in its own per-architecture order (the kernel's
// arch/*/include/uapi/asm/perf_regs.h); a dump holds the registers whose
// bits are set in the event's mask, lowest number first. An unwinder wants
// DWARF numbers; these tables map one to the other.

// Perf register numbers of x86-64.
const (
	PerfRegX86AX = iota
	PerfRegX86BX
	PerfRegX86CX
	PerfRegX86DX
	PerfRegX86SI
	PerfRegX86DI
	PerfRegX86BP
	PerfRegX86SP
	PerfRegX86IP
	PerfRegX86Flags
	PerfRegX86CS
	PerfRegX86SS
	PerfRegX86DS
	PerfRegX86ES
	PerfRegX86FS
	PerfRegX86GS
	PerfRegX86R8
	PerfRegX86R9
	PerfRegX86R10
	PerfRegX86R11
	PerfRegX86R12
	PerfRegX86R13
	PerfRegX86R14
	PerfRegX86R15
	// PerfRegX86XMM0 is the first of the XMM registers (two numbers each)
	// that REGS_INTR can dump; they have no 64-bit DWARF counterpart here.
	PerfRegX86XMM0 = 32
)

// Perf register numbers of AArch64: x0 to x28 are 0 to 28.
const (
	PerfRegARM64X0 = 0
	PerfRegARM64FP = 29 // x29
	PerfRegARM64LR = 30 // x30
	PerfRegARM64SP = 31
	PerfRegARM64PC = 32
	// PerfRegARM64VG is the SVE vector granule (extended registers).
	PerfRegARM64VG = 46
)

// x86-64 DWARF numbers by perf number (rip is the return-address
// column, where register sets keep the PC).
var x86DWARF = [...]arch.Reg{
	PerfRegX86AX: arch.AMD64RAX, PerfRegX86BX: arch.AMD64RBX, PerfRegX86CX: arch.AMD64RCX, PerfRegX86DX: arch.AMD64RDX,
	PerfRegX86SI: arch.AMD64RSI, PerfRegX86DI: arch.AMD64RDI, PerfRegX86BP: arch.AMD64RBP, PerfRegX86SP: arch.AMD64RSP,
	PerfRegX86IP: arch.AMD64RIP, PerfRegX86Flags: arch.AMD64RFLAGS, PerfRegX86CS: arch.AMD64CS, PerfRegX86SS: arch.AMD64SS,
	PerfRegX86DS: arch.AMD64DS, PerfRegX86ES: arch.AMD64ES, PerfRegX86FS: arch.AMD64FS, PerfRegX86GS: arch.AMD64GS,
	PerfRegX86R8: arch.AMD64R8, PerfRegX86R9: arch.AMD64R9, PerfRegX86R10: arch.AMD64R10, PerfRegX86R11: arch.AMD64R11,
	PerfRegX86R12: arch.AMD64R12, PerfRegX86R13: arch.AMD64R13, PerfRegX86R14: arch.AMD64R14, PerfRegX86R15: arch.AMD64R15,
}

var x86Names = [...]string{
	"AX", "BX", "CX", "DX", "SI", "DI", "BP", "SP", "IP", "FLAGS", "CS", "SS",
	"DS", "ES", "FS", "GS", "R8", "R9", "R10", "R11", "R12", "R13", "R14", "R15",
}

// DWARFRegister returns the DWARF register number of perf register n of
// a (arch.AMD64 or arch.ARM64), and false for a register with no DWARF
// number in the general-register file (x86 XMM halves) or an unknown one.
// On AArch64, perf's pc maps to arch.ARM64PC (32), the number the AArch64
// DWARF ABI reserves for it and register sets keep the PC under.
func DWARFRegister(a arch.Arch, n int) (arch.Reg, bool) {
	switch a {
	case arch.AMD64:
		if n >= 0 && n < len(x86DWARF) {
			return x86DWARF[n], true
		}
	case arch.ARM64:
		// x0-x30, sp and pc keep their numbers; so does VG.
		switch {
		case n >= PerfRegARM64X0 && n <= PerfRegARM64PC:
			return arch.ARM64X0 + arch.Reg(n-PerfRegARM64X0), true
		case n == PerfRegARM64VG:
			return arch.ARM64VG, true
		}
	}
	return 0, false
}

// PerfRegisterName returns perf's name of register n of a, as perf
// script -D prints it ("AX", "R15"; "x0", "lr", "sp", "pc"), or "".
func PerfRegisterName(a arch.Arch, n int) string {
	switch a {
	case arch.AMD64:
		if n >= 0 && n < len(x86Names) {
			return x86Names[n]
		}
	case arch.ARM64:
		switch {
		case n >= 0 && n <= 28:
			return "x" + itoa(n)
		case n == PerfRegARM64FP:
			return "x29"
		case n == PerfRegARM64LR:
			return "lr"
		case n == PerfRegARM64SP:
			return "sp"
		case n == PerfRegARM64PC:
			return "pc"
		case n == PerfRegARM64VG:
			return "vg"
		}
	}
	return ""
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return string(rune('0'+n/10)) + string(rune('0'+n%10))
}

// DWARFRegs calls set for each register of a dump of architecture a with
// its DWARF number and value, skipping registers without one. It is how
// an unwinder loads a sample's REGS_USER into its register set.
func (r Regs) DWARFRegs(a arch.Arch, set func(dwarf arch.Reg, v uint64)) {
	if r.ABI == RegsABINone {
		return
	}
	i := 0
	for m := r.Mask; m != 0 && i < r.Len(); m &= m - 1 {
		n := trailingZeros(m)
		if d, ok := DWARFRegister(a, n); ok {
			set(d, r.At(i))
		}
		i++
	}
}
