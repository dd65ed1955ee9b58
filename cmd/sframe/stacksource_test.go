//go:build linux && amd64

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/internal/testprog"
	"github.com/sframekit/sframekit/symbolize"
)

// TestStackSourceNames compares the source file names of `stack -s -i`
// with eu-stack -s -i's, frame by frame, for a program compiled from a
// relative path (a header reached through "../", gcc's DWARF 5 and
// DWARF 4, and -fdebug-prefix-map making the compilation directory
// ".") and for the C library's frames (Debian's libc6-dbg, compiled in
// "./nptl": ./nptl/pthread_create.c). Names are the line table's as
// libdw joins them, neither cleaned nor joined to the compilation
// directory.
func TestStackSourceNames(t *testing.T) {
	testprog.NeedTool(t, "gcc")
	testprog.NeedTool(t, "eu-stack")
	if symbolize.New().DebugFile("/lib/x86_64-linux-gnu/libc.so.6") == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("no debug file for libc.so.6 (libc6-dbg); required under CI")
		}
		t.Skip("no debug file for libc.so.6 (libc6-dbg)")
	}
	dir := t.TempDir()
	files := map[string]string{
		"inc/wait.h": `#include <unistd.h>
static inline __attribute__((always_inline)) void wait_here(void) { for (;;) pause(); }
`,
		"sub/main.c": `#include <pthread.h>
#include <stdio.h>
#include "../inc/wait.h"
static void *worker(void *a) { wait_here(); return a; }
int main(void) {
	pthread_t t;
	pthread_create(&t, 0, worker, 0);
	printf("ready\n");
	fflush(stdout);
	pthread_join(t, 0);
	return 0;
}
`,
	}
	for name, text := range files {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ name, flags string }{
		{"dwarf5", "-gdwarf-5"},
		{"dwarf4", "-gdwarf-4"},
		{"prefix-map", "-gdwarf-5 -fdebug-prefix-map=" + dir + "=."},
		{"prefix-map-dwarf4", "-gdwarf-4 -fdebug-prefix-map=" + dir + "=."},
	} {
		t.Run(c.name, func(t *testing.T) {
			exe := filepath.Join(dir, c.name)
			args := append([]string{"-g", "-O2", "-pthread"}, strings.Fields(c.flags)...)
			cc := exec.Command("gcc", append(args, "-o", exe, "sub/main.c")...)
			cc.Dir = dir
			if out, err := cc.CombinedOutput(); err != nil {
				t.Fatalf("gcc: %v\n%s", err, out)
			}
			p := testprog.StartCmd(t, exec.Command(exe))
			testprog.WaitBlocked(t, p.PID(), 2)
			pid := strconv.Itoa(p.PID())
			ours, stderr, code := runCLI(t, "stack", "-s", "-i", pid)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			eu, err := exec.Command("eu-stack", "-s", "-i", "-p", pid).CombinedOutput()
			if err != nil {
				t.Fatalf("eu-stack: %v\n%s", err, eu)
			}
			got, want := oursSourceLines(ours), euSourceLines(string(eu))
			if len(want) != 2 {
				t.Fatalf("eu-stack: %d threads, want 2\n%s", len(want), eu)
			}
			seen := false
			for tid, w := range want {
				if strings.Join(got[tid], "\n") != strings.Join(w, "\n") {
					t.Errorf("thread %s:\n%s\neu-stack:\n%s", tid, strings.Join(got[tid], "\n"), strings.Join(w, "\n"))
				}
				for _, l := range w {
					seen = seen || strings.Contains(l, " ./nptl/pthread_create.c:")
				}
			}
			if !seen {
				t.Errorf("no frame in ./nptl/pthread_create.c:\n%s", eu)
			}
		})
	}
}

// oursSourceLines returns, per thread, each frame of `stack -s` text as
// "PC FILE:LINE" ("PC" alone without a position).
func oursSourceLines(out string) map[string][]string {
	frameRe := regexp.MustCompile(`^#\d+ +0x([0-9a-f]{16}) in .+?(?: at (\S+:\d+))?(?: \([^)]+\))? \[\w+\]$`)
	res := map[string][]string{}
	tid := ""
	for _, l := range strings.Split(out, "\n") {
		if m := stackThreadRe.FindStringSubmatch(l); m != nil {
			tid = m[1]
		} else if m := frameRe.FindStringSubmatch(l); m != nil && tid != "" {
			res[tid] = append(res[tid], strings.TrimSpace(m[1]+" "+m[2]))
		}
	}
	return res
}

// euSourceLines returns eu-stack -s's frames as oursSourceLines does, the
// column left out.
func euSourceLines(out string) map[string][]string {
	srcRe := regexp.MustCompile(`^    (\S+?:\d+)(?::\d+)?$`)
	res := map[string][]string{}
	tid := ""
	for _, l := range strings.Split(out, "\n") {
		if m := euThreadRe.FindStringSubmatch(l); m != nil {
			tid = m[1]
		} else if m := euFrameRe.FindStringSubmatch(l); m != nil && tid != "" {
			res[tid] = append(res[tid], m[2])
		} else if m := srcRe.FindStringSubmatch(l); m != nil && len(res[tid]) > 0 {
			res[tid][len(res[tid])-1] += " " + m[1]
		}
	}
	return res
}
