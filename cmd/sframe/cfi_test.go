package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/dump"
	"github.com/sframekit/sframekit/internal/corpus"
	"github.com/sframekit/sframekit/internal/testprog"
)

func runCFICLI(args ...string) (string, string, int) {
	var out, errb bytes.Buffer
	code := run(append([]string{"cfi"}, args...), &out, &errb)
	return out.String(), errb.String(), code
}

// TestCFIMatchesReadelf checks the default output against the corpus
// readelf dumps for one file of each architecture and kind.
func TestCFIMatchesReadelf(t *testing.T) {
	dir := corpus.Dir(t)
	for _, name := range []string{"x86_64/v3/big-pic.so", "x86_64/v3/edge-x86_64.o", "aarch64/v3/basic-pacb.elf", "s390x/v3/edge-s390x.o"} {
		p := filepath.Join(dir, name)
		want, err := os.ReadFile(p + ".frames.txt")
		if err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{p}, {"--section", ".eh_frame", p}} {
			out, errs, code := runCFICLI(args...)
			if len(args) == 3 {
				// Only .eh_frame: readelf's output without the header section.
				if i := strings.Index(string(want), "Contents of the .eh_frame section"); i > 0 {
					want = want[i:]
				}
			}
			if code != 0 || errs != "" || out != string(want) {
				t.Errorf("%q: exit %d, stderr %q, equal to readelf: %v", args, code, errs, out == string(want))
			}
		}
	}
}

// TestCFIErrors checks -h, bad flags, and that a bad file gives a one-line
// error and status 1 while the other files are still printed.
func TestCFIErrors(t *testing.T) {
	dir := corpus.Dir(t)
	good := filepath.Join(dir, "x86_64", "v3", "basic-O2.o")
	out, errs, code := runCFICLI("-h")
	if code != 0 || !strings.Contains(errs+out, "usage: sframe cfi") || !strings.Contains(errs+out, "-json") {
		t.Errorf("-h: exit %d, output %q", code, errs+out)
	}
	if _, _, code := runCFICLI("--section", ".text", good); code != 2 {
		t.Errorf("bad --section: exit %d, want 2", code)
	}
	if _, _, code := runCFICLI(); code != 2 {
		t.Errorf("no files: exit %d, want 2", code)
	}
	missing := filepath.Join(t.TempDir(), "missing.elf")
	notELF := filepath.Join(t.TempDir(), "text.txt")
	os.WriteFile(notELF, []byte("hello"), 0o644)
	_, errs, code = runCFICLI(missing, good, notELF, "--section", ".debug_frame")
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	lines := strings.Split(strings.TrimSpace(errs), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], missing) || !strings.Contains(lines[1], good) || !strings.Contains(lines[1], "no .debug_frame") || !strings.Contains(lines[2], notELF) {
		t.Errorf("stderr:\n%s", errs)
	}
	out, errs, code = runCFICLI(missing, good)
	want, _ := os.ReadFile(good + ".frames.txt")
	if code != 1 || !strings.Contains(out, "\nFile: "+good+"\n"+string(want)) {
		t.Errorf("good file not printed after a bad one (exit %d, stderr %q)", code, errs)
	}
}

