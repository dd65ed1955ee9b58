//go:build linux && amd64

package recorder

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/sframekit/sframekit/bpfunwind"
	"github.com/sframekit/sframekit/internal/testprog"
	"github.com/sframekit/sframekit/unwind"
)

// needBPF skips the test where the kernel refuses BPF for want of
// privilege (failing it under CI, which runs as root).
func needBPF(t testing.TB) {
	t.Helper()
	needPerf(t)
	u, err := bpfunwind.Load(bpfunwind.Options{MaxRows: 16})
	if err != nil {
		if errors.Is(err, bpfunwind.ErrPermission) && os.Getenv("CI") == "" {
			t.Skipf("BPF refused here: %v", err)
		}
		t.Fatal(err)
	}
	u.Close()
}

// checkBPF checks that the recording walked its stacks in the kernel.
func checkBPF(t *testing.T, p *Profile) *bpfunwind.Counters {
	t.Helper()
	if !p.Stats.BPF {
		t.Fatalf("not walked in the kernel: %q", p.Warnings)
	}
	c := &p.Stats.BPFCounters
	if c.Samples == 0 || c.OutputErrors > 0 || p.Stats.BPFTruncated > 0 {
		t.Errorf("BPF counters %+v, %d truncated", c, p.Stats.BPFTruncated)
	}
	// Every sample read was unwound (the stacks seen before merged
	// without it, r.seen, counted as it counts them).
	if ss := &p.sess.Stats; ss.Samples != p.Stats.Samples || ss.Callchain+ss.Unwound+ss.NoUser+ss.NoMappings != ss.Samples {
		t.Errorf("%d samples read, the session counts %d unwound: %d callchains, %d walked, %d without user frames, %d without mappings",
			p.Stats.Samples, ss.Samples, ss.Callchain, ss.Unwound, ss.NoUser, ss.NoMappings)
	}
	// Only the samples of code whose tables are not loaded yet (a new
	// command's, library's or process's first tens of milliseconds, more
	// on a loaded machine) are passed on to the user-space walk;
	// recordUntil records until they are at most a quarter.
	if c.Fallback > c.Samples/3 {
		t.Errorf("%d of %d samples passed on to the user-space walk, want most walked in the kernel", c.Fallback, c.Samples)
	}
	return c
}

// TestBPFChains records with --bpf the three threads spinning in chains
// of 5, 20 and 60 functions, built with SFrame, with CFI only and with
// frame pointers only, of a process given by PID and of a command
// (whose first samples, before its tables are loaded, the program passes
// on to the user-space walk: checkBPF): at least 99% of each thread's samples show
// the exact chain, and the program's frames were walked by the build's
// method (the rows of its SFrame, own or compiled from its CFI, or frame
// pointers).
func TestBPFChains(t *testing.T) {
	needBPF(t)
	for _, b := range builds {
		for _, mode := range []string{"pid", "command"} {
			t.Run(b.name+"/"+mode, func(t *testing.T) {
				exe := buildProg(t, b.flags...)
				opts := Options{BPF: true}
				var pid int
				if mode == "pid" {
					pid = testprog.StartCmd(t, exec.Command(exe, "spin", "120")).PID()
					opts.PIDs = []int{pid}
				} else {
					opts.Command = exec.Command(exe, "spin", "120")
				}
				var c5, c20, c60 time.Duration
				opts.Started = func() {
					if pid == 0 {
						pid = opts.Command.Process.Pid
					}
					c5, c20, c60 = threadCPU(pid, "spin5"), threadCPU(pid, "spin20"), threadCPU(pid, "spin60")
				}
				p := recordUntil(t, opts, func() bool {
					return threadCPU(pid, "spin5")-c5 >= 300*time.Millisecond && threadCPU(pid, "spin20")-c20 >= 300*time.Millisecond &&
						threadCPU(pid, "spin60")-c60 >= 300*time.Millisecond
				})
				q := pprofOf(t, p)
				checkChains(t, q, pid, map[string][]string{
					"spin5":  chain("spin5", "a", 5),
					"spin20": chain("spin20", "b", 20),
					"spin60": chain("spin60", "c", 60),
				})
				c := checkBPF(t, p)
				all := c.SFrameFrames + c.FPFrames
				got := c.SFrameFrames
				if b.method == unwind.MethodFP {
					got = c.FPFrames
				}
				// 85 of the 88 callers of the chains are the program's.
				if float64(got) < 0.9*float64(all) {
					t.Errorf("%d of %d callers found by the build's method (%s): %+v", got, all, b.method, c)
				}
				// Each thread's stack (the 60-frame one over the first
				// window's 1 KiB) is read in one window
				// once a walk of the thread on that CPU has seen where it
				// ends: about one read a sample, not two for the 60-frame
				// thread.
				if c.Reads > c.Samples+c.Samples/10 {
					t.Errorf("%d reads of user memory for %d samples, want about one a sample", c.Reads, c.Samples)
				}
			})
		}
	}
}

