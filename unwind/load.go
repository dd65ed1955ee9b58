package unwind

import (
	"debug/elf"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/cfi"
	"github.com/sframekit/sframekit/elffile"
	"github.com/sframekit/sframekit/sframe"
	"github.com/sframekit/sframekit/symbolize"
)

// CFITable adapts a file's CFI to the CFI interface: T, and for the
// addresses no FDE of T covers, Debug. A cfi.Table is immutable once
// parsed, and each walk brings its own lookup context, so walks in
// parallel use one CFITable without locks.
type CFITable struct {
	T *cfi.Table
	// Debug is the file's .debug_frame (or its separate debug file's)
	// when T is its .eh_frame, else nil. A program built with
	// -fno-asynchronous-unwind-tables has .eh_frame rows for the C
	// runtime only and its own in .debug_frame: each address takes its
	// rows from the section that covers it, .eh_frame first, as gdb and
	// libdw do.
	Debug *cfi.Table
}

// Lookup implements CFI.
func (c *CFITable) Lookup(ctx *cfi.UnwindContext, pc uint64, row *cfi.Row) (*cfi.CIE, bool, error) {
	f, err := c.T.RowForPC(ctx, pc, row)
	if err == nil { // first: errors.Is is a call
		return f.CIE, true, nil
	}
	if c.Debug != nil && errors.Is(err, cfi.ErrNoFDE) {
		f, err = c.Debug.RowForPC(ctx, pc, row)
		if err == nil {
			return f.CIE, true, nil
		}
	}
	if errors.Is(err, cfi.ErrNoFDE) {
		return nil, false, nil
	}
	return nil, false, err
}

// FindFDE returns the FDE covering pc (an ELF address) and the table it
// is from, T's first.
func (c *CFITable) FindFDE(pc uint64) (*cfi.Table, cfi.FDE, error) {
	f, err := c.T.FindFDE(pc)
	if err == nil || c.Debug == nil || !errors.Is(err, cfi.ErrNoFDE) {
		return c.T, f, err
	}
	f, err = c.Debug.FindFDE(pc)
	return c.Debug, f, err
}

// tables returns c's tables in the order lookups consult them.
func (c *CFITable) tables() []*cfi.Table {
	if c.Debug == nil {
		return []*cfi.Table{c.T}
	}
	return []*cfi.Table{c.T, c.Debug}
}

// Tables are the unwind tables of one ELF file, in its own address space.
type Tables struct {
	SFrame *sframe.Section // nil when the file has none (or a corrupt one)
	CFI    *cfi.Table      // .eh_frame, else .debug_frame; nil when none
	// DebugFrame is the .debug_frame, the file's own or its separate
	// debug file's (LoadFileTables), when CFI is the .eh_frame: for the
	// addresses .eh_frame does not cover (see CFITable). nil when none.
	DebugFrame *cfi.Table
	// Errs records why a table present in the file could not be used.
	Errs []error
	// Gen describes SFrame compiled from the CFI
	// (LoadOptions.SFrameFromCFI); nil when SFrame is the file's own or
	// there is none.
	Gen *GenStats

	sfx      *sfIndex  // SFrame decoded for fast lookups
	cfi      *CFITable // CFI for the modules, one per table
	outer    outermost // where walks end (outermost.go)
	sigOuter outermost // the part of outer where only a stack copy's walks end
	sigpanic outermost // Go's sigpanic: its caller's PC is exact
}

// CFITable returns the file's CFI as the unwinder consults it, shared
// by the modules made from t (Cache.Modules); nil when it has none.
func (t *Tables) CFITable() *CFITable { return t.cfi }

// Outermost returns the code of the file where every walk ends (see
// outermost.go: Go's TOPFRAME and SPWRITE functions, the entry point's
// code without CFI), as sorted, disjoint ELF address ranges [lo, hi):
// an unwinder of its own (package bpfunwind) ends its walks there too.
func (t *Tables) Outermost() [][2]uint64 {
	r := make([][2]uint64, len(t.outer))
	for i, o := range t.outer {
		r[i] = [2]uint64{o.lo, o.hi}
	}
	return r
}

