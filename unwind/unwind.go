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
	"slices"
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

// String returns the method's name as frames print it: "sframe", "cfi",
// "fp", "signal" or "none".
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

// String describes the reason, as "Backtrace stopped:" lines print it.
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
// address (in the module's ELF address space) and the CIE of its FDE,
// computed with the caller's scratch state ctx. ok is false when no FDE
// covers pc.
type CFI interface {
	Lookup(ctx *cfi.UnwindContext, pc uint64, row *cfi.Row) (cie *cfi.CIE, ok bool, err error)
}

// Module is a loaded ELF object with its unwind tables.
type Module struct {
	Name string // for display: the path the target recorded, or "[vdso]"
	// File is the name under which the module's symbols are looked up:
	// a path that can be opened now, or "[vdso]" for the vDSO (whose
	// image the Tracer registers with its symbolizer). Empty when unknown.
	File       string
	Start, End uint64 // runtime address range [Start, End)
	Bias       uint64 // runtime address = ELF address + Bias
	SFrame     *sframe.Section
	CFI        CFI
	// NoFP disables the frame-pointer fallback inside this module (code
	// known to be built without frame pointers).
	NoFP bool

	sfx *sfIndex // SFrame decoded by Cache.Modules, if it was
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
	// Exact says PC is the address of an instruction of the frame's
	// function: frame 0, a signal trampoline, and the frame a signal
	// interrupted. Otherwise PC is a return address, which may lie past
	// the end of the call's function: look it up at PC-1 (LookupPC).
	Exact bool
}

// LookupPC returns the address to look up the frame's function and
// unwind rules at: PC for exact frames, PC-1 for return addresses.
func (f *Frame) LookupPC() uint64 {
	if f.Exact || f.PC == 0 {
		return f.PC
	}
	return f.PC - 1
}

// Unwinder walks stacks of one address space. It caches nothing across
// calls that depends on the thread, so one Unwinder serves every thread
// of a target, but not concurrently: it keeps scratch state.
type Unwinder struct {
	arch     elf.Machine
	abi      sframe.ABI
	modules  []*Module
	info     []modInfo // per module, what the fast path needs
	noMod    modInfo   // an empty range: the fast path's "no module yet"
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
	last    int       // index of the module found last (lookup cache)
	regs    [2]targets.Regs
	// DWARF numbers of the PC, SP, FP and RA registers (RA -1: none).
	pcReg, spReg, fpReg, raReg int
	spOff                      uint64     // caller's SP - CFA: -160 on s390x
	srow                       sframe.Row // row decoded without an index
	// noFast turns the fast path off, for tests that check it gives what
	// the general path gives.
	noFast bool
	// cfictx is the scratch state of CFI lookups.
	cfictx cfi.UnwindContext
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
	u.modules = make([]*Module, 0, len(mods))
	for _, m := range mods {
		if m != nil {
			u.modules = append(u.modules, m)
		}
	}
	sort.SliceStable(u.modules, func(i, j int) bool { return u.modules[i].Start < u.modules[j].Start })
	u.info = make([]modInfo, len(u.modules))
	for i, m := range u.modules {
		var x *sfIndex
		switch {
		case m.SFrame == nil:
		case m.sfx != nil && m.sfx.sec == m.SFrame:
			x = m.sfx
		default:
			x = buildSFIndex(m.SFrame)
		}
		u.info[i] = newModInfo(m, x)
	}
	u.mem.m = mem
	u.mem.flat, _ = mem.(*FlatMemory)
	if arch == elf.EM_S390 {
		u.spOff = ^uint64(159) // -160
	}
	u.pcReg, u.spReg, u.fpReg, u.raReg = targets.PCReg(arch), targets.SPReg(arch), targets.FPReg(arch), targets.RAReg(arch)
	return u, nil
}

// Modules returns the modules, sorted by start address.
func (u *Unwinder) Modules() []*Module { return u.modules }

// Module returns the module containing the runtime address pc, or nil.
func (u *Unwinder) Module(pc uint64) *Module {
	if i := u.moduleIndex(pc); i >= 0 {
		return u.modules[i]
	}
	return nil
}

// moduleIndex returns the index of the module containing pc, or -1.
func (u *Unwinder) moduleIndex(pc uint64) int {
	mods := u.modules
	if u.last < len(mods) {
		if m := mods[u.last]; pc >= m.Start && pc < m.End {
			return u.last
		}
	}
	// The last module whose Start <= pc.
	lo, hi := 0, len(mods)
	for lo < hi {
		h := int(uint(lo+hi) >> 1)
		if mods[h].Start <= pc {
			lo = h + 1
		} else {
			hi = h
		}
	}
	if lo > 0 && pc < mods[lo-1].End {
		u.last = lo - 1
		return lo - 1
	}
	return -1
}

