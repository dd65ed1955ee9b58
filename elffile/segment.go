package elffile

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
)

// SegmentPlan is where AddSFrameSegment puts a new SFrame section in an
// executable or shared library: a read-only PT_LOAD segment after every
// existing one, holding the program header table too when that table has
// no room to grow where it is.
type SegmentPlan struct {
	// Addr is the virtual address of the SFrame section and Offset its
	// file offset.
	Addr, Offset uint64
	// SegAddr and SegOffset are the new segment's address and offset;
	// Align its alignment (the largest of the existing PT_LOADs).
	SegAddr, SegOffset, Align uint64
	// MovePHDRs says the program header table moves to the start of the
	// new segment (there is no slack after it in the file).
	MovePHDRs bool
	// NumPHDRs is the number of program headers after the change.
	NumPHDRs int

	l        *elf64Layout
	reuseSF  int // index of an existing PT_GNU_SFRAME header, or -1
	lastLoad int // index of the last PT_LOAD header
	sframeSh int // index of an existing .sframe section, or -1
}

// elf64Layout is the parsed header of a 64-bit ELF image.
type elf64Layout struct {
	o                   binary.ByteOrder
	typ                 elf.Type
	phoff, shoff        uint64
	phnum, shnum        int
	shstrndx            int
	phdrs               []elf.Prog64
	shdrs               []elf.Section64
	shstrOff, shstrSize uint64
}

const (
	ehdrSize64 = 64
	phdrSize64 = 56
	shdrSize64 = 64
)

func parse64(src []byte) (*elf64Layout, error) {
	if len(src) < ehdrSize64 || string(src[:4]) != elf.ELFMAG {
		return nil, errors.New("not an ELF file")
	}
	if elf.Class(src[elf.EI_CLASS]) != elf.ELFCLASS64 {
		return nil, errors.New("only 64-bit ELF files are supported")
	}
	l := &elf64Layout{}
	switch elf.Data(src[elf.EI_DATA]) {
	case elf.ELFDATA2LSB:
		l.o = binary.LittleEndian
	case elf.ELFDATA2MSB:
		l.o = binary.BigEndian
	default:
		return nil, errors.New("unknown ELF data encoding")
	}
	o := l.o
	l.typ = elf.Type(o.Uint16(src[16:]))
	if l.typ != elf.ET_EXEC && l.typ != elf.ET_DYN {
		return nil, fmt.Errorf("%v: only executables and shared libraries get a loadable segment", l.typ)
	}
	l.phoff, l.shoff = o.Uint64(src[32:]), o.Uint64(src[40:])
	phent, shent := int(o.Uint16(src[54:])), int(o.Uint16(src[58:]))
	l.phnum, l.shnum, l.shstrndx = int(o.Uint16(src[56:])), int(o.Uint16(src[60:])), int(o.Uint16(src[62:]))
	if l.phnum == 0 || phent != phdrSize64 {
		return nil, errors.New("no usable program header table")
	}
	if l.shnum == 0 || shent != shdrSize64 || l.shnum >= int(elf.SHN_LORESERVE)-1 || l.shstrndx >= l.shnum {
		return nil, errors.New("no usable section header table (or extended section numbering)")
	}
	n := uint64(len(src))
	if l.phoff > n || (n-l.phoff)/phdrSize64 < uint64(l.phnum) || l.shoff > n || (n-l.shoff)/shdrSize64 < uint64(l.shnum) {
		return nil, errors.New("header tables run past the end of the file")
	}
	// The tables as debug/elf's structs, whose layout is the file's.
	l.phdrs = make([]elf.Prog64, l.phnum)
	l.shdrs = make([]elf.Section64, l.shnum)
	if _, err := binary.Decode(src[l.phoff:l.phoff+uint64(l.phnum)*phdrSize64], o, l.phdrs); err != nil {
		return nil, fmt.Errorf("program headers: %w", err)
	}
	if _, err := binary.Decode(src[l.shoff:l.shoff+uint64(l.shnum)*shdrSize64], o, l.shdrs); err != nil {
		return nil, fmt.Errorf("section headers: %w", err)
	}
	ss := l.shdrs[l.shstrndx]
	if ss.Off > n || ss.Size > n-ss.Off {
		return nil, errors.New("section name table outside the file")
	}
	l.shstrOff, l.shstrSize = ss.Off, ss.Size
	return l, nil
}

func alignUp(v, a uint64) uint64 {
	if a <= 1 {
		return v
	}
	return (v + a - 1) / a * a
}

// secName returns the name of section i.
func (l *elf64Layout) secName(src []byte, i int) string {
	off := uint64(l.shdrs[i].Name)
	if off >= l.shstrSize {
		return ""
	}
	b := src[l.shstrOff+off : l.shstrOff+l.shstrSize]
	for j, c := range b {
		if c == 0 {
			return string(b[:j])
		}
	}
	return ""
}

