// Package elftest builds small ELF files in memory for tests: sections
// with given contents and flags, compressed sections (SHF_COMPRESSED and
// GNU .zdebug) and decompression bombs, so that tests can craft the
// hostile inputs they guard against instead of shipping them.
package elftest

import (
	"bytes"
	"compress/flate"
	"compress/zlib"
	"debug/elf"
	"encoding/binary"
)

// Section is one section of a built file. The null section and
// .shstrtab are added by Build.
type Section struct {
	Name    string
	Type    elf.SectionType
	Flags   elf.SectionFlag
	Addr    uint64
	Data    []byte // the bytes stored in the file (compressed ones included)
	Link    uint32
	Info    uint32
	Align   uint64
	EntSize uint64
}

// Build returns a little-endian ELF64 x86-64 file of type typ holding
// sections in order (indexes start at 1) and no program headers.
func Build(typ elf.Type, sections []Section) []byte {
	bo := binary.LittleEndian
	var shstr bytes.Buffer
	shstr.WriteByte(0)
	names := make([]uint32, len(sections)+1)
	for i, s := range sections {
		names[i] = uint32(shstr.Len())
		shstr.WriteString(s.Name)
		shstr.WriteByte(0)
	}
	names[len(sections)] = uint32(shstr.Len())
	shstr.WriteString(".shstrtab\x00")
	all := append(sections[:len(sections):len(sections)], Section{Name: ".shstrtab", Type: elf.SHT_STRTAB, Data: shstr.Bytes(), Align: 1})

	out := make([]byte, 64)
	offs := make([]uint64, len(all))
	for i, s := range all {
		for len(out)%8 != 0 {
			out = append(out, 0)
		}
		offs[i] = uint64(len(out))
		if s.Type != elf.SHT_NOBITS {
			out = append(out, s.Data...)
		}
	}
	for len(out)%8 != 0 {
		out = append(out, 0)
	}
	shoff := uint64(len(out))
	out = append(out, make([]byte, 64)...) // the null section
	for i, s := range all {
		sh := elf.Section64{Name: names[i], Type: uint32(s.Type), Flags: uint64(s.Flags), Addr: s.Addr, Off: offs[i],
			Size: uint64(len(s.Data)), Link: s.Link, Info: s.Info, Addralign: s.Align, Entsize: s.EntSize}
		var b bytes.Buffer
		binary.Write(&b, bo, &sh)
		out = append(out, b.Bytes()...)
	}
	hdr := elf.Header64{Type: uint16(typ), Machine: uint16(elf.EM_X86_64), Version: uint32(elf.EV_CURRENT),
		Shoff: shoff, Ehsize: 64, Shentsize: 64, Shnum: uint16(len(all) + 1), Shstrndx: uint16(len(all))}
	copy(hdr.Ident[:], elf.ELFMAG)
	hdr.Ident[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	hdr.Ident[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	hdr.Ident[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	var b bytes.Buffer
	binary.Write(&b, bo, &hdr)
	copy(out, b.Bytes())
	return out
}

// Chdr returns an ELF64 little-endian compression header (Elf64_Chdr)
// declaring size uncompressed bytes, followed by payload: the contents of
// an SHF_COMPRESSED section.
func Chdr(typ elf.CompressionType, size uint64, payload []byte) []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, &elf.Chdr64{Type: uint32(typ), Size: size, Addralign: 1})
	return append(b.Bytes(), payload...)
}

// ZDebug returns the contents of a GNU .zdebug_* section: "ZLIB", the
// declared size (big-endian) and the zlib payload.
func ZDebug(size uint64, payload []byte) []byte {
	b := append([]byte("ZLIB"), make([]byte, 8)...)
	binary.BigEndian.PutUint64(b[4:], size)
	return append(b, payload...)
}

// Zlib compresses data with zlib.
func Zlib(data []byte) []byte {
	var b bytes.Buffer
	w, _ := zlib.NewWriterLevel(&b, zlib.BestCompression)
	w.Write(data)
	w.Close()
	return b.Bytes()
}

// ZlibZeros returns a valid zlib stream that expands to n zero bytes (n a
// multiple of 1 MiB) in about n/1000 bytes, built without compressing n
// bytes: one deflate block of 1 MiB of zeros, ended by a sync flush so
// that it is byte-aligned, repeated, then an empty final block and the
// Adler-32 of n zeros.
func ZlibZeros(n uint64) []byte {
	const chunk = 1 << 20
	var blk bytes.Buffer
	fw, _ := flate.NewWriter(&blk, flate.BestCompression)
	fw.Write(make([]byte, chunk))
	fw.Flush()
	out := []byte{0x78, 0xda} // zlib header, best compression
	for i := uint64(0); i < n/chunk; i++ {
		out = append(out, blk.Bytes()...)
	}
	out = append(out, 0x03, 0x00) // final fixed-Huffman block holding only end-of-block
	// Adler-32 of n zeros: a stays 1, b adds 1 per byte.
	return binary.BigEndian.AppendUint32(out, uint32(n%65521)<<16|1)
}

// ZstdRLE returns a zstd frame of RLE blocks that expands to n copies of
// c: 4 bytes per 128 KiB.
func ZstdRLE(n uint64, c byte) []byte {
	out := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x38} // magic; no checksum, no size; window 128 KiB
	const blk = 128 << 10
	for n > 0 {
		sz := min(n, blk)
		n -= sz
		h := uint32(sz)<<3 | 1<<1 // RLE block
		if n == 0 {
			h |= 1 // last block
		}
		out = append(out, byte(h), byte(h>>8), byte(h>>16), c)
	}
	return out
}
