package cfi

import (
	"errors"

	"github.com/sframekit/sframekit/arch"
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

// interp executes call frame instructions, read through an
// InstructionIter. It lives in an UnwindContext, an UnwindTable or an
// Interpreter and is reused across FDEs, so that steady-state work does
// not allocate.
type interp struct {
	t     *Table
	cie   *CIE
	it    InstructionIter
	inCIE bool

	loc   uint64
	state Row
	init  *Row // CIE initial rules, for DW_CFA_restore; nil inside the CIE

	stack []savedState
	slab  []slot

	allNops bool
	err     error
}

// fail records an error at the section offset off.
func (u *interp) fail(kind ErrKind, off int, format string, args ...any) {
	if u.err == nil {
		u.err = u.t.errAt(kind, u.it.off+uint64(off), format, args...)
	}
}

// reset prepares to run the program instr (at section offset off, of an
// FDE starting at fdeBegin) with the state copied from init (nil for an
// empty state, as at the start of a CIE) and an empty remember_state
// stack. Location loc is the program's first.
func (u *interp) reset(cie *CIE, instr []byte, off, fdeBegin uint64, init *Row, loc uint64) {
	u.stack = u.stack[:0]
	u.slab = u.slab[:0]
	u.start(cie, instr, off, fdeBegin, init, loc)
}

// start is reset without emptying the remember_state stack. The iterator
// is set field by field: a lookup's hot path.
func (u *interp) start(cie *CIE, instr []byte, off, fdeBegin uint64, init *Row, loc uint64) {
	u.cie = cie
	it := &u.it
	it.t, it.cie, it.data, it.pos, it.off, it.fdeBegin, it.err = u.t, cie, instr, 0, off, fdeBegin, nil
	u.loc = loc
	u.init = init
	u.inCIE = init == nil
	if init != nil {
		u.state.CopyFrom(init)
	} else {
		u.state.Start, u.state.End, u.state.CFA, u.state.RASigned, u.state.ArgsSize = 0, 0, CFARule{}, false, 0
		u.state.n = 0
		u.state.extra = u.state.extra[:0]
	}
	u.state.data = u.t.data
	u.allNops = true
	u.err = nil
}

// next decodes the next instruction. At the end of the program, or on a
// decoding error (then recorded in u.err), it returns false.
func (u *interp) next(ins *Instruction) bool {
	if u.err != nil {
		return false
	}
	if u.it.Next(ins) {
		return true
	}
	if err := u.it.Err(); err != nil {
		if ins.Op != OpNop {
			u.allNops = false
		}
		u.err = err
	}
	return false
}

// setRule applies a register rule.
func (u *interp) setRule(ins *Instruction, s slot) {
	s.col = ins.Reg
	if !u.state.set(s) {
		u.fail(ErrTooManyRules, ins.Offset, "too many register rules (more than %d)", maxRules)
	}
}

// restoreRule resets col to its rule at the end of the CIE's initial
// instructions (DW_CFA_restore).
func (u *interp) restoreRule(col arch.Reg, off int) {
	if u.inCIE {
		return // restoring to the CIE's own state is a no-op inside it
	}
	if i, ok := u.init.find(col); ok {
		if !u.state.set(*u.init.ptr(i)) {
			u.fail(ErrTooManyRules, off, "too many register rules (more than %d)", maxRules)
		}
	} else {
		u.state.del(col)
	}
}

// exprSlot makes a rule slot for the expression of ins, an instruction of
// the program being run.
func (u *interp) exprSlot(k RuleKind, ins *Instruction) slot {
	return slot{kind: k, val: exprVal(uint32(u.it.off)+uint32(ins.exprPos), uint32(len(ins.Expr)))}
}

// apply executes one decoded instruction. It reports whether the
// instruction advanced the location and, if so, the new location. A
// semantic error (an unknown opcode, a mismatched restore_state, too many
// rules) is recorded in u.err.
func (u *interp) apply(ins *Instruction) (advanced bool, newLoc uint64) {
	op := ins.Op
	if op != OpNop {
		u.allNops = false
	}
	if ins.RegTooLarge {
		u.fail(ErrBadInstruction, ins.Offset, "register number too large (more than 32 bits)")
		return false, 0
	}
	ca := u.cie.CodeAlign
	da := u.cie.DataAlign
	switch op {
	case OpAdvanceLoc, OpAdvanceLoc1, OpAdvanceLoc2, OpAdvanceLoc4, OpMIPSAdvanceLoc8:
		return true, u.loc + ins.Operand*ca
	case OpSetLoc:
		return true, ins.Operand
	case OpOffset, OpOffsetExtended:
		u.setRule(ins, slot{kind: RuleOffset, val: int64(ins.Operand) * da})
	case OpOffsetExtendedSF:
		u.setRule(ins, slot{kind: RuleOffset, val: int64(ins.Operand) * da})
	case OpValOffset, OpValOffsetSF:
		u.setRule(ins, slot{kind: RuleValOffset, val: int64(ins.Operand) * da})
	case OpGNUNegativeOffsetExtended:
		u.setRule(ins, slot{kind: RuleOffset, val: -int64(ins.Operand) * da})
	case OpRestore, OpRestoreExtended:
		u.restoreRule(ins.Reg, ins.Offset)
	case OpNop:
	case OpUndefined:
		u.setRule(ins, slot{kind: RuleUndefined})
	case OpSameValue:
		u.setRule(ins, slot{kind: RuleSameValue})
	case OpRegister:
		u.setRule(ins, slot{kind: RuleRegister, val: int64(ins.Operand)})
	case OpExpression:
		u.setRule(ins, u.exprSlot(RuleExpression, ins))
	case OpValExpression:
		u.setRule(ins, u.exprSlot(RuleValExpression, ins))
	case OpRememberState:
		u.remember(ins.Offset + 1)
	case OpRestoreState:
		u.restoreState(ins.Offset + 1)
	case OpDefCFA:
		u.state.CFA = CFARule{Kind: CFARegOffset, Reg: ins.Reg, Offset: int64(ins.Operand)}
	case OpDefCFASF:
		u.state.CFA = CFARule{Kind: CFARegOffset, Reg: ins.Reg, Offset: int64(ins.Operand) * da, Signed: true}
	case OpDefCFARegister:
		// Keeps the offset; after an expression, readelf and gimli both
		// fall back to the previous offset.
		u.state.CFA.Kind = CFARegOffset
		u.state.CFA.Reg = ins.Reg
		u.state.CFA.Expr = nil
	case OpDefCFAOffset:
		if u.state.CFA.Kind == CFAUndefined {
			u.state.CFA.Kind = CFARegOffset
		}
		u.state.CFA.Offset = int64(ins.Operand)
		u.state.CFA.Signed = false
	case OpDefCFAOffsetSF:
		if u.state.CFA.Kind == CFAUndefined {
			u.state.CFA.Kind = CFARegOffset
		}
		u.state.CFA.Offset = int64(ins.Operand) * da
		u.state.CFA.Signed = true
	case OpDefCFAExpression:
		u.state.CFA.Kind = CFAExpression
		u.state.CFA.Expr = ins.Expr
	case OpGNUArgsSize:
		u.state.ArgsSize = ins.Operand
	case OpGNUWindowSave, OpAArch64NegateRAStateWithPC:
		u.state.RASigned = !u.state.RASigned
	default:
		u.fail(ErrBadInstruction, ins.Offset, "unknown call frame instruction %#x", uint8(op))
	}
	return false, 0
}

// remember executes DW_CFA_remember_state; errors are reported at off.
func (u *interp) remember(off int) {
	if len(u.stack) >= maxRememberDepth || len(u.slab)+u.state.n > maxSavedRules {
		u.fail(ErrBadInstruction, off, "DW_CFA_remember_state nested too deep")
		return
	}
	s := savedState{cfa: u.state.CFA, raSigned: u.state.RASigned, argsSize: u.state.ArgsSize, off: len(u.slab), n: u.state.n}
	for i := 0; i < u.state.n; i++ {
		u.slab = append(u.slab, *u.state.ptr(i))
	}
	u.stack = append(u.stack, s)
}

// restoreState executes DW_CFA_restore_state; errors are reported at off.
func (u *interp) restoreState(off int) {
	if len(u.stack) == 0 {
		u.fail(ErrBadInstruction, off, "DW_CFA_restore_state without DW_CFA_remember_state")
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

// UnwindContext is the scratch space of the row lookups (Table.RowForPC,
// Table.FDERow): the interpreter's state and DW_CFA_remember_state stack,
// the FDE found, and the CIE used last. It is what makes lookups
// allocation-free while the Table stays immutable: each goroutine that
// looks up rows owns a context (the zero value is ready), which may serve
// any number of Tables but only one lookup at a time. It holds at most
// the bounded remember_state stack (see maxRememberDepth).
type UnwindContext struct {
	u    interp
	fde  FDE
	cie  *CIE // the CIE found last, to skip the Table's shared cache
	init Row  // initial rules of a CIE not from a Table (see initialRow)
}

// UnwindTable streams the rows of one FDE's (or CIE's) CFI table. Rows
// are computed in a single pass over the instructions: each advance emits
// the row that held up to the new location. An UnwindTable is the
// caller's: it belongs to one goroutine.
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
	done    bool
	isCIE   bool
	keepAll bool // emit empty rows too (CIE tables)
	final   bool // the last emitted row was the end-of-program row
	init    Row  // initial rules of a CIE not from a Table
}

// NewUnwindTable starts the row stream of fde. Rows with an empty address
// range (a zero advance) are skipped.
func (t *Table) NewUnwindTable(fde *FDE) *UnwindTable {
	ut := &UnwindTable{}
	ut.resetFDE(t, fde)
	return ut
}

// ResetUnwindTable makes ut stream the rows of fde, as a new
// NewUnwindTable(fde) would, reusing ut's memory: a caller that reads the
// rows of every FDE in turn (sframegen) needs one UnwindTable, not one
// per FDE.
func (t *Table) ResetUnwindTable(ut *UnwindTable, fde *FDE) {
	ut.keepAll = false
	ut.resetFDE(t, fde)
}

// NewCIEUnwindTable streams the rows produced by a CIE's initial
// instructions alone, as readelf shows them. These rows have no address
// range of their own (Start counts from 0, and the final row's End is 0),
// so every one is kept, an advance by zero included:
// one row per advance, then the state at the end of the instructions,
// unless they are only DW_CFA_nop (or none).
func (t *Table) NewCIEUnwindTable(cie *CIE) *UnwindTable {
	ut := &UnwindTable{keepAll: true}
	ut.resetCIE(t, cie)
	return ut
}

func (ut *UnwindTable) resetFDE(t *Table, fde *FDE) {
	ut.u.t = t
	ut.done = false
	ut.isCIE = false
	ut.final = false
	init, err := t.initialRow(fde.CIE, &ut.init)
	if err != nil {
		ut.u.reset(fde.CIE, nil, fde.instrOff, fde.PCBegin, &Row{}, fde.PCBegin)
		ut.u.err = err
		ut.done = true
		return
	}
	ut.u.reset(fde.CIE, fde.Instructions, fde.instrOff, fde.PCBegin, init, fde.PCBegin)
	ut.end = fde.PCEnd
}

func (ut *UnwindTable) resetCIE(t *Table, cie *CIE) {
	ut.u.t = t
	ut.done = false
	ut.isCIE = true
	ut.final = false
	ut.u.reset(cie, cie.Instructions, cie.instrOff, 0, nil, 0)
	ut.end = 0
}

// Next computes the next row. It returns false at the end of the table or
// on malformed instructions (see Err).
func (ut *UnwindTable) Next() bool {
	u := &ut.u
	var ins Instruction
	for !ut.done {
		var adv bool
		var nl uint64
		// DW_CFA_advance_loc, the commonest, is decoded and applied inline.
		if d, ok := advanceLocAt(u.it.data, u.it.pos); ok && u.err == nil {
			u.it.pos++
			u.allNops = false
			adv, nl = true, u.loc+d*u.cie.CodeAlign
		} else if !u.next(&ins) {
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
		} else {
			adv, nl = u.apply(&ins)
		}
		if adv {
			ut.emit(nl)
			u.loc = nl
			if ut.keepAll || u.state.Start < u.state.End {
				return true
			}
		}
	}
	return false
}

// emit makes the interpreter's state the current row, up to end: rules do
// not change between an advance and the caller's reading of the row, so
// the state is the row and nothing is copied.
func (ut *UnwindTable) emit(end uint64) {
	ut.u.state.Start = ut.u.loc
	ut.u.state.End = end
}

// Row returns the current row. The pointer stays valid until the next
// call to Next; copy the Row to keep it.
func (ut *UnwindTable) Row() *Row { return &ut.u.state }

// Err returns the error that ended the stream early, if any.
func (ut *UnwindTable) Err() error { return ut.u.err }

// Interpreter runs a call frame program one instruction at a time, for
// callers that look at each instruction before it takes effect, or choose
// which take effect: printers, checkers, tools that mimic another
// consumer's reading (package dump reproduces readelf's with it).
// UnwindTable and RowForPC run the same code without stopping.
//
//	var in cfi.Interpreter
//	var ins cfi.Instruction
//	// The CIE's initial instructions give the rules its FDEs start from.
//	in.Start(tab.CIEInstructions(fde.CIE), nil, 0)
//	for in.Next(&ins) {
//		in.Execute(&ins)
//	}
//	var cieRules cfi.Row
//	cieRules.CopyFrom(in.Row())
//	// Then the FDE's, with an empty DW_CFA_remember_state stack.
//	in.Start(tab.FDEInstructions(&fde), &cieRules, fde.PCBegin)
//	for in.Next(&ins) {
//		// Look at ins; skip it, or:
//		if in.Execute(&ins) {
//			row := in.Row() // the rules of [row.Start, row.End)
//			...
//		}
//	}
//	if err := in.Err(); err != nil { ... }
//	// The rules from in.Loc() to fde.PCEnd are in.Row().
//
// Its state is the location, the rules (a Row) and the
// DW_CFA_remember_state stack. Start sets the first two for a program and
// empties the stack, as DWARF starts every program; Continue keeps it, as
// readelf keeps one stack for a whole section; Reset empties it.
// The stack holds at most 64 Ki states (see UnwindContext), the row 256
// register rules; beyond, the program fails.
//
// The zero value is ready for Start. An Interpreter is the caller's: it
// runs one program at a time, for one goroutine, reusing its storage from
// one program to the next.
type Interpreter struct {
	u interp
}

// Start prepares to run prog, an iterator that has not been advanced
// (from Table.CIEInstructions, FDEInstructions or Instructions), at
// location loc with the rules of init, which DW_CFA_restore returns to.
// init nil starts from no rules, as a CIE's initial instructions do;
// DW_CFA_restore then does nothing. init must not change while the
// program runs. The remember_state stack starts empty, as DWARF says
// every program does.
func (in *Interpreter) Start(prog InstructionIter, init *Row, loc uint64) {
	in.Reset()
	in.Continue(prog, init, loc)
}

// Continue is Start keeping the remember_state stack of the programs run
// before, as readelf keeps one stack for a whole section.
func (in *Interpreter) Continue(prog InstructionIter, init *Row, loc uint64) {
	u := &in.u
	if prog.t == nil {
		*u = interp{stack: u.stack[:0], slab: u.slab[:0], err: errors.New("Interpreter started without a program")}
		return
	}
	u.t = prog.t
	u.start(prog.cie, prog.data, prog.off, prog.fdeBegin, init, loc)
	u.it.err = prog.err
}

// Reset empties the DW_CFA_remember_state stack and ends the program.
func (in *Interpreter) Reset() {
	u := &in.u
	u.stack, u.slab = u.stack[:0], u.slab[:0]
	u.it.data, u.it.pos = nil, 0
	u.err = nil
}

// Next decodes the next instruction into ins without executing it. It
// returns false at the end of the program, on malformed bytes and after
// an instruction failed (see Err); after malformed bytes, ins holds what
// was decoded (see InstructionIter.Next).
func (in *Interpreter) Next(ins *Instruction) bool {
	u := &in.u
	if u.err != nil {
		return false
	}
	it := &u.it
	// DW_CFA_advance_loc, the commonest, without a call.
	if d, ok := advanceLocAt(it.data, it.pos); ok {
		*ins = Instruction{Op: OpAdvanceLoc, Operand: d, Offset: it.pos}
		it.pos++
		return true
	}
	if it.next(ins) {
		return true
	}
	u.err = it.err
	return false
}

// Execute executes ins, an instruction of the program that Next decoded.
// It reports whether ins moved the location (an advance or
// DW_CFA_set_loc): then Row holds the rules of the addresses from the
// former location to the new one, Row().Start and Row().End. A failing
// instruction (an unknown opcode, DW_CFA_restore_state with no state
// remembered, too many rules or states) changes nothing and ends the
// program with Err set.
func (in *Interpreter) Execute(ins *Instruction) bool {
	u := &in.u
	if u.err != nil || u.cie == nil {
		return false
	}
	var nl uint64
	if ins.Op == OpAdvanceLoc { // the commonest, without a call
		u.allNops = false
		nl = u.loc + ins.Operand*u.cie.CodeAlign
	} else {
		adv, l := u.apply(ins)
		if !adv || u.err != nil {
			return false
		}
		nl = l
	}
	u.state.Start, u.state.End = u.loc, nl
	u.loc = nl
	return true
}

// Row returns the current rules. The pointer stays valid, and the Row
// changes as instructions execute; copy it (Row.CopyFrom) to keep it.
func (in *Interpreter) Row() *Row { return &in.u.state }

// Loc returns the current location: where the current rules start to
// apply.
func (in *Interpreter) Loc() uint64 { return in.u.loc }

// Depth returns the number of states DW_CFA_remember_state saved and no
// DW_CFA_restore_state took back.
func (in *Interpreter) Depth() int { return len(in.u.stack) }

// Err returns what ended the program early: malformed bytes or a failing
// instruction, as an *Error at its section offset.
func (in *Interpreter) Err() error { return in.u.err }
