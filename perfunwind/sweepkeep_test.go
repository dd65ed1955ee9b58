//go:build linux && amd64

package perfunwind

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sframekit/sframekit/internal/testprog"
)

// TestSweepReleasesCFI unwinds samples of a running program made of CFI
// alone (no SFrame, no frame pointers), as a live profiler does, then
// has the program exit and sweeps: its CFI tables and the caches of
// their rows are collected. The walks' context kept the rows it applied
// per table, and so the tables (and their files' sections), of every
// file the profiler had forgotten, until 65,536 rows piled up.
func TestSweepReleasesCFI(t *testing.T) {
	exe := testprog.Build(t, "../unwind/testdata/stackprog.c", "-O2", "-fomit-frame-pointer")
	s, _, samples := SeededSamples(t, exe)
	r := NewResolver(s)
	defer r.Close()
	pid := samples[0].Pid
	for _, smp := range samples {
		var st Stack
		s.Unwind(smp, &st)
		for _, f := range st.User() {
			r.Resolve(f.Map, f.PC)
		}
	}
	for range 2 { // again: the rows the first walks kept are applied
		for _, smp := range samples {
			var st Stack
			s.Unwind(smp, &st)
		}
	}
	if len(s.cfis) == 0 {
		t.Fatal("no CFI table cached: nothing to release")
	}
	var live atomic.Int64
	for _, c := range s.cfis {
		live.Add(2)
		runtime.SetFinalizer(c, func(*cfiCache) { live.Add(-1) })
		runtime.SetFinalizer(c.t, func(any) { live.Add(-1) })
	}
	samples = nil
	for tid := range s.procs[pid].threads {
		s.Exit(pid, tid)
	}
	if s.Known(pid) {
		t.Fatalf("process %d known after its threads' exits", pid)
	}
	if n := s.Sweep(r); n == 0 {
		t.Fatal("Sweep forgot no file")
	}
	for deadline := time.Now().Add(10 * time.Second); live.Load() > 0 && time.Now().Before(deadline); {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if n := live.Load(); n > 0 {
		t.Errorf("%d CFI tables and caches of the exited program still reachable after Sweep", n)
	}
}
