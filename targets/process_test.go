//go:build linux

package targets

import (
	"bufio"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/elffile"
	"github.com/sframekit/sframekit/internal/testprog"
)

func TestAttachProcess(t *testing.T) {
	c := startChild(t)
	exe := testProgram(t)
	p, err := AttachProcess(c.pid)
	if err != nil {
		t.Fatalf("AttachProcess: %v", err)
	}
	defer p.Close()
	for _, w := range p.Warnings() {
		t.Logf("warning: %v", w)
	}

	threads := p.Threads()
	if len(threads) != 4 {
		t.Fatalf("got %d threads, want 4", len(threads))
	}
	if threads[0].TID != c.pid || threads[0].Name != "targprog" {
		t.Errorf("first thread = %d %q, want main thread %d targprog", threads[0].TID, threads[0].Name, c.pid)
	}
	names := map[string]bool{}
	for _, th := range threads {
		names[th.Name] = true
	}
	for _, n := range []string{"worker0", "worker1", "worker2"} {
		if !names[n] {
			t.Errorf("no thread named %s (have %v)", n, names)
		}
	}

	mods := p.Modules()
	var exeMod, libcMod, vdso *arch.Module
	for i := range mods {
		m := &mods[i]
		t.Logf("module %#x-%#x off %#x %s bias %#x (ok %v) file %s", m.Start, m.End, m.Offset, m.Perm, m.Bias, m.HasBias, m.File)
		switch {
		case m.Path == exe:
			exeMod = m
		case strings.Contains(filepath.Base(m.Path), "libc.so"):
			libcMod = m
		case m.IsVDSO():
			vdso = m
		}
		if i > 0 && mods[i-1].Start > m.Start {
			t.Errorf("modules not sorted at %d", i)
		}
	}
	if exeMod == nil || libcMod == nil || vdso == nil {
		t.Fatalf("missing modules: exe %v libc %v vdso %v", exeMod != nil, libcMod != nil, vdso != nil)
	}
	if !exeMod.HasBias || !libcMod.HasBias || !vdso.HasBias {
		t.Fatalf("bias missing: exe %v libc %v vdso %v", exeMod.HasBias, libcMod.HasBias, vdso.HasBias)
	}

	mem := p.Memory()
	recurse, recurseSize := elfSym(t, exe, "worker_recurse")
	lo, hi := recurse+exeMod.Bias, recurse+exeMod.Bias+recurseSize
	workers := 0
	for _, th := range threads {
		pc, sp := th.Regs.PC(), th.Regs.SP()
		if arch.FindModule(mods, pc) == nil {
			t.Errorf("thread %d: pc %#x in no module", th.TID, pc)
		}
		if _, err := ReadUint64(mem, sp); err != nil {
			t.Errorf("thread %d: reading at sp %#x: %v", th.TID, sp, err)
		}
		if !strings.HasPrefix(th.Name, "worker") {
			continue
		}
		workers++
		// The stack holds one return address into worker_recurse per
		// recursion level (depth 3+i calls, so 3+i returns into it), which
		// checks the exe's load bias and the memory reads together.
		depth := int(th.Name[len(th.Name)-1]-'0') + 3
		buf := make([]byte, 8192)
		if _, err := mem.ReadAt(buf, int64(sp)); err != nil {
			t.Fatalf("thread %d: reading stack: %v", th.TID, err)
		}
		n := 0
		for i := 0; i+8 <= len(buf); i += 8 {
			v := uint64(buf[i]) | uint64(buf[i+1])<<8 | uint64(buf[i+2])<<16 | uint64(buf[i+3])<<24 |
				uint64(buf[i+4])<<32 | uint64(buf[i+5])<<40 | uint64(buf[i+6])<<48 | uint64(buf[i+7])<<56
			if v > lo && v < hi {
				n++
			}
		}
		if n != depth {
			t.Errorf("thread %s: %d return addresses into worker_recurse [%#x,%#x) on the stack, want %d", th.Name, n, lo, hi, depth)
		}
	}
	if workers != 3 {
		t.Errorf("%d worker threads, want 3", workers)
	}

	// The vDSO image from memory is an ELF file with its usual symbols.
	img, err := arch.ReadImage(mem, vdso)
	if err != nil {
		t.Fatalf("vdso: %v", err)
	}
	vf, err := elffile.NewFile(img)
	if err != nil {
		t.Fatalf("vdso: %v", err)
	}
	dsyms, err := vf.DynamicSymbols()
	vf.Close()
	if err != nil || !hasSym(dsyms, "__vdso_clock_gettime") {
		t.Errorf("vdso dynamic symbols: %v (err %v)", len(dsyms), err)
	}

	// Memory at libc's text equals the file's bytes.
	checkTextBytes(t, mem, libcMod)

	if runtime.GOARCH != "amd64" {
		p.Close()
		c.ping(t, "after")
		return
	}
	want := map[int]map[string]uint64{}
	for _, th := range threads {
		want[th.TID] = regsOf(&th.Regs)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	checkNotTraced(t, c.pid)

	// gdb attaches to the same blocked threads and must see the same
	// registers (before the main thread runs again for a ping).
	got := runGDB(t, "-p", fmt.Sprint(c.pid), "-ex", "thread apply all info registers rip rsp rbp rbx r12")
	compareRegs(t, "gdb -p", got, want)
	checkNotTraced(t, c.pid)
	c.ping(t, "after gdb")
}

func hasSym(syms []elf.Symbol, name string) bool {
	for _, s := range syms {
		if s.Name == name {
			return true
		}
	}
	return false
}

// checkTextBytes compares 64 bytes of the module's executable mapping in
// mem with the file.
func checkTextBytes(t *testing.T, mem arch.Memory, m *arch.Module) {
	t.Helper()
	f, err := elf.Open(m.File)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	text := f.Section(".text")
	if text == nil {
		t.Fatalf("%s has no .text", m.Path)
	}
	addr := text.Addr + 0x100 + m.Bias
	got := make([]byte, 64)
	if _, err := mem.ReadAt(got, int64(addr)); err != nil {
		t.Fatalf("reading %s text at %#x: %v", m.Path, addr, err)
	}
	want := make([]byte, 64)
	if _, err := text.ReadAt(want, 0x100); err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("%s text at %#x:\n got %x\nwant %x", m.Path, addr, got, want)
	}
}

