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
