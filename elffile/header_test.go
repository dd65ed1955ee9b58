package elffile

import (
	"bytes"
	"debug/elf"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/internal/corpus"
)

// elf32Sources are programs for the 32-bit targets GNU as and ld build
// here: i386 (little-endian) and 31-bit s390 (big-endian).
var elf32Sources = []struct{ name, as, asFlag, ld, emul, src string }{
	{"i386", "x86_64-linux-gnu-as", "--32", "x86_64-linux-gnu-ld", "elf_i386",
		".globl _start\n.text\n_start:\n\tmovl $1, %eax\n\tint $0x80\n.data\nx: .long 1\n"},
	{"s390", "s390x-linux-gnu-as", "-m31", "s390x-linux-gnu-ld", "elf_s390",
		".globl _start\n.text\n_start:\n\tbr %r14\n.data\nx: .long 1\n"},
}

// build32 assembles and links the elf32Sources: a relocatable object
// and an executable of each. Without the tools it skips (fails in CI).
func build32(t *testing.T) []string {
	t.Helper()
	dir := t.TempDir()
	var out []string
	for _, s := range elf32Sources {
		for _, tool := range []string{s.as, s.ld} {
			if _, err := exec.LookPath(tool); err != nil {
				if os.Getenv("CI") != "" {
					t.Fatalf("%s not installed", tool)
				}
				t.Skipf("%s not installed: no 32-bit ELF files to test with", tool)
			}
		}
		src, obj, exe := filepath.Join(dir, s.name+".s"), filepath.Join(dir, s.name+".o"), filepath.Join(dir, s.name+".elf")
		if err := os.WriteFile(src, []byte(s.src), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, cmd := range [][]string{{s.as, s.asFlag, "-o", obj, src}, {s.ld, "-m", s.emul, "-o", exe, obj}} {
			if b, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", strings.Join(cmd, " "), err, b)
			}
		}
		out = append(out, obj, exe)
	}
	return out
}

