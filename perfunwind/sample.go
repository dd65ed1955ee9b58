package perfunwind

import (
	"errors"
	"math/bits"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/perfdata"
	"github.com/sframekit/sframekit/unwind"
)

// Sample is what unwinding a sample needs: whose it is, the kernel's
// callchain, and the user registers with the copy of the user stack from
// the stack pointer up (perf record --call-graph dwarf, or
// perf_event_open's PERF_SAMPLE_REGS_USER and PERF_SAMPLE_STACK_USER).
type Sample struct {
	Pid, Tid uint32
	Time     uint64
	Period   uint64
	IP       uint64
	// NoCallGraph says the sample's event records no call graph (no
	// callchain, user registers or stack: perf record without -g), and
	// IPKernel that the IP was sampled in kernel mode (the record's
	// cpumode): Unwind then gives the IP's frame alone.
	NoCallGraph, IPKernel bool
	// NoTime says the sample's event records no time (no
	// PERF_SAMPLE_TIME: perf record --per-thread): Time is zero.
	NoTime bool
	// ABI32 says the user registers are a 32-bit process's
	// (PERF_SAMPLE_REGS_ABI_32: an i386 program on x86-64), whose stack
	// no unwinder here reads (4-byte slots, another ABI): Unwind then
	// gives the interrupted PC's frame alone, where a 64-bit walk would
	// read garbage.
	ABI32 bool
	// Event is the index of the sample's event among the recording's
	// (perfdata.Attr.Index).
	Event int
	// Callchain is the sample's callchain, with perf's context markers
	// (perfdata.ContextKernel, ContextUser) before each part; the user
	// part is used only when there are no registers and stack to unwind.
	Callchain []uint64
	// SigFrame is, for a callchain that a walker outside the session
	// took, the index among its user frames of the one a signal
	// interrupted (0: none): that frame's PC is exact and the one before
	// it is the signal trampoline, as an unwound stack marks them, so
	// that both are named at their PC, not inside a call before it.
	SigFrame int
	// Regs are the user registers, DWARF-numbered; Regs.Arch is zero when
	// the sample has none (a kernel thread).
	Regs arch.Regs
	// Stack is the copy of the user stack from the stack pointer up.
	Stack []byte
	// StackSize is the number of bytes the kernel was asked to copy
	// (perfdata.Sample.StackUserSize), 0 when not known. A copy that
	// fills it was cut short: the stack goes on above it. A shorter one
	// ends where the stack's memory does.
	StackSize uint64

	regs regMap // FromPerf's, for the last register mask
	// walked says the callchain's user frames were unwound by a walker
	// outside the session (FromCallchain): callers are return addresses
	// named inside their call, as unwound frames are, where perf's own
	// callchains show them as they are.
	walked bool
}

// regMap gives the DWARF number of each register of a dump of mask on
// arch, by its place in the dump (-1: none), computed once per mask.
type regMap struct {
	arch  arch.Arch
	mask  uint64
	dwarf [64]int8
}

// set makes m the map of mask on a.
func (m *regMap) set(a arch.Arch, mask uint64) {
	m.arch, m.mask = a, mask
	n, lim := 0, arch.NumDWARFRegs(a)
	for b := mask; b != 0; b &= b - 1 {
		i := int8(-1)
		if d, ok := perfdata.DWARFRegister(a, bits.TrailingZeros64(b)); ok && int64(d) < int64(lim) {
			i = int8(d)
		}
		m.dwarf[n] = i
		n++
	}
}

