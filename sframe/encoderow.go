package sframe

// The data words of one row: each Rule of a Row checked against what the
// version, the ABI and the header's fixed offsets can say, and written
// as the ABI's default words or as v3 flexible (control, offset) pairs.

import (
	"fmt"
	"math"
)

// wordsBuf holds the data words of one FRE.
type wordsBuf struct {
	w    [6]int32
	ctl  [6]bool // word is a flexible control word (unsigned)
	n    int
	info uint8
}

func (b *wordsBuf) add(w int32, ctl bool) {
	b.w[b.n], b.ctl[b.n] = w, ctl
	b.n++
}

// size returns the data-word size code (0, 1, 2) gas would choose: the
// smallest that holds every offset as a signed value and every control
// word as an unsigned one.
func (b *wordsBuf) sizeCode() uint8 {
	code := uint8(0)
	for i := 0; i < b.n; i++ {
		w := b.w[i]
		var c uint8
		if b.ctl[i] {
			switch u := uint32(w); {
			case u <= math.MaxUint8:
				c = 0
			case u <= math.MaxUint16:
				c = 1
			default:
				c = 2
			}
		} else {
			switch {
			case w == int32(int8(w)):
				c = 0
			case w == int32(int16(w)):
				c = 1
			default:
				c = 2
			}
		}
		if c > code {
			code = c
		}
	}
	return code
}

func rowErr(fn int, f *EncFunc, row int, format string, args ...any) *EncodeError {
	return &EncodeError{Func: fn, Start: f.Start, Row: row, Msg: fmt.Sprintf(format, args...)}
}

func fitsOffset(off int64) bool { return off == int64(int32(off)) }

// cfaWord converts a CFA offset to its stored form (s390x scaling).
func (e *encoder) cfaWord(off int64) (int32, bool) {
	if e.abi == ABIS390XBE {
		d := off - s390xCFAAdjust
		if d%s390xCFAFactor != 0 {
			return 0, false
		}
		off = d / s390xCFAFactor
	}
	return int32(off), fitsOffset(off)
}

// encodeRow computes the FRE info byte and data words of one row.
func (e *encoder) encodeRow(fn int, f *EncFunc, ri int, r *Row, b *wordsBuf) error {
	b.n = 0
	b.info = 0
	if r.RASigned {
		b.info |= 0x80
	}
	if r.RAUndefined {
		if r.CFA != (Rule{}) || r.RA != (Rule{}) || r.FP != (Rule{}) {
			return rowErr(fn, f, ri, "an RA-undefined row cannot carry CFA, RA or FP rules")
		}
		return nil
	}
	if f.Type == FDEFlex {
		return e.encodeFlex(fn, f, ri, r, b)
	}
	if f.Type != FDEDefault {
		return rowErr(fn, f, ri, "unknown %s", f.Type)
	}
	// CFA.
	c := r.CFA
	if c.Kind != RuleValue || c.Fixed {
		return rowErr(fn, f, ri, "CFA rule %s needs a flexible FDE (v3)", c.String())
	}
	switch c.Base {
	case e.sp:
		b.info |= 1
	case e.fp:
	default:
		return rowErr(fn, f, ri, "CFA based on register %d needs a flexible FDE (v3)", c.Base)
	}
	w, ok := e.cfaWord(c.Offset)
	if !ok {
		if e.abi == ABIS390XBE && (c.Offset-s390xCFAAdjust)%s390xCFAFactor != 0 {
			return rowErr(fn, f, ri, "s390x CFA offset %d is not 160 plus a multiple of 8", c.Offset)
		}
		return rowErr(fn, f, ri, "CFA offset %d is wider than 32 bits", c.Offset)
	}
	b.add(w, false)

	// FP first: it decides whether an RA slot is needed.
	var fpWord int32
	hasFP := false
	if e.fixedFP != 0 {
		if r.FP != e.fpRule {
			return rowErr(fn, f, ri, "FP rule %s differs from the header's fixed FP offset %d", r.FP.String(), e.fixedFP)
		}
	} else if r.FP.Kind != RuleUnspecified {
		var err error
		fpWord, err = e.savedWord(fn, f, ri, r.FP, "FP")
		if err != nil {
			return err
		}
		hasFP = true
	}
	// RA.
	if e.fixedRA != 0 {
		if r.RA != e.raRule {
			return rowErr(fn, f, ri, "RA rule %s differs from the header's fixed RA offset %d", r.RA.String(), e.fixedRA)
		}
	} else {
		switch r.RA.Kind {
		case RuleUnspecified:
			if hasFP {
				return rowErr(fn, f, ri, "an unspecified RA followed by a saved FP cannot be expressed (the RA slot would read as not saved)")
			}
		case RuleNotSaved:
			if !isNotSaved(r.RA) {
				return rowErr(fn, f, ri, "malformed not-saved RA rule %+v", r.RA)
			}
			b.add(0, false)
		default:
			ra, err := e.savedWord(fn, f, ri, r.RA, "RA")
			if err != nil {
				return err
			}
			if ra == 0 {
				return rowErr(fn, f, ri, "RA at CFA+0 cannot be expressed (a 0 word means not saved)")
			}
			b.add(ra, false)
		}
	}
	if hasFP {
		b.add(fpWord, false)
	}
	b.info |= uint8(b.n) << 1
	// The word counts the ABI's layout allows (see expectedWords).
	if e.abi == ABIAMD64LE && b.n > 2 {
		return rowErr(fn, f, ri, "%d data words; AMD64 rows hold at most 2 (no fixed RA offset?)", b.n)
	}
	return nil
}

