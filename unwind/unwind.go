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
// signal context (AMD64, AArch64, s390x), PC-mask FDEs cover PLTs, s390x
// callers' SP is CFA-160, signed AArch64 return addresses are stripped,
// the frame-pointer fallback reads AArch64 frame records (sized by the
// prologue) and the s390x back chain, and rules
// based on registers other than SP and FP are trusted only in the topmost
// frame, where those registers are still live (and a register that frame's
// epilogue has popped already, below SP, still holds its caller's value).
// Walks also end at a file's outermost code, whatever its tables say: in
// Go programs the runtime's functions where Go's own traceback stops
// (goexit, mstart, systemstack, morestack, ...; its signal handler only
// in a stack copy, the rest of the memory being unknown), and the code
// at a file's entry point that no CFI describes (ld.so's _start).
//
// An Unwinder holds the modules of one address space, and nothing else:
// every walk of that process, of any thread or sample, in parallel if need
// be, uses it. Each walk brings the registers, the memory (a live process,
// a core file, or a sample's copy of the stack: StackMemory) and a
// Context, the scratch space the walk changes, which a goroutine reuses
// from walk to walk. A Cache loads each file's tables once for every
// process; a Tracer captures every thread of a stopped target.
package unwind

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/cfi"
	"github.com/sframekit/sframekit/internal/cowseq"
	"github.com/sframekit/sframekit/internal/enumstr"
	"github.com/sframekit/sframekit/sframe"
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
	StopEnd        Stop = iota // outermost frame reached (RA undefined, PC 0, outermost code)
	StopNoModule               // the PC is in no known module
	StopNoRule                 // no SFrame, CFI or frame-pointer rule applies
	StopNoProgress             // the caller's stack pointer is not above the callee's
	StopMemory                 // the stack could not be read
	StopDepth                  // the depth limit was reached
)

// String describes the reason, as "Backtrace stopped:" lines print it.
func (s Stop) String() string {
	return enumstr.Name(stopNames[:], s, "Stop")
}

