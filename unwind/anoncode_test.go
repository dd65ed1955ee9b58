package unwind

import (
	"fmt"
	"testing"

	"github.com/sframekit/sframekit/arch"
)

// TestAppendAnonCode: executable memory of no file becomes a module
// unless a module overlaps it, one spanning others included.
func TestAppendAnonCode(t *testing.T) {
	mods := []*Module{{Name: "b", Start: 0x5000, End: 0x6000}, {Name: "wide", Start: 0x1000, End: 0x4000}, {Name: "a", Start: 0x2000, End: 0x2100}}
	code := []arch.Mapping{
		{Start: 0x0, End: 0x1000},                        // below every module
		{Start: 0x3000, End: 0x3100},                     // inside wide, past a
		{Start: 0x4000, End: 0x5000, Path: "[anon:jit]"}, // between wide and b
		{Start: 0x5800, End: 0x6800},                     // over b's end
		{Start: 0x7000, End: 0x8000},                     // above all
	}
	var got []string
	for _, m := range appendAnonCode(mods, code)[len(mods):] {
		got = append(got, fmt.Sprintf("%s@%x", m.Name, m.Start))
	}
	want := []string{"[anon]@0", "[anon:jit]@4000", "[anon]@7000"}
	if len(got) != len(want) {
		t.Fatalf("added %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("added %q, want %q", got, want)
		}
	}
}