// TestBPFDeep records a thread spinning 2,000 calls deep, past the stack
// copy of user-space record: with --bpf, at least 99% of its samples have
// the whole chain, from clone3 to e1.
func TestBPFDeep(t *testing.T) {
	needBPF(t)
	exe := buildProg(t, "-O2", "-Wa,--gsframe")
	prog := testprog.StartCmd(t, exec.Command(exe, "recurse", "120"))
	pid := prog.PID()
	var c0 time.Duration
	p := recordUntil(t, Options{PIDs: []int{pid}, BPF: true, Started: func() { c0 = threadCPU(pid, "recurse") }},
		func() bool { return threadCPU(pid, "recurse")-c0 >= 300*time.Millisecond })
	q := pprofOf(t, p)
	want := []string{"e1"}
	for range 2000 {
		want = append(want, "rec")
	}
	want = append(want, "recurse_spin", "start_thread", "clone3")
	var total, whole int64
	for _, s := range q.Sample {
		if s.Label["thread_name"][0] != "recurse" {
			continue
		}
		total += s.Value[0]
		if f := funcs(s); slices.Equal(f, want) {
			whole += s.Value[0]
		} else {
			t.Logf("%d samples of %d frames: %q ... %q", s.Value[0], len(f), f[:min(len(f), 3)], f[max(len(f)-3, 0):])
		}
	}
	if total < 50 || float64(whole) < 0.99*float64(total) {
		t.Errorf("%d of %d samples have the whole %d-frame chain, want 99%%", whole, total, len(want))
	}
	// The stack is read a window (up to a page) at a time, not a slot
	// at a time: 2,000 frames of 32 bytes fill 16 pages.
	c := checkBPF(t, p)
	if frames := c.SFrameFrames + c.FPFrames; c.Reads == 0 || c.Reads*20 > frames {
		t.Errorf("%d reads of user memory for %d frames, want at most one per 20 frames", c.Reads, frames)
	}
}

// TestBPFFollowsNewThreadsAndProcesses: with --bpf, a thread and a child
// process started after recording began are walked (their process's
// table follows the records), for a process given by PID and a command.
func TestBPFFollowsNewThreadsAndProcesses(t *testing.T) {
	needBPF(t)
	exe := buildProg(t, "-O2", "-Wa,--gsframe")
	for _, mode := range []string{"pid", "command"} {
		t.Run(mode, func(t *testing.T) {
			var opts Options
			var pidOf func() int
			if mode == "pid" {
				prog := testprog.StartCmd(t, exec.Command(exe, "late", "120"))
				opts.PIDs, pidOf = []int{prog.PID()}, prog.PID
				opts.Started = func() {
					io.WriteString(prog.Stdin, "spawn\n")
					if line, err := testprog.ReadLine(prog.Out, time.Minute); err != nil || !strings.HasPrefix(line, "spawned ") {
						t.Errorf("spawn: %q, %v", line, err)
					}
				}
			} else {
				cmd := exec.Command(exe, "late", "120", "auto")
				opts.Command, pidOf = cmd, func() int { return cmd.Process.Pid }
			}
			opts.BPF = true
			p := recordUntil(t, opts, func() bool {
				child := childOf(pidOf())
				return child != 0 && threadCPU(pidOf(), "late") >= 300*time.Millisecond && threadCPU(child, "child") >= 300*time.Millisecond
			})
			q := pprofOf(t, p)
			var child int64
			for _, s := range q.Sample {
				if pid := s.NumLabel["pid"][0]; pid != int64(pidOf()) && s.Label["thread_name"][0] == "child" {
					child = pid
				}
			}
			if child == 0 {
				t.Fatalf("no samples of a child process named child")
			}
			checkChains(t, q, pidOf(), map[string][]string{"late": chain("late_spin", "late", 3)})
			checkChains(t, q, int(child), map[string][]string{"child": append(chain("child_spin", "child", 3), "spawn", "main")})
			checkBPF(t, p)
		})
	}
}

