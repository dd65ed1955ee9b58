package unwind

import (
	"cmp"
	"debug/elf"
	"errors"
	"slices"
	"sort"
	"strings"

	"github.com/sframekit/sframekit/cfi"
	"github.com/sframekit/sframekit/elffile"
)

// addrRange is a range [lo, hi) of addresses.
type addrRange struct{ lo, hi uint64 }

// outermost is the code of a file where every walk ends, as ELF address
// ranges, sorted and disjoint: functions whose unwind tables, if any,
// give them an ordinary caller that is not one. Found once per file
// (outermostOf); a lookup is a search over a few ranges, without
// allocating.
type outermost []addrRange

// has reports whether the ELF address pc lies in o.
func (o outermost) has(pc uint64) bool {
	if len(o) == 0 || pc < o[0].lo || pc >= o[len(o)-1].hi {
		return false // the common case: two comparisons
	}
	i := sort.Search(len(o), func(i int) bool { return o[i].hi > pc })
	return i < len(o) && pc >= o[i].lo
}

// overlaps reports whether [lo, hi) meets a range of o.
func (o outermost) overlaps(lo, hi uint64) bool {
	for _, r := range o {
		if r.lo < hi && lo < r.hi {
			return true
		}
	}
	return false
}

// goOutermost names the functions of Go's runtime where its own
// traceback stops (runtime/traceback.go, for profiling), the assembler
// marking them: TOPFRAME, the first function of a goroutine or thread
// (goexit, mstart, rt0_go) and the signal handler (goSignalOutermost),
// and SPWRITE, those that switch stacks
// (systemstack, mcall, morestack, gogo, asmcgocall, the vDSO and cgo
// calls on g0, clone's child), past which the frames found by the CFI
// (the Go linker's .debug_frame knows nothing of the switch) belong to
// another stack or none. Go's linker writes asm functions as NAME.abi0,
// which is matched too. cgocallback is left out as Go leaves it out: it
// keeps both stacks unwindable.
var goOutermost = map[string]bool{
	// TOPFRAME
	"runtime.goexit": true,
	"runtime.mstart": true,
	"runtime.rt0_go": true,
	// SPWRITE (asm_*.s, sys_linux_*.s, time_linux_amd64.s)
	"runtime.systemstack":         true,
	"runtime.mcall":               true,
	"runtime.morestack":           true,
	"runtime.gogo":                true,
	"gogo":                        true, // amd64's gogo<>, a file-local symbol
	"runtime.asmcgocall":          true,
	"runtime.asmcgocall_no_g":     true,
	"runtime.callCgoMmap":         true,
	"runtime.callCgoMunmap":       true,
	"runtime.callCgoSigaction":    true,
	"runtime.clone":               true,
	"runtime.nanotime1":           true,
	"runtime.vgetrandom1":         true,
	"runtime.sigfwd":              true,
	"runtime.switchToCrashStack0": true,
	"time.now":                    true,
	"_rt0_amd64_lib":              true,
}

// goSignalOutermost names the functions of Go's runtime on a thread's
// signal stack: the handler (sigtramp, TOPFRAME) and the trampoline it
// returns into (amd64's sa_restorer), where a sample in rt_sigreturn
// stands. They end the walks of a sample's stack copy (StackMemory),
// which holds the signal stack, not the interrupted goroutine's; Go's
// CFI for the trampoline (CFA = SP + 8) would take the ucontext's flags
// for a return address. A walk of the whole memory (a core, a stopped
// process) goes on through the signal frame into the code the signal
// interrupted, as gdb does: how a GOTRACEBACK=crash core shows the
// goroutine that crashed.
var goSignalOutermost = map[string]bool{
	"runtime.sigtramp":             true,
	"runtime.sigreturn__sigaction": true,
}

// goSigpanic names the function of Go's runtime that a fault's signal
// handler makes the goroutine call (runtime.sigpanic; sigpanic0 on the
// architectures of a link register), pushing the faulting PC as its
// return address: its caller's PC is exact, the faulting instruction,
// not a return address after a call.
var goSigpanic = map[string]bool{
	"runtime.sigpanic":  true,
	"runtime.sigpanic0": true,
}

