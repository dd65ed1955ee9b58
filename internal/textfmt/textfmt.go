// Package textfmt holds the number formatting that the binutils-style
// printers (dump, cfi, unwind) share: they format thousands of lines and
// append into byte slices rather than go through fmt.
package textfmt

const hexDigits = "0123456789abcdef"

// AppendHex appends the low nbytes bytes of v (1 to 8) as 2*nbytes
// lower-case hexadecimal digits, zero-padded, like printf's "%0*x".
func AppendHex(b []byte, v uint64, nbytes int) []byte {
	if nbytes <= 0 || nbytes > 8 {
		nbytes = 8
	}
	var tmp [16]byte
	for i := 15; i >= 0; i-- {
		tmp[i] = hexDigits[v&0xf]
		v >>= 4
	}
	return append(b, tmp[16-2*nbytes:]...)
}
