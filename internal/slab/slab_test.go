package slab

import (
	"testing"
	"unsafe"
)

// TestNew hands out distinct zeroed values, n to a block: consecutive
// within a block.
func TestNew(t *testing.T) {
	var s Slab[[3]int64]
	seen := map[*[3]int64]bool{}
	var prev *[3]int64
	for i := range 10 {
		p := s.New(4)
		if *p != [3]int64{} {
			t.Fatalf("value %d not zeroed: %v", i, *p)
		}
		if seen[p] {
			t.Fatalf("value %d handed out twice", i)
		}
		seen[p] = true
		p[0] = int64(i + 1)
		if i%4 != 0 && uintptr(unsafe.Pointer(p)) != uintptr(unsafe.Pointer(prev))+unsafe.Sizeof(*p) {
			t.Errorf("value %d does not follow the last in its block", i)
		}
		prev = p
	}
	for p := range seen {
		if p[0] == 0 {
			t.Error("a value was overwritten")
		}
	}
	if p := new(Slab[int]).New(0); p == nil {
		t.Error("New(0) returned nil")
	}
}

// BenchmarkNew: a value from the slab against new(T), for a 64-byte T.
func BenchmarkNew(b *testing.B) {
	type v [8]int64
	b.Run("slab", func(b *testing.B) {
		var s Slab[v]
		var sink *v
		for b.Loop() {
			sink = s.New(256)
		}
		_ = sink
	})
	b.Run("new", func(b *testing.B) {
		var sink *v
		for b.Loop() {
			sink = new(v)
		}
		_ = sink
	})
}
