package elffile

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
)

// Header is an ELF file header decoded by DecodeHeader or ReadHeader, of
// either class and byte order, in debug/elf's 64-bit layout: the fields
// of a 32-bit header are widened. It is the one place sframekit decodes
// ELF headers by itself, for what debug/elf does not offer: reading the
// header tables of an image that is cut short or only partly in memory,
// and writing changed headers back.
type Header struct {
	elf.Header64
	// Class is elf.ELFCLASS32 or elf.ELFCLASS64, the layout of the file's
	// headers.
	Class elf.Class
	// ByteOrder is the file's byte order.
	ByteOrder binary.ByteOrder
}

// Sizes of the headers of each class.
const (
	ehdrSize32, ehdrSize64 = 52, 64
	phdrSize32, phdrSize64 = 32, 56
	shdrSize32, shdrSize64 = 40, 64
)

// pnXNUM in e_phnum says the number of program headers is in the
// sh_info field of section header 0 (extended numbering).
const pnXNUM = 0xffff

// DecodeHeader decodes the ELF file header at the start of b. Input
// without the ELF magic is ErrNotELF; input that ends inside the header
// is a *TruncatedError (wanting 64 bytes while the class is unknown); an
// unknown class or data encoding is an error. Nothing else is checked:
// the offsets and counts are the file's, for the caller to check
// against what it has.
func DecodeHeader(b []byte) (*Header, error) {
	if len(b) < 4 || string(b[:4]) != elf.ELFMAG {
		return nil, ErrNotELF
	}
	size := ehdrSize64
	if len(b) > elf.EI_CLASS && elf.Class(b[elf.EI_CLASS]) == elf.ELFCLASS32 {
		size = ehdrSize32
	}
	if len(b) < size {
		return nil, &TruncatedError{int64(len(b)), uint64(size)}
	}
	h := &Header{Class: elf.Class(b[elf.EI_CLASS])}
	switch elf.Data(b[elf.EI_DATA]) {
	case elf.ELFDATA2LSB:
		h.ByteOrder = binary.LittleEndian
	case elf.ELFDATA2MSB:
		h.ByteOrder = binary.BigEndian
	default:
		return nil, fmt.Errorf("unknown ELF data encoding %d", b[elf.EI_DATA])
	}
	switch h.Class {
	case elf.ELFCLASS64:
		if _, err := binary.Decode(b, h.ByteOrder, &h.Header64); err != nil {
			return nil, err
		}
	case elf.ELFCLASS32:
		var h32 elf.Header32
		if _, err := binary.Decode(b, h.ByteOrder, &h32); err != nil {
			return nil, err
		}
		h.Header64 = elf.Header64{Ident: h32.Ident, Type: h32.Type, Machine: h32.Machine, Version: h32.Version,
			Entry: uint64(h32.Entry), Phoff: uint64(h32.Phoff), Shoff: uint64(h32.Shoff), Flags: h32.Flags,
			Ehsize: h32.Ehsize, Phentsize: h32.Phentsize, Phnum: h32.Phnum, Shentsize: h32.Shentsize,
			Shnum: h32.Shnum, Shstrndx: h32.Shstrndx}
	default:
		return nil, fmt.Errorf("unknown ELF class %d", b[elf.EI_CLASS])
	}
	return h, nil
}

// ReadHeader reads the ELF file header at offset 0 of r (a file, or an
// image in a process's memory) and decodes it as DecodeHeader does.
// Input shorter than a header is ErrNotELF or a *TruncatedError, as
// there; other read errors are returned as they are.
func ReadHeader(r io.ReaderAt) (*Header, error) {
	var b [ehdrSize64]byte
	n, err := r.ReadAt(b[:], 0)
	if err != nil && err != io.EOF && n < len(b) {
		return nil, err
	}
	return DecodeHeader(b[:n])
}

// is64 reports whether the file's headers have the 64-bit layout.
func (h *Header) is64() bool { return h.Class == elf.ELFCLASS64 }

// progSize and sectionSize are the sizes of a program and a section
// header of the file's class (e_phentsize and e_shentsize may be more).
func (h *Header) progSize() int {
	if h.is64() {
		return phdrSize64
	}
	return phdrSize32
}

func (h *Header) sectionSize() int {
	if h.is64() {
		return shdrSize64
	}
	return shdrSize32
}

// DecodeProgs decodes n program headers from tab, the program header
// table's bytes, entries e_phentsize bytes apart. An entry size smaller
// than the class's program header, or a table shorter than n entries, is
// an error; the result's size is bounded by tab's.
func (h *Header) DecodeProgs(tab []byte, n int) ([]elf.Prog64, error) {
	return decodeTable(tab, n, "program", int(h.Phentsize), h.progSize(), h.decodeProg)
}

// decodeSections decodes n section headers from tab, the section header
// table's bytes, as DecodeProgs decodes program headers.
func (h *Header) decodeSections(tab []byte, n int) ([]elf.Section64, error) {
	return decodeTable(tab, n, "section", int(h.Shentsize), h.sectionSize(), h.decodeSection)
}

