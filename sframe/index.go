package sframe

import "math/bits"

// lookupIndex sits in front of the function table of a sorted section,
// so that a lookup touches a few cache lines instead of the ~17 table
// entries a binary search over 100,000 functions reads:
//
//   - rel holds each function's start as an offset from the first one,
//     4 bytes per function instead of a 16-20 byte table entry;
//   - buckets maps a PC to the small run of functions that can contain
//     it: bucket k covers offsets [k<<shift, (k+1)<<shift), and
//     buckets[k] counts the functions starting before the bucket. The
//     shift is chosen for about one function per bucket.
//
// It is built once, on the first lookup, only for sections flagged
// sorted whose functions span less than 4 GiB; its size is bounded by the
// number of functions, which Parse checked against the section size.
type lookupIndex struct {
	base    uint64
	shift   uint
	rel     []uint32
	buckets []uint32
}

func (s *Section) buildIndex() {
	n := int(s.NumFDEs)
	if n == 0 || s.Flags&FlagFDESorted == 0 {
		return
	}
	base := s.start(0)
	rel := make([]uint32, n)
	for i := 0; i < n; i++ {
		d := s.start(i) - base
		if d > 0xffffffff || (i > 0 && uint32(d) < rel[i-1]) {
			return // too wide or not sorted after all: search the table
		}
		rel[i] = uint32(d)
	}
	span := uint64(rel[n-1]) + 1
	shift := uint(0)
	if per := span / uint64(n); per > 1 {
		shift = uint(bits.Len64(per - 1))
	}
	nb := int(span>>shift) + 2
	buckets := make([]uint32, nb)
	k := 0
	for b := 0; b < nb; b++ {
		lim := uint64(b) << shift
		for k < n && uint64(rel[k]) < lim {
			k++
		}
		buckets[b] = uint32(k)
	}
	s.idx = lookupIndex{base: base, shift: shift, rel: rel, buckets: buckets}
}

// find returns the last function whose start is <= pc, or -1.
func (x *lookupIndex) find(pc uint64) int {
	if pc < x.base {
		return -1
	}
	key := pc - x.base
	b := key >> x.shift
	if b >= uint64(len(x.buckets)-1) {
		return len(x.rel) - 1
	}
	// Functions [0, buckets[b]) start before the bucket, so the answer is
	// at least buckets[b]-1; functions from buckets[b+1] on start after
	// it.
	lo := int(x.buckets[b]) - 1
	hi := int(x.buckets[b+1])
	if lo < 0 {
		lo = 0
	}
	for hi-lo > 1 {
		m := int(uint(lo+hi) >> 1)
		if uint64(x.rel[m]) <= key {
			lo = m
		} else {
			hi = m
		}
	}
	if uint64(x.rel[lo]) > key {
		return -1
	}
	return lo
}
