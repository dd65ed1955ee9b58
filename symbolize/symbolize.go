package symbolize

import (
	"bytes"
	"cmp"
	"debug/dwarf"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/sframekit/sframekit/elffile"
	"github.com/sframekit/sframekit/internal/sysfile"
)

// Symbol describes an address.
type Symbol struct {
	// Name is the function containing the address, "" if none is known.
	Name string
	// Start and Size are the function symbol's value and size (Size 0 when
	// the symbol table does not record it).
	Start, Size uint64
	// Offset is the address minus Start.
	Offset uint64
	// File is the source file from the DWARF line table, "" if unknown.
	File string
	// Line is the source line, 0 if unknown.
	Line int
}

// String formats s as "name+0xoff (file:line)", leaving out unknown parts.
func (s Symbol) String() string {
	out := s.Name
	if out == "" {
		out = "??"
	}
	if s.Offset != 0 {
		out += fmt.Sprintf("+%#x", s.Offset)
	}
	if s.File != "" {
		out += fmt.Sprintf(" (%s:%d)", s.File, s.Line)
	}
	return out
}

// DefaultDebugDir is the usual root of separate debug files.
const DefaultDebugDir = "/usr/lib/debug"

// Symbolizer resolves addresses in ELF objects, caching each object.
// It is safe for concurrent use.
type Symbolizer struct {
	// DebugDirs are the roots searched for separate debug files, as
	// <dir>/.build-id/<xx>/<rest>.debug and <dir>/<object's dir>/<debuglink
	// name>. The object's own directory and its .debug subdirectory are
	// always searched for the debuglink name. Set before the first lookup.
	DebugDirs []string
	// PerfNames chooses, among the symbols starting at one address, the
	// one perf names it by (see perfBetter) rather than the one gdb shows
	// (see better), and counts labels in code (untyped symbols, such as
	// ld.so's _start) as symbols of their own, as perf does, so that
	// output compares with perf's. It turns Lazy off. Set before the
	// first lookup.
	PerfNames bool

	// Lazy makes the Symbolizer read no symbol table whole: LookupFuncs
	// then finds the addresses it is given in one pass over the table,
	// keeping only the winners, where otherwise it would sort every
	// function of the object into an index first. That is cheaper for a
	// few lookups per object (a one-shot stack trace), dearer for many
	// (a profiler): set it only for the former, before the first lookup.
	// Results are the same either way.
	Lazy bool

	mu   sync.Mutex
	mods map[string]*module

	scanMu sync.Mutex // one lazy pass at a time: they share scan
	scan   []byte     // the buffer lazy passes read tables through
}

// New returns a Symbolizer searching DefaultDebugDir for debug files.
func New() *Symbolizer {
	return &Symbolizer{DebugDirs: []string{DefaultDebugDir}, mods: map[string]*module{}}
}

// module is one loaded object.
type module struct {
	once sync.Once
	err  error

	src func() (*elffile.File, error) // opens the object (Register or path)

	// symMu guards what loading the symbols sets: a lazy module (opened
	// by a Lazy Symbolizer) reads them on the first lookup that needs the
	// whole table (loadSyms), until then lookups scan f's and dbg's.
	symMu  sync.Mutex
	lazy   bool
	perf   bool          // Symbolizer.PerfNames
	loaded bool          // syms, labels, dwFile and symErr are set
	f, dbg *elffile.File // lazy, not loaded: the object and its debug file (or nil)
	symErr error         // no symbols and no DWARF

	syms   []sym
	labels []sym         // untyped code labels (readTextLabels)
	debug  string        // separate debug file used, if any
	dwFile *elffile.File // file whose DWARF the line index is built from; closed after
	execs  [][2]uint64   // executable section ranges, for line sequences

	linesOnce sync.Once
	lines     []lineRow
	files     []string
	dw        *dwarf.Data // kept after the line index, for Inlines
	inlMu     sync.Mutex  // Inlines' readers are not safe for concurrent use
	linesErr  error
}

// sym is one function symbol.
type sym struct {
	start, size uint64
	name        string
}

// lineRow is one row of the combined line table.
type lineRow struct {
	addr uint64
	file uint32
	line int32
	end  bool // end of a sequence: no line from here on
}

