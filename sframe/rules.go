package sframe

import "github.com/sframekit/sframekit/arch"

// s390x stores CFA offsets as (offset - 160) / 8 so that most fit in a
// byte; see SFRAME_S390X_CFA_OFFSET_ADJUSTMENT and _ALIGNMENT_FACTOR.
const (
	s390xCFAAdjust = 160
	s390xCFAFactor = 8
)

// Flexible-FDE control word bits.
const (
	flexRegP   = 1
	flexDerefP = 2
	flexUnused = 4
)

// MaxReg is the largest DWARF register number a rule may name. Real ABIs
// stay far below it (AArch64's vector registers end at 95); larger values
// in a control word or an s390x register word are corrupt data.
const MaxReg = 1023

// Rules interprets the data words of FRE e of function f. It resolves
// the ABI's word layout, the header's fixed offsets, s390x scaling and
// register encodings, and flexible FDEs. It fails only when the words
// needed for the CFA are missing; extra words are ignored here and
// reported by Validate.
func (s *Section) Rules(f *Func, e *FRE) (Row, error) {
	var r Row
	r.RASigned = e.RASigned()
	n := e.Count()
	if n == 0 {
		if s.hdr.Version == Version1 {
			return r, errorf(ErrBadWordCount, e.Off, f.Index, "FRE without data words")
		}
		r.RAUndefined = true
		return r, nil
	}
	if f.FDEType() == FDEFlex {
		return s.flexRules(f, e, r)
	}
	be := s.be
	a := s.hdr.ABI.Arch()
	r.CFA = Rule{Kind: RuleValue, Base: a.FP(), Offset: int64(e.word(0, be))}
	if e.BaseIsSP() {
		r.CFA.Base = a.SP()
	}
	if s.hdr.ABI == ABIS390XBE {
		r.CFA.Offset = r.CFA.Offset*s390xCFAFactor + s390xCFAAdjust
	}
	fpIdx := 1
	if s.hdr.HasFixedRA() {
		r.RA = Rule{Kind: RuleDeref, Base: RegCFA, Offset: int64(s.hdr.CFAFixedRAOffset), Fixed: true}
	} else {
		fpIdx = 2
		if n > 1 {
			r.RA = s.savedRule(e.word(1, be), true)
		}
	}
	if s.hdr.HasFixedFP() {
		r.FP = Rule{Kind: RuleDeref, Base: RegCFA, Offset: int64(s.hdr.CFAFixedFPOffset), Fixed: true}
	} else if n > fpIdx {
		r.FP = s.savedRule(e.word(fpIdx, be), false)
	}
	return r, nil
}

// savedRule interprets a default-FDE RA or FP word.
func (s *Section) savedRule(w int32, ra bool) Rule {
	if ra && w == 0 {
		// SFRAME_FRE_RA_OFFSET_INVALID: padding before an FP word.
		return Rule{Kind: RuleNotSaved, Base: RegCFA}
	}
	if s.hdr.ABI == ABIS390XBE && s.hdr.Version == Version2 && w&1 != 0 {
		// v2 s390x: an odd word is a DWARF register number, shifted. A
		// negative one is corrupt; it maps to MaxReg+1, which Validate
		// rejects, rather than wrapping to a real register.
		reg := arch.Reg(MaxReg + 1)
		if w > 0 && w>>1 <= MaxReg {
			reg = arch.Reg(w >> 1)
		}
		return Rule{Kind: RuleValue, Base: reg}
	}
	return Rule{Kind: RuleDeref, Base: RegCFA, Offset: int64(w)}
}

func (s *Section) flexRules(f *Func, e *FRE, r Row) (Row, error) {
	n := e.Count()
	if n < 2 {
		return r, errorf(ErrBadWordCount, e.Off, f.Index, "flexible FRE with %d data word(s), need a CFA pair", n)
	}
	be := s.be
	r.CFA = flexRule(e.uword(0, be), e.word(1, be))
	if s.hdr.ABI == ABIS390XBE {
		r.CFA.Offset = r.CFA.Offset*s390xCFAFactor + s390xCFAAdjust
	}
	fpIdx := 4
	switch {
	case n <= 2:
		if s.hdr.HasFixedRA() {
			r.RA = Rule{Kind: RuleDeref, Base: RegCFA, Offset: int64(s.hdr.CFAFixedRAOffset), Fixed: true}
		}
	case e.uword(2, be) == 0:
		r.RA = Rule{Kind: RuleNotSaved, Base: RegCFA}
		if s.hdr.HasFixedRA() {
			r.RA = Rule{Kind: RuleDeref, Base: RegCFA, Offset: int64(s.hdr.CFAFixedRAOffset), Fixed: true, Padding: true}
		}
		fpIdx = 3
	case n > 3:
		r.RA = flexRule(e.uword(2, be), e.word(3, be))
	}
	if n > fpIdx+1 {
		r.FP = flexRule(e.uword(fpIdx, be), e.word(fpIdx+1, be))
	}
	return r, nil
}

func flexRule(ctl uint32, off int32) Rule {
	r := Rule{Kind: RuleValue, Base: RegCFA, Offset: int64(off)}
	if ctl&flexRegP != 0 {
		r.Base = arch.Reg(min(ctl>>3, MaxReg+1))
	}
	if ctl&flexDerefP != 0 {
		r.Kind = RuleDeref
	}
	return r
}

// validControl reports whether a flexible control word names a register
// in range and leaves the unused bit clear.
func validControl(ctl uint32) bool {
	return ctl&flexUnused == 0 && ctl>>3 <= MaxReg
}

// expectedWords reports whether n data words are a complete row for f:
// no missing and no leftover words for the ABI and FDE type.
func (s *Section) expectedWords(f *Func, e *FRE) bool {
	n := e.Count()
	if n == 0 {
		return s.hdr.Version != Version1
	}
	if f.FDEType() == FDEFlex {
		switch n {
		case 2:
			return true
		case 4:
			return e.uword(2, s.be) != 0
		case 5:
			return e.uword(2, s.be) == 0
		case 6:
			return e.uword(2, s.be) != 0
		}
		return false
	}
	switch s.hdr.ABI {
	case ABIAMD64LE:
		return n <= 2
	default:
		// AArch64: CFA, then RA, then FP; gas writes CFA and RA alone
		// for a function that saves x30 but not x29 (-fomit-frame-pointer).
		return n <= 3
	}
}
