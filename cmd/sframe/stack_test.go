//go:build linux && amd64

package main

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sframekit/sframekit/internal/testprog"
	"github.com/sframekit/sframekit/symbolize"
)

func TestMain(m *testing.M) { testprog.Main(m) }

// startStackProg builds the unwinder's test program (SFrame v1, no frame
// pointers), runs it with extra environment variables env and waits until
// its seven threads are blocked. It returns the program and the
// executable.
func startStackProg(t *testing.T, env ...string) (*testprog.Proc, string) {
	t.Helper()
	exe := testprog.Build(t, "../../unwind/testdata/stackprog.c", "-O2", "-fomit-frame-pointer", "-Wa,--gsframe")
	return testprog.StartWith(t, testprog.Options{Env: env, Threads: 7}, exe, "1", "250"), exe
}

var (
	stackThreadRe = regexp.MustCompile(`^Thread (\d+)(?: \((.*)\))?:$`)
	stackFrameRe  = regexp.MustCompile(`^#(\d+) +0x([0-9a-f]{16}) in (.+?)(?: \(([^)]+)\))? \[(sframe|cfi|fp|signal|none)\]$`)
	gdbThreadLine = regexp.MustCompile(`^Thread \d+ \(.*LWP (\d+)`)
	gdbFrameLine  = regexp.MustCompile(`^#(\d+)\s+(?:(0x[0-9a-f]+) in |(<signal handler called>))`)
)

// parseStackText parses `sframe stack` output into per-thread frame
// lists ("0x..." or "SIG"), checking every line's format.
func parseStackText(t *testing.T, text string) (map[int][]string, map[int][]string, map[int]string) {
	t.Helper()
	frames, funcs, stops := map[int][]string{}, map[int][]string{}, map[int]string{}
	tid := -1
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		switch {
		case l == "":
			tid = -1
		case stackThreadRe.MatchString(l):
			tid, _ = strconv.Atoi(stackThreadRe.FindStringSubmatch(l)[1])
		case strings.HasPrefix(l, "Backtrace stopped: ") && tid >= 0:
			stops[tid] = strings.TrimPrefix(l, "Backtrace stopped: ")
		case tid < 0 && (strings.HasPrefix(l, "Program terminated with signal ") || strings.HasPrefix(l, "Fault address: ")):
			// How the process of a core died, before the threads.
		default:
			m := stackFrameRe.FindStringSubmatch(l)
			if m == nil || tid < 0 {
				t.Fatalf("bad line %q", l)
			}
			if n, _ := strconv.Atoi(m[1]); n != len(frames[tid]) {
				t.Fatalf("frame number out of order: %q", l)
			}
			v, _ := strconv.ParseUint(m[2], 16, 64)
			if m[3] == "<signal handler called>" {
				frames[tid] = append(frames[tid], "SIG")
			} else {
				frames[tid] = append(frames[tid], fmt.Sprintf("%#x", v))
			}
			// The offset: the last "+0x" (C++ names may hold a '+').
			fn := m[3]
			if i := strings.LastIndex(fn, "+0x"); i > 0 {
				fn = fn[:i]
			}
			funcs[tid] = append(funcs[tid], fn)
		}
	}
	return frames, funcs, stops
}

// gdbAllBT returns gdb's "thread apply all bt" of pid, past main, with
// separate debug files (the C library's) when debugFiles is set.
func gdbAllBT(t *testing.T, pid string, debugFiles bool) string {
	t.Helper()
	testprog.NeedTool(t, "gdb")
	a := []string{"-nx", "-batch", "-iex", "set debuginfod enabled off"}
	if !debugFiles {
		a = append(a, "-iex", "set debug-file-directory /nonexistent")
	}
	a = append(a, "-p", pid, "-ex", "set backtrace past-main on", "-ex", "thread apply all bt")
	out, err := exec.Command("gdb", a...).CombinedOutput()
	if err != nil {
		t.Fatalf("gdb: %v\n%s", err, out)
	}
	return string(out)
}

func gdbBT(t *testing.T, args ...string) map[int][]string {
	t.Helper()
	testprog.NeedTool(t, "gdb")
	a := append([]string{"-nx", "-batch", "-iex", "set debug-file-directory /nonexistent", "-iex", "set debuginfod enabled off"}, args...)
	a = append(a, "-ex", "set backtrace past-main on", "-ex", "thread apply all bt -frame-info location-and-address")
	out, err := exec.Command("gdb", a...).CombinedOutput()
	if err != nil {
		t.Fatalf("gdb: %v\n%s", err, out)
	}
	st := map[int][]string{}
	tid := -1
	for _, l := range strings.Split(string(out), "\n") {
		if m := gdbThreadLine.FindStringSubmatch(l); m != nil {
			tid, _ = strconv.Atoi(m[1])
		} else if m := gdbFrameLine.FindStringSubmatch(l); m != nil && tid >= 0 {
			if m[3] != "" {
				st[tid] = append(st[tid], "SIG")
			} else {
				v, _ := strconv.ParseUint(m[2], 0, 64)
				st[tid] = append(st[tid], fmt.Sprintf("%#x", v))
			}
		}
	}
	return st
}

func sameStacks(t *testing.T, got, want map[int][]string) {
	t.Helper()
	if len(got) != len(want) || len(got) != 7 {
		t.Fatalf("%d threads, gdb %d, want 7", len(got), len(want))
	}
	for tid, w := range want {
		if g := got[tid]; strings.Join(g, " ") != strings.Join(w, " ") {
			t.Errorf("thread %d:\n got %v\nwant %v", tid, g, w)
		}
	}
}

