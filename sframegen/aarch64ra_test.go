package sframegen

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/sframekit/sframekit/internal/testprog"
	"github.com/sframekit/sframekit/sframe"
)

// raOnlySrc has functions that save x30 but not x29 when built for
// AArch64 with -fomit-frame-pointer: they call another function, so the
// return address goes to the stack, and keep no frame record.
const raOnlySrc = `
extern int g(int);
int f1(int x) { return g(x) + 1; }
int f2(int x) { int r = g(x); return g(r) * 3; }
`

// TestAArch64RAWithoutFP: gas writes an AArch64 row that saves the RA
// but not the FP as two data words, CFA and RA. sframe verify used to
// reject such sections ("bad data-word count: 2 data words") and with
// them every -fomit-frame-pointer AArch64 binary built with --gsframe
// (unwind then ignored the section), and sframe gen left such functions
// out ("AArch64 rows save RA and FP together or neither").
func TestAArch64RAWithoutFP(t *testing.T) {
	cc := testprog.AArch64.CC
	testprog.NeedTool(t, cc)
	d := t.TempDir()
	src := filepath.Join(d, "raonly.c")
	if err := os.WriteFile(src, []byte(raOnlySrc), 0o644); err != nil {
		t.Fatal(err)
	}
	build := func(out string, flags ...string) *elf.File {
		args := append([]string{"-O2", "-fomit-frame-pointer", "-c", "-o", out, src}, flags...)
		if b, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", cc, args, err, b)
		}
		f, err := elf.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}

	// gas's section: valid, and agreeing with the CFI.
	gas := build(filepath.Join(d, "gas.o"), "-Wa,--gsframe")
	rep, err := VerifyELF(gas, VerifyELFOptions{})
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if rep.Failed() || rep.Funcs != 2 || len(rep.LeftOut) != 0 {
		t.Errorf("verify: %d functions, %d disagreements, %d left out", rep.Funcs, len(rep.Disagreements), len(rep.LeftOut))
	}
	two := 0
	s, err := sframe.Parse(contents(t, gas, ".sframe"), 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < s.NumFuncs(); i++ {
		fn, _ := s.Func(i)
		for it := s.FREs(&fn); it.Next(); {
			if it.FRE().Count() == 2 {
				two++
			}
		}
	}
	if two == 0 {
		t.Fatal("gas wrote no two-word row: the test checks nothing")
	}

	// sframe gen on the same code: nothing left out.
	r, err := FromCFI(build(filepath.Join(d, "cfi.o")), Options{Version: sframe.Version3})
	if err != nil {
		t.Fatal(err)
	}
	for _, sk := range r.Skipped {
		t.Errorf("gen left out %+v", sk)
	}
}
