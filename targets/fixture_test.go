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
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// progSource is the test program: three named worker threads recurse to
// depths 3, 4 and 5 in worker_recurse and block in pause(); the main thread
// prints "ready" and then answers every line read on stdin with
// "pong <line>".
const progSource = `
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static pthread_barrier_t bar;

__attribute__((noinline)) void worker_block(void) {
	for (;;) pause();
}

__attribute__((noinline)) int worker_recurse(int n) {
	if (n > 0) return worker_recurse(n - 1) + 1;
	pthread_barrier_wait(&bar);
	worker_block();
	return 0;
}

static void *worker(void *arg) {
	long i = (long)arg;
	char name[16];
	snprintf(name, sizeof name, "worker%ld", i);
	pthread_setname_np(pthread_self(), name);
	worker_recurse(3 + (int)i);
	return NULL;
}

int main(void) {
	pthread_t t[3];
	pthread_barrier_init(&bar, NULL, 4);
	for (long i = 0; i < 3; i++) pthread_create(&t[i], NULL, worker, (void *)i);
	pthread_barrier_wait(&bar);
	printf("ready\n");
	fflush(stdout);
	char buf[256];
	ssize_t n;
	while ((n = read(0, buf, sizeof buf)) > 0) {
		char reply[300];
		int m = snprintf(reply, sizeof reply, "pong %.*s", (int)n, buf);
		write(1, reply, m);
	}
	return 0;
}
`

// needTool skips the test when a tool is missing, except under CI.
func needTool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s not found; required under CI", name)
		}
		t.Skipf("%s not found", name)
	}
	return p
}

var (
	buildOnce sync.Once
	buildDir  string
	buildExe  string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// testProgram compiles progSource once per test binary and returns the
// executable's path.
func testProgram(t testing.TB) string {
	t.Helper()
	needTool(t, "gcc")
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "targets-test-")
		if buildErr != nil {
			return
		}
		src := filepath.Join(buildDir, "targprog.c")
		if buildErr = os.WriteFile(src, []byte(progSource), 0o644); buildErr != nil {
			return
		}
		buildExe = filepath.Join(buildDir, "targprog")
		out, err := exec.Command("gcc", "-g", "-O1", "-pthread", "-o", buildExe, src).CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("gcc: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildExe
}

// child is a running test program.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	pid   int
}

// startChild starts the test program and waits for "ready"; it is killed
// when the test ends.
func startChild(t testing.TB) *child {
	t.Helper()
	exe := testProgram(t)
	cmd := exec.Command(exe)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout), pid: cmd.Process.Pid}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := readLineTimeout(c.out, 10*time.Second)
	if err != nil || line != "ready" {
		t.Fatalf("test program: got %q, %v; want ready", line, err)
	}
	// The workers passed the barrier; wait until they sleep in pause().
	waitAllSleeping(t, c.pid)
	return c
}

// waitAllSleeping waits until the 4 threads are in state S.
func waitAllSleeping(t testing.TB, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		tids, _ := listTasks(pid)
		n := 0
		for _, tid := range tids {
			if taskState(pid, tid) == 'S' {
				n++
			}
		}
		if len(tids) == 4 && n == 4 {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("threads of %d did not all go to sleep", pid)
}

func readLineTimeout(r *bufio.Reader, d time.Duration) (string, error) {
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

// ping checks that the program's main thread runs and answers.
func (c *child) ping(t testing.TB, msg string) {
	t.Helper()
	if _, err := io.WriteString(c.stdin, msg+"\n"); err != nil {
		t.Fatalf("writing to test program: %v", err)
	}
	line, err := readLineTimeout(c.out, 5*time.Second)
	if err != nil || line != "pong "+msg {
		t.Fatalf("test program answered %q, %v; want %q", line, err, "pong "+msg)
	}
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
func regsOf(r *Regs) map[string]uint64 {
	return map[string]uint64{"rip": r.R[AMD64RIP], "rsp": r.R[AMD64RSP], "rbp": r.R[AMD64RBP], "rbx": r.R[3], "r12": r.R[12]}
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
