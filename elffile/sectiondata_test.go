package elffile

import (
	"bytes"
	"debug/elf"
	"errors"
	"testing"

	"github.com/sframekit/sframekit/internal/elftest"
	"github.com/sframekit/sframekit/internal/memtest"
)

func open(t *testing.T, b []byte) *elf.File {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestSectionDataDecompresses checks that sections compressed every way
// debug/elf reads them come back as debug/elf's own Data gives them.
func TestSectionDataDecompresses(t *testing.T) {
	text := bytes.Repeat([]byte("call frame information "), 5000)
	rle := bytes.Repeat([]byte{'a'}, 3<<20) // zstd beyond zlib's ratio: read in two steps
	f := open(t, elftest.Build(elf.ET_EXEC, []elftest.Section{
		{Name: ".debug_frame", Type: elf.SHT_PROGBITS, Flags: elf.SHF_COMPRESSED, Data: elftest.Chdr(elf.COMPRESS_ZLIB, uint64(len(text)), elftest.Zlib(text))},
		{Name: ".debug_line", Type: elf.SHT_PROGBITS, Flags: elf.SHF_COMPRESSED, Data: elftest.Chdr(elf.COMPRESS_ZSTD, uint64(len(rle)), elftest.ZstdRLE(uint64(len(rle)), 'a'))},
		{Name: ".zdebug_str", Type: elf.SHT_PROGBITS, Data: elftest.ZDebug(uint64(len(text)), elftest.Zlib(text))},
		{Name: ".debug_info", Type: elf.SHT_PROGBITS, Flags: elf.SHF_COMPRESSED, Data: elftest.Chdr(elf.COMPRESS_ZLIB, 4<<20, elftest.ZlibZeros(4<<20))},
		{Name: ".text", Type: elf.SHT_PROGBITS, Flags: elf.SHF_ALLOC | elf.SHF_EXECINSTR, Data: text[:100]},
	}))
	for _, c := range []struct {
		name string
		want []byte
	}{{".debug_frame", text}, {".debug_line", rle}, {".zdebug_str", text}, {".debug_info", make([]byte, 4<<20)}, {".text", text[:100]}} {
		s := f.Section(c.name)
		got, err := SectionData(f, s, Unrelocated)
		if err != nil || !bytes.Equal(got, c.want) {
			t.Errorf("%s: %d bytes, %v; want %d bytes", c.name, len(got), err, len(c.want))
		}
		if ref, err := s.Data(); err != nil || !bytes.Equal(ref, got) {
			t.Errorf("%s: differs from debug/elf's Data (%v)", c.name, err)
		}
	}
	if _, err := DWARF(f); errors.Is(err, ErrTooLarge) {
		t.Errorf("DWARF rejected plausible sections: %v", err)
	}
}

// TestSectionDataRejects checks the declared sizes refused before any
// decompression: beyond MaxDecompressed, beyond what the stored bytes can
// expand to, and (for DWARF) beyond MaxDecompressed in all; and that a
// stream shorter than declared is an error.
func TestSectionDataRejects(t *testing.T) {
	small := elftest.Zlib([]byte("abc"))
	half := uint64(MaxDecompressed/2 + 1)
	f := open(t, elftest.Build(elf.ET_EXEC, []elftest.Section{
		{Name: ".debug_frame", Type: elf.SHT_PROGBITS, Flags: elf.SHF_COMPRESSED, Data: elftest.Chdr(elf.COMPRESS_ZLIB, MaxDecompressed+1, elftest.ZlibZeros(1<<20))},
		{Name: ".debug_line", Type: elf.SHT_PROGBITS, Flags: elf.SHF_COMPRESSED, Data: elftest.Chdr(elf.COMPRESS_ZSTD, 100<<20, small)},
		{Name: ".zdebug_str", Type: elf.SHT_PROGBITS, Data: elftest.ZDebug(1<<30>>4, small)},
		{Name: ".debug_abbrev", Type: elf.SHT_PROGBITS, Flags: elf.SHF_COMPRESSED, Data: elftest.Chdr(elf.COMPRESS_ZLIB, 1000, small)},
		{Name: ".debug_info", Type: elf.SHT_PROGBITS, Flags: elf.SHF_COMPRESSED, Data: elftest.Chdr(elf.COMPRESS_ZLIB, half, elftest.ZlibZeros(128<<20))},
		{Name: ".debug_ranges", Type: elf.SHT_PROGBITS, Flags: elf.SHF_COMPRESSED, Data: elftest.Chdr(elf.COMPRESS_ZLIB, half, elftest.ZlibZeros(128<<20))},
		{Name: ".symtab", Type: elf.SHT_SYMTAB, Flags: elf.SHF_COMPRESSED, Data: elftest.Chdr(elf.COMPRESS_ZLIB, 1<<30, elftest.ZlibZeros(1<<20)), Link: 7, EntSize: 24},
		{Name: ".strtab", Type: elf.SHT_STRTAB, Data: []byte{0}},
	}))
	for _, name := range []string{".debug_frame", ".debug_line", ".zdebug_str", ".symtab"} {
		if _, err := SectionData(f, f.Section(name), Unrelocated); !errors.Is(err, ErrTooLarge) {
			t.Errorf("%s: error %v, want ErrTooLarge", name, err)
		}
	}
	if _, err := SectionData(f, f.Section(".debug_abbrev"), Unrelocated); err == nil || errors.Is(err, ErrTooLarge) {
		t.Errorf(".debug_abbrev (3 bytes declared as 1000): error %v, want a decompression error", err)
	}
	for _, name := range []string{".debug_info", ".debug_ranges"} {
		if err := CheckSection(f.Section(name)); err != nil {
			t.Errorf("%s alone: %v", name, err)
		}
	}
	if err := CheckSections(f.Section(".debug_info"), f.Section(".debug_ranges")); !errors.Is(err, ErrTooLarge) {
		t.Errorf("two sections over the limit together: %v, want ErrTooLarge", err)
	}
	if _, err := DWARF(f); !errors.Is(err, ErrTooLarge) {
		t.Errorf("DWARF: %v, want ErrTooLarge", err)
	}
	if _, err := Symbols(f); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Symbols: %v, want ErrTooLarge", err)
	}
}

