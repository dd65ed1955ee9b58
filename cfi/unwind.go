package cfi

import (
	"fmt"
	"math"
)

// DW_CFA_remember_state snapshots are bounded in number (maxRememberDepth
// states on the stack) and in the register rules they hold together
// (maxSavedRules), so that neither many empty states nor a few large ones
// make the interpreter allocate without bound: at most about 5 MiB (64 Ki
// states of 72 bytes, 256 Ki rules of 16). Real code nests one or two
// deep. Beyond either, the program fails ("nested too deep").
const (
	maxRememberDepth = 1 << 16
	maxSavedRules    = 1 << 18
)

// savedState is one DW_CFA_remember_state snapshot; its register rules
// live in the interpreter's slab at [off, off+n).
type savedState struct {
	cfa      CFARule
	raSigned bool
	argsSize uint64
	off, n   int
}

// interp executes call frame instructions. It is reused across FDEs (and
// lookups) so that steady-state work does not allocate.
type interp struct {
	t        *Table
	cie      *CIE
	instr    []byte
	pos      int
	instrOff uint64 // section offset of instr[0]
	inCIE    bool
	fdeBegin uint64 // for funcrel set_loc

	loc   uint64
	state Row
	init  *Row // CIE initial rules, for DW_CFA_restore; nil inside the CIE

	stack []savedState
	slab  []slot

	allNops bool
	err     error
	compat  *compat // non-nil when emulating readelf's display quirks
}

func (u *interp) fail(format string, args ...any) {
	if u.err == nil {
		u.err = &Error{Section: u.t.name, Offset: u.instrOff + uint64(u.pos), Msg: fmt.Sprintf(format, args...)}
	}
	u.pos = len(u.instr)
}

// reset prepares to run instr with the state copied from init (nil for
// an empty state, as at the start of a CIE).
func (u *interp) reset(cie *CIE, instr []byte, off uint64, init *Row, loc uint64) {
	u.cie = cie
	u.instr = instr
	u.pos = 0
	u.instrOff = off
	u.loc = loc
	u.init = init
	u.inCIE = init == nil
	if init != nil {
		u.state.copyFrom(init)
	} else {
		u.state.Start, u.state.End, u.state.CFA, u.state.RASigned, u.state.ArgsSize = 0, 0, CFARule{}, false, 0
		u.state.n = 0
		u.state.extra = u.state.extra[:0]
	}
	if u.compat == nil || !u.compat.keepStack {
		u.stack = u.stack[:0]
		u.slab = u.slab[:0]
	}
	u.state.data = u.t.data
	u.allNops = true
	u.err = nil
}

func (u *interp) uleb() uint64 {
	v, pos, ok := decodeULEB(u.instr, u.pos)
	u.pos = pos
	if !ok {
		u.fail("truncated LEB128 operand")
		return 0
	}
	return v
}

func (u *interp) sleb() int64 {
	v, pos, ok := decodeSLEB(u.instr, u.pos)
	u.pos = pos
	if !ok {
		u.fail("truncated LEB128 operand")
		return 0
	}
	return v
}

func (u *interp) reg() Reg {
	v := u.uleb()
	if v > math.MaxUint32 {
		u.fail("register number %d too large", v)
		return 0
	}
	return Reg(v)
}

func (u *interp) fixed(n int) uint64 {
	if len(u.instr)-u.pos < n {
		u.fail("truncated operand")
		return 0
	}
	b := u.instr[u.pos : u.pos+n]
	u.pos += n
	switch n {
	case 1:
		return uint64(b[0])
	case 2:
		return uint64(u.t.end.Uint16(b))
	case 4:
		return uint64(u.t.end.Uint32(b))
	}
	return u.t.end.Uint64(b)
}

func (u *interp) block() []byte {
	n := u.uleb()
	if u.err != nil {
		return nil
	}
	if n > uint64(len(u.instr)-u.pos) {
		u.fail("expression length %d exceeds the entry", n)
		return nil
	}
	b := u.instr[u.pos : u.pos+int(n) : u.pos+int(n)]
	u.pos += int(n)
	return b
}

