package unwind

import (
	"encoding/binary"
	"errors"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/cfi"
	"github.com/sframekit/sframekit/sframe"
)

// errRegister means a rule needs a register whose value is not known in
// this frame (a scratch register, outside the topmost frame).
var errRegister = errors.New("register not available")

// reg reads register r of the current frame.
func reg(cur *arch.Regs, r arch.Reg) (uint64, error) {
	v, ok := cur.Get(r)
	if !ok {
		return 0, errRegister
	}
	return v, nil
}

// spOffset is the caller's SP relative to the CFA: -160 on s390x (the
// CFA is the SP at the call plus the register save area), 0 elsewhere.
func (w *Context) spOffset() uint64 { return w.spOff }

// newFrame starts the caller's register set: same architecture, nothing
// known yet.
func newFrame(cur, next *arch.Regs) {
	next.Arch = cur.Arch
	next.Valid = 0
	next.Flags, next.FSBase, next.GSBase, next.OrigRAX = 0, 0, 0, 0
}

// strip removes the pointer-authentication code of a signed AArch64
// return address.
func (w *Context) strip(ra uint64) uint64 { return ra & w.pacMask }

// stepSFrame applies the SFrame row covering pc (ELF address), found
// through the decoded index x when there is one.
func (w *Context) stepSFrame(m *Module, x *sfIndex, pc uint64, cur, next *arch.Regs, top bool) error {
	s := m.SFrame
	var r *sframe.Row
	signal := false
	if x != nil {
		f, k := x.findRow(pc)
		if f == nil {
			return errNoRule
		}
		signal = f.signal
		if k >= 0 && x.rows[k].ok {
			r = &x.rows[k].row
		}
	} else {
		f, e, err := s.FindFRE(pc)
		if err == nil {
			signal = f.Signal()
			if w.srow, err = s.Rules(&f, &e); err == nil {
				r = &w.srow
			}
		} else if i := s.FindFunc(pc); i >= 0 {
			// A v3 signal FDE may have no rows ("the CFI could not be
			// translated"): it still says what the frame is.
			if fn, err := s.Func(i); err == nil {
				signal = fn.Signal()
			}
		}
	}
	if signal && (w.arch == arch.AMD64 || w.arch == arch.ARM64) {
		// A signal trampoline: the rules describe the trampoline's own
		// frame, but what the caller needs is the interrupted context.
		w.sig = true
		return w.stepSignal(cur, next, cur.PC())
	}
	if r == nil {
		// No row, or corrupt section data: let CFI or FP try.
		return errNoRule
	}
	if r.RAUndefined {
		return errEnd
	}
	abi := s.Header().ABI
	// CFA.
	cfa, err := w.ruleValue(r.CFA, abi, cur, 0, top)
	if err != nil {
		return err
	}
	w.cfa = cfa
	// Return address.
	var ra uint64
	switch r.RA.Kind {
	case sframe.RuleUnspecified, sframe.RuleNotSaved:
		if s.Header().HasFixedRA() {
			// AMD64 flexible rows with an RA padding word: the RA is
			// at its fixed place.
			if ra, err = w.mem.word(cfa + uint64(int64(s.Header().CFAFixedRAOffset))); err != nil {
				return err
			}
			break
		}
		// Still in the RA register (AArch64 x30, s390x r14): only
		// meaningful where that register is live.
		var ok bool
		if ra, ok = get(cur, w.raReg); !ok {
			return errNoRule
		}
	default:
		if ra, err = w.ruleValue(r.RA, abi, cur, cfa, top); err != nil {
			return err
		}
	}
	if r.RASigned {
		ra = w.strip(ra)
	}
	// Frame pointer: unchanged unless saved.
	fpReg := w.fpReg
	fp, fpOK := get(cur, fpReg)
	switch r.FP.Kind {
	case sframe.RuleUnspecified, sframe.RuleNotSaved:
	default:
		if r.FP.Kind == sframe.RuleDeref {
			slot := r.FP
			slot.Kind = sframe.RuleValue
			if a, err := w.ruleValue(slot, abi, cur, cfa, top); err == nil && w.popped(top, cur, a) {
				break // popped already: fp is the caller's
			}
		}
		// An FP saved where the stack cannot be read is unknown in the
		// caller, not an error.
		v, err := w.ruleValue(r.FP, abi, cur, cfa, top)
		fp, fpOK = v, err == nil
	}
	newFrame(cur, next)
	set(next, w.pcReg, ra)
	set(next, w.spReg, cfa+w.spOffset())
	if fpOK {
		set(next, fpReg, fp)
	}
	return nil
}

