//go:build linux

package perfunwind_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/perfunwind"
	"github.com/sframekit/sframekit/stackprof"
)

// TestMixedCallGraphs unwinds a recording of two events, one of them
// without call graphs (perf record -e task-clock/call-graph=no/ beside
// cpu-clock --call-graph dwarf): that event's samples are the one lines
// perf script prints for them, and the summary's hint names that event
// alone.
func TestMixedCallGraphs(t *testing.T) {
	path := record(t, recording{name: "mixed-cg", prog: cProg("-O2", "-g"), opts: []string{"-e", "task-clock/call-graph=no/"}})

	// perf script's one-line samples (a sample without a call graph),
	// and ours.
	oneLine := func(text []byte) []string {
		var ls []string
		for _, l := range strings.Split(string(text), "\n") {
			if l != "" && l[0] == ' ' {
				ls = append(ls, l)
			}
		}
		return ls
	}
	want := oneLine(perfScriptText(t, path, "--no-inline"))
	r, s := openSession(t, path, perfunwind.Options{})
	res := perfunwind.NewResolver(s)
	defer res.Close()
	var buf bytes.Buffer
	sw := stackprof.NewScriptWriter(&buf, res)
	if err := s.Process(r, perfunwind.ProcessOptions{}, sw.Write); err != nil {
		t.Fatal(err)
	}
	if err := sw.Flush(); err != nil {
		t.Fatal(err)
	}
	got := oneLine(buf.Bytes())
	if len(want) == 0 {
		t.Fatal("perf script printed no sample without a call graph")
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("samples without call graphs: %d lines, perf script's %d; first of ours %q, of perf's %q", len(got), len(want), got[:min(1, len(got))], want[0])
	}

	var sum bytes.Buffer
	if err := perfunwind.WriteSummary(&sum, s); err != nil {
		t.Fatal(err)
	}
	var hint string
	for _, l := range strings.Split(sum.String(), "\n") {
		if strings.HasPrefix(l, "hint:") {
			hint = l
		}
	}
	if !strings.Contains(hint, "task-clock/call-graph=no/") || strings.Contains(hint, "cpu-clock") || !strings.Contains(hint, "--call-graph dwarf") {
		t.Errorf("the hint does not name task-clock/call-graph=no/ alone: %q\n%s", hint, sum.String())
	}
}
