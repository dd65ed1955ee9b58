package bpfunwind

import (
	"cmp"
	"math"
	"slices"
	"sort"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/internal/enumstr"
	"github.com/sframekit/sframekit/sframe"
	"github.com/sframekit/sframekit/unwind"
)

// Row flags: the rule shapes the BPF walker applies (bpf/walk.c).
const (
	rowCFAFP = 1 << iota // CFA = FP + CFAOff, else SP + CFAOff
	rowRA                // RA saved at CFA + RAOff
	rowFP                // FP saved at CFA + FPOff, else unchanged
	rowEnd               // outermost: the walk ends at this frame
	rowNone              // no rule the walker applies: frame pointers
	// A signal trampoline: the interrupted SP, PC and FP are saved at
	// SP + CFAOff, RAOff and FPOff (unwind.SignalSlots), and the PC is
	// not a return address (its caller's row is looked up at it, not
	// the byte before).
	rowSignal
)

// maxMaskRows bounds the rows the PC-mask functions (PLTs) of one file
// are expanded into, together, one set per repeated block: 65,536 is a
// PLT of 32,768 entries. Shared by the file's functions, so that a
// crafted section of many such functions cannot multiply it (loadTable
// bounds the rows before expansion).
const maxMaskRows = 1 << 16

// Row is one row of a file's table as the BPF walker reads it (struct
// row of bpf/walk.c, 16 bytes): from PC (an ELF address minus the table's
// Base) up to the next row's PC.
type Row struct {
	PC     uint32
	CFAOff int32
	RAOff  int16
	FPOff  int16
	Flags  uint8
	_      [3]uint8
}

// Reason says why an SFrame row was not given to the walker, which then
// follows frame pointers in its range.
type Reason uint8

// Reasons.
const (
	ReasonCFA         Reason = iota // CFA not SP or FP + a 32-bit offset
	ReasonRA                        // RA not saved at CFA + a 16-bit offset (AArch64: still in the link register)
	ReasonFP                        // FP saved other than at CFA + a 16-bit offset
	ReasonSigned                    // RA signed (AArch64 PAC)
	ReasonSignal                    // a signal trampoline of an architecture without fixed signal-frame slots
	ReasonPCMask                    // a PC-mask function (PLT stubs) without a block size, or over maxMaskRows rows
	ReasonUndecodable               // the row did not decode
	NumReasons
)

var reasonNames = [NumReasons]string{"cfa", "ra", "fp", "signed-ra", "signal", "pc-mask", "undecodable"}

// String names the reason.
func (r Reason) String() string {
	return enumstr.Name(reasonNames[:], r, "Reason")
}

// Table is one file's rows for the walker: its SFrame rows (the file's
// own .sframe, or compiled from its CFI) reduced to the shapes the walker
// applies, with rowNone in the gaps between functions and where a row
// does not fit, and rowEnd in the file's outermost code.
type Table struct {
	// Base is the ELF address of PC 0; Limit the address past the last
	// row (lookups at or past it find no row).
	Base, Limit uint64
	Rows        []Row
	// Skipped counts the SFrame rows left to frame pointers, by reason.
	Skipped [NumReasons]int
	// SFrameRows counts the rows read.
	SFrameRows int
}

// point is a row at a full ELF address, before the table is laid out.
type point struct {
	addr uint64
	row  Row
}

// BuildTable reduces the tables of a file of architecture a to the
// walker's rows. A file without SFrame gets no rows: the walker follows
// frame pointers through it. A table spanning 4 GiB or more gets none
// either (its rows hold 32-bit offsets).
func BuildTable(t *unwind.Tables, a arch.Arch) *Table {
	tab := &Table{}
	var pts []point
	if s := t.SFrame; s != nil {
		pts = tab.sframeRows(s, a)
	}
	pts = overlayOutermost(pts, t.Outermost())
	if len(pts) == 0 {
		return tab
	}
	base, limit := pts[0].addr, pts[len(pts)-1].addr
	if limit-base >= math.MaxUint32 {
		return tab
	}
	tab.Base, tab.Limit = base, limit
	tab.Rows = make([]Row, 0, len(pts))
	for i, p := range pts {
		if i == len(pts)-1 {
			break // the end marker: Limit
		}
		r := p.row
		r.PC = uint32(p.addr - base)
		if n := len(tab.Rows); n > 0 && sameRule(&tab.Rows[n-1], &r) {
			continue
		}
		tab.Rows = append(tab.Rows, r)
	}
	return tab
}

