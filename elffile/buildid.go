package elffile

import (
	"debug/elf"
	"encoding/binary"
)

// NT_GNU_BUILD_ID is the type of the GNU note holding a build ID
// (debug/elf names no note types).
const NT_GNU_BUILD_ID = 3

// MaxNotes bounds the bytes of one note section or PT_NOTE segment that
// BuildID reads (real ones hold a few notes, under 1 KiB): a larger one
// is skipped.
const MaxNotes = 1 << 20

// NoteBuildID returns a copy of the descriptor of the first non-empty
// NT_GNU_BUILD_ID note (owner "GNU") among the notes in data, the
// contents of a note section, a PT_NOTE segment or /sys/kernel/notes;
// nil when there is none. It stops at the first note that does not fit
// in data.
func NoteBuildID(data []byte, bo binary.ByteOrder) []byte {
	for len(data) >= 12 {
		namesz := uint64(bo.Uint32(data))
		descsz := uint64(bo.Uint32(data[4:]))
		typ := bo.Uint32(data[8:])
		descOff := 12 + (namesz+3)&^3
		if descOff+descsz > uint64(len(data)) {
			return nil
		}
		if typ == NT_GNU_BUILD_ID && namesz == 4 && string(data[12:15]) == "GNU" && descsz > 0 {
			return append([]byte(nil), data[descOff:descOff+descsz]...)
		}
		end := descOff + (descsz+3)&^3
		if end >= uint64(len(data)) {
			return nil
		}
		data = data[end:]
	}
	return nil
}

// BuildID returns the GNU build ID of f, or nil: from its note sections
// (read through SectionData, so a compressed one is bounded), else from
// its PT_NOTE segments, for an image without section headers. Each note
// section or segment is read only up to MaxNotes bytes.
func BuildID(f *elf.File) []byte {
	for _, s := range f.Sections {
		if s.Type != elf.SHT_NOTE || s.Size > MaxNotes {
			continue
		}
		if data, err := SectionData(f, s, Unrelocated); err == nil {
			if id := NoteBuildID(data, f.ByteOrder); id != nil {
				return id
			}
		}
	}
	for _, p := range f.Progs {
		if p.Type != elf.PT_NOTE || p.Filesz > MaxNotes {
			continue
		}
		buf := make([]byte, p.Filesz)
		if _, err := p.ReadAt(buf, 0); err == nil {
			if id := NoteBuildID(buf, f.ByteOrder); id != nil {
				return id
			}
		}
	}
	return nil
}
