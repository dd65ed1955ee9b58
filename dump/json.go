package dump

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/internal/hexaddr"
	"github.com/sframekit/sframekit/sframe"
)

// The JSON form of a dump. Field names are stable. Addresses are
// strings "0x..." (Addr), since readers that hold numbers as doubles
// (jq, JavaScript) lose the low bits of 64-bit addresses such as the
// kernel's; counts, sizes, indices and offsets are numbers, offsets
// signed.
//
//	{"file": "a.out", "format": "elf64-x86-64", "section": ".sframe",
//	 "header": {..., "address": "0x2168"}, "functions": [{"index": 0,
//	   "start": "0x1020", "size": 16, "pc_type": "inc",
//	   "fde_type": "default", "fre_type": "addr1",
//	   "rows": [{"start": "0x1020", "cfa": {"kind": "value",
//	     "base": "sp", "offset": 16}, "ra": {...}, "fp": {...}}]}]}

// Addr is an address, written to JSON as a string "0x..." and read back
// from one: the form of every address in sframekit's JSON (package
// internal/hexaddr, which sframe verify --json shares).
type Addr = hexaddr.Addr

// JSONFile is the JSON form of one file's SFrame section.
type JSONFile struct {
	File      string         `json:"file"`
	Format    string         `json:"format"`
	Section   string         `json:"section"`
	Header    JSONHeader     `json:"header"`
	Functions []JSONFunction `json:"functions"`
}

// JSONHeader is the JSON form of the section header.
type JSONHeader struct {
	Version          int      `json:"version"`
	Flags            []string `json:"flags"`
	ABI              string   `json:"abi"`
	BigEndian        bool     `json:"big_endian"`
	CFAFixedFPOffset *int     `json:"cfa_fixed_fp_offset,omitempty"`
	CFAFixedRAOffset *int     `json:"cfa_fixed_ra_offset,omitempty"`
	AuxHeaderLen     int      `json:"aux_header_len"`
	NumFDEs          uint32   `json:"num_fdes"`
	NumFREs          uint32   `json:"num_fres"`
	Address          Addr     `json:"address"`
}

// JSONFunction is the JSON form of one function and its rows.
type JSONFunction struct {
	Index   int       `json:"index"`
	Start   Addr      `json:"start"`
	Size    uint32    `json:"size"`
	PCType  string    `json:"pc_type"`            // "inc" or "mask"
	FDEType string    `json:"fde_type"`           // "default" or "flex"
	FREType string    `json:"fre_type"`           // "addr1", "addr2", "addr4"
	RepSize int       `json:"rep_size,omitempty"` // PC-mask block size
	Signal  bool      `json:"signal,omitempty"`
	PAuthB  bool      `json:"pauth_key_b,omitempty"`
	Rows    []JSONRow `json:"rows"`
}

// JSONRow is one FRE. Start is an address for PC-increment functions and
// an offset in the repeated block for PC-mask functions (a string in
// both cases, so that the field has one type).
type JSONRow struct {
	Start       Addr      `json:"start"`
	RAUndefined bool      `json:"ra_undefined,omitempty"`
	CFA         *JSONRule `json:"cfa,omitempty"`
	RA          *JSONRule `json:"ra,omitempty"`
	FP          *JSONRule `json:"fp,omitempty"`
	RASigned    bool      `json:"ra_signed,omitempty"`
}

// JSONRule is a recovery rule. Kind is "unspecified", "not-saved",
// "value" (base + offset) or "deref" (*(base + offset)); Base is "cfa",
// "sp", "fp" or "rN" (DWARF register N).
type JSONRule struct {
	Kind   string `json:"kind"`
	Base   string `json:"base,omitempty"`
	Offset int64  `json:"offset"`
	Fixed  bool   `json:"fixed,omitempty"`
	// Padding marks a fixed RA that the row spells as a padding word
	// (objdump's "U" in flexible AMD64 rows).
	Padding bool `json:"padding,omitempty"`
}

