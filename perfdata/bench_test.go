package perfdata

import (
	"io"
	"os"
	"testing"
)

// Recordings for the benchmarks: many small samples, and DWARF-mode
// samples with 4 KB of stack each, plain and compressed.
var benchRecordings = []recording{
	{name: "bench-samples", args: []string{"-e", "cpu-clock", "-c", "10000"}, work: "400"},
	{name: "bench-dwarf", args: []string{"-e", "cpu-clock", "-c", "100000", "--call-graph", "dwarf,4096"}, work: "400"},
	{name: "bench-dwarf-z", args: []string{"-z", "-e", "cpu-clock", "-c", "100000", "--call-graph", "dwarf,4096"}, work: "400"},
}

// BenchmarkReader reads whole recordings, reporting records/s and the
// file's MB/s (compressed bytes, for -z).
//
//	go test ./perfdata -run '^$' -bench Reader -benchtime 20x
func BenchmarkReader(b *testing.B) {
	for _, rc := range benchRecordings {
		path := record(b, rc)
		st, err := os.Stat(path)
		if err != nil {
			b.Fatal(err)
		}
		for _, ordered := range []bool{false, true} {
			name := rc.name + "/file-order"
			if ordered {
				name = rc.name + "/time-order"
			}
			b.Run(name, func(b *testing.B) {
				b.SetBytes(st.Size())
				b.ReportAllocs()
				records := 0
				for b.Loop() {
					r, err := Open(path)
					if err != nil {
						b.Fatal(err)
					}
					r.SetTimeOrder(ordered)
					for {
						rec, err := r.Next()
						if err == io.EOF {
							break
						}
						if err != nil {
							b.Fatal(err)
						}
						if s := rec.Sample(); s != nil {
							_ = s.IP
						}
						records++
					}
					r.Close()
				}
				b.ReportMetric(float64(records)/b.Elapsed().Seconds(), "records/s")
			})
		}
	}
}
