//go:build linux && amd64

package perfunwind

import (
	"testing"

	"github.com/sframekit/sframekit/internal/testprog"
	"github.com/sframekit/sframekit/targets"
)

// SeededSamples runs exe (testprog's stackprog, 7 threads) and returns a
// Session seeded from its /proc files, the process attached, and a sample
// of each of its threads, in the order of p.Threads(): the registers and
// an 8 KiB copy of the stack, as PERF_SAMPLE_REGS_USER and
// PERF_SAMPLE_STACK_USER give them. The tests of package perfunwind_test
// share it (an _test.go file of the package itself).
func SeededSamples(t *testing.T, exe string) (*Session, *targets.Process, []*Sample) {
	t.Helper()
	proc := testprog.StartWith(t, testprog.Options{Threads: 7}, exe, "1", "50")
	s, err := NewSession(Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.SeedProcess(proc.PID()); err != nil {
		t.Fatal(err)
	}
	p, err := targets.AttachProcess(proc.PID())
	if err != nil {
		t.Skipf("cannot attach: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	var samples []*Sample
	for _, th := range p.Threads() {
		stack := make([]byte, 8192)
		n, _ := p.Memory().ReadAt(stack, int64(th.Regs.SP()))
		samples = append(samples, &Sample{Pid: uint32(proc.PID()), Tid: uint32(th.TID), Regs: th.Regs, Stack: stack[:n]})
	}
	return s, p, samples
}
