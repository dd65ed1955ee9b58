package cfi

import (
	"math"

	"github.com/sframekit/sframekit/arch"
)

// Instruction is one decoded call frame instruction (DW_CFA_*), its
// operands as encoded: advances and offsets are not yet scaled by the
// CIE's alignment factors, which the interpreter applies.
type Instruction struct {
	// Op is the opcode. For the three primary opcodes it is the high two
	// bits only (OpAdvanceLoc, OpOffset, OpRestore), the low six being
	// the delta (Operand) or the register (Reg). An opcode the package
	// does not know comes with no operands: its length is unknown, so
	// the interpreter stops there (readelf's column scan goes on).
	Op Op
	// Reg is the register operand: the register a rule is for
	// (DW_CFA_offset*, restore*, undefined, same_value, register,
	// expression, val_*), or the CFA's base register (def_cfa,
	// def_cfa_sf, def_cfa_register).
	Reg arch.Reg
	// Operand is the other integer operand: the delta of an advance, the
	// address of DW_CFA_set_loc (decoded), the offset of offset*,
	// val_offset*, def_cfa* and def_cfa_offset* (int64 bits for the _sf
	// forms), the source register of DW_CFA_register, or the size of
	// DW_CFA_GNU_args_size.
	Operand uint64
	// Expr is the DWARF expression of def_cfa_expression, expression and
	// val_expression, a view into the section.
	Expr []byte
	// Offset is the position of the instruction in its program.
	Offset int
	// RegTooLarge says a register operand (Reg, or DW_CFA_register's
	// source in Operand) does not fit in 32 bits; it holds the low 32
	// bits. Such an instruction decodes (readelf reads it so), but the
	// interpreter rejects it.
	RegTooLarge bool

	exprPos int // position of Expr in the program, for expression rules
}

// NamesColumn reports whether an instruction with this opcode sets or
// restores the rule of register Reg, a column of the table (rather than
// naming the CFA's base register, or no register): what a printer needs
// to know which columns a program uses before it runs it.
func (op Op) NamesColumn() bool {
	switch op {
	case OpOffset, OpRestore, OpOffsetExtended, OpValOffset, OpRegister, OpGNUNegativeOffsetExtended,
		OpRestoreExtended, OpUndefined, OpSameValue, OpExpression, OpValExpression, OpOffsetExtendedSF, OpValOffsetSF:
		return true
	}
	return false
}

// InstructionIter decodes a call frame program (a CIE's initial
// instructions or an FDE's) one instruction at a time, without
// allocating. It is the package's only decoder of instructions: the
// interpreter (behind UnwindTable, RowForPC and Interpreter) reads
// through it, and so does package dump's readelf printer. Get one from
// Table.CIEInstructions, Table.FDEInstructions or Table.Instructions.
//
//	it := tab.FDEInstructions(&fde)
//	var ins cfi.Instruction
//	for it.Next(&ins) {
//		...
//	}
//	if err := it.Err(); err != nil { ... }
type InstructionIter struct {
	t   *Table
	cie *CIE
	// buf holds the program, the position and the error ending the
	// iteration: LEB128 operands are read through it, and next names
	// the truncated one that buf marks with errTruncated.
	buf
	off      uint64 // section offset of data[0]
	fdeBegin uint64 // base of funcrel DW_CFA_set_loc operands
}

// CIEInstructions returns an iterator over c's initial instructions.
func (t *Table) CIEInstructions(c *CIE) InstructionIter {
	return t.instrIter(c, c.Instructions, c.instrOff, 0)
}

// FDEInstructions returns an iterator over f's instructions.
func (t *Table) FDEInstructions(f *FDE) InstructionIter {
	return t.instrIter(f.CIE, f.Instructions, f.instrOff, f.PCBegin)
}

