package sframe

import (
	"encoding/binary"
	"errors"
	"testing"
)

// goodSection is a small valid v3 AMD64 section used as the base of the
// malformed-input table.
func goodSection() *testSection {
	return &testSection{version: Version3, flags: FlagFDESorted | FlagFuncStartPCRel, abi: ABIAMD64LE, fixedRA: -8,
		funcs: []testFunc{
			{start: 0x100, size: 0x20, fres: []testFRE{
				{0, freInfo(true, 1, 0, false), []int32{8}},
				{1, freInfo(true, 2, 0, false), []int32{16, -16}},
				{4, freInfo(false, 2, 0, false), []int32{16, -16}},
			}},
			{start: 0x200, size: 0x10, fres: []testFRE{
				{0, freInfo(true, 1, 0, false), []int32{8}},
			}},
		}}
}

func errKind(err error) ErrKind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return 0
}

// check parses and validates b, returning the first error.
func check(b []byte) error {
	s, err := Parse(b, 0)
	if err != nil {
		return err
	}
	return s.Validate()
}

func TestMalformed(t *testing.T) {
	le := binary.LittleEndian
	cases := []struct {
		name   string
		mutate func(ts *testSection)
		patch  func(b []byte) []byte
		kind   ErrKind
		fn     int // function index the error must name, or -1
	}{
		{name: "bad magic", patch: func(b []byte) []byte { b[0] = 0; return b }, kind: ErrBadMagic, fn: -1},
		{name: "version 0", patch: func(b []byte) []byte { b[2] = 0; return b }, kind: ErrBadVersion, fn: -1},
		{name: "version 4", patch: func(b []byte) []byte { b[2] = 4; return b }, kind: ErrBadVersion, fn: -1},
		{name: "unknown flags", mutate: func(ts *testSection) { ts.flags |= 0x40 }, kind: ErrBadFlags, fn: -1},
		{name: "frame-pointer flag in v3", mutate: func(ts *testSection) { ts.flags |= FlagFramePointer }, kind: ErrBadFlags, fn: -1},
		{name: "unknown ABI", patch: func(b []byte) []byte { b[4] = 9; return b }, kind: ErrBadABI, fn: -1},
		{name: "ABI of the other byte order", mutate: func(ts *testSection) { ts.abi = ABIS390XBE }, kind: ErrBadABI, fn: -1},
		{name: "aux header past end", patch: func(b []byte) []byte { b[7] = 255; return b[:40] }, kind: ErrTruncated, fn: -1},
		{name: "FDE offset past end", patch: func(b []byte) []byte { le.PutUint32(b[20:], 1<<31); return b }, kind: ErrBounds, fn: -1},
		{name: "FRE offset past end", patch: func(b []byte) []byte { le.PutUint32(b[24:], 0xffffffff); return b }, kind: ErrBounds, fn: -1},
		{name: "FDE count larger than data", patch: func(b []byte) []byte { le.PutUint32(b[8:], 0x7fffffff); return b }, kind: ErrBounds, fn: -1},
		{name: "FRE count larger than data", patch: func(b []byte) []byte { le.PutUint32(b[12:], 0x7fffffff); return b }, kind: ErrBounds, fn: -1},
		{name: "FRE length past end", patch: func(b []byte) []byte { le.PutUint32(b[16:], 1000); return b }, kind: ErrBounds, fn: -1},
		{name: "FRE count mismatch", mutate: func(ts *testSection) { ts.numFREs = u32p(3) }, kind: ErrCountMismatch, fn: -1},
		{name: "unsorted functions", mutate: func(ts *testSection) { ts.funcs[1].start = 0x80 }, kind: ErrUnsorted, fn: 1},
		{name: "function FRE offset past end", mutate: func(ts *testSection) { ts.funcs[1].freOff = u32p(500) }, kind: ErrBounds, fn: 1},
		{name: "FRE starts not increasing", mutate: func(ts *testSection) { ts.funcs[0].fres[2].start = 1 }, kind: ErrFREOrder, fn: 0},
		{name: "FRE past function end", mutate: func(ts *testSection) { ts.funcs[0].fres[2].start = 0x20 }, kind: ErrFRERange, fn: 0},
		{name: "bad data-word size", mutate: func(ts *testSection) { ts.funcs[1].fres[0].info |= 3 << 5 }, kind: ErrBadWordSize, fn: 1},
		{name: "too many data words", mutate: func(ts *testSection) {
			ts.funcs[0].fres[1] = testFRE{1, freInfo(true, 3, 0, false), []int32{16, -16, 4}}
		}, kind: ErrBadWordCount, fn: 0},
		{name: "bad FRE type", mutate: func(ts *testSection) { ts.funcs[1].info |= 3 }, kind: ErrBadFREType, fn: 1},
		{name: "bad FDE type", mutate: func(ts *testSection) { ts.funcs[1].info2 = 5 }, kind: ErrBadFDEType, fn: 1},
		{name: "FRE count past data", mutate: func(ts *testSection) { ts.funcs[1].numFREs = u32p(9); ts.numFREs = u32p(12) }, kind: ErrTruncated, fn: 1},
		{name: "PC mask with repeat size 0", mutate: func(ts *testSection) { ts.funcs[1].info |= 1 << 4 }, kind: ErrBadRule, fn: 1},
		{name: "flexible CFA not register-based", mutate: func(ts *testSection) {
			ts.funcs[1].info2 = 1
			ts.funcs[1].fres[0] = testFRE{0, freInfo(true, 2, 0, false), []int32{0, 8}}
		}, kind: ErrBadRule, fn: 1},
		{name: "flexible control word with the unused bit", mutate: func(ts *testSection) {
			ts.funcs[1].info2 = 1
			ts.funcs[1].fres[0] = testFRE{0, freInfo(true, 4, 0, false), []int32{flexCtl(7, true, false), 8, 4 | flexDerefP, -8}}
		}, kind: ErrBadRule, fn: 1},
		{name: "flexible register number out of range", mutate: func(ts *testSection) {
			ts.funcs[1].info2 = 1
			ts.funcs[1].fres[0] = testFRE{0, freInfo(true, 2, 2, false), []int32{flexCtl(7, true, false) | 0x7fff0000, 8}}
		}, kind: ErrBadRule, fn: 1},
		{name: "flexible FRE with a lone control word", mutate: func(ts *testSection) {
			ts.funcs[1].info2 = 1
			ts.funcs[1].fres[0] = testFRE{0, freInfo(true, 3, 0, false), []int32{flexCtl(7, true, false), 8, flexCtl(11, true, false)}}
		}, kind: ErrBadWordCount, fn: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ts := goodSection()
			if c.mutate != nil {
				c.mutate(ts)
			}
			b := ts.bytes()
			if c.patch != nil {
				b = c.patch(b)
			}
			err := check(b)
			if err == nil {
				t.Fatalf("no error")
			}
			if k := errKind(err); k != c.kind {
				t.Fatalf("error %v: kind %v, want %v", err, k, c.kind)
			}
			var e *Error
			errors.As(err, &e)
			if e.Func != c.fn {
				t.Errorf("error %v names function %d, want %d", err, e.Func, c.fn)
			}
			// Whatever the damage, lookups and iteration must not panic.
			if s, err := Parse(b, 0); err == nil {
				exercise(s)
			}
		})
	}
	if err := check(goodSection().bytes()); err != nil {
		t.Fatalf("the base section itself is invalid: %v", err)
	}
}

