//go:build linux

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/internal/testprog"
)

// TestReportReplacedDuringRecording records a program that loads a
// library, then loads it again after another build (with build IDs)
// replaced it at its path. perf record reads the build IDs of its table
// from the paths when it ends: the table gives the second build's for
// both, and perf script names the first build's code with the second's
// functions. Only the MMAP2 records' inodes tell: the file at the path,
// of another inode than the first mapping's and there before the
// recording ended, is refused for it (and the build-ID cache, which holds
// the same file), with a line in the summary; the second mapping's
// samples are named.
func TestReportReplacedDuringRecording(t *testing.T) {
	testprog.NeedTool(t, "perf")
	dlprog := testprog.Build(t, "../../recorder/testdata/dlprog.c", "-O2")
	dir := t.TempDir()
	t.Setenv("HOME", dir) // perf's build-ID cache, $HOME/.debug: the test's own
	lib, next := filepath.Join(dir, "libdl.so"), filepath.Join(dir, "libdl-new.so")
	writeFile(t, lib, mustRead(t, testprog.Build(t, "../../recorder/testdata/dllib.c", "-O2", "-shared", "-fPIC")))
	writeFile(t, next, mustRead(t, testprog.Build(t, "../../recorder/testdata/dllib.c", "-O2", "-shared", "-fPIC", "-DNEW")))
	rec := filepath.Join(dir, "perf.data")
	if out, err := exec.Command("perf", "record", "-q", "-o", rec, "--call-graph", "dwarf", "-e", "cpu-clock", "-c", "1000000", "--", dlprog, "replace", lib, next, "1").CombinedOutput(); err != nil {
		t.Fatalf("perf record: %v\n%s", err, out)
	}
	out, errs, code := runCLI(t, "report", "--format", "folded", rec)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	refused := regexp.MustCompile(`(?m)^files not used: 1\n  ` + regexp.QuoteMeta(lib) + `: not the file mapped \(inode \d+, mapped \d+\), and there before the recording ended: the recorded build ID is this file's$`)
	var first, second bool
	for _, line := range strings.Split(out, "\n") {
		first = first || strings.HasPrefix(line, "dl;") && strings.Contains(line, ";lib_spin")
		second = second || strings.HasPrefix(line, "dl2;") && strings.Contains(line, ";dl_thread;lib_spin;lib1_new;lib2_new ")
		if strings.HasPrefix(line, "dl;") && strings.Contains(line, "_new") {
			t.Errorf("the first build's code named from the second's: %s", line)
		}
	}
	if first || !second || !refused.MatchString(errs) {
		t.Errorf("first build named %v (want not), second named %v (want so), or no refusal in the summary:\n%s\n%.2000s", first, second, errs, out)
	}
}

// TestReportBuildIDCache records one build at two paths, then reports
// the second recording after its file was removed: the file is perf's
// build-ID cache copy, which perf record made from the first path (another
// inode than the second recording's mapping, and older than it), and is
// used, as perf script uses it.
func TestReportBuildIDCache(t *testing.T) {
	testprog.NeedTool(t, "perf")
	built := testprog.Build(t, "../../perfunwind/testdata/prog.c", "-O2", "-g")
	dir := t.TempDir()
	t.Setenv("HOME", dir) // perf's build-ID cache, $HOME/.debug: the test's own
	var rec string
	for _, sub := range []string{"a", "b"} {
		prog := filepath.Join(dir, sub, "prog")
		if err := os.Mkdir(filepath.Dir(prog), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, prog, mustRead(t, built))
		rec = filepath.Join(dir, sub+".data")
		if out, err := exec.Command("perf", "record", "-q", "-o", rec, "--call-graph", "dwarf", "-e", "cpu-clock", "-c", "1000000", "--", prog, "300").CombinedOutput(); err != nil {
			t.Fatalf("perf record: %v\n%s", err, out)
		}
		if sub == "b" {
			if err := os.Remove(prog); err != nil {
				t.Fatal(err)
			}
		}
	}
	out, errs, code := runCLI(t, "report", "--format", "folded", rec)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, ";work;rec;") || strings.Contains(errs, "files not used") {
		t.Errorf("no work;rec; frames, or a file not used:\n%s\n%.500s", errs, out)
	}
}

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
