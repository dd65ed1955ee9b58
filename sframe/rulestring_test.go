package sframe

import (
	"testing"

	"github.com/sframekit/sframekit/arch"
)

func TestRuleString(t *testing.T) {
	for _, c := range []struct {
		r    Rule
		want string
	}{
		{Rule{Kind: RuleValue, Base: arch.AMD64RSP, Offset: 16}, "r7+16"},
		{Rule{Kind: RuleValue, Base: arch.ARM64X29, Offset: 0}, "r29+0"},
		{Rule{Kind: RuleValue, Base: RegCFA, Offset: -160}, "cfa-160"},
		{Rule{Kind: RuleDeref, Base: RegCFA, Offset: -8, Fixed: true}, "(cfa-8)"},
		{Rule{Kind: RuleDeref, Base: RegCFA, Offset: -8, Fixed: true, Padding: true}, "(cfa-8)"},
		{Rule{Kind: RuleDeref, Base: arch.AMD64RBP, Offset: 24}, "(r6+24)"},
		{Rule{Kind: RuleUnspecified}, "unspecified"},
		{Rule{Kind: RuleNotSaved}, "not-saved"},
		{Rule{Kind: 9}, "RuleKind(9)"},
	} {
		if got := c.r.String(); got != c.want {
			t.Errorf("%#v.String() = %q, want %q", c.r, got, c.want)
		}
	}
}

// TestRuleStringCorpus checks the text of real rows against objdump's
// reading of them (basic-O0.elf.sframe.txt, function 3): at 0x115a
// "sp+16 c-16 f", at 0x115d "fp+16 c-16 f".
func TestRuleStringCorpus(t *testing.T) {
	data, addr := loadCorpusSection(t, "x86_64/v3/basic-O0.elf")
	s, err := Parse(data, addr)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		pc          uint64
		cfa, fp, ra string
	}{
		{0x1159, "r7+8", "unspecified", "(cfa-8)"},
		{0x115a, "r7+16", "(cfa-16)", "(cfa-8)"},
		{0x115d, "r6+16", "(cfa-16)", "(cfa-8)"},
	} {
		row, err := s.RowForPC(c.pc)
		if err != nil {
			t.Fatal(err)
		}
		if got := [3]string{row.CFA.String(), row.FP.String(), row.RA.String()}; got != [3]string{c.cfa, c.fp, c.ra} {
			t.Errorf("%#x: CFA, FP, RA %q, want %q", c.pc, got, [3]string{c.cfa, c.fp, c.ra})
		}
	}
}
