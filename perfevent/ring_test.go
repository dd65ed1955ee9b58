package perfevent

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/sframekit/sframekit/perfdata"
)

const testPage = 4096

// fakeRing imitates the kernel's side of a ring buffer in ordinary memory:
// it writes records at data_head, never past data_tail, and counts what
// does not fit as the kernel does.
type fakeRing struct {
	mem  []byte
	r    *ring
	size uint64
	head uint64
	lost int
}

// newFakeRing makes a ring of pages data pages, its data area at
// dataOff (the kernel puts it at one page).
func newFakeRing(t testing.TB, pages int) *fakeRing {
	t.Helper()
	words := make([]uint64, (1+pages)*testPage/8)
	mem := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), len(words)*8)
	ne.PutUint64(mem[offDataOffset:], testPage)
	ne.PutUint64(mem[offDataSize:], uint64(pages*testPage))
	r, err := newRing(mem, testPage)
	if err != nil {
		t.Fatal(err)
	}
	return &fakeRing{mem: mem, r: r, size: uint64(pages * testPage)}
}

// record makes a record of type typ whose body is n bytes of pattern.
func record(typ perfdata.RecordType, n int, pattern byte) []byte {
	b := make([]byte, headerSize+n)
	ne.PutUint32(b, uint32(typ))
	ne.PutUint16(b[6:], uint16(len(b)))
	for i := headerSize; i < len(b); i++ {
		b[i] = pattern + byte(i)
	}
	return b
}

// write writes rec at the head, wrapping at the end of the data area, if
// there is room; it reports whether there was.
func (f *fakeRing) write(rec []byte) bool {
	tail := atomic.LoadUint64(f.r.tail)
	if f.head-tail+uint64(len(rec)) > f.size {
		f.lost++
		return false
	}
	data := f.mem[testPage : testPage+int(f.size)]
	for i, c := range rec {
		data[(f.head+uint64(i))%f.size] = c
	}
	f.head += uint64(len(rec))
	atomic.StoreUint64(f.r.head, f.head)
	return true
}

func TestRingReadsInOrderAcrossWraps(t *testing.T) {
	f := newFakeRing(t, 1)
	rnd := rand.New(rand.NewPCG(1, 2))
	var want [][]byte
	var got [][]byte
	wrapsWant, wrapsGot := 0, 0
	for round := 0; round < 2000; round++ {
		// A few records of 8 bytes to nearly half the ring, then a read.
		for k := rnd.IntN(4); k >= 0; k-- {
			rec := record(perfdata.RecordSample, 8*rnd.IntN(250), byte(round))
			off := f.head % f.size
			if f.write(rec) {
				want = append(want, rec)
				if off+uint64(len(rec)) > f.size {
					wrapsWant++
				}
			}
		}
		f.r.read(func(raw []byte, wrapped bool) bool {
			got = append(got, bytes.Clone(raw))
			if wrapped {
				wrapsGot++
			}
			return true
		})
		if *f.r.tail != f.head {
			t.Fatalf("round %d: tail %d after reading everything, head %d", round, *f.r.tail, f.head)
		}
	}
	if len(got) != len(want) || wrapsGot != wrapsWant || wrapsWant == 0 || f.lost == 0 {
		t.Fatalf("read %d records (%d wrapped), wrote %d (%d wrapped, %d did not fit)", len(got), wrapsGot, len(want), wrapsWant, f.lost)
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("record %d: read %x, wrote %x", i, got[i][:16], want[i][:16])
		}
	}
	if n := f.r.records.Load(); n != uint64(len(want)) || f.r.wrapped.Load() != uint64(wrapsWant) || f.r.corrupt.Load() != 0 {
		t.Errorf("counters: %d records, %d wrapped, %d corrupt", n, f.r.wrapped.Load(), f.r.corrupt.Load())
	}
}

