package perfdata

import "debug/elf"

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

// x86-64 DWARF numbers by perf number (System V psABI: 0 rax, 1 rdx,
// 2 rcx, 3 rbx, 4 rsi, 5 rdi, 6 rbp, 7 rsp, 8-15 r8-r15, 16 the return
// address column (rip), 49 rflags, 50-55 es, cs, ss, ds, fs, gs).
var x86DWARF = [...]int8{
	PerfRegX86AX: 0, PerfRegX86BX: 3, PerfRegX86CX: 2, PerfRegX86DX: 1,
	PerfRegX86SI: 4, PerfRegX86DI: 5, PerfRegX86BP: 6, PerfRegX86SP: 7,
	PerfRegX86IP: 16, PerfRegX86Flags: 49, PerfRegX86CS: 51, PerfRegX86SS: 52,
	PerfRegX86DS: 53, PerfRegX86ES: 50, PerfRegX86FS: 54, PerfRegX86GS: 55,
	PerfRegX86R8: 8, PerfRegX86R9: 9, PerfRegX86R10: 10, PerfRegX86R11: 11,
	PerfRegX86R12: 12, PerfRegX86R13: 13, PerfRegX86R14: 14, PerfRegX86R15: 15,
}

var x86Names = [...]string{
	"AX", "BX", "CX", "DX", "SI", "DI", "BP", "SP", "IP", "FLAGS", "CS", "SS",
	"DS", "ES", "FS", "GS", "R8", "R9", "R10", "R11", "R12", "R13", "R14", "R15",
}

// DWARFRegister returns the DWARF register number of perf register n of
// arch (elf.EM_X86_64 or elf.EM_AARCH64), and false for a register with no
// DWARF number in the general-register file (x86 XMM halves) or an
// unknown one. On AArch64, perf's pc maps to 32, the number the AArch64
// DWARF ABI reserves for it (and package targets keeps the PC under).
func DWARFRegister(arch elf.Machine, n int) (int, bool) {
	switch arch {
	case elf.EM_X86_64:
		if n >= 0 && n < len(x86DWARF) {
			return int(x86DWARF[n]), true
		}
	case elf.EM_AARCH64:
		// x0-x30, sp and pc keep their numbers; so does VG (46).
		if n >= 0 && n <= PerfRegARM64PC || n == PerfRegARM64VG {
			return n, true
		}
	}
	return -1, false
}

// PerfRegisterName returns perf's name of register n of arch, as perf
// script -D prints it ("AX", "R15"; "x0", "lr", "sp", "pc"), or "".
func PerfRegisterName(arch elf.Machine, n int) string {
	switch arch {
	case elf.EM_X86_64:
		if n >= 0 && n < len(x86Names) {
			return x86Names[n]
		}
	case elf.EM_AARCH64:
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

// DWARFRegs calls set for each register of a dump with its DWARF number
// and value, skipping registers without one. It is how an unwinder loads
// a sample's REGS_USER into its register set.
func (r Regs) DWARFRegs(arch elf.Machine, set func(dwarf int, v uint64)) {
	if r.ABI == RegsABINone {
		return
	}
	i := 0
	for m := r.Mask; m != 0 && i < r.Len(); m &= m - 1 {
		n := trailingZeros(m)
		if d, ok := DWARFRegister(arch, n); ok {
			set(d, r.At(i))
		}
		i++
	}
}
