//go:build linux && amd64

package bpfunwind

import (
	"errors"
	"os"
	"testing"
)

// loadOrSkip loads the walker, or skips the test where BPF is refused
// (never under CI, which runs as root).
func loadOrSkip(t *testing.T, opts Options) *Unwinder {
	t.Helper()
	u, err := Load(opts)
	if err != nil {
		if errors.Is(err, ErrPermission) && os.Getenv("CI") == "" {
			t.Skipf("BPF refused here: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	return u
}

// TestVerifier loads the program: the kernel's verifier accepts it, at
// the deepest walk, and with the kernel's frames and a copy per event.
func TestVerifier(t *testing.T) {
	for _, o := range []Options{{}, {MaxDepth: 5, Kernel: true, Fallback: true, Events: 2}} {
		u := loadOrSkip(t, o)
		if fds := u.Programs(); len(fds) != max(o.Events, 1) || fds[0] <= 0 || fds[len(fds)-1] <= 0 {
			t.Fatalf("programs %v for %d events", fds, o.Events)
		}
	}
}