var stopNames = [...]string{
	StopEnd:        "end of stack",
	StopNoModule:   "PC in no known module",
	StopNoRule:     "no unwind rule for PC",
	StopNoProgress: "stack pointer did not move up",
	StopMemory:     "stack not readable",
	StopDepth:      "depth limit reached",
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
	// SFrameGen is set when SFrame was compiled in memory from the CFI
	// (LoadOptions.SFrameFromCFI, CompileSFrame): the file has none of
	// its own. A walk that goes through such frames and then cannot apply
	// the CFI of a frame (a register that only CFI steps recover) is
	// redone without them.
	SFrameGen *GenStats

	sfx   *sfIndex  // SFrame decoded by Cache.Modules, if it was
	outer outermost // where walks end, from Cache.Modules (outermost.go)
	// sigOuter is the part of outer on the signal stack (Go's handler and
	// its trampoline): only the walks of a stack copy end there.
	sigOuter outermost
	// sigpanic is Go's runtime.sigpanic, which a fault's handler makes
	// the goroutine call: its caller's PC is the faulting instruction's.
	sigpanic outermost
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

// Unwinder walks the stacks of one address space: it holds the modules
// mapped there, and nothing of a thread or a moment, so that one Unwinder
// serves every thread and every sample of a process. What a walk changes
// lives in a Context, and each walk takes the registers, the memory and
// the frame buffer it uses (see Unwind).
//
// Every method is safe for concurrent use: walks may run in parallel, each
// with its own Context, while AddModule and RemoveModule change the
// modules (a walk uses the modules as they were when it started).
// MaxDepth and PACMask are read by every walk: set them before the
// Unwinder is shared, and do not change them while walks run.
type Unwinder struct {
	cfg config
	// MaxDepth bounds walks (DefaultMaxDepth when 0).
	MaxDepth int
	// PACMask keeps the address bits of signed AArch64 return addresses
	// (default: the low 48 bits, Linux user space).
	PACMask uint64

	mu   sync.Mutex                // serializes AddModule and RemoveModule
	mods atomic.Pointer[moduleSet] // nil: none
}

// config is what a walk needs of its Unwinder, copied into the Context
// when the walk starts.
type config struct {
	arch arch.Arch
	be   bool // s390x: words are big-endian
	// DWARF numbers of the PC, SP, FP and RA registers (RA noReg: none).
	pcReg, spReg, fpReg, raReg arch.Reg
	spOff                      uint64 // caller's SP - CFA: -160 on s390x
	pacMask                    uint64 // Unwinder.PACMask
}

// moduleSet is an Unwinder's modules, sorted by start address, as what
// the fast path needs of each (modInfo.m is the module). It never changes
// once published: AddModule and RemoveModule publish a new one, which
// shares all but a few KiB of the old one's memory (cowseq), so that
// walks read it without locks, a module is added or removed in
// O(64 + √(n/64)) rather than with a copy of all n, and Clone shares
// them.
type moduleSet = cowseq.Seq[*modInfo]

// DefaultMaxDepth bounds walks when MaxDepth is 0.
const DefaultMaxDepth = 1024

// New makes an unwinder for a (arch.AMD64, arch.ARM64 or arch.S390X)
// over mods, which need not be sorted (nil entries are left
// out). Modules made by Cache.Modules carry their decoded SFrame; the
// SFrame of others is decoded here, for this Unwinder.
func New(a arch.Arch, mods []*Module) (*Unwinder, error) {
	u := &Unwinder{PACMask: 1<<48 - 1}
	u.cfg.arch = a
	switch a {
	case arch.AMD64, arch.ARM64:
	case arch.S390X:
		u.cfg.be = true
	default:
		return nil, fmt.Errorf("unsupported architecture %s", a)
	}
	u.cfg.spOff = uint64(a.SPOffset())
	u.cfg.pcReg, u.cfg.spReg, u.cfg.fpReg, u.cfg.raReg = a.PC(), a.SP(), a.FP(), noReg
	if a.HasLinkReg() {
		u.cfg.raReg = a.RA()
	}
	var sorted []*Module
	for _, m := range mods {
		if m != nil {
			sorted = append(sorted, m)
		}
	}
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Start < sorted[j].Start })
	keys := make([]uint64, len(sorted))
	info := make([]*modInfo, len(sorted))
	for i, m := range sorted {
		keys[i], info[i] = m.Start, newModInfo(m, a, sfIndexOf(m))
	}
	u.mods.Store(u.mods.Load().Replace(1, 0, nil, keys, info))
	return u, nil
}

// Clone returns an Unwinder with u's modules and settings, in O(1): the
// two share the modules until one of them changes them (a forked
// process's, until it maps or unmaps something).
func (u *Unwinder) Clone() *Unwinder {
	c := &Unwinder{cfg: u.cfg, MaxDepth: u.MaxDepth, PACMask: u.PACMask}
	c.mods.Store(u.mods.Load())
	return c
}

// sfIndexOf returns the decoded SFrame of m: the one Cache.Modules gave
// it, or a new one (nil if m has no SFrame or it does not decode).
func sfIndexOf(m *Module) *sfIndex {
	switch {
	case m.SFrame == nil:
		return nil
	case m.sfx != nil && m.sfx.sec == m.SFrame:
		return m.sfx
	}
	return buildSFIndex(m.SFrame, slowRanges(m.outer, m.sigpanic))
}

// AddModule adds m, a module newly mapped (from a process's mmap, say).
// It does not remove the modules m overlaps (call RemoveModule for those
// it replaces): a lookup finds, of the modules containing an address, the
// one starting last, and of those starting at the same address the one
// added last. m must not change once added. Walks already running do not
// see m.
func (u *Unwinder) AddModule(m *Module) {
	if m == nil {
		return
	}
	in := newModInfo(m, u.cfg.arch, sfIndexOf(m)) // outside the lock: it may decode
	u.mu.Lock()
	defer u.mu.Unlock()
	u.mods.Store(u.mods.Load().Replace(1, 0, nil, []uint64{m.Start}, []*modInfo{in}))
}

