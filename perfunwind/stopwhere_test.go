//go:build linux

package perfunwind_test

import (
	"testing"

	"github.com/sframekit/sframekit/perfunwind"
)

// TestSweepStopWhere: the places where walks ended early are kept by
// mapping name, and a live profiler sees a program of a path of its own
// (a build's test binary, a JIT's /tmp/perf-PID.map) at each start:
// once the program has exited, Sweep forgets its places, so that they
// do not pile up for as long as the profiler runs. The program has
// neither CFI nor frame pointers, so that its walks end early in it.
func TestSweepStopWhere(t *testing.T) {
	path := record(t, recording{name: "nocfi-nofp", prog: cProg("-O2", "-fomit-frame-pointer", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables")})
	rd, s := openSession(t, path, perfunwind.Options{})
	if err := s.Process(rd, perfunwind.ProcessOptions{}, func(*perfunwind.Stack) error { return nil }); err != nil {
		t.Fatal(err)
	}
	in := 0
	for p := range s.Stats.StopWhere {
		if p.Module != "" {
			in++
		}
	}
	if in == 0 {
		t.Fatalf("no walk ended early in a mapping: %+v", s.Stats.StopWhere)
	}
	if sz := s.Sizes(); sz.Processes != 0 {
		t.Fatalf("%d processes known at the recording's end", sz.Processes)
	}
	r := perfunwind.NewResolver(s)
	defer r.Close()
	s.Sweep(r)
	for p, n := range s.Stats.StopWhere {
		if p.Module != "" {
			t.Errorf("after Sweep: %d walks ended with %q in %s, which no process maps", n, p.Reason(), p.Module)
		}
	}
}