// compareRegs checks that every thread and register of want appears in got
// with the same value.
func compareRegs(t *testing.T, what string, got gdbRegs, want map[int]map[string]uint64) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d threads, want %d", what, len(got), len(want))
	}
	for tid, regs := range want {
		g, ok := got[tid]
		if !ok {
			t.Errorf("%s: thread %d missing", what, tid)
			continue
		}
		for name, v := range regs {
			if gv, ok := g[name]; !ok || gv != v {
				t.Errorf("%s: thread %d %s = %#x (present %v), want %#x", what, tid, name, gv, ok, v)
			}
		}
	}
}

// TestAttachDetachRepeated attaches to and detaches from a 4-thread
// process 1,000 times: each attach finds the 4 threads, and the process
// runs on untraced (BenchmarkAttachDetach times the cycle).
func TestAttachDetachRepeated(t *testing.T) {
	c := startChild(t)
	const n = 1000
	for i := 0; i < n; i++ {
		p, err := AttachProcess(c.pid)
		if err != nil {
			t.Fatalf("attach %d: %v", i, err)
		}
		if len(p.Threads()) != 4 {
			t.Fatalf("attach %d: %d threads", i, len(p.Threads()))
		}
		if err := p.Close(); err != nil {
			t.Fatalf("detach %d: %v", i, err)
		}
		if i%250 == 0 {
			c.ping(t, fmt.Sprint("iteration ", i))
		}
	}
	checkNotTraced(t, c.pid)
	c.ping(t, "still alive")
}

