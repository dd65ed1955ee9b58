package symbolize

import (
	"bytes"
	"debug/dwarf"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
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

	// BuildIDCache is perf's build-ID cache (~/.debug), or "": an object
	// without .symtab of its own nor a debug file is named from the copy
	// perf keeps there for its build ID (<dir>/.build-id/<xx>/<rest>/elf)
	// when that copy has one, as perf names it: a binary stripped after
	// perf recorded an earlier build of the same ID. Set before the
	// first lookup.
	BuildIDCache string

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
	a2l    []sym         // aliases addr2line names instead of syms' (funcSyms)
	labels []sym         // untyped code labels (readTextLabels)
	debug  string        // separate debug file used, if any
	dwFile *elffile.File // file whose DWARF the line index is built from; closed after
	execs  [][2]uint64   // executable section ranges, for line sequences

	linesOnce sync.Once
	lines     []lineRow
	files     []string
	cuFiles   map[dwarf.Offset][]uint32 // per unit: its file entries' names in files (noFile: none)
	dw        *dwarf.Data               // kept after the line index, for Inlines
	inlMu     sync.Mutex                // Inlines' readers are not safe for concurrent use
	linesErr  error
}

// sym is one function symbol. Its name may run on past its end, through
// the rest of the string table (readFuncSyms does not look for the ends
// of names it may never use): symName gives the name itself.
type sym struct {
	start, size uint64
	name        string
}

// symName returns the name of a sym's name field: up to its first NUL,
// or all of it. An empty name names nothing (readFuncSyms cannot drop
// such symbols without reading every name; a linker writes none).
func symName(s string) string {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return s[:i]
	}
	return s
}

// noFile is the index in module.files of a file entry that names none
// (entry 0 before DWARF 5).
const noFile = ^uint32(0)

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
	dirs, cache, lazy, perf := s.DebugDirs, s.BuildIDCache, s.Lazy && !s.PerfNames, s.PerfNames
	s.mu.Unlock()
	m.once.Do(func() { m.err = m.load(key, dirs, cache, lazy, perf) })
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

// Retain releases the cached objects whose names keep rejects, so that a
// long-lived Symbolizer (a continuous profiler's) does not keep the
// objects of programs long gone; a later lookup loads them again.
func (s *Symbolizer) Retain(keep func(name string) bool) {
	s.mu.Lock()
	var gone []*module
	for k, m := range s.mods {
		if !keep(k) {
			gone = append(gone, m)
			delete(s.mods, k)
		}
	}
	s.mu.Unlock()
	for _, m := range gone {
		m.once.Do(func() {})
		m.linesOnce.Do(func() {})
		m.close()
	}
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
	i := sort.Search(len(syms), func(i int) bool { return syms[i].start > addr }) - 1
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
	name := symName(s.name)
	if name == "" {
		return Symbol{}, false
	}
	return Symbol{Name: name, Start: s.start, Size: s.size, Offset: addr - s.start}, true
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
	i := sort.Search(len(rows), func(i int) bool { return rows[i].addr > addr }) - 1
	if i < 0 || rows[i].end || rows[i].line <= 0 {
		return "", 0, false
	}
	return m.files[rows[i].file], int(rows[i].line), true
}

// load opens the object and finds its debug file (or, for an object
// without symbols, perf's copy in cache: see Symbolizer.BuildIDCache);
// unless lazy, it also reads the symbols and finds the DWARF (loadSyms).
func (m *module) load(name string, debugDirs []string, cache string, lazy, perf bool) error {
	f, err := m.src()
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	for _, s := range f.Sections {
		if s.Flags&elf.SHF_EXECINSTR != 0 && s.Size > 0 {
			m.execs = append(m.execs, [2]uint64{s.Addr, s.Addr + s.Size})
		}
	}

	path, dbg := FindDebugFile(f.File, name, debugDirs)
	if dbg == nil && cache != "" && f.SectionByType(elf.SHT_SYMTAB) == nil {
		path, dbg = cachedCopy(f.File, cache)
	}
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
		return fmt.Errorf("%s: closed", name)
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
	m.syms, m.a2l = funcSyms(cs, pick)

	// DWARF: the debug file's, else ours; read on the first line lookup.
	switch {
	case dbg != nil && dbg.Section(".debug_info") != nil:
		m.dwFile = dbg
	case f.Section(".debug_info") != nil:
		m.dwFile = f
	}
	m.closeFiles()
	if len(m.syms) == 0 && m.dwFile == nil {
		return fmt.Errorf("%s: no symbols and no DWARF", name)
	}
	return nil
}

