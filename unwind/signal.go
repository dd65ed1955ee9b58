package unwind

import (
	"bytes"

	"github.com/sframekit/sframekit/arch"
)

// Signal trampolines, recognized by their code as gdb does when neither
// SFrame nor CFI marks them: the instructions that return from a signal
// handler into the kernel (s390x: s390xsignal.go).
var (
	// x86-64 __restore_rt: mov $15, %rax; syscall
	amd64Sigreturn = []byte{0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05}
	// AArch64 __kernel_rt_sigreturn: mov x8, #139; svc #0
	arm64Sigreturn = []byte{0x68, 0x11, 0x80, 0xd2, 0x01, 0x00, 0x00, 0xd4}
)

// sigreturnAt returns the address of the signal trampoline that pc is
// in: pc itself, or, for the innermost frame (top), the trampoline whose
// system call ends right at pc. A sample taken while the kernel runs
// rt_sigreturn has that address as its PC (the system call's return
// address), with SP still at the signal frame; no unwind table covers it
// (glibc's __restore_rt FDE ends at the system call), so only its code
// tells what it is.
func (w *Context) sigreturnAt(pc uint64, top bool) (uint64, bool) {
	if w.isSigreturn(pc) {
		return pc, true
	}
	if top {
		var n uint64
		switch w.arch {
		case arch.AMD64:
			n = uint64(len(amd64Sigreturn))
		case arch.ARM64:
			n = uint64(len(arm64Sigreturn))
		case arch.S390X:
			n = 2 // svc
		}
		if n > 0 && pc >= n && w.isSigreturn(pc-n) {
			return pc - n, true
		}
	}
	return 0, false
}

// inSigreturn reports whether sigreturnAt finds a trampoline.
func (w *Context) inSigreturn(pc uint64, top bool) bool {
	_, ok := w.sigreturnAt(pc, top)
	return ok
}

// isSigreturn reports whether the code at pc is a signal trampoline's.
func (w *Context) isSigreturn(pc uint64) bool {
	var want []byte
	switch w.arch {
	case arch.AMD64:
		want = amd64Sigreturn
	case arch.ARM64:
		want = arm64Sigreturn
	case arch.S390X:
		_, err := w.mem.m.ReadAt(w.code[:2], int64(pc))
		ok, _ := s390xSigreturn(w.code[:2])
		return err == nil && ok
	default:
		return false
	}
	b := w.code[:len(want)]
	if _, err := w.mem.m.ReadAt(b, int64(pc)); err != nil {
		return false
	}
	return bytes.Equal(b, want)
}

// Where the kernel saves the interrupted registers, relative to the SP
// at the trampoline (the handler has returned into it):
//
//	x86-64: SP points at the ucontext; its mcontext (at +40) holds gregs
//	r8..r15, rdi, rsi, rbp, rbx, rdx, rax, rcx, rsp, rip.
//	AArch64: SP points at siginfo (128 bytes), then the ucontext, whose
//	mcontext (at +176) holds fault_address, x0..x30, sp, pc.
const (
	amd64GregsOff = 40
	arm64RegsOff  = 128 + 176 + 8
)

// amd64Gregs are the registers of gregs indexes 0..16.
var amd64Gregs = [17]arch.Reg{
	arch.AMD64R8, arch.AMD64R9, arch.AMD64R10, arch.AMD64R11, arch.AMD64R12, arch.AMD64R13, arch.AMD64R14, arch.AMD64R15,
	arch.AMD64RDI, arch.AMD64RSI, arch.AMD64RBP, arch.AMD64RBX, arch.AMD64RDX, arch.AMD64RAX, arch.AMD64RCX, arch.AMD64RSP, arch.AMD64RIP,
}

// SignalSlots returns where a signal trampoline's frame holds the
// interrupted SP, PC and FP, as offsets from the SP at the trampoline
// (stepSignal's layout), for walkers that apply them themselves (the
// tables of bpfunwind); ok is false where they are not at fixed offsets
// (s390x: two frame layouts).
func SignalSlots(a arch.Arch) (sp, pc, fp int64, ok bool) {
	switch a {
	case arch.AMD64:
		for i, d := range amd64Gregs {
			off := amd64GregsOff + 8*int64(i)
			switch d {
			case arch.AMD64RSP:
				sp = off
			case arch.AMD64RIP:
				pc = off
			case arch.AMD64RBP:
				fp = off
			}
		}
		return sp, pc, fp, true
	case arch.ARM64:
		at := func(r arch.Reg) int64 { return arm64RegsOff + 8*int64(r-arch.ARM64X0) }
		return at(arch.ARM64SP), at(arch.ARM64PC), at(arch.ARM64X29), true
	}
	return 0, 0, 0, false
}

// stepSignal restores the interrupted registers from the signal frame of
// the trampoline at tramp (on s390x, its code tells which frame).
func (w *Context) stepSignal(cur, next *arch.Regs, tramp uint64) error {
	sp, ok := cur.Get(w.arch.SP())
	if !ok {
		return errRegister // after a frame-pointer step that could not tell it
	}
	newFrame(cur, next)
	switch w.arch {
	case arch.AMD64:
		base := sp + amd64GregsOff
		for i, d := range amd64Gregs {
			v, err := w.mem.word(base + uint64(8*i))
			if err != nil {
				return err
			}
			next.Set(d, v)
		}
	case arch.ARM64:
		base := sp + arm64RegsOff
		for r := arch.ARM64X0; r <= arch.ARM64PC; r++ { // x0..x30, sp, pc
			v, err := w.mem.word(base + uint64(8*r))
			if err != nil {
				return err
			}
			next.Set(r, v)
		}
	case arch.S390X:
		// Which of the two trampolines: their frames differ.
		if _, err := w.mem.m.ReadAt(w.code[:2], int64(tramp)); err != nil {
			return err
		}
		_, rt := s390xSigreturn(w.code[:2])
		return w.stepSignalS390X(cur, next, rt)
	default:
		return errNoRule
	}
	w.cfa = sp
	return nil
}
