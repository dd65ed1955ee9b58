package sframegen

import (
	"bytes"
	"debug/elf"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/internal/corpus"
	"github.com/sframekit/sframekit/sframe"
)

// TestReasonText converts a corpus object to v2, which leaves out its
// DRAP function and the one keeping its RA in a register, and checks
// that Stats groups them by their Reason and prints the same text as
// before reasons were an enum (the output of sframe gen --stats).
func TestReasonText(t *testing.T) {
	f, err := elf.Open(filepath.Join(corpus.Dir(t), "x86_64/v3/edge-x86_64.o"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := FromCFI(f, Options{Version: sframe.Version2})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := r.Stats.Write(&b); err != nil {
		t.Fatal(err)
	}
	for _, k := range r.Skipped {
		b.WriteString("  left out " + k.String() + "\n")
	}
	want := `left out:           2 functions, 51 bytes
       1 function         46 bytes  CFA based on a register other than SP/FP (needs a v3 flexible FDE; AMD64 and s390x only)
       1 function          5 bytes  return address in a register or unusual slot (needs a v3 flexible FDE; AMD64 and s390x only)
  left out [0x52,0x80) FDE@0xd8: CFA based on a register other than SP/FP (needs a v3 flexible FDE; AMD64 and s390x only) (CFA = r10+0 at 0x57)
  left out [0x80,0x85) FDE@0x104: return address in a register or unusual slot (needs a v3 flexible FDE; AMD64 and s390x only) (RA in r11 at 0x82)
`
	if got := b.String(); !strings.HasSuffix(got, want) {
		t.Errorf("stats:\n%s\nwant them to end with:\n%s", got, want)
	}
	if len(r.Stats.Reasons) != 2 || r.Stats.Reasons[0].Reason != ReasonCFAReg || r.Stats.Reasons[1].Reason != ReasonRAFlex {
		t.Errorf("reasons %+v, want ReasonCFAReg then ReasonRAFlex", r.Stats.Reasons)
	}
	// Every reason has its own text.
	seen := map[string]Reason{}
	for k := ReasonCFAReg; k <= ReasonDuplicate; k++ {
		s := k.String()
		if strings.HasPrefix(s, "Reason(") || seen[s] != 0 {
			t.Errorf("reason %d: text %q (also %d)", k, s, seen[s])
		}
		seen[s] = k
	}
	if s := Reason(200).String(); s != "Reason(200)" {
		t.Errorf("unknown reason prints %q", s)
	}
}

// TestStatsWriteSingular: counts of one are written in the singular,
// others in the plural.
func TestStatsWriteSingular(t *testing.T) {
	s := Stats{CFIFuncs: 1, CFIBytes: 1, Funcs: 1, Rows: 1, CoveredBytes: 1, SkippedFuncs: 1, SkippedBytes: 2,
		SignalNoRows: 1, Reasons: []ReasonCount{{Reason: ReasonCFAReg, Funcs: 1, Bytes: 1}, {Reason: ReasonRAFlex, Funcs: 2, Bytes: 0}}}
	var b strings.Builder
	if err := s.Write(&b); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, want := range []string{"(1 byte of code)", "1 written, 1 row ", "covered:            1 byte =", "left out:           1 function, 2 bytes",
		"     1 function          1 byte   " + ReasonCFAReg.String() + "\n", "     2 functions         0 bytes  " + ReasonRAFlex.String() + "\n", "1 signal frame written"} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in\n%s", want, got)
		}
	}
}
