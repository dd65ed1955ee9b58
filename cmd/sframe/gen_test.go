package main

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/elffile"
	"github.com/sframekit/sframekit/internal/corpus"
	"github.com/sframekit/sframekit/internal/testprog"
	"github.com/sframekit/sframekit/sframe"
)

const genProg = `#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
extern int lib_work(int);
static jmp_buf jb;
__attribute__((noinline)) int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
__attribute__((noinline)) void deep(int n) { if (n == 0) longjmp(jb, 7); deep(n - 1); }
int main(int argc, char **argv) {
	int n = argc > 1 ? atoi(argv[1]) : 20;
	char *p = malloc(64);
	strcpy(p, "heap");
	printf("fib(%d)=%d %s\n", n, fib(n), p);
	if (setjmp(jb) == 0) deep(5); else printf("longjmp back\n");
#ifdef WITH_LIB
	printf("lib=%d\n", lib_work(n));
#endif
	free(p);
	return n % 7;
}
`

const genLib = `#include <stdio.h>
int lib_work(int n) { int s = 0; for (int i = 0; i < n; i++) s += i * i; fprintf(stderr, "lib called\n"); return s; }
`

// runCmd runs a command and returns its output and exit status.
func runCmd(t *testing.T, env []string, name string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return out.String(), errb.String(), code
}

func gen(t *testing.T, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	if rc := run(append([]string{"gen"}, args...), &out, &errb); rc != 0 {
		t.Fatalf("sframe gen %v: exit %d: %s", args, rc, errb.String())
	}
	return out.String()
}

// readelfClean fails when readelf -lS prints anything on stderr.
func readelfClean(t *testing.T, path string) {
	t.Helper()
	if _, err := exec.LookPath("readelf"); err != nil {
		return
	}
	_, stderr, rc := runCmd(t, nil, "readelf", "-lSW", path)
	if rc != 0 || stderr != "" {
		t.Errorf("readelf -lSW %s: exit %d, stderr:\n%s", path, rc, stderr)
	}
}

// checkLoadable checks the structure of a generated copy: the .sframe
// section is SHT_GNU_SFRAME, covered by PT_GNU_SFRAME and by a read-only
// PT_LOAD, parses and validates, and verify agrees with the CFI.
func checkLoadable(t *testing.T, path string, v sframe.Version) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sec := elffile.FindSFrame(f, "")
	if sec == nil || sec.Type != elffile.SHT_GNU_SFRAME || sec.Flags&elf.SHF_ALLOC == 0 {
		t.Fatalf("%s: no loadable SHT_GNU_SFRAME .sframe: %+v", path, sec)
	}
	var sf, load bool
	for _, p := range f.Progs {
		if p.Type == elffile.PT_GNU_SFRAME && p.Vaddr == sec.Addr && p.Filesz == sec.Size {
			sf = true
		}
		if p.Type == elf.PT_LOAD && p.Flags == elf.PF_R && p.Vaddr <= sec.Addr && sec.Addr+sec.Size <= p.Vaddr+p.Filesz && p.Off+(sec.Addr-p.Vaddr) == sec.Offset {
			load = true
		}
	}
	if !sf || !load {
		t.Errorf("%s: PT_GNU_SFRAME %v, read-only PT_LOAD %v", path, sf, load)
	}
	data, err := sec.Data()
	if err != nil {
		t.Fatal(err)
	}
	s, err := sframe.Parse(data, sec.Addr)
	if err != nil {
		t.Fatal(err)
	}
	if s.Version != v {
		t.Errorf("%s: version %v, want %v", path, s.Version, v)
	}
	if err := s.Validate(); err != nil {
		t.Errorf("%s: %v", path, err)
	}
	var out, errb bytes.Buffer
	if rc := run([]string{"verify", path}, &out, &errb); rc != 0 {
		t.Errorf("sframe verify %s: exit %d:\n%s%s", path, rc, out.String(), errb.String())
	}
	readelfClean(t, path)
}

