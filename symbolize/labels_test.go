package symbolize

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestTextLabels checks that code after a sized function, under an
// untyped label of hand-written assembly (glibc's s390x thread_start),
// is named by that label as gdb names it, while the functions keep their
// own addresses.
func TestTextLabels(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("gcc not found; required under CI")
		}
		t.Skip("gcc not found")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "labels.s")
	exe := filepath.Join(dir, "labels")
	os.WriteFile(src, []byte(`	.text
	.globl _start
	.type _start, @function
_start:	nop
	nop
	.size _start, .-_start
thread_start:
	nop
	nop
	ret
	.type after, @function
after:	ret
	.size after, .-after
`), 0o644)
	if out, err := exec.Command("gcc", "-nostdlib", "-static", "-no-pie", "-o", exe, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	syms, _ := f.Symbols()
	f.Close()
	addr := map[string]uint64{}
	for _, s := range syms {
		addr[s.Name] = s.Value
	}
	s := New()
	for _, c := range []struct {
		at   uint64
		name string
		off  uint64
	}{
		{addr["_start"] + 1, "_start", 1},
		{addr["thread_start"], "thread_start", 0},
		{addr["thread_start"] + 2, "thread_start", 2},
		{addr["after"], "after", 0},
	} {
		sym, ok := s.LookupFunc(exe, c.at)
		if !ok || sym.Name != c.name || sym.Offset != c.off {
			t.Errorf("%#x: %q+%#x (%v), want %s+%#x", c.at, sym.Name, sym.Offset, ok, c.name, c.off)
		}
	}
}
