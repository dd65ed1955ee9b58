package sframe

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/sframekit/sframekit/arch"
)

// StartEncoding says how the encoder writes function start fields.
type StartEncoding uint8

// Start field encodings.
const (
	// StartPCRel writes the distance from the field itself to the function
	// and sets FlagFuncStartPCRel (v2 errata 1 and v3; what gas and ld
	// write since binutils 2.45).
	StartPCRel StartEncoding = iota
	// StartSectionRel writes the distance from the start of the section
	// and leaves FlagFuncStartPCRel clear, as the original v2 format
	// (binutils 2.41-2.44) has it.
	StartSectionRel
)

// String returns "pc-relative" or "section-relative".
func (e StartEncoding) String() string {
	switch e {
	case StartPCRel:
		return "pc-relative"
	case StartSectionRel:
		return "section-relative"
	}
	return fmt.Sprintf("StartEncoding(%d)", uint8(e))
}

// EncodeOptions are the section-wide choices of Encode. The zero value
// with ABI set gives what binutils 2.47 writes: version 3, PC-relative
// starts, a sorted function index, the ABI's byte order and fixed offsets.
type EncodeOptions struct {
	// Version is Version2 or Version3; 0 means Version3.
	Version Version
	// ABI selects the data-word layout and, unless ByteOrder is set, the
	// byte order.
	ABI ABI
	// ByteOrder overrides the ABI's byte order when non-nil.
	ByteOrder binary.ByteOrder
	// Addr is the address the section will be loaded at (its sh_addr; 0
	// for a relocatable object). Start fields are computed from it.
	Addr uint64
	// KeepOrder writes the function index in the order given and leaves
	// FlagFDESorted clear, as gas does in relocatable objects. Otherwise
	// the index is sorted by start address (stably) and the flag set.
	KeepOrder bool
	// Start selects the encoding of function start fields.
	Start StartEncoding
	// FramePointer sets FlagFramePointer (v2 only; no producer sets it).
	FramePointer bool
	// ExplicitFixed makes CFAFixedRAOffset and CFAFixedFPOffset be
	// written as given. Otherwise they default to the ABI's values:
	// RA at CFA-8 on AMD64, nothing fixed elsewhere.
	ExplicitFixed bool
	// CFAFixedRAOffset and CFAFixedFPOffset are the header's fixed
	// offsets (0: not fixed); see ExplicitFixed.
	CFAFixedRAOffset int8
	CFAFixedFPOffset int8
	// AuxHeader is written after the fixed header (at most 255 bytes;
	// no producer writes one).
	AuxHeader []byte
	// Align, when above 1, pads the section with zero bytes to a multiple
	// of Align bytes (gas pads s390x objects' .sframe to 8). The padding
	// lies outside the FRE sub-section.
	Align int
}

// EncFunc is one function to encode: its address range, its attributes
// and its rows, with rules expressed as Section.Rules returns them.
type EncFunc struct {
	// Start is the function's address; Size its length in bytes.
	Start uint64
	Size  uint32
	// PCType and RepSize: PCMask functions (PLT stubs) repeat their rows
	// every RepSize bytes. RepSize is written for PCInc functions too
	// (ld 2.44 wrote 16 for the first PLT entry).
	PCType  PCType
	RepSize uint8
	// Signal marks a signal trampoline (v3 only).
	Signal bool
	// PAuthKeyB (AArch64): return addresses are signed with the B key.
	PAuthKeyB bool
	// Type is the FDE type; FDEFlex exists in v3 only.
	Type FDEType
	// MinFREType is the narrowest FRE start-address width to use. The
	// encoder picks the smallest width that holds the function size, as
	// gas does, or this one if it is wider (ld sizes PLT entries by the
	// whole PLT). The zero value, FREAddr1, means "as small as possible".
	MinFREType FREType
	// Rows are the function's FREs in increasing StartOff order.
	Rows []EncRow
}

