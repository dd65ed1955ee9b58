package cfi

import (
	"errors"
	"fmt"

	"github.com/sframekit/sframekit/internal/byteorder"
	"github.com/sframekit/sframekit/internal/enumstr"
)

// Error is a problem found in CFI data. It carries the section and the
// byte offset of the entry (or instruction) at fault so that tools can
// point at the bytes; one bad entry never hides the others.
type Error struct {
	Section string  // ".eh_frame", ".debug_frame" or ".eh_frame_hdr"
	Offset  uint64  // byte offset in the section
	Kind    ErrKind // what kind of problem, for callers and tests
	Msg     string  // what is wrong
}

// ErrKind classifies errors so that callers and tests can tell them apart
// without matching on text, as sframe.ErrKind does for SFrame.
type ErrKind uint8

// Error kinds.
const (
	ErrTruncated      ErrKind = iota + 1 // data ends inside an entry, operand or header
	ErrBounds                            // an offset or length points outside the section or entry
	ErrBadLength                         // an entry length that is reserved or too short
	ErrBadEntry                          // not the entry expected (not a CIE, FDE, or a bad CIE pointer)
	ErrUnsupported                       // a version, address size, segment size or augmentation not supported
	ErrBadEncoding                       // an encoded pointer that does not decode
	ErrBadInstruction                    // an instruction that cannot be executed (unknown, bad operand, unmatched state)
	ErrTooManyRules                      // more register rules than a row holds
)

var errKindNames = [...]string{
	ErrTruncated:      "truncated",
	ErrBounds:         "out of bounds",
	ErrBadLength:      "bad length",
	ErrBadEntry:       "bad entry",
	ErrUnsupported:    "unsupported",
	ErrBadEncoding:    "bad pointer encoding",
	ErrBadInstruction: "bad instruction",
	ErrTooManyRules:   "too many register rules",
}

// String describes the kind of error.
func (k ErrKind) String() string { return enumstr.Name(errKindNames[:], k, "ErrKind") }

// Error formats as ".eh_frame+0x1c: message" (no package name: callers
// name the file).
func (e *Error) Error() string {
	return fmt.Sprintf("%s+%#x: %s", e.Section, e.Offset, e.Msg)
}

// ptrErrKind classifies the error of decoding an encoded pointer: data
// that ends inside it, or an encoding that does not decode.
func ptrErrKind(err error) ErrKind {
	if errors.Is(err, errTruncated) {
		return ErrTruncated
	}
	return ErrBadEncoding
}

// ErrNoFDE is returned (wrapped in an *Error or directly) when no FDE
// covers the requested address.
var ErrNoFDE = errors.New("no FDE covers the address")

// errTruncated is the internal marker for reads past the end of a buffer.
var errTruncated = errors.New("truncated")

// buf is a bounds-checked little cursor over a byte slice. Reads past the
// end set err and return zero; callers check err once per entry, which
// keeps the decoding code straight-line.
type buf struct {
	data  []byte
	pos   int
	order endian
	err   error
}

// endian is the byte order of the decoders (inlined calls).
type endian = byteorder.Order

const (
	little = byteorder.Little
	big    = byteorder.Big
)

func (b *buf) left() int { return len(b.data) - b.pos }

func (b *buf) fail() {
	if b.err == nil {
		b.err = errTruncated
	}
	b.pos = len(b.data)
}

func (b *buf) u8() uint8 {
	if b.pos >= len(b.data) {
		b.fail()
		return 0
	}
	v := b.data[b.pos]
	b.pos++
	return v
}

// fixed returns the next n bytes (n at most 8) and moves past them; when
// fewer are left, it fails and returns n zero bytes, so that the
// fixed-width reads below return 0.
func (b *buf) fixed(n int) []byte {
	if b.left() < n {
		b.fail()
		return zeros[:n]
	}
	p := b.data[b.pos : b.pos+n]
	b.pos += n
	return p
}

var zeros [8]byte

func (b *buf) u16() uint16 { return b.order.Uint16(b.fixed(2)) }
func (b *buf) u32() uint32 { return b.order.Uint32(b.fixed(4)) }
func (b *buf) u64() uint64 { return b.order.Uint64(b.fixed(8)) }

// uint reads an n-byte unsigned value (n in 1,2,4,8).
func (b *buf) uint(n int) uint64 {
	switch n {
	case 1:
		return uint64(b.u8())
	case 2:
		return uint64(b.u16())
	case 4:
		return uint64(b.u32())
	case 8:
		return b.u64()
	}
	b.fail()
	return 0
}

// DecodeULEB reads an unsigned LEB128 number at data[pos:], as DWARF
// writes them. It returns the value, the position after it, and false
// when data ends inside it. Bits past 64 are dropped.
func DecodeULEB(data []byte, pos int) (uint64, int, bool) {
	var v uint64
	var shift uint
	for pos < len(data) {
		c := data[pos]
		pos++
		if shift < 64 {
			v |= uint64(c&0x7f) << shift
		}
		shift += 7
		if c&0x80 == 0 {
			return v, pos, true
		}
	}
	return v, pos, false
}

