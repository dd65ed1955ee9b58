package cfi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/internal/byteorder"
)

// DWARF expression opcodes used by CFI (DWARF 5 section 2.5).
const (
	opAddr       = 0x03
	opDeref      = 0x06
	opConst1u    = 0x08
	opConst1s    = 0x09
	opConst2u    = 0x0a
	opConst2s    = 0x0b
	opConst4u    = 0x0c
	opConst4s    = 0x0d
	opConst8u    = 0x0e
	opConst8s    = 0x0f
	opConstu     = 0x10
	opConsts     = 0x11
	opDup        = 0x12
	opDrop       = 0x13
	opOver       = 0x14
	opPick       = 0x15
	opSwap       = 0x16
	opRot        = 0x17
	opXderef     = 0x18
	opAbs        = 0x19
	opAnd        = 0x1a
	opDiv        = 0x1b
	opMinus      = 0x1c
	opMod        = 0x1d
	opMul        = 0x1e
	opNeg        = 0x1f
	opNot        = 0x20
	opOr         = 0x21
	opPlus       = 0x22
	opPlusUconst = 0x23
	opShl        = 0x24
	opShr        = 0x25
	opShra       = 0x26
	opXor        = 0x27
	opBra        = 0x28
	opEq         = 0x29
	opGe         = 0x2a
	opGt         = 0x2b
	opLe         = 0x2c
	opLt         = 0x2d
	opNe         = 0x2e
	opSkip       = 0x2f
	opLit0       = 0x30
	opLit31      = 0x4f
	opReg0       = 0x50
	opReg31      = 0x6f
	opBreg0      = 0x70
	opBreg31     = 0x8f
	opRegx       = 0x90
	opBregx      = 0x92
	opDerefSize  = 0x94
	opNop        = 0x96
)

// Memory is what the expression evaluator reads the stack through:
// DW_OP_deref and DW_OP_deref_size load from the unwound process.
type Memory interface {
	// ReadUint64 reads an 8-byte value at addr in target byte order.
	ReadUint64(addr uint64) (uint64, error)
}

// SizedMemory is an optional extension of Memory for DW_OP_deref_size
// with sizes other than 8 and for 32-bit targets.
type SizedMemory interface {
	Memory
	// ReadUint reads size (1..8) bytes at addr, zero-extended.
	ReadUint(addr uint64, size int) (uint64, error)
}

// Registers supplies register values of the frame being unwound.
type Registers interface {
	// Reg returns the value of DWARF register r, or false if unknown.
	Reg(r arch.Reg) (uint64, bool)
}

// ErrExprTooLong is returned when an expression executes more operations
// than EvalOptions.MaxSteps allows (a loop through DW_OP_bra or DW_OP_skip).
var ErrExprTooLong = errors.New("expression executes too many operations")

// EvalOptions configures EvalExpression.
type EvalOptions struct {
	Regs      Registers        // values for DW_OP_breg*; nil if none are known
	Mem       Memory           // for DW_OP_deref*; nil if memory cannot be read
	AddrSize  int              // 4 or 8 (default 8); DW_OP_deref reads this size
	ByteOrder binary.ByteOrder // for operands of DW_OP_addr/const*; default little-endian
	// Initial values pushed before evaluation: the CFA for
	// DW_CFA_expression and DW_CFA_val_expression, none for the CFA rule.
	Initial []uint64
	// MaxSteps bounds executed operations (default 10000).
	MaxSteps int
}

// exprStackSize bounds the evaluation stack; CFI expressions use a few
// entries, and a fixed array keeps evaluation allocation-free.
const exprStackSize = 64

// Operation is one decoded DWARF expression operation (DW_OP_*).
type Operation struct {
	Op byte // the DW_OP_* opcode
	// Reg is the register of DW_OP_regN, regx, bregN and bregx, as
	// encoded (regx and bregx take any LEB128 number).
	Reg uint64
	// Value is the other operand: the constant of litN, constN*, addr,
	// constu and consts, the addend of plus_uconst, bregN and bregx, the
	// index of pick, the size of deref_size, the branch offset of skip and
	// bra. Signed operands are stored as int64 bits, sign-extended.
	Value uint64
	// Offset is the position of the operation in the expression.
	Offset int
}

