package cfi

import (
	"fmt"
	"slices"

	"github.com/sframekit/sframekit/arch"
)

// Rule is how one register of the caller is recovered at some PC.
type Rule struct {
	Kind   RuleKind // which fields below apply
	Reg    arch.Reg // RuleRegister: register holding the caller's value
	Offset int64    // RuleOffset, RuleValOffset: offset from the CFA
	Expr   []byte   // RuleExpression, RuleValExpression: DWARF expression (view into the section)
}

// RegRule is a Rule together with the register (table column) it is for.
type RegRule struct {
	Column arch.Reg // the register this rule restores
	Rule
}

// CFARule is how the canonical frame address is computed at some PC.
type CFARule struct {
	Kind   CFAKind  // which fields below apply
	Reg    arch.Reg // CFARegOffset: base register
	Offset int64    // CFARegOffset: added to the register
	Expr   []byte   // CFAExpression: DWARF expression (view into the section)
	// Signed says the offset came from a signed, factored operand
	// (DW_CFA_def_cfa_sf, DW_CFA_def_cfa_offset_sf). Otherwise it is the
	// unsigned operand of DW_CFA_def_cfa or DW_CFA_def_cfa_offset, whose
	// values from 2^63 on read as negative int64s: readelf prints the
	// first kind signed and the second unsigned. Rows compare equal
	// whatever its value.
	Signed bool
}

// String writes the rule in the notation of package sframe's Rule.String,
// so that rules of both formats compare as text: "(cfa-8)" for a value
// saved at CFA-8 (RuleOffset), "cfa+16" for the value CFA+16
// (RuleValOffset), "r6" for a value held in register 6, "(expr 7708)"
// and "expr 7708" for the address or value a DWARF expression computes
// (its bytes in hex), and the kind's name for the rest ("undefined",
// "same_value", "unspecified").
func (r Rule) String() string {
	switch r.Kind {
	case RuleOffset:
		return fmt.Sprintf("(cfa%+d)", r.Offset)
	case RuleValOffset:
		return fmt.Sprintf("cfa%+d", r.Offset)
	case RuleRegister:
		return fmt.Sprintf("r%d", r.Reg)
	case RuleExpression:
		return fmt.Sprintf("(expr %x)", r.Expr)
	case RuleValExpression:
		return fmt.Sprintf("expr %x", r.Expr)
	}
	return r.Kind.String()
}

// String writes the CFA rule as Rule.String writes a value: "r7+8" for
// register 7 plus 8, "expr 7708" for what a DWARF expression computes,
// "undefined" before any rule.
func (r CFARule) String() string {
	switch r.Kind {
	case CFARegOffset:
		return fmt.Sprintf("r%d%+d", r.Reg, r.Offset)
	case CFAExpression:
		return fmt.Sprintf("expr %x", r.Expr)
	}
	return r.Kind.String()
}

// inlineRules is how many register rules a Row holds without allocating.
// Real frames keep well under it (AArch64 with x19-x30 and d8-d15 is 20).
const inlineRules = 24

// maxRules bounds the register rules of a row: more distinct registers
// than any architecture has (gimli allows 192). Rules are kept sorted and
// DW_CFA_remember_state copies them all, so the bound also bounds the
// work of one instruction; a program that names more registers fails
// ("too many register rules").
const maxRules = 256

// slot is the compact, pointer-free form a Row stores a rule in, so rows
// copy with a plain memmove. Expressions are offsets into the section.
type slot struct {
	col  arch.Reg
	kind RuleKind
	// val is the offset (RuleOffset, RuleValOffset), the source register
	// (RuleRegister), or the expression's section offset | length<<32.
	val int64
}

func exprVal(off, n uint32) int64 { return int64(uint64(off) | uint64(n)<<32) }

// Row is one row of the CFI table: the rules that hold for addresses in
// [Start, End). Only registers with an explicit rule are stored; every
// other register is RuleUnspecified. A Row is a value, but assigning one
// shares the storage of the rules past the 24th (rare: AArch64 with
// x19-x30 and d8-d15 has 20): CopyFrom makes an independent copy.
// Expression bytes stay shared with the section either way.
type Row struct {
	Start, End uint64  // addresses the row covers: [Start, End)
	CFA        CFARule // how to compute the canonical frame address
	// RASigned is the AArch64 pointer-authentication state toggled by
	// DW_CFA_AARCH64_negate_ra_state: the return address is signed and must
	// be authenticated (stripped) before use.
	RASigned bool
	// ArgsSize is the last DW_CFA_GNU_args_size value (bytes of outgoing
	// arguments pushed), needed when unwinding into a landing pad.
	ArgsSize uint64

	data  []byte // the section, for expression rules
	n     int
	rules [inlineRules]slot
	extra []slot // rules beyond inlineRules, in column order
}

// NumRules returns the number of registers with an explicit rule.
func (r *Row) NumRules() int { return r.n }

func (r *Row) mat(s *slot) Rule { return s.rule(r.data) }

func (s *slot) rule(data []byte) Rule {
	switch s.kind {
	case RuleOffset, RuleValOffset:
		return Rule{Kind: s.kind, Offset: s.val}
	case RuleRegister:
		return Rule{Kind: s.kind, Reg: arch.Reg(s.val)}
	case RuleExpression, RuleValExpression:
		off, n := uint64(uint32(s.val)), uint64(s.val)>>32
		ru := Rule{Kind: s.kind}
		if off+n <= uint64(len(data)) {
			ru.Expr = data[off : off+n : off+n]
		}
		return ru
	}
	return Rule{Kind: s.kind}
}

