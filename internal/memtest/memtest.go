// Package memtest measures the peak memory of a test's work in a child
// process, so that tests can bound what a hostile input costs: the
// parent's heap statistics would mix in everything else the test binary
// did, while a child's own high-water mark is the work's.
//
//	func TestBomb(t *testing.T) {
//		if memtest.InChild(t) {
//			work(t) // the measured work; fail with t.Fatal as usual
//			return
//		}
//		memtest.AtMost(t, 200<<20, "reading the bomb")
//	}
package memtest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const envVar = "SFRAMEKIT_MEMTEST_CHILD"

// InChild reports whether this process is the child PeakRSS started for
// the running test: then the test does its measured work and returns.
// The child prints its peak RSS as the test ends (see PeakRSS).
func InChild(t testing.TB) bool {
	if os.Getenv(envVar) != t.Name() {
		return false
	}
	t.Cleanup(func() {
		if kb, ok := ownPeakKB(); ok {
			fmt.Printf("%s%d\n", peakLine, kb)
		}
	})
	return true
}

// peakLine starts the line on which a child reports its own peak RSS, in
// kilobytes.
const peakLine = "memtest: VmHWM kB "

// ownPeakKB returns this process's peak RSS in kilobytes from Linux's
// /proc/self/status (VmHWM), the high-water mark of its own memory since
// its exec.
func ownPeakKB() (int64, bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb, err == nil
		}
	}
	return 0, false
}

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
	// The child's own report first: Go starts a child with vfork, and
	// Linux counts the parent's high-water mark, whatever the rest of the
	// test binary used before, into the child's ru_maxrss at its exec.
	if i := bytes.Index(out, []byte(peakLine)); i >= 0 {
		v, _, _ := bytes.Cut(out[i+len(peakLine):], []byte("\n"))
		if kb, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			return kb * 1024
		}
	}
	rss, ok := maxRSS(cmd.ProcessState)
	if !ok {
		t.Skip("memtest: no peak RSS on this system")
	}
	return rss
}

// AtMost runs the current test again in a child (see PeakRSS), logs the
// child's peak RSS and fails t when it is above limit bytes; what says
// what the child did, for the messages. Under the race detector the
// child's work still runs (and is checked for races), but the bound is
// not: the detector's shadow memory alone exceeds it.
func AtMost(t *testing.T, limit int64, what string) {
	t.Helper()
	rss := PeakRSS(t)
	t.Logf("peak RSS %d MiB %s", rss>>20, what)
	if raceEnabled {
		t.Logf("bound of %d MiB not checked: the race detector is on", limit>>20)
		return
	}
	if rss > limit {
		t.Errorf("peak RSS %d MiB %s, over %d MiB", rss>>20, what, limit>>20)
	}
}