// EncRow is one row to encode: where it starts and its rules.
type EncRow struct {
	// StartOff is the offset from the function start (PCInc) or within
	// the repeated block (PCMask).
	StartOff uint32
	Row      Row
}

// EncodeError reports what the chosen version or ABI cannot express, or
// an input that is inconsistent. Func is the index of the function in the
// input slice (or -1), Row the row index (or -1).
type EncodeError struct {
	Func  int
	Start uint64 // the function's start address
	Row   int
	Msg   string // what cannot be encoded, and why
}

// Error formats the error with the function index, start and row.
func (e *EncodeError) Error() string {
	s := "sframe: encode: "
	if e.Func >= 0 {
		s += fmt.Sprintf("function %d (start %#x): ", e.Func, e.Start)
	}
	if e.Row >= 0 {
		s += fmt.Sprintf("row %d: ", e.Row)
	}
	return s + e.Msg
}

// encoder holds the resolved options.
type encoder struct {
	v       Version
	abi     ABI
	o       binary.ByteOrder
	fixedRA int8
	fixedFP int8
	fdeSize int
	sp, fp  arch.Reg
	raRule  Rule // the fixed RA rule, when fixedRA != 0
	fpRule  Rule // the fixed FP rule, when fixedFP != 0
}

func (opts *EncodeOptions) resolve() (encoder, error) {
	var e encoder
	e.v = opts.Version
	if e.v == 0 {
		e.v = Version3
	}
	if e.v != Version2 && e.v != Version3 {
		return e, &EncodeError{Func: -1, Row: -1, Msg: fmt.Sprintf("cannot write %s (only versions 2 and 3)", e.v)}
	}
	e.abi = opts.ABI
	if e.abi < ABIAArch64BE || e.abi > ABIS390XBE {
		return e, &EncodeError{Func: -1, Row: -1, Msg: fmt.Sprintf("unknown %s", e.abi)}
	}
	be := e.abi.BigEndian()
	switch opts.ByteOrder {
	case nil:
	case binary.ByteOrder(binary.BigEndian):
		be = true
	case binary.ByteOrder(binary.LittleEndian):
		be = false
	default:
		be = opts.ByteOrder.Uint16([]byte{0, 1}) == 1
	}
	e.o = binary.LittleEndian
	if be {
		e.o = binary.BigEndian
	}
	if opts.ExplicitFixed {
		e.fixedRA, e.fixedFP = opts.CFAFixedRAOffset, opts.CFAFixedFPOffset
	} else if e.abi == ABIAMD64LE {
		e.fixedRA = -8
	}
	if opts.Start != StartPCRel && opts.Start != StartSectionRel {
		return e, &EncodeError{Func: -1, Row: -1, Msg: fmt.Sprintf("unknown start encoding %d", opts.Start)}
	}
	if opts.FramePointer && e.v != Version2 {
		return e, &EncodeError{Func: -1, Row: -1, Msg: "SFRAME_F_FRAME_POINTER exists in versions 1 and 2 only"}
	}
	if len(opts.AuxHeader) > math.MaxUint8 {
		return e, &EncodeError{Func: -1, Row: -1, Msg: fmt.Sprintf("auxiliary header of %d bytes (at most 255)", len(opts.AuxHeader))}
	}
	if opts.Align < 0 || opts.Align > 1<<12 {
		return e, &EncodeError{Func: -1, Row: -1, Msg: fmt.Sprintf("alignment %d out of range [0, 4096]", opts.Align)}
	}
	e.fdeSize = e.v.FDESize()
	e.sp, e.fp = e.abi.Arch().SP(), e.abi.Arch().FP()
	e.raRule = Rule{Kind: RuleDeref, Base: RegCFA, Offset: int64(e.fixedRA), Fixed: true}
	e.fpRule = Rule{Kind: RuleDeref, Base: RegCFA, Offset: int64(e.fixedFP), Fixed: true}
	return e, nil
}

