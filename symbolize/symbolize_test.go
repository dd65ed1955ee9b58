package symbolize

import (
	"bufio"
	"bytes"
	"cmp"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/elffile"
	"github.com/sframekit/sframekit/internal/testprog"
)

const progSource = `
#include <stdio.h>
#include <stdlib.h>

static int counter;

__attribute__((noinline)) static int leaf(int x) {
	counter += x;
	return counter * 3;
}

__attribute__((noinline)) int middle(int x) {
	int s = 0;
	for (int i = 0; i < x; i++)
		s += leaf(i);
	return s;
}

__attribute__((noinline)) int top(int x) {
	if (x > 100)
		return middle(x / 2) + 1;
	return middle(x) - 1;
}

int main(int argc, char **argv) {
	printf("%d\n", top(argc + (argv[0] != NULL)));
	return 0;
}
`

const libSource = `
int exported_function(int x) { return x * 7 + 1; }
int another_export(int x) { return exported_function(x) + 2; }
`

func run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

// build compiles src into dir/name with extra gcc flags.
func build(t testing.TB, dir, name, src string, flags ...string) string {
	t.Helper()
	testprog.NeedTool(t, "gcc")
	c := filepath.Join(dir, name+".c")
	if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, name)
	run(t, "gcc", append(append([]string{}, flags...), "-o", out, c)...)
	return out
}

// nmFuncs returns the text symbols nm lists: name -> address.
func nmFuncs(t testing.TB, exe string) map[string]uint64 {
	t.Helper()
	testprog.NeedTool(t, "nm")
	out := run(t, "nm", exe)
	m := map[string]uint64{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 3 && (f[1] == "T" || f[1] == "t") {
			a, err := strconv.ParseUint(f[0], 16, 64)
			if err == nil {
				m[f[2]] = a
			}
		}
	}
	return m
}

// addr2line returns file:line per address as addr2line prints them
// ("" for unknown).
func addr2line(t testing.TB, exe string, addrs []uint64) []string {
	t.Helper()
	testprog.NeedTool(t, "addr2line")
	args := []string{"-e", exe}
	for _, a := range addrs {
		args = append(args, fmt.Sprintf("%#x", a))
	}
	lines := strings.Split(strings.TrimSpace(run(t, "addr2line", args...)), "\n")
	if len(lines) != len(addrs) {
		t.Fatalf("addr2line printed %d lines for %d addresses", len(lines), len(addrs))
	}
	for i, l := range lines {
		if j := strings.Index(l, " (discriminator"); j >= 0 {
			l = l[:j]
		}
		if strings.HasPrefix(l, "??") || strings.HasSuffix(l, ":?") || strings.HasSuffix(l, ":0") {
			l = ""
		}
		lines[i] = l
	}
	return lines
}

// checkAgainstTools compares every byte address of the named functions
// with nm (name, offset) and addr2line (file:line).
func checkAgainstTools(t *testing.T, s *Symbolizer, path, symSource string, funcs []string) {
	t.Helper()
	syms := nmFuncs(t, symSource)
	f, err := elf.Open(symSource)
	if err != nil {
		t.Fatal(err)
	}
	all, _ := f.Symbols()
	f.Close()
	size := map[string]uint64{}
	for _, s := range all {
		size[s.Name] = s.Size
	}
	var addrs []uint64
	var want []string
	for _, name := range funcs {
		a, ok := syms[name]
		if !ok {
			t.Fatalf("nm lists no %s", name)
		}
		if size[name] == 0 {
			t.Fatalf("%s has no size", name)
		}
		for off := uint64(0); off < size[name]; off++ {
			sym, ok := s.Lookup(path, a+off)
			if !ok || sym.Name != name || sym.Offset != off || sym.Start != a {
				t.Errorf("Lookup(%#x) = %+v, %v; want %s+%#x", a+off, sym, ok, name, off)
			}
			addrs = append(addrs, a+off)
			want = append(want, name)
		}
	}
	lines := addr2line(t, symSource, addrs)
	mismatch := 0
	for i, a := range addrs {
		sym, _ := s.Lookup(path, a)
		got := ""
		if sym.Line > 0 {
			got = fmt.Sprintf("%s:%d", sym.File, sym.Line)
		}
		if got != lines[i] {
			mismatch++
			if mismatch <= 10 {
				t.Errorf("line of %#x (%s): got %q, addr2line %q", a, want[i], got, lines[i])
			}
		}
	}
	if mismatch > 0 {
		t.Errorf("%d of %d addresses differ from addr2line", mismatch, len(addrs))
	}
	t.Logf("%s: %d addresses agree with nm and addr2line", filepath.Base(path), len(addrs))
}