// BenchmarkAttachDetach times one attach and detach of a 4-thread
// process whose threads sleep in system calls.
func BenchmarkAttachDetach(b *testing.B) {
	c := startChild(b)
	for b.Loop() {
		p, err := AttachProcess(c.pid)
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestAttachCallerThread attaches with AttachOptions.CallerThread: the
// calling goroutine's thread must be the tracer (it can read a
// tracee's registers itself, which fails from any other thread), the
// registers must be those AttachProcess reads (or those of the system
// call's restart), and Close must detach.
func TestAttachCallerThread(t *testing.T) {
	c := startChild(t)
	waitAllSleeping(t, c.pid)
	ref, err := AttachProcess(c.pid)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]arch.Regs{}
	for _, th := range ref.Threads() {
		want[th.TID] = th.Regs
	}
	if err := ref.Close(); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		errc <- func() error {
			p, err := AttachProcessWith(c.pid, AttachOptions{CallerThread: true})
			if err != nil {
				return err
			}
			defer p.Close()
			if len(p.Threads()) != 4 {
				return fmt.Errorf("%d threads, want 4", len(p.Threads()))
			}
			for _, th := range p.Threads() {
				// Or caught as the kernel restarts the system call the
				// first attach interrupted (the thread ran in between).
				if th.Regs != want[th.TID] && !restartedSyscall(th.Regs, want[th.TID]) {
					return fmt.Errorf("thread %d: registers %v, AttachProcess read %v", th.TID, th.Regs, want[th.TID])
				}
				if st := taskState(c.pid, th.TID); st != 't' {
					return fmt.Errorf("thread %d in state %c while attached, want t", th.TID, st)
				}
				if _, err := getRegs(th.TID); err != nil {
					return fmt.Errorf("thread %d: PTRACE_GETREGS from the calling thread: %v (not the tracer?)", th.TID, err)
				}
			}
			return p.Close()
		}()
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	checkNotTraced(t, c.pid)
	c.ping(t, "after CallerThread attach")
}

// TestAttachCallerThreadForeignClose: a Close from another goroutine
// than the attaching one (CloseOnSignal's) waits for that one's Close,
// and gives up after ForeignCloseTimeout.
func TestAttachCallerThreadForeignClose(t *testing.T) {
	c := startChild(t)
	for _, owned := range []bool{true, false} {
		pc := make(chan *Process)
		release := make(chan struct{})
		owner := make(chan error, 1)
		go func() {
			p, err := AttachProcessWith(c.pid, AttachOptions{CallerThread: true})
			if err != nil {
				owner <- err
				close(pc)
				return
			}
			pc <- p
			<-release
			owner <- p.Close()
		}()
		p := <-pc
		if p == nil {
			t.Fatal(<-owner)
		}
		if !owned {
			defer func(d time.Duration) { ForeignCloseTimeout = d }(ForeignCloseTimeout)
			ForeignCloseTimeout = 50 * time.Millisecond
			if err := p.Close(); err == nil {
				t.Error("foreign Close without the owner's: no error")
			}
			if st := taskState(c.pid, c.pid); st != 't' {
				t.Errorf("main thread in state %c after a foreign Close timed out, want t (still attached)", st)
			}
			close(release)
			if err := <-owner; err != nil {
				t.Errorf("owner's Close: %v", err)
			}
			checkNotTraced(t, c.pid)
			continue
		}
		foreign := make(chan error, 1)
		go func() { foreign <- p.Close() }()
		select {
		case err := <-foreign:
			t.Fatalf("foreign Close returned %v before the owner's Close", err)
		case <-time.After(100 * time.Millisecond):
		}
		if st := taskState(c.pid, c.pid); st != 't' {
			t.Errorf("main thread in state %c while the foreign Close waits, want t", st)
		}
		close(release)
		if err := <-owner; err != nil {
			t.Errorf("owner's Close: %v", err)
		}
		if err := <-foreign; err != nil {
			t.Errorf("foreign Close: %v", err)
		}
		checkNotTraced(t, c.pid)
	}
	c.ping(t, "after foreign Closes")
}

func TestAttachErrors(t *testing.T) {
	if _, err := AttachProcess(os.Getpid()); err == nil {
		t.Error("attaching to self succeeded")
	}
	if _, err := AttachProcess(1 << 30); err == nil || !strings.Contains(err.Error(), "no such process") {
		t.Errorf("attaching to a missing pid: %v", err)
	}
	c := startChild(t)
	p, err := AttachProcess(c.pid)
	if err != nil {
		t.Fatal(err)
	}
	// A second tracer is refused with a useful message, and the failed
	// attempt leaves the first attachment working.
	_, err = AttachProcess(c.pid)
	if err == nil || !strings.Contains(err.Error(), "already traced") {
		t.Errorf("second attach: %v, want 'already traced'", err)
	}
	if _, err := ReadUint64(p.Memory(), p.Threads()[0].Regs.SP()); err != nil {
		t.Errorf("memory after failed second attach: %v", err)
	}
	p.Close()
	p.Close() // idempotent
	if _, err := ReadUint64(p.Memory(), p.Threads()[0].Regs.SP()); err == nil {
		t.Error("memory read after Close succeeded")
	}
	checkNotTraced(t, c.pid)
	c.ping(t, "ok")
}

// TestDieAttached runs a child copy of this test binary that attaches to
// the test program without CloseOnSignal and is then killed by SIGINT:
// the kernel must detach the threads and let them run on, as Close would
// (sframe stack relies on it when no thread holds a signal).
func TestDieAttached(t *testing.T) {
	if pid := os.Getenv("TARGETS_HELPER_DIE_ATTACHED"); pid != "" {
		var n int
		fmt.Sscan(pid, &n)
		p, err := AttachProcess(n)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		for _, th := range p.Threads() {
			if th.Signal != 0 {
				fmt.Fprintf(os.Stderr, "thread %d holds signal %d\n", th.TID, th.Signal)
				os.Exit(5)
			}
		}
		fmt.Print("attached\n")
		time.Sleep(20 * time.Second)
		os.Exit(4)
	}
	c := startChild(t)
	cmd := startAttachHelper(t, "TestDieAttached", "TARGETS_HELPER_DIE_ATTACHED", c.pid)
	if st := taskState(c.pid, c.pid); st != 't' {
		t.Errorf("main thread state %c while attached, want t", st)
	}
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGINT {
		t.Errorf("helper ended with %v, want killed by SIGINT", err)
	}
	// The kernel detaches as the helper's threads exit: wait for that.
	deadline := time.Now().Add(time.Minute)
	for taskState(c.pid, c.pid) == 't' && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	checkNotTraced(t, c.pid)
	c.ping(t, "after the tracer died")
}

// TestCloseOnSignal runs a child copy of this test binary that attaches to
// the test program and is then interrupted with SIGINT: the handler must
// detach before the child dies.
func TestCloseOnSignal(t *testing.T) {
	if pid := os.Getenv("TARGETS_HELPER_ATTACH"); pid != "" {
		helperAttachAndWait(pid)
		return
	}
	c := startChild(t)
	cmd := startAttachHelper(t, "TestCloseOnSignal", "TARGETS_HELPER_ATTACH", c.pid)
	st := taskState(c.pid, c.pid)
	if st != 't' {
		t.Errorf("main thread state %c while attached, want t", st)
	}
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGINT {
		t.Errorf("helper ended with %v, want killed by SIGINT", err)
	}
	checkNotTraced(t, c.pid)
	c.ping(t, "after sigint")
}

// startAttachHelper runs this test binary's test name as a helper with
// env=pid, and returns once the helper says it has attached; the helper is
// killed when t ends, if it is still running.
func startAttachHelper(t *testing.T, name, env string, pid int) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", env, pid))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	buf := make([]byte, 9)
	if _, err := stdout.Read(buf); err != nil || string(buf) != "attached\n" {
		t.Fatalf("helper said %q, %v", buf, err)
	}
	return cmd
}