// OperationIter decodes a DWARF expression one operation at a time,
// without allocating. It is the package's only decoder of expressions:
// EvalExpression, the readelf printer and the SFrame converter's pattern
// matching read through it. It knows the operations CFI uses (those
// EvalExpression and readelf name); an operation it does not know ends
// the walk after it is returned, since its operands' size is unknown.
//
//	it := cfi.NewOperationIter(expr, binary.LittleEndian, 8)
//	var op cfi.Operation
//	for it.Next(&op) {
//		...
//	}
type OperationIter struct {
	b        buf
	addrSize int
	err      error
}

// errUnknownOp ends an expression walk at an operation of unknown size.
var errUnknownOp = errors.New("unknown DWARF expression operation")

// NewOperationIter returns an iterator over expr, whose DW_OP_addr and
// fixed-size constants are in order (nil: little-endian) and whose
// addresses are addrSize bytes (0: 8).
func NewOperationIter(expr []byte, order binary.ByteOrder, addrSize int) OperationIter {
	e := little
	if order != nil {
		e = byteorder.Of(order)
	}
	if addrSize == 0 {
		addrSize = 8
	}
	return OperationIter{b: buf{data: expr, order: e}, addrSize: addrSize}
}

// More reports whether operations are left to decode.
func (it *OperationIter) More() bool { return it.b.pos < len(it.b.data) && it.err == nil }

// Pos returns the position after the operation decoded last (the end of
// the expression after a truncated one).
func (it *OperationIter) Pos() int { return it.b.pos }

// Err returns what ended the walk early: a truncated operand, or an
// operation the iterator does not know; nil at the expression's end.
func (it *OperationIter) Err() error { return it.err }

// Jump moves the position by off bytes from Pos, as DW_OP_skip and
// DW_OP_bra do; it reports false, not moving, for a target outside the
// expression (its end included is inside).
func (it *OperationIter) Jump(off int) bool {
	np := it.b.pos + off
	if np < 0 || np > len(it.b.data) {
		return false
	}
	it.b.pos = np
	return true
}

// Next decodes the next operation into op. It returns false at the end of
// the expression and on a truncated operand (see Err); then op holds the
// opcode and what was decoded before the end (a truncated LEB128 keeps
// its low bits, a truncated fixed-size value is 0), which the readelf
// printer shows.
func (it *OperationIter) Next(op *Operation) bool {
	b := &it.b
	*op = Operation{Offset: b.pos}
	if b.pos >= len(b.data) || it.err != nil {
		return false
	}
	c := b.u8()
	op.Op = c
	switch {
	case c >= opLit0 && c <= opLit31:
		op.Value = uint64(c - opLit0)
		return true
	case c >= opReg0 && c <= opReg31:
		op.Reg = uint64(c - opReg0)
		return true
	case c >= opBreg0 && c <= opBreg31:
		op.Reg = uint64(c - opBreg0)
		op.Value = uint64(b.sleb())
	case c == opAddr:
		op.Value = b.uint(it.addrSize)
	case c == opConst1u, c == opPick, c == opDerefSize:
		op.Value = uint64(b.u8())
	case c == opConst1s:
		op.Value = uint64(int64(int8(b.u8())))
	case c == opConst2u:
		op.Value = uint64(b.u16())
	case c == opConst2s, c == opSkip, c == opBra:
		op.Value = uint64(int64(int16(b.u16())))
	case c == opConst4u:
		op.Value = uint64(b.u32())
	case c == opConst4s:
		op.Value = uint64(int64(int32(b.u32())))
	case c == opConst8u, c == opConst8s:
		op.Value = b.u64()
	case c == opConstu, c == opPlusUconst:
		op.Value = b.uleb()
	case c == opConsts:
		op.Value = uint64(b.sleb())
	case c == opRegx:
		op.Reg = b.uleb()
	case c == opBregx:
		op.Reg = b.uleb()
		op.Value = uint64(b.sleb())
	default:
		if _, ok := exprOpNames[c]; !ok {
			it.err = errUnknownOp
		}
		return true
	}
	if b.err != nil {
		it.err = errTruncated
		return false
	}
	return true
}

