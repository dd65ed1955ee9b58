package perfunwind

import (
	"debug/elf"
	"testing"

	"github.com/sframekit/sframekit/cfi"
	"github.com/sframekit/sframekit/unwind"
)

// countingCFI counts the lookups that reach a real table.
type countingCFI struct {
	t unwind.CFI
	n int
}

func (c *countingCFI) Lookup(ctx *cfi.UnwindContext, pc uint64, row *cfi.Row) (*cfi.CIE, bool, error) {
	c.n++
	return c.t.Lookup(ctx, pc, row)
}

// TestCFICacheKeepsRepeated: a cfiCache keeps the row of an address
// looked up a second time, not the first (the unwinder keeps most return
// addresses' rows itself) unless another address set its bit of the seen
// set, and every lookup, first, second or later,
// gives the row the table gives. The addresses: every 7th byte of libc's
// text, every FDE's rows and the gaps between them.
func TestCFICacheKeepsRepeated(t *testing.T) {
	const libc = "/usr/lib/x86_64-linux-gnu/libc.so.6"
	f, err := elf.Open(libc)
	if err != nil {
		t.Skipf("no %s: %v", libc, err)
	}
	defer f.Close()
	tab := unwind.LoadTables(f).CFITable()
	text := f.Section(".text")
	if tab == nil || text == nil {
		t.Fatalf("%s: no CFI or no .text", libc)
	}
	var pcs []uint64
	for pc := text.Addr; pc < text.Addr+text.Size && len(pcs) < 20000; pc += 7 {
		pcs = append(pcs, pc)
	}
	// And addresses that share a bit of the seen set with one before
	// them (seenBit spreads every 7th byte over distinct bits).
	bitOf := map[uint64]bool{}
	for _, pc := range pcs {
		bitOf[seenBit(pc)] = true
	}
	for pc, n := text.Addr+1, 0; pc < text.Addr+text.Size && n < 500; pc += 7 {
		if bitOf[seenBit(pc)] {
			pcs, n = append(pcs, pc), n+1
		}
	}
	cnt := &countingCFI{t: tab}
	var s Session
	s.cfis = map[unwind.CFI]*cfiCache{}
	c := s.cachedCFI(cnt)
	var ctx, want cfi.UnwindContext
	var got, exp cfi.Row
	check := func(pass int) {
		t.Helper()
		for _, pc := range pcs {
			cie, ok, err := c.Lookup(&ctx, pc, &got)
			wcie, wok, werr := tab.Lookup(&want, pc, &exp)
			if (err == nil) != (werr == nil) || ok != wok || cie != wcie {
				t.Fatalf("pass %d, %#x: got (%v, %v), the table (%v, %v)", pass, pc, ok, err, wok, werr)
			}
			if ok && (!got.Equal(&exp) || got.Start != exp.Start || got.End != exp.End) {
				t.Fatalf("pass %d, %#x: row %+v, the table's %+v", pass, pc, got, exp)
			}
		}
	}
	kept := func() int {
		n := 0
		for _, e := range c.rows {
			if e != nil {
				n++
			}
		}
		return n
	}
	// The addresses whose bit in the seen set an address before them set
	// count as seen at their first lookup.
	shared, bits := 0, map[uint64]bool{}
	for _, pc := range pcs {
		if b := seenBit(pc); bits[b] {
			shared++
		} else {
			bits[b] = true
		}
	}
	t.Logf("%d of %d addresses share a bit", shared, len(pcs))
	if shared == 0 || shared > len(pcs)/5 {
		t.Errorf("%d of %d addresses share a bit of the seen set with another", shared, len(pcs))
	}
	check(1)
	if cnt.n != len(pcs) || kept() != shared {
		t.Errorf("first pass over %d addresses: %d table lookups, %d rows kept; want %d, %d", len(pcs), cnt.n, kept(), len(pcs), shared)
	}
	check(2)
	if cnt.n != 2*len(pcs)-shared || kept() != len(pcs) {
		t.Errorf("second pass: %d table lookups in all, %d rows kept; want %d, %d", cnt.n, kept(), 2*len(pcs)-shared, len(pcs))
	}
	check(3)
	if cnt.n != 2*len(pcs)-shared {
		t.Errorf("third pass: %d table lookups in all, want %d (every row kept)", cnt.n, 2*len(pcs)-shared)
	}
}