// LoadTables reads the SFrame and CFI tables of f: .sframe, .eh_frame
// and .debug_frame. A missing table is not an error; a corrupt one is
// recorded in Errs and left out.
func LoadTables(f *elf.File) *Tables {
	t := &Tables{}
	if sec := elffile.FindSFrame(f, ""); sec != nil {
		data, err := elffile.SectionData(f, sec, elffile.Relocated)
		if err == nil {
			var s *sframe.Section
			if s, err = sframe.Parse(data, sec.Addr); err == nil {
				if err = s.Validate(); err == nil {
					t.SFrame = s
				}
			}
		}
		if err != nil {
			t.Errs = append(t.Errs, err)
		}
	}
	for _, name := range []string{".eh_frame", ".debug_frame"} {
		if sec := f.Section(name); sec == nil || sec.Type == elf.SHT_NOBITS {
			continue
		}
		c, err := cfi.FromELF(f, name)
		if err != nil {
			t.Errs = append(t.Errs, err)
			continue
		}
		t.addCFI(c)
	}
	t.outer, t.sigOuter, t.sigpanic = outermostOf(f, t.CFI)
	if t.SFrame != nil {
		t.sfx = buildSFIndex(t.SFrame, slowRanges(t.outer, t.sigpanic))
	}
	return t
}

// addCFI adds c, the next CFI table in the order lookups consult them.
func (t *Tables) addCFI(c *cfi.Table) {
	switch {
	case t.CFI == nil:
		t.CFI = c
		t.cfi = &CFITable{T: c}
	case t.DebugFrame == nil && t.CFI.Kind() == cfi.EHFrame && c.Kind() == cfi.DebugFrame:
		t.DebugFrame = c
		t.cfi = &CFITable{T: t.CFI, Debug: c}
	}
}

// LoadFileTables reads the tables of f, the ELF file at path, as
// LoadTablesWith does, with the .debug_frame of its separate debug file
// (found by build ID or .gnu_debuglink under opts.DebugDirs, as
// symbolize.FindDebugFile finds it) when f has none of its own: a
// stripped program built without unwind tables keeps its rows there.
func LoadFileTables(f *elf.File, path string, opts LoadOptions) *Tables {
	t := LoadTables(f)
	if t.DebugFrame == nil && (t.CFI == nil || t.CFI.Kind() != cfi.DebugFrame) {
		dirs := opts.DebugDirs
		if dirs == nil {
			dirs = []string{symbolize.DefaultDebugDir}
		}
		if dp, d := symbolize.FindDebugFile(f, path, dirs); d != nil {
			if sec := d.Section(".debug_frame"); sec != nil && sec.Type != elf.SHT_NOBITS {
				if c, err := cfi.FromELF(d.File, ".debug_frame"); err == nil {
					t.addCFI(c)
				} else {
					t.Errs = append(t.Errs, fmt.Errorf("%s: %w", dp, err))
				}
			}
			d.Close()
		}
	}
	t.compile(f, opts)
	return t
}

// Cache keeps the tables of files already loaded, keyed by path, so that
// each file is parsed once however many threads, captures or processes
// use it: the modules it makes for each process share them. It is safe
// for concurrent use, and so are the tables it holds and walks over its
// modules, from any number of Unwinders: each walk keeps its lookup state
// (cfi.UnwindContext) in its own Context.
type Cache struct {
	// Options apply to every file the cache loads: set them before its
	// first use.
	Options LoadOptions

	mu     sync.Mutex
	tables map[cacheKey]*cacheEntry
}

// cacheEntry loads one file's tables once, whoever asks first (Prefetch
// or Modules); later callers wait for it.
type cacheEntry struct {
	once sync.Once
	t    *Tables
}

// Retain drops the tables of the files whose paths keep rejects, so that a
// long-lived cache (a continuous profiler's) does not keep the tables of
// programs long gone. Modules made from them stay usable.
func (c *Cache) Retain(keep func(path string) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.tables {
		if !keep(k.path) {
			delete(c.tables, k)
		}
	}
}

// NewCache returns an empty cache.
func NewCache() *Cache { return &Cache{tables: map[cacheKey]*cacheEntry{}} }

