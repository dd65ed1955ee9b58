package unwind

import (
	"debug/elf"
	"errors"
	"os"
	"sync"
	"syscall"

	"github.com/sframekit/sframekit/cfi"
	"github.com/sframekit/sframekit/elffile"
	"github.com/sframekit/sframekit/sframe"
	"github.com/sframekit/sframekit/targets"
)

// CFITable adapts a *cfi.Table to the CFI interface. A cfi.Table is
// immutable once parsed, and each walk brings its own lookup context, so
// walks in parallel use one CFITable without locks.
type CFITable struct {
	T *cfi.Table
}

// Lookup implements CFI.
func (c *CFITable) Lookup(ctx *cfi.UnwindContext, pc uint64, row *cfi.Row) (*cfi.CIE, bool, error) {
	f, err := c.T.RowForPC(ctx, pc, row)
	switch {
	case err == nil: // first: errors.Is is a call
		return f.CIE, true, nil
	case errors.Is(err, cfi.ErrNoFDE):
		return nil, false, nil
	}
	return nil, false, err
}

// Tables are the unwind tables of one ELF file, in its own address space.
type Tables struct {
	SFrame *sframe.Section // nil when the file has none (or a corrupt one)
	CFI    *cfi.Table      // .eh_frame, else .debug_frame; nil when none
	// Errs records why a table present in the file could not be used.
	Errs []error
	// Gen describes SFrame compiled from the CFI
	// (LoadOptions.SFrameFromCFI); nil when SFrame is the file's own or
	// there is none.
	Gen *GenStats

	sfx *sfIndex  // SFrame decoded for fast lookups
	cfi *CFITable // CFI for the modules, one per table
}

// LoadTables reads the SFrame and CFI tables of f. A missing table is not
// an error; a corrupt one is recorded in Errs and left out.
func LoadTables(f *elf.File) *Tables {
	t := &Tables{}
	if sec := elffile.FindSFrame(f, ""); sec != nil {
		data, err := elffile.SectionData(f, sec, elffile.Relocated)
		if err == nil {
			var s *sframe.Section
			if s, err = sframe.Parse(data, sec.Addr); err == nil {
				if err = s.Validate(); err == nil {
					t.SFrame = s
					t.sfx = buildSFIndex(s)
				}
			}
		}
		if err != nil {
			t.Errs = append(t.Errs, err)
		}
	}
	for _, name := range []string{".eh_frame", ".debug_frame"} {
		if f.Section(name) == nil {
			continue
		}
		c, err := cfi.FromELF(f, name)
		if err != nil {
			t.Errs = append(t.Errs, err)
			continue
		}
		t.CFI = c
		t.cfi = &CFITable{T: c}
		break
	}
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

// cacheKey identifies a file's contents well enough to notice a file
// rebuilt at the same path.
type cacheKey struct {
	path  string
	size  int64
	mtime int64
	ino   uint64
}

func keyOf(path string) cacheKey {
	k := cacheKey{path: path}
	if st, err := os.Stat(path); err == nil {
		k.size, k.mtime = st.Size(), st.ModTime().UnixNano()
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			k.ino = sys.Ino
		}
	}
	return k
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
			e.t = LoadTablesWith(f.File, c.Options)
		})
	}
}

// Modules turns a target's modules into unwinder modules, loading each
// file's tables once (the vDSO's from the target's memory).
func (c *Cache) Modules(mods []targets.Module, mem targets.Memory) []*Module {
	out := make([]*Module, 0, len(mods))
	for i := range mods {
		tm := &mods[i]
		file := tm.File
		if tm.IsVDSO() {
			file = "[vdso]"
		}
		if file == "" || !tm.HasBias {
			out = append(out, &Module{Name: tm.Path, File: file, Start: tm.Start, End: tm.End, Bias: tm.Bias})
			continue
		}
		load := func(opts LoadOptions) *Tables {
			t := &Tables{}
			if f, err := targets.OpenELF(mem, tm); err == nil {
				t = LoadTablesWith(f.File, opts)
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
		m := &Module{Name: tm.Path, File: file, Start: tm.Start, End: tm.End, Bias: tm.Bias, SFrame: t.SFrame, sfx: t.sfx,
			SFrameGen: t.Gen}
		if t.cfi != nil {
			m.CFI = t.cfi
		}
		out = append(out, m)
	}
	return out
}
