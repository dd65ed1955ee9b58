package symbolize

import (
	"os"
	"testing"
)

// TestRetain: Retain releases the objects it is told to, keeps the
// others, and a released object is loaded again when looked up.
func TestRetain(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	s := New()
	defer s.Close()
	if _, ok := s.LookupFunc(exe, 0); ok {
		t.Log("address 0 has a name")
	}
	s.Retain(func(name string) bool { return true })
	if len(s.mods) != 1 {
		t.Fatalf("%d objects kept, want 1", len(s.mods))
	}
	s.Retain(func(name string) bool { return name != exe })
	if len(s.mods) != 0 {
		t.Fatalf("%d objects kept after releasing %s", len(s.mods), exe)
	}
	if err := s.Err(exe); err != nil {
		t.Fatal(err)
	}
	s.LookupFunc(exe, 0)
	if len(s.mods) != 1 || s.Err(exe) != nil {
		t.Errorf("%s not loaded again: %d objects, %v", exe, len(s.mods), s.Err(exe))
	}
}