// EvalExpression evaluates a DWARF expression as CFI uses it (CFA and
// register rules: breg, lit, const, arithmetic and logic, comparison,
// deref, plus_uconst, skip and bra) and returns the value on top of the
// stack. It is enough for the PLT and DRAP expressions of real binaries.
func EvalExpression(expr []byte, o *EvalOptions) (uint64, error) {
	// The options are copied, not pointed to: a pointer kept in ev would
	// make every caller's EvalOptions escape to the heap.
	ev := exprEval{regs: o.Regs, mem: o.Mem, order: o.ByteOrder, addrSize: o.AddrSize, mask: ^uint64(0)}
	if ev.order == nil {
		ev.order = binary.LittleEndian
	}
	if ev.addrSize == 0 {
		ev.addrSize = 8
	}
	if ev.addrSize == 4 {
		ev.mask = 0xffffffff
	}
	maxSteps := o.MaxSteps
	if maxSteps <= 0 {
		maxSteps = 10000
	}
	for _, v := range o.Initial {
		if !ev.push(v) {
			return 0, errors.New("expression stack overflow")
		}
	}
	it := NewOperationIter(expr, ev.order, ev.addrSize)
	var op Operation
	for steps := 0; it.More(); steps++ {
		if steps >= maxSteps {
			return 0, ErrExprTooLong
		}
		ok := it.Next(&op)
		if err := ev.step(&it, &op, ok); err != nil {
			return 0, err
		}
	}
	if ev.sp == 0 {
		return 0, errors.New("expression left an empty stack")
	}
	return ev.stack[ev.sp-1] & ev.mask, nil
}

// exprEval is the state of one EvalExpression: its options and its
// stack, a fixed array so that evaluation does not allocate.
type exprEval struct {
	regs     Registers
	mem      Memory
	order    binary.ByteOrder
	addrSize int
	mask     uint64 // of an address: the low 32 bits with 4-byte addresses
	stack    [exprStackSize]uint64
	sp       int
}

func (ev *exprEval) fail(pos int, format string, args ...any) error {
	return fmt.Errorf("expression at byte %d: "+format, append([]any{pos}, args...)...)
}

func (ev *exprEval) push(v uint64) bool {
	if ev.sp == exprStackSize {
		return false
	}
	ev.stack[ev.sp] = v
	ev.sp++
	return true
}

// read reads size bytes at addr through the caller's memory.
func (ev *exprEval) read(addr uint64, size int) (uint64, error) {
	mem := ev.mem
	if mem == nil {
		return 0, errors.New("no memory reader")
	}
	if sm, ok := mem.(SizedMemory); ok {
		return sm.ReadUint(addr, size)
	}
	if size != 8 {
		v, err := mem.ReadUint64(addr)
		if err != nil {
			return 0, err
		}
		if ev.order == binary.BigEndian {
			return v >> (64 - 8*uint(size)), nil
		}
		return v & (1<<(8*uint(size)) - 1), nil
	}
	return mem.ReadUint64(addr)
}

// stackNeed returns how many stack entries operation c consumes, or 0
// for the operations that push only, jump, or are not supported.
func stackNeed(c byte) int {
	switch c {
	case opDup, opDeref, opDerefSize, opNeg, opNot, opAbs, opPlusUconst, opPick, opDrop:
		return 1
	case opOver, opSwap, opAnd, opDiv, opMinus, opMod, opMul, opOr, opPlus, opShl, opShr, opShra, opXor,
		opEq, opGe, opGt, opLe, opLt, opNe:
		return 2
	case opRot:
		return 3
	}
	return 0
}

// step executes op, which it.Next decoded (ok false: its operands were
// cut short).
func (ev *exprEval) step(it *OperationIter, op *Operation, ok bool) error {
	// Errors about the stack are reported after the opcode, before its
	// operands: an operation that needs more than the stack holds fails
	// so even when its operand is cut short.
	after := op.Offset + 1
	c := op.Op
	need := stackNeed(c)
	if !ok {
		if c == opRegx {
			return ev.fail(after, "DW_OP_reg* names a location, not a value")
		}
		if need > 0 && ev.sp < need {
			return ev.fail(after, "stack underflow")
		}
		return ev.fail(it.Pos(), "truncated operand")
	}
	switch {
	case c >= opLit0 && c <= opLit31:
		return ev.pushAt(it, op.Value)
	case c >= opBreg0 && c <= opBreg31, c == opBregx:
		r := arch.Reg(op.Reg)
		if ev.regs == nil {
			return ev.fail(it.Pos(), "register r%d needed but no registers given", r)
		}
		v, ok := ev.regs.Reg(r)
		if !ok {
			return ev.fail(it.Pos(), "register r%d unknown", r)
		}
		return ev.pushAt(it, (v+op.Value)&ev.mask)
	case c >= opReg0 && c <= opReg31, c == opRegx:
		return ev.fail(after, "DW_OP_reg* names a location, not a value")
	}
	switch c {
	case opAddr, opConst1u, opConst1s, opConst2u, opConst2s, opConst4u, opConst4s, opConst8u, opConst8s, opConstu, opConsts:
		return ev.pushAt(it, op.Value)
	case opNop:
		return nil
	case opSkip, opBra:
		if c == opBra {
			if ev.sp < 1 {
				return ev.fail(it.Pos(), "stack underflow")
			}
			ev.sp--
			if ev.stack[ev.sp] == 0 {
				return nil
			}
		}
		if !it.Jump(int(int64(op.Value))) {
			return ev.fail(it.Pos(), "branch target %d outside the expression", it.Pos()+int(int64(op.Value)))
		}
		return nil
	}
	if need == 0 {
		return ev.fail(after, "unsupported operation %#x", c)
	}
	if ev.sp < need {
		return ev.fail(after, "stack underflow")
	}
	return ev.stackOp(it, op)
}

