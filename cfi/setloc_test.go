package cfi

import (
	"encoding/binary"
	"testing"
)

// TestSetLocPCRel checks DW_CFA_set_loc in a pcrel FDE encoding: the
// operand is relative to its own address in the section, as readelf and
// unwinders read it (it was taken relative to the start of the program's
// bytes), through the lookup (dump's TestSetLocPCRel compares the text
// with readelf's).
func TestSetLocPCRel(t *testing.T) {
	const secAddr = 0x10000
	le := binary.LittleEndian
	s := newSection(EHFrame)
	cie := s.CIE(1, "zR", []byte{byte(PEPCRel | PESData4)}, 1, -8, 16, stdCIE)
	beginField := secAddr + uint64(len(s.B)) + 8 // after the FDE's length and CIE pointer
	body := u32(le, uint32(0x1000-beginField))
	body = append(body, u32(le, 0x100)...)
	body = append(body, 0) // no augmentation data
	body = append(body, adv(4)...)
	setLocField := beginField + uint64(len(body)) + 1
	body = append(body, byte(OpSetLoc))
	body = append(body, u32(le, uint32(0x1040-setLocField))...)
	body = append(body, byte(OpDefCFAOffset), 32)
	body = append(body, adv(4)...)
	s.FDE(cie, body)

	r, err := lookup(s.table(secAddr), 0x1040)
	if err != nil || r.Start != 0x1040 || r.End != 0x1044 || r.CFA.Offset != 32 {
		t.Errorf("RowForPC(0x1040) = %s, %v; want [1040,1044) cfa=r7+32", fmtRow(&r), err)
	}

}
