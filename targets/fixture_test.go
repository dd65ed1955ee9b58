//go:build linux

package targets

import (
	"bufio"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/internal/testprog"
)

// needTool skips the test when a tool is missing, except under CI.
func needTool(t testing.TB, name string) { testprog.NeedTool(t, name) }

func TestMain(m *testing.M) { testprog.Main(m) }

// testProgram compiles testdata/targprog.c once per test binary and
// returns the executable's path. Its three named worker threads recurse
// to depths 3, 4 and 5 in worker_recurse and block in pause(); the main
// thread prints "ready" and then answers every line read on stdin with
// "pong <line>".
func testProgram(t testing.TB) string {
	t.Helper()
	return testprog.Build(t, "testdata/targprog.c", "-g", "-O1")
}

// child is a running test program. Tests that start the program their
// own way fill it in themselves.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	pid   int
}

// startChild starts the test program and waits until its 4 threads
// sleep; it is killed when the test ends.
func startChild(t testing.TB) *child {
	t.Helper()
	p := testprog.StartWith(t, testprog.Options{Threads: 4}, testProgram(t))
	return &child{cmd: p.Cmd, stdin: p.Stdin, out: p.Out, pid: p.PID()}
}

// waitAllSleeping waits until the 4 threads are in state S.
func waitAllSleeping(t testing.TB, pid int) {
	t.Helper()
	testprog.WaitBlocked(t, pid, 4)
}

func readLineTimeout(r *bufio.Reader, d time.Duration) (string, error) {
	return testprog.ReadLine(r, d)
}

// ping checks that the program's main thread runs and answers.
func (c *child) ping(t testing.TB, msg string) {
	t.Helper()
	(&testprog.Proc{Cmd: c.cmd, Stdin: c.stdin, Out: c.out}).Ping(t, msg)
}

// checkNotTraced checks that no thread of pid is traced or stopped.
func checkNotTraced(t testing.TB, pid int) {
	t.Helper()
	tids, err := listTasks(pid)
	if err != nil {
		t.Fatal(err)
	}
	for _, tid := range tids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/status", pid, tid))
		if os.IsNotExist(err) || errors.Is(err, syscall.ESRCH) {
			continue // exited since listed (ESRCH: while being read)
		}
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if !strings.Contains(s, "\nTracerPid:\t0\n") {
			t.Errorf("thread %d still traced:\n%s", tid, s)
		}
		if st := taskState(pid, tid); st == 't' || st == 'T' {
			t.Errorf("thread %d left in state %c", tid, st)
		}
	}
}

// gdbRegs maps LWP -> register name -> value, parsed from gdb's output of
// "thread apply all info registers ...".
type gdbRegs map[int]map[string]uint64

var (
	gdbThreadRE = regexp.MustCompile(`^Thread .*\(LWP (\d+)\)`)
	gdbLWPRE    = regexp.MustCompile(`^Thread \d+ \(LWP (\d+)\)`)
	gdbRegRE    = regexp.MustCompile(`^([a-z0-9_]+)\s+(0x[0-9a-f]+)`)
)

func runGDB(t testing.TB, args ...string) gdbRegs {
	t.Helper()
	needTool(t, "gdb")
	cmd := exec.Command("gdb", append([]string{"-nx", "-batch"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("gdb %v: %v\n%s", args, err, out)
	}
	regs := gdbRegs{}
	cur := -1
	for _, l := range strings.Split(string(out), "\n") {
		if m := gdbThreadRE.FindStringSubmatch(l); m != nil {
			cur, _ = strconv.Atoi(m[1])
			regs[cur] = map[string]uint64{}
			continue
		}
		if m := gdbLWPRE.FindStringSubmatch(l); m != nil {
			cur, _ = strconv.Atoi(m[1])
			regs[cur] = map[string]uint64{}
			continue
		}
		if m := gdbRegRE.FindStringSubmatch(l); m != nil && cur >= 0 {
			v, _ := strconv.ParseUint(m[2], 0, 64)
			regs[cur][m[1]] = v
		}
	}
	if len(regs) == 0 {
		t.Fatalf("no thread registers in gdb output:\n%s", out)
	}
	return regs
}

// elfSym returns the value and size of a function symbol in file.
func elfSym(t testing.TB, file, name string) (uint64, uint64) {
	t.Helper()
	f, err := elf.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range syms {
		if s.Name == name && elf.ST_TYPE(s.Info) == elf.STT_FUNC {
			return s.Value, s.Size
		}
	}
	t.Fatalf("symbol %s not in %s", name, file)
	return 0, 0
}

// regsOf returns the x86-64 registers gdb prints for a thread.
func regsOf(r *arch.Regs) map[string]uint64 {
	return map[string]uint64{"rip": r.R[arch.AMD64RIP], "rsp": r.R[arch.AMD64RSP], "rbp": r.R[arch.AMD64RBP], "rbx": r.R[3], "r12": r.R[12]}
}

// churnSource creates and destroys threads without pause; it answers
// "ping" lines on stdin with the number of threads created so far.
const churnSource = `
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static volatile long created;

static void *shortlived(void *arg) { (void)arg; return NULL; }

static void *spawner(void *arg) {
	(void)arg;
	for (;;) {
		pthread_t t;
		if (pthread_create(&t, NULL, shortlived, NULL) == 0) {
			pthread_detach(t);
			created++;
		}
		if (created % 64 == 0) usleep(100);
	}
	return NULL;
}

int main(void) {
	pthread_t a, b;
	pthread_create(&a, NULL, spawner, NULL);
	pthread_create(&b, NULL, spawner, NULL);
	printf("ready\n");
	fflush(stdout);
	char buf[256];
	while (fgets(buf, sizeof buf, stdin)) {
		buf[strcspn(buf, "\n")] = 0;
		printf("pong %s %ld\n", buf, created);
		fflush(stdout);
	}
	return 0;
}
`
