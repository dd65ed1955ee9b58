//go:build linux

package main

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/sframekit/sframekit/internal/corpus"
	"github.com/sframekit/sframekit/internal/testprog"
)

var (
	reportRecOnce sync.Once
	reportRec     struct {
		exe, file, pipe string
		err             error
	}
)

// reportRecording records, once, the perfunwind test program (SFrame,
// two threads, signal handlers) with perf record --call-graph dwarf, as a
// file and as a pipe-mode stream; it skips without perf (fails under CI).
func reportRecording(t *testing.T) (exe, file, pipe string) {
	t.Helper()
	testprog.NeedTool(t, "perf")
	exe = testprog.Build(t, "../../perfunwind/testdata/prog.c", "-O2", "-fomit-frame-pointer", "-g", "-Wa,--gsframe")
	dir := testprog.Dir(t)
	reportRecOnce.Do(func() {
		file, pipe := filepath.Join(dir, "report.data"), filepath.Join(dir, "report-pipe.data")
		args := []string{"record", "-q", "-N", "--call-graph", "dwarf", "-e", "cpu-clock", "-c", "250000"}
		if out, err := exec.Command("perf", append(append(args, "-o", file, "--"), exe, "500")...).CombinedOutput(); err != nil {
			reportRec.err = fmt.Errorf("perf record: %v\n%s", err, out)
			return
		}
		c := exec.Command("perf", append(append(args, "-o", "-", "--"), exe, "300")...)
		f, err := os.Create(pipe)
		if err != nil {
			reportRec.err = err
			return
		}
		var stderr bytes.Buffer
		c.Stdout, c.Stderr = f, &stderr
		if err := c.Run(); err != nil {
			reportRec.err = fmt.Errorf("perf record -o -: %v\n%s", err, stderr.String())
		}
		f.Close()
		reportRec.exe, reportRec.file, reportRec.pipe = exe, file, pipe
	})
	if reportRec.err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(reportRec.err)
		}
		t.Skip(reportRec.err)
	}
	return reportRec.exe, reportRec.file, reportRec.pipe
}

// textSample is a sample of the text format: header line and frames.
type textSample struct {
	header string
	frames []string
}

func parseText(t *testing.T, text string) []textSample {
	t.Helper()
	var out []textSample
	for _, line := range strings.Split(text, "\n") {
		switch {
		case line == "":
		case line[0] != '\t':
			out = append(out, textSample{header: line})
		case len(out) == 0:
			t.Fatalf("frame before a sample: %q", line)
		default:
			out[len(out)-1].frames = append(out[len(out)-1].frames, line)
		}
	}
	return out
}

var textHeader = regexp.MustCompile(`^(.+?) +(\d+) +(\d+\.\d{6}): $`)

// TestReportText checks the text format against perf script on the same
// recording: the same samples, in the same order, with the same frames
// (package perfunwind compares the frames in depth).
func TestReportText(t *testing.T) {
	_, file, _ := reportRecording(t)
	out, errs, perf := textAndScript(t, file)
	ours, theirs := parseText(t, out), parseText(t, string(perf))
	if len(ours) != len(theirs) || len(ours) < 100 {
		t.Fatalf("%d samples, perf script %d", len(ours), len(theirs))
	}
	same := 0
	for i := range ours {
		if ours[i].header != theirs[i].header || !textHeader.MatchString(ours[i].header) {
			t.Fatalf("sample %d: %q, perf script %q", i, ours[i].header, theirs[i].header)
		}
		if strings.Join(ours[i].frames, "\n") == strings.Join(theirs[i].frames, "\n") {
			same++
		}
	}
	if same < len(ours)*99/100 {
		t.Errorf("%d of %d samples as perf script prints them", same, len(ours))
	}
	// The summary: samples read, and how they were unwound.
	if !regexp.MustCompile(`^`+strconv.Itoa(len(ours))+` samples read`).MatchString(errs) || !strings.Contains(errs, "user stacks unwound:") {
		t.Errorf("summary:\n%s", errs)
	}
	// -q: none.
	if _, errs, _ := runCLI(t, "report", "-q", "--format", "text", file); errs != "" {
		t.Errorf("-q: stderr %q", errs)
	}
}

