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

// TestPrintable checks that what could drive a terminal or forge a line
// is escaped and everything else, UTF-8 included, is kept.
func TestPrintable(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"/usr/lib/libc.so.6", "/usr/lib/libc.so.6"},
		{"std::vector<int>::at(unsigned long) const", "std::vector<int>::at(unsigned long) const"},
		{"naïve_π", "naïve_π"},
		{`back\slash`, `back\slash`},
		{"\x1b[2J\x1b]0;pwned\x07", `\x1b[2J\x1b]0;pwned\x07`},
		{"a\nb\tc\rd\x7f", `a\x0ab\x09c\x0dd\x7f`},
		{"csi\u009b31m", `csi\xc2\x9b31m`},
		{"lone\x9b31m", `lone\x9b31m`},
		{"cut\xe2\x82", `cut\xe2\x82`},
	} {
		if got := Printable(c.in); got != c.want {
			t.Errorf("Printable(%q) = %q, want %q", c.in, got, c.want)
		}
		if got := string(AppendPrintable([]byte("x"), c.in)); got != "x"+c.want {
			t.Errorf("AppendPrintable(%q) = %q", c.in, got)
		}
	}
	clean := "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"
	if n := testing.AllocsPerRun(10, func() { _ = Printable(clean) }); n != 0 {
		t.Errorf("Printable of a clean name allocates %v times", n)
	}
}
