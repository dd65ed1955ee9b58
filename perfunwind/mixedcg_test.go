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
	// perf names some PLT entries after the unsized symbol before the
	// PLT, _init, as TestAgainstPerfScript's catNames allows: such a
	// line of ours names the entry (name@plt), the rest being the same.
	for i := range min(len(got), len(want)) {
		if g, w := got[i], want[i]; g != w && strings.Contains(w, " _init (") {
			if j := strings.LastIndex(g, "@plt ("); j >= 0 {
				if k := strings.LastIndexByte(g[:j], ' '); k >= 0 && g[:k]+" _init"+g[j+len("@plt"):] == w {
					got[i] = w
				}
			}
		}
	}
	if i := firstDiff(got, want); i >= 0 {
		t.Errorf("samples without call graphs: %d lines, perf script's %d; line %d: ours %q, perf's %q", len(got), len(want), i+1, at(got, i), at(want, i))
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

// firstDiff returns the index of the first line where a and b differ,
// or -1 when they are equal.
func firstDiff(a, b []string) int {
	for i := range max(len(a), len(b)) {
		if at(a, i) != at(b, i) || i >= len(a) || i >= len(b) {
			return i
		}
	}
	return -1
}

// at returns ls[i], or "" past its end.
func at(ls []string, i int) string {
	if i < len(ls) {
		return ls[i]
	}
	return ""
}
