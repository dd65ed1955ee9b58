package perfunwind

import (
	"bytes"
	"strings"

	"github.com/sframekit/sframekit/symbolize"
)

// Loc is what an address resolves to: its function and, when asked for,
// its source line and the calls inlined there.
type Loc struct {
	// Sym is the function's symbol as the symbol table has it (with a
	// version, "memcpy@@GLIBC_2.14", where the table has one; "name@plt"
	// for a PLT entry), "" when unknown.
	Sym string
	// Name is the name to show: Sym demangled as c++filt prints it (with
	// parameters) for C++ and Rust symbols when the Resolver demangles,
	// without a version suffix; "" when unknown.
	Name string
	// Short is Sym as perf shows it: C++ and Rust names demangled without
	// parameters when the Resolver demangles.
	Short string
	// Unversioned is Short without the symbol's version ("memcpy" for
	// "memcpy@@GLIBC_2.14"), as Name is: the function's one name in
	// folded stacks, which name it as the pprof profile does.
	Unversioned string
	// Offset is the address's distance from the symbol's start.
	Offset uint64
	// File and Line are the source position (the innermost inlined
	// function's, when there are inlined calls), when the Resolver reads
	// lines and the object has them.
	File string
	Line int
	// Inlined are the calls inlined at the address, innermost first, each
	// with its call site in the next one out (see symbolize.Inline), when
	// the Resolver expands them.
	Inlined []symbolize.Inline
	// Func is the function DWARF places the address in, which the calls
	// of Inlined were inlined into (symbolize.Symbolizer.InlinesIn): with
	// them, the frames perf script shows there without --no-inline (see
	// PerfName). Set with Inlined; zero where DWARF has no function.
	Func symbolize.Inline
}

// Resolver names the frames of a Session's stacks: each address of each
// file is looked up once (symbols, DWARF lines and inlined calls through
// a symbolize.Symbolizer that loads each file once), then answered from
// a cache. It is not safe for concurrent use.
type Resolver struct {
	// Demangle makes Name and Short the demangled forms of C++ and Rust
	// symbols.
	Demangle bool
	// Source fills File and Line.
	Source bool
	// Inlines fills Inlined (and File and Line).
	Inlines bool
	// NameOnly leaves Short and Unversioned undemangled (as without
	// Demangle), for callers that show Name alone, such as a pprof
	// profile: demangling a C++ name in perf's form, without parameters,
	// parses it a second time, and cc1plus's 2,650 sampled functions
	// took a tenth of naming and writing a profile that way. Set it
	// before the first Resolve.
	NameOnly bool

	s   *Session
	sym *symbolize.Symbolizer
	// kern caches the names of kernel addresses: at most maxKernAddrs
	// (65,536) of them, emptied when full, as the Session's kernPCs is:
	// a continuous profiler's Resolver lives as long as it runs, and
	// the kernel's sampled addresses have no end.
	kern map[uint64]*Loc
	// names has the Name, Short and Unversioned of each symbol name,
	// copies: a file's names are substrings of one string, all its
	// names' (symbolize), which a name kept here after the file was
	// forgotten (Session.Sweep) would keep whole.
	names map[string][3]string
	plts  map[*File]*pltTable
	// cacheSet: the symbolizer was given the session's build-ID cache.
	cacheSet bool
}

// NewResolver returns a Resolver for the files of s, demangling.
func NewResolver(s *Session) *Resolver {
	sym := symbolize.New()
	sym.PerfNames = true // name functions as perf does, for comparison
	sym.DebugDirs = s.debugDirs()
	return &Resolver{Demangle: true, s: s, sym: sym, kern: map[uint64]*Loc{}, names: map[string][3]string{}, plts: map[*File]*pltTable{}}
}

// Close releases the symbolizer's files.
func (r *Resolver) Close() error { return r.sym.Close() }

// Symbolizer returns the symbolizer the Resolver reads files with.
func (r *Resolver) Symbolizer() *symbolize.Symbolizer { return r.sym }

// unknown is the Loc of addresses nothing is known of.
var unknown = &Loc{}

// Resolve returns what the runtime address pc of mapping m (nil: none)
// is: its function, and line and inlined calls as the Resolver is set to
// find them. The Loc is shared: do not modify it.
func (r *Resolver) Resolve(m *Mapping, pc uint64) *Loc {
	switch {
	case m == nil:
		return unknown
	case m.Kernel:
		return r.kernel(pc)
	case m.jit != nil:
		return m.jit.resolve(pc)
	case m.File == nil || m.File.key == "":
		return unknown
	}
	f := m.File
	addr := m.ELFAddr(pc)
	if l, ok := f.locs[addr]; ok {
		return l
	}
	l := r.lookup(f, addr)
	f.locs[addr] = l
	return l
}

