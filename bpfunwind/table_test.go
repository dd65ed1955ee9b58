package bpfunwind

import (
	"debug/elf"
	"sort"
	"testing"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/internal/testprog"
	"github.com/sframekit/sframekit/sframe"
	"github.com/sframekit/sframekit/unwind"
)

// lookup returns a function that returns the row covering the ELF
// address a, as the walker's search finds it (rowNone for none): among
// the rows from its bucket's (Buckets, made once) to the next bucket's.
func (tab *Table) lookup() func(a uint64) Row {
	shift, idx := tab.Buckets()
	return func(a uint64) Row { return tab.search(shift, idx, a) }
}

func (tab *Table) search(shift uint32, idx []Bucket, a uint64) Row {
	if a < tab.Base || a >= tab.Limit || len(tab.Rows) == 0 {
		return Row{Flags: rowNone}
	}
	k := uint32(a - tab.Base)
	b := min(int(uint64(k)>>shift), len(idx)-1)
	lo, hi := int(idx[b].Lo), min(int(idx[b].Hi), len(tab.Rows))
	if tab.Rows[lo].PC > k {
		return Row{Flags: rowNone}
	}
	i := lo + 1 + sort.Search(hi-lo-1, func(i int) bool { return tab.Rows[lo+1+i].PC > k })
	r := tab.Rows[i-1]
	r.PC = 0
	return r
}

// checkTable checks, at the start of every SFrame row of t (and the
// byte after), that the walker's table gives the row's reduced rule, or
// no rule where it has none the walker applies, and rowEnd in the
// outermost code.
func checkTable(t *testing.T, name string, tb *unwind.Tables) *Table {
	t.Helper()
	s := tb.SFrame
	if s == nil {
		t.Fatalf("%s: no SFrame", name)
	}
	tab := BuildTable(tb, arch.AMD64)
	lookup := tab.lookup()
	outer := tb.Outermost()
	inOuter := func(a uint64) bool {
		for _, o := range outer {
			if a >= o[0] && a < o[1] {
				return true
			}
		}
		return false
	}
	checked := 0
	for i := 0; i < s.NumFuncs(); i++ {
		fn, err := s.Func(i)
		if err != nil {
			t.Fatal(err)
		}
		it := s.FREs(&fn)
		for it.Next() {
			for _, a := range []uint64{fn.Start + uint64(it.FRE().StartOff), fn.Start + uint64(it.FRE().StartOff) + 1} {
				if a >= fn.End() {
					continue
				}
				got := lookup(a)
				want := Row{Flags: rowNone}
				if row, err := s.RowForPC(a); err == nil && fn.PCType() != sframe.PCMask && !fn.Signal() {
					if r, why := reduce(&row, arch.AMD64); why == NumReasons {
						want = r
					}
				}
				if inOuter(a) {
					want = Row{Flags: rowEnd}
				}
				want.PC = 0
				if got != want {
					t.Fatalf("%s: at %#x the table has %+v, want %+v", name, a, got, want)
				}
				checked++
			}
		}
	}
	for _, o := range outer {
		if got := lookup(o[0]); got.Flags != rowEnd {
			t.Errorf("%s: outermost code at %#x has %+v", name, o[0], got)
		}
	}
	t.Logf("%s: %d outermost ranges, %d rows, %d addresses checked, skipped %v", name, len(outer), len(tab.Rows), checked, tab.Skipped)
	return tab
}

// TestBuildTable checks the walker's tables of a program built with
// SFrame and of the C library (SFrame compiled from its CFI) against
// their SFrame rows.
func TestBuildTable(t *testing.T) {
	exe := testprog.Build(t, "../recorder/testdata/recprog.c", "-O2", "-Wa,--gsframe", "-pthread")
	for _, path := range []string{exe, "/usr/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"} {
		f, err := elf.Open(path)
		if err != nil {
			t.Skip(err)
		}
		defer f.Close()
		tab := checkTable(t, path, unwind.LoadFileTables(f, path, unwind.LoadOptions{SFrameFromCFI: true}))
		if len(tab.Rows) < 50 {
			t.Errorf("%s: %d rows", path, len(tab.Rows))
		}
		// Few buckets per row (their memory), few rows per bucket (the
		// walker's search).
		shift, idx := tab.Buckets()
		most := 0
		for _, bk := range idx {
			most = max(most, int(bk.Hi-bk.Lo))
		}
		if len(idx) > len(tab.Rows) || most > 64 {
			t.Errorf("%s: %d buckets of %d bytes for %d rows, up to %d rows a bucket", path, len(idx), 1<<shift, len(tab.Rows), most)
		}
		t.Logf("%s: %d buckets of %d bytes, up to %d rows a bucket", path, len(idx), 1<<shift, most)
	}
}
