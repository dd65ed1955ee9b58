package perfunwind

import (
	"bytes"
	"testing"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/cfi"
	"github.com/sframekit/sframekit/jitmap"
)

// TestPyTrampRow checks where CPython's trampoline rule applies: in a
// recording, only at the return address of a py:: function of the
// trampoline's size (hostile entries included); live, only where the
// code is the trampoline's, byte for byte (a file stands for the
// process's memory), across a page boundary too.
func TestPyTrampRow(t *testing.T) {
	var ctx cfi.UnwindContext
	var row cfi.Row
	rec := &jitSyms{arch: arch.AMD64, loaded: true, tables: []*jitmap.Table{jitmap.ParsePerfMap([]byte(
		"1000 b py::f:a.py\n2000 c py::g:a.py\n3000 b JS:h\n4000 f py::e:a.py\nfffffffffffffff8 b py::w:a.py\n"))}}
	for _, c := range []struct {
		pc      uint64
		ok      bool
		cfa     int64
		lo, end uint64
	}{
		{0x1005, true, 16, 0x1005, 0x1007}, // a caller's lookup
		{0x1006, true, 16, 0x1005, 0x1007},
		{0x1000, false, 0, 0, 0}, {0x1004, false, 0, 0, 0}, {0x100a, false, 0, 0, 0},
		{0x2005, false, 0, 0, 0},           // not the trampoline's size
		{0x3005, false, 0, 0, 0},           // not Python's
		{0x4009, true, 16, 0x4009, 0x400b}, // with endbr64
		{0xfffffffffffffffd, false, 0, 0, 0},
	} {
		_, ok := rec.pyTrampRow(&ctx, c.pc, &row)
		if ok != c.ok || ok && (row.CFA.Reg != arch.AMD64RSP || row.CFA.Offset != c.cfa || row.Start != c.lo || row.End != c.end) {
			t.Errorf("recording, pc %#x: %v, CFA %v, [%#x, %#x)", c.pc, ok, row.CFA, row.Start, row.End)
		}
	}

	mem := make([]byte, 0x3000)
	for i := range mem {
		mem[i] = 0xcc
	}
	plain, endbr := pyTrampolines[0].code, pyTrampolines[1].code
	copy(mem[0x100:], plain)
	copy(mem[0x1000-3:], plain) // across pages
	copy(mem[0x2000:], endbr)
	copy(mem[0x2100:], plain[:10]) // no ret
	copy(mem[0x2200:], plain)
	mem[0x2200+5] = 0xd7 // call *%rdi: not the same bytes
	live := &jitSyms{arch: arch.AMD64, mem: bytes.NewReader(mem).ReadAt}
	for _, c := range []struct {
		pc      uint64
		ok      bool
		cfa     int64
		lo, end uint64
	}{
		{pc: 0x105, ok: true, cfa: 16, lo: 0x104, end: 0x10a},
		{pc: 0x100, ok: true, cfa: 8, lo: 0x100, end: 0x104},
		{pc: 0x10a, ok: true, cfa: 8, lo: 0x10a, end: 0x10b},
		{pc: 0x1000 - 3 + 5, ok: true, cfa: 16, lo: 0x1000 - 3 + 4, end: 0x1000 - 3 + 10},
		{pc: 0x2009, ok: true, cfa: 16, lo: 0x2008, end: 0x200e},
		{pc: 0x2000, ok: true, cfa: 8, lo: 0x2000, end: 0x2008},
		{pc: 0x103}, // inside an instruction
		{pc: 0x2105}, {pc: 0x2205}, {pc: 0x50},
		{pc: 0x2ffe}, {pc: 0x5000}, // the end of the memory, none
	} {
		_, ok := live.pyTrampRow(&ctx, c.pc, &row)
		if ok != c.ok || ok && (row.CFA.Reg != arch.AMD64RSP || row.CFA.Offset != c.cfa || row.Start != c.lo || row.End != c.end) {
			t.Errorf("live, pc %#x: %v, CFA %v, [%#x, %#x)", c.pc, ok, row.CFA, row.Start, row.End)
		}
		if ok {
			if r := row.Rule(arch.AMD64RIP); r.Kind != cfi.RuleOffset || r.Offset != -8 {
				t.Errorf("live, pc %#x: RA %v", c.pc, r)
			}
		}
	}
}
