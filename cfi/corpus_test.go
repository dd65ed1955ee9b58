package cfi

import (
	"debug/elf"
	"errors"
	"path/filepath"
	"testing"

	"github.com/sframekit/sframekit/internal/corpus"
)

// TestCorpusLookup checks the lookup path against the streamed rows: for
// every row of every FDE, RowForPC at its first and last address must
// return the same rules, through .eh_frame_hdr and through the index.
func TestCorpusLookup(t *testing.T) {
	files := corpus.Frames(t)
	rows := 0
	for _, p := range files {
		f, err := elf.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, sec := range []string{".eh_frame", ".debug_frame"} {
			if f.Section(sec) == nil {
				continue
			}
			tab, err := FromELF(f, sec)
			if err != nil {
				t.Fatalf("%s: %v", corpus.Rel(t, p), err)
			}
			if f.Section(".eh_frame_hdr") != nil && sec == ".eh_frame" && tab.Hdr() == nil {
				t.Errorf("%s: .eh_frame_hdr not used", corpus.Rel(t, p))
			}
			noHdr := withoutHdr(t, tab)
			isRel := f.Type == elf.ET_REL
			it := tab.Entries()
			for it.Next() {
				e := it.Entry()
				if e.Err != nil {
					t.Errorf("%s: entry at %#x: %v", corpus.Rel(t, p), e.Offset, e.Err)
					continue
				}
				if e.Kind != KindFDE {
					continue
				}
				fde := *e.FDE
				ut := tab.NewUnwindTable(&fde)
				for ut.Next() {
					row := *ut.Row()
					rows++
					if isRel {
						// Objects: FDE ranges of different text sections
						// overlap at 0, so only the per-FDE lookup applies.
						var r Row
						if err := tab.FDERow(&UnwindContext{}, &fde, row.End-1, &r); err != nil || !r.Equal(&row) {
							t.Errorf("%s: FDE %#x: FDERow(%#x) = %v, %v", corpus.Rel(t, p), fde.Offset, row.End-1, err, r.CFA)
						}
						continue
					}
					for _, pc := range []uint64{row.Start, row.End - 1} {
						for _, tb := range []*Table{tab, noHdr} {
							got, err := lookup(tb, pc)
							if err != nil {
								t.Errorf("%s: RowForPC(%#x): %v", corpus.Rel(t, p), pc, err)
								continue
							}
							if !got.Equal(&row) || got.Start != row.Start || got.End != row.End {
								t.Errorf("%s: RowForPC(%#x) = [%#x,%#x) %+v, want [%#x,%#x) %+v", corpus.Rel(t, p), pc, got.Start, got.End, got.CFA, row.Start, row.End, row.CFA)
							}
						}
					}
				}
				if err := ut.Err(); err != nil {
					t.Errorf("%s: FDE %#x: %v", corpus.Rel(t, p), fde.Offset, err)
				}
			}
			if it.Err() != nil {
				t.Errorf("%s: %v", corpus.Rel(t, p), it.Err())
			}
		}
		f.Close()
	}
	if rows == 0 {
		t.Fatal("no rows checked")
	}
	t.Logf("checked %d rows", rows)
}

// withoutHdr makes a Table over tab's section that does not use
// .eh_frame_hdr, so that lookups go through the sorted index.
func withoutHdr(t testing.TB, tab *Table) *Table {
	n, err := New(tab.data, Options{Kind: tab.kind, Addr: tab.addr, ByteOrder: tab.order, AddrSize: tab.addrSize,
		Arch: tab.arch, TextBase: tab.text, DataBase: tab.dataBase, ReadPointer: tab.deref})
	if err != nil {
		t.Fatal(err)
	}
	n.name = tab.name
	return n
}

// TestCorpusNoFDE checks that addresses outside every FDE are reported as
// such rather than matched to a neighbour.
func TestCorpusNoFDE(t *testing.T) {
	p := filepath.Join(corpus.Dir(t), "x86_64", "v3", "basic-O2.elf")
	f, err := elf.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tab, err := FromELF(f, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, pc := range []uint64{0, 0x10, ^uint64(0)} {
		if _, err := lookup(tab, pc); !errors.Is(err, ErrNoFDE) {
			t.Errorf("RowForPC(%#x) error = %v, want ErrNoFDE", pc, err)
		}
	}
}
