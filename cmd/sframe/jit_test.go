//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/sframekit/sframekit/internal/testprog"
)

// fibJS is a node program whose time goes to one JIT-compiled function,
// for 700 ms of its CPU time (not wall time: a loaded machine gives the
// recordings, sampled on CPU time, as many samples as an idle one).
const fibJS = `function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
let s = 0;
const start = process.cpuUsage();
while (process.cpuUsage(start).user < 700000) s += fib(22);
console.log(s > 0);
`

// nodeScript writes fibJS into a new directory and returns its path.
func nodeScript(t *testing.T) string {
	testprog.NeedTool(t, "node")
	js := filepath.Join(t.TempDir(), "fib.js")
	if err := os.WriteFile(js, []byte(fibJS), 0o644); err != nil {
		t.Fatal(err)
	}
	return js
}

var perfMapRE = regexp.MustCompile(`/tmp/perf-(\d+)\.map`)

// removePerfMaps removes the perf maps named in text when the test ends:
// the node processes that wrote them are gone.
func removePerfMaps(t *testing.T, text string) {
	for _, m := range perfMapRE.FindAllString(text, -1) {
		t.Cleanup(func() { os.Remove(m) })
	}
}

// TestReportJITPerfMap reports a perf recording of node --perf-basic-prof:
// every frame that perf script names from the perf map, the text format
// prints as perf script does, byte for byte; folded stacks and the pprof
// profile name fib as a function of the perf map's mapping.
func TestReportJITPerfMap(t *testing.T) {
	js := nodeScript(t)
	testprog.NeedTool(t, "perf")
	data := filepath.Join(filepath.Dir(js), "node.data")
	c := exec.Command("perf", "record", "-q", "--call-graph", "dwarf", "-F", "499", "-o", data, "--", "node", "--perf-basic-prof", js)
	c.Dir = filepath.Dir(js) // where node writes its logs
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("perf record: %v\n%s", err, out)
	}
	out, errs, ours, theirs := reportWithScript(t, data)
	jit, fib := 0, 0
	for i := range theirs {
		for k, f := range theirs[i].frames {
			if !strings.Contains(f, "(/tmp/perf-") {
				continue
			}
			jit++
			if strings.Contains(f, " JS:") && strings.Contains(f, "fib "+js) {
				fib++
			}
			if k >= len(ours[i].frames) || ours[i].frames[k] != f {
				var got string
				if k < len(ours[i].frames) {
					got = ours[i].frames[k]
				}
				t.Errorf("sample %d frame %d: %q, perf script %q", i, k, got, f)
			}
		}
	}
	if fib < jit/2 || jit < 50 {
		t.Errorf("%d frames in the perf map, %d of them fib's", jit, fib)
	}
	if !strings.Contains(errs, "JIT code named from: 1\n  /tmp/perf-") {
		t.Errorf("summary without the perf map:\n%s", errs)
	}

	folded, _, _ := runCLI(t, "report", "-q", "--format", "folded", data)
	if !regexp.MustCompile(`(?m);JS:\*fib ` + regexp.QuoteMeta(js) + `:1:13 \d+$`).MatchString(folded) {
		t.Errorf("no folded stack ends in fib:\n%.2000s", folded)
	}
	if strings.Contains(folded, ";[anon]") || strings.Contains(folded, "[perf-") && !strings.Contains(folded, ";JS:") {
		t.Errorf("folded stacks with unnamed JIT frames:\n%.2000s", folded)
	}
	checkJITProfile(t, reportPprof(t, data), js)

	// With --symfs, the perf map is read under it (the recording's files
	// copied from another machine).
	m := perfMapRE.FindString(out)
	symfs := t.TempDir()
	if err := os.MkdirAll(filepath.Join(symfs, "tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(m, filepath.Join(symfs, m)); err != nil {
		// Another file system: copy.
		b, err := os.ReadFile(m)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(symfs, m), b, 0o644)
		os.Remove(m)
	}
	out, errs, _ = runCLI(t, "report", "--symfs", symfs, "--format", "text", data)
	if n := strings.Count(out, "fib "+js+":1:13 ("+m+")\n"); n < fib/2 {
		t.Errorf("--symfs: %d frames in fib, %d without it", n, fib)
	}
	if !strings.Contains(errs, "JIT code named from: 1\n  "+filepath.Join(symfs, m)) {
		t.Errorf("--symfs: summary without the perf map:\n%s", errs)
	}
}