// isGo reports whether f was built by the Go toolchain.
func isGo(f *elf.File) bool {
	return f.Section(".go.buildinfo") != nil || f.Section(".note.go.buildid") != nil
}

// outermostOf returns the outermost code of f (see outermost), whose
// CFI is c (nil if none): in a Go program, the runtime's functions where
// Go's traceback stops, found by name in .symtab (a stripped Go program
// has none, and walks through it stop where its frame pointers do); in
// any file, the code at its entry point when no CFI covers it, up to
// the next function the CFI describes (ld.so's _start, which calls
// _dl_start and then the libraries' initializers). sig is the part of
// it on the signal stack (goSignalOutermost), where only the walks of a
// stack copy end; sigpanic, in the same form, is Go's goSigpanic, whose
// caller's PC is exact.
func outermostOf(f *elf.File, c *cfi.Table) (all, sig, sigpanic outermost) {
	if isGo(f) {
		// elffile.Symbols bounds what the tables cost.
		syms, _ := elffile.Symbols(f)
		for i := range syms {
			s := &syms[i]
			if elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Size == 0 {
				continue
			}
			name := strings.TrimSuffix(s.Name, ".abi0")
			if goSigpanic[name] {
				sigpanic = append(sigpanic, addrRange{s.Value, s.Value + s.Size})
			} else if goSignalOutermost[name] {
				sig = append(sig, addrRange{s.Value, s.Value + s.Size})
			} else if goOutermost[name] {
				all = append(all, addrRange{s.Value, s.Value + s.Size})
			}
		}
	}
	all = append(all, sig...)
	if r, ok := entryCode(f, c); ok {
		all = append(all, r)
	}
	return mergeRanges(all), mergeRanges(sig), mergeRanges(sigpanic)
}

// slowRanges returns the code whose SFrame rows the fast path leaves to
// the general one: where walks end (outer) and Go's sigpanic, after which
// the PC is exact.
func slowRanges(outer, sigpanic outermost) outermost {
	if len(sigpanic) == 0 {
		return outer
	}
	return mergeRanges(append(slices.Clone(outer), sigpanic...))
}

// mergeRanges sorts o and merges its overlapping ranges (aliases), so
// that has can search; nil if o is empty.
func mergeRanges(o outermost) outermost {
	if len(o) == 0 {
		return nil
	}
	slices.SortFunc(o, func(a, b addrRange) int { return cmp.Compare(a.lo, b.lo) })
	out := o[:1]
	for _, r := range o[1:] {
		if last := &out[len(out)-1]; r.lo < last.hi {
			last.hi = max(last.hi, r.hi)
			continue
		}
		out = append(out, r)
	}
	return slices.Clip(out)
}

// entryCode returns the code at f's entry point, from the entry to the
// first function after it that c describes (bounded by the entry's
// section), if c does not describe the entry itself: the program's first
// frame, which the kernel entered with no caller. A file without CFI has
// no such bound, and none is guessed.
func entryCode(f *elf.File, c *cfi.Table) (addrRange, bool) {
	entry := f.Entry
	if c == nil || entry == 0 || (f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN) {
		return addrRange{}, false
	}
	if _, err := c.FindFDE(entry); !errors.Is(err, cfi.ErrNoFDE) {
		return addrRange{}, false // described (or the CFI cannot say)
	}
	end := ^uint64(0)
	for _, s := range f.Sections {
		if s.Flags&elf.SHF_EXECINSTR != 0 && entry >= s.Addr && entry-s.Addr < s.Size {
			end = s.Addr + s.Size
		}
	}
	next := false
	for it := c.Entries(); it.Next(); {
		e := it.Entry()
		if e.Kind == cfi.KindFDE && e.Err == nil && e.FDE.PCBegin > entry && e.FDE.PCBegin <= end {
			end, next = e.FDE.PCBegin, true
		}
	}
	if !next {
		return addrRange{}, false
	}
	return addrRange{entry, end}, true
}