// popped reports whether addr, where the rules say a register is saved,
// lies below the stack pointer of the innermost frame (top): the
// epilogue popped the register there already (between pop %rbp and ret,
// where compilers' CFI, and SFrame after it, still give the save slot),
// so that the register holds the caller's value again, and the slot,
// outside a sample's stack copy, need not be read. Frames further up
// have no live registers of their own to take instead.
func (w *Context) popped(top bool, cur *arch.Regs, addr uint64) bool {
	if !top {
		return false
	}
	sp, ok := get(cur, w.spReg)
	return ok && addr < sp
}

// ruleValue evaluates an SFrame rule. cfa is the base of CFA-relative
// rules. Rules based on registers other than SP and FP are trusted only
// in the topmost frame.
func (w *Context) ruleValue(r sframe.Rule, abi sframe.ABI, cur *arch.Regs, cfa uint64, top bool) (uint64, error) {
	var base uint64
	switch r.Base {
	case sframe.RegCFA:
		base = cfa
	default:
		if a := abi.Arch(); !top && r.Base != a.SP() && r.Base != a.FP() {
			return 0, errNoRule
		}
		v, ok := cur.Get(r.Base)
		if !ok {
			return 0, errNoRule
		}
		base = v
	}
	addr := base + uint64(r.Offset)
	if r.Kind != sframe.RuleDeref {
		return addr, nil
	}
	return w.mem.word(addr)
}

// stepFP follows the frame-pointer chain: the frame record at FP holds
// the caller's FP and the return address (AMD64 and AArch64); on s390x,
// the back chain.
func (w *Context) stepFP(cur, next *arch.Regs) error {
	if w.arch == arch.S390X {
		return w.stepBackchain(cur, next) // backchain.go
	}
	if w.arch != arch.AMD64 && w.arch != arch.ARM64 {
		return errNoRule
	}
	fp, ok := cur.Get(w.arch.FP())
	if !ok || fp == 0 || fp&7 != 0 || fp < cur.SP() {
		return errNoRule
	}
	callerFP, err := w.mem.word(fp)
	if err != nil {
		return err
	}
	ra, err := w.mem.word(fp + 8)
	if err != nil {
		return err
	}
	cfa, spKnown := fp+16, true
	if w.arch == arch.ARM64 {
		ra = w.strip(ra)
		// The record may lie anywhere in the frame: the prologue says
		// where (arm64prologue.go). Where it cannot (code of a file not
		// found, not in a core), the caller's SP is unknown: a guess
		// would make the caller's SP-based SFrame or CFI rows read
		// return addresses from the wrong slots (garbage frames), so
		// they fail for want of SP and the walk goes on by the frame
		// records, or stops.
		cfa, spKnown = w.arm64CFA(cur.PC(), fp)
		if !spKnown && callerFP != 0 && callerFP <= fp {
			return errNoRule // nothing else shows the walk moves on
		}
	}
	newFrame(cur, next)
	next.Set(w.arch.PC(), ra)
	if spKnown {
		w.cfa = cfa
		next.Set(w.arch.SP(), cfa)
	}
	next.Set(w.arch.FP(), callerFP)
	return nil
}

// bigEndian is the byte order of s390x expression operands.
var bigEndian = binary.BigEndian

// recovers reports whether a CFI rule kind gives the register a new value.
func recovers(k cfi.RuleKind) bool {
	switch k {
	case cfi.RuleOffset, cfi.RuleValOffset, cfi.RuleRegister, cfi.RuleExpression, cfi.RuleValExpression:
		return true
	}
	return false
}