// RemoveModule removes m (the same pointer that New or AddModule was
// given) and reports whether it was there. Walks already running still
// use it; frames keep pointing to it.
func (u *Unwinder) RemoveModule(m *Module) bool {
	if m == nil {
		return false
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	old := u.mods.Load()
	found := false
	ms := old.Replace(m.Start, m.Start, func(in **modInfo) bool {
		if !found && (*in).m == m {
			found = true
			return false
		}
		return true
	}, nil, nil)
	if found {
		u.mods.Store(ms)
	}
	return found
}

// findModule returns what the fast path needs of the module of s
// containing pc, or nil: the module starting last at or before pc
// (of those starting at the same address, the one added last).
func findModule(s *moduleSet, pc uint64) *modInfo {
	if in := s.Floor(pc); in != nil && pc-(*in).lo < (*in).size {
		return *in
	}
	return nil
}

// moduleInfo returns what the fast path needs of the module containing
// pc, or nil, trying first the module found last.
func (w *Context) moduleInfo(pc uint64) *modInfo {
	if in := w.last; in != nil && pc-in.lo < in.size {
		return in
	}
	in := findModule(w.mods, pc)
	if in != nil {
		w.last = in
	}
	return in
}

// Context is what a walk changes: the register sets of the frames it is
// between, the rules it decodes, the module it found last. Give each
// goroutine its own and reuse it for its walks, of any Unwinder: a walk
// then allocates nothing. The zero Context is ready to use. A Context
// keeps references to the memory and modules of its last walk until the
// next one.
type Context struct {
	// Set when a walk starts.
	config
	mods *moduleSet
	mem  wordReader
	// Results of the last step.
	cfa uint64 // CFA of the last step
	sig bool   // the last step went through a signal frame
	// whole is set when the walk's memory is not a stack copy
	// (StackMemory): the stacks a signal handler's frame leads to can be
	// read, and Module.sigOuter does not end the walk.
	whole bool
	// Scratch kept across walks.
	last *modInfo // the module found last, in mods (lookup cache)
	regs [2]arch.Regs
	srow sframe.Row // row decoded without an index
	cfi  cfiScratch
	code [9]byte // instruction bytes read to recognize sigreturn
	// noFast turns the fast path off, for tests that check it gives what
	// the general path gives.
	noFast bool
	// SFrame compiled from CFI (Module.SFrameGen): noGen leaves it out
	// (the walk is redone so when gen says it may differ from the CFI's),
	// usedGen says a step of this walk used it, gen that the walk must
	// be redone without it (see Unwind).
	noGen, usedGen, gen bool
	// cfiRules caches the CFI rows applied to return addresses, in the
	// fast path's form (see cfiRules).
	cfiRules cfiRules
}

// cfiScratch is what a CFI step writes: cfi's lookup context, the row
// looked up and the expression evaluator's initial stack.
type cfiScratch struct {
	found   bool // the last lookup found the row
	ctx     cfi.UnwindContext
	row     cfi.Row
	raCol   arch.Reg  // the row's return-address column (its CIE's)
	initial [1]uint64 // the CFA, pushed for register expressions
}

// get and set access register n of r without the checks of Regs.Get
// and Regs.Set: the hot path knows its register numbers are valid for
// the architecture. Numbers from arch.NumRegs on (noReg) are none.
func get(r *arch.Regs, n arch.Reg) (uint64, bool) {
	if n < arch.NumRegs && r.Valid&(1<<n) != 0 {
		return r.R[n], true
	}
	return 0, false
}

func set(r *arch.Regs, n arch.Reg, v uint64) {
	if n < arch.NumRegs {
		r.R[n] = v
		r.Valid |= 1 << n
	}
}

// noReg is no register: get finds nothing there and set ignores it.
const noReg = ^arch.Reg(0)

// FDEFinder is a CFI that finds the FDE covering an ELF address
// (CFITable; a caching CFI passes it on), for the walk's test of a
// return address that no call wrote (plantedReturn).
type FDEFinder interface {
	FindFDE(pc uint64) (*cfi.Table, cfi.FDE, error)
}

// plantedReturn reports whether the return address pc (an ELF address)
// is the first byte of a function that c describes while the byte
// before it lies in none: a call leaves its return address inside the
// caller, so this one was written by code that starts a stack, as
// glibc's makecontext writes __start_context's address at the top of a
// coroutine's stack. The frame there is the stack's outermost, and a
// walk that has no rule for it ends (StopEnd), as at a thread's first
// function, not for want of a rule.
func plantedReturn(c CFI, pc uint64) bool {
	f, ok := c.(FDEFinder)
	if !ok || pc == 0 {
		return false
	}
	if _, fde, err := f.FindFDE(pc); err != nil || fde.PCBegin != pc {
		return false
	}
	_, _, err := f.FindFDE(pc - 1)
	return errors.Is(err, cfi.ErrNoFDE)
}

// errNoRule means a method has no rule for the PC (try the next one).
var errNoRule = errors.New("no rule")

// errEnd means the rules mark the outermost frame.
var errEnd = errors.New("outermost frame")

// Unwind appends the frames of the stack whose innermost registers are
// regs to frames and returns them, with the reason the walk stopped and,
// for StopMemory and StopNoRule, the error behind it. It reads the stack
// (and, to recognize signal trampolines, code) through mem, and keeps
// what it changes in ctx: nil makes it use a new Context, which costs an
// allocation. regs is not modified.
func (u *Unwinder) Unwind(ctx *Context, regs *arch.Regs, mem arch.Memory, frames []Frame) ([]Frame, Stop, error) {
	if ctx == nil {
		ctx = new(Context)
	}
	limit := u.MaxDepth
	if limit <= 0 {
		limit = DefaultMaxDepth
	}
	ctx.begin(u, mem)
	n0 := len(frames)
	frames, stop, err := ctx.walk(regs, frames, limit)
	if ctx.gen {
		// SFrame compiled from CFI keeps only the CFA, RA and FP, where
		// CFI steps also recover the other registers it saves: a CFI
		// rule further up that needs one (a CFA based on rbx, as in
		// ld.so's _dl_runtime_resolve) failed for lack of it. Walk again
		// without the compiled SFrame, which gives the CFI's frames.
		ctx.noGen, ctx.gen = true, false
		frames, stop, err = ctx.walk(regs, frames[:n0], limit)
		ctx.noGen = false
	}
	return frames, stop, err
}

// begin prepares w for a walk of u's modules over mem.
func (w *Context) begin(u *Unwinder, mem arch.Memory) {
	w.config = u.cfg
	w.pacMask = u.PACMask
	if ms := u.mods.Load(); ms != w.mods {
		w.mods, w.last = ms, nil
	}
	w.mem.reset(mem, w.be)
	_, copied := mem.(*StackMemory)
	w.whole = !copied
	w.usedGen, w.gen = false, false
}

// walk is Unwind, once begin has set w up.
func (w *Context) walk(regs *arch.Regs, frames []Frame, limit int) ([]Frame, Stop, error) {
	if regs.Arch != w.arch {
		return frames, StopNoRule, fmt.Errorf("registers of %s, unwinder for %s", regs.Arch, w.arch)
	}
	// Two register sets, swapped at each step: no copies, no allocation.
	w.regs[0] = *regs
	cur, next := &w.regs[0], &w.regs[1]
	// st mirrors cur's PC, SP and FP. While frames follow rows of the
	// common shape they are all a step needs, so the fast path (fastWalk)
	// keeps only them and leaves cur stale (inRegs false) until a frame
	// needs the general machinery.
	st := walkState{top: true}
	var spOK bool
	st.pc, _ = get(cur, w.pcReg)
	st.sp, spOK = get(cur, w.spReg)
	st.fp, st.fpOK = get(cur, w.fpReg)
	inRegs := true
	for ; ; st.depth++ {
		for spOK && !w.noFast && !st.top && !afterSigpanic(frames) {
			// The fast path writes frames in place: give it room, as
			// append would.
			if room := limit - st.depth; room > 0 && len(frames) == cap(frames) {
				frames = slices.Grow(frames, min(max(len(frames), 16), room))
			}
			d := st.depth
			frames = w.fastWalk(frames, &st, limit)
			if st.noProgress {
				return frames, StopNoProgress, nil
			}
			if st.end {
				return frames, StopEnd, nil
			}
			if st.depth == d {
				break
			}
			inRegs = false
			if len(frames) < cap(frames) {
				break // stopped for a reason other than a full buffer
			}
		}
		// A top frame's PC is exact: not a return address; so is the
		// PC of the frame that Go's sigpanic was made to return to.
		pc, sp, top := st.pc, st.sp, st.top
		exact := top || afterSigpanic(frames)
		if pc == 0 && !top {
			return frames, StopEnd, nil
		}
		if st.depth >= limit {
			return frames, StopDepth, nil
		}
		in := w.moduleInfo(pc)
		// A signal trampoline may lie outside every module (qemu-user's
		// page of them): step() recognizes it by its code.
		if in == nil && !w.inSigreturn(pc, top) {
			frames = append(frames, Frame{PC: pc, SP: sp, Exact: exact})
			return frames, StopNoModule, nil
		}
		var m *Module
		if in != nil {
			m = in.m
		}
		// Caller frames hold return addresses, which may point past the
		// end of the call's function (noreturn calls): look up PC-1.
		lookup := pc
		if !exact {
			lookup--
		}
		if m != nil && len(m.outer) > 0 && m.outer.has(lookup-m.Bias) && !(w.whole && m.sigOuter.has(lookup-m.Bias)) {
			// The first function of a thread or goroutine, or one
			// past which the stack is another's: the end, whatever
			// the tables say (their rows are not fast: fastWalk
			// stops here).
			frames = append(frames, Frame{PC: pc, SP: sp, Module: m, Exact: exact})
			return frames, StopEnd, nil
		}
		if !inRegs {
			// Only these are known after fast steps.
			*cur = arch.Regs{Arch: w.arch}
			set(cur, w.pcReg, pc)
			set(cur, w.spReg, sp)
			if st.fpOK {
				set(cur, w.fpReg, st.fp)
			}
		}
		if top && !w.noFast && in != nil {
			// The top frame at an address whose row the CFI gave
			// before, in the fast path's form (cfiRules): its step
			// needs only PC, SP and FP, as a caller's does.
			if r, ok := w.cachedRule(in, lookup-m.Bias); ok {
				if f, ok := w.topStep(in, &r, &st); ok {
					frames = append(frames, f)
					inRegs = false
					continue
				}
			}
		}
		method, err := w.step(in, pc, lookup, cur, next, top)
		if w.gen {
			return frames, StopNoRule, nil // Unwind walks again
		}
		if method == MethodCFI && (err == nil || err == errEnd) && !w.sig && !m.sigOuter.has(lookup-m.Bias) && !m.sigpanic.has(lookup-m.Bias) {
			// (Not a signal handler's row, which the fast path would
			// take in a stack copy's walk too, where it must end, nor
			// sigpanic's, after which the fast path's lookup of PC-1
			// would be wrong.)
			w.keepCFIRule(in, lookup-m.Bias)
		}
		frames = append(frames, Frame{PC: pc, SP: sp, CFA: w.cfa, Module: m, Method: method, Signal: w.sig, Exact: exact || w.sig})
		if err != nil {
			switch err {
			case errEnd:
				return frames, StopEnd, nil
			case errNoRule:
				if !top && m != nil && plantedReturn(m.CFI, pc-m.Bias) {
					return frames, StopEnd, nil
				}
				return frames, StopNoRule, nil
			}
			return frames, StopMemory, err
		}
		nsp, nspOK := get(next, w.spReg)
		if !w.sig && nspOK && (nsp < sp || (nsp == sp && !top)) {
			return frames, StopNoProgress, nil
		}
		st.top = w.sig
		cur, next = next, cur
		st.pc, _ = get(cur, w.pcReg)
		st.sp, spOK = get(cur, w.spReg)
		st.fp, st.fpOK = get(cur, w.fpReg)
		inRegs = true
	}
}

// afterSigpanic reports whether the last of frames is in Go's sigpanic:
// the next frame's PC is the faulting instruction's, exact.
func afterSigpanic(frames []Frame) bool {
	if len(frames) == 0 {
		return false
	}
	f := &frames[len(frames)-1]
	if f.Module == nil || len(f.Module.sigpanic) == 0 {
		return false
	}
	pc := f.PC - f.Module.Bias
	if !f.Exact {
		pc--
	}
	return f.Module.sigpanic.has(pc)
}

// step computes the caller's registers into next, trying each method.
func (w *Context) step(in *modInfo, pc, lookup uint64, cur, next *arch.Regs, top bool) (Method, error) {
	w.cfa, w.sig = 0, false
	if in == nil {
		// walk checked: a sigreturn trampoline in no module.
		tramp, _ := w.sigreturnAt(pc, top)
		w.sig = true
		return MethodSignal, w.stepSignal(cur, next, tramp)
	}
	m := in.m
	elfPC := lookup - m.Bias
	if w.whole && m.sigOuter.has(pc-m.Bias) {
		// Go's signal trampoline, returned into at its first
		// instruction (pc-1 is another function's) or in rt_sigreturn:
		// its CFI (CFA = SP + 8) does not describe the signal frame.
		if tramp, ok := w.sigreturnAt(pc, top); ok {
			w.sig = true
			return MethodSignal, w.stepSignal(cur, next, tramp)
		}
	}
	var firstErr error
	if m.SFrame != nil && (m.SFrameGen == nil || !w.noGen) {
		err := w.stepSFrame(m, in.x, elfPC, cur, next, top)
		if err == nil || err == errEnd {
			w.usedGen = w.usedGen || m.SFrameGen != nil
			if w.sig {
				return MethodSignal, err
			}
			return MethodSFrame, err
		}
		if err != errNoRule {
			if outsideCopy(err) {
				return MethodNone, err
			}
			firstErr = err
		}
	}
	if m.CFI != nil {
		w.cfi.found = false
		err := w.stepCFI(m, elfPC, cur, next, top)
		if err == nil || errors.Is(err, errEnd) {
			return MethodCFI, err
		}
		if outsideCopy(err) {
			return MethodNone, err
		}
		if w.cfi.found && w.usedGen && !w.noGen {
			// The CFI covers pc but could not be applied: perhaps for
			// a register that compiled SFrame steps did not recover.
			w.gen = true
			return MethodNone, errNoRule
		}
		if !errors.Is(err, errNoRule) && firstErr == nil {
			firstErr = err
		}
	}
	if tramp, ok := w.sigreturnAt(pc, top); ok {
		w.sig = true
		return MethodSignal, w.stepSignal(cur, next, tramp)
	}
	if !m.NoFP {
		if err := w.stepFP(cur, next); err == nil {
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

// outsideCopy reports whether err is a read past a StackMemory's copy.
// The rules of the frame apply but need what the copy does not hold: the
// walk ends there rather than guess with the next method, whose reads
// (the frame-pointer chain) may land inside the copy and make up frames.
func outsideCopy(err error) bool { return errors.Is(err, ErrOutsideStackCopy) }
