package unwind

import (
	"github.com/sframekit/sframekit/arch"
)

// The s390x back chain (gcc -mbackchain), the frame-pointer-like chain of
// the s390x ELF ABI: a function that allocates a frame stores its
// caller's SP (r15 at entry) in the frame's first word, and has saved
// r6-r15 in the register save area of its caller's frame. So from a
// frame's SP, *SP is the caller's SP (the back chain) and the caller's
// save area there holds the return address (r14, at +112) and, as a
// check, the same SP (r15, at +120), as gdb's s390 back-chain unwinder
// reads them.
const (
	s390xSaveR14 = 14 * 8
	s390xSaveR15 = 15 * 8
)

// stepBackchain unwinds one s390x frame through the back chain. The
// other registers keep their values, as gdb assumes: the chain does not
// say which ones the function saved.
func (w *Context) stepBackchain(cur, next *arch.Regs) error {
	sp, ok := cur.Get(arch.S390XSP)
	if !ok || sp == 0 || sp&7 != 0 {
		return errNoRule
	}
	bc, err := w.mem.word(sp)
	if err != nil {
		return err
	}
	// A zero back chain ends the stack; one that does not point up, or
	// whose save area does not point back at itself, is no back chain.
	if bc == 0 || bc <= sp || bc&7 != 0 {
		return errNoRule
	}
	if r15, err := w.mem.word(bc + s390xSaveR15); err != nil || r15 != bc {
		return errNoRule
	}
	ra, err := w.mem.word(bc + s390xSaveR14)
	if err != nil {
		return err
	}
	w.cfa = bc + s390xSigFrameSize
	*next = *cur
	next.Set(arch.S390XRA, ra)
	next.Set(arch.S390XPC, ra)
	next.Set(arch.S390XSP, bc)
	return nil
}
