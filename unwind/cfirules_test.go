//go:build linux && amd64

package unwind

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/cfi"
	"github.com/sframekit/sframekit/internal/cfibuild"
)

// countedCFI counts the lookups of a real CFI table.
type countedCFI struct {
	CFI
	n *int
}

func (c countedCFI) Lookup(ctx *cfi.UnwindContext, pc uint64, row *cfi.Row) (*cfi.CIE, bool, error) {
	*c.n++
	return c.CFI.Lookup(ctx, pc, row)
}

// TestCFIRowsCached walks the captured thread (a recursion a thousand
// frames deep) with its files' CFI alone, twice with one Context: the
// first walk must look up the CFI once per distinct address, the
// recursion's repeated return addresses taking the row it left in the
// Context (cfiRules), and the second must give the same frames without
// looking the CFI up again, but for signal frames (the top frame's row
// is cached too, and the outermost one's, RA undefined: fastEnd). A
// third walk with the fast path off must give the same frames, looking
// everything up.
func TestCFIRowsCached(t *testing.T) {
	s := takeSnapshot(t)
	n := 0
	var mods []*Module
	for _, m := range s.cfi {
		c := *m
		if c.CFI != nil {
			c.CFI = countedCFI{m.CFI, &n}
		}
		mods = append(mods, &c)
	}
	u := s.unwinder(t, mods)
	ctx := new(Context)
	first, stop, err := u.Unwind(ctx, &s.regs, s.stack, nil)
	if stop != StopEnd {
		t.Fatalf("first walk: %v %v", stop, err)
	}
	n1 := n
	n = 0
	second, stop, err := u.Unwind(ctx, &s.regs, s.stack, nil)
	if stop != StopEnd || !slices.Equal(first, second) {
		t.Fatalf("second walk: %d frames, %v %v; the first gave %d", len(second), stop, err, len(first))
	}
	uncached := 0
	distinct := map[uint64]bool{}
	for _, f := range first {
		if f.Signal {
			uncached++
		}
		distinct[f.PC] = true
	}
	t.Logf("%d frames at %d addresses: %d CFI lookups in the first walk, %d in the second", len(first), len(distinct), n1, n)
	if n1 > len(distinct)+uncached || n > uncached {
		t.Errorf("%d frames at %d addresses: %d CFI lookups in the first walk, %d in the second; want at most one per address, then %d", len(first), len(distinct), n1, n, uncached)
	}
	general, stop, err := u.Unwind(&Context{noFast: true}, &s.regs, s.stack, nil)
	if stop != StopEnd || !slices.Equal(first, general) {
		t.Fatalf("general path: %d frames, %v %v; the fast path gave %d", len(general), stop, err, len(first))
	}
}

// TestCFIRowsCachedRAColumn walks a stack through CFI whose CIE names r15
// as the return-address column, with a decoy rule for column 16 (x86-64's
// usual one): the walk taking cached rows must find the callers the
// general path finds, from r15's slot.
func TestCFIRowsCachedRAColumn(t *testing.T) {
	s := cfibuild.Section{Order: binary.LittleEndian}
	// CFA = rsp + 8 at function entry.
	cie := s.CIE(1, "", nil, 1, -8, 15, []byte{0x0c, 7, 8})
	// h: r15 (the RA) at CFA-8.
	s.AbsFDE(cie, 0x3000, 0x100, false, []byte{0x8f, 1})
	// f: CFA = rsp + 24, r15 at CFA-8, column 16 at CFA-16.
	s.AbsFDE(cie, 0x1000, 0x100, false, []byte{0x0e, 24, 0x8f, 1, 0x90, 2})
	// g: the outermost frame (r15 undefined).
	s.AbsFDE(cie, 0x2000, 0x100, false, []byte{0x07, 15})
	tab, err := cfi.New(s.B, cfi.Options{Addr: 0x5000, ByteOrder: binary.LittleEndian, AddrSize: 8, Arch: arch.AMD64})
	if err != nil {
		t.Fatal(err)
	}
	u, err := New(arch.AMD64, []*Module{{Name: "synth", Start: 0x1000, End: 0x4000, CFI: &CFITable{T: tab}}})
	if err != nil {
		t.Fatal(err)
	}
	stack := make([]byte, 64)
	binary.LittleEndian.PutUint64(stack[0:], 0x1050)  // h's RA: into f
	binary.LittleEndian.PutUint64(stack[16:], 0x9999) // f's column 16: no code
	binary.LittleEndian.PutUint64(stack[24:], 0x2050) // f's RA (r15): into g
	regs := arch.Regs{Arch: arch.AMD64}
	regs.Set(arch.AMD64RSP, 0x7000)
	regs.Set(arch.AMD64RIP, 0x3010)
	fs, stop, err := unwindBothWays(t, u, &regs, &FlatMemory{Addr: 0x7000, Data: stack})
	if stop != StopEnd || len(fs) != 3 || fs[1].PC != 0x1050 || fs[2].PC != 0x2050 {
		t.Fatalf("%d frames, %v %v; want h, f at 0x1050, g at 0x2050 and the end", len(fs), stop, err)
	}
}