// exprSlot makes a rule slot for an expression just read by block.
func (u *interp) exprSlot(k RuleKind, e []byte) slot {
	return slot{kind: k, val: exprVal(uint32(u.instrOff)+uint32(u.pos-len(e)), uint32(len(e)))}
}

// setRule applies a register rule, honouring readelf's bad-register
// handling in compat mode.
func (u *interp) setRule(op Op, col Reg, s slot) {
	if u.err != nil {
		return
	}
	if u.compat != nil && u.compat.badReg(u, op, col, s) {
		return
	}
	s.col = col
	if !u.state.set(s) {
		u.fail("too many register rules (more than %d)", maxRules)
	}
}

// restoreRule resets col to its rule at the end of the CIE's initial
// instructions (DW_CFA_restore).
func (u *interp) restoreRule(op Op, col Reg) {
	if u.err != nil {
		return
	}
	if u.compat != nil && u.compat.badReg(u, op, col, slot{}) {
		return
	}
	if u.inCIE {
		return // restoring to the CIE's own state is a no-op inside it
	}
	if i, ok := u.init.find(col); ok {
		if !u.state.set(*u.init.ptr(i)) {
			u.fail("too many register rules (more than %d)", maxRules)
		}
	} else {
		u.state.del(col)
	}
}

// step executes one instruction. It reports whether the instruction
// advanced the location and, if so, the new location. On malformed input
// u.err is set and the position moves to the end.
func (u *interp) step() (advanced bool, newLoc uint64) {
	raw := u.instr[u.pos]
	u.pos++
	op := Op(raw)
	if raw&0xc0 != 0 {
		op = Op(raw & 0xc0)
	}
	if op != OpNop {
		u.allNops = false
	}
	ca := u.cie.CodeAlign
	da := u.cie.DataAlign
	switch op {
	case OpAdvanceLoc:
		return true, u.loc + uint64(raw&0x3f)*ca
	case OpOffset:
		off := u.uleb()
		u.setRule(op, Reg(raw&0x3f), slot{kind: RuleOffset, val: int64(off) * da})
	case OpRestore:
		u.restoreRule(op, Reg(raw&0x3f))
	case OpNop:
	case OpSetLoc:
		v, ok := u.setLoc()
		if !ok {
			return false, 0
		}
		return true, v
	case OpAdvanceLoc1, OpAdvanceLoc2, OpAdvanceLoc4, OpMIPSAdvanceLoc8:
		// advance_loc1/2/4 are consecutive opcodes; the MIPS advance_loc8
		// (0x1d) clamps to the last size.
		d := u.fixed([...]int{1, 2, 4, 8}[min(int(op-OpAdvanceLoc1), 3)])
		if u.err != nil {
			return false, 0
		}
		return true, u.loc + d*ca
	case OpOffsetExtended:
		r := u.reg()
		off := u.uleb()
		u.setRule(op, r, slot{kind: RuleOffset, val: int64(off) * da})
	case OpOffsetExtendedSF:
		r := u.reg()
		off := u.sleb()
		u.setRule(op, r, slot{kind: RuleOffset, val: off * da})
	case OpValOffset:
		r := u.reg()
		off := u.uleb()
		u.setRule(op, r, slot{kind: RuleValOffset, val: int64(off) * da})
	case OpValOffsetSF:
		r := u.reg()
		off := u.sleb()
		u.setRule(op, r, slot{kind: RuleValOffset, val: off * da})
	case OpGNUNegativeOffsetExtended:
		r := u.reg()
		off := u.uleb()
		u.setRule(op, r, slot{kind: RuleOffset, val: -int64(off) * da})
	case OpRestoreExtended:
		r := u.reg()
		u.restoreRule(op, r)
	case OpUndefined:
		r := u.reg()
		u.setRule(op, r, slot{kind: RuleUndefined})
	case OpSameValue:
		r := u.reg()
		u.setRule(op, r, slot{kind: RuleSameValue})
	case OpRegister:
		r := u.reg()
		r2 := u.reg()
		u.setRule(op, r, slot{kind: RuleRegister, val: int64(r2)})
	case OpExpression, OpValExpression:
		r := u.reg()
		e := u.block()
		k := RuleExpression
		if op == OpValExpression {
			k = RuleValExpression
		}
		u.setRule(op, r, u.exprSlot(k, e))
	case OpRememberState:
		u.remember()
	case OpRestoreState:
		u.restoreState()
	case OpDefCFA:
		r := u.reg()
		off := u.uleb()
		if u.err == nil {
			u.state.CFA = CFARule{Kind: CFARegOffset, Reg: r, Offset: int64(off)}
		}
	case OpDefCFASF:
		r := u.reg()
		off := u.sleb()
		if u.err == nil {
			u.state.CFA = CFARule{Kind: CFARegOffset, Reg: r, Offset: off * da, signed: true}
		}
	case OpDefCFARegister:
		r := u.reg()
		if u.err == nil {
			// Keeps the offset; after an expression, readelf and gimli both
			// fall back to the previous offset.
			u.state.CFA.Kind = CFARegOffset
			u.state.CFA.Reg = r
			u.state.CFA.Expr = nil
		}
	case OpDefCFAOffset:
		off := u.uleb()
		if u.err == nil {
			if u.state.CFA.Kind == CFAUndefined {
				u.state.CFA.Kind = CFARegOffset
			}
			u.state.CFA.Offset = int64(off)
			u.state.CFA.signed = false
		}
	case OpDefCFAOffsetSF:
		off := u.sleb()
		if u.err == nil {
			if u.state.CFA.Kind == CFAUndefined {
				u.state.CFA.Kind = CFARegOffset
			}
			u.state.CFA.Offset = off * da
			u.state.CFA.signed = true
		}
	case OpDefCFAExpression:
		e := u.block()
		if u.err == nil {
			u.state.CFA.Kind = CFAExpression
			u.state.CFA.Expr = e
		}
	case OpGNUArgsSize:
		v := u.uleb()
		if u.err == nil {
			u.state.ArgsSize = v
		}
	case OpGNUWindowSave, OpAArch64NegateRAStateWithPC:
		u.state.RASigned = !u.state.RASigned
	default:
		if u.compat != nil {
			u.compat.unknownOp(op)
		}
		u.pos--
		u.fail("unknown call frame instruction %#x", uint8(op))
	}
	return false, 0
}

