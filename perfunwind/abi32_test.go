//go:build linux

package perfunwind_test

import (
	"bytes"
	"runtime"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/internal/testprog"
	"github.com/sframekit/sframekit/perfunwind"
)

// TestABI32 unwinds a perf record --call-graph dwarf recording of an
// i386 program (testprog.BuildI386), whose samples carry the 32-bit register set:
// each sample shows the interrupted function alone, not frames a 64-bit
// walk of its 4-byte stack slots makes up, and the summary says why, in
// one line.
func TestABI32(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("i386 programs run on x86-64 only")
	}
	path := record(t, recording{name: "i386", prog: func(t testing.TB) []string {
		return []string{testprog.BuildI386(t, "testdata/prog.c", "-O2", "-g"), work(t)}
	}})

	r, s := openSession(t, path, perfunwind.Options{})
	res := perfunwind.NewResolver(s)
	defer res.Close()
	var n, named int
	err := s.Process(r, perfunwind.ProcessOptions{}, func(st *perfunwind.Stack) error {
		u := st.User()
		if len(u) == 0 {
			return nil
		}
		n++
		if len(u) > 1 {
			t.Errorf("sample at %d: %d user frames, want the interrupted one alone", st.Time, len(u))
		}
		if !u[0].Exact || !u[0].First {
			t.Errorf("sample at %d: user frame %#x not exact", st.Time, u[0].PC)
		}
		if u[0].Map != nil && strings.HasSuffix(u[0].Map.Name, "/prog") && res.Resolve(u[0].Map, u[0].PC).Short != "" {
			named++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 || named == 0 {
		t.Fatalf("%d samples with a user frame, %d of them named in the program", n, named)
	}
	var sum bytes.Buffer
	if err := perfunwind.WriteSummary(&sum, s); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sum.String(), "32-bit (i386) processes are not unwound") {
		t.Errorf("summary does not name the 32-bit processes:\n%s", sum.String())
	}
	t.Logf("%d samples, %d in the program\n%s", n, named, sum.String())
}