// PlanSFrameSegment computes where AddSFrameSegment would put an SFrame
// section in the ELF image src, without changing anything. The plan
// does not depend on the section's size.
func PlanSFrameSegment(src []byte) (*SegmentPlan, error) {
	l, err := parse64(src)
	if err != nil {
		return nil, err
	}
	p := &SegmentPlan{l: l, reuseSF: -1, lastLoad: -1, sframeSh: -1, Align: 0x1000}
	var vend uint64
	for i, ph := range l.phdrs {
		switch elf.ProgType(ph.Type) {
		case elf.PT_LOAD:
			p.lastLoad = i
			if e := ph.Vaddr + ph.Memsz; e > vend {
				vend = e
			}
			if ph.Align > p.Align && ph.Align&(ph.Align-1) == 0 && ph.Align <= 1<<30 {
				p.Align = ph.Align
			}
		case PT_GNU_SFRAME:
			p.reuseSF = i
		}
	}
	if p.lastLoad < 0 {
		return nil, errors.New("no PT_LOAD segment")
	}
	for i := range l.shdrs {
		if l.secName(src, i) == ".sframe" || elf.SectionType(l.shdrs[i].Type) == SHT_GNU_SFRAME {
			p.sframeSh = i
			break
		}
	}
	p.NumPHDRs = l.phnum + 1
	if p.reuseSF < 0 {
		p.NumPHDRs++
	}
	p.MovePHDRs = !phdrSlack(l, src, p.NumPHDRs)
	p.SegOffset = alignUp(uint64(len(src)), 8)
	// The address is congruent to the offset modulo the alignment, on a
	// page of its own after every existing segment.
	p.SegAddr = alignUp(vend, p.Align) + p.SegOffset%p.Align
	if p.MovePHDRs {
		p.linearPHDRs(vend)
	}
	p.Offset, p.Addr = p.SegOffset, p.SegAddr
	if p.MovePHDRs {
		d := alignUp(uint64(p.NumPHDRs)*phdrSize64, 8)
		p.Offset += d
		p.Addr += d
	}
	return p, nil
}

// maxLinearPad bounds the zero bytes linearPHDRs may add to the file.
const maxLinearPad = 16 << 20

// linearPHDRs places a new segment that will hold the program header
// table where loaders that compute AT_PHDR as the first PT_LOAD's
// address minus its offset plus e_phoff expect it: Linux before 5.18
// and qemu-user (7.2 at least) do, ignoring where PT_PHDR or the
// segments say the table is, and a static program, which finds its TLS
// segment through AT_PHDR, crashes when the table is elsewhere. The
// segment goes at that address if it is above every segment; else the
// file is padded (by at most maxLinearPad bytes) until it is.
func (p *SegmentPlan) linearPHDRs(vend uint64) {
	first := -1
	for i, ph := range p.l.phdrs {
		if elf.ProgType(ph.Type) == elf.PT_LOAD && (first < 0 || ph.Vaddr < p.l.phdrs[first].Vaddr) {
			first = i
		}
	}
	ph := p.l.phdrs[first]
	if ph.Off > ph.Vaddr {
		return
	}
	base := ph.Vaddr - ph.Off
	lo := alignUp(vend, p.Align)
	off := p.SegOffset
	if base+off < lo {
		// Whole alignment units keep the offset's congruence.
		off += alignUp(lo-(base+off), p.Align)
	}
	if off-p.SegOffset > maxLinearPad || base+off < base {
		return
	}
	p.SegOffset, p.SegAddr = off, base+off
}

// phdrSlack reports whether the program header table can grow to n
// entries where it is: the bytes after it are used by no section and
// still lie in the same PT_LOAD (and PT_PHDR) segment.
func phdrSlack(l *elf64Layout, src []byte, n int) bool {
	start, end := l.phoff, l.phoff+uint64(n)*phdrSize64
	if end > uint64(len(src)) {
		return false
	}
	if start < ehdrSize64 && end > 0 {
		return false
	}
	for _, sh := range l.shdrs {
		if elf.SectionType(sh.Type) == elf.SHT_NOBITS || elf.SectionType(sh.Type) == elf.SHT_NULL || sh.Size == 0 {
			continue
		}
		if sh.Off < end && sh.Off+sh.Size > start {
			return false
		}
	}
	if l.shoff < end && l.shoff+uint64(l.shnum)*shdrSize64 > start {
		return false
	}
	covered := false
	for _, ph := range l.phdrs {
		if elf.ProgType(ph.Type) == elf.PT_LOAD && ph.Off <= start && start < ph.Off+ph.Filesz {
			covered = end <= ph.Off+ph.Filesz
		}
	}
	return covered
}

