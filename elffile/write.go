package elffile

import (
	"debug/elf"
	"encoding/binary"
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

// elfLayout gives the positions of the headers of an ELF image.
type elfLayout struct {
	is64      bool
	order     binary.ByteOrder
	typ       elf.Type
	shoff     uint64
	shentsize int
	shnum     int
	phoff     uint64
	phentsize int
	phnum     int
}

func parseLayout(src []byte) (*elfLayout, error) {
	if len(src) < 52 || string(src[:4]) != elf.ELFMAG {
		return nil, fmt.Errorf("not an ELF file")
	}
	l := &elfLayout{}
	switch elf.Class(src[elf.EI_CLASS]) {
	case elf.ELFCLASS64:
		l.is64 = true
	case elf.ELFCLASS32:
	default:
		return nil, fmt.Errorf("unknown ELF class %d", src[elf.EI_CLASS])
	}
	switch elf.Data(src[elf.EI_DATA]) {
	case elf.ELFDATA2LSB:
		l.order = binary.LittleEndian
	case elf.ELFDATA2MSB:
		l.order = binary.BigEndian
	default:
		return nil, fmt.Errorf("unknown ELF data encoding %d", src[elf.EI_DATA])
	}
	o := l.order
	l.typ = elf.Type(o.Uint16(src[16:]))
	if l.is64 {
		if len(src) < 64 {
			return nil, fmt.Errorf("truncated ELF header")
		}
		l.phoff = o.Uint64(src[32:])
		l.shoff = o.Uint64(src[40:])
		l.phentsize = int(o.Uint16(src[54:]))
		l.phnum = int(o.Uint16(src[56:]))
		l.shentsize = int(o.Uint16(src[58:]))
		l.shnum = int(o.Uint16(src[60:]))
	} else {
		l.phoff = uint64(o.Uint32(src[28:]))
		l.shoff = uint64(o.Uint32(src[32:]))
		l.phentsize = int(o.Uint16(src[42:]))
		l.phnum = int(o.Uint16(src[44:]))
		l.shentsize = int(o.Uint16(src[46:]))
		l.shnum = int(o.Uint16(src[48:]))
	}
	minSh, minPh := 40, 32
	if l.is64 {
		minSh, minPh = 64, 56
	}
	if l.shoff == 0 {
		return nil, fmt.Errorf("no section header table")
	}
	if l.shentsize < minSh {
		return nil, fmt.Errorf("section header entry size %d too small", l.shentsize)
	}
	if l.shoff > uint64(len(src)) || uint64(len(src))-l.shoff < uint64(l.shentsize) {
		return nil, fmt.Errorf("section header table outside the file")
	}
	if l.shnum == 0 {
		// Extended numbering: the count is in section 0's sh_size.
		sh := l.readShdr(src, 0)
		l.shnum = int(min(sh.size, uint64(len(src))))
	}
	if (uint64(len(src))-l.shoff)/uint64(l.shentsize) < uint64(l.shnum) {
		return nil, fmt.Errorf("section header table (%d entries) runs past the end of the file", l.shnum)
	}
	if l.phnum > 0 {
		if l.phentsize < minPh || l.phoff > uint64(len(src)) || (uint64(len(src))-l.phoff)/uint64(l.phentsize) < uint64(l.phnum) {
			return nil, fmt.Errorf("program header table outside the file")
		}
	}
	return l, nil
}

// shdr holds the section header fields the writer reads or changes.
type shdr struct {
	typ       elf.SectionType
	flags     uint64
	offset    uint64
	size      uint64
	addralign uint64
}

func (l *elfLayout) shdrOff(i int) int { return int(l.shoff) + i*l.shentsize }

func (l *elfLayout) readShdr(src []byte, i int) shdr {
	p := src[l.shdrOff(i):]
	o := l.order
	if l.is64 {
		return shdr{elf.SectionType(o.Uint32(p[4:])), o.Uint64(p[8:]), o.Uint64(p[24:]), o.Uint64(p[32:]), o.Uint64(p[48:])}
	}
	return shdr{elf.SectionType(o.Uint32(p[4:])), uint64(o.Uint32(p[8:])), uint64(o.Uint32(p[16:])), uint64(o.Uint32(p[20:])), uint64(o.Uint32(p[32:]))}
}

func (l *elfLayout) writeShdr(dst []byte, i int, h shdr) {
	p := dst[l.shdrOff(i):]
	o := l.order
	o.PutUint32(p[4:], uint32(h.typ))
	if l.is64 {
		o.PutUint64(p[24:], h.offset)
		o.PutUint64(p[32:], h.size)
		return
	}
	o.PutUint32(p[16:], uint32(h.offset))
	o.PutUint32(p[20:], uint32(h.size))
}

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
		h := l.readShdr(out, u.Index)
		if h.typ == elf.SHT_NOBITS {
			return nil, fmt.Errorf("section %d has no file contents (SHT_NOBITS)", u.Index)
		}
		if h.offset > uint64(len(src)) || uint64(len(src))-h.offset < h.size {
			return nil, fmt.Errorf("section %d lies outside the file", u.Index)
		}
		newSize := uint64(len(u.Data))
		if u.Type != 0 {
			h.typ = u.Type
		}
		if newSize <= h.size {
			copy(out[h.offset:], u.Data)
			clear(out[h.offset+newSize : h.offset+h.size])
			if newSize < h.size {
				l.shrinkSegment(out, h, newSize)
			}
		} else {
			if h.flags&uint64(elf.SHF_ALLOC) != 0 && l.typ != elf.ET_REL {
				return nil, fmt.Errorf("section %d grows from %d to %d bytes, and a loaded section of a linked file cannot move", u.Index, h.size, newSize)
			}
			align := max(h.addralign, 1)
			end := (uint64(len(out)) + align - 1) / align * align
			if !l.is64 && end+newSize > 1<<32 {
				return nil, fmt.Errorf("ELF32 file would exceed 4 GiB")
			}
			out = append(out, make([]byte, end-uint64(len(out)))...)
			out = append(out, u.Data...)
			h.offset = end
		}
		h.size = newSize
		l.writeShdr(out, u.Index, h)
	}
	return out, nil
}

// shrinkSegment updates a PT_GNU_SFRAME segment that starts at section
// h, which now holds n bytes: the segment's sizes become n (ld 2.47 makes
// the segment overhang the section; the new size is the exact one).
func (l *elfLayout) shrinkSegment(out []byte, h shdr, n uint64) {
	o := l.order
	for i := 0; i < l.phnum; i++ {
		p := out[int(l.phoff)+i*l.phentsize:]
		if elf.ProgType(o.Uint32(p)) != PT_GNU_SFRAME {
			continue
		}
		if l.is64 {
			if o.Uint64(p[8:]) == h.offset {
				o.PutUint64(p[32:], n)
				o.PutUint64(p[40:], n)
			}
			continue
		}
		if uint64(o.Uint32(p[4:])) == h.offset {
			o.PutUint32(p[16:], uint32(n))
			o.PutUint32(p[20:], uint32(n))
		}
	}
}

func totalLen(us []SectionUpdate) int {
	n := 0
	for _, u := range us {
		n += len(u.Data)
	}
	return n
}
