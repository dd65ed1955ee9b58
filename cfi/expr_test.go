package cfi

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/internal/corpus"
)

type regs map[arch.Reg]uint64

func (r regs) Reg(n arch.Reg) (uint64, bool) { v, ok := r[n]; return v, ok }

// stackMem is a little-endian memory image starting at base.
type stackMem struct {
	base uint64
	b    []byte
}

func (m *stackMem) ReadUint64(addr uint64) (uint64, error) {
	if addr < m.base || addr-m.base+8 > uint64(len(m.b)) {
		return 0, fmt.Errorf("unmapped %#x", addr)
	}
	return binary.LittleEndian.Uint64(m.b[addr-m.base:]), nil
}

func (m *stackMem) write(addr, v uint64) { binary.LittleEndian.PutUint64(m.b[addr-m.base:], v) }

// TestExprOps checks each operation family.
func TestExprOps(t *testing.T) {
	mem := &stackMem{base: 0x7000, b: make([]byte, 64)}
	mem.write(0x7010, 0x1122334455667788)
	r := regs{6: 0x7018, 7: 0x7000}
	cases := []struct {
		name string
		expr []byte
		init []uint64
		want uint64
		err  string
	}{
		{"lit", []byte{0x30 + 31}, nil, 31, ""},
		{"const1u/1s", []byte{opConst1u, 200, opConst1s, 0xff, opPlus}, nil, 199, ""},
		{"const2u/2s", []byte{opConst2u, 0x34, 0x12, opConst2s, 0xfe, 0xff, opPlus}, nil, 0x1232, ""},
		{"const4u/4s", []byte{opConst4u, 1, 0, 0, 0, opConst4s, 0xff, 0xff, 0xff, 0xff, opMinus}, nil, 2, ""},
		{"const8u", cat([]byte{opConst8u}, u64(binary.LittleEndian, 1<<40)), nil, 1 << 40, ""},
		{"constu/consts", cat([]byte{opConstu}, uleb(1000), []byte{opConsts}, sleb(-1), []byte{opMul}), nil, uint64(0xfffffffffffffc18), ""},
		{"addr", cat([]byte{opAddr}, u64(binary.LittleEndian, 0x401000)), nil, 0x401000, ""},
		{"breg", cat([]byte{0x70 + 6}, sleb(-8)), nil, 0x7010, ""},
		{"bregx", cat([]byte{opBregx}, uleb(7), sleb(16)), nil, 0x7010, ""},
		{"deref", cat([]byte{0x70 + 6}, sleb(-8), []byte{opDeref}), nil, 0x1122334455667788, ""},
		{"deref_size", cat([]byte{0x70 + 6}, sleb(-8), []byte{opDerefSize, 2}), nil, 0x7788, ""},
		{"plus_uconst", cat([]byte{0x31, opPlusUconst}, uleb(300)), nil, 301, ""},
		{"dup/drop/over/swap/rot/pick", []byte{0x31, 0x32, 0x33, opRot, opSwap, opOver, opDrop, opDup, opPick, 2, opPlus, opPlus}, nil, 4, ""},
		{"and/or/xor/not/neg/abs", []byte{0x3c, 0x3a, opAnd, 0x31, opOr, 0x3f, opXor, opNot, opNeg, opAbs}, nil, 7, ""},
		{"div/mod signed", []byte{0x37, opNeg, 0x32, opDiv, 0x37, 0x33, opMod, opPlus}, nil, uint64(0xfffffffffffffffe), ""},
		{"shl/shr/shra", []byte{0x31, 0x34, opShl, 0x31, opShr, 0x38, opNeg, 0x31, opShra, opPlus}, nil, 8 - 4, ""},
		{"comparisons", []byte{0x31, 0x32, opLt, 0x32, 0x31, opGt, opPlus, 0x32, 0x32, opEq, opPlus, 0x31, 0x32, opNe, opPlus, 0x32, 0x32, opGe, opPlus, 0x32, 0x31, opLe, opPlus}, nil, 5, ""},
		{"signed comparison", []byte{0x31, opNeg, 0x30, opLt}, nil, 1, ""},
		{"skip", []byte{opSkip, 1, 0, 0x35, 0x36}, nil, 6, ""},
		{"bra taken", []byte{0x31, opBra, 1, 0, 0x35, 0x36}, nil, 6, ""},
		{"bra not taken", []byte{0x30, opBra, 1, 0, 0x35}, nil, 5, ""},
		{"initial CFA", []byte{0x38, opMinus}, []uint64{0x7020}, 0x7018, ""},
		{"nop", []byte{opNop, 0x31}, nil, 1, ""},
		{"runaway loop", []byte{opSkip, 0xfd, 0xff}, nil, 0, "too many operations"},
		{"branch out of range", []byte{opSkip, 0x10, 0}, nil, 0, "outside the expression"},
		{"underflow", []byte{opPlus}, nil, 0, "underflow"},
		{"empty", nil, nil, 0, "empty stack"},
		{"unknown register", []byte{0x70 + 3, 0}, nil, 0, "r3 unknown"},
		{"bad memory", []byte{0x30, opDeref}, nil, 0, "unmapped"},
		{"division by zero", []byte{0x31, 0x30, opDiv}, nil, 0, "division by zero"},
		{"reg location", []byte{0x50}, nil, 0, "location"},
		{"unsupported", []byte{0xe0}, nil, 0, "unsupported operation"},
		{"truncated", []byte{opConst4u, 1}, nil, 0, "truncated"},
		{"pick too deep", []byte{0x31, opPick, 5}, nil, 0, "beyond the stack"},
	}
	for _, c := range cases {
		got, err := EvalExpression(c.expr, &EvalOptions{Regs: r, Mem: mem, Initial: c.init})
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: got %#x, %v; want error %q", c.name, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: got %#x, %v; want %#x", c.name, got, err, c.want)
		}
	}
	// Stack overflow is an error, not a panic.
	var deep []byte
	for i := 0; i < exprStackSize+1; i++ {
		deep = append(deep, 0x31)
	}
	if _, err := EvalExpression(deep, &EvalOptions{}); err == nil {
		t.Error("stack overflow not reported")
	}
	if _, err := EvalExpression([]byte{opSkip, 0xfd, 0xff}, &EvalOptions{}); !errors.Is(err, ErrExprTooLong) {
		t.Errorf("runaway: %v", err)
	}
}

