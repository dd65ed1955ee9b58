package unwind

import (
	"math"
	"sort"

	"github.com/sframekit/sframekit/sframe"
)

// sfIndex is a module's SFrame section decoded once into flat arrays, so
// that a lookup is two binary searches over plain values, with no
// decoding: the unwinder's hot path. Sections that do not decode cleanly,
// or are very large, get no index and are read through sframe.Section.
type sfIndex struct {
	sec    *sframe.Section // the section this index was built from
	starts []uint64        // function starts, sorted
	funcs  []sfFunc        // in the order of starts
	// Rows of all functions, as three parallel arrays: the row search
	// reads only rowStart, the fast path only fast, the general path
	// rows.
	rowStart []uint32 // offset from the function start (or in the block)
	fast     []fastRule
	rows     []sfRow

	// The fast path's table: every row of every function in one sorted
	// array, so that a lookup is a single search over 4-byte keys. keys
	// are row start addresses minus flatBase; rules are their fast forms,
	// zero (take the general path) for rows of other shapes, PC-mask
	// functions, and the gaps between functions, and a sentinel key
	// MaxUint32 last. Lookups at or past flatEnd miss. Empty when
	// functions overlap or span 4 GiB.
	flatBase  uint64
	flatEnd   uint64
	flatKeys  []uint32
	flatRules []fastRule
	// flatBuckets[b] is the index of the last key at or below
	// b<<flatShift: a lookup starts there and steps forward over the few
	// keys of its bucket, instead of a binary search over all of them.
	// The buckets are as fine as the average distance between keys.
	flatBuckets []uint32
	flatShift   uint8
}

type sfFunc struct {
	end     uint64
	first   uint32 // index of the function's first row
	n       uint32 // number of rows
	repSize uint32 // PC-mask functions: block size; 0 for PC-increment
	signal  bool   // v3 signal trampoline
}

type sfRow struct {
	ok  bool // the rules decoded (else the row gives no rule)
	row sframe.Row
}

// fastRule is a row of the common shape, which the unwinder's fast path
// (fastWalk) applies without the general rule interpreter: CFA = SP or
// FP + cfaOff, RA saved at CFA + raOff, FP saved at CFA + fpOff (fastFP)
// or unchanged. flags is 0 for rows of any other shape.
type fastRule struct {
	cfaOff, raOff, fpOff int32
	flags                uint8
}

// fastRule flags.
const (
	fastOK       = 1 << iota // the row has the common shape
	fastCFAFP                // CFA is based on FP, not SP
	fastFP                   // FP is saved at CFA + fpOff
	fastRASigned             // RA is signed (AArch64 PAC)
	// fastEnd: the row leaves the RA undefined, the outermost frame
	// (_start's, at the bottom of every walk of a C program): the walk
	// ends with this frame, its CFA computed, as the general step ends
	// it. Only cached CFI rows (fastFromCFI) have it.
	fastEnd
)

// compileFast returns the fast form of row, or a zero rule if the row does
// not have the common shape.
func compileFast(row *sframe.Row, abi sframe.ABI) fastRule {
	var r fastRule
	if row.RAUndefined {
		return r
	}
	fits := func(v int64) bool { return v == int64(int32(v)) }
	c, ra, fp := row.CFA, row.RA, row.FP
	a := abi.Arch()
	if c.Kind != sframe.RuleValue || (c.Base != a.SP() && c.Base != a.FP()) || !fits(c.Offset) {
		return r
	}
	if ra.Kind != sframe.RuleDeref || ra.Base != sframe.RegCFA || !fits(ra.Offset) {
		return r
	}
	switch fp.Kind {
	case sframe.RuleUnspecified, sframe.RuleNotSaved:
	case sframe.RuleDeref:
		if fp.Base != sframe.RegCFA || !fits(fp.Offset) {
			return r
		}
		r.flags |= fastFP
		r.fpOff = int32(fp.Offset)
	default:
		return r
	}
	r.flags |= fastOK
	if c.Base == a.FP() {
		r.flags |= fastCFAFP
	}
	if row.RASigned {
		r.flags |= fastRASigned
	}
	r.cfaOff, r.raOff = int32(c.Offset), int32(ra.Offset)
	return r
}

// maxIndexRows bounds the memory an index takes (~120 bytes a row).
const maxIndexRows = 1 << 21

