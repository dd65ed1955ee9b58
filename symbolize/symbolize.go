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
	// (see better), so that output compares with perf's. Set before the
	// first lookup.
	PerfNames bool

	mu   sync.Mutex
	mods map[string]*module
}

// New returns a Symbolizer searching DefaultDebugDir for debug files.
func New() *Symbolizer {
	return &Symbolizer{DebugDirs: []string{DefaultDebugDir}, mods: map[string]*module{}}
}

// module is one loaded object.
type module struct {
	once sync.Once
	err  error

	src    func() (*elf.File, error) // opens the object (Register or path)
	syms   []sym
	debug  string      // separate debug file used, if any
	dwFile *elf.File   // file whose DWARF the line index is built from; closed after
	execs  [][2]uint64 // executable section ranges, for line sequences

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

func (s *Symbolizer) get(key string, src func() (*elf.File, error)) *module {
	s.mu.Lock()
	if s.mods == nil {
		s.mods = map[string]*module{}
	}
	m := s.mods[key]
	if m == nil {
		if src == nil {
			src = func() (*elf.File, error) { return elf.Open(key) }
		}
		m = &module{src: src}
		s.mods[key] = m
	}
	dirs, perf := s.DebugDirs, s.PerfNames
	s.mu.Unlock()
	m.once.Do(func() { m.err = m.load(key, dirs, perf) })
	return m
}

// Register makes the ELF image readable through r known under name, for
// objects without a file such as the vDSO (read from the target's memory):
// later lookups of name use it. r must stay readable while the Symbolizer
// is used. Registering a name already loaded does nothing.
func (s *Symbolizer) Register(name string, r io.ReaderAt) error {
	m := s.get(name, func() (*elf.File, error) { return elf.NewFile(r) })
	return m.err
}

// Forget drops the cached object loaded for path, for example after the
// file was rebuilt.
func (s *Symbolizer) Forget(path string) {
	s.mu.Lock()
	m := s.mods[path]
	delete(s.mods, path)
	s.mu.Unlock()
	if m != nil {
		m.once.Do(func() {})
		m.linesOnce.Do(func() {})
		m.close()
	}
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
	if m.err != nil {
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
	if m.err != nil {
		return Symbol{}, false
	}
	return m.lookupFunc(addr)
}

// lookupFunc picks the function symbol with the greatest start <= addr
// whose size covers addr; a symbol without size covers everything up to
// the next symbol.
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
		return Symbol{}, false
	}
	pick := -1
	if syms[i].size == 0 || addr-syms[i].start < syms[i].size {
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
		return Symbol{}, false
	}
	s := &syms[pick]
	return Symbol{Name: s.name, Start: s.start, Size: s.size, Offset: addr - s.start}, true
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

// load reads the symbols of the object and finds its DWARF.
func (m *module) load(name string, debugDirs []string, perfNames bool) error {
	f, err := m.src()
	if err != nil {
		return fmt.Errorf("symbolize: %s: %w", name, err)
	}
	for _, s := range f.Sections {
		if s.Flags&elf.SHF_EXECINSTR != 0 && s.Size > 0 {
			m.execs = append(m.execs, [2]uint64{s.Addr, s.Addr + s.Size})
		}
	}

	var dbg *elf.File
	if path := m.debugFile(f, name, debugDirs); path != "" {
		if d, err := elf.Open(path); err == nil {
			dbg = d
			m.debug = path
		}
	}

	// Symbols: the debug file's .symtab, else ours, else .dynsym.
	var cs []cand
	if dbg != nil {
		cs = readFuncSyms(dbg, elf.SHT_SYMTAB)
	}
	if len(cs) == 0 {
		cs = readFuncSyms(f, elf.SHT_SYMTAB)
	}
	if len(cs) == 0 {
		cs = readFuncSyms(f, elf.SHT_DYNSYM)
	}
	pick := better
	if perfNames {
		pick = perfBetter
	}
	m.syms = funcSyms(cs, pick)

	// DWARF: the debug file's, else ours; read on the first line lookup.
	switch {
	case dbg != nil && dbg.Section(".debug_info") != nil:
		m.dwFile = dbg
		f.Close()
	case f.Section(".debug_info") != nil:
		m.dwFile = f
		if dbg != nil {
			dbg.Close()
		}
	default:
		f.Close()
		if dbg != nil {
			dbg.Close()
		}
	}
	if len(m.syms) == 0 && m.dwFile == nil {
		return fmt.Errorf("symbolize: %s: no symbols and no DWARF", name)
	}
	return nil
}

// cand is a function symbol competing for its start address.
type cand struct {
	sym
	bind  elf.SymBind
	label bool // an untyped symbol in code
}

// readFuncSyms returns the function symbols of f's first section of type
// typ. It reads the table directly rather than through (*elf.File).Symbols,
// which builds a string for every symbol of every kind: a libc debug
// file's .symtab has 10,000 entries, and only its functions are wanted.
func readFuncSyms(f *elf.File, typ elf.SectionType) []cand {
	var sec *elf.Section
	for _, s := range f.Sections {
		if s.Type == typ {
			sec = s
			break
		}
	}
	if sec == nil || int(sec.Link) >= len(f.Sections) || sec.Link == 0 {
		return nil
	}
	data, err := sec.Data()
	if err != nil {
		return nil
	}
	strb, err := f.Sections[sec.Link].Data()
	if err != nil {
		return nil
	}
	// One string for the whole table: names are substrings of it, not an
	// allocation each.
	strs := string(strb)
	bo := f.ByteOrder
	is64 := f.Class == elf.ELFCLASS64
	size := 16
	if is64 {
		size = 24
	}
	var out []cand
	for off := size; off+size <= len(data); off += size { // entry 0 is null
		e := data[off : off+size]
		var name uint32
		var info uint8
		var shndx uint16
		var value, sz uint64
		name = bo.Uint32(e)
		if is64 {
			info, shndx = e[4], bo.Uint16(e[6:])
			value, sz = bo.Uint64(e[8:]), bo.Uint64(e[16:])
		} else {
			value, sz = uint64(bo.Uint32(e[4:])), uint64(bo.Uint32(e[8:]))
			info, shndx = e[12], bo.Uint16(e[14:])
		}
		t := elf.ST_TYPE(info)
		// Labels (untyped symbols) in code name what they start, as
		// perf and gdb show them: _start in ld.so, entry points written
		// in assembly.
		label := t == elf.STT_NOTYPE && int(shndx) < len(f.Sections) && f.Sections[shndx].Flags&elf.SHF_EXECINSTR != 0
		if (t != elf.STT_FUNC && t != elf.STT_GNU_IFUNC && !label) || elf.SectionIndex(shndx) == elf.SHN_UNDEF || value == 0 {
			continue
		}
		if int(name) >= len(strs) {
			continue
		}
		n := strings.IndexByte(strs[name:], 0)
		if n <= 0 {
			continue
		}
		nm := strs[name : int(name)+n]
		if label && (nm[0] == '$' || strings.HasPrefix(nm, ".L")) {
			continue // AArch64 and ARM mapping symbols, assembler locals
		}
		out = append(out, cand{sym{value, sz, nm}, elf.ST_BIND(info), label})
	}
	return out
}

// better reports whether a should name the address rather than b (same
// start): a function over a label, then a sized symbol over an unsized one, then global over weak over
// local, then the name with fewer leading underscores, then the shorter,
// then the first in alphabetical order.
func better(a, b *cand) bool {
	if a.label != b.label {
		return !a.label
	}
	if (a.size > 0) != (b.size > 0) {
		return a.size > 0
	}
	rank := func(b elf.SymBind) int {
		switch b {
		case elf.STB_GLOBAL:
			return 0
		case elf.STB_WEAK:
			return 1
		}
		return 2
	}
	if ra, rb := rank(a.bind), rank(b.bind); ra != rb {
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

// funcSyms sorts the candidates by start and keeps the best one per
// start, as pick (better or perfBetter) says; candidates of equal start
// are offered in table order. Sorting on the address alone keeps the sort
// cheap; the full order is applied only within runs of equal starts.
func funcSyms(cs []cand, pick func(a, b *cand) bool) []sym {
	order := sortedByStart(cs)
	out := make([]sym, 0, len(cs))
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
// When starts fit in 44 bits and indexes in 20 (every user-space object),
// start and index are packed into one integer so that the sort compares
// plain integers; otherwise it sorts with a comparison function.
func sortedByStart(cs []cand) []int {
	const idxBits = 20
	order := make([]int, len(cs))
	packable := len(cs) < 1<<idxBits
	for i := range cs {
		if cs[i].start >= 1<<(64-idxBits) {
			packable = false
		}
	}
	if packable {
		keys := make([]uint64, len(cs))
		for i := range cs {
			keys[i] = cs[i].start<<idxBits | uint64(i)
		}
		slices.Sort(keys)
		for i, k := range keys {
			order[i] = int(k & (1<<idxBits - 1))
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
	dw, err := m.dwFile.DWARF()
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

// debugFile finds a separate debug file for f: by build ID under each
// debug dir, then by .gnu_debuglink next to the object, in its .debug
// subdirectory, and under each debug dir.
func (m *module) debugFile(f *elf.File, name string, debugDirs []string) string {
	id := buildID(f)
	if len(id) >= 2 {
		h := hex.EncodeToString(id)
		for _, d := range debugDirs {
			p := filepath.Join(d, ".build-id", h[:2], h[2:]+".debug")
			if sameBuildID(p, id) {
				return p
			}
		}
	}
	link, crc, ok := debugLink(f)
	if !ok || !filepath.IsAbs(name) {
		return ""
	}
	dir := filepath.Dir(name)
	cands := []string{filepath.Join(dir, link), filepath.Join(dir, ".debug", link)}
	for _, d := range debugDirs {
		cands = append(cands, filepath.Join(d, dir, link))
	}
	self, _ := os.Stat(name)
	for _, c := range cands {
		st, err := os.Stat(c)
		if err != nil || (self != nil && os.SameFile(self, st)) {
			continue
		}
		if len(id) > 0 {
			if sameBuildID(c, id) {
				return c
			}
			continue
		}
		if fileCRC(c) == crc {
			return c
		}
	}
	return ""
}

// buildID returns the NT_GNU_BUILD_ID of f, or nil.
func buildID(f *elf.File) []byte {
	for _, s := range f.Sections {
		if s.Type != elf.SHT_NOTE {
			continue
		}
		data, err := s.Data()
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

func sameBuildID(path string, id []byte) bool {
	f, err := elf.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	return bytes.Equal(buildID(f), id)
}

// debugLink parses .gnu_debuglink: a file name, padding to 4, and the CRC32
// of the debug file.
func debugLink(f *elf.File) (string, uint32, bool) {
	s := f.Section(".gnu_debuglink")
	if s == nil {
		return "", 0, false
	}
	data, err := s.Data()
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
	f, err := os.Open(path)
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
