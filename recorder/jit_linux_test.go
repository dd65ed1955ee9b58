package recorder

import (
	"bytes"
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/sframekit/sframekit/internal/testprog"
)

// TestPeriodsJIT records node --perf-basic-prof cut into periods, as the
// agent does: a function that the JIT compiles only after the first
// periods (late) is named in the periods after it, from the perf map read
// again for each period.
func TestPeriodsJIT(t *testing.T) {
	needPerf(t)
	testprog.NeedTool(t, "node")
	dir := t.TempDir()
	js := filepath.Join(dir, "phases.js")
	os.WriteFile(js, []byte(`function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
function late(n) { return n < 2 ? n : late(n - 1) + late(n - 2); }
let s = 0;
let end = Date.now() + 1500;
while (Date.now() < end) s += fib(22);
end = Date.now() + 1500;
while (Date.now() < end) s += late(22);
console.log(s > 0);
`), 0o644)
	cmd := exec.Command("node", "--perf-basic-prof", js)
	cmd.Dir = dir
	var names []map[string]bool
	opts := Options{Command: cmd, Period: 200 * time.Millisecond, OnPeriod: func(p *Profile) {
		names = append(names, periodFuncs(t, p))
	}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := Record(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	t.Cleanup(func() { os.Remove("/tmp/perf-" + strconv.Itoa(cmd.Process.Pid) + ".map") })
	fib, late := -1, -1
	for i, fns := range names {
		for n := range fns {
			switch {
			case fib < 0 && strings.HasPrefix(n, "JS:") && strings.Contains(n, "fib "+js):
				fib = i
			case late < 0 && strings.HasPrefix(n, "JS:") && strings.Contains(n, "late "+js):
				late = i
			}
		}
	}
	// late is compiled only once fib's 1.5 s are over: a period's names
	// are those the perf map had by then, not the whole run's.
	if fib < 0 || late < 0 || late < fib {
		t.Errorf("%d periods; fib named first in period %d, late in %d (want late no earlier than fib)", len(names), fib, late)
	}
}

// TestPeriodsPerfMapGrows records testdata/jitgrow.c cut into periods, as
// the agent does: its perf map grows while it runs, and each period reads
// only what was appended since the last (the map's first 2000 entries
// once, not once a period); old and new functions are named, and the map
// rewritten shorter is read again: its one entry names all the code.
func TestPeriodsPerfMapGrows(t *testing.T) {
	needPerf(t)
	if runtime.GOARCH != "amd64" {
		t.Skip("jitgrow's code is x86-64's")
	}
	exe := testprog.Build(t, "testdata/jitgrow.c", "-O2")
	cmd := exec.Command(exe)
	type period struct {
		read  int64
		names map[string]bool
	}
	var periods []period
	var last int64
	opts := Options{Command: cmd, Period: 200 * time.Millisecond, OnPeriod: func(p *Profile) {
		fns := map[string]bool{}
		for name := range periodFuncs(t, p) {
			if strings.HasPrefix(name, "jit") || name == "rewritten" || strings.Contains(name, "elsewhere") {
				fns[name] = true
			}
		}
		read := p.Session().JITBytesRead()
		periods = append(periods, period{read - last, fns})
		last = read
	}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := Record(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	t.Cleanup(func() { os.Remove("/tmp/perf-" + strconv.Itoa(cmd.Process.Pid) + ".map") })
	// The map's first part, read once: 2000 lines of over 40 bytes.
	const head = 2000 * 40
	both, rewritten, reads := -1, -1, 0
	for i, pd := range periods {
		t.Logf("period %d: %d bytes read, %v", i, pd.read, slices.Sorted(maps.Keys(pd.names)))
		if pd.read > head {
			reads++
		}
		if pd.names["jit0"] && (pd.names["jit4"] || pd.names["jit5"]) && both < 0 {
			both = i
		}
		if pd.names["rewritten"] && rewritten < 0 {
			rewritten = i
		}
		if rewritten >= 0 && i > rewritten && len(pd.names) > 0 && !(len(pd.names) == 1 && pd.names["rewritten"]) {
			t.Errorf("period %d, after the map was rewritten: %v", i, pd.names)
		}
	}
	if reads != 1 {
		t.Errorf("the map's first %d bytes read in %d periods, want 1", head, reads)
	}
	if both < 0 || rewritten < 0 {
		t.Errorf("%d periods: old and new functions named together in period %d, the rewritten map in %d", len(periods), both, rewritten)
	}
}

// periodFuncs returns the names of the functions in a period's profile p,
// written as pprof and read back (nil after an error, reported).
func periodFuncs(t *testing.T, p *Profile) map[string]bool {
	var buf bytes.Buffer
	if err := p.WritePprof(&buf); err != nil {
		t.Error(err)
		return nil
	}
	q, err := profile.Parse(&buf)
	if err != nil {
		t.Error(err)
		return nil
	}
	fns := map[string]bool{}
	for _, f := range q.Function {
		fns[f.Name] = true
	}
	return fns
}
