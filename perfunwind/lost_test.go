package perfunwind_test

import (
	"io"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/perfdata"
)

// TestLostCountedOnce unwinds a recording whose ring (perf record -m 1,
// one page) cannot hold a sample with its stack copy, so the kernel
// loses every one: perf writes LOST records as it loses them and, at the
// end, LOST_SAMPLES records with each event's count of the same losses.
// The summary must count them once, as perf report does (its event's
// "LOST_SAMPLES events"), where it summed both.
func TestLostCountedOnce(t *testing.T) {
	path := record(t, recording{name: "lost", prog: cProg("-O2", "-g"), opts: []string{"-m", "1"}})
	// The two kinds of record, as our decoder sums them.
	r, err := perfdata.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var lost, lostSamples uint64
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if l := rec.Lost(); l != nil && rec.Type == perfdata.RecordLost {
			lost += l.Lost
		} else if l != nil {
			lostSamples += l.Lost
		}
	}
	r.Close()
	// perf report --stats: under "cpu-clock stats:", the samples lost.
	out, err := exec.Command("perf", "report", "-i", path, "--stats").Output()
	if err != nil {
		t.Fatalf("perf report --stats: %v", err)
	}
	var perfLost uint64
	_, ev, _ := strings.Cut(string(out), "cpu-clock stats:")
	for _, l := range strings.Split(ev, "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "LOST_SAMPLES" {
			perfLost, _ = strconv.ParseUint(f[2], 10, 64)
		}
	}
	if lost == 0 || lostSamples == 0 || perfLost == 0 {
		t.Skipf("LOST records %d, LOST_SAMPLES %d, perf report %d: not both kinds (a kernel before 6.0?)", lost, lostSamples, perfLost)
	}
	s, sum := summarize(t, path)
	if s.Stats.Lost != perfLost {
		t.Errorf("%d samples lost, perf report %d (LOST records %d, LOST_SAMPLES %d)", s.Stats.Lost, perfLost, lost, lostSamples)
	}
	if want := " " + strconv.FormatUint(perfLost, 10) + " lost by the kernel"; !strings.Contains(sum, want) {
		t.Errorf("summary without %q", want)
	}
}
