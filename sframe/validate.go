package sframe

// Validate walks the whole section and checks everything the Linux
// kernel's SFrame reader checks, and more: known flags, byte order
// matching the ABI, functions inside the tables, sorted start addresses
// when flagged, FRE types and data-word sizes, FRE start offsets strictly
// increasing and inside the function (or the repeated block), complete
// data words for the ABI, flexible CFA rules based on a register, and
// the FRE total equal to the header's count. It returns the first problem
// found as a *Error naming the function and byte offset.
//
// Its work is linear in the section size: once the functions seen hold
// more FREs than the header's count (which Parse bounds by the FRE
// sub-section size), the rows of the remaining functions, which could
// all share the same FREs, are not walked, and the count mismatch is
// reported.
func (s *Section) Validate() error {
	if unk := s.hdr.Flags &^ KnownFlags(s.hdr.Version); unk != 0 {
		return errorf(ErrBadFlags, 3, -1, "unknown flags %#x for %s", uint8(unk), s.hdr.Version)
	}
	if s.hdr.ABI.BigEndian() != s.be {
		return errorf(ErrBadABI, 4, -1, "%s in a section of the other byte order", s.hdr.ABI)
	}
	var total uint64
	var prev uint64
	var f Func
	for i := 0; i < int(s.hdr.NumFDEs); i++ {
		if err := s.decodeFunc(i, &f); err != nil {
			return err
		}
		if s.hdr.Flags&FlagFDESorted != 0 && i > 0 && f.Start <= prev {
			return errorf(ErrUnsorted, f.StartFieldOff, i, "start %#x not above the previous %#x", f.Start, prev)
		}
		prev = f.Start
		total += uint64(f.NumFREs)
		if total > uint64(s.hdr.NumFREs) {
			continue
		}
		if err := s.validateFunc(&f); err != nil {
			return err
		}
	}
	if total != uint64(s.hdr.NumFREs) {
		return errorf(ErrCountMismatch, 12, -1, "functions hold %d FREs, header says %d", total, s.hdr.NumFREs)
	}
	return nil
}

func (s *Section) validateFunc(f *Func) error {
	t := f.FREType()
	if t.Size() == 0 {
		return errorf(ErrBadFREType, f.StartFieldOff, f.Index, "FRE type %d", t)
	}
	if s.hdr.Version == Version3 {
		if f.FDEType() > FDEFlex || f.Info2&^0x1f != 0 {
			return errorf(ErrBadFDEType, f.frePos-2, f.Index, "info2 %#x", f.Info2)
		}
	}
	limit := uint64(f.Size)
	if f.PCType() == PCMask {
		if f.RepSize == 0 {
			return errorf(ErrBadRule, f.StartFieldOff, f.Index, "PC-mask function with repeat size 0")
		}
		limit = uint64(f.RepSize)
	}
	it := s.FREs(f)
	var last int64 = -1
	for it.Next() {
		e := it.FRE()
		if int64(e.StartOff) <= last {
			return errorf(ErrFREOrder, e.Off, f.Index, "start %#x after %#x", e.StartOff, last)
		}
		last = int64(e.StartOff)
		if uint64(e.StartOff) >= limit && !(limit == 0 && e.StartOff == 0) {
			return errorf(ErrFRERange, e.Off, f.Index, "start %#x not below %#x", e.StartOff, limit)
		}
		if !s.expectedWords(f, e) {
			return errorf(ErrBadWordCount, e.Off, f.Index, "%d data words for %s %s", e.Count(), s.hdr.ABI, f.FDEType())
		}
		if err := s.validateRules(f, e); err != nil {
			return err
		}
	}
	return it.Err()
}

// validateRules checks the rule words of an FRE whose word count is
// already known to be right.
func (s *Section) validateRules(f *Func, e *FRE) error {
	n := e.Count()
	if n == 0 {
		return nil
	}
	if f.FDEType() == FDEFlex {
		if e.uword(0, s.be)&flexRegP == 0 {
			return errorf(ErrBadRule, e.Off, f.Index, "flexible CFA rule not based on a register")
		}
		// Control words sit at 0, 2 and (after an RA pair) 4, or at 3
		// after an RA padding word.
		for _, i := range [...]int{0, 2, 3, 4} {
			if i >= n || (i == 3 && e.uword(2, s.be) != 0) || (i == 4 && e.uword(2, s.be) == 0) {
				continue
			}
			if c := e.uword(i, s.be); !validControl(c) {
				return errorf(ErrBadRule, e.Off, f.Index, "flexible control word %#x (data word %d)", c, i)
			}
		}
		return nil
	}
	if s.hdr.ABI == ABIS390XBE && s.hdr.Version == Version2 {
		for i := 1; i < n; i++ {
			if w := e.word(i, s.be); w&1 != 0 && (w < 0 || w>>1 > MaxReg) {
				return errorf(ErrBadRule, e.Off, f.Index, "register word %d (data word %d)", w, i)
			}
		}
	}
	return nil
}
