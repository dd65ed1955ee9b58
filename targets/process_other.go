//go:build !linux

package targets

import (
	"errors"

	"github.com/sframekit/sframekit/arch"
)

// Process is a live process stopped with ptrace; only Linux supports it.
type Process struct{}

// AttachProcess is only supported on Linux.
func AttachProcess(pid int) (*Process, error) {
	return nil, errors.New("attaching to a process is only supported on Linux")
}

// Arch returns arch.Unknown.
func (p *Process) Arch() arch.Arch { return arch.Unknown }

// PID returns 0.
func (p *Process) PID() int { return 0 }

// Threads returns nil.
func (p *Process) Threads() []arch.Thread { return nil }

// Modules returns nil.
func (p *Process) Modules() []arch.Module { return nil }

// Memory returns nil.
func (p *Process) Memory() arch.Memory { return nil }

// Close does nothing.
func (p *Process) Close() error { return nil }

// AttachProcessWith is only supported on Linux.
func AttachProcessWith(pid int, o AttachOptions) (*Process, error) { return AttachProcess(pid) }
