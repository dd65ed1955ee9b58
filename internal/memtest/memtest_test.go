package memtest

import (
	"runtime"
	"testing"
)

// sink keeps the parent's allocation reachable until the child has run.
var sink []byte

// TestPeakRSSOwnWork checks that a child's peak RSS is its own: the
// parent touches 128 MiB before starting a child that allocates nothing,
// which must measure far less. The child's ru_maxrss counted the
// parent's high-water mark (Go starts it with vfork, and Linux folds the
// parent's into the child's at its exec), so that a test bounding
// memory failed after any other test in the same binary had used more
// than its bound.
func TestPeakRSSOwnWork(t *testing.T) {
	if InChild(t) {
		return
	}
	sink = make([]byte, 128<<20)
	for i := range sink {
		sink[i] = byte(i)
	}
	rss := PeakRSS(t)
	runtime.KeepAlive(sink)
	sink = nil
	if rss > 64<<20 {
		t.Errorf("peak RSS of a child that allocates nothing: %d MiB, with the parent at 128 MiB or more", rss>>20)
	}
}
