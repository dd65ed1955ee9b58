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
//
// The profile is encoded here, as the gzipped protocol buffer of pprof's
// profile.proto, rather than with github.com/google/pprof/profile: that
// package compiles some twenty regular expressions when a program starts,
// which cost every run of the sframe command about 4 ms and 100 page
// faults on the project's machine, more than a whole stack capture. The
// tests read the profiles back with that package.
package stackprof

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"slices"

	"github.com/sframekit/sframekit/unwind"
)

// Builder accumulates traces into one profile.
type Builder struct {
	samples   []sample
	mappings  []*mapping
	locations []*location
	functions []*function
	mapIdx    map[mapKey]*mapping
	locIdx    map[locKey]*location
	funcIdx   map[funcKey]*function
}

// The profile's records, as profile.proto has them; strings are kept as
// strings until encoding.
type (
	sample struct {
		locs       []uint64 // location ids, innermost first
		tid        int64
		threadName string
	}
	mapping struct {
		id                       uint64
		start, limit             uint64
		file                     string
		hasFunctions, hasFileNms bool
	}
	location struct {
		id      uint64
		mapping *mapping
		addr    uint64
		lines   []line
	}
	line struct {
		fn   *function
		line int64
	}
	function struct {
		id                 uint64
		name, system, file string
	}
)

type locKey struct {
	addr uint64
	name string // frames that pprof must not merge: signal trampolines
}

type funcKey struct{ name, file string }

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
		mapIdx:  map[mapKey]*mapping{},
		locIdx:  map[locKey]*location{},
		funcIdx: map[funcKey]*function{},
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
		s := sample{tid: int64(th.TID), threadName: th.Name, locs: make([]uint64, 0, len(th.Frames))}
		for j := range th.Frames {
			s.locs = append(s.locs, b.location(&th.Frames[j]).id)
		}
		b.samples = append(b.samples, s)
	}
}

// Encode returns the profile built so far, gzipped profile.proto as
// pprof reads it. The mappings are numbered by address, so that the
// first is the lowest: pprof takes it for the main binary, and the
// executable's is the lowest for PIE and non-PIE programs alike.
func (b *Builder) Encode() ([]byte, error) {
	maps := slices.Clone(b.mappings)
	slices.SortStableFunc(maps, func(x, y *mapping) int { return cmp.Compare(x.start, y.start) })
	for i, m := range maps {
		m.id = uint64(i + 1)
	}

	var e encoder
	e.strings = map[string]int64{"": 0}
	e.table = []string{""}
	samples, count := e.str("samples"), e.str("count")
	threadKey, threadNameKey := e.str("thread"), e.str("thread_name")

	var msg, sub buffer
	valueType := func() []byte { // samples/count
		sub.reset()
		sub.int(1, samples)
		sub.int(2, count)
		return sub.b
	}
	e.out.bytes(1, valueType())
	for _, s := range b.samples {
		msg.reset()
		msg.packed(1, s.locs)
		msg.packed(2, []uint64{1})
		sub.reset()
		sub.int(1, threadKey)
		sub.int(3, s.tid)
		msg.bytes(3, sub.b)
		if s.threadName != "" {
			sub.reset()
			sub.int(1, threadNameKey)
			sub.int(2, e.str(s.threadName))
			msg.bytes(3, sub.b)
		}
		e.out.bytes(2, msg.b)
	}
	for _, m := range maps {
		msg.reset()
		msg.uint(1, m.id)
		msg.uint(2, m.start)
		msg.uint(3, m.limit)
		msg.int(5, e.str(m.file))
		msg.bool(7, m.hasFunctions)
		msg.bool(8, m.hasFileNms)
		e.out.bytes(3, msg.b)
	}
	for _, l := range b.locations {
		msg.reset()
		msg.uint(1, l.id)
		if l.mapping != nil {
			msg.uint(2, l.mapping.id)
		}
		msg.uint(3, l.addr)
		for _, ln := range l.lines {
			sub.reset()
			sub.uint(1, ln.fn.id)
			sub.int(2, ln.line)
			msg.bytes(4, sub.b)
		}
		e.out.bytes(4, msg.b)
	}
	for _, f := range b.functions {
		msg.reset()
		msg.uint(1, f.id)
		msg.int(2, e.str(f.name))
		msg.int(3, e.str(f.system))
		msg.int(4, e.str(f.file))
		e.out.bytes(5, msg.b)
	}
	e.out.bytes(11, valueType()) // period type
	e.out.int(12, 1)             // period

	// The string table: field 6, after the fields that index it.
	var z bytes.Buffer
	gz := gzip.NewWriter(&z)
	gz.Write(e.out.b)
	var st buffer
	for _, s := range e.table {
		st.bytes(6, []byte(s))
	}
	gz.Write(st.b)
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return z.Bytes(), nil
}

