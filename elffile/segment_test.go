package elffile_test

import (
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/convert"
	"github.com/sframekit/sframekit/elffile"
	"github.com/sframekit/sframekit/internal/corpus"
)

// TestAddSFrameSegmentCorpus adds a generated .sframe to every corpus
// executable and shared library (all three architectures) and checks the
// layout: every original section keeps its bytes and address, the new
// section is where the plan says, covered by a read-only PT_LOAD placed
// after the others and by PT_GNU_SFRAME, PT_PHDR (if any) describes the
// program header table inside a PT_LOAD, and readelf -lS has nothing to
// say on stderr.
func TestAddSFrameSegmentCorpus(t *testing.T) {
	_, haveReadelf := exec.LookPath("readelf")
	n := 0
	for _, p := range corpus.ELFs(t) {
		if strings.HasSuffix(p, ".o") || strings.Contains(p, "/v1/") {
			continue
		}
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		f, err := elf.NewFile(bytes.NewReader(src))
		if err != nil {
			t.Fatal(err)
		}
		r, err := convert.FromELF(f, convert.Options{})
		if err != nil {
			t.Fatal(err)
		}
		plan, err := elffile.PlanSFrameSegment(src)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		data, err := r.Encode(plan.Addr)
		if err != nil {
			t.Fatal(err)
		}
		out, err := elffile.AddSFrameSegment(src, plan, data)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		g, err := elf.NewFile(bytes.NewReader(out))
		if err != nil {
			t.Fatalf("%s: output does not parse: %v", p, err)
		}
		// Original sections unchanged (except .sframe and the name table).
		for i, s := range f.Sections {
			if s.Name == ".sframe" || s.Name == ".shstrtab" || s.Type == elf.SHT_NOBITS {
				continue
			}
			gs := g.Sections[i]
			a, _ := s.Data()
			b, _ := gs.Data()
			if gs.Name != s.Name || gs.Addr != s.Addr || !bytes.Equal(a, b) {
				t.Errorf("%s: section %s changed", p, s.Name)
			}
		}
		sec := elffile.FindSFrame(g, "")
		got, _ := sec.Data()
		if sec.Addr != plan.Addr || sec.Offset != plan.Offset || !bytes.Equal(got, data) || sec.Type != elffile.SHT_GNU_SFRAME {
			t.Errorf("%s: .sframe at %#x/%#x (plan %#x/%#x), type %v", p, sec.Addr, sec.Offset, plan.Addr, plan.Offset, sec.Type)
		}
		var lastLoad uint64
		var sfOK, loadOK, phdrOK bool
		hasPhdr := false
		phoff := uint64(0)
		if g.Class == elf.ELFCLASS64 {
			phoff = g.ByteOrder.Uint64(out[32:])
		}
		for _, ph := range g.Progs {
			switch ph.Type {
			case elf.PT_LOAD:
				if ph.Vaddr < lastLoad {
					t.Errorf("%s: PT_LOAD segments out of order", p)
				}
				lastLoad = ph.Vaddr
				if ph.Flags == elf.PF_R && ph.Vaddr <= sec.Addr && sec.Addr+sec.Size <= ph.Vaddr+ph.Filesz {
					loadOK = ph.Off%ph.Align == ph.Vaddr%ph.Align
				}
			case elffile.PT_GNU_SFRAME:
				sfOK = ph.Vaddr == sec.Addr && ph.Filesz == sec.Size && ph.Off == sec.Offset
			case elf.PT_PHDR:
				hasPhdr = true
				phdrOK = ph.Off == phoff && ph.Filesz == uint64(len(g.Progs))*56
			}
		}
		// Loaders that compute AT_PHDR as the first PT_LOAD's address
		// minus its offset plus e_phoff (qemu-user, Linux before 5.18)
		// must find the table there.
		var first *elf.Prog
		for _, ph := range g.Progs {
			if ph.Type == elf.PT_LOAD && (first == nil || ph.Vaddr < first.Vaddr) {
				first = ph
			}
		}
		for _, ph := range g.Progs {
			if ph.Type == elf.PT_LOAD && ph.Off <= phoff && phoff < ph.Off+ph.Filesz {
				if at := ph.Vaddr + phoff - ph.Off; at != first.Vaddr-first.Off+phoff {
					t.Errorf("%s: program headers at %#x, where old loaders look: %#x", p, at, first.Vaddr-first.Off+phoff)
				}
			}
		}
		if !sfOK || !loadOK || (hasPhdr && !phdrOK) {
			t.Errorf("%s: PT_GNU_SFRAME %v, PT_LOAD %v, PT_PHDR present %v ok %v", p, sfOK, loadOK, hasPhdr, phdrOK)
		}
		if haveReadelf == nil {
			tmp := t.TempDir() + "/out"
			os.WriteFile(tmp, out, 0o644)
			cmd := exec.Command("readelf", "-lSW", tmp)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Run(); err != nil || stderr.Len() > 0 {
				t.Errorf("%s: readelf: %v %s", p, err, stderr.String())
			}
		}
		n++
	}
	if n == 0 {
		t.Fatal("no corpus executables")
	}
}

// TestPlanRejects checks the inputs AddSFrameSegment refuses.
func TestPlanRejects(t *testing.T) {
	for _, c := range []struct {
		name string
		src  []byte
	}{
		{"empty", nil},
		{"not ELF", []byte("hello, world, this is not an ELF file at all......................")},
	} {
		if _, err := elffile.PlanSFrameSegment(c.src); err == nil {
			t.Errorf("%s: accepted", c.name)
		}
	}
	for _, p := range corpus.ELFs(t) {
		if strings.HasSuffix(p, ".o") {
			src, _ := os.ReadFile(p)
			if _, err := elffile.PlanSFrameSegment(src); err == nil {
				t.Errorf("%s: relocatable object accepted", p)
			}
			break
		}
	}
}
