package main

import (
	"debug/elf"
	"testing"

	"github.com/sframekit/sframekit/elffile"
	"github.com/sframekit/sframekit/internal/elftest"
	"github.com/sframekit/sframekit/internal/memtest"
)

// TestGenNoteBounded checks the note gen prints about an input's own
// SFrame section against compressed sections that claim a lot: 200 MiB
// (under elffile's limit) and 1 GiB (over it) from a few kilobytes of
// zstd. The note reads the preamble only, so neither costs more than a
// few megabytes (reading the whole section cost 2.7 GB and 37 s).
func TestGenNoteBounded(t *testing.T) {
	if memtest.InChild(t) {
		for _, size := range []uint64{200 << 20, 1 << 30} {
			img := elftest.Build(elf.ET_EXEC, []elftest.Section{
				{Name: ".sframe", Type: elf.SHT_PROGBITS, Flags: elf.SHF_COMPRESSED, Data: elftest.Chdr(elf.COMPRESS_ZSTD, size, elftest.ZstdRLE(size, 0xe2))},
			})
			f, err := elffile.NewFile(img)
			if err != nil {
				t.Fatal(err)
			}
			if v := sectionVersion(f.Section(".sframe")); v != "" {
				t.Errorf("%d bytes of 0xe2: version %q, want none", size, v)
			}
		}
		return
	}
	memtest.AtMost(t, 100<<20, "noting the version of .sframe sections claiming 200 MiB and 1 GiB")
}

// TestGenNoteVersion checks the note's version on a real SFrame section.
func TestGenNoteVersion(t *testing.T) {
	f, err := elffile.Open("../../testdata/drap-O2.elf")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := elffile.FindSFrame(f.File, "")
	if s == nil {
		t.Skip("no SFrame section in drap-O2.elf")
	}
	if v := sectionVersion(s); v != ", SFRAME_VERSION_2" && v != ", SFRAME_VERSION_3" {
		t.Errorf("version note %q", v)
	}
}
