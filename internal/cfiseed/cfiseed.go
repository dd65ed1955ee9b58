// Package cfiseed gives the CFI fuzz targets of packages cfi and dump
// their seeds from the reference corpus, and the malformed variants of a
// seed that plain `go test` runs them over.
//
// A seed's Flags say how to read its bytes, the same for both targets:
// bit 0 .debug_frame (else .eh_frame), bit 1 32-bit addresses, bit 2
// big-endian, bits 3-4 the arch.Arch, bit 5 also as .eh_frame_hdr.
package cfiseed

import (
	"debug/elf"
	"encoding/binary"
	"path/filepath"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/elffile"
	"github.com/sframekit/sframekit/internal/corpus"
)

// Flag bits of a Seed (see the package comment).
const (
	DebugFrame = 1 << 0
	Addr32     = 1 << 1
	BigEndian  = 1 << 2
	Hdr        = 1 << 5
)

// Seed is a section's bytes and how to read them.
type Seed struct {
	Data  []byte
	Flags uint8
}

// Corpus returns the .eh_frame sections (relocated, as cfi.Load
// reads them) and .eh_frame_hdr sections of small corpus files of each
// architecture, or nil when there is no corpus: the fuzz targets still
// run on their synthetic seeds.
func Corpus() []Seed {
	dir, ok := corpus.Find()
	if !ok {
		return nil
	}
	var seeds []Seed
	for _, name := range []string{
		"x86_64/v3/edge-x86_64.o", "x86_64/v3/basic-pic.so", "x86_64/v3/drap-O2.elf",
		"aarch64/v3/edge-aarch64.o", "aarch64/v3/basic-pacb.elf", "s390x/v3/edge-s390x.o", "s390x/v3/fp-O2.elf",
	} {
		f, err := elf.Open(filepath.Join(dir, name))
		if err != nil {
			continue
		}
		flags := uint8(0)
		if f.ByteOrder == binary.BigEndian {
			flags |= BigEndian
		}
		flags |= uint8(arch.FromELF(f.Machine)&3) << 3
		if s := f.Section(".eh_frame"); s != nil {
			if d, err := elffile.SectionData(f, s, elffile.RelocatedLenient); err == nil {
				seeds = append(seeds, Seed{d, flags})
			}
		}
		if s := f.Section(".eh_frame_hdr"); s != nil {
			if d, err := elffile.SectionData(f, s, elffile.Unrelocated); err == nil {
				seeds = append(seeds, Seed{d, flags | Hdr})
			}
		}
		f.Close()
	}
	return seeds
}

// Variants calls fn with s and with about 40 truncations of it and, at
// each cut, two single-byte corruptions (the second read as the other
// section kind).
func Variants(s Seed, fn func(data []byte, flags uint8)) {
	fn(s.Data, s.Flags)
	step := len(s.Data)/40 + 1
	for cut := 0; cut < len(s.Data); cut += step {
		fn(s.Data[:cut], s.Flags)
		mut := append([]byte(nil), s.Data...)
		mut[cut] ^= 0xff
		fn(mut, s.Flags)
		mut[cut] = 0x80
		fn(mut, s.Flags^DebugFrame)
	}
}