// get and set access register n of r, which must be below
// targets.NumRegs, without the checks of Regs.Get and Regs.Set: the hot
// path knows its register numbers are valid for the architecture.
func get(r *targets.Regs, n int) (uint64, bool) {
	if uint(n) < targets.NumRegs && r.Valid&(1<<uint(n)) != 0 {
		return r.R[n], true
	}
	return 0, false
}

func set(r *targets.Regs, n int, v uint64) {
	if uint(n) < targets.NumRegs {
		r.R[n] = v
		r.Valid |= 1 << uint(n)
	}
}

// errNoRule means a method has no rule for the PC (try the next one).
var errNoRule = errors.New("no rule")

// errEnd means the rules mark the outermost frame.
var errEnd = errors.New("outermost frame")

// Unwind appends the frames of the stack whose innermost registers are
// regs to frames and returns them, with the reason the walk stopped and,
// for StopMemory and StopNoRule, the error behind it.
func (u *Unwinder) Unwind(regs *targets.Regs, frames []Frame) ([]Frame, Stop, error) {
	limit := u.MaxDepth
	if limit <= 0 {
		limit = DefaultMaxDepth
	}
	if regs.Arch != u.arch {
		return frames, StopNoRule, fmt.Errorf("unwind: registers of %s, unwinder for %s", regs.Arch, u.arch)
	}
	// Two register sets, swapped at each step: no copies, no allocation.
	u.regs[0] = *regs
	cur, next := &u.regs[0], &u.regs[1]
	// st mirrors cur's PC, SP and FP. While frames follow rows of the
	// common shape they are all a step needs, so the fast path (fastWalk)
	// keeps only them and leaves cur stale (inRegs false) until a frame
	// needs the general machinery.
	st := walkState{top: true}
	var spOK bool
	st.pc, _ = get(cur, u.pcReg)
	st.sp, spOK = get(cur, u.spReg)
	st.fp, st.fpOK = get(cur, u.fpReg)
	inRegs := true
	for ; ; st.depth++ {
		for spOK && !u.noFast && !st.top {
			// The fast path writes frames in place: give it room, as
			// append would.
			if room := limit - st.depth; room > 0 && len(frames) == cap(frames) {
				frames = slices.Grow(frames, min(max(len(frames), 16), room))
			}
			d := st.depth
			frames = u.fastWalk(frames, &st, limit)
			if st.noProgress {
				return frames, StopNoProgress, nil
			}
			if st.depth == d {
				break
			}
			inRegs = false
			if len(frames) < cap(frames) {
				break // stopped for a reason other than a full buffer
			}
		}
		// A top frame's PC is exact: not a return address.
		pc, sp, top := st.pc, st.sp, st.top
		if pc == 0 && !top {
			return frames, StopEnd, nil
		}
		if st.depth >= limit {
			return frames, StopDepth, nil
		}
		mi := u.moduleIndex(pc)
		if mi < 0 {
			frames = append(frames, Frame{PC: pc, SP: sp, Exact: top})
			return frames, StopNoModule, nil
		}
		m := u.modules[mi]
		// Caller frames hold return addresses, which may point past the
		// end of the call's function (noreturn calls): look up PC-1.
		lookup := pc
		if !top {
			lookup--
		}
		if !inRegs {
			// Only these are known after fast steps.
			*cur = targets.Regs{Arch: u.arch}
			set(cur, u.pcReg, pc)
			set(cur, u.spReg, sp)
			if st.fpOK {
				set(cur, u.fpReg, st.fp)
			}
		}
		method, err := u.step(mi, pc, lookup, cur, next, top)
		frames = append(frames, Frame{PC: pc, SP: sp, CFA: u.cfa, Module: m, Method: method, Signal: u.sig, Exact: top || u.sig})
		if err != nil {
			switch err {
			case errEnd:
				return frames, StopEnd, nil
			case errNoRule:
				return frames, StopNoRule, nil
			}
			return frames, StopMemory, err
		}
		nsp, _ := get(next, u.spReg)
		if !u.sig && (nsp < sp || (nsp == sp && !top)) {
			return frames, StopNoProgress, nil
		}
		st.top = u.sig
		cur, next = next, cur
		st.pc, _ = get(cur, u.pcReg)
		st.sp, spOK = get(cur, u.spReg)
		st.fp, st.fpOK = get(cur, u.fpReg)
		inRegs = true
	}
}

// step computes the caller's registers into next, trying each method.
func (u *Unwinder) step(mi int, pc, lookup uint64, cur, next *targets.Regs, top bool) (Method, error) {
	u.cfa, u.sig = 0, false
	m := u.modules[mi]
	elfPC := lookup - m.Bias
	var firstErr error
	if m.SFrame != nil {
		err := u.stepSFrame(m, u.info[mi].x, elfPC, cur, next, top)
		if err == nil || err == errEnd {
			if u.sig {
				return MethodSignal, err
			}
			return MethodSFrame, err
		}
		if err != errNoRule {
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
