// Package unwind produces the frames of a thread's stack from its
// registers and memory, using, for each frame, the best rules there are:
// SFrame first, then DWARF CFI (for code without SFrame, such as most C
// libraries today), then the frame-pointer chain.
//
// Addresses are runtime addresses; each Module maps them to its ELF file's
// own address space (runtime - Bias), where its SFrame and CFI tables
// live. The unwinder follows the stack-trace algorithm of the SFrame
// specification for default and flexible FDEs: "RA undefined" ends the
// stack, signal trampolines restore the interrupted registers from the
// signal context (AMD64, AArch64), PC-mask FDEs cover PLTs, s390x callers'
// SP is CFA-160, signed AArch64 return addresses are stripped, and rules
// based on registers other than SP and FP are trusted only in the topmost
// frame, where those registers are still live.
package unwind

import (
	"debug/elf"
	"errors"
	"fmt"
	"sort"

	"github.com/sframekit/sframekit/cfi"
	"github.com/sframekit/sframekit/sframe"
	"github.com/sframekit/sframekit/targets"
)

// Method says which rules unwound a frame.
type Method uint8

// Unwinding methods, in the order they are tried.
const (
	MethodNone   Method = iota
	MethodSFrame        // the module's .sframe
	MethodCFI           // the module's .eh_frame or .debug_frame
	MethodFP            // the frame-pointer chain
	MethodSignal        // a signal context on the stack
)

func (m Method) String() string {
	switch m {
	case MethodSFrame:
		return "sframe"
	case MethodCFI:
		return "cfi"
	case MethodFP:
		return "fp"
	case MethodSignal:
		return "signal"
	}
	return "none"
}

// Stop says why a walk ended.
type Stop uint8

// Reasons a walk ends. StopEnd is the normal end of a complete stack.
const (
	StopEnd        Stop = iota // outermost frame reached (RA undefined, PC 0)
	StopNoModule               // the PC is in no known module
	StopNoRule                 // no SFrame, CFI or frame-pointer rule applies
	StopNoProgress             // the caller's stack pointer is not above the callee's
	StopMemory                 // the stack could not be read
	StopDepth                  // the depth limit was reached
)

func (s Stop) String() string {
	switch s {
	case StopEnd:
		return "end of stack"
	case StopNoModule:
		return "PC in no known module"
	case StopNoRule:
		return "no unwind rule for PC"
	case StopNoProgress:
		return "stack pointer did not move up"
	case StopMemory:
		return "stack not readable"
	case StopDepth:
		return "depth limit reached"
	}
	return fmt.Sprintf("Stop(%d)", uint8(s))
}

// CFI is what the unwinder needs from a module's CFI: the row covering an
// address (in the module's ELF address space) and the CIE of its FDE.
// ok is false when no FDE covers pc.
type CFI interface {
	Lookup(pc uint64, row *cfi.Row) (cie *cfi.CIE, ok bool, err error)
}

// Module is a loaded ELF object with its unwind tables.
type Module struct {
	Name       string // for display
	Start, End uint64 // runtime address range [Start, End)
	Bias       uint64 // runtime address = ELF address + Bias
	SFrame     *sframe.Section
	CFI        CFI
	// NoFP disables the frame-pointer fallback inside this module (code
	// known to be built without frame pointers).
	NoFP bool
}

// Frame is one frame of a stack.
type Frame struct {
	// PC is the current PC for frame 0 and the return address for the
	// others (the interrupted PC for the frame after a signal frame).
	PC     uint64
	SP     uint64
	CFA    uint64 // 0 when not computed
	Module *Module
	// Method is what unwound this frame, that is, found its caller.
	Method Method
	// Signal marks a signal trampoline frame (gdb's "<signal handler
	// called>").
	Signal bool
}

// Unwinder walks stacks of one address space. It caches nothing across
// calls that depends on the thread, so one Unwinder serves every thread
// of a target, but not concurrently: it keeps scratch state.
type Unwinder struct {
	arch     elf.Machine
	abi      sframe.ABI
	modules  []*Module
	mem      wordReader
	MaxDepth int
	// PACMask keeps the address bits of signed AArch64 return addresses
	// (default: the low 48 bits, Linux user space).
	PACMask uint64

	row     cfi.Row
	initial [1]uint64 // the CFA, pushed for register expressions
	code    [9]byte   // instruction bytes read to recognize sigreturn
	cfa     uint64    // CFA of the last step
	sig     bool      // the last step went through a signal frame
}

// DefaultMaxDepth bounds walks when MaxDepth is 0.
const DefaultMaxDepth = 1024

