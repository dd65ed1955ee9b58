package symbolize

import (
	"debug/elf"
	"os/exec"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/internal/testprog"
)

// TestStructorVariantsDemangleAlike checks perfBetter's shortcut on a
// real C++ library's aliases (libstdc++, as g++ finds it): every pair of
// symbols at one address that structorVariants takes for a structor's
// variants demangles to one name.
func TestStructorVariantsDemangleAlike(t *testing.T) {
	testprog.NeedTool(t, "g++")
	out, err := exec.Command("g++", "-print-file-name=libstdc++.so").Output()
	if err != nil {
		t.Skip(err)
	}
	f, err := elf.Open(strings.TrimSpace(string(out)))
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	syms, err := f.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	at := map[uint64][]string{}
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Value != 0 {
			at[s.Value] = append(at[s.Value], s.Name)
		}
	}
	variants, others := 0, 0
	for _, names := range at {
		for i := range names {
			for j := i + 1; j < len(names); j++ {
				a, b := names[i], names[j]
				if !structorVariants(a, b) {
					others++
					continue
				}
				variants++
				if da, db := DemangleShort(a), DemangleShort(b); da != db {
					t.Errorf("%s and %s taken for variants of one structor, demangled %q and %q", a, b, da, db)
				}
			}
		}
	}
	if variants < 100 {
		t.Errorf("%d pairs of structor variants in libstdc++, want 100 or more", variants)
	}
	t.Logf("%d pairs of structor variants, %d other pairs of aliases", variants, others)
}
