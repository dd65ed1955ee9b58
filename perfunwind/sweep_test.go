package perfunwind

import (
	"os"
	"os/exec"
	"testing"
)

// TestSweep: a file stays while a process maps it, named and unwound
// from; once the last process that maps it has exited, Sweep forgets it
// (and its caches), and a new mapping of the same path opens it again.
func TestSweep(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSession(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := NewResolver(s)
	defer r.Close()
	use := func(pid uint32) *File {
		s.Comm(pid, pid, "test", true)
		s.Mmap(pid, pid, 0x400000, 0x100000, 0, exe, true, nil)
		var m *Mapping
		for _, mp := range s.procs[pid].sp.maps.All() {
			m = *mp
			break
		}
		m.module = s.module(m)
		r.Resolve(m, 0x400100)
		if m.File == nil || m.File.Path == "" {
			t.Fatalf("%s not opened: %+v", exe, m.File)
		}
		return m.File
	}
	f1 := use(1)
	use(2) // the same file, another process
	if n := s.Sweep(r); n != 0 {
		t.Errorf("Sweep forgot %d files that processes map", n)
	}
	s.Exit(1, 1)
	if n := s.Sweep(r); n != 0 {
		t.Errorf("Sweep forgot %d files that process 2 still maps", n)
	}
	s.Exit(2, 2)
	if n := s.Sweep(r); n != 1 {
		t.Errorf("Sweep forgot %d files once no process maps %s, want 1", n, exe)
	}
	if len(s.Files()) != 0 || len(s.cfis) != 0 || len(r.plts) != 0 {
		t.Errorf("after Sweep: %d files, %d CFI caches, %d PLT tables kept", len(s.Files()), len(s.cfis), len(r.plts))
	}
	if f1.r != nil {
		t.Error("the forgotten file is still open")
	}
	if f3 := use(3); f3 == f1 {
		t.Error("a new mapping of the path reuses the forgotten file")
	}
}

// TestSweepForgetsGone: a live session forgets a process that is gone
// from /proc though it never read its exit (the rings overflowed and
// the EXIT records were lost), at the second Sweep after it went (the
// first leaves time for its last records), with its threads and files.
// Before, it was known until its PID was reused.
func TestSweepForgetsGone(t *testing.T) {
	cmd := exec.Command("sleep", "100")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	pid := uint32(cmd.Process.Pid)
	s, err := NewSession(Options{Live: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := NewResolver(s)
	defer r.Close()
	if err := s.SeedProcess(int(pid)); err != nil {
		t.Fatal(err)
	}
	for _, mp := range s.procs[pid].sp.maps.All() {
		if m := *mp; m.Exec {
			m.module = s.module(m) // its file opened, as a walk opens it
		}
	}
	if !s.Known(pid) || len(s.Files()) == 0 {
		t.Fatalf("process %d not seeded: known %v, %d files", pid, s.Known(pid), len(s.Files()))
	}
	if n := s.Sweep(r); n != 0 || !s.Known(pid) {
		t.Fatalf("Sweep of a running process: %d files forgotten, known %v", n, s.Known(pid))
	}
	cmd.Process.Kill()
	cmd.Wait() // gone from /proc; no EXIT is given to the session
	s.Sweep(r)
	if !s.Known(pid) {
		t.Errorf("process %d forgotten at the first Sweep after it went: its last records may not have been read", pid)
	}
	s.Sweep(r)
	if s.Known(pid) || s.KnownThread(pid) || len(s.Files()) != 0 {
		t.Errorf("after two Sweeps: process %d known %v, its thread %v, %d files kept", pid, s.Known(pid), s.KnownThread(pid), len(s.Files()))
	}
}
