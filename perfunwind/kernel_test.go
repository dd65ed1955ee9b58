package perfunwind

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/arch"
)

// TestKallsyms parses a kallsyms file as /proc/kallsyms writes it:
// functions (t, T, w, W) kept, data left out, modules named, an unsorted
// file sorted; a file of zero addresses (kernel.kptr_restrict) refused.
func TestKallsyms(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "kallsyms")
	// The kernel's lines (sorted), then modules' (not sorted); and the
	// same lines with a module's first, which makes them all parsed.
	kernel := "ffffffff81000000 T _stext\n" +
		"ffffffff81000100 t func_a\n" +
		"ffffffff81000180 d some_data\n" +
		"ffffffff81000200 W weak_b\n" +
		"bad line\n" +
		"ffffffff81000300 T last\n"
	mods := "ffffffffc0002000 t mod_func2\t[mymod]\n" +
		"ffffffffc0001000 t mod_func\t[mymod]" // no final newline
	for _, text := range []string{kernel + mods, mods + "\n" + kernel} {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		checkKallsyms(t, path)
	}
	zero := filepath.Join(dir, "restricted")
	os.WriteFile(zero, []byte("0000000000000000 T _stext\n0000000000000000 t func_a\n"), 0o644)
	if _, err := loadKallsyms(zero); err == nil || !strings.Contains(err.Error(), "kptr_restrict") {
		t.Errorf("zero addresses: %v", err)
	}
}

func checkKallsyms(t *testing.T, path string) {
	k, err := loadKallsyms(path)
	if err != nil {
		t.Fatal(err)
	}
	defer k.close()
	for _, c := range []struct {
		pc        uint64
		name, mod string
	}{
		{0xffffffff81000000, "_stext", ""},
		{0xffffffff81000150, "func_a", ""}, // not some_data: data is not a function
		{0xffffffff81000210, "weak_b", ""},
		{0xffffffff81000301, "last", ""},
		{0xffffffffc0001004, "mod_func", "mymod"},
		{0xffffffffc0002004, "mod_func2", "mymod"},
		{0xffffffff80000000, "", ""},
	} {
		_, name, mod, _ := k.lookup(c.pc)
		if name != c.name || mod != c.mod {
			t.Errorf("%#x: %q [%q], want %q [%q]", c.pc, name, mod, c.name, c.mod)
		}
	}
}

// TestKallsymsSearch checks the search in the text of this machine's
// /proc/kallsyms (when readable with addresses) against a scan of every
// line, at the start of every function and a byte before the next one.
func TestKallsymsSearch(t *testing.T) {
	k, err := loadKallsyms("/proc/kallsyms")
	if err != nil {
		t.Skipf("/proc/kallsyms: %v", err)
	}
	// The kernel's own lines end where the first module's begins.
	core := len(k.text)
	if i := strings.IndexByte(k.text, '\t'); i >= 0 {
		core = strings.LastIndexByte(k.text[:i], '\n') + 1
	}
	if k.core != core {
		t.Errorf("the kernel's lines end at %d, want %d", k.core, core)
	}
	type sym struct {
		addr      uint64
		name, mod string
	}
	var all []sym
	for off := 0; off < len(k.text); {
		if a, typ, name, mod, ok := k.parseLine(off); ok && isFunc(typ) {
			all = append(all, sym{a, name, mod})
		}
		i := strings.IndexByte(k.text[off:], '\n')
		if i < 0 {
			break
		}
		off += i + 1
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].addr < all[j].addr })
	bad := 0
	for i := 0; i+1 < len(all); i += 97 {
		for _, pc := range []uint64{all[i].addr, all[i+1].addr - 1} {
			if all[i+1].addr == all[i].addr {
				continue
			}
			// Of several functions at one address, any may name it.
			start, name, _, ok := k.lookup(pc)
			if !ok || start != all[i].addr {
				bad++
				if bad < 5 {
					t.Errorf("%#x: %#x %s, want %#x %s", pc, start, name, all[i].addr, all[i].name)
				}
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d wrong lookups", bad)
	}
}

// TestKallsymsLongLines checks the bound on a kallsyms line: a line
// longer than maxLine (a crafted file: KSYM_NAME_LEN is 512) does not
// parse, and the lines around it are still found past it and a few lines
// that do not parse.
func TestKallsymsLongLines(t *testing.T) {
	long := "ffffffff81000400 T " + strings.Repeat("x", 3*maxLine) + "\n"
	text := "ffffffff81000000 T _stext\n" +
		"ffffffff81000300 T last\n" +
		long +
		strings.Repeat("garbage "+strings.Repeat("y", 100)+"\n", maxSkip/2) +
		"ffffffff81000500 T after\n"
	path := filepath.Join(t.TempDir(), "kallsyms")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	k, err := loadKallsyms(path)
	if err != nil {
		t.Fatal(err)
	}
	defer k.close()
	for _, c := range []struct {
		pc   uint64
		name string
	}{
		{0xffffffff81000010, "_stext"},
		{0xffffffff81000410, "last"}, // the long line's symbol is not read
		{0xffffffff81000510, "after"},
	} {
		if _, name, _, _ := k.lookup(c.pc); name != c.name {
			t.Errorf("%#x: %q, want %q", c.pc, name, c.name)
		}
	}
}

// TestResolverKernelCacheBound: a Resolver remembers the names of at most
// maxKernAddrs kernel addresses (a continuous profiler's lives as long as
// it runs), and names them right after it started over.
func TestResolverKernelCacheBound(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kallsyms")
	os.WriteFile(path, []byte("ffffffff81000000 T _stext\nffffffff81100000 T far\n"), 0o644)
	s, err := NewSession(Options{Arch: arch.AMD64, Kallsyms: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := NewResolver(s)
	defer r.Close()
	for i := range maxKernAddrs + 100 {
		pc := 0xffffffff81000000 + uint64(i)
		if l := r.kernel(pc); l.Sym != "_stext" || l.Offset != uint64(i) {
			t.Fatalf("%#x: %q+%#x", pc, l.Sym, l.Offset)
		}
		if len(r.kern) > maxKernAddrs {
			t.Fatalf("%d kernel addresses' names kept, want at most %d", len(r.kern), maxKernAddrs)
		}
	}
	if l := r.kernel(0xffffffff81100004); l.Sym != "far" {
		t.Errorf("after starting over: %q", l.Sym)
	}
}
