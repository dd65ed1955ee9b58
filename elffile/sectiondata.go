package elffile

import (
	"bytes"
	"debug/dwarf"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Reading section contents with decompression bounded.
//
// debug/elf decompresses an SHF_COMPRESSED or GNU .zdebug section whole,
// to the size its header declares, whenever Data, Open, DWARF or Symbols
// read it. That size comes from the file: four megabytes of zlib can
// declare, and expand to, four gigabytes. Every section sframekit reads
// goes through SectionData (whole), SectionReader (streamed) or
// ReadSectionAt (a few bytes), or for what debug/elf loads itself through
// DWARF, Symbols and DynamicSymbols: each checks the declared size first.
// TestGuardedReadsOnly fails on any other read of section bytes in the
// tree.

// MaxDecompressed is the most a compressed section may expand to, and the
// most the compressed sections one DWARF call loads may expand to
// together: 256 MiB. Real sections stay far below it (a libc debug file's
// largest, .debug_info, expands to about 10 MiB).
const MaxDecompressed = 256 << 20

// Largest expansions, in bytes out per compressed byte. Deflate's is
// 1032:1 (a 258-byte match in under two bits). A zstd block yields at most
// 128 KiB plus one match (128 KiB) from at least 4 bytes (an RLE block),
// so 64 Ki:1 bounds any compressed section; debug/elf does not say which
// algorithm an SHF_COMPRESSED section uses, so only .zdebug (always zlib)
// is held to zlib's ratio.
const (
	zlibMaxRatio = 1032
	anyMaxRatio  = 64 << 10
	// ratioSlack lets small sections through whatever their ratio: a
	// stream's fixed costs make small inputs look worse than they are.
	ratioSlack = 64 << 10
)

// ErrTooLarge is wrapped by the errors for a compressed section that
// declares more than it can hold or than MaxDecompressed.
var ErrTooLarge = errors.New("compressed section too large")

// Sizes returns the size a section has once read (for a compressed one,
// the size its header declares), the bytes it occupies in the file, and
// whether it is compressed (SHF_COMPRESSED, or a .zdebug section with its
// "ZLIB" header).
func Sizes(s *elf.Section) (size, stored uint64, compressed bool) {
	switch {
	case s.Type == elf.SHT_NOBITS:
		return s.Size, 0, false
	case s.Flags&elf.SHF_COMPRESSED != 0:
		// debug/elf read the compression header: Size is what it
		// declares.
		return s.Size, s.FileSize, true
	case strings.HasPrefix(s.Name, ".zdebug") && s.ReaderAt != nil:
		// debug/elf reads this header only when the section is opened.
		var h [12]byte
		if n, _ := s.ReadAt(h[:], 0); n == 12 && string(h[:4]) == "ZLIB" {
			return binary.BigEndian.Uint64(h[4:]), s.FileSize, true
		}
	}
	return s.FileSize, s.FileSize, false
}

// CheckSection returns an error wrapping ErrTooLarge when reading s would
// decompress more than MaxDecompressed or more than its compressed bytes
// can expand to; for an uncompressed section it returns nil.
func CheckSection(s *elf.Section) error {
	size, stored, compressed := Sizes(s)
	if !compressed {
		return nil
	}
	ratio := uint64(anyMaxRatio)
	if s.Flags&elf.SHF_COMPRESSED == 0 {
		ratio = zlibMaxRatio
	}
	if size > MaxDecompressed {
		return fmt.Errorf("section %s: declares %d bytes decompressed, over the %d MiB limit: %w", s.Name, size, MaxDecompressed>>20, ErrTooLarge)
	}
	if size > min(stored, MaxDecompressed)*ratio+ratioSlack {
		return fmt.Errorf("section %s: %d compressed bytes cannot hold the %d bytes declared: %w", s.Name, stored, size, ErrTooLarge)
	}
	return nil
}

// Relocation says what SectionData does with the relocations that apply
// to a section of a relocatable object (ET_REL); a section of any other
// file is the same in all three.
type Relocation uint8

const (
	// Unrelocated: the bytes as stored (decompressed), for sections no
	// relocation targets and for printers showing what the file holds.
	Unrelocated Relocation = iota
	// Relocated: the relocations that target the section (its .rela or
	// .rel sections) applied to the bytes, so that PC-relative fields hold
	// what the linker would compute for section addresses as they stand
	// in the file (usually 0): what objdump shows. A relocation it cannot
	// apply is an error.
	Relocated
	// RelocatedLenient is Relocated skipping the relocations it cannot
	// apply (unknown types, symbols out of range, offsets outside the
	// section), as readelf does for debug sections.
	RelocatedLenient
)

// SectionData returns the contents of s, a section of f, decompressed
// and relocated as rel says: the one way sframekit reads a section's
// bytes. A compressed section is checked with CheckSection first and
// decompressed as a stream into a buffer that grows only as far as the
// data really expands: at most its declared size, itself at most
// MaxDecompressed (256 MiB). Uncompressed contents are read as debug/elf
// reads them (bounded by the file). Errors name the section.
func SectionData(f *elf.File, s *elf.Section, rel Relocation) ([]byte, error) {
	data, err := sectionBytes(s)
	if err != nil || rel == Unrelocated || f.Type != elf.ET_REL {
		return data, err
	}
	return relocate(f, s, data, rel == RelocatedLenient)
}

// sectionBytes is SectionData without relocations.
func sectionBytes(s *elf.Section) ([]byte, error) {
	size, stored, compressed := Sizes(s)
	if !compressed {
		data, err := s.Data()
		if err != nil {
			return nil, fmt.Errorf("section %s: %w", s.Name, err)
		}
		return data, nil
	}
	if err := CheckSection(s); err != nil {
		return nil, err
	}
	r := s.Open()
	// First as much as zlib could make of the stored bytes; the rest
	// (only zstd expands further) once the stream has shown it has it.
	buf := make([]byte, min(size, min(stored, MaxDecompressed)*zlibMaxRatio+ratioSlack))
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, fmt.Errorf("section %s: decompressing: %w", s.Name, err)
	}
	if n := len(buf); uint64(n) < size {
		buf = append(buf, make([]byte, size-uint64(n))...)
		if _, err := io.ReadFull(r, buf[n:]); err != nil {
			return nil, fmt.Errorf("section %s: decompressing: %w", s.Name, err)
		}
	}
	return buf, nil
}

