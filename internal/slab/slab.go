// Package slab hands out values allocated many at a time (Slab), and
// copies of byte strings kept in blocks (Bytes): for tables that grow by
// one small value or key per new entry (merged stacks, pprof samples and
// locations, resolved addresses, cached CFI rows), where an allocation
// per entry was a large share of the work and of the collector's.
package slab

import "unsafe"

// Slab hands out pointers to zeroed values of T, taken from blocks of
// n. A block stays alive while any value in it does. The zero Slab is
// ready to use.
type Slab[T any] struct {
	free []T
}

// New returns a pointer to a zeroed T, from a new block of n values when
// the last one is used up.
func (s *Slab[T]) New(n int) *T {
	if len(s.free) == 0 {
		s.free = make([]T, max(n, 1))
	}
	p := &s.free[0]
	s.free = s.free[1:]
	return p
}

// Bytes keeps byte strings, copies of keys, in blocks allocated many at
// a time: for tables that keep a key per entry (merged stacks), where a
// string allocated per key was a large share of the work. The zero Bytes
// is ready to use.
type Bytes struct {
	block []byte
	n     int // bytes handed out since the last Reset
}

// String returns a string holding a copy of p, from the current block,
// or from a new one of max(n, len(p)) bytes when p does not fit. The
// string stays valid while the caller keeps it (see Reset).
func (b *Bytes) String(p []byte, n int) string {
	if len(p) > cap(b.block)-len(b.block) {
		b.block = make([]byte, 0, max(n, len(p)))
	}
	b.block = append(b.block, p...)
	b.n += len(p)
	s := b.block[len(b.block)-len(p):]
	return unsafe.String(unsafe.SliceData(s), len(s))
}

// Len returns the bytes handed out since the last Reset.
func (b *Bytes) Len() int { return b.n }

// Reset lets the current block be written again: only for a caller that
// keeps none of the strings handed out before (a cache it empties).
func (b *Bytes) Reset() {
	b.block, b.n = b.block[:0], 0
}