func (u *interp) setLoc() (uint64, bool) {
	b := buf{data: u.instr, pos: u.pos, order: u.t.end}
	var v uint64
	var err error
	if u.t.kind == EHFrame {
		c := u.t.ptrCtx(u.instrOff, u.cie)
		c.funcBase = u.fdeBegin
		v, err = b.readEncoded(u.cie.FDEEncoding, &c)
	} else {
		v = b.uint(int(u.cie.AddressSize))
		err = b.err
	}
	if err != nil {
		u.fail("DW_CFA_set_loc: %v", err)
		return 0, false
	}
	u.pos = b.pos
	return v, true
}

func (u *interp) remember() {
	if len(u.stack) >= maxRememberDepth || len(u.slab)+u.state.n > maxSavedRules {
		u.fail("DW_CFA_remember_state nested too deep")
		return
	}
	s := savedState{cfa: u.state.CFA, raSigned: u.state.RASigned, argsSize: u.state.ArgsSize, off: len(u.slab), n: u.state.n}
	for i := 0; i < u.state.n; i++ {
		u.slab = append(u.slab, *u.state.ptr(i))
	}
	u.stack = append(u.stack, s)
}

func (u *interp) restoreState() {
	if len(u.stack) == 0 {
		if u.compat != nil {
			u.compat.mismatchedRestore()
			return
		}
		u.fail("DW_CFA_restore_state without DW_CFA_remember_state")
		return
	}
	s := u.stack[len(u.stack)-1]
	u.stack = u.stack[:len(u.stack)-1]
	u.state.CFA = s.cfa
	u.state.RASigned = s.raSigned
	u.state.ArgsSize = s.argsSize
	u.state.n = 0
	u.state.extra = u.state.extra[:0]
	for i := 0; i < s.n; i++ {
		if i >= inlineRules {
			u.state.extra = append(u.state.extra, slot{})
		}
		*u.state.ptr(i) = u.slab[s.off+i]
		u.state.n++
	}
	u.slab = u.slab[:s.off]
}

