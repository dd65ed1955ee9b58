// Package testprog builds and runs the small multi-threaded C programs
// that tests attach to, unwind and compare with gdb.
//
// A program is compiled with gcc once per test binary and set of flags, so
// that each test does not pay for gcc. A started program prints "ready"
// once its threads are in place; Start then waits until every thread is
// blocked in the kernel, so that the stacks and registers the tests read
// do not move under them.
//
// A missing tool skips the test, except under CI (the CI variable set),
// where it is a failure: a green run that tested nothing would hide
// regressions.
package testprog

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sframekit/sframekit/internal/corpus"
)

// Timeouts. They only matter on failure, so they are generous for loaded
// machines.
const (
	readyTimeout = 20 * time.Second
	pingTimeout  = 10 * time.Second
	blockTimeout = 10 * time.Second
)

// NeedTool skips the test when the named program is not on PATH, and
// fails it under CI, where every prerequisite must be installed.
func NeedTool(t testing.TB, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s not found; required under CI", name)
		}
		t.Skipf("%s not found", name)
	}
}

var (
	mu     sync.Mutex
	dir    string
	builds = map[string]string{} // key: source and flags; value: executable
)

// Main runs the tests and then removes Dir. Call it from TestMain: the
// built programs are shared by all tests, so no test's cleanup may remove
// them. It prints corpus.PrintSummary's line too, as corpus.Main does.
func Main(m *testing.M) {
	code := m.Run()
	corpus.PrintSummary()
	mu.Lock()
	if dir != "" {
		os.RemoveAll(dir)
	}
	mu.Unlock()
	os.Exit(code)
}

// Dir returns a temporary directory that lives as long as the test binary
// (when TestMain calls Main), for files shared between tests, such as the
// built programs or a core file made once.
func Dir(t testing.TB) string {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	return dirLocked(t)
}

func dirLocked(t testing.TB) string {
	t.Helper()
	if dir == "" {
		d, err := os.MkdirTemp("", "testprog-")
		if err != nil {
			t.Fatal(err)
		}
		dir = d
	}
	return dir
}

// Build compiles the C file src (relative to the test's package
// directory) with gcc, or the C++ file (.cc, .cpp) with g++, with -pthread
// and flags, and returns the executable's path. Each source and set of
// flags is compiled once per test binary. The executable has the source's
// base name without its extension, as tests check the main thread's name
// and the module's name.
func Build(t testing.TB, src string, flags ...string) string {
	t.Helper()
	// gcc compiles C++ too, but only g++ links the C++ library.
	cc, ext := "gcc", filepath.Ext(src)
	if ext == ".cc" || ext == ".cpp" {
		cc = "g++"
	}
	NeedTool(t, cc)
	abs, err := filepath.Abs(src)
	if err != nil {
		t.Fatal(err)
	}
	return buildOnce(t, abs+"\x00"+strings.Join(flags, "\x00"), strings.TrimSuffix(filepath.Base(abs), ext), func(exe string) []string {
		return append([]string{cc}, append(append([]string{}, flags...), "-pthread", "-o", exe, abs)...)
	})
}

// I386CC is the C compiler of the i386 (32-bit x86) test programs:
// Debian's cross compiler (package gcc-i686-linux-gnu, with
// libc6-dev-i386-cross), which, unlike gcc -m32's gcc-multilib, can be
// installed beside the AArch64 and s390x cross compilers.
const I386CC = "i686-linux-gnu-gcc"

// BuildI386 compiles the C program src for i386 with flags, statically
// (the host need not have the i386 C library), once per test binary and
// set of flags: a 32-bit process that x86-64 kernels run natively.
func BuildI386(t testing.TB, src string, flags ...string) string {
	t.Helper()
	NeedTool(t, I386CC)
	abs, err := filepath.Abs(src)
	if err != nil {
		t.Fatal(err)
	}
	return buildOnce(t, "i386\x00"+abs+"\x00"+strings.Join(flags, "\x00"), strings.TrimSuffix(filepath.Base(abs), filepath.Ext(abs)), func(exe string) []string {
		return append([]string{I386CC}, append(append([]string{}, flags...), "-static", "-pthread", "-o", exe, abs)...)
	})
}

// buildOnce returns the executable built for key, or builds it: named
// name, in a directory of its own under Dir, by the command that
// command(exe) returns.
func buildOnce(t testing.TB, key, name string, command func(exe string) []string) string {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if exe, ok := builds[key]; ok {
		return exe
	}
	// One subdirectory per build, so that all keep the same base name.
	sub := filepath.Join(dirLocked(t), fmt.Sprint(len(builds)))
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(sub, name)
	args := command(exe)
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	builds[key] = exe
	return exe
}

