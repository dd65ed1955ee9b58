package testprog

import (
	_ "embed"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Arch is an architecture that cross-built test programs run on under
// qemu-user.
type Arch struct {
	// Name is the GNU name: "aarch64", "s390x", "x86_64".
	Name string
	// CC is the C compiler targeting it.
	CC string
	// QEMU is the qemu-user binary that runs it.
	QEMU string
	// Sysroot is the root of its libraries: qemu's -L, gdb's sysroot,
	// sframe stack's --sysroot. Empty for the host's architecture.
	Sysroot string
}

// The architectures SFrame defines, as cross toolchains and qemu-user
// install them on Debian (packages gcc-aarch64-linux-gnu,
// gcc-s390x-linux-gnu, qemu-user).
var (
	AArch64 = Arch{Name: "aarch64", CC: "aarch64-linux-gnu-gcc", QEMU: "qemu-aarch64", Sysroot: "/usr/aarch64-linux-gnu"}
	S390X   = Arch{Name: "s390x", CC: "s390x-linux-gnu-gcc", QEMU: "qemu-s390x", Sysroot: "/usr/s390x-linux-gnu"}
	X8664   = Arch{Name: "x86_64", CC: "x86_64-linux-gnu-gcc", QEMU: "qemu-x86_64"}
)

// crossSrc is the program BuildCross compiles: threads blocked in deep
// recursion, in a signal handler and in a qsort callback, and a main
// thread that aborts 20 calls deep.
//
//go:embed testdata/crossprog.c
var crossSrc []byte

// crossTimeout bounds one qemu run: the program crashes as soon as its
// threads are blocked.
const crossTimeout = 60 * time.Second

var cores = map[string]*Crash{} // key: executable and qemu arguments

// BuildCross compiles testdata/crossprog.c (this package's program for cores from
// qemu-user) for a with -pthread and flags, once per test binary and set
// of flags, and returns the executable, named "crossprog".
func BuildCross(t testing.TB, a Arch, flags ...string) string {
	t.Helper()
	NeedTool(t, a.CC)
	key := "cross\x00" + a.CC + "\x00" + strings.Join(flags, "\x00")
	mu.Lock()
	defer mu.Unlock()
	if exe, ok := builds[key]; ok {
		return exe
	}
	d := dirLocked(t)
	src := filepath.Join(d, "crossprog.c")
	if _, err := os.Stat(src); err != nil {
		if err := os.WriteFile(src, crossSrc, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sub := filepath.Join(d, fmt.Sprint(len(builds)))
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(sub, "crossprog")
	args := append(append([]string{}, flags...), "-pthread", "-o", exe, src)
	if out, err := exec.Command(a.CC, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", a.CC, strings.Join(args, " "), err, out)
	}
	builds[key] = exe
	return exe
}

// Crash is the result of running a cross-built program under qemu-user
// until it dumped core.
type Crash struct {
	// Core is the core file qemu wrote (qemu_crossprog_DATE_PID.core).
	Core string
	// Modules maps each loaded object's name, as the program's
	// dl_iterate_phdr reported it ("" for the executable), to its load
	// bias.
	Modules map[string]uint64
}

var moduleLine = regexp.MustCompile(`^module (\S*) (0x[0-9a-f]+|0)$`)

// CrashCore runs exe (built by BuildCross for a) under a.QEMU with the
// extra qemu arguments qemuArgs (such as "-cpu", "max") and with a's
// sysroot as -L, and returns the core qemu wrote when the program
// aborted. Each executable and set of arguments runs once per test
// binary.
//
// qemu-user writes its core into the working directory, a fresh one;
// then it kills itself with the same signal, and the host kernel may
// dump qemu's own core there too (core_pattern "core"): a directory named
// "core" is in the way of that, and anything else qemu leaves is
// removed. The core size limit is raised for the run, as qemu writes
// nothing under a zero limit and truncates at a low one.
func CrashCore(t testing.TB, a Arch, exe string, qemuArgs ...string) *Crash {
	t.Helper()
	NeedTool(t, a.QEMU)
	key := exe + "\x00" + strings.Join(qemuArgs, "\x00")
	mu.Lock()
	defer mu.Unlock()
	if c, ok := cores[key]; ok {
		return c
	}
	run := filepath.Join(dirLocked(t), fmt.Sprintf("run%d", len(cores)))
	if err := os.MkdirAll(filepath.Join(run, "core"), 0o755); err != nil {
		t.Fatal(err)
	}
	args := []string{"-c", `ulimit -c unlimited 2>/dev/null || ulimit -c "$(ulimit -H -c)"; exec "$@"`, "sh", a.QEMU}
	if a.Sysroot != "" {
		args = append(args, "-L", a.Sysroot)
	}
	args = append(append(args, qemuArgs...), exe)
	cmd := exec.Command("sh", args...)
	cmd.Dir = run
	cmd.Stdin = nil
	var out strings.Builder
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	switch late, err := waitFor(cmd, crossTimeout); {
	case late:
		t.Fatalf("%s %s: no crash after %v:\n%s", a.QEMU, exe, crossTimeout, out.String())
	case err == nil:
		t.Fatalf("%s %s exited normally, want a crash:\n%s", a.QEMU, exe, out.String())
	}
	c := &Crash{Modules: map[string]uint64{}}
	ents, err := os.ReadDir(run)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		p := filepath.Join(run, e.Name())
		switch {
		case strings.HasPrefix(e.Name(), "qemu_") && strings.HasSuffix(e.Name(), ".core"):
			c.Core = p
		case e.Name() != "core":
			os.RemoveAll(p) // a core of qemu itself
		}
	}
	if c.Core == "" {
		t.Fatalf("%s %s wrote no core:\n%s", a.QEMU, exe, out.String())
	}
	for _, l := range strings.Split(out.String(), "\n") {
		if m := moduleLine.FindStringSubmatch(l); m != nil {
			v, _ := strconv.ParseUint(m[2], 0, 64)
			c.Modules[m[1]] = v
		}
	}
	cores[key] = c
	return c
}

// GDBMultiarch runs gdb-multiarch in batch mode on exe and core with
// sysroot (if not empty) and the commands cmds (each an -ex), and returns
// its output (with core empty, gdb starts on exe alone). It skips the test when gdb-multiarch is missing (fails under
// CI). gdb's thread_db is off: it would load the host's libthread_db,
// which does not know the target's threads.
func GDBMultiarch(t testing.TB, exe, core, sysroot string, cmds ...string) string {
	t.Helper()
	NeedTool(t, "gdb-multiarch")
	args := []string{"-nx", "-batch", "-iex", "set debuginfod enabled off", "-iex", "set libthread-db-search-path /nonexistent"}
	if sysroot != "" {
		args = append(args, "-iex", "set sysroot "+sysroot)
	}
	for _, c := range cmds {
		args = append(args, "-ex", c)
	}
	args = append(args, exe)
	if core != "" {
		args = append(args, core)
	}
	cmd := exec.Command("gdb-multiarch", args...)
	var out strings.Builder
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	switch late, err := waitFor(cmd, 2*time.Minute); {
	case late:
		t.Fatalf("gdb-multiarch on %s did not finish:\n%s", core, out.String())
	case err != nil:
		t.Fatalf("gdb-multiarch: %v\n%s", err, out.String())
	}
	return out.String()
}

// waitFor waits for the started cmd to exit, or kills it after d; late
// says it was killed.
func waitFor(cmd *exec.Cmd, d time.Duration) (late bool, err error) {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return false, err
	case <-time.After(d):
		cmd.Process.Kill()
		return true, <-done
	}
}

// GcoreQEMU runs exe under a's qemu-user with its gdb stub, lets
// gdb-multiarch run it to a breakpoint at the function stop, and returns
// the core file gdb's gcore writes of it then: a core of another
// architecture written by gdb rather than by qemu or a kernel. gdb knows
// no mappings of a remote target, so it dumps the sections of the loaded
// files and what it finds of the stack around SP, not whole mappings.
// Each call starts its own qemu on a free port.
func GcoreQEMU(t testing.TB, a Arch, exe, stop string) string {
	t.Helper()
	NeedTool(t, a.QEMU)
	NeedTool(t, "gdb-multiarch")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	args := []string{"-g", strconv.Itoa(port)}
	if a.Sysroot != "" {
		args = append(args, "-L", a.Sysroot)
	}
	q := exec.Command(a.QEMU, append(args, exe)...)
	var qout strings.Builder
	q.Stdout, q.Stderr = &qout, &qout
	if err := q.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		q.Process.Kill()
		q.Wait()
	}()
	core := filepath.Join(t.TempDir(), "gcore")
	// gdb retries the connection while qemu starts listening.
	out := GDBMultiarch(t, exe, "", a.Sysroot,
		"set tcp connect-timeout 20", fmt.Sprintf("target remote 127.0.0.1:%d", port),
		"break "+stop, "continue", "gcore "+core, "kill")
	if _, err := os.Stat(core); err != nil {
		t.Fatalf("gdb wrote no core: %v\n%s\n%s", err, out, qout.String())
	}
	return core
}