// regsView adapts arch.Regs to the CFI expression evaluator.
type regsView struct{ r *arch.Regs }

// Reg implements cfi.Registers.
func (v regsView) Reg(r arch.Reg) (uint64, bool) { return v.r.Get(r) }

// stepCFI applies the CFI row covering pc (ELF address).
func (w *Context) stepCFI(m *Module, pc uint64, cur, next *arch.Regs, top bool) error {
	cie, ok, err := m.CFI.Lookup(&w.cfi.ctx, pc, &w.cfi.row)
	if err != nil || !ok {
		return errNoRule
	}
	w.cfi.found = true
	row := &w.cfi.row
	opts := cfi.EvalOptions{Regs: regsView{cur}, Mem: &w.mem}
	if w.mem.be {
		opts.ByteOrder = bigEndian
	}
	var cfa uint64
	switch row.CFA.Kind {
	case cfi.CFARegOffset:
		v, err := reg(cur, row.CFA.Reg)
		if err != nil {
			return errNoRule
		}
		cfa = v + uint64(row.CFA.Offset)
	case cfi.CFAExpression:
		if cfa, err = cfi.EvalExpression(row.CFA.Expr, &opts); err != nil {
			return err
		}
	default:
		return errNoRule
	}
	w.cfa = cfa
	if cie.SignalFrame {
		w.sig = true
	}
	raCol := cie.RA
	w.cfi.raCol = raCol
	// Registers without a rule keep their values (callee-saved in
	// practice); those with one are recomputed.
	*next = *cur
	next.Invalidate(w.arch.PC())
	raSet := false
	w.cfi.initial[0] = cfa
	opts.Initial = w.cfi.initial[:]
	for i := 0; i < row.NumRules(); i++ {
		rr := row.RuleAt(i)
		col := rr.Column
		var v uint64
		known := true
		switch rr.Kind {
		case cfi.RuleUndefined:
			if col == raCol {
				return errEnd
			}
			next.Invalidate(col)
			continue
		case cfi.RuleSameValue, cfi.RuleUnspecified:
			continue
		case cfi.RuleOffset:
			if a := cfa + uint64(rr.Offset); col != raCol && w.popped(top, cur, a) {
				v, known = cur.Get(col)
			} else {
				v, err = w.mem.word(a)
			}
		case cfi.RuleValOffset:
			v = cfa + uint64(rr.Offset)
		case cfi.RuleRegister:
			v, known = cur.Get(rr.Reg)
		case cfi.RuleExpression:
			var addr uint64
			if addr, err = cfi.EvalExpression(rr.Expr, &opts); err == nil {
				if col != raCol && w.popped(top, cur, addr) {
					v, known = cur.Get(col)
				} else {
					v, err = w.mem.word(addr)
				}
			}
		case cfi.RuleValExpression:
			v, err = cfi.EvalExpression(rr.Expr, &opts)
		default:
			known = false
		}
		if err != nil {
			if col == raCol {
				return err
			}
			// A register saved where the stack cannot be read (below SP
			// after an epilogue's pops, whose rules glibc keeps) is
			// unknown in the caller; the walk fails only if a rule
			// needs it, as libunwind's does.
			err, known = nil, false
		}
		if !known {
			next.Invalidate(col)
			continue
		}
		next.Set(col, v)
		if col == raCol {
			raSet = true
		}
	}
	// The return address column: x86-64 uses 16 (the PC slot of Regs);
	// AArch64 and s390x keep it in x30 / r14 and the PC is separate.
	var ra uint64
	if v, ok := next.Get(raCol); ok && (raSet || raCol != w.arch.PC()) {
		ra = v
	} else {
		return errNoRule
	}
	if row.RASigned {
		ra = w.strip(ra)
	}
	next.Set(w.arch.PC(), ra)
	// The CFA is the caller's SP unless a rule says otherwise (signal
	// frames restore SP explicitly).
	sp := w.arch.SP()
	if !recovers(row.Rule(sp).Kind) {
		next.Set(sp, cfa+w.spOffset())
	}
	return nil
}
