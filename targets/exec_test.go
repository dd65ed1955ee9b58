package targets

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sframekit/sframekit/internal/testprog"
)

// execSource starts two threads besides main: one sleeps, the other
// reads a line and then runs execve (of /bin/sleep) from that thread.
const execSource = `
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static void *sleeper(void *arg) { (void)arg; for (;;) pause(); return NULL; }

static void *execer(void *arg) {
	(void)arg;
	char buf[64];
	if (fgets(buf, sizeof buf, stdin)) {
		char *argv[] = {"sleep", "600", NULL};
		execv("/bin/sleep", argv);
	}
	return NULL;
}

int main(void) {
	pthread_t a, b;
	pthread_create(&a, NULL, sleeper, NULL);
	pthread_create(&b, NULL, execer, NULL);
	printf("ready\n");
	fflush(stdout);
	for (;;) pause();
}
`

// TestAttachDuringExec replays the race of an attach with execve in a
// multithreaded process, in the order that froze the target: the main
// and sleeping threads are stopped, then the third runs execve (which
// kills them and waits until their tracer collects them), then the
// attach asks it to stop. The attach must notice the execve and end
// with an error saying so, leaving the new program running untraced,
// instead of waiting StopTimeout for a stop that cannot come.
func TestAttachDuringExec(t *testing.T) {
	if _, err := os.Stat("/bin/sleep"); err != nil {
		t.Skip("no /bin/sleep")
	}
	src := filepath.Join(t.TempDir(), "execer.c")
	if err := os.WriteFile(src, []byte(execSource), 0o644); err != nil {
		t.Fatal(err)
	}
	tp := testprog.StartWith(t, testprog.Options{Threads: 3}, testprog.Build(t, src, "-O1"))
	pid := tp.PID()
	tids, err := listTasks(pid)
	if err != nil || len(tids) != 3 {
		t.Fatalf("threads %v, %v", tids, err)
	}
	execer := tids[2] // created last
	p := &Process{pid: pid, done: make(chan struct{})}
	var attachErr error
	p.tr = startTracer(func(tr *tracer) {
		p.tr = tr
		for _, tid := range tids {
			if err := p.seize(tid); err != nil {
				attachErr = err
				return
			}
			p.attached = append(p.attached, stopped{tid: tid})
		}
		held := []int{tids[0], tids[1]}
		for _, tid := range held {
			unix.PtraceInterrupt(tid)
		}
		if attachErr = p.waitStops(held); attachErr != nil {
			return
		}
		fmt.Fprintln(tp.Stdin, "exec")
		// The execve has killed the held threads once they are zombies.
		for _, tid := range held {
			for taskState(pid, tid) != 'Z' && taskState(pid, tid) != 0 {
				nanosleep(time.Millisecond)
			}
		}
		unix.PtraceInterrupt(execer)
		attachErr = p.waitStops([]int{execer})
	})
	defer p.Close()
	if attachErr == nil || !strings.Contains(attachErr.Error(), "execve") {
		t.Fatalf("attach during execve: %v, want an error saying so", attachErr)
	}
	p.Close()
	// The new program runs on, untraced.
	for deadline := time.Now().Add(time.Minute); ; {
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if strings.TrimSpace(string(comm)) == "sleep" && taskState(pid, pid) == 'S' {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d is %q in state %c, want sleep running", pid, comm, taskState(pid, pid))
		}
		time.Sleep(time.Millisecond)
	}
	checkNotTraced(t, pid)
}
