package sframegen

import (
	"encoding/json"
	"testing"
)

// TestReportJSONAddresses checks that addresses, kernel ones included,
// are written as exact "0x..." strings that a reader of doubles keeps,
// and read back.
func TestReportJSONAddresses(t *testing.T) {
	rep := Report{Funcs: 1, PCs: 2,
		Disagreements: []Disagreement{{Func: "f", FuncStart: 0xffffffff81000001, FuncEnd: 0xffffffff81000040, PC: 0xffffffff81000003, What: "CFA", SFrame: "sp+8", CFI: "sp+16"}},
		LeftOut:       []LeftOut{{Func: "g", Start: 0xffffffff81000040, End: 0xffffffff81000080, NoRows: true}},
	}
	b, err := json.Marshal(&rep)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"funcs":1,"pcs":2,"disagreements":[{"func":"f","what":"CFA","sframe":"sp+8","cfi":"sp+16","func_start":"0xffffffff81000001","func_end":"0xffffffff81000040","pc":"0xffffffff81000003"}],"left_out":[{"func":"g","no_rows":true,"start":"0xffffffff81000040","end":"0xffffffff81000080"}],"cfi_errors":0}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Disagreements[0] != rep.Disagreements[0] || back.LeftOut[0] != rep.LeftOut[0] {
		t.Errorf("read back %+v", back)
	}
}
