package cfi

// Lookups by PC: the sorted index of FDE ranges (built on first use when
// no usable .eh_frame_hdr exists), FindFDE, and the rows of RowForPC and
// FDERow, computed with the caller's UnwindContext.

import (
	"fmt"
	"sort"
)

// sortedIndex returns the index of FDE ranges, building it on first use.
func (t *Table) sortedIndex() []indexEntry {
	t.indexOnce.Do(t.buildIndex)
	return t.index
}

// buildIndex collects the ranges of all decodable FDEs, sorted, for
// lookups when no usable .eh_frame_hdr exists. Only sortedIndex calls it.
func (t *Table) buildIndex() {
	// Entries are at least 8 bytes; this bounds the capacity by the input.
	ix := make([]indexEntry, 0, len(t.data)/32+1)
	var f FDE
	var last *CIE
	data, n := t.data, uint64(len(t.data))
	for off := uint64(0); off < n; {
		// Inline fast path: 32-bit .eh_frame FDE in the usual encoding.
		if t.kind == EHFrame && off+16 <= n {
			l := uint64(t.end.Uint32(data[off:]))
			id := uint64(t.end.Uint32(data[off+4:]))
			if l >= 12 && l < 0xfffffff0 && l <= n-off-4 {
				next := off + 4 + l
				if id == 0 {
					off = next
					continue
				}
				if c := last; c != nil && id <= off+4 && c.Offset == off+4-id &&
					c.FDEEncoding == PEPCRel|PESData4 && c.SegmentSize == 0 {
					p := off + 8
					begin := t.addr + p + uint64(int64(int32(t.end.Uint32(data[p:]))))
					end := begin + uint64(int64(int32(t.end.Uint32(data[p+4:]))))
					if t.addrSize == 4 {
						begin &= 0xffffffff
						end &= 0xffffffff
					}
					if begin < end {
						ix = append(ix, indexEntry{begin, end, off})
					}
					off = next
					continue
				}
			}
		}
		h, err := t.readHeader(off)
		if err != nil {
			break
		}
		off = uint64(h.end)
		if h.zero || h.isCIE {
			continue
		}
		begin, end, ok := t.fdeRange(&h, &last)
		if !ok {
			if t.parseFDE(&h, &f, &last) != nil {
				continue
			}
			begin, end = f.PCBegin, f.PCEnd
		}
		if end <= begin {
			continue
		}
		ix = append(ix, indexEntry{begin, end, h.off})
	}
	sorted := true
	for i := 1; i < len(ix); i++ {
		if ix[i].begin < ix[i-1].begin {
			sorted = false
			break
		}
	}
	if !sorted {
		sortIndex(ix)
	}
	t.index = ix
}

// sortIndex sorts stably by begin address. FDEs usually come in a few
// ascending runs (one per input object), which a natural merge handles in
// near-linear time; many runs go to a radix sort.
func sortIndex(ix []indexEntry) {
	var runs []int // start of each ascending run
	runs = append(runs, 0)
	for i := 1; i < len(ix); i++ {
		if ix[i].begin < ix[i-1].begin {
			runs = append(runs, i)
			if len(runs) > 64 {
				radixSort(ix)
				return
			}
		}
	}
	tmp := make([]indexEntry, len(ix))
	src, dst := ix, tmp
	for len(runs) > 1 {
		var next []int
		for r := 0; r < len(runs); r += 2 {
			lo := runs[r]
			if r+1 == len(runs) {
				copy(dst[lo:], src[lo:])
				next = append(next, lo)
				break
			}
			mid := runs[r+1]
			hi := len(src)
			if r+2 < len(runs) {
				hi = runs[r+2]
			}
			i, j, k := lo, mid, lo
			for i < mid && j < hi {
				if src[j].begin < src[i].begin {
					dst[k] = src[j]
					j++
				} else {
					dst[k] = src[i]
					i++
				}
				k++
			}
			k += copy(dst[k:], src[i:mid])
			copy(dst[k:], src[j:hi])
			next = append(next, lo)
		}
		runs = next
		src, dst = dst, src
	}
	if &src[0] != &ix[0] {
		copy(ix, src)
	}
}

// fdeRange decodes just the address range of an FDE in the encoding
// linkers emit (pcrel sdata4, CIE cached); ok is false for anything else.
func (t *Table) fdeRange(h *header, last **CIE) (begin, end uint64, ok bool) {
	if t.kind != EHFrame || h.idWidth != 4 || h.end-h.body < 8 {
		return 0, 0, false
	}
	co, okp := t.ciePointer(h)
	if !okp {
		return 0, 0, false
	}
	c, err := t.cachedCIE(co, last)
	if err != nil {
		return 0, 0, false
	}
	if c.FDEEncoding != PEPCRel|PESData4 || c.SegmentSize != 0 {
		return 0, 0, false
	}
	p := h.body
	begin = t.addr + uint64(p) + uint64(int64(int32(t.end.Uint32(t.data[p:]))))
	end = begin + uint64(int64(int32(t.end.Uint32(t.data[p+4:]))))
	if t.addrSize == 4 {
		begin &= 0xffffffff
		end &= 0xffffffff
	}
	return begin, end, true
}

