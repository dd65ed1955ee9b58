// Package memtest measures the peak memory of a test's work in a child
// process, so that tests can bound what a hostile input costs: the
// parent's heap statistics would mix in everything else the test binary
// did, while a child's maxrss is the work's own high-water mark.
//
//	func TestBomb(t *testing.T) {
//		if memtest.InChild(t) {
//			work(t) // the measured work; fail with t.Fatal as usual
//			return
//		}
//		if rss := memtest.PeakRSS(t); rss > 200<<20 {
//			t.Errorf("peak RSS %d MiB", rss>>20)
//		}
//	}
package memtest

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

const envVar = "SFRAMEKIT_MEMTEST_CHILD"

// InChild reports whether this process is the child PeakRSS started for
// the running test: then the test does its measured work and returns.
func InChild(t testing.TB) bool { return os.Getenv(envVar) == t.Name() }

// PeakRSS runs the current (top-level) test again in a child process, the
// test binary itself restricted to this test, and returns the child's peak
// resident set size in bytes. The child's failure fails t.
func PeakRSS(t *testing.T) int64 {
	t.Helper()
	if strings.Contains(t.Name(), "/") {
		t.Fatal("memtest: PeakRSS works for top-level tests only")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+regexp.QuoteMeta(t.Name())+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), envVar+"="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("memtest: child for %s: %v\n%s", t.Name(), err, out)
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("memtest: child did not run %s:\n%s", t.Name(), out)
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		t.Skip("memtest: no rusage on this system")
	}
	return ru.Maxrss * 1024 // kilobytes on Linux
}