// Instructions returns an iterator over the section bytes [start, end)
// read as the program of an entry of cie (whose pointer encoding and
// address size DW_CFA_set_loc uses) covering addresses from pcBegin (the
// base of DW_EH_PE_funcrel operands), for callers that find programs
// their own way, as readelf does. A range outside the section yields no
// instruction, and Err says so; so does a nil cie.
func (t *Table) Instructions(cie *CIE, start, end, pcBegin uint64) InstructionIter {
	if cie == nil {
		return InstructionIter{t: t, cie: &CIE{}, off: start, buf: buf{err: t.errAt(ErrBadEntry, start, "instructions without a CIE")}}
	}
	if start > end || end > uint64(len(t.data)) {
		return InstructionIter{t: t, cie: cie, off: start, fdeBegin: pcBegin,
			buf: buf{err: t.errAt(ErrBounds, start, "instructions [%#x, %#x) outside the section", start, end)}}
	}
	return t.instrIter(cie, t.data[start:end:end], start, pcBegin)
}

func (t *Table) instrIter(cie *CIE, instr []byte, off, fdeBegin uint64) InstructionIter {
	return InstructionIter{t: t, cie: cie, buf: buf{data: instr}, off: off, fdeBegin: fdeBegin}
}

// Err returns what ended the iteration early: a truncated or invalid
// operand, as an *Error at its section offset; nil at the program's end.
func (it *InstructionIter) Err() error { return it.err }

// Next decodes the next instruction into ins. It returns false at the end
// of the program and on malformed bytes (see Err); then ins holds the
// opcode and what was decoded before the fault (a truncated LEB128
// operand keeps its low bits), which readelf's column scan uses. An
// opcode the package does not know and a register number beyond 32 bits
// decode (see Instruction): the interpreter is the one to reject them.
func (it *InstructionIter) Next(ins *Instruction) bool {
	if d, ok := advanceLocAt(it.data, it.pos); ok {
		*ins = Instruction{Op: OpAdvanceLoc, Operand: d, Offset: it.pos}
		it.pos++
		return true
	}
	return it.next(ins)
}

// advanceLocAt, shortAt and bareAt decode the commonest instructions at
// data[p] without a call (they inline) and without an Instruction in
// memory, for Next and for the lookup loop, which keeps the position in a
// register: advanceLocAt DW_CFA_advance_loc (its delta), shortAt
// DW_CFA_offset and DW_CFA_def_cfa_offset with a one-byte operand (the
// opcode, register and operand), bareAt the one-byte instructions without
// operand (DW_CFA_restore, nop, remember_state, restore_state).
func advanceLocAt(data []byte, p int) (uint64, bool) {
	if p < len(data) && data[p]>>6 == 1 {
		return uint64(data[p] & 0x3f), true
	}
	return 0, false
}

func bareAt(data []byte, p int) (Op, arch.Reg, bool) {
	if p < len(data) {
		switch raw := data[p]; {
		case raw>>6 == 3:
			return OpRestore, arch.Reg(raw & 0x3f), true
		case raw == byte(OpNop) || raw == byte(OpRememberState) || raw == byte(OpRestoreState):
			return Op(raw), 0, true
		}
	}
	return 0, 0, false
}

func shortAt(data []byte, p int) (Op, arch.Reg, uint64, bool) {
	if p+1 < len(data) && data[p+1] < 0x80 {
		if raw := data[p]; raw>>6 == 2 {
			return OpOffset, arch.Reg(raw & 0x3f), uint64(data[p+1]), true
		} else if raw == byte(OpDefCFAOffset) {
			return OpDefCFAOffset, 0, uint64(data[p+1]), true
		}
	}
	return 0, 0, 0, false
}

func (it *InstructionIter) fail(kind ErrKind, format string, args ...any) {
	if it.err == nil {
		it.err = it.t.errAt(kind, it.off+uint64(it.pos), format, args...)
	}
	it.pos = len(it.data)
}

// reg reads a register number, marking ins when it takes more than 32
// bits.
func (it *InstructionIter) reg(ins *Instruction) arch.Reg {
	v := it.uleb()
	if v > math.MaxUint32 {
		ins.RegTooLarge = true
	}
	return arch.Reg(v)
}

func (it *InstructionIter) fixed(n int) uint64 {
	if len(it.data)-it.pos < n {
		it.fail(ErrTruncated, "truncated operand")
		return 0
	}
	b := it.data[it.pos : it.pos+n]
	it.pos += n
	switch n {
	case 1:
		return uint64(b[0])
	case 2:
		return uint64(it.t.end.Uint16(b))
	case 4:
		return uint64(it.t.end.Uint32(b))
	}
	return it.t.end.Uint64(b)
}

