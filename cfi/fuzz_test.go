package cfi

import (
	"encoding/binary"
	"testing"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/internal/cfiseed"
	"github.com/sframekit/sframekit/internal/corpus"
)

// fuzzMem answers every read, so expressions run as far as they can.
type fuzzMem struct{}

func (fuzzMem) ReadUint64(addr uint64) (uint64, error) { return addr * 3, nil }

type fuzzRegs struct{}

func (fuzzRegs) Reg(r arch.Reg) (uint64, bool) { return uint64(r) * 16, r < 100 }

// fuzzOne exercises everything a caller can do with arbitrary section
// bytes: walk the entries, stream every row, look up PCs and evaluate the
// expressions found (dump's FuzzCFIText formats the section as readelf
// would).
func fuzzOne(t *testing.T, data []byte, flags uint8) {
	kind := EHFrame
	if flags&1 != 0 {
		kind = DebugFrame
	}
	addrSize := 8
	if flags&2 != 0 {
		addrSize = 4
	}
	var order binary.ByteOrder = binary.LittleEndian
	if flags&4 != 0 {
		order = binary.BigEndian
	}
	arch := arch.Arch((flags >> 3) & 3)
	o := Options{Kind: kind, Addr: 0x10000, ByteOrder: order, AddrSize: addrSize, Arch: arch,
		ReadPointer: func(a uint64, n int) (uint64, error) { return a ^ 0x55, nil }}
	if flags&0x20 != 0 && len(data) > 8 {
		// Use the start of the data as an .eh_frame_hdr too.
		o.Hdr, o.HdrAddr = data[:len(data)/2], 0x8000
	}
	tab, err := New(data, o)
	if err != nil {
		t.Fatal(err)
	}
	var pcs []uint64
	var ctx UnwindContext // one for every lookup of this input
	it := tab.Entries()
	n := 0
	for it.Next() {
		n++
		if n > len(data)+1 {
			t.Fatalf("entry walk does not advance")
		}
		e := it.Entry()
		if e.Kind == KindCIE && e.Err == nil {
			decodeAll(t, tab.CIEInstructions(e.CIE), len(e.CIE.Instructions))
		}
		if e.Kind != KindFDE || e.Err != nil {
			continue
		}
		fde := *e.FDE
		decodeAll(t, tab.FDEInstructions(&fde), len(fde.Instructions))
		pcs = append(pcs, fde.PCBegin, fde.PCBegin+(fde.PCEnd-fde.PCBegin)/2, fde.PCEnd-1)
		ut := tab.NewUnwindTable(&fde)
		rows := 0
		for ut.Next() {
			rows++
			if rows > len(fde.Instructions)+1 {
				t.Fatalf("more rows than instructions")
			}
			r := ut.Row()
			eo := &EvalOptions{Regs: fuzzRegs{}, Mem: fuzzMem{}, AddrSize: addrSize, ByteOrder: order}
			if r.CFA.Kind == CFAExpression {
				EvalExpression(r.CFA.Expr, eo)
				ExprString(r.CFA.Expr, arch)
			}
			for i := 0; i < r.NumRules(); i++ {
				if x := r.RuleAt(i); x.Expr != nil {
					eo.Initial = []uint64{1}
					EvalExpression(x.Expr, eo)
				}
			}
		}
		var row Row
		tab.FDERow(&ctx, &fde, fde.PCBegin, &row)
	}
	pcs = append(pcs, 0, 0x10000, ^uint64(0))
	var row Row
	for _, pc := range pcs {
		if f, err := tab.RowForPC(&ctx, pc, &row); err == nil && !f.Contains(pc) {
			t.Fatalf("RowForPC(%#x) found FDE [%#x,%#x)", pc, f.PCBegin, f.PCEnd)
		}
	}
	if h := tab.Hdr(); h != nil {
		for i := 0; i < h.Len() && i < 64; i++ {
			h.Entry(i)
		}
	}
}

// decodeAll walks a program with the instruction decoder alone: every
// instruction takes at least a byte, so the walk ends within n steps.
func decodeAll(t *testing.T, it InstructionIter, n int) {
	var ins Instruction
	for i := 0; it.Next(&ins); i++ {
		if i > n {
			t.Fatalf("instruction walk does not advance")
		}
		if ins.Expr != nil {
			o := NewOperationIter(ins.Expr, nil, 8)
			var op Operation
			for j := 0; o.Next(&op); j++ {
				if j > len(ins.Expr) {
					t.Fatalf("operation walk does not advance")
				}
			}
		}
	}
}

// FuzzParse feeds arbitrary bytes to the parser, the row stream, the
// lookup path and the expression evaluator. Seeds
// are the .eh_frame and .eh_frame_hdr sections of the smaller corpus files
// plus synthetic sections covering every opcode.
func FuzzParse(f *testing.F) {
	for _, seed := range fuzzSeeds(f) {
		f.Add(seed.Data, seed.Flags)
	}
	f.Fuzz(fuzzOne)
}

func fuzzSeeds(t testing.TB) []cfiseed.Seed {
	var seeds []cfiseed.Seed
	// Synthetic: every opcode, .eh_frame and .debug_frame.
	for _, kind := range []SectionKind{EHFrame, DebugFrame} {
		s := newSection(kind)
		c := s.CIE(3, "", nil, 1, -8, 16, stdCIE)
		var all []byte
		all = append(all, adv(1)...)
		all = append(all, byte(OpRememberState), byte(OpDefCFAExpression), 2, 0x76, 0x08, byte(OpExpression), 6, 1, 0x30)
		all = append(all, byte(OpValExpression), 3, 1, 0x31, byte(OpRegister), 16, 11, byte(OpGNUArgsSize), 8, byte(OpGNUWindowSave))
		all = append(all, byte(OpRestoreState), byte(OpAdvanceLoc1), 4, byte(OpValOffsetSF), 3, 0x7f, byte(OpDefCFASF), 7, 0x7e)
		s.AbsFDE(c, 0x1000, 0x100, false, all)
		flags := uint8(0)
		if kind == DebugFrame {
			flags = 1
		}
		seeds = append(seeds, cfiseed.Seed{Data: s.B, Flags: flags})
	}
	return append(seeds, cfiseed.Corpus()...)
}

// TestFuzzSeeds runs the fuzz body over the seeds and over truncations
// and single-byte corruptions of them, so plain `go test` covers the
// malformed-input paths too.
func TestFuzzSeeds(t *testing.T) {
	corpus.Dir(t)
	for _, s := range fuzzSeeds(t) {
		cfiseed.Variants(s, func(data []byte, flags uint8) { fuzzOne(t, data, flags) })
	}
}
