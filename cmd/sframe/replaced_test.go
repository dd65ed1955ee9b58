//go:build linux

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
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
	recordCopy(t, built, dir, "a", "300", nil)
	prog, rec := recordCopy(t, built, dir, "b", "300", nil)
	if err := os.Remove(prog); err != nil {
		t.Fatal(err)
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
	out, errs, perf := textAndScript(t, rec)
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

// TestReportStrippedFromBuildIDCache records a program, strips it (its
// build ID kept) and records it again: perf names the second recording's
// frames from the copy of the first build that its build-ID cache holds
// (the copy has .symtab, the stripped file only .dynsym), and report's
// text must name them as perf script does.
func TestReportStrippedFromBuildIDCache(t *testing.T) {
	testprog.NeedTool(t, "perf")
	testprog.NeedTool(t, "strip")
	built := testprog.Build(t, "../../perfunwind/testdata/prog.c", "-O2", "-Wl,--build-id")
	dir := t.TempDir()
	t.Setenv("HOME", dir) // perf's build-ID cache, $HOME/.debug: the test's own
	recordCopy(t, built, dir, "a", "200", nil)
	// Another path for the stripped copy: perf's cache links the file
	// it records (the same inode), which strip would change.
	_, rec := recordCopy(t, built, dir, "stripped", "200", func(prog string) {
		if out, err := exec.Command("strip", "--strip-all", prog).CombinedOutput(); err != nil {
			t.Fatalf("strip: %v\n%s", err, out)
		}
	})
	out, _, perf := textAndScript(t, rec)
	if !strings.Contains(string(perf), " work (") {
		t.Fatalf("perf script names no frame work: its build-ID cache did not give the symbols\n%.1000s", perf)
	}
	ours, theirs := parseText(t, out), parseText(t, string(perf))
	if len(ours) != len(theirs) || len(ours) < 50 {
		t.Fatalf("%d samples, perf script %d", len(ours), len(theirs))
	}
	// Compare the frames of the program's own file (perf's walk and ours
	// agree there; this is about names).
	same, named := 0, 0
	for i := range ours {
		a, b := progFrames(ours[i].frames), progFrames(theirs[i].frames)
		if slices.Equal(a, b) {
			same++
		}
		if len(a) > 0 && !strings.Contains(a[0], "[unknown]") {
			named++
		}
	}
	if same < len(ours)*99/100 || named < len(ours)/2 {
		t.Errorf("%d of %d samples name the program's frames as perf script does, %d name them at all\n%.800s", same, len(ours), named, out)
	}
}

// progFrames returns the frames of a text sample that lie in the file
// named prog, without their addresses.
func progFrames(frames []string) []string {
	var out []string
	for _, f := range frames {
		if strings.HasSuffix(f, "/prog)") {
			_, rest, _ := strings.Cut(strings.TrimSpace(f), " ")
			out = append(out, rest)
		}
	}
	return out
}

// recordCopy copies the program built to DIR/SUB/prog, lets prepare
// change the copy (nil: nothing), records it with perf record
// --call-graph dwarf (argument ms: the program's milliseconds of CPU)
// and returns the copy's path and the recording's (DIR/SUB.data).
func recordCopy(t *testing.T, built, dir, sub, ms string, prepare func(prog string)) (prog, rec string) {
	t.Helper()
	prog = filepath.Join(dir, sub, "prog")
	if err := os.Mkdir(filepath.Dir(prog), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, prog, mustRead(t, built))
	if prepare != nil {
		prepare(prog)
	}
	rec = filepath.Join(dir, sub+".data")
	if out, err := exec.Command("perf", "record", "-q", "-o", rec, "--call-graph", "dwarf", "-e", "cpu-clock", "-c", "1000000", "--", prog, ms).CombinedOutput(); err != nil {
		t.Fatalf("perf record: %v\n%s", err, out)
	}
	return prog, rec
}

// textAndScript returns report's text of the recording rec, its summary
// and perf script's text of rec (the fields the text form matches).
func textAndScript(t *testing.T, rec string) (out, errs string, perf []byte) {
	t.Helper()
	out, errs, code := runCLI(t, "report", "--format", "text", rec)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	perf, err := exec.Command("perf", "script", "-i", rec, "-F", "comm,tid,time,ip,sym,dso", "--no-inline", "--max-stack", "1024").Output()
	if err != nil {
		t.Fatal(err)
	}
	return out, errs, perf
}
