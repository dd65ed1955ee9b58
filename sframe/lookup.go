package sframe

import "errors"

// ErrNoRow is returned by lookups when no function or no FRE covers the
// PC. It is a fixed value, so a miss does not allocate.
var ErrNoRow = errors.New("no row covers the PC")

// size reads the size field of function i; i must be in range.
func (s *Section) size(i int) uint32 {
	off := s.fdeBase + i*s.fdeSize + 4
	if s.hdr.Version == Version3 {
		off += 4
	}
	return s.u32(off)
}

// FindFunc returns the index of the function whose range [start,
// start+size) contains pc, or -1. It binary-searches when the section is
// flagged sorted and scans linearly otherwise, as libsframe and the Linux
// kernel do.
func (s *Section) FindFunc(pc uint64) int {
	n := int(s.hdr.NumFDEs)
	if s.hdr.Flags&FlagFDESorted == 0 {
		for i := 0; i < n; i++ {
			if st := s.start(i); st <= pc && pc-st < uint64(s.size(i)) {
				return i
			}
		}
		return -1
	}
	s.idxOnce.Do(s.buildIndex)
	if s.idx.recs != nil {
		i := s.idx.find(pc)
		if i < 0 || pc-(s.idx.base+uint64(s.idx.recs[i].start)) >= uint64(s.idx.recs[i].size) {
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
	i := lo - 1
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
	if s.idx.recs != nil {
		s.funcAt(i, &f)
	} else if err := s.decodeFunc(i, &f); err != nil {
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