// TestReportNoCallGraph reads a recording made without -g: each sample
// has its sampled address's frame (it had none), the text is perf
// script's (one line per sample; 99% of them byte for byte), folded stacks have a
// function under each command, and the summary names --call-graph dwarf.
func TestReportNoCallGraph(t *testing.T) {
	exe, _, _ := reportRecording(t)
	rec := filepath.Join(t.TempDir(), "nog.data")
	if out, err := exec.Command("perf", "record", "-q", "-N", "-o", rec, "-e", "cpu-clock", "-c", "250000", "--", exe, "300").CombinedOutput(); err != nil {
		t.Fatalf("perf record: %v\n%s", err, out)
	}
	out, errs, code := runCLI(t, "report", "--format", "text", rec)
	perf, err := exec.Command("perf", "script", "-i", rec, "-F", "comm,tid,time,ip,sym,dso").Output()
	if err != nil {
		t.Fatal(err)
	}
	// One line per sample, perf script's: the same samples in the same
	// order, and (as TestReportText allows for perf's choices among
	// aliases) at least 99% of the lines identical.
	ours, theirs := strings.Split(out, "\n"), strings.Split(string(perf), "\n")
	if code != 0 || len(ours) != len(theirs) || len(ours) < 10 {
		t.Fatalf("exit %d, %d lines, perf script %d\n%s", code, len(ours), len(theirs), corpus.FirstDiff(out, string(perf)))
	}
	same := 0
	for i := range ours {
		h, _, _ := strings.Cut(ours[i], ": ")
		ph, _, _ := strings.Cut(theirs[i], ": ")
		if h != ph {
			t.Fatalf("line %d: %q, perf script %q", i+1, ours[i], theirs[i])
		}
		if ours[i] == theirs[i] {
			same++
		} else {
			t.Logf("line %d: %q, perf script %q", i+1, ours[i], theirs[i])
		}
	}
	if same < len(ours)*99/100 {
		t.Errorf("%d of %d lines as perf script prints them", same, len(ours))
	}
	if !strings.Contains(errs, "hint: ") || !strings.Contains(errs, "perf record --call-graph dwarf") {
		t.Errorf("no hint naming --call-graph dwarf in the summary:\n%s", errs)
	}
	folded, _, _ := runCLI(t, "report", "-q", "--format", "folded", rec)
	lines := strings.Split(strings.TrimSpace(folded), "\n")
	spin := false
	for _, l := range lines {
		stack, _, _ := strings.Cut(l, " ")
		if !strings.Contains(stack, ";") {
			t.Errorf("folded line without a frame: %q", l)
		}
		spin = spin || strings.HasSuffix(stack, ";spin")
	}
	if !spin {
		t.Errorf("no sample in spin:\n%s", folded)
	}
}

// buildID reads the GNU build ID of the ELF file at path.
func buildID(t *testing.T, path string) string {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := f.Section(".note.gnu.build-id")
	if s == nil {
		t.Fatalf("%s: no build ID", path)
	}
	d, err := s.Data()
	if err != nil || len(d) < 16 {
		t.Fatalf("%s: build ID note: %v", path, err)
	}
	return hex.EncodeToString(d[16:])
}

// TestReportPprof reads the profile back with pprof's parser: sample
// types, one sample per sample of the text format, labels, the program's
// mapping with its build ID, functions, and with --source and --inlines
// lines and inline frames. go tool pprof must open it.
func TestReportPprof(t *testing.T) {
	exe, file, _ := reportRecording(t)
	text, _, _ := runCLI(t, "report", "-q", "--format", "text", file)
	samples := parseText(t, text)
	dir := t.TempDir()
	for _, c := range []struct {
		flags       []string
		lines, inl  bool
		defaultName bool
	}{
		{nil, false, false, true},
		{[]string{"--source"}, true, false, false},
		{[]string{"--inlines"}, true, true, false},
	} {
		out := filepath.Join(dir, "profile.pb.gz")
		args := append([]string{"report", "-q"}, c.flags...)
		if c.defaultName {
			// The default output file, in the current directory.
			wd, _ := os.Getwd()
			if err := os.Chdir(dir); err != nil {
				t.Fatal(err)
			}
			_, errs, code := runCLI(t, append(args, file)...)
			os.Chdir(wd)
			if code != 0 {
				t.Fatalf("%q: exit %d: %s", args, code, errs)
			}
		} else if _, errs, code := runCLI(t, append(args, "-o", out, file)...); code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, errs)
		}
		p := readProfile(t, out)
		if len(p.SampleType) != 2 || p.SampleType[0].Type != "samples" || p.SampleType[0].Unit != "count" ||
			p.SampleType[1].Type != "cpu" || p.SampleType[1].Unit != "nanoseconds" {
			t.Fatalf("sample types %v", p.SampleType)
		}
		var n, ns int64
		labels := true
		for _, s := range p.Sample {
			n += s.Value[0]
			ns += s.Value[1]
			labels = labels && len(s.NumLabel["pid"]) == 1 && len(s.NumLabel["thread"]) == 1 && s.Label["thread_name"] != nil
		}
		if n != int64(len(samples)) || ns != n*250000 || !labels {
			t.Errorf("%q: %d samples, %d ns (want %d, 250 us each), labels on all: %v", args, n, ns, len(samples), labels)
		}
		var progMap *profile.Mapping
		for _, m := range p.Mapping {
			if m.File == exe {
				progMap = m
			}
		}
		if progMap == nil || progMap.BuildID != buildID(t, exe) || p.Mapping[0] != progMap {
			t.Errorf("%q: the program's mapping %+v, first %+v; want build ID %s", args, progMap, p.Mapping[0], buildID(t, exe))
		}
		funcs := map[string]bool{}
		lines, inl := false, false
		for _, l := range p.Location {
			for _, ln := range l.Line {
				funcs[ln.Function.Name] = true
				lines = lines || ln.Line > 0 && strings.HasSuffix(ln.Function.Filename, "prog.c")
			}
			inl = inl || len(l.Line) > 1
		}
		for _, fn := range []string{"spin", "rec", "work", "main", "on_prof", "<signal handler called>"} {
			if !funcs[fn] {
				t.Errorf("%q: no function %s", args, fn)
			}
		}
		if lines != c.lines || inl != c.inl {
			t.Errorf("%q: source lines %v, inline frames %v; want %v, %v", args, lines, inl, c.lines, c.inl)
		}
	}
	testprog.NeedTool(t, "go")
	if out, err := exec.Command("go", "tool", "pprof", "-top", filepath.Join(dir, "profile.pb.gz")).CombinedOutput(); err != nil || !bytes.Contains(out, []byte("spin")) {
		t.Errorf("go tool pprof -top: %v\n%s", err, out)
	}
}