func (b *Builder) location(f *unwind.SymFrame) *location {
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
	if l := b.locIdx[k]; l != nil {
		return l
	}
	l := &location{id: uint64(len(b.locations) + 1), addr: f.PC, mapping: b.mapping(f.Module)}
	// pprof's Line list is innermost first, as Inlined is: each inlined
	// call at the position in it (the PC's for the innermost, then the
	// call site of the one inside), and the function of the frame last,
	// at the call site of the outermost inlined call.
	file, ln := f.File, f.Line
	for _, in := range f.Inlined {
		n := in.Name
		if n == "" {
			n = "??"
		}
		l.lines = append(l.lines, line{fn: b.function(n, "", file), line: int64(ln)})
		file, ln = in.File, in.Line
	}
	if name == "" && len(l.lines) > 0 {
		name = "??"
	}
	if name != "" {
		l.lines = append(l.lines, line{fn: b.function(name, f.Func, file), line: int64(ln)})
	}
	if f.File != "" && l.mapping != nil {
		l.mapping.hasFileNms = true
	}
	b.locIdx[k] = l
	b.locations = append(b.locations, l)
	return l
}

func (b *Builder) function(name, system, file string) *function {
	k := funcKey{name, file}
	if fn := b.funcIdx[k]; fn != nil {
		return fn
	}
	if system == "" {
		system = name
	}
	fn := &function{id: uint64(len(b.functions) + 1), name: name, system: system, file: file}
	b.funcIdx[k] = fn
	b.functions = append(b.functions, fn)
	return fn
}

func (b *Builder) mapping(m *unwind.Module) *mapping {
	if m == nil {
		return nil
	}
	k := mapKey{m.Name, m.Start}
	if pm := b.mapIdx[k]; pm != nil {
		return pm
	}
	pm := &mapping{start: m.Start, limit: m.End, file: m.Name, hasFunctions: true}
	b.mapIdx[k] = pm
	b.mappings = append(b.mappings, pm)
	return pm
}

// encoder holds the encoded fields and the string table.
type encoder struct {
	out     buffer
	strings map[string]int64
	table   []string
}

// str returns the index of s in the string table, adding it.
func (e *encoder) str(s string) int64 {
	if i, ok := e.strings[s]; ok {
		return i
	}
	i := int64(len(e.table))
	e.strings[s] = i
	e.table = append(e.table, s)
	return i
}

// buffer appends protocol buffer fields.
type buffer struct{ b []byte }

func (b *buffer) reset() { b.b = b.b[:0] }

func (b *buffer) varint(v uint64) {
	for v >= 0x80 {
		b.b = append(b.b, byte(v)|0x80)
		v >>= 7
	}
	b.b = append(b.b, byte(v))
}

func (b *buffer) key(field, wire int) { b.varint(uint64(field)<<3 | uint64(wire)) }

// uint appends a varint field; zero, the default, is left out.
func (b *buffer) uint(field int, v uint64) {
	if v != 0 {
		b.key(field, 0)
		b.varint(v)
	}
}

func (b *buffer) int(field int, v int64) { b.uint(field, uint64(v)) }

func (b *buffer) bool(field int, v bool) {
	if v {
		b.uint(field, 1)
	}
}

// bytes appends a length-delimited field (a string or a message).
func (b *buffer) bytes(field int, v []byte) {
	b.key(field, 2)
	b.varint(uint64(len(v)))
	b.b = append(b.b, v...)
}

// packed appends a packed repeated varint field.
func (b *buffer) packed(field int, vs []uint64) {
	n := 0
	for _, v := range vs {
		n++
		for ; v >= 0x80; v >>= 7 {
			n++
		}
	}
	b.key(field, 2)
	b.varint(uint64(n))
	for _, v := range vs {
		b.varint(v)
	}
}
