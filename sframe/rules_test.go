package sframe

import (
	"errors"
	"testing"

	"github.com/sframekit/sframekit/arch"
)

func mustParse(t *testing.T, ts *testSection, addr uint64) *Section {
	t.Helper()
	s, err := Parse(ts.bytes(), addr)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if err := s.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	return s
}

func rowAt(t *testing.T, s *Section, pc uint64) Row {
	t.Helper()
	r, err := s.RowForPC(pc)
	if err != nil {
		t.Fatalf("RowForPC(%#x): %v", pc, err)
	}
	return r
}

func deref(base arch.Reg, off int64) Rule { return Rule{Kind: RuleDeref, Base: base, Offset: off} }
func value(base arch.Reg, off int64) Rule { return Rule{Kind: RuleValue, Base: base, Offset: off} }

var fixedRA = Rule{Kind: RuleDeref, Base: RegCFA, Offset: -8, Fixed: true}

func TestAMD64DefaultRules(t *testing.T) {
	ts := &testSection{version: Version3, flags: FlagFDESorted | FlagFuncStartPCRel, abi: ABIAMD64LE, fixedRA: -8,
		funcs: []testFunc{
			{size: 0x20, fres: []testFRE{
				{0, freInfo(true, 1, 0, false), []int32{8}},
				{1, freInfo(true, 2, 0, false), []int32{16, -16}},
				{4, freInfo(false, 2, 0, false), []int32{16, -16}},
				{0x1f, freInfo(true, 2, 2, false), []int32{100000, -16}},
			}},
		}}
	// The start field is PC-relative: it holds function - field address.
	// The field sits right after the 28-byte header.
	const addr = 0x5000
	ts.funcs[0].start = int64(0x1000 - (addr + HeaderSize))
	s := mustParse(t, ts, addr)
	f, err := s.Func(0)
	if err != nil || f.Start != 0x1000 {
		t.Fatalf("Func(0) = %+v, %v; want start 0x1000", f, err)
	}
	cases := []struct {
		pc   uint64
		want Row
	}{
		{0x1000, Row{CFA: value(7, 8), RA: fixedRA}},
		{0x1001, Row{CFA: value(7, 16), RA: fixedRA, FP: deref(RegCFA, -16)}},
		{0x1003, Row{CFA: value(7, 16), RA: fixedRA, FP: deref(RegCFA, -16)}},
		{0x1004, Row{CFA: value(6, 16), RA: fixedRA, FP: deref(RegCFA, -16)}},
		{0x101f, Row{CFA: value(7, 100000), RA: fixedRA, FP: deref(RegCFA, -16)}},
	}
	for _, c := range cases {
		if got := rowAt(t, s, c.pc); got != c.want {
			t.Errorf("pc %#x: got %+v, want %+v", c.pc, got, c.want)
		}
	}
	for _, pc := range []uint64{0xfff, 0x1020, 0} {
		if _, err := s.RowForPC(pc); !errors.Is(err, ErrNoRow) {
			t.Errorf("pc %#x: err = %v, want ErrNoRow", pc, err)
		}
	}
}

func TestAArch64Rules(t *testing.T) {
	for _, be := range []bool{false, true} {
		abi := ABIAArch64LE
		if be {
			abi = ABIAArch64BE
		}
		ts := &testSection{version: Version2, flags: FlagFDESorted, abi: abi, be: be,
			funcs: []testFunc{{start: 0x400, size: 0x40, info: 1 << 5, fres: []testFRE{
				{0, freInfo(true, 1, 0, false), []int32{0}},
				{4, freInfo(true, 1, 0, true), []int32{0}},
				{8, freInfo(true, 3, 1, true), []int32{32, -24, -32}},
				{0x10, freInfo(false, 3, 1, true), []int32{32, -24, -32}},
			}}}}
		s := mustParse(t, ts, 0x10000)
		f, _ := s.Func(0)
		if !f.PAuthKeyB() || f.Start != 0x10400 {
			t.Fatalf("func = %+v: want B key, start 0x10400 (section-relative)", f)
		}
		if got, want := rowAt(t, s, 0x10400), (Row{CFA: value(31, 0)}); got != want {
			t.Errorf("entry: got %+v want %+v", got, want)
		}
		if got, want := rowAt(t, s, 0x10405), (Row{CFA: value(31, 0), RASigned: true}); got != want {
			t.Errorf("after paciasp: got %+v want %+v", got, want)
		}
		want := Row{CFA: value(29, 32), RA: deref(RegCFA, -24), FP: deref(RegCFA, -32), RASigned: true}
		if got := rowAt(t, s, 0x1043f); got != want {
			t.Errorf("body (be=%v): got %+v want %+v", be, got, want)
		}
	}
}