func TestLookupAgainstNMAndAddr2line(t *testing.T) {
	dir := t.TempDir()
	for _, opt := range []string{"-O0", "-O2"} {
		t.Run(opt, func(t *testing.T) {
			exe := build(t, dir, "prog"+opt, progSource, "-g", opt)
			s := New()
			defer s.Close()
			checkAgainstTools(t, s, exe, exe, []string{"leaf", "middle", "top", "main"})
			if err := s.Err(exe); err != nil {
				t.Error(err)
			}
			// Before the first function: nothing (or a non-covering
			// symbol).
			if sym, ok := s.LookupFunc(exe, 1); ok {
				t.Errorf("address 1 resolved to %+v", sym)
			}
		})
	}
}

// TestLookupNoAllocs checks that lookups allocate nothing once the module
// and its line index are loaded.
func TestLookupNoAllocs(t *testing.T) {
	dir := t.TempDir()
	exe := build(t, dir, "prog", progSource, "-g", "-O1")
	a := nmFuncs(t, exe)["middle"] + 2
	s := New()
	if _, ok := s.Lookup(exe, a); !ok {
		t.Fatal("lookup failed")
	}
	n := testing.AllocsPerRun(1000, func() {
		s.Lookup(exe, a)
		s.LookupFunc(exe, a+1)
	})
	if n != 0 {
		t.Errorf("%v allocations per lookup", n)
	}
}

func TestSeparateDebugFile(t *testing.T) {
	testprog.NeedTool(t, "objcopy")
	testprog.NeedTool(t, "strip")
	dir := t.TempDir()
	exe := build(t, dir, "prog", progSource, "-g", "-O1", "-Wl,--build-id")
	funcs := []string{"leaf", "middle", "top"}

	t.Run("debuglink", func(t *testing.T) {
		d := t.TempDir()
		dbg := filepath.Join(d, "prog.debug")
		stripped := filepath.Join(d, "prog")
		run(t, "objcopy", "--only-keep-debug", exe, dbg)
		run(t, "strip", "--strip-all", "-o", stripped, exe)
		run(t, "objcopy", "--remove-section=.note.gnu.build-id", "--add-gnu-debuglink="+dbg, stripped)
		if f := nmFuncs(t, stripped); len(f) != 0 {
			t.Fatalf("stripped binary still has symbols: %v", f)
		}
		s := New()
		s.DebugDirs = nil
		checkAgainstTools(t, s, stripped, exe, funcs)
		if s.DebugFile(stripped) != dbg {
			t.Errorf("debug file %q, want %q", s.DebugFile(stripped), dbg)
		}
		// Opened through its descriptor (as sframe record reads the
		// file a process mapped): the link is searched beside the path
		// the descriptor was opened from, not in /proc/self/fd.
		fd, err := os.Open(stripped)
		if err != nil {
			t.Fatal(err)
		}
		defer fd.Close()
		byFD := fmt.Sprintf("/proc/self/fd/%d", fd.Fd())
		s3 := New()
		s3.DebugDirs = nil
		checkAgainstTools(t, s3, byFD, exe, funcs)
		if s3.DebugFile(byFD) != dbg {
			t.Errorf("through %s: debug file %q, want %q", byFD, s3.DebugFile(byFD), dbg)
		}
		// A debug file whose CRC does not match is not used.
		os.WriteFile(dbg, []byte("not it"), 0o644)
		s2 := New()
		s2.DebugDirs = nil
		if sym, ok := s2.Lookup(stripped, nmFuncs(t, exe)["leaf"]); ok && sym.Name == "leaf" {
			t.Errorf("used a debug file with a bad CRC: %+v", sym)
		}
	})

	t.Run("build-id", func(t *testing.T) {
		root := t.TempDir()
		f, err := elf.Open(exe)
		if err != nil {
			t.Fatal(err)
		}
		id := elffile.BuildID(f)
		f.Close()
		if len(id) < 2 {
			t.Fatal("no build id")
		}
		h := fmt.Sprintf("%x", id)
		dbg := filepath.Join(root, ".build-id", h[:2], h[2:]+".debug")
		os.MkdirAll(filepath.Dir(dbg), 0o755)
		run(t, "objcopy", "--only-keep-debug", exe, dbg)
		stripped := filepath.Join(t.TempDir(), "prog")
		run(t, "strip", "--strip-all", "-o", stripped, exe)
		s := New()
		s.DebugDirs = []string{root}
		checkAgainstTools(t, s, stripped, exe, funcs)
		if s.DebugFile(stripped) != dbg {
			t.Errorf("debug file %q, want %q", s.DebugFile(stripped), dbg)
		}
	})
}

