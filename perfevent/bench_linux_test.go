package perfevent

import (
	"testing"
)

// BenchmarkDrain measures what Run adds per record on top of the ring
// (making the Record, finding its event, counting) and the cost of
// decoding a sample in place, on a synthetic ring of profiler samples
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
				o := Options{PIDs: []int{1}, RegsUser: RegsAMD64, StackUser: stack}
				a := o.buildAttrs()[0]
				smp := testSample(a)
				smp.StackUserSize = uint64(stack)
				smp.StackUser = make([]byte, stack)
				smp.Callchain = nil
				raw := rec(RecordSample, MiscUser, sampleBody(a, smp), a).Raw
				f := newFakeRing(b, 128)
				start := f.size - uint64(len(raw)/2)&^7
				f.head, f.r.pos = start, start
				*f.r.tail = start
				n := 0
				for f.write(raw) {
					n++
				}
				s := &Session{opts: o, attrs: []*Attr{a}, rings: []*ring{f.r}}
				var got Sample
				var sum uint64
				fn := func(r *Record) error {
					if decode {
						if err := r.DecodeSample(&got); err != nil {
							return err
						}
						sum += got.IP + uint64(len(got.StackUser))
					}
					return nil
				}
				b.ResetTimer()
				for range b.N {
					f.r.pos = start
					*f.r.tail = start
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