// TestStackLive runs `sframe stack PID` (text and JSON) and compares each
// thread with gdb's backtrace of the same stopped process.
func TestStackLive(t *testing.T) {
	p, _ := startStackProg(t)
	pid := p.PID()
	stdout, stderr, code := runCLI(t, "stack", strconv.Itoa(pid))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	frames, funcs, stops := parseStackText(t, stdout)
	if len(stops) != 0 {
		t.Errorf("walks stopped early: %v", stops)
	}
	if !strings.Contains(stdout, fmt.Sprintf("Thread %d (stackprog):\n#0  0x", pid)) ||
		!strings.Contains(stdout, " in <signal handler called> (libc.so.6) [cfi]\n") ||
		!regexp.MustCompile(`(?m)^#1  0x[0-9a-f]{16} in block_here\+0x[0-9a-f]+ \(stackprog\) \[sframe\]$`).MatchString(stdout) {
		t.Errorf("unexpected text:\n%s", stdout)
	}
	n := 0
	for _, fs := range funcs {
		for _, f := range fs {
			if f == "recurse" {
				n++
			}
		}
	}
	if n != 4+5+6+251 {
		t.Errorf("%d recurse frames, want %d", n, 4+5+6+251)
	}
	sameStacks(t, frames, gdbBT(t, "-p", strconv.Itoa(pid)))

	// JSON: the same frames.
	js, stderr, code := runCLI(t, "stack", "--json", strconv.Itoa(pid))
	if code != 0 {
		t.Fatalf("--json: exit %d: %s", code, stderr)
	}
	var doc struct {
		PID     int `json:"pid"`
		Threads []struct {
			TID    int    `json:"tid"`
			Name   string `json:"name"`
			Stop   string `json:"stop"`
			Done   bool   `json:"complete"`
			Frames []struct {
				Index  int    `json:"index"`
				PC     string `json:"pc"`
				SP     string `json:"sp"`
				Func   string `json:"function"`
				Method string `json:"method"`
				Signal bool   `json:"signal"`
				Module string `json:"module"`
			} `json:"frames"`
		} `json:"threads"`
	}
	if err := json.Unmarshal([]byte(js), &doc); err != nil {
		t.Fatalf("bad JSON: %v\n%s", err, js)
	}
	if doc.PID != pid || len(doc.Threads) != 7 {
		t.Fatalf("JSON pid %d, %d threads", doc.PID, len(doc.Threads))
	}
	for _, th := range doc.Threads {
		var got []string
		for i, f := range th.Frames {
			if f.Index != i || !strings.HasPrefix(f.PC, "0x") || !strings.HasPrefix(f.SP, "0x") || f.Method == "" {
				t.Fatalf("thread %d frame %d: %+v", th.TID, i, f)
			}
			if f.Signal {
				got = append(got, "SIG")
			} else {
				got = append(got, f.PC)
			}
		}
		if strings.Join(got, " ") != strings.Join(frames[th.TID], " ") || !th.Done || th.Stop != "end of stack" {
			t.Errorf("JSON thread %d differs from text: %v (%v %s)", th.TID, got, th.Done, th.Stop)
		}
	}

	// --max-depth: every thread but main (5 frames) is cut, with the
	// reason.
	stdout, _, code = runCLI(t, "stack", "--max-depth", "5", strconv.Itoa(pid))
	if code != 0 || strings.Count(stdout, "Backtrace stopped: depth limit reached\n") != 6 || strings.Contains(stdout, "#5 ") {
		t.Errorf("--max-depth 5: exit %d\n%s", code, stdout)
	}

	// The process goes on.
	p.Ping(t, "hi")
}

// TestStackWithGeneratedLibc ties gen and stack together: the program runs
// against a copy of this machine's libc (built without SFrame) to which
// `sframe gen` added a loadable .sframe, and `sframe stack` must then
// unwind libc's frames with SFrame, to the same PCs as gdb (which uses the
// copy's CFI).
func TestStackWithGeneratedLibc(t *testing.T) {
	const libc = "/usr/lib/x86_64-linux-gnu/libc.so.6"
	if _, err := os.Stat(libc); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	if _, stderr, code := runCLI(t, "gen", "-o", filepath.Join(dir, "libc.so.6"), libc); code != 0 {
		t.Fatalf("gen: exit %d: %s", code, stderr)
	}
	p, _ := startStackProg(t, "LD_LIBRARY_PATH="+dir)
	pid := p.PID()
	maps, _ := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if !strings.Contains(string(maps), filepath.Join(dir, "libc.so.6")) {
		t.Fatalf("the program did not load the generated libc:\n%s", maps)
	}
	stdout, stderr, code := runCLI(t, "stack", strconv.Itoa(pid))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	frames, _, stops := parseStackText(t, stdout)
	if len(stops) != 0 {
		t.Errorf("walks stopped early: %v", stops)
	}
	bySFrame, other := 0, []string{}
	for _, l := range strings.Split(stdout, "\n") {
		if !strings.Contains(l, " (libc.so.6) ") {
			continue
		}
		switch {
		case strings.HasSuffix(l, " [sframe]"):
			bySFrame++
		case strings.HasSuffix(l, " [signal]"):
		default:
			other = append(other, l)
		}
	}
	if bySFrame < 10 || len(other) != 0 {
		t.Errorf("%d libc frames unwound with SFrame; others not by SFrame: %q", bySFrame, other)
	}
	sameStacks(t, frames, gdbBT(t, "-p", strconv.Itoa(pid)))
}

