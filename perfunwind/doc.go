// Package perfunwind unwinds the samples of a profiler that records, per
// sample, the user registers and a copy of the user stack: perf record
// --call-graph dwarf (read with package perfdata), or perf_event_open with
// PERF_SAMPLE_REGS_USER and PERF_SAMPLE_STACK_USER.
//
// A Session follows the processes of a recording from its MMAP, MMAP2,
// COMM, FORK and EXIT records (Record, or Mmap, Comm, Fork and Exit for a
// live profiler's own), as perf does: a process's mappings, cut by newer
// ones, inherited across fork, replaced on exec. Each executable mapping
// of a file becomes a module of the process's unwind.Unwinder, the file
// found at its recorded path (under Options.SymFS, a copy of another
// machine's files) or in perf's build-ID cache, and refused when its build
// ID is not the recorded one; each file's SFrame and CFI tables are loaded
// once for every process (unwind.Cache). Unwind then walks a sample's user
// stack from its registers over its stack copy, SFrame, then CFI, then
// frame pointers, per frame, ending cleanly where the copy ends; the
// kernel's part comes from the sample's callchain. Stats counts how
// samples were unwound and why walks ended.
//
//	r, err := perfdata.Open("perf.data")
//	...
//	s, err := perfunwind.NewSession(perfunwind.Options{}) // as sframe report: the rest from r's header
//	res := perfunwind.NewResolver(s)                      // names, lines, inlined calls
//	err = s.Process(r, perfunwind.ProcessOptions{}, func(st *perfunwind.Stack) error {
//		for _, f := range st.Frames {
//			loc := res.Resolve(f.Map, f.LookupPC())
//			fmt.Println(st.Comm, loc.Name, f.Map.Name)
//		}
//		return nil
//	})
//
// A Resolver names frames: each address of each file is looked up once
// (function from the symbol tables, source line and inlined calls from
// DWARF, PLT entries as perf names them), kernel addresses from kallsyms
// (/proc/kallsyms when the recording is from the running kernel, or perf's
// cached copy for the recorded kernel). Package stackprof writes the
// stacks as pprof profiles, folded stacks, or perf script's text.
//
// Addresses: Frame.PC is a runtime address; LookupPC is where the frame's
// function and line are (inside the call, for return addresses); PerfPC
// is what perf script shows (the same, except that perf also steps back
// into the signal trampoline, not out of the frame a signal interrupted),
// and Mapping.PerfAddr turns it into perf's file offset.
//
// A recording is untrusted input: mapping addresses, lengths and offsets
// are taken as given (a mapping that wraps around is ignored), files are
// opened only at the recorded paths under SymFS or in the build-ID cache,
// and the unwinder bounds each walk (Options.MaxDepth) and reads only the
// stack copy and the mapped files. Memory grows with the processes and
// files of the recording, not with its samples: a process is forgotten
// when all its known threads have exited, and each file's resolved
// addresses are kept once.
package perfunwind