func helperAttachAndWait(pidStr string) {
	var pid int
	fmt.Sscan(pidStr, &pid)
	p, err := AttachProcess(pid)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	defer p.Close()
	defer CloseOnSignal(p)()
	fmt.Print("attached\n")
	time.Sleep(20 * time.Second)
	os.Exit(4)
}

// TestAttachThreadChurn attaches to a process that creates and ends
// threads continuously: each attach must catch every thread that exists
// while it is attached, all of them stopped, and detaching must let the
// process go on creating threads.
func TestAttachThreadChurn(t *testing.T) {
	needTool(t, "gcc")
	dir := t.TempDir()
	src := filepath.Join(dir, "churn.c")
	exe := filepath.Join(dir, "churn")
	os.WriteFile(src, []byte(churnSource), 0o644)
	if out, err := exec.Command("gcc", "-O1", "-pthread", "-o", exe, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	tp := testprog.StartCmd(t, exec.Command(exe))
	c := &child{cmd: tp.Cmd, stdin: tp.Stdin, out: tp.Out, pid: tp.PID()}
	created := func() int {
		fmt.Fprintln(c.stdin, "n")
		l, err := readLineTimeout(c.out, 5*time.Second)
		var n int
		if _, serr := fmt.Sscanf(l, "pong n %d", &n); err != nil || serr != nil {
			t.Fatalf("churn answered %q, %v", l, err)
		}
		return n
	}
	before := created()
	const rounds = 200
	maxThreads := 0
	for i := 0; i < rounds; i++ {
		p, err := AttachProcess(c.pid)
		if err != nil {
			t.Fatalf("attach %d: %v", i, err)
		}
		got := map[int]bool{}
		for _, th := range p.Threads() {
			got[th.TID] = true
		}
		maxThreads = max(maxThreads, len(got))
		tids, _ := listTasks(c.pid)
		for _, tid := range tids {
			st := taskState(c.pid, tid)
			if !got[tid] && st != 'Z' && st != 'X' && st != 0 {
				t.Errorf("attach %d: thread %d (state %c) exists but was not attached", i, tid, st)
			}
			if got[tid] && st != 't' {
				t.Errorf("attach %d: attached thread %d in state %c, want t", i, tid, st)
			}
		}
		if err := p.Close(); err != nil {
			t.Fatalf("detach %d: %v", i, err)
		}
	}
	t.Logf("%d attaches to a thread-churning process; up to %d threads per attach", rounds, maxThreads)
	// The spawners go on once detached, whenever the scheduler runs them:
	// on a loaded machine that may take a while, so wait for it (a
	// minute only guards against a process left stopped).
	after := created()
	for deadline := time.Now().Add(time.Minute); after <= before && time.Now().Before(deadline); after = created() {
		time.Sleep(10 * time.Millisecond)
	}
	if after <= before {
		t.Errorf("no thread created after the attaches (%d -> %d)", before, after)
	}
	checkNotTraced(t, c.pid)
}

// TestAttachStoppedProcess attaches to a process stopped by SIGSTOP: it
// must stay stopped after the detach, and continue on SIGCONT.
func TestAttachStoppedProcess(t *testing.T) {
	c := startChild(t)
	syscall.Kill(c.pid, syscall.SIGSTOP)
	deadline := time.Now().Add(time.Minute)
	for taskState(c.pid, c.pid) != 'T' && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	p, err := AttachProcess(c.pid)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Threads()) != 4 {
		t.Errorf("%d threads", len(p.Threads()))
	}
	for _, th := range p.Threads() {
		if th.Signal != 0 {
			t.Errorf("thread %d: signal %d recorded for a group stop", th.TID, th.Signal)
		}
	}
	p.Close()
	time.Sleep(20 * time.Millisecond)
	tids, _ := listTasks(c.pid)
	for _, tid := range tids {
		if st := taskState(c.pid, tid); st != 'T' {
			t.Errorf("thread %d in state %c after detach, want T (still stopped)", tid, st)
		}
	}
	syscall.Kill(c.pid, syscall.SIGCONT)
	checkNotTraced(t, c.pid)
	c.ping(t, "continued")
}

