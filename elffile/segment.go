package elffile

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// SegmentPlan is where AddSFrameSegment puts a new SFrame section in an
// executable or shared library: a read-only PT_LOAD segment after every
// existing one, on pages of its own in the file and in memory.
//
// The program header table grows by the new entries. Where it can, it
// stays where the linker put it, right after the ELF header, which is
// the only place binutils' strip and objcopy lay it out without
// complaint, and the only one where elfutils' eu-strip keeps it (libelf
// writes zeros into the gaps between sections): it grows into unused
// bytes after it, or into the space of the sections that follow it when
// those are referenced by address only through program headers (.interp
// and notes) or one dynamic section entry (the dynamic symbols, their
// names, hash tables and versions: lld puts .dynsym right after the
// notes), which then move to the start of the new segment, the entry
// pointing there. Otherwise the table moves to a PT_LOAD segment of its
// own, on its own pages (glibc matches the table to segments by whole
// pages), at an address congruent to the end of the last segment's file
// contents (where strip will put it), and a PT_PHDR entry describes it
// (glibc finds a shared library's table through PT_PHDR when present);
// the .interp and notes that followed it move to the start of the new
// segment all the same (see planFollowers).
type SegmentPlan struct {
	// Addr is the virtual address of the SFrame section and Offset its
	// file offset.
	Addr, Offset uint64
	// SegAddr and SegOffset are the address and offset of the new
	// segment holding the section; Align its alignment (the largest of
	// the existing PT_LOADs', between 4 KiB and 64 KiB).
	SegAddr, SegOffset, Align uint64
	// MovePHDRs says the program header table moves to a new segment of
	// its own, before the one holding the section.
	MovePHDRs bool
	// Moved names the sections moved from after the program header
	// table to the start of the new segment, to make room for the table
	// or, when it moves, as binutils wants them (see planFollowers).
	Moved []string
	// NumPHDRs is the number of program headers after the change.
	NumPHDRs int

	l        *elf64Layout
	reuseSF  int // index of an existing PT_GNU_SFRAME header, or -1
	lastLoad int // index of the last PT_LOAD header
	sframeSh int // index of an existing .sframe section, or -1
	hasPhdr  bool
	// The file offsets of the dynamic section's entries, up to DT_NULL.
	dyn []uint64
	// The program header table's place after the change.
	phOff, phAddr uint64
	// MovePHDRs: the PT_LOAD holding the table.
	phSegOff, phSegAddr uint64
	// Moved sections: their indices, the file range [moveLo, moveHi)
	// they came from, and how far they move in the file and in memory.
	moves          []int
	moveLo, moveHi uint64
	moveOff        uint64 // new file offset of moveLo
	moveAddr       uint64 // new address of moveLo
}

// elf64Layout is the parsed header of a 64-bit ELF image.
type elf64Layout struct {
	h                   *Header
	o                   binary.ByteOrder
	typ                 elf.Type
	phoff, shoff        uint64
	phnum, shnum        int
	shstrndx            int
	phdrs               []elf.Prog64
	shdrs               []elf.Section64
	shstrOff, shstrSize uint64
}