// UnwindTable streams the rows of one FDE's (or CIE's) CFI table. Rows
// are computed in a single pass over the instructions: each advance emits
// the row that held up to the new location.
//
//	ut := tab.NewUnwindTable(&fde)
//	for ut.Next() {
//		row := ut.Row()
//		...
//	}
//	if err := ut.Err(); err != nil { ... }
type UnwindTable struct {
	u       interp
	end     uint64
	row     Row
	done    bool
	isCIE   bool
	keepAll bool // emit empty rows too (readelf emulation)
	final   bool // the last emitted row was the end-of-program row
}

// NewUnwindTable starts the row stream of fde. Rows with an empty address
// range (a zero advance) are skipped.
func (t *Table) NewUnwindTable(fde *FDE) *UnwindTable {
	ut := &UnwindTable{}
	ut.resetFDE(t, fde)
	return ut
}

// NewCIEUnwindTable streams the rows produced by a CIE's initial
// instructions alone (addresses start at 0), as readelf shows them.
func (t *Table) NewCIEUnwindTable(cie *CIE) *UnwindTable {
	ut := &UnwindTable{}
	ut.resetCIE(t, cie)
	return ut
}

func (ut *UnwindTable) resetFDE(t *Table, fde *FDE) {
	ut.u.t = t
	ut.done = false
	ut.isCIE = false
	ut.final = false
	init, err := t.initialRow(fde.CIE)
	if err != nil {
		ut.u.reset(fde.CIE, nil, fde.instrOff, &Row{}, fde.PCBegin)
		ut.u.err = err
		ut.done = true
		return
	}
	ut.u.fdeBegin = fde.PCBegin
	ut.u.reset(fde.CIE, fde.Instructions, fde.instrOff, init, fde.PCBegin)
	ut.end = fde.PCEnd
}

func (ut *UnwindTable) resetCIE(t *Table, cie *CIE) {
	ut.u.t = t
	ut.done = false
	ut.isCIE = true
	ut.final = false
	ut.u.fdeBegin = 0
	ut.u.reset(cie, cie.Instructions, cie.instrOff, nil, 0)
	ut.end = 0
}

// Next computes the next row. It returns false at the end of the table or
// on malformed instructions (see Err).
func (ut *UnwindTable) Next() bool {
	u := &ut.u
	for !ut.done {
		if u.pos >= len(u.instr) || u.err != nil {
			ut.done = true
			if ut.keepAll {
				if u.allNops {
					return false
				}
			} else if u.err != nil || u.loc >= ut.end {
				return false
			}
			ut.emit(ut.end)
			ut.final = true
			return true
		}
		adv, nl := u.step()
		if adv {
			ut.emit(nl)
			u.loc = nl
			if ut.keepAll || ut.row.Start < ut.row.End {
				return true
			}
		}
	}
	return false
}

func (ut *UnwindTable) emit(end uint64) {
	ut.row.copyFrom(&ut.u.state)
	ut.row.Start = ut.u.loc
	ut.row.End = end
}

// Row returns the current row. The pointer stays valid until the next
// call to Next; copy the Row to keep it.
func (ut *UnwindTable) Row() *Row { return &ut.row }

// Err returns the error that ended the stream early, if any.
func (ut *UnwindTable) Err() error { return ut.u.err }