func (it *InstructionIter) block() []byte {
	n := it.uleb()
	if it.err != nil {
		return nil
	}
	if n > uint64(len(it.data)-it.pos) {
		it.fail(ErrBounds, "expression length %d exceeds the entry", n)
		return nil
	}
	b := it.data[it.pos : it.pos+int(n) : it.pos+int(n)]
	it.pos += int(n)
	return b
}

// setLoc reads DW_CFA_set_loc's address: a pointer in the FDE encoding in
// .eh_frame, an address-size value in .debug_frame.
func (it *InstructionIter) setLoc() uint64 {
	t := it.t
	b := buf{data: it.data, pos: it.pos, order: t.end}
	var v uint64
	var err error
	if t.kind == EHFrame {
		c := t.ptrCtx(it.off, it.cie) // pcrel: from the operand's own address
		c.funcBase = it.fdeBegin
		v, err = b.readEncoded(it.cie.FDEEncoding, &c)
	} else {
		v = b.uint(int(it.cie.AddressSize))
		err = b.err
	}
	if err != nil {
		it.fail(ptrErrKind(err), "DW_CFA_set_loc: %v", err)
		return 0
	}
	it.pos = b.pos
	return v
}

// next decodes one instruction (see Next).
func (it *InstructionIter) next(ins *Instruction) bool {
	p := it.pos
	if p >= len(it.data) {
		*ins = Instruction{Offset: p}
		return false
	}
	if op, reg, v, ok := shortAt(it.data, p); ok {
		*ins = Instruction{Op: op, Reg: reg, Operand: v, Offset: p}
		it.pos = p + 2
		return true
	}
	raw := it.data[p]
	*ins = Instruction{Offset: p}
	it.pos++
	op := Op(raw)
	if raw&0xc0 != 0 {
		op = Op(raw & 0xc0)
	}
	ins.Op = op
	switch op {
	case OpAdvanceLoc:
		ins.Operand = uint64(raw & 0x3f)
	case OpOffset:
		ins.Reg = arch.Reg(raw & 0x3f)
		ins.Operand = it.uleb()
	case OpRestore:
		ins.Reg = arch.Reg(raw & 0x3f)
	case OpSetLoc:
		ins.Operand = it.setLoc()
	case OpAdvanceLoc1, OpAdvanceLoc2, OpAdvanceLoc4, OpMIPSAdvanceLoc8:
		// advance_loc1/2/4 are consecutive opcodes; the MIPS advance_loc8
		// (0x1d) clamps to the last size.
		ins.Operand = it.fixed([...]int{1, 2, 4, 8}[min(int(op-OpAdvanceLoc1), 3)])
	case OpOffsetExtended, OpValOffset, OpGNUNegativeOffsetExtended, OpDefCFA:
		ins.Reg = it.reg(ins)
		ins.Operand = it.uleb()
	case OpOffsetExtendedSF, OpValOffsetSF, OpDefCFASF:
		ins.Reg = it.reg(ins)
		ins.Operand = uint64(it.sleb())
	case OpRegister:
		ins.Reg = it.reg(ins)
		ins.Operand = uint64(it.reg(ins))
	case OpRestoreExtended, OpUndefined, OpSameValue, OpDefCFARegister:
		ins.Reg = it.reg(ins)
	case OpDefCFAOffset, OpGNUArgsSize:
		ins.Operand = it.uleb()
	case OpDefCFAOffsetSF:
		ins.Operand = uint64(it.sleb())
	case OpDefCFAExpression:
		ins.Expr = it.block()
		ins.exprPos = it.pos - len(ins.Expr)
	case OpExpression, OpValExpression:
		ins.Reg = it.reg(ins)
		ins.Expr = it.block()
		ins.exprPos = it.pos - len(ins.Expr)
	}
	// Anything else has no operand: nop, remember/restore_state,
	// GNU_window_save (AArch64 negate_ra_state), negate_ra_state_with_pc,
	// and the opcodes the package does not know.
	if it.err == errTruncated { // by buf: a LEB128 operand (at the end)
		it.err = it.t.errAt(ErrTruncated, it.off+uint64(it.pos), "truncated LEB128 operand")
	}
	return it.err == nil
}