// TestReportFolded checks folded stacks against those of perf script's
// output collapsed as stackcollapse-perf.pl does, symbol versions
// dropped: the same lines and counts, but for the few samples whose
// frames differ (see TestReportText).
func TestReportFolded(t *testing.T) {
	_, file, _ := reportRecording(t)
	out, errs, code := runCLI(t, "report", "-q", "--format", "folded", file)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	ours := map[string]int{}
	total := 0
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if !sort.StringsAreSorted(lines) {
		t.Error("lines not sorted")
	}
	for _, line := range lines {
		i := strings.LastIndexByte(line, ' ')
		n, err := strconv.Atoi(line[i+1:])
		if i < 0 || err != nil || n <= 0 || strings.Contains(line[:i], ";;") {
			t.Fatalf("bad line %q", line)
		}
		ours[line[:i]] += n
		total += n
	}
	perf, err := exec.Command("perf", "script", "-i", file, "-F", "comm,tid,time,ip,sym,dso", "--no-inline", "--max-stack", "1024").Output()
	if err != nil {
		t.Fatal(err)
	}
	theirs := map[string]int{}
	samples := parseText(t, string(perf))
	for _, s := range samples {
		theirs[foldScript(textHeader.FindStringSubmatch(s.header)[1], s.frames)]++
	}
	if total != len(samples) {
		t.Errorf("%d samples folded, perf script shows %d", total, len(samples))
	}
	differ := 0
	for k, n := range theirs {
		differ += max(n-ours[k], 0)
	}
	if differ > len(samples)/100 {
		t.Errorf("%d of %d samples fold differently from perf script's", differ, len(samples))
	}
}

// foldScript returns the folded stack of a sample of perf script's
// text, the thread comm and its frames, as stackcollapse-perf.pl folds
// it, symbol versions dropped.
func foldScript(comm string, frames []string) string {
	stack := []string{strings.ReplaceAll(comm, " ", "_")}
	for i := len(frames) - 1; i >= 0; i-- {
		// "\tADDR SYM (DSO)", as stackcollapse-perf.pl reads it.
		f := strings.TrimSpace(frames[i])
		_, rest, _ := strings.Cut(f, " ")
		open := strings.LastIndex(rest, " (")
		sym, dso := rest[:open], rest[open+2:len(rest)-1]
		if sym == "[unknown]" && dso != "[unknown]" {
			sym = "[" + filepath.Base(dso) + "]"
		}
		// Folded stacks name a function without its symbol's
		// version, as pprof does (perf script shows it).
		if i := strings.IndexByte(sym, '@'); i > 0 && !strings.HasSuffix(sym, "@plt") {
			sym = sym[:i]
		}
		stack = append(stack, sym)
	}
	return strings.Join(stack, ";")
}

// parseFolded reads folded stacks into counts by stack, and their total.
func parseFolded(t *testing.T, out string) (map[string]int, int) {
	t.Helper()
	counts, total := map[string]int{}, 0
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		i := strings.LastIndexByte(line, ' ')
		n, err := strconv.Atoi(line[i+1:])
		if i < 0 || err != nil || n <= 0 {
			t.Fatalf("bad line %q", line)
		}
		counts[line[:i]] += n
		total += n
	}
	return counts, total
}