func (s *Symbolizer) get(key string, src func() (*elffile.File, error)) *module {
	s.mu.Lock()
	if s.mods == nil {
		s.mods = map[string]*module{}
	}
	m := s.mods[key]
	if m == nil {
		if src == nil {
			src = func() (*elffile.File, error) { return elffile.Open(key) }
		}
		m = &module{src: src}
		s.mods[key] = m
	}
	dirs, lazy, perf := s.DebugDirs, s.Lazy && !s.PerfNames, s.PerfNames
	s.mu.Unlock()
	m.once.Do(func() { m.err = m.load(key, dirs, lazy, perf) })
	return m
}

// Register makes the ELF image readable through r known under name, for
// objects without a file such as the vDSO (read from the target's memory):
// later lookups of name use it. r must stay readable while the Symbolizer
// is used. Registering a name already loaded does nothing.
func (s *Symbolizer) Register(name string, r io.ReaderAt) error {
	m := s.get(name, func() (*elffile.File, error) {
		f, err := elf.NewFile(r)
		if err != nil {
			return nil, err
		}
		return &elffile.File{File: f}, nil
	})
	return m.err
}

// Err returns why path could not be loaded (nil if it was loaded or was
// never looked up), or why its line table could not be read.
func (s *Symbolizer) Err(path string) error {
	s.mu.Lock()
	m := s.mods[path]
	s.mu.Unlock()
	if m == nil {
		return nil
	}
	m.once.Do(func() {})
	if m.err != nil {
		return m.err
	}
	m.symMu.Lock()
	err := m.symErr
	m.symMu.Unlock()
	if err != nil {
		return err
	}
	return m.linesErr
}

// DebugFile returns the separate debug file used for path, or "".
func (s *Symbolizer) DebugFile(path string) string {
	m := s.get(path, nil)
	return m.debug
}

// Close releases every cached object.
func (s *Symbolizer) Close() error {
	s.mu.Lock()
	mods := s.mods
	s.mods = map[string]*module{}
	s.mu.Unlock()
	for _, m := range mods {
		m.once.Do(func() {})
		m.linesOnce.Do(func() {})
		m.close()
	}
	return nil
}

func (m *module) close() {
	m.symMu.Lock()
	if !m.loaded {
		m.closeFiles()
		m.loaded = true // nothing left to load from
	}
	m.symMu.Unlock()
	if m.dwFile != nil {
		m.dwFile.Close()
		m.dwFile = nil
	}
}

// Lookup returns the function and source position of addr (an address in
// the object's own address space) in the ELF object at path. ok is false
// when neither a function nor a line is known for addr, or the object
// cannot be read (see Err).
func (s *Symbolizer) Lookup(path string, addr uint64) (sym Symbol, ok bool) {
	m := s.get(path, nil)
	if m.err != nil || m.loadSyms() != nil {
		return Symbol{}, false
	}
	sym, ok = m.lookupFunc(addr)
	if file, line, lok := m.lookupLine(addr); lok {
		sym.File, sym.Line = file, line
		ok = true
	}
	return sym, ok
}

// LookupFunc is Lookup without the source position: it never reads the
// DWARF line table.
func (s *Symbolizer) LookupFunc(path string, addr uint64) (Symbol, bool) {
	m := s.get(path, nil)
	if m.err != nil || m.loadSyms() != nil {
		return Symbol{}, false
	}
	return m.lookupFunc(addr)
}

