package perfunwind

import (
	"github.com/sframekit/sframekit/cfi"
	"github.com/sframekit/sframekit/unwind"
)

// cfiCache remembers the CFI row found for each address of one file:
// samples hit the same few thousand return addresses over and over, and
// finding a row (the FDE, then its instructions run up to the address)
// costs ten times what copying it does. It is the Session's, used by one
// goroutine at a time.
type cfiCache struct {
	t    unwind.CFI
	rows map[uint64]*cfiRow
}

type cfiRow struct {
	cie *cfi.CIE
	ok  bool
	row cfi.Row
}

// maxCFIRows bounds the rows a cfiCache keeps (about 300 bytes each):
// past it, the cache starts over.
const maxCFIRows = 1 << 16

// Lookup implements unwind.CFI.
func (c *cfiCache) Lookup(ctx *cfi.UnwindContext, pc uint64, row *cfi.Row) (*cfi.CIE, bool, error) {
	if e, ok := c.rows[pc]; ok {
		if e.ok {
			*row = e.row
		}
		return e.cie, e.ok, nil
	}
	cie, ok, err := c.t.Lookup(ctx, pc, row)
	// Rows with rules beyond those a Row holds inline keep them in a
	// slice that a copy would share: those are not cached (rare).
	if err == nil && (!ok || row.NumRules() <= maxInlineRules) {
		if len(c.rows) >= maxCFIRows {
			clear(c.rows)
		}
		e := &cfiRow{cie: cie, ok: ok}
		if ok {
			e.row = *row
		}
		c.rows[pc] = e
	}
	return cie, ok, err
}

// maxInlineRules is how many register rules a cfi.Row holds without a
// separate slice (cfi's inlineRules).
const maxInlineRules = 24

// cachedCFI returns the caching wrapper of t, one per table.
func (s *Session) cachedCFI(t unwind.CFI) unwind.CFI {
	if t == nil {
		return nil
	}
	c := s.cfis[t]
	if c == nil {
		c = &cfiCache{t: t, rows: map[uint64]*cfiRow{}}
		s.cfis[t] = c
	}
	return c
}