// FromPerf fills s from a decoded perf.data sample of a recording of
// architecture a, reusing s's Callchain. s keeps a reference to ps's stack bytes,
// valid until the reader's next record.
func (s *Sample) FromPerf(ps *perfdata.Sample, a arch.Arch) {
	s.Pid, s.Tid, s.Time, s.Period, s.IP = ps.Pid, ps.Tid, ps.Time, ps.Period, ps.IP
	s.NoTime = ps.Type&perfdata.SampleTime == 0
	s.Callchain = s.Callchain[:0]
	for i, n := 0, ps.Callchain.Len(); i < n; i++ {
		s.Callchain = append(s.Callchain, ps.Callchain.At(i))
	}
	s.Regs = arch.Regs{}
	s.Stack, s.StackSize = nil, 0
	s.walked, s.SigFrame = false, 0
	s.ABI32 = ps.RegsUser.ABI == perfdata.RegsABI32
	if r := &ps.RegsUser; r.ABI != perfdata.RegsABINone && r.Mask != 0 {
		// As r.DWARFRegs(a, s.Regs.Set), without a call per register.
		s.Regs.Arch = a
		if s.regs.arch != a || s.regs.mask != r.Mask {
			s.regs.set(a, r.Mask)
		}
		for i, n := 0, min(r.Len(), bits.OnesCount64(r.Mask)); i < n; i++ {
			if d := s.regs.dwarf[i]; d >= 0 {
				s.Regs.R[d] = r.At(i)
				s.Regs.Valid |= 1 << uint(d)
			}
		}
		s.Stack, s.StackSize = ps.StackUser, ps.StackUserSize
	}
}

// FromCallchain makes s the sample of a stack a walker outside the
// session took (sframe record --bpf's, in the kernel): its callchain
// chain (with perf's context markers), which s keeps, no registers and
// no stack copy, and as IP the first user frame's address. SigFrame is
// 0: the walker sets it where it knows of a signal frame.
func (s *Sample) FromCallchain(pid, tid uint32, time, period uint64, event int, chain []uint64) {
	s.Pid, s.Tid, s.Time, s.Period, s.Event = pid, tid, time, period, event
	s.Callchain = chain
	s.Regs, s.Stack, s.StackSize = arch.Regs{}, nil, 0
	s.NoCallGraph, s.IPKernel, s.NoTime, s.ABI32, s.IP, s.SigFrame = false, false, false, false, 0, 0
	s.walked = true
	for i, pc := range chain {
		if pc == perfdata.ContextUser && i+1 < len(chain) {
			s.IP = chain[i+1]
			break
		}
	}
}

// Frame is one frame of a sample's stack.
type Frame struct {
	// PC is the current PC of the innermost frame (of the kernel's part
	// or the user part) and of signal frames, the return address of the
	// others.
	PC uint64
	// CFA is, for unwound user frames, the canonical frame address the
	// frame's rules gave (0 when not computed): on x86-64 its caller's
	// return address was read at CFA-8.
	CFA uint64
	// Map is the mapping holding PC, nil when none does.
	Map *Mapping
	// Method is, for user frames, what found the frame's caller (see
	// unwind.Frame); MethodNone for kernel frames and for user frames
	// from the kernel's callchain.
	Method unwind.Method
	// Kernel marks kernel frames.
	Kernel bool
	// First marks the innermost frame of the kernel's part and of the
	// user part: its PC is the interrupted instruction.
	First bool
	// Exact says PC is an instruction of the frame's function (First,
	// signal frames and the frames they interrupted), not a return
	// address.
	Exact bool
	// Signal marks a signal trampoline.
	Signal bool

	unwound bool // found by unwinding, not from the callchain
}

// Flags returns the frame's flags (Kernel, First, Exact, Signal, and
// whether it was found by unwinding) in a byte, which SetFlags restores:
// for a profiler that keeps many frames as plain bytes, without the
// pointers a garbage collector scans. Method and CFA are not in it.
func (f *Frame) Flags() uint8 {
	var b uint8
	for i, v := range [...]bool{f.Kernel, f.First, f.Exact, f.Signal, f.unwound} {
		if v {
			b |= 1 << i
		}
	}
	return b
}

// SetFlags sets the flags that Flags returned.
func (f *Frame) SetFlags(b uint8) {
	f.Kernel, f.First, f.Exact, f.Signal, f.unwound = b&1 != 0, b&2 != 0, b&4 != 0, b&8 != 0, b&16 != 0
}

