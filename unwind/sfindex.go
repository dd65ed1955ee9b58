package unwind

import (
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
	rows   []sfRow
}

type sfFunc struct {
	end     uint64
	first   uint32 // index of the function's first row in rows
	n       uint32 // number of rows
	repSize uint32 // PC-mask functions: block size; 0 for PC-increment
	signal  bool   // v3 signal trampoline
}

type sfRow struct {
	start uint32 // offset from the function start (or in the block)
	ok    bool   // the rules decoded (else the row gives no rule)
	// fast marks the common shape the unwinder applies without the
	// general rule interpreter (the fast path of Unwind): CFA = SP or FP + cfaOff, RA
	// saved at CFA + raOff, FP saved at CFA + fpOff (hasFP) or unchanged.
	fast, cfaFP, hasFP, raSigned bool
	cfaOff, raOff, fpOff         int32
	row                          sframe.Row
}

// compile fills the fast form of r, if the row has that shape.
func (r *sfRow) compile(abi sframe.ABI) {
	row := &r.row
	if !r.ok || row.RAUndefined {
		return
	}
	fits := func(v int64) bool { return v == int64(int32(v)) }
	c, ra, fp := row.CFA, row.RA, row.FP
	if c.Kind != sframe.RuleValue || (c.Base != abi.SP() && c.Base != abi.FP()) || !fits(c.Offset) {
		return
	}
	if ra.Kind != sframe.RuleDeref || ra.Base != sframe.RegCFA || !fits(ra.Offset) {
		return
	}
	switch fp.Kind {
	case sframe.RuleUnspecified, sframe.RuleNotSaved:
	case sframe.RuleDeref:
		if fp.Base != sframe.RegCFA || !fits(fp.Offset) {
			return
		}
		r.hasFP, r.fpOff = true, int32(fp.Offset)
	default:
		return
	}
	r.fast, r.cfaFP, r.raSigned = true, c.Base == abi.FP(), row.RASigned
	r.cfaOff, r.raOff = int32(c.Offset), int32(ra.Offset)
}

// maxIndexRows bounds the memory an index takes (~100 bytes a row).
const maxIndexRows = 1 << 21

// buildSFIndex decodes s, or returns nil.
func buildSFIndex(s *sframe.Section) *sfIndex {
	if s == nil || s.NumFREs > maxIndexRows || s.NumFDEs > maxIndexRows {
		return nil
	}
	n := s.NumFuncs()
	x := &sfIndex{sec: s, starts: make([]uint64, 0, n), funcs: make([]sfFunc, 0, n), rows: make([]sfRow, 0, s.NumFREs)}
	for i := 0; i < n; i++ {
		fn, err := s.Func(i)
		if err != nil {
			return nil
		}
		f := sfFunc{end: fn.End(), first: uint32(len(x.rows)), signal: fn.Signal(s.Version)}
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
			x.rows = append(x.rows, sfRow{start: e.StartOff, ok: err == nil, row: r})
			x.rows[len(x.rows)-1].compile(s.ABI)
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
			if x.rows[k].start <= x.rows[k-1].start {
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
	return x
}

// find returns the function covering pc (nil if none) and its row
// covering pc (nil if none, or if the row did not decode).
func (x *sfIndex) find(pc uint64) (*sfFunc, *sframe.Row) {
	f, r := x.findRow(pc)
	if r == nil || !r.ok {
		return f, nil
	}
	return f, &r.row
}

// findRow is find returning the index's own row.
func (x *sfIndex) findRow(pc uint64) (*sfFunc, *sfRow) {
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
		return nil, nil
	}
	f := &x.funcs[lo-1]
	if pc >= f.end {
		return nil, nil
	}
	off := pc - st[lo-1]
	if f.repSize != 0 {
		off %= uint64(f.repSize)
	}
	rows := x.rows[f.first : f.first+f.n]
	// The last row starting at or before off.
	lo, hi = 0, len(rows)
	for lo < hi {
		h := int(uint(lo+hi) >> 1)
		if uint64(rows[h].start) <= off {
			lo = h + 1
		} else {
			hi = h
		}
	}
	if lo == 0 {
		return f, nil
	}
	return f, &rows[lo-1]
}