func (r *Resolver) lookup(f *File, addr uint64) *Loc {
	if !r.cacheSet {
		// Known once the recording's header is read (Session.adopt),
		// which is after NewResolver and before the first frame.
		r.sym.BuildIDCache, r.cacheSet = r.s.buildIDDir, true
	}
	if f.image != nil {
		// The vDSO: known to the symbolizer under its key.
		r.sym.Register(f.key, bytes.NewReader(f.image))
	}
	var s symbolize.Symbol
	var ok bool
	if r.Source || r.Inlines {
		s, ok = r.sym.Lookup(f.key, addr)
	} else {
		s, ok = r.sym.LookupFunc(f.key, addr)
	}
	var l Loc
	if ok {
		l.Sym, l.Offset = s.Name, s.Offset
		if s.Line > 0 {
			l.File, l.Line = s.File, s.Line
		}
	}
	if name, start, ok := r.plt(f, addr); ok && (l.Sym == "" || start > s.Start) {
		l.Sym, l.Offset = name, addr-start
	}
	if l.Sym != "" {
		d := r.demangled(l.Sym)
		l.Name, l.Short, l.Unversioned = d[0], d[1], d[2]
	}
	if r.Inlines && f.image == nil {
		// perf runs addr2line on files only, not on the vDSO, whose
		// frames it names by its own symbol even where addr2line
		// prefers an alias (clock_gettime for __vdso_clock_gettime).
		l.Inlined, l.Func = r.sym.InlinesIn(f.key, addr)
	}
	if l.Sym == "" && l.File == "" && l.Inlined == nil {
		return unknown
	}
	// From the file's own blocks: a Loc keeps its file's names (and
	// lines), and a block shared with other files' Locs would keep them
	// after the file was forgotten, while any of the others lived. The
	// blocks grow with the file's addresses, so that a file of few costs
	// little.
	p := f.slab.New(min(128, 8+len(f.locs)))
	*p = l
	return p
}

// PerfName returns the name perf script gives the inlined call or
// function in (of a Loc's Inlined or Func) when it shows inlined calls:
// addr2line's (the linkage name, else the plain one, "??" for none),
// demangled as Short is. perf shows a frame named as the symbol's Short
// as the symbol itself, "NAME (DSO)", any other as "NAME (inlined)": for
// glibc's __libc_start_main@@GLIBC_2.34, "__libc_start_main_impl
// (inlined)".
func (r *Resolver) PerfName(in symbolize.Inline) string {
	switch {
	case in.Linkage != "":
		return r.demangled(in.Linkage)[1]
	case in.Name != "":
		return in.Name
	}
	return "??"
}

// demangled returns the display and perf forms of the symbol name sym,
// and the perf form without a version. This is the one place that
// strips symbol versions.
func (r *Resolver) demangled(sym string) [3]string {
	if d, ok := r.names[sym]; ok {
		return d
	}
	sym = strings.Clone(sym) // see Resolver.names
	base := sym
	if i := strings.IndexByte(base, '@'); i > 0 && !strings.HasSuffix(base, "@plt") {
		base = base[:i] // "memcpy@@GLIBC_2.14"
	}
	d := [3]string{base, sym, base}
	if r.Demangle {
		name, suffix := sym, ""
		if strings.HasSuffix(name, "@plt") {
			name, suffix = strings.TrimSuffix(name, "@plt"), "@plt"
		}
		d[0] = symbolize.Demangle(base)
		if r.NameOnly {
			r.names[sym] = d
			return d
		}
		if short := demangleShort(name); short != "" {
			d[1] = short + suffix
		}
		// Most names have no version: their short form is the one above.
		if unv := strings.TrimSuffix(base, "@plt"); unv == name {
			d[2] = d[1]
		} else if short := demangleShort(unv); short != "" {
			d[2] = short + suffix
		}
	}
	r.names[sym] = d
	return d
}

// demangleShort demangles a C++ or Rust name as perf shows it, without
// parameters, or returns "" for a name that is not mangled.
func demangleShort(name string) string {
	if len(name) < 2 || name[0] != '_' || (name[1] != 'Z' && name[1] != 'R') {
		return ""
	}
	if d := symbolize.DemangleShort(name); d != name {
		return d
	}
	return ""
}

// kernel resolves a kernel address from kallsyms.
func (r *Resolver) kernel(pc uint64) *Loc {
	if l, ok := r.kern[pc]; ok {
		return l
	}
	l := unknown
	if start, name, _, ok := r.s.kernelSyms().lookup(pc); ok {
		l = &Loc{Sym: name, Name: name, Short: name, Unversioned: name, Offset: pc - start}
	}
	if len(r.kern) >= maxKernAddrs {
		clear(r.kern)
	}
	r.kern[pc] = l
	return l
}
