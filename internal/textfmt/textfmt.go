// Package textfmt holds the number formatting of the binutils-style
// printers (package dump's objdump and readelf texts): they format
// thousands of lines and append into byte slices rather than go through
// fmt.
package textfmt

import (
	"encoding/binary"
	"strconv"
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
