package cfi

import (
	"debug/elf"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-delve/delve/pkg/dwarf/frame"
	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/internal/corpus"
	"github.com/sframekit/sframekit/internal/cputime"
)

// Benchmarks against github.com/go-delve/delve/pkg/dwarf/frame on the same
// section bytes and the same precomputed PCs. Run side by side with
//
//	go test -run XXX -bench . -benchmem ./cfi/

// cpuTimer reports cpu-ns/op for the timed loop of b.
func cpuTimer(b *testing.B) func() {
	start := cputime.Now()
	return func() {
		b.ReportMetric(float64(cputime.Now()-start)/float64(b.N), "cpu-ns/op")
	}
}

type benchInput struct {
	name string
	f    *elf.File
	data []byte // .eh_frame
	sec  *elf.Section
	pcs  []uint64
}

func benchInputs(b *testing.B) []*benchInput {
	var paths []struct{ name, path string }
	if _, err := os.Stat("/usr/lib/x86_64-linux-gnu/libc.so.6"); err == nil {
		paths = append(paths, struct{ name, path string }{"libc", "/usr/lib/x86_64-linux-gnu/libc.so.6"})
	}
	paths = append(paths, struct{ name, path string }{"big-pic", filepath.Join(corpus.Dir(b), "x86_64", "v3", "big-pic.so")})
	var out []*benchInput
	for _, p := range paths {
		f, err := elf.Open(p.path)
		if err != nil {
			b.Fatal(err)
		}
		sec := f.Section(".eh_frame")
		data, err := sec.Data()
		if err != nil {
			b.Fatal(err)
		}
		in := &benchInput{name: p.name, f: f, data: data, sec: sec}
		// Random PCs in .text that an FDE covers (so both libraries find
		// an answer), fixed seed, shared by both benchmarks.
		tab, err := FromELF(f, ".eh_frame")
		if err != nil {
			b.Fatal(err)
		}
		text := f.Section(".text")
		rng := rand.New(rand.NewSource(1))
		var ctx UnwindContext
		var r Row
		for len(in.pcs) < 4096 {
			pc := text.Addr + uint64(rng.Int63n(int64(text.Size)))
			if _, err := tab.RowForPC(&ctx, pc, &r); err == nil {
				in.pcs = append(in.pcs, pc)
			}
		}
		out = append(out, in)
	}
	return out
}

// BenchmarkParse decodes every CIE and FDE of the section and builds the
// sorted lookup index (what delve's Parse produces).
func BenchmarkParse(b *testing.B) {
	for _, in := range benchInputs(b) {
		b.Run(in.name, func(b *testing.B) {
			b.SetBytes(int64(len(in.data)))
			b.ReportAllocs()
			defer cpuTimer(b)()
			for i := 0; i < b.N; i++ {
				tab, err := New(in.data, Options{Kind: EHFrame, Addr: in.sec.Addr, ByteOrder: in.f.ByteOrder, AddrSize: 8, Arch: arch.AMD64})
				if err != nil {
					b.Fatal(err)
				}
				if len(tab.sortedIndex()) == 0 {
					b.Fatal("no FDEs")
				}
			}
		})
	}
}

// delveSink keeps the sorted table so that building it is not optimized
// away.
var delveSink frame.FrameDescriptionEntries

// BenchmarkDelveParse is delve's whole-section parse, sorted for lookups
// (FrameDescriptionEntries.Append), as delve's own loader does.
func BenchmarkDelveParse(b *testing.B) {
	for _, in := range benchInputs(b) {
		b.Run(in.name, func(b *testing.B) {
			b.SetBytes(int64(len(in.data)))
			b.ReportAllocs()
			defer cpuTimer(b)()
			for i := 0; i < b.N; i++ {
				fdes, err := frame.Parse(in.data, in.f.ByteOrder, 0, 8, in.sec.Addr)
				if err != nil || len(fdes) == 0 {
					b.Fatal(err)
				}
				// Sorted for lookups, as delve's loader does.
				delveSink = frame.FrameDescriptionEntries(nil).Append(fdes)
			}
		})
	}
}

// BenchmarkRowForPC looks up the rules for random text PCs through
// .eh_frame_hdr, as an unwinder would (BenchmarkRulesForPC before the
// lookup took a context).
func BenchmarkRowForPC(b *testing.B) {
	for _, in := range benchInputs(b) {
		b.Run(in.name, func(b *testing.B) {
			tab, err := FromELF(in.f, ".eh_frame")
			if err != nil {
				b.Fatal(err)
			}
			var sink int64
			var ctx UnwindContext
			var r Row
			b.ReportAllocs()
			b.ResetTimer()
			defer cpuTimer(b)()
			for i := 0; i < b.N; i++ {
				_, err := tab.RowForPC(&ctx, in.pcs[i&(len(in.pcs)-1)], &r)
				if err != nil {
					b.Fatal(err)
				}
				sink += r.CFA.Offset
			}
			_ = sink
		})
	}
}

// BenchmarkDelveRulesForPC is delve's lookup (FDEForPC) plus running the
// program up to the PC (EstablishFrame) for the same PCs.
func BenchmarkDelveRulesForPC(b *testing.B) {
	for _, in := range benchInputs(b) {
		b.Run(in.name, func(b *testing.B) {
			fdes, err := frame.Parse(in.data, in.f.ByteOrder, 0, 8, in.sec.Addr)
			if err != nil {
				b.Fatal(err)
			}
			fdes = frame.FrameDescriptionEntries(nil).Append(fdes)
			var sink int64
			b.ReportAllocs()
			b.ResetTimer()
			defer cpuTimer(b)()
			for i := 0; i < b.N; i++ {
				pc := in.pcs[i&(len(in.pcs)-1)]
				fde, err := fdes.FDEForPC(pc)
				if err != nil {
					b.Fatal(err)
				}
				fc, err := fde.EstablishFrame(pc)
				if err != nil {
					b.Fatal(err)
				}
				sink += fc.CFA.Offset
			}
			_ = sink
		})
	}
}

// TestDelveAgrees cross-checks CFA rules with delve on the benchmark PCs
// (where delve supports the program), so the benchmarks compare equal work.
func TestDelveAgrees(t *testing.T) {
	p := filepath.Join(corpus.Dir(t), "x86_64", "v3", "big-pic.so")
	f, err := elf.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sec := f.Section(".eh_frame")
	data, _ := sec.Data()
	fdes, err := frame.Parse(data, f.ByteOrder, 0, 8, sec.Addr)
	if err != nil {
		t.Fatal(err)
	}
	fdes = frame.FrameDescriptionEntries(nil).Append(fdes)
	tab, err := FromELF(f, ".eh_frame")
	if err != nil {
		t.Fatal(err)
	}
	text := f.Section(".text")
	checked := 0
	for pc := text.Addr; pc < text.Addr+text.Size; pc += 7 {
		r, err := lookup(tab, pc)
		if err != nil {
			continue
		}
		fde, err := fdes.FDEForPC(pc)
		if err != nil {
			t.Fatalf("delve has no FDE for %#x", pc)
		}
		fc, err := fde.EstablishFrame(pc)
		if err != nil || r.CFA.Kind != CFARegOffset {
			continue
		}
		if uint64(fc.CFA.Reg) != uint64(r.CFA.Reg) || fc.CFA.Offset != r.CFA.Offset {
			t.Fatalf("pc %#x: CFA r%d%+d, delve r%d%+d", pc, r.CFA.Reg, r.CFA.Offset, fc.CFA.Reg, fc.CFA.Offset)
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("nothing compared")
	}
}
