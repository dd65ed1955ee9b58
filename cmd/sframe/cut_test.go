//go:build linux

package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/internal/corpus"
)

// TestReportCut reads a perf record recording cut the ways a file is
// cut in practice, and checks what is written and the exit status:
// cut in the feature sections after the records (a partial copy), every
// sample is written, as perf script writes them, one line warns and the
// status is 0; cut in the data section, or with the header's data size
// 0 as perf record killed by SIGKILL leaves it, the samples before the
// cut are written and the status is 1, with an error saying which bytes
// of records were lost (perf script writes nothing of either).
func TestReportCut(t *testing.T) {
	_, file, _ := reportRecording(t)
	whole, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	dataOff, dataSize := int(le.Uint64(whole[40:])), int(le.Uint64(whole[48:]))
	if dataOff+dataSize+300 > len(whole) {
		t.Fatalf("data section [%#x, +%#x) in a file of %#x bytes: no feature sections to cut", dataOff, dataSize, len(whole))
	}
	wholeOut, _, code := runCLI(t, "report", "-q", "--format", "text", file)
	if code != 0 {
		t.Fatalf("whole recording: exit %d", code)
	}
	wholeSamples := map[string]bool{}
	for _, s := range parseText(t, wholeOut) {
		wholeSamples[s.header] = true
	}
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}

	// Cut a few hundred bytes short of its end: perf script prints every
	// sample, silently, with status 0.
	path := write("features", whole[:len(whole)-300])
	out, errs, code := runCLI(t, "report", "-q", "--format", "text", path)
	perf, perr := exec.Command("perf", "script", "-i", path, "-F", "comm,tid,time,ip,sym,dso", "--no-inline", "--max-stack", "1024").Output()
	if perr != nil {
		t.Fatalf("perf script: %v", perr)
	}
	if code != 0 || out != wholeOut || len(parseText(t, out)) != len(parseText(t, string(perf))) ||
		!strings.HasPrefix(errs, "sframe report: "+path+": warning: every sample was read") || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "truncated") {
		t.Errorf("cut in the feature sections: exit %d, %d samples (perf script %d, whole %d), stderr %q", code, len(parseText(t, out)), len(parseText(t, string(perf))), len(parseText(t, wholeOut)), errs)
	}

	// Cut in the middle of the data section, and perf record killed (the
	// header's data size 0, no feature sections).
	cut := dataOff + dataSize/2
	killed := bytes.Clone(whole[:dataOff+dataSize])
	le.PutUint64(killed[48:], 0)
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"data", whole[:cut], "bytes are lost (the output has the"},
		{"killed", killed, "perf record did not finish (the header's data size is 0)"},
	} {
		path := write(c.name, c.data)
		out, errs, code := runCLI(t, "report", "-q", "--format", "text", path)
		samples := parseText(t, out)
		if code != 1 || len(samples) == 0 || strings.Count(errs, "\n") != 1 || !strings.HasPrefix(errs, "sframe report: "+path+": ") ||
			!strings.Contains(errs, c.want) || !strings.Contains(errs, fmt.Sprintf("the output has the %d samples read before", len(samples))) {
			t.Errorf("%s: exit %d, %d samples, stderr %q, want one line with %q", c.name, code, len(samples), errs, c.want)
		}
		for _, s := range samples {
			if !wholeSamples[s.header] {
				t.Errorf("%s: sample %q is not the whole recording's", c.name, s.header)
			}
		}
	}
	// Cut inside the header's sections, before the data: nothing to
	// read (perf script: "incompatible file format").
	path = write("header", whole[:dataOff-8])
	if out, errs, code := runCLI(t, "report", "--format", "text", path); code != 1 || out != "" ||
		errs != fmt.Sprintf("sframe report: %s: offset 0x28: truncated: the file (%#x bytes) ends before its data section at %#x\n", path, dataOff-8, dataOff) {
		t.Errorf("cut before the data: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	// A file-mode recording on standard input, which is not seekable:
	// what to do instead, not perfdata's function names.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		w.Write(whole)
		w.Close()
	}()
	saved := stdin
	defer func() { stdin = saved }()
	stdin = r
	if out, errs, code := runCLI(t, "report", "--format", "text", "-"); code != 1 || out != "" ||
		errs != "sframe report: <stdin>: a perf.data file, which cannot be read from a pipe: give its path, or record in pipe format (perf record -o -)\n" {
		t.Errorf("file-mode recording on a pipe: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	r.Close()
	stdin = saved

	// The bytes lost: from the record the cut is in to the data
	// section's end.
	_, errs, _ = runCLI(t, "report", "-q", "--format", "text", filepath.Join(dir, "data"))
	var off, lost, size int
	if i := strings.Index(errs, "offset "); i < 0 {
		t.Fatalf("no offset in %q", errs)
	} else if _, err := fmt.Sscanf(errs[i:], "offset %v", &off); err != nil {
		t.Fatalf("%q: %v", errs, err)
	}
	if i := strings.Index(errs, "the records in the last "); i < 0 {
		t.Fatalf("no loss in %q", errs)
	} else if _, err := fmt.Sscanf(errs[i:], "the records in the last %d of the data section's %d bytes", &lost, &size); err != nil {
		t.Fatalf("%q: %v", errs, err)
	}
	if size != dataSize || lost != dataOff+dataSize-off || off > cut || off < dataOff {
		t.Errorf("%q: the data section is [%#x, +%d), cut at %#x", errs, dataOff, dataSize, cut)
	}
}

// TestReportDirectory: perf record --threads writes a directory (a
// header file and a file of records per CPU), which report reads as perf
// script does: the same samples, in the same order, with the same frames
// (99% of them, as TestReportText allows), and exactly what it prints for
// the file perf inject merges the directory into.
func TestReportDirectory(t *testing.T) {
	exe, _, _ := reportRecording(t)
	dir := filepath.Join(t.TempDir(), "perf.data")
	if out, err := exec.Command("perf", "record", "-q", "-N", "--threads", "--call-graph", "dwarf", "-e", "cpu-clock", "-c", "250000", "-o", dir, "--", exe, "200").CombinedOutput(); err != nil {
		t.Skipf("perf record --threads: %v\n%s", err, out)
	}
	if names, _ := filepath.Glob(filepath.Join(dir, "data.*")); len(names) == 0 {
		t.Fatalf("%s: no data.N files", dir)
	}
	out, _, perf := textAndScript(t, dir)
	ours, theirs := parseText(t, out), parseText(t, string(perf))
	if len(ours) != len(theirs) || len(ours) < 100 {
		t.Fatalf("%d samples, perf script %d", len(ours), len(theirs))
	}
	same, tids := 0, map[string]bool{}
	for i := range ours {
		if ours[i].header != theirs[i].header || !textHeader.MatchString(ours[i].header) {
			t.Fatalf("sample %d: %q, perf script %q", i, ours[i].header, theirs[i].header)
		}
		tids[textHeader.FindStringSubmatch(ours[i].header)[2]] = true
		if strings.Join(ours[i].frames, "\n") == strings.Join(theirs[i].frames, "\n") {
			same++
		}
	}
	if same < len(ours)*99/100 || len(tids) < 2 {
		t.Errorf("%d of %d samples as perf script prints them, %d threads", same, len(ours), len(tids))
	}

	merged := filepath.Join(t.TempDir(), "merged.data")
	f, err := os.Create(merged)
	if err != nil {
		t.Fatal(err)
	}
	inject := exec.Command("perf", "inject", "-i", dir, "-o", "-")
	inject.Stdout = f
	if err := inject.Run(); err != nil {
		t.Fatalf("perf inject: %v", err)
	}
	f.Close()
	mout, errs, code := runCLI(t, "report", "-q", "--format", "text", merged)
	if code != 0 || mout != out {
		t.Errorf("merged: exit %d (%q), output differs from the directory's:\n%s", code, errs, corpus.FirstDiff(out, mout))
	}
}