// DecodeSLEB is DecodeULEB for signed LEB128 numbers: the same bits,
// sign-extended from the last byte's bit 6.
func DecodeSLEB(data []byte, pos int) (int64, int, bool) {
	u, end, ok := DecodeULEB(data, pos)
	v := int64(u)
	if shift := uint(7 * (end - pos)); ok && shift < 64 && data[end-1]&0x40 != 0 {
		v |= -1 << shift
	}
	return v, end, ok
}

func (b *buf) uleb() uint64 {
	v, pos, ok := DecodeULEB(b.data, b.pos)
	b.endLEB(pos, ok)
	return v
}

func (b *buf) sleb() int64 {
	v, pos, ok := DecodeSLEB(b.data, b.pos)
	b.endLEB(pos, ok)
	return v
}

// endLEB moves past a LEB128 number that ends at pos, failing when ok is
// false: the data ended inside it.
func (b *buf) endLEB(pos int, ok bool) {
	b.pos = pos
	if !ok {
		b.fail()
	}
}

func (b *buf) bytes(n uint64) []byte {
	if n > uint64(b.left()) {
		b.fail()
		return nil
	}
	v := b.data[b.pos : b.pos+int(n) : b.pos+int(n)]
	b.pos += int(n)
	return v
}

// cstring reads a NUL-terminated string without copying.
func (b *buf) cstring() []byte {
	for i := b.pos; i < len(b.data); i++ {
		if b.data[i] == 0 {
			s := b.data[b.pos:i]
			b.pos = i + 1
			return s
		}
	}
	b.fail()
	return nil
}

// ptrCtx is what decoding an encoded pointer needs besides the bytes: the
// address of the byte being read (for pcrel), the bases for textrel,
// datarel and funcrel, the address size and how to follow an indirection.
type ptrCtx struct {
	secAddr  uint64 // address of data[0]
	addrSize int
	text     uint64
	data     uint64
	funcBase uint64
	deref    func(addr uint64, size int) (uint64, error)
}

// readEncoded decodes one pointer in encoding enc. It returns the value,
// and whether the encoding was understood.
// readFormat reads a value in one of the sized or LEB128 pointer formats
// (not absptr, whose size depends on the target), sign-extending the
// signed ones; ok is false for an unknown format.
func (b *buf) readFormat(f PtrEnc) (v uint64, ok bool) {
	switch f {
	case PEULEB128:
		return b.uleb(), true
	case PESLEB128:
		return uint64(b.sleb()), true
	case PEUData2:
		return uint64(b.u16()), true
	case PEUData4:
		return uint64(b.u32()), true
	case PEUData8, PESData8:
		return b.u64(), true
	case PESData2:
		return uint64(int64(int16(b.u16()))), true
	case PESData4:
		return uint64(int64(int32(b.u32()))), true
	}
	return 0, false
}

func (b *buf) readEncoded(enc PtrEnc, c *ptrCtx) (uint64, error) {
	var ok bool
	if enc == PEOmit {
		return 0, nil
	}
	start := b.pos
	if enc.Application() == PEAligned {
		// Align the address of the value to the pointer size.
		a := c.secAddr + uint64(b.pos)
		sz := uint64(c.addrSize)
		pad := (sz - a%sz) % sz
		if pad > uint64(b.left()) {
			b.fail()
			return 0, errTruncated
		}
		b.pos += int(pad)
		start = b.pos
	}
	var v uint64
	if enc.Format() == PEAbsPtr {
		v = b.uint(c.addrSize)
		if c.addrSize == 4 && enc&PESigned != 0 {
			v = uint64(int64(int32(v)))
		}
	} else if v, ok = b.readFormat(enc.Format()); !ok {
		return 0, fmt.Errorf("unknown pointer encoding %#x", uint8(enc))
	}
	if b.err != nil {
		return 0, b.err
	}
	switch enc.Application() {
	case PEAbsPtr, PEAligned:
	case PEPCRel:
		v += c.secAddr + uint64(start)
	case PETextRel:
		v += c.text
	case PEDataRel:
		v += c.data
	case PEFuncRel:
		v += c.funcBase
	default:
		return 0, fmt.Errorf("unknown pointer application %#x", uint8(enc))
	}
	if c.addrSize == 4 {
		v &= 0xffffffff
	}
	if enc.Indirect() {
		if c.deref == nil {
			return 0, fmt.Errorf("indirect pointer %#x cannot be resolved", v)
		}
		p, err := c.deref(v, c.addrSize)
		if err != nil {
			return 0, fmt.Errorf("indirect pointer %#x: %v", v, err)
		}
		v = p
	}
	return v, nil
}

// encodedSize is the byte size of a fixed-size encoding, or 0 for LEB128
// or unknown formats.
func encodedSize(enc PtrEnc, addrSize int) int {
	switch enc.Format() {
	case PEAbsPtr:
		return addrSize
	case PEUData2, PESData2:
		return 2
	case PEUData4, PESData4:
		return 4
	case PEUData8, PESData8:
		return 8
	}
	return 0
}
