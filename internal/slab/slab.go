// Package slab hands out values allocated many at a time: for tables
// that grow by one small value per new key (merged stacks, pprof
// samples and locations, resolved addresses, cached CFI rows), where an
// allocation per value was a large share of the work and of the
// collector's.
package slab

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
