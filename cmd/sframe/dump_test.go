package main

import (
	"bytes"
	"debug/elf"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/internal/corpus"
)

func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return out.String(), errb.String(), code
}

func TestDumpFlagsAnywhereAndErrors(t *testing.T) {
	dir := filepath.Join(corpus.Dir(t), "x86_64", "v3")
	want, err := os.ReadFile(filepath.Join(dir, "basic-O2.elf.sframe.txt"))
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	for _, args := range [][]string{
		{"dump", "basic-O2.elf"},
		{"dump", "basic-O2.elf", "--section", ".sframe"},
		{"dump", "--section=.sframe", "basic-O2.elf"},
	} {
		out, errs, code := runCLI(t, args...)
		if code != 0 || out != string(want) || errs != "" {
			t.Errorf("%q: exit %d, stderr %q, output equal to objdump: %v", args, code, errs, out == string(want))
		}
	}

	tmp := t.TempDir()
	notELF := filepath.Join(tmp, "notes.txt")
	os.WriteFile(notELF, []byte("not an ELF file\n"), 0o644)
	// A copy of the file whose .sframe magic is destroyed.
	corrupt := filepath.Join(tmp, "corrupt.elf")
	data, _ := os.ReadFile("basic-O2.elf")
	f, _ := elf.Open("basic-O2.elf")
	off := f.Section(".sframe").Offset
	f.Close()
	data[off] ^= 0xff
	os.WriteFile(corrupt, data, 0o644)
	noSFrame := "/bin/true" // built by the distribution, without .sframe

	out, errs, code := runCLI(t, "dump", notELF, corrupt, noSFrame, "basic-O2.elf", "missing.elf")
	if code != 1 {
		t.Errorf("exit status %d, want 1", code)
	}
	if !strings.HasSuffix(out, string(want)) {
		t.Errorf("the valid file after failing ones was not dumped in full")
	}
	lines := strings.Split(strings.TrimSuffix(errs, "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("want one error line per bad file, got:\n%s", errs)
	}
	for i, name := range []string{notELF, corrupt, noSFrame, "missing.elf"} {
		if !strings.Contains(lines[i], name) {
			t.Errorf("error line %q does not name %s", lines[i], name)
		}
	}
	if !strings.Contains(lines[1], "bad magic") || !strings.Contains(lines[2], "no .sframe section") {
		t.Errorf("errors do not say what is wrong:\n%s", errs)
	}
}

func TestDumpRaw(t *testing.T) {
	path := filepath.Join(corpus.Dir(t), "aarch64", "v3", "basic-pacb.elf")
	want, _ := os.ReadFile(path + ".sframe.txt")
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	sec := f.Section(".sframe")
	data, _ := sec.Data()
	f.Close()
	raw := filepath.Join(t.TempDir(), "sec.bin")
	os.WriteFile(raw, data, 0o644)
	out, errs, code := runCLI(t, "dump", raw, "--raw", "--base", "0x"+strconv.FormatUint(sec.Addr, 16))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	// Everything after the file-format line matches objdump's dump of the
	// ELF file the section came from.
	body := func(s string) string { return s[strings.Index(s, "Contents of"):] }
	if body(out) != body(string(want)) {
		t.Errorf("raw dump differs from the ELF dump")
	}
}

func TestDumpJSONAndHelp(t *testing.T) {
	path := filepath.Join(corpus.Dir(t), "x86_64", "v3", "edge-x86_64.o")
	out, errs, code := runCLI(t, "dump", "--json", path)
	if code != 0 || !strings.HasPrefix(out, `{"file":`) || strings.Count(out, "\n") != 1 {
		t.Errorf("json: exit %d, stderr %q, output %.80q", code, errs, out)
	}
	if !strings.Contains(out, `"fde_type":"flex"`) || !strings.Contains(out, `"ra_undefined":true`) || !strings.Contains(out, `"signal":true`) {
		t.Errorf("JSON lacks the flexible, outermost and signal functions of edge-x86_64.o")
	}
	for _, args := range [][]string{{"dump", "-h"}, {"-h"}} {
		o, e, code := runCLI(t, args...)
		if code != 0 || !strings.Contains(o+e, "usage: sframe") {
			t.Errorf("%q: exit %d, output %q", args, code, o+e)
		}
	}
	if _, _, code := runCLI(t, "dump"); code != 2 {
		t.Errorf("dump without files: exit %d, want 2", code)
	}
}

// TestDumpShippedSamples runs the README's first command on the samples in
// testdata, which need no corpus.
func TestDumpShippedSamples(t *testing.T) {
	t.Chdir("../../testdata")
	for _, name := range []string{"drap-O2.elf", "edge-x86_64.o"} {
		want, err := os.ReadFile(name + ".sframe.txt")
		if err != nil {
			t.Fatal(err)
		}
		out, errs, code := runCLI(t, "dump", name)
		if code != 0 || out != string(want) {
			t.Errorf("%s: exit %d, stderr %q, identical to objdump: %v", name, code, errs, out == string(want))
		}
	}
}