// TestDecodeHeaderMatchesDebugELF decodes the headers of every corpus
// file (64-bit, little- and big-endian) and of 32-bit files of both byte
// orders made by GNU as and ld, and compares every field with what
// debug/elf reads; encoding the decoded headers back gives the file's
// bytes.
func TestDecodeHeaderMatchesDebugELF(t *testing.T) {
	paths := append(build32(t), corpus.ELFs(t)...)
	classes := map[elf.Class]map[elf.Data]int{elf.ELFCLASS32: {}, elf.ELFCLASS64: {}}
	for _, p := range paths {
		src := readFile(t, p)
		f := openBytes(t, src)
		h, err := DecodeHeader(src)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		classes[h.Class][f.Data]++
		if h.Class != f.Class || h.ByteOrder != f.ByteOrder || elf.Type(h.Type) != f.Type ||
			elf.Machine(h.Machine) != f.Machine || h.Entry != f.Entry || elf.OSABI(h.Ident[elf.EI_OSABI]) != f.OSABI {
			t.Errorf("%s: header %+v, debug/elf %+v", p, h, f.FileHeader)
		}
		if r, err := ReadHeader(bytes.NewReader(src)); err != nil || *r != *h {
			t.Errorf("%s: ReadHeader %+v, %v", p, r, err)
		}
		progs, err := h.DecodeProgs(src[h.Phoff:], int(h.Phnum))
		if err != nil || len(progs) != len(f.Progs) {
			t.Fatalf("%s: %d program headers (%v), debug/elf %d", p, len(progs), err, len(f.Progs))
		}
		for i, ph := range progs {
			w := f.Progs[i].ProgHeader
			if g := (elf.ProgHeader{Type: elf.ProgType(ph.Type), Flags: elf.ProgFlag(ph.Flags), Off: ph.Off, Vaddr: ph.Vaddr,
				Paddr: ph.Paddr, Filesz: ph.Filesz, Memsz: ph.Memsz, Align: ph.Align}); g != w {
				t.Errorf("%s: program header %d: %+v, debug/elf %+v", p, i, g, w)
			}
		}
		secs, err := h.decodeSections(src[h.Shoff:], int(h.Shnum))
		if err != nil || len(secs) != len(f.Sections) {
			t.Fatalf("%s: %d section headers (%v), debug/elf %d", p, len(secs), err, len(f.Sections))
		}
		for i, sh := range secs {
			w := f.Sections[i].SectionHeader
			if sh.Type != uint32(w.Type) || sh.Flags != uint64(w.Flags) || sh.Addr != w.Addr || sh.Off != w.Offset ||
				sh.Size != w.FileSize || sh.Link != w.Link || sh.Info != w.Info || sh.Addralign != w.Addralign || sh.Entsize != w.Entsize {
				t.Errorf("%s: section header %d (%s): %+v, debug/elf %+v", p, i, w.Name, sh, w)
			}
		}
		// Encoding every header back reproduces the file.
		out := bytes.Clone(src)
		clear(out[:h.Ehsize])
		if err := h.encode(out); err != nil {
			t.Fatal(err)
		}
		for i := range progs {
			off := h.Phoff + uint64(i)*uint64(h.Phentsize)
			clear(out[off : off+uint64(h.progSize())])
			if err := h.encodeProg(out[off:], &progs[i]); err != nil {
				t.Fatal(err)
			}
		}
		for i := range secs {
			off := h.Shoff + uint64(i)*uint64(h.Shentsize)
			clear(out[off : off+uint64(h.sectionSize())])
			if err := h.encodeSection(out[off:], &secs[i]); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(out, src) {
			t.Errorf("%s: headers encoded back differ from the file's", p)
		}
	}
	for c, byData := range classes {
		if byData[elf.ELFDATA2LSB] == 0 || byData[elf.ELFDATA2MSB] == 0 {
			t.Errorf("%v: files per byte order %v: both orders are needed", c, byData)
		}
	}
}

// TestDecodeHeaderErrors: no magic is ErrNotELF; a header cut short is a
// TruncatedError wanting the class's header size (64 bytes while the
// class byte is missing); a table that does not fit is an error.
func TestDecodeHeaderErrors(t *testing.T) {
	src := readFile(t, sample)
	h32 := bytes.Clone(src[:52])
	h32[elf.EI_CLASS] = byte(elf.ELFCLASS32)
	for _, c := range []struct {
		data []byte
		want TruncatedError
	}{{src[:4], TruncatedError{4, 64}}, {src[:63], TruncatedError{63, 64}}, {h32[:51], TruncatedError{51, 52}}} {
		var te *TruncatedError
		if _, err := DecodeHeader(c.data); !errors.As(err, &te) || *te != c.want {
			t.Errorf("%d bytes: %v, want %v", len(c.data), err, &c.want)
		}
	}
	if h, err := DecodeHeader(h32); err != nil || h.Class != elf.ELFCLASS32 {
		t.Errorf("52-byte 32-bit header: %v", err)
	}
	if _, err := DecodeHeader([]byte("\x7fELX")); !errors.Is(err, ErrNotELF) {
		t.Errorf("bad magic: %v", err)
	}
	bad := bytes.Clone(src)
	bad[elf.EI_CLASS] = 3
	if _, err := DecodeHeader(bad); err == nil {
		t.Error("unknown class accepted")
	}
	h, err := DecodeHeader(src)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.DecodeProgs(src[h.Phoff:h.Phoff+uint64(h.Phnum)*56-1], int(h.Phnum)); err == nil {
		t.Error("program header table one byte short accepted")
	}
	h.Phentsize = 55
	if _, err := h.DecodeProgs(src[h.Phoff:], int(h.Phnum)); err == nil {
		t.Error("program header entry size 55 accepted")
	}
}

// TestRewriteSections32 rewrites sections of 32-bit objects of both
// byte orders: one shrinks in place, one grows and moves to the end;
// debug/elf reads the new contents back and every other section as it
// was.
func TestRewriteSections32(t *testing.T) {
	for _, p := range build32(t) {
		if filepath.Ext(p) != ".o" {
			continue
		}
		src := readFile(t, p)
		f := openBytes(t, src)
		dIdx, sIdx := SectionIndex(f, f.Section(".data")), SectionIndex(f, f.Section(".strtab"))
		grown := append(bytes.Clone(secData(t, f, ".strtab")), bytes.Repeat([]byte("grow\x00"), 100)...)
		out, err := RewriteSections(src, []SectionUpdate{{Index: dIdx, Data: []byte{7}}, {Index: sIdx, Data: grown}})
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		g := openBytes(t, out)
		if !bytes.Equal(secData(t, g, ".data"), []byte{7}) || !bytes.Equal(secData(t, g, ".strtab"), grown) {
			t.Errorf("%s: new contents not read back", p)
		}
		if g.Sections[sIdx].Offset < uint64(len(src)) {
			t.Errorf("%s: grown .strtab did not move to the end", p)
		}
		for i, s := range f.Sections {
			if i == dIdx || i == sIdx || s.Type == elf.SHT_NOBITS {
				continue
			}
			a, _ := s.Data()
			b, _ := g.Sections[i].Data()
			if !bytes.Equal(a, b) || s.SectionHeader != g.Sections[i].SectionHeader {
				t.Errorf("%s: section %s changed", p, s.Name)
			}
		}
	}
}

// FuzzRewriteSections decodes the headers of arbitrary bytes (seeded
// with the sample executable and a 32-bit big-endian header) and
// rewrites a section: no panic, and the output is never more than the
// input, the new contents and the padding RewriteSections allows.
func FuzzRewriteSections(f *testing.F) {
	src, err := os.ReadFile(sample)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(src, 1, 0)
	f.Add(src, 20, 100)
	f.Add([]byte("\x7fELF\x01\x02\x01"+string(make([]byte, 60))), 1, 0)
	f.Fuzz(func(t *testing.T, data []byte, index, size int) {
		h, err := DecodeHeader(data)
		if err != nil {
			return
		}
		if h.Phoff <= uint64(len(data)) {
			h.DecodeProgs(data[h.Phoff:], int(h.Phnum))
		}
		if h.Shoff <= uint64(len(data)) {
			h.decodeSections(data[h.Shoff:], int(h.Shnum))
		}
		out, err := RewriteSections(data, []SectionUpdate{{Index: index, Data: make([]byte, size&0xfff)}})
		if err == nil && len(out) > len(data)+size&0xfff+maxMoveAlign {
			t.Fatalf("%d bytes rewritten into %d", len(data), len(out))
		}
	})
}
