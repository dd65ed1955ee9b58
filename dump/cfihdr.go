package dump

// The .eh_frame_hdr section as readelf -wF prints it: its header fields
// and binary-search table, read as readelf reads them.

import (
	"strconv"

	"github.com/sframekit/sframekit/cfi"
)

// hdrValue is readelf's get_encoded_eh_value: the value at data[pos:] in
// enc's format (sized or LEB128, sign-extended), its base not applied;
// ok is false for a format it cannot read (absptr among them) or a value
// cut off.
func (p *cfiPrinter) hdrValue(enc cfi.PtrEnc, data []byte, pos int) (v uint64, n int, ok bool) {
	r := rawReader{data: data, pos: pos, order: p.order}
	switch enc.Format() {
	case cfi.PEULEB128:
		v = r.uleb()
	case cfi.PESLEB128:
		v = uint64(r.sleb())
	case cfi.PEUData2:
		v = r.uint(2)
	case cfi.PEUData4:
		v = r.uint(4)
	case cfi.PEUData8, cfi.PESData8:
		v = r.uint(8)
	case cfi.PESData2:
		v = uint64(int64(int16(r.uint(2))))
	case cfi.PESData4:
		v = uint64(int64(int32(r.uint(4))))
	default:
		return 0, 0, false
	}
	if r.bad {
		return 0, 0, false
	}
	return v, r.pos - pos, true
}

func hdrOffset(enc cfi.PtrEnc, addr, secOff, v uint64) uint64 {
	switch enc & 0xf0 {
	case cfi.PEPCRel:
		return v + addr + secOff
	case cfi.PEDataRel:
		return v + addr
	}
	return v
}

// hdr prints .eh_frame_hdr like readelf's display_eh_frame_hdr.
func (p *cfiPrinter) hdr(data []byte, addr uint64) {
	p.out = append(p.out, "Contents of the .eh_frame_hdr section:\n\n"...)
	if len(data) < 6 || data[0] != 1 {
		return
	}
	ptrEnc, countEnc, tableEnc := cfi.PtrEnc(data[1]), cfi.PtrEnc(data[2]), cfi.PtrEnc(data[3])
	p.out = append(p.out, "  Version:                 1\n"...)
	for _, x := range []struct {
		label string
		e     cfi.PtrEnc
	}{{"  Pointer Encoding Format: ", ptrEnc}, {"  Count Encoding Format:   ", countEnc}, {"  Table Encoding Format:   ", tableEnc}} {
		p.out = append(p.out, x.label...)
		p.out = appendCHex(p.out, uint64(x.e))
		p.out = append(p.out, " ("...)
		// readelf's decode_eh_encoding, which has no name for absptr.
		p.out = append(p.out, x.e.String()...)
		p.out = append(p.out, ")\n"...)
	}
	pos := 4
	ehPtr, n, ok := p.hdrValue(ptrEnc, data, pos)
	if !ok {
		return
	}
	p.out = append(p.out, "  Start of frame section:  "...)
	p.out = appendCHex(p.out, ehPtr)
	ehOff := hdrOffset(ptrEnc, addr, 4, ehPtr)
	if ehOff != ehPtr {
		p.out = append(p.out, " (offset: "...)
		p.out = appendCHex(p.out, ehOff)
		p.out = append(p.out, ')')
	}
	p.out = append(p.out, '\n')
	pos += n
	if countEnc == cfi.PEOmit || countEnc&0xf0 != 0 {
		return
	}
	count, n, ok := p.hdrValue(countEnc, data, pos)
	if !ok {
		return
	}
	p.out = append(p.out, "  Entries in search table: "...)
	p.out = appendCHex(p.out, count)
	p.out = append(p.out, '\n')
	pos += n
	if count != 0 && tableEnc == cfi.PEOmit {
		return
	}
	for i := uint64(0); i < count; i++ {
		row := pos
		loc, n, ok := p.hdrValue(tableEnc, data, pos)
		if !ok {
			return
		}
		pos += n
		fa, n, ok := p.hdrValue(tableEnc, data, pos)
		if !ok {
			return
		}
		pos += n
		p.out = append(p.out, "  "...)
		p.out = appendCHex(p.out, loc)
		p.out = append(p.out, " (offset: "...)
		p.out = appendCHex(p.out, hdrOffset(tableEnc, addr, uint64(row), loc))
		p.out = append(p.out, ") -> "...)
		p.out = appendCHex(p.out, fa)
		p.out = append(p.out, " fde=[ "...)
		s := strconv.FormatUint(hdrOffset(tableEnc, addr, uint64(row), fa)-ehOff, 16)
		for j := len(s); j < 5; j++ {
			p.out = append(p.out, ' ')
		}
		p.out = append(p.out, s...)
		p.out = append(p.out, "]\n"...)
		p.maybeFlush()
	}
	p.out = append(p.out, '\n')
}