// TestCFIJSON checks that --json output parses and describes the rows.
func TestCFIJSON(t *testing.T) {
	p := filepath.Join(corpus.Dir(t), "x86_64", "v3", "edge-x86_64.o")
	out, errs, code := runCFICLI("--json", p)
	if code != 0 || errs != "" {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var doc struct {
		Arch     string `json:"arch"`
		Sections []struct {
			Name    string `json:"name"`
			Entries []struct {
				Kind    string `json:"kind"`
				Offset  uint64 `json:"offset"`
				PCBegin string `json:"pc_begin"`
				Rows    []struct {
					Start string `json:"start"`
					CFA   struct {
						Rule   string `json:"rule"`
						Reg    *struct{ Name string }
						Offset int64 `json:"offset"`
						Expr   string
					} `json:"cfa"`
					Regs []struct {
						Reg    struct{ Num int }
						Rule   string
						Offset int64
						Source *struct{ Name string }
					} `json:"regs"`
				} `json:"rows"`
			} `json:"entries"`
		} `json:"sections"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Arch != "x86-64" || len(doc.Sections) != 1 || doc.Sections[0].Name != ".eh_frame" {
		t.Fatalf("unexpected document header: %+v", doc.Arch)
	}
	// FDE at 0x104 (see edge-x86_64.o.frames.txt): rsp+8, then ra in r11.
	for _, e := range doc.Sections[0].Entries {
		if e.Offset != 0x104 {
			continue
		}
		if e.Kind != "FDE" || e.PCBegin != "0x80" || len(e.Rows) != 3 {
			t.Fatalf("entry 0x104: %+v", e)
		}
		r := e.Rows[1]
		if r.Start != "0x82" || r.CFA.Rule != "reg_offset" || r.CFA.Reg.Name != "rsp" || r.CFA.Offset != 0 ||
			len(r.Regs) != 1 || r.Regs[0].Reg.Num != 16 || r.Regs[0].Rule != "register" || r.Regs[0].Source.Name != "r11" {
			t.Errorf("row: %+v", r)
		}
		return
	}
	t.Error("entry 0x104 not found")
}

// localReadelf returns the version of this machine's readelf ("2.40"),
// skipping the test without one (failing under CI).
func localReadelf(t *testing.T) string {
	t.Helper()
	testprog.NeedTool(t, "readelf")
	out, err := exec.Command("readelf", "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(out), "\n")
	return first[strings.LastIndexByte(first, ' ')+1:]
}

// TestCFIReadelfVersion compares `cfi --readelf-version V`, V this
// machine's readelf, with that readelf's -wF byte for byte on every
// corpus file with CFI and on programs built here (C with .eh_frame, C++
// with exceptions, C with .debug_frame only, an object), and checks the
// flag's errors and that -h names the dialect.
func TestCFIReadelfVersion(t *testing.T) {
	v := localReadelf(t)
	if !slices.Contains(dump.ReadelfVersions, dump.ReadelfVersion(v)) {
		t.Skipf("readelf %s is not a dialect the printer knows (%v)", v, dump.ReadelfVersions)
	}
	files := corpus.Frames(t)
	dir := t.TempDir()
	obj := filepath.Join(dir, "die.o")
	if out, err := exec.Command("gcc", "-O2", "-g", "-c", "-o", obj, "testdata/die.c").CombinedOutput(); err != nil {
		t.Fatalf("gcc -c: %v\n%s", err, out)
	}
	files = append(files, obj,
		testprog.Build(t, "testdata/die.c", "-O2"),
		testprog.Build(t, "testdata/cxxthrow.cc", "-O2", "-g"),
		testprog.Build(t, "testdata/die.c", "-O2", "-g", "-fno-asynchronous-unwind-tables"))
	for _, f := range files {
		cmd := exec.Command("readelf", "-wF", filepath.Base(f))
		cmd.Dir = filepath.Dir(f)
		want, err := cmd.Output()
		if err != nil {
			t.Fatalf("readelf -wF %s: %v", f, err)
		}
		out, errs, code := runCFICLI("--readelf-version", v, f)
		if code != 0 || out != string(want) {
			t.Errorf("%s: exit %d %s, equal to readelf %s -wF: %v\n%s", f, code, errs, v, out == string(want), corpus.FirstDiff(out, string(want)))
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--readelf-version", "2.44", sample}, "sframe cfi: --readelf-version 2.44: the text of readelf 2.40 or 2.47 only (see 'sframe cfi -h')\n"},
		{[]string{"--readelf-version", "2.40", "--section", ".eh_frame_hdr", sample}, "sframe cfi: --section .eh_frame_hdr: readelf 2.40 does not print it (see 'sframe cfi -h')\n"},
		{[]string{"--readelf-version", "2.40", "--json", sample}, "sframe cfi: --readelf-version is for the text, not --json (see 'sframe cfi -h')\n"},
	} {
		if _, errs, code := runCFICLI(c.args...); code != 2 || errs != c.want {
			t.Errorf("%q: exit %d, %q; want 2, %q", c.args, code, errs, c.want)
		}
	}
	if out, _, _ := runCFICLI("-h"); !strings.Contains(out, "GNU readelf 2.47") || !strings.Contains(out, "--readelf-version") {
		t.Errorf("-h does not name the readelf dialect:\n%s", out)
	}
}