// reportWithScript reports the recording data in the text format and
// returns our output, summary and samples, and perf script's samples
// (as many: the test fails otherwise).
func reportWithScript(t *testing.T, data string) (out, errs string, ours, theirs []textSample) {
	t.Helper()
	out, errs, code := runCLI(t, "report", "--format", "text", data)
	removePerfMaps(t, out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	perf, err := exec.Command("perf", "script", "-i", data, "-F", "comm,tid,time,ip,sym,dso", "--no-inline", "--max-stack", "1024").Output()
	if err != nil {
		t.Fatal(err)
	}
	ours, theirs = parseText(t, out), parseText(t, string(perf))
	if len(ours) != len(theirs) {
		t.Fatalf("%d samples, perf script %d", len(ours), len(theirs))
	}
	return out, errs, ours, theirs
}

// reportPprof runs report into a pprof file and parses it.
func reportPprof(t *testing.T, data string) *profile.Profile {
	t.Helper()
	pb := data + ".pb.gz"
	if _, errs, code := runCLI(t, "report", "-q", "-o", pb, data); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	return readProfile(t, pb)
}

// checkJITProfile checks that fib of js is a function of p, in a
// mapping named after a perf map, at the leaf of a tenth of the samples
// at least.
func checkJITProfile(t *testing.T, p *profile.Profile, js string) {
	t.Helper()
	var leaves, all int64
	for _, s := range p.Sample {
		all += s.Value[0]
		if len(s.Location) == 0 || len(s.Location[0].Line) == 0 {
			continue
		}
		l := s.Location[0]
		if fn := l.Line[0].Function; strings.HasPrefix(fn.Name, "JS:") && strings.Contains(fn.Name, "fib "+js) &&
			l.Mapping != nil && perfMapRE.MatchString(l.Mapping.File) {
			leaves += s.Value[0]
		}
	}
	if leaves*10 < all {
		t.Errorf("pprof: %d of %d samples in fib", leaves, all)
	}
}

// TestReportJITDump reports a perf recording of node --perf-prof, which
// writes a jitdump file and maps it: perf script (without perf inject)
// leaves the JIT frames unnamed; report names them from the jitdump
// file, at the addresses perf shows.
func TestReportJITDump(t *testing.T) {
	js := nodeScript(t)
	testprog.NeedTool(t, "perf")
	dir := filepath.Dir(js)
	data := filepath.Join(dir, "node.data")
	c := exec.Command("perf", "record", "-q", "--call-graph", "dwarf", "-F", "499", "-o", data, "--", "node", "--perf-prof", js)
	c.Dir = dir
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("perf record: %v\n%s", err, out)
	}
	if dumps, _ := filepath.Glob(filepath.Join(dir, "jit-*.dump")); len(dumps) != 1 {
		t.Fatalf("jitdump files: %v", dumps)
	}
	_, errs, ours, theirs := reportWithScript(t, data)
	jit, named, fib := 0, 0, 0
	for i := range theirs {
		for k, f := range theirs[i].frames {
			if !strings.Contains(f, "(/tmp/perf-") {
				continue
			}
			jit++
			addr, _, _ := strings.Cut(strings.TrimSpace(f), " ")
			if k >= len(ours[i].frames) {
				continue
			}
			o := strings.TrimSpace(ours[i].frames[k])
			if !strings.HasPrefix(o, addr+" ") || !strings.HasSuffix(o, ")") {
				t.Errorf("sample %d frame %d: %q, perf script %q", i, k, o, f)
				continue
			}
			if !strings.HasPrefix(o, addr+" [unknown] ") {
				named++
			}
			if strings.Contains(o, "fib "+js) {
				fib++
			}
		}
	}
	if jit < 50 || named < jit*9/10 || fib < jit/2 {
		t.Errorf("%d JIT frames, %d named, %d in fib", jit, named, fib)
	}
	if !regexp.MustCompile(`JIT code named from: 1\n  .*jit-\d+\.dump \(\d+ functions\)`).MatchString(errs) {
		t.Errorf("summary without the jitdump file:\n%s", errs)
	}
	if strings.Contains(errs, "jit-") && strings.Contains(errs, "files not used") && strings.Contains(errs, ".dump:") {
		t.Errorf("the jitdump file counted as an unusable object:\n%s", errs)
	}
}

// TestRecordJIT records node --perf-basic-prof: its JIT frames are named
// from the perf map, in pprof and folded output.
func TestRecordJIT(t *testing.T) {
	needPerf(t)
	js := nodeScript(t)
	dir := filepath.Dir(js)
	t.Chdir(dir) // where node writes its logs
	pb := filepath.Join(dir, "out.pb.gz")
	out, errs, code := runCLI(t, "record", "-F", "499", "-o", pb, "--", "node", "--perf-basic-prof", js)
	removePerfMaps(t, errs)
	if code != 0 || out != "true\n" {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s", code, out, errs)
	}
	if !strings.Contains(errs, "JIT code named from: 1\n  /tmp/perf-") {
		t.Errorf("summary without the perf map:\n%s", errs)
	}
	checkJITProfile(t, readProfile(t, pb), js)

	folded := filepath.Join(dir, "out.folded")
	_, errs, code = runCLI(t, "record", "-F", "499", "--format", "folded", "-o", folded, "--", "node", "--perf-basic-prof", js)
	removePerfMaps(t, errs)
	if code != 0 {
		t.Fatalf("folded: exit %d: %s", code, errs)
	}
	b, _ := os.ReadFile(folded)
	if !regexp.MustCompile(`(?m);JS:\*fib ` + regexp.QuoteMeta(js) + `:1:13 \d+$`).Match(b) {
		t.Errorf("no folded stack ends in fib:\n%.2000s", b)
	}
	if strings.Contains(string(b), ";[anon]") {
		t.Errorf("folded stacks with unnamed JIT frames")
	}
}

