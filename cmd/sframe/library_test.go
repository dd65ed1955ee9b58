//go:build linux

package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/sframekit/sframekit/internal/testprog"
	"github.com/sframekit/sframekit/perfdata"
	"github.com/sframekit/sframekit/perfunwind"
	"github.com/sframekit/sframekit/stackprof"
)

// TestReportLibraryDefaults unwinds a recording as a library user does,
// with the zero perfunwind.Options, and as sframe report does: the
// samples (perf script's text) and the summary (how stacks were unwound,
// SFrame compiled from CFI included) must be the same. The recording is
// of python3, whose walks go through hundreds of the interpreter's
// functions, CFI only: enough first CFI lookups that compiling SFrame
// from it is due. (A C program's walks take the CFI at a few dozen
// addresses, whose rows the unwinder keeps after one lookup each, and
// compile nothing.)
func TestReportLibraryDefaults(t *testing.T) {
	file := pythonRecording(t)
	out, cliSummary, code := runCLI(t, "report", "--format", "text", file)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, cliSummary)
	}

	r, err := perfdata.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s, err := perfunwind.NewSession(perfunwind.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res := perfunwind.NewResolver(s)
	defer res.Close()
	var text, summary bytes.Buffer
	sw := stackprof.NewScriptWriter(&text, res)
	if err := s.Process(r, perfunwind.ProcessOptions{}, sw.Write); err != nil {
		t.Fatal(err)
	}
	if err := sw.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := perfunwind.WriteSummary(&summary, s); err != nil {
		t.Fatal(err)
	}
	if text.String() != out {
		t.Errorf("the library's samples differ from sframe report's (%d bytes, %d)", text.Len(), len(out))
	}
	if summary.String() != cliSummary {
		t.Errorf("summaries differ:\nlibrary:\n%s\nsframe report:\n%s", summary.String(), cliSummary)
	}
	if s.Stats.GenFrames == 0 {
		t.Errorf("no frames by SFrame compiled from CFI (python3 has none of its own):\n%s", summary.String())
	}
}

// pythonRecording records (perf record --call-graph dwarf) python3
// running perfunwind's work.py for 1.2 s of CPU time, and returns the
// file.
func pythonRecording(t *testing.T) string {
	t.Helper()
	testprog.NeedTool(t, "perf")
	py := testprog.Python(t)
	file := filepath.Join(t.TempDir(), "python.data")
	out, err := exec.Command("perf", "record", "-q", "-N", "--call-graph", "dwarf", "-e", "cpu-clock", "-c", "250000",
		"-o", file, "--", py, "../../perfunwind/testdata/work.py", "1.2").CombinedOutput()
	if err != nil {
		t.Fatalf("perf record: %v\n%s", err, out)
	}
	return file
}