// TestDynsymFallback looks up exported functions of a stripped shared
// library, which only has .dynsym.
func TestDynsymFallback(t *testing.T) {
	testprog.NeedTool(t, "strip")
	dir := t.TempDir()
	lib := build(t, dir, "libx.so", libSource, "-shared", "-fPIC", "-O1")
	want := nmFuncs(t, lib)
	run(t, "strip", "--strip-all", lib)
	f, _ := elf.Open(lib)
	if s, err := f.Symbols(); err == nil && len(s) > 0 {
		t.Fatal("library still has .symtab")
	}
	f.Close()
	s := New()
	for _, name := range []string{"exported_function", "another_export"} {
		sym, ok := s.Lookup(lib, want[name]+1)
		if !ok || sym.Name != name || sym.Offset != 1 || sym.File != "" {
			t.Errorf("%s: %+v %v", name, sym, ok)
		}
	}
}

// TestRegisterVDSO symbolizes this process's vDSO from its memory image.
func TestRegisterVDSO(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("linux only")
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	var start, end uint64
	for _, l := range strings.Split(string(maps), "\n") {
		if strings.HasSuffix(l, "[vdso]") {
			fmt.Sscanf(l, "%x-%x", &start, &end)
		}
	}
	if start == 0 {
		t.Skip("no vdso")
	}
	mem, err := os.Open("/proc/self/mem")
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	img := make([]byte, end-start)
	if _, err := mem.ReadAt(img, int64(start)); err != nil {
		t.Fatal(err)
	}
	f, err := elf.NewFile(bytes.NewReader(img))
	if err != nil {
		t.Fatal(err)
	}
	dyn, _ := f.DynamicSymbols()
	var target elf.Symbol
	for _, d := range dyn {
		if d.Name == "__vdso_clock_gettime" {
			target = d
		}
	}
	if target.Value == 0 {
		t.Skip("vdso without __vdso_clock_gettime")
	}
	s := New()
	if err := s.Register("[vdso]", bytes.NewReader(img)); err != nil {
		t.Fatal(err)
	}
	sym, ok := s.Lookup("[vdso]", target.Value+4)
	// clock_gettime and __vdso_clock_gettime are aliases; the
	// tie-break prefers the name with fewer underscores.
	if !ok || !strings.HasSuffix(sym.Name, "clock_gettime") || sym.Offset != 4 {
		t.Errorf("vdso lookup: %+v %v", sym, ok)
	}
}