// TestRecordJITNamespace records a node process that runs in PID and
// mount namespaces of its own, with a /tmp of its own: its perf map is
// /tmp/perf-1.map there, which record reads through /proc/PID/root while
// the process runs, naming the mapping as perf does.
func TestRecordJITNamespace(t *testing.T) {
	needPerf(t)
	testprog.NeedTool(t, "node")
	testprog.NeedTool(t, "unshare")
	if os.Geteuid() != 0 {
		t.Skip("namespaces need root")
	}
	const script = `function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
let s = 0; console.log("ready");
const end = Date.now() + 20000;
while (Date.now() < end) s += fib(22);`
	// --kill-child: node (PID 1 of its namespace, which ends with it)
	// dies with unshare, which the test kills at its end.
	c := exec.Command("unshare", "--pid", "--mount", "--fork", "--kill-child", "--propagation", "private", "sh", "-c",
		`mount -t tmpfs tmpfs /tmp && cd /tmp && exec node --perf-basic-prof -e "$0"`, script)
	testprog.StartCmd(t, c)
	// unshare's child is node (sh executed it).
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", c.Process.Pid, c.Process.Pid))
	if err != nil || len(strings.Fields(string(b))) != 1 {
		t.Fatalf("children of unshare: %q %v", b, err)
	}
	pid := strings.Fields(string(b))[0]
	pb := filepath.Join(t.TempDir(), "ns.pb.gz")
	_, errs, code := runCLI(t, "record", "-p", pid, "--duration", "1", "-F", "499", "-o", pb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if want := "JIT code named from: 1\n  /proc/" + pid + "/root/tmp/perf-1.map ("; !strings.Contains(errs, want) {
		t.Errorf("summary without %q:\n%s", want, errs)
	}
	p := readProfile(t, pb)
	var fib, all int64
	for _, s := range p.Sample {
		all += s.Value[0]
		if len(s.Location) > 0 && len(s.Location[0].Line) > 0 && strings.HasPrefix(s.Location[0].Line[0].Function.Name, "JS:*fib ") &&
			s.Location[0].Mapping.File == "/tmp/perf-1.map" {
			fib += s.Value[0]
		}
	}
	if fib*2 < all {
		t.Errorf("%d of %d samples in fib, in /tmp/perf-1.map", fib, all)
	}
}

// TestJITUnwindingInfo profiles a JIT trampoline whose jitdump file
// gives its CFI (a JIT_CODE_UNWINDING_INFO record, as Python 3.13's
// -X perf_jit and V8's --perf-prof-unwinding-info write), with no frame
// pointer to follow: walks go through it to main and _start, as perf
// inject's ELF files for the JIT code let perf script's walks do. A C
// program writes the file (Debian has no Python 3.13), with Python's
// trampoline and unwinding bytes.
func TestJITUnwindingInfo(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("x86-64 trampoline")
	}
	exe := testprog.Build(t, "testdata/jitunwind.c", "-O2")
	profileBoth(t, 499, func(t *testing.T, folded []foldedStack, summary string) {
		through, burn := 0, 0
		for _, s := range folded {
			if !slices.Contains(s.frames, "burn") {
				continue
			}
			burn += s.n
			if i := slices.Index(s.frames, "jit_trampoline"); i > 1 && s.frames[i-1] == "main" && s.frames[1] == "_start" {
				through += s.n
			}
		}
		if burn < 100 || through < burn*95/100 {
			t.Errorf("%d samples in burn, %d through jit_trampoline to main and _start:\n%s", burn, through, summary)
		}
	}, exe, t.TempDir())
}

// TestPyTrampoline profiles CPython's perf trampolines (-X perf: named
// in the perf map, no CFI, no frame pointer; a C program makes them, as
// CI has no Python 3.12): walks go through both to main and _start, as
// perf's stop at the first. Live, the trampoline's code is read; in a
// recording, its name and size in the perf map identify it.
func TestPyTrampoline(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("x86-64 trampoline")
	}
	exe := testprog.Build(t, "testdata/pytramp.c", "-O2")
	want := []string{"_start", "__libc_start_call_main", "main", "py::outer:/tmp/pytramp.py", "middle", "py::inner:/tmp/pytramp.py", "burn"}
	profileBoth(t, 499, func(t *testing.T, folded []foldedStack, summary string) {
		removePerfMaps(t, summary)
		through, burn := 0, 0
		for _, s := range folded {
			if !slices.Contains(s.frames, "burn") {
				continue
			}
			burn += s.n
			var fs []string
			for _, f := range s.frames[1:] {
				if f != "__libc_start_main" { // glibc's, named or not as the symbols have it
					fs = append(fs, f)
				}
			}
			if i := slices.Index(fs, "burn"); i >= 0 && slices.Equal(fs[:i+1], want) {
				through += s.n
			}
		}
		if burn < 100 || through < burn*95/100 {
			t.Errorf("%d samples in burn, %d through both trampolines to main and _start:\n%s", burn, through, summary)
		}
	}, exe)
}