// TestDecompressionBombMemory reads a 1 MiB file whose compressed
// .debug_frame and .debug_line declare, and really expand to, 1 GiB each
// (issue 10: 6.65 GB of RSS for `sframe cfi`, 3 GB for `sframe stack -s`).
// The readers must refuse them without decompressing.
func TestDecompressionBombMemory(t *testing.T) {
	if memtest.InChild(t) {
		bomb := elftest.Chdr(elf.COMPRESS_ZLIB, 1<<30, elftest.ZlibZeros(1<<30))
		f := open(t, elftest.Build(elf.ET_REL, []elftest.Section{
			{Name: ".debug_frame", Type: elf.SHT_PROGBITS, Flags: elf.SHF_COMPRESSED, Data: bomb},
			{Name: ".debug_info", Type: elf.SHT_PROGBITS, Data: make([]byte, 64)},
			{Name: ".debug_line", Type: elf.SHT_PROGBITS, Flags: elf.SHF_COMPRESSED, Data: bomb},
		}))
		if _, err := SectionData(f, f.Section(".debug_frame"), RelocatedLenient); !errors.Is(err, ErrTooLarge) {
			t.Errorf("RelocatedData: %v, want ErrTooLarge", err)
		}
		if _, err := DWARF(f); !errors.Is(err, ErrTooLarge) {
			t.Errorf("DWARF: %v, want ErrTooLarge", err)
		}
		return
	}
	memtest.AtMost(t, 200<<20, "reading a 2 MiB file")
}
