package cfi

import (
	"bytes"
	"debug/elf"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/internal/corpus"
)

// cieRules runs c's initial instructions in in and returns the rules they
// leave, as an FDE starts from.
func cieRules(t testing.TB, tab *Table, in *Interpreter, c *CIE) *Row {
	in.Reset()
	in.Start(tab.CIEInstructions(c), nil, 0)
	var ins Instruction
	for in.Next(&ins) {
		in.Execute(&ins)
	}
	if err := in.Err(); err != nil {
		t.Fatalf("CIE %#x: %v", c.Offset, err)
	}
	r := new(Row)
	r.CopyFrom(in.Row())
	return r
}

// interpRows runs fde's program step by step and returns its rows as
// UnwindTable streams them: the rules at each advance that covers
// addresses, then the rules from the last location to the FDE's end.
func interpRows(in *Interpreter, tab *Table, fde *FDE, init *Row) ([]string, error) {
	in.Reset()
	in.Start(tab.FDEInstructions(fde), init, fde.PCBegin)
	var out []string
	var ins Instruction
	for in.Next(&ins) {
		if in.Execute(&ins) {
			if r := in.Row(); r.Start < r.End {
				out = append(out, fmtRow(r))
			}
		}
	}
	if err := in.Err(); err != nil {
		return out, err
	}
	if in.Loc() < fde.PCEnd {
		var r Row
		r.CopyFrom(in.Row())
		r.Start, r.End = in.Loc(), fde.PCEnd
		out = append(out, fmtRow(&r))
	}
	return out, nil
}

// TestInterpreterCorpus checks the step-by-step Interpreter against the
// row stream on every FDE of the corpus: the same rows, rules and
// address ranges.
func TestInterpreterCorpus(t *testing.T) {
	var in Interpreter
	fdes := 0
	for _, p := range corpus.Frames(t) {
		f, err := elf.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, sec := range []string{".eh_frame", ".debug_frame"} {
			if f.Section(sec) == nil {
				continue
			}
			tab, err := FromELF(f, sec)
			if err != nil {
				t.Fatalf("%s: %v", corpus.Rel(t, p), err)
			}
			inits := map[*CIE]*Row{}
			for it := tab.Entries(); it.Next(); {
				e := it.Entry()
				if e.Err != nil || e.Kind != KindFDE {
					continue
				}
				init := inits[e.CIE]
				if init == nil {
					init = cieRules(t, tab, &in, e.CIE)
					inits[e.CIE] = init
				}
				var want []string
				ut := tab.NewUnwindTable(e.FDE)
				for ut.Next() {
					want = append(want, fmtRow(ut.Row()))
				}
				got, err := interpRows(&in, tab, e.FDE, init)
				if err != nil || ut.Err() != nil || !slices.Equal(got, want) {
					t.Fatalf("%s %s FDE %#x: Interpreter rows %q (%v), UnwindTable %q (%v)", corpus.Rel(t, p), sec, e.FDE.Offset, got, err, want, ut.Err())
				}
				fdes++
			}
		}
		f.Close()
	}
	t.Logf("compared %d FDEs", fdes)
}

