// Package elffile finds the sections sframekit reads in ELF files and
// returns their bytes as a consumer should see them: in relocatable
// objects, with the section's own relocations applied, the way objdump
// and readelf show them. It builds on debug/elf and adds only what that
// package leaves out: relocating arbitrary sections, BFD target names,
// decoding the headers of images debug/elf cannot open (cut short, or
// only partly in a process's memory) with one parser (Header), and
// writing ELF files: rewriting sections and adding a loadable segment.
// It knows ELF only; what goes into an SFrame section is the business
// of package sframegen.
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

// SectionIndex returns the index of sec in f's section header table, or
// -1 when sec is not one of f's sections.
func SectionIndex(f *elf.File, sec *elf.Section) int {
	for i, s := range f.Sections {
		if s == sec {
			return i
		}
	}
	return -1
}

// RelocSections returns the relocation sections (SHT_RELA and SHT_REL)
// that apply to sec, in section header order.
func RelocSections(f *elf.File, sec *elf.Section) []*elf.Section {
	var out []*elf.Section
	idx := SectionIndex(f, sec)
	for _, s := range f.Sections {
		if (s.Type == elf.SHT_RELA || s.Type == elf.SHT_REL) && int(s.Info) == idx {
			out = append(out, s)
		}
	}
	return out
}

// Reloc is one relocation entry, whatever its class and kind.
type Reloc struct {
	Off    uint64 // r_offset: where in the target section
	Sym    uint32 // symbol table index (0: none; debug/elf's Symbols()[Sym-1])
	Type   uint32 // machine-specific type
	Addend int64  // r_addend of a RELA entry; 0 for REL
	Rela   bool   // the entry is RELA (has an addend field)
}

// Relocs decodes the entries of the relocation section rs (SHT_RELA or
// SHT_REL, either class and byte order) of f. A partial entry at the end
// is ignored. The entries take about as much memory as the section's
// bytes.
func Relocs(f *elf.File, rs *elf.Section) ([]Reloc, error) {
	rd, err := sectionBytes(rs)
	if err != nil {
		return nil, fmt.Errorf("section %s: %w", rs.Name, err)
	}
	bo := f.ByteOrder
	is64 := f.Class == elf.ELFCLASS64
	rela := rs.Type == elf.SHT_RELA
	ent := relocSize(f, rs)
	out := make([]Reloc, 0, len(rd)/ent)
	for p := 0; p+ent <= len(rd); p += ent {
		r := Reloc{Rela: rela}
		if is64 {
			r.Off = bo.Uint64(rd[p:])
			info := bo.Uint64(rd[p+8:])
			r.Sym, r.Type = elf.R_SYM64(info), elf.R_TYPE64(info)
			if rela {
				r.Addend = int64(bo.Uint64(rd[p+16:]))
			}
		} else {
			r.Off = uint64(bo.Uint32(rd[p:]))
			info := bo.Uint32(rd[p+4:])
			r.Sym, r.Type = elf.R_SYM32(info), elf.R_TYPE32(info)
			if rela {
				r.Addend = int64(int32(bo.Uint32(rd[p+8:])))
			}
		}
		out = append(out, r)
	}
	return out, nil
}

func relocate(f *elf.File, sec *elf.Section, data []byte, lenient bool) ([]byte, error) {
	rels := RelocSections(f, sec)
	if len(rels) == 0 {
		return data, nil
	}
	syms, err := Symbols(f)
	if err != nil && !lenient {
		return nil, fmt.Errorf("section %s: relocations need the symbol table: %w", sec.Name, err)
	}
	out := data // SectionData's buffer is the caller's: relocate in place
	for _, rs := range rels {
		rr, err := Relocs(f, rs)
		if err != nil {
			if lenient {
				continue
			}
			return nil, err
		}
		for i, r := range rr {
			if err := apply(f, sec, syms, out, f.ByteOrder, r); err != nil && !lenient {
				return nil, fmt.Errorf("section %s: relocation at %#x in %s: %w", sec.Name, i*relocSize(f, rs), rs.Name, err)
			}
		}
	}
	return out, nil
}

// relocSize is the size of one entry of the relocation section rs.
func relocSize(f *elf.File, rs *elf.Section) int {
	n := 8 // offset and info words
	if rs.Type == elf.SHT_RELA {
		n = 12 // and an addend
	}
	if f.Class == elf.ELFCLASS64 {
		n *= 2
	}
	return n
}

