package cowseq

import (
	"iter"
	"math"
	"sort"
)

// seq2 is the two-level sequence that holds a Seq's leaves: chunks of
// about √n values (at least 16), each with its own sorted keys, under one
// sorted array of the chunks' first keys. A lookup is two binary
// searches; a change copies the chunks it touches, one more if they got
// small, and the array of chunks: O(√n). When chunks have become small
// on average (n grown since they were made), the next change rebuilds
// them all: O(n), once every O(n) changes at most. The nil *seq2 is
// empty; a seq2 never changes once made.
type seq2[T any] struct {
	firsts []uint64 // the first key of each chunk
	chunks []*run[T]
	n      int
}

// run is values, with their ascending keys: a chunk of a seq2, or a
// Seq's leaf.
type run[T any] struct {
	keys []uint64
	vals []T
}

// floor returns the last value of r whose key is at most key, which is
// at least r's first key.
func (r *run[T]) floor(key uint64) *T { return &r.vals[upper(r.keys, key)-1] }

// from yields r's values whose keys are at least key, and reports
// whether yield asked for more.
func (r *run[T]) from(key uint64, yield func(uint64, *T) bool) bool {
	for i := sort.Search(len(r.keys), func(i int) bool { return r.keys[i] >= key }); i < len(r.keys); i++ {
		if !yield(r.keys[i], &r.vals[i]) {
			return false
		}
	}
	return true
}

// upper returns the number of keys at most key: the index after the
// last of them.
func upper(keys []uint64, key uint64) int {
	return sort.Search(len(keys), func(i int) bool { return keys[i] > key })
}

// span returns the keys [a, b] a change touches: those it removes, [lo,
// hi] (none when lo > hi), and those it adds, keys (ascending); a > b
// when it touches none.
func span(lo, hi uint64, keys []uint64) (a, b uint64) {
	a, b = lo, hi
	if lo > hi {
		a, b = math.MaxUint64, 0
	}
	if len(keys) > 0 {
		a, b = min(a, keys[0]), max(b, keys[len(keys)-1])
	}
	return a, b
}

// minChunk is the smallest chunk size aimed at.
const minChunk = 16

// target returns the chunk size aimed at for n values: √n, at least
// minChunk. Chunks hold from about half to twice that.
func target(n int) int {
	return max(minChunk, int(math.Sqrt(float64(n))))
}

// Floor returns the last value whose key is at most key, or nil.
func (s *seq2[T]) Floor(key uint64) *T {
	if s == nil {
		return nil
	}
	c := upper(s.firsts, key)
	if c == 0 {
		return nil
	}
	return s.chunks[c-1].floor(key)
}

// From returns the values whose keys are at least key, in order, with
// their keys.
func (s *seq2[T]) From(key uint64) iter.Seq2[uint64, *T] {
	return func(yield func(uint64, *T) bool) {
		if s == nil {
			return
		}
		for c := s.firstChunk(key); c < len(s.chunks); c++ {
			if !s.chunks[c].from(key, yield) {
				return
			}
		}
	}
}

// All returns every value, in order, with its key.
func (s *seq2[T]) All() iter.Seq2[uint64, *T] { return s.From(0) }

// firstChunk returns the first chunk that may hold key: the last one
// whose first key is below key (earlier ones end at or before its
// first key), or 0.
func (s *seq2[T]) firstChunk(key uint64) int {
	return max(0, sort.Search(len(s.firsts), func(i int) bool { return s.firsts[i] >= key })-1)
}

