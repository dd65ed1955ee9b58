//go:build linux && !amd64 && !arm64

package targets

import (
	"errors"

	"github.com/sframekit/sframekit/arch"
)

// hostArch is the architecture of processes this build can attach to.
const hostArch = arch.Unknown

// getRegs is not implemented on this architecture.
func getRegs(tid int) (arch.Regs, error) {
	return arch.Regs{}, errors.New("reading registers is not supported on this architecture")
}