// TestAttachDeletedExecutable: the executable is deleted after the start;
// the module must still get its bias and a File that opens the right
// bytes (/proc/PID/map_files).
func TestAttachDeletedExecutable(t *testing.T) {
	src := testProgram(t)
	exe := filepath.Join(t.TempDir(), "targprog")
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(exe, data, 0o755)
	cmd := exec.Command(exe)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	c := &child{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout), pid: cmd.Process.Pid}
	if l, err := readLineTimeout(c.out, 5*time.Second); l != "ready" {
		t.Fatalf("%q %v", l, err)
	}
	os.Remove(exe)
	p, err := AttachProcess(c.pid)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var m *arch.Module
	for i := range p.Modules() {
		if strings.HasPrefix(p.Modules()[i].Path, exe) {
			m = &p.Modules()[i]
		}
	}
	if m == nil {
		t.Fatalf("no module for the deleted executable")
	}
	if !strings.HasSuffix(m.Path, " (deleted)") || !strings.Contains(m.File, "/map_files/") || !m.HasBias {
		t.Errorf("module %+v", m)
	}
	checkTextBytes(t, p.Memory(), m)
}

// TestAttachWhatItIs: a process that cannot be attached is named for what
// it is, not guessed at: a zombie (exited, not reaped) with its parent, a
// PID that does not exist, a kernel thread.
func TestAttachWhatItIs(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "exit 0")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	deadline := time.Now().Add(time.Minute)
	for taskState(pid, pid) != 'Z' && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	_, err := AttachProcess(pid)
	want := fmt.Sprintf("attach to process %d: the process has exited: it is a zombie that its parent (PID %d) has not reaped", pid, os.Getpid())
	if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, ErrGone) {
		t.Errorf("zombie: %v\nwant %q (ErrGone)", err, want)
	}
	cmd.Wait()
	if _, err := AttachProcess(pid); err == nil || !strings.Contains(err.Error(), "no such process") || !errors.Is(err, ErrGone) {
		t.Errorf("reaped: %v", err)
	}

	// A kernel thread, if this PID namespace shows one.
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		k, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := readStat(k, 0); err == nil && st.flags&pfKthread != 0 {
			_, err := AttachProcess(k)
			if err == nil || !strings.Contains(err.Error(), "is a kernel thread ("+st.comm+")") || errors.Is(err, ErrGone) {
				t.Errorf("kernel thread %d: %v", k, err)
			}
			return
		}
	}
	t.Log("no kernel thread visible")
}

