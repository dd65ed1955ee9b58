package main

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
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
	if s.Header().Version != v {
		t.Errorf("%s: version %v, want %v", path, s.Header().Version, v)
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
				checkLoadedPhdrs(t, filepath.Join(libdir, "libwork.so"))
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
	lib := filepath.Join(dir, "libc.so.6")
	gen(t, "-o", lib, src)
	checkLoadedPhdrs(t, lib, "LD_LIBRARY_PATH="+dir)
	f, err := elf.Open(lib)
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
	readelfClean(t, lib)
}

// systemLib returns the file the compiler cc links as name (libc.so.6,
// libstdc++.so.6), with symbolic links resolved.
func systemLib(t *testing.T, cc, name string) string {
	t.Helper()
	testprog.NeedTool(t, cc)
	out, err := exec.Command(cc, "-print-file-name="+name).Output()
	p := strings.TrimSpace(string(out))
	if err == nil && filepath.IsAbs(p) {
		if p, err = filepath.EvalSymlinks(p); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s does not find %s (%q, %v)", cc, name, p, err)
	}
	t.Skipf("%s does not find %s (%q, %v)", cc, name, p, err)
	return ""
}

// progHeaders formats the program headers of the ELF file path as the
// test program testdata/phdrs.c prints them.
func progHeaders(t *testing.T, path string) string {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b strings.Builder
	for _, p := range f.Progs {
		fmt.Fprintf(&b, "%x %x %x %x %x %x %x\n", uint32(p.Type), p.Off, p.Vaddr, p.Filesz, p.Memsz, uint32(p.Flags), p.Align)
	}
	return b.String()
}

// checkLoadedPhdrs loads the shared library lib in a process (with env
// added to its environment) and checks that dl_iterate_phdr reports
// exactly the program headers of lib's file: what libgcc's unwinder and
// every other reader of a loaded module's headers see.
func checkLoadedPhdrs(t *testing.T, lib string, env ...string) {
	t.Helper()
	helper := testprog.Build(t, "testdata/phdrs.c", "-O2")
	out, errs, rc := runCmd(t, env, helper, lib)
	if rc != 0 {
		t.Errorf("%s: loading failed (%d): %s", lib, rc, errs)
		return
	}
	if want := progHeaders(t, lib); out != want {
		t.Errorf("%s: dl_iterate_phdr reports\n%s\nthe file holds\n%s", lib, out, want)
	}
}

// TestGenLibrariesLoad generates copies of libstdc++, libgcc_s and libc,
// checks that a process loading each sees its program headers as the
// file has them (the new ones included), and that a C++ exception thrown
// and caught in a program running on the copies unwinds as it should.
func TestGenLibrariesLoad(t *testing.T) {
	dir := t.TempDir()
	libs := []struct{ cc, name string }{{"g++", "libstdc++.so.6"}, {"gcc", "libgcc_s.so.1"}, {"gcc", "libc.so.6"}}
	for _, l := range libs {
		gen(t, "-o", filepath.Join(dir, l.name), systemLib(t, l.cc, l.name))
		readelfClean(t, filepath.Join(dir, l.name))
	}
	env := "LD_LIBRARY_PATH=" + dir
	for _, l := range libs {
		// libc is loaded once per process: the helper runs on the copy.
		checkLoadedPhdrs(t, filepath.Join(dir, l.name), env)
	}
	exe := testprog.Build(t, "testdata/cxxthrow.cc", "-O2")
	out, errs, rc := runCmd(t, []string{env, "LD_TRACE_LOADED_OBJECTS=1"}, exe)
	for _, l := range libs {
		if rc != 0 || !strings.Contains(out, filepath.Join(dir, l.name)) {
			t.Fatalf("the test program does not load %s from %s (%d): %s%s", l.name, dir, rc, out, errs)
		}
	}
	out, errs, rc = runCmd(t, []string{env}, exe)
	if rc != 0 || out != "caught boom\n" {
		t.Errorf("C++ throw and catch through the generated libraries: exit %d, %q %q", rc, out, errs)
	}
}