func TestMissingFile(t *testing.T) {
	s := New()
	if _, ok := s.Lookup("/nonexistent/file", 0x1000); ok {
		t.Error("lookup in a missing file succeeded")
	}
	if s.Err("/nonexistent/file") == nil {
		t.Error("no error recorded")
	}
}

// TestPerfNames checks perfBetter against the names perf 6.1 script
// gives for glibc's aliases (Debian libc6-dbg 2.36): the longer name among
// equals, the first in the table on a tie, a local name over a weak one;
// and for libclang-cpp.so.14's: the longer demangled name, and an alias
// without size sized as perf's symbols__fixup_end sizes it (to the next
// start when it is the last at its start in the table, else none).
func TestPerfNames(t *testing.T) {
	mk := func(name string, v, size uint64, bind elf.SymBind) cand {
		return cand{sym: sym{v, size, name}, bind: bind}
	}
	const (
		subst = "_ZN5clang4Sema9SubstDeclEPNS_4DeclEPNS_11DeclContextERKNS_30MultiLevelTemplateArgumentListE"
		visit = "_ZN5clang24TemplateDeclInstantiator9VisitDeclEPNS_4DeclE"
		next  = "_ZN5clang4Sema26SubstSpaceshipAsEqualEqualEPNS_13CXXRecordDeclEPNS_12FunctionDeclE"
	)
	for _, c := range []struct {
		cands     []cand
		gdb, perf string
	}{
		{[]cand{mk("__open_nocancel", 0x10, 8, elf.STB_LOCAL), mk("__GI___open64_nocancel", 0x10, 8, elf.STB_LOCAL)}, "__open_nocancel", "__GI___open64_nocancel"},
		{[]cand{mk("pthread_create@GLIBC_2.2.5", 0x10, 8, elf.STB_GLOBAL), mk("pthread_create@@GLIBC_2.34", 0x10, 8, elf.STB_GLOBAL)}, "pthread_create@@GLIBC_2.34", "pthread_create@GLIBC_2.2.5"},
		{[]cand{mk("__GI___fork", 0x10, 8, elf.STB_LOCAL), mk("__fork", 0x10, 8, elf.STB_GLOBAL), mk("fork", 0x10, 8, elf.STB_WEAK), mk("__libc_fork", 0x10, 8, elf.STB_GLOBAL)}, "__fork", "__libc_fork"},
		{[]cand{mk("fork", 0x10, 8, elf.STB_WEAK), mk("__libc_fork", 0x10, 8, elf.STB_LOCAL)}, "fork", "__libc_fork"},
		{[]cand{{sym: sym{0x10, 0, "_start"}, bind: elf.STB_GLOBAL, label: true}, mk("entry", 0x10, 0, elf.STB_LOCAL)}, "entry", "entry"},
		// Both sized: the longer demangled name, the shorter mangled one.
		{[]cand{mk(subst, 0x10, 296, elf.STB_GLOBAL), mk(visit, 0x10, 296, elf.STB_GLOBAL), mk(next, 0x200, 8, elf.STB_GLOBAL)}, visit, visit},
		// The alias without size last at its start: perf sizes it.
		{[]cand{mk(subst, 0x10, 296, elf.STB_GLOBAL), mk(visit, 0x10, 0, elf.STB_GLOBAL), mk(next, 0x200, 8, elf.STB_GLOBAL)}, subst, visit},
		// First at its start, it ends where it starts: the sized one wins.
		{[]cand{mk(visit, 0x10, 0, elf.STB_GLOBAL), mk(subst, 0x10, 296, elf.STB_GLOBAL), mk(next, 0x200, 8, elf.STB_GLOBAL)}, subst, subst},
		// Last in the table, nothing follows to size it.
		{[]cand{mk(subst, 0x10, 296, elf.STB_GLOBAL), mk(visit, 0x10, 0, elf.STB_GLOBAL)}, subst, subst},
	} {
		if got, _ := funcSyms(slices.Clone(c.cands), better); len(got) < 1 || got[0].name != c.gdb {
			t.Errorf("better: %+v", got)
		}
		if got, _ := funcSyms(slices.Clone(c.cands), perfBetter); len(got) < 1 || got[0].name != c.perf {
			t.Errorf("perfBetter: %+v, want %s", got, c.perf)
		}
	}
}

