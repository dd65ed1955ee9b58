package hexaddr

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	for _, c := range []struct {
		a    Addr
		want string
	}{{0, `"0x0"`}, {0x1020, `"0x1020"`}, {0xffffffffffffffff, `"0xffffffffffffffff"`}} {
		b, err := json.Marshal(c.a)
		if err != nil || string(b) != c.want {
			t.Errorf("Marshal(%d) = %s, %v; want %s", uint64(c.a), b, err, c.want)
		}
		if s := Format(uint64(c.a)); `"`+s+`"` != c.want {
			t.Errorf("Format(%d) = %s, want %s", uint64(c.a), s, c.want)
		}
		var back Addr
		if err := json.Unmarshal(b, &back); err != nil || back != c.a {
			t.Errorf("Unmarshal(%s) = %#x, %v", b, uint64(back), err)
		}
	}
	var a Addr
	if err := json.Unmarshal([]byte(`"0XABC"`), &a); err != nil || a != 0xabc {
		t.Errorf(`Unmarshal("0XABC") = %#x, %v`, uint64(a), err)
	}
	for _, bad := range []string{`"4096"`, `"0x"`, `"0xg"`, `"0x1ffffffffffffffff"`, `4096`} {
		err := json.Unmarshal([]byte(bad), &a)
		if err == nil {
			t.Errorf("Unmarshal(%s): no error", bad)
		} else if bad[0] == '"' && !strings.Contains(err.Error(), "address "+bad) {
			t.Errorf("Unmarshal(%s): %v, want the address named", bad, err)
		}
	}
}
