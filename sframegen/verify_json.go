package sframegen

import (
	"encoding/json"

	"github.com/sframekit/sframekit/internal/hexaddr"
)

// The JSON form of a Report (sframe verify --json) writes addresses
// (func_start, func_end, pc, start, end) as strings "0x...", as the other
// JSON of sframekit does: readers that hold numbers as doubles (jq,
// JavaScript) would lose the low bits of 64-bit addresses. Counts are
// numbers. The field names are those of the struct tags.

// The fields below, at depth 0, take the place of the embedded struct's
// fields of the same JSON name.
type (
	plainDisagreement Disagreement
	jsonDisagreement  struct {
		plainDisagreement
		FuncStart hexaddr.Addr `json:"func_start"`
		FuncEnd   hexaddr.Addr `json:"func_end"`
		PC        hexaddr.Addr `json:"pc"`
	}
	plainLeftOut LeftOut
	jsonLeftOut  struct {
		plainLeftOut
		Start hexaddr.Addr `json:"start"`
		End   hexaddr.Addr `json:"end"`
	}
)

// MarshalJSON writes d with its addresses as "0x..." strings.
func (d Disagreement) MarshalJSON() ([]byte, error) {
	return json.Marshal(jsonDisagreement{plainDisagreement(d), hexaddr.Addr(d.FuncStart), hexaddr.Addr(d.FuncEnd), hexaddr.Addr(d.PC)})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (d *Disagreement) UnmarshalJSON(b []byte) error {
	var j jsonDisagreement
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*d = Disagreement(j.plainDisagreement)
	d.FuncStart, d.FuncEnd, d.PC = uint64(j.FuncStart), uint64(j.FuncEnd), uint64(j.PC)
	return nil
}

// MarshalJSON writes l with its addresses as "0x..." strings.
func (l LeftOut) MarshalJSON() ([]byte, error) {
	return json.Marshal(jsonLeftOut{plainLeftOut(l), hexaddr.Addr(l.Start), hexaddr.Addr(l.End)})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (l *LeftOut) UnmarshalJSON(b []byte) error {
	var j jsonLeftOut
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*l = LeftOut(j.plainLeftOut)
	l.Start, l.End = uint64(j.Start), uint64(j.End)
	return nil
}