// manySource is a program with 64 threads blocked in pause(); it prints
// "ready" when they all exist.
const manySource = `#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
static void *f(void *a) { (void)a; for (;;) pause(); return 0; }
int main(void) {
	pthread_t t;
	for (int i = 0; i < 63; i++) pthread_create(&t, 0, f, 0);
	printf("ready\n");
	fflush(stdout);
	for (;;) pause();
}
`

// TestAttachKilledDuringAttach kills a process while AttachProcess stops
// its threads, at varied moments: the attach must end at once (not wait
// StopTimeout for threads that will never stop), say that the process
// exited, and leave no traced zombie, so that the parent reaps it.
// StopTimeout is raised so that waiting for it cannot pass for an end.
func TestAttachKilledDuringAttach(t *testing.T) {
	needTool(t, "gcc")
	dir := t.TempDir()
	src, exe := filepath.Join(dir, "many.c"), filepath.Join(dir, "many")
	os.WriteFile(src, []byte(manySource), 0o644)
	if out, err := exec.Command("gcc", "-O1", "-pthread", "-o", exe, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	defer func(d time.Duration) { StopTimeout = d }(StopTimeout)
	StopTimeout = time.Hour
	const guard = 60 * time.Second // far beyond any attach that ends
	gone := 0
	for i := 0; i < 30; i++ {
		tp := testprog.StartCmd(t, exec.Command(exe))
		pid := tp.PID()
		res := make(chan error, 1)
		go func() {
			p, err := AttachProcess(pid)
			if err == nil {
				err = p.Close()
			}
			res <- err
		}()
		// Spread the kills over the attach of 64 threads.
		time.Sleep(time.Duration(i%10) * 100 * time.Microsecond)
		syscall.Kill(pid, syscall.SIGKILL)
		select {
		case err := <-res:
			if errors.Is(err, ErrGone) {
				gone++
				if m := err.Error(); !strings.Contains(m, "exited") && !strings.Contains(m, "exiting") && !strings.Contains(m, "no such process") {
					t.Errorf("run %d: %v", i, err)
				}
			} else if err != nil {
				t.Errorf("run %d: %v", i, err)
			}
		case <-time.After(guard):
			t.Fatalf("run %d: attach still waiting %v after the kill", i, guard)
		}
		reaped := make(chan struct{})
		go func() { tp.Cmd.Wait(); close(reaped) }()
		select {
		case <-reaped:
		case <-time.After(guard):
			t.Fatalf("run %d: the parent cannot reap the killed process", i)
		}
	}
	t.Logf("%d of 30 attaches ended with the process gone", gone)
	if gone == 0 {
		t.Error("no kill landed during an attach")
	}
}

// TestAttach32Bit attaches to an i386 program (testprog.BuildI386): the error names
// the limit, a 32-bit process, and its machine, in one line.
func TestAttach32Bit(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("i386 programs run on x86-64 only")
	}
	src := filepath.Join(t.TempDir(), "pause32.c")
	if err := os.WriteFile(src, []byte("#include <unistd.h>\nint main(void) { for (;;) pause(); }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	exe := testprog.BuildI386(t, src)
	cmd := exec.Command(exe)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	// Attach once the child runs the program, not the test binary's copy
	// before its exec.
	for i := 0; ; i++ {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", cmd.Process.Pid)); err == nil && l == exe {
			break
		}
		if i == 1000 {
			t.Fatal("the program did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	p, err := AttachProcess(cmd.Process.Pid)
	if err == nil {
		p.Close()
		t.Fatal("AttachProcess of a 32-bit process succeeded")
	}
	if want := "a 32-bit (i386) process: only 64-bit processes are unwound"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q, want it to say %q", err, want)
	}
}