// pushAt pushes v, failing at the iterator's position when the stack is
// full.
func (ev *exprEval) pushAt(it *OperationIter, v uint64) error {
	if !ev.push(v) {
		return ev.fail(it.Pos(), "stack overflow")
	}
	return nil
}

// stackOp executes an operation on the stack, which holds at least the
// entries stackNeed says it consumes.
func (ev *exprEval) stackOp(it *OperationIter, op *Operation) error {
	c, sp := op.Op, ev.sp
	top := &ev.stack[sp-1]
	switch c {
	case opDup:
		return ev.pushAt(it, *top)
	case opDrop:
		ev.sp--
	case opPick:
		i := int(op.Value)
		if i >= sp {
			return ev.fail(it.Pos(), "DW_OP_pick %d beyond the stack", i)
		}
		return ev.pushAt(it, ev.stack[sp-1-i])
	case opOver:
		return ev.pushAt(it, ev.stack[sp-2])
	case opSwap:
		ev.stack[sp-1], ev.stack[sp-2] = ev.stack[sp-2], ev.stack[sp-1]
	case opRot:
		ev.stack[sp-1], ev.stack[sp-2], ev.stack[sp-3] = ev.stack[sp-2], ev.stack[sp-3], ev.stack[sp-1]
	case opDeref, opDerefSize:
		size := ev.addrSize
		if c == opDerefSize {
			size = int(op.Value)
			if size < 1 || size > 8 {
				return ev.fail(it.Pos(), "DW_OP_deref_size %d", size)
			}
		}
		v, err := ev.read(*top, size)
		if err != nil {
			return ev.fail(it.Pos(), "reading %d bytes at %#x: %v", size, *top, err)
		}
		*top = v
	case opNeg:
		*top = -*top
	case opNot:
		*top = ^*top
	case opAbs:
		if int64(*top) < 0 {
			*top = -*top
		}
	case opPlusUconst:
		*top += op.Value
	default:
		r, ok := binaryOp(c, ev.stack[sp-2], ev.stack[sp-1])
		if !ok {
			return ev.fail(it.Pos(), "division by zero")
		}
		ev.sp--
		ev.stack[sp-2] = r
	}
	return nil
}