// TestExprPLT evaluates the CFA expression of a real PLT (corpus
// basic-pic.so): CFA = rsp + 8 + ((rip & 15) >= 11 ? 8 : 0).
func TestExprPLT(t *testing.T) {
	f, err := elf.Open(filepath.Join(corpus.Dir(t), "x86_64", "v3", "basic-pic.so"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tab, err := FromELF(f, ".eh_frame")
	if err != nil {
		t.Fatal(err)
	}
	plt := f.Section(".plt")
	pc := plt.Addr + 0x10 // first PLT entry (the expression row)
	row, err := lookup(tab, pc)
	if err != nil {
		t.Fatal(err)
	}
	if row.CFA.Kind != CFAExpression {
		t.Fatalf("PLT CFA is %v, want an expression", row.CFA.Kind)
	}
	if s := ExprString(row.CFA.Expr, arch.AMD64); !strings.Contains(s, "DW_OP_breg7 (rsp): 8; DW_OP_breg16 (rip): 0; DW_OP_lit15; DW_OP_and") {
		t.Errorf("expression %s", s)
	}
	for _, c := range []struct{ rip, want uint64 }{
		{pc, 0x7ff0 + 8},       // offset 0 in the entry: after the first push
		{pc + 10, 0x7ff0 + 8},  // before the second push
		{pc + 11, 0x7ff0 + 16}, // after it
		{pc + 0x10 + 12, 0x7ff0 + 16},
	} {
		got, err := EvalExpression(row.CFA.Expr, &EvalOptions{Regs: regs{7: 0x7ff0, 16: c.rip}})
		if err != nil || got != c.want {
			t.Errorf("rip=%#x: CFA %#x, %v; want %#x", c.rip, got, err, c.want)
		}
	}
}

// TestExprDRAP evaluates the DRAP pattern of the corpus edge object:
// CFA = *(rbp - 8) and rbp saved at the address rbp points to.
func TestExprDRAP(t *testing.T) {
	f, err := elf.Open(filepath.Join(corpus.Dir(t), "x86_64", "v3", "edge-x86_64.o"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tab, err := FromELF(f, ".eh_frame")
	if err != nil {
		t.Fatal(err)
	}
	fde, err := tab.FDEAt(0xd8)
	if err != nil {
		t.Fatal(err)
	}
	var row Row
	if err := tab.FDERow(&UnwindContext{}, &fde, 0x65, &row); err != nil {
		t.Fatal(err)
	}
	if row.CFA.Kind != CFAExpression || row.Rule(6).Kind != RuleExpression {
		t.Fatalf("row %s", fmtRow(&row))
	}
	mem := &stackMem{base: 0x8000, b: make([]byte, 0x100)}
	const rbp = 0x8080
	mem.write(rbp-8, 0x80f0) // DRAP register saved: the CFA
	mem.write(rbp, 0x9999)   // caller's rbp
	cfa, err := EvalExpression(row.CFA.Expr, &EvalOptions{Regs: regs{6: rbp, 7: 0x8000}, Mem: mem})
	if err != nil || cfa != 0x80f0 {
		t.Fatalf("CFA %#x, %v (expr %s)", cfa, err, ExprString(row.CFA.Expr, arch.AMD64))
	}
	addr, err := EvalExpression(row.Rule(6).Expr, &EvalOptions{Regs: regs{6: rbp, 7: 0x8000}, Mem: mem, Initial: []uint64{cfa}})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := mem.ReadUint64(addr); v != 0x9999 {
		t.Errorf("rbp saved at %#x holds %#x (expr %s)", addr, v, ExprString(row.Rule(6).Expr, arch.AMD64))
	}
}

// TestExprNoAlloc checks that evaluating does not allocate, its options
// on the caller's stack included: unwinders evaluate DRAP and PLT
// expressions at every such frame.
func TestExprNoAlloc(t *testing.T) {
	mem := &stackMem{base: 0x7000, b: make([]byte, 64)}
	mem.write(0x7010, 0x7030)
	r := regs{6: 0x7018, 7: 0x7000}
	// DW_OP_breg6 -8; DW_OP_deref; DW_OP_lit8; DW_OP_plus.
	expr := cat([]byte{0x70 + 6}, sleb(-8), []byte{opDeref, 0x38, opPlus})
	var got uint64
	n := testing.AllocsPerRun(100, func() {
		opts := EvalOptions{Regs: r, Mem: mem, Initial: nil}
		got, _ = EvalExpression(expr, &opts)
	})
	if n != 0 || got != 0x7038 {
		t.Errorf("EvalExpression: %#x, %v allocations a run", got, n)
	}
}