// SFrameJSON converts a loaded section to its JSON form. Like
// WriteSFrameText, it stops with an error at a row it cannot decode or
// past the header's FRE count, returning what it built so far.
func SFrameJSON(in *Input) (*JSONFile, error) {
	s := in.SFrame
	sh := s.Header()
	out := &JSONFile{File: in.Path, Format: in.Format, Section: in.Section, Functions: []JSONFunction{}}
	h := &out.Header
	h.Version = int(sh.Version)
	h.Flags = []string{}
	for _, b := range []sframe.Flags{sframe.FlagFDESorted, sframe.FlagFramePointer, sframe.FlagFuncStartPCRel, 8, 16, 32, 64, 128} {
		if sh.Flags&b != 0 {
			h.Flags = append(h.Flags, b.String())
		}
	}
	h.ABI = sh.ABI.String()
	h.BigEndian = s.BigEndian()
	if sh.HasFixedFP() {
		v := int(sh.CFAFixedFPOffset)
		h.CFAFixedFPOffset = &v
	}
	if sh.HasFixedRA() {
		v := int(sh.CFAFixedRAOffset)
		h.CFAFixedRAOffset = &v
	}
	h.AuxHeaderLen = int(sh.AuxHdrLen)
	h.NumFDEs, h.NumFREs, h.Address = sh.NumFDEs, sh.NumFREs, Addr(s.Addr())
	var rows uint64
	for i := 0; i < s.NumFuncs(); i++ {
		f, err := s.Func(i)
		if err != nil {
			return out, err
		}
		jf := JSONFunction{Index: i, Start: Addr(f.Start), Size: f.Size, PCType: "inc", FDEType: "default",
			RepSize: int(f.RepSize), Signal: f.Signal(), PAuthB: sh.ABI.Arch() == arch.ARM64 && f.PAuthKeyB(), Rows: []JSONRow{}}
		if f.PCType() == sframe.PCMask {
			jf.PCType = "mask"
		}
		if f.FDEType() == sframe.FDEFlex {
			jf.FDEType = "flex"
		}
		jf.FREType = "addr" + strconv.Itoa(f.FREType().Size())
		it := s.FREs(&f)
		for it.Next() {
			e := it.FRE()
			if err := tooManyRows(s, &rows, i); err != nil {
				return out, err
			}
			r, err := s.Rules(&f, e)
			if err != nil {
				return out, err
			}
			row := JSONRow{Start: Addr(e.StartOff), RAUndefined: r.RAUndefined, RASigned: r.RASigned}
			if f.PCType() != sframe.PCMask {
				row.Start += Addr(f.Start)
			}
			if !r.RAUndefined {
				row.CFA, row.RA, row.FP = jsonRule(s, r.CFA), jsonRule(s, r.RA), jsonRule(s, r.FP)
			}
			jf.Rows = append(jf.Rows, row)
		}
		if err := it.Err(); err != nil {
			return out, err
		}
		out.Functions = append(out.Functions, jf)
	}
	return out, nil
}

func jsonRule(s *sframe.Section, r sframe.Rule) *JSONRule {
	j := &JSONRule{Kind: r.Kind.String(), Offset: r.Offset, Fixed: r.Fixed, Padding: r.Padding}
	switch {
	case r.Kind == sframe.RuleUnspecified || r.Kind == sframe.RuleNotSaved:
		j.Offset = 0
	case r.Base == sframe.RegCFA:
		j.Base = "cfa"
	case r.Base == s.Header().ABI.Arch().SP():
		j.Base = "sp"
	case r.Base == s.Header().ABI.Arch().FP():
		j.Base = "fp"
	default:
		j.Base = fmt.Sprintf("r%d", r.Base)
	}
	return j
}

// WriteSFrameJSON writes the JSON form of in as one line-terminated object.
func WriteSFrameJSON(w io.Writer, in *Input) error {
	j, err := SFrameJSON(in)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // names as they are: <stdin>, C++ templates
	return enc.Encode(j)
}