// TestStackCore compares `sframe stack --core` with gdb on a gcore core.
func TestStackCore(t *testing.T) {
	testprog.NeedTool(t, "gcore")
	p, exe := startStackProg(t)
	pid := p.PID()
	base := filepath.Join(t.TempDir(), "core")
	if b, err := exec.Command("gcore", "-o", base, strconv.Itoa(pid)).CombinedOutput(); err != nil {
		t.Fatalf("gcore: %v\n%s", err, b)
	}
	core := fmt.Sprintf("%s.%d", base, pid)
	stdout, stderr, code := runCLI(t, "stack", "--core", core, "--exe", exe)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	frames, _, stops := parseStackText(t, stdout)
	if len(stops) != 0 {
		t.Errorf("walks stopped early: %v", stops)
	}
	if stderr != "" {
		t.Errorf("warnings with the right executable: %s", stderr)
	}
	sameStacks(t, frames, gdbBT(t, exe, core))

	// Another build of the program where --exe points: a warning says
	// so. No file there: an error naming it, as for any input file.
	other := testprog.Build(t, "../../unwind/testdata/stackprog.c", "-O1", "-fomit-frame-pointer", "-Wa,--gsframe")
	missing := filepath.Join(t.TempDir(), "stackprog")
	for _, c := range []struct {
		exe, want string
		code      int
	}{
		{other, "sframe stack: warning: executable " + other + " is not the file the process ran: its build ID is ", 0},
		{missing, "sframe stack: " + missing + ": no such file or directory", 1},
	} {
		stdout, stderr, code := runCLI(t, "stack", "--core", core, "--exe", c.exe)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("--exe %s: exit %d, stderr %q\nwant exit %d, %q", c.exe, code, stderr, c.code, c.want)
		}
		// Another build is not used: no frame is named from it (its
		// functions, at other addresses, named every frame wrongly).
		if c.exe == other && regexp.MustCompile(`in [^?]\S* \(stackprog\)`).MatchString(stdout) {
			t.Errorf("--exe %s: frames named from another build:\n%s", c.exe, stdout)
		}
	}
}

// TestStackCoreTruncated reads cores cut short, as a size limit or a
// full disk leaves them. A kernel core (abort in a program) cut after its
// notes, and at half: the notes hold the registers, so every thread's
// first frame is the whole core's, and one warning line says the core is
// cut. A gcore core, whose notes and section headers come last, cut in
// its section headers: the same stacks as the whole core's. stack
// refused all of them before ("truncated ELF file (N of M bytes)", exit
// 1), as it refuses a cut executable, while gdb showed their stacks.
func TestStackCoreTruncated(t *testing.T) {
	check := func(t *testing.T, exe, core string, cuts func(whole []byte) []int, warn bool) {
		t.Helper()
		whole, err := os.ReadFile(core)
		if err != nil {
			t.Fatal(err)
		}
		stdout, stderr, code := runCLI(t, "stack", "--core", core, "--exe", exe)
		if code != 0 {
			t.Fatalf("whole core: exit %d: %s", code, stderr)
		}
		want, _, _ := parseStackText(t, stdout)
		for _, n := range cuts(whole) {
			cut := filepath.Join(t.TempDir(), "cut")
			if err := os.WriteFile(cut, whole[:n], 0o600); err != nil {
				t.Fatal(err)
			}
			stdout, stderr, code := runCLI(t, "stack", "--core", cut, "--exe", exe)
			if code != 0 {
				t.Errorf("cut at %d of %d bytes: exit %d: %s", n, len(whole), code, stderr)
				continue
			}
			if c := strings.Count(stderr, "sframe stack: warning: truncated core ("); warn && c != 1 || !warn && c != 0 {
				t.Errorf("cut at %d: %d truncation warnings in\n%s", n, c, stderr)
			}
			got, _, _ := parseStackText(t, stdout)
			if len(got) != len(want) {
				t.Errorf("cut at %d: %d threads, the whole core %d", n, len(got), len(want))
			}
			for tid, fs := range want {
				g := got[tid]
				if !warn && strings.Join(g, " ") != strings.Join(fs, " ") || len(g) == 0 || g[0] != fs[0] {
					t.Errorf("cut at %d: thread %d: %v, in the whole core %v", n, tid, g, fs)
				}
			}
		}
	}
	t.Run("kernel", func(t *testing.T) {
		pattern, err := os.ReadFile("/proc/sys/kernel/core_pattern")
		if err != nil || strings.TrimSpace(string(pattern)) != "core" {
			t.Skipf("core_pattern is %q, not \"core\"; not changing it", strings.TrimSpace(string(pattern)))
		}
		exe := testprog.Build(t, "testdata/die.c", "-O1", "-g")
		core := kernelCore(t, exe, syscall.SIGABRT)
		check(t, exe, core, func(whole []byte) []int {
			f, err := elf.NewFile(bytes.NewReader(whole))
			if err != nil {
				t.Fatal(err)
			}
			afterNotes := 0
			for _, p := range f.Progs {
				if p.Type == elf.PT_NOTE {
					afterNotes = max(afterNotes, int(p.Off+p.Filesz))
				}
			}
			return []int{afterNotes, len(whole) / 2}
		}, true)
	})
	t.Run("gcore", func(t *testing.T) {
		testprog.NeedTool(t, "gcore")
		p, exe := startStackProg(t)
		base := filepath.Join(t.TempDir(), "core")
		if b, err := exec.Command("gcore", "-o", base, strconv.Itoa(p.PID())).CombinedOutput(); err != nil {
			t.Fatalf("gcore: %v\n%s", err, b)
		}
		check(t, exe, fmt.Sprintf("%s.%d", base, p.PID()), func(whole []byte) []int {
			f, err := elf.NewFile(bytes.NewReader(whole))
			if err != nil {
				t.Fatal(err)
			}
			end := 0
			for _, p := range f.Progs {
				end = max(end, int(p.Off+p.Filesz))
			}
			if end >= len(whole) {
				t.Fatalf("gcore wrote nothing after its segments (%d of %d bytes)", end, len(whole))
			}
			return []int{end, (end + len(whole)) / 2}
		}, false)
	})
}

// gdbTermination returns gdb's "Program terminated with signal ..." line
// for core (or "" when gdb prints none) and, when gdb knows it, the
// si_addr of the core's siginfo.
func gdbTermination(t *testing.T, exe, core string) (line, addr string) {
	t.Helper()
	testprog.NeedTool(t, "gdb")
	out, err := exec.Command("gdb", "-nx", "-batch", "-iex", "set debuginfod enabled off", "-c", core, exe,
		"-ex", "p/x $_siginfo._sifields._sigfault.si_addr").CombinedOutput()
	if err != nil {
		t.Fatalf("gdb: %v\n%s", err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "Program terminated with signal ") {
			line = l
		}
		if a, ok := strings.CutPrefix(l, "$1 = "); ok {
			addr = a
		}
	}
	return line, addr
}

