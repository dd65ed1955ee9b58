package sframe_test

import (
	"cmp"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/sframe"
)

var encABIs = []sframe.ABI{sframe.ABIAArch64BE, sframe.ABIAArch64LE, sframe.ABIAMD64LE, sframe.ABIS390XBE}

// encGen makes random functions whose rows the chosen version and ABI can
// express, covering every rule kind the decoder returns.
type encGen struct {
	r   *rand.Rand
	v   sframe.Version
	abi sframe.ABI
}

// offset returns a random offset of 1, 2 or 4 bytes.
func (g *encGen) offset() int64 {
	switch g.r.IntN(3) {
	case 0:
		return int64(int8(g.r.Uint32()))
	case 1:
		return int64(int16(g.r.Uint32()))
	}
	return int64(int32(g.r.Uint32()))
}

func (g *encGen) cfaOffset() int64 {
	o := g.offset()
	if g.abi == sframe.ABIS390XBE {
		return 160 + 8*(o>>3) // (o>>3) fits the stored 32-bit word
	}
	return o
}

func (g *encGen) reg() arch.Reg { return arch.Reg(g.r.IntN(40)) }

func encDeref(off int64) sframe.Rule {
	return sframe.Rule{Kind: sframe.RuleDeref, Base: sframe.RegCFA, Offset: off}
}

var encNotSaved = sframe.Rule{Kind: sframe.RuleNotSaved, Base: sframe.RegCFA}

// nonzero returns a random non-zero offset, even when even is set.
func (g *encGen) nonzero(even bool) int64 {
	for {
		o := g.offset()
		if even {
			o &^= 1
		}
		if o != 0 {
			return o
		}
	}
}

func (g *encGen) defaultRow() sframe.Row {
	var r sframe.Row
	r.CFA = sframe.Rule{Kind: sframe.RuleValue, Base: g.abi.Arch().SP(), Offset: g.cfaOffset()}
	if g.r.IntN(2) == 0 {
		r.CFA.Base = g.abi.Arch().FP()
	}
	r.RASigned = g.r.IntN(4) == 0
	switch g.abi {
	case sframe.ABIAMD64LE:
		r.RA = sframe.Rule{Kind: sframe.RuleDeref, Base: sframe.RegCFA, Offset: -8, Fixed: true}
		if g.r.IntN(2) == 0 {
			r.FP = encDeref(g.offset())
		}
	case sframe.ABIAArch64BE, sframe.ABIAArch64LE:
		if g.r.IntN(3) > 0 {
			r.RA = encDeref(g.nonzero(false))
			if g.r.IntN(4) == 0 {
				r.RA = encNotSaved
			}
			r.FP = encDeref(g.offset())
		}
	case sframe.ABIS390XBE:
		v2 := g.v == sframe.Version2
		saved := func(ra bool) sframe.Rule {
			if v2 && g.r.IntN(3) == 0 {
				return sframe.Rule{Kind: sframe.RuleValue, Base: g.reg()}
			}
			return encDeref(g.nonzero(v2))
		}
		switch g.r.IntN(4) {
		case 0: // CFA only
		case 1:
			r.RA = saved(true)
		case 2:
			r.RA = encNotSaved
			r.FP = saved(false)
		case 3:
			r.RA = saved(true)
			r.FP = saved(false)
		}
	}
	return r
}

// flexRule returns a rule for a flexible pair; cfaOK allows CFA-based
// value rules (not for RA, whose control word would be 0).
func (g *encGen) flexRule(valueCFAOK bool) sframe.Rule {
	for {
		r := sframe.Rule{Kind: sframe.RuleValue, Base: g.reg(), Offset: g.offset()}
		if g.r.IntN(2) == 0 {
			r.Kind = sframe.RuleDeref
		}
		if g.r.IntN(3) == 0 {
			r.Base = sframe.RegCFA
		}
		if r.Kind == sframe.RuleValue && r.Base == sframe.RegCFA && !valueCFAOK {
			continue
		}
		return r
	}
}

