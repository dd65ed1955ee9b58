package sframe

import (
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/sframekit/sframekit/internal/enumstr"
)

// HeaderSize is the size of the fixed SFrame header (all versions).
const HeaderSize = 28

// Header is the decoded SFrame header.
type Header struct {
	Version Version
	Flags   Flags
	ABI     ABI
	// CFAFixedFPOffset and CFAFixedRAOffset are the offsets from the CFA
	// at which every row finds the saved FP and RA, or 0 (see HasFixedRA).
	CFAFixedFPOffset int8
	CFAFixedRAOffset int8
	// AuxHdrLen is the size of the auxiliary header after this one.
	AuxHdrLen uint8
	// NumFDEs and NumFREs count the functions and rows, FRELen is the
	// size of the FRE sub-section, and FDEOff and FREOff are the offsets
	// of the function table and the FRE sub-section from the end of the
	// headers.
	NumFDEs uint32
	NumFREs uint32
	FRELen  uint32
	FDEOff  uint32
	FREOff  uint32
}

// HasFixedRA reports whether the return address is at a fixed offset from
// the CFA for every row (AMD64).
func (h Header) HasFixedRA() bool { return h.CFAFixedRAOffset != 0 }

// HasFixedFP reports whether the frame pointer is at a fixed offset from
// the CFA for every row (no current ABI).
func (h Header) HasFixedFP() bool { return h.CFAFixedFPOffset != 0 }

// FDESize returns the size of one entry of the function table: the FDE in
// v1 (17 bytes) and v2 (20 bytes), the FDE index entry in v3 (16 bytes).
func (v Version) FDESize() int {
	switch v {
	case Version1:
		return 17
	case Version2:
		return 20
	case Version3:
		return 16
	}
	return 0
}

// v1PLTEntrySize is the repeat size assumed for v1 PC-mask FDEs.
const v1PLTEntrySize = 16

// FDEAttrSize is the size of the v3 FDE attribute that precedes a
// function's FREs in the FRE sub-section.
const FDEAttrSize = 5

// Error is a decoding or validation failure. It names the byte offset in
// the section and, where it applies, the function index.
type Error struct {
	Offset uint64 // byte offset in the section (the type of cfi.Error's)
	Func   int    // function index, or -1
	Kind   ErrKind
	Msg    string
}

// ErrKind classifies errors so that callers and tests can tell them apart
// without matching on text.
type ErrKind uint8

// Error kinds.
const (
	ErrTruncated ErrKind = iota + 1
	ErrBadMagic
	ErrBadVersion
	ErrBadABI
	ErrBadFlags
	ErrBounds
	ErrUnsorted
	ErrFREOrder
	ErrFRERange
	ErrBadFREType
	ErrBadWordSize
	ErrBadWordCount
	ErrBadFDEType
	ErrCountMismatch
	ErrBadRule
)

var errKindNames = [...]string{
	ErrTruncated:     "truncated",
	ErrBadMagic:      "bad magic",
	ErrBadVersion:    "unsupported version",
	ErrBadABI:        "unknown ABI",
	ErrBadFlags:      "unknown flags",
	ErrBounds:        "out of bounds",
	ErrUnsorted:      "functions not sorted",
	ErrFREOrder:      "FRE start offsets not increasing",
	ErrFRERange:      "FRE start past function end",
	ErrBadFREType:    "bad FRE type",
	ErrBadWordSize:   "bad data-word size",
	ErrBadWordCount:  "bad data-word count",
	ErrBadFDEType:    "bad FDE type",
	ErrCountMismatch: "FRE count mismatch",
	ErrBadRule:       "bad rule",
}

// String describes the kind of error.
func (k ErrKind) String() string { return enumstr.Name(errKindNames[:], k, "ErrKind") }

// Error formats the error with the function index and offset.
func (e *Error) Error() string {
	s := ""
	if e.Func >= 0 {
		s += fmt.Sprintf("function %d: ", e.Func)
	}
	s += fmt.Sprintf("offset %#x: %s", e.Offset, e.Kind)
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	return s
}