func TestFuncSymsTieBreak(t *testing.T) {
	mk := func(name string, v, size uint64, bind elf.SymBind) cand {
		return cand{sym: sym{v, size, name}, bind: bind}
	}
	got, _ := funcSyms([]cand{
		mk("__GI_foo", 0x100, 0x20, elf.STB_LOCAL),
		mk("__foo", 0x100, 0x20, elf.STB_GLOBAL),
		mk("foo", 0x100, 0x20, elf.STB_WEAK),
		mk("foo_nosize", 0x100, 0, elf.STB_GLOBAL),
		mk("bar", 0x200, 0x10, elf.STB_GLOBAL),
		mk("inner", 0x208, 0x2, elf.STB_LOCAL),
	}, better)
	if len(got) != 3 || got[0].name != "__foo" || got[1].name != "bar" {
		t.Fatalf("%+v", got)
	}
	m := &module{syms: got}
	// 0x20c is past "inner" but inside "bar".
	if s, ok := m.lookupFunc(0x20c); !ok || s.Name != "bar" || s.Offset != 0xc {
		t.Errorf("nested: %+v %v", s, ok)
	}
	// 0x150 is after __foo's end and before bar: nothing.
	if s, ok := m.lookupFunc(0x150); ok {
		t.Errorf("gap resolved to %+v", s)
	}
}

// TestReadFuncSymsMatchesDebugElf checks the direct symbol-table reader
// against debug/elf's Symbols on this machine's libc and the test binary.
func TestReadFuncSymsMatchesDebugElf(t *testing.T) {
	exe, _ := os.Executable()
	paths := []string{"/usr/lib/x86_64-linux-gnu/libc.so.6", exe}
	// libc's debug file, when installed: a .symtab of 10,000 entries with
	// the untyped labels of glibc's assembly.
	if f, err := elf.Open(paths[0]); err == nil {
		if id := elffile.BuildID(f); len(id) > 1 {
			if dbg := fmt.Sprintf("/usr/lib/debug/.build-id/%x/%x.debug", id[:1], id[1:]); fileExists(dbg) {
				paths = append(paths, dbg)
			}
		}
		f.Close()
	}
	for _, path := range paths {
		f, err := elf.Open(path)
		if err != nil {
			t.Skipf("%s: %v", path, err)
		}
		for _, typ := range []elf.SectionType{elf.SHT_SYMTAB, elf.SHT_DYNSYM} {
			var syms []elf.Symbol
			if typ == elf.SHT_SYMTAB {
				syms, _ = f.Symbols()
			} else {
				syms, _ = f.DynamicSymbols()
			}
			var want []cand
			for _, s := range syms {
				ty := elf.ST_TYPE(s.Info)
				label := ty == elf.STT_NOTYPE && int(s.Section) < len(f.Sections) && f.Sections[s.Section].Flags&elf.SHF_EXECINSTR != 0 &&
					s.Name != "" && s.Name[0] != '$' && !strings.HasPrefix(s.Name, ".L")
				if (ty == elf.STT_FUNC || ty == elf.STT_GNU_IFUNC || label) && s.Section != elf.SHN_UNDEF && s.Value != 0 && s.Name != "" {
					want = append(want, cand{sym: sym{s.Value, s.Size, s.Name}, bind: elf.ST_BIND(s.Info), label: label})
				}
			}
			got, labels := readFuncSyms(f, typ, true)
			for i := range got {
				got[i].name = symName(got[i].name) // names run on to the table's end
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s %v: %d symbols read directly, %d through debug/elf, or they differ", path, typ, len(got), len(want))
			}
			// Untyped code labels, from .symtab only.
			var wantLabels []sym
			for _, s := range syms {
				if typ == elf.SHT_SYMTAB && elf.ST_TYPE(s.Info) == elf.STT_NOTYPE && s.Value != 0 && s.Section != 0 && int(s.Section) < len(f.Sections) &&
					f.Sections[s.Section].Flags&elf.SHF_EXECINSTR != 0 && s.Name != "" && s.Name[0] != '$' && s.Name[0] != '.' {
					wantLabels = append(wantLabels, sym{start: s.Value, name: s.Name})
				}
			}
			byStart := func(a, b sym) int {
				if a.start != b.start {
					return cmp.Compare(a.start, b.start)
				}
				return strings.Compare(a.name, b.name)
			}
			if !slices.IsSortedFunc(labels, func(a, b sym) int { return cmp.Compare(a.start, b.start) }) {
				t.Errorf("%s %v: labels not sorted by address", path, typ)
			}
			slices.SortFunc(labels, byStart)
			slices.SortFunc(wantLabels, byStart)
			if !slices.Equal(labels, wantLabels) {
				t.Errorf("%s %v: %d code labels read directly, %d through debug/elf, or they differ", path, typ, len(labels), len(wantLabels))
			}
			if typ == elf.SHT_SYMTAB {
				t.Logf("%s: %d functions, %d code labels", path, len(got), len(labels))
			}
		}
		f.Close()
	}
}