func parse64(src []byte) (*elf64Layout, error) {
	h, err := DecodeHeader(src)
	if err != nil {
		return nil, err
	}
	if h.Class != elf.ELFCLASS64 {
		return nil, errors.New("only 64-bit ELF files are supported")
	}
	l := &elf64Layout{h: h, o: h.ByteOrder, typ: elf.Type(h.Type)}
	if l.typ != elf.ET_EXEC && l.typ != elf.ET_DYN {
		return nil, fmt.Errorf("%v: only executables and shared libraries get a loadable segment", l.typ)
	}
	l.phoff, l.shoff = h.Phoff, h.Shoff
	phent, shent := int(h.Phentsize), int(h.Shentsize)
	l.phnum, l.shnum, l.shstrndx = int(h.Phnum), int(h.Shnum), int(h.Shstrndx)
	if l.shnum == 0 || shent != shdrSize64 || l.shnum >= int(elf.SHN_LORESERVE)-1 || l.shstrndx >= l.shnum {
		return nil, errors.New("no usable section header table (or extended section numbering)")
	}
	n := uint64(len(src))
	if l.shoff > n || (n-l.shoff)/shdrSize64 < uint64(l.shnum) {
		return nil, errors.New("section header table runs past the end of the file")
	}
	if l.shdrs, err = h.decodeSections(src[l.shoff:], l.shnum); err != nil {
		return nil, fmt.Errorf("section headers: %w", err)
	}
	if l.phnum == pnXNUM {
		// Extended numbering: the count is in section 0's sh_info.
		l.phnum = int(l.shdrs[0].Info)
	}
	if l.phnum == 0 || phent != phdrSize64 {
		return nil, errors.New("no usable program header table")
	}
	// The count is checked against the file size before the table is
	// allocated.
	if l.phoff > n || (n-l.phoff)/phdrSize64 < uint64(l.phnum) {
		return nil, errors.New("program header table runs past the end of the file")
	}
	if l.phdrs, err = h.DecodeProgs(src[l.phoff:], l.phnum); err != nil {
		return nil, fmt.Errorf("program headers: %w", err)
	}
	// Everything the planner compares lies in the file and in the
	// address space, so that no sum wraps.
	for i := range l.shdrs {
		sh := &l.shdrs[i]
		if hasFileBytes(sh) && (sh.Off > n || sh.Size > n-sh.Off) {
			return nil, fmt.Errorf("section %d lies outside the file", i)
		}
		if sh.Addr+sh.Size < sh.Addr {
			return nil, fmt.Errorf("section %d wraps around the address space", i)
		}
	}
	for i, ph := range l.phdrs {
		if ph.Off > n || ph.Filesz > n-ph.Off || ph.Vaddr+ph.Memsz < ph.Vaddr || ph.Paddr+ph.Memsz < ph.Paddr {
			return nil, fmt.Errorf("program header %d: segment outside the file or wrapping around the address space", i)
		}
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

// hasFileBytes reports whether section sh takes bytes in the file.
func hasFileBytes(sh *elf.Section64) bool {
	t := elf.SectionType(sh.Type)
	return t != elf.SHT_NOBITS && t != elf.SHT_NULL && sh.Size != 0
}

// overlaps reports whether [a, a+n) and [b, b+m) share a byte.
func overlaps(a, n, b, m uint64) bool {
	return n != 0 && m != 0 && a < b+m && b < a+n
}

// maxPageAlign bounds the alignment of the new segments: a page of its
// own on any page size the existing segments allow, up to 64 KiB (the
// largest base page of the Linux ports in use), without padding the file
// to a 2 MiB boundary for files linked with a huge maximum page size.
const maxPageAlign = 64 << 10

// PlanSFrameSegment computes where AddSFrameSegment would put an SFrame
// section in the ELF image src, without changing anything. The plan
// does not depend on the section's size. The image's headers are checked
// against its size: tables that run past its end are errors.
func PlanSFrameSegment(src []byte) (*SegmentPlan, error) {
	l, err := parse64(src)
	if err != nil {
		return nil, err
	}
	p := &SegmentPlan{l: l, reuseSF: -1, lastLoad: -1, sframeSh: -1, Align: 0x1000}
	var vend, fileEnd uint64
	for i, ph := range l.phdrs {
		switch elf.ProgType(ph.Type) {
		case elf.PT_LOAD:
			p.lastLoad = i
			vend = max(vend, ph.Vaddr+ph.Memsz)
			if ph.Filesz != 0 {
				fileEnd = max(fileEnd, l.strippedEnd(ph))
			}
			if ph.Align > p.Align && ph.Align&(ph.Align-1) == 0 {
				p.Align = min(ph.Align, maxPageAlign)
			}
		case PT_GNU_SFRAME:
			p.reuseSF = i
		case elf.PT_PHDR:
			p.hasPhdr = true
		case elf.PT_DYNAMIC:
			p.dyn = p.dynEntries(src, ph)
		}
	}
	if p.lastLoad < 0 {
		return nil, errors.New("no PT_LOAD segment")
	}
	if vend > 1<<62 || uint64(len(src)) > 1<<62 {
		return nil, errors.New("segments too high in the address space")
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
	segOff := alignUp(uint64(len(src)), p.Align)
	segAddr := alignUp(vend, p.Align)
	switch {
	case phdrSlack(l, src, p.NumPHDRs):
		p.phOff = l.phoff
		p.SegOffset, p.SegAddr = segOff, segAddr
		p.Offset, p.Addr = segOff, segAddr
	case p.planMoves(src, uint64(p.NumPHDRs)*phdrSize64):
		p.phOff = l.phoff
		p.SegOffset, p.SegAddr = segOff, segAddr
		p.placeMoves(src)
	default:
		p.MovePHDRs = true
		p.NumPHDRs++ // the table's own PT_LOAD
		if !p.hasPhdr {
			p.NumPHDRs++
		}
		// Where old loaders compute the table's address (linearPHDRs).
		segOff, segAddr = p.linearPHDRs(segOff, segAddr)
		// strip packs the table's segment right after the last file
		// contents: an address congruent to that end keeps the table's
		// segment where strip puts it valid.
		r := fileEnd % p.Align
		p.phSegOff, p.phSegAddr = segOff+r, segAddr+r
		p.phOff, p.phAddr = alignUp(p.phSegOff, 8), alignUp(p.phSegAddr, 8)
		size := uint64(p.NumPHDRs) * phdrSize64
		p.SegOffset = alignUp(p.phOff+size, p.Align)
		p.SegAddr = alignUp(p.phAddr+size, p.Align)
		p.Offset, p.Addr = p.SegOffset, p.SegAddr
		if p.planFollowers(src) {
			p.placeMoves(src)
		}
	}
	if !p.MovePHDRs {
		// The table's address: where its PT_LOAD maps it.
		for _, ph := range l.phdrs {
			if elf.ProgType(ph.Type) == elf.PT_LOAD && ph.Off <= l.phoff && l.phoff < ph.Off+ph.Filesz {
				p.phAddr = ph.Vaddr + (l.phoff - ph.Off)
				break
			}
		}
	}
	return p, nil
}

// strippedEnd returns where the file contents of the PT_LOAD ph end once
// strip or objcopy has rewritten the file: at the end of the last
// section with bytes in it, since they recompute p_filesz from the
// sections (the Go linker pads its data segment's file size up to the
// address of .bss; strip drops that padding). A segment holding no such
// section keeps its size.
func (l *elf64Layout) strippedEnd(ph elf.Prog64) uint64 {
	end, found := ph.Off, false
	for i := range l.shdrs {
		sh := &l.shdrs[i]
		if hasFileBytes(sh) && sh.Flags&uint64(elf.SHF_ALLOC) != 0 && ph.Off <= sh.Off && sh.Off < ph.Off+ph.Filesz {
			end, found = max(end, sh.Off+sh.Size), true
		}
	}
	if !found {
		return ph.Off + ph.Filesz
	}
	return end
}

// tableLoad returns the index of the PT_LOAD whose file contents hold
// the size bytes from the program header table's start, or -1.
func tableLoad(l *elf64Layout, size uint64) int {
	start, end := l.phoff, l.phoff+size
	for i, ph := range l.phdrs {
		if elf.ProgType(ph.Type) == elf.PT_LOAD && ph.Off <= start && start < ph.Off+ph.Filesz {
			if end <= ph.Off+ph.Filesz && end-ph.Off <= ph.Memsz {
				return i
			}
			return -1
		}
	}
	return -1
}

// maxLinearPad bounds the zero bytes linearPHDRs may add to the file.
const maxLinearPad = 16 << 20

// linearPHDRs moves the new segments, which will hold the program header
// table, from file offset off and address addr to where loaders that
// compute AT_PHDR as the first PT_LOAD's address minus its offset plus
// e_phoff expect the table: Linux before 5.18 and qemu-user (7.2 at
// least) do, ignoring where PT_PHDR or the segments say the table is,
// and a static program, which finds its TLS segment through AT_PHDR,
// crashes when the table is elsewhere. The file is padded (by at most
// maxLinearPad bytes, whole alignment units) until that address is at or
// above addr, the first free page; off and addr come back unchanged when
// that is not possible.
func (p *SegmentPlan) linearPHDRs(off, addr uint64) (uint64, uint64) {
	first := -1
	for i, ph := range p.l.phdrs {
		if elf.ProgType(ph.Type) == elf.PT_LOAD && (first < 0 || ph.Vaddr < p.l.phdrs[first].Vaddr) {
			first = i
		}
	}
	if first < 0 {
		return off, addr
	}
	ph := p.l.phdrs[first]
	if ph.Off > ph.Vaddr {
		return off, addr
	}
	base := ph.Vaddr - ph.Off
	o := off
	if base+o < addr {
		// Whole alignment units keep the offset's congruence.
		o += alignUp(addr-(base+o), p.Align)
	}
	if o-off > maxLinearPad || base+o < base {
		return off, addr
	}
	return o, base + o
}

// phdrSlack reports whether the program header table can grow to n
// entries where it is: the bytes after it are used by no section and
// still lie in the same PT_LOAD segment.
func phdrSlack(l *elf64Layout, src []byte, n int) bool {
	start, size := l.phoff, uint64(n)*phdrSize64
	if start+size > uint64(len(src)) || start < ehdrSize64 {
		return false
	}
	for i := range l.shdrs {
		if sh := &l.shdrs[i]; hasFileBytes(sh) && overlaps(sh.Off, sh.Size, start, size) {
			return false
		}
	}
	if overlaps(l.shoff, uint64(l.shnum)*shdrSize64, start, size) {
		return false
	}
	return tableLoad(l, size) >= 0
}

// dynSize64 is the size of a 64-bit dynamic section entry.
const dynSize64 = 16

// dynTag returns the dynamic section's tag whose value is the address of
// a section of type t that the loader finds through it, or DT_NULL: the
// dynamic symbols, their names, hash tables and versions.
func dynTag(t elf.SectionType) elf.DynTag {
	switch t {
	case elf.SHT_DYNSYM:
		return elf.DT_SYMTAB
	case elf.SHT_STRTAB:
		return elf.DT_STRTAB
	case elf.SHT_HASH:
		return elf.DT_HASH
	case elf.SHT_GNU_HASH:
		return elf.DT_GNU_HASH
	case elf.SHT_GNU_VERSYM:
		return elf.DT_VERSYM
	case elf.SHT_GNU_VERNEED:
		return elf.DT_VERNEED
	case elf.SHT_GNU_VERDEF:
		return elf.DT_VERDEF
	}
	return elf.DT_NULL
}

// maxDynEntries bounds the dynamic section entries the planner reads: a
// linker writes a few dozen, and each section that may move is looked
// for among them.
const maxDynEntries = 1024

// dynEntries returns the file offsets of the entries of the dynamic
// section that ph, a PT_DYNAMIC, holds, up to DT_NULL; none when there
// are more than maxDynEntries (no linker's: nothing moves through it).
func (p *SegmentPlan) dynEntries(src []byte, ph elf.Prog64) []uint64 {
	var offs []uint64
	for off := ph.Off; off+dynSize64 <= ph.Off+ph.Filesz && p.l.o.Uint64(src[off:]) != uint64(elf.DT_NULL); off += dynSize64 {
		if len(offs) == maxDynEntries {
			return nil
		}
		offs = append(offs, off)
	}
	return offs
}

// dynEntry returns the file offset of the one dynamic section entry
// tagged tag whose value is addr, or false when there is none or
// another entry has that tag.
func (p *SegmentPlan) dynEntry(src []byte, tag elf.DynTag, addr uint64) (uint64, bool) {
	o := p.l.o
	found, at := 0, uint64(0)
	for _, off := range p.dyn {
		if o.Uint64(src[off:]) == uint64(tag) {
			found, at = found+1, off
		}
	}
	return at, found == 1 && o.Uint64(src[at+8:]) == addr
}

// movable reports whether section i is referenced by address only
// through program headers (PT_INTERP, PT_NOTE, PT_GNU_PROPERTY) or one
// dynamic section entry (see dynTag), so that it can move when those
// follow it: the program interpreter's name, notes, and the dynamic
// symbols with their names, hash tables and versions (linked to each
// other by section index and offset, not address).
func (p *SegmentPlan) movable(src []byte, i int) bool {
	sh := &p.l.shdrs[i]
	if sh.Flags&uint64(elf.SHF_ALLOC) == 0 || sh.Flags&uint64(elf.SHF_WRITE|elf.SHF_EXECINSTR|elf.SHF_TLS) != 0 || sh.Addralign > 8 {
		return false
	}
	switch t := elf.SectionType(sh.Type); t {
	case elf.SHT_NOTE:
		return true
	case elf.SHT_PROGBITS:
		return p.l.secName(src, i) == ".interp"
	default:
		if tag := dynTag(t); tag != elf.DT_NULL {
			_, ok := p.dynEntry(src, tag, sh.Addr)
			return ok
		}
	}
	return false
}

// planMoves looks for the sections to move out of the size bytes from
// the program header table's start (so that it grows in place, or so
// that they follow it where it moves): every section in those bytes,
// and with them every section sharing a PT_NOTE, PT_INTERP or
// PT_GNU_PROPERTY segment with one of them. It fails when one of those
// sections is referenced otherwise (by address, from code or the
// dynamic section) or another kind of segment covers them.
func (p *SegmentPlan) planMoves(src []byte, size uint64) bool {
	l := p.l
	ld := tableLoad(l, size)
	if ld < 0 || l.phoff < ehdrSize64 {
		return false
	}
	load := l.phdrs[ld]
	need, needAddr := l.phoff, load.Vaddr+(l.phoff-load.Off)
	if overlaps(l.shoff, uint64(l.shnum)*shdrSize64, need, size) {
		return false
	}
	lo, hi := uint64(0), uint64(0) // the file range to move, empty at first
	take := func(a, n uint64) {
		if n == 0 {
			return
		}
		if hi == lo {
			lo, hi = a, a+n
			return
		}
		lo, hi = min(lo, a), max(hi, a+n)
	}
	moved := map[int]bool{}
	for changed := true; changed; {
		changed = false
		for i := range l.shdrs {
			sh := &l.shdrs[i]
			if moved[i] || sh.Flags&uint64(elf.SHF_ALLOC) == 0 && !hasFileBytes(sh) {
				continue
			}
			inTable := overlaps(sh.Addr, sh.Size, needAddr, size) && sh.Flags&uint64(elf.SHF_ALLOC) != 0
			if hasFileBytes(sh) && (overlaps(sh.Off, sh.Size, need, size) || overlaps(sh.Off, sh.Size, lo, hi-lo)) {
				inTable = true
			}
			if !inTable {
				continue
			}
			if !p.movable(src, i) {
				return false
			}
			moved[i], changed = true, true
			take(sh.Off, sh.Size)
		}
		for _, ph := range l.phdrs {
			if !overlaps(ph.Off, ph.Filesz, lo, hi-lo) {
				continue
			}
			switch elf.ProgType(ph.Type) {
			case elf.PT_LOAD:
				if ph != load {
					return false
				}
			case elf.PT_NOTE, elf.PT_INTERP, elf.PT_GNU_PROPERTY:
				if ph.Off < lo || ph.Off+ph.Filesz > hi {
					take(ph.Off, ph.Filesz)
					changed = true
				}
			default:
				return false
			}
		}
	}
	if len(moved) == 0 || lo < need || hi > load.Off+load.Filesz {
		return false
	}
	// The moved range keeps its layout: it holds moved sections only.
	for i := range l.shdrs {
		if sh := &l.shdrs[i]; !moved[i] && hasFileBytes(sh) && overlaps(sh.Off, sh.Size, lo, hi-lo) {
			return false
		}
	}
	for i := range l.shdrs {
		if moved[i] {
			p.moves = append(p.moves, i)
		}
	}
	slices.SortFunc(p.moves, func(a, b int) int { return int(l.shdrs[a].Off) - int(l.shdrs[b].Off) })
	p.moveLo, p.moveHi = lo, hi
	return true
}

// planFollowers plans, for a table that moves to a segment of its own,
// the move of the sections that follow it in the file and are
// referenced only through program headers (.interp and notes, where
// linkers put them) to the start of the new segment, as when the table
// grows in place. objcopy --only-keep-debug (binutils 2.40), which
// rewrites the program headers, cannot place notes that follow .interp
// in the PT_LOAD holding the ELF header once the table has left it
// ("can't be allocated in segment 0": the debug file's PT_NOTE then
// misses them), nor sections in the table's own segment ("lma
// adjusted"). It reports whether there are such sections and they can
// all move.
func (p *SegmentPlan) planFollowers(src []byte) bool {
	l := p.l
	ld := tableLoad(l, uint64(l.phnum)*phdrSize64)
	if ld < 0 {
		return false
	}
	load := l.phdrs[ld]
	// The sections up to the first one that must stay.
	tabEnd, stop := l.phoff+uint64(l.phnum)*phdrSize64, load.Off+load.Filesz
	for i := range l.shdrs {
		sh := &l.shdrs[i]
		// The dynamic symbols stay: nothing asks them to move.
		if hasFileBytes(sh) && sh.Off >= tabEnd && sh.Off < stop && (!p.movable(src, i) || dynTag(elf.SectionType(sh.Type)) != elf.DT_NULL) {
			stop = sh.Off
		}
	}
	return stop > tabEnd && p.planMoves(src, stop-l.phoff)
}

// placeMoves puts the moved sections at the start of the new segment,
// at SegOffset and SegAddr, and the SFrame section after them.
func (p *SegmentPlan) placeMoves(src []byte) {
	// The moved bytes keep their offset modulo 8 (their alignment).
	r := p.moveLo % 8
	p.moveOff, p.moveAddr = p.SegOffset+r, p.SegAddr+r
	p.SegOffset, p.SegAddr = p.moveOff, p.moveAddr
	end := p.moveHi - p.moveLo
	p.Offset, p.Addr = alignUp(p.moveOff+end, 8), alignUp(p.moveAddr+end, 8)
	for _, i := range p.moves {
		p.Moved = append(p.Moved, p.l.secName(src, i))
	}
}

// AddSFrameSegment returns a copy of the executable or shared library
// src in which data, an SFrame section built for the address plan.Addr
// (see PlanSFrameSegment), is loadable: it lies in a new read-only
// PT_LOAD segment placed after every existing one, a PT_GNU_SFRAME
// program header points at it (an existing one is reused), and a section
// header named .sframe of type SHT_GNU_SFRAME describes it (an existing
// .sframe header is retargeted; its old bytes stay in the file, unused).
// The program header table grows as the plan says; the section header
// table is rewritten after the new segment; nothing else moves. More
// than 65,534 program headers are written with extended numbering (the
// count in section header 0's sh_info).
func AddSFrameSegment(src []byte, plan *SegmentPlan, data []byte) ([]byte, error) {
	l := plan.l
	if l == nil {
		return nil, errors.New("plan not made by PlanSFrameSegment")
	}
	o := l.o
	// Program headers.
	phdrs := make([]elf.Prog64, 0, plan.NumPHDRs)
	segSize := plan.Offset - plan.SegOffset + uint64(len(data))
	load := elf.Prog64{Type: uint32(elf.PT_LOAD), Flags: uint32(elf.PF_R), Off: plan.SegOffset, Vaddr: plan.SegAddr,
		Paddr: plan.SegAddr, Filesz: segSize, Memsz: segSize, Align: plan.Align}
	sf := elf.Prog64{Type: uint32(PT_GNU_SFRAME), Flags: uint32(elf.PF_R), Off: plan.Offset, Vaddr: plan.Addr,
		Paddr: plan.Addr, Filesz: uint64(len(data)), Memsz: uint64(len(data)), Align: 8}
	phTabSize := uint64(plan.NumPHDRs) * phdrSize64
	phdr := elf.Prog64{Type: uint32(elf.PT_PHDR), Flags: uint32(elf.PF_R), Off: plan.phOff, Vaddr: plan.phAddr,
		Paddr: plan.phAddr, Filesz: phTabSize, Memsz: phTabSize, Align: 8}
	if plan.MovePHDRs && !plan.hasPhdr {
		phdrs = append(phdrs, phdr)
	}
	// Moved bytes keep their offset from their address.
	movedAt := func(off uint64) (newOff, newAddr uint64) {
		newOff = off - plan.moveLo + plan.moveOff
		return newOff, newOff - plan.moveOff + plan.moveAddr
	}
	inMoved := func(off, n uint64) bool {
		return len(plan.moves) > 0 && n != 0 && off >= plan.moveLo && off+n <= plan.moveHi
	}
	for i, ph := range l.phdrs {
		switch {
		case i == plan.reuseSF:
			ph = sf
		case elf.ProgType(ph.Type) == elf.PT_PHDR:
			ph = phdr
		case elf.ProgType(ph.Type) != elf.PT_LOAD && inMoved(ph.Off, ph.Filesz):
			ph.Off, ph.Vaddr = movedAt(ph.Off)
			ph.Paddr = ph.Vaddr
		}
		phdrs = append(phdrs, ph)
		if i == plan.lastLoad {
			if plan.MovePHDRs {
				end := plan.phOff + phTabSize
				phdrs = append(phdrs, elf.Prog64{Type: uint32(elf.PT_LOAD), Flags: uint32(elf.PF_R), Off: plan.phSegOff,
					Vaddr: plan.phSegAddr, Paddr: plan.phSegAddr, Filesz: end - plan.phSegOff, Memsz: end - plan.phSegOff,
					Align: plan.Align})
			}
			phdrs = append(phdrs, load)
		}
	}
	if plan.reuseSF < 0 {
		phdrs = append(phdrs, sf)
	}
	if len(phdrs) != plan.NumPHDRs {
		return nil, errors.New("inconsistent plan")
	}

	// Section headers and, when a name must be added, the name table.
	shdrs := append([]elf.Section64(nil), l.shdrs...)
	for _, i := range plan.moves {
		shdrs[i].Off, shdrs[i].Addr = movedAt(shdrs[i].Off)
	}
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
	if len(phdrs) >= pnXNUM {
		shdrs[0].Info = uint32(len(phdrs))
	} else {
		shdrs[0].Info = 0
	}

	end := plan.Offset + uint64(len(data))
	if err := checkSymtabs(src, l); err != nil {
		return nil, err
	}
	out := make([]byte, end, end+uint64(len(newStrtab))+uint64(len(shdrs)+1)*shdrSize64+16)
	copy(out, src)
	// Symbols and dynamic entries change where they are, then move
	// with their sections.
	plan.moveSymbols(out)
	plan.moveDynamic(src, out)
	if len(plan.moves) > 0 {
		copy(out[plan.moveOff:], out[plan.moveLo:plan.moveHi])
		clear(out[plan.moveLo:plan.moveHi])
	}
	copy(out[plan.Offset:], data)
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
		_, err = binary.Encode(out[plan.phOff:], o, phdrs)
	}
	if err != nil {
		return nil, fmt.Errorf("writing headers: %w", err)
	}
	h := *l.h
	h.Phoff, h.Shoff = plan.phOff, shoff
	h.Phnum, h.Shnum = uint16(min(len(phdrs), pnXNUM)), uint16(len(shdrs))
	if err := h.encode(out); err != nil {
		return nil, fmt.Errorf("writing headers: %w", err)
	}
	return out, nil
}

// checkSymtabs checks that the symbol tables lie in the file.
func checkSymtabs(src []byte, l *elf64Layout) error {
	for i := range l.shdrs {
		sh := &l.shdrs[i]
		if t := elf.SectionType(sh.Type); t != elf.SHT_SYMTAB && t != elf.SHT_DYNSYM {
			continue
		}
		if sh.Off > uint64(len(src)) || sh.Size > uint64(len(src))-sh.Off {
			return fmt.Errorf("symbol table (section %d) outside the file", i)
		}
	}
	return nil
}

// moveDynamic points the dynamic section entries that hold the
// addresses of moved sections (see dynTag) at their new addresses, in
// out, a copy of the input image src.
func (p *SegmentPlan) moveDynamic(src, out []byte) {
	for _, i := range p.moves {
		sh := &p.l.shdrs[i]
		tag := dynTag(elf.SectionType(sh.Type))
		if tag == elf.DT_NULL {
			continue
		}
		if off, ok := p.dynEntry(src, tag, sh.Addr); ok {
			p.l.o.PutUint64(out[off+8:], p.moveAddr+(sh.Off-p.moveLo))
		}
	}
}

// moveSymbols adds to the value of every symbol defined in a moved
// section how far the section moved, in the symbol tables of out (a
// copy of the input image, whose tables are where they were).
func (p *SegmentPlan) moveSymbols(out []byte) {
	if len(p.moves) == 0 {
		return
	}
	l := p.l
	delta := map[uint16]uint64{}
	for _, i := range p.moves {
		old := l.shdrs[i]
		addr := p.moveAddr + (old.Off - p.moveLo)
		delta[uint16(i)] = addr - old.Addr
	}
	const symSize = 24
	for i := range l.shdrs {
		sh := &l.shdrs[i]
		if t := elf.SectionType(sh.Type); t != elf.SHT_SYMTAB && t != elf.SHT_DYNSYM {
			continue
		}
		tab := out[sh.Off : sh.Off+sh.Size]
		for j := 0; j+symSize <= len(tab); j += symSize {
			if d, ok := delta[l.o.Uint16(tab[j+6:])]; ok {
				l.o.PutUint64(tab[j+8:], l.o.Uint64(tab[j+8:])+d)
			}
		}
	}
}