// decodeTable decodes the n entries of a header table, stride bytes
// apart and each at least size bytes (see tableFits), with decode.
func decodeTable[T any](tab []byte, n int, what string, stride, size int, decode func([]byte) (T, error)) ([]T, error) {
	stride, err := tableFits(what, len(tab), n, stride, size)
	if err != nil {
		return nil, err
	}
	out := make([]T, n)
	for i := range out {
		if out[i], err = decode(tab[i*stride:]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// tableFits checks that n entries of stride bytes, each at least size
// bytes, fit in length bytes, and returns the stride. An empty table
// fits whatever its entry size.
func tableFits(what string, length, n, stride, size int) (int, error) {
	if n == 0 {
		return stride, nil
	}
	if stride < size {
		return 0, fmt.Errorf("%s header entry size %d too small (%d)", what, stride, size)
	}
	if n < 0 || length < size || (length-size)/stride < n-1 {
		return 0, fmt.Errorf("%s header table (%d entries) runs past the end of the file", what, n)
	}
	return stride, nil
}

// decodeClass decodes a header structure at the start of b, in the
// file's class and byte order: as it is in a 64-bit file; in a 32-bit
// file its 32-bit form, N, made wide by widen.
func decodeClass[W, N any](h *Header, b []byte, widen func(*N) W) (W, error) {
	if h.is64() {
		var w W
		_, err := binary.Decode(b, h.ByteOrder, &w)
		return w, err
	}
	var n N
	_, err := binary.Decode(b, h.ByteOrder, &n)
	return widen(&n), err
}

// decodeProg decodes the program header at the start of b.
func (h *Header) decodeProg(b []byte) (elf.Prog64, error) {
	return decodeClass(h, b, func(p32 *elf.Prog32) elf.Prog64 {
		return elf.Prog64{Type: p32.Type, Flags: p32.Flags, Off: uint64(p32.Off), Vaddr: uint64(p32.Vaddr),
			Paddr: uint64(p32.Paddr), Filesz: uint64(p32.Filesz), Memsz: uint64(p32.Memsz), Align: uint64(p32.Align)}
	})
}

// decodeSection decodes the section header at the start of b.
func (h *Header) decodeSection(b []byte) (elf.Section64, error) {
	return decodeClass(h, b, func(s32 *elf.Section32) elf.Section64 {
		return elf.Section64{Name: s32.Name, Type: s32.Type, Flags: uint64(s32.Flags), Addr: uint64(s32.Addr),
			Off: uint64(s32.Off), Size: uint64(s32.Size), Link: s32.Link, Info: s32.Info,
			Addralign: uint64(s32.Addralign), Entsize: uint64(s32.Entsize)}
	})
}

// errNarrow reports a value that does not fit in a 32-bit file's field.
var errNarrow = errors.New("value too large for an ELF32 header")

// encodeClass writes a header structure to the start of b, in the file's
// class and byte order: wide itself in a 64-bit file; in a 32-bit file
// narrow(), its 32-bit form, once the values of its 64-bit fields, wides,
// are found to fit (errNarrow when one does not).
func encodeClass[W, N any](h *Header, b []byte, wide *W, wides []uint64, narrow func() *N) error {
	var err error
	switch {
	case h.is64():
		_, err = binary.Encode(b, h.ByteOrder, wide)
	case slices.ContainsFunc(wides, func(v uint64) bool { return v > math.MaxUint32 }):
		err = errNarrow
	default:
		_, err = binary.Encode(b, h.ByteOrder, narrow())
	}
	return err
}

// encode writes the file header to the start of b.
func (h *Header) encode(b []byte) error {
	x := &h.Header64
	return encodeClass(h, b, x, []uint64{x.Entry, x.Phoff, x.Shoff}, func() *elf.Header32 {
		return &elf.Header32{Ident: x.Ident, Type: x.Type, Machine: x.Machine,
			Version: x.Version, Entry: uint32(x.Entry), Phoff: uint32(x.Phoff), Shoff: uint32(x.Shoff), Flags: x.Flags,
			Ehsize: x.Ehsize, Phentsize: x.Phentsize, Phnum: x.Phnum, Shentsize: x.Shentsize, Shnum: x.Shnum,
			Shstrndx: x.Shstrndx}
	})
}

// encodeProg writes program header p to the start of b.
func (h *Header) encodeProg(b []byte, p *elf.Prog64) error {
	return encodeClass(h, b, p, []uint64{p.Off, p.Vaddr, p.Paddr, p.Filesz, p.Memsz, p.Align}, func() *elf.Prog32 {
		return &elf.Prog32{Type: p.Type, Flags: p.Flags, Off: uint32(p.Off),
			Vaddr: uint32(p.Vaddr), Paddr: uint32(p.Paddr), Filesz: uint32(p.Filesz), Memsz: uint32(p.Memsz),
			Align: uint32(p.Align)}
	})
}

// encodeSection writes section header s to the start of b.
func (h *Header) encodeSection(b []byte, s *elf.Section64) error {
	return encodeClass(h, b, s, []uint64{s.Flags, s.Addr, s.Off, s.Size, s.Addralign, s.Entsize}, func() *elf.Section32 {
		return &elf.Section32{Name: s.Name, Type: s.Type, Flags: uint32(s.Flags),
			Addr: uint32(s.Addr), Off: uint32(s.Off), Size: uint32(s.Size), Link: s.Link, Info: s.Info,
			Addralign: uint32(s.Addralign), Entsize: uint32(s.Entsize)}
	})
}