// BenchmarkLoadLibc measures the first lookup in this machine's libc: the
// symbol tables read (with libc's separate debug file when installed) and
// indexed, which `sframe stack` pays once per run.
func BenchmarkLoadLibc(b *testing.B) {
	const libc = "/usr/lib/x86_64-linux-gnu/libc.so.6"
	if _, err := os.Stat(libc); err != nil {
		b.Skip(err)
	}
	for b.Loop() {
		s := New()
		if _, ok := s.LookupFunc(libc, 0x28000); !ok {
			b.Fatal("no symbol")
		}
		s.Close()
	}
}

// BenchmarkLoadCC1plus measures the first lookup in GCC's C++ compiler
// (cc1plus: no .symtab, 31,000 dynamic symbols, mostly C++ names, in
// hash order), the symbols chosen as perf chooses them, as sframe record
// names a compilation's frames.
//
//	go test ./symbolize -run '^$' -bench LoadCC1plus
func BenchmarkLoadCC1plus(b *testing.B) {
	testprog.NeedTool(b, "g++")
	out, err := exec.Command("g++", "-print-prog-name=cc1plus").Output()
	if err != nil {
		b.Skip(err)
	}
	path := strings.TrimSpace(string(out))
	f, err := elf.Open(path)
	if err != nil {
		b.Skip(err)
	}
	syms, err := f.DynamicSymbols()
	f.Close()
	if err != nil || len(syms) < 10000 {
		b.Skipf("%s: %d dynamic symbols (%v), want a compiler's", path, len(syms), err)
	}
	var addr uint64
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Size > 8 {
			addr = s.Value + 4
			break
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		s := New()
		s.PerfNames = true
		if _, ok := s.LookupFunc(path, addr); !ok {
			b.Fatalf("%s: no symbol at %#x", path, addr)
		}
		s.Close()
	}
}