func (g *encGen) flexRow() sframe.Row {
	var r sframe.Row
	r.CFA = sframe.Rule{Kind: sframe.RuleValue, Base: g.reg(), Offset: g.cfaOffset()}
	if g.r.IntN(2) == 0 {
		r.CFA.Kind = sframe.RuleDeref
	}
	r.RASigned = g.r.IntN(4) == 0
	hasFP := g.r.IntN(2) == 0
	if hasFP {
		r.FP = g.flexRule(true)
		if g.r.IntN(3) == 0 {
			// A padding word: with AMD64's fixed RA offset it means the
			// fixed slot, elsewhere "not saved".
			r.RA = encNotSaved
			if g.abi == sframe.ABIAMD64LE {
				r.RA = sframe.Rule{Kind: sframe.RuleDeref, Base: sframe.RegCFA, Offset: -8, Fixed: true, Padding: true}
			}
		} else {
			r.RA = g.flexRule(false)
		}
		return r
	}
	switch {
	case g.r.IntN(2) == 0:
		r.RA = g.flexRule(false)
	case g.abi == sframe.ABIAMD64LE:
		r.RA = sframe.Rule{Kind: sframe.RuleDeref, Base: sframe.RegCFA, Offset: -8, Fixed: true}
	}
	return r
}

func (g *encGen) funcs(n int) []sframe.EncFunc {
	fs := make([]sframe.EncFunc, n)
	addr := uint64(g.r.Uint32()) >> 4
	for i := range fs {
		f := &fs[i]
		addr += uint64(g.r.IntN(1 << 12))
		f.Start = addr
		addr++ // distinct starts
		switch g.r.IntN(4) {
		case 0:
			f.Size = uint32(g.r.IntN(1 << 8))
		case 1:
			f.Size = uint32(g.r.IntN(1 << 16))
		case 2:
			f.Size = g.r.Uint32()
		default:
			f.Size = uint32(g.r.IntN(64))
		}
		f.PAuthKeyB = g.r.IntN(4) == 0
		f.RepSize = uint8(g.r.IntN(3) * 8)
		limit := uint64(f.Size)
		if g.r.IntN(8) == 0 {
			f.PCType = sframe.PCMask
			f.RepSize = uint8(1 + g.r.IntN(255))
			limit = uint64(f.RepSize)
		}
		if g.v == sframe.Version3 {
			f.Signal = g.r.IntN(8) == 0
			if g.r.IntN(3) == 0 {
				f.Type = sframe.FDEFlex
			}
		}
		nrows := g.r.IntN(6)
		off := uint64(0)
		for k := 0; k < nrows && off < max(limit, 1); k++ {
			var row sframe.Row
			switch {
			case g.r.IntN(8) == 0:
				row = sframe.Row{RAUndefined: true, RASigned: g.r.IntN(4) == 0}
			case f.Type == sframe.FDEFlex:
				row = g.flexRow()
			default:
				row = g.defaultRow()
			}
			f.Rows = append(f.Rows, sframe.EncRow{StartOff: uint32(off), Row: row})
			off += 1 + uint64(g.r.IntN(1+int(limit/4)))
		}
	}
	if g.r.IntN(2) == 0 {
		g.r.Shuffle(len(fs), func(i, j int) { fs[i], fs[j] = fs[j], fs[i] })
	}
	return fs
}

