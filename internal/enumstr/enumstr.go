// Package enumstr names the values of the tree's enumerations from a
// table, the one String of them all: a value past the table, or one the
// table leaves unnamed, prints as its type and number ("RuleKind(9)"),
// as fmt would print it without a String method.
package enumstr

import "strconv"

// Name returns names[v], or typ(v) when names has no name for v.
func Name[T ~uint8 | ~uint16 | ~uint32](names []string, v T, typ string) string {
	if uint64(v) < uint64(len(names)) && names[v] != "" {
		return names[v]
	}
	return typ + "(" + strconv.FormatUint(uint64(v), 10) + ")"
}