// lookupFunc picks the function symbol with the greatest start <= addr
// whose size covers addr; a symbol without size covers everything up to
// the next symbol, inside its own section (as gdb and eu-addr2line: _fini,
// the last symbol, does not name every address above it).
func (m *module) lookupFunc(addr uint64) (Symbol, bool) {
	syms := m.syms
	lo, hi := 0, len(syms)
	for lo < hi { // first symbol with start > addr
		mid := int(uint(lo+hi) >> 1)
		if syms[mid].start <= addr {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	i := lo - 1
	if i < 0 {
		return m.lookupLabel(addr, 0)
	}
	pick := -1
	if syms[i].size == 0 {
		if m.sameSection(syms[i].start, addr) {
			pick = i
		}
	} else if addr-syms[i].start < syms[i].size {
		pick = i
	} else {
		// An enclosing function before a sized symbol that ends early
		// (nested symbols in hand-written assembly).
		for j := i - 1; j >= 0 && j >= i-64; j-- {
			if syms[j].size > 0 && addr-syms[j].start < syms[j].size {
				pick = j
				break
			}
		}
	}
	if pick < 0 {
		return m.lookupLabel(addr, syms[i].start+syms[i].size)
	}
	s := &syms[pick]
	return Symbol{Name: s.name, Start: s.start, Size: s.size, Offset: addr - s.start}, true
}

// sameSection reports whether addr lies in the executable section holding
// start; true when the file has no section headers to tell.
func (m *module) sameSection(start, addr uint64) bool {
	if len(m.execs) == 0 {
		return true
	}
	for _, r := range m.execs {
		if start >= r[0] && start < r[1] {
			return addr < r[1]
		}
	}
	return false
}

// lookupLine finds the line-table row covering addr.
func (m *module) lookupLine(addr uint64) (string, int, bool) {
	m.linesOnce.Do(m.buildLines)
	rows := m.lines
	lo, hi := 0, len(rows)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if rows[mid].addr <= addr {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	i := lo - 1
	if i < 0 || rows[i].end || rows[i].line <= 0 {
		return "", 0, false
	}
	return m.files[rows[i].file], int(rows[i].line), true
}

// load opens the object and finds its debug file; unless lazy, it also
// reads the symbols and finds the DWARF (loadSyms).
func (m *module) load(name string, debugDirs []string, lazy, perf bool) error {
	f, err := m.src()
	if err != nil {
		return fmt.Errorf("symbolize: %s: %w", name, err)
	}
	for _, s := range f.Sections {
		if s.Flags&elf.SHF_EXECINSTR != 0 && s.Size > 0 {
			m.execs = append(m.execs, [2]uint64{s.Addr, s.Addr + s.Size})
		}
	}

	path, dbg := FindDebugFile(f.File, name, debugDirs)
	if dbg != nil {
		m.debug = path
	}
	m.f, m.dbg, m.lazy, m.perf = f, dbg, lazy, perf
	if lazy {
		return nil
	}
	m.loaded = true
	return m.readSyms(name)
}

// loadSyms reads the symbols of a lazy module not read yet, and returns
// why the module has none (nil when it has).
func (m *module) loadSyms() error {
	if !m.lazy { // set once, by load
		return nil
	}
	m.symMu.Lock()
	defer m.symMu.Unlock()
	if !m.loaded {
		m.loaded = true
		m.symErr = m.readSyms("")
	}
	return m.symErr
}

// closeFiles closes m.f and m.dbg, unless one is the DWARF file.
func (m *module) closeFiles() {
	for _, f := range []*elffile.File{m.f, m.dbg} {
		if f != nil && f != m.dwFile {
			f.Close()
		}
	}
	m.f, m.dbg = nil, nil
}

// readSyms reads the symbols of m.f (and m.dbg) and picks the file whose
// DWARF gives lines; it closes the other files.
func (m *module) readSyms(name string) error {
	f, dbg := m.f, m.dbg
	if f == nil {
		return fmt.Errorf("symbolize: %s: closed", name)
	}
	// Symbols: the debug file's .symtab, else ours, else .dynsym.
	var cs []cand
	if dbg != nil {
		cs, m.labels = readFuncSyms(dbg.File, elf.SHT_SYMTAB, m.perf)
	}
	if len(cs) == 0 {
		cs, m.labels = readFuncSyms(f.File, elf.SHT_SYMTAB, m.perf)
	}
	if len(cs) == 0 {
		cs, _ = readFuncSyms(f.File, elf.SHT_DYNSYM, m.perf)
	}
	pick := better
	if m.perf {
		pick = perfBetter
	}
	m.syms = funcSyms(cs, pick)

	// DWARF: the debug file's, else ours; read on the first line lookup.
	switch {
	case dbg != nil && dbg.Section(".debug_info") != nil:
		m.dwFile = dbg
	case f.Section(".debug_info") != nil:
		m.dwFile = f
	}
	m.closeFiles()
	if len(m.syms) == 0 && m.dwFile == nil {
		return fmt.Errorf("symbolize: %s: no symbols and no DWARF", name)
	}
	return nil
}

// cand is a function symbol competing for its start address.
type cand struct {
	sym
	bind  elf.SymBind
	label bool // an untyped symbol in code (only with PerfNames)
}

// readFuncSyms returns the function symbols of f's first section of type
// typ. It reads the table directly rather than through (*elf.File).Symbols,
// which builds a string for every symbol of every kind: a libc debug
// file's .symtab has 10,000 entries, and only its functions are wanted.
// Memory is what it costs most (each new page is a page fault, and those
// are slow in virtual machines): the table is streamed twice through one
// 64 KB buffer, to count the functions and then to fill a slice of
// exactly that size, and the string table is read straight into the one
// string the names are substrings of.
//
// For a .symtab it also returns the table's untyped code labels (see
// textLabel), sorted by address, from the same pass.
func readFuncSyms(f *elf.File, typ elf.SectionType, labels bool) ([]cand, []sym) {
	var sec *elf.Section
	for _, s := range f.Sections {
		if s.Type == typ {
			sec = s
			break
		}
	}
	if sec == nil || int(sec.Link) >= len(f.Sections) || sec.Link == 0 {
		return nil, nil
	}
	// Compressed tables may expand to at most elffile.MaxDecompressed,
	// and to no more than their stored bytes can hold.
	strsec := f.Sections[sec.Link]
	if strsec.Type == elf.SHT_NOBITS {
		return nil, nil
	}
	symr, err := elffile.SectionReader(sec)
	if err != nil {
		return nil, nil
	}
	strr, err := elffile.SectionReader(strsec)
	if err != nil {
		return nil, nil
	}
	bo := f.ByteOrder
	is64 := f.Class == elf.ELFCLASS64
	size := 16
	if is64 {
		size = 24
	}
	buf := make([]byte, 2730*size) // about 64 KB, whole entries
	var sb strings.Builder
	if strsec.Flags&elf.SHF_COMPRESSED == 0 && strsec.Size < 1<<30 {
		sb.Grow(int(strsec.Size))
	}
	if _, err := io.CopyBuffer(&sb, strr, buf); err != nil {
		return nil, nil
	}
	strs := sb.String()

	// each calls fn with every entry of the table but the null one.
	each := func(fn func(e []byte)) error {
		if _, err := symr.Seek(0, io.SeekStart); err != nil {
			return err
		}
		r := symr
		first := true
		for {
			n, err := io.ReadFull(r, buf)
			n -= n % size
			for off := 0; off < n; off += size {
				if !first {
					fn(buf[off : off+size])
				}
				first = false
			}
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return nil
			}
			if err != nil {
				return err
			}
		}
	}
	// parse decodes an entry; ok is false for what is not a function.
	parse := func(e []byte) (c cand, ok bool) {
		se := decodeSym(bo, is64, e)
		name, info, shndx, value, sz := se.name, se.info, se.shndx, se.value, se.size
		t := elf.ST_TYPE(info)
		// With labels, untyped symbols in code count too, as perf counts
		// them: _start in ld.so, entry points written in assembly.
		label := labels && t == elf.STT_NOTYPE && int(shndx) < len(f.Sections) && f.Sections[shndx].Flags&elf.SHF_EXECINSTR != 0
		if (t != elf.STT_FUNC && t != elf.STT_GNU_IFUNC && !label) || elf.SectionIndex(shndx) == elf.SHN_UNDEF || value == 0 {
			return c, false
		}
		if int(name) >= len(strs) {
			return c, false
		}
		n := strings.IndexByte(strs[name:], 0)
		if n <= 0 {
			return c, false
		}
		nm := strs[name : int(name)+n]
		if label && (nm[0] == '$' || strings.HasPrefix(nm, ".L")) {
			return c, false // AArch64 and ARM mapping symbols, assembler locals
		}
		return cand{sym{value, sz, nm}, elf.ST_BIND(info), label}, true
	}
	count := 0
	var text []sym
	if err := each(func(e []byte) {
		if _, ok := parse(e); ok {
			count++
		}
		if typ == elf.SHT_SYMTAB && len(text) < maxLabels {
			if l, ok := textLabel(f, bo, is64, e, strs); ok {
				text = append(text, l)
			}
		}
	}); err != nil {
		return nil, nil
	}
	sort.Slice(text, func(i, j int) bool { return text[i].start < text[j].start })
	if count == 0 {
		return nil, text
	}
	out := make([]cand, 0, count)
	if err := each(func(e []byte) {
		if c, ok := parse(e); ok && len(out) < count {
			out = append(out, c)
		}
	}); err != nil {
		return nil, text
	}
	return out, text
}

// symEntry is one entry of an ELF symbol table.
type symEntry struct {
	name        uint32 // offset in the string table
	info        uint8
	shndx       uint16
	value, size uint64
}

// decodeSym decodes entry e of a symbol table of 64-bit entries (is64,
// 24 bytes) or 32-bit ones (16 bytes).
func decodeSym(bo binary.ByteOrder, is64 bool, e []byte) symEntry {
	if is64 {
		return symEntry{bo.Uint32(e), e[4], bo.Uint16(e[6:]), bo.Uint64(e[8:]), bo.Uint64(e[16:])}
	}
	return symEntry{bo.Uint32(e), e[12], bo.Uint16(e[14:]), uint64(bo.Uint32(e[4:])), uint64(bo.Uint32(e[8:]))}
}

// better reports whether a should name the address rather than b (same
// start): a sized symbol over an unsized one, then global over weak over
// local, then the name with fewer leading underscores, then the shorter,
// then the first in alphabetical order.
func better(a, b *cand) bool {
	if a.label != b.label { // labels compete only with PerfNames
		return !a.label
	}
	if (a.size > 0) != (b.size > 0) {
		return a.size > 0
	}
	if ra, rb := bindRank(a.bind), bindRank(b.bind); ra != rb {
		return ra < rb
	}
	under := func(s string) int { return len(s) - len(strings.TrimLeft(s, "_")) }
	if ua, ub := under(a.name), under(b.name); ua != ub {
		return ua < ub
	}
	if len(a.name) != len(b.name) {
		return len(a.name) < len(b.name)
	}
	return a.name < b.name
}

// perfBetter is better as perf's choose_best_symbol decides (perf 6.1,
// util/symbol.c): a function over a label, then a sized symbol, then a
// non-weak one, then a global one, then the name with fewer leading
// underscores, then the longer name; on a tie, the first in the table
// stays.
func perfBetter(a, b *cand) bool {
	if a.label != b.label {
		return !a.label
	}
	if (a.size > 0) != (b.size > 0) {
		return a.size > 0
	}
	if wa, wb := a.bind == elf.STB_WEAK, b.bind == elf.STB_WEAK; wa != wb {
		return !wa
	}
	if ga, gb := a.bind == elf.STB_GLOBAL, b.bind == elf.STB_GLOBAL; ga != gb {
		return ga
	}
	under := func(s string) int { return len(s) - len(strings.TrimLeft(s, "_")) }
	if ua, ub := under(a.name), under(b.name); ua != ub {
		return ua < ub
	}
	return len(a.name) > len(b.name)
}

// bindRank orders bindings for better: global, weak, then the others.
func bindRank(b elf.SymBind) int {
	switch b {
	case elf.STB_GLOBAL:
		return 0
	case elf.STB_WEAK:
		return 1
	}
	return 2
}

// funcSyms sorts the candidates by start and keeps the best one per
// start, as pick (better or perfBetter) says; candidates of equal start
// are offered in table order. Sorting on the address alone keeps the sort
// cheap; the full order is applied only within runs of equal starts.
func funcSyms(cs []cand, pick func(a, b *cand) bool) []sym {
	order := sortedByStart(cs)
	n := 0 // distinct starts: the result's exact size
	for i := range order {
		if i == 0 || cs[order[i]].start != cs[order[i-1]].start {
			n++
		}
	}
	out := make([]sym, 0, n)
	for i := 0; i < len(order); {
		best := &cs[order[i]]
		j := i + 1
		for ; j < len(order) && cs[order[j]].start == best.start; j++ {
			if c := &cs[order[j]]; pick(c, best) {
				best = c
			}
		}
		out = append(out, best.sym)
		i = j
	}
	return out
}

// sortedByStart returns the indexes of cs in order of start address.
// When starts fit in 43 bits and indexes in 20 (every user-space object),
// start and index are packed into one integer so that the sort compares
// plain integers, and the keys become the indexes in place; otherwise it
// sorts with a comparison function.
func sortedByStart(cs []cand) []int {
	const idxBits = 20
	packable := len(cs) < 1<<idxBits
	for i := range cs {
		if cs[i].start >= 1<<(63-idxBits) {
			packable = false
		}
	}
	order := make([]int, len(cs))
	if packable {
		for i := range cs {
			order[i] = int(cs[i].start<<idxBits | uint64(i))
		}
		slices.Sort(order) // non-negative: starts have 43 bits
		for i, k := range order {
			order[i] = k & (1<<idxBits - 1)
		}
		return order
	}
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(cs[a].start, cs[b].start) })
	return order
}

