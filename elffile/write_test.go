package elffile

import (
	"bytes"
	"debug/elf"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/internal/corpus"
)

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func openBytes(t testing.TB, b []byte) *elf.File {
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
	cIdx := SectionIndex(f, f.Section(".comment"))
	sIdx := SectionIndex(f, f.Section(".sframe"))
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
	idx := SectionIndex(f, sec)
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
	}
	if _, err := RewriteSections(src, []SectionUpdate{{Index: 1000}}); err == nil {
		t.Error("index out of range accepted")
	}
}

// TestRewriteSectionsHugeAlign: a section that grows moves to the end of
// the file at its alignment; an alignment no real file has (2^62) is an
// error, not 2^62 bytes of padding.
func TestRewriteSectionsHugeAlign(t *testing.T) {
	src := readFile(t, filepath.Join(corpus.Dir(t), "x86_64", "v2", "basic-O2.o"))
	f := openBytes(t, src)
	idx := SectionIndex(f, f.Section(".comment"))
	h, err := DecodeHeader(src)
	if err != nil {
		t.Fatal(err)
	}
	off := h.Shoff + uint64(idx)*uint64(h.Shentsize)
	sh, err := h.decodeSection(src[off:])
	if err != nil {
		t.Fatal(err)
	}
	sh.Addralign = 1 << 62
	bad := bytes.Clone(src)
	if err := h.encodeSection(bad[off:], &sh); err != nil {
		t.Fatal(err)
	}
	if _, err := RewriteSections(bad, []SectionUpdate{{Index: idx, Data: make([]byte, 1000)}}); err == nil || !strings.Contains(err.Error(), "alignment") {
		t.Errorf("growing a section aligned to 2^62: %v", err)
	}
	// The same section with a 2 MiB alignment still moves.
	sh.Addralign = 2 << 20
	h.encodeSection(bad[off:], &sh)
	out, err := RewriteSections(bad, []SectionUpdate{{Index: idx, Data: make([]byte, 1000)}})
	if err != nil {
		t.Fatal(err)
	}
	if g := openBytes(t, out).Sections[idx]; g.Offset%(2<<20) != 0 || g.Size != 1000 {
		t.Errorf("moved to %#x, %d bytes", g.Offset, g.Size)
	}
}
