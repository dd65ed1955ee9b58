package cfi

import (
	"debug/elf"
	"testing"

	"github.com/sframekit/sframekit/arch"
)

func TestRuleString(t *testing.T) {
	for _, c := range []struct {
		r    Rule
		want string
	}{
		{Rule{Kind: RuleOffset, Offset: -16}, "(cfa-16)"},
		{Rule{Kind: RuleOffset, Offset: 8}, "(cfa+8)"},
		{Rule{Kind: RuleValOffset, Offset: 0}, "cfa+0"},
		{Rule{Kind: RuleRegister, Reg: arch.AMD64RBP}, "r6"},
		{Rule{Kind: RuleExpression, Expr: []byte{0x76, 0x68}}, "(expr 7668)"},
		{Rule{Kind: RuleValExpression, Expr: []byte{0x76, 0x68}}, "expr 7668"},
		{Rule{Kind: RuleUndefined}, "undefined"},
		{Rule{Kind: RuleSameValue}, "same_value"},
		{Rule{}, "unspecified"},
		{Rule{Kind: 42}, "RuleKind(42)"},
	} {
		if got := c.r.String(); got != c.want {
			t.Errorf("%#v.String() = %q, want %q", c.r, got, c.want)
		}
	}
	for _, c := range []struct {
		r    CFARule
		want string
	}{
		{CFARule{Kind: CFARegOffset, Reg: arch.AMD64RSP, Offset: 8}, "r7+8"},
		{CFARule{Kind: CFARegOffset, Reg: arch.ARM64X29, Offset: -16, Signed: true}, "r29-16"},
		{CFARule{Kind: CFAExpression, Expr: []byte{0x76, 0x70, 0x06}}, "expr 767006"},
		{CFARule{}, "undefined"},
	} {
		if got := c.r.String(); got != c.want {
			t.Errorf("%#v.String() = %q, want %q", c.r, got, c.want)
		}
	}
}

// TestRuleStringRows checks the text of real rows: those of Example
// (readelf -wF's reading of realigned_caller and of realigned, whose CFA
// and saved registers are DWARF expressions after GCC's DRAP).
func TestRuleStringRows(t *testing.T) {
	f, err := elf.Open("../testdata/drap-O2.elf")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tab, err := FromELF(f, ".eh_frame")
	if err != nil {
		t.Fatal(err)
	}
	var ctx UnwindContext
	var row Row
	for _, c := range []struct {
		pc   uint64
		cfa  string
		regs map[arch.Reg]string
	}{
		{0x1290, "r7+32", map[arch.Reg]string{arch.AMD64RBX: "(cfa-24)", arch.AMD64RBP: "(cfa-16)", arch.AMD64RIP: "(cfa-8)", arch.AMD64R12: "unspecified"}},
		// DW_OP_breg6 -16; DW_OP_deref, and DW_OP_breg6 -24, 0 and -8.
		{0x11d0, "expr 767006", map[arch.Reg]string{arch.AMD64RBX: "(expr 7668)", arch.AMD64RBP: "(expr 7600)", arch.AMD64R12: "(expr 7678)", arch.AMD64RIP: "(cfa-8)"}},
	} {
		if _, err := tab.RowForPC(&ctx, c.pc, &row); err != nil {
			t.Fatal(err)
		}
		if got := row.CFA.String(); got != c.cfa {
			t.Errorf("%#x: CFA %q, want %q", c.pc, got, c.cfa)
		}
		for reg, want := range c.regs {
			if got := row.Rule(reg).String(); got != want {
				t.Errorf("%#x: r%d %q, want %q", c.pc, reg, got, want)
			}
		}
	}
}
