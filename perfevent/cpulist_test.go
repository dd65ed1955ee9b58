package perfevent

import (
	"fmt"
	"testing"
)

func TestParseCPUList(t *testing.T) {
	for in, want := range map[string]string{
		"0":           "[0]",
		"0-3":         "[0 1 2 3]",
		"0-1,4,6-7":   "[0 1 4 6 7]",
		"":            "error",
		"3-1":         "error",
		"a":           "error",
		"0-99999999":  "error",
		"-1":          "error",
		"1,,2":        "error",
		"0-65535,0-1": "error",
	} {
		got, err := parseCPUList(in)
		s := fmt.Sprint(got)
		if err != nil {
			s = "error"
		}
		if s != want {
			t.Errorf("parseCPUList(%q) = %s, %v; want %s", in, s, err, want)
		}
	}
}
