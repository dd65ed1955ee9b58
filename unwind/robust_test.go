package unwind

import (
	"debug/elf"
	"encoding/binary"
	"math/rand"
	"path/filepath"
	"testing"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/internal/corpus"
)

// loadCorpusTables loads both tables of a corpus file as a module.
func loadCorpusTables(t testing.TB, rel string, bias uint64) *Module {
	t.Helper()
	f, err := elf.Open(filepath.Join(corpus.Dir(t), rel))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tabs := LoadTables(f)
	m := &Module{Name: rel, Start: bias, End: bias + 1<<20, Bias: bias, SFrame: tabs.SFrame, sfx: tabs.sfx}
	if tabs.CFI != nil {
		m.CFI = &CFITable{T: tabs.CFI}
	}
	return m
}

type archCase struct {
	arch arch.Arch
	mods []string
}

var robustCases = []archCase{
	{arch.AMD64, []string{"x86_64/v3/basic-O2.elf", "x86_64/v3/edge-x86_64.o", "x86_64/v1/basic-O2.elf"}},
	{arch.ARM64, []string{"aarch64/v3/basic-pacb.elf", "aarch64/v3/edge-aarch64.o", "aarch64/v2/drap-O2.elf"}},
	{arch.S390X, []string{"s390x/v3/basic-O2.elf", "s390x/v3/edge-s390x.o", "s390x/v3/fp-O2.elf"}},
}

// randomStack fills a stack image with words that are mostly plausible:
// addresses inside the modules, inside the stack, small numbers, noise.
func randomStack(r *rand.Rand, lo uint64, n int, mods []*Module, order binary.ByteOrder) []byte {
	b := make([]byte, n)
	for off := 0; off+8 <= n; off += 8 {
		var v uint64
		switch r.Intn(5) {
		case 0:
			m := mods[r.Intn(len(mods))]
			v = m.Start + uint64(r.Intn(0x4000))
		case 1:
			v = lo + uint64(r.Intn(n+256)) - 128
		case 2:
			v = uint64(r.Intn(64))
		default:
			v = r.Uint64()
		}
		order.PutUint64(b[off:], v)
	}
	return b
}

// TestRandomStacks unwinds random stack images through corpus tables of
// every architecture: no input may panic, loop or exceed the depth limit.
func TestRandomStacks(t *testing.T) {
	iters := 3000
	if testing.Short() {
		iters = 300
	}
	r := rand.New(rand.NewSource(1))
	for _, c := range robustCases {
		var mods []*Module
		for i, name := range c.mods {
			mods = append(mods, loadCorpusTables(t, name, uint64(i+1)<<32))
		}
		var order binary.ByteOrder = binary.LittleEndian
		if c.arch == arch.S390X {
			order = binary.BigEndian
		}
		const lo = 0x7ff000000000
		stops := map[Stop]int{}
		for it := 0; it < iters; it++ {
			mem := &FlatMemory{Addr: lo, Data: randomStack(r, lo, 4096, mods, order)}
			var pm arch.Memory = mem
			if it%2 == 1 {
				pm = NewPageCache(mem) // the interface path
			}
			u, err := New(c.arch, mods)
			if err != nil {
				t.Fatal(err)
			}
			u.MaxDepth = 64
			regs := arch.Regs{Arch: c.arch}
			for n := arch.Reg(0); int(n) < arch.NumDWARFRegs(c.arch); n++ {
				if r.Intn(4) != 0 {
					regs.Set(n, lo+uint64(r.Intn(4096)))
				}
			}
			m := mods[r.Intn(len(mods))]
			regs.Set(c.arch.PC(), m.Start+uint64(r.Intn(0x3000)))
			frames, stop, _ := unwindBothWays(t, u, &regs, pm)
			if len(frames) > 64 {
				t.Fatalf("%s: %d frames past the limit", c.arch, len(frames))
			}
			if len(frames) == 0 {
				t.Fatalf("%s: no frame 0", c.arch)
			}
			stops[stop]++
		}
		t.Logf("%s: stops %v", c.arch, stops)
	}
}