// AddSFrameSegment returns a copy of the executable or shared library
// src in which data, an SFrame section built for the address plan.Addr
// (see PlanSFrameSegment), is loadable: it lies in a new read-only
// PT_LOAD segment placed after every existing one, a PT_GNU_SFRAME
// program header points at it (an existing one is reused), and a section
// header named .sframe of type SHT_GNU_SFRAME describes it (an existing
// .sframe header is retargeted; its old bytes stay in the file, unused).
// When the program header table has no slack, it moves to the start of
// the new segment and PT_PHDR follows it, as ELF rewriting tools do. The
// section header table is rewritten after the new segment; nothing else
// moves.
func AddSFrameSegment(src []byte, plan *SegmentPlan, data []byte) ([]byte, error) {
	l := plan.l
	if l == nil {
		return nil, errors.New("elffile: plan not made by PlanSFrameSegment")
	}
	o := l.o
	// Program headers.
	phdrs := make([]elf.Prog64, 0, plan.NumPHDRs)
	segSize := plan.Offset - plan.SegOffset + uint64(len(data))
	load := elf.Prog64{Type: uint32(elf.PT_LOAD), Flags: uint32(elf.PF_R), Off: plan.SegOffset, Vaddr: plan.SegAddr,
		Paddr: plan.SegAddr, Filesz: segSize, Memsz: segSize, Align: plan.Align}
	sf := elf.Prog64{Type: uint32(PT_GNU_SFRAME), Flags: uint32(elf.PF_R), Off: plan.Offset, Vaddr: plan.Addr,
		Paddr: plan.Addr, Filesz: uint64(len(data)), Memsz: uint64(len(data)), Align: 8}
	phTabOff, phTabAddr := l.phoff, uint64(0)
	if plan.MovePHDRs {
		phTabOff, phTabAddr = plan.SegOffset, plan.SegAddr
	} else {
		for _, ph := range l.phdrs {
			if elf.ProgType(ph.Type) == elf.PT_LOAD && ph.Off <= l.phoff && l.phoff < ph.Off+ph.Filesz {
				phTabAddr = ph.Vaddr + (l.phoff - ph.Off)
			}
		}
	}
	phTabSize := uint64(plan.NumPHDRs) * phdrSize64
	for i, ph := range l.phdrs {
		switch {
		case i == plan.reuseSF:
			ph = sf
		case elf.ProgType(ph.Type) == elf.PT_PHDR:
			ph.Off, ph.Vaddr, ph.Paddr, ph.Filesz, ph.Memsz = phTabOff, phTabAddr, phTabAddr, phTabSize, phTabSize
		}
		phdrs = append(phdrs, ph)
		if i == plan.lastLoad {
			phdrs = append(phdrs, load)
		}
	}
	if plan.reuseSF < 0 {
		phdrs = append(phdrs, sf)
	}
	if len(phdrs) != plan.NumPHDRs {
		return nil, errors.New("elffile: inconsistent plan")
	}

	// Section headers and, when a name must be added, the name table.
	shdrs := append([]elf.Section64(nil), l.shdrs...)
	sec := elf.Section64{Type: uint32(SHT_GNU_SFRAME), Flags: uint64(elf.SHF_ALLOC), Addr: plan.Addr, Off: plan.Offset,
		Size: uint64(len(data)), Addralign: 8}
	var newStrtab []byte
	if plan.sframeSh >= 0 {
		sec.Name = shdrs[plan.sframeSh].Name
		shdrs[plan.sframeSh] = sec
	} else {
		newStrtab = append(append([]byte(nil), src[l.shstrOff:l.shstrOff+l.shstrSize]...), ".sframe\x00"...)
		sec.Name = uint32(l.shstrSize)
		shdrs = append(shdrs, sec)
	}

	out := make([]byte, plan.SegOffset, plan.Offset+uint64(len(data))+uint64(len(newStrtab))+uint64(len(shdrs)+1)*shdrSize64+16)
	copy(out, src)
	// The new segment: [program headers] data.
	out = out[:plan.Offset]
	out = append(out, data...)
	if newStrtab != nil {
		out = append(out, make([]byte, alignUp(uint64(len(out)), 8)-uint64(len(out)))...)
		shdrs[l.shstrndx].Off = uint64(len(out))
		shdrs[l.shstrndx].Size = uint64(len(newStrtab))
		out = append(out, newStrtab...)
	}
	out = append(out, make([]byte, alignUp(uint64(len(out)), 8)-uint64(len(out)))...)
	shoff := uint64(len(out))
	out, err := binary.Append(out, o, shdrs)
	if err == nil {
		_, err = binary.Encode(out[phTabOff:], o, phdrs)
	}
	if err != nil {
		return nil, fmt.Errorf("elffile: writing headers: %w", err)
	}
	o.PutUint64(out[32:], phTabOff)
	o.PutUint64(out[40:], shoff)
	o.PutUint16(out[56:], uint16(len(phdrs)))
	o.PutUint16(out[60:], uint16(len(shdrs)))
	return out, nil
}
