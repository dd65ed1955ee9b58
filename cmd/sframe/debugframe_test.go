//go:build linux && amd64

package main

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/internal/testprog"
)

// buildNoUnwindTables builds the unwinder's test program as code built
// -O2 -g -fno-asynchronous-unwind-tables is: its .eh_frame covers the C
// runtime's start files only, its own functions' rows are in .debug_frame.
func buildNoUnwindTables(t *testing.T) string {
	t.Helper()
	exe := testprog.Build(t, "../../unwind/testdata/stackprog.c", "-O2", "-g", "-fno-asynchronous-unwind-tables")
	out, err := exec.Command("readelf", "-SW", exe).Output()
	if err != nil {
		t.Skipf("readelf: %v", err)
	}
	if !strings.Contains(string(out), " .eh_frame ") || !strings.Contains(string(out), " .debug_frame ") {
		t.Fatalf("%s: want both .eh_frame and .debug_frame:\n%s", exe, out)
	}
	return exe
}

// euFrame is a frame of eu-stack's output.
type euFrame struct{ pc, name string }

var (
	euThreadRe = regexp.MustCompile(`^TID (\d+):$`)
	euFrameRe  = regexp.MustCompile(`^#(\d+)\s+0x([0-9a-f]+)\s*(.*)$`)
)

// euStack returns eu-stack's stacks of the threads of pid.
func euStack(t *testing.T, pid int) map[int][]euFrame {
	t.Helper()
	testprog.NeedTool(t, "eu-stack")
	out, err := exec.Command("eu-stack", "-p", strconv.Itoa(pid)).CombinedOutput()
	if err != nil {
		t.Fatalf("eu-stack: %v\n%s", err, out)
	}
	st := map[int][]euFrame{}
	tid := -1
	for _, l := range strings.Split(string(out), "\n") {
		if m := euThreadRe.FindStringSubmatch(l); m != nil {
			tid, _ = strconv.Atoi(m[1])
		} else if m := euFrameRe.FindStringSubmatch(l); m != nil && tid >= 0 {
			v, _ := strconv.ParseUint(m[2], 16, 64)
			st[tid] = append(st[tid], euFrame{pc: "0x" + strconv.FormatUint(v, 16), name: m[3]})
		}
	}
	return st
}

// sameName compares a function name of ours with eu-stack's, which gives
// a versioned dynamic symbol's version (__libc_start_main@@GLIBC_2.34)
// and may pick another of the aliases at an address (__clone3, clone3).
func sameName(ours, theirs string) bool {
	if i := strings.IndexByte(theirs, '@'); i > 0 {
		theirs = theirs[:i]
	}
	return strings.TrimLeft(ours, "_") == strings.TrimLeft(theirs, "_")
}

// compareWithEuStack runs `sframe stack PID` on the running program and
// compares every thread with eu-stack's stack of the same process: the
// same frames, PCs and function names (the signal trampoline's excepted:
// gdb's "<signal handler called>" for eu-stack's __restore_rt).
func compareWithEuStack(t *testing.T, p *testprog.Proc) {
	t.Helper()
	pid := p.PID()
	stdout, stderr, code := runCLI(t, "stack", strconv.Itoa(pid))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	frames, funcs, stops := parseStackText(t, stdout)
	if len(stops) != 0 {
		t.Errorf("walks stopped early: %v\n%s", stops, stdout)
	}
	eu := euStack(t, pid)
	if len(eu) != len(frames) || len(eu) != 7 {
		t.Fatalf("%d threads, eu-stack %d, want 7", len(frames), len(eu))
	}
	for tid, want := range eu {
		got, names := frames[tid], funcs[tid]
		if len(got) != len(want) {
			t.Errorf("thread %d: %d frames, eu-stack %d:\n%v\n%v", tid, len(got), len(want), names, want)
			continue
		}
		for i, w := range want {
			switch {
			case got[i] == "SIG":
			case got[i] != w.pc:
				t.Errorf("thread %d frame %d: PC %s, eu-stack %s", tid, i, got[i], w.pc)
			case !sameName(names[i], w.name):
				t.Errorf("thread %d frame %d: %s, eu-stack %s", tid, i, names[i], w.name)
			}
		}
	}
	p.Ping(t, "after")
}

// TestStackDebugFrame unwinds a program whose own functions have their
// rows in .debug_frame only, its .eh_frame covering the C runtime: each
// address takes its rows from whichever section covers it, and the
// stacks are eu-stack's.
func TestStackDebugFrame(t *testing.T) {
	exe := buildNoUnwindTables(t)
	p := testprog.StartWith(t, testprog.Options{Threads: 7}, exe, "1", "20")
	compareWithEuStack(t, p)
}

