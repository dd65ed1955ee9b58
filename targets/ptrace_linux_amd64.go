//go:build linux && amd64

package targets

import (
	"github.com/sframekit/sframekit/arch"
	"golang.org/x/sys/unix"
)

// hostArch is the architecture of processes this build can attach to.
const hostArch = arch.AMD64

// getRegs reads a stopped tracee's registers with PTRACE_GETREGS.
func getRegs(tid int) (arch.Regs, error) {
	var u unix.PtraceRegs
	if err := unix.PtraceGetRegs(tid, &u); err != nil {
		return arch.Regs{}, err
	}
	w := [27]uint64{u.R15, u.R14, u.R13, u.R12, u.Rbp, u.Rbx, u.R11, u.R10, u.R9, u.R8,
		u.Rax, u.Rcx, u.Rdx, u.Rsi, u.Rdi, u.Orig_rax, u.Rip, u.Cs, u.Eflags, u.Rsp, u.Ss,
		u.Fs_base, u.Gs_base, u.Ds, u.Es, u.Fs, u.Gs}
	return amd64FromUser(&w), nil
}
