package unwind

import (
	"debug/elf"
	"math/rand"
	"testing"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/internal/corpus"
)

// unwindBothWays unwinds regs over mem with u as it is (twice with one
// Context: the second walk takes the CFI rows the first cached) and with
// the fast path off, fails t if the walks differ in any frame, in how
// they stop, or in whether they fail, and returns the first walk.
func unwindBothWays(t testing.TB, u *Unwinder, regs *arch.Regs, mem arch.Memory) ([]Frame, Stop, error) {
	t.Helper()
	ctx := new(Context)
	fs, stop, err := u.Unwind(ctx, regs, mem, nil)
	gs, gstop, gerr := u.Unwind(&Context{noFast: true}, regs, mem, nil)
	cs, cstop, cerr := u.Unwind(ctx, regs, mem, nil)
	for _, w := range []struct {
		name string
		fs   []Frame
		stop Stop
		err  error
	}{{"fast path", fs, stop, err}, {"fast path, rows cached", cs, cstop, cerr}} {
		if w.stop != gstop || (w.err == nil) != (gerr == nil) || len(w.fs) != len(gs) {
			t.Fatalf("%s: %d frames, %v %v; general path: %d frames, %v %v", w.name, len(w.fs), w.stop, w.err, len(gs), gstop, gerr)
		}
		for i := range w.fs {
			if w.fs[i] != gs[i] {
				t.Fatalf("frame %d: %s %+v, general path %+v", i, w.name, w.fs[i], gs[i])
			}
		}
	}
	return fs, stop, err
}

// TestFlatTableMatchesIndex checks, on every corpus file, that the fast
// path's flat table gives, for every address around every function and row
// boundary (and random ones), the same rule as the two-level index the
// general path uses: the row's fast rule, or none (flags 0) outside
// functions, before a function's first row, and in PC-mask functions. Every
// executable and library must get a flat table.
func TestFlatTableMatchesIndex(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	files, flat, probes := 0, 0, 0
	for _, path := range corpus.ELFs(t) {
		f, err := elf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		tabs := LoadTables(f)
		rel := f.Type == elf.ET_REL
		f.Close()
		x := tabs.sfx
		if x == nil {
			continue
		}
		files++
		if len(x.flatKeys) == 0 {
			// Unrelocated objects put every function at 0 (or at
			// negative addresses): they overlap. Loaded files must not.
			if !rel {
				t.Errorf("%s: no flat table", path)
			}
			continue
		}
		flat++
		// A bias, so that runtime and ELF addresses differ.
		const bias = 0x7f0000000000
		in := newModInfo(&Module{Start: bias, End: bias + 1<<40, Bias: bias}, x.sec.Header().ABI.Arch(), x)
		check := func(a uint64) {
			probes++
			var want fastRule
			if fn, k := x.findRow(a); fn != nil && k >= 0 && fn.repSize == 0 {
				want = x.fast[k]
			}
			var got fastRule
			if r := in.rule(a + 1 + bias); r != nil {
				got = *r
			}
			if got != want {
				t.Fatalf("%s: at %#x: flat table %+v, index %+v", path, a, got, want)
			}
		}
		for i, start := range x.starts {
			fn := &x.funcs[i]
			check(start - 1)
			check(start)
			for _, off := range x.rowStart[fn.first : fn.first+fn.n] {
				a := start + uint64(off)
				check(a - 1)
				check(a)
				check(a + 1)
			}
			check(fn.end - 1)
			check(fn.end)
			if fn.end > start {
				check(start + uint64(rng.Int63n(int64(fn.end-start))))
			}
		}
	}
	t.Logf("%d files with SFrame, %d with a flat table, %d addresses", files, flat, probes)
	if flat == 0 {
		t.Error("no file has a flat table")
	}
}
