package elffile

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/internal/corpus"
)

// FuzzRelocatedData feeds arbitrary ELF bytes (seeded with the corpus's
// relocatable objects, whose .rela.sframe and .rela.eh_frame it applies)
// through section lookup and relocation, strict and lenient. Neither may
// panic, and lenient relocation never fails where strict succeeds.
func FuzzRelocatedData(f *testing.F) {
	for _, path := range corpus.List() {
		if !strings.HasSuffix(path, ".o") {
			continue
		}
		if data, err := os.ReadFile(path); err == nil && len(data) < 64<<10 {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ef, err := elf.NewFile(bytes.NewReader(data))
		if err != nil {
			return
		}
		FindSFrame(ef, "")
		BFDName(ef)
		// The sections relocations apply to (what callers read), at most
		// 16: calling per section is quadratic in the section count.
		n := 0
		for _, r := range ef.Sections {
			if (r.Type != elf.SHT_RELA && r.Type != elf.SHT_REL) || int(r.Info) >= len(ef.Sections) || n == 16 {
				continue
			}
			n++
			s := ef.Sections[r.Info]
			if s.Type == elf.SHT_NOBITS || s.Size > 1<<20 {
				continue
			}
			strict, serr := SectionData(ef, s, Relocated)
			lenient, lerr := SectionData(ef, s, RelocatedLenient)
			if serr == nil && (lerr != nil || !bytes.Equal(strict, lenient)) {
				t.Fatalf("section %s: strict relocation succeeded, lenient gave %v", s.Name, lerr)
			}
		}
	})
}

// FuzzAddSFrameSegment plans and adds an SFrame segment to arbitrary
// bytes (seeded with the corpus's executables and libraries). Neither
// may panic, and what AddSFrameSegment returns plans again (its headers
// read back).
func FuzzAddSFrameSegment(f *testing.F) {
	for _, path := range corpus.List() {
		if strings.HasSuffix(path, ".elf") || strings.HasSuffix(path, ".so") {
			if data, err := os.ReadFile(path); err == nil && len(data) < 64<<10 {
				f.Add(data)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		plan, err := PlanSFrameSegment(data)
		if err != nil {
			return
		}
		if plan.Offset > 1<<24 {
			return // a sparse layout far past the input: not worth the memory
		}
		out, err := AddSFrameSegment(data, plan, make([]byte, 40))
		if err != nil {
			return
		}
		if _, err := PlanSFrameSegment(out); err != nil {
			t.Fatalf("output does not plan again: %v", err)
		}
	})
}

// FuzzNoteBuildID feeds arbitrary note bytes (seeded with a real build-ID
// note) to NoteBuildID: it may not panic, and what it returns lies within
// the input.
func FuzzNoteBuildID(f *testing.F) {
	f.Add([]byte("\x04\x00\x00\x00\x05\x00\x00\x00\x03\x00\x00\x00GNU\x00\x01\x02\x03\x04\x05\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if id := NoteBuildID(data, binary.LittleEndian); len(id) > len(data) {
			t.Fatalf("build ID of %d bytes from %d", len(id), len(data))
		}
	})
}