// stackShares returns each thread's distinct stacks (function names,
// innermost first, joined) with their share of the thread's samples.
func stackShares(q *profile.Profile) map[string]map[string]float64 {
	n := map[string]map[string]int64{}
	tot := map[string]int64{}
	for _, s := range q.Sample {
		th := s.Label["thread_name"][0]
		if n[th] == nil {
			n[th] = map[string]int64{}
		}
		n[th][strings.Join(funcs(s), ";")] += s.Value[0]
		tot[th] += s.Value[0]
	}
	r := map[string]map[string]float64{}
	for th, m := range n {
		r[th] = map[string]float64{}
		for k, v := range m {
			r[th][k] = float64(v) / float64(tot[th])
		}
	}
	return r
}

// TestBPFAgrees records the same running program with --bpf and with the
// user-space walk at once: each thread has the same stacks in both (every
// stack with 2% or more of a thread's samples in one is in the other),
// with shares within 10 points.
func TestBPFAgrees(t *testing.T) {
	needBPF(t)
	exe := buildProg(t, "-O2", "-Wa,--gsframe")
	prog := testprog.StartCmd(t, exec.Command(exe, "spin", "120"))
	pid := prog.PID()
	var wg sync.WaitGroup
	var profs [2]*Profile
	var errs [2]error
	for i, bpf := range []bool{false, true} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			profs[i], errs[i] = Record(context.Background(), Options{PIDs: []int{pid}, BPF: bpf, Duration: 2 * time.Second})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { profs[i].Close() })
	}
	checkBPF(t, profs[1])
	user, kern := stackShares(pprofOf(t, profs[0])), stackShares(pprofOf(t, profs[1]))
	for _, th := range []string{"spin5", "spin20", "spin60"} {
		if len(user[th]) == 0 || len(kern[th]) == 0 {
			t.Errorf("thread %s: %d stacks in user space, %d with --bpf", th, len(user[th]), len(kern[th]))
			continue
		}
		for _, pair := range [][2]map[string]float64{{user[th], kern[th]}, {kern[th], user[th]}} {
			for st, share := range pair[0] {
				if share >= 0.02 && (pair[1][st] == 0 || share-pair[1][st] > 0.1 || pair[1][st]-share > 0.1) {
					t.Errorf("thread %s: stack %.80s... has %.1f%% of the samples in one recording, %.1f%% in the other", th, st, 100*share, 100*pair[1][st])
				}
			}
		}
	}
}