// TestReportFoldedEvents: folded stacks of a recording of two events
// (time and page faults) are those of one event's samples, as
// stackcollapse-perf.pl keeps them (it summed both): the first event's,
// with a line on standard error saying how many of the other's are left
// out, or --event's, by perf script's name or pprof's. They are perf
// script's samples of that event, folded. An unknown event is a usage
// error naming the recording's events; --event is for folded only.
func TestReportFoldedEvents(t *testing.T) {
	exe, _, _ := reportRecording(t)
	rec := filepath.Join(t.TempDir(), "two.data")
	if out, err := exec.Command("perf", "record", "-q", "-N", "-o", rec, "-e", "cpu-clock,page-faults", "--call-graph", "dwarf", "--", exe, "300").CombinedOutput(); err != nil {
		t.Fatalf("perf record: %v\n%s", err, out)
	}
	perf, err := exec.Command("perf", "script", "-i", rec, "-F", "comm,tid,time,event,ip,sym,dso", "--no-inline", "--max-stack", "1024").Output()
	if err != nil {
		t.Fatal(err)
	}
	header := regexp.MustCompile(`^(.+?) +(\d+) +(\d+\.\d{6}): +(\S+): $`)
	want := map[string]map[string]int{} // by event, stack
	for _, s := range parseText(t, string(perf)) {
		m := header.FindStringSubmatch(s.header)
		if m == nil {
			t.Fatalf("perf script header %q", s.header)
		}
		if want[m[4]] == nil {
			want[m[4]] = map[string]int{}
		}
		want[m[4]][foldScript(m[1], s.frames)]++
	}
	sum := func(m map[string]int) (n int) {
		for _, c := range m {
			n += c
		}
		return n
	}
	clock, faults := sum(want["cpu-clock"]), sum(want["page-faults"])
	if clock < 100 || faults == 0 {
		t.Fatalf("perf script: %d cpu-clock samples, %d page-faults", clock, faults)
	}
	for _, c := range []struct {
		args  []string
		event string
		note  string
	}{
		{nil, "cpu-clock", fmt.Sprintf("sframe report: folded: the %d samples of cpu-clock, the first event; left out %d of page-faults (--event NAME chooses)\n", clock, faults)},
		{[]string{"--event", "page-faults"}, "page-faults", ""},
		{[]string{"--event", "cpu"}, "cpu-clock", ""},
	} {
		out, errs, code := runCLI(t, append(append([]string{"report", "--format", "folded"}, c.args...), rec)...)
		if code != 0 {
			t.Fatalf("%q: exit %d: %s", c.args, code, errs)
		}
		if !strings.HasPrefix(errs, c.note) || c.note == "" && strings.Contains(errs, "left out") {
			t.Errorf("%q: stderr:\n%s\nwant first %q", c.args, errs, c.note)
		}
		ours, total := parseFolded(t, out)
		if w := sum(want[c.event]); total != w {
			t.Errorf("%q: %d samples folded, perf script has %d of %s", c.args, total, w, c.event)
		}
		differ := 0
		for k, n := range want[c.event] {
			differ += max(n-ours[k], 0)
		}
		if differ > total/100 {
			t.Errorf("%q: %d of %d samples fold differently from perf script's", c.args, differ, total)
		}
	}
	if _, errs, code := runCLI(t, "report", "-q", "--format", "folded", "--event", "cycles", rec); code != 2 || !strings.Contains(errs, `no event "cycles" in the recording (events: cpu-clock, page-faults)`) || strings.Count(errs, "\n") != 1 {
		t.Errorf("unknown event: exit %d, %q", code, errs)
	}
	if _, errs, code := runCLI(t, "report", "-q", "--format", "text", "--event", "cpu-clock", rec); code != 2 {
		t.Errorf("--event with text: exit %d, %q", code, errs)
	}
	if _, errs, _ := runCLI(t, "report", "-q", "--format", "folded", rec); errs != "" {
		t.Errorf("-q: stderr %q", errs)
	}
}

// TestReportFilters checks --pid, --tid and --comm against the samples of
// the unfiltered text.
func TestReportFilters(t *testing.T) {
	_, file, _ := reportRecording(t)
	all, _, _ := runCLI(t, "report", "-q", "--format", "text", file)
	samples := parseText(t, all)
	byTid := map[string]int{}
	for _, s := range samples {
		byTid[textHeader.FindStringSubmatch(s.header)[2]]++
	}
	if len(byTid) < 2 {
		t.Fatalf("samples of %d threads, want 2 or more", len(byTid))
	}
	var pid string
	for tid, n := range byTid {
		out, _, code := runCLI(t, "report", "-q", "--format", "text", "--tid", tid, file)
		if got := parseText(t, out); code != 0 || len(got) != n {
			t.Errorf("--tid %s: %d samples, want %d", tid, len(got), n)
		}
		if pid == "" || tid < pid {
			pid = tid // the main thread's id is the process's
		}
	}
	out, _, _ := runCLI(t, "report", "-q", "--format", "text", "--pid", pid+",1", file)
	if got := parseText(t, out); len(got) != len(samples) {
		t.Errorf("--pid %s: %d samples, want %d", pid, len(got), len(samples))
	}
	out, _, _ = runCLI(t, "report", "-q", "--format", "text", "--comm", "nosuch", file)
	if out != "" {
		t.Errorf("--comm nosuch: %q", out)
	}
	out, errs, _ := runCLI(t, "report", "--format", "text", "--comm", "prog", "--max-depth", "3", file)
	got := parseText(t, out)
	if len(got) != len(samples) || !strings.Contains(errs, "depth limit reached") {
		t.Errorf("--comm prog --max-depth 3: %d samples, want %d; summary:\n%s", len(got), len(samples), errs)
	}
	for _, s := range got {
		user := 0
		for _, f := range s.frames {
			if !strings.HasSuffix(f, "([kernel.kallsyms])") {
				user++
			}
		}
		if user > 3 {
			t.Fatalf("--max-depth 3: %d user frames in %q", user, s.header)
		}
	}
	if _, errs, code := runCLI(t, "report", "--pid", "x", file); code != 2 || !strings.Contains(errs, `bad --pid: "x" is not a number`) {
		t.Errorf("--pid x: exit %d, %q", code, errs)
	}
}

// TestReportPipe reads a pipe-mode recording from standard input and from
// the file: the same output.
func TestReportPipe(t *testing.T) {
	_, _, pipe := reportRecording(t)
	want, _, code := runCLI(t, "report", "-q", "--format", "text", pipe)
	if code != 0 || len(parseText(t, want)) < 50 {
		t.Fatalf("pipe-mode file: exit %d, %d samples", code, len(parseText(t, want)))
	}
	data, err := os.ReadFile(pipe)
	if err != nil {
		t.Fatal(err)
	}
	got, errs, code := withStdin(t, data, "report", "-q", "--format", "text", "-")
	if code != 0 || got != want {
		t.Errorf("-: exit %d, %q, same output as the file: %v", code, errs, got == want)
	}
}

