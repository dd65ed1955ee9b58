package perfunwind

import (
	"github.com/sframekit/sframekit/arch"
	"testing"
)

// TestMapped: what a live profiler asks before unwinding a sample, as
// the process's records describe it: a mapping, inherited by a child,
// gone after exec and after the process's last thread exits.
func TestMapped(t *testing.T) {
	s, err := NewSession(Options{Arch: arch.AMD64})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Mmap(10, 10, 0x1000, 0x1000, 0, "//anon", false, nil)
	s.Fork(20, 10, 20, 10)
	for _, c := range []struct {
		pid  uint32
		addr uint64
		want bool
	}{
		{10, 0x1000, true}, {10, 0x1fff, true}, {10, 0x2000, false}, {10, 0xfff, false},
		{11, 0x1800, false}, // unknown process
		{20, 0x1800, true},  // inherited
	} {
		if got := s.Mapped(c.pid, c.addr); got != c.want {
			t.Errorf("Mapped(%d, %#x) = %v", c.pid, c.addr, got)
		}
	}
	s.Comm(20, 20, "new", true)
	if s.Mapped(20, 0x1800) || !s.Mapped(10, 0x1800) {
		t.Error("exec in the child: its mappings are gone, not the parent's")
	}
	s.Exit(10, 10)
	if s.Mapped(10, 0x1800) {
		t.Error("mapped after the process's last thread exited")
	}
}