// TestBPFKernel records with --bpf and the kernel's frames a thread
// reading /dev/zero (nearly all its time in system calls): its stacks,
// whose records are copied out of the scratch map at the end (not
// written in place, as those without kernel frames), have the kernel's
// frames, then the whole user chain, walked from the saved user
// registers.
func TestBPFKernel(t *testing.T) {
	needBPF(t)
	exe := buildProg(t, "-O2", "-Wa,--gsframe")
	opts := Options{BPF: true, Kernel: true, Command: exec.Command(exe, "zero", "5000000")}
	var pid int
	opts.Started = func() { pid = opts.Command.Process.Pid }
	p := recordUntil(t, opts, func() bool { return threadCPU(pid, "reader") >= 300*time.Millisecond })
	q := pprofOf(t, p)
	user := []string{"read3", "read2", "read1", "reader", "start_thread", "clone3"}
	var total, whole, kern int64
	for _, s := range q.Sample {
		if s.Label["thread_name"][0] != "reader" {
			continue
		}
		total += s.Value[0]
		f := funcs(s)
		// Innermost first: the kernel's frames (vfs_read's among them),
		// libc's read, the chain.
		if i := slices.Index(f, "read3"); i >= 0 && slices.Equal(f[i:], user) {
			whole += s.Value[0]
			if slices.Contains(f[:i], "vfs_read") {
				kern += s.Value[0]
			}
		}
	}
	if total < 50 || float64(whole) < 0.99*float64(total) || kern < total/2 {
		t.Errorf("of %d samples, %d have the whole user chain, %d with the kernel's frames to vfs_read; want 99%% and half", total, whole, kern)
	}
	if c := checkBPF(t, p); c.KernelMode == 0 {
		t.Errorf("no sample taken in the kernel walked: %+v", c)
	}
}

// TestBPFOffCPU is TestOffCPU walked in the kernel: the switch-outs,
// taken in the scheduler, are walked from the task's saved user
// registers by the context-switch event's own copy of the program.
func TestBPFOffCPU(t *testing.T) {
	needBPF(t)
	p := testOffCPU(t, Options{OffCPU: true, BPF: true})
	if c := checkBPF(t, p); c.KernelMode == 0 {
		t.Errorf("no sample taken in the kernel walked: %+v", c)
	}
}

// TestBPFLateCode: with --bpf, a library loaded after the command
// started (dlopen), another loaded where an unloaded one was, and a
// program the process executes later (exec; also where the old one was
// mapped) are walked: the kernel's tables follow, and at least 99% of
// the samples of their threads show the exact chain.
func TestBPFLateCode(t *testing.T) {
	needBPF(t)
	dlprog := testprog.Build(t, "testdata/dlprog.c", "-O2", "-Wa,--gsframe")
	t.Run("dlopen", func(t *testing.T) {
		lib := testprog.Build(t, "testdata/dllib.c", "-O2", "-Wa,--gsframe", "-shared", "-fPIC")
		cmd := exec.Command(dlprog, "dlopen", lib, "120")
		p := recordUntil(t, Options{Command: cmd, BPF: true}, func() bool { return threadCPU(cmd.Process.Pid, "dl") >= 300*time.Millisecond })
		q := pprofOf(t, p)
		checkChains(t, q, cmd.Process.Pid, map[string][]string{"dl": {"lib2", "lib1", "lib_spin", "dl_thread", "start_thread", "clone3"}})
		checkBPF(t, p)
	})
	// A library unloaded and another loaded where it was: the walker's
	// per-CPU caches of the mappings it found (mcache) must not keep the
	// first one's rows for the second one's addresses.
	t.Run("reload", func(t *testing.T) {
		lib1 := testprog.Build(t, "testdata/dllib.c", "-O2", "-Wa,--gsframe", "-shared", "-fPIC")
		lib2 := testprog.Build(t, "testdata/dllib.c", "-O2", "-Wa,--gsframe", "-shared", "-fPIC", "-DPAD")
		cmd := exec.Command(dlprog, "reload", lib1, lib2, "120")
		var out testprog.Buffer
		cmd.Stdout = &out
		p := recordUntil(t, Options{Command: cmd, BPF: true}, func() bool { return threadCPU(cmd.Process.Pid, "dl2") >= 300*time.Millisecond })
		if a := strings.Fields(out.String()); len(a) != 2 || a[0] != a[1] {
			t.Fatalf("the two libraries were loaded at %q, want one address twice", a)
		}
		q := pprofOf(t, p)
		chain := []string{"lib2", "lib1", "lib_spin", "dl_thread", "start_thread", "clone3"}
		checkChains(t, q, cmd.Process.Pid, map[string][]string{"dl": chain, "dl2": chain})
		checkBPF(t, p)
	})
	// Without address randomization (setarch -R), the program executed
	// is mapped where dlprog was: the walker must not keep using
	// dlprog's mapping, which it saw in the samples before the exec.
	exe := buildProg(t, "-O2", "-Wa,--gsframe")
	for _, tc := range []struct {
		name string
		argv []string
	}{
		{"exec", []string{dlprog, "exec", exe, "spin", "120"}},
		{"exec-same-address", []string{"setarch", "-R", dlprog, "exec", exe, "spin", "120"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(tc.argv[0], tc.argv[1:]...)
			p := recordUntil(t, Options{Command: cmd, BPF: true}, func() bool {
				pid := cmd.Process.Pid
				return threadCPU(pid, "spin5") >= 300*time.Millisecond && threadCPU(pid, "spin20") >= 300*time.Millisecond &&
					threadCPU(pid, "spin60") >= 300*time.Millisecond
			})
			q := pprofOf(t, p)
			checkChains(t, q, cmd.Process.Pid, map[string][]string{
				"spin5":  chain("spin5", "a", 5),
				"spin20": chain("spin20", "b", 20),
				"spin60": chain("spin60", "c", 60),
			})
			checkBPF(t, p)
			// dlprog's table, which no process maps after the exec, is kept
			// for reuse.
			if p.Stats.BPFTables.Idle == 0 {
				t.Errorf("no idle table: %+v", p.Stats.BPFTables)
			}
		})
	}
}