// buildLines reads every line table into one index sorted by address.
// Sequences that do not start inside an executable section (functions the
// linker discarded, left at address 0) are dropped.
func (m *module) buildLines() {
	if m.dwFile == nil {
		return
	}
	dw, err := elffile.DWARF(m.dwFile.File)
	m.dwFile.Close()
	m.dwFile = nil
	if err != nil {
		m.linesErr = fmt.Errorf("symbolize: reading DWARF: %w", err)
		return
	}
	m.dw = dw
	files := map[string]uint32{}
	var rows []lineRow
	r := dw.Reader()
	for {
		e, err := r.Next()
		if err != nil {
			m.linesErr = fmt.Errorf("symbolize: reading DWARF units: %w", err)
			break
		}
		if e == nil {
			break
		}
		if e.Tag != dwarf.TagCompileUnit && e.Tag != dwarf.TagPartialUnit {
			r.SkipChildren()
			continue
		}
		r.SkipChildren()
		lr, err := dw.LineReader(e)
		if err != nil {
			m.linesErr = fmt.Errorf("symbolize: line table: %w", err)
			continue
		}
		if lr == nil {
			continue
		}
		var le dwarf.LineEntry
		inSeq, keep := false, false
		for {
			if err := lr.Next(&le); err != nil {
				if err != io.EOF {
					m.linesErr = fmt.Errorf("symbolize: line table: %w", err)
				}
				break
			}
			if !inSeq {
				inSeq = true
				keep = m.inExec(le.Address)
			}
			if keep {
				// Rows the sequence ends at once cover nothing (a
				// function's last row at its end address): drop them, or
				// they would outlive the end in the sorted table.
				for le.EndSequence && len(rows) > 0 && !rows[len(rows)-1].end && rows[len(rows)-1].addr == le.Address {
					rows = rows[:len(rows)-1]
				}
				row := lineRow{addr: le.Address, line: int32(le.Line), end: le.EndSequence}
				if !le.EndSequence && le.File != nil {
					id, ok := files[le.File.Name]
					if !ok {
						id = uint32(len(m.files))
						files[le.File.Name] = id
						m.files = append(m.files, le.File.Name)
					}
					row.file = id
				} else if !le.EndSequence {
					row.line = 0
				}
				rows = append(rows, row)
			}
			if le.EndSequence {
				inSeq = false
			}
		}
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].addr != rows[j].addr {
			return rows[i].addr < rows[j].addr
		}
		return rows[i].end && !rows[j].end
	})
	m.lines = rows
}