// TestEncodeRoundTrip: decode(encode(x)) == x for random functions of
// every ABI, version and option, with the decoder's own validation.
func TestEncodeRoundTrip(t *testing.T) {
	for _, v := range []sframe.Version{sframe.Version2, sframe.Version3} {
		for _, abi := range encABIs {
			for seed := uint64(0); seed < 200; seed++ {
				g := &encGen{r: rand.New(rand.NewPCG(seed, uint64(v)<<8|uint64(abi))), v: v, abi: abi}
				funcs := g.funcs(g.r.IntN(12))
				opts := sframe.EncodeOptions{Version: v, ABI: abi, Addr: uint64(g.r.Uint32() >> 2),
					KeepOrder: g.r.IntN(2) == 0}
				if v == sframe.Version2 && g.r.IntN(2) == 0 {
					opts.Start = sframe.StartSectionRel
					opts.Addr = 0
				}
				data, err := sframe.Encode(opts, funcs)
				if err != nil {
					t.Fatalf("%s %s seed %d: %v", v, abi, seed, err)
				}
				s, err := sframe.Parse(data, opts.Addr)
				if err != nil {
					t.Fatalf("%s %s seed %d: parse: %v", v, abi, seed, err)
				}
				if err := s.Validate(); err != nil {
					t.Fatalf("%s %s seed %d: validate: %v", v, abi, seed, err)
				}
				if s.Header().Version != v || s.Header().ABI != abi || s.BigEndian() != abi.BigEndian() {
					t.Fatalf("header %v", s.Header())
				}
				if got := s.Header().Flags&sframe.FlagFDESorted != 0; got == opts.KeepOrder {
					t.Fatalf("sorted flag %v with KeepOrder %v", got, opts.KeepOrder)
				}
				if got := s.Header().Flags&sframe.FlagFuncStartPCRel != 0; got != (opts.Start == sframe.StartPCRel) {
					t.Fatalf("PC-relative flag %v with %s", got, opts.Start)
				}
				_, back, err := sframe.Extract(s)
				if err != nil {
					t.Fatalf("%s %s seed %d: extract: %v", v, abi, seed, err)
				}
				if !opts.KeepOrder {
					// The index order is the address order; which of
					// several functions without FREs came first in the
					// input cannot be told from a v2 section.
					byStart := func(a, b sframe.EncFunc) int { return cmp.Compare(a.Start, b.Start) }
					funcs = slices.Clone(funcs)
					slices.SortFunc(funcs, byStart)
					slices.SortFunc(back, byStart)
				}
				encCompareFuncs(t, back, funcs)
				if t.Failed() {
					t.Fatalf("%s %s seed %d", v, abi, seed)
				}
			}
		}
	}
}

func encCompareFuncs(t *testing.T, got, want []sframe.EncFunc) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%d functions, want %d", len(got), len(want))
		return
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.MinFREType < w.MinFREType {
			t.Errorf("func %d: FRE type %s narrower than asked %s", i, g.MinFREType, w.MinFREType)
		}
		g.MinFREType, w.MinFREType = 0, 0
		gr, wr := g.Rows, w.Rows
		g.Rows, w.Rows = nil, nil
		if g.Start != w.Start || g.Size != w.Size || g.PCType != w.PCType || g.RepSize != w.RepSize ||
			g.Signal != w.Signal || g.PAuthKeyB != w.PAuthKeyB || g.Type != w.Type {
			t.Errorf("func %d: got %+v, want %+v", i, g, w)
			continue
		}
		if len(gr) != len(wr) {
			t.Errorf("func %d: %d rows, want %d", i, len(gr), len(wr))
			continue
		}
		for k := range wr {
			if gr[k] != wr[k] {
				t.Errorf("func %d row %d: got %+v, want %+v", i, k, gr[k], wr[k])
			}
		}
	}
}