// Proc is a running test program. Its main thread answers each line on
// Stdin with "pong <line>" on Out, which shows that it still runs.
type Proc struct {
	Cmd   *exec.Cmd      // the started command, for signals and Wait
	Stdin io.WriteCloser // the program's stdin
	Out   *bufio.Reader  // the program's stdout
}

// PID returns the program's process id.
func (p *Proc) PID() int { return p.Cmd.Process.Pid }

// Ping checks that the program still answers: it sends msg and fails the
// test unless the answer is "pong msg".
func (p *Proc) Ping(t testing.TB, msg string) {
	t.Helper()
	if _, err := io.WriteString(p.Stdin, msg+"\n"); err != nil {
		t.Fatalf("writing to test program: %v", err)
	}
	line, err := ReadLine(p.Out, pingTimeout)
	if err != nil || line != "pong "+msg {
		t.Fatalf("test program answered %q, %v; want %q", line, err, "pong "+msg)
	}
}

// Options adjusts StartWith.
type Options struct {
	// Env holds extra environment variables, "NAME=value".
	Env []string
	// Threads, if not 0, is the number of threads the program has once
	// ready: StartWith also waits until that many exist, so that a test
	// does not see a thread that is still being created.
	Threads int
}

// Start runs exe with args, waits for its "ready" line and then until all
// its threads are blocked. The program is killed when the test ends.
func Start(t testing.TB, exe string, args ...string) *Proc {
	t.Helper()
	return StartWith(t, Options{}, exe, args...)
}

// StartWith is Start with options.
func StartWith(t testing.TB, opts Options, exe string, args ...string) *Proc {
	t.Helper()
	cmd := exec.Command(exe, args...)
	if opts.Env != nil {
		cmd.Env = append(os.Environ(), opts.Env...)
	}
	p := StartCmd(t, cmd)
	WaitBlocked(t, p.PID(), opts.Threads)
	return p
}

// StartCmd starts cmd, a test program prepared by the caller (its own
// directory or shell wrapper), with pipes to its stdin and stdout, and
// waits for its "ready" line, but not for its threads to block. The
// program is killed when the test ends.
func StartCmd(t testing.TB, cmd *exec.Cmd) *Proc {
	t.Helper()
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	p := &Proc{Cmd: cmd, Stdin: stdin, Out: bufio.NewReader(stdout)}
	if line, err := ReadLine(p.Out, readyTimeout); err != nil || line != "ready" {
		t.Fatalf("test program said %q, %v; want ready", line, err)
	}
	return p
}

// WaitBlocked waits until every thread of pid sleeps in the kernel (state
// S in /proc/PID/task/TID/stat) and, if threads is not 0, there are that
// many. A thread that answered a ping or was just detached needs a moment
// to get back into its system call, and until then its stack differs.
func WaitBlocked(t testing.TB, pid, threads int) {
	t.Helper()
	deadline := time.Now().Add(blockTimeout)
	for {
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			t.Fatal(err)
		}
		sleeping := 0
		for _, e := range ents {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, e.Name()))
			if err != nil {
				continue // exited since listed
			}
			// The state follows the name, which may hold ") ".
			if i := strings.LastIndexByte(string(b), ')'); i > 0 && i+2 < len(b) && b[i+2] == 'S' {
				sleeping++
			}
		}
		if sleeping == len(ents) && (threads == 0 || sleeping == threads) {
			// A thread is in state S slightly before it actually
			// sleeps; give it time to get there.
			time.Sleep(20 * time.Millisecond)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("threads of %d did not block: %d of %d sleeping, want %d", pid, sleeping, len(ents), max(threads, len(ents)))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ReadLine reads a line from r without its newline, giving up after d so
// that a hung program fails the test instead of stalling it. On timeout
// the read goes on in the background and r must not be used again.
func ReadLine(r *bufio.Reader, d time.Duration) (string, error) {
	type res struct {
		s   string
		err error
	}
	ch := make(chan res, 1)
	go func() {
		s, err := r.ReadString('\n')
		ch <- res{strings.TrimSuffix(s, "\n"), err}
	}()
	select {
	case r := <-ch:
		return r.s, r.err
	case <-time.After(d):
		return "", fmt.Errorf("timeout after %v", d)
	}
}

// Python returns the python3 interpreter itself (sys.executable), not a
// wrapper script on PATH (pyenv's shims are shell scripts that exec it):
// a recording of the wrapper would sample the shell. NeedTool applies.
func Python(t testing.TB) string {
	t.Helper()
	NeedTool(t, "python3")
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal(err)
	}
	if real, err := exec.Command(py, "-c", "import sys; print(sys.executable)").Output(); err == nil {
		py = strings.TrimSpace(string(real))
	}
	return py
}
