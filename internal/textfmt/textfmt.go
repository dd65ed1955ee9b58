// Package textfmt holds the number formatting of the binutils-style
// printers (package dump's objdump and readelf texts): they format
// thousands of lines and append into byte slices rather than go through
// fmt. It also holds the one quoting of untrusted names for printing
// (Printable).
package textfmt

import (
	"encoding/binary"
	"strconv"
	"unicode/utf8"
)

// AppendHex appends the low nbytes bytes of v (1 to 8) as 2*nbytes
// lower-case hexadecimal digits, zero-padded, like printf's "%0*x".
func AppendHex(b []byte, v uint64, nbytes int) []byte {
	if nbytes <= 0 || nbytes > 8 {
		nbytes = 8
	}
	// This runs once per printed row: eight digits at a time, in a word.
	switch nbytes {
	case 8:
		b = binary.BigEndian.AppendUint64(b, hex8(uint32(v>>32)))
		return binary.BigEndian.AppendUint64(b, hex8(uint32(v)))
	case 4:
		return binary.BigEndian.AppendUint64(b, hex8(uint32(v)))
	}
	var tmp [16]byte
	binary.BigEndian.PutUint64(tmp[:8], hex8(uint32(v>>32)))
	binary.BigEndian.PutUint64(tmp[8:], hex8(uint32(v)))
	return append(b, tmp[16-2*nbytes:]...)
}

// hex8 returns the eight hexadecimal digits of x as the bytes of a word,
// the most significant digit in the most significant byte.
func hex8(x uint32) uint64 {
	// Spread the nibbles, one a byte.
	v := uint64(x)
	v = (v | v<<16) & 0x0000ffff0000ffff
	v = (v | v<<8) & 0x00ff00ff00ff00ff
	v = (v | v<<4) & 0x0f0f0f0f0f0f0f0f
	// A byte holding 10 to 15 gets 'a'-10, the others '0'.
	alpha := ((v + 0x0606060606060606) >> 4) & 0x0101010101010101
	return v + 0x3030303030303030 + alpha*('a'-'0'-10)
}

// AppendSigned appends v in decimal with its sign always written ("+8",
// "-16"), as readelf prints offsets. Offsets are mostly small, so one- and
// two-digit values skip strconv.
func AppendSigned(b []byte, v int64) []byte {
	sign := byte('+')
	u := uint64(v)
	if v < 0 {
		sign, u = '-', -u
	}
	switch {
	case u < 10:
		return append(b, sign, byte('0'+u))
	case u < 100:
		return append(b, sign, byte('0'+u/10), byte('0'+u%10))
	}
	b = append(b, sign)
	return strconv.AppendUint(b, u, 10)
}

const spaces = "                                                                "

// PadTo appends spaces to b until what follows start is width bytes long.
func PadTo(b []byte, start, width int) []byte {
	if n := width - (len(b) - start); n > 0 {
		for n > len(spaces) {
			b = append(b, spaces...)
			n -= len(spaces)
		}
		b = append(b, spaces[:n]...)
	}
	return b
}

// Printable returns s with every byte that could drive a terminal or
// forge a line written as \xNN: C0 control characters (newline and tab
// included), DEL, the C1 controls (U+0080 to U+009F, two bytes each)
// and bytes that are not UTF-8 (a lone 0x9b is a CSI to some terminals).
// A string without them is returned as it is, without allocating.
// Names that come from a recording, a core, a process or a file's
// symbols (process, file and function names, and errors quoting them)
// are printed through it or AppendPrintable: the one quoting of the
// tree. A backslash is left as it is, so that ordinary names print as
// perf prints them.
func Printable(s string) string {
	if printable(s) {
		return s
	}
	return string(AppendPrintable(make([]byte, 0, len(s)+16), s))
}

// AppendPrintable appends s to b as Printable returns it.
func AppendPrintable(b []byte, s string) []byte {
	if printable(s) {
		return append(b, s...)
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f {
			b = append(b, c)
			i++
			continue
		}
		n := 1
		if c >= 0x80 {
			var r rune
			r, n = utf8.DecodeRuneInString(s[i:])
			if !(r == utf8.RuneError && n == 1) && (r < 0x80 || r > 0x9f) {
				b = append(b, s[i:i+n]...)
				i += n
				continue
			}
		}
		for _, c := range []byte(s[i : i+n]) {
			b = append(b, '\\', 'x', hexDigits[c>>4], hexDigits[c&15])
		}
		i += n
	}
	return b
}

const hexDigits = "0123456789abcdef"

// printable reports whether s has nothing Printable escapes.
func printable(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f {
			i++
			continue
		}
		if c < 0x80 {
			return false
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 || r >= 0x80 && r <= 0x9f {
			return false
		}
		i += n
	}
	return true
}