// savedWord encodes a default-FDE RA or FP rule.
func (e *encoder) savedWord(fn int, f *EncFunc, ri int, r Rule, what string) (int32, error) {
	if r.Fixed {
		return 0, rowErr(fn, f, ri, "%s rule %s is marked fixed but the header has no fixed %s offset", what, r.String(), what)
	}
	switch {
	case r.Kind == RuleDeref && r.Base == RegCFA:
		if !fitsOffset(r.Offset) {
			return 0, rowErr(fn, f, ri, "%s offset %d is wider than 32 bits", what, r.Offset)
		}
		w := int32(r.Offset)
		if e.abi == ABIS390XBE && e.v == Version2 && w&1 != 0 {
			return 0, rowErr(fn, f, ri, "odd %s offset %d reads as a register number in v2 s390x", what, w)
		}
		return w, nil
	case r.Kind == RuleValue && r.Base != RegCFA && r.Offset == 0 && e.abi == ABIS390XBE && e.v == Version2:
		if r.Base > MaxReg {
			return 0, rowErr(fn, f, ri, "register %d too large", r.Base)
		}
		return int32(r.Base)<<1 | 1, nil
	}
	return 0, rowErr(fn, f, ri, "%s rule %s needs a flexible FDE (v3)", what, r.String())
}

// flexPair encodes a rule as a flexible (control, offset) pair.
func (e *encoder) flexPair(fn int, f *EncFunc, ri int, r Rule, what string, b *wordsBuf) error {
	if r.Fixed {
		return rowErr(fn, f, ri, "fixed %s rule %s cannot be written in a flexible row that has more entries", what, r.String())
	}
	var ctl uint32
	switch r.Kind {
	case RuleValue:
	case RuleDeref:
		ctl |= flexDerefP
	default:
		return rowErr(fn, f, ri, "%s rule %s cannot be written as a flexible pair", what, r.String())
	}
	if r.Base != RegCFA {
		if r.Base > MaxReg {
			return rowErr(fn, f, ri, "%s based on invalid register %d", what, r.Base)
		}
		ctl |= uint32(r.Base)<<3 | flexRegP
	}
	off := r.Offset
	if what == "CFA" && e.abi == ABIS390XBE {
		w, ok := e.cfaWord(off)
		if !ok {
			return rowErr(fn, f, ri, "s390x CFA offset %d is not 160 plus a multiple of 8 or too wide", off)
		}
		off = int64(w)
	}
	if !fitsOffset(off) {
		return rowErr(fn, f, ri, "%s offset %d is wider than 32 bits", what, r.Offset)
	}
	b.add(int32(ctl), true)
	b.add(int32(off), false)
	return nil
}

func (e *encoder) encodeFlex(fn int, f *EncFunc, ri int, r *Row, b *wordsBuf) error {
	if e.v != Version3 {
		return rowErr(fn, f, ri, "flexible FDEs exist in version 3 only")
	}
	if r.CFA.Base == RegCFA {
		return rowErr(fn, f, ri, "flexible CFA rule %s must be based on a register", r.CFA.String())
	}
	if err := e.flexPair(fn, f, ri, r.CFA, "CFA", b); err != nil {
		return err
	}
	hasFP := r.FP.Kind != RuleUnspecified
	switch {
	case r.RA.Kind == RuleUnspecified && e.fixedRA == 0 && !hasFP:
	case e.fixedRA != 0 && r.RA == e.raRule && !hasFP:
	case e.fixedRA != 0 && hasFP && withoutPadding(r.RA) == e.raRule:
		// The fixed RA before an FP pair is written as a padding word.
		b.add(0, true)
	case r.RA.Kind == RuleNotSaved:
		if !isNotSaved(r.RA) {
			return rowErr(fn, f, ri, "malformed not-saved RA rule %+v", r.RA)
		}
		if !hasFP {
			return rowErr(fn, f, ri, "a not-saved RA without an FP rule cannot be expressed in a flexible row")
		}
		b.add(0, true)
	case r.RA.Kind == RuleUnspecified || r.RA.Fixed:
		return rowErr(fn, f, ri, "RA rule %s cannot precede an FP rule in a flexible row", r.RA.String())
	default:
		if r.RA.Kind == RuleValue && r.RA.Base == RegCFA {
			return rowErr(fn, f, ri, "RA rule %s has control word 0, which reads as padding", r.RA.String())
		}
		if err := e.flexPair(fn, f, ri, r.RA, "RA", b); err != nil {
			return err
		}
	}
	if hasFP {
		if err := e.flexPair(fn, f, ri, r.FP, "FP", b); err != nil {
			return err
		}
	}
	b.info |= uint8(b.n) << 1
	return nil
}

// withoutPadding returns r with the Padding mark cleared, for comparing
// rules by meaning.
func withoutPadding(r Rule) Rule {
	r.Padding = false
	return r
}

// isNotSaved reports whether r is the canonical not-saved rule (with or
// without the Padding mark the decoder sets).
func isNotSaved(r Rule) bool {
	return withoutPadding(r) == Rule{Kind: RuleNotSaved, Base: RegCFA}
}
