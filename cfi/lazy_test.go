package cfi

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"math/bits"
	"path/filepath"
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

// FuzzLazy checks that a lazy table (newLazy, as FromELFLazy makes) gives
// the rows and errors of the whole-section table for any .eh_frame and
// .eh_frame_hdr bytes, and never panics. Seeds: the corpus files' two
// sections.
func FuzzLazy(f *testing.F) {
	for _, p := range []string{"x86_64/v3/basic-pic.so", "x86_64/v3/drap-O2.elf", "aarch64/v3/basic-pacb.elf", "s390x/v3/fp-O2.elf"} {
		ef, err := elf.Open(filepath.Join(corpusDirNoSkip(), p))
		if err != nil {
			continue
		}
		s, h := ef.Section(".eh_frame"), ef.Section(".eh_frame_hdr")
		if s != nil && h != nil {
			sd, err1 := s.Data()
			hd, err2 := h.Data()
			if err1 == nil && err2 == nil {
				f.Add(sd, hd, s.Addr, h.Addr, s.Addr+0x40, ef.ByteOrder == binary.BigEndian)
			}
		}
		ef.Close()
	}
	f.Fuzz(func(t *testing.T, data, hdr []byte, addr, hdrAddr, pc uint64, big bool) {
		o := Options{Kind: EHFrame, Addr: addr, ByteOrder: binary.LittleEndian, AddrSize: 8, Hdr: hdr, HdrAddr: hdrAddr}
		if big {
			o.ByteOrder = binary.BigEndian
		}
		eager, err := New(data, o)
		if err != nil {
			return
		}
		lazy, err := newLazy(uint64(len(data)), bytes.NewReader(data), o)
		if err != nil || lazy == nil {
			return
		}
		for i := uint64(0); i < 64; i++ {
			p := pc + i*i*13
			if h := eager.hdr; h != nil && h.Len() > 0 && i%2 == 1 {
				p, _, _ = h.Entry(int(i) % h.Len())
			}
			want, werr := eager.RulesForPC(p)
			got, gerr := lazy.RulesForPC(p)
			if (werr == nil) != (gerr == nil) || werr != nil && werr.Error() != gerr.Error() {
				t.Fatalf("%#x: error %v, lazy %v", p, werr, gerr)
			}
			if werr == nil && !want.Equal(&got) {
				t.Fatalf("%#x: row %+v, lazy %+v", p, want, got)
			}
		}
	})
}