// buildSFIndex decodes s, or returns nil. The rows of functions that
// meet slow (slowRanges) take the general path, which ends walks there
// or knows what comes after them.
func buildSFIndex(s *sframe.Section, slow outermost) *sfIndex {
	if s == nil || s.Header().NumFREs > maxIndexRows || s.Header().NumFDEs > maxIndexRows {
		return nil
	}
	n := s.NumFuncs()
	nr := int(s.Header().NumFREs)
	x := &sfIndex{sec: s, starts: make([]uint64, 0, n), funcs: make([]sfFunc, 0, n),
		rowStart: make([]uint32, 0, nr), fast: make([]fastRule, 0, nr), rows: make([]sfRow, 0, nr)}
	for i := 0; i < n; i++ {
		fn, err := s.Func(i)
		if err != nil {
			return nil
		}
		f := sfFunc{end: fn.End(), first: uint32(len(x.rows)), signal: fn.Signal()}
		general := f.signal || slow.overlaps(fn.Start, f.end)
		if fn.PCType() == sframe.PCMask {
			f.repSize = uint32(fn.RepSize)
			if f.repSize == 0 {
				return nil
			}
		}
		it := s.FREs(&fn)
		for it.Next() {
			e := it.FRE()
			r, err := s.Rules(&fn, e)
			var fr fastRule
			// Signal trampolines, and the functions where walks end,
			// always take the general path.
			if err == nil && !general {
				fr = compileFast(&r, s.Header().ABI)
			}
			x.rowStart = append(x.rowStart, e.StartOff)
			x.fast = append(x.fast, fr)
			x.rows = append(x.rows, sfRow{ok: err == nil, row: r})
			if len(x.rows) > maxIndexRows {
				return nil
			}
		}
		if it.Err() != nil {
			return nil
		}
		f.n = uint32(len(x.rows)) - f.first
		// Rows must be in increasing order for the binary search.
		for k := f.first + 1; k < f.first+f.n; k++ {
			if x.rowStart[k] <= x.rowStart[k-1] {
				return nil
			}
		}
		x.starts = append(x.starts, fn.Start)
		x.funcs = append(x.funcs, f)
	}
	if !sort.SliceIsSorted(x.starts, func(i, j int) bool { return x.starts[i] < x.starts[j] }) {
		perm := make([]int, n)
		for i := range perm {
			perm[i] = i
		}
		sort.SliceStable(perm, func(i, j int) bool { return x.starts[perm[i]] < x.starts[perm[j]] })
		starts, funcs := make([]uint64, n), make([]sfFunc, n)
		for i, p := range perm {
			starts[i], funcs[i] = x.starts[p], x.funcs[p]
		}
		x.starts, x.funcs = starts, funcs
	}
	x.buildFlat()
	return x
}

// buildFlat fills the fast path's single table from the two-level one, or
// leaves it empty if the functions overlap or span 4 GiB.
func (x *sfIndex) buildFlat() {
	if len(x.starts) == 0 {
		return
	}
	base := x.starts[0]
	keys := make([]uint32, 0, len(x.rowStart)+len(x.starts)+1)
	rules := make([]fastRule, 0, cap(keys))
	add := func(addr uint64, r fastRule) {
		keys = append(keys, uint32(addr-base))
		rules = append(rules, r)
	}
	prevEnd := base
	for i, start := range x.starts {
		f := &x.funcs[i]
		// Overlapping functions (and wrapped ends, in unrelocated
		// objects) shadow each other in the index in ways one sorted
		// table cannot express.
		if start < prevEnd || f.end < start || f.end-base >= math.MaxUint32 {
			return
		}
		if f.end == start {
			continue // covers nothing
		}
		if start > prevEnd && len(keys) > 0 {
			add(prevEnd, fastRule{}) // a gap: no function
		}
		rs := x.rowStart[f.first : f.first+f.n]
		if f.repSize != 0 || len(rs) == 0 || rs[0] != 0 {
			add(start, fastRule{})
		}
		if f.repSize == 0 {
			for k, off := range rs {
				if off >= uint32(f.end-start) {
					break // past the end: never reached
				}
				add(start+uint64(off), x.fast[int(f.first)+k])
			}
		}
		prevEnd = f.end
	}
	add(prevEnd, fastRule{})
	span := prevEnd - base
	shift := 0
	for span>>(shift+1) >= uint64(len(keys)) {
		shift++
	}
	buckets := make([]uint32, span>>shift+1)
	i := 0
	for b := range buckets {
		for i+1 < len(keys) && uint64(keys[i+1]) <= uint64(b)<<shift {
			i++
		}
		buckets[b] = uint32(i)
	}
	// The sentinel: above every key a lookup (below span) can have.
	keys = append(keys, math.MaxUint32)
	rules = append(rules, fastRule{})
	x.flatBase, x.flatEnd, x.flatKeys, x.flatRules = base, span, keys, rules
	x.flatBuckets, x.flatShift = buckets, uint8(shift)
}

// findRow returns the function covering pc (nil if none) and the index
// of its row covering pc (-1 if none): the general path's lookup, which,
// unlike the flat table, also names the function (for signal frames).
func (x *sfIndex) findRow(pc uint64) (*sfFunc, int) {
	st := x.starts
	lo, hi := 0, len(st)
	for lo < hi {
		h := int(uint(lo+hi) >> 1)
		if st[h] <= pc {
			lo = h + 1
		} else {
			hi = h
		}
	}
	if lo == 0 {
		return nil, -1
	}
	f := &x.funcs[lo-1]
	if pc >= f.end {
		return nil, -1
	}
	off := pc - st[lo-1]
	if f.repSize != 0 {
		off %= uint64(f.repSize)
	}
	rs := x.rowStart[f.first : f.first+f.n]
	// The last row starting at or before off.
	lo, hi = 0, len(rs)
	for lo < hi {
		h := int(uint(lo+hi) >> 1)
		if uint64(rs[h]) <= off {
			lo = h + 1
		} else {
			hi = h
		}
	}
	if lo == 0 {
		return f, -1
	}
	return f, int(f.first) + lo - 1
}