// SectionReader returns a reader of s's contents, decompressed as they
// are read, once CheckSection passes: for a table read once in pieces
// (a symbol table scanned for a few addresses) rather than held whole.
// Unrelocated; a section without contents (SHT_NOBITS) reads as empty.
func SectionReader(s *elf.Section) (io.ReadSeeker, error) {
	if err := CheckSection(s); err != nil {
		return nil, err
	}
	if s.Type == elf.SHT_NOBITS {
		return bytes.NewReader(nil), nil
	}
	return s.Open(), nil
}

// ReadSectionAt reads len(p) bytes of s's contents (unrelocated) at off,
// as io.ReaderAt does. For a compressed section (which debug/elf gives
// no ReadAt) the stream is decompressed up to off+len(p), within
// CheckSection's bounds.
func ReadSectionAt(s *elf.Section, p []byte, off int64) (int, error) {
	if _, _, compressed := Sizes(s); !compressed {
		if s.Type == elf.SHT_NOBITS || s.ReaderAt == nil {
			return 0, fmt.Errorf("section %s: no contents in the file", s.Name)
		}
		return s.ReadAt(p, off)
	}
	r, err := SectionReader(s)
	if err != nil {
		return 0, err
	}
	if _, err := r.Seek(off, io.SeekStart); err != nil {
		return 0, fmt.Errorf("section %s: %w", s.Name, err)
	}
	return io.ReadFull(r, p)
}

// CheckSections checks each section with CheckSection and that the
// compressed ones together declare at most MaxDecompressed.
func CheckSections(ss ...*elf.Section) error {
	var total uint64
	for _, s := range ss {
		if s == nil {
			continue
		}
		if err := CheckSection(s); err != nil {
			return err
		}
		if size, _, compressed := Sizes(s); compressed {
			total += size
		}
	}
	if total > MaxDecompressed {
		return fmt.Errorf("compressed sections declare %d bytes decompressed in all, over the %d MiB limit: %w", total, MaxDecompressed>>20, ErrTooLarge)
	}
	return nil
}

// DWARF returns f.DWARF() once the sections it loads (every .debug_* and
// .zdebug_* section, and the relocations applied to them) pass
// CheckSections: debug/elf decompresses each of them whole.
func DWARF(f *elf.File) (*dwarf.Data, error) {
	var ss []*elf.Section
	for i, s := range f.Sections {
		if strings.HasPrefix(s.Name, ".debug_") || strings.HasPrefix(s.Name, ".zdebug_") {
			ss = append(ss, s)
			for _, r := range f.Sections {
				if (r.Type == elf.SHT_RELA || r.Type == elf.SHT_REL) && int(r.Info) == i {
					ss = append(ss, r)
				}
			}
		}
	}
	if err := CheckSections(ss...); err != nil {
		return nil, err
	}
	return f.DWARF()
}

// Symbols returns f.Symbols() once the symbol table and its string table
// pass CheckSections.
func Symbols(f *elf.File) ([]elf.Symbol, error) {
	if err := checkSymtab(f, elf.SHT_SYMTAB); err != nil {
		return nil, err
	}
	return f.Symbols()
}

// DynamicSymbols returns f.DynamicSymbols() once the dynamic symbol table
// and its string table pass CheckSections.
func DynamicSymbols(f *elf.File) ([]elf.Symbol, error) {
	if err := checkSymtab(f, elf.SHT_DYNSYM); err != nil {
		return nil, err
	}
	return f.DynamicSymbols()
}

// checkSymtab checks the first section of type typ (the one debug/elf
// reads) and the string table it links to.
func checkSymtab(f *elf.File, typ elf.SectionType) error {
	for _, s := range f.Sections {
		if s.Type != typ {
			continue
		}
		var str *elf.Section
		if s.Link > 0 && int(s.Link) < len(f.Sections) {
			str = f.Sections[s.Link]
		}
		return CheckSections(s, str)
	}
	return nil
}