func (m *module) inExec(addr uint64) bool {
	if len(m.execs) == 0 {
		return addr != 0
	}
	for _, r := range m.execs {
		if addr >= r[0] && addr < r[1] {
			return true
		}
	}
	return false
}

// FindDebugFile finds the separate debug file of f, the object at path
// name, as gdb does: by build ID under each of debugDirs
// (<dir>/.build-id/<xx>/<rest>.debug), then by .gnu_debuglink next to
// the object, in its .debug subdirectory and under each of debugDirs
// (a name that is not absolute has no directory to search). A candidate
// is taken only if it is a regular file (a FIFO's open would wait for a
// writer) and its build ID is f's (or, without one, its CRC the
// debuglink's). It returns the file's path and the file opened (the
// check opens it anyway; the caller closes it), or "" and nil. Every
// reader of separate debug files (symbols, lines, the unwinder's
// .debug_frame) finds them here.
func FindDebugFile(f *elf.File, name string, debugDirs []string) (string, *elffile.File) {
	id := buildID(f)
	if len(id) >= 2 {
		h := hex.EncodeToString(id)
		for _, d := range debugDirs {
			p := filepath.Join(d, ".build-id", h[:2], h[2:]+".debug")
			if d := openSameBuildID(p, id); d != nil {
				return p, d
			}
		}
	}
	link, crc, ok := debugLink(f)
	if !ok || !filepath.IsAbs(name) {
		return "", nil
	}
	dir := filepath.Dir(name)
	cands := []string{filepath.Join(dir, link), filepath.Join(dir, ".debug", link)}
	for _, d := range debugDirs {
		cands = append(cands, sysfile.Under(d, filepath.Join(dir, link)))
	}
	self, _ := os.Stat(name)
	for _, c := range cands {
		st, err := os.Stat(c)
		if err != nil || !st.Mode().IsRegular() || (self != nil && os.SameFile(self, st)) {
			continue
		}
		if len(id) > 0 {
			if d := openSameBuildID(c, id); d != nil {
				return c, d
			}
			continue
		}
		if fileCRC(c) == crc {
			if d, err := elffile.Open(c); err == nil {
				return c, d
			}
		}
	}
	return "", nil
}