// Check reports whether f can be encoded with these options, returning
// the *EncodeError Encode would give for it (with Func set to -1). It
// lets callers drop what a version cannot express before encoding.
func (opts *EncodeOptions) Check(f *EncFunc) error {
	e, err := opts.resolve()
	if err != nil {
		return err
	}
	_, err = e.funcFRELen(f, -1)
	return err
}

// freType returns the FRE start-address width for f.
func freTypeFor(f *EncFunc) FREType {
	t := FREAddr4
	switch {
	case f.Size < 1<<8:
		t = FREAddr1
	case f.Size < 1<<16:
		t = FREAddr2
	}
	if f.MinFREType > t && f.MinFREType <= FREAddr4 {
		t = f.MinFREType
	}
	return t
}

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
		return rowErr(fn, f, ri, "CFA rule %s needs a flexible FDE (v3)", ruleString(c))
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
			return rowErr(fn, f, ri, "FP rule %s differs from the header's fixed FP offset %d", ruleString(r.FP), e.fixedFP)
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
			return rowErr(fn, f, ri, "RA rule %s differs from the header's fixed RA offset %d", ruleString(r.RA), e.fixedRA)
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
	switch e.abi {
	case ABIAMD64LE:
		if b.n > 2 {
			return rowErr(fn, f, ri, "%d data words; AMD64 rows hold at most 2 (no fixed RA offset?)", b.n)
		}
	case ABIAArch64BE, ABIAArch64LE:
		if b.n == 2 && (e.fixedRA != 0 || e.fixedFP != 0) {
			// A fixed offset in the header frees one of the three
			// words; AArch64 rows still hold 1 or 3, and the decoder
			// ignores the last one.
			b.add(0, false)
			b.info = b.info&^0x1e | uint8(b.n)<<1
		}
		if b.n != 1 && b.n != 3 {
			return rowErr(fn, f, ri, "AArch64 rows save RA and FP together or neither (rule would need %d words)", b.n)
		}
	}
	return nil
}

