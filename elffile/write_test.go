package elffile

import (
	"bytes"
	"debug/elf"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/internal/corpus"
	"github.com/sframekit/sframekit/sframe"
)

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func openBytes(t *testing.T, b []byte) *elf.File {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func secData(t *testing.T, f *elf.File, name string) []byte {
	t.Helper()
	s := f.Section(name)
	if s == nil {
		t.Fatalf("no section %s", name)
	}
	b, err := s.Data()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRewriteSectionsObject grows one section of an object (it moves to
// the end of the file) and shrinks another (in place); every other
// section keeps its bytes.
func TestRewriteSectionsObject(t *testing.T) {
	src := readFile(t, filepath.Join(corpus.Dir(t), "x86_64", "v2", "basic-O2.o"))
	orig := bytes.Clone(src)
	f := openBytes(t, src)
	cIdx := sectionIndex(f, f.Section(".comment"))
	sIdx := sectionIndex(f, f.Section(".sframe"))
	grown := bytes.Repeat([]byte("grow"), 1000)
	small := []byte{1, 2, 3}
	out, err := RewriteSections(src, []SectionUpdate{{Index: cIdx, Data: grown}, {Index: sIdx, Data: small, Type: SHT_GNU_SFRAME}})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(src, orig) {
		t.Fatal("input modified")
	}
	g := openBytes(t, out)
	if !bytes.Equal(secData(t, g, ".comment"), grown) || !bytes.Equal(secData(t, g, ".sframe"), small) {
		t.Fatal("new contents not read back")
	}
	if g.Section(".comment").Offset < uint64(len(src)) || g.Section(".sframe").Offset != f.Section(".sframe").Offset {
		t.Errorf("grown section should move to the end, shrunk one stay")
	}
	if g.Section(".sframe").Type != SHT_GNU_SFRAME {
		t.Errorf("type not updated")
	}
	for i, s := range f.Sections {
		if i == cIdx || i == sIdx || s.Type == elf.SHT_NOBITS {
			continue
		}
		a, _ := s.Data()
		b, _ := g.Sections[i].Data()
		if !bytes.Equal(a, b) || s.Offset != g.Sections[i].Offset {
			t.Errorf("section %s changed", s.Name)
		}
	}
}

// TestRewriteSectionsLinked: a loaded section of an executable may
// shrink (PT_GNU_SFRAME follows) but not grow.
func TestRewriteSectionsLinked(t *testing.T) {
	src := readFile(t, filepath.Join(corpus.Dir(t), "x86_64", "v3", "basic-O2.elf"))
	f := openBytes(t, src)
	sec := f.Section(".sframe")
	idx := sectionIndex(f, sec)
	if _, err := RewriteSections(src, []SectionUpdate{{Index: idx, Data: make([]byte, sec.Size+1)}}); err == nil || !strings.Contains(err.Error(), "cannot move") {
		t.Errorf("growing .sframe of an executable: %v", err)
	}
	out, err := RewriteSections(src, []SectionUpdate{{Index: idx, Data: []byte{9, 9}}})
	if err != nil {
		t.Fatal(err)
	}
	g := openBytes(t, out)
	if !bytes.Equal(secData(t, g, ".sframe"), []byte{9, 9}) {
		t.Error("contents")
	}
	found := false
	for _, p := range g.Progs {
		if p.Type == PT_GNU_SFRAME {
			found = true
			if p.Filesz != 2 || p.Memsz != 2 || p.Off != sec.Offset {
				t.Errorf("PT_GNU_SFRAME %+v", p.ProgHeader)
			}
		}
	}
	if !found {
		t.Error("no PT_GNU_SFRAME")
	}
	// The freed bytes are zeroed.
	if !bytes.Equal(out[sec.Offset+2:sec.Offset+sec.Size], make([]byte, sec.Size-2)) {
		t.Error("old contents left behind")
	}
}

func TestRewriteSectionsBadInput(t *testing.T) {
	src := readFile(t, filepath.Join(corpus.Dir(t), "x86_64", "v3", "basic-O2.o"))
	for _, b := range [][]byte{nil, []byte("\x7fELF"), src[:64], append([]byte("xxxx"), src[4:]...)} {
		if _, err := RewriteSections(b, []SectionUpdate{{Index: 1}}); err == nil {
			t.Errorf("no error for a %d-byte bad image", len(b))
		}
		if _, err := ConvertSFrame(b, ConvertOptions{Version: 3}); err == nil {
			t.Errorf("ConvertSFrame: no error for a %d-byte bad image", len(b))
		}
	}
	if _, err := RewriteSections(src, []SectionUpdate{{Index: 1000}}); err == nil {
		t.Error("index out of range accepted")
	}
	if _, err := ConvertSFrame(src, ConvertOptions{Version: 1}); err == nil {
		t.Error("conversion to v1 accepted")
	}
}

// TestConvertMatchesGas converts each v2 object to v3: where binutils
// 2.47's v3 object of the same source has the same rows, the converted
// .sframe and .rela.sframe must be byte-identical to it.
func TestConvertMatchesGas(t *testing.T) {
	identical, total := 0, 0
	for _, path := range corpus.ELFs(t) {
		if filepath.Base(filepath.Dir(path)) != "v2" || !strings.HasSuffix(path, ".o") {
			continue
		}
		ref := filepath.Join(filepath.Dir(filepath.Dir(path)), "v3", filepath.Base(path))
		want, err := os.ReadFile(ref)
		if err != nil {
			continue
		}
		res, err := ConvertSFrame(readFile(t, path), ConvertOptions{Version: sframe.Version3})
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		total++
		g, w := openBytes(t, res.Data), openBytes(t, want)
		gs, ws := secData(t, g, ".sframe"), secData(t, w, ".sframe")
		// gas pads s390x sections; compare the SFrame data proper.
		if len(ws) > len(gs) && bytes.Equal(ws[len(gs):], make([]byte, len(ws)-len(gs))) {
			ws = ws[:len(gs)]
		}
		if bytes.Equal(gs, ws) {
			identical++
			if !bytes.Equal(secData(t, g, ".rela.sframe"), secData(t, w, ".rela.sframe")) {
				t.Errorf("%s: same .sframe as %s but different relocations", path, ref)
			}
		} else {
			t.Logf("%s: differs from %s (different rows from gas 2.44 and 2.47)", path, ref)
		}
	}
	t.Logf("%d of %d converted objects byte-identical to binutils 2.47's", identical, total)
	if identical == 0 {
		t.Error("no converted object matches binutils 2.47's")
	}
}

// TestConvertToOwnVersion converts every v2 and v3 corpus file (objects,
// executables, libraries; and their .sframe as a bare section) to the
// version it already has: the output is the input, byte for byte, with
// whatever start encoding and flags its producer chose (binutils 2.44's
// v2 has no SFRAME_F_FDE_FUNC_START_PCREL). v1 cannot be a target.
func TestConvertToOwnVersion(t *testing.T) {
	n := 0
	for _, p := range corpus.ELFs(t) {
		ver := filepath.Base(filepath.Dir(p))
		if ver != "v2" && ver != "v3" {
			continue
		}
		v := sframe.Version(ver[1] - '0')
		src := readFile(t, p)
		r, err := ConvertSFrame(src, ConvertOptions{Version: v})
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if !bytes.Equal(r.Data, src) || r.Segment != nil {
			t.Errorf("%s: converting to %v changed the file", p, v)
		}
		f := openBytes(t, src)
		if f.Type == elf.ET_REL {
			continue // its bare section holds no starts without relocations
		}
		sec := FindSFrame(f, "")
		data := secData(t, f, sec.Name)
		rr, err := ConvertRaw(data, sec.Addr, ConvertOptions{Version: v})
		if err != nil || !bytes.Equal(rr.Data, data) {
			t.Errorf("%s: converting its bare .sframe to %v changed it (%v)", p, v, err)
		}
		n++
	}
	if n == 0 {
		t.Fatal("no v2 or v3 corpus files")
	}
}
