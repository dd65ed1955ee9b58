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

// TestStackExec: every thread of a process carries the program its last
// exec named (Stack.Exec), whatever the threads' names: the thread that
// executed, the threads started and renamed after it, the threads of a
// child forked after it; none before any exec.
func TestStackExec(t *testing.T) {
	s, err := NewSession(Options{Arch: arch.AMD64})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	exec := func(pid, tid uint32) string {
		var st Stack
		s.Unwind(&Sample{Pid: pid, Tid: tid}, &st)
		return st.Exec
	}
	s.Comm(10, 10, "sh", false) // running when the recording began
	s.Fork(10, 10, 11, 10)
	if got := exec(10, 11); got != "" {
		t.Errorf("before any exec: Exec %q, want none", got)
	}
	s.Comm(10, 10, "server", true)
	s.Fork(10, 10, 12, 10)
	s.Comm(10, 12, "worker", false)
	s.Fork(20, 10, 20, 12)
	s.Fork(30, 40, 30, 40) // a child of a process the recording never saw
	for _, c := range []struct {
		pid, tid uint32
		want     string
	}{{10, 10, "server"}, {10, 12, "server"}, {20, 20, "server"}, {30, 30, ""}} {
		if got := exec(c.pid, c.tid); got != c.want {
			t.Errorf("thread %d of process %d: Exec %q, want %q", c.tid, c.pid, got, c.want)
		}
		if got := s.Exec(c.pid); got != c.want {
			t.Errorf("Session.Exec(%d) = %q, want %q", c.pid, got, c.want)
		}
	}
	s.Comm(20, 20, "child", true)
	if got, parent := exec(20, 20), exec(10, 12); got != "child" || parent != "server" {
		t.Errorf("exec in the child: its Exec %q, its parent's %q; want child, server", got, parent)
	}
}
