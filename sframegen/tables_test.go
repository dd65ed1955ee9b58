package sframegen

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/sframekit/sframekit/cfi"
	"github.com/sframekit/sframekit/internal/testprog"
)

// fdeStarts returns the start of every FDE of a CFI section of f.
func fdeStarts(t *testing.T, f *elf.File, section string) []uint64 {
	t.Helper()
	tab, err := cfi.FromELF(f, section)
	if err != nil {
		t.Fatal(err)
	}
	var out []uint64
	it := tab.Entries()
	for it.Next() {
		if e := it.Entry(); e.Kind == cfi.KindFDE && e.FDE != nil {
			out = append(out, e.FDE.PCBegin)
		}
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFromCFIBothSections converts programs that have both .eh_frame and
// .debug_frame. Built -fno-asynchronous-unwind-tables, the program's own
// functions are in .debug_frame only and the C runtime's in .eh_frame:
// FromCFI must convert both, each function once. With both sections
// describing the same functions (.cfi_sections .eh_frame, .debug_frame),
// the .eh_frame's are converted and .debug_frame adds nothing.
func TestFromCFIBothSections(t *testing.T) {
	testprog.NeedTool(t, "gcc")
	dir := t.TempDir()
	const body = "__attribute__((noinline)) int twice(int a) { return a * 2 + 1; }\n" +
		"__attribute__((noinline)) int thrice(int a) { return twice(a) * 3; }\n" +
		"int main(int argc, char **argv) { (void)argv; return thrice(argc); }\n"
	build := func(name, prefix string, flags ...string) *elf.File {
		src := filepath.Join(dir, name+".c")
		if err := os.WriteFile(src, []byte(prefix+body), 0o644); err != nil {
			t.Fatal(err)
		}
		exe := filepath.Join(dir, name)
		args := append(append([]string{}, flags...), "-o", exe, src)
		if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
			t.Fatalf("gcc: %v\n%s", err, out)
		}
		f, err := elf.Open(exe)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}

	f := build("split", "", "-O2", "-g", "-fno-asynchronous-unwind-tables")
	eh, dbg := fdeStarts(t, f, ".eh_frame"), fdeStarts(t, f, ".debug_frame")
	if len(dbg) < 3 {
		t.Fatalf(".debug_frame: %d FDEs, want the program's 3", len(dbg))
	}
	r, err := FromCFI(f, Options{})
	if err != nil {
		t.Fatal(err)
	}
	starts := map[uint64]int{}
	for _, fn := range r.Funcs {
		starts[fn.Start]++
	}
	for _, s := range append(eh, dbg...) {
		if starts[s] != 1 {
			t.Errorf("function at %#x: %d SFrame functions, want 1", s, starts[s])
		}
	}
	if r.Stats.CFIFuncs != len(eh)+len(dbg) {
		t.Errorf("%d CFI functions read, want %d + %d", r.Stats.CFIFuncs, len(eh), len(dbg))
	}
	// --cfi .eh_frame: that section only.
	only, err := FromCFI(f, Options{Section: ".eh_frame"})
	if err != nil {
		t.Fatal(err)
	}
	if only.Stats.CFIFuncs != len(eh) {
		t.Errorf(".eh_frame only: %d CFI functions, want %d", only.Stats.CFIFuncs, len(eh))
	}

	f = build("both", "__asm__(\".cfi_sections .eh_frame, .debug_frame\");\n", "-O2", "-g")
	eh, dbg = fdeStarts(t, f, ".eh_frame"), fdeStarts(t, f, ".debug_frame")
	if len(dbg) < 3 {
		t.Fatalf("both: .debug_frame has %d FDEs, want the program's 3", len(dbg))
	}
	r, err = FromCFI(f, Options{})
	if err != nil {
		t.Fatal(err)
	}
	only, err = FromCFI(f, Options{Section: ".eh_frame"})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Funcs) != len(only.Funcs) || len(r.Skipped) != len(only.Skipped) || r.Stats.CFIFuncs != len(eh) {
		t.Errorf("both: %d functions, %d skipped, %d read; .eh_frame alone %d, %d, %d",
			len(r.Funcs), len(r.Skipped), r.Stats.CFIFuncs, len(only.Funcs), len(only.Skipped), len(eh))
	}
}
