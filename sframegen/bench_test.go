package sframegen

import (
	"bytes"
	"debug/elf"
	"os"
	"path/filepath"
	"testing"

	"github.com/sframekit/sframekit/internal/corpus"
)

// benchFromCFI measures reading the ELF headers, converting the CFI and
// encoding the section, from the file's bytes in memory.
func benchFromCFI(b *testing.B, path string) {
	src, err := os.ReadFile(path)
	if err != nil {
		b.Skip(err)
	}
	var size int
	for b.Loop() {
		f, err := elf.NewFile(bytes.NewReader(src))
		if err != nil {
			b.Fatal(err)
		}
		r, err := FromCFI(f, Options{})
		if err != nil {
			b.Fatal(err)
		}
		out, err := r.Encode(0x1000000)
		if err != nil {
			b.Fatal(err)
		}
		size = len(out)
	}
	b.ReportMetric(float64(size), "out-bytes")
}

func BenchmarkFromCFILibc(b *testing.B) { benchFromCFI(b, libcPath) }

func BenchmarkFromCFIBigPIC(b *testing.B) {
	benchFromCFI(b, filepath.Join(corpus.Dir(b), "x86_64/v3/big-pic.so"))
}
