package cfi

import (
	"debug/elf"
	"math/bits"
	"testing"

	"github.com/sframekit/sframekit/internal/corpus"
)

// TestFromELFLazy checks that a table read on demand (FromELFLazy) gives
// the rows the table read whole gives, at every 7th byte of every FDE's
// range and around it, and that it read only part of the section, on
// the corpus files of every architecture that have .eh_frame_hdr and
// this machine's libc.
func TestFromELFLazy(t *testing.T) {
	for _, page := range []uint64{4096, 16} {
		lazyPage = page
		testFromELFLazy(t)
	}
	lazyPage = 4096
}

// testFromELFLazy is TestFromELFLazy with one page size (16 bytes: most
// entries span pages, read together).
func testFromELFLazy(t *testing.T) {
	files := append(corpus.ELFs(t), "/usr/lib/x86_64-linux-gnu/libc.so.6")
	lazyFiles := 0
	for _, p := range files {
		f, err := elf.Open(p)
		if err != nil {
			continue
		}
		eager, err1 := FromELF(f, "")
		lazy, err2 := FromELFLazy(f, "")
		if (err1 == nil) != (err2 == nil) {
			t.Fatalf("%s: FromELF error %v, FromELFLazy error %v", p, err1, err2)
		}
		if err1 != nil || lazy.lazy == nil {
			f.Close()
			continue
		}
		lazyFiles++
		var pcs []uint64
		for it := eager.Entries(); it.Next(); {
			if fde := it.Entry().FDE; fde != nil && fde.PCEnd > fde.PCBegin {
				pcs = append(pcs, fde.PCBegin-1, fde.PCEnd)
				for pc := fde.PCBegin; pc < fde.PCEnd; pc += 7 {
					pcs = append(pcs, pc)
				}
			}
		}
		for i, pc := range pcs {
			want, werr := eager.RulesForPC(pc)
			got, gerr := lazy.RulesForPC(pc)
			if (werr == nil) != (gerr == nil) || werr != nil && werr.Error() != gerr.Error() {
				t.Fatalf("%s %#x: error %v, lazy %v", p, pc, werr, gerr)
			}
			if werr == nil && !want.Equal(&got) {
				t.Fatalf("%s %#x: row %+v, lazy %+v", p, pc, want, got)
			}
			if i == 20 && uint64(len(lazy.data)) > 8*lazyPage {
				// A few lookups read a few pages.
				read := 0
				for _, w := range lazy.lazy.filled {
					read += bits.OnesCount64(w)
				}
				if uint64(read)*lazyPage >= uint64(len(lazy.data)) {
					t.Errorf("%s: %d lookups read all %d pages", p, i+1, read)
				}
			}
		}
		f.Close()
	}
	if lazyFiles == 0 {
		t.Fatal("no file read lazily")
	}
}
