//go:build linux

package perfunwind_test

import (
	"runtime"
	"testing"

	"github.com/sframekit/sframekit/internal/testprog"
	"github.com/sframekit/sframekit/perfunwind"
	"github.com/sframekit/sframekit/unwind"
)

// TestCallerInNoMapping unwinds a recording of a program whose frame
// pointer, in its hot loop, points at a made-up frame with a return
// address in no mapping (testdata/badfp.c): the walk ends at the frame
// before it, as perf's does, and shows no caller where no code is (such
// a frame, a different garbage address in each sample, split stacks).
func TestCallerInNoMapping(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("x86-64 assembler")
	}
	exe := testprog.Build(t, "testdata/badfp.c", "-O2", "-fno-omit-frame-pointer", "-mno-red-zone",
		"-fno-asynchronous-unwind-tables", "-fno-unwind-tables")
	path := record(t, recording{name: "badfp", prog: func(testing.TB) []string { return []string{exe, "500"} }})
	r, s := openSession(t, path, perfunwind.Options{})
	res := perfunwind.NewResolver(s)
	defer res.Close()
	var inSpin, noModule int
	err := s.Process(r, perfunwind.ProcessOptions{}, func(st *perfunwind.Stack) error {
		u := st.User()
		if len(u) == 0 || u[0].Map == nil || res.Resolve(u[0].Map, u[0].LookupPC()).Name != "spin" {
			return nil
		}
		inSpin++
		if st.Stop == unwind.StopNoModule {
			noModule++
		}
		for _, f := range u[1:] {
			if f.Map == nil || !f.Map.Exec {
				t.Errorf("sample at %d: caller %#x in no executable mapping", st.Time, f.PC)
				return nil
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if inSpin < 100 || noModule < inSpin/2 {
		t.Fatalf("%d samples in spin, %d of them ending at a PC in no module: want 100 or more, most of them", inSpin, noModule)
	}
}
