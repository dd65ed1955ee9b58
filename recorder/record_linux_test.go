package recorder

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/sframekit/sframekit/bpfunwind"
	"github.com/sframekit/sframekit/internal/sysfile"
	"github.com/sframekit/sframekit/internal/testprog"
	"github.com/sframekit/sframekit/perfevent"
	"github.com/sframekit/sframekit/unwind"
)

func TestMain(m *testing.M) { testprog.Main(m) }

// needPerf skips the test without perf_event_open (failing it under CI).
func needPerf(t testing.TB) {
	t.Helper()
	testprog.NeedPerfEvents(t)
}

// needKernelSampling skips the test unless samples in the kernel are
// allowed (off-CPU samples are taken in the scheduler): paranoid 1 or
// lower, or root.
func needKernelSampling(t testing.TB) {
	t.Helper()
	needPerf(t)
	b, _ := os.ReadFile("/proc/sys/kernel/perf_event_paranoid")
	if p, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && p > 1 && os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatalf("perf_event_paranoid %d forbids kernel samples; CI runs as root", p)
		}
		t.Skipf("perf_event_paranoid %d forbids kernel samples", p)
	}
}

// The builds of recprog: each unwinding method alone for the program's
// own code (the C library has CFI).
var builds = []struct {
	name   string
	flags  []string
	method unwind.Method
}{
	{"sframe", []string{"-O2", "-Wa,--gsframe"}, unwind.MethodSFrame},
	{"cfi", []string{"-O2"}, unwind.MethodCFI},
	{"fp", []string{"-O2", "-fno-omit-frame-pointer", "-mno-omit-leaf-frame-pointer", "-fno-asynchronous-unwind-tables"}, unwind.MethodFP},
}

func buildProg(t testing.TB, flags ...string) string {
	return testprog.Build(t, "testdata/recprog.c", flags...)
}

// recordCommand records the command exe args with opts, and returns the
// profile and what the command wrote on its standard output.
func recordCommand(t testing.TB, opts Options, exe string, args ...string) (*Profile, string) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	opts.Command = cmd
	p, err := Record(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	if err := p.Wait(); err != nil {
		t.Fatalf("%s %q: %v", exe, args, err)
	}
	return p, out.String()
}

// threadCPU returns the CPU time of the threads named name of process
// pid so far (user and system, from /proc, in 10 ms ticks).
func threadCPU(pid int, name string) time.Duration {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	ents, _ := os.ReadDir(dir)
	var ticks int64
	for _, e := range ents {
		comm, err := os.ReadFile(dir + "/" + e.Name() + "/comm")
		if err != nil || strings.TrimSpace(string(comm)) != name {
			continue
		}
		stat, err := os.ReadFile(dir + "/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// After "pid (comm) ": field 14 utime, 15 stime.
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) > 12 {
			u, _ := strconv.ParseInt(f[11], 10, 64)
			s, _ := strconv.ParseInt(f[12], 10, 64)
			ticks += u + s
		}
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// childOf returns a child process of pid, or 0.
func childOf(pid int) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c))
		if err != nil {
			continue
		}
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			return c
		}
	}
	return 0
}

// recordUntil records with opts (its Command, if any, started by
// Record) until enough reports true, checked every 50 ms from the start
// of sampling: the threads to judge have run long enough to give enough
// samples, however loaded the machine is. After a minute it gives up and
// fails. A command still running is killed when the test ends.
func recordUntil(t *testing.T, opts Options, enough func() bool) *Profile {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// With --bpf, a new process's first samples are passed on to the
	// user-space walk until its tables are loaded: the recording goes on
	// until most were walked in the kernel (checkBPF), however long the
	// loading takes.
	var bu atomic.Pointer[bpfunwind.Unwinder]
	if opts.BPF {
		testBPFLoaded = bu.Store
		defer func() { testBPFLoaded = nil }()
	}
	walked := func() bool {
		u := bu.Load()
		if u == nil {
			return true
		}
		c := u.Counters()
		return c.Samples > 0 && c.Fallback <= c.Samples/4
	}
	started := opts.Started
	opts.Started = func() {
		if started != nil {
			started()
		}
		go func() {
			for ctx.Err() == nil && !(enough() && walked()) {
				time.Sleep(50 * time.Millisecond)
			}
			cancel()
		}()
	}
	p, err := Record(ctx, opts)
	if errors.Is(err, perfevent.ErrPermission) && os.Getenv("CI") == "" {
		t.Skip(err) // system-wide, or in the kernel, without the privilege
	}
	if err != nil {
		t.Fatal(err)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("the threads did not get enough CPU time in a minute")
	}
	t.Cleanup(func() {
		if c := p.Command(); c != nil {
			c.Kill()
			p.Wait()
		}
		p.Close()
	})
	return p
}

