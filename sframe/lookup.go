package sframe

import "errors"

// ErrNoRow is returned by lookups when no function or no FRE covers the
// PC. It is a fixed value, so a miss does not allocate.
var ErrNoRow = errors.New("sframe: no row covers the PC")

// size reads the size field of function i; i must be in range.
func (s *Section) size(i int) uint32 {
	off := s.fdeBase + i*s.fdeSize + 4
	if s.Version == Version3 {
		off += 4
	}
	return s.u32(off)
}

// lookupIndex is a compact copy of the sorted function start addresses,
// as offsets from the first one: 4 bytes per function instead of the
// 16-20 byte table entries, so that a binary search touches a quarter of
// the cache lines. It is built once, on the first lookup, and only for
// sections flagged sorted whose functions span less than 4 GiB.
type lookupIndex struct {
	base uint64
	rel  []uint32
}

func (s *Section) buildIndex() {
	n := int(s.NumFDEs)
	if n == 0 || s.Flags&FlagFDESorted == 0 {
		return
	}
	base := s.start(0)
	// NumFDEs was checked against the section size in Parse, so this
	// allocation is bounded by the input.
	rel := make([]uint32, n)
	for i := 0; i < n; i++ {
		d := s.start(i) - base
		if d > 0xffffffff || (i > 0 && uint32(d) < rel[i-1]) {
			return // too wide or not sorted after all: search the table
		}
		rel[i] = uint32(d)
	}
	s.idx = lookupIndex{base: base, rel: rel}
}

// FindFunc returns the index of the function whose range [start,
// start+size) contains pc, or -1. It binary-searches when the section is
// flagged sorted and scans linearly otherwise, as libsframe and the Linux
// kernel do.
func (s *Section) FindFunc(pc uint64) int {
	n := int(s.NumFDEs)
	if s.Flags&FlagFDESorted == 0 {
		for i := 0; i < n; i++ {
			if st := s.start(i); st <= pc && pc-st < uint64(s.size(i)) {
				return i
			}
		}
		return -1
	}
	s.idxOnce.Do(s.buildIndex)
	var i int
	if rel := s.idx.rel; rel != nil {
		if pc < s.idx.base {
			return -1
		}
		key := pc - s.idx.base
		// Branch-free lower bound: the last entry <= key.
		lo, m := 0, len(rel)
		for m > 1 {
			half := m >> 1
			if uint64(rel[lo+half]) <= key {
				lo += half
			}
			m -= half
		}
		i = lo
		if pc-(s.idx.base+uint64(rel[i])) >= uint64(s.size(i)) {
			return -1
		}
		return i
	}
	// Find the last function whose start is <= pc.
	lo, hi := 0, n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s.start(m) <= pc {
			lo = m + 1
		} else {
			hi = m
		}
	}
	i = lo - 1
	if i < 0 || pc-s.start(i) >= uint64(s.size(i)) {
		return -1
	}
	return i
}

// FindFRE returns the function and the FRE that cover pc. FRE i covers
// [start_i, start_{i+1}); the last runs to the end of the function (or of
// the repeated block, for PC-mask FDEs). It returns ErrNoRow when nothing
// covers pc, and a *Error when the section data is corrupt.
func (s *Section) FindFRE(pc uint64) (Func, FRE, error) {
	var f Func
	var e FRE
	i := s.FindFunc(pc)
	if i < 0 {
		return f, e, ErrNoRow
	}
	if err := s.decodeFunc(i, &f); err != nil {
		return f, e, err
	}
	err := s.findInFunc(&f, pc, &e)
	return f, e, err
}

func (s *Section) findInFunc(f *Func, pc uint64, out *FRE) error {
	off := pc - f.Start
	if f.PCType() == PCMask {
		if f.RepSize == 0 {
			return errorf(ErrBadRule, f.StartFieldOff, f.Index, "PC-mask function with repeat size 0")
		}
		off %= uint64(f.RepSize)
	}
	t := f.FREType()
	pos := f.frePos
	found := false
	var cur FRE
	for k := uint32(0); k < f.NumFREs; k++ {
		next, err := s.decodeFRE(pos, s.freEnd, t, f.Index, &cur)
		if err != nil {
			return err
		}
		if uint64(cur.StartOff) > off {
			break
		}
		*out = cur
		found = true
		pos = next
	}
	if !found {
		return ErrNoRow
	}
	return nil
}

// RowForPC looks up pc and interprets the covering FRE. It does not
// allocate unless the section is corrupt.
func (s *Section) RowForPC(pc uint64) (Row, error) {
	f, e, err := s.FindFRE(pc)
	if err != nil {
		return Row{}, err
	}
	return s.Rules(&f, &e)
}