// buildID returns the NT_GNU_BUILD_ID of f, or nil.
func buildID(f *elf.File) []byte {
	for _, s := range f.Sections {
		if s.Type != elf.SHT_NOTE {
			continue
		}
		data, err := elffile.SectionData(f, s, elffile.Unrelocated)
		if err != nil {
			continue
		}
		for len(data) >= 12 {
			namesz := uint64(f.ByteOrder.Uint32(data))
			descsz := uint64(f.ByteOrder.Uint32(data[4:]))
			typ := f.ByteOrder.Uint32(data[8:])
			descOff := 12 + (namesz+3)&^3
			end := descOff + (descsz+3)&^3
			if descOff+descsz > uint64(len(data)) {
				break
			}
			if typ == 3 && namesz == 4 && string(data[12:15]) == "GNU" {
				return data[descOff : descOff+descsz]
			}
			if end > uint64(len(data)) {
				break
			}
			data = data[end:]
		}
	}
	return nil
}

// openSameBuildID opens the ELF file at path if it is a regular file
// (elffile.Open: not a FIFO, whose open would wait for a writer, nor a
// device) and its build ID is id.
func openSameBuildID(path string, id []byte) *elffile.File {
	f, err := elffile.Open(path)
	if err != nil {
		return nil
	}
	if !bytes.Equal(buildID(f.File), id) {
		f.Close()
		return nil
	}
	return f
}

// debugLink parses .gnu_debuglink: a file name, padding to 4, and the CRC32
// of the debug file.
func debugLink(f *elf.File) (string, uint32, bool) {
	s := f.Section(".gnu_debuglink")
	if s == nil {
		return "", 0, false
	}
	data, err := elffile.SectionData(f, s, elffile.Unrelocated)
	if err != nil {
		return "", 0, false
	}
	i := bytes.IndexByte(data, 0)
	if i <= 0 {
		return "", 0, false
	}
	off := (i + 4) &^ 3
	if off+4 > len(data) {
		return "", 0, false
	}
	name := string(data[:i])
	if strings.ContainsRune(name, '/') {
		return "", 0, false
	}
	var crc uint32
	if f.ByteOrder == binary.BigEndian {
		crc = binary.BigEndian.Uint32(data[off:])
	} else {
		crc = binary.LittleEndian.Uint32(data[off:])
	}
	return name, crc, true
}

func fileCRC(path string) uint32 {
	f, err := sysfile.OpenRegular(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	h := crc32.NewIEEE()
	if _, err := io.Copy(h, f); err != nil {
		return 0
	}
	return h.Sum32()
}
