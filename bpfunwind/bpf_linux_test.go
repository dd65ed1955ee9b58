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

// TestRowsAllocator: ranges of the rows map are taken first fit and
// given back merged with their free neighbours, so that evicted files'
// rows serve new ones.
func TestRowsAllocator(t *testing.T) {
	u := &Unwinder{free: []span{{0, 100}}}
	a, _ := u.allocRows(30)
	b, _ := u.allocRows(30)
	c, _ := u.allocRows(30)
	if _, ok := u.allocRows(20); ok || a != 0 || b != 30 || c != 60 {
		t.Fatalf("allocated %d %d %d, free %v", a, b, c, u.free)
	}
	u.freeRows(span{a, 30})
	u.freeRows(span{c, 30})
	if d, ok := u.allocRows(35); !ok || d != 60 {
		t.Errorf("35 rows at %d (%v), want 60; free %v", d, ok, u.free)
	}
	u.freeRows(span{60, 35})
	u.freeRows(span{b, 30})
	if len(u.free) != 1 || u.free[0] != (span{0, 100}) {
		t.Errorf("all freed: %v, want one range of 100", u.free)
	}
}