// TestGenRuns builds programs with gcc (PIE, non-PIE, a program using a
// shared library, and one whose objects already carry a gas-made
// .sframe), generates a copy of each with a loadable .sframe, and checks
// that the copy behaves exactly as the original.
func TestGenRuns(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no gcc")
	}
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	prog, lib := write("prog.c", genProg), write("lib.c", genLib)
	build := func(out string, args ...string) string {
		p := filepath.Join(dir, out)
		if o, e, rc := runCmd(t, nil, "gcc", append(args, "-o", p)...); rc != 0 {
			t.Fatalf("gcc %v: %s%s", args, o, e)
		}
		return p
	}
	libso := build("libwork.so", "-O2", "-shared", "-fPIC", lib)
	cases := []struct {
		name string
		exe  string
		v    sframe.Version
		lib  bool
	}{
		{"pie", build("pie", "-O2", "-fpie", "-pie", prog), 3, false},
		{"nopie", build("nopie", "-O2", "-fno-pie", "-no-pie", prog), 3, false},
		{"pie-v2", build("pie2", "-O0", "-fpie", "-pie", prog), 2, false},
		{"gas-sframe", build("gassf", "-O2", "-Wa,--gsframe", prog), 3, false},
		{"with-lib", build("withlib", "-O2", "-DWITH_LIB", prog, "-L"+dir, "-lwork"), 3, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			genExe := c.exe + ".gen"
			gen(t, "--to-version", string('0'+byte(c.v)), "-o", genExe, c.exe)
			checkLoadable(t, genExe, c.v)
			var env, origEnv []string
			if c.name == "gas-sframe" {
				if f, err := elf.Open(c.exe); err != nil || elffile.FindSFrame(f, "") == nil {
					t.Fatalf("gcc -Wa,--gsframe made no .sframe (%v)", err)
				}
			}
			if c.lib {
				// The library is found only through LD_LIBRARY_PATH: the
				// original runs with the original library, the copy
				// with a generated copy of the library.
				origEnv = []string{"LD_LIBRARY_PATH=" + dir}
				// Run against a generated copy of the library too.
				libdir := filepath.Join(dir, "genlib")
				os.MkdirAll(libdir, 0o755)
				gen(t, "-o", filepath.Join(libdir, "libwork.so"), libso)
				checkLoadable(t, filepath.Join(libdir, "libwork.so"), 3)
				env = []string{"LD_LIBRARY_PATH=" + libdir}
			}
			for _, arg := range []string{"10", "23"} {
				o1, e1, rc1 := runCmd(t, origEnv, c.exe, arg)
				o2, e2, rc2 := runCmd(t, env, genExe, arg)
				if o1 != o2 || e1 != e2 || rc1 != rc2 {
					t.Errorf("%s %s: original (%d) %q %q, copy (%d) %q %q", c.name, arg, rc1, o1, e1, rc2, o2, e2)
				}
				if rc1 == 0 || !strings.Contains(o1, "longjmp back") || (c.lib && !strings.Contains(e1, "lib called")) {
					t.Errorf("unexpected original behaviour: %d %q", rc1, o1)
				}
			}
		})
	}
}

// TestGenRaw checks --raw: the bare section, laid out at --base or at
// the address the loadable copy uses.
func TestGenRaw(t *testing.T) {
	src := "/usr/lib/x86_64-linux-gnu/libc.so.6"
	if _, err := os.Stat(src); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "raw")
	msg := gen(t, "--raw", "--base", "0x7000000", "-o", out, src)
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sframe.Parse(data, 0x7000000)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(msg, "at 0x7000000") {
		t.Errorf("message %q", msg)
	}
	// Default base: the loadable copy's address; the bytes must be those
	// of the copy's .sframe.
	msg = gen(t, "--raw", "-o", out, src)
	gen(t, "-o", out+".so", src)
	f, err := elf.Open(out + ".so")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sec := elffile.FindSFrame(f, "")
	want, _ := sec.Data()
	got, _ := os.ReadFile(out)
	if !bytes.Equal(got, want) || !strings.Contains(msg, fmt.Sprintf("at %#x", sec.Addr)) {
		t.Errorf("raw section (%d bytes, %q) differs from the loadable copy's .sframe at %#x (%d bytes)", len(got), msg, sec.Addr, len(want))
	}
	readelfClean(t, out+".so")
}

// TestGenNoCFI runs gen and verify on a copy of a corpus executable
// without .eh_frame, .eh_frame_hdr and .debug_frame (removed by objcopy):
// both say the file has no CFI, naming it (gen said "no .debug_frame
// section"), and exit 1.
func TestGenNoCFI(t *testing.T) {
	testprog.NeedTool(t, "objcopy")
	p := filepath.Join(t.TempDir(), "nocfi.elf")
	if _, errs, rc := runCmd(t, nil, "objcopy", "-R", ".eh_frame", "-R", ".eh_frame_hdr", "-R", ".debug_frame",
		filepath.Join(corpus.Dir(t), "x86_64/v3/basic-O2.elf"), p); rc != 0 {
		t.Fatalf("objcopy: exit %d: %s", rc, errs)
	}
	_, errs, rc := runCLI(t, "gen", "-o", p+".out", p)
	if want := "sframe gen: " + p + ": convert: no CFI (neither .eh_frame nor .debug_frame); nothing written\n"; rc != 1 || errs != want {
		t.Errorf("gen: exit %d, %q; want exit 1, %q", rc, errs, want)
	}
	_, errs, rc = runCLI(t, "verify", p)
	if want := "sframe verify: " + p + ": convert: no CFI (neither .eh_frame nor .debug_frame)\n"; rc != 1 || errs != want {
		t.Errorf("verify: exit %d, %q; want exit 1, %q", rc, errs, want)
	}
}