// TestReportPerfFlags: -i FILE names the recording as in perf report
// (it turned on inline expansion and took FILE as the operand), and -s,
// perf report's --sort, is refused with a line that says so.
func TestReportPerfFlags(t *testing.T) {
	_, file, _ := reportRecording(t)
	want, _, code := runCLI(t, "report", "-q", "--format", "folded", file)
	if code != 0 || want == "" {
		t.Fatalf("report FILE: exit %d", code)
	}
	for _, args := range [][]string{{"-i", file}, {"--input", file}, {"--input=" + file}} {
		got, errs, code := runCLI(t, append([]string{"report", "-q", "--format", "folded"}, args...)...)
		if code != 0 || got != want {
			t.Errorf("%q: exit %d, %q, output equal to the operand's: %v", args, code, errs, got == want)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-i", file, file}, "sframe report: one recording at a time"},
		{[]string{"-s", "comm,dso", file}, "sframe report: --sort \"comm,dso\": not supported"},
	} {
		_, errs, code := runCLI(t, append([]string{"report", "-q", "--format", "folded"}, c.args...)...)
		if code != 2 || !strings.HasPrefix(errs, c.want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%q: exit %d, %q; want exit 2 and one line starting %q", c.args, code, errs, c.want)
		}
	}
}

// TestReportBadInput checks the errors of inputs that are not whole
// recordings: one line naming the file after the samples that could be
// read, exit status 1, never a panic.
func TestReportBadInput(t *testing.T) {
	_, file, _ := reportRecording(t)
	whole, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		name, data, want string
	}{
		{"empty", "", "truncated"},
		{"short", "hello, world\n", "truncated"},
		{"text", strings.Repeat("hello, world\n", 20), "bad magic"},
		{"cut", string(whole[:len(whole)/2]), "truncated"},
	} {
		path := write(c.name, []byte(c.data))
		out, errs, code := runCLI(t, "report", "--format", "text", path)
		lines := strings.Split(strings.TrimSuffix(errs, "\n"), "\n")
		last := lines[len(lines)-1]
		if code != 1 || !strings.HasPrefix(last, "sframe report: "+path+": ") || !strings.Contains(last, c.want) {
			t.Errorf("%s: exit %d, last line of stderr %q, want one naming the file and %q", c.name, code, last, c.want)
		}
		if c.name == "cut" && len(parseText(t, out)) == 0 {
			t.Errorf("cut: no samples before the error")
		}
	}
	// Corrupted bytes in the records: any outcome but a panic.
	hdrEnd := 0x100
	for seed := int64(1); seed <= 20; seed++ {
		data := bytes.Clone(whole)
		x := uint64(seed) * 0x9e3779b97f4a7c15
		for range 40 {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			data[hdrEnd+int(x%uint64(len(data)-hdrEnd))] = byte(x >> 32)
		}
		path := write("corrupt", data)
		runCLI(t, "report", "-q", "--format", "text", path)
		runCLI(t, "report", "-q", "-o", filepath.Join(dir, "p.pb.gz"), path)
	}
}

