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

// stepSignal restores the interrupted registers from the signal frame.
func (w *Context) stepSignal(cur, next *arch.Regs) error {
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
		if _, err := w.mem.m.ReadAt(w.code[:2], int64(cur.PC())); err != nil {
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
