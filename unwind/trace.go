package unwind

import (
	"bytes"
	"cmp"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/symbolize"
)

// Tracer captures the symbolized stacks of every thread of stopped
// targets. It keeps what does not depend on the target's state across
// captures: the unwind tables of each file (Cache) and its symbols
// (Symbolizer), so that each is parsed once. A Tracer serializes its
// captures; it is safe for concurrent use.
type Tracer struct {
	// Cache holds the modules' unwind tables.
	Cache *Cache
	// Sym resolves function names; nil leaves frames unsymbolized.
	Sym *symbolize.Symbolizer
	// MaxDepth bounds each thread's walk (DefaultMaxDepth when 0).
	MaxDepth int
	// Demangle makes Symbolize fill SymFrame.Demangled, as gdb and
	// eu-stack show C++ and Rust names (NewTracer sets it).
	Demangle bool
	// Source makes Symbolize fill SymFrame.File and Line from the
	// modules' DWARF line tables (or their separate debug files), which
	// it then reads: off by default, since that costs more than the rest.
	Source bool
	// Inlines makes Symbolize fill SymFrame.Inlined from the modules'
	// DWARF (and File and Line, as Source does).
	Inlines bool

	mu   sync.Mutex
	vdso bool // the vDSO image is registered with Sym
}

// NewTracer returns a Tracer with an empty cache and a new symbolizer.
func NewTracer() *Tracer {
	return &Tracer{Cache: NewCache(), Sym: symbolize.New(), Demangle: true}
}

// Prefetch starts loading, in the background, the unwind tables and
// symbols of the files at paths (targets.MappedFiles lists a process's
// before attaching), so that Capture and Symbolize find them ready. One
// goroutine loads them, tables first (Capture needs those first): the
// attach is not left waiting for a processor.
func (tr *Tracer) Prefetch(paths []string) {
	go func() {
		tr.Cache.Load(paths)
		if tr.Sym != nil {
			for _, p := range paths {
				tr.Sym.LookupFuncs(p, nil)
			}
		}
	}()
}

// Trace is the stacks of the threads of a target, as captured by Tracer.
type Trace struct {
	PID     int
	Threads []ThreadTrace
	// Termination is the signal the process died of, for a core that
	// says (targets.Core.Termination); nil otherwise.
	Termination *arch.Termination
}

// ThreadTrace is the stack of one thread.
type ThreadTrace struct {
	TID  int
	Name string
	// Frames are innermost first.
	Frames []SymFrame
	// Stop is why the walk ended; Err, for StopMemory and StopNoRule,
	// what caused it.
	Stop Stop
	Err  error
}

// SymFrame is a frame with the function its PC lies in.
type SymFrame struct {
	Frame
	// Func is the function's symbol name, "" when unknown; Offset is the
	// distance of PC from the function's start.
	Func   string
	Offset uint64
	// Demangled is Func demangled (symbolize.Demangle) when Func is a
	// mangled C++ or Rust name and the Tracer's Demangle is set, else "".
	Demangled string
	// File and Line are the source position of the frame's LookupPC (the
	// call, for return addresses, as gdb shows it), when the Tracer's
	// Source is set and the module has a line table; else "" and 0.
	File string
	Line int
	// Inlined are the calls the compiler inlined at the frame's
	// LookupPC, innermost first, when the Tracer's Inlines is set: gdb
	// shows each as a frame of its own. File and Line are then the
	// position in the innermost inlined function, and each Inline's
	// File and Line its call site in the next one out.
	Inlined []symbolize.Inline
}

// Capture unwinds every thread of t, without naming the functions: call
// Symbolize for that, after closing a live target, so that the process
// is stopped only for the unwinding. Memory reads go through a PageCache
// that lives for this capture only.
func (tr *Tracer) Capture(t arch.Target) (*Trace, error) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	mem := NewPageCache(t.Memory())
	tmods := t.Modules()
	if tr.Sym != nil && !tr.Sym.Lazy {
		// Read the symbol tables on the other core while this one loads
		// the unwind tables and unwinds: Symbolize then finds them loaded
		// (the symbolizer loads each file once, whoever asks first). One
		// goroutine: each more would take an OS thread of its own while
		// it waits for a read or for Prefetch's loading. A Lazy
		// symbolizer reads no table whole: there is nothing to overlap
		// but the opening of the files, not worth the goroutine's thread
		// switches and page faults (nor a processor taken from the
		// unwinding while the target is stopped).
		var files []string
		for i := range tmods {
			if f := tmods[i].File; f != "" && !tmods[i].IsVDSO() {
				files = append(files, f)
			}
		}
		go func() {
			for _, f := range files {
				tr.Sym.LookupFuncs(f, nil)
			}
		}()
	}
	mods := tr.Cache.Modules(tmods, mem)
	if a, ok := t.(interface{ AnonCode() []arch.Mapping }); ok {
		mods = appendAnonCode(mods, a.AnonCode())
	}
	u, err := New(t.Arch(), mods)
	if err != nil {
		return nil, err
	}
	u.MaxDepth = tr.MaxDepth
	threads := t.Threads()
	trace := &Trace{PID: t.PID(), Threads: make([]ThreadTrace, 0, len(threads))}
	if c, ok := t.(interface{ Termination() *arch.Termination }); ok {
		trace.Termination = c.Termination()
	}
	var frames []Frame
	ctx := new(Context)
	for i := range threads {
		th := &threads[i]
		var stop Stop
		frames, stop, err = u.Unwind(ctx, &th.Regs, mem, frames[:0])
		tt := ThreadTrace{TID: th.TID, Name: th.Name, Stop: stop, Err: err, Frames: make([]SymFrame, len(frames))}
		for j := range frames {
			tt.Frames[j].Frame = frames[j]
		}
		trace.Threads = append(trace.Threads, tt)
	}
	// The vDSO has no file: its symbols are read from the target's
	// memory, now, while it is readable, and only when a frame needs
	// them (rarely: a thread in clock_gettime or the like).
	if tr.Sym != nil && !tr.vdso && inVDSO(trace) {
		for i := range tmods {
			if tmods[i].IsVDSO() {
				if img, err := arch.ReadImage(mem, &tmods[i]); err == nil {
					tr.vdso = tr.Sym.Register("[vdso]", bytes.NewReader(img)) == nil
				}
			}
		}
	}
	return trace, nil
}

