// Package cowseq is a sorted sequence of values keyed by uint64 that
// never changes once made: a change returns a new sequence sharing all
// but the few parts it touched with the old one. It holds the mappings of
// the processes a recording describes, and an unwinder's modules: walks
// read a sequence without locks while changes make new ones, and a
// forked process keeps its parent's until one of them maps something.
//
// The values are kept in leaves of 32 to 128, whose first keys are kept
// in a two-level sequence (seq2) of chunks of about √(n/64) leaves. A
// lookup is three binary searches; a change copies the leaves it touches
// (one more if they got small), a chunk of leaves and the array of
// chunks: O(64 + √(n/64)), a few KiB for n in the hundreds of
// thousands, where one flat array costs O(n) a change and a quadratic
// time to build n values from either end.
package cowseq

import (
	"iter"
)

// Seq is a sequence of values sorted by key; values of equal keys are in
// the order they were added. The nil *Seq is the empty sequence. A Seq
// and the values in it must not be modified: Replace makes a new one.
type Seq[T any] struct {
	leaves *seq2[*run[T]] // keyed by their first key
	n      int
}

// leafSize is the size of a leaf aimed at: leaves hold from half to
// twice as many (fewer when there is only one).
const leafSize = 64

// Len returns the number of values.
func (s *Seq[T]) Len() int {
	if s == nil {
		return 0
	}
	return s.n
}

// Floor returns the last value whose key is at most key, or nil.
func (s *Seq[T]) Floor(key uint64) *T {
	if s == nil {
		return nil
	}
	lp := s.leaves.Floor(key)
	if lp == nil {
		return nil
	}
	return (*lp).floor(key)
}

// From returns the values whose keys are at least key, in order, with
// their keys.
func (s *Seq[T]) From(key uint64) iter.Seq2[uint64, *T] {
	return func(yield func(uint64, *T) bool) {
		if s == nil {
			return
		}
		for _, lp := range s.leaves.From(s.startOf(key)) {
			if !(*lp).from(key, yield) {
				return
			}
		}
	}
}

// All returns every value, in order, with its key.
func (s *Seq[T]) All() iter.Seq2[uint64, *T] { return s.From(0) }

// startOf returns the first key of the leaf from which the values of key
// and above may lie: the last leaf starting below key (earlier ones end
// at or before its first key), or 0 for the first leaf.
func (s *Seq[T]) startOf(key uint64) uint64 {
	if key == 0 {
		return 0
	}
	if lp := s.leaves.Floor(key - 1); lp != nil {
		return (*lp).keys[0]
	}
	return 0
}

// Replace returns s with the values whose keys are in [lo, hi] removed,
// those for which keep returns true excepted (keep nil keeps none; lo >
// hi removes nothing), and vals added, whose keys (ascending) are keys:
// each after the values of keys up to its own. s does not change.
func (s *Seq[T]) Replace(lo, hi uint64, keep func(*T) bool, keys []uint64, vals []T) *Seq[T] {
	a, b := span(lo, hi, keys)
	if a > b {
		return s // nothing to remove or add
	}
	var old Seq[T]
	if s != nil {
		old = *s
	}
	// The leaves that may hold keys in [a, b]: the last one starting
	// below a (or the first one) up to the last one starting at or
	// before b; and with them every leaf starting where one of them
	// does, or where one of them ends (a run of equal keys that goes on
	// in the next leaf), so that the leaves starting in [first, last]
	// are exactly these, and the new leaves, which seq2 places by key,
	// go where these were.
	first := old.startOf(a)
	last, end := first, first
	var ls []*run[T]
	for f, lp := range old.leaves.From(first) {
		if len(ls) > 0 && f > b && f != last && f != end {
			break
		}
		ls, last, end = append(ls, *lp), f, (*lp).keys[len((*lp).keys)-1]
	}
	// The same leaves, their values merged with the new ones, less the
	// ones removed.
	size := len(keys)
	for _, l := range ls {
		size += len(l.keys)
	}
	nk := make([]uint64, 0, size)
	nv := make([]T, 0, size)
	removed, j := 0, 0
	for _, l := range ls {
		for i, k := range l.keys {
			for j < len(keys) && keys[j] < k {
				nk, nv = append(nk, keys[j]), append(nv, vals[j])
				j++
			}
			if k >= lo && k <= hi && (keep == nil || !keep(&l.vals[i])) {
				removed++
				continue
			}
			nk, nv = append(nk, k), append(nv, l.vals[i])
		}
	}
	nk, nv = append(nk, keys[j:]...), append(nv, vals[j:]...)
	// Too few for a leaf: take the next leaves in (with those starting
	// where they start or end, as above).
	if len(nk) < leafSize/2 && len(ls) > 0 {
		started := false
		for f, lp := range old.leaves.From(last) {
			if !started {
				if f == last {
					continue // taken already
				}
				started = true
			} else if f != last && f != end {
				break
			}
			l := *lp
			nk, nv = append(nk, l.keys...), append(nv, l.vals...)
			last, end = f, l.keys[len(l.keys)-1]
		}
	}
	// Leaves of leafSize to twice that, of equal sizes.
	nl := (len(nk) + 2*leafSize - 1) / (2 * leafSize)
	lk := make([]uint64, nl)
	lv := make([]*run[T], nl)
	for i := range nl {
		a, b := i*len(nk)/nl, (i+1)*len(nk)/nl
		lk[i], lv[i] = nk[a], &run[T]{keys: nk[a:b:b], vals: nv[a:b:b]}
	}
	lo2, hi2 := first, last
	if len(ls) == 0 {
		lo2, hi2 = 1, 0 // no leaf to remove
	}
	return &Seq[T]{leaves: old.leaves.replace(lo2, hi2, lk, lv), n: old.n - removed + len(keys)}
}
