package sframegen

// DWARF expression opcodes the converter recognises.
const (
	opDeref = 0x06
	opAnd   = 0x1a
	opPlus  = 0x22
	opShl   = 0x24
	opGe    = 0x2a
	opLit0  = 0x30
	opLit31 = 0x4f
	opBreg0 = 0x70
	opBregx = 0x92
)

// readULEB reads an unsigned LEB128 number; ok is false when it is
// truncated or longer than 64 bits.
func readULEB(b []byte) (v uint64, n int, ok bool) {
	var shift uint
	for i, c := range b {
		if shift >= 64 {
			return 0, 0, false
		}
		v |= uint64(c&0x7f) << shift
		shift += 7
		if c&0x80 == 0 {
			return v, i + 1, true
		}
	}
	return 0, 0, false
}

// readSLEB reads a signed LEB128 number.
func readSLEB(b []byte) (v int64, n int, ok bool) {
	var shift uint
	for i, c := range b {
		if shift >= 64 {
			return 0, 0, false
		}
		v |= int64(c&0x7f) << shift
		shift += 7
		if c&0x80 == 0 {
			if shift < 64 && c&0x40 != 0 {
				v |= -1 << shift
			}
			return v, i + 1, true
		}
	}
	return 0, 0, false
}

// breg decodes a DW_OP_bregN or DW_OP_bregx operation at the start of
// expr: the register, the offset and the number of bytes used.
func breg(expr []byte) (reg uint64, off int64, n int, ok bool) {
	if len(expr) == 0 {
		return 0, 0, 0, false
	}
	op := expr[0]
	switch {
	case op >= opBreg0 && op < opBreg0+32:
		off, m, ok := readSLEB(expr[1:])
		return uint64(op - opBreg0), off, 1 + m, ok
	case op == opBregx:
		r, m, ok := readULEB(expr[1:])
		if !ok {
			return 0, 0, 0, false
		}
		off, k, ok := readSLEB(expr[1+m:])
		return r, off, 1 + m + k, ok
	}
	return 0, 0, 0, false
}

// regPlusOffset recognises the expression "DW_OP_bregN OFF": the value
// of register N plus OFF.
func regPlusOffset(expr []byte) (reg uint64, off int64, ok bool) {
	r, o, n, ok := breg(expr)
	if !ok || n != len(expr) {
		return 0, 0, false
	}
	return r, o, true
}

// derefRegPlusOffset recognises "DW_OP_bregN OFF; DW_OP_deref": the word
// stored at register N plus OFF (the DRAP CFA).
func derefRegPlusOffset(expr []byte) (reg uint64, off int64, ok bool) {
	r, o, n, ok := breg(expr)
	if !ok || n+1 != len(expr) || expr[n] != opDeref {
		return 0, 0, false
	}
	return r, o, true
}

// pltPattern is the CFA expression ld writes for lazy PLT entries on
// x86-64:
//
//	DW_OP_breg7 (rsp) BASE; DW_OP_breg16 (rip) 0; DW_OP_litMASK; DW_OP_and;
//	DW_OP_litTHRESH; DW_OP_ge; DW_OP_litSHIFT; DW_OP_shl; DW_OP_plus
//
// that is CFA = rsp + BASE + (((rip & MASK) >= THRESH) << SHIFT): the
// entry pushes one word at offset THRESH of every MASK+1 byte block.
type pltPattern struct {
	base   int64
	mask   uint64
	thresh uint64
	shift  uint64
}

// matchPLT recognises pltPattern for an ABI whose SP and PC registers are
// sp and pc (DWARF numbers).
func matchPLT(expr []byte, sp, pc uint64) (pltPattern, bool) {
	var p pltPattern
	r, off, n, ok := breg(expr)
	if !ok || r != sp {
		return p, false
	}
	p.base = off
	expr = expr[n:]
	r, off, n, ok = breg(expr)
	if !ok || r != pc || off != 0 {
		return p, false
	}
	expr = expr[n:]
	lit := func(i int) (uint64, bool) {
		if i >= len(expr) || expr[i] < opLit0 || expr[i] > opLit31 {
			return 0, false
		}
		return uint64(expr[i] - opLit0), true
	}
	if len(expr) != 7 || expr[1] != opAnd || expr[3] != opGe || expr[5] != opShl || expr[6] != opPlus {
		return p, false
	}
	var ok1, ok2, ok3 bool
	p.mask, ok1 = lit(0)
	p.thresh, ok2 = lit(2)
	p.shift, ok3 = lit(4)
	if !ok1 || !ok2 || !ok3 {
		return p, false
	}
	// The mask must select a power-of-two block of at most 255 bytes (the
	// repeat size is one byte) that the threshold falls inside.
	rep := p.mask + 1
	if rep&p.mask != 0 || rep > 255 || p.thresh == 0 || p.thresh >= rep || p.shift > 16 {
		return p, false
	}
	return p, true
}

// cfaAt returns the CFA offset from SP the pattern gives at block offset o.
func (p pltPattern) cfaAt(o uint64) int64 {
	if o&p.mask >= p.thresh {
		return p.base + 1<<p.shift
	}
	return p.base
}
