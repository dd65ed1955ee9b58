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

// TestParseMapsLine checks /proc/PID/maps lines: paths with spaces,
// deleted files, anonymous memory named as perf names it, bad lines.
func TestParseMapsLine(t *testing.T) {
	for _, c := range []struct {
		line string
		want mapsLine
		ok   bool
	}{
		{"55d0c8a00000-55d0c8a01000 r-xp 00001000 08:01 1234                       /usr/bin/my prog", mapsLine{0x55d0c8a00000, 0x55d0c8a01000, 0x1000, true, "/usr/bin/my prog"}, true},
		{"7f0000000000-7f0000002000 rw-p 00000000 00:00 0 ", mapsLine{0x7f0000000000, 0x7f0000002000, 0, false, "//anon"}, true},
		{"7f0000000000-7f0000002000 r-xp 00002000 08:01 99 /tmp/lib.so (deleted)", mapsLine{0x7f0000000000, 0x7f0000002000, 0x2000, true, "/tmp/lib.so (deleted)"}, true},
		{"7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0                          [stack]", mapsLine{0x7ffc00000000, 0x7ffc00021000, 0, false, "[stack]"}, true},
		{"zzzz-7ffc00021000 rw-p 00000000 00:00 0", mapsLine{}, false},
		{"7ffc00021000-7ffc00000000 rw-p 00000000 00:00 0", mapsLine{}, false},
	} {
		got, ok := parseMapsLine(c.line)
		if ok != c.ok || ok && got != c.want {
			t.Errorf("%q: %+v %v, want %+v %v", c.line, got, ok, c.want, c.ok)
		}
	}
}
