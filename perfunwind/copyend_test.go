//go:build linux

package perfunwind_test

import (
	"strings"
	"testing"

	"github.com/sframekit/sframekit/internal/testprog"
	"github.com/sframekit/sframekit/perfunwind"
	"github.com/sframekit/sframekit/unwind"
)

// TestCopyEndCounted unwinds a perf recording, with stack copies of 4
// KiB, of a thread whose stack is 13 KB deep half of the time: those
// walks end where the copy does, and the summary must count them so (not
// as "stack not readable") and name a copy that would have held them.
func TestCopyEndCounted(t *testing.T) {
	exe := testprog.Build(t, "../recorder/testdata/deep.c", "-O2", "-pthread")
	path := record(t, recording{name: "deep-4k", prog: func(testing.TB) []string { return []string{exe, "1"} },
		opts: []string{"--call-graph", "dwarf,4096"}})
	_, st := walks(t, path, perfunwind.Options{})
	if st.CopyEnd < 20 {
		t.Fatalf("%d walks ended where the stack copy ends, want 20 or more: %+v", st.CopyEnd, st)
	}
	for w, n := range st.StopWhere {
		if w.Stop == unwind.StopMemory {
			t.Errorf("%d walks ended with %q in %s: the copy's end, counted elsewhere", n, w.Stop, w.Module)
		}
	}
	// The deep thread's cut walks are measured by its complete ones; a
	// sample in ld.so's start, if cut, has none ("would have held the N
	// whose stacks ...").
	_, sum := summarize(t, path)
	if !strings.Contains(sum, "walks needed more stack than the 4096 bytes copied: a copy of ") || !strings.Contains(sum, " would have held ") {
		t.Errorf("the summary does not name a copy that would have held the cut walks")
	}
}

// TestCopyEndBeyondKernel unwinds a recording of a thread whose deep
// walks need about 80 KB of stack, more than any copy the kernel makes:
// the summary says so, and names the walk that needs no copy (--bpf).
func TestCopyEndBeyondKernel(t *testing.T) {
	exe := testprog.Build(t, "../recorder/testdata/deep.c", "-O2", "-pthread", "-DDEEP=1000")
	path := record(t, recording{name: "deep-1000", prog: func(testing.TB) []string { return []string{exe, "1"} },
		opts: []string{"--call-graph", "dwarf,4096"}})
	_, sum := summarize(t, path)
	if !strings.Contains(sum, "more than the kernel copies") || !strings.Contains(sum, "sframe record --bpf walks the stack in the kernel") {
		t.Errorf("the summary does not say that no copy holds the deep walks, nor what does:\n%s", sum)
	}
}

// TestCopyEndOtherStack unwinds a perf recording, with stack copies of 4
// KiB, of a thread that runs on its own stack and on a coroutine's: the
// coroutine's walks are cut by the copy, the thread's own are complete.
// The top of the thread's stack measures nothing of the coroutine's,
// whose stack lies elsewhere: the summary must not take the distance
// between the two (terabytes) for what the cut walks needed, and so
// claim that no copy could hold them (a 16 KiB copy does), nor name a
// copy for them.
func TestCopyEndOtherStack(t *testing.T) {
	exe := testprog.Build(t, "testdata/coro.c", "-O2")
	path := record(t, recording{name: "coro-4k", prog: func(testing.TB) []string { return []string{exe, "1"} },
		opts: []string{"--call-graph", "dwarf,4096"}})
	s, sum := summarize(t, path)
	if s.Stats.CopyEnd < 20 || s.Stats.Stops[unwind.StopEnd] < 20 {
		t.Fatalf("%d walks ended where the stack copy ends and %d at the outermost frame, want 20 or more of each", s.Stats.CopyEnd, s.Stats.Stops[unwind.StopEnd])
	}
	if strings.Contains(sum, "more than the kernel copies") {
		t.Errorf("the summary measures the coroutine's walks by the top of the thread's own stack")
	}
	// The main stack's few cut walks (ld.so's, at the start) are measured.
	if !strings.Contains(sum, "walks needed more stack than the 4096 bytes copied") || strings.Contains(sum, "would have held them all") {
		t.Errorf("the summary does not say that the coroutine's cut walks could not be measured")
	}
}