// entry returns the cache entry for key, creating it.
func (c *Cache) entry(key cacheKey) *cacheEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.tables[key]
	if e == nil {
		e = &cacheEntry{}
		c.tables[key] = e
	}
	return e
}

// Prefetch loads the tables of the files at paths in the background, so
// that a later Modules finds them (or waits for them) instead of loading
// them itself: a caller that knows a process's files before attaching to
// it overlaps the loading with the attach. One goroutine loads them in
// turn: more would take every processor from the attach.
func (c *Cache) Prefetch(paths []string) { go c.Load(paths) }

// Load loads the tables of the files at paths now, each once.
func (c *Cache) Load(paths []string) {
	for _, p := range paths {
		e := c.entry(keyOf(p))
		e.once.Do(func() {
			e.t = &Tables{}
			f, err := elffile.Open(p)
			if err != nil {
				e.t.Errs = append(e.t.Errs, err)
				return
			}
			defer f.Close()
			e.t = LoadFileTables(f.File, p, c.Options)
		})
	}
}

// Modules turns a target's modules into unwinder modules, loading each
// file's tables once (the vDSO's from the target's memory).
func (c *Cache) Modules(mods []arch.Module, mem arch.Memory) []*Module {
	out := make([]*Module, 0, len(mods))
	for i := range mods {
		tm := &mods[i]
		file := tm.File
		if tm.IsVDSO() {
			file = "[vdso]"
		}
		if file == "" || !tm.HasBias {
			for _, r := range codeRanges(tm) {
				out = append(out, &Module{Name: tm.Path, File: file, Start: r[0], End: r[1], Bias: tm.Bias})
			}
			continue
		}
		load := func(opts LoadOptions) *Tables {
			t := &Tables{}
			if f, err := openModule(mem, tm); err == nil {
				if tm.IsVDSO() {
					t = LoadTablesWith(f.File, opts)
				} else {
					t = LoadFileTables(f.File, file, opts)
				}
				f.Close()
			} else {
				t.Errs = append(t.Errs, err)
			}
			return t
		}
		var t *Tables
		if tm.IsVDSO() {
			t = load(LoadOptions{}) // another process's vDSO may differ: not cached
		} else {
			e := c.entry(keyOf(file))
			e.once.Do(func() { e.t = load(c.Options) })
			t = e.t
		}
		for _, r := range codeRanges(tm) {
			m := &Module{Name: tm.Path, File: file, Start: r[0], End: r[1], Bias: tm.Bias, SFrame: t.SFrame, sfx: t.sfx,
				SFrameGen: t.Gen, outer: t.outer, sigOuter: t.sigOuter, sigpanic: t.sigpanic}
			if t.cfi != nil {
				m.CFI = t.cfi
			}
			out = append(out, m)
		}
	}
	return out
}

// codeRanges returns the ranges of tm that hold its code: its executable
// mappings where their permissions say (a live process's), else its whole
// span (a core's, whose segments gdb writes without x). Not the span of a
// live module: a program may map other code between its mappings (node's
// JIT code lies between mappings of node's own file), which would be
// taken for the file's and walked with its tables.
func codeRanges(tm *arch.Module) [][2]uint64 {
	var rs [][2]uint64
	for _, mp := range tm.Mappings {
		if strings.Contains(mp.Perm, "x") {
			rs = append(rs, [2]uint64{mp.Start, mp.End})
		}
	}
	if len(rs) == 0 {
		return [][2]uint64{{tm.Start, tm.End}}
	}
	return rs
}

// openModule opens the ELF file of m: m.File, or for the vDSO its image read
// from mem. The caller must Close the result.
func openModule(mem arch.Memory, m *arch.Module) (*elffile.File, error) {
	if m.IsVDSO() || m.File == "" {
		if !m.IsVDSO() {
			return nil, fmt.Errorf("module %s: no file available", m.Path)
		}
		img, err := arch.ReadImage(mem, m)
		if err != nil {
			return nil, err
		}
		f, err := elffile.NewFile(img)
		if err != nil {
			return nil, fmt.Errorf("parsing vdso image: %w", err)
		}
		return f, nil
	}
	f, err := elffile.Open(m.File)
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", m.Path, err)
	}
	return f, nil
}
