//go:build linux && amd64

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sframekit/sframekit/internal/testprog"
)

// foldedStack is a line of folded output: the thread's name and frames,
// outermost first, then the count.
type foldedStack struct {
	frames []string
	n      int
}

func readFolded(t *testing.T, path string) []foldedStack {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []foldedStack
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		sp := strings.LastIndexByte(line, ' ')
		n, err := strconv.Atoi(line[sp+1:])
		if sp < 0 || err != nil {
			t.Fatalf("%s: bad line %q", path, line)
		}
		out = append(out, foldedStack{strings.Split(line[:sp], ";"), n})
	}
	return out
}

// errorEnds returns how many walks the summary says ended for want of a
// rule or a module, or where the stack did not move up: the walks that
// did not reach the outermost frame (nor the end of what was copied of
// the stack, "stack not readable" here), from the summary's lines
// "  N: REASON, in WHERE".
func errorEnds(summary string) int {
	bad := 0
	for _, m := range regexp.MustCompile(`(?m)^  (\d+): (no unwind rule for PC|no unwind tables \(file not used\)|PC in no known module|stack pointer did not move up), in `).FindAllStringSubmatch(summary, -1) {
		n, _ := strconv.Atoi(m[1])
		bad += n
	}
	return bad
}

// perfRecord records the command args with perf record --call-graph dwarf
// into out, user-mode samples only, hz a CPU-second; it skips without
// perf (fails under CI).
func perfRecord(t *testing.T, out string, hz int, args ...string) {
	t.Helper()
	testprog.NeedTool(t, "perf")
	cmd := append([]string{"record", "-q", "-N", "-o", out, "--call-graph", "dwarf", "-e", "cpu-clock:u", "-c", strconv.Itoa(1e9 / hz), "--"}, args...)
	if b, err := exec.Command("perf", cmd...).CombinedOutput(); err != nil {
		err = fmt.Errorf("perf %s: %v\n%s", strings.Join(cmd, " "), err, b)
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}

// profileBoth writes the folded stacks of the command args, sampled hz
// times a CPU-second, as sframe record does, and as sframe report does
// from perf record's recording, and calls check with each (and the
// summary).
func profileBoth(t *testing.T, hz int, check func(t *testing.T, folded []foldedStack, summary string), args ...string) {
	t.Run("record", func(t *testing.T) {
		needPerf(t)
		out := filepath.Join(t.TempDir(), "out.folded")
		_, errs, code := runCLI(t, append([]string{"record", "-F", strconv.Itoa(hz), "--format", "folded", "-o", out, "--"}, args...)...)
		if code != 0 {
			t.Fatalf("exit %d:\n%s", code, errs)
		}
		check(t, readFolded(t, out), errs)
	})
	t.Run("report", func(t *testing.T) {
		dir := t.TempDir()
		data, out := filepath.Join(dir, "perf.data"), filepath.Join(dir, "out.folded")
		perfRecord(t, data, hz, args...)
		_, errs, code := runCLI(t, "report", "--format", "folded", "-o", out, data)
		if code != 0 {
			t.Fatalf("exit %d:\n%s", code, errs)
		}
		check(t, readFolded(t, out), errs)
	})
}

// goRoots are the functions where Go's own traceback ends a goroutine's
// or thread's stack (see package unwind's outermost.go), as folded
// output names them.
var goRoots = []string{"runtime.goexit.abi0", "runtime.mstart.abi0", "runtime.rt0_go.abi0", "runtime.sigtramp.abi0",
	"runtime.sigreturn__sigaction.abi0",
	"runtime.systemstack.abi0", "runtime.mcall", "runtime.morestack.abi0", "gogo", "runtime.asmcgocall.abi0",
	"runtime.clone.abi0", "runtime.nanotime1.abi0", "runtime.vgetrandom1", "time.now"}

// checkGoRoots checks the folded stacks of a Go program: at most 1% of
// its samples may have frames beyond runtime.goexit or an unknown root,
// and at most 1% may end for want of a rule or a module (they end where
// Go's traceback does: the outermost frame).
func checkGoRoots(t *testing.T, folded []foldedStack, summary string) {
	t.Helper()
	total, beyond, unknown, atRoot := 0, 0, 0, 0
	for _, s := range folded {
		total += s.n
		f := s.frames[1:] // after the thread's name
		if i := slices.Index(f, "runtime.goexit.abi0"); i > 0 {
			if beyond == 0 {
				t.Logf("beyond goexit: %s", strings.Join(s.frames, ";"))
			}
			beyond += s.n
		}
		if len(f) > 0 && (f[0] == "[unknown]" || strings.HasPrefix(f[0], "[")) {
			unknown += s.n
		}
		if len(f) > 0 && slices.Contains(goRoots, f[0]) {
			atRoot += s.n
		}
	}
	bad := errorEnds(summary)
	t.Logf("%d samples: %d with frames beyond runtime.goexit, %d with an unknown root, %d rooted where Go's traceback ends, %d walks ended early", total, beyond, unknown, atRoot, bad)
	if total < 100 {
		t.Fatalf("%d samples, want 100 or more to judge:\n%s", total, summary)
	}
	if limit := total / 100; beyond > limit || unknown > limit || bad > limit {
		t.Errorf("%d samples with frames beyond runtime.goexit, %d with an unknown root, %d walks ended for want of a rule or module: want at most %d (1%%) each; summary:\n%s", beyond, unknown, bad, limit, summary)
	}
}

// TestGoRoots profiles two Go programs, goprog (goroutines recursing,
// allocating and sorting) and gofmt (built from GOROOT, formatting
// GOROOT's net and go/types), with sframe record and with sframe report
// of perf record: the walks must end where Go's own traceback does, not
// under runtime.goexit nor at an unknown root.
func TestGoRoots(t *testing.T) {
	goprog := testprog.BuildGo(t, "../../internal/testprog/testdata/goprog")
	gofmt := testprog.BuildGo(t, "cmd/gofmt")
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(strings.TrimSpace(string(goroot)), "src")
	t.Run("goprog", func(t *testing.T) { profileBoth(t, 999, checkGoRoots, goprog, "100") })
	t.Run("gofmt", func(t *testing.T) {
		profileBoth(t, 999, checkGoRoots, gofmt, "-l", filepath.Join(src, "net"), filepath.Join(src, "go", "types"))
	})
}

// TestGoSigreturn records gosignal, which signals itself, with sframe
// record (perf record -e cpu-clock:u would not sample the kernel): a
// sample taken while the kernel runs rt_sigreturn for the runtime's
// trampoline, runtime.sigreturn__sigaction, on the signal stack, ends
// there, at the outermost frame, as one in the handler ends at
// runtime.sigtramp. The CFI Go writes for the trampoline (CFA = SP + 8)
// takes the ucontext's flags for a return address: a frame in no code.
func TestGoSigreturn(t *testing.T) {
	needPerf(t)
	exe := testprog.BuildGo(t, "../../internal/testprog/testdata/gosignal")
	out := filepath.Join(t.TempDir(), "out.folded")
	_, errs, code := runCLI(t, "record", "-F", "999", "--format", "folded", "-o", out, "--", exe, "1000")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, errs)
	}
	folded := readFolded(t, out)
	checkGoRoots(t, folded, errs)
	in := 0
	for _, s := range folded {
		f := s.frames[1:]
		if len(f) == 0 || f[len(f)-1] != "runtime.sigreturn__sigaction.abi0" {
			continue
		}
		in += s.n
		if len(f) != 1 {
			t.Errorf("%d samples in the trampoline with callers: %s", s.n, strings.Join(s.frames, ";"))
		}
	}
	if in == 0 {
		t.Fatalf("no sample in runtime.sigreturn__sigaction.abi0; summary:\n%s", errs)
	}
	t.Logf("%d samples in runtime.sigreturn__sigaction.abi0", in)
}

