package sframegen

import (
	"debug/elf"
	"os"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/cfi"
	"github.com/sframekit/sframekit/sframe"
)

const libcPath = "/usr/lib/x86_64-linux-gnu/libc.so.6"

// TestLibc converts this machine's libc, checks that the section
// validates and agrees with the CFI everywhere, and logs the coverage.
func TestLibc(t *testing.T) {
	f, err := elf.Open(libcPath)
	if err != nil {
		t.Skipf("no %s: %v", libcPath, err)
	}
	defer f.Close()
	for _, v := range []sframe.Version{sframe.Version3, sframe.Version2} {
		r, err := FromCFI(f, Options{Version: v})
		if err != nil {
			t.Fatal(err)
		}
		out, err := r.Encode(0x400000)
		if err != nil {
			t.Fatal(err)
		}
		s, err := sframe.Parse(out, 0x400000)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		tab, err := cfi.FromELF(f, "")
		if err != nil {
			t.Fatal(err)
		}
		rep, err := Verify(tab, s, VerifyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range rep.Disagreements {
			t.Errorf("%s: %v", v, d)
		}
		if r.Stats.Funcs < 1000 || r.Stats.CoveredBytes*10 < r.Stats.CFIBytes*9 {
			t.Errorf("%s: low coverage: %+v", v, r.Stats)
		}
		var b strings.Builder
		r.Stats.Write(&b)
		t.Logf("%s, %d bytes:\n%s", v, len(out), b.String())
	}
	_ = os.Stderr
}