// TestStackCoreSignal makes the kernel write cores of a program dying of
// each signal whose default action is a core dump, faults and signals
// sent alike, and checks that stack --core says what gdb says of each
// ("Program terminated with signal SIGSEGV, Segmentation fault."), then
// for faults the address gdb reads from the core's siginfo; JSON says the
// same. A gcore of a live process tells no death: neither gdb nor stack
// print one.
func TestStackCoreSignal(t *testing.T) {
	pattern, err := os.ReadFile("/proc/sys/kernel/core_pattern")
	if err != nil || strings.TrimSpace(string(pattern)) != "core" {
		t.Skipf("core_pattern is %q, not \"core\"; not changing it", strings.TrimSpace(string(pattern)))
	}
	exe := testprog.Build(t, "testdata/die.c", "-O1", "-g")
	for _, sig := range []syscall.Signal{syscall.SIGSEGV, syscall.SIGFPE, syscall.SIGILL, syscall.SIGABRT, syscall.SIGQUIT,
		syscall.SIGTRAP, syscall.SIGBUS, syscall.SIGSYS, syscall.SIGXCPU, syscall.SIGXFSZ} {
		core := kernelCore(t, exe, sig)
		line, addr := gdbTermination(t, exe, core)
		if line == "" {
			t.Fatalf("%v: gdb says nothing of the signal", sig)
		}
		out, errs, code := runCLI(t, "stack", "--core", core)
		lines := strings.SplitN(out, "\n", 3)
		fault := sig == syscall.SIGSEGV || sig == syscall.SIGFPE || sig == syscall.SIGILL
		if code != 0 || lines[0] != line {
			t.Errorf("%v: exit %d %s, first line %q, gdb's %q", sig, code, errs, lines[0], line)
		}
		if want := "Fault address: " + addr + "."; fault && lines[1] != want {
			t.Errorf("%v: second line %q, want %q", sig, lines[1], want)
		} else if !fault && lines[1] != "" {
			t.Errorf("%v: second line %q, want none (no fault)", sig, lines[1])
		}
		if sig == syscall.SIGSEGV && addr != "0x1234" {
			t.Errorf("gdb reads si_addr %s, the program faulted at 0x1234", addr)
		}
		out, _, _ = runCLI(t, "stack", "--json", "--core", core)
		var j struct {
			PID         int
			Termination struct {
				Signal            int
				Name, Description string
				TID, Code         int
				Address           *string
			}
		}
		if err := json.Unmarshal([]byte(out), &j); err != nil {
			t.Fatalf("%v: --json: %v", sig, err)
		}
		tm := j.Termination
		if got := "Program terminated with signal " + tm.Name + ", " + tm.Description + "."; tm.Signal != int(sig) || got != line ||
			tm.TID != j.PID || fault != (tm.Address != nil) || fault && *tm.Address != addr || fault != (tm.Code > 0) {
			t.Errorf("%v: --json termination %+v (address %v)", sig, tm, tm.Address)
		}
	}

	testprog.NeedTool(t, "gcore")
	p, exe2 := startStackProg(t)
	base := filepath.Join(t.TempDir(), "core")
	if b, err := exec.Command("gcore", "-o", base, strconv.Itoa(p.PID())).CombinedOutput(); err != nil {
		t.Fatalf("gcore: %v\n%s", err, b)
	}
	core := fmt.Sprintf("%s.%d", base, p.PID())
	line, _ := gdbTermination(t, exe2, core)
	out, _, _ := runCLI(t, "stack", "--core", core)
	if line != "" || !strings.HasPrefix(out, "Thread ") {
		t.Errorf("gcore: gdb says %q, stack begins %.80q; want no signal from either", line, out)
	}
}

// TestStackCoreGo reads the core of a Go program that faulted with the
// traceback level "crash" (testdata gocrash): the crashing thread stands
// in the runtime's signal handler, on the signal stack, which a walk of
// the whole memory goes through, as gdb does, into the code the signal
// interrupted (the fatal panic), and through runtime.sigpanic, called as
// if from the faulting instruction, to the goroutine's own frames: the
// function that faulted, named at its exact PC, its callers, and the
// goroutine's first function, as Go's own traceback shows them.
func TestStackCoreGo(t *testing.T) {
	pattern, err := os.ReadFile("/proc/sys/kernel/core_pattern")
	if err != nil || strings.TrimSpace(string(pattern)) != "core" {
		t.Skipf("core_pattern is %q, not \"core\"; not changing it", strings.TrimSpace(string(pattern)))
	}
	exe := testprog.BuildGo(t, "../../internal/testprog/testdata/gocrash")
	core := kernelCore(t, exe, syscall.SIGSEGV)
	out, errs, code := runCLI(t, "stack", "--json", "--core", core)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var tr struct {
		PID         int
		Termination struct{ Name string }
		Threads     []struct {
			Tid    int
			Frames []struct {
				Function string
				PC       string
				Signal   bool
			}
			Complete bool
			Stop     string
		}
	}
	if err := json.Unmarshal([]byte(out), &tr); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if tr.Termination.Name != "SIGABRT" || len(tr.Threads) == 0 {
		t.Fatalf("termination %q, %d threads; want SIGABRT (GOTRACEBACK=crash):\n%s", tr.Termination.Name, len(tr.Threads), out)
	}
	th := tr.Threads[0] // the thread the signal killed comes first
	var names []string
	for _, f := range th.Frames {
		n := f.Function
		if f.Signal {
			n = "<signal>"
		}
		names = append(names, n)
	}
	got := strings.Join(names, ";")
	want := "runtime.sigtramp.abi0;<signal>;"
	tail := ";runtime.sigpanic;main.crash;main.middle;main.main;runtime.main;runtime.goexit.abi0"
	if !strings.Contains(got, want) || !strings.HasSuffix(got, tail) || !th.Complete {
		t.Errorf("thread %d: frames %s (complete %v, %s); want ...%s...%s", th.Tid, got, th.Complete, th.Stop, want, tail)
	}
}