func errorf(kind ErrKind, off int, fn int, format string, args ...any) *Error {
	return &Error{Offset: uint64(off), Func: fn, Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// Section is a decoded view over an SFrame section. It keeps a reference
// to the bytes it was given and never copies them.
type Section struct {
	hdr     Header // read through Header, which returns a copy
	data    []byte
	be      bool
	hdrLen  int    // fixed header + auxiliary header
	fdeBase int    // absolute offset of the function table
	freBase int    // absolute offset of the FRE sub-section
	freEnd  int    // end of the FRE sub-section
	fdeSize int    // size of one function table entry
	addr    uint64 // address of the section's first byte

	// idx is the lookup index of sorted sections, built on first use.
	idx     lookupIndex
	idxOnce sync.Once
}

// Parse decodes the header of an SFrame section and checks that the
// function table and the FRE sub-section lie inside data. addr is the
// address at which the section is loaded (its sh_addr, or 0 for a
// relocatable object); function start addresses are computed from it.
//
// Parse does not walk the FREs: call Validate for a full check. Accessors
// on an unvalidated section still never read out of bounds; they return
// errors instead.
func Parse(data []byte, addr uint64) (*Section, error) {
	s := new(Section)
	if err := s.init(data, addr); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Section) init(data []byte, addr uint64) error {
	if len(data) < 4 {
		return errorf(ErrTruncated, 0, -1, "section is %d bytes, shorter than the preamble", len(data))
	}
	switch {
	case data[0] == 0xe2 && data[1] == 0xde:
		s.be = false
	case data[0] == 0xde && data[1] == 0xe2:
		s.be = true
	default:
		return errorf(ErrBadMagic, 0, -1, "%#02x%02x", data[0], data[1])
	}
	v := Version(data[2])
	if v < Version1 || v > Version3 {
		return errorf(ErrBadVersion, 2, -1, "version %d", v)
	}
	if len(data) < HeaderSize {
		return errorf(ErrTruncated, 0, -1, "section is %d bytes, shorter than the %d-byte header", len(data), HeaderSize)
	}
	s.data = data
	s.addr = addr
	h := &s.hdr
	h.Version = v
	h.Flags = Flags(data[3])
	h.ABI = ABI(data[4])
	h.CFAFixedFPOffset = int8(data[5])
	h.CFAFixedRAOffset = int8(data[6])
	h.AuxHdrLen = data[7]
	h.NumFDEs = s.u32(8)
	h.NumFREs = s.u32(12)
	h.FRELen = s.u32(16)
	h.FDEOff = s.u32(20)
	h.FREOff = s.u32(24)
	if h.ABI < ABIAArch64BE || h.ABI > ABIS390XBE {
		return errorf(ErrBadABI, 4, -1, "ABI %d", data[4])
	}
	s.hdrLen = HeaderSize + int(h.AuxHdrLen)
	if s.hdrLen > len(data) {
		return errorf(ErrTruncated, 7, -1, "auxiliary header of %d bytes runs past the end", h.AuxHdrLen)
	}
	s.fdeSize = v.FDESize()
	n := uint64(len(data))
	fdeBase := uint64(s.hdrLen) + uint64(h.FDEOff)
	fdeEnd := fdeBase + uint64(h.NumFDEs)*uint64(s.fdeSize)
	if fdeEnd > n {
		return errorf(ErrBounds, 20, -1, "function table [%#x, %#x) runs past the section end %#x", fdeBase, fdeEnd, n)
	}
	freBase := uint64(s.hdrLen) + uint64(h.FREOff)
	freEnd := freBase + uint64(h.FRELen)
	if freEnd > n {
		return errorf(ErrBounds, 24, -1, "FRE sub-section [%#x, %#x) runs past the section end %#x", freBase, freEnd, n)
	}
	// Every FRE takes at least two bytes; a count the data cannot hold is
	// rejected here so that no caller sizes anything by it.
	if uint64(h.NumFREs)*2 > uint64(h.FRELen) {
		return errorf(ErrBounds, 12, -1, "%d FREs cannot fit in %d bytes", h.NumFREs, h.FRELen)
	}
	s.fdeBase, s.freBase, s.freEnd = int(fdeBase), int(freBase), int(freEnd)
	return nil
}

// Data returns the section bytes the view was made from.
func (s *Section) Data() []byte { return s.data }

// Addr returns the section address given to Parse.
func (s *Section) Addr() uint64 { return s.addr }

// BigEndian reports the section's byte order, as given by its magic.
func (s *Section) BigEndian() bool { return s.be }

// ByteOrder returns the section's byte order.
func (s *Section) ByteOrder() binary.ByteOrder {
	if s.be {
		return binary.BigEndian
	}
	return binary.LittleEndian
}

// Header returns a copy of the decoded header: the Section's own cannot
// be changed after Parse, since its lookups rely on the counts and offsets
// that Parse checked.
func (s *Section) Header() Header { return s.hdr }

// HeaderLen returns the size of the header including the auxiliary header.
func (s *Section) HeaderLen() int { return s.hdrLen }

// AuxHeader returns the auxiliary header bytes (usually empty).
func (s *Section) AuxHeader() []byte { return s.data[HeaderSize:s.hdrLen] }

// NumFuncs returns the number of functions (FDEs).
func (s *Section) NumFuncs() int { return int(s.hdr.NumFDEs) }

func (s *Section) u16(off int) uint16 {
	if s.be {
		return binary.BigEndian.Uint16(s.data[off:])
	}
	return binary.LittleEndian.Uint16(s.data[off:])
}

func (s *Section) u32(off int) uint32 {
	if s.be {
		return binary.BigEndian.Uint32(s.data[off:])
	}
	return binary.LittleEndian.Uint32(s.data[off:])
}

func (s *Section) u64(off int) uint64 {
	if s.be {
		return binary.BigEndian.Uint64(s.data[off:])
	}
	return binary.LittleEndian.Uint64(s.data[off:])
}

// Func is one function descriptor: the FDE (v1, v2) or the FDE index
// entry and its attribute (v3). It knows the version of its section, so
// that its accessors (FREType, PCType, FDEType, PAuthKeyB, Signal) give
// the decoded attributes whatever the version; Info and Info2 are the raw
// bytes behind them.
type Func struct {
	// Index is the function's position in the function table.
	Index int
	// Start is the function's start address, computed from the start
	// field, the section address and the PC-relative flag.
	Start uint64
	// StartField is the raw value of the start field, and StartFieldOff
	// the section offset of that field.
	StartField    int64
	StartFieldOff int
	// Size is the function's length in bytes.
	Size uint32
	// FREOff is the raw start-FRE offset, relative to the FRE sub-section
	// (in v3, the offset of the attribute that precedes the FREs).
	FREOff uint32
	// NumFREs is the number of rows.
	NumFREs uint32
	// Info is the raw info byte and Info2 the raw v3 info2 byte (0 before
	// v3); read them through the accessors.
	Info  uint8
	Info2 uint8
	// RepSize is the repeated block size of PC-mask FDEs (v2, v3; 16
	// for v1 PC-mask FDEs, which have no such field).
	RepSize uint8
	// ver is the version of the section f was decoded from.
	ver Version
	// frePos is the section offset of the first FRE.
	frePos int
}

// Version returns the version of the section f was decoded from.
func (f *Func) Version() Version { return f.ver }

// FREType returns the width of the function's FRE start addresses.
func (f *Func) FREType() FREType { return FREType(f.Info & 0xf) }

// PCType returns whether the FREs match PCs by increment or by mask.
func (f *Func) PCType() PCType { return PCType(f.Info >> 4 & 1) }

// PAuthKeyB reports that return addresses are signed with the B key
// rather than the A key. The bit is defined for AArch64 only; check the
// section's ABI before giving it a meaning.
func (f *Func) PAuthKeyB() bool { return f.Info>>5&1 != 0 }

// Signal reports that the function is a signal trampoline, which only v3
// can say: an unwinder takes the interrupted context from the signal
// frame instead of applying the rows.
func (f *Func) Signal() bool { return f.ver == Version3 && f.Info>>7 != 0 }

// SignalBit reports the top bit of the info byte of a v2 or v3 function:
// Signal in v3; in v2 an unused bit that objdump 2.47 nevertheless prints
// as the signal attribute ("S"). It is for printers that mimic objdump;
// unwinders want Signal.
func (f *Func) SignalBit() bool { return f.ver >= Version2 && f.Info>>7 != 0 }

// FDEType returns the FDE type, which says how the rows' data words are
// read: FDEFlex exists in v3 only, earlier functions are all FDEDefault.
func (f *Func) FDEType() FDEType {
	if f.ver != Version3 {
		return FDEDefault
	}
	return FDEType(f.Info2 & 0x1f)
}

// End returns the address just past the function.
func (f *Func) End() uint64 { return f.Start + uint64(f.Size) }

// start reads the start field of function i and returns its address.
// i must be in range.
func (s *Section) start(i int) uint64 {
	off := s.fdeBase + i*s.fdeSize
	var v int64
	if s.hdr.Version == Version3 {
		v = int64(s.u64(off))
	} else {
		v = int64(int32(s.u32(off)))
	}
	if s.hdr.Flags&FlagFuncStartPCRel != 0 && s.hdr.Version != Version1 {
		return s.addr + uint64(off) + uint64(v)
	}
	return s.addr + uint64(v)
}

// Func decodes function i. It fails only when i is out of range or, for
// v3, when the function's attribute lies outside the FRE sub-section.
func (s *Section) Func(i int) (Func, error) {
	var f Func
	err := s.decodeFunc(i, &f)
	return f, err
}

func (s *Section) decodeFunc(i int, f *Func) error {
	if i < 0 || i >= int(s.hdr.NumFDEs) {
		return errorf(ErrBounds, s.fdeBase, i, "function index out of range [0, %d)", s.hdr.NumFDEs)
	}
	off := s.fdeBase + i*s.fdeSize
	f.Index = i
	f.ver = s.hdr.Version
	f.StartFieldOff = off
	switch s.hdr.Version {
	case Version1, Version2:
		f.StartField = int64(int32(s.u32(off)))
		f.Size = s.u32(off + 4)
		f.FREOff = s.u32(off + 8)
		f.NumFREs = s.u32(off + 12)
		f.Info = s.data[off+16]
		f.Info2 = 0
		f.RepSize = 0
		if s.hdr.Version == Version2 {
			f.RepSize = s.data[off+17]
		} else if f.PCType() == PCMask {
			// v1 has no repeat-size field; ld 2.40 wrote PC-mask FDEs
			// only for PLTs, whose entries are 16 bytes on every ABI it
			// supported, and that is what its FRE offsets assume.
			f.RepSize = v1PLTEntrySize
		}
		f.frePos = s.freBase + int(f.FREOff)
		if uint64(s.freBase)+uint64(f.FREOff) > uint64(s.freEnd) {
			return errorf(ErrBounds, off+8, i, "FRE offset %#x past the FRE sub-section (%d bytes)", f.FREOff, s.hdr.FRELen)
		}
	default:
		f.StartField = int64(s.u64(off))
		f.Size = s.u32(off + 8)
		f.FREOff = s.u32(off + 12)
		attr := uint64(s.freBase) + uint64(f.FREOff)
		if attr+FDEAttrSize > uint64(s.freEnd) {
			return errorf(ErrBounds, off+12, i, "FDE attribute at %#x past the FRE sub-section end %#x", attr, s.freEnd)
		}
		a := int(attr)
		f.NumFREs = uint32(s.u16(a))
		f.Info = s.data[a+2]
		f.Info2 = s.data[a+3]
		f.RepSize = s.data[a+4]
		f.frePos = a + FDEAttrSize
	}
	if s.hdr.Flags&FlagFuncStartPCRel != 0 && s.hdr.Version != Version1 {
		f.Start = s.addr + uint64(off) + uint64(f.StartField)
	} else {
		f.Start = s.addr + uint64(f.StartField)
	}
	return nil
}

// FRE is one frame row entry. Data aliases the section bytes.
type FRE struct {
	// StartOff is the raw start address: an offset from the function
	// start (PCInc) or within the repeated block (PCMask).
	StartOff uint32
	// Info is the raw info byte; read it through the accessors.
	Info uint8
	// Data holds the data words, Count words of WordSize bytes each.
	Data []byte
	// Off is the section offset of the FRE.
	Off int
}

// BaseIsSP reports whether the CFA (of a default FDE) is SP-based.
func (e *FRE) BaseIsSP() bool { return e.Info&1 != 0 }

// Count returns the number of data words.
func (e *FRE) Count() int { return int(e.Info >> 1 & 0xf) }

// WordSize returns the size of each data word in bytes (1, 2 or 4), or 0
// for the invalid code 3.
func (e *FRE) WordSize() int {
	switch e.Info >> 5 & 3 {
	case 0:
		return 1
	case 1:
		return 2
	case 2:
		return 4
	}
	return 0
}

// RASigned reports the mangled-RA bit (AArch64 pointer authentication).
func (e *FRE) RASigned() bool { return e.Info&0x80 != 0 }

// word returns data word i as a signed value; i must be < Count.
func (e *FRE) word(i int, be bool) int32 {
	switch len(e.Data) / e.Count() {
	case 1:
		return int32(int8(e.Data[i]))
	case 2:
		b := e.Data[2*i:]
		if be {
			return int32(int16(uint16(b[0])<<8 | uint16(b[1])))
		}
		return int32(int16(uint16(b[1])<<8 | uint16(b[0])))
	default:
		b := e.Data[4*i:]
		if be {
			return int32(binary.BigEndian.Uint32(b))
		}
		return int32(binary.LittleEndian.Uint32(b))
	}
}

// uword returns data word i zero-extended (control words of flexible
// FDEs are unsigned).
func (e *FRE) uword(i int, be bool) uint32 {
	switch len(e.Data) / e.Count() {
	case 1:
		return uint32(e.Data[i])
	case 2:
		return uint32(uint16(e.word(i, be)))
	default:
		return uint32(e.word(i, be))
	}
}

// Word returns data word i sign-extended, and false when i is out of range.
func (s *Section) Word(e *FRE, i int) (int32, bool) {
	if i < 0 || i >= e.Count() || len(e.Data) == 0 {
		return 0, false
	}
	return e.word(i, s.be), true
}

// decodeFRE decodes the FRE at section offset pos, not reading past end.
func (s *Section) decodeFRE(pos, end int, t FREType, fn int, e *FRE) (int, error) {
	as := t.Size()
	if as == 0 {
		return 0, errorf(ErrBadFREType, pos, fn, "FRE type %d", t)
	}
	if pos < 0 || pos+as+1 > end {
		return 0, errorf(ErrTruncated, pos, fn, "FRE header runs past the FRE sub-section")
	}
	switch as {
	case 1:
		e.StartOff = uint32(s.data[pos])
	case 2:
		e.StartOff = uint32(s.u16(pos))
	default:
		e.StartOff = s.u32(pos)
	}
	e.Info = s.data[pos+as]
	e.Off = pos
	ws := e.WordSize()
	if ws == 0 {
		return 0, errorf(ErrBadWordSize, pos+as, fn, "data-word size code 3")
	}
	n := e.Count() * ws
	p := pos + as + 1
	if p+n > end {
		return 0, errorf(ErrTruncated, p, fn, "%d data words of %d bytes run past the FRE sub-section", e.Count(), ws)
	}
	e.Data = s.data[p : p+n : p+n]
	return p + n, nil
}

// FREIter iterates over the FREs of one function without allocating.
type FREIter struct {
	s    *Section
	fn   int
	t    FREType
	pos  int
	left uint32
	cur  FRE
	err  error
}

// FREs returns an iterator over the rows of f.
func (s *Section) FREs(f *Func) FREIter {
	return FREIter{s: s, fn: f.Index, t: f.FREType(), pos: f.frePos, left: f.NumFREs}
}

// Next decodes the next FRE; it returns false at the end or on error.
func (it *FREIter) Next() bool {
	if it.left == 0 || it.err != nil {
		return false
	}
	next, err := it.s.decodeFRE(it.pos, it.s.freEnd, it.t, it.fn, &it.cur)
	if err != nil {
		it.err = err
		return false
	}
	it.pos = next
	it.left--
	return true
}

// FRE returns the current FRE.
func (it *FREIter) FRE() *FRE { return &it.cur }

// Err returns the decoding error that stopped the iteration, if any.
func (it *FREIter) Err() error { return it.err }