// TestCFIRowsByRange walks synthetic stacks three times with one
// Context: a row the CFI gave once serves, without a CFI lookup, a top
// frame at another address it covers and a caller's return address it
// covers; every walk gives the general path's frames.
func TestCFIRowsByRange(t *testing.T) {
	s := cfibuild.Section{Order: binary.LittleEndian}
	// CFA = rsp + 8, RA (column 16) at CFA-8, at function entry.
	cie := s.CIE(1, "", nil, 1, -8, 16, []byte{0x0c, 7, 8, 0x90, 1})
	// f: CFA = rsp + 24 from 0x1004 to its end.
	s.AbsFDE(cie, 0x1000, 0x100, false, []byte{0x44, 0x0e, 24})
	// g: the outermost frame (RA undefined).
	s.AbsFDE(cie, 0x2000, 0x100, false, []byte{0x07, 16})
	// h: a leaf.
	s.AbsFDE(cie, 0x3000, 0x100, false, nil)
	tab, err := cfi.New(s.B, cfi.Options{Addr: 0x5000, ByteOrder: binary.LittleEndian, AddrSize: 8, Arch: arch.AMD64})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	u, err := New(arch.AMD64, []*Module{{Name: "synth", Start: 0x1000, End: 0x4000, CFI: countedCFI{&CFITable{T: tab}, &n}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := new(Context)
	walk := func(pc uint64, words ...uint64) (int, []Frame) {
		t.Helper()
		stack := make([]byte, 64)
		for i, w := range words {
			binary.LittleEndian.PutUint64(stack[8*i:], w)
		}
		regs := arch.Regs{Arch: arch.AMD64}
		regs.Set(arch.AMD64RSP, 0x7000)
		regs.Set(arch.AMD64RIP, pc)
		mem := &FlatMemory{Addr: 0x7000, Data: stack}
		n = 0
		fs, stop, err := u.Unwind(ctx, &regs, mem, nil)
		lookups := n
		general, gstop, gerr := u.Unwind(&Context{noFast: true}, &regs, mem, nil)
		if stop != StopEnd || gstop != StopEnd || !slices.Equal(fs, general) {
			t.Fatalf("walk from %#x: %+v %v %v; the general path: %+v %v %v", pc, fs, stop, err, general, gstop, gerr)
		}
		return lookups, fs
	}
	// f's frame (CFA 0x7018, RA at 0x7010) into g.
	if n, fs := walk(0x1010, 0, 0, 0x2050); n != 2 || len(fs) != 2 {
		t.Errorf("first walk: %d frames, %d CFI lookups; want 2 and 2 (f, g)", len(fs), n)
	}
	// g's row, the outermost (RA undefined), is cached too.
	if n, fs := walk(0x1030, 0, 0, 0x2050); n != 0 || len(fs) != 2 {
		t.Errorf("top frame at another address of f's row: %d frames, %d CFI lookups; want 2 and 0", len(fs), n)
	}
	// h's frame (RA at 0x7000) into f at 0x1060, then g.
	if n, fs := walk(0x3010, 0x1060, 0, 0, 0x2050); n != 1 || len(fs) != 3 {
		t.Errorf("return address at another address of f's row: %d frames, %d CFI lookups; want 3 and 1 (h)", len(fs), n)
	}
	// A top frame in g itself takes the general step each time (its row
	// ends the walk at once): the cache keeps what it kept the first
	// time, and does not grow.
	walk(0x2010)
	kept := ctx.cfiRules.n
	for range 100 {
		walk(0x2010)
	}
	if ctx.cfiRules.n != kept {
		t.Errorf("100 walks from a top frame in g: %d cached entries, %d after the first", ctx.cfiRules.n, kept)
	}
}

// TestRuleTable puts 50,000 addresses (clustered, as return addresses
// are, and spread, and the ends of the address space) into a ruleTable,
// some twice, and checks every lookup against a Go map's, for addresses
// put and not.
func TestRuleTable(t *testing.T) {
	var tab ruleTable
	want := map[uint64]fastRule{}
	rng := rand.New(rand.NewPCG(1, 2))
	var keys []uint64
	for i := range 50000 {
		var pc uint64
		switch i % 3 {
		case 0:
			pc = 0x65a090 + uint64(rng.IntN(1<<20))
		case 1:
			pc = rng.Uint64()
		default:
			pc = uint64(i)
		}
		keys = append(keys, pc)
	}
	keys = append(keys, 0, math.MaxUint64, math.MaxUint64-1)
	for i, pc := range keys {
		r := fastRule{cfaOff: int32(i), raOff: -8, fpOff: int32(-i), flags: fastOK}
		_, had := want[pc]
		if pc != math.MaxUint64 {
			want[pc] = r
		}
		if isNew := tab.put(pc, r); isNew != (!had && pc != math.MaxUint64) {
			t.Fatalf("put %#x: new %v, the map had it: %v", pc, isNew, had)
		}
	}
	if tab.n != len(want) {
		t.Errorf("%d entries, want %d", tab.n, len(want))
	}
	for _, pc := range append(keys, 1<<40, 0x65a08f, math.MaxUint64) {
		for _, q := range []uint64{pc, pc + 1, pc - 1} {
			got, ok := tab.get(q)
			w, wok := want[q]
			if ok != wok || got != w {
				t.Fatalf("get %#x: %+v %v, want %+v %v", q, got, ok, w, wok)
			}
		}
	}
	var empty *ruleTable
	if _, ok := empty.get(5); ok {
		t.Error("a nil table has a rule")
	}
}

// BenchmarkRuleTable looks up 16,000 return addresses of a file in the
// order of a recording's frames (each address many times, spread over
// 400,000 lookups), as the fast path does for a file without SFrame; and
// the same in a Go map, which the table replaced.
//
//	go test ./unwind -run '^$' -bench RuleTable
func BenchmarkRuleTable(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	pcs := make([]uint64, 16000)
	var tab ruleTable
	for i := range pcs {
		pcs[i] = 0x65a090 + uint64(rng.IntN(0x1530b4c))
		tab.put(pcs[i], fastRule{cfaOff: 16, raOff: -8, flags: fastOK})
	}
	order := make([]uint64, 400000)
	for i := range order {
		order[i] = pcs[rng.IntN(len(pcs))]
	}
	m := map[uint64]fastRule{}
	for _, pc := range pcs {
		m[pc], _ = tab.get(pc)
	}
	for _, kind := range []string{"ruleTable", "gomap"} {
		b.Run(kind, func(b *testing.B) {
			n := 0
			for b.Loop() {
				for _, pc := range order {
					var ok bool
					if kind == "gomap" {
						_, ok = m[pc]
					} else {
						_, ok = tab.get(pc)
					}
					if ok {
						n++
					}
				}
			}
			if n != b.N*len(order) {
				b.Fatalf("%d found, want %d", n, b.N*len(order))
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(order)), "ns/lookup")
		})
	}
}
