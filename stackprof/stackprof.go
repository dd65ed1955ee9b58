// Package stackprof turns stack captures (unwind.Trace) into pprof
// profiles, so that go tool pprof, and the tools that read its format,
// show where a program's threads are: one sample per thread per capture,
// taken as often as the captures were (the "poor man's profiler", with
// SFrame keeping each stop of the target short).
//
// Frames keep the names and source positions the Tracer found; the
// profile's mappings say so (HasFunctions, and HasFilenames when source
// positions were looked up), so pprof does not symbolize the addresses
// again. Calls the compiler inlined at a frame (Tracer.Inlines) are
// lines of its location, innermost first, as pprof shows inlined calls.
package stackprof

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/google/pprof/profile"

	"github.com/sframekit/sframekit/unwind"
)

// Builder accumulates traces into one profile.
type Builder struct {
	p        *profile.Profile
	mappings map[mapKey]*profile.Mapping
	locs     map[locKey]*profile.Location
	funcs    functions
}

type locKey struct {
	addr uint64
	name string // frames that pprof must not merge: signal trampolines
}

type funcKey struct{ name, file string }

// functions are a profile's functions by name and file, each made once,
// for both builders.
type functions map[funcKey]*profile.Function

// get returns the function name (demangled; system, the symbol, "" when
// the same) of file in p, adding it to p the first time.
func (fs functions) get(p *profile.Profile, name, system, file string) *profile.Function {
	k := funcKey{name, file}
	if fn := fs[k]; fn != nil {
		return fn
	}
	if system == "" {
		system = name
	}
	fn := &profile.Function{ID: uint64(len(p.Function) + 1), Name: name, SystemName: system, Filename: file}
	fs[k] = fn
	p.Function = append(p.Function, fn)
	return fn
}

// mapKey names a module across captures, each of which has its own
// *unwind.Module values.
type mapKey struct {
	file  string
	start uint64
}

// NewBuilder returns a Builder for a profile of samples of type
// "samples"/"count".
func NewBuilder() *Builder {
	return &Builder{
		p: &profile.Profile{
			SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}},
			PeriodType: &profile.ValueType{Type: "samples", Unit: "count"},
			Period:     1,
		},
		mappings: map[mapKey]*profile.Mapping{},
		locs:     map[locKey]*profile.Location{},
		funcs:    functions{},
	}
}

// Add adds one sample per thread of t, its frames innermost first, with
// the labels "thread" (the thread id) and "thread_name". Frames that
// unwinding did not reach are not invented: a walk that stopped early
// gives a shorter stack.
func (b *Builder) Add(t *unwind.Trace) {
	for i := range t.Threads {
		th := &t.Threads[i]
		if len(th.Frames) == 0 {
			continue
		}
		s := &profile.Sample{Value: []int64{1}, Label: map[string][]string{}, NumLabel: map[string][]int64{}}
		s.NumLabel["thread"] = []int64{int64(th.TID)}
		if th.Name != "" {
			s.Label["thread_name"] = []string{th.Name}
		}
		for j := range th.Frames {
			s.Location = append(s.Location, b.location(&th.Frames[j]))
		}
		b.p.Sample = append(b.p.Sample, s)
	}
}

// Profile returns the profile built so far. It is checked (CheckValid)
// and owned by the Builder: later calls to Add change it.
func (b *Builder) Profile() (*profile.Profile, error) {
	// pprof takes the first mapping for the main binary: the lowest, which
	// is the executable's for PIE and non-PIE programs alike.
	slices.SortFunc(b.p.Mapping, func(x, y *profile.Mapping) int { return cmp.Compare(x.Start, y.Start) })
	for i, m := range b.p.Mapping {
		m.ID = uint64(i + 1)
	}
	if err := b.p.CheckValid(); err != nil {
		return nil, fmt.Errorf("invalid profile: %w", err)
	}
	return b.p, nil
}

func (b *Builder) location(f *unwind.SymFrame) *profile.Location {
	name := f.Func
	if f.Demangled != "" {
		name = f.Demangled
	}
	if f.Signal {
		name = "<signal handler called>"
	}
	k := locKey{addr: f.PC}
	if f.Signal {
		k.name = name
	}
	if l := b.locs[k]; l != nil {
		return l
	}
	l := &profile.Location{ID: uint64(len(b.p.Location) + 1), Address: f.PC, Mapping: b.mapping(f.Module)}
	// pprof's Line list is innermost first, as Inlined is: each inlined
	// call at the position in it (the PC's for the innermost, then the
	// call site of the one inside), and the function of the frame last,
	// at the call site of the outermost inlined call.
	file, line := f.File, f.Line
	for _, in := range f.Inlined {
		n := in.Name
		if n == "" {
			n = "??"
		}
		l.Line = append(l.Line, profile.Line{Function: b.funcs.get(b.p, n, "", file), Line: int64(line)})
		file, line = in.File, in.Line
	}
	if name == "" && len(l.Line) > 0 {
		name = "??"
	}
	if name != "" {
		l.Line = append(l.Line, profile.Line{Function: b.funcs.get(b.p, name, f.Func, file), Line: int64(line)})
	}
	if f.File != "" && l.Mapping != nil {
		l.Mapping.HasFilenames = true
	}
	b.locs[k] = l
	b.p.Location = append(b.p.Location, l)
	return l
}

func (b *Builder) mapping(m *unwind.Module) *profile.Mapping {
	if m == nil {
		return nil
	}
	k := mapKey{m.Name, m.Start}
	if pm := b.mappings[k]; pm != nil {
		return pm
	}
	pm := &profile.Mapping{
		ID:           uint64(len(b.p.Mapping) + 1),
		Start:        m.Start,
		Limit:        m.End,
		File:         m.Name,
		HasFunctions: true,
	}
	b.mappings[k] = pm
	b.p.Mapping = append(b.p.Mapping, pm)
	return pm
}
