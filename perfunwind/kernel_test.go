package perfunwind

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKallsyms parses a kallsyms file as /proc/kallsyms writes it:
// functions (t, T, w, W) kept, data left out, modules named, an unsorted
// file sorted; a file of zero addresses (kernel.kptr_restrict) refused.
func TestKallsyms(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "kallsyms")
	text := "ffffffffc0001000 t mod_func\t[mymod]\n" +
		"ffffffff81000000 T _stext\n" +
		"ffffffff81000100 t func_a\n" +
		"ffffffff81000180 d some_data\n" +
		"ffffffff81000200 W weak_b\n" +
		"bad line\n" +
		"ffffffff81000300 T last" // no final newline
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	k, err := loadKallsyms(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		pc        uint64
		name, mod string
	}{
		{0xffffffff81000000, "_stext", ""},
		{0xffffffff81000150, "func_a", ""}, // not some_data: data is not a function
		{0xffffffff81000210, "weak_b", ""},
		{0xffffffff81000301, "last", ""},
		{0xffffffffc0001004, "mod_func", "mymod"},
		{0xffffffff80000000, "", ""},
	} {
		i := k.lookup(c.pc)
		var name, mod string
		if i >= 0 {
			name, mod = k.name(i)
		}
		if name != c.name || mod != c.mod {
			t.Errorf("%#x: %q [%q], want %q [%q]", c.pc, name, mod, c.name, c.mod)
		}
	}
	zero := filepath.Join(dir, "restricted")
	os.WriteFile(zero, []byte("0000000000000000 T _stext\n0000000000000000 t func_a\n"), 0o644)
	if _, err := loadKallsyms(zero); err == nil || !strings.Contains(err.Error(), "kptr_restrict") {
		t.Errorf("zero addresses: %v", err)
	}
}