func encMustEncode(t *testing.T, opts sframe.EncodeOptions, funcs []sframe.EncFunc) *sframe.Section {
	t.Helper()
	data, err := sframe.Encode(opts, funcs)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sframe.Parse(data, opts.Addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	return s
}

func encAMD64Row(cfa int64) sframe.Row {
	return sframe.Row{
		CFA: sframe.Rule{Kind: sframe.RuleValue, Base: 7, Offset: cfa},
		RA:  sframe.Rule{Kind: sframe.RuleDeref, Base: sframe.RegCFA, Offset: -8, Fixed: true},
	}
}

// TestEncodeSizes checks the widths gas would choose: FRE start fields by
// function size (< 256, < 65536), data words by the widest signed offset
// or unsigned control word.
func TestEncodeSizes(t *testing.T) {
	cases := []struct {
		size uint32
		min  sframe.FREType
		want sframe.FREType
	}{
		{255, 0, sframe.FREAddr1},
		{256, 0, sframe.FREAddr2},
		{65535, 0, sframe.FREAddr2},
		{65536, 0, sframe.FREAddr4},
		{16, sframe.FREAddr2, sframe.FREAddr2},
	}
	for _, c := range cases {
		s := encMustEncode(t, sframe.EncodeOptions{ABI: sframe.ABIAMD64LE},
			[]sframe.EncFunc{{Start: 0x1000, Size: c.size, MinFREType: c.min, Rows: []sframe.EncRow{{Row: encAMD64Row(8)}}}})
		f, _ := s.Func(0)
		if f.FREType() != c.want {
			t.Errorf("size %d min %s: %s, want %s", c.size, c.min, f.FREType(), c.want)
		}
	}
	words := []struct {
		row  sframe.Row
		flex bool
		want int
	}{
		{encAMD64Row(127), false, 1},
		{encAMD64Row(128), false, 2},
		{encAMD64Row(-128), false, 1},
		{encAMD64Row(-129), false, 2},
		{encAMD64Row(32768), false, 4},
		// Control word of r16 is 16<<3|1 = 129: one unsigned byte.
		{sframe.Row{CFA: sframe.Rule{Kind: sframe.RuleValue, Base: 16, Offset: 8},
			RA: sframe.Rule{Kind: sframe.RuleDeref, Base: sframe.RegCFA, Offset: -8, Fixed: true}}, true, 1},
		// r32: 257, two bytes.
		{sframe.Row{CFA: sframe.Rule{Kind: sframe.RuleValue, Base: 32, Offset: 8},
			RA: sframe.Rule{Kind: sframe.RuleDeref, Base: sframe.RegCFA, Offset: -8, Fixed: true}}, true, 2},
	}
	for _, w := range words {
		f := sframe.EncFunc{Start: 0x1000, Size: 16, Rows: []sframe.EncRow{{Row: w.row}}}
		if w.flex {
			f.Type = sframe.FDEFlex
		}
		s := encMustEncode(t, sframe.EncodeOptions{ABI: sframe.ABIAMD64LE}, []sframe.EncFunc{f})
		fn, _ := s.Func(0)
		it := s.FREs(&fn)
		if !it.Next() {
			t.Fatal(it.Err())
		}
		if got := it.FRE().WordSize(); got != w.want {
			t.Errorf("%+v: word size %d, want %d", w.row, got, w.want)
		}
		r, err := s.Rules(&fn, it.FRE())
		if err != nil || r != w.row {
			t.Errorf("rules %+v, %v; want %+v", r, err, w.row)
		}
	}
}

// TestEncodeLayout: the index is sorted and flagged, the FREs stay in
// input order, start fields are PC-relative by default.
func TestEncodeLayout(t *testing.T) {
	funcs := []sframe.EncFunc{
		{Start: 0x2000, Size: 8, Rows: []sframe.EncRow{{Row: encAMD64Row(8)}}},
		{Start: 0x1000, Size: 8, Rows: []sframe.EncRow{{Row: encAMD64Row(16)}}},
	}
	const addr = 0x5000
	for _, v := range []sframe.Version{sframe.Version2, sframe.Version3} {
		s := encMustEncode(t, sframe.EncodeOptions{Version: v, ABI: sframe.ABIAMD64LE, Addr: addr}, funcs)
		if s.Header().Flags != sframe.FlagFDESorted|sframe.FlagFuncStartPCRel {
			t.Errorf("%s: flags %s", v, s.Header().Flags)
		}
		f0, _ := s.Func(0)
		f1, _ := s.Func(1)
		if f0.Start != 0x1000 || f1.Start != 0x2000 {
			t.Errorf("%s: starts %#x %#x", v, f0.Start, f1.Start)
		}
		if want := int64(0x1000 - addr - f0.StartFieldOff); f0.StartField != want {
			t.Errorf("%s: start field %#x, want %#x", v, f0.StartField, want)
		}
		if f0.FREOff <= f1.FREOff {
			t.Errorf("%s: FREs of the first input function should come first: offsets %d, %d", v, f0.FREOff, f1.FREOff)
		}
		s = encMustEncode(t, sframe.EncodeOptions{Version: v, ABI: sframe.ABIAMD64LE, Addr: addr, KeepOrder: true, Start: sframe.StartSectionRel}, funcs)
		f0, _ = s.Func(0)
		if s.Header().Flags != 0 || f0.Start != 0x2000 || f0.StartField != 0x2000-addr {
			t.Errorf("%s: keep order, section-relative: flags %s, start %#x field %#x", v, s.Header().Flags, f0.Start, f0.StartField)
		}
	}
}

// TestEncodeRefuses checks the errors for what a version or ABI cannot
// express.
func TestEncodeRefuses(t *testing.T) {
	flexRow := sframe.Row{CFA: sframe.Rule{Kind: sframe.RuleDeref, Base: 6, Offset: -8},
		RA: sframe.Rule{Kind: sframe.RuleDeref, Base: sframe.RegCFA, Offset: -8, Fixed: true}}
	many := make([]sframe.EncRow, 65536)
	for i := range many {
		many[i] = sframe.EncRow{StartOff: uint32(i), Row: encAMD64Row(8)}
	}
	cases := []struct {
		name  string
		opts  sframe.EncodeOptions
		funcs []sframe.EncFunc
		want  string
	}{
		{"flex in v2", sframe.EncodeOptions{Version: 2, ABI: sframe.ABIAMD64LE},
			[]sframe.EncFunc{{Start: 1, Size: 4, Type: sframe.FDEFlex, Rows: []sframe.EncRow{{Row: flexRow}}}}, "version 3 only"},
		{"register CFA in a default FDE", sframe.EncodeOptions{ABI: sframe.ABIAMD64LE},
			[]sframe.EncFunc{{Start: 1, Size: 4, Rows: []sframe.EncRow{{Row: flexRow}}}}, "needs a flexible FDE"},
		{"signal in v2", sframe.EncodeOptions{Version: 2, ABI: sframe.ABIAMD64LE},
			[]sframe.EncFunc{{Start: 1, Size: 4, Signal: true}}, "signal"},
		{"65536 rows in v3", sframe.EncodeOptions{ABI: sframe.ABIAMD64LE},
			[]sframe.EncFunc{{Start: 1, Size: 1 << 20, Rows: many}}, "65535"},
		{"offset wider than 32 bits", sframe.EncodeOptions{ABI: sframe.ABIAMD64LE},
			[]sframe.EncFunc{{Start: 1, Size: 4, Rows: []sframe.EncRow{{Row: encAMD64Row(1 << 33)}}}}, "wider than 32 bits"},
		{"v2 start field overflow", sframe.EncodeOptions{Version: 2, ABI: sframe.ABIAMD64LE},
			[]sframe.EncFunc{{Start: 1 << 40, Size: 4}}, "wider than the 32 bits"},
		{"rows out of order", sframe.EncodeOptions{ABI: sframe.ABIAMD64LE},
			[]sframe.EncFunc{{Start: 1, Size: 8, Rows: []sframe.EncRow{{StartOff: 4, Row: encAMD64Row(8)}, {StartOff: 2, Row: encAMD64Row(8)}}}}, "not above"},
		{"row past the end", sframe.EncodeOptions{ABI: sframe.ABIAMD64LE},
			[]sframe.EncFunc{{Start: 1, Size: 8, Rows: []sframe.EncRow{{StartOff: 8, Row: encAMD64Row(8)}}}}, "not below"},
		{"duplicate starts when sorted", sframe.EncodeOptions{ABI: sframe.ABIAMD64LE},
			[]sframe.EncFunc{{Start: 1, Size: 8}, {Start: 1, Size: 8}}, "same address"},
		{"s390x CFA not 160+8k", sframe.EncodeOptions{ABI: sframe.ABIS390XBE},
			[]sframe.EncFunc{{Start: 1, Size: 8, Rows: []sframe.EncRow{{Row: sframe.Row{CFA: sframe.Rule{Kind: sframe.RuleValue, Base: 15, Offset: 164}}}}}}, "multiple of 8"},
		{"s390x register RA in v3 default FDE", sframe.EncodeOptions{ABI: sframe.ABIS390XBE},
			[]sframe.EncFunc{{Start: 1, Size: 8, Rows: []sframe.EncRow{{Row: sframe.Row{CFA: sframe.Rule{Kind: sframe.RuleValue, Base: 15, Offset: 160},
				RA: sframe.Rule{Kind: sframe.RuleValue, Base: 14}}}}}}, "needs a flexible FDE"},
		{"RA undefined with rules", sframe.EncodeOptions{ABI: sframe.ABIAMD64LE},
			[]sframe.EncFunc{{Start: 1, Size: 8, Rows: []sframe.EncRow{{Row: sframe.Row{RAUndefined: true, CFA: encAMD64Row(8).CFA}}}}}, "RA-undefined"},
		{"version 1", sframe.EncodeOptions{Version: 1, ABI: sframe.ABIAMD64LE}, nil, "versions 2 and 3"},
		{"PC mask without repeat size", sframe.EncodeOptions{ABI: sframe.ABIAMD64LE},
			[]sframe.EncFunc{{Start: 1, Size: 8, PCType: sframe.PCMask}}, "repeat size 0"},
		// Register numbers above MaxReg would decode as MaxReg+1, which
		// Validate rejects (and would overflow the control word).
		{"flexible CFA register above MaxReg", sframe.EncodeOptions{ABI: sframe.ABIAMD64LE},
			[]sframe.EncFunc{{Start: 1, Size: 4, Type: sframe.FDEFlex, Rows: []sframe.EncRow{{Row: sframe.Row{
				CFA: sframe.Rule{Kind: sframe.RuleValue, Base: sframe.MaxReg + 1, Offset: 8}, RA: encAMD64Row(8).RA}}}}}, "invalid register"},
		{"v2 s390x RA register above MaxReg", sframe.EncodeOptions{Version: 2, ABI: sframe.ABIS390XBE},
			[]sframe.EncFunc{{Start: 1, Size: 8, Rows: []sframe.EncRow{{Row: sframe.Row{CFA: sframe.Rule{Kind: sframe.RuleValue, Base: 15, Offset: 160},
				RA: sframe.Rule{Kind: sframe.RuleValue, Base: sframe.MaxReg + 1}}}}}}, "too large"},
	}
	for _, c := range cases {
		_, err := sframe.Encode(c.opts, c.funcs)
		var ee *sframe.EncodeError
		if !errors.As(err, &ee) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an EncodeError containing %q", c.name, err, c.want)
			continue
		}
		if len(c.funcs) > 0 && ee.Func < 0 {
			t.Errorf("%s: error does not name the function: %v", c.name, err)
		}
		if len(c.funcs) == 1 {
			if cerr := c.opts.Check(&c.funcs[0]); cerr == nil && c.name != "v2 start field overflow" {
				t.Errorf("%s: Check accepts what Encode refuses", c.name)
			}
		}
	}
	// MaxReg itself is a register rules may name.
	s := encMustEncode(t, sframe.EncodeOptions{ABI: sframe.ABIAMD64LE},
		[]sframe.EncFunc{{Start: 1, Size: 4, Type: sframe.FDEFlex, Rows: []sframe.EncRow{{Row: sframe.Row{
			CFA: sframe.Rule{Kind: sframe.RuleValue, Base: sframe.MaxReg, Offset: 8}, RA: encAMD64Row(8).RA}}}}})
	if r, err := s.RowForPC(1); err != nil || r.CFA.Base != sframe.MaxReg || s.Validate() != nil {
		t.Errorf("CFA based on MaxReg: %+v, %v, %v", r, err, s.Validate())
	}
	// v2 errata 2: RA-undefined rows (no data words) are fine in v2.
	s = encMustEncode(t, sframe.EncodeOptions{Version: 2, ABI: sframe.ABIAMD64LE},
		[]sframe.EncFunc{{Start: 1, Size: 8, Rows: []sframe.EncRow{{Row: sframe.Row{RAUndefined: true}}}}})
	if r, err := s.RowForPC(1); err != nil || !r.RAUndefined {
		t.Errorf("v2 RA undefined: %+v, %v", r, err)
	}
}

