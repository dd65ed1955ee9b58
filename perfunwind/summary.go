package perfunwind

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/internal/textfmt"
	"github.com/sframekit/sframekit/perfdata"
	"github.com/sframekit/sframekit/perfevent"
	"github.com/sframekit/sframekit/unwind"
)

// WriteSummary prints what s's samples gave, for a person: samples read
// and unwound, with which rules, why and where walks ended, lost samples,
// the files JIT code was named from, and the files that could not be
// used. Names from the recording are printed through textfmt.Printable:
// a control character in a recorded path does not reach the terminal.
func WriteSummary(w io.Writer, s *Session) error {
	st := &s.Stats
	var b strings.Builder
	fmt.Fprintf(&b, "%d samples read", st.Read)
	if st.Samples != st.Read {
		fmt.Fprintf(&b, ", %d selected", st.Samples)
	}
	if st.Lost > 0 {
		fmt.Fprintf(&b, ", %d lost by the kernel", st.Lost)
	}
	if st.Unordered > 0 {
		fmt.Fprintf(&b, ", %d records out of time order", st.Unordered)
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "user stacks unwound: %d (%d by SFrame alone, %d with CFI for some frame, %d with frame pointers for some frame, %d not past the first frame)\n",
		st.Unwound, st.OnlySFrame, st.WithCFI, st.WithFP, st.FirstOnly)
	if n := st.NoMappings + st.Callchain + st.NoUser + st.IPOnly; n > 0 {
		src := s.opts.CallchainSource
		if src == "" {
			src = "the kernel's callchain"
		}
		fmt.Fprintf(&b, "other samples: %d (%d of processes with no known mapping, %d from %s, %d without user registers or stack, %d without a call graph)\n",
			n, st.NoMappings, st.Callchain, src, st.NoUser, st.IPOnly)
	}
	switch {
	case st.IPOnly > 0 && st.IPOnly == st.Samples:
		fmt.Fprintf(&b, "hint: %d samples were recorded without call graphs (perf record without -g): each shows the sampled function alone; record with perf record --call-graph dwarf for whole stacks\n", st.IPOnly)
	case st.IPOnly > 0:
		// Some events have call graphs: name those without.
		var evs []string
		for _, i := range slices.Sorted(maps.Keys(st.IPOnlyEvents)) {
			a := &perfdata.Attr{Index: i} // given to Unwind, not read by Process
			if i < len(s.noCallGraph) && s.noCallGraph[i] != nil {
				a = s.noCallGraph[i]
			}
			evs = append(evs, fmt.Sprintf("%s (%d)", textfmt.Printable(a.Label()), st.IPOnlyEvents[i]))
		}
		those := "that event"
		if len(evs) > 1 {
			those = "those events"
		}
		fmt.Fprintf(&b, "hint: the samples of %s were recorded without call graphs, unlike the other events': each shows the sampled function alone; record %s with --call-graph dwarf for whole stacks\n", strings.Join(evs, ", "), those)
	}
	if st.ABI32 > 0 {
		fmt.Fprintf(&b, "32-bit (%s) processes are not unwound (their ABI is not supported): %d samples show the sampled function alone\n", abi32Name(s.opts.Arch), st.ABI32)
	}
	fr := &st.Frames
	gen := ""
	if st.GenFrames > 0 {
		gen = fmt.Sprintf(" (%d of them compiled from CFI)", st.GenFrames)
	}
	fmt.Fprintf(&b, "user frames: %d (callers found by SFrame %d%s, CFI %d, frame pointers %d, signal frames %d; last frames %d)\n",
		fr[0]+fr[1]+fr[2]+fr[3]+fr[4], fr[unwind.MethodSFrame], gen, fr[unwind.MethodCFI], fr[unwind.MethodFP], fr[unwind.MethodSignal], fr[unwind.MethodNone])
	if st.GenFiles > 0 {
		fmt.Fprintf(&b, "SFrame compiled from CFI for %d files without their own: %d functions the walks went through (%d left to CFI, which SFrame cannot express)\n",
			st.GenFiles, st.GenFuncs, st.GenSkipped)
	}
	early := st.Unwound - st.Stops[unwind.StopEnd] - st.CopyEnd
	fmt.Fprintf(&b, "walks ended: %d at the outermost frame, %d where the stack copy ends, %d elsewhere\n",
		st.Stops[unwind.StopEnd], st.CopyEnd, early)
	writeCopyAdvice(&b, &s.depth, st.CopyEnd)
	type place struct {
		p StopPlace
		n uint64
	}
	var places []place
	for p, n := range st.StopWhere {
		places = append(places, place{p, n})
	}
	slices.SortFunc(places, func(a, b place) int {
		if c := cmp.Compare(b.n, a.n); c != 0 {
			return c
		}
		if c := cmp.Compare(a.p.Reason(), b.p.Reason()); c != 0 {
			return c
		}
		if c := cmp.Compare(a.p.Module, b.p.Module); c != 0 {
			return c
		}
		return cmp.Compare(a.p.Stop, b.p.Stop)
	})
	for i, p := range places {
		if i == 8 {
			fmt.Fprintf(&b, "  ... %d more places\n", len(places)-i)
			break
		}
		where := p.p.Module
		if where == "" {
			where = "no mapping"
		}
		fmt.Fprintf(&b, "  %d: %s, in %s\n", p.n, p.p.Reason(), textfmt.Printable(where))
	}
	if st.KernelFrames > 0 {
		how := "named from " + s.opts.Kallsyms
		switch {
		case s.opts.Kallsyms == "":
			how = "not named: recorded on another kernel (--kallsyms FILE names them)"
		case s.KernelErr() != nil:
			how = "not named: " + textfmt.Printable(s.KernelErr().Error())
		}
		fmt.Fprintf(&b, "kernel frames: %d (%s)\n", st.KernelFrames, how)
	}
	// Only processes whose JIT code had frames to name loaded their files.
	var jitRead, jitErrs, jitNone []string
	for _, pid := range slices.Sorted(maps.Keys(s.jits)) {
		j := s.jits[pid]
		j.mu.Lock()
		if j.loaded {
			jitRead = append(jitRead, j.read...)
			for _, err := range j.errs {
				jitErrs = append(jitErrs, err.Error())
			}
			if len(j.read) == 0 && len(j.errs) == 0 {
				jitNone = append(jitNone, j.mapPaths[len(j.mapPaths)-1])
			}
		}
		j.mu.Unlock()
	}
	for _, l := range []struct {
		head  string
		lines []string
	}{{"JIT code named from", jitRead}, {"JIT symbol files not read", jitErrs},
		{"JIT code without names, no perf map found (node --perf-basic-prof, python3 -X perf and Java agents write one)", jitNone}} {
		if len(l.lines) > 0 {
			fmt.Fprintf(&b, "%s: %d\n", l.head, len(l.lines))
			for i, line := range l.lines {
				if i == 8 {
					fmt.Fprintf(&b, "  ... %d more\n", len(l.lines)-i)
					break
				}
				fmt.Fprintf(&b, "  %s\n", textfmt.Printable(line))
			}
		}
	}
	var missing []*File
	for _, f := range s.Files() {
		if f.Path == "" {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		fmt.Fprintf(&b, "files not used: %d\n", len(missing))
		for i, f := range missing {
			if i == 8 {
				fmt.Fprintf(&b, "  ... %d more\n", len(missing)-i)
				break
			}
			if msg := fmt.Sprint(f.Err); strings.HasPrefix(msg, f.Name+": ") {
				// The error names the file at the recorded path: once.
				fmt.Fprintf(&b, "  %s\n", textfmt.Printable(msg))
			} else {
				fmt.Fprintf(&b, "  %s: %s\n", textfmt.Printable(f.Name), textfmt.Printable(msg))
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// stackDepths finds the stack copy that would have held the walks that
// ended where their copy did: a thread's outermost frame stays where its
// stack starts (_start, start_thread), so a complete walk of the thread
// gives the top of its stack, and a cut walk needed the copy to reach
// from its SP up to there. A thread may run on other stacks too (a
// coroutine's, a signal's alternate stack): a cut walk is measured only
// by a top below the end of its own stack (StackMemory.End), which those
// lie apart from. Stacks in one stretch of anonymous memory share that
// end (a Go program's goroutines, on the heap, run on every thread):
// when a thread's complete walks end at different tops, it ran on
// several, and the distance from a cut walk to a top says nothing of its
// own stack, so none of the thread's cut walks is measured. It keeps a
// few words per thread and stack end, for at most maxDepthThreads of
// them (those seen later are not measured).
type stackDepths struct {
	top     map[uint32]uint64   // per thread, the highest CFA of a complete walk
	lowTop  map[uint32]uint64   // per thread, the lowest such top: another stack when it differs
	low     map[cutStack]uint64 // per thread and stack end, the lowest SP of a cut walk
	n       map[cutStack]uint64 // per thread and stack end, its cut walks
	cutCopy uint64              // the largest copy that was cut short
}

// cutStack is a stack that walks were cut short on: the thread's, and the
// end of the stack their copies were taken from.
type cutStack struct {
	tid uint32
	end uint64
}

const maxDepthThreads = 1 << 16

// complete notes a complete walk of thread tid that read up to top.
func (d *stackDepths) complete(tid uint32, top uint64) {
	if d.top == nil {
		d.top, d.lowTop = map[uint32]uint64{}, map[uint32]uint64{}
	}
	if t, ok := d.top[tid]; ok {
		d.top[tid] = max(t, top)
		d.lowTop[tid] = min(d.lowTop[tid], top)
	} else if len(d.top) < maxDepthThreads {
		d.top[tid], d.lowTop[tid] = top, top
	}
}

// cut notes a walk of thread tid cut short by its copy of size bytes
// from sp, of the stack that ends at end.
func (d *stackDepths) cut(tid uint32, sp, end, size uint64) {
	if d.low == nil {
		d.low, d.n = map[cutStack]uint64{}, map[cutStack]uint64{}
	}
	d.cutCopy = max(d.cutCopy, size)
	k := cutStack{tid, end}
	l, ok := d.low[k]
	if !ok && len(d.low) >= maxDepthThreads {
		return
	}
	if !ok || sp < l {
		d.low[k] = sp
	}
	d.n[k]++
}

// need returns the copy, in bytes, that would have held the cut walks of
// the stacks that also had a complete walk, and how many cut walks that
// is.
func (d *stackDepths) need() (bytes, known uint64) {
	for k, sp := range d.low {
		if top, ok := d.top[k.tid]; ok && d.lowTop[k.tid] == top && top > sp && top <= k.end && top-sp > d.cutCopy {
			bytes = max(bytes, top-sp)
			known += d.n[k]
		}
	}
	return bytes, known
}

// writeCopyAdvice says which stack copy would have held the walks that
// ended where their copy did: the deepest of them, rounded up to a KiB.
func writeCopyAdvice(b *strings.Builder, d *stackDepths, cut uint64) {
	need, known := d.need()
	if cut == 0 {
		return
	}
	fmt.Fprintf(b, "  %d walks needed more stack than the %d bytes copied", cut, d.cutCopy)
	switch {
	case known == 0:
		b.WriteString("; none of their stacks had a complete walk to measure it by (or their threads ran on several stacks)")
	case need > perfevent.MaxStackUser:
		fmt.Fprintf(b, "; %d of them needed %d bytes, more than the kernel copies (%d): sframe record --bpf walks the stack in the kernel, without a copy", known, need, perfevent.MaxStackUser)
	default:
		size := min((need+1023)&^1023, perfevent.MaxStackUser)
		fmt.Fprintf(b, ": a copy of %d (the deepest needed %d) would have held ", size, need)
		if known == cut {
			b.WriteString("them all")
		} else {
			fmt.Fprintf(b, "the %d whose stacks had a complete walk to measure them by", known)
		}
		fmt.Fprintf(b, " (sframe record --stack-size %d, perf record --call-graph dwarf,%d)", size, size)
	}
	b.WriteString("\n")
}

// abi32Name names the 32-bit programs that run on a: what a sample with
// 32-bit registers (Sample.ABI32) ran.
func abi32Name(a arch.Arch) string {
	switch a {
	case arch.AMD64:
		return "i386"
	case arch.ARM64:
		return "arm"
	case arch.S390X:
		return "s390"
	}
	return "compat"
}