// TestBPFSignalAndPLT records with --bpf testdata/sigplt.c (built with
// CFI only, whose SFrame record compiles, and with its own SFrame, whose
// PLT's rows ld writes), whose thread sigloop spends part of its time in
// a SIGALRM handler and pltloop calls abs through the PLT: at least 99%
// of each thread's samples have their whole chain, through the C
// library's signal trampoline into the interrupted sig_loop, and from
// the PLT stub into plt_loop. The tables once left both shapes to frame
// pointers: the walks ended at the trampoline (sig_work, on_signal,
// __restore_rt) and at the stub.
func TestBPFSignalAndPLT(t *testing.T) {
	needBPF(t)
	for _, b := range []struct {
		name  string
		flags []string
	}{
		{"cfi", []string{"-O2", "-fno-builtin"}},
		{"sframe", []string{"-O2", "-fno-builtin", "-Wa,--gsframe"}},
	} {
		t.Run(b.name, func(t *testing.T) {
			exe := testprog.Build(t, "testdata/sigplt.c", b.flags...)
			opts := Options{BPF: true, Command: exec.Command(exe, "120")}
			var pid int
			var cs, cp time.Duration
			opts.Started = func() {
				pid = opts.Command.Process.Pid
				cs, cp = threadCPU(pid, "sigloop"), threadCPU(pid, "pltloop")
			}
			p := recordUntil(t, opts, func() bool {
				return threadCPU(pid, "sigloop")-cs >= 500*time.Millisecond && threadCPU(pid, "pltloop")-cp >= 500*time.Millisecond
			})
			q := pprofOf(t, p)
			// Innermost first, each thread's chain from its loop out,
			// and what may come before it: "" any one frame (the
			// trampoline, named as its file's symbols allow; the stub;
			// abs; a sample in rt_sigreturn, at the address after the
			// trampoline's system call).
			outer := map[string][]string{
				"sigloop": {"sig_loop", "sig_thread", "start_thread", "clone3"},
				"pltloop": {"plt_loop", "plt_thread", "start_thread", "clone3"},
			}
			inner := map[string][][]string{
				"sigloop": {{}, {""}, {"on_signal", ""}, {"sig_work", "on_signal", ""}},
				"pltloop": {{}, {""}},
			}
			match := func(f, want []string) bool {
				if len(f) != len(want) {
					return false
				}
				for i := range f {
					if want[i] != "" && f[i] != want[i] {
						return false
					}
				}
				return true
			}
			total, exact, handler := map[string]int64{}, map[string]int64{}, int64(0)
			for _, s := range q.Sample {
				name := s.Label["thread_name"]
				if len(name) != 1 || outer[name[0]] == nil {
					continue
				}
				th, n, f := name[0], s.Value[0], funcs(s)
				total[th] += n
				ok := false
				for _, in := range inner[th] {
					ok = ok || match(f, append(slices.Clip(in), outer[th]...))
				}
				if f[0] == "sig_work" {
					handler += n
				}
				if ok {
					exact[th] += n
				} else {
					t.Logf("%s: %d samples of %q", th, n, f)
				}
			}
			for th := range outer {
				// A thread's exit (start_thread freeing its stack) is
				// outside its chain and may be sampled.
				if total[th] < 50 || float64(exact[th]) < 0.99*float64(total[th]) && total[th]-exact[th] > 1 {
					t.Errorf("thread %s: %d of %d samples show its whole chain, want 99%%", th, exact[th], total[th])
				}
			}
			if handler < 20 {
				t.Errorf("%d samples in the signal handler's sig_work, want 20 or more to judge", handler)
			}
			checkBPF(t, p)
		})
	}
}

