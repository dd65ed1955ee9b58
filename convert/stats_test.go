package convert

import (
	"strings"
	"testing"
)

// TestStatsWriteSingular: counts of one are written in the singular,
// others in the plural.
func TestStatsWriteSingular(t *testing.T) {
	s := Stats{CFIFuncs: 1, CFIBytes: 1, Funcs: 1, Rows: 1, CoveredBytes: 1, SkippedFuncs: 1, SkippedBytes: 2,
		SignalNoRows: 1, Reasons: []ReasonCount{{Reason: "why", Funcs: 1, Bytes: 1}, {Reason: "why not", Funcs: 2, Bytes: 0}}}
	var b strings.Builder
	if err := s.Write(&b); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, want := range []string{"(1 byte of code)", "1 written, 1 row ", "covered:            1 byte =", "left out:           1 function, 2 bytes",
		"     1 function          1 byte   why\n", "     2 functions         0 bytes  why not\n", "1 signal frame written"} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in\n%s", want, got)
		}
	}
}