// pprofOf writes p as a pprof profile and parses it back.
func pprofOf(t testing.TB, p *Profile) *profile.Profile {
	t.Helper()
	var buf bytes.Buffer
	if err := p.WritePprof(&buf); err != nil {
		t.Fatal(err)
	}
	q, err := profile.Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var sum strings.Builder
	p.WriteSummary(&sum)
	t.Logf("summary:\n%s", sum.String())
	return q
}

// funcs returns the function names of a sample's frames, innermost
// first ("?" where unknown).
func funcs(s *profile.Sample) []string {
	var names []string
	for _, l := range s.Location {
		if len(l.Line) == 0 {
			names = append(names, "?")
			continue
		}
		for _, ln := range l.Line {
			names = append(names, ln.Function.Name)
		}
	}
	return names
}

// chain returns the names start(), p1(), ..., pN() innermost first: the
// frames of a thread spinning in pN.
func chain(start, p string, n int) []string {
	var c []string
	for i := n; i >= 1; i-- {
		c = append(c, fmt.Sprintf("%s%d", p, i))
	}
	return append(c, start)
}

// valueIndex returns the index of sample type typ in q, or fails.
func valueIndex(t testing.TB, q *profile.Profile, typ string) int {
	t.Helper()
	for i, st := range q.SampleType {
		if st.Type == typ {
			return i
		}
	}
	t.Fatalf("no sample type %s in %v", typ, q.SampleType)
	return -1
}

// checkChains checks that at least 99% of the samples of each thread
// named in want show its exact chain from the thread's start function
// down (and that there are enough samples to say so).
func checkChains(t *testing.T, q *profile.Profile, pid int, want map[string][]string) {
	t.Helper()
	total, exact := map[string]int64{}, map[string]int64{}
	for _, s := range q.Sample {
		name := s.Label["thread_name"]
		if len(name) != 1 || want[name[0]] == nil || (pid != 0 && s.NumLabel["pid"][0] != int64(pid)) {
			continue
		}
		n := s.Value[0]
		total[name[0]] += n
		f := funcs(s)
		if len(f) >= len(want[name[0]]) && slices.Equal(f[:len(want[name[0]])], want[name[0]]) {
			exact[name[0]] += n
		} else if n > 0 {
			t.Logf("%s: %d samples of %q", name[0], n, f)
		}
	}
	for name, c := range want {
		if total[name] < 50 {
			t.Errorf("thread %s: %d samples, want 50 or more to judge", name, total[name])
			continue
		}
		// A thread's exit (glibc's start_thread freeing its stack:
		// __madvise under start_thread) is outside its chain and may be
		// sampled; on a loaded machine, where the thread gets fewer
		// samples, one such sample is more than 1%.
		if frac := float64(exact[name]) / float64(total[name]); frac < 0.99 && total[name]-exact[name] > 1 {
			t.Errorf("thread %s: %d of %d samples (%.1f%%) show its chain %s ... %s, want 99%%", name, exact[name], total[name], 100*frac, c[0], c[len(c)-1])
		} else {
			t.Logf("thread %s: %d of %d samples show its %d-frame chain", name, exact[name], total[name], len(c))
		}
	}
}

