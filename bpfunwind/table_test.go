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
	spOff, pcOff, fpOff, _ := unwind.SignalSlots(arch.AMD64)
	sig := Row{CFAOff: int32(spOff), RAOff: int16(pcOff), FPOff: int16(fpOff), Flags: rowSignal}
	checked, sigs := 0, 0
	for i := 0; i < s.NumFuncs(); i++ {
		fn, err := s.Func(i)
		if err != nil {
			t.Fatal(err)
		}
		// A PC-mask function's rows repeat in each block (a PLT's
		// entries); a signal trampoline is one signal row.
		var blocks []uint64
		for b := uint64(0); b < fn.End()-fn.Start; b += uint64(fn.RepSize) {
			blocks = append(blocks, b)
			if fn.PCType() != sframe.PCMask || fn.RepSize == 0 {
				break
			}
		}
		// The address after a trampoline (a sample in rt_sigreturn),
		// where no function starts.
		if fn.Signal() && s.FindFunc(fn.End()) < 0 {
			if got := lookup(fn.End()); got != sig {
				t.Errorf("%s: after the signal trampoline at %#x the table has %+v, want %+v", name, fn.Start, got, sig)
			}
			if got := lookup(fn.End() + 1); got.Flags != rowNone {
				t.Errorf("%s: 2 bytes after the signal trampoline at %#x the table has %+v", name, fn.Start, got)
			}
			sigs++
		}
		it := s.FREs(&fn)
		for it.Next() {
			for _, b := range blocks {
				for _, a := range []uint64{fn.Start + b + uint64(it.FRE().StartOff), fn.Start + b + uint64(it.FRE().StartOff) + 1} {
					if a >= fn.End() {
						continue
					}
					got := lookup(a)
					want := Row{Flags: rowNone}
					if fn.Signal() {
						want = sig
					} else if row, err := s.RowForPC(a); err == nil {
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
	}
	for _, o := range outer {
		if got := lookup(o[0]); got.Flags != rowEnd {
			t.Errorf("%s: outermost code at %#x has %+v", name, o[0], got)
		}
	}
	t.Logf("%s: %d outermost ranges, %d signal trampolines, %d rows, %d addresses checked, skipped %v", name, len(outer), sigs, len(tab.Rows), checked, tab.Skipped)
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

// TestBuildTablePCMask: a PC-mask function's rows are repeated in each
// of its blocks (a PLT of 4 entries: 8 rows), but not beyond
// maxMaskRows (a section that says its PLT spans 2 GiB is left to frame
// pointers, not made 268 million rows).
func TestBuildTablePCMask(t *testing.T) {
	ra := sframe.Rule{Kind: sframe.RuleDeref, Base: sframe.RegCFA, Offset: -8, Fixed: true}
	sp := func(off int64) sframe.Row {
		return sframe.Row{CFA: sframe.Rule{Kind: sframe.RuleValue, Base: arch.AMD64RSP, Offset: off}, RA: ra}
	}
	rows := []sframe.EncRow{{StartOff: 0, Row: sp(8)}, {StartOff: 11, Row: sp(16)}}
	for _, c := range []struct {
		size      uint32
		rep       uint8
		wantRows  int
		wantNoneR int
	}{
		{64, 16, 8, 0},
		{1 << 31, 16, 0, 2},
	} {
		tab, n := maskTable(t, []sframe.EncFunc{{Start: 0x1000, Size: c.size, PCType: sframe.PCMask, RepSize: c.rep, Rows: rows}})
		if n != c.wantRows || tab.Skipped[ReasonPCMask] != c.wantNoneR {
			t.Errorf("size %d, blocks of %d: %d rows with a rule (want %d), skipped %v", c.size, c.rep, n, c.wantRows, tab.Skipped)
		}
		if c.wantRows > 0 {
			lookup := tab.lookup()
			for _, k := range []uint64{0, 1, 2, 3} {
				if got := lookup(0x1000 + 16*k + 5); got.CFAOff != 8 {
					t.Errorf("entry %d before its push: %+v", k, got)
				}
				if got := lookup(0x1000 + 16*k + 12); got.CFAOff != 16 {
					t.Errorf("entry %d after its push: %+v", k, got)
				}
			}
		}
	}
	// Three PLTs of 32,768 entries, each within the bound alone: the
	// file's functions share it, so only the first is expanded (a
	// crafted section of many would otherwise expand into billions).
	const size = 16 << 15
	var fns []sframe.EncFunc
	for i := range 3 {
		fns = append(fns, sframe.EncFunc{Start: 0x1000 + uint64(i)*size, Size: size, PCType: sframe.PCMask, RepSize: 16, Rows: rows})
	}
	tab, n := maskTable(t, fns)
	if n > maxMaskRows || tab.Skipped[ReasonPCMask] != 4 {
		t.Errorf("three PLTs of 32,768 entries: %d rows with a rule, skipped %v; want at most %d, 4 skipped", n, tab.Skipped, maxMaskRows)
	}
}

// maskTable builds the table of an AMD64 SFrame v3 section of fns and
// counts its rows with a return-address rule.
func maskTable(t *testing.T, fns []sframe.EncFunc) (*Table, int) {
	t.Helper()
	data, err := sframe.Encode(sframe.EncodeOptions{Version: sframe.Version3, ABI: sframe.ABIAMD64LE, Addr: 0x100000}, fns)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sframe.Parse(data, 0x100000)
	if err != nil {
		t.Fatal(err)
	}
	tab := BuildTable(&unwind.Tables{SFrame: s}, arch.AMD64)
	n := 0
	for _, r := range tab.Rows {
		if r.Flags&rowRA != 0 {
			n++
		}
	}
	return tab, n
}