// TestReportOutput checks where output goes: standard output for text
// and folded, a file replaced atomically (following a symlink), and a
// FIFO written into rather than replaced.
func TestReportOutput(t *testing.T) {
	_, file, _ := reportRecording(t)
	want, _, _ := runCLI(t, "report", "-q", "--format", "folded", file)
	dir := t.TempDir()
	target := filepath.Join(dir, "target.txt")
	os.WriteFile(target, []byte("old"), 0o644)
	link := filepath.Join(dir, "link.txt")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if out, errs, code := runCLI(t, "report", "-q", "--format", "folded", "-o", link, file); code != 0 || out != "" {
		t.Fatalf("-o link: exit %d, %q %q", code, out, errs)
	}
	if got, _ := os.ReadFile(target); string(got) != want {
		t.Errorf("-o through a symlink: the target holds %d bytes, want %d", len(got), len(want))
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the symlink was replaced")
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	got := make(chan string)
	go func() {
		f, err := os.Open(fifo)
		if err != nil {
			got <- err.Error()
			return
		}
		var b strings.Builder
		bufio.NewReader(f).WriteTo(&b)
		f.Close()
		got <- b.String()
	}()
	if _, errs, code := runCLI(t, "report", "-q", "--format", "folded", "-o", fifo, file); code != 0 {
		t.Fatalf("-o fifo: exit %d %q", code, errs)
	}
	if g := <-got; g != want {
		t.Errorf("through the FIFO: %d bytes, want %d", len(g), len(want))
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the FIFO was replaced")
	}
	// A failed report leaves no file behind.
	bad := filepath.Join(dir, "bad.pb.gz")
	if _, _, code := runCLI(t, "report", "-q", "-o", bad, filepath.Join(dir, "missing.data")); code != 1 {
		t.Errorf("missing input: exit %d", code)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 3 {
		t.Errorf("files left: %v", ents)
	}
}

// TestReportSymfs records a program that is then moved away: without
// --symfs its frames are unknown (and the summary says the file is
// missing); with --symfs DIR holding it under its recorded path, they are
// named and unwound as before.
func TestReportSymfs(t *testing.T) {
	exe, _, _ := reportRecording(t)
	dir := t.TempDir()
	prog := filepath.Join(dir, "bin", "prog")
	os.MkdirAll(filepath.Dir(prog), 0o755)
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(prog, data, 0o755); err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(dir, "perf.data")
	if out, err := exec.Command("perf", "record", "-q", "-N", "-o", rec, "--call-graph", "dwarf", "-e", "cpu-clock", "-c", "1000000", "--", prog, "300").CombinedOutput(); err != nil {
		t.Fatalf("perf record: %v\n%s", err, out)
	}
	symfs := filepath.Join(dir, "symfs")
	moved := filepath.Join(symfs, prog)
	os.MkdirAll(filepath.Dir(moved), 0o755)
	if err := os.Rename(prog, moved); err != nil {
		t.Fatal(err)
	}
	without, errs, _ := runCLI(t, "report", "--format", "folded", rec)
	if strings.Contains(without, ";spin") || !strings.Contains(errs, prog+": ") {
		t.Errorf("without --symfs: spin named, or the missing file not in the summary:\n%s", errs)
	}
	with, errs, code := runCLI(t, "report", "-q", "--format", "folded", "--symfs", symfs, rec)
	if code != 0 || !strings.Contains(with, ";work;rec;") {
		t.Errorf("--symfs: exit %d %s, no work;rec; in\n%.500s", code, errs, with)
	}
	// Another build at that path is refused: its tables and symbols
	// would be another program's.
	other, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Skip(err)
	}
	os.WriteFile(moved, other, 0o755)
	out, errs, _ := runCLI(t, "report", "--format", "folded", "--symfs", symfs, rec)
	if strings.Contains(out, ";work;") || !regexp.MustCompile(`build ID [0-9a-f]+, recorded [0-9a-f]+`).MatchString(errs) {
		t.Errorf("another build: frames named, or no build-ID mismatch in the summary:\n%s", errs)
	}
	// The other build at the recorded path itself: the summary names the
	// path once ("  PATH: build ID ..."), not before and in the error.
	os.WriteFile(prog, other, 0o755)
	_, errs, _ = runCLI(t, "report", "--format", "folded", rec)
	line := ""
	for _, l := range strings.Split(errs, "\n") {
		if strings.Contains(l, prog) {
			line = l
		}
	}
	if !regexp.MustCompile(`^  \S+: build ID [0-9a-f]+, recorded [0-9a-f]+$`).MatchString(line) || strings.Count(line, prog) != 1 {
		t.Errorf("another build at the recorded path: summary line %q, want the path once and the build IDs", line)
	}
}

// TestReportSwapper reports a system-wide recording: the samples of the
// idle task (thread 0, which no record names) are "swapper"'s, as perf
// script names them; they were ":0"'s.
func TestReportSwapper(t *testing.T) {
	testprog.NeedTool(t, "perf")
	rec := recordAll(t, "-e", "cpu-clock", "-c", "1000000", "--", "sleep", "0.3")
	out, _, perf := textAndScript(t, rec)
	ours, theirs := parseText(t, out), parseText(t, string(perf))
	if len(ours) != len(theirs) {
		t.Fatalf("%d samples, perf script %d", len(ours), len(theirs))
	}
	idle := 0
	for i := range ours {
		if f := strings.Fields(theirs[i].header); len(f) > 1 && f[1] == "0" {
			idle++
			if ours[i].header != theirs[i].header {
				t.Fatalf("sample %d: %q, perf script %q", i, ours[i].header, theirs[i].header)
			}
		}
	}
	if idle == 0 {
		t.Skip("no sample of the idle task (a busy machine)")
	}
}

// TestReportEventNames: a recording of several events gives one sample
// type per event, each named so that pprof's -sample_index selects it:
// a tracepoint by its whole name (subsystem:event, where two of one
// subsystem were both "sched"), an event whose name another has by its
// modifiers too (page-faults:k), one recorded with terms by its name
// (minor-faults for minor-faults/call-graph=fp/); each type's total is the sum of its
// samples' periods as perf script gives them.
func TestReportEventNames(t *testing.T) {
	testprog.NeedTool(t, "perf")
	exe := testprog.Build(t, "../../perfunwind/testdata/prog.c", "-O2", "-g")
	rec := filepath.Join(t.TempDir(), "perf.data")
	if out, err := exec.Command("perf", "record", "-q", "-N", "-o", rec, "--call-graph", "dwarf,4096",
		"-e", "sched:sched_process_exec", "-e", "sched:sched_process_exit", "-e", "page-faults:u", "-e", "page-faults:k",
		"-e", "minor-faults/call-graph=fp/", "--", exe, "50").CombinedOutput(); err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("perf record: %v\n%s", err, out)
		}
		t.Fatalf("perf record: %v\n%s", err, out)
	}
	script, err := exec.Command("perf", "script", "-i", rec, "-F", "event,period").Output()
	if err != nil {
		t.Fatalf("perf script: %v", err)
	}
	want := map[string]int64{}
	for _, l := range strings.Split(string(script), "\n") {
		// "         1 sched:sched_process_exec: ", "  64  page-faults:u: "
		f := strings.Fields(l)
		if len(f) != 2 {
			continue
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			t.Fatalf("perf script line %q", l)
		}
		want[strings.TrimSuffix(f[1], ":")] += n
	}
	pb := filepath.Join(t.TempDir(), "p.pb.gz")
	if _, errs, code := runCLI(t, "report", "-q", "-o", pb, rec); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	p := readProfile(t, pb)
	var types []string
	for _, st := range p.SampleType {
		types = append(types, st.Type+"/"+st.Unit)
	}
	if got := strings.Join(types, " "); got != "samples/count sched:sched_process_exec/count sched:sched_process_exit/count page-faults/count page-faults:k/count minor-faults/count" {
		t.Fatalf("sample types %s", got)
	}
	for i, ev := range []string{"sched:sched_process_exec", "sched:sched_process_exit", "page-faults:u", "page-faults:k", "minor-faults/call-graph=fp/"} {
		var sum int64
		for _, s := range p.Sample {
			sum += s.Value[i+1]
		}
		if sum != want[ev] {
			t.Errorf("%s: %d, perf script %d", p.SampleType[i+1].Type, sum, want[ev])
		}
	}
	if want["sched:sched_process_exec"] == 0 {
		t.Errorf("perf script shows no exec: %q", script)
	}
}

