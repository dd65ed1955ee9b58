package bpfunwind

import (
	"fmt"
	"testing"

	"github.com/sframekit/sframekit/perfunwind"
)

// spans describes maps as start-end/pgoff.
func spans(maps []*perfunwind.Mapping) string {
	s := ""
	for _, m := range maps {
		s += fmt.Sprintf("%x-%x/%x ", m.Start, m.End, m.Pgoff)
	}
	return s
}

// TestMirror: a mapping cuts those it overlaps, as the kernel does; a
// FORK read after the child's own MMAP keeps it over the parent's copy;
// exec and exit empty the table.
func TestMirror(t *testing.T) {
	m := NewMirror()
	m.Set(1, []*perfunwind.Mapping{{Start: 0x1000, End: 0x5000, Exec: true}, {Start: 0x8000, End: 0x9000}})
	if got := spans(m.Mappings(1)); got != "1000-5000/0 " {
		t.Fatalf("set: %s (a data mapping kept?)", got)
	}
	m.Mmap(1, &perfunwind.Mapping{Start: 0x2000, End: 0x3000, Pgoff: 0x7000, Exec: true})
	if got, want := spans(m.Mappings(1)), "1000-2000/0 2000-3000/7000 3000-5000/2000 "; got != want {
		t.Errorf("mmap inside: %s, want %s", got, want)
	}
	m.Mmap(2, &perfunwind.Mapping{Start: 0x1800, End: 0x2800, Exec: true}) // the child's, read before its FORK
	m.Fork(2, 1)
	if got, want := spans(m.Mappings(2)), "1000-1800/0 1800-2800/0 2800-3000/7800 3000-5000/2000 "; got != want {
		t.Errorf("fork after the child's mmap: %s, want %s", got, want)
	}
	if got, want := spans(m.Mappings(1)), "1000-2000/0 2000-3000/7000 3000-5000/2000 "; got != want {
		t.Errorf("the parent changed: %s, want %s", got, want)
	}
	m.Exec(2)
	m.Exit(1)
	if m.Mappings(1) != nil || m.Mappings(2) != nil {
		t.Errorf("exec, exit: %s / %s", spans(m.Mappings(1)), spans(m.Mappings(2)))
	}
}