// LookupPC returns the address at which the frame's function and line
// are looked up: PC for exact frames, else PC-1, inside the call.
func (f *Frame) LookupPC() uint64 {
	if f.Exact || f.PC == 0 {
		return f.PC
	}
	return f.PC - 1
}

// PerfPC returns the address perf script shows for the frame, a runtime
// address: for callers found by unwinding, the return address minus one,
// which perf (with libunwind or libdw) also gives the signal trampoline,
// not the frame the signal interrupted; PC for the others.
func (f *Frame) PerfPC() uint64 {
	if f.unwound && !f.First && (f.Signal || !f.Exact) && f.PC != 0 {
		return f.PC - 1
	}
	return f.PC
}

// Stack is the unwound stack of one sample.
type Stack struct {
	Pid, Tid uint32
	Time     uint64
	Period   uint64
	Event    int // the sample's event (Sample.Event)
	// Comm is the thread's name when the sample was taken.
	Comm string
	// Exec is the program the process ran when the sample was taken, as
	// the recording last named it at an exec (its COMM record with the
	// exec flag; a forked process's, its parent's): every thread of a
	// process has it, whatever their names; "" when the recording saw
	// no exec of the process (it ran what it ran when the recording
	// began).
	Exec string
	// Frames are innermost first: the kernel's, then the user frames.
	Frames []Frame
	// Kernel is the number of kernel frames at the front of Frames.
	Kernel int
	// Unwound says the user frames come from unwinding the sample's
	// registers and stack copy; Stop and Err say why that walk ended.
	Unwound bool
	Stop    unwind.Stop
	Err     error
	// IPOnly says the sample had no call graph (recorded without -g):
	// Frames is the sampled address's frame alone.
	IPOnly bool
	// NoTime says the sample had no time (Sample.NoTime): perf script
	// shows none.
	NoTime bool
	// SP and StackEnd bound the stack copy the walk read: [SP, StackEnd).
	SP, StackEnd uint64
}

// User returns the user frames.
func (st *Stack) User() []Frame { return st.Frames[st.Kernel:] }

// CopyEnd reports whether the walk ended where the stack copy does.
func (st *Stack) CopyEnd() bool {
	return st.Stop == unwind.StopMemory && errors.Is(st.Err, unwind.ErrOutsideStackCopy)
}

