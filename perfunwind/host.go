package perfunwind

import (
	"debug/elf"
	"runtime"
)

// hostMachine returns the ELF machine of this program's architecture.
func hostMachine() elf.Machine {
	switch runtime.GOARCH {
	case "amd64":
		return elf.EM_X86_64
	case "arm64":
		return elf.EM_AARCH64
	}
	return elf.EM_NONE
}