func TestRingStopsEarly(t *testing.T) {
	f := newFakeRing(t, 1)
	for i := range 5 {
		f.write(record(perfdata.RecordSample, 16, byte(i)))
	}
	n := f.r.read(func(raw []byte, wrapped bool) bool { return raw[8] != 2+8 })
	// Records 0, 1 and 2 are consumed (2 made fn stop); 3 and 4 remain.
	if n != 3 || *f.r.tail != 3*24 {
		t.Fatalf("read %d records, tail %d; want 3, 72", n, *f.r.tail)
	}
	var rest []byte
	f.r.read(func(raw []byte, wrapped bool) bool { rest = append(rest, raw[8]); return true })
	if !bytes.Equal(rest, []byte{3 + 8, 4 + 8}) {
		t.Fatalf("then read %v", rest)
	}
}

func TestRingDropsCorruptData(t *testing.T) {
	for _, tc := range []struct {
		name string
		size uint16
	}{{"zero size", 0}, {"short", 4}, {"unaligned", 20}, {"past head", 64}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeRing(t, 1)
			f.write(record(perfdata.RecordSample, 8, 0))
			bad := record(perfdata.RecordSample, 16, 0)
			ne.PutUint16(bad[6:], tc.size)
			f.write(bad)
			f.write(record(perfdata.RecordSample, 8, 0))
			n := f.r.read(func([]byte, bool) bool { return true })
			if n != 1 || f.r.corrupt.Load() != 1 || *f.r.tail != f.head {
				t.Fatalf("read %d, corrupt %d, tail %d, head %d; want 1 read and everything after dropped", n, f.r.corrupt.Load(), *f.r.tail, f.head)
			}
			// Records written after the drop read normally.
			f.write(record(perfdata.RecordSample, 8, 0))
			if n := f.r.read(func([]byte, bool) bool { return true }); n != 1 {
				t.Fatalf("then read %d records, want 1", n)
			}
		})
	}
}

func TestNewRingChecksDataArea(t *testing.T) {
	for _, tc := range []struct{ off, size uint64 }{
		{testPage, 3 * testPage}, // not a power of two
		{testPage, 4 * testPage}, // past the mapping
		{3, testPage},            // unaligned
		{1 << 62, testPage},      // offset past the mapping
	} {
		words := make([]uint64, 3*testPage/8)
		mem := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), len(words)*8)
		ne.PutUint64(mem[offDataOffset:], tc.off)
		ne.PutUint64(mem[offDataSize:], tc.size)
		if _, err := newRing(mem, testPage); err == nil {
			t.Errorf("data area of %d bytes at %d in %d: accepted", tc.size, tc.off, len(mem))
		}
	}
	// A kernel before 4.1 leaves the fields 0: the data follows the page.
	words := make([]uint64, 3*testPage/8)
	mem := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), len(words)*8)
	r, err := newRing(mem, testPage)
	if err != nil || len(r.data) != 2*testPage || &r.data[0] != &mem[testPage] {
		t.Errorf("old layout: %v", err)
	}
}

// BenchmarkRingRead measures the reader's cost per record, the kernel's
// writing left out: a ring full of records of one size is read over and
// over (its head and tail moved back), each record passed to a callback
// that reads its type. Sizes: a small record (64 B), a sample with
// registers and a 1 KiB stack, and one with an 8 KiB stack; one record in
// several wraps around the end, which costs a copy.
func BenchmarkRingRead(b *testing.B) {
	for _, size := range []int{64, 1232, 8400} {
		b.Run(fmt.Sprintf("record=%dB", size), func(b *testing.B) {
			f := newFakeRing(b, 64)
			// Start so that the records wrap as they would in a live ring.
			start := f.size - uint64(size/2)&^7
			f.head = start
			atomic.StoreUint64(f.r.tail, start)
			f.r.pos = start
			n := 0
			for f.write(record(perfdata.RecordSample, size-headerSize, 0)) {
				n++
			}
			var sink perfdata.RecordType
			fn := func(raw []byte, wrapped bool) bool {
				sink += perfdata.RecordType(ne.Uint32(raw))
				return true
			}
			b.ResetTimer()
			for range b.N {
				f.r.pos = start
				atomic.StoreUint64(f.r.tail, start)
				if f.r.read(fn) != n {
					b.Fatal("short read")
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/record")
			_ = sink
		})
	}
}
