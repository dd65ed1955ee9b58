package symbolize

import (
	"bytes"
	"debug/elf"
	"errors"
	"testing"

	"github.com/sframekit/sframekit/elffile"
	"github.com/sframekit/sframekit/internal/elftest"
	"github.com/sframekit/sframekit/internal/memtest"
)

// TestLineTableBomb looks up a line in an object whose compressed
// .debug_line declares, and really expands to, 1 GiB from 1 MiB (issue 10:
// `sframe stack -s` reached 3 GB). The line table must be refused, with
// an error saying why, before debug/elf decompresses it.
func TestLineTableBomb(t *testing.T) {
	if memtest.InChild(t) {
		img := elftest.Build(elf.ET_EXEC, []elftest.Section{
			{Name: ".text", Type: elf.SHT_PROGBITS, Flags: elf.SHF_ALLOC | elf.SHF_EXECINSTR, Addr: 0x1000, Data: make([]byte, 16)},
			{Name: ".debug_info", Type: elf.SHT_PROGBITS, Data: make([]byte, 64)},
			{Name: ".debug_line", Type: elf.SHT_PROGBITS, Flags: elf.SHF_COMPRESSED,
				Data: elftest.Chdr(elf.COMPRESS_ZLIB, 1<<30, elftest.ZlibZeros(1<<30))},
		})
		s := New()
		if err := s.Register("bomb", bytes.NewReader(img)); err != nil {
			t.Fatal(err)
		}
		s.Lookup("bomb", 0x1004)
		if err := s.Err("bomb"); !errors.Is(err, elffile.ErrTooLarge) {
			t.Errorf("Err after a line lookup: %v, want elffile.ErrTooLarge", err)
		}
		return
	}
	memtest.AtMost(t, 200<<20, "looking up a line in a 1 MiB file")
}