// savedWord encodes a default-FDE RA or FP rule.
func (e *encoder) savedWord(fn int, f *EncFunc, ri int, r Rule, what string) (int32, error) {
	if r.Fixed {
		return 0, rowErr(fn, f, ri, "%s rule %s is marked fixed but the header has no fixed %s offset", what, ruleString(r), what)
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
	return 0, rowErr(fn, f, ri, "%s rule %s needs a flexible FDE (v3)", what, ruleString(r))
}

// flexPair encodes a rule as a flexible (control, offset) pair.
func (e *encoder) flexPair(fn int, f *EncFunc, ri int, r Rule, what string, b *wordsBuf) error {
	if r.Fixed {
		return rowErr(fn, f, ri, "fixed %s rule %s cannot be written in a flexible row that has more entries", what, ruleString(r))
	}
	var ctl uint32
	switch r.Kind {
	case RuleValue:
	case RuleDeref:
		ctl |= flexDerefP
	default:
		return rowErr(fn, f, ri, "%s rule %s cannot be written as a flexible pair", what, ruleString(r))
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
		return rowErr(fn, f, ri, "flexible CFA rule %s must be based on a register", ruleString(r.CFA))
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
		return rowErr(fn, f, ri, "RA rule %s cannot precede an FP rule in a flexible row", ruleString(r.RA))
	default:
		if r.RA.Kind == RuleValue && r.RA.Base == RegCFA {
			return rowErr(fn, f, ri, "RA rule %s has control word 0, which reads as padding", ruleString(r.RA))
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

func ruleString(r Rule) string {
	base := "cfa"
	if r.Base != RegCFA {
		base = fmt.Sprintf("r%d", r.Base)
	}
	switch r.Kind {
	case RuleUnspecified:
		return "unspecified"
	case RuleNotSaved:
		return "not-saved"
	case RuleValue:
		return fmt.Sprintf("%s%+d", base, r.Offset)
	case RuleDeref:
		return fmt.Sprintf("(%s%+d)", base, r.Offset)
	}
	return r.Kind.String()
}

// checkFunc validates the function-level attributes of f.
func (e *encoder) checkFunc(fn int, f *EncFunc) error {
	if f.Type == FDEFlex && e.v != Version3 {
		return rowErr(fn, f, -1, "flexible FDEs exist in version 3 only")
	}
	if f.Type > FDEFlex {
		return rowErr(fn, f, -1, "unknown %s", f.Type)
	}
	if f.Signal && e.v != Version3 {
		return rowErr(fn, f, -1, "the signal-frame bit exists in version 3 only")
	}
	if f.PCType > PCMask {
		return rowErr(fn, f, -1, "unknown PC type %d", f.PCType)
	}
	if f.MinFREType > FREAddr4 {
		return rowErr(fn, f, -1, "unknown %s", f.MinFREType)
	}
	if e.v == Version3 && len(f.Rows) > math.MaxUint16 {
		return rowErr(fn, f, -1, "%d rows; version 3 allows at most 65535 per function", len(f.Rows))
	}
	if uint64(len(f.Rows)) > math.MaxUint32 {
		return rowErr(fn, f, -1, "too many rows")
	}
	if f.PCType == PCMask && f.RepSize == 0 {
		return rowErr(fn, f, -1, "PC-mask function with repeat size 0")
	}
	return nil
}

// rowLimit returns the bound FRE start offsets of f must stay below.
func rowLimit(f *EncFunc) uint64 {
	if f.PCType == PCMask {
		return uint64(f.RepSize)
	}
	return uint64(f.Size)
}

// checkStart checks the start offset of row ri of f against the previous
// row's (last, -1 for none) and the function's limit.
func checkStart(fn int, f *EncFunc, ri int, last int64, limit uint64) error {
	so := f.Rows[ri].StartOff
	if int64(so) <= last {
		return rowErr(fn, f, ri, "start offset %#x not above the previous %#x", so, last)
	}
	if uint64(so) >= limit && !(limit == 0 && so == 0) {
		return rowErr(fn, f, ri, "start offset %#x not below %#x", so, limit)
	}
	return nil
}

// funcFRELen validates f and returns the size of its FRE data (with the
// v3 attribute).
func (e *encoder) funcFRELen(f *EncFunc, fn int) (int, error) {
	if err := e.checkFunc(fn, f); err != nil {
		return 0, err
	}
	as := freTypeFor(f).Size()
	n := 0
	if e.v == Version3 {
		n = FDEAttrSize
	}
	var b wordsBuf
	limit := rowLimit(f)
	for i := range f.Rows {
		last := int64(-1)
		if i > 0 {
			last = int64(f.Rows[i-1].StartOff)
		}
		if err := checkStart(fn, f, i, last, limit); err != nil {
			return 0, err
		}
		if err := e.encodeRow(fn, f, i, &f.Rows[i].Row, &b); err != nil {
			return 0, err
		}
		n += as + 1 + b.n*(1<<b.sizeCode())
	}
	return n, nil
}

// Encode builds an SFrame section from funcs. The FREs are laid out in
// the order of funcs; the function index is sorted by start address
// unless opts.KeepOrder is set (this is what ld does: FREs in input
// order, index sorted). FRE start-address widths and data-word sizes
// are the smallest that fit, chosen as gas chooses them, so that
// decoding a gas- or ld-made section with Extract and encoding it again
// gives the same bytes.
//
// Encode fails with an *EncodeError naming the function and row when the
// version or ABI cannot express a rule (flexible rules in v2, an offset
// wider than 32 bits, more than 65535 rows in v3, ...), or when the
// input is inconsistent (unordered rows, duplicate starts in a sorted
// index).
func Encode(opts EncodeOptions, funcs []EncFunc) ([]byte, error) {
	e, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	n := len(funcs)
	if uint64(n) > math.MaxUint32 {
		return nil, &EncodeError{Func: -1, Row: -1, Msg: "too many functions"}
	}
	hdrLen := HeaderSize + len(opts.AuxHeader)
	tableLen := uint64(n) * uint64(e.fdeSize)
	if tableLen > math.MaxUint32 {
		return nil, &EncodeError{Func: -1, Row: -1, Msg: "function index larger than 4 GiB"}
	}
	freBase := hdrLen + int(tableLen)

	order, err := indexOrder(&opts, funcs)
	if err != nil {
		return nil, err
	}

	// The FRE sub-section is appended after room for the header and the
	// index, which are filled in once the FRE offsets are known. Rows
	// take 4 to 6 bytes in typical code.
	nrows := 0
	for i := range funcs {
		nrows += len(funcs[i].Rows)
	}
	est := freBase + n*FDEAttrSize + nrows*6 + 64
	out := make([]byte, freBase, est)
	freOffs := make([]uint32, n)
	w := byteWriter{be: e.o == binary.ByteOrder(binary.BigEndian)}
	var b wordsBuf
	for i := range funcs {
		f := &funcs[i]
		if err := e.checkFunc(i, f); err != nil {
			return nil, err
		}
		off := len(out) - freBase
		if uint64(off) > math.MaxUint32 {
			return nil, &EncodeError{Func: i, Start: f.Start, Row: -1, Msg: "FRE sub-section larger than 4 GiB"}
		}
		freOffs[i] = uint32(off)
		t := freTypeFor(f)
		limit := rowLimit(f)
		if e.v == Version3 {
			out = w.u16(out, uint16(len(f.Rows)))
			out = append(out, e.funcInfo(f), byte(f.Type), f.RepSize)
		}
		for ri := range f.Rows {
			r := &f.Rows[ri]
			last := int64(-1)
			if ri > 0 {
				last = int64(f.Rows[ri-1].StartOff)
			}
			if err := checkStart(i, f, ri, last, limit); err != nil {
				return nil, err
			}
			if err := e.encodeRow(i, f, ri, &r.Row, &b); err != nil {
				return nil, err
			}
			// At most 4 + 1 + 6*4 bytes; write by index into room made
			// once per row.
			if cap(out)-len(out) < 29 {
				out = slices.Grow(out, 29+len(out)/4)
			}
			p := len(out)
			out = out[:p+29]
			switch t {
			case FREAddr1:
				out[p] = byte(r.StartOff)
				p++
			case FREAddr2:
				w.put16(out[p:], uint16(r.StartOff))
				p += 2
			default:
				w.put32(out[p:], r.StartOff)
				p += 4
			}
			code := b.sizeCode()
			out[p] = b.info | code<<5
			p++
			switch code {
			case 0:
				for k := 0; k < b.n; k++ {
					out[p+k] = byte(b.w[k])
				}
				p += b.n
			case 1:
				for k := 0; k < b.n; k++ {
					w.put16(out[p+2*k:], uint16(b.w[k]))
				}
				p += 2 * b.n
			default:
				for k := 0; k < b.n; k++ {
					w.put32(out[p+4*k:], uint32(b.w[k]))
				}
				p += 4 * b.n
			}
			out = out[:p]
		}
	}
	total := uint64(len(out) - freBase)
	if total > math.MaxUint32 || uint64(nrows) > math.MaxUint32 {
		return nil, &EncodeError{Func: -1, Row: -1, Msg: "FRE sub-section larger than 4 GiB"}
	}
	if a := opts.Align; a > 1 {
		for len(out)%a != 0 {
			out = append(out, 0)
		}
	}

	o := e.o
	o.PutUint16(out[0:], Magic)
	out[2] = byte(e.v)
	var flags Flags
	if !opts.KeepOrder {
		flags |= FlagFDESorted
	}
	if opts.Start == StartPCRel {
		flags |= FlagFuncStartPCRel
	}
	if opts.FramePointer {
		flags |= FlagFramePointer
	}
	out[3] = byte(flags)
	out[4] = byte(e.abi)
	out[5] = byte(e.fixedFP)
	out[6] = byte(e.fixedRA)
	out[7] = byte(len(opts.AuxHeader))
	o.PutUint32(out[8:], uint32(n))
	o.PutUint32(out[12:], uint32(nrows))
	o.PutUint32(out[16:], uint32(total))
	o.PutUint32(out[20:], 0)
	o.PutUint32(out[24:], uint32(tableLen))
	copy(out[HeaderSize:], opts.AuxHeader)

	// Function index.
	for k := 0; k < n; k++ {
		i := k
		if order != nil {
			i = int(order[k])
		}
		f := &funcs[i]
		off := hdrLen + k*e.fdeSize
		var field uint64
		if opts.Start == StartPCRel {
			field = f.Start - opts.Addr - uint64(off)
		} else {
			field = f.Start - opts.Addr
		}
		if e.v == Version3 {
			o.PutUint64(out[off:], field)
			o.PutUint32(out[off+8:], f.Size)
			o.PutUint32(out[off+12:], freOffs[i])
			continue
		}
		if int64(field) != int64(int32(field)) {
			return nil, &EncodeError{Func: i, Start: f.Start, Row: -1,
				Msg: fmt.Sprintf("start field %#x (%s) is wider than the 32 bits of a v2 FDE", int64(field), opts.Start)}
		}
		o.PutUint32(out[off:], uint32(field))
		o.PutUint32(out[off+4:], f.Size)
		o.PutUint32(out[off+8:], freOffs[i])
		o.PutUint32(out[off+12:], uint32(len(f.Rows)))
		out[off+16] = e.funcInfo(f)
		out[off+17] = f.RepSize
	}
	return out, nil
}

// indexOrder returns the order of the function index: nil for the input
// order (KeepOrder, or input already sorted), else indices sorted stably
// by start address. A sorted index needs distinct starts.
func indexOrder(opts *EncodeOptions, funcs []EncFunc) ([]int32, error) {
	if opts.KeepOrder {
		return nil, nil
	}
	n := len(funcs)
	var order []int32
	if !slices.IsSortedFunc(funcs, func(a, b EncFunc) int { return cmp.Compare(a.Start, b.Start) }) {
		order = make([]int32, n)
		for i := range order {
			order[i] = int32(i)
		}
		slices.SortStableFunc(order, func(a, b int32) int { return cmp.Compare(funcs[a].Start, funcs[b].Start) })
	}
	for k := 1; k < n; k++ {
		i, j := k-1, k
		if order != nil {
			i, j = int(order[k-1]), int(order[k])
		}
		if funcs[i].Start == funcs[j].Start {
			return nil, &EncodeError{Func: j, Start: funcs[j].Start, Row: -1,
				Msg: fmt.Sprintf("starts at the same address as function %d; a sorted index needs distinct starts (keep the input order instead)", i)}
		}
	}
	return order, nil
}

// byteWriter appends integers in a fixed byte order without going
// through the binary.ByteOrder interface.
type byteWriter struct{ be bool }

func (w byteWriter) u16(b []byte, v uint16) []byte {
	if w.be {
		return append(b, byte(v>>8), byte(v))
	}
	return append(b, byte(v), byte(v>>8))
}

func (w byteWriter) put16(b []byte, v uint16) {
	if w.be {
		b[0], b[1] = byte(v>>8), byte(v)
		return
	}
	b[0], b[1] = byte(v), byte(v>>8)
}

func (w byteWriter) put32(b []byte, v uint32) {
	if w.be {
		b[0], b[1], b[2], b[3] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
		return
	}
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}

// funcInfo builds the function info byte.
func (e *encoder) funcInfo(f *EncFunc) uint8 {
	info := uint8(freTypeFor(f)) | uint8(f.PCType&1)<<4
	if f.PAuthKeyB {
		info |= 1 << 5
	}
	if f.Signal && e.v == Version3 {
		info |= 1 << 7
	}
	return info
}

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
