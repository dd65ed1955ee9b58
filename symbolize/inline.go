package symbolize

import (
	"cmp"
	"debug/dwarf"
	"slices"
)

// Inline is one level of inlining at an address: the function inlined,
// and where it was inlined into its caller.
type Inline struct {
	// Name is the inlined function's name (demangled from its linkage
	// name for C++), "" if DWARF does not say.
	Name string
	// Linkage is the linkage name Name was demangled from, "" when DWARF
	// gave none (Name is then its plain name): what addr2line -f prints,
	// and perf then demangles its own way.
	Linkage string
	// File and Line are the call site, in the caller, that the compiler
	// replaced by the function's body; "" and 0 when unknown.
	File string
	Line int
}

// maxInlineDepth bounds the nesting followed, against cyclic or absurd
// DWARF; real code nests a few levels.
const maxInlineDepth = 64

// Inlines returns the calls inlined at addr (an address in the object's
// own address space) of the object at path, innermost first, from the
// DWARF of the object or its separate debug file: the functions gdb and
// eu-stack -i show as frames of their own. It returns nil when addr is in
// no inlined call or there is no DWARF.
func (s *Symbolizer) Inlines(path string, addr uint64) []Inline {
	calls, _ := s.InlinesIn(path, addr)
	return calls
}

// InlinesIn returns what Inlines does, and the function whose code holds
// addr: the subprogram DWARF places it in, which the calls were inlined
// into (Name and Linkage set, File and Line not); where DWARF has none
// (no DWARF, or code written in assembly), the function addr2line names
// from the symbol table (symtabFunc); a zero Inline when neither knows
// one. Those are the frames addr2line -f -i prints, which perf script
// shows.
func (s *Symbolizer) InlinesIn(path string, addr uint64) ([]Inline, Inline) {
	m := s.get(path, nil)
	if m.err != nil || m.loadSyms() != nil {
		return nil, Inline{}
	}
	m.linesOnce.Do(m.buildLines)
	var calls []Inline
	var fn Inline
	if m.dw != nil {
		m.inlMu.Lock()
		calls, fn = m.inlines(addr)
		m.inlMu.Unlock()
	}
	if fn == (Inline{}) {
		fn = m.symtabFunc(addr)
	}
	return calls, fn
}

// symtabFunc returns the function addr2line names at addr from the
// symbol table (symtabName), as an Inline.
func (m *module) symtabFunc(addr uint64) Inline {
	name, _, ok := m.symtabName(addr)
	if !ok {
		return Inline{}
	}
	return symtabInline(name)
}

// symtabName returns the name addr2line gives the function at addr from
// the symbol table, and its start: lookupFunc's symbol or, where
// addr2line prefers another of the names at its start, that one
// (funcSyms' a2l): in a Rust program built without debug information,
// <u64 as Display>::fmt for the code that perf and gdb name by its alias
// <usize as Display>::fmt.
func (m *module) symtabName(addr uint64) (name string, start uint64, ok bool) {
	s, ok := m.lookupFunc(addr)
	if !ok {
		return "", 0, false
	}
	if i, found := slices.BinarySearchFunc(m.a2l, s.Start, func(e sym, start uint64) int {
		return cmp.Compare(e.start, start)
	}); found {
		return symName(m.a2l[i].name), s.Start, true
	}
	return s.Name, s.Start, true
}

// symtabInline is the Inline of a function named by its symbol name.
func symtabInline(name string) Inline {
	in := Inline{Name: Demangle(name)}
	if in.Name != name {
		in.Linkage = name
	}
	return in
}