// Unwind fills st with the stack of smp: the kernel frames from its
// callchain, then the user frames, unwound from its registers and stack
// copy (SFrame, CFI or frame pointers, per frame) over the mappings its
// process has at this point of the recording, or else taken from the
// callchain's user part. It counts the outcome in s.Stats. st's frames
// are reused; smp is not kept.
func (s *Session) Unwind(smp *Sample, st *Stack) {
	st.Pid, st.Tid, st.Time, st.Period, st.Event, st.NoTime = smp.Pid, smp.Tid, smp.Time, smp.Period, smp.Event, smp.NoTime
	st.Comm, st.Exec = s.ThreadName(smp.Tid), ""
	if p := s.procs[smp.Pid]; p != nil {
		st.Exec = p.exec
	}
	st.Frames = st.Frames[:0]
	st.Kernel, st.Unwound, st.Stop, st.Err, st.SP, st.StackEnd, st.IPOnly = 0, false, unwind.StopEnd, nil, 0, 0, false
	s.Stats.Samples++
	maxDepth := s.opts.MaxDepth
	if maxDepth <= 0 {
		maxDepth = unwind.DefaultMaxDepth
	}

	// The callchain: kernel part, then (without registers) the user part.
	var userChain []uint64
	ctx := uint64(0)
	for i, pc := range smp.Callchain {
		if pc >= perfdata.ContextMax {
			ctx = pc
			if ctx == perfdata.ContextUser {
				userChain = smp.Callchain[i+1:]
				break
			}
			continue
		}
		if ctx != perfdata.ContextKernel || st.Kernel >= maxDepth {
			continue
		}
		f := Frame{PC: pc, Kernel: true, First: st.Kernel == 0, Exact: st.Kernel == 0}
		f.Map = s.kernelFrameMap(pc)
		st.Frames = append(st.Frames, f)
		st.Kernel++
	}
	if userChain != nil {
		if i := indexContext(userChain); i >= 0 {
			userChain = userChain[:i]
		}
	}
	s.Stats.KernelFrames += uint64(st.Kernel)

	if s.genDue {
		s.compileDue()
	}
	p := s.procs[smp.Pid]
	switch {
	case smp.ABI32 && smp.Regs.Arch != arch.Unknown:
		// perf script shows no user frames (libdw: "target platform=x86
		// is not supported"); the interrupted PC is still known.
		s.Stats.ABI32++
		if pc := smp.Regs.PC(); pc != 0 {
			f := Frame{PC: pc, First: true, Exact: true}
			if p != nil {
				f.Map = p.find(pc)
			}
			st.Frames = append(st.Frames, f)
		}
	case smp.Regs.Arch != arch.Unknown && len(smp.Stack) > 0 && p != nil && p.sp.maps.Len() > 0:
		s.unwindUser(p, smp, st)
	case smp.Regs.Arch != arch.Unknown && len(smp.Stack) > 0:
		// perf shows no user frames for a process it knows no mapping of.
		s.Stats.NoMappings++
	case smp.NoCallGraph && smp.IP != 0:
		// No call graph was recorded: the sampled address's frame, as
		// perf script shows it.
		s.Stats.IPOnly++
		s.Stats.IPOnlyEvents[smp.Event]++
		st.IPOnly = true
		f := Frame{PC: smp.IP, First: true, Exact: true}
		if smp.IPKernel {
			f.Kernel, f.Map = true, s.kernelFrameMap(smp.IP)
			st.Kernel = 1
			s.Stats.KernelFrames++
		} else if p != nil {
			f.Map = p.find(smp.IP)
		}
		st.Frames = append(st.Frames, f)
	case len(userChain) > 0:
		s.Stats.Callchain++
		for i, pc := range userChain {
			if i >= maxDepth {
				break
			}
			f := Frame{PC: pc, First: i == 0, Exact: i == 0, unwound: smp.walked}
			if sf := smp.SigFrame; sf > 0 && (i == sf || i == sf-1) {
				f.Exact, f.Signal = true, i == sf-1
			}
			if p != nil {
				f.Map = p.find(pc)
			}
			st.Frames = append(st.Frames, f)
		}
	default:
		s.Stats.NoUser++
	}
}

// CountReused counts in s.Stats a sample whose stack the caller did not
// have Unwind make again, because it had kept the one Unwind made of an
// equal callchain (with kernel kernel frames) while nothing the session
// knows changed: the counts Unwind would have added.
func (s *Session) CountReused(kernel int) {
	s.Stats.Samples++
	s.Stats.Callchain++
	s.Stats.KernelFrames += uint64(kernel)
}

// indexContext returns the index of the first context marker in c, or -1.
func indexContext(c []uint64) int {
	for i, pc := range c {
		if pc >= perfdata.ContextMax {
			return i
		}
	}
	return -1
}

