package cfi

import "testing"

// TestRegisterBeyond16Bits: register operands keep 32 bits (arch.Reg is
// 32 bits wide), as readelf prints them: "bad register: r70000" and a
// CFA of "r70000+8", not the number cut to 16 bits (4464).
func TestRegisterBeyond16Bits(t *testing.T) {
	instr := cat([]byte{byte(OpOffsetExtended)}, uleb(70000), uleb(2), adv(1),
		[]byte{byte(OpDefCFA)}, uleb(70000), uleb(8))
	s := newSection(EHFrame)
	cie := s.CIE(1, "", nil, 1, -8, 16, stdCIE)
	s.AbsFDE(cie, 0x1000, 0x10, false, instr)
	tab := s.table(0)
	a, err := lookup(tab, 0x1000)
	if err != nil || a.Rule(70000).Kind != RuleOffset || a.Rule(70000-65536).Kind != RuleUnspecified {
		t.Errorf("first row %s, %v", fmtRow(&a), err)
	}
	b, err := lookup(tab, 0x1001)
	if err != nil || b.CFA.Reg != 70000 {
		t.Errorf("second row %s, %v", fmtRow(&b), err)
	}
}