func (m *module) inlines(addr uint64) (calls []Inline, fn Inline) {
	dw := m.dw
	r := dw.Reader()
	cu, err := r.SeekPC(addr)
	if err != nil || cu == nil || !cu.Children {
		return nil, Inline{}
	}
	files := m.cuFiles[cu.Offset]
	lang, _ := cu.Val(dwarf.AttrLanguage).(int64)
	var fnLow uint64 // the subprogram's first address, as addr2line takes it
	// Walk down the DIEs containing addr: a subprogram, then lexical
	// blocks and inlined subroutines, recording the latter outermost
	// first. Entries that do not contain addr are skipped whole. Until
	// the subprogram is found, namespaces and modules are entered, as
	// addr2line does: rustc (and clang, for C++ functions in a
	// namespace) writes subprograms inside them, which have no range of
	// their own; open counts those entered, whose ends go on with their
	// siblings.
	var chain []Inline
	inFunc, open := false, 0
	for len(chain) < maxInlineDepth {
		e, err := r.Next()
		if err != nil || e == nil {
			break
		}
		if e.Tag == 0 {
			// The end of a sibling list: of a namespace entered, or of
			// the unit, or of the children of the innermost entry
			// containing addr.
			if !inFunc && open > 0 {
				open--
				continue
			}
			break
		}
		switch e.Tag {
		case dwarf.TagSubprogram, dwarf.TagLexDwarfBlock, dwarf.TagInlinedSubroutine:
		case dwarf.TagNamespace, dwarf.TagModule:
			if !inFunc {
				if e.Children {
					open++
				}
				continue
			}
			r.SkipChildren()
			continue
		default:
			if e.Children {
				r.SkipChildren()
			}
			continue
		}
		size, ok := rangeHolding(dw, e, addr)
		if !ok {
			if e.Children {
				r.SkipChildren()
			}
			continue
		}
		if e.Tag == dwarf.TagSubprogram {
			// The innermost one, for GNU C's nested functions.
			fn.Name, fn.Linkage = m.originName(e, 0)
			if rs, err := dw.Ranges(e); err == nil && len(rs) > 0 {
				fnLow = rs[0][0]
			}
			inFunc = true
		}
		if e.Tag == dwarf.TagInlinedSubroutine {
			var in Inline
			in.Name, in.Linkage = m.originName(e, 0)
			if f, ok := e.Val(dwarf.AttrCallFile).(int64); ok && f >= 0 && f < int64(len(files)) && files[f] != noFile {
				in.File = m.files[files[f]]
			}
			if l, ok := e.Val(dwarf.AttrCallLine).(int64); ok && l > 0 {
				in.Line = int(l)
			}
			chain = append(chain, in)
		}
		if !e.Children {
			if e.Tag == dwarf.TagSubprogram {
				fn = m.lastAlias(r, fn, addr, size)
			}
			break // the innermost entry containing addr
		}
	}
	if len(chain) == 0 && fn.Linkage == "" && fn.Name != "" && !plainNames(lang) {
		// addr2line (bfd's _bfd_dwarf2_find_nearest_line) takes a plain
		// DWARF name for a linkage name only in the languages of
		// plainNames; in others it names the function by the symbol
		// that starts where it does: Go's runtime.mstart.abi0 (DWARF:
		// runtime.mstart), a C++ extern "C" function's clone
		// cfun.constprop.0 (DWARF: cfun). Where inlined calls are, the
		// innermost is renamed instead if it starts there: not done
		// here (bfd reads none of Go's; C++'s and Rust's have linkage
		// names).
		if name, start, ok := m.symtabName(addr); ok && start == fnLow {
			fn = symtabInline(name)
		}
	}
	// Innermost first.
	for i, j := 0, len(chain)-1; i < j; i, j = i+1, j-1 {
		chain[i], chain[j] = chain[j], chain[i]
	}
	return chain, fn
}

// plainNames reports whether addr2line takes the plain names (DW_AT_name)
// of DWARF in the language lang (DW_AT_language) as linkage names: those
// binutils 2.40's mangle_style gives no demangling style (C, assembler,
// and a few others).
func plainNames(lang int64) bool {
	switch lang {
	case 0x1, 0x2, 0xc, 0x1d, 0x2c, // C89, C, C99, C11, C17
		0x5, 0x6, 0x7, 0x9, 0xf, 0x12, // Cobol74, Cobol85, Fortran77, Pascal83, PL/I, UPC
		0x8001, 0x8765: // MIPS assembler (gas), GNU UPC
		return true
	}
	return false
}

// lastAlias returns the function holding addr among fn (the subprogram
// just read from r, without children) and the run of subprograms without
// children that follow it, as addr2line picks it: of those holding addr,
// the one with the smallest range, the last of equals. The assembler
// writes an entry for each of a function's names (glibc's
// __memmove_avx512_unaligned_erms, then __memcpy_avx512_unaligned_erms,
// over the same code; other functions may come between), and addr2line
// names the last: in libc's debug file, the second of each of 324 pairs.
// The run ends at the first other entry, or after maxAliasRun entries.
func (m *module) lastAlias(r *dwarf.Reader, fn Inline, addr uint64, size uint64) Inline {
	for range maxAliasRun {
		e, err := r.Next()
		if err != nil || e == nil || e.Tag != dwarf.TagSubprogram || e.Children {
			return fn
		}
		if n, ok := rangeHolding(m.dw, e, addr); ok && n <= size {
			size = n
			fn.Name, fn.Linkage = m.originName(e, 0)
		}
	}
	return fn
}

// maxAliasRun bounds the entries lastAlias reads past the one found: an
// assembler's unit holds a few dozen functions.
const maxAliasRun = 256

// rangeHolding returns the size of the range of e that holds addr, and
// whether one does.
func rangeHolding(dw *dwarf.Data, e *dwarf.Entry, addr uint64) (uint64, bool) {
	rs, err := dw.Ranges(e)
	if err != nil {
		return 0, false
	}
	for _, r := range rs {
		if addr >= r[0] && addr < r[1] {
			return r[1] - r[0], true
		}
	}
	return 0, false
}

// originName is the name of e, or of the entry its abstract origin or
// specification points to (inlined subroutines carry no name of their
// own), and the linkage name it was demangled from ("" for a plain name).
// A linkage name comes first, as in addr2line.
func (m *module) originName(e *dwarf.Entry, hops int) (name, linkage string) {
	if n, ok := e.Val(dwarf.AttrLinkageName).(string); ok && n != "" {
		return Demangle(n), n
	}
	if n, ok := e.Val(dwarf.AttrName).(string); ok && n != "" {
		return n, ""
	}
	if hops >= 8 {
		return "", ""
	}
	for _, a := range []dwarf.Attr{dwarf.AttrAbstractOrigin, dwarf.AttrSpecification} {
		off, ok := e.Val(a).(dwarf.Offset)
		if !ok {
			continue
		}
		r := m.dw.Reader()
		r.Seek(off)
		if o, err := r.Next(); err == nil && o != nil {
			return m.originName(o, hops+1)
		}
	}
	return "", ""
}