// unwindUser unwinds the user part of smp in process p.
func (s *Session) unwindUser(p *process, smp *Sample, st *Stack) {
	sp := smp.Regs.SP()
	s.touched += prefetch(smp.Stack)
	end := p.stackEnd(sp, smp)
	s.mem = unwind.StackMemory{SP: sp, Stack: smp.Stack, End: end, Fallback: &p.mem}
	frames, stop, err := p.sp.u.Unwind(&s.ctx, &smp.Regs, &s.mem, s.frames[:0])
	s.frames = frames
	s.mem = unwind.StackMemory{} // keep no reference to the record
	st.Unwound, st.Stop, st.Err = true, stop, err
	st.SP, st.StackEnd = sp, sp+uint64(len(smp.Stack))
	s.Stats.Unwound++
	var used uint8
	var top uint64 // the highest CFA: the walk read the stack up to it
	for i := range frames {
		uf := &frames[i]
		top = max(top, uf.CFA)
		f := Frame{PC: uf.PC, CFA: uf.CFA, Method: uf.Method, Signal: uf.Signal, Exact: uf.Exact, First: i == 0, unwound: true}
		f.Map = p.find(uf.PC)
		st.Frames = append(st.Frames, f)
		if uf.Method < unwind.Method(len(s.Stats.Frames)) {
			s.Stats.Frames[uf.Method]++
		}
		if uf.Method == unwind.MethodSFrame && uf.Module != nil && uf.Module.SFrameGen != nil {
			s.Stats.GenFrames++
		}
		used |= 1 << uf.Method
	}
	if n := len(st.Frames); stop == unwind.StopNoModule && n > 1 && st.Frames[n-1].unwound && !st.Frames[n-1].First {
		// A caller's address in no executable mapping is no return
		// address (a frame-pointer step through code without rows,
		// or a file not found, read garbage): code is mapped, so the
		// walk ends at the frame before, as perf's does.
		if m := st.Frames[n-1].Map; m == nil || !m.Exec {
			st.Frames = st.Frames[:n-1]
		}
	}
	switch {
	case used&(1<<unwind.MethodFP) != 0:
		s.Stats.WithFP++
	case used&(1<<unwind.MethodCFI) != 0:
		s.Stats.WithCFI++
	case used&(1<<unwind.MethodSFrame) != 0:
		s.Stats.OnlySFrame++
	default:
		s.Stats.FirstOnly++
	}
	if int(stop) < len(s.Stats.Stops) {
		s.Stats.Stops[stop]++
	}
	switch {
	case stop == unwind.StopEnd && top > sp:
		s.depth.complete(smp.Tid, top)
	case st.CopyEnd():
		s.depth.cut(smp.Tid, sp, end, uint64(len(smp.Stack)))
	}
	if st.CopyEnd() {
		s.Stats.CopyEnd++
	} else if stop != unwind.StopEnd && len(frames) > 0 {
		s.Stats.StopWhere[stopPlace(stop, st.Frames[len(st.Frames)-1].Map)]++
	}
}

// prefetchBytes is how much of a stack copy prefetch loads: the median
// walk of a C program's samples reads 1.1 KB of its 8 KiB copy.
const prefetchBytes = 2 << 10

// prefetch loads the first prefetchBytes of a stack copy, a byte of each
// cache line, and returns their sum (kept by the caller, so that the
// loads stay). The walk's loads of return addresses each depend on the
// one before, so each waits for memory in turn, and the copy is rarely
// in the cache: perfdata read it ahead, on another processor. These
// loads are independent, and the processor overlaps them. With them,
// sframe report's unwinding took 15-20% fewer processor samples (2 KiB;
// 1 KiB gained less).
func prefetch(stack []byte) byte {
	var t byte
	for o := 0; o < min(len(stack), prefetchBytes); o += 64 {
		t += stack[o]
	}
	return t
}

// kernelFrameMap returns the mapping of a kernel address: the kernel's or
// its module's when kallsyms names it.
func (s *Session) kernelFrameMap(pc uint64) *Mapping {
	if m, ok := s.kernPCs[pc]; ok {
		return m
	}
	mod := ""
	if _, _, md, ok := s.kernelSyms().lookup(pc); ok {
		mod = md
	}
	m := s.kernelMapping(mod)
	if len(s.kernPCs) >= maxKernAddrs {
		clear(s.kernPCs)
	}
	s.kernPCs[pc] = m
	return m
}

