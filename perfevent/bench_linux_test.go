package perfevent

import "testing"

// BenchmarkDrain measures what Run adds per record on top of the ring
// (making the Record, counting) and the cost of decoding a sample in
// place with package perfdata, on a synthetic ring of profiler samples
// (17 registers, 1 KiB or 8 KiB of stack), the kernel's writing left out.
func BenchmarkDrain(b *testing.B) {
	for _, stack := range []uint32{1024, 8192} {
		for _, decode := range []bool{false, true} {
			name := "stack=1KiB"
			if stack == 8192 {
				name = "stack=8KiB"
			}
			if decode {
				name += "/decode"
			}
			b.Run(name, func(b *testing.B) {
				s, f, start, n := drainSession(b, stack)
				var sum uint64
				fn := func(r *Record) error {
					if decode {
						d, err := r.Decode()
						if err != nil {
							return err
						}
						smp := d.Sample()
						sum += smp.IP + uint64(len(smp.StackUser))
					}
					return nil
				}
				b.ResetTimer()
				for range b.N {
					f.rewind(start)
					if err := s.drain(fn); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/record")
				if s.Stats().Samples != uint64(b.N*n) {
					b.Fatalf("%d samples counted, %d read", s.Stats().Samples, b.N*n)
				}
			})
		}
	}
}
