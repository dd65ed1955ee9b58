package sframegen

import "github.com/sframekit/sframekit/cfi"

// DWARF expression opcodes the converter recognises (decoded by cfi's
// OperationIter).
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

// decode decodes expr into out, one operation each, with cfi's
// expression decoder; ok is false when expr is malformed or has more
// operations than out holds.
func decode(expr []byte, out []cfi.Operation) (n int, ok bool) {
	it := cfi.NewOperationIter(expr, nil, 8)
	for it.More() {
		if n == len(out) || !it.Next(&out[n]) || it.Err() != nil {
			return 0, false
		}
		n++
	}
	return n, true
}

// isBreg reports whether op is DW_OP_bregN or DW_OP_bregx: register
// op.Reg plus offset op.Value.
func isBreg(op *cfi.Operation) bool {
	return op.Op >= opBreg0 && op.Op < opBreg0+32 || op.Op == opBregx
}

// regPlusOffset recognises the expression "DW_OP_bregN OFF": the value
// of register N plus OFF.
func regPlusOffset(expr []byte) (reg uint64, off int64, ok bool) {
	var o [1]cfi.Operation
	if n, ok := decode(expr, o[:]); !ok || n != 1 || !isBreg(&o[0]) {
		return 0, 0, false
	}
	return o[0].Reg, int64(o[0].Value), true
}

// derefRegPlusOffset recognises "DW_OP_bregN OFF; DW_OP_deref": the word
// stored at register N plus OFF (the DRAP CFA).
func derefRegPlusOffset(expr []byte) (reg uint64, off int64, ok bool) {
	var o [2]cfi.Operation
	if n, ok := decode(expr, o[:]); !ok || n != 2 || !isBreg(&o[0]) || o[1].Op != opDeref {
		return 0, 0, false
	}
	return o[0].Reg, int64(o[0].Value), true
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
	var o [9]cfi.Operation
	if n, ok := decode(expr, o[:]); !ok || n != 9 {
		return p, false
	}
	if !isBreg(&o[0]) || o[0].Reg != sp || !isBreg(&o[1]) || o[1].Reg != pc || o[1].Value != 0 {
		return p, false
	}
	p.base = int64(o[0].Value)
	lit := func(op *cfi.Operation) (uint64, bool) {
		return op.Value, op.Op >= opLit0 && op.Op <= opLit31
	}
	if o[3].Op != opAnd || o[5].Op != opGe || o[7].Op != opShl || o[8].Op != opPlus {
		return p, false
	}
	var ok1, ok2, ok3 bool
	p.mask, ok1 = lit(&o[2])
	p.thresh, ok2 = lit(&o[4])
	p.shift, ok3 = lit(&o[6])
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