// TestChains records a program whose three threads spin in chains of 5,
// 20 and 60 functions, built with SFrame, with CFI only and with frame
// pointers only: at least 99% of each thread's samples must show its
// exact chain, and the program's frames must have been unwound by the
// build's method.
func TestChains(t *testing.T) {
	needPerf(t)
	for _, b := range builds {
		t.Run(b.name, func(t *testing.T) {
			exe := buildProg(t, b.flags...)
			cmd := exec.Command(exe, "spin", "120")
			// 0.3 s of CPU each: about 300 samples at 999 Hz.
			p := recordUntil(t, Options{Command: cmd}, func() bool {
				pid := cmd.Process.Pid
				return threadCPU(pid, "spin5") >= 300*time.Millisecond && threadCPU(pid, "spin20") >= 300*time.Millisecond &&
					threadCPU(pid, "spin60") >= 300*time.Millisecond
			})
			q := pprofOf(t, p)
			checkChains(t, q, p.Command().Pid, map[string][]string{
				"spin5":  chain("spin5", "a", 5),
				"spin20": chain("spin20", "b", 20),
				"spin60": chain("spin60", "c", 60),
			})
			st := p.Unwinding()
			var all uint64
			for _, n := range st.Frames {
				all += n
			}
			// The program's own frames are all but start_thread, clone3
			// and the last: 85 of 88 in the three chains.
			got := st.Frames[b.method]
			if b.method == unwind.MethodCFI {
				// SFrame compiled from the program's CFI, were
				// record to compile it, recovers what the CFI says.
				got += st.GenFrames
			}
			if float64(got) < 0.9*float64(all) {
				t.Errorf("%d of %d frames' callers found by %s, want 90%%: %+v", got, all, b.method, st.Frames)
			}
			if p.Stats.Lost > 0 {
				t.Logf("%d samples lost", p.Stats.Lost)
			}
		})
	}
}

// TestOffCPU records a thread that sleeps 9 ms in nap1() -> nap2() ->
// nap3() -> nanosleep() after each 1 ms of CPU in busy1() -> busy2() ->
// busy3(): the share of its weight (on-CPU and off-CPU nanoseconds) in
// its nap chain must be the share of its time it measured itself in
// nap1() (about 90%, less when the machine is busy), within 5 points.
func TestOffCPU(t *testing.T) {
	needKernelSampling(t)
	testOffCPU(t, Options{OffCPU: true})
}

// testOffCPU is TestOffCPU with opts (TestBPFOffCPU's walk in the
// kernel).
func testOffCPU(t *testing.T, opts Options) *Profile {
	exe := buildProg(t, "-O2", "-Wa,--gsframe")
	p, out := recordCommand(t, opts, exe, "sleep", "2")
	q := pprofOf(t, p)
	cpu, off := valueIndex(t, q, "cpu"), valueIndex(t, q, "off-cpu")
	if q.SampleType[off].Unit != "nanoseconds" || q.DefaultSampleType != "cpu" {
		t.Errorf("sample types %v, default %s", q.SampleType, q.DefaultSampleType)
	}
	var total, napped, nappedOff, busy int64
	napChain := chain("sleeper", "nap", 3)
	for _, s := range q.Sample {
		if name := s.Label["thread_name"]; len(name) != 1 || name[0] != "sleeper" {
			continue
		}
		w := s.Value[cpu] + s.Value[off]
		total += w
		f := funcs(s)
		i := slices.Index(f, "nap3")
		switch {
		case i >= 0:
			if len(f) < i+len(napChain) || !slices.Equal(f[i:i+len(napChain)], napChain) {
				t.Errorf("off-CPU stack %q: not the nap chain %q", f, napChain)
			}
			napped += w
			nappedOff += s.Value[off]
		case slices.Contains(f, "busy3"):
			busy += w
		}
	}
	var measured float64
	if _, err := fmt.Sscanf(out, "ready\nnapped %g", &measured); err != nil {
		t.Fatalf("program said %q: %v", out, err)
	}
	if total == 0 {
		t.Fatal("no weight for the sleeper")
	}
	got := float64(napped) / float64(total)
	t.Logf("sleeper: %.1f%% of %.3f s in its nap chain (%.1f%% in its busy chain); it measured %.1f%%", 100*got, float64(total)/1e9, 100*float64(busy)/float64(total), 100*measured)
	if measured < 0.5 || math.Abs(got-measured) > 0.05 {
		t.Errorf("%.1f%% of the sleeper's weight in its nap chain, it measured %.1f%% of its time there", 100*got, 100*measured)
	}
	if float64(nappedOff) < 0.95*float64(napped) {
		t.Errorf("nap chain: %d ns off the CPU of %d", nappedOff, napped)
	}
	if p.Stats.OffCPU == 0 || p.Stats.Dropped > p.Stats.OffCPU/20 {
		t.Errorf("%d switch-outs weighted, %d dropped", p.Stats.OffCPU, p.Stats.Dropped)
	}
	return p
}