// TestEncodeAArch64RAWithoutFP: an AArch64 row that saves the RA but
// not the FP (x30 alone, as -fomit-frame-pointer code does) is two data
// words, CFA and RA, as gas writes it; with a fixed FP offset in the
// header, too. The encoder used to refuse the first and pad the second
// to three words, and Validate to reject two.
func TestEncodeAArch64RAWithoutFP(t *testing.T) {
	raOnly := sframe.Row{CFA: sframe.Rule{Kind: sframe.RuleValue, Base: 31, Offset: 16}, RA: encDeref(-8)}
	fixedFP := raOnly
	fixedFP.FP = sframe.Rule{Kind: sframe.RuleDeref, Base: sframe.RegCFA, Offset: -16, Fixed: true}
	for _, c := range []struct {
		name string
		opts sframe.EncodeOptions
		row  sframe.Row
	}{
		{"RA only", sframe.EncodeOptions{ABI: sframe.ABIAArch64LE}, raOnly},
		{"fixed FP", sframe.EncodeOptions{ABI: sframe.ABIAArch64LE, ExplicitFixed: true, CFAFixedFPOffset: -16}, fixedFP},
	} {
		s := encMustEncode(t, c.opts, []sframe.EncFunc{{Start: 0x100, Size: 8, Rows: []sframe.EncRow{{Row: c.row}}}})
		if err := s.Validate(); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		f, _ := s.Func(0)
		it := s.FREs(&f)
		if !it.Next() || it.FRE().Count() != 2 {
			t.Fatalf("%s: want one FRE of 2 words: %v", c.name, it.Err())
		}
		if r, err := s.Rules(&f, it.FRE()); err != nil || r != c.row {
			t.Errorf("%s: rules %+v, %v; want %+v", c.name, r, err, c.row)
		}
	}
}

