package sframe

import (
	"encoding/binary"

	"github.com/sframekit/sframekit/arch"
)

// testFunc and testFRE describe a section at the byte level, so that unit
// tests can make the exact encodings (valid or not) they need without
// depending on the encoder under test elsewhere.
type testFunc struct {
	start   int64 // raw start field
	size    uint32
	info    uint8
	info2   uint8
	rep     uint8
	fres    []testFRE
	freOff  *uint32 // override the computed FRE offset
	numFREs *uint32 // override the count
}

type testFRE struct {
	start uint32
	info  uint8
	words []int32
}

type testSection struct {
	version  Version
	flags    Flags
	abi      ABI
	be       bool
	fixedFP  int8
	fixedRA  int8
	aux      []byte
	funcs    []testFunc
	numFREs  *uint32
	fdeOffAd uint32 // extra bytes between header and FDE table
}

type byteOrder interface {
	binary.ByteOrder
	binary.AppendByteOrder
}

func (ts *testSection) order() byteOrder {
	if ts.be {
		return binary.BigEndian
	}
	return binary.LittleEndian
}

// bytes lays the section out as gas does: header, aux header, function
// table, FRE sub-section.
func (ts *testSection) bytes() []byte {
	o := ts.order()
	v := ts.version
	fdeSize := v.FDESize()
	// FRE sub-section.
	var fres []byte
	offs := make([]uint32, len(ts.funcs))
	total := uint32(0)
	for i, f := range ts.funcs {
		offs[i] = uint32(len(fres))
		if v == Version3 {
			var a [5]byte
			n := uint32(len(f.fres))
			if f.numFREs != nil {
				n = *f.numFREs
			}
			o.PutUint16(a[:], uint16(n))
			a[2], a[3], a[4] = f.info, f.info2, f.rep
			fres = append(fres, a[:]...)
		}
		asz := FREType(f.info & 0xf).Size()
		if asz == 0 {
			asz = 1
		}
		for _, e := range f.fres {
			var b [4]byte
			switch asz {
			case 1:
				b[0] = byte(e.start)
			case 2:
				o.PutUint16(b[:], uint16(e.start))
			default:
				o.PutUint32(b[:], e.start)
			}
			fres = append(fres, b[:asz]...)
			fres = append(fres, e.info)
			ws := [4]int{1, 2, 4, 4}[e.info>>5&3]
			for _, w := range e.words {
				switch ws {
				case 1:
					fres = append(fres, byte(int8(w)))
				case 2:
					fres = o.AppendUint16(fres, uint16(int16(w)))
				default:
					fres = o.AppendUint32(fres, uint32(w))
				}
			}
		}
		total += uint32(len(f.fres))
	}
	if ts.numFREs != nil {
		total = *ts.numFREs
	}
	hdr := make([]byte, HeaderSize)
	o.PutUint16(hdr, Magic)
	hdr[2], hdr[3], hdr[4] = byte(v), byte(ts.flags), byte(ts.abi)
	hdr[5], hdr[6], hdr[7] = byte(ts.fixedFP), byte(ts.fixedRA), byte(len(ts.aux))
	o.PutUint32(hdr[8:], uint32(len(ts.funcs)))
	o.PutUint32(hdr[12:], total)
	o.PutUint32(hdr[16:], uint32(len(fres)))
	o.PutUint32(hdr[20:], ts.fdeOffAd)
	o.PutUint32(hdr[24:], ts.fdeOffAd+uint32(len(ts.funcs)*fdeSize))
	out := append(hdr, ts.aux...)
	out = append(out, make([]byte, ts.fdeOffAd)...)
	for i, f := range ts.funcs {
		e := make([]byte, fdeSize)
		off := offs[i]
		if f.freOff != nil {
			off = *f.freOff
		}
		n := uint32(len(f.fres))
		if f.numFREs != nil {
			n = *f.numFREs
		}
		switch v {
		case Version3:
			o.PutUint64(e, uint64(f.start))
			o.PutUint32(e[8:], f.size)
			o.PutUint32(e[12:], off)
		default:
			o.PutUint32(e, uint32(f.start))
			o.PutUint32(e[4:], f.size)
			o.PutUint32(e[8:], off)
			o.PutUint32(e[12:], n)
			e[16] = f.info
			if v == Version2 {
				e[17] = f.rep
			}
		}
		out = append(out, e...)
	}
	return append(out, fres...)
}

// freInfo builds an FRE info byte.
func freInfo(sp bool, count int, sizeCode int, signed bool) uint8 {
	b := uint8(count<<1) | uint8(sizeCode<<5)
	if sp {
		b |= 1
	}
	if signed {
		b |= 0x80
	}
	return b
}

// flexCtl builds a flexible-FDE control word.
func flexCtl(reg arch.Reg, regP, deref bool) int32 {
	w := int32(reg) << 3
	if regP {
		w |= flexRegP
	}
	if deref {
		w |= flexDerefP
	}
	return w
}

func u32p(v uint32) *uint32 { return &v }
