package arch

import (
	"errors"
	"fmt"
)

// The register file an unwinder works on, and the memory it reads: the
// types the targets (ptrace, cores) produce and the unwinders (unwind,
// perfunwind) take, here so that code unwinding perf samples needs
// nothing of the ptrace and core package.

// NumRegs is the number of DWARF-numbered registers a Regs can hold: the
// largest architecture (arm64: x0..x30, sp, pc) needs 33.
const NumRegs = 33

// Regs is the register set of one thread (or of one frame, while
// unwinding), indexed by DWARF register number.
//
// The numbers are this package's (AMD64RSP, ARM64X29, ...), and
// Arch.PC() says where the program counter is:
//
// x86-64 (Arch == AMD64): 0 rax, 1 rdx, 2 rcx, 3 rbx, 4 rsi,
// 5 rdi, 6 rbp, 7 rsp, 8-15 r8-r15, 16 rip (the return-address column).
//
// AArch64 (Arch == ARM64): 0-30 x0-x30, 31 sp, 32 pc.
//
// s390x (Arch == S390X): 0-15 r0-r15, 16-31 the FPRs in DWARF order,
// 32 pc (the PSW address). Cores of s390x programs have them (the FPRs
// only when the core has NT_PRFPREG, which qemu-user does not write).
//
// Valid has bit n set when register n is known. Targets return threads
// with every register valid; an unwinder computing a caller's registers can
// clear the bits of registers it cannot recover (Invalidate).
//
// The zero Regs has no architecture and no valid register.
type Regs struct {
	// Arch is AMD64, ARM64 or S390X.
	Arch Arch
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

// NumDWARFRegs returns how many DWARF registers, numbered from 0, Regs
// keeps for a (17 for x86-64, 33 for AArch64 and s390x), or 0 if a is
// not supported.
func NumDWARFRegs(a Arch) int {
	switch a {
	case AMD64:
		return int(AMD64RIP) + 1
	case ARM64:
		return int(ARM64PC) + 1
	case S390X:
		return int(S390XPC) + 1
	}
	return 0
}

// Get returns DWARF register n and whether it is known.
func (r *Regs) Get(n Reg) (uint64, bool) {
	if int64(n) >= int64(NumDWARFRegs(r.Arch)) || r.Valid&(1<<n) == 0 {
		return 0, false
	}
	return r.R[n], true
}

// Set stores v in DWARF register n and marks it valid. It reports false
// (and changes nothing) if n is not a register of r.Arch.
func (r *Regs) Set(n Reg, v uint64) bool {
	if int64(n) >= int64(NumDWARFRegs(r.Arch)) {
		return false
	}
	r.R[n] = v
	r.Valid |= 1 << n
	return true
}

// Invalidate marks DWARF register n unknown.
func (r *Regs) Invalidate(n Reg) {
	if n < NumRegs {
		r.Valid &^= 1 << n
	}
}

// PC returns the program counter (0 if unknown).
func (r *Regs) PC() uint64 { v, _ := r.Get(r.Arch.PC()); return v }

// SP returns the stack pointer (0 if unknown).
func (r *Regs) SP() uint64 { v, _ := r.Get(r.Arch.SP()); return v }

// FP returns the frame pointer, rbp, x29 or r11 (0 if unknown).
func (r *Regs) FP() uint64 { v, _ := r.Get(r.Arch.FP()); return v }

// RA returns the link register (x30 on AArch64, r14 on s390x). On x86-64,
// where the return address is not held in a register, it reports false.
func (r *Regs) RA() (uint64, bool) {
	if !r.Arch.HasLinkReg() {
		return 0, false
	}
	return r.Get(r.Arch.RA())
}

// String formats the valid registers, for debugging, by the names of
// package arch ("pc" for the PC where that is no DWARF register).
func (r Regs) String() string {
	s := ""
	for n := Reg(0); int64(n) < int64(NumDWARFRegs(r.Arch)); n++ {
		if v, ok := r.Get(n); ok {
			if s != "" {
				s += " "
			}
			name := r.Arch.RegName(n)
			if n == r.Arch.PC() && r.Arch.HasLinkReg() {
				name = "pc"
			}
			s += fmt.Sprintf("%s=%#x", name, v)
		}
	}
	return s
}

// Memory reads a target's memory: a live process or a core (package
// targets), a copy of a thread's stack (unwind.StackMemory), or a cache
// in front of one (unwind.PageCache). ReadAt follows io.ReaderAt: addr is
// the runtime address (converted with int64(uint64addr), so addresses
// above 1<<63 are negative), and a short read returns a non-nil error.
// A Memory that walks running in parallel share must be safe for
// concurrent use (those of targets and unwind are).
type Memory interface {
	ReadAt(p []byte, addr int64) (n int, err error)
}

// ErrUnmapped is wrapped by the errors of a Memory for addresses it does
// not have: not mapped in a live process, neither dumped in a core nor
// backed by a readable mapped file, or outside a stack copy that has no
// fallback.
var ErrUnmapped = errors.New("address not available")
