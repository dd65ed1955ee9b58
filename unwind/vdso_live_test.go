//go:build linux && amd64

package unwind

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/internal/testprog"
	"github.com/sframekit/sframekit/targets"
)

// TestLiveVDSOFrame captures a thread that calls clock_gettime without
// end until one capture finds it inside the vDSO (whose image the
// Tracer reads from the target's memory), as sframe stack does (a Lazy
// symbolizer): the vDSO function must be named, and the walk must go on
// to the thread's start.
func TestLiveVDSOFrame(t *testing.T) {
	exe := testprog.Build(t, "testdata/vdsoprog.c", "-O2")
	p := testprog.StartCmd(t, exec.Command(exe)) // its spinning thread never blocks
	pid := p.PID()
	for try := 0; try < 500; try++ {
		tr := NewTracer()
		tr.Sym.Lazy = true
		proc, err := targets.AttachProcess(pid)
		if err != nil {
			t.Fatal(err)
		}
		trace, err := tr.Capture(proc)
		proc.Close()
		if err != nil {
			t.Fatal(err)
		}
		for i := range trace.Threads {
			th := &trace.Threads[i]
			if th.TID == pid || len(th.Frames) == 0 {
				continue
			}
			if m := th.Frames[0].Module; m == nil || m.File != "[vdso]" {
				continue
			}
			tr.Symbolize(trace)
			// The vDSO's symbols are its exported functions: frame 0 may
			// be in an internal one, unnamed, called by one of them.
			var names, vdso []string
			for j := range th.Frames {
				f := &th.Frames[j]
				names = append(names, f.Func)
				if f.Module != nil && f.Module.File == "[vdso]" {
					vdso = append(vdso, f.Func)
				}
			}
			if !strings.Contains(strings.Join(vdso, " "), "clock_gettime") {
				t.Errorf("frames in the vDSO named %q, want a clock_gettime among them", vdso)
			}
			if !th.Complete() || !strings.Contains(strings.Join(names, " "), "spin") {
				t.Errorf("walk from the vDSO: %v (%v %v), want it through spin to the end", names, th.Stop, th.Err)
			}
			t.Logf("capture %d: %v", try+1, names)
			return
		}
	}
	t.Skip("no capture of 500 found the thread inside the vDSO")
}