// relocType is a relocation type the package applies: what it computes
// (S + A, less P when pcrel) and the width of the field (0: nothing).
type relocType struct {
	t     uint32
	pcrel bool
	size  int
}

// relocTypes lists the relocation types applied, per machine: those that
// compilers and assemblers use in .eh_frame and .debug_frame.
var relocTypes = map[elf.Machine][]relocType{
	elf.EM_X86_64: {
		{uint32(elf.R_X86_64_PC32), true, 4}, {uint32(elf.R_X86_64_PC64), true, 8},
		{uint32(elf.R_X86_64_64), false, 8}, {uint32(elf.R_X86_64_32), false, 4},
		{uint32(elf.R_X86_64_32S), false, 4}, {uint32(elf.R_X86_64_NONE), false, 0},
	},
	elf.EM_AARCH64: {
		{uint32(elf.R_AARCH64_PREL32), true, 4}, {uint32(elf.R_AARCH64_PREL64), true, 8},
		{uint32(elf.R_AARCH64_ABS64), false, 8}, {uint32(elf.R_AARCH64_ABS32), false, 4},
		{uint32(elf.R_AARCH64_NONE), false, 0},
	},
	elf.EM_S390: {
		{uint32(elf.R_390_PC32), true, 4}, {uint32(elf.R_390_PC64), true, 8},
		{uint32(elf.R_390_64), false, 8}, {uint32(elf.R_390_32), false, 4},
		{uint32(elf.R_390_NONE), false, 0},
	},
	elf.EM_386: {
		{uint32(elf.R_386_PC32), true, 4}, {uint32(elf.R_386_32), false, 4},
		{uint32(elf.R_386_NONE), false, 0},
	},
}

// relocKind describes what a relocation type computes and its width.
func relocKind(m elf.Machine, t uint32) (pcrel bool, size int, ok bool) {
	for _, r := range relocTypes[m] {
		if r.t == t {
			return r.pcrel, r.size, true
		}
	}
	return false, 0, false
}

// PCRelType returns machine m's PC-relative relocation type of the given
// width (4 or 8 bytes): what a field holding "target - field address"
// needs, e.g. R_X86_64_PC32 or R_X86_64_PC64.
func PCRelType(m elf.Machine, size int) (uint32, bool) {
	switch m {
	case elf.EM_X86_64:
		if size == 4 {
			return uint32(elf.R_X86_64_PC32), true
		}
		return uint32(elf.R_X86_64_PC64), true
	case elf.EM_AARCH64:
		if size == 4 {
			return uint32(elf.R_AARCH64_PREL32), true
		}
		return uint32(elf.R_AARCH64_PREL64), true
	case elf.EM_S390:
		if size == 4 {
			return uint32(elf.R_390_PC32), true
		}
		return uint32(elf.R_390_PC64), true
	}
	return 0, false
}

// apply computes S + A (- P for PC-relative types) into out. REL entries
// take their addend from the bytes being relocated.
func apply(f *elf.File, sec *elf.Section, syms []elf.Symbol, out []byte, order binary.ByteOrder, r Reloc) error {
	pcrel, size, ok := relocKind(f.Machine, r.Type)
	if !ok {
		return fmt.Errorf("unsupported relocation type %d for %s", r.Type, f.Machine)
	}
	if size == 0 {
		return nil
	}
	if r.Off > uint64(len(out)) || uint64(len(out))-r.Off < uint64(size) {
		return fmt.Errorf("offset %#x outside the %d-byte section", r.Off, len(out))
	}
	var s uint64
	if r.Sym != 0 {
		if int(r.Sym) > len(syms) {
			return fmt.Errorf("symbol index %d out of range", r.Sym)
		}
		sym := syms[r.Sym-1] // debug/elf drops the null symbol
		s = sym.Value
		if sym.Section != elf.SHN_UNDEF && sym.Section < elf.SHN_LORESERVE && int(sym.Section) < len(f.Sections) {
			s += f.Sections[sym.Section].Addr
		}
	}
	addend := r.Addend
	if !r.Rela {
		if size == 4 {
			addend = int64(int32(order.Uint32(out[r.Off:])))
		} else {
			addend = int64(order.Uint64(out[r.Off:]))
		}
	}
	v := s + uint64(addend)
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
