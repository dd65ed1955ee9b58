package perfevent

import (
	"testing"

	"github.com/sframekit/sframekit/perfdata"
)

// drainSession is a session over one synthetic ring filled with profiler
// samples (17 registers, stack bytes of user stack, no callchain), the
// kernel's writing left out; it returns the session, the position to
// rewind the ring to and the number of samples it holds.
func drainSession(tb testing.TB, stack uint32) (*Session, *fakeRing, uint64, int) {
	o := Options{PIDs: []int{1}, RegsUser: RegsAMD64, StackUser: stack}
	a := buildAttrs(tb, o)[0]
	smp := testSample(a)
	smp.StackSize = uint64(stack)
	smp.Stack = make([]byte, stack)
	smp.Callchain = nil
	raw := rec(perfdata.RecordSample, perfdata.MiscUser, sampleBody(a, smp), nil).Raw
	f := newFakeRing(tb, 128)
	start := f.size - uint64(len(raw)/2)&^7
	f.head, f.r.pos = start, start
	*f.r.tail = start
	n := 0
	for f.write(raw) {
		n++
	}
	s := &Session{opts: o, attrs: []*Attr{a}, rings: []*ring{f.r}, dec: decoderOf(a)}
	s.rec.dec = s.dec
	return s, f, start, n
}

// rewind makes the ring's records unread again.
func (f *fakeRing) rewind(start uint64) {
	f.r.pos = start
	*f.r.tail = start
}

// TestDrainDecodeDoesNotAllocate: reading a ring and decoding its samples
// allocates nothing.
func TestDrainDecodeDoesNotAllocate(t *testing.T) {
	s, f, start, n := drainSession(t, 1024)
	got := 0
	fn := func(r *Record) error {
		d, err := r.Decode()
		if err != nil {
			return err
		}
		if d.Sample() == nil || len(d.Sample().StackUser) != 1024 {
			t.Fatalf("sample not decoded: %+v", d.Sample())
		}
		got++
		return nil
	}
	if allocs := testing.AllocsPerRun(20, func() {
		f.rewind(start)
		if err := s.drain(fn); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Errorf("%v allocations to read and decode %d samples", allocs, n)
	}
	if got != 21*n {
		t.Errorf("%d samples decoded, want %d", got, 21*n)
	}
}