// TestStackUsage checks argument errors and -h.
func TestStackUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"stack"}, 2},
		{[]string{"stack", "-h"}, 0},
		{[]string{"stack", "abc"}, 2},
		{[]string{"stack", "1", "2"}, 2},
		{[]string{"stack", "--exe", "x", "1"}, 2},
		{[]string{"stack", "--sysroot", "/usr", "1"}, 2},
		{[]string{"stack", "--max-depth", "0", "1"}, 2},
		{[]string{"stack", "--core", "/nonexistent/core"}, 1},
		{[]string{"stack", "999999999"}, 1},
	} {
		_, stderr, code := runCLI(t, c.args...)
		if code != c.code {
			t.Errorf("%v: exit %d, want %d (%s)", c.args, code, c.code, stderr)
		}
	}
}

// gdbNamedFrame is a frame line of gdb's bt for code without debug
// information: "#N  0xADDR in NAME ()", maybe " from LIB".
var gdbNamedFrame = regexp.MustCompile(`^#\d+\s+0x([0-9a-f]+) in (.+) \(\)(?: from \S+)?$`)

// TestStackCxxNames checks C++ frames against gdb: the same PCs, and the
// same demangled names wherever gdb names the function (its names come
// from the same symbol tables, demangled by libiberty, as c++filt's). With
// --no-demangle the names are the symbols themselves, which demangle to
// the same text.
func TestStackCxxNames(t *testing.T) {
	testprog.NeedTool(t, "gdb")
	exe := testprog.Build(t, "testdata/cxxprog.cc", "-O2", "-fomit-frame-pointer", "-Wa,--gsframe")
	p := testprog.StartWith(t, testprog.Options{Threads: 3}, exe)
	pid := strconv.Itoa(p.PID())
	out, stderr, code := runCLI(t, "stack", pid)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	frames, funcs, stops := parseStackText(t, out)
	if len(stops) != 0 {
		t.Errorf("walks stopped early: %v", stops)
	}
	gdb := gdbAllBT(t, pid, false)
	tid, named := -1, 0
	gpcs := map[int][]string{}
	for _, l := range strings.Split(gdb, "\n") {
		if m := gdbThreadLine.FindStringSubmatch(l); m != nil {
			tid, _ = strconv.Atoi(m[1])
			continue
		}
		m := gdbNamedFrame.FindStringSubmatch(l)
		if m == nil || tid < 0 {
			continue
		}
		v, _ := strconv.ParseUint(m[1], 16, 64)
		i := len(gpcs[tid])
		gpcs[tid] = append(gpcs[tid], fmt.Sprintf("%#x", v))
		if m[2] == "??" || i >= len(funcs[tid]) {
			continue
		}
		named++
		if funcs[tid][i] != m[2] {
			t.Errorf("thread %d frame %d: %q, gdb %q", tid, i, funcs[tid][i], m[2])
		}
	}
	if len(gpcs) != 3 || len(frames) != 3 {
		t.Fatalf("threads: ours %d, gdb %d, want 3\n%s", len(frames), len(gpcs), gdb)
	}
	for tid, want := range gpcs {
		if got := frames[tid]; strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("thread %d: PCs %v, gdb %v", tid, got, want)
		}
	}
	// What must be there: the virtual function with its std::string
	// parameter, the lambda inside the template, the template itself.
	for _, want := range []string{
		" in shapes::Square::area(std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > const&)+0x",
		"::{lambda(long, long)#1}",
		" in int sortAll<long>(std::vector<long, std::allocator<long> >&)+0x",
		" in std::thread::join()+0x",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	if named < 8 {
		t.Errorf("only %d frames named by gdb to compare", named)
	}

	raw, stderr, code := runCLI(t, "stack", "--no-demangle", pid)
	if code != 0 {
		t.Fatalf("--no-demangle: exit %d: %s", code, stderr)
	}
	_, rawFuncs, _ := parseStackText(t, raw)
	mangled := 0
	for tid, fs := range funcs {
		for i, f := range fs {
			r := rawFuncs[tid][i]
			if strings.HasPrefix(r, "_Z") {
				mangled++
			}
			if d := symbolize.Demangle(r); d != f {
				t.Errorf("thread %d frame %d: %q demangles to %q, not %q", tid, i, r, d, f)
			}
		}
	}
	if mangled < 5 {
		t.Errorf("--no-demangle: only %d mangled names\n%s", mangled, raw)
	}

	// JSON: the symbol as "function", its demangled form beside it,
	// written as is (no \u003c for '<').
	js, stderr, code := runCLI(t, "stack", "--json", pid)
	if code != 0 {
		t.Fatalf("--json: exit %d: %s", code, stderr)
	}
	for _, want := range []string{`"function": "_Z6nestedi",`, `"demangled": "nested(int)",`, `"demangled": "int sortAll<long>(std::vector<long, std::allocator<long> >&)",`} {
		if !strings.Contains(js, want) {
			t.Errorf("--json: no %s in\n%s", want, js)
		}
	}
}

// gdbSourceFrame is a frame line of gdb's bt with an address and a
// source position: "#N  0xADDR in FUNC (ARGS) at FILE:LINE".
var gdbSourceFrame = regexp.MustCompile(`^#\d+\s+0x([0-9a-f]+) in .* at (\S+):(\d+)$`)

