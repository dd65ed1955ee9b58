// Package cfibuild assembles synthetic .eh_frame and .debug_frame
// sections, entry by entry, for the tests of packages cfi and dump.
package cfibuild

import (
	"encoding/binary"
	"strings"
)

// ULEB encodes v as unsigned LEB128.
func ULEB(v uint64) []byte {
	var b []byte
	for ; v >= 0x80; v >>= 7 {
		b = append(b, byte(v)|0x80)
	}
	return append(b, byte(v))
}

// SLEB encodes v as signed LEB128.
func SLEB(v int64) []byte {
	var b []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// Section builds a section's bytes in B.
type Section struct {
	Debug bool             // .debug_frame: CIE ID all ones, CIE pointers as offsets
	Is64  bool             // 64-bit DWARF entries
	Order binary.ByteOrder // nil means little-endian
	B     []byte
}

func (s *Section) order() binary.ByteOrder {
	if s.Order == nil {
		return binary.LittleEndian
	}
	return s.Order
}

func append32(o binary.ByteOrder, b []byte, v uint32) []byte {
	var t [4]byte
	o.PutUint32(t[:], v)
	return append(b, t[:]...)
}

func append64(o binary.ByteOrder, b []byte, v uint64) []byte {
	var t [8]byte
	o.PutUint64(t[:], v)
	return append(b, t[:]...)
}

// Entry appends an entry whose ID field id computes from its position,
// and returns the entry's offset.
func (s *Section) Entry(id func(idPos int) uint64, body []byte) uint64 {
	o := s.order()
	off := len(s.B)
	if s.Is64 {
		s.B = append(s.B, 0xff, 0xff, 0xff, 0xff)
		s.B = append64(o, s.B, uint64(8+len(body)))
		s.B = append64(o, s.B, id(len(s.B)))
	} else {
		s.B = append32(o, s.B, uint32(4+len(body)))
		s.B = append32(o, s.B, uint32(id(len(s.B))))
	}
	s.B = append(s.B, body...)
	return uint64(off)
}

// CIE appends a CIE (augmentation data after its length when aug starts
// with 'z'; address and segment sizes 8 and 0 from version 4 on) and
// returns its offset.
func (s *Section) CIE(version byte, aug string, augData []byte, ca uint64, da int64, ra uint64, instr []byte) uint64 {
	body := append([]byte{version}, aug...)
	body = append(body, 0)
	if version >= 4 {
		body = append(body, 8, 0)
	}
	body = append(body, ULEB(ca)...)
	body = append(body, SLEB(da)...)
	if version == 1 {
		body = append(body, byte(ra))
	} else {
		body = append(body, ULEB(ra)...)
	}
	if strings.HasPrefix(aug, "z") {
		body = append(body, ULEB(uint64(len(augData)))...)
		body = append(body, augData...)
	}
	return s.Entry(func(int) uint64 {
		switch {
		case !s.Debug:
			return 0
		case s.Is64:
			return ^uint64(0)
		}
		return 0xffffffff
	}, append(body, instr...))
}

// FDE appends an FDE of the CIE at cieOff whose fields after the CIE
// pointer are body, and returns its offset.
func (s *Section) FDE(cieOff uint64, body []byte) uint64 {
	return s.Entry(func(idPos int) uint64 {
		if s.Debug {
			return cieOff
		}
		return uint64(idPos) - cieOff
	}, body)
}

// AbsFDE appends an FDE with 8-byte absolute begin and range (the
// encoding of a CIE without 'R', and of .debug_frame), and an empty
// augmentation data if aug.
func (s *Section) AbsFDE(cieOff, begin, size uint64, aug bool, instr []byte) uint64 {
	body := append64(s.order(), nil, begin)
	body = append64(s.order(), body, size)
	if aug {
		body = append(body, 0)
	}
	return s.FDE(cieOff, append(body, instr...))
}
