package cfi

import (
	"debug/elf"
	"io"
	"path/filepath"
	"testing"

	"github.com/sframekit/sframekit/internal/corpus"
)

// BenchmarkDump formats the largest corpus file like readelf -wF.
func BenchmarkDump(b *testing.B) {
	f, err := elf.Open(filepath.Join(corpus.Dir(b), "x86_64", "v3", "big-pic.so"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	b.ReportAllocs()
	defer cpuTimer(b)()
	for i := 0; i < b.N; i++ {
		if err := Dump(io.Discard, f, ".eh_frame"); err != nil {
			b.Fatal(err)
		}
	}
}