// TestStackSource checks -s against gdb: for every frame of the program
// (built with -g) that gdb shows with an address, the same file and line.
func TestStackSource(t *testing.T) {
	testprog.NeedTool(t, "gdb")
	exe := testprog.Build(t, "../../unwind/testdata/stackprog.c", "-g", "-O2", "-fomit-frame-pointer", "-Wa,--gsframe")
	p := testprog.StartWith(t, testprog.Options{Threads: 7}, exe, "1", "20")
	pid := strconv.Itoa(p.PID())
	out, stderr, code := runCLI(t, "stack", "-s", pid)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	// Ours: PC -> "FILE:LINE" of the program's frames, per thread.
	ours := map[string]string{}
	tid := ""
	lineRe := regexp.MustCompile(`^#\d+ +0x([0-9a-f]{16}) in .* at (\S+:\d+) \(stackprog\) \[\w+\]$`)
	for _, l := range strings.Split(out, "\n") {
		if m := stackThreadRe.FindStringSubmatch(l); m != nil {
			tid = m[1]
		} else if m := lineRe.FindStringSubmatch(l); m != nil {
			v, _ := strconv.ParseUint(m[1], 16, 64)
			ours[fmt.Sprintf("%s %#x", tid, v)] = m[2]
		}
	}
	gdb := gdbAllBT(t, pid, true)
	n := 0
	tid = ""
	for _, l := range strings.Split(gdb, "\n") {
		if m := gdbThreadLine.FindStringSubmatch(l); m != nil {
			tid = m[1]
			continue
		}
		m := gdbSourceFrame.FindStringSubmatch(l)
		if m == nil || filepath.Base(m[2]) != "stackprog.c" {
			continue
		}
		v, _ := strconv.ParseUint(m[1], 16, 64)
		key := fmt.Sprintf("%s %#x", tid, v)
		n++
		if got, want := ours[key], m[2]+":"+m[3]; got != want {
			t.Errorf("thread/pc %s: %q, gdb %q", key, got, want)
		}
	}
	// Threads × frames in stackprog.c: at least block_here, recurse,
	// worker/main, compare, do_sort, the signal handler.
	t.Logf("%d frames compared", n)
	if n < 30 {
		t.Errorf("only %d frames compared\n%s", n, gdb)
	}
	// Without -s, no source positions (and no DWARF read).
	plain, _, _ := runCLI(t, "stack", pid)
	if strings.Contains(plain, " at ") {
		t.Errorf("source positions without -s:\n%s", plain)
	}
}

// TestStackPprof captures the blocked program three times into a pprof
// profile and reads it back with pprof's parser: a sample per thread per
// capture, each with the functions the text output names for that thread,
// and the executable as the first mapping.
func TestStackPprof(t *testing.T) {
	p, exe := startStackProg(t)
	pid := strconv.Itoa(p.PID())
	text, stderr, code := runCLI(t, "stack", pid)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	_, funcs, _ := parseStackText(t, text)
	out := filepath.Join(t.TempDir(), "stack.pb.gz")
	if _, stderr, code := runCLI(t, "stack", "--pprof", out, "--count", "3", "--interval", "1ms", pid); code != 0 {
		t.Fatalf("--pprof: exit %d: %s", code, stderr)
	}
	prof := readProfile(t, out)
	if len(prof.Sample) != 3*len(funcs) {
		t.Fatalf("%d samples, want 3 x %d threads", len(prof.Sample), len(funcs))
	}
	if len(prof.Mapping) == 0 || prof.Mapping[0].File != exe {
		t.Errorf("first mapping %v, want the executable %s", prof.Mapping[0], exe)
	}
	perThread := map[int64]int{}
	for _, s := range prof.Sample {
		tid := s.NumLabel["thread"][0]
		perThread[tid]++
		var got []string
		for _, l := range s.Location {
			switch {
			case len(l.Line) == 0:
				got = append(got, "??")
			case l.Line[0].Function.Name == "<signal handler called>":
				got = append(got, "<signal handler called>")
			default:
				got = append(got, l.Line[0].Function.Name)
			}
		}
		if want := funcs[int(tid)]; strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("thread %d: profile %v\ntext %v", tid, got, want)
		}
	}
	for tid, n := range perThread {
		if n != 3 {
			t.Errorf("thread %d: %d samples, want 3", tid, n)
		}
	}
	// Flags that do not go together.
	for _, args := range [][]string{{"--count", "2", pid}, {"--pprof", out, "--json", pid}, {"--pprof", out, "--count", "0", pid}} {
		if _, _, code := runCLI(t, append([]string{"stack"}, args...)...); code != 2 {
			t.Errorf("stack %v: exit %d, want 2", args, code)
		}
	}
}

