package unwind

import "encoding/binary"

// AArch64 frame records do not say how large a frame is: x29 points at
// the record {caller's x29, x30}, which compilers place anywhere in the
// frame (at its bottom with "stp x29, x30, [sp, #-N]!; mov x29, sp", in
// its middle with "sub sp, sp, #N; stp x29, x30, [sp, #M]; add x29, sp,
// #M"). A frame-pointer step needs the frame's size for the caller's SP:
// the CFA that CFI, SFrame and signal frames further up are based on.
// Without CFI, gdb reads it from the function's prologue; so does
// arm64CFA, reading the code backwards from the PC to the instruction
// that set x29, then on to the function's entry, adding up what the
// prologue took from SP.

// Instruction encodings (A64, little endian).
const (
	a64MovX29SP     = 0x910003fd // mov x29, sp (add x29, sp, #0)
	a64AddX29SPMask = 0xffc003ff // add x29, sp, #imm12 (no shift)
	a64SubSPMask    = 0xff8003ff // sub sp, sp, #imm12{, lsl #12}
	a64SubSP        = 0xd10003ff
	a64AddSP        = 0x910003ff // add sp, sp, #imm12{, lsl #12}
	a64PreIdxMask   = 0xffc003e0 // stp Xt, Xt2, [sp, #imm7]! and the D/Q forms
	a64StpXPre      = 0xa98003e0
	a64StpDPre      = 0x6d8003e0
	a64StpQPre      = 0xad8003e0
	a64StrXPreMask  = 0xffe00fe0 // str Xt, [sp, #imm9]!
	a64StrXPre      = 0xf8000fe0
	a64BMask        = 0xfc000000 // b label
	a64B            = 0x14000000
	a64Ret          = 0xd65f03c0
	a64RetAA        = 0xd65f0bff
	a64RetAB        = 0xd65f0fff
	a64BTIMask      = 0xffffff3f // bti {c, j, jc}
	a64BTI          = 0xd503241f
	a64PACIASP      = 0xd503233f
	a64PACIBSP      = 0xd503237f
	a64NOP          = 0xd503201f
)

// Scan limits: how far back from the PC the instruction setting x29 may
// be, and how long a prologue before it may be.
const (
	arm64MaxBody     = 2048
	arm64MaxPrologue = 64
)

// arm64Insn reads the instruction at addr (into the scratch buffer w.code,
// without allocating).
func (w *Context) arm64Insn(addr uint64) (uint32, bool) {
	b := w.code[:4]
	if _, err := w.mem.m.ReadAt(b, int64(addr)); err != nil {
		return 0, false
	}
	return binary.LittleEndian.Uint32(b), true
}

// arm64Entry reports whether insn marks the entry of a function or the
// end of the code before it: a return, an unconditional branch, BTI,
// PACIxSP, padding.
func arm64Entry(insn uint32) bool {
	switch {
	case insn == a64Ret || insn == a64RetAA || insn == a64RetAB,
		insn&a64BMask == a64B,
		insn&a64BTIMask == a64BTI,
		insn == a64PACIASP || insn == a64PACIBSP,
		insn == a64NOP, insn == 0:
		return true
	}
	return false
}

// arm64CFA returns the CFA of the frame whose PC is pc and whose x29 is
// fp, from its prologue, or false if the prologue is not one it knows.
func (w *Context) arm64CFA(pc, fp uint64) (uint64, bool) {
	pc &^= 3
	// The instruction that made x29 point at the frame record.
	a, m := uint64(0), uint64(0)
	found := false
	for i := uint64(1); i <= arm64MaxBody && i*4 <= pc; i++ {
		insn, ok := w.arm64Insn(pc - 4*i)
		if !ok {
			return 0, false
		}
		if insn&a64AddX29SPMask == a64MovX29SP {
			a, m, found = pc-4*i, uint64(insn>>10&0xfff), true
			break
		}
	}
	if !found {
		return 0, false
	}
	// What the prologue took from SP before it.
	var total uint64
	for i := uint64(1); i <= arm64MaxPrologue && i*4 <= a; i++ {
		insn, ok := w.arm64Insn(a - 4*i)
		if !ok || arm64Entry(insn) {
			break
		}
		switch {
		case insn&a64SubSPMask == a64SubSP:
			total += uint64(insn>>10&0xfff) << (12 * (insn >> 22 & 1))
		case insn&a64SubSPMask == a64AddSP:
			return 0, false // SP going up in a prologue: not one we know
		case insn&a64PreIdxMask == a64StpXPre, insn&a64PreIdxMask == a64StpDPre:
			total += uint64(-int64(int32(insn<<10)>>25) * 8)
		case insn&a64PreIdxMask == a64StpQPre:
			total += uint64(-int64(int32(insn<<10)>>25) * 16)
		case insn&a64StrXPreMask == a64StrXPre:
			total += uint64(-int64(int32(insn<<11) >> 23))
		}
	}
	if total == 0 || total > 1<<20 {
		return 0, false
	}
	return fp - m + total, true
}
