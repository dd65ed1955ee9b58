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

// TestBytes: strings are copies (changing the bytes given later changes
// none), kept whole across blocks, Len counts them, and after Reset the
// block is written again from its start.
func TestBytes(t *testing.T) {
	var b Bytes
	p := []byte("abcdef")
	s1 := b.String(p, 8)
	p[0] = 'X'
	s2 := b.String(p[:4], 8) // does not fit: a new block
	if s1 != "abcdef" || s2 != "Xbcd" {
		t.Fatalf("strings %q %q, want abcdef Xbcd", s1, s2)
	}
	if b.Len() != 10 {
		t.Errorf("Len %d, want 10", b.Len())
	}
	long := b.String(make([]byte, 20), 8) // longer than a block
	if len(long) != 20 || s2 != "Xbcd" {
		t.Errorf("a string longer than the block: %d bytes, earlier %q", len(long), s2)
	}
	b.Reset()
	if b.Len() != 0 {
		t.Errorf("Len %d after Reset", b.Len())
	}
	s3 := b.String([]byte("zz"), 8)
	if s3 != "zz" || s1 != "abcdef" {
		t.Errorf("after Reset: %q, an older block's string %q", s3, s1)
	}
}
