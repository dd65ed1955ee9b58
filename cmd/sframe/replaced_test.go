//go:build linux

package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/internal/testprog"
)

// TestReportMemfd records a program executed from a memfd, whose file
// "/memfd:NAME (deleted)" is gone when the recording is read: its frames
// show file offsets, as perf script shows them, not runtime addresses,
// and the summary lists the file as not used.
func TestReportMemfd(t *testing.T) {
	testprog.NeedTool(t, "perf")
	dlprog := testprog.Build(t, "../../recorder/testdata/dlprog.c", "-O2")
	prog := testprog.Build(t, "../../perfunwind/testdata/prog.c", "-O2", "-fno-omit-frame-pointer")
	rec := filepath.Join(t.TempDir(), "perf.data")
	if out, err := exec.Command("perf", "record", "-q", "-N", "-o", rec, "--call-graph", "dwarf", "-e", "cpu-clock", "-c", "1000000", "--", dlprog, "memfd", prog, "300").CombinedOutput(); err != nil {
		t.Fatalf("perf record: %v\n%s", err, out)
	}
	out, errs, code := runCLI(t, "report", "--format", "text", rec)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	perf, err := exec.Command("perf", "script", "-i", rec, "-F", "comm,tid,time,ip,sym,dso", "--no-inline").Output()
	if err != nil {
		t.Fatal(err)
	}
	ours, theirs := parseText(t, out), parseText(t, string(perf))
	if len(ours) != len(theirs) || len(ours) < 100 {
		t.Fatalf("%d samples, perf script %d", len(ours), len(theirs))
	}
	// perf stops at the first frame in the memfd (it cannot read the
	// file), where frame pointers take us further: compare first frames.
	memfd := 0
	for i := range ours {
		if len(ours[i].frames) == 0 || len(theirs[i].frames) == 0 || ours[i].frames[0] != theirs[i].frames[0] {
			t.Fatalf("sample %d: first frame %q, perf script's %q", i, ours[i].frames, theirs[i].frames)
		}
		if strings.Contains(ours[i].frames[0], "(/memfd:dlprog-memfd (deleted))") {
			memfd++
		}
	}
	if memfd < len(ours)/2 || !strings.Contains(errs, "files not used: 1\n  /memfd:dlprog-memfd (deleted): deleted while mapped") {
		t.Errorf("%d of %d samples in the memfd; summary:\n%s", memfd, len(ours), errs)
	}
}
