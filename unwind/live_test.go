//go:build linux && amd64

package unwind

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sframekit/sframekit/internal/testprog"
	"github.com/sframekit/sframekit/targets"
)

func TestMain(m *testing.M) { testprog.Main(m) }

// Build configurations of testdata/stackprog.c.
var (
	// SFrame v1 (gas 2.40), no frame pointers.
	cfgSFrameO2 = []string{"-O2", "-fomit-frame-pointer", "-Wa,--gsframe"}
	// SFrame v1 with frame pointers.
	cfgSFrameO0 = []string{"-O0", "-fno-omit-frame-pointer", "-Wa,--gsframe"}
	// Neither SFrame nor CFI for the program's code: frame pointers only
	// (no shrink-wrapping, which defeats gdb's prologue analysis).
	cfgFPOnly = []string{"-O1", "-fno-omit-frame-pointer", "-fno-shrink-wrap", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables"}
)

// buildProg compiles testdata/stackprog.c with flags (once per test
// binary and flag set) and returns the executable.
func buildProg(t testing.TB, flags []string) string {
	t.Helper()
	return testprog.Build(t, "testdata/stackprog.c", flags...)
}

// prog is a running stackprog; cmd is Proc.Cmd, kept for bench_test.go.
type prog struct {
	*testprog.Proc
	cmd *exec.Cmd
}

// startProg runs exe with args and waits until every thread is blocked.
func startProg(t testing.TB, exe string, args ...string) *prog {
	t.Helper()
	p := testprog.Start(t, exe, args...)
	return &prog{Proc: p, cmd: p.Cmd}
}

// waitBlocked waits until every thread of pid sleeps.
func waitBlocked(t testing.TB, pid int) {
	t.Helper()
	testprog.WaitBlocked(t, pid, 0)
}

var (
	gdbThreadRe = regexp.MustCompile(`^Thread \d+ \(.*LWP (\d+)`)
	gdbFrameRe  = regexp.MustCompile(`^#(\d+)\s+(?:(0x[0-9a-f]+) in |(<signal handler called>))`)
)

// gdbStacks runs gdb in batch mode with args (a -p PID or an executable
// and a core) and returns each thread's frames as "0x..." PCs, or "SIG"
// for a signal trampoline. gdb reads no separate debug files, so that
// libc's inline frames (DWARF-only) are not shown.
func gdbStacks(t testing.TB, args ...string) map[int][]string {
	t.Helper()
	testprog.NeedTool(t, "gdb")
	a := []string{"-nx", "-batch", "-iex", "set debug-file-directory /nonexistent", "-iex", "set debuginfod enabled off"}
	a = append(a, args...)
	a = append(a, "-ex", "set backtrace past-main on", "-ex", "set backtrace limit 2000", "-ex", "thread apply all bt -frame-info location-and-address")
	cmd := exec.Command("gdb", a...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("gdb: %v\n%s", err, out)
	}
	stacks := map[int][]string{}
	tid := -1
	for _, l := range strings.Split(string(out), "\n") {
		if m := gdbThreadRe.FindStringSubmatch(l); m != nil {
			tid, _ = strconv.Atoi(m[1])
			continue
		}
		m := gdbFrameRe.FindStringSubmatch(l)
		if m == nil || tid < 0 {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		if n != len(stacks[tid]) {
			t.Fatalf("gdb frame #%d out of order in thread %d:\n%s", n, tid, out)
		}
		if m[3] != "" {
			stacks[tid] = append(stacks[tid], "SIG")
		} else {
			v, _ := strconv.ParseUint(m[2], 0, 64)
			stacks[tid] = append(stacks[tid], fmt.Sprintf("%#x", v))
		}
	}
	if len(stacks) == 0 {
		t.Fatalf("no stacks in gdb output:\n%s", out)
	}
	return stacks
}

// pcs returns a thread's frames in gdbStacks's form.
func pcs(th *ThreadTrace) []string {
	out := make([]string, len(th.Frames))
	for i := range th.Frames {
		if th.Frames[i].Signal {
			out[i] = "SIG"
		} else {
			out[i] = fmt.Sprintf("%#x", th.Frames[i].PC)
		}
	}
	return out
}

// captureLive attaches to pid, captures every thread and detaches.
func captureLive(t testing.TB, tr *Tracer, pid int) *Trace {
	t.Helper()
	p, err := targets.AttachProcess(pid)
	if err != nil {
		t.Fatalf("attach: %v", err)
	}
	defer p.Close()
	tr2, err := tr.Capture(p)
	if err != nil {
		t.Fatalf("capture: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("detach: %v", err)
	}
	tr.Symbolize(tr2)
	return tr2
}

// funcs returns the function names of a thread's frames.
func funcs(th *ThreadTrace) []string {
	out := make([]string, len(th.Frames))
	for i := range th.Frames {
		out[i] = th.Frames[i].Func
		if th.Frames[i].Signal {
			out[i] = "SIG"
		}
	}
	return out
}

// compareWithGDB checks that every thread of trace has gdb's frames.
// It returns a description of the first difference, or "".
func compareWithGDB(trace *Trace, gdb map[int][]string) string {
	if len(gdb) != len(trace.Threads) {
		return fmt.Sprintf("gdb shows %d threads, we have %d", len(gdb), len(trace.Threads))
	}
	for i := range trace.Threads {
		th := &trace.Threads[i]
		want, ok := gdb[th.TID]
		if !ok {
			return fmt.Sprintf("thread %d not in gdb's output", th.TID)
		}
		got := pcs(th)
		if strings.Join(got, " ") != strings.Join(want, " ") {
			return fmt.Sprintf("thread %d (%s): frames differ\n got %v\nwant %v\n(stop %v, err %v)", th.TID, th.Name, got, want, th.Stop, th.Err)
		}
		if !th.Complete() {
			return fmt.Sprintf("thread %d (%s): stopped early: %v %v", th.TID, th.Name, th.Stop, th.Err)
		}
	}
	return ""
}

// checkShape checks what the program's source says about each thread:
// the functions at the known depths, the signal frame and the unwinding
// method of the program's own frames.
func checkShape(t *testing.T, trace *Trace, deepDepth int, progMethod Method) {
	t.Helper()
	byName := map[string]*ThreadTrace{}
	for i := range trace.Threads {
		byName[trace.Threads[i].Name] = &trace.Threads[i]
	}
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("depth%d", 3+i)
		th := byName[name]
		if th == nil {
			t.Fatalf("no thread %s", name)
		}
		f := funcs(th)
		// pause, block_here, recurse x (depth+1), worker, start_thread, clone3
		n := 3 + i + 1
		if len(f) != n+5 || f[1] != "block_here" || f[n+2] != "worker" {
			t.Errorf("%s: frames %v", name, f)
			continue
		}
		for j := 2; j < n+2; j++ {
			if f[j] != "recurse" {
				t.Errorf("%s: frame %d is %s, want recurse", name, j, f[j])
			}
		}
	}
	deep := byName["deep0"]
	if deep == nil {
		t.Fatal("no deep thread")
	}
	if f := funcs(deep); len(f) != deepDepth+6 || f[deepDepth+3] != "deep" {
		t.Errorf("deep0: %d frames, want %d", len(f), deepDepth+6)
	}
	sig := byName["sig"]
	if sig == nil {
		t.Fatal("no sig thread")
	}
	f := funcs(sig)
	si := -1
	for i, n := range f {
		if n == "SIG" {
			si = i
		}
	}
	if si < 2 || f[si-1] != "on_signal" || !strings.Contains(strings.Join(f[si+1:], " "), "raise send_signal sigthread") {
		t.Errorf("sig: frames %v", f)
	} else if !sig.Frames[si+1].Exact || sig.Frames[si+2].Exact {
		t.Errorf("sig: frame after the signal frame should be exact, the next not")
	}
	sortT := byName["sort"]
	if sortT == nil {
		t.Fatal("no sort thread")
	}
	if s := strings.Join(funcs(sortT), " "); !strings.Contains(s, "block_here compare ") || !strings.Contains(s, " qsort_r do_sort sortthread start_thread") {
		t.Errorf("sort: frames %s", s)
	}
	// Frames of the program's own functions (other than the last one of
	// each thread, and _start, which has CFI only) use progMethod.
	for i := range trace.Threads {
		th := &trace.Threads[i]
		for j := range th.Frames[:len(th.Frames)-1] {
			fr := &th.Frames[j]
			if fr.Module != nil && fr.Module.Name == deep.Frames[1].Module.Name && fr.Func != "_start" && !fr.Signal && fr.Method != progMethod {
				t.Errorf("thread %s frame %d (%s): method %v, want %v", th.Name, j, fr.Func, fr.Method, progMethod)
			}
		}
	}
}

func testLive(t *testing.T, flags []string, progMethod Method) {
	exe := buildProg(t, flags)
	testprog.NeedTool(t, "gdb")
	const depth = 300
	p := startProg(t, exe, "1", strconv.Itoa(depth))
	pid := p.PID()
	tr := NewTracer()
	var diff string
	for attempt := 0; attempt < 3; attempt++ {
		trace := captureLive(t, tr, pid)
		if len(trace.Threads) != 7 {
			t.Fatalf("%d threads, want 7", len(trace.Threads))
		}
		if attempt == 0 {
			checkShape(t, trace, depth, progMethod)
		}
		waitBlocked(t, pid)
		diff = compareWithGDB(trace, gdbStacks(t, "-p", strconv.Itoa(pid)))
		if diff == "" {
			break
		}
		// A thread may have been caught restarting its system call by
		// one of the two captures: try again.
		waitBlocked(t, pid)
	}
	if diff != "" {
		t.Error(diff)
	}
	p.Ping(t, "alive")
}

// TestLiveSFrameOmitFP compares with gdb on a program built with SFrame
// and without frame pointers.
func TestLiveSFrameOmitFP(t *testing.T) { testLive(t, cfgSFrameO2, MethodSFrame) }

// TestLiveSFrameFP: SFrame, -O0, frame pointers.
func TestLiveSFrameFP(t *testing.T) { testLive(t, cfgSFrameO0, MethodSFrame) }

// TestLiveFPOnly: no SFrame and no CFI for the program: frame pointers.
func TestLiveFPOnly(t *testing.T) { testLive(t, cfgFPOnly, MethodFP) }

// TestCore compares with gdb on a core file written by gcore.
func TestCore(t *testing.T) {
	exe := buildProg(t, cfgSFrameO2)
	testprog.NeedTool(t, "gcore")
	testprog.NeedTool(t, "gdb")
	p := startProg(t, exe, "1", "250")
	pid := p.PID()
	base := filepath.Join(t.TempDir(), "core")
	if out, err := exec.Command("gcore", "-o", base, strconv.Itoa(pid)).CombinedOutput(); err != nil {
		t.Fatalf("gcore: %v\n%s", err, out)
	}
	corePath := fmt.Sprintf("%s.%d", base, pid)
	p.Ping(t, "after-gcore")
	c, err := targets.OpenCore(corePath, exe)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tr := NewTracer()
	trace, err := tr.Capture(c)
	if err != nil {
		t.Fatal(err)
	}
	tr.Symbolize(trace)
	// A core names only the main thread: take the others' names from the
	// live process.
	for i := range trace.Threads {
		th := &trace.Threads[i]
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/comm", pid, th.TID)); err == nil {
			th.Name = strings.TrimSpace(string(b))
		}
	}
	checkShape(t, trace, 250, MethodSFrame)
	if diff := compareWithGDB(trace, gdbStacks(t, exe, corePath)); diff != "" {
		t.Error(diff)
	}
}

// TestManyCaptures attaches, unwinds every thread and detaches 1,000
// times; the program must keep running correctly and its stacks must not
// change.
func TestManyCaptures(t *testing.T) {
	exe := buildProg(t, cfgSFrameO2)
	p := startProg(t, exe, "1", "200")
	pid := p.PID()
	tr := NewTracer()
	tr.Sym = nil // unwinding only; symbols are the same every time
	n := 1000
	if testing.Short() {
		n = 100
	}
	first := captureLive(t, tr, pid)
	want := map[int][]string{}
	for i := range first.Threads {
		th := &first.Threads[i]
		if !th.Complete() {
			t.Fatalf("thread %d: %v %v", th.TID, th.Stop, th.Err)
		}
		want[th.TID] = pcs(th)
	}
	changed := 0
	start := time.Now()
	for i := 1; i < n; i++ {
		trace := captureLive(t, tr, pid)
		if len(trace.Threads) != len(want) {
			t.Fatalf("capture %d: %d threads, want %d", i, len(trace.Threads), len(want))
		}
		for j := range trace.Threads {
			th := &trace.Threads[j]
			got, w := pcs(th), want[th.TID]
			if strings.Join(got, " ") == strings.Join(w, " ") {
				continue
			}
			// A thread can be caught restarting its system call: its
			// PC is then on the syscall instruction, two bytes back,
			// with the same callers. Anything else is a bug.
			pc0, _ := strconv.ParseUint(got[0], 0, 64)
			w0, _ := strconv.ParseUint(w[0], 0, 64)
			if pc0 != w0-2 || strings.Join(got[1:], " ") != strings.Join(w[1:], " ") {
				t.Fatalf("capture %d: thread %d changed:\n got %v\nwant %v", i, th.TID, got, w)
			}
			changed++
		}
		if i%250 == 0 {
			p.Ping(t, fmt.Sprintf("capture%d", i))
			// The main thread answered; let it get back into read()
			// before the next capture compares its stack.
			waitBlocked(t, pid)
		}
	}
	t.Logf("%d captures in %v (%v each); %d thread(s) caught restarting a system call", n, time.Since(start), time.Since(start)/time.Duration(n), changed)
	p.Ping(t, "done")
	waitBlocked(t, pid)
	if runtime.GOOS == "linux" {
		if diff := compareWithGDB(captureLive(t, tr, pid), gdbStacks(t, "-p", strconv.Itoa(pid))); diff != "" {
			t.Error(diff)
		}
	}
}
