package recorder

import (
	"bytes"
	"os/exec"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

// TestPeriods records the chains program cut into periods of 200 ms:
// every sample lands in exactly one period (their sums equal what the
// recording counted), the periods' pprof profiles, merged, show each
// thread's exact chain as one profile of the whole run does, and the
// recorder's table of stacks starts afresh at each cut.
func TestPeriods(t *testing.T) {
	needPerf(t)
	exe := buildProg(t, "-O2", "-Wa,--gsframe")
	cmd := exec.Command(exe, "spin", "120")
	var parts []*profile.Profile
	var samples uint64
	var starts []time.Time
	opts := Options{Command: cmd, Period: 200 * time.Millisecond, OnPeriod: func(p *Profile) {
		if !p.Period() {
			t.Error("OnPeriod's Profile does not say it is a period")
		}
		starts = append(starts, p.Start())
		samples += p.Stats.Samples
		var buf bytes.Buffer
		if err := p.WritePprof(&buf); err != nil {
			t.Errorf("period %d: %v", len(parts), err)
			return
		}
		q, err := profile.Parse(&buf)
		if err != nil {
			t.Errorf("period %d: %v", len(parts), err)
			return
		}
		parts = append(parts, q)
	}}
	p := recordUntil(t, opts, func() bool {
		pid := cmd.Process.Pid
		return threadCPU(pid, "spin5") >= 300*time.Millisecond && threadCPU(pid, "spin20") >= 300*time.Millisecond &&
			threadCPU(pid, "spin60") >= 300*time.Millisecond
	})
	if len(parts) < 3 {
		t.Fatalf("%d periods of 200 ms in a recording of %s, want 3 or more", len(parts), p.Stats.Wall)
	}
	for i := 1; i < len(starts); i++ {
		if !starts[i].After(starts[i-1]) {
			t.Errorf("period %d starts at %v, not after the one before (%v)", i, starts[i], starts[i-1])
		}
	}
	if samples != p.Stats.OnCPU {
		t.Errorf("the periods hold %d samples, the recording read %d", samples, p.Stats.OnCPU)
	}
	var inParts int64
	for _, q := range parts {
		for _, s := range q.Sample {
			inParts += s.Value[0]
		}
	}
	if uint64(inParts) != samples {
		t.Errorf("the periods' profiles hold %d samples, their Stats %d", inParts, samples)
	}
	if len(p.stacks) != 0 {
		t.Errorf("the recording's Profile keeps %d stacks; its periods had them", len(p.stacks))
	}
	merged, err := profile.Merge(parts)
	if err != nil {
		t.Fatal(err)
	}
	checkChains(t, merged, p.Command().Pid, map[string][]string{
		"spin5":  chain("spin5", "a", 5),
		"spin20": chain("spin20", "b", 20),
		"spin60": chain("spin60", "c", 60),
	})
}