// sameRule reports whether two rows apply the same rule.
func sameRule(a, b *Row) bool {
	return a.CFAOff == b.CFAOff && a.RAOff == b.RAOff && a.FPOff == b.FPOff && a.Flags == b.Flags
}

// sframeRows returns the rows of s, sorted, with a rowNone row at the end
// of each function that the next does not start at, and a last one at
// the end of the last function. A PC-mask function's rows (PLT stubs)
// are repeated for each of its blocks; a signal trampoline is one
// rowSignal row, also at the address right after it where no function
// starts (sigEnd).
func (tab *Table) sframeRows(s *sframe.Section, a arch.Arch) []point {
	var pts []point
	var sigEnds []uint64
	none := Row{Flags: rowNone}
	sig := none
	if sp, pc, fp, ok := unwind.SignalSlots(a); ok {
		sig = Row{CFAOff: int32(sp), RAOff: int16(pc), FPOff: int16(fp), Flags: rowSignal}
	}
	var fre []point // a function's rows, at offsets from its start
	maskBudget := uint64(maxMaskRows)
	for i := 0; i < s.NumFuncs(); i++ {
		fn, err := s.Func(i)
		if err != nil || fn.End() <= fn.Start {
			continue
		}
		size := fn.End() - fn.Start
		// A PC-mask function's offsets are within a block of RepSize,
		// each block a set of rows (up to maxMaskRows in all, for the
		// file's functions together).
		rep, maskOK := size, true
		if fn.PCType() == sframe.PCMask {
			rep = uint64(fn.RepSize)
			maskOK = rep > 0 && (size+rep-1)/rep <= maskBudget && (size+rep-1)/rep*uint64(fn.NumFREs) <= maskBudget
			if maskOK {
				maskBudget -= (size + rep - 1) / rep * uint64(fn.NumFREs)
			}
		}
		signal := fn.Signal() && sig.Flags == rowSignal
		it := s.FREs(&fn)
		fre = fre[:0]
		for it.Next() {
			e := it.FRE()
			tab.SFrameRows++
			if uint64(e.StartOff) >= size {
				break
			}
			r := none
			switch {
			case signal:
			case fn.Signal():
				tab.Skipped[ReasonSignal]++
			case !maskOK || uint64(e.StartOff) >= rep:
				tab.Skipped[ReasonPCMask]++
			default:
				if row, err := s.Rules(&fn, e); err != nil {
					tab.Skipped[ReasonUndecodable]++
				} else if rr, why := reduce(&row, a); why != NumReasons {
					tab.Skipped[why]++
				} else {
					r = rr
				}
			}
			fre = append(fre, point{uint64(e.StartOff), r})
		}
		first := len(pts)
		switch {
		case signal:
			// The rows describe the trampoline's own frame; the walker
			// needs the interrupted one's registers (unwind.stepSignal).
			pts = append(pts, point{fn.Start, sig})
			sigEnds = append(sigEnds, fn.End())
		case rep < size && maskOK:
			for blk := fn.Start; blk < fn.End(); blk += rep {
				for _, p := range fre {
					if p.addr < rep && blk+p.addr < fn.End() {
						pts = append(pts, point{blk + p.addr, p.row})
					}
				}
			}
		default:
			for _, p := range fre {
				pts = append(pts, point{fn.Start + p.addr, p.row})
			}
		}
		if len(pts) == first || pts[first].addr != fn.Start {
			pts = slices.Insert(pts, first, point{fn.Start, none})
		}
		pts = append(pts, point{fn.End(), none})
	}
	// Functions in address order, each one's rows in order; where one
	// ends at the next one's start, the next one's first row wins.
	slices.SortStableFunc(pts, func(x, y point) int { return cmp.Compare(x.addr, y.addr) })
	out := pts[:0]
	for _, p := range pts {
		if n := len(out); n > 0 && out[n-1].addr == p.addr {
			if out[n-1].row.Flags == rowNone {
				out[n-1] = p
			}
			continue
		}
		out = append(out, p)
	}
	return sigEnd(out, sigEnds, sig)
}

// sigEnd gives the address right after each signal trampoline (ends) its
// row sig where no function starts there: a sample taken while the
// kernel runs rt_sigreturn has that address as its PC (the system call's
// return address: glibc's __restore_rt ends with the system call), with
// SP still at the signal frame, as unwind.sigreturnAt finds it by the
// code for the innermost frame. Callers' rows are looked up at their
// return address - 1, which a call cannot make that address.
func sigEnd(pts []point, ends []uint64, sig Row) []point {
	for _, e := range ends {
		i := sort.Search(len(pts), func(i int) bool { return pts[i].addr >= e })
		if i == len(pts) || pts[i].addr != e || pts[i].row.Flags != rowNone {
			continue
		}
		pts[i].row = sig
		if i+1 == len(pts) || pts[i+1].addr > e+1 {
			pts = slices.Insert(pts, i+1, point{e + 1, Row{Flags: rowNone}})
		}
	}
	return pts
}