// buildLines reads every line table into one index sorted by address.
// Sequences that do not start inside an executable section (functions the
// linker discarded, left at address 0) are dropped.
func (m *module) buildLines() {
	if m.dwFile == nil {
		return
	}
	df := m.dwFile
	m.dwFile = nil
	defer df.Close() // open until the line tables' string sections are read, on need
	dw, err := elffile.DWARF(df.File)
	var secs *lineSections
	var raw bool
	if err == nil {
		secs, raw = readLineSections(df.File)
	}
	if err != nil {
		m.linesErr = fmt.Errorf("reading DWARF: %w", err)
		return
	}
	m.dw = dw
	m.cuFiles = map[dwarf.Offset][]uint32{}
	files := map[string]uint32{}
	fileID := func(name string) uint32 {
		id, ok := files[name]
		if !ok {
			id = uint32(len(m.files))
			files[name] = id
			m.files = append(m.files, name)
		}
		return id
	}
	// The names of each unit's file entries, as libdw forms them (see
	// lineFileNames), by the entries debug/dwarf hands out.
	names := map[*dwarf.LineFile]uint32{}
	var rows []lineRow
	r := dw.Reader()
	for {
		e, err := r.Next()
		if err != nil {
			m.linesErr = fmt.Errorf("reading DWARF units: %w", err)
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
			m.linesErr = fmt.Errorf("line table: %w", err)
			continue
		}
		if lr == nil {
			continue
		}
		clear(names)
		var rawNames []string
		if raw {
			off, _ := e.Val(dwarf.AttrStmtList).(int64)
			dir, hasDir := e.Val(dwarf.AttrCompDir).(string)
			rawNames = lineFileNames(secs, off, dir, hasDir)
		}
		lfs := lr.Files()
		ids := make([]uint32, len(lfs))
		for i, lf := range lfs {
			switch {
			case lf == nil:
				ids[i] = noFile
				continue
			case len(rawNames) == len(lfs):
				ids[i] = fileID(rawNames[i])
			default:
				ids[i] = fileID(lf.Name)
			}
			names[lf] = ids[i]
		}
		m.cuFiles[e.Offset] = ids
		var le dwarf.LineEntry
		inSeq, keep := false, false
		for {
			if err := lr.Next(&le); err != nil {
				if err != io.EOF {
					m.linesErr = fmt.Errorf("line table: %w", err)
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
					id, ok := names[le.File]
					if !ok {
						// Defined by the program (DW_LNE_define_file).
						id = fileID(le.File.Name)
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
	id := elffile.BuildID(f)
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
	dir := filepath.Dir(openedFrom(name))
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

// cachedCopy returns the copy of f that perf's build-ID cache dir holds
// for f's build ID, opened, if it has a .symtab (perf takes its symbols
// from the first of its candidates that has one, the cache's copy before
// the file itself), else "" and nil.
func cachedCopy(f *elf.File, dir string) (string, *elffile.File) {
	id := elffile.BuildID(f)
	if len(id) < 2 {
		return "", nil
	}
	h := hex.EncodeToString(id)
	p := filepath.Join(dir, ".build-id", h[:2], h[2:], "elf")
	c := openSameBuildID(p, id)
	if c == nil {
		return "", nil
	}
	if c.SectionByType(elf.SHT_SYMTAB) == nil {
		c.Close()
		return "", nil
	}
	return p, c
}

// openedFrom returns the path that name, a descriptor's or a mapping's
// link in /proc (/proc/self/fd/N, /proc/PID/map_files/RANGE: a live
// profiler's way to the very file a process mapped), was opened from,
// without " (deleted)", so that a debug link is searched beside the
// object rather than in /proc; any other name as it is.
func openedFrom(name string) string {
	if !strings.HasPrefix(name, "/proc/") {
		return name
	}
	dir := filepath.Dir(name)
	if filepath.Base(dir) != "fd" && filepath.Base(dir) != "map_files" {
		return name
	}
	p, err := os.Readlink(name)
	if err != nil || !filepath.IsAbs(p) {
		return name
	}
	return strings.TrimSuffix(p, " (deleted)")
}

// openSameBuildID opens the ELF file at path if it is a regular file
// (elffile.Open: not a FIFO, whose open would wait for a writer, nor a
// device) and its build ID is id.
func openSameBuildID(path string, id []byte) *elffile.File {
	f, err := elffile.Open(path)
	if err != nil {
		return nil
	}
	if !bytes.Equal(elffile.BuildID(f.File), id) {
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