// toolWarnings runs name with args and returns what it prints on stdout
// and stderr, one line each, without the file names it starts with
// (strip names its temporary files).
func toolWarnings(t *testing.T, name string, args ...string) []string {
	t.Helper()
	out, errs, _ := runCmd(t, nil, name, args...)
	var lines []string
	for _, line := range strings.Split(out+errs, "\n") {
		for _, a := range args {
			line = strings.ReplaceAll(line, a, "FILE")
		}
		if i := strings.Index(line, ": st"); i >= 0 && strings.HasPrefix(line, name+": ") {
			if j := strings.Index(line[i+2:], ": "); j >= 0 {
				line = name + ": FILE" + line[i+2+j:]
			}
		}
		if line != "" && line != "No errors" {
			lines = append(lines, line)
		}
	}
	return lines
}

// elflintSFrame matches what eu-elflint says of any SFrame segment and
// section: elfutils before 0.193 knows neither type.
var elflintSFrame = regexp.MustCompile(`unknown program header entry type 0x6474e554|'\.sframe' has unsupported type 1879048180`)

// newWarnings returns the lines of got not in was.
func newWarnings(got, was []string) []string {
	var out []string
	for _, g := range got {
		if !slices.Contains(was, g) && !elflintSFrame.MatchString(g) {
			out = append(out, g)
		}
	}
	return out
}