// exercise runs every accessor over s, as a fuzzer would.
func exercise(s *Section) {
	for i := 0; i < s.NumFuncs(); i++ {
		f, err := s.Func(i)
		if err != nil {
			continue
		}
		it := s.FREs(&f)
		for it.Next() {
			s.Rules(&f, it.FRE())
		}
		for _, d := range []uint64{0, 1, uint64(f.Size) / 2, uint64(f.Size)} {
			s.RowForPC(f.Start + d)
		}
	}
	s.RowForPC(0)
	s.RowForPC(^uint64(0))
}

func TestTruncatedEverywhere(t *testing.T) {
	for _, ts := range []*testSection{goodSection(), func() *testSection {
		g := goodSection()
		g.version = Version2
		g.flags = FlagFDESorted
		return g
	}()} {
		b := ts.bytes()
		for n := 0; n < len(b); n++ {
			if err := check(b[:n]); err == nil {
				t.Errorf("%s truncated to %d of %d bytes: no error", ts.version, n, len(b))
			}
		}
	}
}

// sharedFREs is a section whose functions all claim the rows of the
// first: n functions of k rows each in a section that holds k rows. Its
// size grows with n+k, but walking every function's rows costs n*k.
func sharedFREs(n, k int) *testSection {
	fres := make([]testFRE, k)
	for i := range fres {
		fres[i] = testFRE{uint32(i), freInfo(true, 1, 0, false), []int32{8}}
	}
	ts := &testSection{version: Version2, flags: FlagFDESorted, abi: ABIAMD64LE, fixedRA: -8, numFREs: u32p(uint32(k))}
	for i := range n {
		f := testFunc{start: int64(i) * 0x10000, size: 0x10000, info: uint8(FREAddr2), numFREs: u32p(uint32(k)), freOff: u32p(0)}
		if i == 0 {
			f.fres = fres
		}
		ts.funcs = append(ts.funcs, f)
	}
	return ts
}

