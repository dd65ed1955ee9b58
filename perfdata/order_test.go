package perfdata

import (
	"math/rand"
	"slices"
	"testing"
)

// TestQueueSortMerges: sort orders records queued after a flush's sorted
// rest by merging them in; the queue ends in time order (arrival order
// for equal times) with every record, whatever the times of either part.
func TestQueueSortMerges(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for round := range 300 {
		var q queue
		for range rng.Intn(50) {
			q.push(nil, 0, 0, uint64(rng.Intn(100)), true, nil)
		}
		q.sort()
		for range rng.Intn(50) {
			q.push(nil, 0, 0, uint64(rng.Intn(100)), true, nil)
		}
		want := slices.Clone(q.ents)
		slices.SortStableFunc(want, func(a, b qent) int { return int(a.ts) - int(b.ts) })
		q.sort()
		if len(q.ents) != len(want) {
			t.Fatalf("round %d: %d records, want %d", round, len(q.ents), len(want))
		}
		for i := range want {
			if q.ents[i].ts != want[i].ts || q.ents[i].seq != want[i].seq {
				t.Fatalf("round %d: record %d is %d/%d, want %d/%d", round, i, q.ents[i].ts, q.ents[i].seq, want[i].ts, want[i].seq)
			}
		}
	}
}
