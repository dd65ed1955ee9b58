package stackprof

import (
	"bufio"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/sframekit/sframekit/internal/textfmt"
	"github.com/sframekit/sframekit/perfunwind"
)

// Folded aggregates unwound samples into folded stacks, the input of
// flamegraph.pl, inferno and speedscope: one line per distinct stack,
//
//	comm;outer;...;inner count
//
// written as stackcollapse-perf.pl writes them from perf script's output:
// the thread's name (spaces made underscores) first, function names as
// perf shows them (C++ without parameters) but without symbol versions,
// as the pprof profile names them, "[module]" for a frame whose
// function is unknown ("[unknown]" without a module), semicolons in names
// made colons, lines sorted. count is the number of samples, or the sum
// of the weights given to AddWeight. When the Resolver expands inlined
// calls, they come as frames of their own, inside the function they were
// inlined into. The samples of all events are counted together, or with
// KeepEvent those of one event only.
type Folded struct {
	r      *perfunwind.Resolver
	counts map[foldKey]uint64
	events map[int]uint64 // the counts of each event
	keep   int            // the event KeepEvent keeps, or -1
	key    []byte
	names  map[*perfunwind.Mapping]string
	frames frameCache[string] // each frame's part of a line
	leaves map[int]string
}

// NewFolded returns an empty Folded naming frames with r.
func NewFolded(r *perfunwind.Resolver) *Folded {
	return &Folded{r: r, counts: map[foldKey]uint64{}, events: map[int]uint64{}, keep: -1, names: map[*perfunwind.Mapping]string{}, leaves: map[int]string{}}
}

// foldKey is a line's stack and the event of its samples, kept apart
// until Write, so that KeepEvent can come after the samples (a pipe's
// events are known once it is read).
type foldKey struct {
	stack string
	event int
}

// KeepEvent makes Write write the stacks of event i's samples only, as
// stackcollapse-perf.pl keeps one event's: counts of two events (such
// as milliseconds and page faults) do not add up.
func (f *Folded) KeepEvent(i int) { f.keep = i }

// EventCounts returns the count of each event's samples added (their
// number, or summed weights), by event index.
func (f *Folded) EventCounts() map[int]uint64 { return f.events }

// SetEventFrame ends the stacks of event i's samples with one more,
// innermost frame, name (such as "[off-cpu]"), so that one flame graph
// shows the samples of two events apart where their stacks are the same.
func (f *Folded) SetEventFrame(i int, name string) { f.leaves[i] = name }

// Add counts one sample.
func (f *Folded) Add(st *perfunwind.Stack) error { return f.AddWeight(st, 1) }

// AddWeight counts the stack st w times: w samples merged, or a weight
// such as the microseconds a thread spent there.
func (f *Folded) AddWeight(st *perfunwind.Stack, w uint64) error {
	k := f.key[:0]
	k = appendFoldName(k, st.Comm, true)
	for i := len(st.Frames) - 1; i >= 0; i-- {
		fr := &st.Frames[i]
		k = appendCached(&f.frames, k, fr.Map, fr.PerfPC(), f.appendFrame)
	}
	if leaf, ok := f.leaves[st.Event]; ok {
		k = append(k, ';')
		k = appendFoldName(k, leaf, false)
	}
	f.key = k
	f.events[st.Event] += w
	if n, ok := f.counts[foldKey{string(k), st.Event}]; ok {
		f.counts[foldKey{string(k), st.Event}] = n + w
	} else {
		f.counts[foldKey{string(k), st.Event}] = w
	}
	return nil
}

// appendFrame appends the names of the frame at pc of mapping m, each
// after a semicolon: its function's, then the calls inlined there.
func (f *Folded) appendFrame(k []byte, m *perfunwind.Mapping, pc uint64) []byte {
	loc := f.r.Resolve(m, pc)
	k = append(k, ';')
	if loc.Unversioned != "" {
		k = appendFoldName(k, loc.Unversioned, false)
	} else {
		k = append(k, f.unknownName(m)...)
	}
	for j := len(loc.Inlined) - 1; j >= 0; j-- {
		k = append(k, ';')
		if n := loc.Inlined[j].Name; n != "" {
			k = appendFoldName(k, n, false)
		} else {
			k = append(k, "[unknown]"...)
		}
	}
	return k
}

// unknownName returns unknownFrame(m), once per mapping.
func (f *Folded) unknownName(m *perfunwind.Mapping) string {
	n, ok := f.names[m]
	if !ok {
		n = unknownFrame(m)
		f.names[m] = n
	}
	return n
}

// unknownFrame names a frame of mapping m whose function is unknown as
// stackcollapse-perf names perf script's "[unknown] (DSO)": "[BASE]",
// the base name of m's file, or "[unknown]" without a mapping. Folded
// stacks and pprof profiles name such frames so, so that a flame graph
// of either shows them alike.
func unknownFrame(m *perfunwind.Mapping) string {
	if m == nil {
		return "[unknown]"
	}
	return "[" + textfmt.Printable(filepath.Base(m.Name)) + "]"
}

// appendFoldName appends name with the characters the format reserves
// replaced: semicolons (the separator) by colons, and for the thread's
// name spaces by underscores; control characters are escaped
// (textfmt.AppendPrintable), a newline among them. Parameter lists are dropped, as
// stackcollapse-perf does, except for anonymous namespaces.
func appendFoldName(b []byte, name string, comm bool) []byte {
	if !comm {
		// As stackcollapse-perf: not in Go method names, pkg.(*T).m.
		if !goMethod(name) {
			for i := 0; i < len(name); i++ {
				if name[i] == '(' && !strings.HasPrefix(name[i:], "(anonymous namespace)") {
					name = name[:i]
					break
				}
			}
		}
	}
	at := len(b)
	b = textfmt.AppendPrintable(b, name)
	for i := at; i < len(b); i++ {
		switch {
		case b[i] == ';':
			b[i] = ':'
		case b[i] == ' ' && comm:
			b[i] = '_'
		}
	}
	return b
}

// goMethod reports whether name has the shape of a Go method,
// "pkg.(*T).m" (stackcollapse-perf's m/\.\(.*\)\./).
func goMethod(name string) bool {
	i := strings.Index(name, ".(")
	return i >= 0 && strings.Contains(name[i:], ").")
}

// Write writes the folded stacks, sorted: those of all events, the
// counts of a stack's summed, or of KeepEvent's event.
func (f *Folded) Write(w io.Writer) error {
	counts := make(map[string]uint64, len(f.counts))
	for k, n := range f.counts {
		if f.keep < 0 || k.event == f.keep {
			counts[k.stack] += n
		}
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	bw := bufio.NewWriterSize(w, 256<<10)
	var num [20]byte
	for _, k := range keys {
		bw.WriteString(k)
		bw.WriteByte(' ')
		bw.Write(strconv.AppendUint(num[:0], counts[k], 10))
		if err := bw.WriteByte('\n'); err != nil {
			return err
		}
	}
	return bw.Flush()
}
