package sframegen

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/cfi"
	"github.com/sframekit/sframekit/elffile"
	"github.com/sframekit/sframekit/internal/corpus"
	"github.com/sframekit/sframekit/internal/testprog"
	"github.com/sframekit/sframekit/sframe"
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
		rep, err := VerifyELF(f, VerifyELFOptions{})
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
	rep, err := Verify(tab, s2, VerifyOptions{Names: fdeNames(f, ".eh_frame")})
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
		r, err := FromCFI(f, Options{Version: versions[i]})
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
		rep, err := Verify(tab, s, VerifyOptions{Relocatable: f.Type == elf.ET_REL})
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

// emptySFrame returns a valid SFrame section for f's ABI that describes
// no function.
func emptySFrame(t *testing.T, f *elf.File) *sframe.Section {
	t.Helper()
	abi, err := ABIFor(f)
	if err != nil {
		t.Fatal(err)
	}
	data, err := sframe.Encode(sframe.EncodeOptions{Version: sframe.Version3, ABI: abi}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sframe.Parse(data, 0)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// checkRelNames verifies a relocatable object's CFI (section cfiName)
// against an SFrame section describing nothing, so that every FDE is
// listed as left out with its name, and checks each name against the
// symbol table: a function symbol of that name starting at the FDE's
// section offset with the FDE's size. In these objects several
// functions start at offset 0 of different sections.
func checkRelNames(t *testing.T, f *elf.File, cfiName string) []string {
	t.Helper()
	tab, err := cfi.FromELF(f, cfiName)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(tab, emptySFrame(t, f), VerifyOptions{Relocatable: true, Names: fdeNames(f, cfiName)})
	if err != nil {
		t.Fatal(err)
	}
	syms, _ := f.Symbols()
	var names []string
	for _, l := range rep.LeftOut {
		ok := false
		for _, s := range syms {
			ok = ok || (s.Name == l.Func && elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Value == l.Start && s.Size == l.End-l.Start)
		}
		if !ok {
			t.Errorf("FDE [%#x,%#x) named %q: no function symbol of that name, start and size", l.Start, l.End, l.Func)
		}
		names = append(names, l.Func)
	}
	if len(names) == 0 {
		t.Error("no function left out")
	}
	return names
}

// TestVerifyRelocatableNames checks that functions of relocatable objects
// are named after their section-relative symbols (they printed as "?"):
// in every corpus object of the basic and fp programs, and in one with
// .debug_frame made by gcc (whose CIE pointers are relocated too).
func TestVerifyRelocatableNames(t *testing.T) {
	for _, p := range corpus.ELFs(t) {
		b := filepath.Base(p)
		if filepath.Ext(p) != ".o" || !(strings.HasPrefix(b, "basic-") || strings.HasPrefix(b, "fp-")) {
			continue
		}
		f, err := elf.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		names := checkRelNames(t, f, ".eh_frame")
		f.Close()
		if strings.HasSuffix(p, "x86_64/v3/basic-O2.o") {
			// leaf_add is at .text+0 and main at .text.startup+0.
			want := "leaf_add recurse with_alloca medium_frame large_frame long_function very_long_function sum_varargs dispatch main"
			if got := strings.Join(names, " "); got != want {
				t.Errorf("%s: names %s, want %s", p, got, want)
			}
		}
	}
	testprog.NeedTool(t, "gcc")
	dir := t.TempDir()
	src := filepath.Join(dir, "two.c")
	prog := "int add(int a, int b) { return a + b; }\n" +
		"__attribute__((section(\".text.other\"))) int twice(int a) { return add(a, a); }\n"
	if err := os.WriteFile(src, []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	obj := filepath.Join(dir, "two.o")
	if out, err := exec.Command("gcc", "-c", "-O0", "-g", "-fno-asynchronous-unwind-tables", "-o", obj, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	f, err := elf.Open(obj)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Section(".debug_frame") == nil || f.Section(".eh_frame") != nil {
		t.Fatalf("gcc -fno-asynchronous-unwind-tables -g wrote no .debug_frame only")
	}
	if got := strings.Join(checkRelNames(t, f, ".debug_frame"), " "); got != "add twice" {
		t.Errorf(".debug_frame: names %s, want add twice", got)
	}
}

// TestVerifyInvalidSection flips one byte of a function's FRE offset in a
// corpus file's .sframe (objdump and sframe dump reject the result):
// Verify must return the validation error, not a report saying that the
// functions it could not read are merely left out.
func TestVerifyInvalidSection(t *testing.T) {
	f, err := elf.Open(filepath.Join(corpus.Dir(t), "x86_64/v3/basic-O2.elf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sec := elffile.FindSFrame(f, "")
	data, err := sec.Data()
	if err != nil {
		t.Fatal(err)
	}
	s, err := sframe.Parse(data, sec.Addr)
	if err != nil {
		t.Fatal(err)
	}
	// v3 function entries: 8-byte start, 4-byte size, 4-byte FRE offset.
	f0, err := s.Func(0)
	if err != nil {
		t.Fatal(err)
	}
	data[f0.StartFieldOff+13] ^= 0xff
	if s, err = sframe.Parse(data, sec.Addr); err != nil {
		t.Fatal(err)
	}
	tab, err := cfi.FromELF(f, "")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(tab, s, VerifyOptions{})
	var se *sframe.Error
	if !errors.As(err, &se) || se.Func != 0 || se.Kind != sframe.ErrBounds {
		t.Errorf("Verify of a corrupt section: %v, report %+v; want an out-of-bounds error for function 0", err, rep)
	}
}

// TestVerifyNothingCompared verifies a corpus file against an SFrame
// section describing none of its functions: every function is left out,
// none compared, and that is a failure, not "OK: 0 functions".
func TestVerifyNothingCompared(t *testing.T) {
	f, err := elf.Open(filepath.Join(corpus.Dir(t), "x86_64/v3/basic-O2.elf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tab, err := cfi.FromELF(f, "")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(tab, emptySFrame(t, f), VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Funcs != 0 || len(rep.LeftOut) != 13 || !rep.Failed() {
		t.Errorf("%d functions compared, %d left out, failed %v; want 0, 13, true", rep.Funcs, len(rep.LeftOut), rep.Failed())
	}
}

// TestVerifyJSONLists checks that a report without disagreements or
// functions left out has empty JSON lists, not null.
func TestVerifyJSONLists(t *testing.T) {
	f, err := elf.Open(filepath.Join(corpus.Dir(t), "x86_64/v3/basic-O2.o"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rep, err := VerifyELF(f, VerifyELFOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"disagreements":[]`)) || !bytes.Contains(b, []byte(`"left_out":[]`)) {
		t.Errorf("JSON %s: want empty lists", b)
	}
}

// TestNoCFI converts and verifies a file with neither .eh_frame nor
// .debug_frame: the error says so (it named only .debug_frame).
func TestNoCFI(t *testing.T) {
	sf, err := sframe.Encode(sframe.EncodeOptions{Version: sframe.Version3, ABI: sframe.ABIAMD64LE, Addr: craftSFrame}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(craftELF(t, 16, nil, sf))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const want = "no CFI (neither .eh_frame nor .debug_frame)"
	if _, err := FromCFI(f, Options{}); err == nil || err.Error() != want {
		t.Errorf("FromCFI: %v, want %q", err, want)
	}
	if _, err := VerifyELF(f, VerifyELFOptions{}); err == nil || err.Error() != want {
		t.Errorf("VerifyELF: %v, want %q", err, want)
	}
}