// appendAnonCode returns mods with a module without tables for each of
// code (executable memory of no file: JIT code) that no module covers,
// named by its maps name ("[anon:NAME]") or "[anon]": walks through it
// go on by frame pointers, where they would end at the first frame in
// no known module. The modules' ranges are sorted once, with the
// highest end of each prefix, so that a process's tens of thousands of
// mappings cost a search each, not a pass over the modules.
func appendAnonCode(mods []*Module, code []arch.Mapping) []*Module {
	type span struct{ start, maxEnd uint64 }
	spans := make([]span, len(mods))
	for i, m := range mods {
		spans[i] = span{m.Start, m.End}
	}
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.start, b.start) })
	for i := 1; i < len(spans); i++ {
		spans[i].maxEnd = max(spans[i].maxEnd, spans[i-1].maxEnd)
	}
	for _, c := range code {
		// The modules starting below c's end: one of them reaches past
		// c's start when the highest of their ends does.
		k := sort.Search(len(spans), func(i int) bool { return spans[i].start >= c.End })
		if k > 0 && spans[k-1].maxEnd > c.Start {
			continue
		}
		name := c.Path
		if name == "" {
			name = "[anon]"
		}
		mods = append(mods, &Module{Name: name, Start: c.Start, End: c.End})
	}
	return mods
}

// inVDSO reports whether a frame of trace is in the vDSO.
func inVDSO(trace *Trace) bool {
	for i := range trace.Threads {
		for j := range trace.Threads[i].Frames {
			if m := trace.Threads[i].Frames[j].Module; m != nil && m.File == "[vdso]" {
				return true
			}
		}
	}
	return false
}

// Symbolize names the function of every frame of trace (a no-op when
// Sym is nil). The files are read, not the target's memory: the target
// may be closed already.
func (tr *Tracer) Symbolize(trace *Trace) {
	if tr.Sym == nil {
		return
	}
	if tr.Sym.Lazy && !tr.Source && !tr.Inlines {
		tr.symbolizeByFile(trace)
	} else {
		for i := range trace.Threads {
			fs := trace.Threads[i].Frames
			for j := range fs {
				tr.symbolize(&fs[j])
			}
		}
	}
	if !tr.Demangle {
		return
	}
	var names map[string]string // demangled once per name: recursion repeats them
	for i := range trace.Threads {
		fs := trace.Threads[i].Frames
		for j := range fs {
			sf := &fs[j]
			if sf.Func == "" {
				continue
			}
			d, ok := names[sf.Func]
			if !ok {
				if d = symbolize.Demangle(sf.Func); d == sf.Func {
					d = ""
				}
				if names == nil {
					names = map[string]string{}
				}
				names[sf.Func] = d
			}
			sf.Demangled = d
		}
	}
}

// symbolizeByFile names the frames as symbolize does, with one
// LookupFuncs per file: a Lazy symbolizer then passes over each symbol
// table once for all the frames in it.
func (tr *Tracer) symbolizeByFile(trace *Trace) {
	type batch struct {
		addrs  []uint64
		frames []*SymFrame
	}
	var files []string
	batches := map[string]*batch{}
	for i := range trace.Threads {
		fs := trace.Threads[i].Frames
		for j := range fs {
			sf := &fs[j]
			m := sf.Module
			if m == nil || m.File == "" {
				continue
			}
			b := batches[m.File]
			if b == nil {
				b = &batch{}
				batches[m.File] = b
				files = append(files, m.File)
			}
			b.addrs = append(b.addrs, sf.LookupPC()-m.Bias)
			b.frames = append(b.frames, sf)
		}
	}
	for _, file := range files {
		b := batches[file]
		for k, sym := range tr.Sym.LookupFuncs(file, b.addrs) {
			tr.name(b.frames[k], sym)
		}
	}
}

// name sets the function of sf from sym, what LookupFunc found.
func (tr *Tracer) name(sf *SymFrame, sym symbolize.Symbol) {
	if sym.Name == "" {
		return
	}
	sf.Func = sym.Name
	// Versioned dynamic symbols: "__libc_start_main@@GLIBC_2.34".
	if i := strings.IndexByte(sf.Func, '@'); i > 0 {
		sf.Func = sf.Func[:i]
	}
	sf.Offset = sf.PC - sf.Module.Bias - sym.Start
}

func (tr *Tracer) symbolize(sf *SymFrame) {
	f := &sf.Frame
	m := f.Module
	if m == nil || m.File == "" {
		return
	}
	pc := f.LookupPC()
	lookup := tr.Sym.LookupFunc
	if (tr.Source || tr.Inlines) && !f.Signal {
		lookup = tr.Sym.Lookup
	}
	if tr.Inlines && !f.Signal {
		sf.Inlined = tr.Sym.Inlines(m.File, pc-m.Bias)
	}
	sym, ok := lookup(m.File, pc-m.Bias)
	if ok && sym.Line > 0 {
		sf.File, sf.Line = sym.File, sym.Line
	}
	if ok {
		tr.name(sf, sym)
	}
}

// Complete reports whether the walk reached the outermost frame.
func (t *ThreadTrace) Complete() bool { return t.Stop == StopEnd }
