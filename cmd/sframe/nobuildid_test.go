//go:build linux

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sframekit/sframekit/internal/testprog"
)

// TestReportNoBuildID records a program linked --build-id=none, then
// replaces it: nothing but the recording's inode and time tells the
// builds apart. Unchanged, it is used; rewritten in place after the
// recording, or replaced by another file (however old), it is refused,
// with a line saying why in the summary's files not used, as a build-ID
// mismatch is, and none of its frames are named from the other build.
func TestReportNoBuildID(t *testing.T) {
	testprog.NeedTool(t, "perf")
	const src = "../../perfunwind/testdata/prog.c"
	recorded := testprog.Build(t, src, "-O2", "-g", "-Wl,--build-id=none")
	other := testprog.Build(t, src, "-O0", "-g", "-Wl,--build-id=none")
	if out, _ := exec.Command("readelf", "-n", recorded).Output(); strings.Contains(string(out), "Build ID") {
		t.Fatalf("%s has a build ID:\n%s", recorded, out)
	}
	dir := t.TempDir()
	prog := filepath.Join(dir, "prog")
	otherData := mustRead(t, other)
	writeFile(t, prog, mustRead(t, recorded))
	rec := filepath.Join(dir, "perf.data")
	if out, err := exec.Command("perf", "record", "-q", "-N", "-o", rec, "--call-graph", "dwarf", "-e", "cpu-clock", "-c", "1000000", "--", prog, "300").CombinedOutput(); err != nil {
		t.Fatalf("perf record: %v\n%s", err, out)
	}
	report := func() (string, string) {
		t.Helper()
		out, errs, code := runCLI(t, "report", "--format", "folded", rec)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		return out, errs
	}

	out, errs := report()
	if !strings.Contains(out, ";work;rec;") || strings.Contains(errs, prog+":") {
		t.Errorf("unchanged: no work;rec; frames, or the file not used:\n%s\n%.500s", errs, out)
	}

	// Rewritten in place (the same inode), after the recording.
	time.Sleep(20 * time.Millisecond) // past the recording's time, at any timestamp granularity
	writeFile(t, prog, otherData)
	out, errs = report()
	refused := regexp.MustCompile(`(?m)^files not used: 1\n  ` + regexp.QuoteMeta(prog) + `: modified at .*, after the recording ended .*no build ID`)
	if strings.Contains(out, ";work;") || !refused.MatchString(errs) {
		t.Errorf("rewritten in place: frames named from the other build, or no refusal in the summary:\n%s\n%.500s", errs, out)
	}

	// Replaced by another file, older than the recording.
	tmp := prog + ".new"
	writeFile(t, tmp, otherData)
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(tmp, old, old); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, prog); err != nil {
		t.Fatal(err)
	}
	out, errs = report()
	refused = regexp.MustCompile(`(?m)^files not used: 1\n  ` + regexp.QuoteMeta(prog) + `: replaced since the recording \(inode \d+, recorded \d+\), and no build ID`)
	if strings.Contains(out, ";work;") || !refused.MatchString(errs) {
		t.Errorf("replaced: frames named from the other build, or no refusal in the summary:\n%s\n%.500s", errs, out)
	}
}

// writeFile writes data to an executable file at path, in place if it
// exists (its inode kept).
func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o755); err != nil {
		t.Fatal(err)
	}
}
