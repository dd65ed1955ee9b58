package unwind

import (
	"bytes"
	"debug/elf"
	"os"
	"testing"
)

// BenchmarkLoadTablesGen measures loading libc's tables with SFrame
// compiled from its CFI (LoadOptions.SFrameFromCFI), from the file's
// bytes in memory: the cost a recording or a profiler pays once for the
// file, to be weighed against what its frames save (BenchmarkUnwindCFI
// against BenchmarkUnwindSFrame).
func BenchmarkLoadTablesGen(b *testing.B) {
	for _, gen := range []bool{false, true} {
		name := "cfi"
		if gen {
			name = "gen"
		}
		b.Run(name, func(b *testing.B) {
			src, err := os.ReadFile(libcFile)
			if err != nil {
				b.Skip(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				f, err := elf.NewFile(bytes.NewReader(src))
				if err != nil {
					b.Fatal(err)
				}
				t := LoadTablesWith(f, LoadOptions{SFrameFromCFI: gen})
				if gen && t.SFrame == nil {
					b.Fatal(t.Errs)
				}
			}
		})
	}
}

const libcFile = "/usr/lib/x86_64-linux-gnu/libc.so.6"
