package cowseq

import (
	"math/rand"
	"slices"
	"testing"
)

// ref is the flat sorted slice a Seq stands for.
type ref struct {
	keys []uint64
	vals []int
}

func (r ref) replace(lo, hi uint64, keep func(*int) bool, keys []uint64, vals []int) ref {
	var out ref
	for i, k := range r.keys {
		if k >= lo && k <= hi && (keep == nil || !keep(&r.vals[i])) {
			continue
		}
		out.keys, out.vals = append(out.keys, k), append(out.vals, r.vals[i])
	}
	for j, k := range keys {
		i, _ := slices.BinarySearchFunc(out.keys, k, func(e, t uint64) int {
			if e <= t {
				return -1
			}
			return 1
		})
		out.keys, out.vals = slices.Insert(out.keys, i, k), slices.Insert(out.vals, i, vals[j])
	}
	return out
}

func check(t *testing.T, s *Seq[int], r ref, rng *rand.Rand) {
	t.Helper()
	if s.Len() != len(r.keys) {
		t.Fatalf("Len %d, want %d", s.Len(), len(r.keys))
	}
	i := 0
	for k, v := range s.All() {
		if k != r.keys[i] || *v != r.vals[i] {
			t.Fatalf("value %d: %d=%d, want %d=%d", i, k, *v, r.keys[i], r.vals[i])
		}
		i++
	}
	if i != len(r.keys) {
		t.Fatalf("All gave %d values, want %d", i, len(r.keys))
	}
	for range 20 {
		key := uint64(rng.Intn(1100))
		j := lastAtMost(r.keys, key)
		got := s.Floor(key)
		if j < 0 {
			if got != nil {
				t.Fatalf("Floor(%d) = %d, want none", key, *got)
			}
			continue
		}
		if got == nil || *got != r.vals[j] {
			t.Fatalf("Floor(%d) = %v, want %d", key, got, r.vals[j])
		}
		n := 0
		for k := range s.From(key) {
			if k < key {
				t.Fatalf("From(%d) gave %d", key, k)
			}
			n++
		}
		if want := len(r.keys) - (lastAtMost(r.keys, key-1) + 1); key > 0 && n != want {
			t.Fatalf("From(%d): %d values, want %d", key, n, want)
		}
	}
	if s == nil {
		return
	}
	nl := 0
	for f, l := range s.leaves.All() {
		if len((*l).keys) == 0 || f != (*l).keys[0] || len((*l).keys) > 2*leafSize {
			t.Fatalf("leaf %d: %d keys, first %d", nl, len((*l).keys), f)
		}
		nl++
	}
	for c, ch := range s.leaves.chunks {
		if len(ch.keys) == 0 || s.leaves.firsts[c] != ch.keys[0] {
			t.Fatalf("chunk %d: %d keys, first %d", c, len(ch.keys), s.leaves.firsts[c])
		}
	}
}

// lastAtMost returns the index of the last key <= key, or -1.
func lastAtMost(keys []uint64, key uint64) int {
	i := len(keys) - 1
	for i >= 0 && keys[i] > key {
		i--
	}
	return i
}

// TestAgainstFlat makes random changes to a Seq and to a flat slice, and
// checks that they hold the same values after each, and that every
// version before still does.
func TestAgainstFlat(t *testing.T) {
	// Keys from a wide range, and from a narrow one: runs of equal keys
	// longer than a leaf.
	for _, keyRange := range []int{1000, 20} {
		againstFlat(t, keyRange)
	}
}

func againstFlat(t *testing.T, keyRange int) {
	rng := rand.New(rand.NewSource(1))
	var s *Seq[int]
	var r ref
	type version struct {
		s *Seq[int]
		r ref
	}
	var versions []version
	val := 0
	for step := range 4000 {
		var keys []uint64
		var vals []int
		for range rng.Intn(4) {
			keys = append(keys, uint64(rng.Intn(keyRange)))
		}
		if rng.Intn(3) == 0 {
			for range rng.Intn(200) {
				keys = append(keys, uint64(rng.Intn(keyRange)))
			}
		}
		slices.Sort(keys)
		for range keys {
			val++
			vals = append(vals, val)
		}
		lo, hi := uint64(rng.Intn(keyRange)), uint64(0)
		switch rng.Intn(4) {
		case 0:
			hi = lo + uint64(rng.Intn(3))
		case 1:
			hi = lo + uint64(rng.Intn(keyRange/10+1))
		case 2:
			lo, hi = 1, 0 // nothing removed
		}
		var keep func(*int) bool
		if rng.Intn(2) == 0 {
			keep = func(v *int) bool { return *v%3 != 0 }
		}
		s = s.Replace(lo, hi, keep, keys, vals)
		r = r.replace(lo, hi, keep, keys, vals)
		check(t, s, r, rng)
		if step%100 == 0 {
			versions = append(versions, version{s, r})
		}
	}
	for _, v := range versions {
		check(t, v.s, v.r, rng)
	}
}

// TestCostOfChanges counts what building n values one at a time copies,
// at either end and in the middle: O(n√(n/64)) chunk pointers (a flat
// array: n²/2 values).
func TestCostOfChanges(t *testing.T) {
	const n = 100000
	for _, order := range []string{"ascending", "descending", "random"} {
		rng := rand.New(rand.NewSource(2))
		var s *Seq[int]
		copied := 0
		for i := range n {
			k := uint64(i)
			switch order {
			case "descending":
				k = n - uint64(i)
			case "random":
				k = rng.Uint64()
			}
			s = s.Replace(1, 0, nil, []uint64{k}, []int{i})
			copied += len(s.leaves.chunks)
			if c := s.Floor(k); c == nil || *c != i {
				t.Fatalf("%s: %d not found", order, k)
			}
		}
		// Chunks of about √(n/64) leaves: the chunk array is that to
		// three times that long.
		t.Logf("%s: %d leaves in %d chunks for %d values; %d chunk pointers copied", order, s.leaves.n, len(s.leaves.chunks), n, copied)
		if copied > 4*n*40 {
			t.Errorf("%s: %d chunk pointers copied for %d values", order, copied, n)
		}
	}
}
