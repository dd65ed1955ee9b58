package unwind

import (
	"github.com/sframekit/sframekit/arch"
)

// s390x signal trampolines: "svc 119" (sigreturn, for handlers installed
// without SA_SIGINFO) and "svc 173" (rt_sigreturn). The kernel writes
// them into the signal frame or the vDSO, qemu-user into a page of its
// own; the handler returns to them through r14.
const (
	s390xSVC            = 0x0a
	s390xNRSigreturn    = 119
	s390xNRRtSigreturn  = 173
	s390xSigFrameSize   = 160 // __SIGNAL_FRAMESIZE: the callee's save area
	s390xRtSigregsOff   = s390xSigFrameSize + 8 + 128 + 40
	s390xSigcontextSreg = s390xSigFrameSize + 8 // sigcontext.sregs
	// _sigregs: psw.mask, psw.addr, gprs[16], acrs[16] (32-bit),
	// fpregs {fpc, pad, fprs[16]}.
	s390xSigregsPC   = 8
	s390xSigregsGPRs = 16
	s390xSigregsFPRs = 16 + 16*8 + 16*4 + 8
)

// s390xSigreturn reports whether code, two bytes at a PC, is a sigreturn
// trampoline, and whether it is rt_sigreturn.
func s390xSigreturn(code []byte) (ok, rt bool) {
	if len(code) < 2 || code[0] != s390xSVC {
		return false, false
	}
	switch code[1] {
	case s390xNRSigreturn:
		return true, false
	case s390xNRRtSigreturn:
		return true, true
	}
	return false, false
}

// stepSignalS390X restores the registers an s390x signal interrupted from
// the _sigregs of the frame at SP, found as gdb finds them: for
// rt_sigreturn, in the ucontext after the save area, the return code and
// the siginfo; for sigreturn, through the sigcontext's pointer, which
// lies after the save area.
func (w *Context) stepSignalS390X(cur, next *arch.Regs, rt bool) error {
	sp := cur.SP()
	sregs := sp + s390xRtSigregsOff
	if !rt {
		p, err := w.mem.word(sp + s390xSigcontextSreg)
		if err != nil {
			return err
		}
		sregs = p
	}
	newFrame(cur, next)
	pc, err := w.mem.word(sregs + s390xSigregsPC)
	if err != nil {
		return err
	}
	next.Set(arch.S390XPC, pc)
	for r := arch.S390XR0; r <= arch.S390XR15; r++ {
		v, err := w.mem.word(sregs + s390xSigregsGPRs + 8*uint64(r))
		if err != nil {
			return err
		}
		next.Set(r, v)
	}
	for i := range 16 {
		if v, err := w.mem.word(sregs + s390xSigregsFPRs + 8*uint64(i)); err == nil {
			next.Set(arch.S390XFPR(i), v)
		}
	}
	w.cfa = sp + s390xSigFrameSize
	return nil
}