func TestS390XRules(t *testing.T) {
	// v3 default: CFA scaled, RA padding then FP, and both saved.
	ts := &testSection{version: Version3, flags: FlagFDESorted, abi: ABIS390XBE, be: true,
		funcs: []testFunc{{start: 0x100, size: 0x40, fres: []testFRE{
			{0, freInfo(true, 1, 0, false), []int32{0}},
			{6, freInfo(true, 3, 0, false), []int32{20, 0, -72}},
			{0xa, freInfo(true, 3, 0, false), []int32{20, -48, -72}},
		}}}}
	s := mustParse(t, ts, 0)
	if got, want := rowAt(t, s, 0x100), (Row{CFA: value(15, 160)}); got != want {
		t.Errorf("entry: got %+v want %+v", got, want)
	}
	if got, want := rowAt(t, s, 0x106), (Row{CFA: value(15, 320), RA: Rule{Kind: RuleNotSaved, Base: RegCFA}, FP: deref(RegCFA, -72)}); got != want {
		t.Errorf("FP only: got %+v want %+v", got, want)
	}
	if got, want := rowAt(t, s, 0x10a), (Row{CFA: value(15, 320), RA: deref(RegCFA, -48), FP: deref(RegCFA, -72)}); got != want {
		t.Errorf("both: got %+v want %+v", got, want)
	}
	// v2: an odd RA/FP word is a register number shifted left by one.
	ts2 := &testSection{version: Version2, abi: ABIS390XBE, be: true,
		funcs: []testFunc{{start: 0, size: 8, fres: []testFRE{
			{0, freInfo(true, 3, 0, false), []int32{0, 16<<1 | 1, 17<<1 | 1}},
		}}}}
	s2 := mustParse(t, ts2, 0x1000)
	if got, want := rowAt(t, s2, 0x1000), (Row{CFA: value(15, 160), RA: value(16, 0), FP: value(17, 0)}); got != want {
		t.Errorf("v2 registers: got %+v want %+v", got, want)
	}
}

func TestFlexRules(t *testing.T) {
	// The DRAP shape gas writes on AMD64: CFA = r10, then *(rbp-8),
	// FP = *(rbp+0) with RA padding; and RA held in r11.
	const flex = 1
	ts := &testSection{version: Version3, abi: ABIAMD64LE, fixedRA: -8,
		funcs: []testFunc{
			{start: 0x0, size: 0x40, info2: flex, fres: []testFRE{
				{0, freInfo(true, 2, 0, false), []int32{flexCtl(7, true, false), 8}},
				{5, freInfo(true, 2, 0, false), []int32{flexCtl(10, true, false), 0}},
				{0x11, freInfo(true, 5, 0, false), []int32{flexCtl(10, true, false), 0, 0, flexCtl(6, true, true), 0}},
				{0x13, freInfo(true, 5, 0, false), []int32{flexCtl(6, true, true), -8, 0, flexCtl(6, true, true), 0}},
			}},
			{start: 0x40, size: 8, info2: flex, fres: []testFRE{
				{2, freInfo(true, 4, 0, false), []int32{flexCtl(7, true, false), 0, flexCtl(11, true, false), 0}},
				{4, freInfo(true, 6, 0, false), []int32{flexCtl(7, true, false), 16, flexCtl(0, false, true), -8, flexCtl(0, false, true), -16}},
			}},
		}}
	s := mustParse(t, ts, 0)
	// With the header's fixed RA offset, an RA padding word means "at the
	// fixed offset".
	notSaved := Rule{Kind: RuleDeref, Base: RegCFA, Offset: -8, Fixed: true, Padding: true}
	cases := []struct {
		pc   uint64
		want Row
	}{
		{0x00, Row{CFA: value(7, 8), RA: fixedRA}},
		{0x05, Row{CFA: value(10, 0), RA: fixedRA}},
		{0x11, Row{CFA: value(10, 0), RA: notSaved, FP: deref(6, 0)}},
		{0x13, Row{CFA: deref(6, -8), RA: notSaved, FP: deref(6, 0)}},
		{0x42, Row{CFA: value(7, 0), RA: value(11, 0)}},
		{0x44, Row{CFA: value(7, 16), RA: deref(RegCFA, -8), FP: deref(RegCFA, -16)}},
	}
	for _, c := range cases {
		if got := rowAt(t, s, c.pc); got != c.want {
			t.Errorf("pc %#x: got %+v, want %+v", c.pc, got, c.want)
		}
	}
	// Function 1 has no row for its first two bytes.
	if _, err := s.RowForPC(0x41); !errors.Is(err, ErrNoRow) {
		t.Errorf("pc 0x41: err = %v, want ErrNoRow", err)
	}
}

