package sframegen

import (
	"bytes"
	"debug/elf"
	"os"
	"path/filepath"
	"testing"

	"github.com/sframekit/sframekit/elffile"
	"github.com/sframekit/sframekit/internal/corpus"
	"github.com/sframekit/sframekit/sframe"
)

// loadImage reads the ELF file at path: its bytes and their parse.
func loadImage(t *testing.T, path string) ([]byte, *elf.File) {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return src, parseImage(t, src)
}

// parseImage parses an ELF image held in memory.
func parseImage(t *testing.T, src []byte) *elf.File {
	t.Helper()
	f, err := elffile.NewFile(src)
	if err != nil {
		t.Fatal(err)
	}
	return f.File
}

// contents returns the bytes of f's section name (nil when absent).
func contents(t *testing.T, f *elf.File, name string) []byte {
	t.Helper()
	var b []byte
	var err error
	if s := f.Section(name); s != nil {
		b, err = s.Data()
	}
	if err != nil || b == nil {
		t.Fatalf("section %s: %v", name, err)
	}
	return b
}

// TestToVersionBadInput: images that are not ELF, or are cut short, and
// v1 as a target are errors.
func TestToVersionBadInput(t *testing.T) {
	src, _ := loadImage(t, filepath.Join(corpus.Dir(t), "x86_64", "v3", "basic-O2.o"))
	for _, b := range [][]byte{nil, []byte("\x7fELF"), src[:64], append([]byte("xxxx"), src[4:]...)} {
		if _, err := ToVersion(b, ToVersionOptions{Version: 3}); err == nil {
			t.Errorf("ToVersion: no error for a %d-byte bad image", len(b))
		}
	}
	if _, err := ToVersion(src, ToVersionOptions{Version: 1}); err == nil {
		t.Error("conversion to v1 accepted")
	}
}

// TestToVersionMatchesGas converts each v2 object to v3: where binutils
// 2.47's v3 object of the same source has the same rows, the converted
// .sframe and .rela.sframe must be byte-identical to it.
func TestToVersionMatchesGas(t *testing.T) {
	identical, total := 0, 0
	for _, path := range corpus.ELFs(t) {
		if filepath.Base(filepath.Dir(path)) != "v2" || filepath.Ext(path) != ".o" {
			continue
		}
		ref := filepath.Join(filepath.Dir(filepath.Dir(path)), "v3", filepath.Base(path))
		want, err := os.ReadFile(ref)
		if err != nil {
			continue
		}
		src, _ := loadImage(t, path)
		res, err := ToVersion(src, ToVersionOptions{Version: sframe.Version3})
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		total++
		g, w := parseImage(t, res.Data), parseImage(t, want)
		gs, ws := contents(t, g, ".sframe"), contents(t, w, ".sframe")
		// gas pads s390x sections; compare the SFrame data proper.
		if len(ws) > len(gs) && bytes.Equal(ws[len(gs):], make([]byte, len(ws)-len(gs))) {
			ws = ws[:len(gs)]
		}
		if bytes.Equal(gs, ws) {
			identical++
			if !bytes.Equal(contents(t, g, ".rela.sframe"), contents(t, w, ".rela.sframe")) {
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

// TestToVersionOwnVersion converts every v2 and v3 corpus file (objects,
// executables, libraries; and their .sframe as a bare section) to the
// version it already has: the output is the input, byte for byte, with
// whatever start encoding and flags its producer chose (binutils 2.44's
// v2 has no SFRAME_F_FDE_FUNC_START_PCREL).
func TestToVersionOwnVersion(t *testing.T) {
	paths, versions := corpusFiles(t)
	for i, p := range paths {
		v := versions[i]
		src, f := loadImage(t, p)
		r, err := ToVersion(src, ToVersionOptions{Version: v})
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if !bytes.Equal(r.Data, src) || r.Segment != nil {
			t.Errorf("%s: converting to %v changed the file", p, v)
		}
		if f.Type == elf.ET_REL {
			continue // its bare section holds no starts without relocations
		}
		sec := elffile.FindSFrame(f, "")
		data := contents(t, f, sec.Name)
		rr, err := ToVersionRaw(data, sec.Addr, ToVersionOptions{Version: v})
		if err != nil || !bytes.Equal(rr.Data, data) {
			t.Errorf("%s: converting its bare .sframe to %v changed it (%v)", p, v, err)
		}
	}
	if len(paths) == 0 {
		t.Fatal("no v2 or v3 corpus files")
	}
}
