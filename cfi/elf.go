package cfi

import (
	"debug/elf"
	"errors"
	"fmt"
	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/elffile"
)

// FromELF makes a Table for a CFI section of an ELF file: ".eh_frame" or
// ".debug_frame", or "" for .eh_frame if present and .debug_frame
// otherwise. It supplies what the encodings need: the section address
// (pcrel), .eh_frame_hdr (fast lookups), .text and .got (textrel,
// datarel), a reader for indirect pointers, and, in relocatable objects,
// the section's relocations applied as readelf applies them.
func FromELF(f *elf.File, section string) (*Table, error) {
	if section == "" {
		section = ".eh_frame"
		if f.Section(section) == nil {
			section = ".debug_frame"
		}
	}
	var kind SectionKind
	switch section {
	case ".eh_frame":
		kind = EHFrame
	case ".debug_frame", ".zdebug_frame":
		kind = DebugFrame
	default:
		return nil, fmt.Errorf("cfi: %s is not a CFI section", section)
	}
	s := f.Section(section)
	if s == nil {
		return nil, fmt.Errorf("cfi: no %s section", section)
	}
	if s.Type == elf.SHT_NOBITS {
		return nil, fmt.Errorf("cfi: %s has no data (NOBITS)", section)
	}
	// Relocations are applied as binutils readelf applies them to debug
	// sections (so that FDE addresses of an object become section-relative
	// symbol values rather than zeros), skipping those it cannot apply.
	data, err := elffile.SectionData(f, s, elffile.RelocatedLenient)
	if err != nil {
		return nil, err
	}
	o := Options{Kind: kind, Addr: s.Addr, ByteOrder: f.ByteOrder, AddrSize: elfAddrSize(f), Arch: arch.FromELF(f.Machine)}
	if t := f.Section(".text"); t != nil {
		o.TextBase = t.Addr
	}
	if g := f.Section(".got"); g != nil {
		o.DataBase = g.Addr
	}
	if f.Type != elf.ET_REL {
		o.ReadPointer = elfPointerReader(f)
	}
	if kind == EHFrame {
		if h := f.Section(".eh_frame_hdr"); h != nil && h.Type != elf.SHT_NOBITS {
			if hd, err := elffile.SectionData(f, h, elffile.Unrelocated); err == nil {
				o.Hdr, o.HdrAddr = hd, h.Addr
			}
		}
	}
	t, err := New(data, o)
	if err != nil {
		return nil, err
	}
	t.name = section
	return t, nil
}

func elfAddrSize(f *elf.File) int {
	if f.Class == elf.ELFCLASS32 {
		return 4
	}
	return 8
}

// elfPointerReader reads pointers from the file's allocated sections, to
// resolve DW_EH_PE_indirect encodings (which point into .data or .got).
func elfPointerReader(f *elf.File) func(uint64, int) (uint64, error) {
	return func(addr uint64, size int) (uint64, error) {
		for _, s := range f.Sections {
			if s.Flags&elf.SHF_ALLOC == 0 || s.Type == elf.SHT_NOBITS || addr < s.Addr || addr-s.Addr >= s.Size {
				continue
			}
			var b [8]byte
			if size > 8 || size <= 0 {
				return 0, errors.New("bad pointer size")
			}
			if _, err := elffile.ReadSectionAt(s, b[:size], int64(addr-s.Addr)); err != nil {
				return 0, err
			}
			if size == 4 {
				return uint64(f.ByteOrder.Uint32(b[:])), nil
			}
			return f.ByteOrder.Uint64(b[:]), nil
		}
		return 0, fmt.Errorf("address %#x is not in a loaded section", addr)
	}
}