// TestReportGroupRead: a recording whose samples read counters
// (PERF_SAMPLE_READ) gives, as perf script does, a sample for each
// counter that changed since its last sample, of that counter's event,
// whose period is the change: with perf record -e '{cpu-clock,page-faults}:S'
// the page faults are samples too (they were dropped, and the leader's
// periods were its attribute's). The changes are taken before --pid
// filters, as perf script takes them: a system-wide counter changes at
// every process's samples. With an inherited event (cpu-clock:S, on
// kernels that allow it), each thread's counter is its own: perf 6.1
// subtracts one thread's from another's (periods near 2^64), we must not.
func TestReportGroupRead(t *testing.T) {
	testprog.NeedTool(t, "perf")
	exe := testprog.Build(t, "../../perfunwind/testdata/prog.c", "-O2", "-g")
	dir := t.TempDir()
	rec := func(name string, args ...string) string {
		path := filepath.Join(dir, name)
		args = append([]string{"record", "-q", "-N", "-o", path, "--call-graph", "dwarf,2048", "-c", "1000000"}, args...)
		if out, err := exec.Command("perf", args...).CombinedOutput(); err != nil {
			if os.Getenv("CI") == "" {
				t.Skipf("perf record: %v\n%s", err, out)
			}
			t.Fatalf("perf record: %v\n%s", err, out)
		}
		return path
	}
	// check compares the periods of each event in our pprof profile of
	// the recording at path with perf script's, both given flags.
	check := func(path string, flags ...string) {
		t.Helper()
		script, err := exec.Command("perf", append([]string{"script", "-i", path, "-F", "event,period"}, flags...)...).Output()
		if err != nil {
			t.Fatalf("perf script: %v", err)
		}
		want := map[string]int64{}
		for _, l := range strings.Split(string(script), "\n") {
			if f := strings.Fields(l); len(f) == 2 {
				n, err := strconv.ParseInt(f[0], 10, 64)
				if err != nil {
					t.Fatalf("perf script line %q", l)
				}
				want[strings.TrimSuffix(f[1], ":")] += n
			}
		}
		pb := path + ".pb.gz"
		if _, errs, code := runCLI(t, append(append([]string{"report", "-q", "-o", pb}, flags...), path)...); code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		p := readProfile(t, pb)
		// No sample type for the dummy:HG event of perf record -a.
		if len(p.SampleType) != 3 || want["page-faults"] == 0 {
			var types []string
			for _, st := range p.SampleType {
				types = append(types, st.Type)
			}
			t.Fatalf("sample types %q; perf script %v", types, want)
		}
		for i, ev := range []string{"cpu-clock", "page-faults"} {
			var sum int64
			for _, s := range p.Sample {
				sum += s.Value[i+1]
			}
			if sum != want[ev] {
				t.Errorf("%s %q: %d, perf script %d", ev, flags, sum, want[ev])
			}
		}
	}

	group := rec("group.data", "-e", "{cpu-clock,page-faults}:S", "--", exe, "100")
	out, _, perf := textAndScript(t, group)
	ours, theirs := parseText(t, out), parseText(t, string(perf))
	if len(ours) != len(theirs) {
		t.Fatalf("%d samples, perf script %d", len(ours), len(theirs))
	}
	for i := range ours {
		if ours[i].header != theirs[i].header {
			t.Fatalf("sample %d: %q, perf script %q", i, ours[i].header, theirs[i].header)
		}
	}
	check(group)

	// System-wide, the program's samples among those of a process that
	// forks and executes (page faults) and of the machine's others.
	wide := rec("wide.data", "-a", "-e", "{cpu-clock,page-faults}:S", "--", "sh", "-c", `"$0" 100 & "$0" 50; wait`, exe)
	pids, err := exec.Command("perf", "script", "-i", wide, "-F", "comm,pid").Output()
	if err != nil {
		t.Fatalf("perf script: %v", err)
	}
	pid := ""
	for _, l := range strings.Split(string(pids), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == filepath.Base(exe) {
			pid = f[1]
			break
		}
	}
	if pid == "" {
		t.Fatalf("no sample of %s: %s", exe, pids)
	}
	check(wide, "--pid", pid)

	inherited := rec("inherited.data", "-e", "cpu-clock:S", "--", exe, "100")
	pb := inherited + ".pb.gz"
	if _, errs, code := runCLI(t, "report", "-q", "-o", pb, inherited); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var n, ns int64
	for _, s := range readProfile(t, pb).Sample {
		if s.Value[1] < 0 || s.Value[1] > s.Value[0]*1e8 {
			t.Errorf("%d samples of %d ns", s.Value[0], s.Value[1])
		}
		n, ns = n+s.Value[0], ns+s.Value[1]
	}
	if n == 0 || ns > n*2e6 {
		t.Errorf("%d samples of a 1 ms period: %d ns", n, ns)
	}
}