// replace returns s with the values whose keys are in [lo, hi] removed
// (lo > hi removes nothing), and vals added, whose keys (ascending) are
// keys: each after the values of keys up to its own. s does not change.
func (s *seq2[T]) replace(lo, hi uint64, keys []uint64, vals []T) *seq2[T] {
	var old seq2[T]
	if s != nil {
		old = *s
	}
	a, b := span(lo, hi, keys)
	if a > b {
		return s // nothing to remove or add
	}
	// The chunks that may hold keys in [a, b]: c0 to c1.
	c0 := old.firstChunk(a)
	c1 := sort.Search(len(old.firsts), func(i int) bool { return old.firsts[i] > b }) - 1
	c1 = max(c1, min(c0, len(old.chunks)-1))
	size := len(keys)
	for c := c0; c <= c1; c++ {
		size += len(old.chunks[c].keys)
	}
	if c1+1 < len(old.chunks) {
		size += len(old.chunks[c1+1].keys) // in case it is taken in
	}
	nk := make([]uint64, 0, size)
	nv := make([]T, 0, size)
	removed := 0
	j := 0
	for c := c0; c <= c1; c++ {
		ch := old.chunks[c]
		for i, k := range ch.keys {
			for j < len(keys) && keys[j] < k {
				nk, nv = append(nk, keys[j]), append(nv, vals[j])
				j++
			}
			if k >= lo && k <= hi {
				removed++
				continue
			}
			nk, nv = append(nk, k), append(nv, ch.vals[i])
		}
	}
	nk, nv = append(nk, keys[j:]...), append(nv, vals[j:]...)
	n := old.n - removed + len(keys)
	t := target(n)
	// Too few for a chunk: take a neighbour's values in.
	if len(nk) < t/2 {
		switch {
		case c1+1 < len(old.chunks):
			c1++
			nk, nv = append(nk, old.chunks[c1].keys...), append(nv, old.chunks[c1].vals...)
		case c0 > 0:
			c0--
			nk = append(old.chunks[c0].keys[:len(old.chunks[c0].keys):len(old.chunks[c0].keys)], nk...)
			nv = append(old.chunks[c0].vals[:len(old.chunks[c0].vals):len(old.chunks[c0].vals)], nv...)
		}
	}
	out := &seq2[T]{n: n}
	nc := len(old.chunks) - (c1 - c0 + 1) + (len(nk)+2*t-1)/(2*t)
	if nc > 3*n/t+4 {
		// Chunks of values since removed, or made when n was smaller:
		// rebuild them all at the size n calls for.
		return out.rebuild(old, c0, c1, nk, nv, t)
	}
	out.firsts = make([]uint64, 0, nc)
	out.chunks = make([]*run[T], 0, nc)
	out.firsts = append(out.firsts, old.firsts[:c0]...)
	out.chunks = append(out.chunks, old.chunks[:c0]...)
	out.split(nk, nv, t)
	if c1+1 < len(old.chunks) {
		out.firsts = append(out.firsts, old.firsts[c1+1:]...)
		out.chunks = append(out.chunks, old.chunks[c1+1:]...)
	}
	return out
}

// split appends keys and vals as chunks of at most 2t values, of equal
// sizes.
func (s *seq2[T]) split(keys []uint64, vals []T, t int) {
	if len(keys) == 0 {
		return
	}
	k := (len(keys) + 2*t - 1) / (2 * t)
	for i := range k {
		a, b := i*len(keys)/k, (i+1)*len(keys)/k
		s.firsts = append(s.firsts, keys[a])
		s.chunks = append(s.chunks, &run[T]{keys: keys[a:b:b], vals: vals[a:b:b]})
	}
}

// rebuild makes s the chunks of old before c0, then keys and vals, then
// old's chunks after c1, all in new chunks of about t values.
func (s *seq2[T]) rebuild(old seq2[T], c0, c1 int, keys []uint64, vals []T, t int) *seq2[T] {
	ak := make([]uint64, 0, s.n)
	av := make([]T, 0, s.n)
	for _, ch := range old.chunks[:c0] {
		ak, av = append(ak, ch.keys...), append(av, ch.vals...)
	}
	ak, av = append(ak, keys...), append(av, vals...)
	for _, ch := range old.chunks[c1+1:] {
		ak, av = append(ak, ch.keys...), append(av, ch.vals...)
	}
	k := (len(ak) + t - 1) / t
	s.firsts = make([]uint64, 0, k)
	s.chunks = make([]*run[T], 0, k)
	for i := range k {
		a, b := i*len(ak)/k, (i+1)*len(ak)/k
		s.firsts = append(s.firsts, ak[a])
		s.chunks = append(s.chunks, &run[T]{keys: ak[a:b:b], vals: av[a:b:b]})
	}
	return s
}