// TestInterpreterStack checks that Continue keeps the remember_state
// stack and Start and Reset empty it, and that a failing instruction ends
// the program.
func TestInterpreterStack(t *testing.T) {
	s := newSection(EHFrame)
	cie := s.CIE(1, "", nil, 1, -8, 16, stdCIE)
	s.AbsFDE(cie, 0x1000, 0x10, false, cat([]byte{byte(OpRememberState), byte(OpDefCFAOffset)}, uleb(32), adv(1)))
	s.AbsFDE(cie, 0x2000, 0x10, false, cat(adv(1), []byte{byte(OpRestoreState)}, adv(1)))
	tab := s.table(0)
	var fdes []FDE
	for it := tab.Entries(); it.Next(); {
		if e := it.Entry(); e.Kind == KindFDE {
			fdes = append(fdes, *e.FDE)
		}
	}
	var in Interpreter
	init := cieRules(t, tab, &in, fdes[0].CIE)
	run := func(f *FDE) []string {
		in.Continue(tab.FDEInstructions(f), init, f.PCBegin)
		var rows []string
		var ins Instruction
		for in.Next(&ins) {
			if in.Execute(&ins) {
				rows = append(rows, fmtRow(in.Row()))
			}
		}
		return rows
	}
	in.Reset()
	if got, want := run(&fdes[0]), []string{"[1000,1001) cfa=r7+32 r16=c-8"}; !slices.Equal(got, want) || in.Depth() != 1 || in.Err() != nil {
		t.Fatalf("first FDE: %q, depth %d, %v; want %q, depth 1", got, in.Depth(), in.Err(), want)
	}
	// Kept: the second FDE restores the state the first remembered.
	if got, want := run(&fdes[1]), []string{"[2000,2001) cfa=r7+8 r16=c-8", "[2001,2002) cfa=r7+8 r16=c-8"}; !slices.Equal(got, want) || in.Depth() != 0 || in.Err() != nil {
		t.Errorf("second FDE, stack kept: %q, depth %d, %v; want %q, depth 0", got, in.Depth(), in.Err(), want)
	}
	// Emptied: the restore fails, changes nothing and ends the program.
	in.Reset()
	if got, want := run(&fdes[1]), []string{"[2000,2001) cfa=r7+8 r16=c-8"}; !slices.Equal(got, want) ||
		in.Err() == nil || !strings.Contains(in.Err().Error(), "without DW_CFA_remember_state") {
		t.Errorf("second FDE after Reset: %q, %v; want %q and the mismatch error", got, in.Err(), want)
	}
	var ins Instruction
	if in.Next(&ins) || in.Execute(&Instruction{Op: OpAdvanceLoc, Operand: 1}) {
		t.Error("the program goes on after its error")
	}
	// Start empties it too.
	in.Reset()
	run(&fdes[0])
	in.Start(tab.FDEInstructions(&fdes[1]), init, fdes[1].PCBegin)
	for in.Next(&ins) {
		in.Execute(&ins)
	}
	if in.Err() == nil || !strings.Contains(in.Err().Error(), "without DW_CFA_remember_state") {
		t.Errorf("second FDE after Start: %v; want the mismatch error", in.Err())
	}
}

