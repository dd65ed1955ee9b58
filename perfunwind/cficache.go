package perfunwind

import (
	"github.com/sframekit/sframekit/cfi"
	"github.com/sframekit/sframekit/internal/slab"
	"github.com/sframekit/sframekit/sframe"
	"github.com/sframekit/sframekit/unwind"
)

// cfiCache remembers the CFI row found for each address of one file:
// samples hit the same few thousand return addresses over and over, and
// finding a row (the FDE, then its instructions run up to the address)
// costs ten times what copying it does. It is the Session's, used by one
// goroutine at a time.
//
// Unless Options.NoSFrameFromCFI, it also compiles SFrame for the functions
// the walks take its CFI for (see compile), in a file without SFrame of
// its own.
type cfiCache struct {
	t unwind.CFI
	// rows holds the rows of the addresses looked up twice or more (seen
	// says which were looked up before). Most return addresses are
	// looked up here once: the unwinder keeps their rows in its own
	// compact form (unwind's cfiRules) after the first walk through them,
	// and a row kept here for each (300 bytes) was a fifth of the memory
	// sframe record touched on a C++ compiler's stacks, each fresh page a
	// page fault. A second lookup (a top frame's address sampled again, a
	// row of another shape, another process) costs one more search.
	rows map[uint64]*cfiRow
	slab slab.Slab[cfiRow] // rows allocated in blocks: fewer, larger allocations
	// seen has the bit of each address looked up set (seenBit), so that
	// a first lookup costs neither a search of rows nor an entry there:
	// those were about a quarter of this cache's time on a C++
	// compiler's stacks (7,400 first lookups a recording). An address
	// whose bit another set counts as seen, and has its row kept at its
	// first lookup. Cleared when half full (nSeen bits set).
	seen  *[seenBits / 64]uint64
	nSeen int

	// SFrame compiled from the CFI (tab, nil when not wanted): pcs are
	// the first addresses of the functions looked up, the first done of
	// them compiled (or found not to compile), fns their indexes by
	// address; fresh counts the frames of the others looked up since.
	tab   *unwind.CFITable
	pcs   []uint64
	done  int
	fns   map[uint64]int
	fresh int
	gen   *sframe.Section
	stats *unwind.GenStats
	due   *bool // the Session's: some cache has a compilation due
}

type cfiRow struct {
	cie   *cfi.CIE
	ok    bool
	fresh bool // the function has not been compiled
	row   cfi.Row
}

// maxCFIRows bounds the rows a cfiCache keeps (about 300 bytes each):
// past it, the cache starts over.
const maxCFIRows = 1 << 16

// seenBits is the number of bits of a cfiCache's seen set (8 KiB).
const (
	seenLog  = 16
	seenBits = 1 << seenLog
)

// seenBit returns the bit of address pc in a cfiCache's seen set: the
// top bits of a multiplication that mixes pc's high bits into its low
// ones first (a multiplication alone let nearby addresses share bits
// twice as often as random ones would).
func seenBit(pc uint64) uint64 {
	pc ^= pc >> 29
	return pc * 0xbf58476d1ce4e5b9 >> (64 - seenLog)
}

// Lookup implements unwind.CFI.
func (c *cfiCache) Lookup(ctx *cfi.UnwindContext, pc uint64, row *cfi.Row) (*cfi.CIE, bool, error) {
	b := seenBit(pc)
	word, bit := &c.seen[b/64], uint64(1)<<(b%64)
	seen := *word&bit != 0
	if seen {
		if e := c.rows[pc]; e != nil {
			if e.ok {
				row.CopyFrom(&e.row)
				if e.fresh {
					c.count()
				}
			}
			return e.cie, e.ok, nil
		}
	}
	cie, ok, err := c.t.Lookup(ctx, pc, row)
	fresh := err == nil && ok && c.isFresh(pc)
	if fresh {
		c.count()
	}
	if err == nil {
		if !seen {
			*word |= bit
			if c.nSeen++; c.nSeen > seenBits/2 {
				clear(c.seen[:])
				c.nSeen = 0
			}
			return cie, ok, err
		}
		if len(c.rows) >= maxCFIRows {
			clear(c.rows)
		}
		e := c.slab.New(64)
		*e = cfiRow{cie: cie, ok: ok, fresh: fresh}
		if ok {
			// CopyFrom: the rules past a Row's inline ones are in a
			// slice that a plain copy would share with the caller's.
			e.row.CopyFrom(row)
		}
		c.rows[pc] = e
	}
	return cie, ok, err
}

