package sframegen

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// The JSON form of a Report (sframe verify --json) writes addresses
// (func_start, func_end, pc, start, end) as strings "0x...", as the other
// JSON of sframekit does: readers that hold numbers as doubles (jq,
// JavaScript) would lose the low bits of 64-bit addresses. Counts are
// numbers. The field names are those of the struct tags.

// hexAddr is an address in JSON.
type hexAddr uint64

func (a hexAddr) MarshalText() ([]byte, error) {
	return strconv.AppendUint([]byte("0x"), uint64(a), 16), nil
}

func (a *hexAddr) UnmarshalText(b []byte) error {
	s := string(b)
	if len(s) < 3 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X') {
		return fmt.Errorf("address %q is not 0x-prefixed hexadecimal", s)
	}
	v, err := strconv.ParseUint(s[2:], 16, 64)
	*a = hexAddr(v)
	return err
}

// The fields below, at depth 0, take the place of the embedded struct's
// fields of the same JSON name.
type (
	plainDisagreement Disagreement
	jsonDisagreement  struct {
		plainDisagreement
		FuncStart hexAddr `json:"func_start"`
		FuncEnd   hexAddr `json:"func_end"`
		PC        hexAddr `json:"pc"`
	}
	plainLeftOut LeftOut
	jsonLeftOut  struct {
		plainLeftOut
		Start hexAddr `json:"start"`
		End   hexAddr `json:"end"`
	}
)

// MarshalJSON writes d with its addresses as "0x..." strings.
func (d Disagreement) MarshalJSON() ([]byte, error) {
	return json.Marshal(jsonDisagreement{plainDisagreement(d), hexAddr(d.FuncStart), hexAddr(d.FuncEnd), hexAddr(d.PC)})
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
	return json.Marshal(jsonLeftOut{plainLeftOut(l), hexAddr(l.Start), hexAddr(l.End)})
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