// TestSizelessSymbolEndsWithSection checks that a symbol without size
// (_fini, frame_dummy) names addresses up to the next symbol only inside
// its own section, as eu-addr2line does: past .fini, between sections and
// past the last one, eu-addr2line finds no function, and neither may we.
func TestSizelessSymbolEndsWithSection(t *testing.T) {
	testprog.NeedTool(t, "eu-addr2line")
	exe := filepath.Join("..", "testdata", "drap-O2.elf")
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Every 4th address from the first executable section to 0x200 past
	// the last one, through the gaps between sections.
	var lo, hi uint64 = ^uint64(0), 0
	for _, sec := range f.Sections {
		if sec.Flags&elf.SHF_EXECINSTR != 0 {
			lo, hi = min(lo, sec.Addr), max(hi, sec.Addr+sec.Size)
		}
	}
	var addrs []uint64
	args := []string{"-f", "-e", exe}
	for a := lo; a < hi+0x200; a += 4 {
		addrs = append(addrs, a)
		args = append(args, fmt.Sprintf("%#x", a))
	}
	out := strings.Split(strings.TrimSpace(run(t, "eu-addr2line", args...)), "\n")
	if len(out) != 2*len(addrs) {
		t.Fatalf("eu-addr2line printed %d lines for %d addresses", len(out), len(addrs))
	}
	s := New()
	defer s.Close()
	bad := 0
	for i, a := range addrs {
		want := out[2*i]
		if want == "??" {
			want = ""
		}
		got := ""
		if sym, ok := s.LookupFunc(exe, a); ok {
			got = sym.Name
		}
		if got != want {
			if bad++; bad <= 10 {
				t.Errorf("%#x: got %q, eu-addr2line %q", a, got, want)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d addresses differ from eu-addr2line", bad, len(addrs))
	}
}

// TestLazyMatchesIndex checks that a Lazy symbolizer's LookupFuncs, one
// pass over the symbol table per call, names addresses exactly as
// LookupFunc does from the sorted index: at the start, middle and last
// byte of functions (answered lazily: the test checks that the table was
// not read whole), and just past their ends and at random addresses
// (where labels, enclosing symbols or nothing may decide: read whole).
// Files: this machine's libc (with its separate debug file when
// installed) and libstdc++ (many aliases at one address), the test
// binary, and the corpus's executables and libraries of every
// architecture.
func TestLazyMatchesIndex(t *testing.T) {
	exe, _ := os.Executable()
	files := []string{"/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6", exe}
	corpus := os.Getenv("SFRAMEKIT_CORPUS")
	if corpus == "" {
		corpus = "../../shared/corpus"
	}
	for _, pat := range []string{"*/*/*.elf", "*/*/*.so"} {
		m, _ := filepath.Glob(filepath.Join(corpus, pat))
		files = append(files, m...)
	}
	rnd := uint64(1)
	lazyAnswers := 0
	for _, path := range files {
		if _, err := os.Stat(path); err != nil {
			continue
		}
		full := New()
		full.LookupFunc(path, 0)
		syms := full.mods[path].syms
		if len(syms) == 0 {
			continue
		}
		check := func(addrs []uint64, wantLazy bool) {
			t.Helper()
			lazy := New()
			lazy.Lazy = true
			defer lazy.Close()
			got := lazy.LookupFuncs(path, addrs)
			for i, a := range addrs {
				want, _ := full.LookupFunc(path, a)
				if got[i] != want {
					t.Errorf("%s %#x: lazy %+v, index %+v", path, a, got[i], want)
				}
			}
			if m := lazy.mods[path]; !m.loaded {
				lazyAnswers++
			} else if wantLazy {
				t.Errorf("%s %#x: lazy lookup read the whole table", path, addrs)
			}
		}
		// Batches of 8 functions spread over the table.
		step := max(1, len(syms)/40)
		for i := 0; i+8 <= len(syms); i += step * 8 {
			var in, past, random []uint64
			for _, s := range syms[i : i+8] {
				if s.size == 0 {
					in = append(in, s.start)
				} else {
					in = append(in, s.start, s.start+s.size/2, s.start+s.size-1)
				}
				past = append(past, s.start+s.size)
				rnd = rnd*6364136223846793005 + 1442695040888963407
				random = append(random, syms[0].start+rnd%(syms[len(syms)-1].start-syms[0].start+1))
			}
			check(in, !strings.HasSuffix(path, ".o")) // sizeless symbols: sameSection decides
			check(past, false)
			check(random, false)
			check(append(in, 0, ^uint64(0)), false)
		}
		full.Close()
	}
	if lazyAnswers == 0 {
		t.Fatal("no lookup was answered lazily")
	}
}

// fileExists reports whether path names a file.
func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