// TestGenStripClean checks that packagers' tools take gen's output as
// they take its input: strip, eu-strip, objcopy --only-keep-debug and
// eu-elflint --gnu-ld say nothing of the output (and elflint nothing of
// the stripped copies) they do not say of the input (but that elflint
// does not know the SFrame types). The stripped copies run as the
// originals do, load with the headers their files hold, and keep an
// .sframe that verify accepts. Inputs: a PIE, a non-PIE executable, a
// small shared library, libc, a PIE linked by lld and node; in the last
// four, the program header table cannot grow into the space of .interp
// and notes alone. objcopy --only-keep-debug said of the last two
// "section `.note.ABI-tag' can't be allocated in segment 0" before their
// .interp and notes moved with the table; eu-strip wrote program headers
// of zeros over those four (libelf fills the gaps between sections,
// where the table, moved to a segment of its own, was) before the
// dynamic symbols moved out of the table's way, which now grows in
// place.
func TestGenStripClean(t *testing.T) {
	for _, tool := range []string{"strip", "eu-strip", "objcopy", "eu-elflint", "gcc"} {
		testprog.NeedTool(t, tool)
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
	build := func(t *testing.T, out string, args ...string) string {
		p := filepath.Join(dir, out)
		if o, e, rc := runCmd(t, nil, "gcc", append(args, "-o", p)...); rc != 0 {
			t.Fatalf("gcc %v: %s%s", args, o, e)
		}
		return p
	}
	// Each input, made in its subtest (one skips when its tool is
	// missing), and the arguments its stripped copy runs with.
	inputs := []struct {
		name string
		make func(t *testing.T) string
		args []string
	}{
		{"pie", func(t *testing.T) string { return build(t, "pie", "-O2", "-fpie", "-pie", prog) }, []string{"12"}},
		{"nopie", func(t *testing.T) string { return build(t, "nopie", "-O2", "-fno-pie", "-no-pie", prog) }, []string{"12"}},
		{"libwork.so", func(t *testing.T) string { return build(t, "libwork.so", "-O2", "-shared", "-fPIC", lib) }, nil},
		{"libc.so.6", func(t *testing.T) string { return systemLib(t, "gcc", "libc.so.6") }, nil},
		{"lld-pie", func(t *testing.T) string {
			testprog.NeedTool(t, "ld.lld")
			return build(t, "lld-pie", "-O2", "-fpie", "-pie", "-fuse-ld=lld", prog)
		}, []string{"12"}},
		{"node", func(t *testing.T) string {
			testprog.NeedTool(t, "node")
			p, err := exec.LookPath("node")
			if err == nil {
				p, err = filepath.EvalSymlinks(p)
			}
			if err != nil {
				t.Fatal(err)
			}
			return p
		}, []string{"-e", "console.log(6 * 7)"}},
	}
	for _, input := range inputs {
		name := input.name
		t.Run(name, func(t *testing.T) {
			in := input.make(t)
			sub := filepath.Join(dir, name+".d")
			os.Mkdir(sub, 0o755)
			out := filepath.Join(sub, name)
			gen(t, "-o", out, in)
			checkSegmentSections(t, in, out)
			for _, c := range []struct {
				tool string
				args func(in, out string) []string
			}{
				{"strip", func(in, out string) []string { return []string{"-o", out, in} }},
				{"eu-strip", func(in, out string) []string { return []string{"-o", out, in} }},
				{"objcopy", func(in, out string) []string { return []string{"--only-keep-debug", in, out} }},
			} {
				was := toolWarnings(t, c.tool, c.args(in, filepath.Join(sub, "in."+c.tool))...)
				got := toolWarnings(t, c.tool, c.args(out, filepath.Join(sub, "out."+c.tool))...)
				if nw := newWarnings(got, was); len(nw) > 0 {
					t.Errorf("%s on the output of gen: %q (on the input: %q)", c.tool, nw, was)
				}
			}
			stripped := []string{filepath.Join(sub, "out.strip"), filepath.Join(sub, "out.eu-strip")}
			for _, f := range append([]string{out}, stripped...) {
				was := toolWarnings(t, "eu-elflint", "--gnu-ld", in)
				got := toolWarnings(t, "eu-elflint", "--gnu-ld", f)
				if nw := newWarnings(got, was); len(nw) > 0 {
					t.Errorf("eu-elflint --gnu-ld %s: %q (on the input: %q)", f, nw, was)
				}
			}
			for _, s := range stripped {
				checkLoadable(t, s, 3)
				switch {
				case name == "libc.so.6":
					os.Rename(s, out)
					checkLoadedPhdrs(t, out, "LD_LIBRARY_PATH="+sub)
				case strings.HasSuffix(name, ".so"):
					checkLoadedPhdrs(t, s)
				default:
					os.Chmod(s, 0o755)
					o1, e1, rc1 := runCmd(t, nil, in, input.args...)
					o2, e2, rc2 := runCmd(t, nil, s, input.args...)
					if o1 != o2 || e1 != e2 || rc1 != rc2 {
						t.Errorf("%s: (%d) %q %q, original (%d) %q %q", filepath.Base(s), rc2, o2, e2, rc1, o1, e1)
					}
				}
			}
		})
	}
}

// TestGenTableMovedNote: a static program has no room after its program
// header table (its .rela.plt, which its code finds by symbols, follows
// the notes), so gen moves the table to a segment of its own, where
// eu-strip's copy loses it: gen says so on one line, and binutils'
// strip's copy runs. A dynamic program's table grows in place, without
// the note.
func TestGenTableMovedNote(t *testing.T) {
	for _, tool := range []string{"gcc", "strip"} {
		testprog.NeedTool(t, tool)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "prog.c")
	if err := os.WriteFile(src, []byte(genProg), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		flags []string
		note  bool
	}{{"static", []string{"-static"}, true}, {"pie", []string{"-fpie", "-pie"}, false}} {
		in, out := filepath.Join(dir, c.name), filepath.Join(dir, c.name+".gen")
		if o, e, rc := runCmd(t, nil, "gcc", append(append([]string{"-O2"}, c.flags...), src, "-o", in)...); rc != 0 {
			t.Fatalf("gcc: %s%s", o, e)
		}
		var stdout, stderr bytes.Buffer
		if rc := run([]string{"gen", "-o", out, in}, &stdout, &stderr); rc != 0 {
			t.Fatalf("gen: exit %d: %s", rc, stderr.String())
		}
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		noted := strings.Contains(stderr.String(), "eu-strip does not")
		if noted != c.note || (noted && len(lines) != 1) {
			t.Errorf("%s: gen said %q, want the note about eu-strip: %v", c.name, stderr.String(), c.note)
		}
		stripped := out + ".strip"
		if o, e, rc := runCmd(t, nil, "strip", "-o", stripped, out); rc != 0 {
			t.Fatalf("strip: %s%s", o, e)
		}
		o1, e1, rc1 := runCmd(t, nil, in, "12")
		o2, e2, rc2 := runCmd(t, nil, stripped, "12")
		if o1 != o2 || e1 != e2 || rc1 != rc2 {
			t.Errorf("%s: strip's copy of gen's output: (%d) %q %q, original (%d) %q %q", c.name, rc2, o2, e2, rc1, o1, e1)
		}
	}
}

// segmentSections returns, for each program header of the ELF file at
// path (PT_LOADs as one entry, PT_PHDR and PT_GNU_SFRAME left out), its
// type and the names of the allocated sections whose addresses it
// covers.
func segmentSections(t *testing.T, path string) []string {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	var loaded []string
	for _, p := range f.Progs {
		if p.Type == elf.PT_PHDR || p.Type == elffile.PT_GNU_SFRAME {
			continue
		}
		var names []string
		for _, s := range f.Sections {
			if s.Flags&elf.SHF_ALLOC != 0 && s.Size != 0 && s.Name != ".sframe" && p.Vaddr <= s.Addr && s.Addr+s.Size <= p.Vaddr+p.Memsz {
				names = append(names, s.Name)
			}
		}
		if p.Type == elf.PT_LOAD {
			loaded = append(loaded, names...)
			continue
		}
		out = append(out, fmt.Sprint(p.Type, names))
	}
	slices.Sort(loaded)
	return append(out, fmt.Sprint(elf.PT_LOAD, loaded))
}

// checkSegmentSections checks that every section of in lies in the
// segments of gen's output out that it lay in: the same non-loadable
// ones (PT_INTERP, PT_NOTE, PT_TLS, ...), and a PT_LOAD.
func checkSegmentSections(t *testing.T, in, out string) {
	t.Helper()
	if was, got := segmentSections(t, in), segmentSections(t, out); !slices.Equal(was, got) {
		t.Errorf("%s: sections in segments\n%q\nwere\n%q", out, got, was)
	}
}

// genGoProg is a Go program whose data segment the Go linker pads in
// the file up to the address of .bss (p_filesz past the end of .data).
const genGoProg = `package main

import (
	"fmt"
	"sort"
)

func main() {
	v := make([]int, 1000)
	for i := range v {
		v[i] = (i * 7919) % 1000
	}
	sort.Ints(v)
	fmt.Println(v[0], v[999])
}
`

// TestGenStripGo strips gen's output of a Go program (internal linker,
// static): strip drops the padding of the data segment and packs the
// program header table's segment right after .data, so the table's
// address must be congruent to the end of .data, not of p_filesz. The
// stripped copy crashed (SIGSEGV at exec: its table's segment was not
// congruent to its address) before the planner took strip's end.
func TestGenStripGo(t *testing.T) {
	for _, tool := range []string{"go", "strip"} {
		testprog.NeedTool(t, tool)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(genGoProg), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module gostrip\n\ngo 1.21\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(dir, "prog")
	build := exec.Command("go", "build", "-o", in, ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if !dataPadded(t, in) {
		t.Fatalf("%s: the Go linker no longer pads the data segment; this test needs an input that has such padding", in)
	}
	out := filepath.Join(dir, "prog.gen")
	gen(t, "-o", out, in)
	stripped := filepath.Join(dir, "prog.strip")
	if o, e, rc := runCmd(t, nil, "strip", "-o", stripped, out); rc != 0 {
		t.Fatalf("strip: exit %d: %s%s", rc, o, e)
	}
	o1, e1, rc1 := runCmd(t, nil, in)
	for _, p := range []string{out, stripped} {
		if o2, e2, rc2 := runCmd(t, nil, p); o1 != o2 || e1 != e2 || rc1 != rc2 {
			t.Errorf("%s: (%d) %q %q, original (%d) %q %q", filepath.Base(p), rc2, o2, e2, rc1, o1, e1)
		}
	}
}

// dataPadded reports whether a PT_LOAD of the file at path holds more
// file bytes than its last section.
func dataPadded(t *testing.T, path string) bool {
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type != elf.PT_LOAD || p.Filesz == 0 {
			continue
		}
		var end uint64
		for _, s := range f.Sections {
			if s.Type != elf.SHT_NOBITS && s.Flags&elf.SHF_ALLOC != 0 && s.Offset >= p.Off && s.Offset < p.Off+p.Filesz {
				end = max(end, s.Offset+s.Size)
			}
		}
		if end != 0 && end < p.Off+p.Filesz {
			return true
		}
	}
	return false
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
	if want := "sframe gen: " + p + ": no CFI (neither .eh_frame nor .debug_frame); nothing written\n"; rc != 1 || errs != want {
		t.Errorf("gen: exit %d, %q; want exit 1, %q", rc, errs, want)
	}
	_, errs, rc = runCLI(t, "verify", p)
	if want := "sframe verify: " + p + ": no CFI (neither .eh_frame nor .debug_frame)\n"; rc != 1 || errs != want {
		t.Errorf("verify: exit %d, %q; want exit 1, %q", rc, errs, want)
	}
}
