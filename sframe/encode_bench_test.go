package sframe_test

import (
	"path/filepath"
	"testing"

	"github.com/sframekit/sframekit/internal/corpus"
	"github.com/sframekit/sframekit/internal/cputime"
	"github.com/sframekit/sframekit/sframe"
)

// encBenchFuncs synthesizes n functions from the rows of the corpus's
// largest x86-64 v3 executable, laid end to end.
func encBenchFuncs(b *testing.B, n int) (sframe.EncodeOptions, []sframe.EncFunc) {
	data, addr := encCorpusSection(b, filepath.Join(corpus.Dir(b), "x86_64", "v3", "big-O2.elf"))
	s, err := sframe.Parse(data, addr)
	if err != nil {
		b.Fatal(err)
	}
	opts, src, err := sframe.Extract(s)
	if err != nil {
		b.Fatal(err)
	}
	funcs := make([]sframe.EncFunc, n)
	start := uint64(0x400000)
	for i := range funcs {
		f := src[i%len(src)]
		f.Start = start
		start += uint64(f.Size) + 16
		funcs[i] = f
	}
	opts.Addr = start + 0x1000
	return opts, funcs
}

// BenchmarkEncode encodes a 100,000-function v3 section (and v2 with
// section-relative starts) from rows taken from the corpus.
func BenchmarkEncode(b *testing.B) {
	opts, funcs := encBenchFuncs(b, 100_000)
	rows := 0
	for i := range funcs {
		rows += len(funcs[i].Rows)
	}
	for _, v := range []sframe.Version{sframe.Version3, sframe.Version2} {
		o := opts
		o.Version = v
		if v == sframe.Version2 {
			o.Addr = 0x400000
		}
		b.Run(v.String(), func(b *testing.B) {
			b.ReportAllocs()
			var size int
			cpu0 := cputime.Now()
			for b.Loop() {
				out, err := sframe.Encode(o, funcs)
				if err != nil {
					b.Fatal(err)
				}
				size = len(out)
			}
			b.ReportMetric(float64(cputime.Now()-cpu0)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(size), "bytes")
			b.ReportMetric(float64(rows), "rows")
		})
	}
}