// TestFollowsNewThreadsAndProcesses records a running process (-p) that
// then starts a thread and forks a child, and a command that does the
// same: both must be in the profile with their chains, the child as a
// process of its own.
func TestFollowsNewThreadsAndProcesses(t *testing.T) {
	needPerf(t)
	exe := buildProg(t, "-O2", "-Wa,--gsframe")
	want := func(q *profile.Profile, parent int) {
		t.Helper()
		var child int64
		for _, s := range q.Sample {
			if pid := s.NumLabel["pid"][0]; pid != int64(parent) && s.Label["thread_name"][0] == "child" {
				child = pid
			}
		}
		if child == 0 {
			t.Fatalf("no samples of a child process named child")
		}
		checkChains(t, q, parent, map[string][]string{"late": chain("late_spin", "late", 3)})
		checkChains(t, q, int(child), map[string][]string{"child": append(chain("child_spin", "child", 3), "spawn", "main")})
	}
	t.Run("pid", func(t *testing.T) {
		prog := testprog.StartCmd(t, exec.Command(exe, "late", "120"))
		child := 0
		opts := Options{PIDs: []int{prog.PID()}, Started: func() {
			io.WriteString(prog.Stdin, "spawn\n")
			line, err := testprog.ReadLine(prog.Out, time.Minute)
			if err == nil {
				_, err = fmt.Sscanf(line, "spawned %d", &child)
			}
			if err != nil {
				t.Errorf("spawn: %q, %v", line, err)
			}
		}}
		p := recordUntil(t, opts, func() bool {
			return threadCPU(prog.PID(), "late") >= 200*time.Millisecond && threadCPU(child, "child") >= 200*time.Millisecond
		})
		want(pprofOf(t, p), prog.PID())
	})
	t.Run("command", func(t *testing.T) {
		cmd := exec.Command(exe, "late", "120", "auto")
		p := recordUntil(t, Options{Command: cmd}, func() bool {
			child := childOf(cmd.Process.Pid)
			return child != 0 && threadCPU(cmd.Process.Pid, "late") >= 200*time.Millisecond && threadCPU(child, "child") >= 200*time.Millisecond
		})
		want(pprofOf(t, p), p.Command().Pid)
	})
}

// TestSystemWide records every process (-a) while the program spins: its
// threads are there, found in /proc before the events started.
func TestSystemWide(t *testing.T) {
	needPerf(t)
	exe := buildProg(t, "-O2", "-Wa,--gsframe")
	prog := testprog.StartCmd(t, exec.Command(exe, "spin", "120"))
	var cpu5, cpu60 time.Duration
	p := recordUntil(t, Options{SystemWide: true, Started: func() {
		cpu5, cpu60 = threadCPU(prog.PID(), "spin5"), threadCPU(prog.PID(), "spin60")
	}}, func() bool {
		return threadCPU(prog.PID(), "spin5")-cpu5 >= 300*time.Millisecond && threadCPU(prog.PID(), "spin60")-cpu60 >= 300*time.Millisecond
	})
	q := pprofOf(t, p)
	checkChains(t, q, prog.PID(), map[string][]string{"spin5": chain("spin5", "a", 5), "spin60": chain("spin60", "c", 60)})
}

// TestErrors: a process that does not exist, a command that does not,
// and options that make no sense are one-line errors, and nothing is
// left running.
func TestErrors(t *testing.T) {
	needPerf(t)
	_, err := Record(context.Background(), Options{PIDs: []int{1 << 30}})
	if !errors.Is(err, perfevent.ErrNoProcess) || strings.Contains(err.Error(), "\n") {
		t.Errorf("no such process: %v", err)
	}
	_, err = Record(context.Background(), Options{Command: exec.Command("sframekit-no-such-command")})
	if !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("no such command: %v", err)
	}
	for _, o := range []Options{
		{},
		{PIDs: []int{1}, SystemWide: true},
		{PIDs: []int{1}, StackSize: 100},
		{PIDs: []int{1}, Event: perfevent.ContextSwitches},
	} {
		if _, err := Record(context.Background(), o); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: %v", o, err)
		}
	}
}

// TestStopsOnContext: a recording of a command ends when the context is
// done, the command running on unharmed; Wait then waits for it. The
// command waits for a line on its standard input, so that it is still
// running when the recording stops, however slow the machine.
func TestStopsOnContext(t *testing.T) {
	needPerf(t)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.Command("sh", "-c", `read line; echo "got $line"`)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	p, err := Record(ctx, Options{Command: cmd, Started: cancel})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.Exited() {
		t.Error("the command exited before its input came")
	}
	io.WriteString(stdin, "line\n")
	stdin.Close()
	if err := p.Wait(); err != nil || !cmd.ProcessState.Success() || out.String() != "got line\n" {
		t.Errorf("command: %v, %v, said %q", err, cmd.ProcessState, out.String())
	}
}

