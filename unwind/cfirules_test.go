//go:build linux && amd64

package unwind

import (
	"slices"
	"testing"

	"github.com/sframekit/sframekit/cfi"
)

// countedCFI counts the lookups of a real CFI table.
type countedCFI struct {
	CFI
	n *int
}

func (c countedCFI) Lookup(ctx *cfi.UnwindContext, pc uint64, row *cfi.Row) (*cfi.CIE, bool, error) {
	*c.n++
	return c.CFI.Lookup(ctx, pc, row)
}

// TestCFIRowsCached walks the captured thread (a recursion a thousand
// frames deep) with its files' CFI alone, twice with one Context: the
// first walk must look up the CFI once per distinct address, the
// recursion's repeated return addresses taking the row it left in the
// Context (cfiRules), and the second must give the same frames without
// looking the CFI up again, but for the top frame (never cached: its
// registers are all live), the outermost one (RA undefined) and signal
// frames. A third walk with the fast path off must give the
// same frames, looking everything up.
func TestCFIRowsCached(t *testing.T) {
	s := takeSnapshot(t)
	n := 0
	var mods []*Module
	for _, m := range s.cfi {
		c := *m
		if c.CFI != nil {
			c.CFI = countedCFI{m.CFI, &n}
		}
		mods = append(mods, &c)
	}
	u := s.unwinder(t, mods)
	ctx := new(Context)
	first, stop, err := u.Unwind(ctx, &s.regs, s.stack, nil)
	if stop != StopEnd {
		t.Fatalf("first walk: %v %v", stop, err)
	}
	n1 := n
	n = 0
	second, stop, err := u.Unwind(ctx, &s.regs, s.stack, nil)
	if stop != StopEnd || !slices.Equal(first, second) {
		t.Fatalf("second walk: %d frames, %v %v; the first gave %d", len(second), stop, err, len(first))
	}
	uncached := 2
	distinct := map[uint64]bool{}
	for _, f := range first {
		if f.Signal {
			uncached++
		}
		distinct[f.PC] = true
	}
	t.Logf("%d frames at %d addresses: %d CFI lookups in the first walk, %d in the second", len(first), len(distinct), n1, n)
	if n1 > len(distinct)+uncached || n > uncached {
		t.Errorf("%d frames at %d addresses: %d CFI lookups in the first walk, %d in the second; want at most one per address, then %d", len(first), len(distinct), n1, n, uncached)
	}
	general, stop, err := u.Unwind(&Context{noFast: true}, &s.regs, s.stack, nil)
	if stop != StopEnd || !slices.Equal(first, general) {
		t.Fatalf("general path: %d frames, %v %v; the fast path gave %d", len(general), stop, err, len(first))
	}
}
