package unwind

import (
	"math"
	"math/bits"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/cfi"
)

// cfiRules is a Context's cache of the CFI rows its walks applied, in
// the fast path's form: a frame whose caller the CFI finds, in a file
// without SFrame of its own, costs a general step the first time (the
// row found, its rules interpreted one by one: about 300-500 ns) and a
// table lookup in the fast path after that, for its address or another
// the row covers; a top frame too. Profiles hit
// the same return addresses over and over, and in C++ programs (cc1plus)
// a third of their frames are such, in thousands of functions that
// SFrame compiled from the CFI (LoadOptions.SFrameFromCFI, CompileSFrame)
// covers only after a while.
//
// Entries are kept per CFI table, by the ELF address looked up, so
// that every process mapping a file shares them; only rows of the fast
// path's shape are kept (x86-64: CFA = SP or FP + offset, RA saved at
// CFA + offset, FP saved or unchanged, no rule for SP, no signal frame),
// and rows that leave the RA undefined (the outermost frame, fastEnd):
// a C program's _start ends every walk, and its general step was one
// per sample (a second pass over a recording of cc1plus: 16,000 of its
// 17,000 general steps).
// Like SFrame compiled from CFI, the fast path keeps only the PC, SP and
// FP: a walk that uses a cached row counts as one that used compiled
// SFrame (usedGen), and is redone without either if a CFI rule further up
// needs another register. At most maxCFIRules entries (addresses and
// rows, about 3 MB) are kept; past it the cache starts over.
type cfiRules struct {
	tabs map[CFI]*ruleTable // per table, by ELF address looked up
	n    int                // entries in all tables
	// The table of the last lookup: frames come in runs of one file.
	lastT CFI
	last  *ruleTable
}

const maxCFIRules = 1 << 16

// table returns the rules of CFI table t, nil if none (and make is false).
func (c *cfiRules) table(t CFI, make_ bool) *ruleTable {
	if t == c.lastT && c.last != nil {
		return c.last
	}
	m := c.tabs[t]
	if m == nil {
		if !make_ {
			return nil
		}
		if c.tabs == nil {
			c.tabs = map[CFI]*ruleTable{}
		}
		m = &ruleTable{}
		c.tabs[t] = m
	}
	c.lastT, c.last = t, m
	return m
}

// ruleTable maps ELF addresses to fast rules: a hash table with open
// addressing, each key beside its rule. It is looked up at every frame
// of a file without SFrame (cc1plus: 370,000 frames a recording, at
// 16,000 addresses), where a Go map's lookup, its control bytes, key and
// value in separate cache lines, took a sixth of the recording's CPU.
type ruleTable struct {
	slots []ruleSlot // a power of two of them, at most 3/4 full
	n     int
	kept  int   // entries (slots and ranges) of cfiRules.n kept here
	shift uint8 // 64 - log2(len(slots))
	// pages are the rows kept with the range of addresses each covers,
	// by the page (rulePage) of the address they were found for: most
	// call sites of a function share a row, and so do most addresses a
	// sample's top frame is at (cc1plus: 23,700 addresses, 9,800 rows).
	// An address not in slots takes its row from here, without a CFI
	// lookup.
	pages map[uint64][]rangeRule
}

// rangeRule is the fast rule of the addresses [start, end).
type rangeRule struct {
	start, end uint64
	r          fastRule
}

// rulePage is the log2 of the size of the address ranges rows are kept by.
const rulePage = 12

// inRange returns the rule of the kept row that covers ELF address pc
// (then, if keep, put in slots for the next time; added says it was).
func (t *ruleTable) inRange(pc uint64, keep bool) (r fastRule, ok, added bool) {
	for _, rr := range t.pages[pc>>rulePage] {
		if pc-rr.start < rr.end-rr.start {
			return rr.r, true, keep && t.put(pc, rr.r)
		}
	}
	return r, false, false
}

// keepRange keeps r as the rule of [start, end), found for pc, and
// reports whether it did: pc must lie in the range.
func (t *ruleTable) keepRange(start, end, pc uint64, r fastRule) bool {
	if pc-start >= end-start {
		return false
	}
	if t.pages == nil {
		t.pages = map[uint64][]rangeRule{}
	}
	t.pages[pc>>rulePage] = append(t.pages[pc>>rulePage], rangeRule{start, end, r})
	return true
}

type ruleSlot struct {
	key uint64 // the ELF address + 1; 0 for an empty slot
	r   fastRule
}

// get returns the rule of ELF address pc. A nil table has none.
func (t *ruleTable) get(pc uint64) (fastRule, bool) {
	k := pc + 1
	if t == nil || t.n == 0 || k == 0 {
		return fastRule{}, false
	}
	mask := uint64(len(t.slots) - 1)
	for i := k * 0x9e3779b97f4a7c15 >> t.shift; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.key == k {
			return s.r, true
		}
		if s.key == 0 {
			return fastRule{}, false
		}
	}
}

// put sets the rule of ELF address pc, and reports whether pc is new.
// The last address, whose key would be 0, is not kept.
func (t *ruleTable) put(pc uint64, r fastRule) bool {
	k := pc + 1
	if k == 0 {
		return false
	}
	if 4*(t.n+1) > 3*len(t.slots) {
		t.grow()
	}
	mask := uint64(len(t.slots) - 1)
	for i := k * 0x9e3779b97f4a7c15 >> t.shift; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.key == k {
			s.r = r
			return false
		}
		if s.key == 0 {
			*s = ruleSlot{k, r}
			t.n++
			return true
		}
	}
}

