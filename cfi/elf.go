package cfi

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
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
	data, err := SectionData(f, s)
	if err != nil {
		return nil, err
	}
	o := Options{Kind: kind, Addr: s.Addr, ByteOrder: f.ByteOrder, AddrSize: elfAddrSize(f), Arch: ArchFromELF(f.Machine)}
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
			if hd, err := h.Data(); err == nil {
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
			if _, err := s.ReadAt(b[:size], int64(addr-s.Addr)); err != nil {
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

// SectionData returns a section's bytes, decompressed, and for a
// relocatable object with its relocations applied the way binutils readelf
// applies them to debug sections (so FDE addresses become section-relative
// symbol values rather than zeros).
func SectionData(f *elf.File, s *elf.Section) ([]byte, error) {
	data, err := s.Data()
	if err != nil {
		return nil, fmt.Errorf("cfi: reading %s: %v", s.Name, err)
	}
	if f.Type != elf.ET_REL {
		return data, nil
	}
	idx := -1
	for i, x := range f.Sections {
		if x == s {
			idx = i
		}
	}
	var syms []elf.Symbol
	symsLoaded := false
	for _, r := range f.Sections {
		if (r.Type != elf.SHT_RELA && r.Type != elf.SHT_REL) || int(r.Info) != idx {
			continue
		}
		if !symsLoaded {
			syms, _ = f.Symbols()
			symsLoaded = true
		}
		rd, err := r.Data()
		if err != nil {
			continue
		}
		applyRelocs(f, data, rd, r.Type == elf.SHT_RELA, syms)
	}
	return data, nil
}

// relocKind maps a relocation type to its size and whether it is
// PC-relative, for the types readelf knows for debug sections. size 0
// means "skip" (NONE or unsupported).
func relocKind(m elf.Machine, typ uint32) (size int, pcrel bool) {
	switch m {
	case elf.EM_X86_64:
		switch elf.R_X86_64(typ) {
		case elf.R_X86_64_64:
			return 8, false
		case elf.R_X86_64_PC32:
			return 4, true
		case elf.R_X86_64_32, elf.R_X86_64_32S:
			return 4, false
		case elf.R_X86_64_PC64:
			return 8, true
		}
	case elf.EM_AARCH64:
		switch elf.R_AARCH64(typ) {
		case elf.R_AARCH64_ABS64:
			return 8, false
		case elf.R_AARCH64_ABS32:
			return 4, false
		case elf.R_AARCH64_PREL64:
			return 8, true
		case elf.R_AARCH64_PREL32:
			return 4, true
		}
	case elf.EM_S390:
		switch elf.R_390(typ) {
		case elf.R_390_32:
			return 4, false
		case elf.R_390_PC32:
			return 4, true
		case elf.R_390_64:
			return 8, false
		case elf.R_390_PC64:
			return 8, true
		}
	case elf.EM_386:
		switch elf.R_386(typ) {
		case elf.R_386_32:
			return 4, false
		case elf.R_386_PC32:
			return 4, true
		}
	}
	return 0, false
}

func applyRelocs(f *elf.File, data, rel []byte, rela bool, syms []elf.Symbol) {
	bo := f.ByteOrder
	is64 := f.Class == elf.ELFCLASS64
	ent := 8
	switch {
	case is64 && rela:
		ent = 24
	case is64:
		ent = 16
	case rela:
		ent = 12
	}
	for p := 0; p+ent <= len(rel); p += ent {
		var off uint64
		var symIdx, typ uint32
		var addend int64
		if is64 {
			off = bo.Uint64(rel[p:])
			info := bo.Uint64(rel[p+8:])
			symIdx, typ = uint32(info>>32), uint32(info)
			if rela {
				addend = int64(bo.Uint64(rel[p+16:]))
			}
		} else {
			off = uint64(bo.Uint32(rel[p:]))
			info := bo.Uint32(rel[p+4:])
			symIdx, typ = info>>8, info&0xff
			if rela {
				addend = int64(int32(bo.Uint32(rel[p+8:])))
			}
		}
		size, pcrel := relocKind(f.Machine, typ)
		if size == 0 || off > uint64(len(data)) || uint64(len(data))-off < uint64(size) {
			continue
		}
		var symVal uint64
		if symIdx != 0 {
			if int(symIdx) > len(syms) {
				continue
			}
			symVal = syms[symIdx-1].Value
		}
		if !rela {
			if size == 4 {
				addend = int64(int32(bo.Uint32(data[off:])))
			} else {
				addend = int64(bo.Uint64(data[off:]))
			}
		}
		v := symVal + uint64(addend)
		if pcrel {
			v -= off
		}
		putUint(bo, data[off:], size, v)
	}
}

func putUint(bo binary.ByteOrder, b []byte, size int, v uint64) {
	if size == 4 {
		bo.PutUint32(b, uint32(v))
	} else {
		bo.PutUint64(b, v)
	}
}