// TestBPFCallersAtFunctionEnd records with --bpf a program whose callers
// each end with their call (testdata/noreturn.c): their return addresses
// are the first byte after their functions, and the folded stacks name
// them inside the call, as the user-space walk does, not the padding or
// function after it.
func TestBPFCallersAtFunctionEnd(t *testing.T) {
	needBPF(t)
	exe := testprog.Build(t, "testdata/noreturn.c", "-O2")
	p, err := Record(context.Background(), Options{BPF: true, Command: exec.Command(exe, "300000000")})
	if err != nil {
		t.Fatal(err)
	}
	var all, whole int
	stacks := foldedStacks(t, p)
	for st, n := range stacks {
		all += n
		if strings.HasSuffix(st, ";main;g;f;die") {
			whole += n
		}
		if strings.Contains(st, "[noreturn]") {
			t.Errorf("a caller named as no function: %s", st)
		}
	}
	if all == 0 || whole < all*9/10 {
		t.Errorf("%d of %d samples in main;g;f;die, want 90%% or more: %v", whole, all, stacks)
	}
}

// TestBPFi386 records an i386 program (testprog.BuildI386) with frame pointers,
// whose frames hold an address of its code and a zero where a 64-bit walk
// reads a return address: the kernel walk passes its samples on to
// user space, which gives each the sampled function alone, where a
// 64-bit walk made up a caller (prog;[prog];leaf).
func TestBPFi386(t *testing.T) {
	needBPF(t)
	if runtime.GOARCH != "amd64" {
		t.Skip("i386 programs run on x86-64 only")
	}
	exe := testprog.BuildI386(t, "testdata/fpargs32.c", "-O2", "-fno-omit-frame-pointer")
	p, err := Record(context.Background(), Options{BPF: true, Command: exec.Command(exe, "20000")})
	if err != nil {
		t.Fatal(err)
	}
	var all int
	stacks := foldedStacks(t, p)
	for _, n := range stacks {
		all += n
	}
	if alone := stacks["fpargs32;leaf"]; all == 0 || alone < all*9/10 {
		t.Errorf("%d of %d samples fpargs32;leaf, want 90%% or more: %v", alone, all, stacks)
	}
}

// foldedStacks returns p's folded stacks and their samples.
func foldedStacks(t *testing.T, p *Profile) map[string]int {
	t.Helper()
	var buf bytes.Buffer
	if err := p.WriteFolded(&buf); err != nil {
		t.Fatal(err)
	}
	stacks := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		i := strings.LastIndexByte(l, ' ')
		n, err := strconv.Atoi(l[i+1:])
		if i < 0 || err != nil {
			t.Fatalf("folded line %q", l)
		}
		stacks[l[:i]] += n
	}
	return stacks
}
