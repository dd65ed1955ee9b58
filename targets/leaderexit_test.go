package targets

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/internal/testprog"
)

// leaderExitSource's main thread starts two threads and ends with
// pthread_exit: the process runs on with a zombie leader, whose
// /proc/PID/exe, maps and mem are gone. One thread answers pings, the
// other sleeps.
const leaderExitSource = `
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void *sleeper(void *arg) { (void)arg; for (;;) pause(); return NULL; }

static void *answerer(void *arg) {
	(void)arg;
	char buf[256];
	while (fgets(buf, sizeof buf, stdin)) {
		buf[strcspn(buf, "\n")] = 0;
		printf("pong %s\n", buf);
		fflush(stdout);
	}
	return NULL;
}

int main(void) {
	pthread_t a, b;
	pthread_create(&a, NULL, sleeper, NULL);
	pthread_create(&b, NULL, answerer, NULL);
	printf("ready\n");
	fflush(stdout);
	pthread_exit(NULL);
}
`

// TestAttachLeaderExited attaches to a process whose main thread called
// pthread_exit while its other threads run: the executable, the modules
// and the memory are read through a live thread, and both live threads
// are attached and unwound from.
func TestAttachLeaderExited(t *testing.T) {
	src := filepath.Join(t.TempDir(), "leaderexit.c")
	if err := os.WriteFile(src, []byte(leaderExitSource), 0o644); err != nil {
		t.Fatal(err)
	}
	exe := testprog.Build(t, src, "-O1", "-g")
	tp := testprog.StartCmd(t, exec.Command(exe))
	pid := tp.PID()
	// The leader is a zombie once the others are the whole process (a
	// minute only guards against a program that never gets there), and
	// the two others sleep in their system calls.
	settled := func() bool {
		tids, _ := listTasks(pid)
		sleeping := 0
		for _, tid := range tids {
			if tid != pid && taskState(pid, tid) == 'S' {
				sleeping++
			}
		}
		return taskState(pid, pid) == 'Z' && sleeping == 2
	}
	for deadline := time.Now().Add(time.Minute); !settled(); {
		if time.Now().After(deadline) {
			t.Fatalf("main thread of %d in state %c, or the others not asleep", pid, taskState(pid, pid))
		}
		time.Sleep(time.Millisecond)
	}
	p, err := AttachProcess(pid)
	if err != nil {
		t.Fatalf("attach to a process whose main thread exited: %v", err)
	}
	defer p.Close()
	if p.Exe() != exe {
		t.Errorf("Exe() = %q, want %q", p.Exe(), exe)
	}
	live := 0
	for _, th := range p.Threads() {
		if th.TID != pid {
			live++
		}
	}
	if live != 2 {
		t.Errorf("%d live threads attached, want 2: %+v", live, p.Threads())
	}
	var m *arch.Module
	for i := range p.Modules() {
		if p.Modules()[i].Path == exe {
			m = &p.Modules()[i]
		}
	}
	if m == nil {
		t.Fatalf("no module for %s among %d", exe, len(p.Modules()))
	}
	if !m.HasBias || m.File == "" {
		t.Errorf("module %+v", m)
	}
	checkTextBytes(t, p.Memory(), m)
	p.Close()
	checkNotTraced(t, pid)
	tp.Ping(t, "still alive")
}
