package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sframekit/sframekit/internal/outfile"
	"github.com/sframekit/sframekit/internal/testprog"
	"github.com/sframekit/sframekit/symbolize"
)

// needPerf skips the test without perf_event_open (failing it under CI).
func needPerf(t *testing.T) {
	t.Helper()
	testprog.NeedPerfEvents(t)
}

// recprog builds package recorder's test program with SFrame.
func recprog(t *testing.T) string {
	return testprog.Build(t, "../../recorder/testdata/recprog.c", "-O2", "-Wa,--gsframe")
}

// TestRecord records a command into each format: the command's output
// passes through, the summary goes to standard error, and the profile
// holds the program's threads with their chains, as pprof and as folded
// stacks; with --bpf, walked in the kernel; with --off-cpu, off-CPU
// stacks end in [off-cpu].
func TestRecord(t *testing.T) {
	needPerf(t)
	exe := recprog(t)
	dir := t.TempDir()

	pb := filepath.Join(dir, "out.pb.gz")
	out, errs, code := runCLI(t, "record", "-F", "499", "-o", pb, "--", exe, "spin", "1")
	if code != 0 || out != "ready\n" {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s", code, out, errs)
	}
	for _, want := range []string{"recorded cpu-clock at 499 Hz for ", " samples read\n", "user stacks unwound: ", "walks ended: ",
		"command exited with status 0\n", "profiler CPU: "} {
		if !strings.Contains(errs, want) {
			t.Errorf("summary without %q:\n%s", want, errs)
		}
	}
	p := readProfile(t, pb)
	threads := map[string]int64{}
	for _, s := range p.Sample {
		if len(s.Location) > 0 && len(s.Location[0].Line) > 0 && s.Location[0].Line[0].Function.Name == "a5" {
			threads[s.Label["thread_name"][0]] += s.Value[0]
		}
	}
	if threads["spin5"] == 0 || len(threads) != 1 || p.DefaultSampleType != "cpu" || p.Period != int64(1e9)/499 {
		t.Errorf("samples in a5 by thread %v; default type %s, period %d", threads, p.DefaultSampleType, p.Period)
	}

	folded := filepath.Join(dir, "out.folded")
	if _, errs, code := runCLI(t, "record", "-q", "--format", "folded", "-o", folded, "--", exe, "spin", "0.5"); code != 0 || errs != "" {
		t.Fatalf("folded: exit %d, stderr %q", code, errs)
	}
	b, _ := os.ReadFile(folded)
	if !regexp.MustCompile(`(?m)^spin5;.*;start_thread;spin5;a1;a2;a3;a4;a5 \d+$`).Match(b) {
		t.Errorf("folded stacks without spin5's chain:\n%s", b)
	}

	if os.Geteuid() == 0 {
		// --bpf: the same chains, walked in the kernel.
		_, errs, code := runCLI(t, "record", "--bpf", "--format", "folded", "-o", folded, "--", exe, "spin", "0.5")
		b, _ := os.ReadFile(folded)
		if code != 0 || !regexp.MustCompile(`(?m)^spin5;.*;start_thread;spin5;a1;a2;a3;a4;a5 \d+$`).Match(b) ||
			!strings.Contains(errs, "walked in the kernel (--bpf): ") || !strings.Contains(errs, " per sample in the BPF program") {
			t.Errorf("--bpf: exit %d, stderr:\n%s\nfolded:\n%s", code, errs, b)
		}
	}
	if os.Geteuid() == 0 {
		_, errs, code := runCLI(t, "record", "--off-cpu", "--format", "folded", "-o", folded, "--", exe, "sleep", "0.5")
		b, _ := os.ReadFile(folded)
		if code != 0 || !regexp.MustCompile(`(?m)^sleeper;.*;sleeper;nap1;nap2;nap3;.*\[off-cpu\] \d+$`).Match(b) || !strings.Contains(errs, "off-CPU: ") {
			t.Errorf("--off-cpu: exit %d, stderr:\n%s\nfolded:\n%s", code, errs, b)
		}
	}
}