// TestStackInlines checks -i against gdb, which shows the calls inlined
// at a PC as frames of their own: on every physical frame for which we
// report inlined calls (the C library's merge sort inlines itself, seen
// through libc's separate debug file), gdb shows the same number of
// frames at that address, with the same source positions, and the same
// names for the inlined ones. (gdb also rebuilds tail-call frames from
// DWARF call-site information, which we do not: those are not compared.)
func TestStackInlines(t *testing.T) {
	testprog.NeedTool(t, "gdb")
	// The inlined calls compared are the C library's, from its separate
	// debug file (Debian's libc6-dbg): a prerequisite like a tool.
	if symbolize.New().DebugFile("/lib/x86_64-linux-gnu/libc.so.6") == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("no debug file for libc.so.6 (libc6-dbg); required under CI")
		}
		t.Skip("no debug file for libc.so.6 (libc6-dbg)")
	}
	exe := testprog.Build(t, "../../unwind/testdata/stackprog.c", "-g", "-O2", "-fomit-frame-pointer", "-Wa,--gsframe")
	p := testprog.StartWith(t, testprog.Options{Threads: 7}, exe, "1", "20")
	pid := strconv.Itoa(p.PID())
	out, stderr, code := runCLI(t, "stack", "-i", pid)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	// A group is the frames shown at one physical frame: its inlined
	// calls, then itself. Lines are "name@file:line"; the physical
	// frame's name is left out (our symbol names and gdb's DWARF names
	// of out-of-line copies differ: msort_with_tmp.part.0).
	type group struct {
		addr  string
		lines []string
	}
	ours := map[string][]group{}
	tid, open := "", false
	ourRe := regexp.MustCompile(`^#\d+ +0x([0-9a-f]{16}) in (.+?)(?: at (\S+:\d+))?(?: \([^)]+\))? \[(\w+)\]$`)
	for _, l := range strings.Split(out, "\n") {
		if m := stackThreadRe.FindStringSubmatch(l); m != nil {
			tid, open = m[1], false
			continue
		}
		m := ourRe.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		v, _ := strconv.ParseUint(m[1], 16, 64)
		if !open {
			ours[tid] = append(ours[tid], group{addr: fmt.Sprintf("%#x", v)})
		}
		g := &ours[tid][len(ours[tid])-1]
		name := ""
		if open = m[4] == "inline"; open {
			name = m[2]
		}
		g.lines = append(g.lines, name+"@"+m[3])
	}
	gdb := gdbAllBT(t, pid, true)
	theirs := map[string][]group{}
	gdbRe := regexp.MustCompile(`^#\d+\s+(?:0x([0-9a-f]+) in )?(\S+) \(.*\)(?: at (\S+):(\d+))?(?: from \S+)?$`)
	tid = ""
	for _, l := range strings.Split(gdb, "\n") {
		if m := gdbThreadLine.FindStringSubmatch(l); m != nil {
			tid = m[1]
			continue
		}
		m := gdbRe.FindStringSubmatch(l)
		if m == nil || tid == "" {
			continue
		}
		pos := ""
		if m[3] != "" {
			pos = m[3] + ":" + m[4]
		}
		switch {
		case m[1] != "":
			v, _ := strconv.ParseUint(m[1], 16, 64)
			theirs[tid] = append(theirs[tid], group{addr: fmt.Sprintf("%#x", v)})
		case len(theirs[tid]) == 0:
			// gdb leaves out frame 0's address when the PC starts a
			// line.
			theirs[tid] = append(theirs[tid], group{addr: "frame 0"})
		}
		g := &theirs[tid][len(theirs[tid])-1]
		g.lines = append(g.lines, m[2]+"@"+pos)
	}
	compared := 0
	for tid, gs := range ours {
		next := 0 // gdb's groups are matched in order; tail-call ones are skipped
		for i, g := range gs {
			if len(g.lines) < 2 {
				continue
			}
			var want *group
			for ; next < len(theirs[tid]); next++ {
				if a := theirs[tid][next].addr; a == g.addr || (a == "frame 0" && i == 0) {
					want = &theirs[tid][next]
					next++
					break
				}
			}
			if want == nil {
				t.Errorf("thread %s: no gdb frame at %s for %v", tid, g.addr, g.lines)
				continue
			}
			compared++
			if len(want.lines) != len(g.lines) {
				t.Errorf("thread %s at %s: %v, gdb %v", tid, g.addr, g.lines, want.lines)
				continue
			}
			for k := range g.lines {
				got, exp := g.lines[k], want.lines[k]
				if k == len(g.lines)-1 { // the physical frame: position only
					_, exp, _ = strings.Cut(exp, "@")
					exp = "@" + exp
				}
				if got != exp {
					t.Errorf("thread %s at %s, line %d: %q, gdb %q", tid, g.addr, k, got, exp)
				}
			}
		}
	}
	t.Logf("%d frames with inlined calls compared", compared)
	if compared < 5 {
		t.Errorf("only %d frames with inlined calls\n%s", compared, out)
	}

	// --pprof with -i: each location's lines are the frames the text
	// shows at that address, inlined calls first, with their positions.
	text := map[int64][]string{}
	tid = ""
	for _, l := range strings.Split(out, "\n") {
		if m := stackThreadRe.FindStringSubmatch(l); m != nil {
			tid = m[1]
		} else if m := ourRe.FindStringSubmatch(l); m != nil {
			n, _ := strconv.ParseInt(tid, 10, 64)
			name := m[2]
			if i := strings.LastIndex(name, "+0x"); i > 0 {
				name = name[:i]
			}
			text[n] = append(text[n], name+"@"+m[3])
		}
	}
	pb := filepath.Join(t.TempDir(), "stack.pb.gz")
	if _, stderr, code := runCLI(t, "stack", "-i", "--pprof", pb, pid); code != 0 {
		t.Fatalf("-i --pprof: exit %d: %s", code, stderr)
	}
	prof := readProfile(t, pb)
	if len(prof.Sample) != len(text) {
		t.Fatalf("%d samples, %d threads in the text", len(prof.Sample), len(text))
	}
	inlined := 0
	for _, s := range prof.Sample {
		tid := s.NumLabel["thread"][0]
		var got []string
		for _, l := range s.Location {
			if len(l.Line) > 1 {
				inlined += len(l.Line) - 1
			}
			for _, ln := range l.Line {
				pos := ""
				if ln.Line != 0 {
					pos = fmt.Sprintf("%s:%d", ln.Function.Filename, ln.Line)
				}
				got = append(got, ln.Function.Name+"@"+pos)
			}
		}
		if strings.Join(got, "\n") != strings.Join(text[tid], "\n") {
			t.Errorf("thread %d: profile\n%s\ntext\n%s", tid, strings.Join(got, "\n"), strings.Join(text[tid], "\n"))
		}
	}
	if inlined < compared {
		t.Errorf("%d inlined calls in the profile, %d frames with inlined calls in the text", inlined, compared)
	}
}

// tracedNow reports whether a thread of pid has a tracer.
func tracedNow(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	return err == nil && !strings.Contains(string(b), "\nTracerPid:\t0\n")
}

// TestStackPprofTargetExits: the sampled process exits after some
// captures of many asked for: the profile is written with those, the
// command says how many, and exits with status 0.
func TestStackPprofTargetExits(t *testing.T) {
	p, _ := startStackProg(t)
	pid := p.PID()
	out := filepath.Join(t.TempDir(), "stack.pb.gz")
	type result struct {
		stderr string
		code   int
	}
	res := make(chan result, 1)
	go func() {
		_, stderr, code := runCLI(t, "stack", "--pprof", out, "--count", "100000", "--interval", "20ms", strconv.Itoa(pid))
		res <- result{stderr, code}
	}()
	// Kill the process once a capture has ended: traced, then not.
	deadline := time.Now().Add(30 * time.Second)
	for !tracedNow(pid) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Microsecond)
	}
	for tracedNow(pid) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Microsecond)
	}
	p.Cmd.Process.Kill()
	var r result
	select {
	case r = <-res:
	case <-time.After(60 * time.Second):
		t.Fatal("stack --count still sampling a killed process")
	}
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var k int
	if _, err := fmt.Sscanf(r.stderr, "sframe stack: the process exited after %d of 100000 captures", &k); err != nil || k < 1 {
		t.Fatalf("stderr %q", r.stderr)
	}
	prof := readProfile(t, out)
	if len(prof.Sample) != 7*k {
		t.Errorf("%d samples for %d captures of 7 threads", len(prof.Sample), k)
	}
}

