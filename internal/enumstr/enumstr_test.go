package enumstr

import "testing"

type kind uint8

// TestName checks names from the table, a gap in it and values past it,
// printed as fmt prints the number of a type without a String method.
func TestName(t *testing.T) {
	names := []string{0: "zero", 2: "two"}
	for _, c := range []struct {
		v    kind
		want string
	}{
		{0, "zero"}, {2, "two"}, {1, "kind(1)"}, {3, "kind(3)"}, {255, "kind(255)"},
	} {
		if got := Name(names, c.v, "kind"); got != c.want {
			t.Errorf("Name(%d) = %q, want %q", c.v, got, c.want)
		}
	}
}