// FuzzUnwind feeds arbitrary stack bytes and registers to the x86-64 and
// s390x unwinders over corpus tables, with and without the fast path,
// which must agree.
func FuzzUnwind(f *testing.F) {
	f.Add([]byte("\x10\x20\x00\x00\x01\x00\x00\x00"), uint64(0x1000), uint64(0x7ff000000000), uint64(0), false)
	f.Add(make([]byte, 64), uint64(0x1234), uint64(0x7ff000000008), uint64(0x7ff000000010), true)
	var x86, s390 []*Module
	for i, name := range robustCases[0].mods {
		x86 = append(x86, loadCorpusTables(f, name, uint64(i+1)<<32))
	}
	for i, name := range robustCases[2].mods {
		s390 = append(s390, loadCorpusTables(f, name, uint64(i+1)<<32))
	}
	f.Fuzz(func(t *testing.T, stack []byte, pcOff, sp, fp uint64, be bool) {
		a, mods := arch.AMD64, x86
		if be {
			a, mods = arch.S390X, s390
		}
		u, err := New(a, mods)
		if err != nil {
			t.Fatal(err)
		}
		u.MaxDepth = 32
		regs := arch.Regs{Arch: a}
		regs.Set(a.PC(), mods[0].Start+pcOff%0x4000)
		regs.Set(a.SP(), sp)
		regs.Set(a.FP(), fp)
		if frames, _, _ := unwindBothWays(t, u, &regs, &FlatMemory{Addr: 0x7ff000000000, Data: stack}); len(frames) > 32 || len(frames) == 0 {
			t.Fatalf("%d frames", len(frames))
		}
	})
}

// TestStops checks each abnormal end of a walk and its reason.
func TestStops(t *testing.T) {
	edge := loadCorpusModule(t, "x86_64/v3/edge-x86_64.o", libBias)
	const lo = 0x7ff000000000
	stack := make([]byte, 4096)
	mem := &FlatMemory{Addr: lo, Data: stack}
	newU := func(depth int) *Unwinder {
		u, err := New(arch.AMD64, []*Module{edge})
		if err != nil {
			t.Fatal(err)
		}
		u.MaxDepth = depth
		return u
	}
	regs := func(pc, sp, fp uint64) *arch.Regs {
		r := &arch.Regs{Arch: arch.AMD64}
		r.Set(arch.AMD64RIP, pc)
		r.Set(arch.AMD64RSP, sp)
		r.Set(arch.AMD64RBP, fp)
		return r
	}
	put := func(addr, v uint64) { binary.LittleEndian.PutUint64(stack[addr-lo:], v) }

	// PC in no module.
	if fr, stop, _ := newU(0).Unwind(nil, regs(0x1234, lo+64, 0), mem, nil); stop != StopNoModule || len(fr) != 1 || fr[0].Module != nil {
		t.Errorf("no module: %v, %d frames", stop, len(fr))
	}
	// Unreadable stack: SP outside the image.
	if fr, stop, err := newU(0).Unwind(nil, regs(libBias+0x19, lo+1<<20, 0), mem, nil); stop != StopMemory || err == nil || len(fr) != 1 {
		t.Errorf("memory: %v %v, %d frames", stop, err, len(fr))
	}
	// SP not moving up: an FP-based CFA below the SP (edge function 2 at
	// 0x20: fp+16).
	if fr, stop, _ := newU(0).Unwind(nil, regs(libBias+0x20, lo+512, lo+256), mem, nil); stop != StopNoProgress || len(fr) != 1 {
		t.Errorf("no progress: %v, %d frames", stop, len(fr))
	}
	// A return address to itself, frame after frame, until the limit:
	// function 4 at 0x43 (sp+8): each frame's RA is 0x44, the next slot.
	for off := uint64(0); off < 4096; off += 8 {
		put(lo+off, libBias+0x44)
	}
	if fr, stop, _ := newU(10).Unwind(nil, regs(libBias+0x43, lo, 0), mem, nil); stop != StopDepth || len(fr) != 10 {
		t.Errorf("depth: %v, %d frames", stop, len(fr))
	} else {
		for i := range fr {
			if fr[i].SP != lo+8*uint64(i) || fr[i].Method != MethodSFrame {
				t.Errorf("depth: frame %d sp %#x %v", i, fr[i].SP, fr[i].Method)
			}
		}
	}
	// Wrong architecture.
	r := &arch.Regs{Arch: arch.ARM64}
	if _, stop, err := newU(0).Unwind(nil, r, mem, nil); err == nil || stop != StopNoRule {
		t.Errorf("arch mismatch: %v %v", stop, err)
	}
	if _, err := New(arch.I386, nil); err == nil {
		t.Error("New accepted i386")
	}
}
