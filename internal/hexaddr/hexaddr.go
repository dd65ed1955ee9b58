// Package hexaddr is the one form of an address in sframekit's JSON
// (sframe dump --json, sframe cfi --json, sframe verify --json): a string
// of "0x" and lower-case hexadecimal digits, so that readers holding
// numbers as doubles (jq, JavaScript) keep every bit of a 64-bit address.
// Packages dump and sframegen use it; it lives here so that neither
// imports the other for it.
package hexaddr

import (
	"fmt"
	"strconv"
)

// Addr is an address, written to JSON as a string "0x..." and read back
// from one.
type Addr uint64

// Format returns v as "0x" and lower-case hexadecimal digits, as Addr
// is written, for JSON written by hand. (Addr has no String method, so
// that fmt's verbs print it as the number it is.)
func Format(v uint64) string { return string(appendAddr(nil, v)) }

func appendAddr(b []byte, v uint64) []byte {
	return strconv.AppendUint(append(b, "0x"...), v, 16)
}

// MarshalText writes a as Format does.
func (a Addr) MarshalText() ([]byte, error) { return appendAddr(nil, uint64(a)), nil }

// UnmarshalText reads an address written by MarshalText ("0X" and
// upper-case digits accepted).
func (a *Addr) UnmarshalText(b []byte) error {
	s := string(b)
	if len(s) < 3 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X') {
		return fmt.Errorf("address %q is not 0x-prefixed hexadecimal", s)
	}
	v, err := strconv.ParseUint(s[2:], 16, 64)
	if err != nil {
		return fmt.Errorf("address %q: %w", s, err)
	}
	*a = Addr(v)
	return nil
}