// grow doubles the slots (256 at first) and places the entries again.
func (t *ruleTable) grow() {
	old := t.slots
	size := max(2*len(old), 256)
	t.slots = make([]ruleSlot, size)
	t.shift = uint8(64 - bits.TrailingZeros(uint(size)))
	t.n = 0
	for i := range old {
		if old[i].key != 0 {
			t.put(old[i].key-1, old[i].r)
		}
	}
}

// cfiFast reports whether the frames of module m may take cached CFI
// rows: it has CFI and no SFrame of its own, on x86-64.
func cfiFast(m *Module, a arch.Arch) bool {
	return a == arch.AMD64 && m.CFI != nil && (m.SFrame == nil || m.SFrameGen != nil)
}

// cachedCFIRule returns the cached fast rule of the return address pc
// in the module of in.
func (w *Context) cachedCFIRule(in *modInfo, pc uint64) (fastRule, bool) {
	return w.cachedRule(in, pc-1-in.m.Bias)
}

// cachedRule returns the cached fast rule of ELF address elfPC, looked
// up, in the module of in.
func (w *Context) cachedRule(in *modInfo, elfPC uint64) (fastRule, bool) {
	if !in.cfiFast || w.noGen || w.cfiRules.n == 0 {
		return fastRule{}, false
	}
	t := w.cfiRules.table(in.m.CFI, false)
	if r, ok := t.get(elfPC); ok || t == nil {
		return r, ok
	}
	// Kept for the next lookup only while the cache is under its bound
	// (keepCFIRule empties it at the bound; a lookup must not grow it).
	r, ok, added := t.inRange(elfPC, w.cfiRules.n < maxCFIRules)
	if added {
		w.cfiRules.n++
		t.kept++
	}
	return r, ok
}

// keepCFIRule caches the CFI row the last step applied (w.cfi.row) at
// the ELF address elfPC of module m, and for the addresses it covers,
// if it has the fast path's shape. The step was not a signal frame's.
func (w *Context) keepCFIRule(in *modInfo, elfPC uint64) {
	if !in.cfiFast || w.noGen || w.cfi.raCol != w.pcReg {
		return // the fast path reads the RA of the PC's column
	}
	r, ok := fastFromCFI(&w.cfi.row, w.spReg, w.fpReg, w.pcReg)
	if !ok {
		return
	}
	c := &w.cfiRules
	if c.n >= maxCFIRules {
		*c = cfiRules{}
	}
	t := c.table(in.m.CFI, true)
	if !t.put(elfPC, r) {
		// Kept before, its row's range with it: a top frame whose
		// cached row the fast path does not take (an outermost row, a
		// failed read) steps here again, and must not add the range
		// once more each time.
		return
	}
	c.n++
	t.kept++
	if t.keepRange(w.cfi.row.Start, w.cfi.row.End, elfPC, r) {
		c.n++
		t.kept++
	}
}

// RetainCFI drops the rows w keeps (cfiRules) of the CFI tables that
// keep rejects, and its references to the modules and memory of its last
// walk: a Context that lives as long as a live profiler would otherwise
// keep, through them, the tables of files the profiler has forgotten
// (their sections, tens of MB for a large program), each until the
// cache's bound (maxCFIRules entries) empties it. With it, w keeps the
// rows of the tables keep accepts and nothing else.
func (w *Context) RetainCFI(keep func(CFI) bool) {
	c := &w.cfiRules
	for t, rt := range c.tabs {
		if !keep(t) {
			c.n -= rt.kept
			delete(c.tabs, t)
		}
	}
	c.lastT, c.last = nil, nil
	w.mods, w.last, w.mem = nil, nil, wordReader{}
}

// fastFromCFI returns the fast form of the CFI row, or false when the
// row has another shape. sp, fp and ra are the DWARF columns of the stack
// pointer, frame pointer and return address.
func fastFromCFI(row *cfi.Row, sp, fp, ra arch.Reg) (fastRule, bool) {
	var r fastRule
	fits := func(v int64) bool { return v >= math.MinInt32 && v <= math.MaxInt32 }
	c := &row.CFA
	if c.Kind != cfi.CFARegOffset || (c.Reg != sp && c.Reg != fp) || !fits(c.Offset) || row.RASigned {
		return r, false
	}
	raOK := false
	for i := range row.NumRules() {
		rr := row.RuleAt(i)
		switch rr.Column {
		case ra:
			if rr.Kind == cfi.RuleUndefined {
				// The end of the walk, whatever the other rules say:
				// the general step ends it there too (stepCFI).
				r = fastRule{cfaOff: int32(c.Offset), flags: fastOK | fastEnd}
				if c.Reg == fp {
					r.flags |= fastCFAFP
				}
				return r, true
			}
			if rr.Kind != cfi.RuleOffset || !fits(rr.Offset) {
				return r, false
			}
			r.raOff, raOK = int32(rr.Offset), true
		case fp:
			switch rr.Kind {
			case cfi.RuleOffset:
				if !fits(rr.Offset) {
					return r, false
				}
				r.flags |= fastFP
				r.fpOff = int32(rr.Offset)
			case cfi.RuleSameValue, cfi.RuleUnspecified:
			default:
				return r, false
			}
		case sp:
			return r, false
		}
	}
	if !raOK {
		return r, false
	}
	r.flags |= fastOK
	if c.Reg == fp {
		r.flags |= fastCFAFP
	}
	r.cfaOff = int32(c.Offset)
	return r, true
}