// TestStackNotPermitted runs `sframe stack PID` as user nobody against a
// process of root's: the error must be about ptrace permission and what
// grants it, not a guess at a kernel thread. (This test binary runs
// itself as nobody, with SFRAME_TEST_ARGS holding the command.)
func TestStackNotPermitted(t *testing.T) {
	if args := os.Getenv("SFRAME_TEST_ARGS"); args != "" {
		os.Exit(run(strings.Fields(args), os.Stdout, os.Stderr))
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run a process as another user")
	}
	p, _ := startStackProg(t)
	// A copy of this test binary that nobody can run.
	dir, err := os.MkdirTemp("", "sframe-nobody-") // t.TempDir's parent is private
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "sframe.test")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestStackNotPermitted$")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), fmt.Sprintf("SFRAME_TEST_ARGS=stack %d", p.PID()))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("as nobody: %v, want exit status 1\n%s", err, out)
	}
	msg := string(out)
	for _, want := range []string{"permission denied", "ptrace", "uid 0", "uid 65534", "CAP_SYS_PTRACE", "kernel.yama.ptrace_scope"} {
		if !strings.Contains(msg, want) {
			t.Errorf("no %q in %q", want, msg)
		}
	}
	if strings.Contains(msg, "kernel thread") {
		t.Errorf("blames a kernel thread: %q", msg)
	}
	p.Ping(t, "still running")
}

// TestStackProfileInterrupted signals stack --pprof --count while it
// captures a live process (once a capture has begun: the target shows a
// tracer): it ends after the capture under way, writes the profile of
// the captures made, says how many, exits with 128 + the signal's number,
// leaves no temporary file and the process running, untraced; for each
// of SIGINT, SIGTERM, SIGHUP and SIGQUIT.
func TestStackProfileInterrupted(t *testing.T) {
	bin := cliBinary(t)
	p, _ := startStackProg(t)
	pid := p.PID()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT} {
		dir := t.TempDir()
		out := filepath.Join(dir, "stacks.pb.gz")
		cmd := exec.Command(bin, "stack", "--pprof", out, "--count", "1000000", "--interval", "1ms", strconv.Itoa(pid))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(time.Minute); !tracedNow(pid); {
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatalf("%v: no capture began within a minute: %s", sig, stderr.String())
			}
			time.Sleep(time.Millisecond)
		}
		cmd.Process.Signal(sig)
		code := waitExit(t, cmd)
		m := regexp.MustCompile(`^sframe stack: interrupted by ` + signalName(sig) + ` after (\d+) of 1000000 captures; the profile has those (\d+)\n$`).FindStringSubmatch(stderr.String())
		if code != 128+int(sig) || m == nil || m[1] != m[2] {
			t.Fatalf("%v: exit %d, stderr %q", sig, code, stderr.String())
		}
		n, _ := strconv.Atoi(m[1])
		prof := readProfile(t, out)
		// One sample per thread per capture.
		if n == 0 || len(prof.Sample) == 0 || len(prof.Sample)%n != 0 {
			t.Errorf("%v: %d captures, %d samples", sig, n, len(prof.Sample))
		}
		onlyFile(t, dir, "stacks.pb.gz")
		if tracedNow(pid) {
			t.Errorf("%v: the process is still traced", sig)
		}
		if err := syscall.Kill(pid, 0); err != nil {
			t.Fatalf("%v: the process is gone: %v", sig, err)
		}
	}
}

// TestStackAnonCode: a thread blocked in a function that code in
// anonymous executable memory called (as JIT code calls its runtime) is
// walked through that code by frame pointers, as perf walks it, to main
// and past it, the frame there named "?? ([anon])". Before, the walk
// ended at that frame ("PC in no known module"), which left a JVM
// thread running JIT code a stack of one frame.
func TestStackAnonCode(t *testing.T) {
	exe := testprog.Build(t, "testdata/anoncode.c", "-O2") // x86-64 code, as this file
	p := testprog.Start(t, exe)
	stdout, stderr, code := runCLI(t, "stack", strconv.Itoa(p.PID()))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	_, funcs, stops := parseStackText(t, stdout)
	if len(stops) != 0 || len(funcs) != 1 {
		t.Fatalf("stops %v, %d threads:\n%s", stops, len(funcs), stdout)
	}
	var got []string
	for _, fs := range funcs {
		got = fs
	}
	i := slices.Index(got, "wait_here")
	if i < 0 || i+2 >= len(got) || got[i+1] != "??" || got[i+2] != "main" {
		t.Errorf("frames %q, want wait_here, ?? (the anonymous code), main", got)
	}
	if !regexp.MustCompile(`(?m)^#\d+ +0x[0-9a-f]+ in \?\? \(\[anon\]\) \[fp\]$`).MatchString(stdout) {
		t.Errorf("no frame in ?? ([anon]) by frame pointer:\n%s", stdout)
	}
	p.Ping(t, "after")
}

// kernelCore runs exe (testdata/die.c) with the number of signal sig as
// its argument, in a new directory, with core dumps allowed, and returns
// the path of the core the kernel wrote there when the signal killed it.
func kernelCore(t *testing.T, exe string, sig syscall.Signal) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("sh", "-c", "ulimit -c unlimited && exec \"$0\" \"$1\"", exe, strconv.Itoa(int(sig)))
	cmd.Dir = dir
	if err := cmd.Run(); err == nil {
		t.Fatalf("%v: the program did not die", sig)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "core") {
			return filepath.Join(dir, e.Name())
		}
	}
	t.Fatalf("%v: the kernel wrote no core", sig)
	return ""
}