// TestGoStack captures a running Go program with sframe stack: every
// thread's walk must end at the outermost frame, in a function where Go's
// traceback ends.
func TestGoStack(t *testing.T) {
	exe := testprog.BuildGo(t, "../../internal/testprog/testdata/goprog")
	cmd := exec.Command(exe, "1000000")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	// Until the runtime has started its threads (sysmon, the workers).
	task := fmt.Sprintf("/proc/%d/task", cmd.Process.Pid)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if ents, _ := os.ReadDir(task); len(ents) >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("goprog did not start 3 threads in 30 s")
		}
	}
	out, errs, code := runCLI(t, "stack", "--json", strconv.Itoa(cmd.Process.Pid))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var tr struct {
		Threads []struct {
			Tid    int
			Frames []struct {
				Function string
			}
			Complete bool
			Stop     string
		}
	}
	if err := json.NewDecoder(bytes.NewReader([]byte(out))).Decode(&tr); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if len(tr.Threads) < 3 {
		t.Fatalf("%d threads:\n%s", len(tr.Threads), out)
	}
	for _, th := range tr.Threads {
		last := ""
		if n := len(th.Frames); n > 0 {
			last = th.Frames[n-1].Function
		}
		if !th.Complete || !slices.Contains(goRoots, last) {
			t.Errorf("thread %d: %d frames, the last in %q; complete %v (%s); want the end, in one of %q", th.Tid, len(th.Frames), last, th.Complete, th.Stop, goRoots)
		}
	}
}

