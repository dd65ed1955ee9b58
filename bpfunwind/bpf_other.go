//go:build !(linux && amd64)

package bpfunwind

import (
	"errors"

	"github.com/sframekit/sframekit/perfunwind"
)

// Supported reports whether this build has the BPF walker (x86-64 Linux).
const Supported = false

// Unwinder is the BPF walker, which this build lacks.
type Unwinder struct {
	// Tables counts what the loaded tables hold.
	Tables TableStats
}

// ErrPermission says the kernel refused BPF for want of privilege.
var ErrPermission = errors.New("BPF needs CAP_BPF and CAP_PERFMON (or root)")

var errUnsupported = errors.New("bpf unwinder: x86-64 Linux only")

// Load fails: no walker in this build.
func Load(Options) (*Unwinder, error) { return nil, errUnsupported }

// Programs returns nothing.
func (u *Unwinder) Programs() []int { return nil }

// StackFD returns -1.
func (u *Unwinder) StackFD() int { return -1 }

// ReadStacks does nothing.
func (u *Unwinder) ReadStacks(func([]byte)) {}

// SyncProcess fails.
func (u *Unwinder) SyncProcess(uint32, []*perfunwind.Mapping) error { return errUnsupported }

// DropProcess does nothing.
func (u *Unwinder) DropProcess(uint32) {}

// Counters returns nothing.
func (u *Unwinder) Counters() Counters { return Counters{} }

// WakeFD returns -1.
func (u *Unwinder) WakeFD() int { return -1 }

// Woken does nothing.
func (u *Unwinder) Woken() {}

// Close does nothing.
func (u *Unwinder) Close() error { return nil }