// binaryOp computes x c y for the operations that pop two entries (x the
// second, y the top) and push one; false for a division by zero.
func binaryOp(c byte, x, y uint64) (uint64, bool) {
	switch c {
	case opAnd:
		return x & y, true
	case opOr:
		return x | y, true
	case opXor:
		return x ^ y, true
	case opPlus:
		return x + y, true
	case opMinus:
		return x - y, true
	case opMul:
		return x * y, true
	case opDiv:
		if y == 0 {
			return 0, false
		}
		if int64(y) == -1 && int64(x) == -1<<63 {
			return x, true
		}
		return uint64(int64(x) / int64(y)), true
	case opMod:
		if y == 0 {
			return 0, false
		}
		return x % y, true
	case opShl:
		if y >= 64 {
			return 0, true
		}
		return x << y, true
	case opShr:
		if y >= 64 {
			return 0, true
		}
		return x >> y, true
	case opShra:
		return uint64(int64(x) >> min(y, 63)), true
	case opEq:
		return b2u(x == y), true
	case opNe:
		return b2u(x != y), true
	case opGe:
		return b2u(int64(x) >= int64(y)), true
	case opGt:
		return b2u(int64(x) > int64(y)), true
	case opLe:
		return b2u(int64(x) <= int64(y)), true
	case opLt:
		return b2u(int64(x) < int64(y)), true
	}
	return 0, true
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

var exprOpNames = map[byte]string{
	opAddr: "DW_OP_addr", opDeref: "DW_OP_deref", opConst1u: "DW_OP_const1u", opConst1s: "DW_OP_const1s",
	opConst2u: "DW_OP_const2u", opConst2s: "DW_OP_const2s", opConst4u: "DW_OP_const4u", opConst4s: "DW_OP_const4s",
	opConst8u: "DW_OP_const8u", opConst8s: "DW_OP_const8s", opConstu: "DW_OP_constu", opConsts: "DW_OP_consts",
	opDup: "DW_OP_dup", opDrop: "DW_OP_drop", opOver: "DW_OP_over", opPick: "DW_OP_pick", opSwap: "DW_OP_swap",
	opRot: "DW_OP_rot", opXderef: "DW_OP_xderef", opAbs: "DW_OP_abs", opAnd: "DW_OP_and", opDiv: "DW_OP_div",
	opMinus: "DW_OP_minus", opMod: "DW_OP_mod", opMul: "DW_OP_mul", opNeg: "DW_OP_neg", opNot: "DW_OP_not",
	opOr: "DW_OP_or", opPlus: "DW_OP_plus", opPlusUconst: "DW_OP_plus_uconst", opShl: "DW_OP_shl",
	opShr: "DW_OP_shr", opShra: "DW_OP_shra", opXor: "DW_OP_xor", opBra: "DW_OP_bra", opEq: "DW_OP_eq",
	opGe: "DW_OP_ge", opGt: "DW_OP_gt", opLe: "DW_OP_le", opLt: "DW_OP_lt", opNe: "DW_OP_ne", opSkip: "DW_OP_skip",
	opRegx: "DW_OP_regx", opBregx: "DW_OP_bregx", opDerefSize: "DW_OP_deref_size", opNop: "DW_OP_nop",
}

// ExprString disassembles a DWARF expression in readelf's style
// ("DW_OP_breg7 (rsp): 8; DW_OP_lit15; DW_OP_and"), for diagnostics.
func ExprString(expr []byte, a arch.Arch) string { return string(appendExprText(nil, expr, a)) }

func appendExprText(out []byte, expr []byte, a arch.Arch) []byte {
	// readelf's order and address size, whatever the file's.
	it := NewOperationIter(expr, nil, 8)
	var op Operation
	for first := true; ; first = false {
		ok := it.Next(&op)
		if !ok && it.Err() == nil {
			return out
		}
		if !first {
			out = append(out, "; "...)
		}
		out = appendOpText(out, &op, a)
		if !ok || it.Err() != nil {
			return out
		}
	}
}

// appendOpText formats one operation as readelf does.
func appendOpText(out []byte, op *Operation, a arch.Arch) []byte {
	c := op.Op
	switch {
	case c >= opLit0 && c <= opLit31:
		out = append(out, "DW_OP_lit"...)
		return strconv.AppendUint(out, op.Value, 10)
	case c >= opReg0 && c <= opReg31:
		out = append(out, "DW_OP_reg"...)
		out = strconv.AppendUint(out, op.Reg, 10)
		out = append(out, " ("...)
		out = append(out, a.RegName(arch.Reg(op.Reg))...)
		return append(out, ')')
	case c >= opBreg0 && c <= opBreg31:
		out = append(out, "DW_OP_breg"...)
		out = strconv.AppendUint(out, op.Reg, 10)
		out = append(out, " ("...)
		out = append(out, a.RegName(arch.Reg(op.Reg))...)
		out = append(out, "): "...)
		return strconv.AppendInt(out, int64(op.Value), 10)
	}
	name, ok := exprOpNames[c]
	if !ok {
		out = append(out, "DW_OP_0x"...)
		return strconv.AppendUint(out, uint64(c), 16)
	}
	out = append(out, name...)
	switch c {
	case opConst1u, opPick, opDerefSize, opConst2u, opConst4u, opConstu, opPlusUconst:
		out = append(out, ": "...)
		out = strconv.AppendUint(out, op.Value, 10)
	case opConst1s, opConst2s, opSkip, opBra, opConst4s, opConsts:
		out = append(out, ": "...)
		out = strconv.AppendInt(out, int64(op.Value), 10)
	case opConst8u, opConst8s, opAddr:
		out = append(out, ": 0x"...)
		out = strconv.AppendUint(out, op.Value, 16)
	case opRegx:
		out = append(out, ": "...)
		out = strconv.AppendUint(out, op.Reg, 10)
	case opBregx:
		out = append(out, ": "...)
		out = strconv.AppendUint(out, op.Reg, 10)
		out = append(out, ' ')
		out = strconv.AppendInt(out, int64(op.Value), 10)
	}
	return out
}
