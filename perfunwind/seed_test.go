//go:build linux && amd64

package perfunwind_test

import (
	"slices"
	"testing"

	"github.com/sframekit/sframekit/internal/testprog"
	"github.com/sframekit/sframekit/perfunwind"
	"github.com/sframekit/sframekit/unwind"
)

// TestSeedProcess is what a live profiler does: a session seeded from a
// running process's /proc files unwinds samples of it, here made from its
// threads' registers and 8 KiB copies of their stacks (as
// PERF_SAMPLE_REGS_USER and PERF_SAMPLE_STACK_USER give them), and must
// give the frames unwind.Tracer gives from the whole stack, up to where
// the copy ends; thread names come from the seeding.
func TestSeedProcess(t *testing.T) {
	exe := testprog.Build(t, "../unwind/testdata/stackprog.c", "-O2", "-fomit-frame-pointer", "-Wa,--gsframe")
	s, p, samples := perfunwind.SeededSamples(t, exe)
	tr := unwind.NewTracer()
	trace, err := tr.Capture(p)
	if err != nil {
		t.Fatal(err)
	}
	threads := p.Threads()
	compared := 0
	for i, th := range threads {
		var st perfunwind.Stack
		s.Unwind(samples[i], &st)
		if st.Comm != th.Name {
			t.Errorf("thread %d: name %q, want %q", th.TID, st.Comm, th.Name)
		}
		var got, want []uint64
		for _, f := range st.User() {
			got = append(got, f.PC)
		}
		for _, f := range trace.Threads[i].Frames {
			want = append(want, f.PC)
		}
		if st.CopyEnd() && len(got) <= len(want) {
			want = want[:len(got)]
		}
		if !slices.Equal(got, want) {
			t.Errorf("thread %d: %x, want %x (%v %v)", th.TID, got, want, st.Stop, st.Err)
		}
		compared++
	}
	if compared != 7 {
		t.Errorf("%d threads compared, want 7", compared)
	}
}