// StopPlace is where walks that ended early ended: why, and in which
// mapping ("" for none).
type StopPlace struct {
	Stop   unwind.Stop
	Module string
	// NoFile says the mapping's file was not found or not used
	// (Session.Files says why): the walk had no unwind tables there,
	// which is why it ended (Stop is then StopNoRule, whatever failure
	// the frame-pointer fallback met).
	NoFile bool
}

// Reason says why the walks ended, for a person: the one wording of
// sframe report's and sframe record's summaries.
func (p StopPlace) Reason() string {
	if p.NoFile {
		return "no unwind tables (file not used)"
	}
	return p.Stop.String()
}

// stopPlace is where a walk that ended early with stop ended: in m, its
// last frame's mapping (nil for none). In a file that was not found or
// not used, the walk had only the frame-pointer fallback, and which of
// its failures it met (no rule, memory not readable, no progress)
// depends on what the frame-pointer register happened to hold: the same
// missing file would be reported under several reasons, none of them
// the cause.
func stopPlace(stop unwind.Stop, m *Mapping) StopPlace {
	if m == nil {
		return StopPlace{Stop: stop}
	}
	if m.File != nil && m.File.Path == "" && stop != unwind.StopDepth && stop != unwind.StopNoModule {
		// One place per file, whichever failure the fallback met.
		return StopPlace{Stop: unwind.StopNoRule, Module: m.Name, NoFile: true}
	}
	return StopPlace{Stop: stop, Module: m.Name}
}

// Stats count what a Session's samples gave.
type Stats struct {
	// Read is the number of samples Process read, Samples the number
	// unwound (those that passed its filter, or given to Unwind).
	Read, Samples uint64
	// Unwound counts the samples whose user stack was unwound from their
	// registers and stack copy; of them, OnlySFrame those that needed
	// nothing but SFrame (and signal frames), WithCFI those that needed
	// CFI for some frame but no frame pointers, WithFP those that
	// followed frame pointers for some frame, FirstOnly those whose walk
	// found no caller of the first frame.
	Unwound, OnlySFrame, WithCFI, WithFP, FirstOnly uint64
	// NoMappings counts samples with registers and stack of a process
	// whose mappings are unknown; Callchain those whose user frames come
	// from the kernel's callchain; NoUser those without user frames.
	NoMappings, Callchain, NoUser uint64
	// IPOnly counts the samples without a call graph (perf record
	// without -g or --call-graph): no callchain, registers or stack,
	// only the sampled address (Stack.IPOnly).
	IPOnly uint64
	// IPOnlyEvents counts IPOnly's samples by event (Sample.Event).
	IPOnlyEvents map[int]uint64
	// ABI32 counts the samples of 32-bit processes (Sample.ABI32): the
	// interrupted PC's frame alone.
	ABI32 uint64
	// Frames counts user frames by the method that found their caller
	// (index: unwind.Method); GenFrames those of Frames[MethodSFrame]
	// found by SFrame compiled from CFI (unless Options.NoSFrameFromCFI).
	Frames    [5]uint64
	GenFrames uint64
	// GenFiles counts the files whose SFrame was compiled from their
	// CFI, GenFuncs the functions it describes (those the walks went
	// through), GenSkipped those it leaves to the CFI (what SFrame
	// cannot express).
	GenFiles, GenFuncs, GenSkipped uint64
	// KernelFrames counts kernel frames.
	KernelFrames uint64
	// Stops counts walks by why they ended (index: unwind.Stop); CopyEnd
	// those of them that ended where the stack copy does.
	Stops   [6]uint64
	CopyEnd uint64
	// StopWhere counts the other walks that ended early, by reason and
	// mapping of the last frame (Session.Sweep drops the places of
	// mappings no process has any more).
	StopWhere map[StopPlace]uint64
	// Lost counts the samples the kernel lost: the LOST records' sum or
	// the LOST_SAMPLES records', the larger (perf writes both of the
	// same losses).
	Lost uint64
	// Unordered counts the records Process read out of time order
	// (perfdata.Reader.Unordered): its queue was full.
	Unordered uint64
}