// FindFDE implements unwind.FDEFinder through the CFI c caches, or
// says there is no FDE when that CFI cannot tell.
func (c *cfiCache) FindFDE(pc uint64) (*cfi.Table, cfi.FDE, error) {
	if f, ok := c.t.(unwind.FDEFinder); ok {
		return f.FindFDE(pc)
	}
	return nil, cfi.FDE{}, cfi.ErrNoFDE
}

// isFresh reports whether the function at pc is yet to be compiled,
// noting it in pcs the first time.
func (c *cfiCache) isFresh(pc uint64) bool {
	if c.tab == nil {
		return false
	}
	_, fde, err := c.tab.FindFDE(pc)
	if err != nil {
		return false
	}
	i, ok := c.fns[fde.PCBegin]
	if !ok {
		i = len(c.pcs)
		c.fns[fde.PCBegin] = i
		c.pcs = append(c.pcs, fde.PCBegin)
	}
	return i >= c.done
}

// count counts a frame of a fresh function, and says when a compilation
// is due: after genFirst such frames, then after genEach more per
// function compiled, so that compiling, whose cost grows with the
// functions, stays a small part of the CFI work it saves.
func (c *cfiCache) count() {
	c.fresh++
	if c.fresh >= genFirst+genEach*c.done {
		*c.due = true
	}
}

const (
	genFirst = 256
	genEach  = 32
)

// cachedCFI returns the caching wrapper of t, one per table.
func (s *Session) cachedCFI(t unwind.CFI) *cfiCache {
	if t == nil {
		return nil
	}
	c := s.cfis[t]
	if c == nil {
		c = &cfiCache{t: t, rows: map[uint64]*cfiRow{}, seen: new([seenBits / 64]uint64), due: &s.genDue}
		s.cfis[t] = c
	}
	return c
}

// wantGen makes c compile SFrame for the functions it is asked for, if
// its table is one CompileSFrame reads.
func (c *cfiCache) wantGen() {
	if c.tab == nil && c.fns == nil {
		if t, ok := c.t.(*unwind.CFITable); ok {
			c.tab, c.fns = t, map[uint64]int{}
		}
	}
}

// compileDue compiles SFrame for the caches that have a compilation due,
// and gives it to every module that uses them.
func (s *Session) compileDue() {
	s.genDue = false
	for _, c := range s.cfis {
		if c.tab == nil || c.fresh < genFirst+genEach*c.done {
			continue
		}
		c.fresh, c.done = 0, len(c.pcs)
		// The fresh marks go: their functions are compiled now.
		clear(c.rows)
		sec, st, err := unwind.CompileSFrame(c.tab, c.pcs)
		if err != nil {
			c.tab = nil // the CFI goes on alone
			continue
		}
		if c.stats == nil {
			s.Stats.GenFiles++
		} else {
			s.Stats.GenFuncs -= uint64(c.stats.Funcs)
			s.Stats.GenSkipped -= uint64(c.stats.Skipped)
		}
		s.Stats.GenFuncs += uint64(st.Funcs)
		s.Stats.GenSkipped += uint64(st.Skipped)
		c.gen, c.stats = sec, st
		s.useGen(c)
	}
}

// useGen gives c's compiled SFrame to the modules of every process that
// use c. A mapping is shared by the processes forked with it: each
// address space's unwinder (one for the processes that share it) swaps
// the module, then the mapping takes the new one.
func (s *Session) useGen(c *cfiCache) {
	repl := map[*unwind.Module]*unwind.Module{}
	seen := map[*space]bool{}
	var maps []*Mapping
	for _, p := range s.procs {
		sp := p.sp
		if seen[sp] {
			continue
		}
		seen[sp] = true
		for _, pm := range sp.maps.All() {
			m := *pm
			old := m.module
			if old == nil || old.CFI != unwind.CFI(c) || old.SFrame != nil && old.SFrameGen == nil {
				continue
			}
			nm := repl[old]
			if nm == nil {
				cp := *old
				cp.SFrame, cp.SFrameGen = c.gen, c.stats
				nm = &cp
				repl[old] = nm
			}
			sp.u.RemoveModule(old)
			sp.u.AddModule(nm)
			maps = append(maps, m)
		}
	}
	for _, m := range maps {
		if nm := repl[m.module]; nm != nil {
			m.module = nm
		}
	}
}