// TestEpilogueChains profiles a program built -O2 -fno-omit-frame-pointer
// whose three threads spend much of their time in the epilogue of a
// short function, after pop %rbp: at least 99% of each thread's samples
// must show its exact chain, as sframe record and as sframe report give
// them.
func TestEpilogueChains(t *testing.T) {
	exe := testprog.Build(t, "testdata/callchains.c", "-O2", "-fno-omit-frame-pointer")
	chain := func(thread, p string, n int) []string {
		c := []string{"start_thread", thread}
		for i := 1; i <= n; i++ {
			c = append(c, fmt.Sprintf("%s%d", p, i))
		}
		return c
	}
	want := map[string][]string{"calls3": chain("calls3", "e", 3), "calls10": chain("calls10", "f", 10), "calls30": chain("calls30", "g", 30)}
	// About 0.5 s of CPU a thread: 500 samples each.
	profileBoth(t, 999, func(t *testing.T, folded []foldedStack, summary string) {
		total, exact := map[string]int{}, map[string]int{}
		for _, s := range folded {
			name := s.frames[0]
			c := want[name]
			if c == nil {
				continue
			}
			total[name] += s.n
			f := s.frames[1:]
			// A sample in the leaf, or in the loop that calls it.
			if leaf := "tick" + strings.TrimPrefix(name, "calls"); len(f) > 0 && f[len(f)-1] == leaf {
				f = f[:len(f)-1]
			}
			if len(f) >= len(c) && slices.Equal(f[len(f)-len(c):], c) {
				exact[name] += s.n
			} else {
				t.Logf("%s: %d samples of %s", name, s.n, strings.Join(s.frames, ";"))
			}
		}
		for name := range want {
			switch frac := float64(exact[name]) / float64(total[name]); {
			case total[name] < 100:
				t.Errorf("thread %s: %d samples, want 100 or more to judge", name, total[name])
			case frac < 0.99:
				t.Errorf("thread %s: %d of %d samples (%.1f%%) show its chain, want 99%%; summary:\n%s", name, exact[name], total[name], 100*frac, summary)
			default:
				t.Logf("thread %s: %d of %d samples show its chain", name, exact[name], total[name])
			}
		}
	}, exe, "500000000")
}

// TestLdSoStart profiles a shell starting /bin/true 3,000 times, whose
// samples are mostly in the dynamic linker: the walks that reach ld.so's
// entry point, _start, which has no CFI, end there at the outermost
// frame, not for want of a rule (at most 1% may). Sampled at 4999 Hz:
// each process's CPU-time sampling starts afresh, and at 1999 Hz most of
// these processes ended before their first 500 us (80-250 samples in
// all, below the 100 needed to judge); at 200 us most are sampled
// (thousands).
func TestLdSoStart(t *testing.T) {
	testprog.NeedTool(t, "sh")
	profileBoth(t, 4999, func(t *testing.T, folded []foldedStack, summary string) {
		total := 0
		for _, s := range folded {
			total += s.n
		}
		bad := errorEnds(summary)
		t.Logf("%d samples, %d walks ended for want of a rule or module", total, bad)
		if total < 100 {
			t.Fatalf("%d samples, want 100 or more to judge:\n%s", total, summary)
		}
		if bad > total/100 {
			t.Errorf("%d of %d walks ended for want of a rule or module, want at most 1%%:\n%s", bad, total, summary)
		}
	}, "sh", "-c", "i=0; while [ $i -lt 3000 ]; do /bin/true; i=$((i+1)); done")
}
