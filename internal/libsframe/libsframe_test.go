//go:build libsframe && cgo

package libsframe

import (
	"debug/elf"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/sframekit/sframekit/sframe"
)

// bigV1 loads the .sframe of the large v1 executable that
// scripts/bench-dump.sh builds with this machine's gcc (100,000
// functions), named by SFRAMEKIT_BIG_V1.
func bigV1(tb testing.TB) ([]byte, uint64) {
	path := os.Getenv("SFRAMEKIT_BIG_V1")
	if path == "" {
		tb.Skip("set SFRAMEKIT_BIG_V1 to the ELF file scripts/bench-dump.sh builds")
	}
	f, err := elf.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	sec := f.Section(".sframe")
	data, err := sec.Data()
	if err != nil {
		tb.Fatal(err)
	}
	return data, sec.Addr
}

// pcsFor returns random PCs inside the functions of s.
func pcsFor(tb testing.TB, s *sframe.Section, n int) []uint64 {
	r := rand.New(rand.NewPCG(1, 2))
	out := make([]uint64, n)
	for i := range out {
		f, err := s.Func(r.IntN(s.NumFuncs()))
		if err != nil {
			tb.Fatal(err)
		}
		out[i] = f.Start + uint64(r.IntN(int(f.Size)))
	}
	return out
}

const nPCs = 1 << 16

// TestAgree checks that both libraries find a row for the same PCs, so the
// benchmarks compare like with like.
func TestAgree(t *testing.T) {
	data, addr := bigV1(t)
	s, err := sframe.Parse(data, addr)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.NumFuncs() != s.NumFuncs() {
		t.Fatalf("libsframe sees %d functions, sframekit %d", d.NumFuncs(), s.NumFuncs())
	}
	pcs := pcsFor(t, s, 4096)
	rel := make([]int32, len(pcs))
	ours := 0
	for i, pc := range pcs {
		rel[i] = int32(pc - addr)
		if _, err := s.RowForPC(pc); err == nil {
			ours++
		}
	}
	if theirs := d.FindMany(rel, len(rel)); theirs != ours {
		t.Errorf("libsframe found %d of %d PCs, sframekit %d", theirs, len(pcs), ours)
	}
}

func BenchmarkLibsframeFindFRE(b *testing.B) {
	data, addr := bigV1(b)
	s, _ := sframe.Parse(data, addr)
	d, err := Decode(data)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	pcs := pcsFor(b, s, nPCs)
	rel := make([]int32, len(pcs))
	for i, pc := range pcs {
		rel[i] = int32(pc - addr)
	}
	b.ResetTimer()
	d.FindMany(rel, b.N)
}

func BenchmarkSframekitFindFRE(b *testing.B) {
	data, addr := bigV1(b)
	s, _ := sframe.Parse(data, addr)
	pcs := pcsFor(b, s, nPCs)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.RowForPC(pcs[i&(nPCs-1)]); err != nil && err != sframe.ErrNoRow {
			b.Fatal(err)
		}
	}
}
