package recorder

import (
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sframekit/sframekit/internal/testprog"
	"github.com/sframekit/sframekit/unwind"
)

// recordDeep records testdata/deep.c, whose thread alternates between
// stacks of about 1 KB and 13 KB, with stack copies of size bytes, until
// the thread has had 0.4 s of CPU, and returns the profile's summary.
func recordDeep(t *testing.T, exe string, size uint32) (*Profile, string) {
	t.Helper()
	cmd := exec.Command(exe, "120")
	p := recordUntil(t, Options{Command: cmd, StackSize: size}, func() bool {
		return threadCPU(cmd.Process.Pid, "deep") >= 400*time.Millisecond
	})
	var sum strings.Builder
	p.WriteSummary(&sum)
	t.Logf("--stack-size %d:\n%s", size, sum.String())
	return p, sum.String()
}

var adviceRE = regexp.MustCompile(`(\d+) walks needed more stack than the (\d+) bytes copied: a copy of (\d+) \(the deepest needed (\d+)\) would have held them all`)

// TestStackCopyEnds records a thread whose deep stacks do not fit a copy
// of 4 KiB: those walks must be counted as ending where the copy does,
// none as "stack not readable", and the summary must name a copy that
// holds them, which a second recording with that copy confirms.
func TestStackCopyEnds(t *testing.T) {
	needPerf(t)
	exe := testprog.Build(t, "testdata/deep.c", "-O2", "-pthread")
	p, sum := recordDeep(t, exe, 4096)
	st := p.Unwinding()
	if st.CopyEnd < 20 {
		t.Fatalf("%d walks ended where the stack copy ends, want 20 or more (half the samples are 13 KB deep)", st.CopyEnd)
	}
	for w, n := range st.StopWhere {
		if w.Stop == unwind.StopMemory {
			t.Errorf("%d walks ended with %q in %s: the copy's end, counted elsewhere", n, w.Stop, w.Module)
		}
	}
	m := adviceRE.FindStringSubmatch(sum)
	if m == nil {
		t.Fatalf("no advice on the stack copy matching %q in the summary", adviceRE)
	}
	cut, _ := strconv.ParseUint(m[1], 10, 64)
	size, _ := strconv.ParseUint(m[3], 10, 64)
	need, _ := strconv.ParseUint(m[4], 10, 64)
	if cut != st.CopyEnd || need <= 4096 || size < need || size >= need+1024 || size > 32768 {
		t.Fatalf("advice for %d cut walks: a copy of %d for %d bytes; want all %d walks, more than 4096 bytes, rounded up to a KiB, under 32 KiB", cut, size, need, st.CopyEnd)
	}
	p2, _ := recordDeep(t, exe, uint32(size))
	st2 := p2.Unwinding()
	if st2.CopyEnd != 0 || st2.Stops[unwind.StopEnd] < 50 {
		t.Errorf("with the advised copy of %d bytes: %d walks complete, %d ended where the copy ends; want none cut", size, st2.Stops[unwind.StopEnd], st2.CopyEnd)
	}
}

// TestCFIFramesNotCompiled records a program whose code has CFI only:
// record must unwind it with the CFI rows its walks cache, without
// compiling SFrame from the CFI (which cost more than it saved on a C++
// compiler's stacks), and find nearly every frame's caller by CFI.
func TestCFIFramesNotCompiled(t *testing.T) {
	needPerf(t)
	exe := testprog.Build(t, "testdata/deep.c", "-O2", "-pthread")
	p, _ := recordDeep(t, exe, 0)
	st := p.Unwinding()
	if st.GenFiles != 0 || st.GenFrames != 0 {
		t.Errorf("SFrame compiled from CFI for %d files, %d frames; want none", st.GenFiles, st.GenFrames)
	}
	var all uint64
	for _, n := range st.Frames {
		all += n
	}
	if got := st.Frames[unwind.MethodCFI]; all == 0 || float64(got) < 0.9*float64(all) {
		t.Errorf("%d of %d frames' callers found by CFI, want 90%%: %+v", got, all, st.Frames)
	}
}
