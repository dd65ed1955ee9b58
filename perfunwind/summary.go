package perfunwind

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/sframekit/sframekit/internal/textfmt"
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
	b.WriteString("\n")
	fmt.Fprintf(&b, "user stacks unwound: %d (%d by SFrame alone, %d with CFI for some frame, %d with frame pointers for some frame, %d not past the first frame)\n",
		st.Unwound, st.OnlySFrame, st.WithCFI, st.WithFP, st.FirstOnly)
	if n := st.NoMappings + st.Callchain + st.NoUser; n > 0 {
		src := s.opts.CallchainSource
		if src == "" {
			src = "the kernel's callchain"
		}
		fmt.Fprintf(&b, "other samples: %d (%d of processes with no known mapping, %d from %s, %d without user registers or stack)\n",
			n, st.NoMappings, st.Callchain, src, st.NoUser)
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
		if c := cmp.Compare(a.p.Stop, b.p.Stop); c != 0 {
			return c
		}
		return cmp.Compare(a.p.Module, b.p.Module)
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
		fmt.Fprintf(&b, "  %d: %s, in %s\n", p.n, p.p.Stop, textfmt.Printable(where))
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
			fmt.Fprintf(&b, "  %s: %s\n", textfmt.Printable(f.Name), textfmt.Printable(fmt.Sprint(f.Err)))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