// TestSharedFREsBounded checks that functions sharing rows cannot make
// Validate or Extract walk (or allocate) more rows than the header's
// count: both report the count mismatch. Validate must not reach the
// rows of the functions past the count, here a row outside function 2.
func TestSharedFREsBounded(t *testing.T) {
	ts := sharedFREs(3, 1000)
	ts.funcs[2].size = 10 // its (shared) rows run past its end
	s, err := Parse(ts.bytes(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(); errKind(err) != ErrCountMismatch {
		t.Errorf("Validate: %v, want a count mismatch", err)
	}
	if _, funcs, err := Extract(s); errKind(err) != ErrCountMismatch || funcs != nil {
		t.Errorf("Extract: %d functions, %v; want a count mismatch", len(funcs), err)
	}
}

// BenchmarkValidateSharedFREs measures Validate on a 0.5 MB section
// whose 5000 functions share 50000 rows: 2.5e8 rows if each function's
// were walked.
func BenchmarkValidateSharedFREs(b *testing.B) {
	s, err := Parse(sharedFREs(5000, 50000).bytes(), 0)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(s.Data())))
	for b.Loop() {
		if err := s.Validate(); errKind(err) != ErrCountMismatch {
			b.Fatal(err)
		}
	}
}

// TestHeaderIsACopy checks that the header a Section hands out is a copy:
// changing its counts must not reach the Section, whose lookups rely on
// the counts Parse checked (an embedded, writable header let a caller set
// NumFDEs past the table and make Func index out of range).
func TestHeaderIsACopy(t *testing.T) {
	s, err := Parse(goodSection().bytes(), 0)
	if err != nil {
		t.Fatal(err)
	}
	h := s.Header()
	want := h
	h.NumFDEs, h.NumFREs, h.FRELen, h.Version = 1<<30, 1<<30, 0, Version1
	if got := s.Header(); got != want {
		t.Fatalf("header after changing a copy: %+v, want %+v", got, want)
	}
	if s.NumFuncs() != 2 {
		t.Fatalf("NumFuncs = %d, want 2", s.NumFuncs())
	}
	for i := 0; i < s.NumFuncs(); i++ {
		if _, err := s.Func(i); err != nil {
			t.Fatalf("Func(%d): %v", i, err)
		}
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	f, _ := s.Func(0)
	if _, err := s.RowForPC(f.Start + 4); err != nil {
		t.Fatal(err)
	}
}