// reduce returns the walker's form of an SFrame row, or the reason it
// has none.
func reduce(row *sframe.Row, a arch.Arch) (Row, Reason) {
	var r Row
	if row.RAUndefined {
		r.Flags = rowEnd
		return r, NumReasons
	}
	c := row.CFA
	if c.Kind != sframe.RuleValue || (c.Base != a.SP() && c.Base != a.FP()) || c.Offset != int64(int32(c.Offset)) {
		return r, ReasonCFA
	}
	r.CFAOff = int32(c.Offset)
	if c.Base == a.FP() {
		r.Flags |= rowCFAFP
	}
	if row.RASigned {
		return r, ReasonSigned
	}
	ra := row.RA
	if ra.Kind != sframe.RuleDeref || ra.Base != sframe.RegCFA || ra.Offset != int64(int16(ra.Offset)) {
		return r, ReasonRA
	}
	r.RAOff = int16(ra.Offset)
	r.Flags |= rowRA
	switch fp := row.FP; fp.Kind {
	case sframe.RuleUnspecified, sframe.RuleNotSaved:
	case sframe.RuleDeref:
		if fp.Base != sframe.RegCFA || fp.Offset != int64(int16(fp.Offset)) {
			return r, ReasonFP
		}
		r.FPOff = int16(fp.Offset)
		r.Flags |= rowFP
	default:
		return r, ReasonFP
	}
	return r, NumReasons
}

// overlayOutermost makes every address of the ranges outer an rowEnd
// row: the rows starting inside them become rowEnd, and a range's end
// takes back the rule in force there.
func overlayOutermost(pts []point, outer [][2]uint64) []point {
	if len(outer) == 0 {
		return pts
	}
	at := func(addr uint64) Row {
		i := sort.Search(len(pts), func(i int) bool { return pts[i].addr > addr })
		if i == 0 {
			return Row{Flags: rowNone}
		}
		return pts[i-1].row
	}
	var add []point
	for _, o := range outer {
		add = append(add, point{o[0], Row{Flags: rowEnd}}, point{o[1], at(o[1])})
	}
	in := func(addr uint64) bool {
		i := sort.Search(len(outer), func(i int) bool { return outer[i][1] > addr })
		return i < len(outer) && addr >= outer[i][0]
	}
	out := make([]point, 0, len(pts)+len(add))
	for _, p := range pts {
		if in(p.addr) {
			p.row = Row{Flags: rowEnd}
		}
		out = append(out, p)
	}
	out = append(out, add...)
	slices.SortStableFunc(out, func(x, y point) int { return cmp.Compare(x.addr, y.addr) })
	// At an address given twice, the range's point (appended last) wins.
	res := out[:0]
	for _, p := range out {
		if n := len(res); n > 0 && res[n-1].addr == p.addr {
			res[n-1] = p
			continue
		}
		res = append(res, p)
	}
	return res
}

// Bucket is one bucket of a table's index (struct bucket of
// bpf/walk.c): the row of an address in the bucket is among the rows
// [Lo, Hi), and row Lo starts at or below the bucket's first address.
type Bucket struct{ Lo, Hi uint32 }

// Buckets returns the index of the table's rows the walker searches
// through: bucket b covers the addresses Base + [b << shift, (b+1) <<
// shift), and its row is among a few (Bucket) instead of all of them.
// The shift is the least that makes no more buckets than rows (8 bytes
// a row at most); nil without rows.
func (tab *Table) Buckets() (shift uint32, idx []Bucket) {
	n := len(tab.Rows)
	if n == 0 {
		return 0, nil
	}
	span := tab.Limit - tab.Base
	for shift < 32 && span>>shift+1 > uint64(n) {
		shift++
	}
	idx = make([]Bucket, span>>shift+1)
	i := 0
	for b := range idx {
		start := uint64(b) << shift
		for i+1 < n && uint64(tab.Rows[i+1].PC) <= start {
			i++
		}
		idx[b].Lo = uint32(i)
		if b > 0 {
			idx[b-1].Hi = uint32(i + 1)
		}
	}
	idx[len(idx)-1].Hi = uint32(n)
	return shift, idx
}