// TestRecordErrors checks the one-line errors of what cannot be
// recorded: a process that does not exist, a command that cannot be
// started.
func TestRecordErrors(t *testing.T) {
	needPerf(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"record", "-p", "1073741824"}, "sframe record: process 1073741824: no such process\n"},
		{[]string{"record", "--", "sframekit-no-such-command", "x"}, "sframe record: sframekit-no-such-command: command not found\n"},
		{[]string{"record", "/nonexistent/prog"}, "sframe record: /nonexistent/prog: no such file or directory\n"},
	} {
		out, errs, code := runCLI(t, c.args...)
		if code != 1 || out != "" || errs != c.want {
			t.Errorf("%q: exit %d, stdout %q, stderr\n  %q\nwant\n  %q", c.args, code, out, errs, c.want)
		}
	}
}

// TestRecordUnprivileged runs sframe record as user nobody, whom
// kernel.perf_event_paranoid and the locked-memory limit restrict: an
// off-CPU recording (samples in the kernel) is refused with the sysctl
// value it needs, and rings larger than the limit are made smaller, with
// a warning, and the recording goes on.
func TestRecordUnprivileged(t *testing.T) {
	needPerf(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to run sframe as another user")
	}
	testprog.NeedTool(t, "setpriv")
	b, _ := os.ReadFile("/proc/sys/kernel/perf_event_paranoid")
	paranoid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || paranoid < 2 {
		t.Skipf("kernel.perf_event_paranoid is %q: nobody may sample in the kernel", b)
	}
	// A directory that nobody may enter: the binary and program in it.
	dir, err := os.MkdirTemp("", "sframe-record-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o777)
	bin := filepath.Join(dir, "sframe")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	prog := filepath.Join(dir, "recprog")
	if data, err := os.ReadFile(recprog(t)); err != nil || os.WriteFile(prog, data, 0o755) != nil {
		t.Fatal(err)
	}
	asNobody := func(args ...string) (string, int) {
		cmd := exec.Command("setpriv", append([]string{"--reuid=65534", "--regid=65534", "--clear-groups",
			"--inh-caps=-all", "--bounding-set=-all", "--", bin}, args...)...)
		cmd.Dir = dir
		var errb bytes.Buffer
		cmd.Stderr = &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return errb.String(), code
	}
	errs, code := asNobody("record", "--off-cpu", "-o", "-", "--", prog, "spin", "0.2")
	want := fmt.Sprintf("kernel.perf_event_paranoid is %d; for context-switch samples (taken in the kernel) it must be 1 or lower (sysctl kernel.perf_event_paranoid=1)", paranoid)
	if code != 1 || !strings.HasPrefix(errs, "sframe record: ") || !strings.Contains(errs, want) || strings.Count(errs, "\n") != 1 {
		t.Errorf("--off-cpu as nobody: exit %d, stderr %q; want one line with %q", code, errs, want)
	}
	if paranoid > 2 {
		return
	}
	// Without --kernel, time in the kernel is sampled where permitted;
	// here it is not, and the summary says so.
	errs, code = asNobody("record", "-o", "p.pb.gz", "--", prog, "spin", "0.2")
	want = "in user space only (kernel.perf_event_paranoid is 2; samples in the kernel need 1 or lower, or CAP_PERFMON: the time in system calls and page faults is missing)"
	if code != 0 || !strings.Contains(errs, want) {
		t.Errorf("as nobody: exit %d, stderr:\n%s\nwant %q", code, errs, want)
	}
	// --bpf without CAP_BPF and CAP_PERFMON: one line says so, and the
	// stacks are walked in user space.
	errs, code = asNobody("record", "--bpf", "--format", "folded", "-o", filepath.Join(dir, "bpf.folded"), "--", prog, "spin", "0.3")
	folded, _ := os.ReadFile(filepath.Join(dir, "bpf.folded"))
	if code != 0 || !regexp.MustCompile(`(?m)^sframe record: warning: --bpf: BPF needs CAP_BPF and CAP_PERFMON \(or root\); walking the stacks in user space$`).MatchString(errs) ||
		!strings.Contains(errs, "user stacks unwound: ") || !regexp.MustCompile(`(?m)^spin5;.*;start_thread;spin5;a1;a2;a3;a4;a5 \d+$`).Match(folded) {
		t.Errorf("--bpf as nobody: exit %d, stderr:\n%s\nfolded:\n%s", code, errs, folded)
	}
	// Rings of megabytes, where nobody may lock kernel.perf_event_mlock_kb per
	// CPU (the user has no RLIMIT_MEMLOCK to add: setpriv keeps root's,
	// so it is lowered to 0 first).
	errs, code = asNobodyLimited(t, bin, dir, "record", "-o", filepath.Join(dir, "p.pb.gz"), "--", prog, "spin", "0.3")
	if code != 0 || !regexp.MustCompile(`(?m)^sframe record: warning: ring buffers reduced from \d+ KiB to \d+ KiB per CPU: the locked-memory limit`).MatchString(errs) ||
		!strings.Contains(errs, " samples read") {
		t.Errorf("as nobody with no locked memory: exit %d, stderr:\n%s", code, errs)
	}
}

// asNobodyLimited runs bin with args as user nobody with no locked
// memory of its own (RLIMIT_MEMLOCK 0), in dir.
func asNobodyLimited(t *testing.T, bin, dir string, args ...string) (string, int) {
	t.Helper()
	testprog.NeedTool(t, "prlimit")
	cmd := exec.Command("prlimit", append([]string{"--memlock=0:0", "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
		"--inh-caps=-all", "--bounding-set=-all", "--", bin}, args...)...)
	cmd.Dir = dir
	var errb bytes.Buffer
	cmd.Stderr = &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return errb.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return errb.String(), 0
}

// TestRecordFoldedToStdout: folded stacks without -o go to standard
// output, after the command's own output, and no file is left in the
// current directory.
func TestRecordFoldedToStdout(t *testing.T) {
	needPerf(t)
	exe := recprog(t)
	dir := t.TempDir()
	t.Chdir(dir)
	out, errs, code := runCLI(t, "record", "-q", "--format", "folded", "--", exe, "spin", "0.3")
	if code != 0 || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	if !strings.HasPrefix(out, "ready\n") || !regexp.MustCompile(`(?m)^spin5;.*;a5 \d+$`).MatchString(out) {
		t.Errorf("standard output without the folded stacks:\n%s", out)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("files left in the current directory: %v", ents)
	}
}

// TestRecordOutputCheckedFirst: an output path that cannot be written
// fails before anything is recorded: the command is never started.
func TestRecordOutputCheckedFirst(t *testing.T) {
	needPerf(t)
	exe := recprog(t)
	bad := filepath.Join(t.TempDir(), "no-such-dir", "p.pb.gz")
	for _, format := range []string{"pprof", "folded"} {
		out, errs, code := runCLI(t, "record", "--format", format, "-o", bad, "--", exe, "spin", "0.3")
		if code != 1 || out != "" || !strings.HasPrefix(errs, "sframe record: "+bad+": ") || strings.Count(errs, "\n") != 1 {
			t.Errorf("%s: exit %d, stdout %q (the command's), stderr %q", format, code, out, errs)
		}
	}
}

// TestRecordExitStatus: sframe record exits with the command's status, or
// 128+N when signal N killed it, the profile written all the same.
func TestRecordExitStatus(t *testing.T) {
	needPerf(t)
	dir := t.TempDir()
	for _, c := range []struct {
		script string
		want   int
	}{
		{"exit 0", 0},
		{"exit 3", 3},
		{"kill -TERM $$", 128 + 15},
	} {
		pb := filepath.Join(dir, "p.pb.gz")
		os.Remove(pb)
		_, errs, code := runCLI(t, "record", "-o", pb, "--", "sh", "-c", c.script)
		if code != c.want {
			t.Errorf("%q: exit %d, want %d; stderr:\n%s", c.script, code, c.want, errs)
		}
		if _, err := os.Stat(pb); err != nil {
			t.Errorf("%q: %v", c.script, err)
		}
	}
}

// TestRecordSignals stops a recording with each signal that ends a
// terminal session or a service: the profile is written, sframe says so,
// and no temporary file is left. SIGHUP, SIGINT and SIGTERM go to the
// process group, as a terminal sends them (the command dies of them, and
// sframe exits as it did); SIGQUIT to sframe alone, which then waits for
// the command.
func TestRecordSignals(t *testing.T) {
	needPerf(t)
	exe := recprog(t)
	dir := t.TempDir()
	bin := cliBinary(t)
	for _, c := range []struct {
		sig   syscall.Signal
		group bool
	}{
		{syscall.SIGHUP, true},
		{syscall.SIGQUIT, false},
		{syscall.SIGINT, true},
		{syscall.SIGTERM, true},
	} {
		name := unix.SignalName(c.sig)
		t.Run(name, func(t *testing.T) {
			pb := filepath.Join(dir, name+".pb.gz")
			// The shell says the command's process ID, then becomes it.
			cmd := exec.Command(bin, "record", "-o", pb, "--", "sh", "-c", `echo $$; exec "$0" spin 120`, exe)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var errb testprog.Buffer
			cmd.Stderr = &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var prog int
			defer func() {
				if prog != 0 {
					syscall.Kill(prog, syscall.SIGKILL)
				}
				cmd.Process.Kill()
				cmd.Wait()
			}()
			r := bufio.NewReader(stdout)
			line, err := testprog.ReadLine(r, time.Minute)
			if prog, _ = strconv.Atoi(strings.TrimSpace(line)); err != nil || prog == 0 {
				t.Fatalf("first line %q: %v", line, err)
			}
			if line, err := testprog.ReadLine(r, time.Minute); err != nil || strings.TrimSpace(line) != "ready" {
				t.Fatalf("recprog said %q: %v", line, err)
			}
			// Some samples of its threads first: 100 ms of their CPU.
			waitFor(t, "100 ms of recprog's CPU time", func() bool { return procTicks(prog) >= 10 })
			target := cmd.Process.Pid
			if c.group {
				target = -target
			}
			if err := syscall.Kill(target, c.sig); err != nil {
				t.Fatal(err)
			}
			if !c.group {
				// sframe writes the profile, then waits for the command.
				waitFor(t, "sframe waiting for the command", func() bool { return strings.Contains(errb.String(), "waiting for") })
				syscall.Kill(prog, syscall.SIGKILL)
			}
			go io.Copy(io.Discard, r)
			err = cmd.Wait()
			prog = 0
			want := 128 + int(c.sig)
			if !c.group {
				want = 128 + int(syscall.SIGKILL)
			}
			if code := cmd.ProcessState.ExitCode(); code != want {
				t.Errorf("exit %d (%v), want %d", code, err, want)
			}
			errs := errb.String()
			if !strings.Contains(errs, "sframe record: "+name+": recording stopped, profile written to "+pb+"\n") {
				t.Errorf("stderr:\n%s", errs)
			}
			if p := readProfile(t, pb); len(p.Sample) == 0 {
				t.Errorf("profile: no samples")
			}
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				if strings.Contains(e.Name(), ".tmp") {
					t.Errorf("temporary file left: %s", e.Name())
				}
			}
		})
	}
}

