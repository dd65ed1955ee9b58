package elffile

import (
	"debug/elf"
	"fmt"
)

// SectionUpdate replaces the contents (and optionally the type) of one
// section in RewriteSections.
type SectionUpdate struct {
	// Index is the section's index in the section header table.
	Index int
	// Data is the new contents.
	Data []byte
	// Type, when non-zero, becomes the section's sh_type.
	Type elf.SectionType
}

// elfLayout is the header of an ELF image and the number of its program
// and section headers (extended numbering resolved), checked against
// the image's size.
type elfLayout struct {
	*Header
	phnum, shnum int
}

func parseLayout(src []byte) (*elfLayout, error) {
	h, err := DecodeHeader(src)
	if err != nil {
		return nil, err
	}
	l := &elfLayout{Header: h, phnum: int(h.Phnum), shnum: int(h.Shnum)}
	if h.Shoff == 0 {
		return nil, fmt.Errorf("no section header table")
	}
	if h.Shoff > uint64(len(src)) {
		return nil, fmt.Errorf("section header table outside the file")
	}
	if l.shnum == 0 || l.phnum == pnXNUM {
		// Extended numbering: the counts are in section 0's sh_size and
		// sh_info.
		sh, err := h.decodeSections(src[h.Shoff:], 1)
		if err != nil {
			return nil, err
		}
		if l.shnum == 0 {
			l.shnum = int(min(sh[0].Size, uint64(len(src))))
		}
		if l.phnum == pnXNUM {
			l.phnum = int(min(uint64(sh[0].Info), uint64(len(src))))
		}
	}
	if _, err := tableFits("section", len(src)-int(h.Shoff), l.shnum, int(h.Shentsize), h.sectionSize()); err != nil {
		return nil, err
	}
	if l.phnum > 0 {
		if h.Phoff > uint64(len(src)) {
			return nil, fmt.Errorf("program header table outside the file")
		}
		if _, err := tableFits("program", len(src)-int(h.Phoff), l.phnum, int(h.Phentsize), h.progSize()); err != nil {
			return nil, err
		}
	}
	return l, nil
}

func (l *elfLayout) shdrOff(i int) int { return int(l.Shoff) + i*int(l.Shentsize) }

func (l *elfLayout) phdrOff(i int) int { return int(l.Phoff) + i*int(l.Phentsize) }

// maxMoveAlign bounds the alignment of a section RewriteSections moves,
// and so the padding before it: 2 MiB, the largest page size in use.
const maxMoveAlign = 2 << 20

// RewriteSections returns a copy of the ELF image src in which the
// sections named by updates have new contents. Everything else is left
// byte for byte as it was. A section whose new contents fit in its old
// file space is rewritten in place, its size adjusted and the rest of the
// old space zeroed; one that grows is written at the end of the file
// (aligned to its sh_addralign) and its header pointed there, which is
// allowed only for sections that are not loaded (not SHF_ALLOC) or in
// relocatable objects. When a PT_GNU_SFRAME segment starts at a section
// that shrinks, the segment's sizes become the section's; a section
// rewritten with contents of the same size leaves the file as it was but
// for those contents.
//
// Limits: the output is the input plus the new contents and less than
// 2 MiB of padding per moved section (an alignment above 2 MiB is an
// error); the header tables are checked against the input's size
// before they are read.
func RewriteSections(src []byte, updates []SectionUpdate) ([]byte, error) {
	l, err := parseLayout(src)
	if err != nil {
		return nil, err
	}
	out := make([]byte, len(src), len(src)+totalLen(updates)+64)
	copy(out, src)
	for _, u := range updates {
		if u.Index <= 0 || u.Index >= l.shnum {
			return nil, fmt.Errorf("section index %d out of range [1, %d)", u.Index, l.shnum)
		}
		h, err := l.decodeSection(out[l.shdrOff(u.Index):])
		if err != nil {
			return nil, err
		}
		if elf.SectionType(h.Type) == elf.SHT_NOBITS {
			return nil, fmt.Errorf("section %d has no file contents (SHT_NOBITS)", u.Index)
		}
		if h.Off > uint64(len(src)) || uint64(len(src))-h.Off < h.Size {
			return nil, fmt.Errorf("section %d lies outside the file", u.Index)
		}
		newSize := uint64(len(u.Data))
		if u.Type != 0 {
			h.Type = uint32(u.Type)
		}
		if newSize <= h.Size {
			copy(out[h.Off:], u.Data)
			clear(out[h.Off+newSize : h.Off+h.Size])
			if newSize < h.Size {
				if err := l.shrinkSegment(out, h.Off, newSize); err != nil {
					return nil, err
				}
			}
		} else {
			if h.Flags&uint64(elf.SHF_ALLOC) != 0 && elf.Type(l.Type) != elf.ET_REL {
				return nil, fmt.Errorf("section %d grows from %d to %d bytes, and a loaded section of a linked file cannot move", u.Index, h.Size, newSize)
			}
			align := max(h.Addralign, 1)
			if align > maxMoveAlign {
				return nil, fmt.Errorf("section %d grows and would move to the end of the file, but its alignment %#x is more than %#x", u.Index, align, maxMoveAlign)
			}
			end := (uint64(len(out)) + align - 1) / align * align
			if !l.is64() && end+newSize > 1<<32 {
				return nil, fmt.Errorf("ELF32 file would exceed 4 GiB")
			}
			out = append(out, make([]byte, end-uint64(len(out)))...)
			out = append(out, u.Data...)
			h.Off = end
		}
		h.Size = newSize
		if err := l.encodeSection(out[l.shdrOff(u.Index):], &h); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// shrinkSegment updates a PT_GNU_SFRAME segment that starts at file
// offset off, where a section now holds n bytes: the segment's sizes
// become n (ld 2.47 makes the segment overhang the section; the new size
// is the exact one).
func (l *elfLayout) shrinkSegment(out []byte, off, n uint64) error {
	for i := 0; i < l.phnum; i++ {
		p, err := l.decodeProg(out[l.phdrOff(i):])
		if err != nil {
			return err
		}
		if elf.ProgType(p.Type) != PT_GNU_SFRAME || p.Off != off {
			continue
		}
		p.Filesz, p.Memsz = n, n
		if err := l.encodeProg(out[l.phdrOff(i):], &p); err != nil {
			return err
		}
	}
	return nil
}

func totalLen(us []SectionUpdate) int {
	n := 0
	for _, u := range us {
		n += len(u.Data)
	}
	return n
}
