package cfi

import (
	"debug/elf"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/sframekit/sframekit/internal/corpus"
)

// TestConcurrentUse shares Tables between goroutines from their first use
// (so that the CIE cache and the lazily built FDE index are filled
// concurrently) and checks every goroutine's lookups, walks and row
// streams against answers computed beforehand on separate Tables. Run
// with -race, it checks what Table's documentation promises: all methods
// may be called concurrently, each goroutine with its own UnwindContext.
func TestConcurrentUse(t *testing.T) {
	f, err := elf.Open(filepath.Join(corpus.Dir(t), "x86_64", "v3", "big-pic.so"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fresh := func() (*Table, *Table) {
		tab, err := FromELF(f, ".eh_frame")
		if err != nil {
			t.Fatal(err)
		}
		if tab.Hdr() == nil {
			t.Fatal("no .eh_frame_hdr")
		}
		return tab, withoutHdr(t, tab)
	}

	// Reference answers, sequentially, on Tables of their own.
	ref, _ := fresh()
	type want struct {
		pc  uint64
		row string
		fde uint64
	}
	var wants []want
	var fdeOffs []uint64
	rows := 0
	var ctx UnwindContext
	for it := ref.Entries(); it.Next(); {
		e := it.Entry()
		if e.Kind != KindFDE || e.Err != nil {
			continue
		}
		fdeOffs = append(fdeOffs, e.Offset)
		for ut := ref.NewUnwindTable(e.FDE); ut.Next(); rows++ {
			if rows%3 != 0 {
				continue
			}
			var r Row
			pc := ut.Row().Start
			fde, err := ref.RowForPC(&ctx, pc, &r)
			if err != nil {
				t.Fatalf("RowForPC(%#x): %v", pc, err)
			}
			wants = append(wants, want{pc, fmtRow(&r), fde.Offset})
		}
	}
	if len(wants) < 100 {
		t.Fatalf("only %d rows to look up", len(wants))
	}

	shared, sharedNoHdr := fresh()
	const workers = 8
	var wg sync.WaitGroup
	errs := make(chan string, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			fail := func(format string, args ...any) {
				select {
				case errs <- t.Name() + ": " + fmt.Sprintf(format, args...):
				default:
				}
			}
			var ctx UnwindContext // one per goroutine
			var r Row
			for i := range wants {
				// Each worker starts elsewhere, so that first uses race.
				x := wants[(i+w*len(wants)/workers)%len(wants)]
				tab := shared
				if (i+w)%2 == 0 {
					tab = sharedNoHdr
				}
				fde, err := tab.RowForPC(&ctx, x.pc, &r)
				if err != nil || fmtRow(&r) != x.row || fde.Offset != x.fde {
					fail("worker %d: RowForPC(%#x) = %s, %v; want %s", w, x.pc, fmtRow(&r), err, x.row)
					return
				}
				if g, err := tab.FindFDE(x.pc); err != nil || g.Offset != x.fde {
					fail("worker %d: FindFDE(%#x) = %#x, %v; want %#x", w, x.pc, g.Offset, err, x.fde)
					return
				}
			}
			// Walks and row streams, over the same shared Tables.
			n := 0
			for it := shared.Entries(); it.Next(); {
				if e := it.Entry(); e.Kind == KindFDE && e.Err == nil {
					for ut := shared.NewUnwindTable(e.FDE); ut.Next(); n++ {
					}
				}
			}
			if n != rows {
				fail("worker %d: %d rows streamed, want %d", w, n, rows)
			}
			for _, off := range fdeOffs[w%4:] {
				fde, err := sharedNoHdr.FDEAt(off)
				if err != nil {
					fail("worker %d: FDEAt(%#x): %v", w, off, err)
					return
				}
				if c, err := sharedNoHdr.CIEAt(fde.CIE.Offset); err != nil || c != fde.CIE {
					fail("worker %d: CIEAt(%#x) = %p, %v; want the FDE's %p", w, fde.CIE.Offset, c, err, fde.CIE)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