// radixSort sorts index entries by begin address, stably (so equal
// addresses stay in section order), in O(n) passes over the bytes that
// differ.
func radixSort(ix []indexEntry) {
	var or, and uint64 = 0, ^uint64(0)
	for i := range ix {
		or |= ix[i].begin
		and &= ix[i].begin
	}
	diff := or ^ and // bits that are not the same in every key
	tmp := make([]indexEntry, len(ix))
	src, dst := ix, tmp
	for shift := uint(0); shift < 64; shift += 8 {
		if (diff>>shift)&0xff == 0 {
			continue
		}
		var count [257]int
		for i := range src {
			count[((src[i].begin>>shift)&0xff)+1]++
		}
		for i := 1; i < 257; i++ {
			count[i] += count[i-1]
		}
		for i := range src {
			b := (src[i].begin >> shift) & 0xff
			dst[count[b]] = src[i]
			count[b]++
		}
		src, dst = dst, src
	}
	if &src[0] != &ix[0] {
		copy(ix, src)
	}
}

// FindFDE finds the FDE covering pc, through .eh_frame_hdr's search
// table when present and a built index otherwise (sframe's FindFunc).
func (t *Table) FindFDE(pc uint64) (FDE, error) {
	var f FDE
	var last *CIE
	err := t.fdeForPC(pc, &f, &last)
	return f, err
}

func (t *Table) fdeForPC(pc uint64, f *FDE, last **CIE) error {
	if t.hdr != nil {
		fdeAddr, ok := t.hdr.lookup(pc)
		if !ok {
			return ErrNoFDE
		}
		off := fdeAddr - t.addr
		if fdeAddr < t.addr || off >= uint64(len(t.data)) {
			return &Error{Section: ".eh_frame_hdr", Offset: 0, Kind: ErrBounds, Msg: fmt.Sprintf("FDE address %#x outside .eh_frame", fdeAddr)}
		}
		if err := t.fdeAt(off, f, last); err != nil {
			return err
		}
		if !f.Contains(pc) {
			return ErrNoFDE
		}
		return nil
	}
	ix := t.sortedIndex()
	i := sort.Search(len(ix), func(i int) bool { return ix[i].begin > pc })
	for j := i - 1; j >= 0 && j >= i-4; j-- {
		if pc < ix[j].end {
			if err := t.fdeAt(ix[j].off, f, last); err != nil {
				return err
			}
			if !f.Contains(pc) {
				return ErrNoFDE
			}
			return nil
		}
	}
	return ErrNoFDE
}

// RowForPC computes into r the row of the CFI table that applies at pc
// and returns the FDE it comes from (a pointer into ctx, valid until its
// next use), as sframe's RowForPC does for SFrame. ctx holds the scratch
// state (see UnwindContext); r is the caller's, its storage reused, so
// lookups do not allocate in the steady state.
func (t *Table) RowForPC(ctx *UnwindContext, pc uint64, r *Row) (*FDE, error) {
	f := &ctx.fde
	if err := t.fdeForPC(pc, f, &ctx.cie); err != nil {
		return nil, err
	}
	if err := t.rowAt(ctx, f, pc, r); err != nil {
		return nil, err
	}
	return f, nil
}

// FDERow computes into r the row of fde that applies at pc.
func (t *Table) FDERow(ctx *UnwindContext, fde *FDE, pc uint64, r *Row) error {
	if !fde.Contains(pc) {
		return ErrNoFDE
	}
	return t.rowAt(ctx, fde, pc, r)
}

func (t *Table) rowAt(ctx *UnwindContext, f *FDE, pc uint64, r *Row) error {
	init, err := t.initialRow(f.CIE, &ctx.init)
	if err != nil {
		return err
	}
	u := &ctx.u
	u.t = t
	u.reset(f.CIE, f.Instructions, f.instrOff, f.PCBegin, init, f.PCBegin)
	end := f.PCEnd
	ca, da := f.CIE.CodeAlign, f.CIE.DataAlign
	it := &u.it
	data, pos := it.data, it.pos
	var ins Instruction
	for {
		// The instructions compilers emit most are decoded and applied
		// inline, the position kept in a register; everything else goes
		// through next and apply.
		if d, ok := advanceLocAt(data, pos); ok {
			nl := u.loc + d*ca
			if pc < nl && pc >= u.loc {
				end = nl
				goto done
			}
			u.loc = nl
			pos++
			continue
		}
		if op, reg, v, ok := shortAt(data, pos); ok {
			if op == OpOffset {
				if !u.state.set(slot{col: reg, kind: RuleOffset, val: int64(v) * da}) {
					return t.errAt(ErrTooManyRules, it.off+uint64(pos), "too many register rules (more than %d)", maxRules)
				}
			} else {
				if u.state.CFA.Kind == CFAUndefined {
					u.state.CFA.Kind = CFARegOffset
				}
				u.state.CFA.Offset = int64(v)
				u.state.CFA.Signed = false
			}
			pos += 2
			continue
		}
		if op, reg, ok := bareAt(data, pos); ok {
			pos++
			switch op {
			case OpRestore:
				u.restoreRule(reg, pos-1)
			case OpRememberState:
				u.remember(pos)
			case OpRestoreState:
				u.restoreState(pos)
			}
			if u.err != nil {
				return u.err
			}
			continue
		}
		it.pos = pos
		if !it.next(&ins) {
			break
		}
		pos = it.pos
		var adv bool
		var nl uint64
		switch ins.Op {
		case OpAdvanceLoc1, OpAdvanceLoc2, OpAdvanceLoc4, OpMIPSAdvanceLoc8:
			adv, nl = true, u.loc+ins.Operand*ca
		default:
			if adv, nl = u.apply(&ins); u.err != nil {
				return u.err
			}
		}
		if adv {
			if pc < nl && pc >= u.loc {
				end = nl
				break
			}
			u.loc = nl
		}
	}
	if err := it.Err(); err != nil {
		return err
	}
done:
	r.CopyFrom(&u.state)
	r.Start, r.End = u.loc, end
	return nil
}
