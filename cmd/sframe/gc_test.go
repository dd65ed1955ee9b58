package main

import (
	"runtime"
	"testing"

	"github.com/sframekit/sframekit/internal/memtest"
)

// sink keeps allocations from being optimized away.
var sink []byte

// TestGCDelayed: with the command's collector settings (delayGC), a
// command that allocates less than gcFirst never collects, and one that
// allocates gigabytes of garbage keeps its memory near gcFirst and twice
// what is live, not near a high limit (1 GiB before).
func TestGCDelayed(t *testing.T) {
	if memtest.InChild(t) {
		delayGC()
		if n := collectionsFor(64); n != 0 {
			t.Fatalf("%d collections for 64 MiB of garbage, want none", n)
		}
		t.Logf("%d collections for 3 GiB", churn())
		return
	}
	memtest.AtMost(t, 300<<20, "for 3 GiB of garbage")
}

// collectionsFor returns the collections that n MiB of garbage took.
func collectionsFor(n int) uint32 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	gc0 := ms.NumGC
	for range n {
		sink = touched(1 << 20)
	}
	runtime.ReadMemStats(&ms)
	return ms.NumGC - gc0
}

// churn allocates 3 GiB of garbage, 8 MiB live, and returns the
// collections it took.
func churn() uint32 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	gc0 := ms.NumGC
	live := make([][]byte, 8)
	for i := range 3 << 10 {
		live[i%len(live)] = touched(1 << 20)
	}
	sink = live[0]
	runtime.ReadMemStats(&ms)
	return ms.NumGC - gc0
}

// touched returns n bytes whose every page was written, as work's are.
func touched(n int) []byte {
	b := make([]byte, n)
	for i := 0; i < n; i += 4096 {
		b[i] = 1
	}
	return b
}

// TestGCDelayedAgain: a recording's collector settings (delayGCUntil
// recordGCFirst) let 40 MiB of garbage go uncollected; once the command
// sets its own again (delayGC, after the recording), a collection ends
// only the latest delay: 48 MiB of garbage then take no collection, as
// with delayGC alone.
func TestGCDelayedAgain(t *testing.T) {
	if !memtest.InChild(t) {
		memtest.AtMost(t, 300<<20, "for 3 GiB of garbage")
		return
	}
	delayGCUntil(recordGCFirst)
	if n := collectionsFor(40); n != 0 {
		t.Fatalf("recording: %d collections for 40 MiB of garbage, want none", n)
	}
	delayGC()
	runtime.GC() // both delays' sentinels finalized
	runtime.GC() // the finalizers have run
	if n := collectionsFor(48); n != 0 {
		t.Fatalf("after the recording: %d collections for 48 MiB of garbage, want none", n)
	}
	// Collected as usual from gcFirst on (AtMost checks the memory).
	churn()
}