func TestRAUndefinedAndSignal(t *testing.T) {
	ts := &testSection{version: Version3, abi: ABIAMD64LE, fixedRA: -8,
		funcs: []testFunc{{start: 0, size: 16, info: 0x80, fres: []testFRE{
			{0, freInfo(true, 0, 0, false), nil},
		}}}}
	s := mustParse(t, ts, 0)
	if got := rowAt(t, s, 5); !got.RAUndefined {
		t.Errorf("got %+v, want RA undefined", got)
	}
	f, _ := s.Func(0)
	if !f.Signal() {
		t.Errorf("signal bit not reported")
	}
	// Version 1 has no "RA undefined": a word-less FRE is an error.
	ts.version = Version1
	ts.funcs[0].info = 0
	s1, err := Parse(ts.bytes(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s1.RowForPC(0); err == nil {
		t.Errorf("v1 FRE without words: no error")
	}
}

func TestPCMaskLookup(t *testing.T) {
	// A PLT: 16-byte entries; each pushes once at offset 11.
	ts := &testSection{version: Version2, flags: FlagFDESorted, abi: ABIAMD64LE, fixedRA: -8,
		funcs: []testFunc{{start: 0x1030, size: 0x40, info: 1 << 4, rep: 16, fres: []testFRE{
			{0, freInfo(true, 1, 0, false), []int32{8}},
			{11, freInfo(true, 1, 0, false), []int32{16}},
		}}}}
	s := mustParse(t, ts, 0)
	for _, c := range []struct {
		pc  uint64
		cfa int64
	}{{0x1030, 8}, {0x103a, 8}, {0x103b, 16}, {0x1040, 8}, {0x105b, 16}, {0x106f, 16}} {
		if got := rowAt(t, s, c.pc); got.CFA != value(7, c.cfa) {
			t.Errorf("pc %#x: CFA %+v, want sp+%d", c.pc, got.CFA, c.cfa)
		}
	}
	if _, err := s.RowForPC(0x1070); !errors.Is(err, ErrNoRow) {
		t.Errorf("past the PLT: err = %v", err)
	}
}

func TestUnsortedLinearLookupAndAux(t *testing.T) {
	row := []testFRE{{0, freInfo(true, 1, 0, false), []int32{8}}}
	ts := &testSection{version: Version2, abi: ABIAMD64LE, fixedRA: -8, aux: []byte{1, 2, 3}, fdeOffAd: 4,
		funcs: []testFunc{
			{start: 0x300, size: 0x10, fres: row},
			{start: 0x100, size: 0x10, fres: []testFRE{{0, freInfo(true, 1, 0, false), []int32{24}}}},
		}}
	s := mustParse(t, ts, 0)
	f0, err := s.Func(0)
	if err != nil {
		t.Fatal(err)
	}
	if s.HeaderLen() != HeaderSize+3 || f0.StartFieldOff != HeaderSize+3+4 {
		t.Fatalf("header len %d, table at %d", s.HeaderLen(), f0.StartFieldOff)
	}
	if got := rowAt(t, s, 0x105); got.CFA != value(7, 24) {
		t.Errorf("unsorted lookup: %+v", got)
	}
	if i := s.FindFunc(0x305); i != 0 {
		t.Errorf("FindFunc(0x305) = %d", i)
	}
	if i := s.FindFunc(0x200); i != -1 {
		t.Errorf("FindFunc(0x200) = %d", i)
	}
	// The same section claiming to be sorted fails validation.
	ts.flags = FlagFDESorted
	s2, _ := Parse(ts.bytes(), 0)
	var e *Error
	if err := s2.Validate(); !errors.As(err, &e) || e.Kind != ErrUnsorted || e.Func != 1 {
		t.Errorf("Validate = %v, want ErrUnsorted at function 1", err)
	}
}

func TestLookupDoesNotAllocate(t *testing.T) {
	ts := &testSection{version: Version3, flags: FlagFDESorted, abi: ABIAMD64LE, fixedRA: -8,
		funcs: []testFunc{{start: 0, size: 0x20, fres: []testFRE{
			{0, freInfo(true, 1, 0, false), []int32{8}},
			{1, freInfo(true, 2, 0, false), []int32{16, -16}},
		}}}}
	s := mustParse(t, ts, 0)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := s.RowForPC(0x10); err != nil {
			t.Fatal(err)
		}
		if _, err := s.RowForPC(0x100); err != ErrNoRow {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("lookup allocates %v times", allocs)
	}
}

// TestFuncAccessorsByVersion checks that a Func reads its info bytes as
// its own section's version defines them: the top info bit is the signal
// flag in v3 only (objdump's "S" in v2 too, through SignalBit), and only
// v3 has FDE types. The same function is decoded from the table (Func)
// and from the lookup index (FindFRE), which must agree.
func TestFuncAccessorsByVersion(t *testing.T) {
	for _, c := range []struct {
		v                 Version
		signal, signalBit bool
		fdeType           FDEType
		flags             Flags
	}{
		{Version1, false, false, FDEDefault, FlagFDESorted},
		{Version2, false, true, FDEDefault, FlagFDESorted},
		{Version3, true, true, FDEFlex, FlagFDESorted},
	} {
		// A flexible v3 row needs a CFA pair (a control word naming SP);
		// the default rows of v1 and v2 a CFA word.
		row := testFRE{0, freInfo(true, 1, 0, false), []int32{8}}
		if c.v == Version3 {
			row = testFRE{0, freInfo(true, 2, 0, false), []int32{flexCtl(ABIAMD64LE.Arch().SP(), true, false), 8}}
		}
		ts := &testSection{version: c.v, flags: c.flags, abi: ABIAMD64LE, fixedRA: -8,
			funcs: []testFunc{{start: 0x100, size: 16, info: 0x80, info2: 1, fres: []testFRE{row}}}}
		s := mustParse(t, ts, 0)
		byIndex, _, err := s.FindFRE(0x104)
		if err != nil {
			t.Fatalf("%s: FindFRE: %v", c.v, err)
		}
		byTable, err := s.Func(0)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []Func{byTable, byIndex} {
			if f.Version() != c.v || f.Signal() != c.signal || f.SignalBit() != c.signalBit || f.FDEType() != c.fdeType {
				t.Errorf("%s: Version %s, Signal %v, SignalBit %v, FDEType %s; want %v, %v, %s",
					c.v, f.Version(), f.Signal(), f.SignalBit(), f.FDEType(), c.signal, c.signalBit, c.fdeType)
			}
		}
		if r := rowAt(t, s, 0x104); r.CFA != value(ABIAMD64LE.Arch().SP(), 8) {
			t.Errorf("%s: CFA %+v, want sp+8", c.v, r.CFA)
		}
	}
}