// separateDebugFile copies exe into a new directory and moves its debug
// sections, .debug_frame included, into a separate debug file next to it
// (objcopy --only-keep-debug, then --strip-debug and a .gnu_debuglink, as
// distributions package programs), found as gdb and eu-stack find it.
// It returns the stripped copy, named as exe.
func separateDebugFile(t *testing.T, exe string) string {
	t.Helper()
	testprog.NeedTool(t, "objcopy")
	stripped := filepath.Join(t.TempDir(), filepath.Base(exe))
	writeFile(t, stripped, mustRead(t, exe))
	debug := stripped + ".debug"
	for _, args := range [][]string{
		{"--only-keep-debug", stripped, debug},
		{"--strip-debug", "--add-gnu-debuglink=" + debug, stripped},
	} {
		if out, err := exec.Command("objcopy", args...).CombinedOutput(); err != nil {
			t.Fatalf("objcopy %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if out, _ := exec.Command("readelf", "-SW", stripped).Output(); strings.Contains(string(out), ".debug_frame") {
		t.Fatalf("%s still has a .debug_frame", stripped)
	}
	return stripped
}

// TestStackSeparateDebugFrame unwinds the program of TestStackDebugFrame
// stripped, its .debug_frame in a separate debug file: the stacks are
// still eu-stack's.
func TestStackSeparateDebugFrame(t *testing.T) {
	stripped := separateDebugFile(t, buildNoUnwindTables(t))
	p := testprog.StartWith(t, testprog.Options{Threads: 7}, stripped, "1", "20")
	compareWithEuStack(t, p)
}

// TestReportDebugFrame records, with perf record --call-graph dwarf, the
// perfunwind test program built -O2 -g -fno-asynchronous-unwind-tables
// (its own rows in .debug_frame only), as built and stripped with a
// separate debug file: every sample in its functions must unwind to the
// outermost frame (_start, or clone3 for its second thread), as eu-stack
// and gdb unwind such code. perf script, which reads .eh_frame only,
// stops after the first of its frames. sframe record, on the same
// unwinding path, must give the same.
func TestReportDebugFrame(t *testing.T) {
	testprog.NeedTool(t, "perf")
	exe := testprog.Build(t, "../../perfunwind/testdata/prog.c", "-O2", "-g", "-fno-asynchronous-unwind-tables")
	for _, prog := range []string{exe, separateDebugFile(t, exe)} {
		rec := filepath.Join(t.TempDir(), "perf.data")
		if out, err := exec.Command("perf", "record", "-q", "-N", "-o", rec, "--call-graph", "dwarf", "-e", "cpu-clock", "-c", "250000", "--", prog, "300").CombinedOutput(); err != nil {
			t.Fatalf("perf record: %v\n%s", err, out)
		}
		out, errs, code := runCLI(t, "report", "--format", "folded", rec)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", prog, code, errs)
		}
		checkFullChains(t, "report "+prog, out, errs)
	}
	testprog.NeedPerfEvents(t)
	folded := filepath.Join(t.TempDir(), "out.folded")
	if _, errs, code := runCLI(t, "record", "--format", "folded", "-o", folded, "--", exe, "300"); code != 0 {
		t.Fatalf("record: exit %d: %s", code, errs)
	} else {
		checkFullChains(t, "record", string(mustRead(t, folded)), errs)
	}
}

// checkFullChains checks that the samples of folded stacks in the
// functions of the perfunwind test program unwound to the outermost
// frame (_start, or clone3 for its second thread); summary is the
// command's.
func checkFullChains(t *testing.T, what, folded, summary string) {
	t.Helper()
	own, full := 0, 0
	var partial []string
	for _, line := range strings.Split(strings.TrimSuffix(folded, "\n"), "\n") {
		i := strings.LastIndexByte(line, ' ')
		n, err := strconv.Atoi(line[i+1:])
		if i < 0 || err != nil {
			t.Fatalf("%s: bad line %q", what, line)
		}
		stack := strings.Split(line[:i], ";")
		if !slices.ContainsFunc(stack, func(f string) bool { return f == "spin" || f == "copy" || f == "work" }) {
			continue
		}
		own += n
		if len(stack) > 1 && (stack[1] == "_start" || stack[1] == "clone3" || stack[1] == "__clone3") {
			full += n
		} else if len(partial) < 5 {
			partial = append(partial, line)
		}
	}
	if own < 50 || full < own*99/100 {
		t.Errorf("%s: %d of %d samples in the program's functions unwound to the outermost frame:\n%s\n%s",
			what, full, own, strings.Join(partial, "\n"), summary)
	}
}

// TestGenVerifyDebugFrame generates SFrame for the program built
// without unwind tables and verifies it: both read .eh_frame and, for
// the program's own functions, .debug_frame, so every FDE readelf
// lists (the two sections cover different functions) is converted and
// then compared.
func TestGenVerifyDebugFrame(t *testing.T) {
	exe := buildNoUnwindTables(t)
	out, err := exec.Command("readelf", "--debug-dump=frames", exe).Output()
	if err != nil {
		t.Fatal(err)
	}
	fdes := len(regexp.MustCompile(`(?m)^[0-9a-f]+ [0-9a-f]+ [0-9a-f]+ FDE `).FindAllString(string(out), -1))
	gen := filepath.Join(t.TempDir(), "gen")
	stats, errs, code := runCLI(t, "gen", "--stats", "-o", gen, exe)
	if code != 0 || !regexp.MustCompile(`(?m)^CFI functions: +`+strconv.Itoa(fdes)+` `).MatchString(stats+errs) {
		t.Errorf("gen --stats: exit %d, want %d CFI functions:\n%s%s", code, fdes, stats, errs)
	}
	js, errs, code := runCLI(t, "verify", "--json", gen)
	if code != 0 || !strings.Contains(js, `"funcs":`+strconv.Itoa(fdes)+`,`) {
		t.Errorf("verify: exit %d, want %d functions compared: %s%s", code, fdes, js, errs)
	}
}