// TestCopyEndGoroutines unwinds a perf recording, with stack copies of 4
// KiB, of a Go program whose threads run goroutines of two kinds: deep
// ones, whose walks the copy cuts, and shallow ones, whose walks are
// complete and end at the tops of their own stacks. All of them lie in
// the heap, one stretch of anonymous memory, so the end of the memory
// tells them apart no more: the distance from a deep goroutine's SP to
// the top of a shallow one's stack, which the summary took for what the
// cut walk needed ("needed 5368696 bytes, more than the kernel copies",
// where 120 KB would do), is no measure, and the summary must name none.
func TestCopyEndGoroutines(t *testing.T) {
	path := record(t, recording{name: "gostacks-4k", prog: func(t testing.TB) []string {
		return []string{testprog.BuildGo(t, "./testdata/gostacks"), "150"}
	}, opts: []string{"--call-graph", "dwarf,4096"}})
	s, sum := summarize(t, path)
	if s.Stats.CopyEnd < 20 || s.Stats.Stops[unwind.StopEnd] < 20 {
		t.Fatalf("%d walks ended where the stack copy ends and %d at the outermost frame, want 20 or more of each", s.Stats.CopyEnd, s.Stats.Stops[unwind.StopEnd])
	}
	if !strings.Contains(sum, "walks needed more stack than the 4096 bytes copied") {
		t.Errorf("the summary does not count the cut walks")
	}
	if strings.Contains(sum, "more than the kernel copies") || strings.Contains(sum, "would have held") {
		t.Errorf("the summary measures the deep goroutines' walks by the tops of other goroutines' stacks")
	}
}

// TestCoroutineWalksEnd unwinds a recording, with stack copies that hold
// them whole, of a thread that runs on a coroutine's stack: its walks end
// at the frame makecontext planted (glibc's __start_context, whose
// address, a function's first byte, no call wrote), the coroutine's
// outermost, not for want of an unwind rule there.
func TestCoroutineWalksEnd(t *testing.T) {
	exe := testprog.Build(t, "testdata/coro.c", "-O2")
	path := record(t, recording{name: "coro-32k", prog: func(testing.TB) []string { return []string{exe, "1"} },
		opts: []string{"--call-graph", "dwarf,32768"}})
	r, s := openSession(t, path, perfunwind.Options{})
	res := perfunwind.NewResolver(s)
	defer res.Close()
	coroutine, ended := 0, 0
	err := s.Process(r, perfunwind.ProcessOptions{}, func(st *perfunwind.Stack) error {
		inCoroutine := false
		for i := range st.Frames {
			if res.Resolve(st.Frames[i].Map, st.Frames[i].LookupPC()).Name == "coroutine" {
				inCoroutine = true
			}
		}
		if inCoroutine && !st.CopyEnd() {
			coroutine++
			if st.Stop == unwind.StopEnd {
				ended++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if coroutine < 20 || ended != coroutine {
		var sum strings.Builder
		perfunwind.WriteSummary(&sum, s)
		t.Errorf("%d of %d walks on the coroutine's stack ended at its outermost frame, want all (20 or more)\n%s", ended, coroutine, sum.String())
	}
}

// summarize unwinds the recording at path and returns the session and
// its summary (WriteSummary), which it logs.
func summarize(t *testing.T, path string) (*perfunwind.Session, string) {
	t.Helper()
	r, s := openSession(t, path, perfunwind.Options{})
	if err := s.Process(r, perfunwind.ProcessOptions{}, func(*perfunwind.Stack) error { return nil }); err != nil {
		t.Fatal(err)
	}
	var sum strings.Builder
	if err := perfunwind.WriteSummary(&sum, s); err != nil {
		t.Fatal(err)
	}
	t.Logf("summary:\n%s", sum.String())
	return s, sum.String()
}