// TestKernelFrames records the sleeper's switches off the CPU with
// Kernel: their stacks start in the kernel, in the scheduler, named
// from /proc/kallsyms, above the user frames of its nap chain.
func TestKernelFrames(t *testing.T) {
	needKernelSampling(t)
	exe := buildProg(t, "-O2", "-Wa,--gsframe")
	p, _ := recordCommand(t, Options{OffCPU: true, Kernel: true}, exe, "sleep", "1")
	q := pprofOf(t, p)
	off := valueIndex(t, q, "off-cpu")
	napChain := chain("sleeper", "nap", 3)
	var withKernel, all int64
	for _, s := range q.Sample {
		f := funcs(s)
		i := slices.Index(f, "nap3")
		if s.Value[off] == 0 || i < 0 || len(f) < i+len(napChain) || !slices.Equal(f[i:i+len(napChain)], napChain) {
			continue
		}
		all += s.Value[0]
		// The kernel's frames first (in a mapping of its own), the
		// scheduler among them; then the C library's nanosleep.
		kernel := 0
		for _, l := range s.Location {
			if l.Mapping == nil || l.Mapping.File != "[kernel.kallsyms]" {
				break
			}
			kernel++
		}
		if kernel > 0 && slices.ContainsFunc(f[:kernel], func(n string) bool { return strings.Contains(n, "schedule") }) {
			withKernel += s.Value[0]
		} else {
			t.Logf("switch-out without the scheduler's frames: %q (%d kernel)", f, kernel)
		}
	}
	if all == 0 || float64(withKernel) < 0.95*float64(all) {
		t.Errorf("%d of %d switch-outs in the nap chain have the scheduler's frames", withKernel, all)
	}
	if p.Unwinding().KernelFrames == 0 {
		t.Error("no kernel frames counted")
	}
}

// TestKernelTime records a thread that spends nearly all its time in the
// kernel, reading /dev/zero: without Kernel its samples in the kernel are
// taken all the same (at least 80% of the samples its CPU time implies),
// each with the thread's user stack down to the read; with Kernel they
// start with the kernel's frames.
func TestKernelTime(t *testing.T) {
	needKernelSampling(t)
	exe := buildProg(t, "-O2", "-Wa,--gsframe")
	readChain := []string{"read3", "read2", "read1", "reader"}
	for _, kernel := range []bool{false, true} {
		t.Run(fmt.Sprintf("kernel=%v", kernel), func(t *testing.T) {
			p, out := recordCommand(t, Options{Kernel: kernel}, exe, "zero", "1000000")
			var cpu, sys float64
			if _, err := fmt.Sscanf(out, "cpu %g sys %g", &cpu, &sys); err != nil {
				t.Fatalf("program said %q: %v", out, err)
			}
			if p.UserOnly != "" {
				t.Errorf("user space only: %s", p.UserOnly)
			}
			q := pprofOf(t, p)
			var samples, chained, withKernel int64
			for _, s := range q.Sample {
				if name := s.Label["thread_name"]; len(name) != 1 || name[0] != "reader" {
					continue
				}
				samples += s.Value[0]
				f := funcs(s)
				if i := slices.Index(f, "read3"); i >= 0 && len(f) >= i+len(readChain) && slices.Equal(f[i:i+len(readChain)], readChain) {
					chained += s.Value[0]
				}
				if len(s.Location) > 0 && s.Location[0].Mapping != nil && s.Location[0].Mapping.File == "[kernel.kallsyms]" {
					withKernel += s.Value[0]
				}
			}
			implied := cpu * float64(DefaultFreq)
			t.Logf("reader: %d samples, %.0f implied by its %.3f s of CPU (%.3f s in the kernel); %d with its chain, %d with kernel frames",
				samples, implied, cpu, sys, chained, withKernel)
			if sys < cpu/2 {
				t.Fatalf("the reader spent %.3f of %.3f s in the kernel: not the test's premise", sys, cpu)
			}
			if float64(samples) < 0.8*implied {
				t.Errorf("%d samples of the reader, want at least 80%% of the %.0f its %.3f s of CPU imply", samples, implied, cpu)
			}
			if float64(chained) < 0.95*float64(samples) {
				t.Errorf("%d of %d samples show the chain %q", chained, samples, readChain)
			}
			if kernel && float64(withKernel) < 0.5*float64(samples) || !kernel && withKernel != 0 {
				t.Errorf("kernel %v: %d of %d samples start with kernel frames", kernel, withKernel, samples)
			}
		})
	}
}

