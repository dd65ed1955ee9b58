//go:build linux && arm64

package targets

import (
	"debug/elf"

	"github.com/sframekit/sframekit/arch"
	"golang.org/x/sys/unix"
)

// hostArch is the architecture of processes this build can attach to.
const hostArch = arch.ARM64

// getRegs reads a stopped tracee's registers with PTRACE_GETREGSET
// NT_PRSTATUS.
func getRegs(tid int) (arch.Regs, error) {
	var u unix.PtraceRegsArm64
	if err := unix.PtraceGetRegSetArm64(tid, int(elf.NT_PRSTATUS), &u); err != nil {
		return arch.Regs{}, err
	}
	var w [34]uint64
	copy(w[:31], u.Regs[:])
	w[31], w[32], w[33] = u.Sp, u.Pc, u.Pstate
	return arm64FromUser(&w), nil
}
