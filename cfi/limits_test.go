package cfi

import (
	"bytes"
	"debug/elf"
	"errors"
	"io"
	"testing"

	"github.com/sframekit/sframekit/elffile"
	"github.com/sframekit/sframekit/internal/elftest"
	"github.com/sframekit/sframekit/internal/memtest"
)

// Tests of the limits on what a small hostile file may cost (issue 10).
// Each builds its input and measures the work's peak RSS in a child.

// TestDebugFrameBomb prints and loads a file whose compressed
// .debug_frame declares, and really expands to, 1 GiB from 1 MiB
// (`sframe cfi --section .debug_frame` reached 6.65 GB of RSS on such a
// file). The section must be refused before it is decompressed.
func TestDebugFrameBomb(t *testing.T) {
	if memtest.InChild(t) {
		f, err := elf.NewFile(bytes.NewReader(elftest.Build(elf.ET_EXEC, []elftest.Section{
			{Name: ".debug_frame", Type: elf.SHT_PROGBITS, Flags: elf.SHF_COMPRESSED,
				Data: elftest.Chdr(elf.COMPRESS_ZLIB, 1<<30, elftest.ZlibZeros(1<<30))},
		})))
		if err != nil {
			t.Fatal(err)
		}
		if err := Dump(io.Discard, f, ".debug_frame"); !errors.Is(err, elffile.ErrTooLarge) {
			t.Errorf("Dump: %v, want elffile.ErrTooLarge", err)
		}
		if _, err := FromELF(f, ".debug_frame"); !errors.Is(err, elffile.ErrTooLarge) {
			t.Errorf("FromELF: %v, want elffile.ErrTooLarge", err)
		}
		return
	}
	if rss := memtest.PeakRSS(t); rss > 200<<20 {
		t.Errorf("peak RSS %d MiB reading a 1 MiB file", rss>>20)
	}
}
