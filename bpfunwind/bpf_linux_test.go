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
// the deepest walk and with the kernel's frames.
func TestVerifier(t *testing.T) {
	for _, o := range []Options{{}, {MaxDepth: 5, Kernel: true}} {
		u := loadOrSkip(t, o)
		if u.Program() <= 0 {
			t.Fatalf("program fd %d", u.Program())
		}
	}
}
