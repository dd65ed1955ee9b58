//go:build linux && amd64

package perfunwind

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sframekit/sframekit/internal/testprog"
)

// TestDropTables unwinds samples of a running program made of CFI alone
// (no SFrame, no frame pointers), then drops the tables: the frames keep
// their names, the files' tables and the caches of their rows are
// collected, and a sample unwound after that is walked without them,
// with no failure.
func TestDropTables(t *testing.T) {
	exe := testprog.Build(t, "../unwind/testdata/stackprog.c", "-O2", "-fomit-frame-pointer")
	s, _, samples := SeededSamples(t, exe)
	r := NewResolver(s)
	defer r.Close()
	var frames []Frame
	var names []string
	for _, smp := range samples {
		var st Stack
		s.Unwind(smp, &st)
		for _, f := range st.User() {
			frames = append(frames, f)
			names = append(names, r.Resolve(f.Map, f.PC).Name)
		}
	}
	if len(s.cfis) == 0 {
		t.Fatalf("%d frames unwound and no CFI table cached: nothing to drop", len(frames))
	}
	var live atomic.Int64
	for _, c := range s.cfis {
		live.Add(2)
		runtime.SetFinalizer(c, func(*cfiCache) { live.Add(-1) })
		runtime.SetFinalizer(c.t, func(any) { live.Add(-1) })
	}

	s.DropTables(nil)
	for i, f := range frames {
		if got := r.Resolve(f.Map, f.PC).Name; got != names[i] {
			t.Errorf("frame %d at %#x: %q after the drop, %q before", i, f.PC, got, names[i])
		}
	}
	for _, smp := range samples {
		var st Stack
		s.Unwind(smp, &st)
		if !st.Unwound || len(st.Frames) == 0 || st.Frames[0].PC != smp.Regs.PC() {
			t.Errorf("thread %d after the drop: unwound %v, %d frames, want the first at %#x", smp.Tid, st.Unwound, len(st.Frames), smp.Regs.PC())
		}
	}
	frames = nil
	for deadline := time.Now().Add(10 * time.Second); live.Load() > 0 && time.Now().Before(deadline); {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if n := live.Load(); n > 0 {
		t.Errorf("%d CFI tables and caches still reachable after the drop", n)
	}
}
