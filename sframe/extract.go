package sframe

// Extract, the inverse of Encode: a section decoded into the encoder's
// input form, with the options that make Encode give its bytes back.

import "slices"

// Extract decodes every function of s into the encoder's input form,
// with the options that reproduce s: Encode(Extract(s)) gives s's bytes
// back for any section gas or ld wrote. Functions come in the order
// their FREs are laid out (which, for a sorted section, need not be the
// index order); for an unsorted section, in index order. For a version 1
// section the options name Version1, which Encode refuses: set Version
// to convert (v1 AMD64 PC-mask functions are given RepSize 16).
//
// Extract allocates one EncRow per FRE of the header's count, which
// Parse bounds by the section size: functions that together claim more
// FREs than the header says make it fail with ErrCountMismatch.
func Extract(s *Section) (EncodeOptions, []EncFunc, error) {
	opts := EncodeOptions{
		Version:          s.hdr.Version,
		ABI:              s.hdr.ABI,
		ByteOrder:        s.ByteOrder(),
		Addr:             s.Addr(),
		KeepOrder:        s.hdr.Flags&FlagFDESorted == 0,
		Start:            StartSectionRel,
		FramePointer:     s.hdr.Flags&FlagFramePointer != 0 && s.hdr.Version != Version3,
		ExplicitFixed:    true,
		CFAFixedRAOffset: s.hdr.CFAFixedRAOffset,
		CFAFixedFPOffset: s.hdr.CFAFixedFPOffset,
	}
	if s.hdr.Flags&FlagFuncStartPCRel != 0 && s.hdr.Version != Version1 {
		opts.Start = StartPCRel
	}
	if s.hdr.AuxHdrLen != 0 {
		opts.AuxHeader = append([]byte(nil), s.AuxHeader()...)
	}
	opts.Align = trailingAlign(s)
	n := s.NumFuncs()
	fs := make([]Func, n)
	var rowsTotal uint64
	for i := range fs {
		if err := s.decodeFunc(i, &fs[i]); err != nil {
			return opts, nil, err
		}
		rowsTotal += uint64(fs[i].NumFREs)
	}
	// Functions may share FREs: their counts, not the FRE sub-section
	// size, bound the rows, and their total must not pass the header's
	// (bounded by Parse) lest a small section make billions of rows.
	if rowsTotal > uint64(s.hdr.NumFREs) {
		return opts, nil, errorf(ErrCountMismatch, 12, -1, "functions hold %d FREs, header says %d", rowsTotal, s.hdr.NumFREs)
	}
	if !opts.KeepOrder {
		slices.SortStableFunc(fs, func(a, b Func) int {
			switch {
			case a.frePos < b.frePos:
				return -1
			case a.frePos > b.frePos:
				return 1
			}
			// A function without FREs sharing its offset with the next
			// one's FREs (v2) was laid out before it.
			return cmpBool(a.NumFREs != 0, b.NumFREs != 0)
		})
	}
	// One backing array for all rows.
	slab := make([]EncRow, 0, rowsTotal)
	funcs := make([]EncFunc, n)
	for i := range fs {
		var err error
		if slab, err = s.extractFunc(&fs[i], &funcs[i], slab); err != nil {
			return opts, nil, err
		}
	}
	return opts, funcs, nil
}

// ExtractFunc decodes function i of s into the encoder's input form (see
// Extract).
func ExtractFunc(s *Section, i int) (EncFunc, error) {
	var f Func
	var ef EncFunc
	if err := s.decodeFunc(i, &f); err != nil {
		return ef, err
	}
	_, err := s.extractFunc(&f, &ef, nil)
	return ef, err
}

// extractFunc fills ef from f, appending its rows to slab.
func (s *Section) extractFunc(f *Func, ef *EncFunc, slab []EncRow) ([]EncRow, error) {
	ef.Start = f.Start
	ef.Size = f.Size
	ef.PCType = f.PCType()
	ef.PAuthKeyB = f.PAuthKeyB()
	ef.MinFREType = f.FREType()
	if s.hdr.Version != Version1 {
		ef.RepSize = f.RepSize
	} else if ef.PCType == PCMask && s.hdr.ABI == ABIAMD64LE {
		// v1 has no repeat size; its only PC-mask functions are AMD64
		// PLT entries, 16 bytes each (what ld writes in v2).
		ef.RepSize = 16
	}
	ef.Signal = f.Signal()
	ef.Type = f.FDEType()
	startLen := len(slab)
	it := s.FREs(f)
	for it.Next() {
		e := it.FRE()
		r, err := s.Rules(f, e)
		if err != nil {
			return slab, err
		}
		slab = append(slab, EncRow{StartOff: e.StartOff, Row: r})
	}
	if err := it.Err(); err != nil {
		return slab, err
	}
	ef.Rows = slab[startLen:len(slab):len(slab)]
	return slab, nil
}

// trailingAlign returns the alignment that explains zero bytes after the
// FRE sub-section, or 0.
func trailingAlign(s *Section) int {
	end, n := s.freEnd, len(s.data)
	if end == n {
		return 0
	}
	for _, b := range s.data[end:] {
		if b != 0 {
			return 0
		}
	}
	for a := 2; a <= 64; a *= 2 {
		if (end+a-1)/a*a == n {
			return a
		}
	}
	return 0
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}
