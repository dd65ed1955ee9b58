package main

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/elffile"
	"github.com/sframekit/sframekit/internal/corpus"
	"github.com/sframekit/sframekit/sframe"
)

// TestVerifyCommand runs sframe verify on a corpus executable (exit 0)
// and on a copy whose .sframe has one CFA offset changed in main (exit 1,
// naming main and the PC), in text and JSON.
func TestVerifyCommand(t *testing.T) {
	p := filepath.Join(corpus.Dir(t), "x86_64/v3/fp-O2.elf")
	var out, errb bytes.Buffer
	if rc := run([]string{"verify", p}, &out, &errb); rc != 0 || !strings.Contains(out.String(), ": OK: ") {
		t.Fatalf("verify %s: exit %d\n%s%s", p, rc, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "known: ") || !strings.Contains(out.String(), " 0 disagreements, 1 known deviations, ") {
		t.Errorf("ld's .plt.got deviation not reported as known:\n%s", out.String())
	}
	// --strict fails on the known deviation.
	out.Reset()
	if rc := run([]string{"verify", "--strict", p}, &out, &errb); rc != 1 {
		t.Errorf("verify --strict: exit %d", rc)
	}

	src, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.NewFile(bytes.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	var mainAddr uint64
	syms, _ := f.Symbols()
	for _, s := range syms {
		if s.Name == "main" {
			mainAddr = s.Value
		}
	}
	sec := elffile.FindSFrame(f, "")
	idx := -1
	for i, s := range f.Sections {
		if s == sec {
			idx = i
		}
	}
	data, _ := sec.Data()
	s, err := sframe.Parse(data, sec.Addr)
	if err != nil {
		t.Fatal(err)
	}
	opts, funcs, err := sframe.Extract(s)
	if err != nil {
		t.Fatal(err)
	}
	var pc uint64
	for i := range funcs {
		if funcs[i].Start == mainAddr && len(funcs[i].Rows) > 1 {
			funcs[i].Rows[1].Row.CFA.Offset += 16
			pc = mainAddr + uint64(funcs[i].Rows[1].StartOff)
		}
	}
	if pc == 0 {
		t.Fatal("main has no second row")
	}
	enc, err := sframe.Encode(opts, funcs)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := elffile.RewriteSections(src, []elffile.SectionUpdate{{Index: idx, Data: enc}})
	if err != nil {
		t.Fatal(err)
	}
	badPath := filepath.Join(t.TempDir(), "bad.elf")
	if err := os.WriteFile(badPath, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	rc := run([]string{"verify", badPath}, &out, &errb)
	want := fmt.Sprintf("function main [%#x,", mainAddr)
	at := fmt.Sprintf(") at %#x: CFA: ", pc)
	if rc != 1 || !strings.Contains(out.String(), want) || !strings.Contains(out.String(), at) || !strings.Contains(out.String(), "FAILED") {
		t.Errorf("verify of corrupted copy: exit %d, want %q and %q in:\n%s", rc, want, at, out.String())
	}
	out.Reset()
	rc = run([]string{"verify", "--json", badPath}, &out, &errb)
	var rep struct {
		OK            bool `json:"ok"`
		Disagreements []struct {
			Func string `json:"func"`
			PC   string `json:"pc"`
			What string `json:"what"`
		} `json:"disagreements"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("JSON: %v\n%s", err, out.String())
	}
	found := false
	for _, d := range rep.Disagreements {
		found = found || (d.Func == "main" && d.PC == fmt.Sprintf("%#x", pc) && d.What == "CFA")
	}
	if rc != 1 || rep.OK || !found {
		t.Errorf("verify --json: exit %d, ok %v, %+v", rc, rep.OK, rep.Disagreements)
	}
}

// withSFrame writes a copy of the corpus file rel whose .sframe has the
// contents edit makes of it, and returns its path.
func withSFrame(t *testing.T, rel string, edit func(f *elf.File, data []byte) []byte) string {
	t.Helper()
	p := filepath.Join(corpus.Dir(t), rel)
	src, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.NewFile(bytes.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	sec := elffile.FindSFrame(f, "")
	idx := -1
	for i, s := range f.Sections {
		if s == sec {
			idx = i
		}
	}
	data, err := sec.Data()
	if err != nil {
		t.Fatal(err)
	}
	out, err := elffile.RewriteSections(src, []elffile.SectionUpdate{{Index: idx, Data: edit(f, data)}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), filepath.Base(rel))
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestVerifyCorruptSection flips one byte of function 0's FRE offset
// (sframe dump then fails with "function 0 ... out of bounds"): verify
// must fail, exit 1, naming the file and the problem, with and without
// --strict (it printed OK and exited 0).
func TestVerifyCorruptSection(t *testing.T) {
	p := withSFrame(t, "x86_64/v3/basic-O2.elf", func(f *elf.File, data []byte) []byte {
		s, err := sframe.Parse(data, 0)
		if err != nil {
			t.Fatal(err)
		}
		// v3 function entries: 8-byte start, 4-byte size, 4-byte FRE offset.
		f0, err := s.Func(0)
		if err != nil {
			t.Fatal(err)
		}
		data[f0.StartFieldOff+13] ^= 0xff
		return data
	})
	if _, errs, rc := runCLI(t, "dump", p); rc != 1 || !strings.Contains(errs, "function 0: ") {
		t.Fatalf("the corruption does not break sframe dump: exit %d, %s", rc, errs)
	}
	for _, args := range [][]string{{"verify", p}, {"verify", "--strict", p}, {"verify", "--json", p}} {
		out, errs, rc := runCLI(t, args...)
		want := "sframe verify: " + p + ": section .sframe: function 0: offset 0x28: out of bounds: "
		if rc != 1 || !strings.HasPrefix(errs, want) || strings.Contains(out, "OK") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 1 and %q", args, rc, out, errs, want)
		}
	}
}

// TestVerifyNothingCompared replaces a file's .sframe by a valid section
// describing no function: all 13 functions are left out, none compared,
// and verify fails (it printed "OK: 0 functions").
func TestVerifyNothingCompared(t *testing.T) {
	p := withSFrame(t, "x86_64/v3/basic-O2.elf", func(f *elf.File, data []byte) []byte {
		empty, err := sframe.Encode(sframe.EncodeOptions{Version: sframe.Version3, ABI: sframe.ABIAMD64LE}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return empty
	})
	for _, args := range [][]string{{"verify", p}, {"verify", "--strict", p}} {
		out, _, rc := runCLI(t, args...)
		if rc != 1 || !strings.Contains(out, ": FAILED: 0 functions, 0 PCs checked, 0 disagreements, 0 known deviations, 13 functions left out\n") ||
			!strings.Contains(out, "nothing was compared") {
			t.Errorf("%v: exit %d:\n%s", args, rc, out)
		}
	}
	out, _, rc := runCLI(t, "verify", "--json", p)
	var rep struct {
		OK    bool `json:"ok"`
		Funcs int  `json:"funcs"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rc != 1 || rep.OK || rep.Funcs != 0 {
		t.Errorf("--json: exit %d, %+v, %v:\n%s", rc, rep, err, out)
	}
}

// TestVerifyExitStatus checks the exit statuses -h and README.md state:
// 0 when every file passes, 1 when one fails or cannot be checked (an
// unreadable file and a file without SFrame exited 2), 2 on usage errors;
// every error names its file.
func TestVerifyExitStatus(t *testing.T) {
	dir := t.TempDir()
	notELF := filepath.Join(dir, "notelf")
	if err := os.WriteFile(notELF, []byte("not an ELF file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(corpus.Dir(t), "x86_64/v3/basic-O2.o")
	self, err := os.Executable() // a Go program: ELF, no SFrame
	if err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	cases := []struct {
		args   []string
		rc     int
		stderr string
	}{
		{[]string{"verify", good}, 0, ""},
		{[]string{"verify", missing, good}, 1, "sframe verify: " + missing + ": "},
		{[]string{"verify", good, notELF}, 1, "sframe verify: " + notELF + ": "},
		{[]string{"verify", self}, 1, "sframe verify: " + self + ": no SFrame section"},
		{[]string{"verify"}, 2, "sframe verify: no input file given"},
		{[]string{"verify", "--no-such-flag", good}, 2, "sframe verify: unknown flag --no-such-flag"},
	}
	for _, c := range cases {
		out, errs, rc := runCLI(t, c.args...)
		if rc != c.rc || !strings.Contains(errs, c.stderr) || (c.stderr == "" && errs != "") {
			t.Errorf("%v: exit %d, stderr %q; want exit %d, stderr with %q", c.args, rc, errs, c.rc, c.stderr)
		}
		if c.rc != 2 && !strings.Contains(out, good+": OK: ") && len(c.args) > 2 {
			t.Errorf("%v: the readable file was not checked:\n%s", c.args, out)
		}
	}
	out, errs, rc := runCLI(t, "verify", "-h")
	if rc != 0 || !strings.Contains(out+errs, "Exit status: 0 when every file passes; 1 when a file fails") {
		t.Errorf("verify -h: exit %d, no exit status in:\n%s%s", rc, out, errs)
	}
}

// TestVerifyRelocatableNames checks that verify names the functions of a
// relocatable object (it printed "?"), here those that gas 2.41-2.44
// described wrongly or not at all.
func TestVerifyRelocatableNames(t *testing.T) {
	p := filepath.Join(corpus.Dir(t), "x86_64/v2/edge-x86_64.o")
	out, _, rc := runCLI(t, "verify", p)
	for _, want := range []string{
		p + ": function _start_like [0x0,0xf) at 0x0: RA: sframe (cfa-8), cfi undefined (known: ",
		p + ": function ra_in_reg [0x80,0x85) at 0x82: RA: sframe (cfa-8), cfi r11+0 (known: ",
		p + ": function drap_func [0x52,0x80) not described by SFrame\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	if rc != 0 {
		t.Errorf("exit %d", rc)
	}
}

// TestVerifyJSONEmptyLists checks that --json prints empty lists, not
// null, for a file without disagreements or functions left out.
func TestVerifyJSONEmptyLists(t *testing.T) {
	out, _, rc := runCLI(t, "verify", "--json", filepath.Join(corpus.Dir(t), "x86_64/v3/basic-O2.o"))
	if rc != 0 || !strings.Contains(out, `"ok":true`) || !strings.Contains(out, `"disagreements":[]`) || !strings.Contains(out, `"left_out":[]`) {
		t.Errorf("exit %d:\n%s", rc, out)
	}
}
