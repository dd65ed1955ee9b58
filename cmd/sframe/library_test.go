//go:build linux

package main

import (
	"bytes"
	"testing"

	"github.com/sframekit/sframekit/perfdata"
	"github.com/sframekit/sframekit/perfunwind"
	"github.com/sframekit/sframekit/stackprof"
)

// TestReportLibraryDefaults unwinds a recording as a library user does,
// with the zero perfunwind.Options, and as sframe report does: the
// samples (perf script's text) and the summary (how stacks were unwound,
// SFrame compiled from CFI included) must be the same.
func TestReportLibraryDefaults(t *testing.T) {
	_, file, _ := reportRecording(t)
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
		t.Errorf("no frames by SFrame compiled from CFI (libc has none of its own):\n%s", summary.String())
	}
}