// RuleAt returns the i'th explicit rule, in increasing column order.
func (r *Row) RuleAt(i int) RegRule {
	s := r.ptr(i)
	return RegRule{Column: s.col, Rule: r.mat(s)}
}

func (r *Row) ptr(i int) *slot {
	if i < inlineRules {
		return &r.rules[i]
	}
	return &r.extra[i-inlineRules]
}

// AppendRules appends all explicit rules, in column order, to dst and
// returns the extended slice: Rules without allocating, for callers that
// read every rule of many rows (printers).
func (r *Row) AppendRules(dst []RegRule) []RegRule {
	n := len(dst)
	dst = slices.Grow(dst, r.n)[:n+r.n]
	for i := range r.n {
		// Field by field, so that a reused dst sees no pointer written
		// (and no write barrier) but for expressions.
		s, d := r.ptr(i), &dst[n+i]
		d.Column, d.Kind, d.Reg, d.Offset = s.col, s.kind, 0, 0
		switch s.kind {
		case RuleOffset, RuleValOffset:
			d.Offset = s.val
		case RuleRegister:
			d.Reg = arch.Reg(s.val)
		case RuleExpression, RuleValExpression:
			d.Expr = s.rule(r.data).Expr
			continue
		}
		if d.Expr != nil {
			d.Expr = nil
		}
	}
	return dst
}

// Rules returns all explicit rules in column order, as a new slice.
func (r *Row) Rules() []RegRule {
	out := make([]RegRule, r.n)
	for i := range out {
		out[i] = r.RuleAt(i)
	}
	return out
}

// find returns the index of col, or the insertion point and false.
func (r *Row) find(col arch.Reg) (int, bool) {
	n := r.n
	if n > inlineRules {
		n = inlineRules
	}
	rs := r.rules[:n]
	for i := range rs {
		if c := rs[i].col; c >= col {
			return i, c == col
		}
	}
	for i := range r.extra {
		if c := r.extra[i].col; c >= col {
			return inlineRules + i, c == col
		}
	}
	return r.n, false
}

// Rule returns the rule for register col (RuleUnspecified if none).
func (r *Row) Rule(col arch.Reg) Rule {
	if i, ok := r.find(col); ok {
		return r.mat(r.ptr(i))
	}
	return Rule{}
}

// set stores the rule s for column s.col, keeping rules sorted by column.
// It returns false, changing nothing, when the row already holds maxRules
// rules and s.col is not among them.
func (r *Row) set(s slot) bool {
	i, ok := r.find(s.col)
	if ok {
		*r.ptr(i) = s
		return true
	}
	if r.n < inlineRules {
		// Common case: shift within the inline array.
		copy(r.rules[i+1:r.n+1], r.rules[i:r.n])
		r.rules[i] = s
		r.n++
		return true
	}
	if r.n >= maxRules {
		return false
	}
	r.extra = append(r.extra, slot{})
	for j := r.n; j > i; j-- {
		*r.ptr(j) = *r.ptr(j - 1)
	}
	*r.ptr(i) = s
	r.n++
	return true
}

// del removes any rule for col.
func (r *Row) del(col arch.Reg) {
	i, ok := r.find(col)
	if !ok {
		return
	}
	for j := i; j < r.n-1; j++ {
		*r.ptr(j) = *r.ptr(j + 1)
	}
	r.n--
	if r.n >= inlineRules {
		r.extra = r.extra[:r.n-inlineRules]
	} else {
		r.extra = r.extra[:0]
	}
}

// CopyFrom makes r an independent copy of o, reusing r's storage, so that
// a row kept across many (a CIE's initial rules, say) costs no allocation.
func (r *Row) CopyFrom(o *Row) {
	r.Start, r.End, r.CFA, r.RASigned, r.ArgsSize, r.data = o.Start, o.End, o.CFA, o.RASigned, o.ArgsSize, o.data
	n := o.n
	if n > inlineRules {
		n = inlineRules
	}
	copy(r.rules[:n], o.rules[:n])
	r.n = o.n
	if len(o.extra) > 0 || len(r.extra) > 0 {
		r.extra = append(r.extra[:0], o.extra...)
	}
}

// Equal reports whether two rows have the same CFA, register rules and
// AArch64 RA state (addresses and ArgsSize are not compared). Converters
// use it to merge adjacent rows.
func (r *Row) Equal(o *Row) bool {
	if r.n != o.n || r.RASigned != o.RASigned || !cfaEqual(&r.CFA, &o.CFA) {
		return false
	}
	for i := 0; i < r.n; i++ {
		a, b := r.ptr(i), o.ptr(i)
		if a.col != b.col || a.kind != b.kind {
			return false
		}
		if a.kind == RuleExpression || a.kind == RuleValExpression {
			if a.val != b.val && string(r.mat(a).Expr) != string(o.mat(b).Expr) {
				return false
			}
		} else if a.val != b.val {
			return false
		}
	}
	return true
}

func cfaEqual(a, b *CFARule) bool {
	return a.Kind == b.Kind && a.Reg == b.Reg && a.Offset == b.Offset && string(a.Expr) == string(b.Expr)
}