// TestReportNoTime reads recordings whose samples have no time (perf
// record --per-thread records no PERF_SAMPLE_TIME), with and without
// call graphs: the text has no time column, as perf script -F
// comm,tid,ip,sym,dso prints them (it printed "0.000000: "). Each
// sample's header line is perf script's byte for byte, and (as
// TestReportText allows for perf's choices among aliases) 99% of the
// samples whole.
func TestReportNoTime(t *testing.T) {
	exe, _, _ := reportRecording(t)
	dir := t.TempDir()
	for _, g := range [][]string{{"--call-graph", "dwarf"}, nil} {
		rec := filepath.Join(dir, fmt.Sprintf("notime%d.data", len(g)))
		args := append(append([]string{"record", "-q", "-N", "--per-thread", "-o", rec, "-e", "cpu-clock", "-c", "250000"}, g...), "--", exe, "300")
		if out, err := exec.Command("perf", args...).CombinedOutput(); err != nil {
			t.Fatalf("perf record: %v\n%s", err, out)
		}
		out, errs, code := runCLI(t, "report", "-q", "--format", "text", rec)
		if code != 0 {
			t.Fatalf("%q: exit %d: %s", g, code, errs)
		}
		perf, err := exec.Command("perf", "script", "-i", rec, "-F", "comm,tid,ip,sym,dso", "--no-inline").Output()
		if err != nil {
			t.Fatal(err)
		}
		if g == nil {
			// One line per sample: COMM in 16 columns, TID in 5, and
			// the address in 16 after a space make the first 40
			// bytes.
			ours, theirs := strings.Split(strings.TrimSuffix(out, "\n"), "\n"), strings.Split(strings.TrimSuffix(string(perf), "\n"), "\n")
			if len(ours) != len(theirs) || len(ours) < 10 {
				t.Fatalf("%d lines, perf script %d\n%s", len(ours), len(theirs), corpus.FirstDiff(out, string(perf)))
			}
			same := 0
			for i := range ours {
				if len(ours[i]) < 40 || len(theirs[i]) < 40 || ours[i][:40] != theirs[i][:40] {
					t.Fatalf("line %d: %q, perf script %q", i+1, ours[i], theirs[i])
				}
				if ours[i] == theirs[i] {
					same++
				}
			}
			if same < len(ours)*99/100 {
				t.Errorf("without -g: %d of %d lines as perf script prints them", same, len(ours))
			}
			continue
		}
		ours, theirs := parseText(t, out), parseText(t, string(perf))
		if len(ours) != len(theirs) || len(ours) < 100 {
			t.Fatalf("%d samples, perf script %d", len(ours), len(theirs))
		}
		same := 0
		for i := range ours {
			if ours[i].header != theirs[i].header {
				t.Fatalf("sample %d: %q, perf script %q", i, ours[i].header, theirs[i].header)
			}
			if strings.Join(ours[i].frames, "\n") == strings.Join(theirs[i].frames, "\n") {
				same++
			}
		}
		if same < len(ours)*99/100 {
			t.Errorf("%d of %d samples as perf script prints them", same, len(ours))
		}
	}
}

// TestReportAfterExit reports a system-wide recording of 300 short
// processes: the samples a thread gives after its EXIT record (the
// kernel's exit path) are its own, with its name, as perf script has
// them (perf keeps exited threads), where they were ":TID"'s; those of a
// task already gone from its pid namespace are ":-1 -1"'s, as perf
// prints them, where we printed 4294967295.
func TestReportAfterExit(t *testing.T) {
	testprog.NeedTool(t, "perf")
	rec := recordAll(t, "-e", "cpu-clock", "-c", "100000", "--call-graph", "dwarf,1024",
		"--", "sh", "-c", "for i in $(seq 300); do /bin/true; done")
	out, _, perf := textAndScript(t, rec)
	ours, theirs := parseText(t, out), parseText(t, string(perf))
	if len(ours) != len(theirs) {
		t.Fatalf("%d samples, perf script %d", len(ours), len(theirs))
	}
	named, bad := 0, 0
	for i := range ours {
		if strings.HasPrefix(strings.TrimSpace(theirs[i].header), "true ") {
			named++
		}
		if ours[i].header != theirs[i].header {
			if bad++; bad <= 3 {
				t.Errorf("sample %d: %q, perf script %q", i, ours[i].header, theirs[i].header)
			}
		}
	}
	if bad > 0 || named == 0 {
		t.Errorf("%d of %d samples' headers differ from perf script's; %d of true", bad, len(ours), named)
	}
}

// recordAll runs perf record -a (every CPU) with args and returns the
// recording's path; it skips the test where perf may not record every
// CPU here, but under CI, where that fails it.
func recordAll(t *testing.T, args ...string) string {
	t.Helper()
	rec := filepath.Join(t.TempDir(), "perf.data")
	if out, err := exec.Command("perf", append([]string{"record", "-q", "-N", "-a", "-o", rec}, args...)...).CombinedOutput(); err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("perf record -a: %v\n%s", err, out)
		}
		t.Fatalf("perf record -a: %v\n%s", err, out)
	}
	return rec
}
