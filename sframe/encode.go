package sframe

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/internal/enumstr"
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
	return enumstr.Name([]string{StartPCRel: "pc-relative", StartSectionRel: "section-relative"}, e, "StartEncoding")
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
	s := "encode: "
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
		if out, err = e.appendFREs(out, i, f, w, &b); err != nil {
			return nil, err
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

	e.putHeader(out, &opts, n, nrows, total, tableLen)
	if err := e.putIndex(out, &opts, funcs, order, freOffs); err != nil {
		return nil, err
	}
	return out, nil
}

// appendFREs appends the FREs of function fn (in v3, after its FDE
// attribute) to out, in the order of f.Rows, each with the smallest
// start-address width and data-word size that fit.
func (e *encoder) appendFREs(out []byte, fn int, f *EncFunc, w byteWriter, b *wordsBuf) ([]byte, error) {
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
		if err := checkStart(fn, f, ri, last, limit); err != nil {
			return out, err
		}
		if err := e.encodeRow(fn, f, ri, &r.Row, b); err != nil {
			return out, err
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
	return out, nil
}

// putHeader fills in the fixed header and the auxiliary header at the
// start of out, once the counts and sizes are known.
func (e *encoder) putHeader(out []byte, opts *EncodeOptions, n, nrows int, freLen, tableLen uint64) {
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
	o.PutUint32(out[16:], uint32(freLen))
	o.PutUint32(out[20:], 0)
	o.PutUint32(out[24:], uint32(tableLen))
	copy(out[HeaderSize:], opts.AuxHeader)
}

// putIndex fills in the function index after the headers: entry k is
// function order[k] (k itself when order is nil), its FREs at freOffs.
func (e *encoder) putIndex(out []byte, opts *EncodeOptions, funcs []EncFunc, order []int32, freOffs []uint32) error {
	o, hdrLen := e.o, HeaderSize+len(opts.AuxHeader)
	for k := range funcs {
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
			return &EncodeError{Func: i, Start: f.Start, Row: -1,
				Msg: fmt.Sprintf("start field %#x (%s) is wider than the 32 bits of a v2 FDE", int64(field), opts.Start)}
		}
		o.PutUint32(out[off:], uint32(field))
		o.PutUint32(out[off+4:], f.Size)
		o.PutUint32(out[off+8:], freOffs[i])
		o.PutUint32(out[off+12:], uint32(len(f.Rows)))
		out[off+16] = e.funcInfo(f)
		out[off+17] = f.RepSize
	}
	return nil
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
