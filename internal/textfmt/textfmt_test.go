package textfmt

import (
	"fmt"
	"testing"
)

func TestAppendHexMatchesPrintf(t *testing.T) {
	for _, v := range []uint64{0, 1, 0xab, 0x1234, 0xdeadbeef, 0x7fffffffffffffff, ^uint64(0)} {
		for n := 1; n <= 8; n++ {
			want := fmt.Sprintf("%0*x", 2*n, v&(^uint64(0)>>(64-8*n)))
			if got := string(AppendHex([]byte("x"), v, n)); got != "x"+want {
				t.Errorf("AppendHex(%#x, %d) = %q, want %q", v, n, got, "x"+want)
			}
		}
	}
}

func TestAppendSignedMatchesPrintf(t *testing.T) {
	for _, v := range []int64{0, 1, -1, 9, -9, 10, -10, 99, -99, 100, -100, 12345, -65536, 1 << 62, -1 << 63} {
		want := fmt.Sprintf("x%+d", v)
		if got := string(AppendSigned([]byte("x"), v)); got != want {
			t.Errorf("AppendSigned(%d) = %q, want %q", v, got, want)
		}
	}
}

func TestPadTo(t *testing.T) {
	for _, c := range []struct {
		in           string
		start, width int
	}{{"ab", 0, 5}, {"abcdef", 0, 5}, {"xxab", 2, 3}, {"", 0, 0}, {"a", 0, 200}} {
		got := string(PadTo([]byte(c.in), c.start, c.width))
		want := c.in
		for len(want)-c.start < c.width {
			want += " "
		}
		if got != want {
			t.Errorf("PadTo(%q, %d, %d) = %q, want %q", c.in, c.start, c.width, got, want)
		}
	}
}