// TestFilesNotAtTheirPath records programs whose mapped files are not
// the files at their paths when the profiler reads them: a library
// replaced by another build while the first stays mapped (a package
// upgrade), and a program run from a memfd. Each sample must be named
// from the file its process mapped, read through /proc/PID/map_files:
// perf, which reads the paths after the recording, names the first
// library's code with the second's functions and the memfd's not at all.
func TestFilesNotAtTheirPath(t *testing.T) {
	needPerf(t)
	dlprog := testprog.Build(t, "testdata/dlprog.c", "-O2")
	t.Run("replaced", func(t *testing.T) {
		dir := t.TempDir()
		lib, next := dir+"/libdl.so", dir+"/libdl-new.so"
		for _, c := range []struct {
			flags []string
			to    string
		}{{nil, lib}, {[]string{"-DNEW"}, next}} {
			b, err := os.ReadFile(testprog.Build(t, "testdata/dllib.c", append([]string{"-O2", "-shared", "-fPIC"}, c.flags...)...))
			if err == nil {
				err = os.WriteFile(c.to, b, 0o755)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command(dlprog, "replace", lib, next, "120")
		var out testprog.Buffer
		cmd.Stdout = &out
		p := recordUntil(t, Options{Command: cmd}, func() bool { return threadCPU(cmd.Process.Pid, "dl2") >= 300*time.Millisecond })
		t.Logf("loaded at %q", out.String())
		q := pprofOf(t, p)
		checkChains(t, q, cmd.Process.Pid, map[string][]string{
			"dl":  {"lib2", "lib1", "lib_spin", "dl_thread"},
			"dl2": {"lib2_new", "lib1_new", "lib_spin", "dl_thread"},
		})
	})
	t.Run("mount namespaces", func(t *testing.T) {
		// Two processes, each in a mount namespace of its own with a
		// tmpfs at dir/mnt, map another build of a library at the same
		// path, dir/mnt/libdl.so; this process sees a third at that
		// path, on a tmpfs of its own. Fresh tmpfs mounts number their
		// first file alike: three files of one path and one inode
		// number, on three devices. Before the device was compared
		// (fileKey, openLive), the first process's library was read at
		// the path here and the second's taken for the first's.
		if os.Geteuid() != 0 {
			t.Skip("needs root: mounts tmpfs file systems")
		}
		testprog.NeedTool(t, "unshare")
		dir := t.TempDir()
		mnt := dir + "/mnt"
		builds := map[string][]string{"here": {"-DNEW"}, "a": nil, "b": {"-DNEW", "-DPAD"}}
		for name, flags := range builds {
			b, err := os.ReadFile(testprog.Build(t, "testdata/dllib.c", append([]string{"-O2", "-shared", "-fPIC"}, flags...)...))
			if err == nil {
				err = os.WriteFile(dir+"/"+name+".so", b, 0o755)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Mkdir(mnt, 0o755); err != nil {
			t.Fatal(err)
		}
		if b, err := exec.Command("mount", "-t", "tmpfs", "tmpfs", mnt).CombinedOutput(); err != nil {
			t.Skipf("mount tmpfs: %v: %s", err, b)
		}
		t.Cleanup(func() { exec.Command("umount", "-l", mnt).Run() })
		b, err := os.ReadFile(dir + "/here.so")
		if err == nil {
			err = os.WriteFile(mnt+"/libdl.so", b, 0o755)
		}
		if err != nil {
			t.Fatal(err)
		}
		// Each child: unshare, mount, cp, then dlprog (exec'd), which
		// exits after its SECONDS (60, 61: which one it is); the
		// process group is killed at the end.
		run := `unshare -m --propagation private sh -c 'mount -t tmpfs tmpfs "$0" && cp "$1" "$0/libdl.so" && exec "$2" dlopen "$0/libdl.so" "$3"' `
		script := run + `"$0" "$1/a.so" "$2" 60 & sleep 0.2; ` + run + `"$0" "$1/b.so" "$2" 61 & wait`
		cmd := exec.Command("sh", "-c", script, mnt, dir, dlprog)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		t.Cleanup(func() {
			if cmd.Process != nil {
				syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			}
		})
		pids := map[string]int{}
		find := func() {
			ents, _ := os.ReadDir("/proc")
			for _, e := range ents {
				args, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
				f := strings.Split(string(args), "\x00")
				if err != nil || len(f) < 4 || f[0] != dlprog || f[2] != mnt+"/libdl.so" {
					continue
				}
				pid, _ := strconv.Atoi(e.Name())
				pids[map[string]string{"60": "a", "61": "b"}[f[3]]] = pid
			}
		}
		p := recordUntil(t, Options{Command: cmd}, func() bool {
			if pids["a"] == 0 || pids["b"] == 0 {
				find()
				return false
			}
			return threadCPU(pids["a"], "dl") >= 300*time.Millisecond && threadCPU(pids["b"], "dl") >= 300*time.Millisecond
		})
		// The three files must share an inode number, else this test
		// tells nothing.
		inos := map[string]bool{}
		for _, pid := range []int{pids["a"], pids["b"]} {
			maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range strings.Split(string(maps), "\n") {
				if f := strings.Fields(line); len(f) == 6 && f[5] == mnt+"/libdl.so" {
					inos[f[3]+" "+f[4]] = true
				}
			}
		}
		if st, err := os.Stat(mnt + "/libdl.so"); err == nil {
			inos["here "+strconv.FormatUint(sysfile.Inode(st), 10)] = true
		}
		t.Logf("devices and inodes: %v", inos)
		ino := ""
		for k := range inos {
			if _, i, _ := strings.Cut(k, " "); ino == "" || i == ino {
				ino = i
			} else {
				t.Skipf("the files do not share an inode number: %v", inos)
			}
		}
		q := pprofOf(t, p)
		checkChains(t, q, pids["a"], map[string][]string{"dl": {"lib2", "lib1", "lib_spin", "dl_thread"}})
		checkChains(t, q, pids["b"], map[string][]string{"dl": {"lib2_new", "lib1_new", "lib_spin", "dl_thread"}})
	})
	t.Run("memfd", func(t *testing.T) {
		cmd := exec.Command(dlprog, "memfd", buildProg(t, "-O2"), "spin", "120")
		p := recordUntil(t, Options{Command: cmd}, func() bool {
			pid := cmd.Process.Pid
			return threadCPU(pid, "spin5") >= 300*time.Millisecond && threadCPU(pid, "spin20") >= 300*time.Millisecond
		})
		q := pprofOf(t, p)
		checkChains(t, q, cmd.Process.Pid, map[string][]string{
			"spin5":  chain("spin5", "a", 5),
			"spin20": chain("spin20", "b", 20),
		})
	})
}

// TestSystemWideAfterExit records every process (-a) while a shell runs
// 300 short processes: the samples of a thread's exit path that come
// after its EXIT record are its own, under its name (perf keeps exited
// threads), where they were ":TID"'s.
func TestSystemWideAfterExit(t *testing.T) {
	needPerf(t)
	var done atomic.Bool
	p := recordUntil(t, Options{SystemWide: true, Freq: 4999, Started: func() {
		go func() {
			exec.Command("sh", "-c", "for i in $(seq 300); do /bin/true; done").Run()
			done.Store(true)
		}()
	}}, done.Load)
	// The test binary's own threads, which the Go runtime starts as it
	// likes, may come before their FORK records are read: left out.
	self := int64(os.Getpid())
	nameless, all, shown := int64(0), int64(0), 0
	for _, smp := range pprofOf(t, p).Sample {
		if pid := smp.NumLabel["pid"]; len(pid) == 1 && pid[0] == self {
			continue
		}
		all += smp.Value[0]
		if name := smp.Label["thread_name"]; len(name) == 1 && len(name[0]) > 1 && name[0][0] == ':' && name[0][1] >= '0' && name[0][1] <= '9' {
			nameless += smp.Value[0]
			if shown++; shown <= 3 {
				t.Logf("%s: %d samples", name[0], smp.Value[0])
			}
		}
	}
	if all == 0 || nameless > 0 {
		t.Errorf("%d of %d samples of threads without a name", nameless, all)
	}
}
