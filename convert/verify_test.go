package convert

import (
	"path/filepath"

	"debug/elf"
	"github.com/sframekit/sframekit/cfi"
	"github.com/sframekit/sframekit/elffile"
	"github.com/sframekit/sframekit/sframe"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/internal/corpus"
)

// TestVerifyCorpus runs Verify on every corpus file with a v2 or v3
// section: gas's and ld's sections must agree with the CFI everywhere,
// except for ld's known .plt.got deviation, which must be flagged as
// such and only in .plt.got.
func TestVerifyCorpus(t *testing.T) {
	paths, _ := corpusFiles(t)
	known, funcs, pcs := 0, 0, 0
	for _, p := range paths {
		f, err := elf.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := VerifyELF(f, "", "")
		f.Close()
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		funcs += rep.Funcs
		pcs += rep.PCs
		for _, d := range rep.Disagreements {
			if d.Known != "" {
				known++
				if d.Known == KnownPLTGot && d.Func != ".plt.got" {
					t.Errorf("%s: known deviation outside .plt.got: %v", p, d)
				}
				continue
			}
			t.Errorf("%s: %v", p, d)
		}
		if rep.Failed() {
			t.Errorf("%s: verify fails", strings.TrimPrefix(p, corpus.Dir(t)))
		}
	}
	t.Logf("%d functions, %d PCs compared; %d known toolchain deviations", funcs, pcs, known)
}

// corrupt re-encodes the .sframe of a corpus file after mutate changed
// the rows of the function starting at sym's address, and verifies it.
func corrupt(t *testing.T, rel, sym string, mutate func(f *sframe.EncFunc) uint64) (*Report, uint64) {
	t.Helper()
	p := filepath.Join(corpus.Dir(t), rel)
	f, err := elf.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, _ := f.Symbols()
	var addr uint64
	for _, s := range syms {
		if s.Name == sym {
			addr = s.Value
		}
	}
	if addr == 0 {
		t.Fatalf("%s: no symbol %s", rel, sym)
	}
	opts, funcs := extractSFrame(t, f)
	var pc uint64
	for i := range funcs {
		if funcs[i].Start == addr {
			pc = mutate(&funcs[i])
		}
	}
	if pc == 0 {
		t.Fatalf("%s: no SFrame function at %s", rel, sym)
	}
	out, err := sframe.Encode(opts, funcs)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := sframe.Parse(out, elffile.FindSFrame(f, "").Addr)
	if err != nil {
		t.Fatal(err)
	}
	tab, err := cfi.FromELF(f, "")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(tab, s2, false, symbolNames(f))
	if err != nil {
		t.Fatal(err)
	}
	MarkKnown(f, s2, rep)
	return rep, pc
}

// TestVerifyCorrupted checks that Verify names the function and the PC
// of rows corrupted on purpose.
func TestVerifyCorrupted(t *testing.T) {
	cases := []struct {
		name, file, sym, what string
		mutate                func(f *sframe.EncFunc) uint64
	}{
		{"wrong CFA offset", "x86_64/v3/fp-O2.elf", "main", "CFA", func(f *sframe.EncFunc) uint64 {
			f.Rows[1].Row.CFA.Offset += 8
			return f.Start + uint64(f.Rows[1].StartOff)
		}},
		{"wrong CFA base register", "x86_64/v3/basic-fp.elf", "main", "CFA", func(f *sframe.EncFunc) uint64 {
			r := &f.Rows[len(f.Rows)-2].Row
			if r.CFA.Base == 6 {
				r.CFA.Base = 7
			} else {
				r.CFA.Base = 6
			}
			return f.Start + uint64(f.Rows[len(f.Rows)-2].StartOff)
		}},
		{"wrong FP offset", "aarch64/v3/basic-O2.elf", "main", "FP", func(f *sframe.EncFunc) uint64 {
			for i := range f.Rows {
				if f.Rows[i].Row.FP.Kind == sframe.RuleDeref {
					f.Rows[i].Row.FP.Offset -= 8
					return f.Start + uint64(f.Rows[i].StartOff)
				}
			}
			return 0
		}},
		{"missing row", "s390x/v3/basic-O2.elf", "main", "CFA", func(f *sframe.EncFunc) uint64 {
			pc := f.Start + uint64(f.Rows[2].StartOff)
			f.Rows = append(f.Rows[:2:2], f.Rows[3:]...)
			return pc
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep, pc := corrupt(t, c.file, c.sym, c.mutate)
			if !rep.Failed() {
				t.Fatalf("corruption at %#x not detected", pc)
			}
			found := false
			for _, d := range rep.Disagreements {
				if d.Known != "" {
					continue
				}
				if d.Func != c.sym {
					t.Errorf("disagreement outside %s: %v", c.sym, d)
				}
				if d.PC == pc && d.What == c.what {
					found = true
				}
			}
			if !found {
				t.Errorf("no %s disagreement at %#x: %v", c.what, pc, rep.Disagreements)
			}
		})
	}
}

// TestVerifyGenerated converts every corpus file and verifies the result
// against the same CFI: the converter's output must never disagree, and
// what it leaves out must be exactly what Verify lists as left out.
func TestVerifyGenerated(t *testing.T) {
	paths, versions := corpusFiles(t)
	for i, p := range paths {
		f, err := elf.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		r, err := FromELF(f, Options{Version: versions[i]})
		if err != nil {
			t.Fatal(err)
		}
		out, err := r.Encode(0)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		s, err := sframe.Parse(out, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(); err != nil {
			t.Errorf("%s: generated section does not validate: %v", p, err)
		}
		tab, _ := cfi.FromELF(f, "")
		rep, err := Verify(tab, s, f.Type == elf.ET_REL, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range rep.Disagreements {
			t.Errorf("%s: %v", p, d)
		}
		if len(rep.LeftOut) != len(r.Skipped)+r.Stats.SignalNoRows {
			t.Errorf("%s: verify lists %d functions left out, the converter skipped %d", p, len(rep.LeftOut), len(r.Skipped))
		}
		f.Close()
	}
}