// TestEncodeByteOrder: the ABI picks the byte order unless overridden.
func TestEncodeByteOrder(t *testing.T) {
	row := sframe.Row{CFA: sframe.Rule{Kind: sframe.RuleValue, Base: 31, Offset: 16}}
	funcs := []sframe.EncFunc{{Start: 0x100, Size: 8, Rows: []sframe.EncRow{{Row: row}}}}
	for _, c := range []struct {
		opts sframe.EncodeOptions
		be   bool
	}{
		{sframe.EncodeOptions{ABI: sframe.ABIAArch64BE}, true},
		{sframe.EncodeOptions{ABI: sframe.ABIAArch64LE}, false},
		{sframe.EncodeOptions{ABI: sframe.ABIAArch64LE, ByteOrder: binary.BigEndian}, true},
		{sframe.EncodeOptions{ABI: sframe.ABIAArch64BE, ByteOrder: binary.LittleEndian}, false},
	} {
		data, err := sframe.Encode(c.opts, funcs)
		if err != nil {
			t.Fatal(err)
		}
		s, err := sframe.Parse(data, 0)
		if err != nil {
			t.Fatal(err)
		}
		if s.BigEndian() != c.be {
			t.Errorf("%s with %v: big-endian %v", c.opts.ABI, c.opts.ByteOrder, s.BigEndian())
		}
		if r, err := s.RowForPC(0x104); err != nil || r != row {
			t.Errorf("%s: row %+v, %v", c.opts.ABI, r, err)
		}
	}
}
