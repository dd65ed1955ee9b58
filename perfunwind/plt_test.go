package perfunwind

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/internal/testprog"
)

// TestPLTNames checks that addresses in a program's PLT entries are named
// "name@plt", as objdump -d labels the entries (and perf names them), and
// that the names are read only once an address falls in the PLT.
func TestPLTNames(t *testing.T) {
	if arch.Host() != arch.AMD64 {
		t.Skip("the program is built for x86-64")
	}
	testprog.NeedTool(t, "gcc")
	testprog.NeedTool(t, "objdump")
	dir := t.TempDir()
	src, exe := filepath.Join(dir, "p.c"), filepath.Join(dir, "p")
	os.WriteFile(src, []byte(`#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv) { puts(argv[0]); printf("%zu\n", strlen(argv[0])); return abs(argc) - 1; }
`), 0o644)
	if out, err := exec.Command("gcc", "-O1", "-no-pie", "-o", exe, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	out, err := exec.Command("objdump", "-d", exe).Output()
	if err != nil {
		t.Fatal(err)
	}
	entries := map[string]uint64{}
	for _, m := range regexp.MustCompile(`(?m)^([0-9a-f]+) <([A-Za-z_][A-Za-z0-9_]*@plt)>:$`).FindAllSubmatch(out, -1) {
		a, _ := strconv.ParseUint(string(m[1]), 16, 64)
		entries[string(m[2])] = a
	}
	if len(entries) < 3 {
		t.Fatalf("objdump shows %d PLT entries, want puts, printf, strlen:\n%s", len(entries), out)
	}
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := NewSession(Options{Arch: arch.AMD64})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 {
			s.Mmap(1, 1, p.Vaddr, p.Memsz, p.Off, exe, true, nil)
		}
	}
	var mainAddr uint64
	syms, _ := f.Symbols()
	for _, sym := range syms {
		if sym.Name == "main" {
			mainAddr = sym.Value
		}
	}
	r := NewResolver(s)
	defer r.Close()
	find := func(addr uint64) *Mapping {
		t.Helper()
		m := s.procs[1].find(addr)
		if m == nil {
			t.Fatalf("%#x not mapped", addr)
		}
		return m
	}
	m := find(mainAddr)
	if l := r.Resolve(m, mainAddr+1); l.Sym != "main" {
		t.Errorf("main+1 named %q", l.Sym)
	}
	if pt := r.plts[m.File]; pt == nil || pt.names != nil || pt.ef == nil {
		t.Errorf("PLT names read for an address outside the PLT: %+v", pt)
	}
	for name, a := range entries {
		if l := r.Resolve(find(a+4), a+4); l.Sym != name || l.Offset != 4 {
			t.Errorf("%#x named %s+%#x, objdump says %s+0x4", a+4, l.Sym, l.Offset, name)
		}
	}
}

// TestNameForms: a symbol's version is in the perf form (Short) only;
// Name and Unversioned, which pprof and folded stacks show, have none,
// demangled or not.
func TestNameForms(t *testing.T) {
	for _, demangle := range []bool{true, false} {
		r := &Resolver{Demangle: demangle, names: map[string][3]string{}}
		for _, c := range []struct {
			sym         string
			want        [3]string
			wantMangled [3]string
		}{
			{"__libc_start_main@@GLIBC_2.34", [3]string{"__libc_start_main", "__libc_start_main@@GLIBC_2.34", "__libc_start_main"}, [3]string{}},
			{"memcpy@GLIBC_2.2.5", [3]string{"memcpy", "memcpy@GLIBC_2.2.5", "memcpy"}, [3]string{}},
			{"memcpy@plt", [3]string{"memcpy@plt", "memcpy@plt", "memcpy@plt"}, [3]string{}},
			{"_ZNSo3putEc@@GLIBCXX_3.4",
				[3]string{"std::basic_ostream<char, std::char_traits<char> >::put(char)", "std::ostream::put", "std::ostream::put"},
				[3]string{"_ZNSo3putEc", "_ZNSo3putEc@@GLIBCXX_3.4", "_ZNSo3putEc"}},
			// Without a version: the short form is demangled once, for both.
			{"_ZNSo5flushEv",
				[3]string{"std::basic_ostream<char, std::char_traits<char> >::flush()", "std::ostream::flush", "std::ostream::flush"},
				[3]string{"_ZNSo5flushEv", "_ZNSo5flushEv", "_ZNSo5flushEv"}},
			{"_ZNSo5flushEv@plt",
				// (Name: the demangler does not take the suffix, as before.)
				[3]string{"_ZNSo5flushEv@plt", "std::ostream::flush@plt", "std::ostream::flush@plt"},
				[3]string{"_ZNSo5flushEv@plt", "_ZNSo5flushEv@plt", "_ZNSo5flushEv@plt"}},
		} {
			want := c.want
			if !demangle && c.wantMangled[0] != "" {
				want = c.wantMangled
			}
			if got := r.demangled(c.sym); got != want {
				t.Errorf("demangle %v: %q: %q, want %q", demangle, c.sym, got, want)
			}
		}
	}
}

// TestNameOnly: with NameOnly, Name is what it is without (the pprof
// profile's names do not change), and the perf forms are left as the
// symbol table has them, not demangled a second time.
func TestNameOnly(t *testing.T) {
	for _, sym := range []string{"_ZNSo3putEc@@GLIBCXX_3.4", "_ZNSo5flushEv", "_ZNSo5flushEv@plt", "memcpy@GLIBC_2.2.5", "main"} {
		full := (&Resolver{Demangle: true, names: map[string][3]string{}}).demangled(sym)
		mangled := (&Resolver{names: map[string][3]string{}}).demangled(sym)
		got := (&Resolver{Demangle: true, NameOnly: true, names: map[string][3]string{}}).demangled(sym)
		if want := [3]string{full[0], mangled[1], mangled[2]}; got != want {
			t.Errorf("%q: %q, want %q", sym, got, want)
		}
	}
}