// TestInterpreterMisuse checks the Interpreter's answers to what no
// program gives it: no program, a range outside the section, no CIE.
func TestInterpreterMisuse(t *testing.T) {
	var in Interpreter
	var ins Instruction
	if in.Next(&ins) || in.Execute(&Instruction{Op: OpAdvanceLoc, Operand: 1}) || in.Err() != nil {
		t.Errorf("zero Interpreter: a step, or an error %v", in.Err())
	}
	in.Start(InstructionIter{}, nil, 0)
	if in.Next(&ins) || in.Err() == nil {
		t.Errorf("Start without a program: no error")
	}
	s := newSection(EHFrame)
	c := s.CIE(1, "", nil, 1, -8, 16, stdCIE)
	tab := s.table(0)
	cie, err := tab.CIEAt(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range []InstructionIter{
		tab.Instructions(cie, 4, uint64(len(s.B))+1, 0),
		tab.Instructions(cie, 8, 4, 0),
		tab.Instructions(nil, 0, 4, 0),
	} {
		in.Start(it, nil, 0)
		if in.Next(&ins) || in.Err() == nil {
			t.Errorf("bad range: no error")
		}
		if it.Next(&ins) || it.Err() == nil {
			t.Errorf("bad range: the iterator has no error")
		}
	}
}

// TestInterpreterUnknownOp checks that an opcode the package does not
// know decodes and that the interpreter stops there.
func TestInterpreterUnknownOp(t *testing.T) {
	for op, want := range map[Op]bool{OpNop: true, OpGNUArgsSize: true, OpAdvanceLoc | 5: true, OpRestore | 3: true, 0x17: false, 0x1c: false, 0x3f: false} {
		if op.Known() != want {
			t.Errorf("%v.Known() = %v, want %v", op, !want, want)
		}
	}
	s := newSection(EHFrame)
	cie := s.CIE(1, "", nil, 1, -8, 16, stdCIE)
	s.AbsFDE(cie, 0x1000, 0x10, false, []byte{0x1c, byte(OpDefCFAOffset), 16})
	tab := s.table(0)
	fde := firstFDE(t, tab)
	it := tab.FDEInstructions(&fde)
	var ins Instruction
	var ops []Op
	for it.Next(&ins) {
		ops = append(ops, ins.Op)
	}
	if want := []Op{0x1c, OpDefCFAOffset}; !slices.Equal(ops, want) || it.Err() != nil {
		t.Errorf("decoded %v, %v; want %v", ops, it.Err(), want)
	}
	var in Interpreter
	in.Start(tab.FDEInstructions(&fde), cieRules(t, tab, &in, fde.CIE), fde.PCBegin)
	if !in.Next(&ins) || in.Execute(&ins) || in.Err() == nil || !strings.Contains(in.Err().Error(), "unknown call frame instruction") {
		t.Errorf("unknown opcode executes: %v", in.Err())
	}
	if in.Next(&ins) {
		t.Error("the program goes on after an unknown opcode")
	}
}

// TestRegTooLarge checks register numbers beyond 32 bits: the decoder
// reads on (as readelf does, keeping the low bits), the interpreter
// rejects the instruction.
func TestRegTooLarge(t *testing.T) {
	const big = 1<<33 + 5
	s := newSection(EHFrame)
	cie := s.CIE(1, "", nil, 1, -8, 16, stdCIE)
	s.AbsFDE(cie, 0x1000, 0x10, false, cat([]byte{byte(OpOffsetExtended)}, uleb(big), uleb(2),
		[]byte{byte(OpRegister)}, uleb(3), uleb(big), []byte{byte(OpUndefined)}, uleb(12)))
	tab := s.table(0)
	fde := firstFDE(t, tab)
	it := tab.FDEInstructions(&fde)
	var got []Instruction
	var ins Instruction
	for it.Next(&ins) {
		got = append(got, ins)
	}
	if it.Err() != nil || len(got) != 3 ||
		!got[0].RegTooLarge || got[0].Reg != 5 || got[0].Operand != 2 ||
		!got[1].RegTooLarge || got[1].Reg != 3 || got[1].Operand != 5 ||
		got[2].RegTooLarge || got[2].Reg != 12 {
		t.Fatalf("decoded %+v, %v", got, it.Err())
	}
	if _, err := lookup(tab, 0x1000); err == nil || !strings.Contains(err.Error(), "register number too large") {
		t.Errorf("lookup: %v, want the register error", err)
	}
	if _, err := rowsOf(tab); err == nil || !strings.Contains(err.Error(), "register number too large") {
		t.Errorf("rows: %v, want the register error", err)
	}
}

// TestEntryHeaderAt walks the corpus sections with EntryHeaderAt and
// DecodeCIE and checks them against Entries and CIEAt.
func TestEntryHeaderAt(t *testing.T) {
	n := 0
	for _, p := range corpus.Frames(t) {
		f, err := elf.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, sec := range []string{".eh_frame", ".debug_frame"} {
			if f.Section(sec) == nil {
				continue
			}
			tab, err := FromELF(f, sec)
			if err != nil {
				t.Fatal(err)
			}
			off := uint64(0)
			for it := tab.Entries(); it.Next(); n++ {
				e := it.Entry()
				h, err := tab.EntryHeaderAt(off)
				if err != nil || h.Offset != e.Offset || h.Kind != e.Kind || h.Truncated {
					t.Fatalf("%s %s: header at %#x: %+v, %v; entry %+v", corpus.Rel(t, p), sec, off, h, err, e)
				}
				switch e.Kind {
				case KindCIE:
					c, err := tab.DecodeCIE(&h)
					if err != nil || c.Length != h.Length || c.Augmentation != e.CIE.Augmentation || c.CodeAlign != e.CIE.CodeAlign ||
						c.DataAlign != e.CIE.DataAlign || c.RA != e.CIE.RA || !bytes.Equal(c.Instructions, e.CIE.Instructions) {
						t.Fatalf("%s %s: DecodeCIE(%#x) = %+v, %v; CIEAt gives %+v", corpus.Rel(t, p), sec, off, c, err, e.CIE)
					}
				case KindFDE:
					if h.Length != e.FDE.Length || h.ID != e.FDE.CIEPointer || h.End != e.FDE.Offset+4+h.Length {
						t.Fatalf("%s %s: header %+v, FDE %+v", corpus.Rel(t, p), sec, h, e.FDE)
					}
				}
				off = h.End
			}
		}
		f.Close()
	}
	if n == 0 {
		t.Fatal("no entry compared")
	}
	t.Logf("compared %d entries", n)
}

// TestTruncatedCIE checks a CIE whose length runs past the section's
// end: EntryHeaderAt reports it with an error, DecodeCIE decodes what is
// there (as readelf shows it), CIEAt refuses it.
func TestTruncatedCIE(t *testing.T) {
	s := newSection(EHFrame)
	s.CIE(1, "zR", []byte{byte(PEPCRel | PESData4)}, 1, -8, 16, stdCIE)
	s.B[0] += 0x40 // the length now runs 0x40 bytes past the end
	tab := s.table(0)
	h, err := tab.EntryHeaderAt(0)
	if err == nil || !h.Truncated || h.Kind != KindCIE || h.End != uint64(len(s.B)) || h.Body != 8 {
		t.Fatalf("EntryHeaderAt = %+v, %v", h, err)
	}
	c, err := tab.DecodeCIE(&h)
	if err != nil || c.Augmentation != "zR" || c.FDEEncoding != PEPCRel|PESData4 || !bytes.Equal(c.Instructions, stdCIE) {
		t.Errorf("DecodeCIE = %+v, %v", c, err)
	}
	if _, err := tab.CIEAt(0); err == nil {
		t.Error("CIEAt accepts the truncated CIE")
	}
	bad := h
	bad.End = uint64(len(s.B)) + 1
	if _, err := tab.DecodeCIE(&bad); err == nil {
		t.Error("DecodeCIE accepts a header past the section")
	}
	bad = h
	bad.Kind = KindFDE
	if _, err := tab.DecodeCIE(&bad); err == nil {
		t.Error("DecodeCIE accepts an FDE")
	}
	s.B = s.B[:3]
	if h, err := s.table(0).EntryHeaderAt(0); err == nil || h.Truncated {
		t.Errorf("a cut length field: %+v, %v", h, err)
	}
}

// TestCopyFrom checks that CopyFrom copies every rule, those past the
// inline ones too, so that the copy does not change with the original.
func TestCopyFrom(t *testing.T) {
	var instr []byte
	for r := 0; r < inlineRules+6; r++ {
		instr = append(instr, byte(OpOffsetExtended))
		instr = append(instr, uleb(uint64(100+r))...)
		instr = append(instr, 1)
	}
	s := newSection(EHFrame)
	cie := s.CIE(1, "", nil, 1, -8, 16, stdCIE)
	s.AbsFDE(cie, 0x1000, 0x10, false, cat(instr, adv(1), []byte{byte(OpUndefined), 100 + inlineRules + 2}))
	tab := s.table(0)
	fde := firstFDE(t, tab)
	var in Interpreter
	in.Start(tab.FDEInstructions(&fde), cieRules(t, tab, &in, fde.CIE), fde.PCBegin)
	var ins Instruction
	var kept Row
	for in.Next(&ins) {
		if in.Execute(&ins) {
			kept.CopyFrom(in.Row())
		}
	}
	col := arch.Reg(100 + inlineRules + 2)
	if got := in.Row().Rule(col).Kind; got != RuleUndefined {
		t.Fatalf("r%d is %v after the program", col, got)
	}
	if got := kept.Rule(col); got.Kind != RuleOffset || got.Offset != -8 || kept.NumRules() != inlineRules+7 {
		t.Errorf("the copy's r%d is %+v (%d rules), want c-8 of %d", col, got, kept.NumRules(), inlineRules+7)
	}
	// AppendRules is Rules appended, into a reused slice too.
	buf := make([]RegRule, 40)
	for i := range buf {
		buf[i] = RegRule{Column: 999, Rule: Rule{Kind: RuleExpression, Expr: []byte{1}}}
	}
	if got, want := kept.AppendRules(buf[:1]), append([]RegRule{buf[0]}, kept.Rules()...); !reflect.DeepEqual(got, want) {
		t.Errorf("AppendRules:\n%+v\nwant\n%+v", got, want)
	}
}

// TestCFASigned checks that the CFA offset records whether it came from a
// signed operand.
func TestCFASigned(t *testing.T) {
	for _, c := range []struct {
		instr  []byte
		signed bool
		off    int64
	}{
		{cat([]byte{byte(OpDefCFASF)}, uleb(7), sleb(-2)), true, 16},
		{cat([]byte{byte(OpDefCFAOffsetSF)}, sleb(3)), true, -24},
		{cat([]byte{byte(OpDefCFASF)}, uleb(7), sleb(-2), []byte{byte(OpDefCFAOffset)}, uleb(40)), false, 40},
		{cat([]byte{byte(OpDefCFA)}, uleb(6), uleb(16)), false, 16},
	} {
		s := newSection(EHFrame)
		cie := s.CIE(1, "", nil, 1, -8, 16, stdCIE)
		s.AbsFDE(cie, 0x1000, 0x10, false, c.instr)
		r, err := lookup(s.table(0), 0x1000)
		if err != nil || r.CFA.Signed != c.signed || r.CFA.Offset != c.off {
			t.Errorf("%x: CFA %+v, %v; want offset %d, signed %v", c.instr, r.CFA, err, c.off, c.signed)
		}
	}
}

// TestNamesColumn lists the instructions that name a table column.
func TestNamesColumn(t *testing.T) {
	var got []Op
	for op := Op(0); op < 0x40; op++ {
		if op.NamesColumn() {
			got = append(got, op)
		}
	}
	for _, op := range []Op{OpOffset, OpRestore} {
		if op.NamesColumn() {
			got = append(got, op)
		}
	}
	want := []Op{OpOffsetExtended, OpRestoreExtended, OpUndefined, OpSameValue, OpRegister, OpExpression,
		OpOffsetExtendedSF, OpValOffset, OpValOffsetSF, OpValExpression, OpGNUNegativeOffsetExtended, OpOffset, OpRestore}
	if !slices.Equal(got, want) {
		t.Errorf("NamesColumn: %v, want %v", got, want)
	}
	if OpDefCFA.NamesColumn() || OpDefCFARegister.NamesColumn() {
		t.Error("the CFA's register is a column")
	}
}

// firstFDE returns the first FDE of tab.
func firstFDE(t *testing.T, tab *Table) FDE {
	for it := tab.Entries(); it.Next(); {
		if e := it.Entry(); e.Kind == KindFDE && e.Err == nil {
			return *e.FDE
		}
	}
	t.Fatal("no FDE")
	return FDE{}
}

// TestTruncatedOperands checks the error and offset each kind of operand
// that the program ends inside gets, and that a truncated LEB128 operand
// keeps its low bits (readelf prints them).
func TestTruncatedOperands(t *testing.T) {
	for _, c := range []struct {
		prog    []byte
		operand uint64
		at      int // offset of the error in prog
		msg     string
	}{
		{[]byte{byte(OpDefCFAOffset), 0x85}, 5, 2, "truncated LEB128 operand"},
		{[]byte{byte(OpDefCFAOffsetSF), 0xfe}, 0x7e, 2, "truncated LEB128 operand"},
		{[]byte{byte(OpOffsetExtended), 0x83}, 0, 2, "truncated LEB128 operand"},
		{[]byte{byte(OpRegister), 1, 0x82}, 2, 3, "truncated LEB128 operand"},
		{[]byte{byte(OpDefCFAExpression), 0x80}, 0, 2, "truncated LEB128 operand"},
		{[]byte{byte(OpAdvanceLoc2), 1}, 0, 1, "truncated operand"},
		{[]byte{byte(OpDefCFAExpression), 5, 1}, 0, 2, "expression length 5 exceeds the entry"},
	} {
		s := newSection(EHFrame)
		cie := s.CIE(1, "", nil, 1, -8, 16, stdCIE)
		s.AbsFDE(cie, 0x1000, 0x10, false, c.prog)
		tab := s.table(0)
		fde := firstFDE(t, tab)
		it := tab.Instructions(fde.CIE, fde.instrOff, fde.instrOff+uint64(len(c.prog)), fde.PCBegin)
		var ins Instruction
		if it.Next(&ins) {
			t.Errorf("% x: decoded, want an error", c.prog)
			continue
		}
		want := fmt.Sprintf(".eh_frame+%#x: %s", fde.instrOff+uint64(c.at), c.msg)
		if it.Err() == nil || it.Err().Error() != want || ins.Operand != c.operand {
			t.Errorf("% x: %v, operand %#x; want %s, operand %#x", c.prog, it.Err(), ins.Operand, want, c.operand)
		}
		if it.Next(&ins) {
			t.Errorf("% x: decodes on after the error", c.prog)
		}
	}
}