// procTicks returns the CPU time of process pid so far, in clock ticks
// (utime and stime of /proc/PID/stat), 0 when it cannot be read.
func procTicks(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.Atoi(f[11])
	s, _ := strconv.Atoi(f[12])
	return u + s
}

// waitFor waits until done returns true, and fails after a minute
// (a loaded machine takes its time; a broken one never gets there).
func waitFor(t *testing.T, what string, done func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after a minute", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRecordOneName: a function has one name in pprof and folded output:
// dd's stacks go through the C library's __libc_start_main, whose symbol
// is versioned (__libc_start_main@@GLIBC_2.34 in glibc 2.34 and later),
// and neither output shows the version.
func TestRecordOneName(t *testing.T) {
	needPerf(t)
	testprog.NeedTool(t, "dd")
	dir := t.TempDir()
	dd := []string{"--", "dd", "if=/dev/zero", "of=/dev/null", "bs=1", "count=300000", "status=none"}
	folded := filepath.Join(dir, "dd.folded")
	if _, errs, code := runCLI(t, append([]string{"record", "-q", "--format", "folded", "-o", folded}, dd...)...); code != 0 {
		t.Fatalf("folded: exit %d: %s", code, errs)
	}
	b, _ := os.ReadFile(folded)
	if !bytes.Contains(b, []byte(";__libc_start_main;")) || regexp.MustCompile(`@[^p;]`).Match(b) {
		t.Errorf("folded stacks without __libc_start_main, or with symbol versions:\n%s", b)
	}
	pb := filepath.Join(dir, "dd.pb.gz")
	if _, errs, code := runCLI(t, append([]string{"record", "-q", "-o", pb}, dd...)...); code != 0 {
		t.Fatalf("pprof: exit %d: %s", code, errs)
	}
	p := readProfile(t, pb)
	found := false
	for _, fn := range p.Function {
		found = found || fn.Name == "__libc_start_main"
	}
	if !found {
		t.Error("no function __libc_start_main in the pprof profile")
	}
}

// TestRecordCXXNames: the pprof profile of a C++ program names each C++
// function by its symbol demangled in full, with parameters (without the
// symbol's version), though record demangles only that form for pprof
// output (perfunwind's Resolver.NameOnly); folded output keeps perf's
// short form, without parameters. The full form is symbolize.Demangle's,
// which c++filt's matches but for one known divergence (an empty
// parameter pack prints a trailing ", ": "std::_Tuple_impl<0ul, int&&, >").
func TestRecordCXXNames(t *testing.T) {
	needPerf(t)
	testprog.NeedTool(t, "g++")
	dir := t.TempDir()
	src, exe := filepath.Join(dir, "p.cc"), filepath.Join(dir, "p")
	os.WriteFile(src, []byte(`#include <map>
#include <vector>
#include <algorithm>
template <typename T> struct box { T v; bool operator<(const box &o) const { return v < o.v; } };
int main() {
	long sum = 0;
	for (int r = 0; r < 400; r++) {
		std::map<int, box<long>> m;
		std::vector<box<int>> v;
		for (int i = 0; i < 2000; i++) { m[(i * 7919) % 2003] = box<long>{i}; v.push_back(box<int>{(i * 31) % 1009}); }
		std::sort(v.begin(), v.end());
		sum += m.begin()->second.v + v[0].v;
	}
	return sum == 42;
}
`), 0o644)
	if out, err := exec.Command("g++", "-O0", "-o", exe, src).CombinedOutput(); err != nil {
		t.Fatalf("g++: %v\n%s", err, out)
	}
	pb := filepath.Join(dir, "p.pb.gz")
	if _, errs, code := runCLI(t, "record", "-q", "-F", "4999", "-o", pb, "--", exe); code != 1 && code != 0 {
		t.Fatalf("record: exit %d: %s", code, errs)
	}
	p := readProfile(t, pb)
	var syms, names []string
	for _, fn := range p.Function {
		if strings.HasPrefix(fn.SystemName, "_Z") && !strings.HasSuffix(fn.SystemName, "@plt") {
			sym, _, _ := strings.Cut(fn.SystemName, "@")
			syms, names = append(syms, sym), append(names, fn.Name)
		}
	}
	if len(syms) < 3 {
		t.Fatalf("%d C++ functions in the profile, want at least 3: %v", len(syms), syms)
	}
	for i, sym := range syms {
		if want := symbolize.Demangle(sym); names[i] != want || want == sym {
			t.Errorf("%s: %q, want %q demangled", sym, names[i], want)
		}
	}

	folded := filepath.Join(dir, "p.folded")
	if _, errs, code := runCLI(t, "record", "-q", "-F", "4999", "--format", "folded", "-o", folded, "--", exe); code != 1 && code != 0 {
		t.Fatalf("record --format folded: exit %d: %s", code, errs)
	}
	b, _ := os.ReadFile(folded)
	if !bytes.Contains(b, []byte(";main;std::sort<")) && !bytes.Contains(b, []byte(";main;std::map<")) || bytes.Contains(b, []byte(";_Z")) {
		t.Errorf("folded stacks without main's demangled callees in perf's form, or with mangled names:\n%.2000s", b)
	}
}

// TestRecordSignalAfterRecording checks that a first signal that sframe
// handles after the recording ended, before the profile is written, lets
// the profile be written and is reported: a signal sent to the process
// group ends the command too, and under load sframe can see the
// command's end before its own copy of the signal (TestRecordSignals
// lost the profile so).
func TestRecordSignalAfterRecording(t *testing.T) {
	out := filepath.Join(t.TempDir(), "profile.pb.gz")
	file, err := outfile.Create(out, 0o644, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var errb testprog.Buffer
	s := newRecordSignals(file, &errb)
	defer s.stop()
	// The recording has ended (Record returned); sframe's SIGHUP comes.
	s.in.ch <- syscall.SIGHUP
	<-s.ctx.Done() // taken as the first signal
	if err := s.commit([]byte("profile")); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(out); err != nil || string(b) != "profile" {
		t.Errorf("output %q, %v; stderr %q", b, err, errb.String())
	}
	if sig := s.received(); sig != syscall.SIGHUP {
		t.Errorf("signal received: %v, want SIGHUP", sig)
	}
}
