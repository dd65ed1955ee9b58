// Package elffile finds the sections sframekit reads in ELF files and
// returns their bytes as a consumer should see them: in relocatable
// objects, with the section's own relocations applied, the way objdump
// and readelf show them. It builds on debug/elf and adds only what that
// package leaves out (relocating arbitrary sections, BFD target names).
package elffile

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
)

// SHT_GNU_SFRAME is the section type of .sframe since binutils 2.45.
const SHT_GNU_SFRAME elf.SectionType = 0x6ffffff4

// PT_GNU_SFRAME is the program header type of the segment holding .sframe.
const PT_GNU_SFRAME elf.ProgType = 0x6474e554

// FindSFrame returns the SFrame section named name, or when name is empty,
// the one named ".sframe" or else the first of type SHT_GNU_SFRAME.
func FindSFrame(f *elf.File, name string) *elf.Section {
	if name != "" {
		return f.Section(name)
	}
	if s := f.Section(".sframe"); s != nil {
		return s
	}
	for _, s := range f.Sections {
		if s.Type == SHT_GNU_SFRAME {
			return s
		}
	}
	return nil
}

// BFDName returns the name objdump prints after "file format" for f
// (the BFD target), e.g. "elf64-x86-64".
func BFDName(f *elf.File) string {
	bits := "32"
	if f.Class == elf.ELFCLASS64 {
		bits = "64"
	}
	little := f.Data == elf.ELFDATA2LSB
	switch f.Machine {
	case elf.EM_X86_64:
		return "elf" + bits + "-x86-64"
	case elf.EM_AARCH64:
		if little {
			return "elf" + bits + "-littleaarch64"
		}
		return "elf" + bits + "-bigaarch64"
	case elf.EM_S390:
		return "elf" + bits + "-s390"
	case elf.EM_386:
		return "elf32-i386"
	}
	if little {
		return "elf" + bits + "-little"
	}
	return "elf" + bits + "-big"
}

// Data returns the contents of sec. For a relocatable object, the
// relocations that target sec (its .rela section) are applied to a copy,
// so that PC-relative fields hold what the linker would compute for
// section addresses as they stand in the file (usually 0).
func Data(f *elf.File, sec *elf.Section) ([]byte, error) {
	data, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf("section %s: %w", sec.Name, err)
	}
	if f.Type != elf.ET_REL {
		return data, nil
	}
	return relocate(f, sec, data)
}

// relocSections returns the relocation sections that apply to sec.
func relocSections(f *elf.File, sec *elf.Section) []*elf.Section {
	var out []*elf.Section
	idx := -1
	for i, s := range f.Sections {
		if s == sec {
			idx = i
		}
	}
	for _, s := range f.Sections {
		if (s.Type == elf.SHT_RELA || s.Type == elf.SHT_REL) && int(s.Info) == idx {
			out = append(out, s)
		}
	}
	return out
}

func relocate(f *elf.File, sec *elf.Section, data []byte) ([]byte, error) {
	rels := relocSections(f, sec)
	if len(rels) == 0 {
		return data, nil
	}
	if f.Class != elf.ELFCLASS64 {
		return nil, fmt.Errorf("section %s: relocations of 32-bit objects are not supported", sec.Name)
	}
	syms, err := f.Symbols()
	if err != nil {
		return nil, fmt.Errorf("section %s: relocations need the symbol table: %w", sec.Name, err)
	}
	out := make([]byte, len(data))
	copy(out, data)
	order := f.ByteOrder
	for _, rs := range rels {
		if rs.Type != elf.SHT_RELA {
			return nil, fmt.Errorf("section %s: SHT_REL relocations are not supported", sec.Name)
		}
		rd, err := rs.Data()
		if err != nil {
			return nil, fmt.Errorf("section %s: %w", rs.Name, err)
		}
		for off := 0; off+24 <= len(rd); off += 24 {
			r := elf.Rela64{
				Off:    order.Uint64(rd[off:]),
				Info:   order.Uint64(rd[off+8:]),
				Addend: int64(order.Uint64(rd[off+16:])),
			}
			if err := apply(f, sec, syms, out, order, r); err != nil {
				return nil, fmt.Errorf("section %s: relocation at %#x in %s: %w", sec.Name, off, rs.Name, err)
			}
		}
	}
	return out, nil
}

// relocKind describes what a relocation type computes and its width.
func relocKind(m elf.Machine, t uint32) (pcrel bool, size int, ok bool) {
	switch m {
	case elf.EM_X86_64:
		switch elf.R_X86_64(t) {
		case elf.R_X86_64_PC32:
			return true, 4, true
		case elf.R_X86_64_PC64:
			return true, 8, true
		case elf.R_X86_64_64:
			return false, 8, true
		case elf.R_X86_64_32, elf.R_X86_64_32S:
			return false, 4, true
		case elf.R_X86_64_NONE:
			return false, 0, true
		}
	case elf.EM_AARCH64:
		switch elf.R_AARCH64(t) {
		case elf.R_AARCH64_PREL32:
			return true, 4, true
		case elf.R_AARCH64_PREL64:
			return true, 8, true
		case elf.R_AARCH64_ABS64:
			return false, 8, true
		case elf.R_AARCH64_ABS32:
			return false, 4, true
		case elf.R_AARCH64_NONE:
			return false, 0, true
		}
	case elf.EM_S390:
		switch elf.R_390(t) {
		case elf.R_390_PC32:
			return true, 4, true
		case elf.R_390_PC64:
			return true, 8, true
		case elf.R_390_64:
			return false, 8, true
		case elf.R_390_32:
			return false, 4, true
		case elf.R_390_NONE:
			return false, 0, true
		}
	}
	return false, 0, false
}

func apply(f *elf.File, sec *elf.Section, syms []elf.Symbol, out []byte, order binary.ByteOrder, r elf.Rela64) error {
	pcrel, size, ok := relocKind(f.Machine, elf.R_TYPE64(r.Info))
	if !ok {
		return fmt.Errorf("unsupported relocation type %d for %s", elf.R_TYPE64(r.Info), f.Machine)
	}
	if size == 0 {
		return nil
	}
	if r.Off > uint64(len(out)) || uint64(len(out))-r.Off < uint64(size) {
		return fmt.Errorf("offset %#x outside the %d-byte section", r.Off, len(out))
	}
	var s uint64
	if si := elf.R_SYM64(r.Info); si != 0 {
		if int(si) > len(syms) {
			return fmt.Errorf("symbol index %d out of range", si)
		}
		sym := syms[si-1] // debug/elf drops the null symbol
		s = sym.Value
		if sym.Section != elf.SHN_UNDEF && sym.Section < elf.SHN_LORESERVE && int(sym.Section) < len(f.Sections) {
			s += f.Sections[sym.Section].Addr
		}
	}
	v := s + uint64(r.Addend)
	if pcrel {
		v -= sec.Addr + r.Off
	}
	if size == 4 {
		order.PutUint32(out[r.Off:], uint32(v))
	} else {
		order.PutUint64(out[r.Off:], v)
	}
	return nil
}