// New makes an unwinder for arch (elf.EM_X86_64, elf.EM_AARCH64 or
// elf.EM_S390) over mods and mem. mods need not be sorted.
func New(arch elf.Machine, mods []*Module, mem targets.Memory) (*Unwinder, error) {
	u := &Unwinder{arch: arch, PACMask: 1<<48 - 1}
	switch arch {
	case elf.EM_X86_64:
		u.abi = sframe.ABIAMD64LE
	case elf.EM_AARCH64:
		u.abi = sframe.ABIAArch64LE
	case elf.EM_S390:
		u.abi = sframe.ABIS390XBE
		u.mem.be = true
	default:
		return nil, fmt.Errorf("unwind: unsupported architecture %s", arch)
	}
	u.modules = append([]*Module(nil), mods...)
	sort.Slice(u.modules, func(i, j int) bool { return u.modules[i].Start < u.modules[j].Start })
	u.mem.m = mem
	return u, nil
}

// Modules returns the modules, sorted by start address.
func (u *Unwinder) Modules() []*Module { return u.modules }

// Module returns the module containing the runtime address pc, or nil.
func (u *Unwinder) Module(pc uint64) *Module {
	i := sort.Search(len(u.modules), func(i int) bool { return u.modules[i].Start > pc })
	if i > 0 && pc < u.modules[i-1].End {
		return u.modules[i-1]
	}
	return nil
}

// errNoRule means a method has no rule for the PC (try the next one).
var errNoRule = errors.New("no rule")

// errEnd means the rules mark the outermost frame.
var errEnd = errors.New("outermost frame")

// Unwind appends the frames of the stack whose innermost registers are
// regs to frames and returns them, with the reason the walk stopped and,
// for StopMemory and StopNoRule, the error behind it.
func (u *Unwinder) Unwind(regs *targets.Regs, frames []Frame) ([]Frame, Stop, error) {
	max := u.MaxDepth
	if max <= 0 {
		max = DefaultMaxDepth
	}
	cur := *regs
	var next targets.Regs
	top, exact := true, true
	for depth := 0; ; depth++ {
		pc := cur.PC()
		if pc == 0 && !top {
			return frames, StopEnd, nil
		}
		if depth >= max {
			return frames, StopDepth, nil
		}
		m := u.Module(pc)
		frames = append(frames, Frame{PC: pc, SP: cur.SP(), Module: m})
		fr := &frames[len(frames)-1]
		if m == nil {
			return frames, StopNoModule, nil
		}
		// Caller frames hold return addresses, which may point past the
		// end of the call's function (noreturn calls): look up PC-1.
		lookup := pc
		if !exact {
			lookup--
		}
		method, err := u.step(m, pc, lookup, &cur, &next, top)
		fr.Method, fr.CFA, fr.Signal = method, u.cfa, u.sig
		switch {
		case errors.Is(err, errEnd):
			return frames, StopEnd, nil
		case errors.Is(err, errNoRule):
			return frames, StopNoRule, nil
		case err != nil:
			return frames, StopMemory, err
		}
		sp, nsp := cur.SP(), next.SP()
		if !u.sig && (nsp < sp || (nsp == sp && !top)) {
			return frames, StopNoProgress, nil
		}
		exact = u.sig
		top = false
		cur = next
	}
}

// step computes the caller's registers into next, trying each method.
func (u *Unwinder) step(m *Module, pc, lookup uint64, cur, next *targets.Regs, top bool) (Method, error) {
	u.cfa, u.sig = 0, false
	elfPC := lookup - m.Bias
	var firstErr error
	if m.SFrame != nil {
		err := u.stepSFrame(m, elfPC, cur, next, top)
		if err == nil || errors.Is(err, errEnd) {
			if u.sig {
				return MethodSignal, err
			}
			return MethodSFrame, err
		}
		if !errors.Is(err, errNoRule) {
			firstErr = err
		}
	}
	if m.CFI != nil {
		err := u.stepCFI(m, elfPC, cur, next, top)
		if err == nil || errors.Is(err, errEnd) {
			return MethodCFI, err
		}
		if !errors.Is(err, errNoRule) && firstErr == nil {
			firstErr = err
		}
	}
	if u.isSigreturn(pc) {
		u.sig = true
		return MethodSignal, u.stepSignal(cur, next)
	}
	if !m.NoFP {
		if err := u.stepFP(cur, next); err == nil {
			return MethodFP, nil
		} else if !errors.Is(err, errNoRule) && firstErr == nil {
			firstErr = err
		}
	}
	if firstErr != nil {
		return MethodNone, firstErr
	}
	return MethodNone, errNoRule
}
